"""The attempt budget holds with a tool loop: at most `max_repeat_attempts + 1` judged attempts.

At `DEFAULT_ORDER` the advisor runs inside the tool loop, so a retry whose answer is a tool call
goes back out to the loop, which runs the tool and calls the advisor again. That second call must
continue the same attempt (with the judge's feedback still in the prompt), not start a new
refinement with a fresh budget. A stream (buffered or live) keeps the same budget, feedback
and usage as `call()`.
"""

from __future__ import annotations

from typing import Any

import pytest

from jevrefine import (
    AssistantMessage,
    ChatClient,
    ChatResponse,
    ChatResponseMetadata,
    Generation,
    Prompt,
    RefineReport,
    SelfRefineAdvisor,
    SelfRefineFailedError,
    ToolCall,
    ToolResponse,
    ToolResponseMessage,
    Usage,
    context_keys,
    tool,
)
from jevrefine.jev import JudgeClient, Noul
from jevrefine.judge import Judge, noul
from jevrefine.models.openai import OpenAIChatModel
from jevrefine.streaming import Completed
from jevrefine.testing import FakeJevServer, FakeOpenAIServer, FunctionModel

CORRECT = Noul("Is `assistant_answer` correct?", when_false="Gives no reading")
FEEDBACK = "Gives no reading"
ORDERS = [
    pytest.param(SelfRefineAdvisor.DEFAULT_ORDER, id="default_order"),
    pytest.param(SelfRefineAdvisor.BEFORE_TOOLS_ORDER, id="before_tools_order"),
]

# call(), or a stream in either mode: the streamed loop keeps the same budget, pause and usage.
HOWS = ["call", "buffered", "live"]


def refining(judge: Judge, how: str, **options: Any) -> SelfRefineAdvisor:
    return SelfRefineAdvisor(judge, stream_mode=None if how == "call" else how, **options)


async def ask(client: ChatClient, text: str, how: str) -> Any:
    """The response of `call()`, or the one `stream_events()` completes with."""
    if how == "call":
        return await client.prompt(text).call()
    events = [event async for event in client.prompt(text).stream_events()]
    last = events[-1]
    assert isinstance(last, Completed)
    return last.response


def always_fails(state: Any, questions: dict[str, Any]) -> dict[str, float]:
    return dict.fromkeys(questions, 0.05)


def counting_tool() -> Any:
    runs: list[str] = []

    @tool
    async def reading(city: str) -> str:
        """Read the thermometer in a city."""
        runs.append(city)
        return f"{city}: {len(runs)} degrees"

    reading.runs = runs  # type: ignore[attr-defined]
    return reading


def checks_again_on_every_turn() -> FunctionModel:
    """Calls the tool, then answers; every answer is followed by another tool call, and so on.

    So every retry's first answer is a tool call, at either order.
    """
    turns: list[int] = []

    def answer(prompt: Prompt) -> ChatResponse:
        turns.append(1)
        turn = len(turns)
        if turn % 2 == 1:
            message = AssistantMessage("", (ToolCall(f"c{turn}", "reading", '{"city": "Oslo"}'),))
        else:
            results = [
                r.data
                for m in prompt.messages
                if isinstance(m, ToolResponseMessage)
                for r in m.responses
            ]
            message = AssistantMessage(f"It reads {results[-1]}.")
        # Call n uses (100, n) tokens, so each call's share of a sum can be told apart.
        return ChatResponse((Generation(message),), ChatResponseMetadata(usage=Usage(100, turn)))

    return FunctionModel(answer)


@pytest.mark.parametrize("how", HOWS)
@pytest.mark.parametrize("order", ORDERS)
@pytest.mark.parametrize("retries", [1, 2, 3])
async def test_no_more_than_max_repeat_attempts_plus_one_judged_attempts(
    jev_server: FakeJevServer, jev: JudgeClient, order: int, retries: int, how: str
) -> None:
    jev_server.answer = always_fails
    reading = counting_tool()
    model = checks_again_on_every_turn()
    advisor = refining(
        Judge(jev, [noul("ok", CORRECT)]), how, max_repeat_attempts=retries, order=order
    )
    client = ChatClient(model, tools=[reading], advisors=[advisor])
    response = await ask(client, "How warm is Oslo?", how)

    assert len(jev_server.requests) == retries + 1
    report: RefineReport = response.context[context_keys.REFINE_REPORT]
    assert report.outcome == "best_attempt"
    assert [a.index for a in report.attempts] == list(range(1, retries + 2))
    assert all(a.verdict is not None for a in report.attempts)
    # Every attempt is one tool round and one answer: two model calls each.
    assert len(model.prompts) == 2 * (retries + 1)
    assert len(reading.runs) == retries + 1


@pytest.mark.parametrize("how", HOWS)
@pytest.mark.parametrize("order", ORDERS)
async def test_the_feedback_survives_the_tool_round_of_a_retry(
    jev_server: FakeJevServer, jev: JudgeClient, order: int, how: str
) -> None:
    jev_server.answer = always_fails
    model = checks_again_on_every_turn()
    advisor = refining(Judge(jev, [noul("ok", CORRECT)]), how, max_repeat_attempts=1, order=order)
    await ask(ChatClient(model, tools=[counting_tool()], advisors=[advisor]), "Oslo?", how)

    def told(prompt: Prompt) -> bool:
        last = prompt.last_user_message()
        return last is not None and FEEDBACK in last.text

    # Call 3 is the retry's tool call, call 4 the retry's answer after the tool ran: both are
    # asked with the feedback; the first attempt's two calls are not.
    assert [told(p) for p in model.prompts] == [False, False, True, True]


@pytest.mark.parametrize("how", HOWS)
async def test_the_attempt_usage_includes_its_tool_round_at_the_default_order(
    jev_server: FakeJevServer, jev: JudgeClient, how: str
) -> None:
    jev_server.answer = always_fails
    model = checks_again_on_every_turn()
    advisor = refining(Judge(jev, [noul("ok", CORRECT)]), how, max_repeat_attempts=1)
    response = await ask(
        ChatClient(model, tools=[counting_tool()], advisors=[advisor]), "Oslo?", how
    )
    report: RefineReport = response.context[context_keys.REFINE_REPORT]
    assert [a.usage for a in report.attempts] == [Usage(200, 1 + 2), Usage(200, 3 + 4)]
    assert report.model_usage == Usage(400, 10)
    # The tool loop sums what each round returns: every model call counted once.
    assert response.chat_response.metadata.usage == report.model_usage


async def test_exhausted_attempts_raise_after_the_budget_with_a_tool_loop(
    jev_server: FakeJevServer, jev: JudgeClient
) -> None:
    jev_server.answer = always_fails
    advisor = SelfRefineAdvisor(
        Judge(jev, [noul("ok", CORRECT)]), max_repeat_attempts=1, fail_on_exhausted_attempts=True
    )
    client = ChatClient(checks_again_on_every_turn(), tools=[counting_tool()], advisors=[advisor])
    with pytest.raises(SelfRefineFailedError) as caught:
        await client.prompt("Oslo?").call()
    assert [a.index for a in caught.value.attempts] == [1, 2]
    assert len(jev_server.requests) == 2


@pytest.mark.parametrize("order", ORDERS)
async def test_the_budget_and_the_feedback_over_the_openai_wire(
    jev_server: FakeJevServer, jev: JudgeClient, order: int
) -> None:
    jev_server.answer = always_fails
    reading = counting_tool()
    call = FakeOpenAIServer.ToolCall("reading", {"city": "Oslo"})
    async with FakeOpenAIServer() as server:
        server.script(
            {"tool_calls": [call]}, "It is mild.", {"tool_calls": [call]}, "It is 2 degrees."
        )
        async with OpenAIChatModel("gpt-4o", base_url=server.base_url, api_key="sk-x") as model:
            advisor = SelfRefineAdvisor(
                Judge(jev, [noul("ok", CORRECT)]), max_repeat_attempts=1, order=order
            )
            client = ChatClient(model, tools=[reading], advisors=[advisor])
            response = await client.prompt("How warm is Oslo?").call()
        bodies = server.chat_requests
        assert server.pending == 0

    assert len(bodies) == 4
    assert len(jev_server.requests) == 2
    assert response.content == "It is 2 degrees."  # the later one on a tie
    users = [[m["content"] for m in b["messages"] if m["role"] == "user"] for b in bodies]
    assert [FEEDBACK in u[-1] for u in users] == [False, False, True, True]
    # The retry's answer is asked after its own tool round, with the result in the prompt.
    assert bodies[3]["messages"][-1]["role"] == "tool"
    assert len(reading.runs) == 2


async def test_seed_003_weather_at_order_0_reruns_the_tool_when_the_retry_asks_for_it(
    jev_server: FakeJevServer, jev: JudgeClient
) -> None:
    """The article's run: attempt 1 reports -255 °C and fails; the retry calls the tool again,
    gets 15 °C and passes on attempt 2 ("Evaluation passed on attempt 2")."""
    temperatures = iter([-255, 15])
    runs: list[str] = []

    @tool
    async def weather(location: str) -> str:
        """Get the current weather for a given location."""
        runs.append(location)
        reading = next(temperatures)
        return f"The current weather in {location} is sunny with a temperature of {reading}°C."

    def model_turn(prompt: Prompt) -> AssistantMessage:
        results = [
            r.data
            for m in prompt.messages
            if isinstance(m, ToolResponseMessage)
            for r in m.responses
        ]
        last_user = prompt.last_user_message()
        told = last_user is not None and "impossible" in last_user.text
        # Asked again after a rejected reading, the model checks the weather once more.
        if not results or (told and len(results) < 2):
            call = ToolCall(f"c{len(results)}", "weather", '{"location": "Paris"}')
            return AssistantMessage("", (call,))
        return AssistantMessage(results[-1])

    jev_server.answer = lambda state, questions: {
        "plausible": 0.02 if "-255" in state["assistant_answer"] else 0.97
    }
    plausible = Noul("Is every temperature physically possible?", when_false="impossible")
    advisor = SelfRefineAdvisor(
        Judge(jev, [noul("plausible", plausible, 0.7)]), max_repeat_attempts=15, order=0
    )
    client = ChatClient(FunctionModel(model_turn), tools=[weather], advisors=[advisor])
    response = await client.prompt("What is current weather in Paris?").call()

    assert response.content.endswith("temperature of 15°C.")
    assert runs == ["Paris", "Paris"]
    report: RefineReport = response.context[context_keys.REFINE_REPORT]
    assert report.outcome == "passed"
    assert [a.index for a in report.attempts] == [1, 2]
    assert len(jev_server.requests) == 2


@pytest.mark.parametrize("order", ORDERS)
async def test_one_refinement_is_one_outcome_in_the_metrics(
    jev_server: FakeJevServer, jev: JudgeClient, otel: Any, order: int
) -> None:
    # The tool rounds that hand an attempt back to the loop are not refinements of their own.
    jev_server.answer = always_fails
    advisor = SelfRefineAdvisor(
        Judge(jev, [noul("ok", CORRECT)]), max_repeat_attempts=1, order=order
    )
    client = ChatClient(
        checks_again_on_every_turn(),
        tools=[counting_tool()],
        advisors=[advisor],
        tracer_provider=otel.tracer_provider,
        meter_provider=otel.meter_provider,
    )
    await client.prompt("Oslo?").call()
    points = otel.metrics()["jevrefine.refine.outcome"]
    assert [(dict(p.attributes), p.value) for p in points] == [
        ({"jevrefine.refine.outcome": "best_attempt"}, 1)
    ]
    (attempts,) = otel.metrics()["jevrefine.refine.attempts"]
    assert (attempts.count, attempts.sum) == (1, 2)


def test_a_pause_is_only_taken_up_by_the_tool_loops_next_round() -> None:
    from jevrefine import UserMessage
    from jevrefine.advisors.self_refine._engine import Paused as _Paused

    asked = (UserMessage("Oslo?"),)
    call = AssistantMessage("", (ToolCall("c1", "reading", '{"city": "Oslo"}'),))
    paused = _Paused((2, None, Usage()), asked, call, (), {}, Usage(), Usage())
    result = ToolResponseMessage((ToolResponse("c1", "reading", "Oslo: 3 degrees"),))
    assert paused.continued_by(Prompt((*asked, call, result)))
    # Left behind (a return-direct tool ended the loop, an outer advisor re-ran the chain):
    assert not paused.continued_by(Prompt(asked))
    assert not paused.continued_by(Prompt((UserMessage("Oslo? (feedback)"), call, result)))
    other = AssistantMessage("", (ToolCall("c9", "reading", '{"city": "Bergen"}'),))
    assert not paused.continued_by(Prompt((*asked, other, result)))
