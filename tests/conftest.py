"""Shared fixtures: the real local model server (once per session), a fake Jev server and a
`JudgeClient` on it (for tests of the Jev side and of the judge), and OpenTelemetry in memory."""

from __future__ import annotations

import importlib.util
import logging
import os
from collections.abc import AsyncIterator, Iterator

import pytest

from jevrefine.jev import JudgeClient, RetryPolicy
from jevrefine.local import LocalModelServer, LocalModelUnavailableError
from jevrefine.testing import FakeJevServer
from support import Sleeps, Telemetry

API_KEY = "sk-test-SECRET-0123456789"
"""The key the `jev` fixture's client sends."""

# The fast-path pins run in `nox -s perf` (JEVREFINE_PERF=1), not in the suite: a dependency
# outside a measured series runs the public path, which the suite tests (test_fast_path_gates).
collect_ignore = [] if os.environ.get("JEVREFINE_PERF") else ["perf"]


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
