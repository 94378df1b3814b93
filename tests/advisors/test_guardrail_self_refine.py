"""GuardrailAdvisor composed with SelfRefineAdvisor, at the default orders and per turn."""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from typing import Any

import pytest

from jevrefine import ChatClient, GuardrailAdvisor, SelfRefineAdvisor, context_keys
from jevrefine.advisors.guardrail import DEFAULT_REFUSAL
from jevrefine.jev import JudgeClient, Noul, RetryPolicy
from jevrefine.judge import Judge
from jevrefine.judge.criteria import noul
from jevrefine.messages import Prompt
from jevrefine.testing import FakeJevServer, FunctionModel

QUESTION = "Summarise the release notes."


class Service:
    """Answers screenings (state {"text"}) and judge calls (state with `assistant_answer`)."""

    def __init__(self) -> None:
        self.screened: list[str] = []
        self.judged: list[str] = []
        self.hazards: dict[str, dict[str, float]] = {}

    def __call__(self, state: Any, questions: Mapping[str, Any]) -> dict[str, Any]:
        if isinstance(state, dict) and set(state) == {"text"}:
            self.screened.append(state["text"])
            answers: dict[str, Any] = {q: 0.01 for q, w in questions.items() if w["type"] == "noul"}
            answers["severity"] = 0.0
            answers.update(self.hazards.get(state["text"], {}))
            return answers
        answer = state["assistant_answer"]
        self.judged.append(answer)
        return {"complete": 0.95 if "v2" in answer else 0.1}


async def _no_sleep(seconds: float) -> None:
    return None


@pytest.fixture
def service() -> Service:
    return Service()


@pytest.fixture
async def jev(service: Service) -> AsyncIterator[JudgeClient]:
    async with (
        FakeJevServer(service) as server,
        JudgeClient(
            "sk-compose-SECRET",
            base_url=server.base_url,
            retry=RetryPolicy(max_retries=0, sleep=_no_sleep),
        ) as client,
    ):
        yield client


def _drafts() -> FunctionModel:
    def answer(prompt: Prompt) -> str:
        return f"draft v{len(model.prompts)}"

    model = FunctionModel(answer)
    return model


def _refine(jev: JudgeClient, **kwargs: Any) -> SelfRefineAdvisor:
    judge = Judge(
        jev,
        [noul("complete", Noul("Does `assistant_answer` cover every note?"), minimum=0.7)],
    )
    return SelfRefineAdvisor(judge, **kwargs)


async def test_default_orders_screen_every_attempt_and_the_input_once(
    jev: JudgeClient, service: Service
) -> None:
    model = _drafts()
    client = ChatClient(model, advisors=[_refine(jev), GuardrailAdvisor(jev)])
    response = await client.prompt(QUESTION).call()
    assert response.content == "draft v2"
    assert service.judged == ["draft v1", "draft v2"]
    # The input once (not again on the retry, whose prompt carries the feedback), every answer.
    assert service.screened == [QUESTION, "draft v1", "draft v2"]
    assert response.context[context_keys.REFINE_REPORT].outcome == "passed"


async def test_a_blocked_input_comes_back_as_the_refusal_unjudged(
    jev: JudgeClient, service: Service
) -> None:
    service.hazards[QUESTION] = {"jailbreak": 0.97}
    model = _drafts()
    client = ChatClient(model, advisors=[_refine(jev), GuardrailAdvisor(jev)])
    response = await client.prompt(QUESTION).call()
    assert response.content == DEFAULT_REFUSAL
    assert response.context[context_keys.GUARDRAIL_OUTCOME] == "BLOCK"
    assert model.prompts == []
    assert service.judged == []
    assert response.context[context_keys.REFINE_REPORT].outcome == "skipped"


async def test_a_blocked_answer_is_returned_as_the_refusal_without_retrying(
    jev: JudgeClient, service: Service
) -> None:
    service.hazards["draft v1"] = {"illegal": 0.9}
    model = _drafts()
    client = ChatClient(model, advisors=[_refine(jev), GuardrailAdvisor(jev)])
    response = await client.prompt(QUESTION).call()
    assert response.content == DEFAULT_REFUSAL
    assert len(model.prompts) == 1
    assert service.judged == []


async def test_per_turn_order_screens_once_around_the_refinement(
    jev: JudgeClient, service: Service
) -> None:
    model = _drafts()
    guard = GuardrailAdvisor(jev, order=GuardrailAdvisor.PER_TURN_ORDER)
    client = ChatClient(model, advisors=[guard, _refine(jev)])
    assert await client.prompt(QUESTION).content() == "draft v2"
    assert service.judged == ["draft v1", "draft v2"]
    assert service.screened == [QUESTION, "draft v2"]


async def test_before_tools_self_refine_still_screens_the_input_once(
    jev: JudgeClient, service: Service
) -> None:
    model = _drafts()
    refine = _refine(jev, order=SelfRefineAdvisor.BEFORE_TOOLS_ORDER)
    client = ChatClient(model, advisors=[refine, GuardrailAdvisor(jev)])
    assert await client.prompt(QUESTION).content() == "draft v2"
    assert service.screened == [QUESTION, "draft v1", "draft v2"]
