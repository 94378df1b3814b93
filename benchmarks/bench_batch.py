"""Batch refinement: `refine_many` at scale, against an ideal and against naive loops.

Two scenarios, each at the issue's size (10,000 inputs, concurrency 500; `--quick`: 1,000 at 100):

1. **Over HTTP.** Each refinement is a `ChatClient` call with a `SelfRefineAdvisor` whose
   `Judge` asks Jev: one chat completion on `FakeOpenAIServer` and one System One call on
   `FakeJevServer`, each server answering after 50 ms. The servers run in a child process, so
   their CPU does not share this process's GIL. The ideal wall time is max(latency bound, CPU
   floor): the latency bound is ceil(N / concurrency) × 100 ms; the CPU floor is the CPU time of
   `benchmarks._floor.FloorClient` (asyncio streams, hand-parsed HTTP/1.1 keep-alive, no
   framework) making the same two HTTP calls per item with the same bodies, measured in the same
   run. The hand-written `httpx2` loop (one client, a semaphore) that an earlier round called the
   floor is reported as the "httpx2 loop": it pays httpx's layers and pool probing. Every row
   states wall and CPU. Target: `refine_many` within 1.2× of the ideal.
2. **In process.** `FunctionModel` answering after 50 ms (no judge): `refine_many` against an
   `asyncio.gather` of every call under a semaphore (one task per input, all created at once) —
   the loop people write first. Ideal: ceil(N / concurrency) × 50 ms.

Peak memory is measured in separate runs with `tracemalloc` (which slows everything, so those
runs are not timed; over HTTP on 2 × concurrency inputs, since the peak depends on what is in
flight, not on N): the peak of traced memory above the baseline, divided by the concurrency.
Target: under 50 KB per in-flight refinement, measured with `refine_iter` with each result
dropped as it arrives (what a stream to disk holds). `refine_many` keeps every result in its list
until the end, so its figure (also reported, labelled) grows with N, not with what is in flight.
Both build their clients inside the traced run, so the connection pool that grows to the
concurrency is counted. The warm rows show what one more refinement costs on a running service,
at `--in-flight` refinements at once (1,000 at full size): the client first runs a wave untraced
(imports, caches), then a traced one, and the peak is measured over a third run above the
memory traced after the second (the pool's connections are in that baseline). The earlier
method, tracing from an untraced warm-up, stays beside it: it counts as in-flight memory every
keep-alive connection that expired between the runs (the SDK's pool keeps idle connections 5 s;
a traced run at 1,000 in flight takes longer) and was reopened, although the one it replaces was
freed; at 1,000 in flight that is every connection. `--where` adds the top 15 lines of a
snapshot taken with that many in flight (above the warmed baseline), grouped by file and by line.

Run with `python -m benchmarks.bench_batch [--quick] [--rounds N]`.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import json
import math
import platform
import statistics
import subprocess
import sys
import time
import tracemalloc
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any, Protocol

import anyio
import httpx2

import jevrefine as jr
from jevrefine.advisors.self_refine import SelfRefineAdvisor
from jevrefine.jev import JudgeClient, Noul
from jevrefine.judge._judge import Judge
from jevrefine.judge.criteria import noul
from jevrefine.models.openai import OpenAIChatModel
from jevrefine.testing import FunctionModel

from ._floor import FloorClient
from ._harness import bar, emit, figure, load_average
from ._loop import SHIPPED_LOOP

LATENCY = 0.05

SERVERS = """
import sys, anyio
from jevrefine.testing import FakeJevServer, FakeOpenAIServer

async def main():
    async with (
        FakeOpenAIServer(latency={latency}) as model,
        FakeJevServer(latency={latency}) as jev,
    ):
        print(model.base_url, jev.base_url, flush=True)
        await anyio.to_thread.run_sync(sys.stdin.read)  # until the parent closes stdin

anyio.run(main)
"""


class ServerUrls(Protocol):
    """Where the fake servers listen: a running `Servers`, or another benchmark's."""

    model_url: str
    jev_url: str


class Servers:
    """The fake OpenAI and Jev servers in a child process (their own GIL).

    `command` runs other servers that print their two base URLs the same way (`bench_ray`'s).
    """

    def __init__(self, command: list[str] | None = None) -> None:
        self.command = command or [sys.executable, "-c", SERVERS.format(latency=LATENCY)]

    def __enter__(self) -> Servers:
        self.process = subprocess.Popen(
            self.command,
            cwd=Path(__file__).resolve().parent.parent,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self.process.stdout is not None
        self.model_url, self.jev_url = self.process.stdout.readline().split()
        return self

    def __exit__(self, *exc: object) -> None:
        assert self.process.stdin is not None
        self.process.stdin.close()
        self.process.wait(timeout=30)


def prompts(n: int) -> list[str]:
    return [f"question number {i}: why is the sky blue?" for i in range(n)]


# --- scenario 1: over HTTP -------------------------------------------------------------------


@contextlib.asynccontextmanager
async def http_client(servers: ServerUrls, concurrency: int) -> AsyncIterator[jr.ChatClient]:
    """The refining client: the model on the fake OpenAI server, a Jev judge on the fake Jev."""
    async with (
        # A generous timeout: under tracemalloc everything is several times slower.
        OpenAIChatModel(
            "fake", base_url=servers.model_url, api_key="sk-bench", timeout=600
        ) as model,
        JudgeClient(
            "jev-bench",
            base_url=servers.jev_url,
            max_concurrency=concurrency,
            timeout=600,
            total_timeout=600,
        ) as jev,
    ):
        judge = Judge(jev, [noul("is_good", Noul("Is the answer good?"), 0.0)])
        yield jr.ChatClient(
            model, advisors=[SelfRefineAdvisor(judge, max_repeat_attempts=1, strategy=SHIPPED_LOOP)]
        )


async def run_http_refine_many(servers: ServerUrls, n: int, concurrency: int) -> float:
    async with http_client(servers, concurrency) as client:
        started = time.perf_counter()
        results = await jr.refine_many(client, prompts(n), concurrency=concurrency)
        elapsed = time.perf_counter() - started
    failed = [r.error for r in results if not r.ok]
    assert not failed, failed[:3]
    return elapsed


async def stream_http(client: jr.ChatClient, n: int, concurrency: int) -> None:
    """`refine_iter`, each result dropped as it arrives (as a stream written to disk)."""
    failed = 0
    stream = jr.refine_iter(client, prompts(n), concurrency=concurrency)
    async with contextlib.aclosing(stream):
        async for result in stream:
            failed += not result.ok
    assert not failed, f"{failed} of {n} failed"


async def run_http_refine_iter(servers: ServerUrls, n: int, concurrency: int) -> None:
    async with http_client(servers, concurrency) as client:
        await stream_http(client, n, concurrency)


async def http_warm_peaks(servers: ServerUrls, in_flight: int, repeats: int) -> dict[str, Any]:
    """`refine_iter`'s peaks at `in_flight` on a warmed client: above an untraced warm-up (the
    earlier method, once) and above a traced one (the pool and what replaced expired connections
    in the baseline), `repeats` times in the same traced session (the median is reported)."""
    n = 2 * in_flight  # the peak depends on what is in flight: two waves suffice
    async with http_client(servers, in_flight) as client:
        await stream_http(client, in_flight, in_flight)
        untraced = await peak_bytes(lambda: stream_http(client, n, in_flight))
        await stream_http(client, in_flight, in_flight)
        gc.collect()
        tracemalloc.start()
        warm = []
        try:
            await stream_http(client, n, in_flight)  # traced: the connections it opens count
            for _ in range(repeats):
                gc.collect()
                baseline = tracemalloc.get_traced_memory()[0]
                tracemalloc.reset_peak()
                await stream_http(client, n, in_flight)
                warm.append(tracemalloc.get_traced_memory()[1] - baseline)
        finally:
            tracemalloc.stop()
    return {
        "untraced_warmup": untraced,
        "traced_warmup": statistics.median(warm),
        "traced_warmup_samples": warm,
    }


async def where_bytes(servers: ServerUrls, in_flight: int, top: int = 15) -> dict[str, Any]:
    """The top `top` files and lines of what `in_flight` refinements hold (a warmed client).

    The snapshot is taken in steady state, when half of the second wave has finished, against
    one taken after a traced warm-up wave (the pool open, in both).
    """
    async with http_client(servers, in_flight) as client:
        await stream_http(client, in_flight, in_flight)
        tracemalloc.start()
        try:
            await stream_http(client, in_flight, in_flight)
            gc.collect()
            base = tracemalloc.take_snapshot()
            snapshot: tracemalloc.Snapshot | None = None
            stream = jr.refine_iter(client, prompts(3 * in_flight), concurrency=in_flight)
            async with contextlib.aclosing(stream):
                async for done, _ in enumerate_async(stream):
                    if done == in_flight + in_flight // 2:
                        snapshot = tracemalloc.take_snapshot()
        finally:
            tracemalloc.stop()
    assert snapshot is not None
    ignore = [tracemalloc.Filter(False, tracemalloc.__file__)]
    snapshot, base = snapshot.filter_traces(ignore), base.filter_traces(ignore)
    found: dict[str, Any] = {}
    for key in ("filename", "lineno"):
        stats = snapshot.compare_to(base, key)
        found[key] = [(str(s.traceback), s.size_diff, s.count_diff) for s in stats[:top]]
    found["total"] = sum(s.size_diff for s in snapshot.compare_to(base, "filename"))
    return found


async def enumerate_async(stream: AsyncIterator[Any]) -> AsyncIterator[tuple[int, Any]]:
    count = 0
    async for item in stream:
        count += 1
        yield count, item


async def recorded_jev_call(servers: ServerUrls) -> tuple[str, dict[str, Any]]:
    """The Jev request path and body of one refinement, as jevrefine sends them."""
    captured: list[httpx2.Request] = []

    async def capture(request: httpx2.Request) -> None:
        captured.append(request)

    async with (
        httpx2.AsyncClient(event_hooks={"request": [capture]}) as http,
        JudgeClient("jev-bench", base_url=servers.jev_url, http_client=http) as jev,
        OpenAIChatModel("fake", base_url=servers.model_url, api_key="k") as model,
    ):
        judge = Judge(jev, [noul("is_good", Noul("Is the answer good?"), 0.0)])
        client = jr.ChatClient(model, advisors=[SelfRefineAdvisor(judge, strategy=SHIPPED_LOOP)])
        await client.prompt(prompts(1)[0]).call()
    return captured[-1].url.path, json.loads(captured[-1].content)


async def run_http_floor(servers: ServerUrls, n: int, concurrency: int) -> float:
    """The CPU floor: the same two POSTs per item on `FloorClient`, a semaphore."""
    jev_path, jev_body = await recorded_jev_call(servers)
    jev_suffix = _suffix(servers.jev_url, jev_path)
    headers = {"authorization": "Bearer k"}
    model, jev = FloorClient(servers.model_url, headers=headers), FloorClient(servers.jev_url)
    semaphore = asyncio.Semaphore(concurrency)

    async def one(prompt: str) -> None:
        async with semaphore:
            body = {"model": "fake", "messages": [{"role": "user", "content": prompt}]}
            answer = await model.post("/chat/completions", body)
            text = answer["choices"][0]["message"]["content"]
            state = {**jev_body.get("state", {}), "assistant_answer": text}
            await jev.post(jev_suffix, {**jev_body, "state": state})

    started = time.perf_counter()
    await asyncio.gather(*(one(p) for p in prompts(n)))
    elapsed = time.perf_counter() - started
    await model.aclose()
    await jev.aclose()
    return elapsed


async def run_http_httpx_loop(servers: ServerUrls, n: int, concurrency: int) -> float:
    """The httpx2 loop: the same two POSTs per item, a semaphore, one httpx2 client."""
    jev_path, jev_body = await recorded_jev_call(servers)
    jev_url = f"{servers.jev_url.rstrip('/')}{_suffix(servers.jev_url, jev_path)}"
    limits = httpx2.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    semaphore = asyncio.Semaphore(concurrency)
    headers = {"authorization": "Bearer k"}
    async with httpx2.AsyncClient(limits=limits, timeout=60, headers=headers) as http:

        async def one(prompt: str) -> None:
            async with semaphore:
                body = {"model": "fake", "messages": [{"role": "user", "content": prompt}]}
                answer = await http.post(f"{servers.model_url}/chat/completions", json=body)
                answer.raise_for_status()
                text = answer.json()["choices"][0]["message"]["content"]
                state = {**jev_body.get("state", {}), "assistant_answer": text}
                judged = await http.post(jev_url, json={**jev_body, "state": state})
                judged.raise_for_status()

        started = time.perf_counter()
        await asyncio.gather(*(one(p) for p in prompts(n)))
        return time.perf_counter() - started


def _suffix(base_url: str, path: str) -> str:
    base_path = httpx2.URL(base_url).path.rstrip("/")
    return path[len(base_path) :] if path.startswith(base_path) else path


# --- scenario 2: in process ------------------------------------------------------------------


def sleepy_client() -> jr.ChatClient:
    async def answer(prompt: jr.Prompt) -> str:
        await anyio.sleep(LATENCY)
        return "Because of Rayleigh scattering."

    return jr.ChatClient(FunctionModel(answer))


async def run_local_refine_many(n: int, concurrency: int) -> float:
    client = sleepy_client()
    started = time.perf_counter()
    results = await jr.refine_many(client, prompts(n), concurrency=concurrency)
    elapsed = time.perf_counter() - started
    assert all(r.ok for r in results)
    return elapsed


async def run_local_gather(n: int, concurrency: int) -> float:
    client = sleepy_client()
    semaphore = asyncio.Semaphore(concurrency)

    async def one(prompt: str) -> jr.ChatClientResponse:
        async with semaphore:
            return await client.prompt(prompt).call()

    started = time.perf_counter()
    await asyncio.gather(*(one(p) for p in prompts(n)), return_exceptions=True)
    return time.perf_counter() - started


# --- measuring -------------------------------------------------------------------------------


async def peak_bytes(run: Callable[[], Awaitable[object]]) -> int:
    """Peak traced memory above the baseline during `run` (not timed: tracing is slow)."""
    gc.collect()
    tracemalloc.start()
    try:
        baseline = tracemalloc.get_traced_memory()[0]
        tracemalloc.reset_peak()
        await run()
        return tracemalloc.get_traced_memory()[1] - baseline
    finally:
        tracemalloc.stop()


async def measure_warm(
    servers: ServerUrls, in_flight: int, where: bool, repeats: int
) -> dict[str, Any]:
    """The warm rows (and, with `where`, the top lines) at `in_flight` refinements at once."""
    peaks = await http_warm_peaks(servers, in_flight, repeats)
    found: dict[str, Any] = {"in_flight": in_flight, **peaks}
    if where:
        found["where"] = await where_bytes(servers, in_flight)
    return found


async def measure_memory_only(in_flight: int, where: bool, repeats: int) -> dict[str, Any]:
    with Servers() as servers:
        found = await measure_warm(servers, in_flight, where, repeats)
    return {"load_average": load_average(), **found}


async def measure(
    n: int, concurrency: int, rounds: int, in_flight: int, where: bool
) -> dict[str, Any]:
    times: dict[str, list[float]] = {
        "http refine_many": [],
        "http floor": [],
        "http httpx2 loop": [],
        "local refine_many": [],
        "local gather": [],
    }
    cpu: dict[str, list[float]] = {"http refine_many": [], "http floor": [], "http httpx2 loop": []}
    with Servers() as servers:
        await run_http_refine_many(servers, min(n, 200), concurrency)  # warm-up
        await run_http_floor(servers, min(n, 200), concurrency)
        await run_http_httpx_loop(servers, min(n, 200), concurrency)
        for round_index in range(rounds):
            trio = [
                ("http refine_many", run_http_refine_many),
                ("http floor", run_http_floor),
                ("http httpx2 loop", run_http_httpx_loop),
            ]
            for name, run in trio if round_index % 2 == 0 else reversed(trio):
                cpu0 = time.process_time()
                times[name].append(await run(servers, n, concurrency))
                cpu[name].append(time.process_time() - cpu0)
        # Peak memory depends on what is in flight, not on N: two waves suffice (and tracing
        # makes a run several times slower).
        waves = min(n, 2 * concurrency)
        memory_http = await peak_bytes(lambda: run_http_refine_iter(servers, waves, concurrency))
        memory_http_kept = await peak_bytes(
            lambda: run_http_refine_many(servers, waves, concurrency)
        )
        memory_http_warm = await measure_warm(servers, in_flight, where, repeats=rounds)
    for round_index in range(rounds):
        local = [("local refine_many", run_local_refine_many), ("local gather", run_local_gather)]
        for name, local_run in local if round_index % 2 == 0 else reversed(local):
            times[name].append(await local_run(n, concurrency))
    memory_local = await peak_bytes(lambda: run_local_refine_many(n, concurrency))
    memory_gather = await peak_bytes(lambda: run_local_gather(n, concurrency))
    return {
        "load_average": load_average(),
        "cpu": {k: statistics.median(v) for k, v in cpu.items()},
        "cpu_samples": cpu,
        "times": {k: statistics.median(v) for k, v in times.items()},
        "spread": {k: (min(v), max(v)) for k, v in times.items()},
        "samples": times,
        "memory_http": memory_http,
        "memory_http_kept": memory_http_kept,
        "memory_http_warm": memory_http_warm,
        "memory_local": memory_local,
        "memory_gather": memory_gather,
    }


def report(data: dict[str, Any], n: int, concurrency: int, rounds: int) -> str:
    t, spread, cpu = data["times"], data["spread"], data["cpu"]
    waves = math.ceil(n / concurrency)
    http_latency_bound = waves * 2 * LATENCY
    ideal = max(http_latency_bound, cpu["http floor"])
    decided_by = "latency" if http_latency_bound >= cpu["http floor"] else "CPU floor"
    local_ideal = waves * LATENCY
    per_flight = data["memory_http"] / concurrency / 1024
    kept = data["memory_http_kept"]
    warm = data["memory_http_warm"]
    waves_traced = min(n, 2 * concurrency)

    def cell(name: str) -> str:
        low, high = spread[name]
        return f"{t[name]:.2f} s ({low:.2f} – {high:.2f})"

    lines = [
        f"## Batch refinement: {n:,} inputs at concurrency {concurrency}",
        "",
        f"Python {platform.python_version()}, jevrefine {jr.__version__}, {rounds} rounds "
        "(median, min – max), interleaved. Servers answer after 50 ms each, from a child process. "
        f"Load average at the end: {data['load_average']}.",
        "",
        f"Ideal over HTTP = max(latency bound {http_latency_bound:.2f} s, floor CPU "
        f"{cpu['http floor']:.2f} s) = **{ideal:.2f} s** (decided by the {decided_by}).",
        "",
        "| scenario | wall time | ideal | wall ratio | client CPU | CPU / floor |",
        "|---|---|---|---|---|---|",
        f"| HTTP: `refine_many`, model + Jev judge per item | {cell('http refine_many')} | "
        f"{ideal:.2f} s | **{t['http refine_many'] / ideal:.2f}×** | "
        f"{cpu['http refine_many']:.2f} s | "
        f"**{cpu['http refine_many'] / cpu['http floor']:.2f}×** |",
        f"| HTTP: floor loop (FloorClient, same two calls) | {cell('http floor')} | "
        f"{ideal:.2f} s | {t['http floor'] / ideal:.2f}× | {cpu['http floor']:.2f} s | 1.00× |",
        f"| HTTP: httpx2 loop (one httpx2 client, same two calls) | {cell('http httpx2 loop')} | "
        f"{ideal:.2f} s | {t['http httpx2 loop'] / ideal:.2f}× | {cpu['http httpx2 loop']:.2f} s | "
        f"{cpu['http httpx2 loop'] / cpu['http floor']:.2f}× |",
        f"| in process: `refine_many`, FunctionModel 50 ms | {cell('local refine_many')} | "
        f"{local_ideal:.2f} s | {t['local refine_many'] / local_ideal:.2f}× |",
        f"| in process: `asyncio.gather` + semaphore | {cell('local gather')} | "
        f"{local_ideal:.2f} s | {t['local gather'] / local_ideal:.2f}× |",
        "",
        "| peak traced memory (tracemalloc, above baseline) | total | per in-flight refinement |",
        "|---|---|---|",
        f"| HTTP `refine_iter`, each result dropped as it arrives | "
        f"{data['memory_http'] / 2**20:.1f} MiB | **{per_flight:.1f} KiB** |",
        *warm_rows(warm),
        f"| HTTP `refine_many`, all {waves_traced:,} results kept in its list | "
        f"{kept / 2**20:.1f} MiB | {kept / concurrency / 1024:.1f} KiB |",
        f"| in process `refine_many` | {data['memory_local'] / 2**20:.1f} MiB | "
        f"{data['memory_local'] / concurrency / 1024:.1f} KiB |",
        f"| in process `asyncio.gather` (a task per input) | "
        f"{data['memory_gather'] / 2**20:.1f} MiB | "
        f"{data['memory_gather'] / concurrency / 1024:.1f} KiB |",
        "",
        f"- `refine_many` over HTTP: **{t['http refine_many'] / ideal:.2f}× the ideal** "
        f"(target ≤ 1.2×), client CPU **{cpu['http refine_many'] / cpu['http floor']:.2f}× the "
        f"floor's**; {n / t['http refine_many']:,.0f} refinements/s.",
        f"- Memory per in-flight refinement (`refine_iter`, streamed): **{per_flight:.1f} KiB** "
        f"(target < 50 KB = 48.8 KiB); `refine_many` keeping {waves_traced:,} results: "
        f"{kept / concurrency / 1024:.1f} KiB; "
        f"`gather` holds every input's task at once: "
        f"{data['memory_gather'] / max(data['memory_local'], 1):.1f}× `refine_many`'s peak.",
        f"- Warm, {warm['in_flight']:,} in flight: "
        f"**{warm['traced_warmup'] / warm['in_flight'] / 1024:.1f} KiB** per refinement "
        "(target ≤ 40 KiB).",
        *where_table(warm),
    ]
    return "\n".join(lines)


def warm_rows(warm: dict[str, Any]) -> list[str]:
    """The warm rows of the memory table: both methods, at `warm["in_flight"]`."""
    in_flight = warm["in_flight"]
    samples = warm["traced_warmup_samples"]
    spread = ", ".join(f"{v / in_flight / 1024:.1f}" for v in samples)
    traced = warm["traced_warmup"]
    untraced = warm["untraced_warmup"]
    return [
        f"| HTTP `refine_iter`, warm client, {in_flight:,} in flight, above a traced warm-up "
        f"(pool in the baseline; median of {len(samples)}: {spread}) | {traced / 2**20:.1f} MiB "
        f"| **{traced / in_flight / 1024:.1f} KiB** |",
        f"| HTTP `refine_iter`, warm client, {in_flight:,} in flight, above an untraced warm-up "
        f"(the earlier method: reopened connections count) | {untraced / 2**20:.1f} MiB "
        f"| {untraced / in_flight / 1024:.1f} KiB |",
    ]


def where_table(warm: dict[str, Any]) -> list[str]:
    """The top files and lines of a steady-state snapshot, when `--where` was given."""
    where = warm.get("where")
    if not where:
        return []
    in_flight = warm["in_flight"]
    lines = [
        "",
        f"Where the bytes go with {in_flight:,} in flight (steady state, above a traced warm-up; "
        f"{where['total'] / in_flight / 1024:.1f} KiB per refinement in that snapshot):",
        "",
        "| by | place | bytes per refinement | blocks per refinement |",
        "|---|---|---:|---:|",
    ]
    for key in ("filename", "lineno"):
        for place, size, count in where[key]:
            short = place.split("site-packages/")[-1].split("/src/")[-1]
            short = short.rsplit("/", 1)[-1] if short.startswith("/") else short  # the stdlib
            lines.append(
                f"| {key} | `{short}` | {size / in_flight:,.0f} | {count / in_flight:.1f} |"
            )
    return lines


def report_memory_only(data: dict[str, Any]) -> str:
    lines = [
        f"## Batch refinement: memory at {data['in_flight']:,} in flight",
        "",
        f"Python {platform.python_version()}, jevrefine {jr.__version__}; servers answer after "
        f"50 ms each, from a child process. Load average at the end: {data['load_average']}. "
        f"Command: `python -m benchmarks.bench_batch --memory-only --in-flight "
        f"{data['in_flight']}{' --where' if 'where' in data else ''}`.",
        "",
        "| peak traced memory (tracemalloc) | total | per in-flight refinement |",
        "|---|---|---|",
        *warm_rows(data),
        *where_table(data),
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="1,000 inputs at 100, for a smoke run")
    parser.add_argument("--rounds", type=int, default=3, help="timed rounds per contender")
    parser.add_argument(
        "--in-flight",
        type=int,
        default=None,
        help="refinements in flight for the warm memory rows (default: 1,000; --quick: 100)",
    )
    parser.add_argument("--memory-only", action="store_true", help="only the warm memory rows")
    parser.add_argument("--where", action="store_true", help="add the top 15 files and lines")
    args = parser.parse_args(argv)
    n, concurrency, rounds = (1_000, 100, 1) if args.quick else (10_000, 500, args.rounds)
    in_flight = args.in_flight or (concurrency if args.quick else 1_000)
    if args.memory_only:
        memory = anyio.run(measure_memory_only, in_flight, args.where, rounds)
        emit(report_memory_only(memory), memory)
        return
    data = anyio.run(measure, n, concurrency, rounds, in_flight, args.where)
    waves = math.ceil(n / concurrency)
    ideal = max(waves * 2 * LATENCY, data["cpu"]["http floor"])
    bars = [bar(name, values) for name, values in data["samples"].items()]
    emit(
        report(data, n, concurrency, rounds),
        {"n": n, "concurrency": concurrency, "rounds": rounds, "ideal_http": ideal, **data},
        [
            figure(
                "batch",
                f"Batch refinement: {n:,} inputs at concurrency {concurrency} (wall time)",
                "seconds",
                bars,
                ideal=ideal,
                ideal_label="ideal over HTTP",
            )
        ],
    )


if __name__ == "__main__":
    main()
