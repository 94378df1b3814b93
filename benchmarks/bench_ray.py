"""Ray: `refine_dataset` at 1 and 2 worker processes against the in-process `refine_many`.

The refinement is `bench_batch`'s over HTTP: a `ChatClient` with a `SelfRefineAdvisor` whose
`Judge` asks Jev, so one chat completion on `FakeOpenAIServer` and one System One call on
`FakeJevServer` per input. Both servers answer at once (zero latency: the CPU-bound case, the
only one in which more processes can help) from one child process of their own. Contenders, in
one run, alternating round by round:

- **in process**: `refine_many` in this process (one event loop, one core at most);
- **floor**: `benchmarks._floor.FloorClient` making the same two calls per input (asyncio
  streams, hand-parsed HTTP/1.1): the least CPU one process can make them with;
- **Ray, 1 process** and **Ray, 2 processes**: `jevrefine.ray.refine_dataset` on a local Ray
  (`ray.init(num_cpus=2)`), with one and two actors, each its own worker process and client.

Every contender refines the same N inputs at `CONCURRENCY` per process and builds its client
inside the timed run (as each Ray actor does). Two walls are reported: **end to end** (for Ray:
planning the dataset, starting the actors' processes, importing jevrefine in them, collecting the
rows) and the **active window**, from the first request the servers receive to the last answer
they send (stamped by the servers), which leaves Ray's start-up out: the throughput of a pool
that is already running. `ray.init` itself is timed once, apart.

CPU: this process's (`time.process_time`); each actor's own, from its client's creation to its
teardown (the factory is an async context manager that reports its process's CPU when the actor
is retired); the servers' (`/proc`); and the whole machine's (`/proc/stat`: Ray's raylet and GCS,
and anything else running, are in it). The machine bound of a contender is (its client CPU +
the servers' CPU) / the CPU count: the wall below which this machine cannot go with the servers
on it too.

Run with `python -m benchmarks.bench_ray [--quick] [--rounds N]` (needs the `ray` extra).
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import importlib.util
import json
import os
import statistics
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio

import jevrefine as jr
from jevrefine.testing import FakeJevServer, FakeOpenAIServer
from jevrefine.testing._http import HTTPRequest, HTTPResponse, StreamingHTTPResponse

from . import bench_batch
from ._harness import bar, emit, figure, load_average
from .bench_batch import http_client, prompts, run_http_floor, run_http_refine_many
from .bench_scaling import servers_cpu

ROOT = Path(__file__).resolve().parent.parent
CONCURRENCY = 64  # refinements in flight per process
BATCH_SIZE = 64  # rows per batch handed to an actor
WINDOW_PATH = "/bench/window"
IN_PROCESS, FLOOR, RAY_1, RAY_2 = "in process", "floor", "Ray, 1 process", "Ray, 2 processes"
ACTORS = {RAY_1: 1, RAY_2: 2}


# --- the servers: stamp the first request and the last answer --------------------------------


class _Window:
    """The first request's arrival and the last answer's departure, across both servers."""

    def __init__(self) -> None:
        self._lock = threading.Lock()  # the two servers run in two threads
        self.first, self.last, self.requests = float("inf"), 0.0, 0

    def reset(self) -> dict[str, float | int]:
        """What was seen since the last reset; starts afresh."""
        with self._lock:
            seen = {"first": self.first, "last": self.last, "requests": self.requests}
            self.first, self.last, self.requests = float("inf"), 0.0, 0
        return seen

    def stamp(self, started: float) -> None:
        with self._lock:
            self.first = min(self.first, started)
            self.last = time.time()
            self.requests += 1


WINDOW = _Window()


class _TimedOpenAI(FakeOpenAIServer):
    async def handle(self, request: HTTPRequest) -> HTTPResponse | StreamingHTTPResponse:
        if request.path.endswith(WINDOW_PATH):  # read and reset, between runs
            self.requests.clear()  # the recorded requests would grow run after run
            return HTTPResponse.json(WINDOW.reset())
        started = time.time()
        response = await super().handle(request)
        WINDOW.stamp(started)
        return response


class _TimedJev(FakeJevServer):
    async def handle(self, request: HTTPRequest) -> HTTPResponse | StreamingHTTPResponse:
        started = time.time()
        response = await super().handle(request)
        WINDOW.stamp(started)
        if len(self.requests) > 10_000:
            self.requests.clear()
        return response


def serve() -> None:
    """`python -m benchmarks.bench_ray --serve`: both servers; prints their URLs."""

    async def main() -> None:
        async with _TimedOpenAI() as model, _TimedJev() as jev:
            print(model.base_url, jev.base_url, flush=True)
            await anyio.to_thread.run_sync(sys.stdin.read)  # until the parent closes stdin

    anyio.run(main)


class Servers(bench_batch.Servers):
    """The timed servers in a child process (their own GIL); `window()` reads and resets."""

    def __init__(self) -> None:
        super().__init__([sys.executable, "-m", "benchmarks.bench_ray", "--serve"])

    def window(self) -> dict[str, float]:
        with urllib.request.urlopen(self.model_url + WINDOW_PATH, timeout=30) as answer:
            seen: dict[str, float] = json.loads(answer.read())
        return seen

    def cpu(self) -> float:
        return servers_cpu([self.process.pid])


def machine_cpu() -> float:
    """CPU seconds the whole machine has been busy (Linux `/proc/stat`; 0 elsewhere)."""
    try:
        fields = Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]
    except OSError:
        return 0.0
    ticks = [int(x) for x in fields]
    busy = sum(ticks) - ticks[3] - ticks[4]  # all but idle and iowait
    return busy / os.sysconf("SC_CLK_TCK")


# --- the Ray side ----------------------------------------------------------------------------


@contextlib.asynccontextmanager
async def actor_client(
    model_url: str, jev_url: str, concurrency: int, reports: str
) -> AsyncIterator[jr.ChatClient]:
    """An actor's factory: `bench_batch`'s client; at teardown, its process's CPU to `reports`.

    Ray Data builds the client on an actor's first batch: an actor that got none (a quick run's
    few batches all went to the other) leaves no `started-` marker and is not waited for.
    """
    cpu0 = time.process_time()
    (Path(reports) / f"started-{os.getpid()}-{time.monotonic_ns()}").write_text("")
    async with http_client(_Urls(model_url, jev_url), concurrency) as client:
        yield client
    report = {"pid": os.getpid(), "cpu": time.process_time() - cpu0, "jevrefine": jr.__file__}
    name = f"actor-{os.getpid()}-{time.monotonic_ns()}.json"
    # Written aside and renamed: the reader polls for `actor-*.json` and must never see a file
    # that exists but is still empty (a loaded CI machine caught it between the two).
    partial = Path(reports) / f"partial-{name}"
    partial.write_text(json.dumps(report))
    partial.replace(Path(reports) / name)


class _Urls:
    """What `bench_batch.http_client` reads of its servers."""

    def __init__(self, model_url: str, jev_url: str) -> None:
        self.model_url = model_url
        self.jev_url = jev_url


def start_ray() -> tuple[Any, float]:
    """A local Ray of 2 CPUs, its workers importing this checkout; (ray, seconds to start)."""
    os.environ["RAY_USAGE_STATS_ENABLED"] = "0"  # Ray's usage report never leaves the machine
    import ray
    import ray.data

    # The workers import jevrefine and these benchmarks from the same place this process does.
    paths = [str(ROOT), *os.environ.get("PYTHONPATH", "").split(os.pathsep)]
    python_path = os.pathsep.join(os.path.abspath(p) for p in paths if p)
    started = time.perf_counter()
    ray.init(
        num_cpus=2,
        include_dashboard=False,
        log_to_driver=False,
        configure_logging=False,
        runtime_env={"env_vars": {"RAY_USAGE_STATS_ENABLED": "0", "PYTHONPATH": python_path}},
    )
    ray.data.DataContext.get_current().enable_progress_bars = False
    return ray, time.perf_counter() - started


def run_ray(ray: Any, servers: Servers, n: int, actors: int) -> tuple[float | None, int]:
    """Refine `n` inputs with `actors` actors (blocking); see `actor_cpu`."""
    from jevrefine.ray import refine_dataset

    with tempfile.TemporaryDirectory() as reports:
        factory = functools.partial(
            actor_client, servers.model_url, servers.jev_url, CONCURRENCY, reports
        )
        blocks = max(4 * actors, n // BATCH_SIZE)
        dataset = ray.data.from_items(
            [{"prompt": p} for p in prompts(n)], override_num_blocks=blocks
        )
        refined = refine_dataset(
            dataset,
            factory,
            num_actors=actors,
            concurrency_per_actor=CONCURRENCY,
            batch_size=BATCH_SIZE,
            num_cpus=0.5,
        )
        rows = refined.take_all()
        failed = [row["error"] for row in rows if row["error"] is not None]
        assert len(rows) == n, (len(rows), n)
        assert not failed, failed[:3]
        return actor_cpu(Path(reports))


def actor_cpu(reports: Path) -> tuple[float | None, int]:
    """The CPU of the actors that refined (None: one did not report) and how many they were.

    Ray retires the actors after the dataset is done: their reports come a little later.
    """
    deadline = time.monotonic() + 60
    started = found = 0
    while time.monotonic() < deadline:
        started = len(list(reports.glob("started-*")))
        found = len(list(reports.glob("actor-*.json")))
        if started and found >= started:
            break
        time.sleep(0.1)
    if not started or found < started:
        return None, started  # an actor not retired gracefully reports nothing: say so, not 0
    seen = [json.loads(p.read_text()) for p in reports.glob("actor-*.json")]
    elsewhere = {s["jevrefine"] for s in seen} - {jr.__file__}
    assert not elsewhere, f"the actors imported another jevrefine: {elsewhere}"
    return float(sum(s["cpu"] for s in seen)), started


# --- measuring -------------------------------------------------------------------------------


Outcome = tuple[float | None, int] | None
"""What a contender's run returns: a Ray run, its actors' CPU and how many refined."""


async def timed(servers: Servers, run: Callable[[], Awaitable[Outcome]]) -> dict[str, float | None]:
    """One run: end-to-end wall, the servers' active window, and every CPU figure."""
    servers.window()  # resets it
    server0, machine0 = servers.cpu(), machine_cpu()
    cpu0, wall0 = time.process_time(), time.perf_counter()
    outcome = await run()
    workers, processes = (None, 1) if outcome is None else outcome
    wall, cpu = time.perf_counter() - wall0, time.process_time() - cpu0
    window = servers.window()
    return {
        "wall": wall,
        "window": window["last"] - window["first"],
        "requests": window["requests"],
        "driver_cpu": cpu,
        "workers_cpu": workers,
        "processes": processes,
        "servers_cpu": servers.cpu() - server0,
        "machine_cpu": machine_cpu() - machine0,
    }


async def measure(ray: Any, ray_start: float, n: int, rounds: int) -> dict[str, Any]:
    try:
        with Servers() as servers:

            async def in_process() -> None:
                await run_http_refine_many(servers, n, CONCURRENCY)

            async def floor() -> None:
                # It first sends one refinement through jevrefine to record the Jev body: two
                # requests (a few ms) in its window.
                await run_http_floor(servers, n, CONCURRENCY)

            def on_ray(actors: int) -> Callable[[], Awaitable[Outcome]]:
                async def run() -> Outcome:
                    return await anyio.to_thread.run_sync(run_ray, ray, servers, n, actors)

                return run

            contenders: dict[str, Callable[[], Awaitable[Outcome]]] = {
                IN_PROCESS: in_process,
                FLOOR: floor,
                RAY_1: on_ray(1),
                RAY_2: on_ray(2),
            }
            # Warm-up: imports, Ray's worker start-up paths, the servers' first connections.
            warmup = {name: await timed(servers, run) for name, run in contenders.items()}
            samples: dict[str, list[dict[str, float | None]]] = {name: [] for name in contenders}
            for round_index in range(rounds):
                order = list(contenders) if round_index % 2 == 0 else list(reversed(contenders))
                for name in order:
                    samples[name].append(await timed(servers, contenders[name]))
    finally:
        ray.shutdown()
    return {
        "ray_init_seconds": ray_start,
        "load_average": load_average(),
        "warmup": warmup,
        "samples": samples,
    }


def _median(samples: list[dict[str, float | None]], key: str) -> float | None:
    """The median of `key` over rounds; None when a round has none (an unreported figure)."""
    values = [s[key] for s in samples]
    present = [v for v in values if v is not None]
    return statistics.median(present) if len(present) == len(values) else None


def _known(samples: list[dict[str, float | None]], key: str) -> float:
    value = _median(samples, key)
    if value is None:
        raise AssertionError(f"{key} is missing from a round")
    return value


def summary(samples: list[dict[str, float | None]], n: int, name: str) -> dict[str, Any]:
    """Medians over rounds, and the derived rates, per contender."""
    wall, window = _known(samples, "wall"), _known(samples, "window")
    driver, servers = _known(samples, "driver_cpu"), _known(samples, "servers_cpu")
    workers = _median(samples, "workers_cpu") if name in ACTORS else 0.0
    client = None if workers is None else driver + workers
    cores = os.cpu_count() or 1
    return {
        "wall": wall,
        "window": window,
        "rate_window": n / window,
        "rate_wall": n / wall,
        "client_cpu": client,
        "servers_cpu": servers,
        "machine_cpu": _median(samples, "machine_cpu"),
        "machine_bound": None if client is None else (client + servers) / cores,
        "machine_busy": (_median(samples, "machine_cpu") or 0.0) / (wall * cores),
        "requests": _median(samples, "requests"),
        "processes": min(s["processes"] or 0 for s in samples),
    }


def report(data: dict[str, Any], n: int, rounds: int) -> tuple[str, dict[str, Any]]:
    rows = {name: summary(s, n, name) for name, s in data["samples"].items()}
    one, two, local = rows[RAY_1], rows[RAY_2], rows[IN_PROCESS]
    floor_cpu = rows[FLOOR]["client_cpu"]
    cores = os.cpu_count() or 1

    def cpu_cell(value: float | None) -> str:
        return "not reported" if value is None else f"{value:.2f} s"

    def per_item(value: float | None) -> str:
        return "–" if value is None else f"{value / n * 1e6:,.0f} µs"

    lines = [
        f"## Ray: {n:,} refinements at 1 and 2 worker processes",
        "",
        f"Python {sys.version.split()[0]}, jevrefine {jr.__version__}, {cores} CPUs; "
        f"{rounds} round(s), medians, interleaved, after one warm-up run of each. Model + Jev "
        f"judge per input over HTTP, zero latency, servers in one child process; "
        f"{CONCURRENCY} in flight per process, batches of {BATCH_SIZE}. `ray.init(num_cpus=2)` "
        f"took {data['ray_init_seconds']:.1f} s (not in any row). Load average at the end: "
        f"{data['load_average']}. Command: "
        f"`python -m benchmarks.bench_ray{' --quick' if n < 1000 else ''}`.",
        "",
        "| contender | wall, end to end | active window | refinements/s (window) "
        "| refinements/s (end to end) | client CPU | per refinement | servers' CPU "
        "| machine CPU (busy) | machine bound |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for name, row in rows.items():
        bound = row["machine_bound"]
        lines.append(
            f"| {name} | {row['wall']:.2f} s | {row['window']:.2f} s "
            f"| **{row['rate_window']:,.0f}** | {row['rate_wall']:,.0f} "
            f"| {cpu_cell(row['client_cpu'])} | {per_item(row['client_cpu'])} "
            f"| {row['servers_cpu']:.2f} s "
            f"| {cpu_cell(row['machine_cpu'])} ({row['machine_busy']:.0%}) "
            f"| {'–' if bound is None else f'{bound:.2f} s'} |"
        )
    if two["processes"] < 2:
        lines += ["", f"Note: in a round of {RAY_2}, only one actor got batches to refine."]
    ratio_window = two["rate_window"] / one["rate_window"]
    ratio_wall = two["rate_wall"] / one["rate_wall"]
    lines += [
        "",
        f"- **2 processes / 1 process: {ratio_window:.2f}×** refinements/s over the active "
        f"window, {ratio_wall:.2f}× end to end (start-up included). Ray with 1 process / in "
        f"process: {one['rate_window'] / local['rate_window']:.2f}× over the window.",
        f"- Floor: {per_item(floor_cpu)} of client CPU per refinement; jevrefine in process "
        f"{per_item(local['client_cpu'])}. Ideal for k processes = the floor's CPU / k "
        f"(zero latency: no latency bound), here {floor_cpu / 2:.2f} s at 2 — below every "
        "machine bound: the servers' CPU shares the same cores.",
        "- What limits it: two worker processes, the servers' process and Ray's own "
        f"(raylet, GCS, the driver) share {cores} cores. Busy = the machine's CPU over "
        f"{cores} × the end-to-end wall (everything running on the machine counts); the machine "
        "bound is (the contender's client CPU + the servers' CPU) / the CPU count.",
    ]
    return "\n".join(lines), rows


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="300 inputs, one round")
    parser.add_argument("--rounds", type=int, default=3, help="timed rounds per contender")
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.serve:
        serve()
        return
    if importlib.util.find_spec("ray") is None:  # the `ray` extra is not in `bench`
        reason = 'Ray is not installed: pip install "jevrefine[ray]"'
        emit(f"## Ray: skipped\n\n{reason}.", {"skipped": reason})
        return
    n, rounds = (300, 1) if args.quick else (4_000, args.rounds)
    # Ray starts on the main thread: its raylet and GCS die with the thread that started them
    # (the parent-death signal is per thread), and a worker thread of anyio's pool retires after
    # 10 s idle, which took the local cluster down in the middle of a run.
    ray, ray_start = start_ray()
    data = anyio.run(measure, ray, ray_start, n, rounds)
    markdown, rows = report(data, n, rounds)
    bars = [
        bar(name, [n / s["window"] for s in samples]) for name, samples in data["samples"].items()
    ]
    emit(
        markdown,
        {"n": n, "rounds": rounds, "concurrency": CONCURRENCY, "rows": rows, **data},
        [figure("ray", f"Ray: {n:,} refinements (active window)", "refinements/s", bars)],
    )


if __name__ == "__main__":
    main()
