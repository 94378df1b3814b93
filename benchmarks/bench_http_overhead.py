"""Framework overhead per model call over HTTP: jevrefine vs pydantic-ai vs LangChain.

Every contender makes one chat completion on the same `FakeOpenAIServer` (zero latency, in its
own process, so this process's CPU is the client's alone), one call at a time:

- `direct AsyncOpenAI`: `await client.chat.completions.create(...)`, no framework — the baseline;
- `jevrefine`: `ChatClient(OpenAIChatModel(client=<the same AsyncOpenAI>)).prompt(q).call()`;
- `pydantic-ai`: `Agent(OpenAIChatModel(provider=OpenAIProvider(openai_client=<the same>))).run(q)`;
- `LangChain`: `ChatOpenAI(base_url=..., max_retries=0).ainvoke(q)` (its own AsyncOpenAI).

Overhead = a contender's time per call − the direct call's, paired round by round (the rounds
alternate the contenders, so noise hits all alike). The SDK's own CPU per call (milliseconds of
pydantic validation and httpx) dwarfs a lean framework's, so two steadier measures are added:
the CPU overhead measured call by call, each contender's call paired with a direct call made
back to back with it (see `paired_cpu_overheads`), and Python function calls per call, counted
with cProfile in a separate pass. A control contender, the direct call itself, shows each
method's error. The physical limit is an overhead of zero: the direct call's time is the HTTP
round trip itself. Target: jevrefine's overhead ≤ 1/40 of pydantic-ai's. Contenders whose
package is missing are skipped, with the reason.

    python -m benchmarks.bench_http_overhead [--quick]
"""

from __future__ import annotations

import argparse
import random
import statistics
import time
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
from openai import AsyncOpenAI

import jevrefine as jr
from jevrefine.models.openai import OpenAIChatModel

from ._harness import Measurement, bar, emit, figure, interleaved, python_calls_per_op
from ._servers import serving

MODEL = "fake-model"
QUESTION = "What is the weather in Paris?"
DIRECT = "direct AsyncOpenAI"
CONTROL = "control: direct AsyncOpenAI again"
"""The direct call as a contender of its own: its overhead shows the method's error (~0)."""


def contenders(url: str) -> tuple[dict[str, Callable[[], Awaitable[object]]], dict[str, str]]:
    """The contenders that can run here, and the reasons for those that cannot."""
    client = AsyncOpenAI(api_key="bench", base_url=url, max_retries=0)
    messages: Any = [{"role": "user", "content": QUESTION}]

    async def direct() -> object:
        return await client.chat.completions.create(model=MODEL, messages=messages)

    spec = jr.ChatClient(OpenAIChatModel(MODEL, client=client)).prompt(QUESTION)

    async def ours() -> object:
        return await spec.call()

    async def control() -> object:
        return await direct()

    found: dict[str, Callable[[], Awaitable[object]]] = {
        DIRECT: direct,
        CONTROL: control,
        "jevrefine": ours,
    }
    missing: dict[str, str] = {}
    try:
        from pydantic_ai import Agent
        from pydantic_ai.models.openai import OpenAIChatModel as PaiOpenAIChatModel
        from pydantic_ai.providers.openai import OpenAIProvider

        agent = Agent(PaiOpenAIChatModel(MODEL, provider=OpenAIProvider(openai_client=client)))

        async def pai() -> object:
            return await agent.run(QUESTION)

        found["pydantic-ai Agent.run"] = pai
    except ImportError as error:
        missing["pydantic-ai Agent.run"] = (
            f"not installed ({error.name}); pip install pydantic-ai-slim[openai]"
        )
    try:
        from langchain_openai import ChatOpenAI

        chat = ChatOpenAI(model=MODEL, base_url=url, api_key="bench", max_retries=0)  # type: ignore[arg-type]

        async def langchain() -> object:
            return await chat.ainvoke(QUESTION)

        found["LangChain ChatOpenAI.ainvoke"] = langchain
    except ImportError as error:
        missing["LangChain ChatOpenAI.ainvoke"] = (
            f"not installed ({error.name}); pip install langchain-openai"
        )
    return found, missing


async def paired_cpu_overheads(
    calls: dict[str, Callable[[], Awaitable[object]]], pairs: int, *, seed: int = 0
) -> dict[str, list[float]]:
    """Per call: a contender's CPU time minus that of a direct call made right next to it.

    Each pair is two calls back to back, a direct call and the contender's, in random order.
    What ran before a pair matters: a pydantic-ai run evicts far more of the CPU caches than a
    direct call does, and the next call pays for it (tens of µs, the size of a lean framework's
    whole overhead). Back to back and in random order, both calls of a pair inherit the same
    state, so that cost cancels; the contenders' order changes every round too. The control
    contender, the direct call itself, measures what is left: its overhead should be about 0.
    """
    rng = random.Random(seed)
    others = [name for name in calls if name != DIRECT]
    diffs: dict[str, list[float]] = {name: [] for name in calls}
    for _ in range(pairs):
        rng.shuffle(others)
        for name in others:
            first, second = (DIRECT, name) if rng.random() < 0.5 else (name, DIRECT)
            cpu: dict[str, float] = {}
            for which in (first, second):
                started = time.process_time()
                await calls[which]()
                cpu[which] = time.process_time() - started
            diffs[name].append(cpu[name] - cpu[DIRECT])
        diffs[DIRECT].append(0.0)
    return diffs


def _ratio(value: float | None) -> str:
    # jevrefine's overhead can measure ≤ 0 when it is below the noise; no ratio then.
    return "n/a (jevrefine's overhead is within the noise)" if value is None else f"{value:.1f}×"


def overheads(result: dict[str, Measurement], name: str, attr: str) -> list[float]:
    base = getattr(result[DIRECT], attr)
    return [a - b for a, b in zip(getattr(result[name], attr), base, strict=True)]


async def run(rounds: int, ops: int, warmup: int, pairs: int) -> None:
    with serving("jevrefine.testing._openai_server", "--latency", "0") as url:
        calls, missing = contenders(url)
        result = await interleaved(calls, rounds=rounds, ops_per_round=ops, warmup=warmup)
        python_calls = {name: await python_calls_per_op(call, 30) for name, call in calls.items()}
        paired = await paired_cpu_overheads(calls, pairs)

    rows: dict[str, dict[str, Any]] = {}
    for name, m in result.items():
        rows[name] = {
            "time_per_call": m.per_op,
            "cpu_per_call": m.cpu_per_op,
            "overhead": overheads(result, name, "per_op"),
            "cpu_overhead": paired[name],
            "python_calls": python_calls[name],
            "python_calls_overhead": python_calls[name] - python_calls[DIRECT],
        }
    ours = statistics.median(rows["jevrefine"]["overhead"])
    lines = [
        "## Framework overhead per model call over HTTP (fake OpenAI server, zero latency)",
        "",
        f"One call at a time on `FakeOpenAIServer` in its own process; {rounds} alternating "
        f"rounds of {ops} calls; median (interquartile range). Overhead = time − the direct "
        "`AsyncOpenAI` call's time in the same round; CPU is this process's (the client's); the "
        f"CPU overhead is the median over {pairs} pairs of calls made back to back with a "
        "direct call, in random order. The control is the direct call measured as a contender: "
        "its overhead is the method's error. "
        "Physical limit: overhead 0. Command: `python -m benchmarks.bench_http_overhead"
        f"{' --quick' if rounds < 10 else ''}`.",
        "",
        "| contender | time per call | overhead | client CPU per call | CPU overhead (paired) "
        "| Python calls per call (added) |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for name, row in rows.items():
        t, o = bar(name, row["time_per_call"], scale=1e6), bar(name, row["overhead"], scale=1e6)
        c, co = bar(name, row["cpu_per_call"], scale=1e6), bar(name, row["cpu_overhead"], scale=1e6)
        lines.append(
            f"| {name} | {t['median']:,.0f} µs ({t['low']:,.0f} – {t['high']:,.0f}) "
            f"| {o['median']:,.0f} µs ({o['low']:,.0f} – {o['high']:,.0f}) "
            f"| {c['median']:,.0f} µs | {co['median']:,.0f} µs "
            f"| {row['python_calls']:,.0f} (+{row['python_calls_overhead']:,.0f}) |"
        )
    for name, reason in missing.items():
        lines.append(f"| {name} | skipped: {reason} | | | | |")
    lines.append("")
    ours_cpu = statistics.median(rows["jevrefine"]["cpu_overhead"])
    ratios: dict[str, dict[str, float | None]] = {}
    for name in rows:
        if name in (DIRECT, CONTROL, "jevrefine"):
            continue
        # Ratios of the medians (per-round ratios explode when ours is near zero); the CPU
        # overhead is the steadier measure, the wall one carries the loopback's noise.
        theirs, theirs_cpu = (
            statistics.median(rows[name][k]) for k in ("overhead", "cpu_overhead")
        )
        ours_calls = rows["jevrefine"]["python_calls_overhead"]
        ratios[name] = {
            "wall": theirs / ours if ours > 0 else None,
            "cpu": theirs_cpu / ours_cpu if ours_cpu > 0 else None,
            "python_calls": (
                rows[name]["python_calls_overhead"] / ours_calls if ours_calls > 0 else None
            ),
        }
        lines.append(
            f"- {name} overhead / jevrefine overhead: CPU **{_ratio(ratios[name]['cpu'])}**, "
            f"wall {_ratio(ratios[name]['wall'])}, Python calls "
            f"{_ratio(ratios[name]['python_calls'])}"
        )
    lines.append(
        f"- jevrefine overhead: **{ours_cpu * 1e6:,.0f} µs** of CPU per call "
        f"({ours_cpu / statistics.median(rows[DIRECT]['cpu_per_call']):.0%} of the direct call's "
        f"CPU), {ours * 1e6:,.0f} µs of wall time; target ≤ 1/40 of pydantic-ai's."
    )
    control_cpu = statistics.median(rows[CONTROL]["cpu_overhead"])
    lines.append(
        f"- control (the direct call as a contender): {control_cpu * 1e6:,.0f} µs of CPU "
        f"overhead, {statistics.median(rows[CONTROL]['overhead']) * 1e6:,.0f} µs of wall time: "
        "the methods' error."
    )
    bars = [
        bar(name, row["cpu_overhead"], scale=1e6) for name, row in rows.items() if name != DIRECT
    ]
    cpu_bars = [bar(name, row["cpu_per_call"], scale=1e6) for name, row in rows.items()]
    emit(
        "\n".join(lines),
        {"rounds": rounds, "ops": ops, "contenders": rows, "skipped": missing, "ratios": ratios},
        [
            figure(
                "http_overhead",
                "Framework CPU overhead per call over HTTP (CPU − direct AsyncOpenAI's)",
                "µs per call",
                bars,
                ideal=0.0,
                ideal_label="physical limit (0)",
            ),
            figure("http_cpu", "Client CPU per call over HTTP", "µs per call", cpu_bars),
        ],
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="few rounds, for a smoke run")
    args = parser.parse_args(argv)
    rounds, ops, warmup, pairs = (4, 30, 10, 40) if args.quick else (41, 30, 50, 600)
    anyio.run(run, rounds, ops, warmup, pairs)


if __name__ == "__main__":
    main()
