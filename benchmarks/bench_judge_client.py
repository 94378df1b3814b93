"""JudgeClient vs the official typesafe-sdk AsyncTypeSafeClient, on FakeJevServer.

Measures calls per second at concurrency 1 and 64 and the client's CPU time per call. The fake
server runs in a separate process, so the CPU measured here (this process's) is the client's alone.
The two clients alternate, A/B then B/A, over several rounds in one run; medians are reported, with
the ratio JudgeClient / official (higher is better for calls/s, lower for CPU per call). The
CPU floor is `benchmarks._floor.FloorClient` posting the same body (asyncio streams, hand-parsed
HTTP/1.1, no framework); JudgeClient's CPU is also stated as a multiple of it.

    python -m benchmarks.bench_judge_client            # full run
    python -m benchmarks.bench_judge_client --quick    # a few seconds
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Awaitable, Callable
from typing import Any

import anyio

from jevrefine.jev import Choice, JudgeClient, Noul, Score

from ._floor import FloorClient
from ._harness import bar, emit, figure, load_average
from ._servers import serving

STATE = {
    "user_question": "user: I was charged twice for my subscription this month. Please help.",
    "assistant_answer": "I'm sorry about that. I have refunded the duplicate charge; it will "
    "appear on your statement within 3-5 business days.",
}
OUR_QUESTIONS = {
    "is_grounded": Noul(
        "Is every claim in `assistant_answer` supported?", when_false="Unsupported"
    ),
    "department": Choice(
        "Which team should handle this?", options={"billing": None, "sales": None}
    ),
    "frustration": Score("How frustrated is the customer?", levels=["Calm", "Frustrated", "Angry"]),
}


def _their_questions(ts: Any) -> dict[str, Any]:
    return {
        "is_grounded": ts.Noul(
            instructions="Is every claim in `assistant_answer` supported?",
            criteria={"false": "Unsupported"},
        ),
        "department": ts.Choice(
            instructions="Which team should handle this?", criteria={"billing": None, "sales": None}
        ),
        "frustration": ts.Score(
            instructions="How frustrated is the customer?", criteria=["Calm", "Frustrated", "Angry"]
        ),
    }


async def measure(
    call: Callable[[], Awaitable[Any]], calls: int, concurrency: int
) -> tuple[float, float]:
    """(calls per second, client CPU seconds per call) for `calls` calls at `concurrency`."""
    remaining = calls

    async def worker() -> None:
        nonlocal remaining
        while remaining > 0:
            remaining -= 1
            await call()

    cpu0, wall0 = time.process_time(), time.perf_counter()
    async with anyio.create_task_group() as group:
        for _ in range(concurrency):
            group.start_soon(worker)
    wall, cpu = time.perf_counter() - wall0, time.process_time() - cpu0
    return calls / wall, cpu / calls


async def run(args: argparse.Namespace) -> None:
    import typesafe_sdk as ts

    with serving("jevrefine.testing._jev_server") as url:
        ours = JudgeClient("bench-key", base_url=url)
        theirs = ts.AsyncTypeSafeClient(api_key="bench-key", base_url=url)
        their_questions = _their_questions(ts)

        async def call_ours() -> Any:
            return await ours.system_one(STATE, OUR_QUESTIONS)

        async def call_theirs() -> Any:
            return await theirs.system_one(STATE, their_questions)

        floor = FloorClient(url, headers={"authorization": "Bearer bench-key"})
        wire = {
            "state": STATE,
            "model": ours.model,
            "questions": {k: q.to_wire() for k, q in OUR_QUESTIONS.items()},
        }

        async def call_floor() -> Any:
            return await floor.post("/v1/systemone", wire)

        clients = {"floor": call_floor, "jevrefine": call_ours, "typesafe-sdk": call_theirs}
        # Same answers from both: the comparison is meaningless otherwise.
        a, b = await call_ours(), await call_theirs()
        assert a.noul("is_grounded").noul == b.nouls["is_grounded"].noul
        for call in clients.values():  # warm-up: connections, imports, caches
            await measure(call, args.warmup, 64)
        results: dict[tuple[str, int], list[tuple[float, float]]] = {}
        for round_ in range(args.rounds):
            order = list(clients) if round_ % 2 == 0 else list(reversed(clients))
            for concurrency in (1, 64):
                calls = args.calls_seq if concurrency == 1 else args.calls_conc
                for name in order:
                    results.setdefault((name, concurrency), []).append(
                        await measure(clients[name], calls, concurrency)
                    )
        await ours.aclose()
        await theirs.aclose()
        await floor.aclose()

    lines = [
        "## Jev client: JudgeClient vs the official typesafe-sdk AsyncTypeSafeClient",
        "",
        f"`system_one` with three questions on `FakeJevServer` (zero latency, its own process); "
        f"{args.rounds} alternating rounds, medians (interquartile range). CPU is this process's, "
        "the client's. The physical limit at concurrency 1 is the server's round trip; the ratio "
        "is what a user gains by switching; the floor is the least CPU a client can spend. Load "
        f"average {load_average()} at the end. Command: `python -m benchmarks.bench_judge_client"
        f"{' --quick' if args.quick else ''}`.",
        "",
        "| concurrency | client | calls/s | CPU per call |",
        "|---:|---|---:|---:|",
    ]
    figures = []
    summary: dict[str, Any] = {}
    for concurrency in (1, 64):
        rows = {}
        for name in clients:
            samples = results[(name, concurrency)]
            rate = bar(name, [s[0] for s in samples])
            cpu = bar(name, [s[1] for s in samples], scale=1e6)
            rows[name] = (rate["median"], cpu["median"])
            lines.append(
                f"| {concurrency} | {name} | {rate['median']:,.0f} "
                f"({rate['low']:,.0f} – {rate['high']:,.0f}) | {cpu['median']:,.0f} µs |"
            )
        ours_rate, ours_cpu = rows["jevrefine"]
        their_rate, their_cpu = rows["typesafe-sdk"]
        floor_rate, floor_cpu = rows["floor"]
        lines.append(
            f"| {concurrency} | **jevrefine / typesafe-sdk** | **{ours_rate / their_rate:.2f}×** "
            f"| **{ours_cpu / their_cpu:.2f}×** |"
        )
        lines.append(
            f"| {concurrency} | jevrefine / floor | {ours_rate / floor_rate:.2f}× "
            f"| {ours_cpu / floor_cpu:.2f}× |"
        )
        summary[str(concurrency)] = {
            "rate_ratio": ours_rate / their_rate,
            "cpu_ratio": ours_cpu / their_cpu,
            "cpu_per_call_us": {name: rows[name][1] for name in clients},
            "cpu_over_floor": ours_cpu / floor_cpu,
            "samples": {name: results[(name, concurrency)] for name in clients},
        }
        figures.append(
            figure(
                f"jev_client_c{concurrency}",
                f"Jev client: CPU per call at concurrency {concurrency}",
                "µs per call",
                [
                    bar(name, [s[1] for s in results[(name, concurrency)]], scale=1e6)
                    for name in clients
                ],
            )
        )
    emit("\n".join(lines), {"rounds": args.rounds, "concurrency": summary}, figures)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument(
        "--quick", action="store_true", help="fewer calls and rounds (a few seconds)"
    )
    args = parser.parse_args()
    args.quick = bool(args.quick)
    if args.quick:
        args.rounds, args.calls_seq, args.calls_conc, args.warmup = 2, 200, 600, 200
    else:
        args.rounds, args.calls_seq, args.calls_conc, args.warmup = 6, 1000, 3000, 500
    anyio.run(run, args)


if __name__ == "__main__":
    main()
