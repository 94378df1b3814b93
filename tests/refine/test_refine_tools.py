"""Self-refine and tools: the seed-003 weather scenario at both orders, unpacking, recording."""

from __future__ import annotations

import json
from typing import Any

import pytest

from jevrefine import (
    AssistantMessage,
    ChatClient,
    Prompt,
    RefineReport,
    SelfRefineAdvisor,
    SystemMessage,
    ToolCall,
    ToolResponse,
    ToolResponseMessage,
    UserMessage,
    context_keys,
    tool,
)
from jevrefine.advisors.self_refine._input import tool_calls_from_prompt
from jevrefine.jev import JudgeClient, Noul
from jevrefine.judge import Judge, noul
from jevrefine.testing import FakeJevServer, FunctionModel

PLAUSIBLE = Noul(
    "Is every value in `assistant_answer` supported by a result in `tool_calls`, and physically "
    "plausible?",
    when_false="States an implausible or unsupported value",
)


def weather_tool(temperatures: list[int]) -> Any:
    """The article's weather tool: returns the temperatures in order (-255 °C is impossible)."""
    calls: list[str] = []

    @tool
    async def weather(location: str) -> str:
        """Get the current weather for a location."""
        calls.append(location)
        temperature = temperatures[min(len(calls), len(temperatures)) - 1]
        return f"The current weather in {location} is sunny with a temperature of {temperature}°C."

    weather.calls = calls  # type: ignore[attr-defined]
    return weather


def weather_model() -> FunctionModel:
    """Calls the tool when it has no result; reports the latest result, unless told it is wrong."""

    def answer(prompt: Prompt) -> AssistantMessage:
        results = [
            r.data
            for m in prompt.messages
            if isinstance(m, ToolResponseMessage)
            for r in m.responses
        ]
        if not results:
            return AssistantMessage("", (ToolCall("call_1", "weather", '{"location": "Paris"}'),))
        last_user = prompt.last_user_message()
        assert last_user is not None
        if "-255" in results[-1] and "implausible" in last_user.text:
            return AssistantMessage("The weather service gave an impossible reading for Paris.")
        temperature = results[-1].rsplit(" ", 1)[-1].rstrip(".")
        return AssistantMessage(f"It is sunny in Paris, {temperature}.")

    return FunctionModel(answer)


def plausibility(state: Any, questions: dict[str, Any]) -> dict[str, float]:
    return {"is_plausible": 0.02 if "-255" in state["assistant_answer"] else 0.97}


async def test_weather_at_default_order_judges_the_prompt_calls_and_does_not_rerun_the_tool(
    jev_server: FakeJevServer, jev: JudgeClient
) -> None:
    jev_server.answer = plausibility
    weather = weather_tool([-255, 15])
    advisor = SelfRefineAdvisor(Judge(jev, [noul("is_plausible", PLAUSIBLE, minimum=0.7)]))
    client = ChatClient(weather_model(), tools=[weather], advisors=[advisor])
    response = await client.prompt("What is the current weather in Paris?").call()

    assert weather.calls == ["Paris"]  # inside the tool loop: a retry re-asks the model only
    assert response.content == "The weather service gave an impossible reading for Paris."
    report: RefineReport = response.context[context_keys.REFINE_REPORT]
    assert report.outcome == "passed"
    assert len(report.attempts) == 2
    first, second = (r.json["state"] for r in jev_server.requests)
    expected_call = {
        "name": "weather",
        "arguments": {"location": "Paris"},
        "result": "The current weather in Paris is sunny with a temperature of -255°C.",
    }
    assert first["tool_calls"] == [expected_call]
    assert second["tool_calls"] == [expected_call]
    assert first["assistant_answer"] == "It is sunny in Paris, -255°C."
    assert first["user_question"] == "user: What is the current weather in Paris?"


async def test_weather_before_tools_reruns_the_tool_and_the_judge_sees_the_recorded_call(
    jev_server: FakeJevServer, jev: JudgeClient
) -> None:
    jev_server.answer = plausibility
    weather = weather_tool([-255, 15])
    advisor = SelfRefineAdvisor(
        Judge(jev, [noul("is_plausible", PLAUSIBLE, minimum=0.7)]),
        order=SelfRefineAdvisor.BEFORE_TOOLS_ORDER,
    )
    client = ChatClient(weather_model(), tools=[weather], advisors=[advisor])
    response = await client.prompt("What is the current weather in Paris?").call()

    assert weather.calls == ["Paris", "Paris"]  # outside the tool loop: the retry re-runs it
    assert response.content == "It is sunny in Paris, 15°C."
    report: RefineReport = response.context[context_keys.REFINE_REPORT]
    assert report.outcome == "passed"
    assert [a.answer for a in report.attempts] == [
        "It is sunny in Paris, -255°C.",
        "It is sunny in Paris, 15°C.",
    ]
    first, second = (r.json["state"] for r in jev_server.requests)
    assert first["tool_calls"][0]["result"].endswith("-255°C.")
    assert second["tool_calls"] == [
        {
            "name": "weather",
            "arguments": {"location": "Paris"},
            "result": "The current weather in Paris is sunny with a temperature of 15°C.",
        }
    ]
    # Each attempt's model usage includes its tool rounds (two model calls per attempt).
    assert all(a.usage.input_tokens > 0 for a in report.attempts)


async def test_a_recorded_call_that_raised_is_noted_as_an_error(
    jev_server: FakeJevServer, jev: JudgeClient
) -> None:
    jev_server.answer = lambda state, questions: {"ok": 0.9}

    @tool
    async def flaky(city: str) -> str:
        """Always fails."""
        raise RuntimeError("station offline")

    def answer(prompt: Prompt) -> AssistantMessage:
        if any(isinstance(m, ToolResponseMessage) for m in prompt.messages):
            return AssistantMessage("No data.")
        return AssistantMessage("", (ToolCall("c1", "flaky", '{"city": "Oslo"}'),))

    advisor = SelfRefineAdvisor(
        Judge(jev, [noul("ok", PLAUSIBLE)]), order=SelfRefineAdvisor.BEFORE_TOOLS_ORDER
    )
    await (
        ChatClient(FunctionModel(answer), tools=[flaky], advisors=[advisor]).prompt("Oslo?").call()
    )
    (call,) = jev_server.requests[0].json["state"]["tool_calls"]
    assert call == {
        "name": "flaky",
        "arguments": {"city": "Oslo"},
        "result": "error: station offline",
    }


async def test_tool_call_responses_are_not_judged_only_the_final_answer_is(
    jev_server: FakeJevServer, jev: JudgeClient
) -> None:
    jev_server.answer = lambda state, questions: {"ok": 0.9}
    weather = weather_tool([15])
    advisor = SelfRefineAdvisor(Judge(jev, [noul("ok", PLAUSIBLE)]))
    model = weather_model()
    response = await ChatClient(model, tools=[weather], advisors=[advisor]).prompt("Paris?").call()
    assert len(model.prompts) == 2  # the tool-call round and the answer
    assert len(jev_server.requests) == 1
    assert jev_server.requests[0].json["state"]["assistant_answer"] == response.content
    assert response.context[context_keys.REFINE_REPORT].outcome == "passed"


async def test_return_direct_results_are_not_judged_and_not_rerun(
    jev_server: FakeJevServer, jev: JudgeClient
) -> None:
    runs: list[str] = []

    @tool(return_direct=True)
    async def lookup(key: str) -> str:
        """Look a key up; the result goes straight back."""
        runs.append(key)
        return f"value of {key}"

    model = FunctionModel(
        lambda prompt: AssistantMessage("", (ToolCall("c1", "lookup", '{"key": "k"}'),))
    )
    advisor = SelfRefineAdvisor(
        Judge(jev, [noul("ok", PLAUSIBLE)]), order=SelfRefineAdvisor.BEFORE_TOOLS_ORDER
    )
    response = await ChatClient(model, tools=[lookup], advisors=[advisor]).prompt("k?").call()
    assert response.content == "value of k"
    assert runs == ["k"]
    assert jev_server.requests == []
    report: RefineReport = response.context[context_keys.REFINE_REPORT]
    assert report.outcome == "skipped"
    assert report.attempts[0].verdict is None


# -- unpacking tool results from the prompt -----------------------------------------------------


def _call(call_id: str, name: str, **arguments: Any) -> ToolCall:
    return ToolCall(call_id, name, json.dumps(arguments))


def test_parallel_calls_get_their_own_results_by_id() -> None:
    messages = [
        UserMessage("Paris and Rome?"),
        AssistantMessage(
            "", (_call("a", "weather", city="Paris"), _call("b", "weather", city="Rome"))
        ),
        # The results come back in another order: ids decide.
        ToolResponseMessage(
            (ToolResponse("b", "weather", "Rome 20"), ToolResponse("a", "weather", "Paris 15"))
        ),
    ]
    assert tool_calls_from_prompt(messages) == [
        {"name": "weather", "arguments": {"city": "Paris"}, "result": "Paris 15"},
        {"name": "weather", "arguments": {"city": "Rome"}, "result": "Rome 20"},
    ]


def test_ids_reused_across_turns_stay_apart_and_earlier_turns_are_included() -> None:
    messages = [
        SystemMessage("s"),
        AssistantMessage("", (_call("call_0", "weather", city="Paris"),)),
        ToolResponseMessage((ToolResponse("call_0", "weather", "Paris 15"),)),
        AssistantMessage("Paris is 15."),
        UserMessage("And Rome?"),
        AssistantMessage("", (_call("call_0", "weather", city="Rome"),)),
        ToolResponseMessage((ToolResponse("call_0", "weather", "Rome 20"),)),
    ]
    assert [c["result"] for c in tool_calls_from_prompt(messages)] == ["Paris 15", "Rome 20"]


def test_blank_ids_match_the_earliest_open_call_of_the_same_name() -> None:
    messages = [
        AssistantMessage(
            "",
            (
                _call("", "weather", city="Paris"),
                _call("", "time", city="Paris"),
                _call("", "weather", city="Rome"),
            ),
        ),
        ToolResponseMessage(
            (
                ToolResponse("", "time", "12:00"),
                ToolResponse("", "weather", "Paris 15"),
                ToolResponse("", "weather", "Rome 20"),
            )
        ),
    ]
    assert tool_calls_from_prompt(messages) == [
        {"name": "weather", "arguments": {"city": "Paris"}, "result": "Paris 15"},
        {"name": "time", "arguments": {"city": "Paris"}, "result": "12:00"},
        {"name": "weather", "arguments": {"city": "Rome"}, "result": "Rome 20"},
    ]


def test_unanswered_calls_and_orphan_results_are_kept() -> None:
    messages = [
        AssistantMessage("", (_call("a", "weather", city="Paris"),)),
        ToolResponseMessage((ToolResponse("zz", "other", "orphan"),)),
    ]
    assert tool_calls_from_prompt(messages) == [
        {"name": "weather", "arguments": {"city": "Paris"}, "result": None},
        {"name": "other", "arguments": None, "result": "orphan"},
    ]


@pytest.mark.parametrize("order", [SelfRefineAdvisor.DEFAULT_ORDER, 0])
async def test_reading_from_the_prompt_whenever_the_tool_loop_is_outside(
    jev_server: FakeJevServer, jev: JudgeClient, order: int
) -> None:
    jev_server.answer = lambda state, questions: {"ok": 0.9}
    weather = weather_tool([15])
    advisor = SelfRefineAdvisor(Judge(jev, [noul("ok", PLAUSIBLE)]), order=order)
    await ChatClient(weather_model(), tools=[weather], advisors=[advisor]).prompt("Paris?").call()
    (call,) = jev_server.requests[0].json["state"]["tool_calls"]
    assert call["result"].endswith("15°C.")
