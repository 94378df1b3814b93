"""Timing helpers shared by the benchmarks: interleaved rounds, medians, spreads and ratios.

Every comparison alternates its contenders round by round inside one process, so that machine
noise (other processes, CPU frequency) hits all of them alike, and reports the median over rounds
with the interquartile range.
"""

from __future__ import annotations

import gc
import json
import os
import statistics
import sys
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class Measurement:
    """Per-operation times (seconds) of one contender, one value per round."""

    name: str
    per_op: list[float]
    cpu_per_op: list[float] = field(default_factory=list)
    """This process's CPU time per operation, one value per round (the client's alone when the
    server runs in another process)."""

    @property
    def median(self) -> float:
        return statistics.median(self.per_op)

    @property
    def spread(self) -> tuple[float, float]:
        """The interquartile range (25th and 75th percentiles)."""
        if len(self.per_op) < 4:
            return (min(self.per_op), max(self.per_op))
        q = statistics.quantiles(self.per_op, n=4)
        return (q[0], q[2])


async def interleaved(
    contenders: Mapping[str, Callable[[], Awaitable[object]]],
    *,
    rounds: int,
    ops_per_round: int,
    warmup: int = 200,
) -> dict[str, Measurement]:
    """Time each contender for `ops_per_round` operations per round, alternating every round."""
    for call in contenders.values():
        for _ in range(warmup):
            await call()
    times: dict[str, list[float]] = {name: [] for name in contenders}
    cpu: dict[str, list[float]] = {name: [] for name in contenders}
    names = list(contenders)
    for round_index in range(rounds):
        # Alternate the order too, so no contender always runs right after another.
        order = names if round_index % 2 == 0 else list(reversed(names))
        for name in order:
            call = contenders[name]
            gc.collect()  # every block starts from the same heap, not the previous one's garbage
            cpu0, started = time.process_time(), time.perf_counter()
            for _ in range(ops_per_round):
                await call()
            times[name].append((time.perf_counter() - started) / ops_per_round)
            cpu[name].append((time.process_time() - cpu0) / ops_per_round)
    return {name: Measurement(name, values, cpu[name]) for name, values in times.items()}


async def python_calls_per_op(call: Callable[[], Awaitable[object]], ops: int) -> float:
    """Python function calls made per operation (cProfile's count): a measure of work done
    that, unlike time, no other process on the machine can disturb."""
    import cProfile
    import pstats

    profile = cProfile.Profile()
    profile.enable()
    try:
        for _ in range(ops):
            await call()
    finally:
        profile.disable()
    return float(pstats.Stats(profile).total_calls) / ops


def micros(seconds: float) -> str:
    """Seconds as microseconds, for tables."""
    return f"{seconds * 1e6:,.1f} µs"


# -- machine-readable results -------------------------------------------------------------------
#
# `python -m benchmarks` runs each module in its own process and sets JEVREFINE_BENCH_JSON to a
# file for it; a module writes its numbers there with `emit`. Run alone, a module just prints.

JSON_ENV = "JEVREFINE_BENCH_JSON"


def spread_of(values: Sequence[float]) -> tuple[float, float]:
    """The interquartile range of `values` (min and max when there are fewer than four)."""
    if len(values) < 4:
        return (min(values), max(values))
    q = statistics.quantiles(values, n=4)
    return (q[0], q[2])


def bar(label: str, values: Sequence[float], *, scale: float = 1.0) -> dict[str, Any]:
    """One bar of a figure: the median of `values` and its spread, times `scale` (a unit change)."""
    low, high = spread_of(values)
    return {
        "label": label,
        "median": statistics.median(values) * scale,
        "low": low * scale,
        "high": high * scale,
        "samples": len(values),
    }


def figure(
    name: str,
    title: str,
    unit: str,
    bars: list[dict[str, Any]],
    *,
    ideal: float | None = None,
    ideal_label: str = "ideal",
) -> dict[str, Any]:
    """A plot: horizontal bars (median, whisker = spread), optionally a dashed ideal line."""
    return {
        "name": name,
        "title": title,
        "unit": unit,
        "bars": bars,
        "ideal": ideal,
        "ideal_label": ideal_label,
    }


def emit(markdown: str, data: dict[str, Any], figures: Sequence[dict[str, Any]] = ()) -> None:
    """Print the Markdown section; write the numbers and figures where the harness asked."""
    sys.stdout.write(markdown.rstrip() + "\n")
    path = os.environ.get(JSON_ENV)
    if path:
        payload = {"markdown": markdown, "data": data, "figures": list(figures)}
        Path(path).write_text(json.dumps(payload, indent=2, default=str))


def skipped(reason: str) -> dict[str, str]:
    """A contender left out of this run, and why (for the JSON and the report)."""
    return {"skipped": reason}


def load_average() -> str:
    """The machine's 1-, 5- and 15-minute load averages, for the line next to every number: on a
    shared machine, wall time means little without them (CPU time far less depends on them)."""
    try:
        one, five, fifteen = os.getloadavg()
    except OSError:  # pragma: no cover - platforms without getloadavg
        return "unknown"
    return f"{one:.2f} / {five:.2f} / {fifteen:.2f}"
