"""`RetryPolicy`: which failures of a Jev call are tried again, and how long to wait in between.

The defaults are the official SDK's: 2 retries; 408, 429 and every 5xx (529 included),
connection errors and timeouts are retried; exponential backoff 0.5 s doubling up to 5 s, minus up
to 25 % jitter; a server's `retry-after-ms`, else `retry-after` (seconds or an HTTP date), wins
over the backoff. The whole call, waits included, is bounded by the client's `total_timeout`.
A server that asks for a wait longer than `max_retry_after` (60 s) is not waited for: its error
is raised at once (a hostile or confused `Retry-After: 1e300` must not park the call forever).
"""

from __future__ import annotations

import random
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field

import anyio

from .. import _validate as check
from .._http._headers import parse_retry_after
from .errors import JudgeAPIError, JudgeConnectionError, JudgeUsageError

__all__ = ["DEFAULT_RETRY_STATUSES", "RetryPolicy", "parse_retry_after"]

DEFAULT_RETRY_STATUSES: frozenset[int] = frozenset({408, 429, *range(500, 600)})
"""408, 429 and every 5xx (529 included)."""


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """How a `JudgeClient` retries a failed call. Frozen; share one across clients.

    `sleep` is what waits between attempts; tests pass a function that records the delay and
    returns at once, so backoff tests take no time:

    ```python
    delays: list[float] = []
    async def no_wait(seconds: float) -> None:
        delays.append(seconds)
    client = JudgeClient("key", retry=RetryPolicy(sleep=no_wait))
    ```
    """

    max_retries: int = 2
    """Retries after the first attempt; 0 turns retrying off."""
    initial_backoff: float = 0.5
    """The first wait, in seconds; doubled on each retry."""
    max_backoff: float = 5.0
    """The longest backoff wait, in seconds."""
    jitter: float = 0.25
    """Up to this fraction of each backoff wait is taken off at random (0 to 1)."""
    retry_statuses: frozenset[int] = DEFAULT_RETRY_STATUSES
    """HTTP statuses that are retried."""
    respect_retry_after: bool = True
    """Wait as long as the server's `retry-after-ms` / `retry-after` header says."""
    max_retry_after: float = 60.0
    """The longest server-requested wait honoured, in seconds; a longer one is not retried."""
    sleep: Callable[[float], Awaitable[None]] = field(default=anyio.sleep, compare=False)
    """Waits between attempts (`anyio.sleep`); inject a fake in tests."""

    def __post_init__(self) -> None:
        values = {
            "max_retries": check.integer(
                "max_retries", self.max_retries, minimum=0, example=2, error=JudgeUsageError
            ),
            "jitter": check.number(
                "jitter", self.jitter, minimum=0, maximum=1, example=0.25, error=JudgeUsageError
            ),
            "respect_retry_after": check.boolean(
                "respect_retry_after", self.respect_retry_after, error=JudgeUsageError
            ),
            "retry_statuses": _statuses(self.retry_statuses),
        }
        for name, example in (
            ("initial_backoff", 0.5),
            ("max_backoff", 5.0),
            ("max_retry_after", 60.0),
        ):
            values[name] = check.number(
                name,
                getattr(self, name),
                minimum=0,
                unit="seconds",
                example=example,
                error=JudgeUsageError,
            )
        if not callable(self.sleep):
            raise JudgeUsageError(
                f"sleep={check.shown(self.sleep)} is not callable: pass an async function of "
                "the seconds to wait, e.g. sleep=anyio.sleep"
            )
        for name, value in values.items():
            object.__setattr__(self, name, value)

    def should_retry(self, error: BaseException) -> bool:
        """Whether `error` is worth another attempt under this policy."""
        if isinstance(error, JudgeAPIError):
            if (
                self.respect_retry_after
                and error.retry_after is not None
                and error.retry_after > self.max_retry_after
            ):
                return False  # the server asked for longer than we will wait: say so now
            return error.status_code in self.retry_statuses
        return isinstance(error, JudgeConnectionError)

    def backoff(self, retry: int) -> float:
        """The backoff before retry number `retry` (1 for the first), jitter applied."""
        if self.initial_backoff == 0 or self.max_backoff == 0:
            return 0.0
        exponential = min(self.max_backoff, self.initial_backoff * 2.0 ** (retry - 1))
        return exponential * (1.0 - random.random() * self.jitter)

    def delay(self, error: BaseException, retry: int) -> float:
        """How long to wait before retry number `retry` after `error`."""
        if (
            self.respect_retry_after
            and isinstance(error, JudgeAPIError)
            and error.retry_after is not None
        ):
            return error.retry_after
        return self.backoff(retry)


def _statuses(value: object) -> frozenset[int]:
    hint = "pass HTTP status codes, e.g. retry_statuses={429, 503}"
    if isinstance(value, str | bytes) or not isinstance(value, Iterable):
        raise JudgeUsageError(f"retry_statuses={check.shown(value)} is not a set: {hint}")
    statuses = frozenset(value)
    for status in statuses:
        check.integer(
            "retry_statuses", status, minimum=100, maximum=599, example=429, error=JudgeUsageError
        )
    return statuses
