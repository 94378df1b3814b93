"""Timing helpers shared by the benchmarks: interleaved rounds, medians, spreads and ratios.

Every comparison alternates its contenders round by round inside one process, so that machine
noise (other processes, CPU frequency) hits all of them alike, and reports the median over rounds
with the interquartile range.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass


@dataclass(frozen=True)
class Measurement:
    """Per-operation times (seconds) of one contender, one value per round."""

    name: str
    per_op: list[float]

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
    names = list(contenders)
    for round_index in range(rounds):
        # Alternate the order too, so no contender always runs right after another.
        order = names if round_index % 2 == 0 else list(reversed(names))
        for name in order:
            call = contenders[name]
            started = time.perf_counter()
            for _ in range(ops_per_round):
                await call()
            times[name].append((time.perf_counter() - started) / ops_per_round)
    return {name: Measurement(name, values) for name, values in times.items()}


def micros(seconds: float) -> str:
    """Seconds as microseconds, for tables."""
    return f"{seconds * 1e6:,.1f} µs"
