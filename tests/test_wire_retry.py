"""The wire's one retry loop, `retrying`, entered after a first attempt the caller made itself.

The Jev client and the model adapters make their first attempt inline and hand its failure over
(`failed=`): the loop must treat it exactly as a failure it caught itself.
"""

from __future__ import annotations

import math

import anyio
import httpx2
import pytest

from jevrefine._http._retry import RetryPolicy, retrying


class Recorder:
    """An attempt function that fails `failures` times, then answers; records the calls."""

    def __init__(self, failures: list[Exception]) -> None:
        self.failures = failures
        self.calls: list[int] = []

    async def __call__(self, retry: int) -> str:
        self.calls.append(retry)
        if self.failures:
            raise self.failures.pop(0)
        return f"answer of retry {retry}"


def policy(*, max_retries: int = 2, waits: list[float] | None = None) -> RetryPolicy:
    async def no_wait(seconds: float) -> None:
        if waits is not None:
            waits.append(seconds)

    return RetryPolicy(max_retries=max_retries, jitter=0, sleep=no_wait)


@pytest.mark.anyio
async def test_a_handed_over_failure_is_retried_from_retry_one() -> None:
    attempt = Recorder([])
    waits: list[float] = []
    result = await retrying(
        policy(waits=waits), attempt, deadline=math.inf, failed=httpx2.ConnectError("refused")
    )
    assert result == "answer of retry 1"
    assert attempt.calls == [1]
    assert waits == [0.5]  # the backoff of the first retry


@pytest.mark.anyio
async def test_a_handed_over_failure_counts_against_max_retries() -> None:
    attempt = Recorder([httpx2.ConnectError("again"), httpx2.ConnectError("and again")])
    with pytest.raises(httpx2.ConnectError, match="and again"):
        await retrying(policy(), attempt, deadline=math.inf, failed=httpx2.ConnectError("first"))
    assert attempt.calls == [1, 2]  # 1 handed over + 2 retries: the policy's 3 attempts


@pytest.mark.anyio
async def test_a_handed_over_failure_not_worth_retrying_is_raised_unchanged() -> None:
    attempt = Recorder([])
    failure = ValueError("a bug, not a network failure")
    with pytest.raises(ValueError, match="a bug") as raised:
        await retrying(policy(), attempt, deadline=math.inf, failed=failure)
    assert raised.value is failure
    assert attempt.calls == []


@pytest.mark.anyio
async def test_no_retry_when_the_wait_would_cross_the_deadline() -> None:
    attempt = Recorder([])
    failure = httpx2.ReadTimeout("slow")
    deadline = anyio.current_time() + 0.1  # the first backoff is 0.5 s
    with pytest.raises(httpx2.ReadTimeout) as raised:
        await retrying(policy(), attempt, deadline=deadline, failed=failure)
    assert raised.value is failure
    assert attempt.calls == []


@pytest.mark.anyio
async def test_the_last_failure_carries_no_earlier_failure_as_its_context() -> None:
    # Raised outside the handler that caught it: a retried-out error does not drag the
    # previous attempts' errors (and the frames they hold) along as `__context__`.
    attempt = Recorder([httpx2.ConnectError("second")])
    with pytest.raises(httpx2.ConnectError) as raised:
        await retrying(
            policy(max_retries=1), attempt, deadline=math.inf, failed=httpx2.ConnectError("1st")
        )
    assert str(raised.value) == "second"
    assert raised.value.__context__ is None
