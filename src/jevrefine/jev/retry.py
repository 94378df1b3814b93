"""`RetryPolicy`: which failures of a Jev call are tried again, and how long to wait in between.

The wire's one retry policy (`jevrefine._http._retry`), with the Jev side's error type for a bad
setting. The defaults are the official SDK's: 2 retries; 408, 429 and every 5xx (529 included),
connection errors and timeouts are retried; exponential backoff 0.5 s doubling up to 5 s, minus up
to 25 % jitter; a server's `retry-after-ms`, else `retry-after` (seconds or an HTTP date), wins
over the backoff. The whole call, waits included, is bounded by the client's `total_timeout`.
A server that asks for a wait longer than `max_retry_after` (60 s) is not waited for: its error
is raised at once (a hostile or confused `Retry-After: 1e300` must not park the call forever).
An answer that is not a valid response is never retried (`JudgeResponseError`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from .._http._headers import parse_retry_after
from .._http._retry import DEFAULT_RETRY_STATUSES
from .._http._retry import RetryPolicy as _WireRetryPolicy
from ..exceptions import UserError
from .errors import JudgeAPIError, JudgeConnectionError, JudgeUsageError

__all__ = ["DEFAULT_RETRY_STATUSES", "RetryPolicy", "parse_retry_after"]


@dataclass(frozen=True, slots=True)
class RetryPolicy(_WireRetryPolicy):
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

    usage_error: ClassVar[type[UserError]] = JudgeUsageError

    def should_retry(self, error: BaseException) -> bool:
        """Whether `error` (a `JudgeError`) is worth another attempt under this policy."""
        if isinstance(error, JudgeAPIError):
            return self.retries_status(error.status_code, error.retry_after)
        return isinstance(error, JudgeConnectionError)

    def delay(self, error: BaseException, retry: int) -> float:
        """How long to wait before retry number `retry` after `error`."""
        retry_after = error.retry_after if isinstance(error, JudgeAPIError) else None
        return self.wait(retry_after, retry)
