"""LoggingAdvisor: one record per request and response, content redacted unless asked."""

from __future__ import annotations

import logging

import pytest

from jevrefine import ChatClient, SelfRefineAdvisor, UserError, tool
from jevrefine.advisors import LoggingAdvisor
from jevrefine.jev import Noul, NoulAnswer, SystemOneResponse
from jevrefine.judge import Judge, noul
from jevrefine.messages import AssistantMessage, Prompt, ToolCall, ToolResponseMessage
from jevrefine.testing import FunctionModel

SECRET = "my card number is 4111-1111"
LOGGER = "jevrefine.advisors.logging"


class AlwaysNo:
    async def system_one(
        self, state: object, questions: object, **kwargs: object
    ) -> SystemOneResponse:
        return SystemOneResponse("m", {"ok": NoulAnswer(0.0)})


def records(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == LOGGER]


async def test_content_is_redacted_by_default(caplog: pytest.LogCaptureFixture) -> None:
    model = FunctionModel(lambda p: "Your card ends in 1111.", model_name="m1")
    client = ChatClient(model, system="Be brief.", advisors=[LoggingAdvisor()])
    with caplog.at_level(logging.INFO, logger=LOGGER):
        await client.prompt(SECRET).call()
    request, response = records(caplog)
    assert request.startswith("REQUEST")
    assert "system: <9 chars>" in request
    assert f"user: <{len(SECRET)} chars>" in request
    assert response.startswith("RESPONSE model=m1")
    assert "assistant: <23 chars>" in response
    assert "usage=in:" in response
    assert "4111" not in request + response
    assert "1111" not in response


async def test_content_is_logged_when_asked(caplog: pytest.LogCaptureFixture) -> None:
    model = FunctionModel(lambda p: "Hello there.")
    client = ChatClient(model, advisors=[LoggingAdvisor(log_content=True, level=logging.DEBUG)])
    with caplog.at_level(logging.DEBUG, logger=LOGGER):
        await client.prompt("Hi!").call()
    request, response = records(caplog)
    assert "user: 'Hi!'" in request
    assert "assistant: 'Hello there.'" in response
    assert all(r.levelno == logging.DEBUG for r in caplog.records if r.name == LOGGER)


async def test_nothing_is_logged_below_the_level(caplog: pytest.LogCaptureFixture) -> None:
    client = ChatClient(
        FunctionModel(lambda p: "x"), advisors=[LoggingAdvisor(level=logging.DEBUG)]
    )
    with caplog.at_level(logging.INFO, logger=LOGGER):
        await client.prompt("Hi").call()
    assert records(caplog) == []


async def test_inside_self_refine_every_attempt_is_logged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # Below self-refine's DEFAULT_ORDER the logger sits nearer the model: it sees each attempt.
    judge = Judge(AlwaysNo(), [noul("ok", Noul("ok?"), 0.5)])
    inner = LoggingAdvisor(order=SelfRefineAdvisor.DEFAULT_ORDER + 1)
    outer = LoggingAdvisor(order=0, logger=logging.getLogger(LOGGER + ".outer"))
    model = FunctionModel(lambda p: "draft")
    client = ChatClient(
        model, advisors=[SelfRefineAdvisor(judge, max_repeat_attempts=2), inner, outer]
    )
    with caplog.at_level(logging.INFO):
        await client.prompt("Hi").call()
    assert len(records(caplog)) == 6  # three attempts, request + response each
    assert len([r for r in caplog.records if r.name == LOGGER + ".outer"]) == 2


async def test_tool_traffic_is_described_without_arguments_or_results(
    caplog: pytest.LogCaptureFixture,
) -> None:
    @tool
    def lookup(account: str) -> str:
        """Look an account up."""
        return "balance 1234 EUR"

    def answer(prompt: Prompt) -> AssistantMessage:
        if any(isinstance(m, ToolResponseMessage) for m in prompt.messages):
            return AssistantMessage("Done.")
        return AssistantMessage("", (ToolCall("c1", "lookup", '{"account": "ACC-99"}'),))

    client = ChatClient(FunctionModel(answer), tools=[lookup], advisors=[LoggingAdvisor(order=1)])
    with caplog.at_level(logging.INFO, logger=LOGGER):
        await client.prompt("What is my balance?").call()
    logged = " ".join(records(caplog))
    assert "tools=['lookup']" in logged
    assert "ACC-99" not in logged
    assert "1234" not in logged


async def test_streams_are_logged_once_at_the_end(caplog: pytest.LogCaptureFixture) -> None:
    client = ChatClient(FunctionModel(lambda p: "one two three"), advisors=[LoggingAdvisor()])
    with caplog.at_level(logging.INFO, logger=LOGGER):
        text = "".join([c async for c in client.prompt("Hi").stream()])
    assert text == "one two three"
    request, response = records(caplog)
    assert request.startswith("REQUEST")
    assert response.startswith("RESPONSE (stream,")
    assert "<13 chars>" in response


def test_bad_arguments_are_refused() -> None:
    with pytest.raises(UserError, match="order"):
        LoggingAdvisor(order="1")  # type: ignore[arg-type]
    with pytest.raises(UserError, match="level"):
        LoggingAdvisor(level="INFO")  # type: ignore[arg-type]
