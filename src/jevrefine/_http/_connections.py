"""HTTP/1.1 connections: an anyio byte stream on any backend, or an asyncio protocol.

On asyncio a connection is its own `asyncio.BufferedProtocol` (`PeerConnection`), not an anyio
`SocketStream`: anyio's stream takes a shielded cancel scope and one more event-loop turn after
each send, and makes two `epoll_ctl` calls around each receive; the protocol's waits carry the
exchange's deadline as one timer, cheaper than a cancel scope per exchange
(`python -m benchmarks.bench_judge_client`; figures in docs/benchmarks.md). Other backends
(trio), and names that resolve to both IPv4 and IPv6 addresses, keep anyio's streams
(`StreamConnection`): asyncio's own happy eyeballs leak a socket when cancelled on Python 3.11,
anyio's do not.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import socket
import ssl
from typing import Final, TypeAlias

import anyio
import anyio.abc
import httpx2

from ._clock import NO_LIMIT, loop_time
from ._h11 import READ_SIZE

__all__ = [
    "FITS_SEND_BUFFER",
    "Connection",
    "Expired",
    "PeerConnection",
    "SocketOption",
    "StreamConnection",
    "asyncio_loop",
    "one_family",
    "open_stream",
    "phase_timeout",
]


SocketOption: TypeAlias = tuple[int, int, int]
"""`(level, option, value)` for `socket.setsockopt`, e.g. TCP keep-alive probes."""

FITS_SEND_BUFFER: Final = 16 * 1024
"""A request this small goes into an idle connection's kernel send buffer (16 KiB at least on
Linux, macOS and Windows) at once, on any backend: its send cannot block, so cannot time out."""


class Expired(Exception):
    """A wait of an asyncio-protocol connection outlived the exchange's deadline."""


def _expire(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_exception(Expired())


def phase_timeout(connection: Connection) -> httpx2.TimeoutException:
    if connection.writing:
        return httpx2.WriteTimeout("writing the request timed out")
    return httpx2.ReadTimeout("reading the response timed out")


class Connection:
    """One HTTP/1.1 connection: the received bytes not yet parsed, and the exchange's clocks.

    Two kinds (`StreamConnection` over any anyio backend, `PeerConnection` on asyncio); the
    readers below see only `buffer` and `read_more`.
    """

    __slots__ = ("buffer", "idle_since", "receive_timeout", "scope", "until", "writing")

    def __init__(self) -> None:
        self.writing = False
        """Whether the exchange's deadline is still the write's (else the read's)."""
        self.buffer = bytearray()
        self.idle_since = 0.0
        self.receive_timeout = NO_LIMIT
        """Seconds one receive may wait (httpx's per-read timeout); inf when the whole response
        is bounded instead."""
        self.scope: anyio.CancelScope | None = None
        """The exchange's one cancel scope (streams), whose deadline the phases move."""
        self.until = NO_LIMIT
        """The exchange's `deadline`: no receive waits past it."""

    def bound(self, deadline: float) -> None:
        """From now on no wait of this exchange lasts past `deadline` (a loop time)."""
        if self.scope is not None:
            self.scope.deadline = deadline

    async def read_more(self, at_most: int) -> bool:
        """Add at least one byte to the buffer (up to `at_most`); False at the end of the stream."""
        if self.receive_timeout != NO_LIMIT:
            # Moving the one deadline is cheaper than a scope per receive.
            self.bound(min(loop_time() + self.receive_timeout, self.until))
        return await self._receive(at_most)

    async def _receive(self, at_most: int) -> bool:
        raise NotImplementedError

    async def send(self, payload: bytes) -> None:
        """Write the request; `anyio.BrokenResourceError` (or `OSError`) when the peer is gone."""
        raise NotImplementedError

    def still_open(self) -> bool:
        """Whether the peer has neither closed this idle connection nor sent on it unasked."""
        raise NotImplementedError

    def set_options(self, options: tuple[SocketOption, ...]) -> None:
        """`setsockopt` each of `options` on the TCP socket."""
        raise NotImplementedError

    async def close(self) -> None:
        """Close at once (no TLS goodbye is awaited), shielded from cancellation."""
        raise NotImplementedError


class StreamConnection(Connection):
    """A connection over an anyio byte stream: any backend anyio runs on (trio, ...)."""

    __slots__ = ("raw", "stream")

    def __init__(self, stream: anyio.abc.ByteStream) -> None:
        super().__init__()
        self.stream = stream
        raw = stream.extra(anyio.abc.SocketAttribute.raw_socket, None)
        # Looked up once: anyio builds a dict of every attribute on each `extra` call.
        self.raw = raw if isinstance(raw, socket.socket) else None

    async def _receive(self, at_most: int) -> bool:
        try:
            chunk = await self.stream.receive(min(at_most, READ_SIZE))
        except (anyio.EndOfStream, anyio.BrokenResourceError, anyio.ClosedResourceError):
            return False
        self.buffer += chunk
        return True

    async def send(self, payload: bytes) -> None:
        await self.stream.send(payload)

    def still_open(self) -> bool:
        return _still_open(self.raw)

    def set_options(self, options: tuple[SocketOption, ...]) -> None:
        _set_options(self.raw, options)

    async def close(self) -> None:
        with (
            anyio.CancelScope(shield=True),
            contextlib.suppress(OSError, anyio.BrokenResourceError, anyio.ClosedResourceError),
        ):
            await self.stream.aclose()


class PeerConnection(Connection, asyncio.BufferedProtocol):
    """A connection that is its own asyncio protocol: the fast path on the asyncio backend.

    Why not anyio's `SocketStream` here: per request it takes a shielded cancel scope and one
    more event-loop iteration after each send (`cancel_shielded_checkpoint`), and two
    `epoll_ctl` system calls around each receive (it resumes and pauses reading every time).
    Measured with `python -m benchmarks.bench_judge_client`, and A/B runs of 2,000 sequential
    `system_one` calls under `time.process_time` (see the module docstring for the figures).

    The bytes go straight into `buffer` (the event loop reads into one scratch of at most 64 KiB
    per `recv_into`), reading pauses once 64 KiB wait unparsed, and a reader that wants more
    resumes it: what is read past what the parser asked for stays bounded by 128 KiB, as with
    the stream. While idle in the pool reading goes on, so a close or stray bytes from the
    server are seen before the connection is reused.
    """

    __slots__ = (
        "_eof",
        "_loop",
        "_paused",
        "_scratch",
        "_transport",
        "_waiter",
        "_writable",
        "wait_until",
    )

    def __init__(self, loop: asyncio.AbstractEventLoop, scratch: memoryview) -> None:
        super().__init__()
        self._loop = loop
        self._scratch = scratch
        """Shared by every connection of one transport: the event loop calls `get_buffer` and
        `buffer_updated` back to back, with nothing in between that could use it."""
        self._transport: asyncio.Transport | None = None
        self._waiter: asyncio.Future[None] | None = None
        self._eof = False
        self._paused = False
        self._writable = True
        self.wait_until = NO_LIMIT
        """No wait lasts past this loop time: the exchange's deadline, without a cancel scope."""

    # -- asyncio.BufferedProtocol: called by the event loop --------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self._transport = transport

    def get_buffer(self, sizehint: int) -> memoryview:
        return self._scratch

    def buffer_updated(self, nbytes: int) -> None:
        self.buffer += self._scratch[:nbytes]
        if len(self.buffer) >= READ_SIZE and self._transport is not None:
            self._transport.pause_reading()
            self._paused = True
        self._wake()

    def eof_received(self) -> None:
        self._eof = True  # returning None: the event loop closes the transport
        self._wake()

    def connection_lost(self, exc: Exception | None) -> None:
        self._eof = True
        self._writable = True
        self._wake()

    def pause_writing(self) -> None:
        self._writable = False

    def resume_writing(self) -> None:
        self._writable = True
        self._wake()

    def _wake(self) -> None:
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    # -- the connection -----------------------------------------------------------------------

    def bound(self, deadline: float) -> None:
        self.wait_until = deadline

    async def _wait(self) -> None:
        # The exchange's deadline fails the future (`Expired`); a cancel scope around the
        # caller cancels the task, and with it the future. Nothing here outlives either.
        loop = self._loop
        waiter = self._waiter = loop.create_future()
        timer = (
            None if self.wait_until == NO_LIMIT else loop.call_at(self.wait_until, _expire, waiter)
        )
        try:
            await waiter
        finally:
            self._waiter = None
            if timer is not None:
                timer.cancel()

    async def _receive(self, at_most: int) -> bool:
        if self._paused and self._transport is not None:
            self._paused = False
            self._transport.resume_reading()
        if self._eof:
            return False
        before = len(self.buffer)
        # Each turn waits for an event (bytes, the end, a drained write buffer); the exchange's
        # deadline bounds the whole.
        while len(self.buffer) == before and not self._eof:
            await self._wait()
        return len(self.buffer) > before

    async def send(self, payload: bytes) -> None:
        transport = self._transport
        if transport is None or self._eof or transport.is_closing():
            raise anyio.BrokenResourceError("the connection is closed")
        transport.write(payload)
        # Over the write buffer's high-water mark: wait for it to drain (or the end).
        while not self._writable and not self._eof:
            await self._wait()
        if self._eof and transport.get_write_buffer_size():
            raise anyio.BrokenResourceError("the connection closed while sending")

    def still_open(self) -> bool:
        # Reading never stops while idle: a close or a stray byte has already been seen by the
        # event loop, with no system call to ask the socket.
        return not self._eof and self._transport is not None and not self._transport.is_closing()

    def set_options(self, options: tuple[SocketOption, ...]) -> None:
        transport = self._transport
        raw = None if transport is None else transport.get_extra_info("socket")
        if raw is not None:
            for level, option, value in options:
                raw.setsockopt(level, option, value)

    async def close(self) -> None:
        if self._transport is not None:
            self._transport.abort()


async def one_family(loop: asyncio.AbstractEventLoop, host: str, port: int) -> bool:
    """Whether `host` is an IP address, or a name whose addresses are all of one family."""
    with contextlib.suppress(ValueError):
        ipaddress.ip_address(host)
        return True
    try:
        found = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except OSError:
        return False  # anyio's connect will raise the resolver's error
    return len({family for family, *_ in found}) == 1


async def open_stream(host: str, port: int, context: ssl.SSLContext | None) -> Connection:
    if context is None:
        return StreamConnection(await anyio.connect_tcp(host, port))
    return StreamConnection(
        await anyio.connect_tcp(host, port, ssl_context=context, tls_hostname=host)
    )


def asyncio_loop() -> asyncio.AbstractEventLoop | None:
    """The running asyncio loop, or `None` on another backend (then anyio's streams are used)."""
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


def _still_open(raw: socket.socket | None) -> bool:
    """Whether the peer has neither closed an idle connection nor sent on it unasked.

    One non-blocking peek at the one connection about to be reused (never a scan of the pool):
    a server that closed it while idle shows as end of stream, and the request goes to a fresh
    connection instead of failing. Over TLS, bytes waiting may be a ticket or a close alert:
    either way the connection is dropped, as httpcore does.
    """
    if raw is None:
        return True
    try:
        raw.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT)
    except BlockingIOError:
        return True  # nothing to read: open and quiet, as an idle connection should be
    except OSError:
        return False
    return False  # b"" (the peer closed it) or bytes nobody asked for


def _set_options(raw: socket.socket | None, options: tuple[SocketOption, ...]) -> None:
    if raw is not None:
        for level, option, value in options:
            raw.setsockopt(level, option, value)
