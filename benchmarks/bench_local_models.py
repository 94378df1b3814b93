"""The offline models on this machine: load time, memory, and generation speed.

For each `KNOWN_MODELS` entry (already in the model cache) and each thread count: the seconds
`LocalModelServer.start()` takes (the file is mapped, the weights read), the process's resident
memory before and after (VmRSS), and the tokens per second of one answer of `--tokens` tokens at
temperature 0 (the server's own count of output tokens over the wall time of the call, prompt
processing included), the median of `--rounds` answers.

    python -m benchmarks.bench_local_models [--models NAME ...] [--threads 1 2] [--rounds 3]

Wall-clock figures follow the machine's load: the load average is printed with every row.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

import anyio

from jevrefine.local import KNOWN_MODELS, LocalModelServer
from jevrefine.messages import ChatOptions

from ._harness import load_average

PROMPT = "Explain in a short paragraph why the sky is blue."


def rss_mib() -> float:
    """This process's resident memory, MiB (Linux `/proc/self/status`)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")  # pragma: no cover - not Linux


async def measure(name: str, threads: int, tokens: int, rounds: int) -> dict[str, float]:
    import jevrefine as jr

    before = rss_mib()
    server = LocalModelServer(model=name, threads=threads, ctx=2048)
    started = time.perf_counter()
    await anyio.to_thread.run_sync(server.start)
    loaded = time.perf_counter() - started
    after = rss_mib()
    speeds = []
    try:
        async with server.openai_model(timeout=600) as model:
            client = jr.ChatClient(model)
            options = ChatOptions(temperature=0.0, max_tokens=tokens, seed=1)
            for _ in range(rounds):
                began = time.perf_counter()
                response = await client.prompt(PROMPT).options(options).call()
                seconds = time.perf_counter() - began
                produced = response.chat_response.metadata.usage.output_tokens
                speeds.append(produced / seconds)
    finally:
        await anyio.to_thread.run_sync(server.stop)
    return {
        "load_s": loaded,
        "rss_mib": after - before,
        "tokens_per_s": statistics.median(speeds),
    }


async def run(args: argparse.Namespace) -> None:
    print(
        "| model | file MiB | threads | load s | RSS added MiB | tokens/s | load average |",
        flush=True,
    )
    print("|---|---:|---:|---:|---:|---:|---|", flush=True)
    for name in args.models:
        known = KNOWN_MODELS[name]
        for threads in args.threads:
            figures = await measure(name, threads, args.tokens, args.rounds)
            print(
                f"| {name} | {known.size / 2**20:,.0f} | {threads} | {figures['load_s']:.1f} "
                f"| {figures['rss_mib']:,.0f} | {figures['tokens_per_s']:.1f} "
                f"| {load_average()} |",
                flush=True,
            )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--models", nargs="+", default=list(KNOWN_MODELS), choices=KNOWN_MODELS)
    parser.add_argument("--threads", nargs="+", type=int, default=[1, 2])
    parser.add_argument("--tokens", type=int, default=128)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)
    print(f"command: python -m benchmarks.bench_local_models {' '.join(argv or sys.argv[1:])}")
    print(f"cpus: {os.cpu_count()}")
    anyio.run(run, args)


if __name__ == "__main__":
    main()
