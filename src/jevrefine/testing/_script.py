"""The scripting shared by the fake model servers: queued replies first, then a reply function."""

from __future__ import annotations

import inspect
import threading
from collections import deque
from collections.abc import Awaitable, Callable
from typing import Any, ClassVar, Generic, TypeVar

from ._http import LoopbackHTTPServer

__all__ = ["ScriptedServer"]

R = TypeVar("R")


class ScriptedServer(LoopbackHTTPServer, Generic[R]):
    """A loopback server whose replies come, in order, from a script, a function, or a default.

    `script(*replies)` queues replies for the next requests (one per request); the `reply`
    function, sync or async, answers the rest; subclasses give the default. Thread-safe: tests
    queue replies from their own thread while the server's loop takes them.
    """

    reply_types: ClassVar[tuple[type, ...]] = (str, dict)
    """What `script` accepts; subclasses widen it."""

    def __init__(
        self,
        reply: Callable[[dict[str, Any]], R | Awaitable[R]] | None = None,
        *,
        latency: float = 0.0,
    ) -> None:
        super().__init__(latency=latency)
        self.reply = reply
        self._replies: deque[R] = deque()
        self._replies_lock = threading.Lock()

    @property
    def reply(self) -> Callable[[dict[str, Any]], R | Awaitable[R]] | None:
        """The function answering requests the script does not (`None`: the default reply)."""
        return self._reply

    @reply.setter
    def reply(self, function: Callable[[dict[str, Any]], R | Awaitable[R]] | None) -> None:
        if function is not None and not callable(function):
            raise TypeError(
                f"reply must be a function of the request, got {type(function).__name__}"
            )
        self._reply = function

    def script(self, *replies: R) -> None:
        """Queue replies for the next requests, one each, in order (after any queued before)."""
        for reply in replies:
            if not isinstance(reply, self.reply_types):
                names = ", ".join(t.__name__ for t in self.reply_types)
                raise TypeError(f"a reply is one of {names}, got {type(reply).__name__}")
        with self._replies_lock:
            self._replies.extend(replies)

    @property
    def pending(self) -> int:
        """How many scripted replies are still queued."""
        with self._replies_lock:
            return len(self._replies)

    async def next_reply(self, body: dict[str, Any]) -> R:
        """The reply to the request whose JSON body is `body`."""
        with self._replies_lock:
            if self._replies:
                return self._replies.popleft()
        if self._reply is not None:
            value = self._reply(body)
            if inspect.isawaitable(value):
                return await value
            return value
        return self.default_reply(body)

    def default_reply(self, body: dict[str, Any]) -> R:
        """The reply when neither the script nor the function gives one."""
        raise NotImplementedError
