"""The tool loop: concurrent calls, error results, return_direct, bounds, cancellation, spans."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any, ClassVar

import anyio
import pytest
from opentelemetry.trace import SpanKind, StatusCode

import jevrefine as jr
from jevrefine import (
    HIGHEST_PRECEDENCE,
    AssistantMessage,
    ChatClient,
    Prompt,
    ToolCall,
    ToolCallingAdvisor,
    ToolResponse,
    ToolResponseMessage,
    ToolRoundsExceededError,
    context_keys,
)
from jevrefine.testing import FunctionModel
from jevrefine.tools import record_tool_calls, tool

Turn = list[ToolCall] | str


def scripted(*turns: Turn) -> FunctionModel:
    """A model that plays `turns` in order: a list of tool calls, or a final text."""
    remaining: Iterator[Turn] = iter(turns)

    def answer(prompt: Prompt) -> AssistantMessage:
        turn = next(remaining)
        if isinstance(turn, str):
            return AssistantMessage(turn)
        return AssistantMessage("", tuple(turn))

    return FunctionModel(answer)


def call(name: str, arguments: Any = None, id: str = "") -> ToolCall:
    text = arguments if isinstance(arguments, str) else json.dumps(arguments or {})
    return ToolCall(id, name, text)


def tool_messages(prompt: Prompt) -> list[ToolResponseMessage]:
    return [m for m in prompt.messages if isinstance(m, ToolResponseMessage)]


@tool
async def weather(location: str) -> str:
    """Get the weather for a location."""
    await anyio.sleep(0.01)
    return f"{location}: sunny"


@tool
async def boom() -> str:
    """Always fails."""
    raise ValueError("the sensor is broken")


async def test_parallel_calls_with_distinct_ids_keep_call_order() -> None:
    delays = {"a": 0.06, "b": 0.0, "c": 0.03}  # finish out of order: b, c, a

    @tool
    async def slow_echo(key: str) -> str:
        """Echo after a delay."""
        await anyio.sleep(delays[key])
        return key.upper()

    model = scripted(
        [call("slow_echo", {"key": k}, id=f"call_{k}") for k in "abc"],
        "done",
    )
    response = await ChatClient(model, tools=[slow_echo]).prompt("go").call()
    assert response.content == "done"
    second = model.prompts[1]
    assert second.messages[-2] == AssistantMessage(
        "", tuple(call("slow_echo", {"key": k}, id=f"call_{k}") for k in "abc")
    )
    assert second.messages[-1] == ToolResponseMessage(
        tuple(ToolResponse(f"call_{k}", "slow_echo", k.upper()) for k in "abc")
    )
    # The model was told about the tool on every round.
    assert all(p.options.tools and p.options.tools[0].name == "slow_echo" for p in model.prompts)


async def test_ids_reused_across_turns_stay_apart() -> None:
    model = scripted(
        [call("weather", {"location": "Paris"}, id="call_1")],
        [call("weather", {"location": "Rome"}, id="call_1")],
        "both sunny",
    )
    assert await ChatClient(model, tools=[weather]).prompt("?").content() == "both sunny"
    assert tool_messages(model.prompts[2]) == [
        ToolResponseMessage((ToolResponse("call_1", "weather", "Paris: sunny"),)),
        ToolResponseMessage((ToolResponse("call_1", "weather", "Rome: sunny"),)),
    ]


async def test_blank_ids_are_answered_in_call_order() -> None:
    model = scripted(
        [call("weather", {"location": "Oslo"}), call("weather", {"location": "Lima"})],
        "ok",
    )
    await ChatClient(model, tools=[weather]).prompt("?").call()
    assert model.prompts[1].messages[-1] == ToolResponseMessage(
        (ToolResponse("", "weather", "Oslo: sunny"), ToolResponse("", "weather", "Lima: sunny"))
    )


async def test_a_raising_tool_is_an_error_result_and_does_not_cancel_siblings() -> None:
    finished: list[str] = []

    @tool
    async def slow_ok() -> str:
        """Succeeds after the sibling has failed."""
        await anyio.sleep(0.05)
        finished.append("slow_ok")
        return "fine"

    model = scripted([call("boom", id="1"), call("slow_ok", id="2")], "recovered")
    response = await ChatClient(model, tools=[boom, slow_ok]).prompt("?").call()
    assert response.content == "recovered"
    assert finished == ["slow_ok"]
    responses = model.prompts[1].messages[-1].responses  # type: ignore[union-attr]
    assert responses[0].data == "Error: tool 'boom' failed: ValueError: the sensor is broken"
    assert responses[1] == ToolResponse("2", "slow_ok", "fine")


async def test_a_timing_out_tool_is_an_error_result() -> None:
    @tool
    async def hang() -> str:
        """Never answers."""
        await anyio.sleep(30)
        return "never"

    model = scripted([call("hang", id="h"), call("weather", {"location": "Nice"}, id="w")], "ok")
    client = ChatClient(
        model, tools=[hang, weather], advisors=[ToolCallingAdvisor(tool_timeout=0.1)]
    )
    started = time.perf_counter()
    assert await client.prompt("?").content() == "ok"
    assert time.perf_counter() - started < 2
    responses = model.prompts[1].messages[-1].responses  # type: ignore[union-attr]
    assert responses[0].data == "Error: tool 'hang' timed out after 0.1 s"
    assert responses[1].data == "Nice: sunny"


async def test_a_sync_tool_times_out_and_its_thread_is_abandoned() -> None:
    release = threading.Event()

    @tool
    def stuck() -> str:
        """Blocks its thread."""
        release.wait(5)
        return "late"

    model = scripted([call("stuck")], "ok")
    client = ChatClient(model, tools=[stuck], advisors=[ToolCallingAdvisor(tool_timeout=0.1)])
    try:
        started = time.perf_counter()
        assert await client.prompt("?").content() == "ok"
        assert time.perf_counter() - started < 2
        assert "timed out" in model.prompts[1].messages[-1].responses[0].data  # type: ignore[union-attr]
    finally:
        release.set()


async def test_invalid_arguments_are_reported_to_the_model() -> None:
    model = scripted(
        [
            call("weather", "{not json", id="1"),
            call("weather", {"location": 3}, id="2"),
            call("weather", {"city": "Paris"}, id="3"),
        ],
        "ok",
    )
    await ChatClient(model, tools=[weather]).prompt("?").call()
    data = [r.data for r in model.prompts[1].messages[-1].responses]  # type: ignore[union-attr]
    assert data[0].startswith("Error: the arguments for tool 'weather' are not valid JSON")
    assert "location: Input should be a valid string" in data[1]
    assert "location: Field required" in data[2]
    assert "city: Extra inputs are not permitted" in data[2]


async def test_an_unknown_tool_is_an_error_result() -> None:
    model = scripted([call("forecast", {"day": 1}, id="x")], "ok")
    await ChatClient(model, tools=[weather, boom]).prompt("?").call()
    assert model.prompts[1].messages[-1] == ToolResponseMessage(
        (
            ToolResponse(
                "x",
                "forecast",
                "Error: there is no tool named 'forecast'; the available tools are: boom, weather",
            ),
        )
    )


async def test_return_direct_ends_the_loop_with_the_tool_result() -> None:
    @tool(return_direct=True)
    async def ticket(title: str) -> str:
        """Open a ticket."""
        return f"ticket opened: {title}"

    model = scripted([call("ticket", {"title": "printer"}, id="t1")], "never asked")
    response = await ChatClient(model, tools=[ticket]).prompt("?").call()
    assert response.content == "ticket opened: printer"
    assert response.context[context_keys.TOOL_RETURN_DIRECT] is True
    assert len(model.prompts) == 1
    assert response.chat_response.result.metadata["tool_call_id"] == "t1"


async def test_return_direct_needs_every_call_of_the_turn_to_be_direct() -> None:
    @tool(return_direct=True)
    async def ticket(title: str) -> str:
        """Open a ticket."""
        return f"ticket opened: {title}"

    model = scripted(
        [call("ticket", {"title": "a"}), call("weather", {"location": "Bern"})], "answered"
    )
    response = await ChatClient(model, tools=[ticket, weather]).prompt("?").call()
    assert response.content == "answered"
    assert context_keys.TOOL_RETURN_DIRECT not in response.context


async def test_max_rounds_exceeded_raises_with_the_conversation() -> None:
    model = FunctionModel(
        lambda prompt: AssistantMessage("", (call("weather", {"location": "Loop"}, id="l"),))
    )
    client = ChatClient(model, tools=[weather], advisors=[ToolCallingAdvisor(max_rounds=2)])
    with pytest.raises(ToolRoundsExceededError, match="after 2 tool round") as info:
        await client.prompt("?").call()
    assert len(model.prompts) == 3  # the user's question, then two tool rounds
    error = info.value
    assert error.max_rounds == 2
    assert [m.role for m in error.messages] == [
        "user",
        "assistant",
        "tool",
        "assistant",
        "tool",
        "assistant",
    ]
    assert error.messages[-1].tool_calls  # type: ignore[union-attr]
    assert error.response.result.output.tool_calls


async def test_the_default_loop_allows_ten_rounds() -> None:
    model = FunctionModel(
        lambda prompt: AssistantMessage("", (call("weather", {"location": "x"}),))
    )
    with pytest.raises(ToolRoundsExceededError):
        await ChatClient(model, tools=[weather]).prompt("?").call()
    assert len(model.prompts) == 11


async def test_cancelling_the_caller_cancels_running_tools() -> None:
    running: set[int] = set()
    started: list[int] = []

    @tool
    async def forever(n: int) -> str:
        """Runs until cancelled."""
        running.add(n)
        started.append(n)
        try:
            await anyio.sleep(60)
        finally:
            running.discard(n)
        return "never"

    model = scripted([call("forever", {"n": n}, id=str(n)) for n in range(5)], "never")
    client = ChatClient(model, tools=[forever])
    tasks_before = asyncio.all_tasks()
    with anyio.move_on_after(0.2) as scope:
        await client.prompt("?").call()
    assert scope.cancelled_caught
    assert sorted(started) == [0, 1, 2, 3, 4]
    assert running == set()  # every tool saw its cancellation and finished
    assert asyncio.all_tasks() - tasks_before == set()  # no task outlived the call
    assert len(model.prompts) == 1


async def test_a_sync_tool_runs_in_a_worker_thread() -> None:
    threads: list[int] = []

    @tool
    def blocking(seconds: float) -> str:
        """Blocks."""
        threads.append(threading.get_ident())
        time.sleep(seconds)
        return "slept"

    model = scripted([call("blocking", {"seconds": 0.1}, id=str(i)) for i in range(4)], "ok")
    started = time.perf_counter()
    await ChatClient(model, tools=[blocking]).prompt("?").call()
    assert time.perf_counter() - started < 0.35  # four 0.1 s sleeps ran side by side
    assert len(threads) == 4
    assert threading.get_ident() not in threads


async def test_calls_of_one_turn_run_concurrently() -> None:
    @tool
    async def nap(i: int) -> str:
        """Sleeps 0.1 s."""
        await anyio.sleep(0.1)
        return str(i)

    model = scripted([call("nap", {"i": i}, id=str(i)) for i in range(8)], "ok")
    started = time.perf_counter()
    await ChatClient(model, tools=[nap]).prompt("?").call()
    assert time.perf_counter() - started < 0.45  # sequential would take 0.8 s


async def test_max_parallel_tools_bounds_concurrency() -> None:
    active = 0
    peak = 0

    @tool
    async def busy() -> str:
        """Counts how many run at once."""
        nonlocal active, peak
        active += 1
        peak = max(peak, active)
        await anyio.sleep(0.02)
        active -= 1
        return "ok"

    model = scripted([call("busy", id=str(i)) for i in range(7)], "ok")
    advisor = ToolCallingAdvisor(max_parallel_tools=2)
    await ChatClient(model, tools=[busy], advisors=[advisor]).prompt("?").call()
    assert peak == 2


async def test_streaming_resolves_tool_rounds_inside() -> None:
    model = scripted([call("weather", {"location": "Kyiv"}, id="k")], "Kyiv is sunny today.")
    chunks = [c async for c in ChatClient(model, tools=[weather]).prompt("?").stream()]
    assert len(chunks) > 1
    assert "".join(chunks) == "Kyiv is sunny today."
    assert tool_messages(model.prompts[1]) == [
        ToolResponseMessage((ToolResponse("k", "weather", "Kyiv: sunny"),))
    ]


async def test_streaming_return_direct_and_max_rounds() -> None:
    @tool(return_direct=True)
    async def direct() -> str:
        """Direct."""
        return "straight back"

    model = scripted([call("direct")])
    client = ChatClient(model, tools=[direct])
    spec = client.prompt("?")
    responses = [r async for r in spec.stream_responses()]
    assert responses[-1].content == "straight back"
    assert responses[-1].context[context_keys.TOOL_RETURN_DIRECT] is True

    looping = FunctionModel(
        lambda prompt: AssistantMessage("", (call("weather", {"location": "x"}),))
    )
    client = ChatClient(looping, tools=[weather], advisors=[ToolCallingAdvisor(max_rounds=1)])
    with pytest.raises(ToolRoundsExceededError):
        async for _ in client.prompt("?").stream():
            pass
    assert len(looping.prompts) == 2


async def test_usage_is_summed_over_rounds() -> None:
    # FunctionModel counts words: round 1 reads "hello there" (2) and writes nothing; round 2
    # also reads the tool result "Oslo: sunny" (4 in all) and writes "one two three" (3).
    model = scripted([call("weather", {"location": "Oslo"})], "one two three")
    response = await ChatClient(model, tools=[weather]).prompt("hello there").call()
    assert response.chat_response.metadata.usage == jr.Usage(input_tokens=6, output_tokens=3)


async def test_an_explicit_advisor_replaces_the_automatic_one() -> None:
    model = FunctionModel(
        lambda prompt: AssistantMessage("", (call("weather", {"location": "x"}),))
    )
    client = ChatClient(model, tools=[weather])
    with pytest.raises(ToolRoundsExceededError):
        await client.prompt("?").advisors(ToolCallingAdvisor(max_rounds=1)).call()
    assert len(model.prompts) == 2  # one loop, not the automatic one nested around it


async def test_no_loop_without_tools() -> None:
    model = FunctionModel(lambda prompt: AssistantMessage("", (call("weather"),)))
    response = await ChatClient(model).prompt("?").call()
    assert response.chat_response.result.output.tool_calls  # handed back untouched
    assert model.prompts[0].options.tools is None


async def test_a_model_without_tool_support_gets_no_loop() -> None:
    class NoTools(FunctionModel):
        supports_tools: ClassVar[bool] = False

    model = NoTools(lambda prompt: "plain")
    # Its tools are dropped (seed 004): no loop starts and no definitions are sent.
    assert await ChatClient(model, tools=[weather]).prompt("?").content() == "plain"
    assert model.prompts[0].options.tools is None


class RecordingAdvisor:
    """Records every tool call of one request through the per-request seam."""

    name = "recording"
    order = HIGHEST_PRECEDENCE + 250  # outside the tool loop, like self-refine's BEFORE_TOOLS

    def __init__(self) -> None:
        self.records: list[list[Any]] = []

    async def advise_call(self, request: jr.ChatClientRequest, chain: Any) -> jr.ChatClientResponse:
        tools, records = record_tool_calls(request.tools)
        self.records.append(records)
        return await chain.next_call(request.copy(tools=tools))


async def test_an_outer_advisor_records_calls_through_the_request_tools() -> None:
    model = scripted(
        [call("weather", {"location": "Turin"}, id="1"), call("boom", id="2")],
        [call("weather", "{bad", id="3")],
        "ok",
    )
    recorder = RecordingAdvisor()
    await ChatClient(model, tools=[weather, boom], advisors=[recorder]).prompt("?").call()
    (records,) = recorder.records
    assert [(r.name, r.arguments, r.result) for r in records] == [
        ("weather", {"location": "Turin"}, "Turin: sunny"),
        ("boom", {}, "error: the sensor is broken"),
        ("weather", "{bad", records[2].result),
    ]
    assert records[2].result.startswith("error: the arguments for tool 'weather'")


async def test_concurrent_requests_record_separately() -> None:
    def answer(prompt: Prompt) -> AssistantMessage:
        user = prompt.messages[0].text  # type: ignore[union-attr]
        if isinstance(prompt.messages[-1], ToolResponseMessage):
            return AssistantMessage("done")
        return AssistantMessage("", (call("weather", {"location": user}),))

    recorder = RecordingAdvisor()
    client = ChatClient(FunctionModel(answer), tools=[weather], advisors=[recorder])
    async with anyio.create_task_group() as group:
        for city in ("A", "B", "C", "D"):
            group.start_soon(client.prompt(city).call)
    recorded = sorted(r.arguments["location"] for records in recorder.records for r in records)
    assert recorded == ["A", "B", "C", "D"]
    assert all(len(records) == 1 for records in recorder.records)


def spans_named(otel: Any, prefix: str) -> list[Any]:
    return [s for s in otel.spans() if s.name.startswith(prefix)]


async def test_execute_tool_spans(otel: Any) -> None:
    model = scripted([call("weather", {"location": "Riga"}, id="c1"), call("boom", id="c2")], "ok")
    client = ChatClient(
        model,
        tools=[weather, boom],
        tracer_provider=otel.tracer_provider,
        meter_provider=otel.meter_provider,
    )
    await client.prompt("?").call()
    (workflow,) = spans_named(otel, "invoke_workflow")
    ok, failed = sorted(spans_named(otel, "execute_tool"), key=lambda s: s.name, reverse=True)
    assert ok.name == "execute_tool weather"
    assert failed.name == "execute_tool boom"
    for span in (ok, failed):
        assert span.kind is SpanKind.INTERNAL
        assert span.parent.span_id == workflow.context.span_id
        assert span.attributes["gen_ai.operation.name"] == "execute_tool"
        assert "gen_ai.tool.call.arguments" not in span.attributes
        assert "gen_ai.tool.call.result" not in span.attributes
    assert ok.attributes["gen_ai.tool.name"] == "weather"
    assert ok.attributes["gen_ai.tool.call.id"] == "c1"
    assert ok.attributes["gen_ai.tool.description"] == "Get the weather for a location."
    assert "error.type" not in ok.attributes
    assert failed.attributes["error.type"] == "ValueError"
    assert failed.status.status_code is StatusCode.ERROR
    points = otel.metrics()["gen_ai.execute_tool.duration"]
    assert sorted(p.attributes.get("error.type", "") for p in points) == ["", "ValueError"]
    assert all(p.count == 1 for p in points)


async def test_execute_tool_spans_capture_content_on_opt_in_and_nest_in_streams(otel: Any) -> None:
    model = scripted([call("weather", {"location": "Baku"}, id="c1")], "ok")
    client = ChatClient(
        model, tools=[weather], tracer_provider=otel.tracer_provider, capture_content=True
    )
    assert [c async for c in client.prompt("?").stream()]
    (workflow,) = spans_named(otel, "invoke_workflow")
    (span,) = spans_named(otel, "execute_tool")
    assert span.parent.span_id == workflow.context.span_id
    assert json.loads(span.attributes["gen_ai.tool.call.arguments"]) == {"location": "Baku"}
    assert span.attributes["gen_ai.tool.call.result"] == "Baku: sunny"


async def test_tool_spans_parent_the_spans_a_tool_opens(otel: Any) -> None:
    inner = ChatClient(FunctionModel(lambda p: "inner"), tracer_provider=otel.tracer_provider)

    @tool
    async def ask() -> str:
        """Asks another model."""
        return await inner.prompt("nested").content()

    model = scripted([call("ask")], "ok")
    await ChatClient(model, tools=[ask], tracer_provider=otel.tracer_provider).prompt("?").call()
    (tool_span,) = spans_named(otel, "execute_tool")
    nested = [s for s in spans_named(otel, "invoke_workflow") if s.parent is not None]
    assert [s.parent.span_id for s in nested] == [tool_span.context.span_id]


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"max_rounds": 0}, "max_rounds"),
        ({"max_parallel_tools": 0}, "max_parallel_tools"),
        ({"tool_timeout": -1}, "tool_timeout"),
    ],
)
def test_bad_settings_are_rejected(kwargs: dict[str, Any], match: str) -> None:
    with pytest.raises(jr.UserError, match=match):
        ToolCallingAdvisor(**kwargs)


def test_order_and_exports() -> None:
    assert ToolCallingAdvisor().order == HIGHEST_PRECEDENCE + 300
    assert isinstance(ToolCallingAdvisor(), jr.CallAdvisor)
    factory: Callable[..., Any] = jr.ToolCallingAdvisor
    assert factory is ToolCallingAdvisor
