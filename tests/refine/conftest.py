"""Fixtures for the self-refine tests: a FakeJevServer judge with retries that never wait."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from jevrefine.jev import JudgeClient, RetryPolicy
from jevrefine.testing import FakeJevServer


async def _no_sleep(seconds: float) -> None:
    return None


@pytest.fixture
async def jev_server() -> AsyncIterator[FakeJevServer]:
    async with FakeJevServer() as server:
        yield server


@pytest.fixture
async def jev(jev_server: FakeJevServer) -> AsyncIterator[JudgeClient]:
    # One retry, no waiting: a failure injected twice outlasts the client's own retries.
    retry = RetryPolicy(max_retries=1, sleep=_no_sleep, jitter=0.0)
    async with JudgeClient(
        "sk-refine-SECRET-42", base_url=jev_server.base_url, retry=retry, timeout=0.5
    ) as client:
        yield client
