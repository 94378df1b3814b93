"""`RetryPolicy`: which failures of a Jev call are tried again, and how long to wait in between.

The defaults are the official SDK's: 2 retries; 408, 429 and every 5xx (529 included),
connection errors and timeouts are retried; exponential backoff 0.5 s doubling up to 5 s, minus up
to 25 % jitter; a server's `retry-after-ms`, else `retry-after` (seconds or an HTTP date), wins
over the backoff. The whole call, waits included, is bounded by the client's `total_timeout`.
"""

from __future__ import annotations

import math
import random
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

import anyio

from .._headers import parse_retry_after
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
    sleep: Callable[[float], Awaitable[None]] = field(default=anyio.sleep, compare=False)
    """Waits between attempts (`anyio.sleep`); inject a fake in tests."""

    def __post_init__(self) -> None:
        if not isinstance(self.max_retries, int) or self.max_retries < 0:
            raise JudgeUsageError(f"max_retries must be an int >= 0, got {self.max_retries!r}")
        for name in ("initial_backoff", "max_backoff"):
            value = getattr(self, name)
            if not math.isfinite(value) or value < 0:
                raise JudgeUsageError(
                    f"{name} must be a finite number of seconds >= 0, got {value}"
                )
        if not 0 <= self.jitter <= 1:
            raise JudgeUsageError(f"jitter must be between 0 and 1, got {self.jitter}")
        if not isinstance(self.retry_statuses, frozenset):
            object.__setattr__(self, "retry_statuses", frozenset(self.retry_statuses))

    def should_retry(self, error: BaseException) -> bool:
        """Whether `error` is worth another attempt under this policy."""
        if isinstance(error, JudgeAPIError):
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
