"""A hostile Jev peer: a raw asyncio server on 127.0.0.1 that answers with bytes the test controls.

Not the project's fakes: nothing here speaks HTTP correctly unless the script says so. Each
connection reads one request (head, then a `content-length` body) and runs the script, which
writes whatever it likes; the server counts connections and the bytes it managed to send.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from typing import Any

Script = Callable[["Writer"], Awaitable[None]]


async def read_request(reader: asyncio.StreamReader) -> bytes | None:
    """One request (head and body), or `None` when the client closed the connection first."""
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, ConnectionError):
        return None
    length = 0
    for line in head.split(b"\r\n"):
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value.strip())
    try:
        body = await reader.readexactly(length)
    except (asyncio.IncompleteReadError, ConnectionError):
        return None
    return head + body


def response(body: bytes, *, status: bytes = b"200 OK", headers: bytes = b"") -> bytes:
    """A well-formed response with a `content-length`: the baseline the faults depart from."""
    return (
        b"HTTP/1.1 " + status + b"\r\ncontent-type: application/json\r\n" + headers
        + b"content-length: " + str(len(body)).encode() + b"\r\n\r\n" + body
    )  # fmt: skip


class HostileServer:
    """`async with HostileServer(script) as server:` then point a client at `server.base_url`.

    With `close=True` (the default) the server closes each connection after one scripted answer,
    so a body read until the end of the stream ends; `close=False` keeps the connection for the
    client's next request.
    """

    def __init__(self, script: Script | bytes, *, close: bool = True) -> None:
        self.script = script
        self.close = close
        self.connections = 0
        """Connections accepted so far."""
        self.sent = 0
        """Bytes written by scripts (as far as the client let them)."""
        self.requests: list[bytes] = []
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[Any]] = set()

    @property
    def base_url(self) -> str:
        assert self._server is not None
        port = self._server.sockets[0].getsockname()[1]
        return f"http://127.0.0.1:{port}"

    async def __aenter__(self) -> HostileServer:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._server is not None
        self._server.close()
        for task in list(self._tasks):
            task.cancel()
        for task in list(self._tasks):
            with contextlib.suppress(BaseException):
                await task
        await self._server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        self.connections += 1
        counting = Writer(writer, self)
        try:
            while (request := await read_request(reader)) is not None:
                self.requests.append(request)
                if isinstance(self.script, bytes):
                    await counting.send(self.script)
                else:
                    await self.script(counting)
                if self.close:
                    break
        except (ConnectionError, asyncio.CancelledError):
            pass
        finally:
            self._tasks.discard(task)
            writer.close()
            with contextlib.suppress(BaseException):
                await writer.wait_closed()


class Writer:
    """The writer a script gets: `send(data)` writes, drains and counts."""

    def __init__(self, writer: asyncio.StreamWriter, server: HostileServer) -> None:
        self._writer = writer
        self._server = server

    async def send(self, data: bytes) -> None:
        self._writer.write(data)
        await self._writer.drain()
        self._server.sent += len(data)

    def close(self) -> None:
        self._writer.close()


async def flood(writer: Writer, first: bytes, *, piece: bytes, total: int) -> None:
    """Send `first`, then `piece` repeatedly until `total` bytes went out (or the peer left)."""
    await writer.send(first)
    sent = len(first)
    while sent < total:
        await writer.send(piece)
        sent += len(piece)


def scripted(*answers: bytes) -> Script:
    """A script answering successive requests with `answers`, one each, in order."""
    replies = iter(answers)

    async def script(writer: Writer) -> None:
        await writer.send(next(replies))

    return script


def request_head(request: bytes) -> list[bytes]:
    """A recorded request's request line and header lines, the body left out."""
    return request.partition(b"\r\n\r\n")[0].split(b"\r\n")


PROXY_VARIABLES = ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy")
"""What would send an adapter's calls through a proxy (and off its lean request)."""
