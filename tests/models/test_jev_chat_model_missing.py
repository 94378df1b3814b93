"""JevChatModel and a Jev response that leaves a question unanswered: `null` for it (seed 004).

Seed 004's library writes `null` for a field whose answer is missing and keeps the others; the
full response rides in the metadata. Only JevChatModel is lenient: a Judge still rejects it.
"""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest
from pydantic import BaseModel

from jevrefine import ChatClient, SelfRefineAdvisor
from jevrefine.jev import (
    Choice,
    JudgeClient,
    JudgeResponseError,
    Noul,
    NoulAnswer,
    RetryPolicy,
    Score,
    SystemOneResponse,
)
from jevrefine.jev.responses import UnknownAnswerWarning
from jevrefine.judge import Judge, noul, score
from jevrefine.models import JevChatModel
from jevrefine.models.jev import RESPONSE_METADATA_KEY
from jevrefine.testing import FunctionModel
from reliability._hostile_jev import HostileServer, response

QUESTIONS = {
    "team": Choice("Which team?", options={"infra": None, "billing": None}),
    "urgent": Noul("Urgent?"),
    "severity": Score("How severe?", levels=["Cosmetic", "Degraded", "Down"]),
}
TEAM = '"team":{"type":"choice","choice":"infra","probabilities":{"infra":0.9,"billing":0.1}}'
URGENT = '"urgent":{"type":"noul","noul":0.97}'
SEVERITY = (
    '"severity":{"type":"score","score":1.8,"legend":{"0":"Cosmetic","1":"Degraded","2":"Down"},'
    '"probabilities":{"0":0.0,"1":0.2,"2":0.8}}'
)


def body(*answers: str) -> bytes:
    return (
        '{"model":"jev-1.13.0","answers":{' + ",".join(answers) + '},"usage":{"input_tokens":5}}'
    ).encode()


class Triage(BaseModel):
    team: str
    urgent: float
    severity: float | None = None


def jev_client(server: HostileServer) -> JudgeClient:
    return JudgeClient("k", base_url=server.base_url, retry=RetryPolicy(max_retries=0))


async def test_a_missing_answer_is_null_and_the_others_arrive(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async with HostileServer(response(body(TEAM, URGENT))) as server, jev_client(server) as jev:
        triage = JevChatModel(jev, questions=QUESTIONS)
        with caplog.at_level(logging.WARNING, logger="jevrefine.jev"):
            reply = await ChatClient(triage).prompt("Prod is down.").call()
            typed = await ChatClient(triage).prompt("Prod is down.").entity(Triage)

    assert json.loads(reply.content) == {"team": "infra", "urgent": 0.97, "severity": None}
    assert list(json.loads(reply.content)) == ["team", "urgent", "severity"]
    assert typed == Triage(team="infra", urgent=0.97, severity=None)
    jev_response = reply.chat_response.result.metadata[RESPONSE_METADATA_KEY]
    assert isinstance(jev_response, SystemOneResponse)
    assert set(jev_response.answers) == {"team", "urgent"}
    assert "'severity'" in caplog.text
    assert "null" in caplog.text


async def test_an_answer_of_an_unknown_type_is_null_too() -> None:
    unknown = '"severity":{"type":"box","x":1}'
    server = HostileServer(response(body(TEAM, URGENT, unknown)))
    async with server, jev_client(server) as jev:
        triage = JevChatModel(jev, questions=QUESTIONS)
        with pytest.warns(UnknownAnswerWarning):
            text = await ChatClient(triage).prompt("Prod is down.").content()
    assert json.loads(text)["severity"] is None


async def test_the_native_schema_fields_get_null_as_well() -> None:
    async with HostileServer(response(body(URGENT))) as server, jev_client(server) as jev:
        triage = JevChatModel(jev, questions=QUESTIONS)

        class Flags(BaseModel):
            urgent: float
            severity: float | None = None

        flags = await ChatClient(triage).prompt("Prod is down.").entity(Flags, native=True)
    assert flags == Flags(urgent=0.97, severity=None)


@pytest.mark.parametrize(
    ("answers", "field"),
    [
        ((), "answers"),  # nothing answered: still a broken response
        ((TEAM, URGENT, '"extra":{"type":"noul","noul":0.5}'), "answers.extra"),
        ((TEAM, '"urgent":{"type":"noul","noul":7.5}'), "answers.urgent.noul"),
        ((TEAM, '"urgent":' + TEAM.split(":", 1)[1]), "answers.urgent.type"),
    ],
)
async def test_what_is_answered_is_still_checked(answers: tuple[str, ...], field: str) -> None:
    async with HostileServer(response(body(*answers))) as server, jev_client(server) as jev:
        triage = JevChatModel(jev, questions=QUESTIONS)
        with pytest.raises(JudgeResponseError) as caught:
            await ChatClient(triage).prompt("Prod is down.").content()
    assert caught.value.field_path == field


async def test_any_system_one_client_gets_the_same_leniency() -> None:
    class OneMissing:
        async def system_one(self, state: Any, questions: Any, **_: Any) -> SystemOneResponse:
            return SystemOneResponse("m", {"urgent": NoulAnswer(0.4)})

    triage = JevChatModel(OneMissing(), questions=QUESTIONS)  # type: ignore[arg-type]
    text = await ChatClient(triage).prompt("Prod is down.").content()
    assert json.loads(text) == {"team": None, "urgent": 0.4, "severity": None}


async def test_a_judge_still_rejects_a_missing_answer() -> None:
    async with HostileServer(response(body(URGENT))) as server, jev_client(server) as jev:
        judge = Judge(
            jev, [noul("urgent", QUESTIONS["urgent"]), score("severity", QUESTIONS["severity"], 1)]
        )  # type: ignore[arg-type]
        refine = SelfRefineAdvisor(judge)
        client = ChatClient(FunctionModel(lambda prompt: "An answer."), advisors=[refine])
        with pytest.raises(JudgeResponseError) as caught:
            await client.prompt("Question?").call()
    assert caught.value.field_path == "answers.severity"


def test_answers_as_json_writes_null_for_a_missing_field() -> None:
    partial = SystemOneResponse("m", {"urgent": NoulAnswer(0.25)})
    text = JevChatModel.answers_as_json(partial, fields=("team", "urgent"))
    assert text == '{"team": null, "urgent": 0.25}'
    assert JevChatModel.answers_as_json(partial) == '{"urgent": 0.25}'
