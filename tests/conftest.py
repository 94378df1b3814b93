"""Shared fixtures: the real local model server (once per session), a fake Jev server and a
`JudgeClient` on it (for tests of the Jev side and of the judge), and OpenTelemetry in memory."""

from __future__ import annotations

import importlib.util
import logging
import os
from collections.abc import AsyncIterator, Iterator

import pytest

from jevrefine._measured import installed_version, takes_fast_path
from jevrefine.jev import JudgeClient, RetryPolicy
from jevrefine.local import LocalModelServer, LocalModelUnavailableError
from jevrefine.testing import FakeJevServer
from support import Sleeps, Telemetry, measured_fast_paths

API_KEY = "sk-test-SECRET-0123456789"
"""The key the `jev` fixture's client sends."""

# The fast-path pins run in `nox -s perf` (JEVREFINE_PERF=1), not in the suite: a dependency
# outside a measured series runs the public path, which the suite tests (test_fast_path_gates).
collect_ignore = [] if os.environ.get("JEVREFINE_PERF") else ["perf"]


def pytest_sessionstart(session: pytest.Session) -> None:
    """Under `nox -s tests` (JEVREFINE_MEASURED=1) every fast path must be open, or the run stops.

    The suite tests both paths on the measured series (constraints/measured.txt): a pin that
    drifted from a `FastPath`'s `measured` would otherwise show up as a hundred unrelated
    failures instead of one line naming the version.
    """
    if not os.environ.get("JEVREFINE_MEASURED"):
        return
    closed = [
        f"{path.distribution} {installed_version(path.distribution)} (measured "
        f"{path.measured[0][0]}.{path.measured[0][1]} up to "
        f"{path.measured[1][0]}.{path.measured[1][1]})"
        for path in measured_fast_paths()
        if not takes_fast_path(path)
    ]
    if closed:
        pytest.exit(
            "the suite runs on the measured series, but these are outside it: "
            + "; ".join(closed)
            + ". Install with `-c constraints/measured.txt` (nox -s tests does), or bump the "
            "pin and the FastPath together (nox -s perf).",
            returncode=3,
        )


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(autouse=True)
def _restore_jevrefine_log_levels() -> Iterator[None]:
    """Put back every `jevrefine.*` logger's level after each test.

    A test that quiets expected warnings must not hide them from the tests after it (caplog
    sees only what the logger lets through), whatever order the suite runs in.
    """
    manager = logging.Logger.manager
    names = ["jevrefine", *(n for n in manager.loggerDict if n.startswith("jevrefine."))]
    levels = {name: logging.getLogger(name).level for name in names}
    yield
    for name, level in levels.items():
        logging.getLogger(name).setLevel(level)


@pytest.fixture(scope="session")
def local_server() -> Iterator[LocalModelServer]:
    """The real llama.cpp server with SmolLM2, one thread, shared by the whole session.

    Skipped (with the reason) only when xllamacpp is missing and CI is unset; under CI=true a
    missing local model fails the run.
    """
    if importlib.util.find_spec("xllamacpp") is None and not os.environ.get("CI"):
        pytest.skip('the local model needs xllamacpp: pip install "jevrefine[local]"')
    server = LocalModelServer(threads=1, ctx=4096)
    try:
        server.start()
    except LocalModelUnavailableError as exc:
        if os.environ.get("CI"):
            raise
        pytest.skip(f"local model unavailable: {exc}")
    yield server
    server.stop()


@pytest.fixture
def otel() -> Telemetry:
    return Telemetry()


@pytest.fixture
async def jev_server() -> AsyncIterator[FakeJevServer]:
    """A `FakeJevServer` with its default answers."""
    async with FakeJevServer() as server:
        yield server


@pytest.fixture
def sleeps() -> Sleeps:
    return Sleeps()


@pytest.fixture
async def jev(jev_server: FakeJevServer, sleeps: Sleeps) -> AsyncIterator[JudgeClient]:
    """A `JudgeClient` on `jev_server`, its retries' waits recorded in `sleeps` (no jitter)."""
    async with JudgeClient(
        API_KEY, base_url=jev_server.base_url, retry=RetryPolicy(sleep=sleeps, jitter=0.0)
    ) as client:
        yield client
