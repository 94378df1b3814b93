"""The one retry policy of the wire: which failures are tried again, and how long to wait.

Every request jevrefine sends is retried by a `RetryPolicy` through `retrying`: the Jev client's
calls, the model adapters' whole-response calls and the opening of their streams (on the raw
core and on the SDKs' public request alike: the SDK clients the adapters build retry nothing
themselves), so one answer gets one treatment whichever path carried it.

What is retried: an error status in `retry_statuses` (a server's `x-should-retry` header
overrides that where `should_retry_header` is on, as the vendor SDKs read it), a timeout, and a
connection that failed before an answer. What is never retried: an answer that is not HTTP
(`MalformedResponseError`), a body over the cap, a body that does not decode — the server would
answer so again, and each resend is billed. The wait is the server's `retry-after-ms` /
`retry-after` when it asks (a wait longer than `max_retry_after` is not made: the error is given
at once, so `Retry-After: 1e300` cannot park a call), else an exponential backoff with jitter.
No wait crosses the caller's deadline: the last error is given instead.
"""

from __future__ import annotations

import random
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, Final, TypeVar

import anyio
import httpx2

from .. import _validate
from ..exceptions import ResponseTooLargeError, UserError
from ._clock import loop_time
from ._h11 import MalformedResponseError
from ._headers import parse_retry_after
from ._pool import RawResponse

__all__ = [
    "DEFAULT_RETRY_STATUSES",
    "SDK_RETRY_STATUSES",
    "RetryPolicy",
    "StatusError",
    "retrying",
]

DEFAULT_RETRY_STATUSES: Final[frozenset[int]] = frozenset({408, 429, *range(500, 600)})
"""408, 429 and every 5xx (529 included): the Jev SDK's set."""

SDK_RETRY_STATUSES: Final[frozenset[int]] = frozenset({408, 409, 429, *range(500, 600)})
"""The vendor SDKs' set (`openai`, `anthropic`): 409 (a lock conflict) too."""

T = TypeVar("T")


class StatusError(Exception):
    """An answer with an error status, as one attempt's outcome; `retrying` may try again.

    The wire's own type, raised by an attempt and caught by whoever maps statuses to the
    caller's error types once retrying is over.
    """

    def __init__(self, response: RawResponse) -> None:
        super().__init__(f"HTTP {response.status_code}")
        self.response = response
        """The whole answer: status, header lines and body."""

    @property
    def retry_after(self) -> float | None:
        """The wait the server asked for (`retry-after-ms`, else `retry-after`), if any."""
        return parse_retry_after(_HeaderView(self.response))


class _HeaderView(Mapping[str, str]):
    """A `RawResponse`'s two retry headers as the mapping `parse_retry_after` reads."""

    __slots__ = ("_response",)

    def __init__(self, response: RawResponse) -> None:
        self._response = response

    def __getitem__(self, name: str) -> str:
        value = self._response.header(name.lower().encode("latin-1"))
        if value is None:
            raise KeyError(name)
        return value

    def __iter__(self) -> Any:
        return iter(name for name in ("retry-after-ms", "retry-after") if name in self)

    def __len__(self) -> int:
        return sum(1 for _ in self)

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and self._response.header(name.encode("latin-1")) is not None


_NEVER_RETRIED: Final = (MalformedResponseError, ResponseTooLargeError, httpx2.DecodingError)
"""Answers no resend would mend: bytes that are no HTTP, a body over the cap, one that does
not decode. Checked before the transport errors they subclass."""


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """How a failed request is retried: which failures, how many times, how long to wait.

    Frozen; share one across clients. `sleep` is what waits between attempts; tests pass a
    function that records the delay and returns at once, so backoff tests take no time:

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
    should_retry_header: bool = False
    """Let a server's `x-should-retry: true|false` decide over `retry_statuses` (as the vendor
    SDKs do)."""

    usage_error: ClassVar[type[UserError]] = UserError
    """The error a bad setting raises (the Jev side's policy raises `JudgeUsageError`)."""

    def __post_init__(self) -> None:
        error = self.usage_error
        values: dict[str, object] = {
            "max_retries": _validate.integer(
                "max_retries", self.max_retries, minimum=0, example=2, error=error
            ),
            "jitter": _validate.number(
                "jitter", self.jitter, minimum=0, maximum=1, example=0.25, error=error
            ),
            "respect_retry_after": _validate.boolean(
                "respect_retry_after", self.respect_retry_after, error=error
            ),
            "should_retry_header": _validate.boolean(
                "should_retry_header", self.should_retry_header, error=error
            ),
            "retry_statuses": _statuses(self.retry_statuses, error),
        }
        for name, example in (
            ("initial_backoff", 0.5),
            ("max_backoff", 5.0),
            ("max_retry_after", 60.0),
        ):
            values[name] = _validate.number(
                name, getattr(self, name), minimum=0, unit="seconds", example=example, error=error
            )
        if not callable(self.sleep):
            raise error(
                f"sleep={_validate.shown(self.sleep)} is not callable: pass an async function of "
                "the seconds to wait, e.g. sleep=anyio.sleep"
            )
        for name, value in values.items():
            object.__setattr__(self, name, value)

    def retries_status(
        self, status: int, retry_after: float | None, should_retry: str | None = None
    ) -> bool:
        """Whether an answer with `status` is worth another attempt.

        `retry_after` is the wait the server asked for; `should_retry` its `x-should-retry`
        header (read only with `should_retry_header`).
        """
        if (
            self.respect_retry_after
            and retry_after is not None
            and (retry_after > self.max_retry_after)
        ):
            return False  # the server asked for longer than we will wait: say so now
        if self.should_retry_header and should_retry in ("true", "false"):
            return should_retry == "true"
        return status in self.retry_statuses

    def backoff(self, retry: int) -> float:
        """The backoff before retry number `retry` (1 for the first), jitter applied."""
        if self.initial_backoff == 0 or self.max_backoff == 0:
            return 0.0
        exponential = min(self.max_backoff, self.initial_backoff * 2.0 ** (retry - 1))
        return exponential * (1.0 - random.random() * self.jitter)

    def wait(self, retry_after: float | None, retry: int) -> float:
        """How long to wait before retry number `retry`, the server's wish first."""
        if self.respect_retry_after and retry_after is not None:
            return retry_after
        return self.backoff(retry)

    def retries(self, failure: BaseException) -> bool:
        """Whether one attempt's failure (a `StatusError` or a transport error) is retried."""
        if isinstance(failure, StatusError):
            response = failure.response
            return self.retries_status(
                response.status_code, failure.retry_after, response.header(b"x-should-retry")
            )
        if isinstance(failure, _NEVER_RETRIED):
            return False
        return isinstance(failure, httpx2.TransportError)


RetryNote = Callable[[BaseException, int, float], None]
"""Told of each retry before its wait: (the failure, the retry's number, the wait in seconds)."""


async def retrying(
    policy: RetryPolicy,
    attempt: Callable[[int], Awaitable[T]],
    *,
    deadline: float,
    on_retry: RetryNote | None = None,
    retries: Callable[[BaseException], bool] | None = None,
    failed: Exception | None = None,
) -> T:
    """`attempt(n)`'s result (n: the retries taken so far), retried by `policy` on failure.

    `attempt` raises a `StatusError` for an error status and the transport's errors for no
    answer (or a caller's own errors: an API error type with a `retry_after` in seconds);
    `retries` (default `policy.retries`) decides whether a failure is tried again. The
    last failure is raised once retrying is over, or when the wait would cross `deadline` (an
    `anyio.current_time()`).

    `failed`: the first attempt was already made, by the caller, and failed so; retrying
    starts from there. A caller on a hot path makes its first attempt itself and comes here
    only when it fails: an answer that comes at once then holds no frame, closure or bound
    method of this loop while it is awaited (`bench_batch --memory-only`: every in-flight
    call carries them).
    """
    decide = policy.retries if retries is None else retries
    retry = 0
    failure = failed
    while True:
        if failure is None:
            try:
                return await attempt(retry)
            except Exception as exc:
                failure = exc
        if retry >= policy.max_retries or not decide(failure):
            raise failure
        retry += 1
        retry_after = getattr(failure, "retry_after", None)  # a StatusError's, an API error's
        delay = policy.wait(retry_after if isinstance(retry_after, float) else None, retry)
        if loop_time() + delay >= deadline:
            raise failure  # waiting would spend the rest of the budget: the real error instead
        if on_retry is not None:
            on_retry(failure, retry, delay)
        failure = None
        await policy.sleep(delay)


def _statuses(value: object, error: type[UserError]) -> frozenset[int]:
    hint = "pass HTTP status codes, e.g. retry_statuses={429, 503}"
    if isinstance(value, str | bytes) or not isinstance(value, Iterable):
        raise error(f"retry_statuses={_validate.shown(value)} is not a set: {hint}")
    statuses = frozenset(value)
    for status in statuses:
        _validate.integer(
            "retry_statuses", status, minimum=100, maximum=599, example=429, error=error
        )
    return statuses
