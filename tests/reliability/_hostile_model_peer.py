"""A hostile model server: raw asyncio on 127.0.0.1, HTTP/1.1 written by hand.

The project's fake servers speak well-formed HTTP and well-formed JSON; this one sends exactly
the bytes a test scripts (a number of 4,301 digits, one invalid UTF-8 byte inside an SSE event,
a body dripped one byte per half second, a stream cut off mid-answer), so the adapters are tested
against what a broken or hostile peer really sends. Every request gets the next scripted answer;
the last one repeats (a retry sees the same fault). Each answer closes its connection, so no
pooled-connection state carries from one exchange into the next.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable, Sequence
from types import TracebackType
from typing import Any

Answer = Callable[[asyncio.StreamWriter], Awaitable[None]]
"""Writes one whole HTTP response (status line, headers, body) to the socket."""


class HostilePeer:
    """`async with HostilePeer() as peer:` a server on 127.0.0.1 that answers as scripted."""

    def __init__(self) -> None:
        self._answers: list[Answer] = []
        self._server: asyncio.Server | None = None
        self._writers: set[asyncio.StreamWriter] = set()
        self._handlers: set[asyncio.Task[Any]] = set()
        self.requests: list[bytes] = []
        """The body of every request received, in order."""
        self.open_connections = 0
        """Connections the client has not closed yet (0 once the adapter let go of them)."""

    @property
    def url(self) -> str:
        """`http://127.0.0.1:PORT`, no path."""
        assert self._server is not None
        port = self._server.sockets[0].getsockname()[1]
        return f"http://127.0.0.1:{port}"

    def script(self, *answers: Answer) -> None:
        """Answer the next requests with `answers`, in order; the last one repeats."""
        self._answers = list(answers)

    async def __aenter__(self) -> HostilePeer:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        assert self._server is not None
        self._server.close()
        # Abort rather than cancel: a handler ends on its own once its socket is gone.
        for writer in list(self._writers):
            writer.transport.abort()
        if self._handlers:
            await asyncio.wait(self._handlers, timeout=2.0)
        await self._server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._writers.add(writer)
        task = asyncio.current_task()
        if task is not None:
            self._handlers.add(task)
            task.add_done_callback(self._handlers.discard)
        self.open_connections += 1
        try:
            if not await self._read_request(reader):
                return
            answer = self._answers[min(len(self.requests) - 1, len(self._answers) - 1)]
            await answer(writer)
            await writer.drain()
            # Wait for the client to hang up, so `open_connections` says whether it did.
            await reader.read()
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            self.open_connections -= 1
            self._writers.discard(writer)
            writer.close()

    async def _read_request(self, reader: asyncio.StreamReader) -> bool:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
        except asyncio.IncompleteReadError:
            return False
        length = 0
        for line in head.split(b"\r\n")[1:]:
            name, _, value = line.partition(b":")
            if name.strip().lower() == b"content-length":
                length = int(value.strip())
        self.requests.append(await reader.readexactly(length))
        return True


def _head(status: int, headers: Sequence[tuple[str, str]]) -> bytes:
    lines = [f"HTTP/1.1 {status} X"] + [f"{name}: {value}" for name, value in headers]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


def raw(body: bytes, *, status: int = 200, headers: Sequence[tuple[str, str]] = ()) -> Answer:
    """A JSON response whose body is exactly `body`."""

    async def answer(writer: asyncio.StreamWriter) -> None:
        head = [
            ("content-type", "application/json"),
            ("content-length", str(len(body))),
            ("connection", "close"),
            *headers,
        ]
        writer.write(_head(status, head) + body)

    return answer


def body(value: Any, **kwargs: Any) -> Answer:
    """A JSON response of `value` (`json.dumps`, NaN and Infinity allowed)."""
    return raw(json.dumps(value).encode(), **kwargs)


def sse(events: Sequence[bytes], *, headers: Sequence[tuple[str, str]] = ()) -> Answer:
    """An event stream of `events` (each an SSE `data:` payload, sent as is), then close."""

    async def answer(writer: asyncio.StreamWriter) -> None:
        head = [("content-type", "text/event-stream"), ("connection", "close"), *headers]
        writer.write(_head(200, head))
        for event in events:
            writer.write(b"data: " + event + b"\n\n")
            await writer.drain()
        writer.write_eof()

    return answer


def sse_events(events: Sequence[tuple[str, Any]]) -> Answer:
    """An Anthropic-style event stream: `event: NAME` and `data: JSON` per item, then close."""

    async def answer(writer: asyncio.StreamWriter) -> None:
        head = [("content-type", "text/event-stream"), ("connection", "close")]
        writer.write(_head(200, head))
        for name, data in events:
            payload = data if isinstance(data, bytes) else json.dumps(data).encode()
            writer.write(f"event: {name}\n".encode() + b"data: " + payload + b"\n\n")
            await writer.drain()
        writer.write_eof()

    return answer


def drip(
    content: bytes, *, every: float, event_stream: bool = False, before: bytes = b""
) -> Answer:
    """Send `before` at once, then `content` one byte every `every` seconds (no read ever idles
    past a per-read timeout, yet the body takes minutes)."""

    async def answer(writer: asyncio.StreamWriter) -> None:
        kind = "text/event-stream" if event_stream else "application/json"
        head = [("content-type", kind), ("connection", "close")]
        if not event_stream:
            head.append(("content-length", str(len(before) + len(content))))
        writer.write(_head(200, head) + before)
        await writer.drain()
        for byte in content:
            await asyncio.sleep(every)
            writer.write(bytes([byte]))
            await writer.drain()

    return answer
