"""Fast paths taken only inside the dependency versions they were measured with.

A fast path that leans on a dependency's internals (the SDKs' private request helpers,
OpenTelemetry's module globals, how httpx2 treats a transport, pydantic-core's codec) is declared
as a `FastPath` in the one module that takes it, naming the benchmark that justifies it and the
version series it was measured with. `takes_fast_path` checks the installed version once per
process and says which path runs, and why, in one DEBUG line of the `jevrefine.fastpath`
logger; outside the series the public path runs. So a user's `pip install -U` never silently
breaks a call, and a maintainer's dependency bump is a perf task (`nox -s perf`), not a red
suite.
"""

from __future__ import annotations

import functools
import importlib.metadata
import logging
from dataclasses import dataclass
from typing import Final

__all__ = ["FastPath", "installed_version", "series", "takes_fast_path"]

_log: Final = logging.getLogger("jevrefine.fastpath")


@dataclass(frozen=True, slots=True, kw_only=True)
class FastPath:
    """One fast path and the versions of the one dependency it was measured with."""

    name: str
    """What it is, for the log line (`"the lean OpenAI request"`)."""
    distribution: str
    """The distribution it leans on (`"openai"`)."""
    measured: tuple[tuple[int, int], tuple[int, int]]
    """The (major, minor) series measured: from the first, up to but not including the second."""
    benchmark: str
    """The benchmark to re-run before widening `measured` (`"bench_adapter_cpu"`)."""

    def covers(self, version: str) -> bool:
        """Whether `version` is inside the measured series."""
        low, high = self.measured
        parsed = series(version)
        return parsed is not None and low <= parsed < high


def series(version: str) -> tuple[int, int] | None:
    """`(major, minor)` of a version string (`"3.57.0"` -> `(3, 57)`), `None` if unreadable."""
    parts = version.split(".")
    try:
        return int(parts[0]), int(parts[1])
    except (IndexError, ValueError):
        return None


def installed_version(distribution: str) -> str | None:
    """The installed version of `distribution`, `None` when it is not installed."""
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return None


@functools.cache
def takes_fast_path(path: FastPath) -> bool:
    """Whether `path` runs here: its dependency's installed version is in the measured series.

    Checked once per process (`takes_fast_path.cache_clear()` checks again); the answer and the
    reason go to the `jevrefine.fastpath` logger at DEBUG.
    """
    version = installed_version(path.distribution)
    low, high = path.measured
    window = f"{low[0]}.{low[1]} up to {high[0]}.{high[1]}"
    if version is not None and path.covers(version):
        _log.debug(
            "%s is used: %s %s is in the series it was measured with (%s)",
            path.name,
            path.distribution,
            version,
            window,
        )
        return True
    _log.debug(
        "%s is not used, the public path runs instead: %s %s is outside the series it was "
        "measured with (%s); to widen it, re-run %s",
        path.name,
        path.distribution,
        version or "(not installed)",
        window,
        path.benchmark,
    )
    return False
