"""The wire's clock: the event loop's time, and taking a lock by a deadline.

Every wait of the wire is bounded by one deadline on the event loop's clock (the clock anyio's
cancel scopes use), moved from phase to phase rather than a cancel scope per phase.
"""

from __future__ import annotations

import asyncio
from typing import Final

import anyio

__all__ = ["NO_LIMIT", "acquire_by", "loop_time"]

NO_LIMIT: Final = float("inf")
"""A deadline or a phase's seconds with no bound."""


def loop_time() -> float:
    """`anyio.current_time()`: the event loop's clock, which cancel-scope deadlines are on.

    On asyncio read from the loop directly: anyio's lookup of the running backend cost more than
    the clock itself, and a call reads the clock four times or more.
    """
    try:
        return asyncio.get_running_loop().time()
    except RuntimeError:  # another backend (trio)
        return anyio.current_time()


async def acquire_by(lock: anyio.Semaphore | anyio.CapacityLimiter, until: float) -> None:
    """Take `lock`, waiting until `until` (an `anyio.current_time()`) at most.

    No checkpoint when it is free at once: `acquire()` yields to the event loop even then, one
    more loop iteration per request.

    Raises:
        TimeoutError: `until` passed first.
    """
    try:
        lock.acquire_nowait()
        return
    except anyio.WouldBlock:
        pass
    with anyio.fail_at(until):
        await lock.acquire()
