"""Hostile tool traffic: a history of thousands of calls, and a turn asking for thousands more.

Issue 16 item 7 (quadratic matching stalled the loop 7.3 s; one turn could ask for any number of
calls) and issue 20's blank-id pairing rule (seed 000: blank ids pair by name, among blank ids).
"""

from __future__ import annotations

import json
import time
from typing import Any

import anyio

from jevrefine import (
    AssistantMessage,
    ChatClient,
    Prompt,
    ToolCall,
    ToolCallingAdvisor,
    ToolResponse,
    ToolResponseMessage,
    UserMessage,
)
from jevrefine.advisors.self_refine._input import tool_calls_from_prompt
from jevrefine.advisors.tool_calling import DEFAULT_MAX_TOOL_CALLS
from jevrefine.messages import Message
from jevrefine.testing import FunctionModel
from jevrefine.tools import TooManyToolCallsError, tool


class CountedId(str):
    """A call id that counts how often it is compared: the matcher's unit of work."""

    __slots__ = ()
    comparisons = 0

    def __eq__(self, other: object) -> bool:
        CountedId.comparisons += 1
        return str.__eq__(self, other)

    __hash__ = str.__hash__


def history(rounds: int, calls_per_round: int, *, reverse: bool) -> list[Message]:
    """`rounds` turns of parallel calls, each answered in full (in reverse order if asked)."""
    messages: list[Message] = [UserMessage("look everything up")]
    for turn in range(rounds):
        ids = [f"call_{turn}_{i}" for i in range(calls_per_round)]
        calls = tuple(ToolCall(CountedId(i), "lookup", json.dumps({"n": i})) for i in ids)
        answered = reversed(ids) if reverse else iter(ids)
        # Fresh objects for the result ids: a lookup by identity would hide the comparisons.
        responses = tuple(ToolResponse(CountedId("".join(i)), "lookup", f"r {i}") for i in answered)
        messages += [AssistantMessage("", calls), ToolResponseMessage(responses)]
    return messages


def test_matching_does_constant_work_per_result() -> None:
    # Results in reverse order made the old matcher compare each one against every open call:
    # 5,000 calls cost 12.5 million comparisons. Linear: a few per result, whatever the size.
    for size in (500, 5_000):
        messages = history(1, size, reverse=True)
        CountedId.comparisons = 0
        entries = tool_calls_from_prompt(messages)
        assert CountedId.comparisons <= 2 * size, (size, CountedId.comparisons)
        assert [e["result"] for e in entries] == [f"r call_0_{i}" for i in range(size)]


async def test_thirty_thousand_calls_do_not_stall_the_event_loop() -> None:
    # 6 rounds x 5,000 calls, the attack's shape. The quadratic matcher held the loop for 7.3 s;
    # the bound below is 30x what the linear one takes on a loaded CI machine.
    messages = history(6, 5_000, reverse=False)
    worst_gap = 0.0
    done = anyio.Event()

    async def sentinel() -> None:
        nonlocal worst_gap
        last = time.perf_counter()
        while not done.is_set():
            await anyio.sleep(0.005)
            now = time.perf_counter()
            worst_gap = max(worst_gap, now - last)
            last = now

    async with anyio.create_task_group() as group:
        group.start_soon(sentinel)
        await anyio.sleep(0.02)
        entries = tool_calls_from_prompt(messages)
        await anyio.sleep(0.02)
        done.set()
    assert len(entries) == 30_000
    assert all(e["result"] is not None for e in entries)
    assert worst_gap < 3.0, f"the event loop stalled {worst_gap:.2f} s"


def _call(call_id: str, city: str) -> ToolCall:
    return ToolCall(call_id, "weather", json.dumps({"city": city}))


def test_a_blank_id_result_pairs_with_a_blank_id_call_only() -> None:
    # Issue 20: Lyon's result (blank id) landed on the Paris call (id c1).
    messages: list[Message] = [
        AssistantMessage("", (_call("c1", "Paris"), _call("", "Lyon"))),
        ToolResponseMessage(
            (ToolResponse("", "weather", "Lyon 12"), ToolResponse("c1", "weather", "Paris 15"))
        ),
    ]
    assert tool_calls_from_prompt(messages) == [
        {"name": "weather", "arguments": {"city": "Paris"}, "result": "Paris 15"},
        {"name": "weather", "arguments": {"city": "Lyon"}, "result": "Lyon 12"},
    ]


def test_an_unmatched_blank_id_result_is_kept_after_the_calls() -> None:
    messages: list[Message] = [
        AssistantMessage("", (_call("c1", "Paris"),)),
        ToolResponseMessage((ToolResponse("", "weather", "stray"),)),
        AssistantMessage("", (_call("c2", "Rome"),)),
        ToolResponseMessage((ToolResponse("c2", "weather", "Rome 20"),)),
    ]
    assert tool_calls_from_prompt(messages) == [
        {"name": "weather", "arguments": {"city": "Paris"}, "result": None},
        {"name": "weather", "arguments": None, "result": "stray"},
        {"name": "weather", "arguments": {"city": "Rome"}, "result": "Rome 20"},
    ]


def _many_calls_then_answer(count: int, seen: list[Prompt]) -> FunctionModel:
    def answer(prompt: Prompt) -> AssistantMessage:
        seen.append(prompt)
        if len(seen) == 1:
            calls = tuple(ToolCall(f"c{i}", "ping", json.dumps({"n": i})) for i in range(count))
            return AssistantMessage("", calls)
        return AssistantMessage("done")

    return FunctionModel(answer)


async def test_calls_beyond_the_turn_limit_get_error_results_and_never_run() -> None:
    ran: list[int] = []

    @tool
    async def ping(n: int) -> str:
        """Ping."""
        ran.append(n)
        return f"pong {n}"

    seen: list[Prompt] = []
    client = ChatClient(
        _many_calls_then_answer(10, seen),
        tools=[ping],
        advisors=[ToolCallingAdvisor(max_tool_calls=4)],
    )
    assert await client.prompt("go").content() == "done"
    assert sorted(ran) == [0, 1, 2, 3]
    (results,) = [m for m in seen[1].messages if isinstance(m, ToolResponseMessage)]
    # Every call is answered, in call order: none silently dropped.
    assert [r.id for r in results.responses] == [f"c{i}" for i in range(10)]
    assert [r.data for r in results.responses[:4]] == [f"pong {i}" for i in range(4)]
    for refused in results.responses[4:]:
        assert "was not run" in refused.data
        assert "asked for 10 tool calls" in refused.data
        assert "max_tool_calls" in refused.data


async def test_the_default_limit_bounds_a_turn_of_thousands() -> None:
    ran: list[int] = []

    @tool
    def ping(n: int) -> str:
        """Ping."""
        ran.append(n)
        return "pong"

    seen: list[Prompt] = []
    client = ChatClient(_many_calls_then_answer(3_000, seen), tools=[ping])
    assert await client.prompt("go").content() == "done"
    assert len(ran) == DEFAULT_MAX_TOOL_CALLS == 128
    (results,) = [m for m in seen[1].messages if isinstance(m, ToolResponseMessage)]
    assert len(results.responses) == 3_000


def test_the_error_names_the_limit() -> None:
    error: Any = TooManyToolCallsError("ping", 10, 4)
    assert (error.asked, error.limit, error.tool_name) == (10, 4, "ping")
    assert "at most 4 run per turn" in str(error)
