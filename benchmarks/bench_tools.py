"""Tool calls of one model turn: concurrent against sequential, and 1,000 calls bounded at 64.

Scenarios, each a whole `ChatClient` call (a `FunctionModel` asks for the calls, then answers):

- 8 async tools that each sleep 100 ms, run concurrently (the default loop) and one after another
  (`max_parallel_tools=1`); the same with 8 sync tools (worker threads). Ideal: 100 ms
  concurrently, 800 ms sequentially. Target: concurrent ≤ 1.15 × 100 ms.
- 1,000 async tools that each sleep 100 ms with `max_parallel_tools=64`. Ideal:
  ceil(1000 / 64) × 100 ms = 1.6 s.

The model's own time is microseconds, so the wall time of a call is the tool time. Reports the
median over rounds and its ratio to the ideal. Run with `python -m benchmarks.bench_tools
[--quick]` or `python -m benchmarks --only bench_tools`.
"""

from __future__ import annotations

import argparse
import math
import platform
import statistics
import time
from collections.abc import Callable
from typing import Any

import anyio

import jevrefine as jr
from jevrefine.testing import FunctionModel

from ._harness import bar, emit, figure

SLEEP = 0.1


@jr.tool
async def nap() -> str:
    """Sleeps 100 ms (async)."""
    await anyio.sleep(SLEEP)
    return "rested"


@jr.tool
def nap_sync() -> str:
    """Sleeps 100 ms (sync, in a worker thread)."""
    time.sleep(SLEEP)
    return "rested"


def one_turn(tool_name: str, calls: int) -> Callable[[jr.Prompt], jr.AssistantMessage]:
    """A model that asks for `calls` calls in one turn, then answers."""
    tool_calls = tuple(jr.ToolCall(f"call_{i}", tool_name, "{}") for i in range(calls))

    def answer(prompt: jr.Prompt) -> jr.AssistantMessage:
        if isinstance(prompt.messages[-1], jr.ToolResponseMessage):
            return jr.AssistantMessage(f"{len(prompt.messages[-1].responses)} results")
        return jr.AssistantMessage("", tool_calls)

    return answer


async def time_call(tool: Any, calls: int, max_parallel: int) -> float:
    advisor = jr.ToolCallingAdvisor(max_parallel_tools=max_parallel)
    client = jr.ChatClient(
        FunctionModel(one_turn(tool.name, calls)), tools=[tool], advisors=[advisor]
    )
    started = time.perf_counter()
    answer = await client.prompt("go").content()
    elapsed = time.perf_counter() - started
    assert answer == f"{calls} results", answer
    return elapsed


SCENARIOS: list[tuple[str, Any, int, int, float]] = [
    # name, tool, calls, max_parallel_tools, ideal seconds
    ("8 async tools, concurrent", nap, 8, 8, SLEEP),
    ("8 async tools, sequential", nap, 8, 1, 8 * SLEEP),
    ("8 sync tools (threads), concurrent", nap_sync, 8, 8, SLEEP),
    ("1,000 async tools, max_parallel_tools=64", nap, 1000, 64, math.ceil(1000 / 64) * SLEEP),
]


async def measure(rounds: int) -> list[dict[str, Any]]:
    await time_call(nap, 8, 8)  # warm-up: imports, schema caches, the thread pool
    await time_call(nap_sync, 8, 8)
    times: dict[str, list[float]] = {name: [] for name, *_ in SCENARIOS}
    for round_index in range(rounds):
        # Alternate the order so that no scenario always runs right after another.
        order = SCENARIOS if round_index % 2 == 0 else list(reversed(SCENARIOS))
        for name, tool, calls, parallel, _ in order:
            times[name].append(await time_call(tool, calls, parallel))
    rows = []
    for name, _, calls, parallel, ideal in SCENARIOS:
        values = times[name]
        rows.append(
            {
                "name": name,
                "calls": calls,
                "parallel": parallel,
                "ideal": ideal,
                "median": statistics.median(values),
                "min": min(values),
                "max": max(values),
                "samples": values,
            }
        )
    return rows


def report(rows: list[dict[str, Any]], *, rounds: int) -> str:
    lines = [
        "## Tool calls of one turn: concurrent vs sequential (each tool sleeps 100 ms)",
        "",
        f"Python {platform.python_version()}, jevrefine {jr.__version__}; {rounds} rounds per "
        "scenario, interleaved; median wall time of the whole call (min – max).",
        "",
        "| scenario | calls | max_parallel_tools | wall time | ideal | ratio to ideal |",
        "|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['name']} | {r['calls']} | {r['parallel']} | {r['median'] * 1000:,.1f} ms "
            f"({r['min'] * 1000:,.1f} – {r['max'] * 1000:,.1f}) | {r['ideal'] * 1000:,.0f} ms "
            f"| **{r['median'] / r['ideal']:.3f}×** |"
        )
    by_name = {r["name"]: r for r in rows}
    concurrent = by_name["8 async tools, concurrent"]["median"]
    sequential = by_name["8 async tools, sequential"]["median"]
    lines += [
        "",
        f"- 8 tools concurrently: **{concurrent / SLEEP:.3f} × 100 ms** (target ≤ 1.15×); "
        f"sequentially {sequential / SLEEP:.2f} × 100 ms; speed-up {sequential / concurrent:.1f}×.",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer rounds, for a smoke run")
    args = parser.parse_args(argv)
    rounds = 2 if args.quick else 7
    rows = anyio.run(measure, rounds)
    # Plotted as a ratio to each scenario's own ideal, so one axis fits 100 ms and 1.6 s.
    bars = [bar(r["name"], [v / r["ideal"] for v in r["samples"]]) for r in rows]
    emit(
        report(rows, rounds=rounds),
        {"rounds": rounds, "scenarios": rows},
        [
            figure(
                "tools",
                "Tool fan-out: wall time / ideal (ideal = ceil(calls / parallel) × 100 ms)",
                "wall time / ideal",
                bars,
                ideal=1.0,
            )
        ],
    )


if __name__ == "__main__":
    main()
