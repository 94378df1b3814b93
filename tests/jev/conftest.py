from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from jevrefine.jev import JudgeClient, RetryPolicy
from jevrefine.testing import FakeJevServer
from support import Sleeps

API_KEY = "sk-test-SECRET-0123456789"


@pytest.fixture
def sleeps() -> Sleeps:
    return Sleeps()


@pytest.fixture
async def jev(jev_server: FakeJevServer, sleeps: Sleeps) -> AsyncIterator[JudgeClient]:
    async with JudgeClient(
        API_KEY, base_url=jev_server.base_url, retry=RetryPolicy(sleep=sleeps, jitter=0.0)
    ) as client:
        yield client
