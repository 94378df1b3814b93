"""Provider limits for batches: requests and tokens per minute, and one shared back-off on 429.

```python
results = await jr.refine_many(
    client, prompts, concurrency=500,
    model_limit=jr.RateLimit(requests_per_minute=6_000, tokens_per_minute=2_000_000),
    judge_limit=jr.RateLimit(requests_per_minute=3_000),
)
```

A provider's limits apply to the account, not to one call, so a batch shares one `RateLimiter`
per provider (the model's, the judge's) across every call in flight:

- **Pacing.** Each call waits for a request slot and for its estimated tokens (prompt characters
  / 4, plus the `max_tokens` asked for) in two token buckets refilled continuously at the rates
  given; each holds at most one second's worth, so a batch starts without a burst the provider
  would refuse. The estimate is corrected by the usage the answer reports.
- **One back-off for everyone.** A 429 pauses the whole batch, not one call: until the
  `Retry-After` the provider sent (else 1 s, doubling with each 429 in a row, at most 60 s).
  In-flight calls that come back 429 during the same pause do not extend it again. While a
  batch has limits, the adapters tell their SDK not to retry a 429 on its own (the limiter
  retries the call, at most `MAX_RATE_LIMITED_RETRIES` times, once the pause is over).
- **A gradual ramp back.** After a 429 the rates are halved (to at least 1/16 of what was
  given) and return to the full rate linearly over `RAMP_SECONDS` of calls without a 429.

Without a `requests_per_minute` or `tokens_per_minute`, a limiter paces nothing but still
pauses the batch on 429. The limiter is installed for the calls of one batch (through a
context variable read by the chain's model call and the judge's call), so a `ChatClient` used
outside the batch is not slowed by it.
"""

from __future__ import annotations

import contextlib
import functools
import math
from collections.abc import Awaitable, Callable, Iterator
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, Final, TypeVar

import anyio

from . import _validate
from .exceptions import UserError

__all__ = [
    "MAX_RATE_LIMITED_RETRIES",
    "RAMP_SECONDS",
    "RateLimit",
    "RateLimiter",
]

_T = TypeVar("_T")

MAX_RATE_LIMITED_RETRIES: Final = 8
"""Times one call is retried after a 429 (each after the shared pause) before it fails."""
RAMP_SECONDS: Final = 30.0
"""Seconds without a 429 over which the rates climb back from the cut to the full rate."""
_FIRST_PAUSE: Final = 1.0
_MAX_PAUSE: Final = 60.0
_MIN_FACTOR: Final = 1 / 16
_CHARS_PER_TOKEN: Final = 4
_MAX_WAITS: Final = 100_000
"""Sleeps one admission may take (each until the buckets can serve it): a bound on the loop."""


@dataclass(frozen=True, slots=True, kw_only=True)
class RateLimit:
    """A provider's limits: requests and tokens per minute (`None`: not limited).

    Raises:
        UserError: a limit that is not a positive number.
    """

    requests_per_minute: float | None = None
    """Calls per minute, all calls of the batch together."""
    tokens_per_minute: float | None = None
    """Input plus output tokens per minute (estimated before a call, corrected after)."""

    def __post_init__(self) -> None:
        for name, unit in (
            ("requests_per_minute", "requests per minute"),
            ("tokens_per_minute", "tokens per minute"),
        ):
            _validate.number(
                name, getattr(self, name), above=0, optional=True, example=6000, unit=unit
            )


class _Bucket:
    """A token bucket: `rate` per second, holding at most one second's worth."""

    __slots__ = ("level", "rate", "stamp")

    def __init__(self, per_minute: float, now: float) -> None:
        self.rate = per_minute / 60.0
        self.level = self.rate  # full: one second's worth
        self.stamp = now

    def refill(self, now: float, factor: float) -> None:
        rate = self.rate * factor
        self.level = min(rate, self.level + (now - self.stamp) * rate) if rate else self.level
        self.stamp = now

    def wait_for(self, amount: float, factor: float) -> float:
        """Seconds until `amount` is available.

        A request larger than a full bucket waits for a full bucket and then goes into debt,
        rather than forever.
        """
        rate = self.rate * factor
        needed = min(amount, rate) - self.level
        return 0.0 if needed <= 0 else needed / rate


class RateLimiter:
    """One provider's limits and back-off, shared by every call of a batch.

    Args:
        limit: the rates; a limiter without any still pauses everyone on 429.
        name: what is limited (`"model"`, `"judge"`), for messages.
    """

    def __init__(self, limit: RateLimit, *, name: str = "model") -> None:
        if not isinstance(limit, RateLimit):
            raise UserError(
                f"limit={_validate.shown(limit)} is not a RateLimit: pass e.g. "
                "RateLimit(requests_per_minute=6000)"
            )
        self.limit = limit
        """The rates given."""
        self.name = name
        """What is limited, for messages."""
        self.rate_limited = 0
        """429 answers seen so far."""
        self._requests: _Bucket | None = None
        self._tokens: _Bucket | None = None
        self._lock: anyio.Lock | None = None
        self._paused_until = 0.0
        self._cut_factor = 1.0
        self._streak = 0

    # -- admission -----------------------------------------------------------------------

    async def acquire(self, tokens: int = 0) -> None:
        """Wait until the batch may make one more call estimated at `tokens` tokens."""
        if self._lock is None:
            self._lock = anyio.Lock()
            now = anyio.current_time()
            if self.limit.requests_per_minute is not None:
                self._requests = _Bucket(self.limit.requests_per_minute, now)
            if self.limit.tokens_per_minute is not None:
                self._tokens = _Bucket(self.limit.tokens_per_minute, now)
        # One caller at a time computes its wait: callers are served in arrival order and the
        # buckets are never overdrawn by two callers reading the same level.
        async with self._lock:
            for _ in range(_MAX_WAITS):
                wait = self._wait(anyio.current_time(), tokens)
                if wait <= 0:
                    return
                await anyio.sleep(wait)
            raise RuntimeError(f"the {self.name} rate limiter waited {_MAX_WAITS} times")

    def _wait(self, now: float, tokens: int) -> float:
        """Seconds still to wait at `now`; 0 means admitted (and the buckets are charged)."""
        if now < self._paused_until:
            return self._paused_until - now
        factor = self._factor(now)
        wait = 0.0
        for bucket, amount in ((self._requests, 1.0), (self._tokens, float(tokens))):
            if bucket is not None:
                bucket.refill(now, factor)
                wait = max(wait, bucket.wait_for(amount, factor))
        if wait > 0:
            return wait
        if self._requests is not None:
            self._requests.level -= 1.0
        if self._tokens is not None:
            self._tokens.level -= tokens
        return 0.0

    def _factor(self, now: float) -> float:
        """The share of the full rates allowed at `now`: the cut, climbing back linearly."""
        if self._cut_factor >= 1.0:
            return 1.0
        climbed = (now - self._paused_until) / RAMP_SECONDS
        factor = self._cut_factor + (1.0 - self._cut_factor) * max(0.0, climbed)
        if factor >= 1.0:
            self._cut_factor = 1.0
            self._streak = 0
            return 1.0
        return factor

    def settle(self, estimated: int, used: int | None) -> None:
        """Correct the token bucket once a call's real usage is known."""
        if self._tokens is not None and used is not None:
            self._tokens.level += estimated - used

    # -- back-off ------------------------------------------------------------------------

    def throttled(self, retry_after: float | None) -> None:
        """A call was answered 429: pause every call, then cut the rates and ramp back."""
        self.rate_limited += 1
        now = anyio.current_time()
        if now < self._paused_until:
            return  # a call sent before the pause began: the pause already covers it
        self._streak += 1
        fallback = min(_MAX_PAUSE, _FIRST_PAUSE * 2.0 ** (self._streak - 1))
        pause = fallback if retry_after is None else min(_MAX_PAUSE, max(0.0, retry_after))
        self._paused_until = now + pause
        self._cut_factor = max(_MIN_FACTOR, self._factor(now) / 2.0)
        for bucket in (self._requests, self._tokens):
            if bucket is not None:
                # Empty: the restart after the pause is paced from zero, not a full burst.
                bucket.level = 0.0
                bucket.stamp = self._paused_until

    async def run(
        self,
        call: Callable[[], Awaitable[_T]],
        *,
        tokens: int = 0,
        used: Callable[[_T], int | None] | None = None,
    ) -> _T:
        """`call()` under the limits: admitted, retried after the shared pause on 429."""
        for attempt in range(MAX_RATE_LIMITED_RETRIES + 1):
            await self.acquire(tokens)
            try:
                result = await call()
            except Exception as exc:
                retry_after = rate_limited(exc)
                if retry_after is None or attempt == MAX_RATE_LIMITED_RETRIES:
                    raise
                self.throttled(retry_after if math.isfinite(retry_after) else None)
                continue
            self.settle(tokens, used(result) if used is not None else None)
            return result
        raise AssertionError("unreachable: the last attempt returns or raises")  # pragma: no cover


def rate_limited(exc: BaseException) -> float | None:
    """A 429's `Retry-After` in seconds (`inf` when it sent none); `None` for other errors.

    Reads a model's `ModelHTTPError` and a judge's `JudgeRateLimitError` alike.
    """
    if getattr(exc, "status_code", None) != 429:
        return None
    retry_after = getattr(exc, "retry_after", None)
    return float(retry_after) if isinstance(retry_after, int | float) else math.inf


# -- the batch's limiters, installed for the calls of one batch --------------------------------


@dataclass(frozen=True, slots=True)
class _Installed:
    model: RateLimiter | None
    judge: RateLimiter | None


_CURRENT: ContextVar[_Installed | None] = ContextVar("jevrefine_rate_limits", default=None)


@contextlib.contextmanager
def installed(model: RateLimiter | None, judge: RateLimiter | None) -> Iterator[None]:
    """Limit the model and judge calls made in this context (and the tasks it starts)."""
    token = _CURRENT.set(_Installed(model, judge) if model or judge else None)
    try:
        yield
    finally:
        _CURRENT.reset(token)


def active() -> bool:
    """Whether the calls made here are under a batch's limits.

    The adapters then leave 429s to the limiter instead of retrying them in their SDK.
    """
    return _CURRENT.get() is not None


def model_limiter() -> RateLimiter | None:
    """The limiter of model calls made here, if any."""
    current = _CURRENT.get()
    return None if current is None else current.model


def judge_limiter() -> RateLimiter | None:
    """The limiter of judge calls made here, if any."""
    current = _CURRENT.get()
    return None if current is None else current.judge


def prompt_tokens(prompt: Any) -> int:
    """A model call's estimated tokens: its messages' characters / 4, plus `max_tokens`."""
    chars = sum(len(str(getattr(m, "text", "") or "")) for m in getattr(prompt, "messages", ()))
    options = getattr(prompt, "options", None)
    return chars // _CHARS_PER_TOKEN + int(getattr(options, "max_tokens", None) or 0)


def state_tokens(state: object) -> int:
    """A judge call's estimated tokens: the state's characters / 4."""
    return len(str(state)) // _CHARS_PER_TOKEN


def usage_tokens(response: Any) -> int | None:
    """The tokens a model or judge response reports using, when it reports any."""
    usage = getattr(getattr(response, "metadata", None), "usage", None)
    if usage is None:
        usage = getattr(response, "usage", None)
    total = getattr(usage, "total_tokens", None)
    return total if isinstance(total, int) and total > 0 else None


async def call_model(model: Any, prompt: Any, **kwargs: Any) -> Any:
    """`model.call(prompt, **kwargs)`, under the batch's model limiter when one is installed."""
    limiter = model_limiter()
    if limiter is None:
        return await model.call(prompt, **kwargs)
    return await limiter.run(
        functools.partial(model.call, prompt, **kwargs),
        tokens=prompt_tokens(prompt),
        used=usage_tokens,
    )


async def call_judge(client: Any, state: Any, questions: Any, **kwargs: Any) -> Any:
    """`client.system_one(state, questions, ...)`, under the batch's judge limiter, if any."""
    limiter = judge_limiter()
    if limiter is None:
        return await client.system_one(state, questions, **kwargs)
    return await limiter.run(
        functools.partial(client.system_one, state, questions, **kwargs),
        tokens=state_tokens(state),
        used=usage_tokens,
    )
