"""JudgeClient vs the official typesafe-sdk AsyncTypeSafeClient, on FakeJevServer.

Measures calls per second at concurrency 1 and 64 and the client's CPU time per call. The fake
server runs in a separate process, so the CPU measured here (this process's) is the client's alone.
The two clients alternate, A/B then B/A, over several rounds in one run; medians are reported, with
the ratio JudgeClient / official (higher is better for calls/s, lower for CPU per call).

    python benchmarks/bench_judge_client.py            # full run
    python benchmarks/bench_judge_client.py --quick    # a few seconds
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from typing import Any

import anyio

from jevrefine.jev import Choice, JudgeClient, Noul, Score

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


def start_server() -> tuple[subprocess.Popen[str], str]:
    process = subprocess.Popen(
        [sys.executable, "-m", "jevrefine.testing._jev_server"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None
    url = process.stdout.readline().strip()
    if not url.startswith("http"):
        process.kill()
        raise SystemExit(f"the fake server did not start (printed {url!r})")
    return process, url


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

    process, url = start_server()
    try:
        ours = JudgeClient("bench-key", base_url=url)
        theirs = ts.AsyncTypeSafeClient(api_key="bench-key", base_url=url)
        their_questions = _their_questions(ts)

        async def call_ours() -> Any:
            return await ours.system_one(STATE, OUR_QUESTIONS)

        async def call_theirs() -> Any:
            return await theirs.system_one(STATE, their_questions)

        clients = {"jevrefine": call_ours, "typesafe-sdk": call_theirs}
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
    finally:
        assert process.stdin is not None
        process.stdin.close()
        process.wait(timeout=10)

    print(
        f"FakeJevServer in a separate process at {url}; {args.rounds} alternating rounds, medians"
    )
    print(f"{'concurrency':>11} | {'client':<13} | {'calls/s':>8} | {'CPU µs/call':>11}")
    for concurrency in (1, 64):
        rows = {}
        for name in clients:
            samples = results[(name, concurrency)]
            rate = statistics.median(s[0] for s in samples)
            cpu = statistics.median(s[1] for s in samples)
            rows[name] = (rate, cpu)
            print(f"{concurrency:>11} | {name:<13} | {rate:>8.0f} | {cpu * 1e6:>11.0f}")
        ours_rate, ours_cpu = rows["jevrefine"]
        their_rate, their_cpu = rows["typesafe-sdk"]
        print(
            f"{concurrency:>11} | {'ratio':<13} | {ours_rate / their_rate:>7.2f}x |"
            f" {ours_cpu / their_cpu:>10.2f}x"
        )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument(
        "--quick", action="store_true", help="fewer calls and rounds (a few seconds)"
    )
    args = parser.parse_args()
    if args.quick:
        args.rounds, args.calls_seq, args.calls_conc, args.warmup = 2, 200, 600, 200
    else:
        args.rounds, args.calls_seq, args.calls_conc, args.warmup = 6, 1000, 3000, 500
    anyio.run(run, args)


if __name__ == "__main__":
    main()
