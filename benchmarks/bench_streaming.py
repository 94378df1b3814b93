"""Streaming refinement: time to first visible text, and CPU added per streamed chunk.

**Time to first visible text.** One refinement whose first attempt fails the judge and whose
second passes (the case where the modes differ), on `FakeOpenAIServer` and `FakeJevServer` with
the same latency each (50 ms, then 200 ms: each model call and each judging call waits that long
before answering; the answer then streams at once). Measured from the request to the first text
a user could see: for `call()` its return, for `stream_events()` the first `TextDelta`; and to
the final answer (`call()`'s return, `Completed`). Expected: `call()` and buffered show text
after two model calls and two judging calls (about 4 × latency); live after one model call
(about 1 × latency), and strikes that text when the judge rejects it.

**CPU per streamed chunk.** One long answer (about 2,000 chunks) from `FakeOpenAIServer` in its
own process (so this process's CPU is the client's), read as the raw `AsyncOpenAI` stream, as
the jevrefine adapter's stream, as `spec.stream()` without advisors, and as
`spec.stream_events()` through self-refine in buffered and live mode (a judge with one code
check, so no judging call: what is left is per-chunk work). Added CPU per chunk = (a
contender's CPU − the raw stream's, paired round by round) ÷ chunks. Target: ≤ 10 µs.
The same again in process, on `FunctionModel` (no HTTP, no SDK): what the chain, the refine
loop and the events add per chunk over the model's own stream, with nothing else in the way.

    python -m benchmarks.bench_streaming [--quick]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
from openai import AsyncOpenAI

import jevrefine as jr
from jevrefine.jev import JudgeClient, Noul
from jevrefine.judge import Judge, check, noul
from jevrefine.models.openai import OpenAIChatModel
from jevrefine.streaming import Completed, TextDelta
from jevrefine.testing import FakeJevServer, FakeOpenAIServer, FunctionModel

from ._harness import bar, emit, figure, interleaved
from ._loop import SHIPPED_LOOP
from ._servers import serving

WRONG = "Lyon is the capital of France, I think."
RIGHT = "Paris is the capital of France."
LATENCIES = (0.05, 0.2)
MODES = ("call()", "buffered", "live")


def _reply(body: dict[str, Any]) -> str:
    return RIGHT if "broke these rules" in json.dumps(body["messages"]) else WRONG


def _verdict(state: Any, questions: dict[str, Any]) -> dict[str, float]:
    return dict.fromkeys(questions, 0.9 if state["assistant_answer"] == RIGHT else 0.1)


async def _first_text(spec: jr.PromptSpec, mode: str) -> tuple[float, float]:
    """Seconds to the first visible text and to the final answer."""
    started = time.perf_counter()
    if mode == "call()":
        response = await spec.call()
        assert response.content == RIGHT
        elapsed = time.perf_counter() - started
        return elapsed, elapsed
    first: float | None = None
    async for event in spec.stream_events():
        if isinstance(event, TextDelta) and first is None:
            first = time.perf_counter() - started
        if isinstance(event, Completed):
            assert event.response.content == RIGHT
    assert first is not None
    return first, time.perf_counter() - started


async def time_to_text(latency: float, rounds: int) -> dict[str, dict[str, list[float]]]:
    """Per mode: the seconds to first text and to the answer, one value per round."""
    found: dict[str, dict[str, list[float]]] = {m: {"first": [], "final": []} for m in MODES}
    async with (
        FakeOpenAIServer(_reply, latency=latency) as model_server,
        FakeJevServer(_verdict, latency=latency) as jev_server,
        OpenAIChatModel("m", base_url=model_server.base_url, api_key="sk-b") as model,
        JudgeClient("jev-b", base_url=jev_server.base_url) as jev,
    ):
        judge = Judge(jev, [noul("ok", Noul("Is it right?", when_false="Wrong"), 0.5)])
        specs = {
            mode: jr.ChatClient(
                model,
                advisors=[
                    jr.SelfRefineAdvisor(
                        judge,
                        stream_mode=None if mode == "call()" else mode,
                        strategy=SHIPPED_LOOP,
                    )
                ],
            ).prompt("What is the capital of France?")
            for mode in MODES
        }
        await _first_text(specs["live"], "live")  # opens both pools
        for round_index in range(rounds):
            order = MODES if round_index % 2 == 0 else tuple(reversed(MODES))
            for mode in order:
                first, final = await _first_text(specs[mode], mode)
                found[mode]["first"].append(first)
                found[mode]["final"].append(final)
    return found


def _long_prompt(words: int) -> str:
    return " ".join(f"w{i}" for i in range(words))


async def cpu_per_chunk(
    url: str, jev_url: str, words: int, rounds: int
) -> tuple[dict[str, list[float]], int]:
    """Per contender: this process's CPU per stream, one value per round; and the chunks."""
    sdk = AsyncOpenAI(api_key="bench", base_url=url, max_retries=0)
    prompt = _long_prompt(words)
    messages: Any = [{"role": "user", "content": prompt}]
    chunks = 0

    async def raw() -> object:
        nonlocal chunks
        stream = await sdk.chat.completions.create(
            model="m", messages=messages, stream=True, max_tokens=10 * words
        )
        count = 0
        async for _ in stream:
            count += 1
        chunks = count
        return count

    model = OpenAIChatModel("m", client=sdk)
    options = jr.ChatOptions(max_tokens=10 * words)
    async with JudgeClient("jev-b", base_url=jev_url) as jev:
        judge = Judge(jev, [check("long", lambda i: len(i.assistant_answer) > 10, "Too short.")])
        plain = jr.ChatClient(model, options=options).prompt(prompt)
        buffered, live = (
            jr.ChatClient(
                model,
                options=options,
                advisors=[jr.SelfRefineAdvisor(judge, stream_mode=mode, strategy=SHIPPED_LOOP)],
            ).prompt(prompt)
            for mode in ("buffered", "live")
        )

        async def adapter() -> object:
            return [c async for c in model.stream(jr.Prompt((jr.UserMessage(prompt),), options))]

        async def text_stream() -> object:
            return [c async for c in plain.stream()]

        async def events_buffered() -> object:
            return [e async for e in buffered.stream_events()]

        async def events_live() -> object:
            return [e async for e in live.stream_events()]

        contenders: dict[str, Callable[[], Awaitable[object]]] = {
            "raw AsyncOpenAI stream": raw,
            "jevrefine adapter (OpenAIChatModel.stream)": adapter,
            "spec.stream(), no advisors": text_stream,
            "stream_events(), self-refine buffered": events_buffered,
            "stream_events(), self-refine live": events_live,
        }
        result = await interleaved(contenders, rounds=rounds, ops_per_round=1, warmup=2)
    return {name: m.cpu_per_op for name, m in result.items()}, chunks


async def cpu_in_process(pieces: int, rounds: int) -> dict[str, list[float]]:
    """Per contender: CPU per stream of `pieces` chunks from a `FunctionModel`, per round."""

    async def words(prompt: jr.Prompt) -> Any:
        for index in range(pieces):
            yield f" w{index}"

    model = FunctionModel(lambda prompt: "", stream_function=words)
    jev = JudgeClient("jev-b", base_url="http://127.0.0.1:9")  # never called: a code check only
    judge = Judge(jev, [check("long", lambda i: len(i.assistant_answer) > 10, "Too short.")])
    prompt = jr.Prompt((jr.UserMessage("go"),))
    plain = jr.ChatClient(model).prompt("go")
    buffered, live = (
        jr.ChatClient(
            model, advisors=[jr.SelfRefineAdvisor(judge, stream_mode=mode, strategy=SHIPPED_LOOP)]
        ).prompt("go")
        for mode in ("buffered", "live")
    )

    async def own() -> object:
        return [c async for c in model.stream(prompt)]

    async def text_stream() -> object:
        return [c async for c in plain.stream()]

    async def events_buffered() -> object:
        return [e async for e in buffered.stream_events()]

    async def events_live() -> object:
        return [e async for e in live.stream_events()]

    contenders: dict[str, Callable[[], Awaitable[object]]] = {
        "FunctionModel.stream": own,
        "spec.stream(), no advisors": text_stream,
        "stream_events(), self-refine buffered": events_buffered,
        "stream_events(), self-refine live": events_live,
    }
    try:
        result = await interleaved(contenders, rounds=rounds, ops_per_round=1, warmup=2)
    finally:
        await jev.aclose()
    return {name: m.cpu_per_op for name, m in result.items()}


def _cpu_table(cpu: dict[str, list[float]], base: str, chunks: int) -> tuple[list[str], Any]:
    """Table rows (CPU per chunk, added over `base`), the bars, and the worst added median."""
    lines = ["| contender | CPU per chunk | added per chunk |", "|---|---:|---:|"]
    bars = []
    added = {
        name: [(v - b) / chunks for v, b in zip(values, cpu[base], strict=True)]
        for name, values in cpu.items()
    }
    for name, values in cpu.items():
        per = bar(name, [v / chunks for v in values], scale=1e6)
        more = bar(name, added[name], scale=1e6)
        lines.append(
            f"| {name} | {per['median']:,.1f} µs | {more['median']:,.1f} µs "
            f"({more['low']:,.1f} – {more['high']:,.1f}) |"
        )
        if name != base:
            bars.append(more)
    worst = max(statistics.median(v) for n, v in added.items() if n.startswith("stream_events"))
    return lines, (bars, worst)


async def run(rounds: int, words: int, cpu_rounds: int) -> None:
    times = {latency: await time_to_text(latency, rounds) for latency in LATENCIES}
    with (
        serving("jevrefine.testing._openai_server", "--latency", "0") as url,
        serving("jevrefine.testing._jev_server", "--latency", "0") as jev_url,
    ):
        cpu, chunks = await cpu_per_chunk(url, jev_url, words, cpu_rounds)
    local = await cpu_in_process(words, cpu_rounds)

    lines = [
        "## Streaming refinement: time to first visible text",
        "",
        "One refinement whose first attempt fails and second passes; model and judge each wait "
        f"the latency before answering (in-process fakes). {rounds} alternating rounds per "
        "latency; median (interquartile range). Command: `python -m benchmarks.bench_streaming"
        f"{' --quick' if rounds < 5 else ''}`.",
        "",
        "| latency | mode | first visible text | final answer |",
        "|---:|---|---:|---:|",
    ]
    bars = []
    for latency, by_mode in times.items():
        for mode, values in by_mode.items():
            f, a = bar(mode, values["first"], scale=1e3), bar(mode, values["final"], scale=1e3)
            lines.append(
                f"| {latency * 1e3:.0f} ms | {mode} | {f['median']:,.0f} ms "
                f"({f['low']:,.0f} – {f['high']:,.0f}) | {a['median']:,.0f} ms |"
            )
            bars.append(bar(f"{mode} @ {latency * 1e3:.0f} ms", values["first"], scale=1e3))
    http_rows, (cpu_bars, worst) = _cpu_table(cpu, "raw AsyncOpenAI stream", chunks)
    local_rows, (local_bars, local_worst) = _cpu_table(local, "FunctionModel.stream", words)
    lines += [
        "",
        "## Streaming refinement: CPU per streamed chunk",
        "",
        f"One answer of {chunks:,} chunks from `FakeOpenAIServer` in its own process; "
        f"{cpu_rounds} alternating rounds; this process's CPU. Added = (CPU − the raw stream's "
        "in the same round) ÷ chunks; median (interquartile range). Target: ≤ 10 µs per chunk.",
        "",
        *http_rows,
        "",
        f"In process, {words:,} chunks from `FunctionModel` (no HTTP, no SDK); added over the "
        "model's own stream:",
        "",
        *local_rows,
        "",
        f"- over HTTP, stream_events() through self-refine adds **{worst * 1e6:,.1f} µs** of CPU "
        "per chunk over the raw vendor stream (target ≤ 10 µs), the adapter's share included;",
        f"- in process, the chain, the refine loop and the events add **{local_worst * 1e6:,.1f} "
        "µs** per chunk over the model's own stream.",
    ]
    emit(
        "\n".join(lines),
        {
            "rounds": rounds,
            "chunks": chunks,
            "time_to_text": times,
            "cpu_per_stream": cpu,
            "cpu_per_stream_in_process": local,
        },
        [
            figure("stream_first_text", "Time to first visible text", "ms", bars),
            figure(
                "stream_cpu_per_chunk",
                "CPU added per streamed chunk (vs the raw AsyncOpenAI stream)",
                "µs per chunk",
                cpu_bars,
                ideal=10.0,
                ideal_label="target (10 µs)",
            ),
            figure(
                "stream_cpu_per_chunk_in_process",
                "CPU added per streamed chunk in process (vs FunctionModel.stream)",
                "µs per chunk",
                local_bars,
                ideal=10.0,
                ideal_label="target (10 µs)",
            ),
        ],
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="few rounds, for a smoke run")
    args = parser.parse_args(argv)
    rounds, words, cpu_rounds = (2, 300, 3) if args.quick else (15, 2000, 21)
    anyio.run(run, rounds, words, cpu_rounds)


if __name__ == "__main__":
    main()
