"""JevChatModel (seed 004): typed classifications through ChatClient, refusals, schema checks."""

from __future__ import annotations

import dataclasses
import enum
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any, Literal

import pytest
from opentelemetry.trace import SpanKind
from pydantic import BaseModel
from typing_extensions import TypedDict

import jevrefine as jr
from jevrefine import ChatClient, ChatOptions, SystemMessage, UserMessage
from jevrefine.jev import (
    Choice,
    JudgeClient,
    JudgeServerError,
    Noul,
    RetryPolicy,
    Score,
    SystemOneResponse,
)
from jevrefine.judge import ModelJudgeClient
from jevrefine.messages import AssistantMessage, Prompt, ToolDefinition
from jevrefine.models import JevChatModel
from jevrefine.models.jev import RESPONSE_METADATA_KEY
from jevrefine.structured import FORMAT_INSTRUCTIONS_MARKER
from jevrefine.testing import FakeJevServer, FunctionModel

TICKET = "Production is down after the 14:00 deploy; every customer gets HTTP 500."
QUESTIONS = {
    "team": Choice(
        "Which team should handle the user's ticket?",
        options={
            "infra": "Deploys, outages, servers and errors in production",
            "billing": "Invoices, payments, refunds and pricing",
            "support": "How-to questions and account help",
        },
    ),
    "urgent": Noul(
        "Does the user's ticket need attention right now?",
        when_true="Customers are affected now",
        when_false="It can wait for normal working hours",
    ),
    "severity": Score(
        "How severe is the impact described in the ticket?",
        levels=["Cosmetic", "Degraded for some users", "Full outage"],
    ),
}
ANSWERS = {"team": "infra", "urgent": 0.97, "severity": 1.8}


class Triage(BaseModel):
    team: str
    urgent: float
    severity: float


class _NoWait:
    async def __call__(self, seconds: float) -> None:
        return None


@pytest.fixture
async def server() -> AsyncIterator[FakeJevServer]:
    async with FakeJevServer(lambda state, questions: ANSWERS) as fake:
        yield fake


@pytest.fixture
async def jev(server: FakeJevServer, otel: Any) -> AsyncIterator[JudgeClient]:
    async with JudgeClient(
        "sk-test-SECRET-jev-model",
        base_url=server.base_url,
        retry=RetryPolicy(sleep=_NoWait(), jitter=0.0),
        tracer_provider=otel.tracer_provider,
        meter_provider=otel.meter_provider,
    ) as client:
        yield client


def _client(model: JevChatModel, otel: Any, **kwargs: Any) -> ChatClient:
    return ChatClient(
        model, tracer_provider=otel.tracer_provider, meter_provider=otel.meter_provider, **kwargs
    )


# -- seed 004's triage example, both paths ---------------------------------------------------


@pytest.mark.parametrize("native", [True, False, None])
async def test_the_triage_example_returns_the_typed_classification(
    server: FakeJevServer, jev: JudgeClient, otel: Any, native: bool | None
) -> None:
    triage = JevChatModel(jev, questions=QUESTIONS)
    t = await _client(triage, otel).prompt(TICKET).entity(Triage, native=native)
    assert t == Triage(team="infra", urgent=0.97, severity=1.8)
    (sent,) = server.requests
    assert sent.json["state"] == {"messages": [{"role": "user", "content": TICKET}]}
    assert list(sent.json["questions"]) == ["team", "urgent", "severity"]
    assert sent.json["questions"]["team"]["type"] == "choice"
    assert sent.json["model"] == "jev-latest"


async def test_the_reply_is_the_answers_as_json_in_declaration_order(
    jev: JudgeClient, otel: Any
) -> None:
    text = await _client(JevChatModel(jev, questions=QUESTIONS), otel).prompt(TICKET).content()
    assert text == '{"team": "infra", "urgent": 0.97, "severity": 1.8}'
    assert list(json.loads(text)) == ["team", "urgent", "severity"]


async def test_the_metadata_carries_the_jev_response_model_usage_and_request_id(
    jev: JudgeClient, otel: Any
) -> None:
    response = await _client(JevChatModel(jev, questions=QUESTIONS), otel).prompt(TICKET).call()
    chat = response.chat_response
    jev_response = chat.result.metadata[RESPONSE_METADATA_KEY]
    assert jev_response is chat.result.metadata[JevChatModel.RESPONSE_METADATA_KEY]
    assert isinstance(jev_response, SystemOneResponse)
    assert jev_response.choice("team").probability_of("infra") == pytest.approx(0.8)
    assert chat.metadata.model == "jev-1.13.0"
    assert chat.metadata.id == jev_response.request_id
    assert chat.metadata.id
    assert chat.metadata.id.startswith("req_fake_")
    assert chat.metadata.usage == jev_response.usage
    assert chat.metadata.usage.input_tokens > 0
    assert chat.result.finish_reason == "stop"


async def test_system_messages_are_joined_and_turns_kept_in_order(
    server: FakeJevServer, jev: JudgeClient, otel: Any
) -> None:
    spec = (
        _client(JevChatModel(jev, questions=QUESTIONS), otel)
        .prompt()
        .messages(
            SystemMessage("Tickets come from enterprise customers."),
            SystemMessage("Be strict."),
            UserMessage("Hello"),
            AssistantMessage("How can I help?"),
            AssistantMessage("", (jr.ToolCall("c1", "lookup", "{}"),)),
        )
        .user(TICKET)
    )
    await spec.content()
    assert server.requests[0].json["state"] == {
        "system": "Tickets come from enterprise customers.\n\nBe strict.",
        "messages": [
            {"role": "user", "content": "Hello"},
            {"role": "assistant", "content": "How can I help?"},
            {"role": "user", "content": TICKET},
        ],
    }


async def test_the_prompts_model_wins_over_the_clients(
    server: FakeJevServer, jev: JudgeClient, otel: Any
) -> None:
    model = JevChatModel(jev, questions=QUESTIONS, model="jev-preview")
    assert model.model_name == "jev-preview"
    client = _client(model, otel)
    await client.prompt(TICKET).content()
    await client.prompt(TICKET).options(model="jev-1.13.0").content()
    assert [r.json["model"] for r in server.requests] == ["jev-preview", "jev-1.13.0"]
    assert JevChatModel(jev, questions=QUESTIONS).model_name == jev.model


async def test_temperature_top_p_and_max_tokens_are_ignored_but_recorded(
    server: FakeJevServer, jev: JudgeClient, otel: Any
) -> None:
    client = _client(JevChatModel(jev, questions=QUESTIONS), otel)
    await client.prompt(TICKET).options(temperature=0.3, top_p=0.9, max_tokens=5).content()
    assert set(server.requests[0].json) == {"state", "model", "questions"}
    (chat,) = [s for s in otel.spans() if s.name.startswith("chat ")]
    assert chat.attributes["gen_ai.request.temperature"] == 0.3
    assert chat.attributes["gen_ai.request.top_p"] == 0.9
    assert chat.attributes["gen_ai.request.max_tokens"] == 5


# -- native structured output: the schema check ----------------------------------------------


class Team(enum.StrEnum):
    INFRA = "infra"
    BILLING = "billing"
    SUPPORT = "support"


class PartialTeam(enum.StrEnum):
    INFRA = "infra"
    BILLING = "billing"


async def _entity(jev: JudgeClient, otel: Any, target: Any, **model_kwargs: Any) -> Any:
    model = JevChatModel(jev, questions=QUESTIONS, **model_kwargs)
    return await _client(model, otel).prompt(TICKET).entity(target, native=True)


async def test_native_reply_holds_only_the_targets_fields(
    server: FakeJevServer, jev: JudgeClient, otel: Any
) -> None:
    class OnlyTeam(BaseModel):
        model_config = {"extra": "forbid"}
        team: str

    assert await _entity(jev, otel, OnlyTeam) == OnlyTeam(team="infra")
    # Every question is still asked, and answered in the metadata.
    assert list(server.requests[0].json["questions"]) == ["team", "urgent", "severity"]


async def test_a_field_without_a_question_is_refused_before_any_call(
    server: FakeJevServer, jev: JudgeClient, otel: Any
) -> None:
    class Extra(BaseModel):
        team: str
        priority: float

    with pytest.raises(ValueError, match="'priority'") as info:
        await _entity(jev, otel, Extra)
    assert "team, urgent, severity" in str(info.value)
    assert isinstance(info.value, jr.UserError)
    assert server.requests == []


@pytest.mark.parametrize("annotation", [int, bool])
async def test_a_noul_or_score_needs_a_float_field(
    server: FakeJevServer, jev: JudgeClient, otel: Any, annotation: type
) -> None:
    target = dataclasses.make_dataclass("Bad", [("team", str), ("urgent", annotation)])
    with pytest.raises(ValueError, match=r"'urgent'.*float"):
        await _entity(jev, otel, target)
    score_target = dataclasses.make_dataclass("BadScore", [("severity", annotation)])
    with pytest.raises(ValueError, match=r"'severity'.*float"):
        await _entity(jev, otel, score_target)
    assert server.requests == []


async def test_a_choice_needs_a_str_field(
    server: FakeJevServer, jev: JudgeClient, otel: Any
) -> None:
    class Bad(BaseModel):
        team: float

    with pytest.raises(ValueError, match=r"'team'.*label"):
        await _entity(jev, otel, Bad)
    assert server.requests == []


async def test_a_type_that_cannot_hold_the_answer_is_refused(
    server: FakeJevServer, jev: JudgeClient, otel: Any
) -> None:
    class Nested(BaseModel):
        value: float

    class Bad(BaseModel):
        urgent: Nested

    with pytest.raises(ValueError, match="'urgent' is of type object"):
        await _entity(jev, otel, Bad)
    assert server.requests == []


async def test_a_choice_may_land_in_an_enum_holding_every_option(
    jev: JudgeClient, otel: Any
) -> None:
    class WithEnum(BaseModel):
        team: Team
        severity: float

    assert await _entity(jev, otel, WithEnum) == WithEnum(team=Team.INFRA, severity=1.8)

    class WithLiteral(TypedDict):
        team: Literal["infra", "billing", "support"]

    assert await _entity(jev, otel, WithLiteral) == {"team": "infra"}


async def test_an_enum_missing_an_option_is_refused(
    server: FakeJevServer, jev: JudgeClient, otel: Any
) -> None:
    class Bad(BaseModel):
        team: PartialTeam  # a shared enum: a $ref into $defs

    with pytest.raises(ValueError, match=r"'team' cannot hold the choice option.*'support'"):
        await _entity(jev, otel, Bad)
    assert server.requests == []


async def test_optional_fields_are_followed(
    server: FakeJevServer, jev: JudgeClient, otel: Any
) -> None:
    class Optional_(BaseModel):
        team: Team | None = None
        urgent: float | None = None

    assert await _entity(jev, otel, Optional_) == Optional_(team=Team.INFRA, urgent=0.97)

    class BadOptional(BaseModel):
        urgent: int | None = None

    with pytest.raises(ValueError, match="'urgent' is of type integer"):
        await _entity(jev, otel, BadOptional)
    assert len(server.requests) == 1


async def test_a_field_without_a_declared_type_is_accepted(jev: JudgeClient, otel: Any) -> None:
    @dataclass
    class Loose:
        team: Any
        severity: Any

    assert await _entity(jev, otel, Loose) == Loose(team="infra", severity=1.8)


@pytest.mark.parametrize("native", [True, False])
async def test_a_list_target_is_refused_on_both_paths(
    server: FakeJevServer, jev: JudgeClient, otel: Any, native: bool
) -> None:
    model = JevChatModel(jev, questions=QUESTIONS)
    with pytest.raises(ValueError, match="cannot fill a list"):
        await _client(model, otel).prompt(TICKET).entity(list[Triage], native=native)
    assert server.requests == []


async def test_a_non_object_target_is_refused(
    server: FakeJevServer, jev: JudgeClient, otel: Any
) -> None:
    model = JevChatModel(jev, questions=QUESTIONS)
    prompt = Prompt(
        (UserMessage(TICKET),),
        ChatOptions(response_format=jr.ResponseFormat(schema={"type": "string"})),
    )
    with pytest.raises(ValueError, match="JSON object"):
        await model.call(prompt)
    assert server.requests == []


async def test_a_custom_renderer_owns_the_reply_and_skips_the_check(
    server: FakeJevServer, jev: JudgeClient, otel: Any
) -> None:
    class Label(BaseModel):
        label: str

    def render(response: SystemOneResponse) -> str:
        return json.dumps({"label": response.choice("team").choice.upper()})

    assert await _entity(jev, otel, Label, answer_renderer=render) == Label(label="INFRA")
    assert len(server.requests) == 1


# -- prompt-based structured output ------------------------------------------------------------


async def test_prompt_based_strips_the_instructions_from_the_last_user_message_only(
    server: FakeJevServer, jev: JudgeClient, otel: Any
) -> None:
    quoting = f"What does this mean?{FORMAT_INSTRUCTIONS_MARKER}it is our marker"
    model = JevChatModel(jev, questions=QUESTIONS)
    spec = _client(model, otel).prompt().messages(UserMessage(quoting)).user(TICKET)
    assert await spec.entity(Triage, native=False) == Triage(
        team="infra", urgent=0.97, severity=1.8
    )
    messages = server.requests[0].json["state"]["messages"]
    assert messages == [
        {"role": "user", "content": quoting},  # merely quotes the marker: left alone
        {"role": "user", "content": TICKET},
    ]


async def test_an_earlier_message_with_instructions_is_left_alone(
    server: FakeJevServer, jev: JudgeClient, otel: Any
) -> None:
    model = JevChatModel(jev, questions=QUESTIONS)
    earlier = jr.structured.output_spec(Triage).instructions()
    earlier_text = "Earlier question" + earlier
    spec = _client(model, otel).prompt().messages(UserMessage(earlier_text)).user(TICKET)
    await spec.entity(Triage, native=False)
    messages = server.requests[0].json["state"]["messages"]
    assert messages[0]["content"] == earlier_text
    assert messages[1]["content"] == TICKET


async def test_a_custom_state_converter_gets_the_prompt_as_sent(
    server: FakeJevServer, jev: JudgeClient, otel: Any
) -> None:
    seen: list[str] = []

    def convert(prompt: Prompt) -> dict[str, Any]:
        text = prompt.last_user_message().text  # type: ignore[union-attr]
        seen.append(text)
        return {"ticket": JevChatModel.without_format_instructions(text)}

    model = JevChatModel(jev, questions=QUESTIONS, state_converter=convert)
    assert await _client(model, otel).prompt(TICKET).entity(Triage, native=False) == Triage(
        team="infra", urgent=0.97, severity=1.8
    )
    assert FORMAT_INSTRUCTIONS_MARKER in seen[0]
    assert server.requests[0].json["state"] == {"ticket": TICKET}


# -- refusals ------------------------------------------------------------------------------------


async def test_stream_is_refused(server: FakeJevServer, jev: JudgeClient, otel: Any) -> None:
    model = JevChatModel(jev, questions=QUESTIONS)
    with pytest.raises(NotImplementedError, match="does not stream"):
        model.stream(Prompt((UserMessage(TICKET),)))
    with pytest.raises(jr.StreamingNotSupportedError, match="JevChatModel"):
        async for _ in _client(model, otel).prompt(TICKET).stream():
            pass
    assert server.requests == []


async def test_tools_given_to_the_client_are_dropped(
    server: FakeJevServer, jev: JudgeClient, otel: Any
) -> None:
    calls: list[str] = []

    @jr.tool
    def lookup(ticket_id: str) -> str:
        """Look up a ticket."""
        calls.append(ticket_id)
        return "found"

    client = _client(JevChatModel(jev, questions=QUESTIONS), otel, tools=[lookup])
    assert json.loads(await client.prompt(TICKET).tools(lookup).content())["team"] == "infra"
    assert calls == []
    assert len(server.requests) == 1


async def test_tool_definitions_on_the_prompt_are_refused(
    server: FakeJevServer, jev: JudgeClient, otel: Any
) -> None:
    client = _client(JevChatModel(jev, questions=QUESTIONS), otel)
    definition = ToolDefinition("lookup", "Look up a ticket.")
    with pytest.raises(ValueError, match=r"cannot call tools.*lookup"):
        await client.prompt(TICKET).options(tools=(definition,)).content()
    assert server.requests == []


@dataclass(frozen=True, slots=True)
class ImageMessage(UserMessage):
    """A user message that carries an image, as an application might define one."""

    media: tuple[bytes, ...] = ()


async def test_media_in_a_message_is_refused(
    server: FakeJevServer, jev: JudgeClient, otel: Any
) -> None:
    model = JevChatModel(jev, questions=QUESTIONS)
    with pytest.raises(ValueError, match="media"):
        await model.call(Prompt((ImageMessage("What is in this picture?", media=(b"png",)),)))
    # Without media the same message type is plain text.
    await model.call(Prompt((ImageMessage("What is in this picture?"),)))
    assert len(server.requests) == 1


async def test_construction_checks_the_client_and_the_questions(jev: JudgeClient) -> None:
    with pytest.raises(ValueError, match="at least one question"):
        JevChatModel(jev, questions={})
    with pytest.raises(ValueError, match="SystemOneClient"):
        JevChatModel(object(), questions=QUESTIONS)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="'bad'"):
        JevChatModel(jev, questions={"bad": "Is it?"})  # type: ignore[dict-item]
    model = JevChatModel(jev, questions=QUESTIONS)
    assert (model.provider, model.supports_tools, model.supports_native_structured_output) == (
        "typesafe",
        False,
        True,
    )
    assert list(model.questions) == ["team", "urgent", "severity"]


# -- telemetry ---------------------------------------------------------------------------------


async def test_one_chat_span_per_call_with_typesafe_attributes(
    server: FakeJevServer, jev: JudgeClient, otel: Any
) -> None:
    response = await _client(JevChatModel(jev, questions=QUESTIONS), otel).prompt(TICKET).call()
    spans = otel.spans()
    chats = [s for s in spans if s.name.startswith("chat ")]
    assert len(chats) == 1  # no second span from the JudgeClient
    assert not [s for s in spans if s.name.startswith("system_one ")]
    (chat,) = chats
    assert chat.name == "chat jev-latest"
    assert chat.kind is SpanKind.CLIENT
    attrs = dict(chat.attributes)
    assert attrs["gen_ai.provider.name"] == "typesafe"
    assert attrs["gen_ai.operation.name"] == "chat"
    assert attrs["gen_ai.request.model"] == "jev-latest"
    assert attrs["gen_ai.response.model"] == "jev-1.13.0"
    assert attrs["gen_ai.response.id"] == response.chat_response.metadata.id
    assert attrs["gen_ai.response.finish_reasons"] == ("stop",)
    assert attrs["gen_ai.usage.input_tokens"] == response.chat_response.metadata.usage.input_tokens
    assert attrs["server.address"] == "127.0.0.1"
    assert attrs["server.port"] == server.port
    assert "gen_ai.system" not in attrs
    (root,) = [s for s in spans if s.name.startswith("invoke_workflow")]
    assert chat.parent is not None
    assert chat.parent.span_id == root.context.span_id
    points = otel.metrics()["gen_ai.client.token.usage"]
    by_type = {dict(p.attributes)["gen_ai.token.type"]: p for p in points}
    assert set(by_type) == {"input", "output"}
    assert dict(by_type["input"].attributes)["gen_ai.provider.name"] == "typesafe"
    assert by_type["input"].sum == response.chat_response.metadata.usage.input_tokens


async def test_retries_are_recorded_on_the_one_chat_span(
    server: FakeJevServer, jev: JudgeClient, otel: Any
) -> None:
    server.fail(503, times=2)
    await _client(JevChatModel(jev, questions=QUESTIONS), otel).prompt(TICKET).content()
    (chat,) = [s for s in otel.spans() if s.name.startswith("chat ")]
    assert [e.attributes["jevrefine.retry.attempt"] for e in chat.events] == [1, 2]


async def test_a_failed_call_marks_the_one_span(
    server: FakeJevServer, jev: JudgeClient, otel: Any
) -> None:
    server.fail(503, times=3)
    with pytest.raises(JudgeServerError):
        await _client(JevChatModel(jev, questions=QUESTIONS), otel).prompt(TICKET).content()
    (chat,) = [s for s in otel.spans() if s.name.startswith("chat ")]
    assert chat.attributes["error.type"] == "503"
    assert chat.attributes["http.response.status_code"] == 503


async def test_legacy_attributes_on_opt_in(jev: JudgeClient, otel: Any) -> None:
    client = _client(JevChatModel(jev, questions=QUESTIONS), otel, legacy_attributes=True)
    await client.prompt(TICKET).content()
    (chat,) = [s for s in otel.spans() if s.name.startswith("chat ")]
    assert chat.attributes["gen_ai.system"] == "typesafe"
    assert chat.attributes["gen_ai.response.finish_reasons"] == ("STOP",)
    token_types = {
        dict(p.attributes)["gen_ai.token.type"] for p in otel.metrics()["gen_ai.client.token.usage"]
    }
    assert token_types == {"input", "output", "total"}


# -- any SystemOneClient ---------------------------------------------------------------------


async def test_the_same_classifier_runs_on_any_chat_model_via_model_judge_client(
    otel: Any,
) -> None:
    def judge(prompt: Prompt) -> str:
        text = prompt.messages[-1].text  # type: ignore[union-attr]
        schema = prompt.options.response_format.schema  # type: ignore[union-attr]
        allowed = schema["properties"]["answer"]["enum"]
        if "infra" in allowed:
            return json.dumps({"answer": "infra"})
        if "yes" in allowed:
            return json.dumps({"answer": "yes" if "deploy" in text else "no"})
        return json.dumps({"answer": allowed[-1]})

    judge_model = FunctionModel(judge, model_name="judge-llm")
    model = JevChatModel(ModelJudgeClient(judge_model, logprobs=False), questions=QUESTIONS)
    assert model.model_name == "judge-llm"
    t = await _client(model, otel).prompt(TICKET).entity(Triage)
    assert t.team == "infra"
    assert t.urgent == 1.0
    assert t.severity == 2.0
    chats = [s for s in otel.spans() if s.name.startswith("chat ")]
    assert [s.attributes["gen_ai.provider.name"] for s in chats] == ["typesafe"]


async def test_the_response_pickles_for_process_pools_and_ray(jev: JudgeClient, otel: Any) -> None:
    import pickle

    response = await _client(JevChatModel(jev, questions=QUESTIONS), otel).prompt(TICKET).call()
    copy = pickle.loads(pickle.dumps(response.chat_response))
    assert copy == response.chat_response
    restored = copy.result.metadata[RESPONSE_METADATA_KEY]
    assert restored.score("severity").probability_of(1) == pytest.approx(0.2)


async def test_a_dict_target_gets_every_answer(jev: JudgeClient, otel: Any) -> None:
    assert await _entity(jev, otel, dict) == ANSWERS
