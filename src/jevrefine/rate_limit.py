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
  would refuse. Callers are served in arrival order: each books its turn when it arrives and
  sleeps until then, holding no lock.
- **Bounded by the caller's deadline.** A turn that would come after the caller's deadline (the
  innermost `anyio.fail_after` / cancel scope around the call) is refused at once with
  `RateLimitTimeoutError`, naming the limit, instead of sleeping into the deadline. A caller
  cancelled while it waits gives its turn back.
- **Usage corrects the estimate, within bounds.** Once a call is answered, the usage it reports
  replaces the estimate; but one report may charge at most `USAGE_OVERRUN_SECONDS` of the token
  rate beyond the estimate, so no figure can put the bucket deep in debt (a server reporting
  10^12 tokens would otherwise stop the batch for years). A figure that cannot be true (not a
  whole number, negative, above `tokens_per_minute`, or far above the call's prompt and
  `max_tokens`) is logged once per server at WARNING, naming it, and counted in
  `RateLimiter.implausible_usage`; a figure that is not a count at all is ignored.
- **One back-off for everyone.** A 429 pauses the whole batch, not one call: until the
  `Retry-After` the provider sent, else for a backoff (1 s, doubling with each 429 in a row, at
  most 60 s). The wait is read and bounded as the wire reads and bounds its own retries
  (`PAUSE_POLICY`, a `RetryPolicy`): a provider asking for longer than `max_retry_after` is not
  waited for, that call fails at once with its 429 and the batch backs off as for a 429 without
  a wait. In-flight calls that come back 429 during the same pause do not extend it again. A
  call is retried after the pause at most `MAX_RATE_LIMITED_RETRIES` times; the model under a
  limiter is told to leave its 429s to it instead of retrying them at its own pace
  (`RateLimitedModel`).
- **A gradual ramp back.** After a 429 the rates are halved (to at least 1/16 of what was
  given) and return to the full rate linearly over `RAMP_SECONDS` of calls without a 429.

Without a `requests_per_minute` or `tokens_per_minute`, a limiter paces nothing but still
pauses the batch on 429. A limiter applies to the calls made through the wrappers that hold it,
`jevrefine.models.RateLimitedModel` and `jevrefine.judge.RateLimitedJudgeClient`, which
`refine_many` / `refine_iter` (and `jevrefine run` / `eval`) put around the batch's model and its
judges' clients: a `ChatClient` used outside the batch is not slowed by it.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final, TypeVar
from urllib.parse import urlsplit

import anyio

from . import _validate
from ._http._headers import usable_wait
from ._http._retry import RetryPolicy
from .exceptions import JevrefineError, UserError

if TYPE_CHECKING:
    from .messages import Usage

__all__ = [
    "MAX_RATE_LIMITED_RETRIES",
    "PAUSE_POLICY",
    "RAMP_SECONDS",
    "USAGE_OVERRUN_SECONDS",
    "RateLimit",
    "RateLimitTimeoutError",
    "RateLimiter",
]

_T = TypeVar("_T")
_log = logging.getLogger("jevrefine.rate_limit")

MAX_RATE_LIMITED_RETRIES: Final = 8
"""Times one call is retried after a 429 (each after the shared pause) before it fails."""
PAUSE_POLICY: Final = RetryPolicy(
    max_retries=MAX_RATE_LIMITED_RETRIES,
    initial_backoff=1.0,
    max_backoff=60.0,
    jitter=0.0,
    retry_statuses=frozenset({429}),
    max_retry_after=60.0,
)
"""How a 429 pauses the batch, in the wire's terms: the server's `Retry-After` when it asks for
at most `max_retry_after` (a longer one is not waited for: the call fails at once), else the
backoff, 1 s doubling to 60 s with no jitter (one pause for everyone needs none); retried at
most `MAX_RATE_LIMITED_RETRIES` times."""
RAMP_SECONDS: Final = 30.0
"""Seconds without a 429 over which the rates climb back from the cut to the full rate."""
USAGE_OVERRUN_SECONDS: Final = 1.0
"""The most one usage report can charge beyond its call's estimate, in seconds of the full
token rate (one full bucket): the bound on the debt a wrong or hostile figure can cause."""
_MIN_FACTOR: Final = 1 / 16
_CHARS_PER_TOKEN: Final = 4
_MAX_TOKENS_PER_CHAR: Final = 4
"""No tokenizer makes more tokens than UTF-8 bytes, and a character is at most 4 of them."""
_TEMPLATE_ALLOWANCE: Final = 1024
"""Tokens a server may add to what it was sent (chat template, its own system prompt)."""
_MAX_WAITS: Final = 100_000
"""Turns one admission may book (a 429 pause voids the booked ones): a bound on the loop."""


class RateLimitTimeoutError(JevrefineError, TimeoutError):
    """A call's turn under its rate limit would come after the call's deadline.

    Raised at once, before any sleep, instead of waiting into the deadline. It is also a
    `TimeoutError`, which is what the caller's `anyio.fail_after` would have raised. Transient:
    the same call may be admitted later, or given more time.
    """

    def __init__(self, message: str, *, limiter: str, wait: float, remaining: float) -> None:
        super().__init__(message)
        self.limiter = limiter
        """What is limited (`"model"`, `"judge"`)."""
        self.wait = wait
        """Seconds the call would have had to wait for its turn."""
        self.remaining = remaining
        """Seconds that were left before the call's deadline."""

    @property
    def is_transient(self) -> bool:
        """Always true: the limit's pace, not the call, is the cause."""
        return True


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
    """A token bucket: `rate` per second, holding at most one second's worth.

    `level` may be negative: the turns booked ahead, and the debt of calls larger than a full
    bucket. `stamp` (the time `level` is for) only moves forward; during a 429 pause it is the
    pause's end.
    """

    __slots__ = ("level", "rate", "stamp")

    def __init__(self, per_minute: float, now: float) -> None:
        self.rate = per_minute / 60.0
        self.level = self.rate  # full: one second's worth
        self.stamp = now

    def refill(self, now: float, factor: float) -> None:
        if now <= self.stamp:
            return
        rate = self.rate * factor
        self.level = min(rate, self.level + (now - self.stamp) * rate)
        self.stamp = now

    def wait_for(self, amount: float, factor: float) -> float:
        """Seconds until `amount` is available.

        A request larger than a full bucket waits for a full bucket and then goes into debt,
        rather than forever.
        """
        rate = self.rate * factor
        needed = min(amount, rate) - self.level
        return 0.0 if needed <= 0 else needed / rate


@dataclass(frozen=True, slots=True)
class _Turn:
    """A caller's booked admission: when, what it was charged, and under which pause."""

    at: float
    tokens: float
    epoch: int
    paused: bool


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
        self.implausible_usage = 0
        """Usage figures seen so far that cannot be true (each logged once per server)."""
        self._started = False
        self._requests: _Bucket | None = None
        self._tokens: _Bucket | None = None
        self._paused_until = 0.0
        self._cut_factor = 1.0
        self._streak = 0
        # Bumped by each 429 pause: the turns booked before it are void (the buckets emptied).
        self._epoch = 0
        self._warned: set[str] = set()

    # -- admission -----------------------------------------------------------------------

    async def acquire(self, tokens: int = 0) -> None:
        """Wait until the batch may make one more call estimated at `tokens` tokens.

        The caller books its turn at once (so callers are served in arrival order) and sleeps
        until it, holding no lock: one caller's wait never delays another's booking, nor its
        cancellation. Cancelled while waiting, the caller gives its turn back.

        Raises:
            RateLimitTimeoutError: the turn would come after the caller's deadline (the
                innermost cancel scope, e.g. `anyio.fail_after`); raised before any sleep.
        """
        if not self._started:
            self._start(anyio.current_time())
        for _ in range(_MAX_WAITS):
            now = anyio.current_time()
            turn = self._book(now, float(tokens))
            if turn.at <= now:
                return
            deadline = anyio.current_effective_deadline()
            if turn.at > deadline:
                self._give_back(turn)
                raise self._past_deadline(turn, now, deadline)
            try:
                await anyio.sleep(turn.at - now)
            except BaseException:  # cancelled: the turn is not taken, its charge goes back
                self._give_back(turn)
                raise
            if turn.epoch == self._epoch:
                return
            # A 429 pause began while this caller slept: its turn went with it; book again.
        raise RuntimeError(f"the {self.name} rate limiter booked {_MAX_WAITS} turns")

    def _start(self, now: float) -> None:
        self._started = True
        if self.limit.requests_per_minute is not None:
            self._requests = _Bucket(self.limit.requests_per_minute, now)
        if self.limit.tokens_per_minute is not None:
            self._tokens = _Bucket(self.limit.tokens_per_minute, now)

    def _charges(self, tokens: float) -> Iterator[tuple[_Bucket, float]]:
        if self._requests is not None:
            yield self._requests, 1.0
        if self._tokens is not None:
            yield self._tokens, tokens

    def _book(self, now: float, tokens: float) -> _Turn:
        """The caller's turn, the buckets charged for it (no await: nobody books in between).

        The charge is taken at once: a bucket's level is what is left once every turn booked
        so far is served, so each later caller's turn comes after the earlier ones'.
        """
        start = max(now, self._paused_until)
        factor = self._factor(start)
        wait = 0.0
        for bucket, amount in self._charges(tokens):
            bucket.refill(start, factor)
            wait = max(wait, bucket.wait_for(amount, factor))
        for bucket, amount in self._charges(tokens):
            bucket.level -= amount
        return _Turn(start + wait, tokens, self._epoch, paused=start > now)

    def _give_back(self, turn: _Turn) -> None:
        """An abandoned turn (cancelled, or past the deadline): its charge goes back."""
        if turn.epoch != self._epoch:
            return  # a 429 pause emptied the buckets since: nothing of this turn is left
        for bucket, amount in self._charges(turn.tokens):
            bucket.level += amount

    def _past_deadline(self, turn: _Turn, now: float, deadline: float) -> RateLimitTimeoutError:
        wait, remaining = turn.at - now, max(0.0, deadline - now)
        why = "the batch is paused after a 429, then paced" if turn.paused else "pacing"
        return RateLimitTimeoutError(
            f"the {self.name} rate limit ({self._rates()}) would hold this call {wait:.1f} s "
            f"({why}), past its deadline in {remaining:.1f} s: give the call more time, lower "
            "the batch's concurrency, or raise the limit if the provider allows more",
            limiter=self.name,
            wait=wait,
            remaining=remaining,
        )

    def _rates(self) -> str:
        rates = [
            f"{name}={_count(value)}"
            for name, value in (
                ("requests_per_minute", self.limit.requests_per_minute),
                ("tokens_per_minute", self.limit.tokens_per_minute),
            )
            if value is not None
        ]
        return ", ".join(rates) or "no rates, pausing on 429"

    def _factor(self, now: float) -> float:
        """The share of the full rates allowed at `now`: the cut, climbing back linearly."""
        if self._cut_factor >= 1.0:
            return 1.0
        climbed = (now - self._paused_until) / RAMP_SECONDS
        return min(1.0, self._cut_factor + (1.0 - self._cut_factor) * max(0.0, climbed))

    # -- usage ---------------------------------------------------------------------------

    def settle(
        self,
        estimated: int,
        used: object,
        *,
        ceiling: Callable[[], int | None] | None = None,
        server: Callable[[], str] | None = None,
    ) -> None:
        """Correct the token bucket once a call's real usage is known.

        Args:
            estimated: the tokens the call was admitted for.
            used: the total the answer reports (`None`: it reports none). Charged in place of
                the estimate, but at most `USAGE_OVERRUN_SECONDS` of the token rate beyond it;
                ignored when it is not a whole number of tokens.
            ceiling: the most tokens an honest server can report for the call, when that is
                known (its prompt and `max_tokens`); called only for a figure above the
                estimate. A larger figure is implausible.
            server: who answered, for the warning about an implausible figure.
        """
        if used is None:
            return
        problem = self._implausible(estimated, used, ceiling)
        if problem is not None:
            self._warn(problem, server)
        if isinstance(used, bool) or not isinstance(used, int) or used < 0:
            return  # no count at all: the estimate stands
        bucket = self._tokens
        if bucket is not None:
            charged = min(used, estimated + bucket.rate * USAGE_OVERRUN_SECONDS)
            bucket.level = min(bucket.rate, bucket.level + estimated - charged)

    def _implausible(
        self, estimated: int, used: object, ceiling: Callable[[], int | None] | None
    ) -> str | None:
        """What is wrong with a reported figure; `None` when it may be true."""
        if isinstance(used, bool) or not isinstance(used, int):
            return f"{_validate.shown(used)} tokens, not a whole number"
        if used < 0:
            return f"{used:,} tokens, a negative count"
        if used <= estimated:
            return None
        per_minute = self.limit.tokens_per_minute
        if per_minute is not None and used > per_minute:
            return (
                f"{used:,} tokens, more than tokens_per_minute={_count(per_minute)} (a provider "
                "refuses any one request larger than its per-minute limit)"
            )
        most = ceiling() if ceiling is not None else None
        if most is not None and used > most:
            return (
                f"{used:,} tokens, far above what the call could use (at most {most:,}: its "
                "prompt and max_tokens)"
            )
        return None

    def _warn(self, problem: str, server: Callable[[], str] | None) -> None:
        self.implausible_usage += 1
        who = server() if server is not None else f"the {self.name} server"
        if who in self._warned:
            return  # once per server: a server that always lies must not flood the log
        self._warned.add(who)
        overrun = ""
        if self._tokens is not None:
            most = self._tokens.rate * USAGE_OVERRUN_SECONDS
            overrun = (
                f"; the {self.name} rate limiter charges at most {most:,.0f} beyond its estimate"
            )
        _log.warning(
            "%s reported usage of %s for one call%s. Further implausible figures from it are "
            "counted (RateLimiter.implausible_usage) but not logged",
            who,
            problem,
            overrun,
        )

    # -- back-off ------------------------------------------------------------------------

    def throttled(self, retry_after: float | None) -> None:
        """A call was answered 429: pause every call, then cut the rates and ramp back.

        The pause is `retry_after` (seconds) when `PAUSE_POLICY` would wait that long, else its
        backoff for this run of 429s (also for a `retry_after` that is no wait: negative, NaN).
        """
        self.rate_limited += 1
        now = anyio.current_time()
        if now < self._paused_until:
            return  # a call sent before the pause began: the pause already covers it
        factor = self._factor(now)
        if factor >= 1.0:
            self._streak = 0  # the ramp back was over: this 429 starts a new run
        self._streak += 1
        wait = usable_wait(retry_after)
        pause = PAUSE_POLICY.wait(wait if _honoured(wait) else None, self._streak)
        self._paused_until = now + pause
        self._cut_factor = max(_MIN_FACTOR, factor / 2.0)
        # The turns booked so far are void: their callers book again once they wake.
        self._epoch += 1
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
        used: Callable[[_T], object] | None = None,
        ceiling: Callable[[], int | None] | None = None,
        server: Callable[[], str] | None = None,
    ) -> _T:
        """`call()` under the limits: admitted, retried after the shared pause on 429.

        `used` reads the tokens the result reports; `ceiling` and `server` go to `settle`. A 429
        whose `Retry-After` is longer than `PAUSE_POLICY` waits is raised at once (the batch
        still backs off).

        Raises:
            RateLimitTimeoutError: the call's turn would come after its deadline.
        """
        for attempt in range(PAUSE_POLICY.max_retries + 1):
            await self.acquire(tokens)
            try:
                result = await call()
            except Exception as exc:
                if not rate_limited(exc) or attempt == PAUSE_POLICY.max_retries:
                    raise
                retry_after = usable_wait(getattr(exc, "retry_after", None))
                self.throttled(retry_after)  # past the policy's cap: everyone backs off
                if not _honoured(retry_after):
                    raise  # the server asks for longer than the policy waits: no parking
                continue
            if used is not None:
                self.settle(tokens, used(result), ceiling=ceiling, server=server)
            return result
        raise AssertionError("unreachable: the last attempt returns or raises")  # pragma: no cover


def _count(value: float) -> str:
    """A rate as given, with thousands separators: `60,000`, `0.5`."""
    return f"{value:,.0f}" if value == int(value) else f"{value:,}"


def rate_limited(exc: BaseException) -> bool:
    """Whether `exc` is a 429: a model's `ModelHTTPError` or a judge's `JudgeRateLimitError`.

    The wait it asks for is its `retry_after` (seconds, read from the answer's headers by the
    wire's `parse_retry_after`), if any.
    """
    return getattr(exc, "status_code", None) == 429


def _honoured(retry_after: float | None) -> bool:
    """Whether `PAUSE_POLICY` waits for a 429 that asks for `retry_after` seconds (or none)."""
    return PAUSE_POLICY.retries_status(429, retry_after)


def reported_total(usage: Usage | None) -> object:
    """The total tokens `usage` reports, as reported; `None` for no figure.

    0 reads as no figure: an adapter answers `Usage()` when the server sent no usage. Nothing
    else is checked here: `RateLimiter.settle` decides what a figure that cannot be true costs.
    """
    total = getattr(usage, "total_tokens", None)
    return None if type(total) is int and total == 0 else total


def _origin(url: object) -> str | None:
    """`scheme://host:port` of a URL: never its path, query or user name and password."""
    try:
        parts = urlsplit(str(url))
        host, port = parts.hostname, parts.port
    except ValueError:
        return None
    if not parts.scheme or not host:
        return None
    shown_host = f"[{host}]" if ":" in host else host
    return f"{parts.scheme}://{shown_host}" + (f":{port}" if port is not None else "")


def served_at(served: object) -> str:
    """Where a model or judge client is served from, as `scheme://host:port` at most.

    For the limiter's warnings: read through wrappers (an instrumented model) to the adapter's
    `base_url`, else its `server_address` and `server_port`; never a path or a password.
    """
    for _ in range(4):
        origin = _origin(getattr(served, "base_url", None))
        if origin is not None:
            return origin
        inner = getattr(served, "wrapped", None)
        if inner is None:
            break
        served = inner
    address = getattr(served, "server_address", None)
    if isinstance(address, str) and address:
        port = getattr(served, "server_port", None)
        return f"{address}:{port}" if isinstance(port, int) else address
    return "an in-process server"
