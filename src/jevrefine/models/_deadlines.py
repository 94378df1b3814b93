"""Deadlines for a model call as a whole, kept by the adapter around the vendor SDK's call.

The SDKs apply their `timeout` to each socket operation: a server that sends one byte every half
second never trips a 3 s read timeout, and a call could run for hours. So the adapter bounds the
whole of it, with a cancel scope around the SDK's call (its retries and backoff included). That
is independent of the HTTP transport under the SDK: whatever sends the bytes, the scope ends it,
and the cancelled read closes its connection rather than handing it back to the pool half read.

- `call()`: `total_timeout`, for the whole call.
- `stream()`: `total_timeout` until the first chunk (opening the stream, the SDK's retries
  included), then `timeout` as the longest gap between two chunks, and, when set,
  `stream_timeout` for the whole stream.

When `total_timeout` is not given, it is what an honest server could take under the per-read
`timeout`: one `timeout` per attempt (a non-streamed answer arrives whole, at the end), for
`1 + max_retries` attempts, plus the SDK's longest backoff between them.
"""

from __future__ import annotations

import enum
import math
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Final, TypeVar

import anyio

from .. import _validate
from ..exceptions import ModelTimeoutError

_Item = TypeVar("_Item")


class StreamEnd(enum.Enum):
    """What `Pace.next` returns once a stream has ended (an SDK may yield `None` as an item)."""

    END = "end"


END: Final = StreamEnd.END

__all__ = ["SDK_DEFAULT_TIMEOUT", "Deadlines", "Pace", "call_expired", "check_max_retries"]

SDK_DEFAULT_TIMEOUT: Final = 600.0
"""The per-read timeout both SDKs use when none is given (10 minutes)."""

_INITIAL_BACKOFF: Final = 0.5
_MAX_BACKOFF: Final = 8.0
"""The SDKs' backoff: 0.5 s doubling to 8 s (minus jitter). A longer `Retry-After` wait is cut
short by the total deadline."""


def _backoff_allowance(max_retries: int) -> float:
    # 0.5, 1, 2, 4, then 8 s for every further retry (closed form: max_retries may be large).
    doubling = min(max_retries, 4)
    waits = _INITIAL_BACKOFF * (2.0**doubling - 1) + _MAX_BACKOFF * (max_retries - doubling)
    return waits + 1.0


@dataclass(frozen=True, slots=True, kw_only=True)
class Deadlines:
    """The time limits of one adapter, in seconds."""

    timeout: float | None
    """The SDK's per-read timeout as given (`None`: the SDK's default)."""
    total: float
    """`call()` as a whole; the wait for a stream's first chunk."""
    idle: float
    """The longest gap between two chunks of a stream."""
    stream: float | None
    """A whole stream; `None` for no bound."""

    @classmethod
    def of(
        cls,
        *,
        timeout: object,
        total_timeout: object,
        stream_timeout: object,
        max_retries: int,
    ) -> Deadlines:
        """Validated deadlines from the constructor's arguments.

        Raises:
            UserError: a value that is not a positive, finite number of seconds.
        """
        per_read = _validate.number(
            "timeout", timeout, above=0, optional=True, unit="seconds", example=30.0
        )
        total = _validate.number(
            "total_timeout", total_timeout, above=0, optional=True, unit="seconds", example=120.0
        )
        whole_stream = _validate.number(
            "stream_timeout", stream_timeout, above=0, optional=True, unit="seconds", example=300.0
        )
        attempt = SDK_DEFAULT_TIMEOUT if per_read is None else per_read
        if total is None:
            total = attempt * (1 + max_retries) + _backoff_allowance(max_retries)
        return cls(timeout=per_read, total=total, idle=attempt, stream=whole_stream)


def check_max_retries(value: object) -> int:
    """`max_retries` as an int of 0 or more.

    Raises:
        UserError: anything else.
    """
    return _validate.integer("max_retries", value, minimum=0, example=2)


class Pace:
    """The deadlines of one stream as it goes: the next chunk's, and the whole stream's."""

    __slots__ = ("_deadlines", "_end", "_next", "_started")

    def __init__(self, deadlines: Deadlines) -> None:
        now = anyio.current_time()
        self._deadlines = deadlines
        self._started = False
        self._end = math.inf if deadlines.stream is None else now + deadlines.stream
        self._next = min(now + deadlines.total, self._end)

    def opening_deadline(self) -> float:
        """By when the stream must have opened (an `anyio.current_time()`): `total_timeout`."""
        return self._next

    def scope(self) -> anyio.CancelScope:
        """A cancel scope for waiting for the next chunk (or for the stream to open).

        Once the stream has begun, the gap is counted from now, when the waiting starts: the
        time the consumer spent on the previous chunk is not the server's.
        """
        if self._started:
            self._next = min(anyio.current_time() + self._deadlines.idle, self._end)
        return anyio.CancelScope(deadline=self._next)

    def advanced(self) -> None:
        """A chunk came: from now on each wait has `idle` seconds (within the whole stream's)."""
        self._started = True

    async def next(self, items: AsyncIterator[_Item], model: str, where: str) -> _Item | StreamEnd:
        """The stream's next item within its deadline, or `END` when the stream has ended.

        Raises:
            ModelTimeoutError: the deadline passed first (`expired`).
        """
        # The scope covers the wait only, never the caller's `yield` of what came.
        with self.scope() as waiting:
            try:
                item = await items.__anext__()
            except StopAsyncIteration:
                return END
        if waiting.cancelled_caught:
            raise self.expired(model, where)
        self.advanced()
        return item

    def expired(self, model: str, where: str) -> ModelTimeoutError:
        """The error for the deadline that just passed, naming the setting to raise."""
        limits = self._deadlines
        if self._next >= self._end:
            what = f"did not finish its stream within stream_timeout={limits.stream:g} s"
        elif self._started:
            what = f"sent no chunk for timeout={limits.idle:g} s; the answer is incomplete"
        else:
            what = f"sent no first chunk within total_timeout={limits.total:g} s"
        return ModelTimeoutError(f"{model} at {where} {what}", model_name=model)


def call_expired(deadlines: Deadlines, model: str, where: str) -> ModelTimeoutError:
    """The error for a call that did not finish within `total_timeout`."""
    return ModelTimeoutError(
        f"{model} at {where} did not answer within total_timeout={deadlines.total:g} s "
        "(the SDK's retries included); raise total_timeout=, or check the server",
        model_name=model,
    )
