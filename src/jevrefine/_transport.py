"""The package's one HTTP fast path: a lean HTTP/1.1 keep-alive client core, and its httpx2 adapter.

`KeepAliveTransport.exchange` is the raw core: method, URL parts, header lines and body bytes
in; status, header lines and body bytes out (`RawResponse`), with per-phase timeouts, the body
cap, keep-alive and httpx2's typed errors. `JudgeClient` calls it directly when it built its own
pool; `KeepAliveTransport` is also an `httpx2.AsyncBaseTransport` (a thin adapter over the
core), mounted under the `openai` and `anthropic` SDKs' clients by the model adapters for their
whole-response calls (`models/_bounded_transport.py` decides when), and under a JudgeClient's
own `httpx2.AsyncClient`.

Why not httpx's default transport: under load its connection pool rescans every connection for
every request (it `poll()`s each idle one: 642 µs per call with 1 idle connection, 4,054 µs with
200), and it writes the head and the body of each request in two system calls. A judge or a
batch of model calls sends many small, independent POSTs to one host, so a stack of idle
connections per host (O(1) to take and return) and one write per request cut the client's CPU
per call substantially. Why a raw core below httpx2's client layer: its Request, URL, Headers
and Response objects, `send` with its auth, redirect and hook machinery, cost more CPU per small
call than all of the I/O (JudgeClient.system_one 1,008 µs of CPU through `httpx2.AsyncClient`
on this transport, the hand-written floor 155 µs, 2026-12-01). The benchmarks that justify both:
`python -m benchmarks.bench_judge_client` and `python -m benchmarks.bench_adapter_cpu`. For the
same reason the core takes a free connection slot without a checkpoint, and moves one deadline
from phase to phase instead of opening a cancel scope per phase.

On asyncio a connection is its own `asyncio.BufferedProtocol` (`_PeerConnection`), not an anyio
`SocketStream`: anyio's stream takes a shielded cancel scope and one more event-loop turn after
each send, and makes two `epoll_ctl` calls around each receive; the protocol's waits carry the
exchange's deadline as one timer, where a cancel scope cost four times as much (16 µs against
4). The status line and headers are matched by one regular expression; anything it refuses
goes to the line-by-line reader, which names the fault. With the Jev client's own changes,
`JudgeClient.system_one` went from 427 to 259 µs of CPU per call at concurrency 1 and from 345
to 241 µs at 64 (2026-12-01, `python -m benchmarks.bench_judge_client`, full size, the two trees
back to back on the idle machine; the floor client 109 – 159 µs, its JSON codec changed too).
Other backends (trio), and names that resolve to both IPv4 and IPv6 addresses, keep anyio's
streams (`_StreamConnection`): asyncio's own happy eyeballs leak a socket when cancelled on
Python 3.11, anyio's do not.

Scope, deliberately small: HTTP/1.1 over TCP or TLS, request bodies already in memory,
`Content-Length`, chunked and read-until-close response bodies, each read whole before the
response is returned (so no streaming; decompression stays with httpx's `Response`). No proxies
and no HTTP/2: callers route those to httpx's transport.
A pooled connection that the server closed while idle is retried once on a fresh connection,
when the failure came before any byte of the response (as urllib3 does).

Everything the server sends is checked strictly against RFC 9112, because the server may be
broken or hostile: the status line, at most 100 header lines of at most 8 KiB each (no obs-fold,
no control bytes), one agreeing `Content-Length` of digits only, `Transfer-Encoding: chunked` or
nothing (never both), chunk sizes of 1 to 16 hex digits with optional extensions, CRLF after
every chunk, at most 100 trailer lines. A violation raises `MalformedResponseError` and the
connection is closed, never pooled. `max_response_bytes` bounds the body under every framing
(declared length, chunked, read until close): no more than one byte past it is ever parsed
(and no more than 128 KiB past it read off the socket), and
`jevrefine.exceptions.ResponseTooLargeError` is raised (the one cap and error of the package,
`jevrefine._limits`; `JudgeClient` passes it on as `JudgeResponseTooLargeError`), unless the
caller's `too_large` builds its own.

This fast path is measured against one httpx2 series (`MEASURED_WITH_HTTPX2`), and leans on how
httpx2 treats a transport: what `handle_async_request` raises reaches the caller unchanged, the
per-request timeouts are in `request.extensions["timeout"]`, a `Response` built on a
`ByteStream` is complete. `tests/test_fast_paths.py` pins all of it: it fails when the installed
httpx2 leaves the measured series, saying to re-run the benchmark.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import re
import socket
import ssl
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from typing import Final, TypeAlias

import anyio
import anyio.abc
import httpx2

from ._limits import DEFAULT_MAX_RESPONSE_BYTES
from .exceptions import ResponseTooLargeError

__all__ = [
    "MEASURED_WITH_HTTPX2",
    "HeaderLines",
    "KeepAliveTransport",
    "MalformedResponseError",
    "RawResponse",
    "SocketOption",
    "TooLarge",
    "acquire_by",
    "loop_time",
]

SocketOption: TypeAlias = tuple[int, int, int]
"""`(level, option, value)` for `socket.setsockopt`, e.g. TCP keep-alive probes."""

TooLarge: TypeAlias = Callable[[str, int, "int | None"], Exception]
"""Builds the error for a body over the cap: (host, limit, declared length or None)."""

_MAX_HEAD: Final = 64 * 1024
"""The status line and headers together (and, separately, the trailers)."""
_MAX_HEADERS: Final = 100
"""Header lines of one response (and trailer lines of one chunked body)."""
_MAX_LINE: Final = 8 * 1024
"""One header, trailer or chunk-size line."""
_MAX_CHUNK_DIGITS: Final = 16
"""Hex digits of a chunk size: 16 already spell 2**64 - 1, far past any cap."""
_MAX_LENGTH_DIGITS: Final = 18
"""Digits of a Content-Length read as a number; longer ones are past any cap anyway."""
_HUGE: Final = 10**_MAX_LENGTH_DIGITS
_MAX_INTERIM: Final = 10
"""Interim (1xx) responses skipped before the final one."""
_READ_SIZE: Final = 65536
_EXCERPT: Final = 1024
_HEXDIG: Final = b"0123456789abcdefABCDEF"
_TCHAR: Final = b"!#$%&'*+-.^_`|~0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
_CONTROL: Final = bytes(range(32)) + b"\x7f"
_NO_BODY_STATUSES: Final = frozenset({204, 304})
_NO_LIMIT: Final = float("inf")
_FITS_SEND_BUFFER: Final = 16 * 1024
"""A request this small goes into an idle connection's kernel send buffer (16 KiB at least on
Linux, macOS and Windows) at once, on any backend: its send cannot block, so cannot time out."""

MEASURED_WITH_HTTPX2: Final = ((2, 16), (2, 17))
"""The httpx2 versions (from, up to but not including) this transport was benchmarked with:
`python -m benchmarks --only bench_judge_client bench_adapter_cpu`, run 2026-12-01 with httpx2
2.16.2."""


class MalformedResponseError(httpx2.RemoteProtocolError):
    """The server's bytes are not a valid HTTP/1.1 response (not retried: it would answer so again).

    A connection that ends early is not this, but a plain `httpx2.RemoteProtocolError`.
    """

    def __init__(
        self, message: str, *, request: httpx2.Request | None = None, excerpt: bytes = b""
    ) -> None:
        super().__init__(message, request=request)
        self.excerpt = excerpt
        """The start of the offending bytes (up to 1 KiB), kept out of the message: the server
        may have put a secret in them, and only the caller knows which to scrub."""


class _Expired(Exception):
    """A wait of an asyncio-protocol connection outlived the exchange's deadline."""


def _expire(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_exception(_Expired())


def _phase_timeout(connection: _Connection) -> httpx2.TimeoutException:
    if connection.writing:
        return httpx2.WriteTimeout("writing the request timed out")
    return httpx2.ReadTimeout("reading the response timed out")


class _StaleConnection(Exception):
    """A reused connection failed before the response began: safe to try a new one."""


class RawResponse:
    """One whole response of `KeepAliveTransport.exchange`: status, header lines and body."""

    __slots__ = ("_headers", "content", "raw_headers", "reason", "status_code")

    def __init__(
        self,
        status_code: int,
        reason: bytes,
        raw_headers: list[tuple[bytes, bytes]],
        content: bytes,
    ) -> None:
        self.status_code = status_code
        """The final status (interim 1xx responses are skipped)."""
        self.reason = reason
        """The reason phrase as sent."""
        self.raw_headers = raw_headers
        """(name, value) pairs as received, in order, the names in the server's case."""
        self.content = content
        """The whole body as sent (a `content-encoding` is not undone here)."""
        self._headers: httpx2.Headers | None = None

    def header(self, name: bytes) -> str | None:
        """The first value of the header `name` (give it in lower case), or `None`.

        A scan of the few header lines, no `Headers` object: the success path needs one or two.
        """
        for key, value in self.raw_headers:
            if key.lower() == name:
                return value.decode("latin-1")
        return None

    async def decoded(self, request: httpx2.Request | None = None) -> RawResponse:
        """This answer with its `content-encoding` undone as httpx would, that line dropped.

        Dropped so that whatever reads the bytes next does not decode them again. Raises
        `httpx2.DecodingError` (naming `request`) when the bytes do not decode.
        """
        response = httpx2.Response(
            self.status_code,
            headers=self.raw_headers,
            stream=httpx2.ByteStream(self.content),
            request=request,
        )
        content = await response.aread()
        plain = [(k, v) for k, v in self.raw_headers if k.lower() != b"content-encoding"]
        return RawResponse(self.status_code, self.reason, plain, content)

    @property
    def headers(self) -> httpx2.Headers:
        """Every header as `httpx2.Headers`, built on first use (error paths, mostly)."""
        if self._headers is None:
            self._headers = httpx2.Headers(self.raw_headers)
        return self._headers


class _Connection:
    """One HTTP/1.1 connection: the received bytes not yet parsed, and the exchange's clocks.

    Two kinds (`_StreamConnection` over any anyio backend, `_PeerConnection` on asyncio); the
    readers below see only `buffer` and `read_more`.
    """

    __slots__ = ("buffer", "idle_since", "receive_timeout", "scope", "until", "writing")

    def __init__(self) -> None:
        self.writing = False
        """Whether the exchange's deadline is still the write's (else the read's)."""
        self.buffer = bytearray()
        self.idle_since = 0.0
        self.receive_timeout = _NO_LIMIT
        """Seconds one receive may wait (httpx's per-read timeout); inf when the whole response
        is bounded instead."""
        self.scope: anyio.CancelScope | None = None
        """The exchange's one cancel scope (streams), whose deadline the phases move."""
        self.until = _NO_LIMIT
        """The exchange's `deadline`: no receive waits past it."""

    def bound(self, deadline: float) -> None:
        """From now on no wait of this exchange lasts past `deadline` (a loop time)."""
        if self.scope is not None:
            self.scope.deadline = deadline

    async def read_more(self, at_most: int) -> bool:
        """Add at least one byte to the buffer (up to `at_most`); False at the end of the stream."""
        if self.receive_timeout != _NO_LIMIT:
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


class _StreamConnection(_Connection):
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
            chunk = await self.stream.receive(min(at_most, _READ_SIZE))
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


class _PeerConnection(_Connection, asyncio.BufferedProtocol):
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
        self.wait_until = _NO_LIMIT
        """No wait lasts past this loop time: the exchange's deadline, without a cancel scope."""

    # -- asyncio.BufferedProtocol: called by the event loop --------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self._transport = transport

    def get_buffer(self, sizehint: int) -> memoryview:
        return self._scratch

    def buffer_updated(self, nbytes: int) -> None:
        self.buffer += self._scratch[:nbytes]
        if len(self.buffer) >= _READ_SIZE and self._transport is not None:
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
        # The exchange's deadline fails the future (`_Expired`); a cancel scope around the
        # caller cancels the task, and with it the future. Nothing here outlives either.
        loop = self._loop
        waiter = self._waiter = loop.create_future()
        timer = (
            None if self.wait_until == _NO_LIMIT else loop.call_at(self.wait_until, _expire, waiter)
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


def _seconds(timeouts: Mapping[str, float | None], phase: str) -> float:
    value = timeouts.get(phase)
    return _NO_LIMIT if value is None else float(value)


def _check_fields(headers: Sequence[tuple[bytes, bytes]]) -> None:
    # httpx checks header values as it builds a Request; the raw path has none to do it, and a
    # CR or LF in a value (a key read from a file with its newline) would split the request.
    # All names, then all values, in one pass each: the common case is that all are fine.
    if len(headers) == 1 and headers[0][0] == b"content-length" and headers[0][1].isdigit():
        return  # a raw-core caller's one line of its own (`JudgeClient`): 0.3 µs, not 3
    names = b"".join(name for name, _ in headers)
    values = b"".join(value for _, value in headers).replace(b"\t", b"")
    if names.translate(None, _TCHAR) or _has_control(values) or not all(n for n, _ in headers):
        bad = next(
            name
            for name, value in headers
            if not _is_token(name) or _has_control(value.replace(b"\t", b""))
        )
        raise httpx2.LocalProtocolError(f"illegal header line {bad[:64]!r}")


class HeaderLines:
    """Header lines checked and encoded once, for every request of a client (`fixed=`).

    A dozen SDK headers cost more to check and format on each call than to send.

    Raises:
        httpx2.LocalProtocolError: a name that is no token, or a value with a control byte.
    """

    __slots__ = ("encoded", "fields")

    def __init__(self, fields: Sequence[tuple[bytes, bytes]]) -> None:
        _check_fields(fields)
        self.fields = tuple(fields)
        """The (name, value) pairs, in order."""
        self.encoded = b"".join(b"%s: %s\r\n" % field for field in self.fields)
        """The lines as sent, each ending in CRLF."""


class KeepAliveTransport(httpx2.AsyncBaseTransport):
    """HTTP/1.1 with a per-host stack of idle keep-alive connections.

    Two ways in: `exchange` (method, URL parts, header lines and body bytes in; status, header
    lines and body bytes out), the raw core that `JudgeClient` and the model adapters call
    directly; and `handle_async_request`, a thin `httpx2.AsyncBaseTransport` adapter over it,
    for an `httpx2.AsyncClient`.

    Args:
        max_connections: At most this many connections open at once (requests beyond wait).
        keepalive_expiry: Idle connections older than this (seconds) are closed, not reused.
        ssl_context: TLS settings for `https` (default: httpx's, with the system's trust store).
        max_response_bytes: A response body longer than this raises `ResponseTooLargeError`
            as soon as that is known (the declared length, or the bytes read so far), and the
            connection is closed: memory per request stays bounded.
        too_large: builds that error instead, from (host, limit, declared length or None) (an
            SDK adapter raises its own type, one the SDK neither wraps nor retries).
        socket_options: set on every new TCP connection (an SDK's keep-alive probes).
        retry_stale: a reused connection that fails before any byte of the response is retried
            once on a fresh one (as urllib3 does). Off, it raises `RemoteProtocolError` and the
            caller's own retry policy decides (an SDK's `max_retries=0` then means no resend).
        per_read_timeout: apply the `read` timeout to each receive, as httpx does (a body that
            keeps arriving is never cut off), instead of to the whole response. Under an SDK
            whose `timeout` is documented per read, with a total deadline kept around the call,
            this keeps the SDK's meaning.
    """

    def __init__(
        self,
        *,
        max_connections: int = 100,
        keepalive_expiry: float = 30.0,
        ssl_context: ssl.SSLContext | None = None,
        max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES,
        too_large: TooLarge | None = None,
        socket_options: Sequence[SocketOption] = (),
        retry_stale: bool = True,
        per_read_timeout: bool = False,
    ) -> None:
        self._retry_stale = retry_stale
        self._per_read_timeout = per_read_timeout
        self._max_connections = max_connections
        self._max_response_bytes = max_response_bytes
        self._too_large = too_large or _too_large
        self._socket_options = tuple(socket_options)
        self._keepalive_expiry = keepalive_expiry
        self._ssl_context = ssl_context
        self._idle: dict[tuple[str, str, int], deque[_Connection]] = {}
        self._slots: anyio.Semaphore | None = None
        self._scratch: memoryview | None = None
        self._closed = False

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        """Send `request` and read the whole response (`exchange`, for `httpx2.AsyncClient`)."""
        url = request.url
        body = await request.aread()
        timeouts = request.extensions.get("timeout", {})
        try:
            raw = await self.exchange(
                request.method,
                url.scheme,
                url.host,
                url.port,
                url.raw_path,
                request.headers.raw,
                body,
                connect=_seconds(timeouts, "connect"),
                write=_seconds(timeouts, "write"),
                read=_seconds(timeouts, "read"),
                pool=_seconds(timeouts, "pool"),
            )
        except httpx2.RequestError as exc:
            exc.request = request  # httpx's errors name their request; the core knows none
            raise
        return httpx2.Response(
            raw.status_code,
            headers=raw.raw_headers,
            stream=httpx2.ByteStream(raw.content),
            extensions={"http_version": b"HTTP/1.1", "reason_phrase": raw.reason},
        )

    async def exchange(
        self,
        method: str,
        scheme: str,
        host: str,
        port: int | None,
        target: bytes,
        headers: Sequence[tuple[bytes, bytes]],
        body: bytes,
        *,
        connect: float = _NO_LIMIT,
        write: float = _NO_LIMIT,
        read: float = _NO_LIMIT,
        pool: float = _NO_LIMIT,
        fixed: HeaderLines | None = None,
        deadline: float = _NO_LIMIT,
    ) -> RawResponse:
        """Send one request and read its whole response: the raw core, no httpx objects.

        Args:
            method: `GET`, `POST`, ...
            scheme: `http` or `https`.
            host: the host to connect to (and, for TLS, to verify).
            port: the port; `None` for the scheme's default.
            target: the request target, path and query, as sent (`b"/v1/systemone"`).
            headers: every header line to send, as given: `Host` and `Content-Length` are the
                caller's to include. A name that is no token or a value with a control byte
                raises `httpx2.LocalProtocolError` before anything is sent.
            body: the request body.
            connect: seconds to open a connection (`inf`: no limit), as httpx's `Timeout`.
            write: seconds to send the request.
            read: seconds for the whole response, or for each receive with `per_read_timeout`.
            pool: seconds to wait for a free connection.
            fixed: header lines checked and encoded once, sent before `headers` (a client's
                constant ones: auth, user agent, ...).
            deadline: an `anyio.current_time()` past which no phase waits: the phase waiting
                then raises its own timeout. A caller's bound on the whole exchange, without a
                cancel scope of its own around it (one more scope per call).

        Raises:
            httpx2.TransportError: httpx's own types, without a `request`: `ConnectTimeout`,
                `ConnectError`, `WriteTimeout`, `WriteError`, `ReadTimeout`, `ReadError`,
                `PoolTimeout`, `RemoteProtocolError` (`MalformedResponseError` for bytes that
                are no HTTP/1.1), `UnsupportedProtocol`, `LocalProtocolError`.
            ResponseTooLargeError: the body is over `max_response_bytes` (or `too_large`'s).
        """
        if self._closed:
            raise httpx2.TransportError("the transport is closed")
        if scheme not in ("http", "https"):
            raise httpx2.UnsupportedProtocol(f"unsupported URL scheme {scheme!r}")
        _check_fields(headers)
        key = (scheme, host, port or (443 if scheme == "https" else 80))
        head = [b"%s %s HTTP/1.1\r\n" % (method.encode("ascii"), target)]
        if fixed is not None:
            head.append(fixed.encoded)
        head.extend(b"%s: %s\r\n" % field for field in headers)
        head.append(b"\r\n")
        head.append(body)
        payload = b"".join(head)
        del head  # its lines would stay alive (about 1 KB) for as long as the exchange lasts
        slots = self._slots
        if slots is None:
            slots = self._slots = anyio.Semaphore(self._max_connections)
        await _acquire(slots, deadline if pool == _NO_LIMIT else min(loop_time() + pool, deadline))
        phases = (write, read, deadline)
        try:
            connection = await self._take_idle(key)
            if connection is not None:
                try:
                    return await self._exchange(connection, key, payload, method, phases, True)
                except _StaleConnection as exc:
                    if not self._retry_stale:
                        # The caller retries (or not) by its own policy: the server may have
                        # read the request before it closed.
                        raise httpx2.RemoteProtocolError(str(exc)) from None
            connection = await self._connect(key, min(loop_time() + connect, deadline))
            try:
                return await self._exchange(connection, key, payload, method, phases, False)
            except _StaleConnection as exc:  # pragma: no cover - only raised for reused ones
                raise httpx2.RemoteProtocolError(str(exc)) from None
        finally:
            slots.release()

    async def _take_idle(self, key: tuple[str, str, int]) -> _Connection | None:
        stack = self._idle.get(key)
        if not stack:
            return None
        oldest_allowed = time.monotonic() - self._keepalive_expiry
        while stack:
            connection = stack.pop()  # the most recently used one is the most likely alive
            fresh = connection.idle_since >= oldest_allowed and not connection.buffer
            if fresh and connection.still_open():
                return connection
            await connection.close()  # expired, closed by the server, or holding stray bytes
        return None

    async def _connect(self, key: tuple[str, str, int], until: float) -> _Connection:
        scheme, host, port = key
        context = None
        if scheme == "https":
            context = self._ssl_context or httpx2.create_ssl_context()
            self._ssl_context = context
        loop = _asyncio_loop()
        try:
            with anyio.fail_at(until):
                if loop is not None and await _one_family(loop, host, port):
                    connection: _Connection = await self._open_peer(loop, host, port, context)
                else:
                    connection = await _open_stream(host, port, context)
        except TimeoutError:
            raise httpx2.ConnectTimeout(f"connecting to {host}:{port} timed out") from None
        except (OSError, anyio.BrokenResourceError, ssl.SSLError) as exc:
            raise httpx2.ConnectError(f"{type(exc).__name__}: {exc}") from None
        if self._socket_options:
            connection.set_options(self._socket_options)
        return connection

    async def _open_peer(
        self,
        loop: asyncio.AbstractEventLoop,
        host: str,
        port: int,
        context: ssl.SSLContext | None,
    ) -> _PeerConnection:
        scratch = self._scratch
        if scratch is None:
            scratch = self._scratch = memoryview(bytearray(_READ_SIZE))
        connection = _PeerConnection(loop, scratch)
        # Addresses of one family, tried in turn (asyncio sets TCP_NODELAY, as anyio does). Not
        # asyncio's happy eyeballs: on Python 3.11 a cancelled `staggered_race` leaks the socket
        # it was connecting (tests/reliability/test_cancellation.py caught it). Names with IPv4
        # and IPv6 addresses go to anyio's `connect_tcp`, whose happy eyeballs do not.
        await loop.create_connection(
            lambda: connection,
            host,
            port,
            ssl=context,
            server_hostname=host if context is not None else None,
        )
        return connection

    async def _exchange(
        self,
        connection: _Connection,
        key: tuple[str, str, int],
        payload: bytes,
        method: str,
        phases: tuple[float, float, float],
        reused: bool,
    ) -> RawResponse:
        """Write, then read, within (write seconds, read seconds, the caller's deadline)."""
        write, read, until = phases
        done = False
        per_read = self._per_read_timeout
        # One deadline for the whole exchange, moved from phase to phase: a scope, and each
        # timer it sets, cost more than the rest of a small request's work. A request that
        # cannot block on its send needs no write deadline: its clock starts on the read's.
        writing = len(payload) > _FITS_SEND_BUFFER
        now = loop_time()
        read_clock = until if per_read else min(now + read, until)
        deadline = min(now + write, until) if writing else read_clock
        connection.receive_timeout = read if per_read else _NO_LIMIT
        connection.until = until
        connection.writing = writing
        try:
            if type(connection) is _PeerConnection:
                # Its own waits carry the deadline (one timer each): no cancel scope, which
                # cost four times the timer (16 µs against 4, `bench_judge_client`).
                connection.bound(deadline)
                try:
                    response, keep_alive = await self._transfer(
                        connection, key, payload, method, phases, reused
                    )
                except _Expired:
                    raise _phase_timeout(connection) from None
            else:
                with anyio.CancelScope(deadline=deadline) as scope:
                    connection.scope = scope  # the phases move its deadline
                    response, keep_alive = await self._transfer(
                        connection, key, payload, method, phases, reused
                    )
                if scope.cancelled_caught:
                    raise _phase_timeout(connection)
            done = True
        finally:
            connection.scope = None
            if not done:
                await connection.close()
        if keep_alive and not self._closed:
            connection.idle_since = time.monotonic()
            self._idle.setdefault(key, deque()).append(connection)
        else:
            await connection.close()
        return response

    async def _transfer(
        self,
        connection: _Connection,
        key: tuple[str, str, int],
        payload: bytes,
        method: str,
        phases: tuple[float, float, float],
        reused: bool,
    ) -> tuple[RawResponse, bool]:
        """The write, then the read, of `_exchange`, inside its deadline."""
        _, read, until = phases
        try:
            await connection.send(payload)
        except (OSError, anyio.BrokenResourceError, anyio.ClosedResourceError) as exc:
            if reused:
                raise _StaleConnection(str(exc)) from None
            raise httpx2.WriteError(f"{type(exc).__name__}: {exc}") from None
        if connection.writing:  # the write's deadline is over; the read's begins
            later = loop_time() + read
            connection.bound(until if self._per_read_timeout else min(later, until))
            connection.writing = False
        try:
            return await self._read_response(connection, key[1], method, reused)
        except OSError as exc:
            raise httpx2.ReadError(f"{type(exc).__name__}: {exc}") from None

    async def _read_response(
        self, connection: _Connection, host: str, method: str, reused: bool
    ) -> tuple[RawResponse, bool]:
        head = await _read_head(connection, reused)
        framing = _framing(head)
        limit = self._max_response_bytes
        delimited = True
        try:
            if method == "HEAD" or head.status in _NO_BODY_STATUSES:
                content = b""
            elif framing.chunked:
                content = await _read_chunked(connection, limit)
            elif framing.length is not None:
                content = await _read_exactly(connection, framing.length, limit)
            else:
                content = await _read_until_close(connection, limit)
                delimited = False  # read to the end of the stream: nothing left to reuse
        except _BodyTooLarge as exc:
            raise self._too_large(host, limit, exc.declared) from None
        response = RawResponse(head.status, head.reason, head.headers, content)
        return response, framing.keep_alive and delimited

    async def aclose(self) -> None:
        """Close every idle connection."""
        self._closed = True
        stacks, self._idle = self._idle, {}
        for stack in stacks.values():
            for connection in stack:
                await connection.close()


async def _one_family(loop: asyncio.AbstractEventLoop, host: str, port: int) -> bool:
    """Whether `host` is an IP address, or a name whose addresses are all of one family."""
    with contextlib.suppress(ValueError):
        ipaddress.ip_address(host)
        return True
    try:
        found = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except OSError:
        return False  # anyio's connect will raise the resolver's error
    return len({family for family, *_ in found}) == 1


async def _open_stream(host: str, port: int, context: ssl.SSLContext | None) -> _Connection:
    if context is None:
        return _StreamConnection(await anyio.connect_tcp(host, port))
    return _StreamConnection(
        await anyio.connect_tcp(host, port, ssl_context=context, tls_hostname=host)
    )


def _asyncio_loop() -> asyncio.AbstractEventLoop | None:
    """The running asyncio loop, or `None` on another backend (then anyio's streams are used)."""
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


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


async def _acquire(slots: anyio.Semaphore, until: float) -> None:
    """A connection slot, by `until` at most, else httpx's `PoolTimeout`."""
    try:
        await acquire_by(slots, until)
    except TimeoutError:
        # httpx's own name for it, so callers map it like every other transport timeout.
        raise httpx2.PoolTimeout("waiting for a free connection timed out") from None


# -- reading a response: every byte the server sends is checked against RFC 9112 -------------


def _malformed(what: str, raw: bytes = b"") -> MalformedResponseError:
    # At most a prefix of what the server sent: enough to recognise it, never a flood.
    return MalformedResponseError(f"malformed response: {what}", excerpt=raw[:_EXCERPT])


class _BodyTooLarge(Exception):
    """Raised by the body readers; the transport turns it into its `too_large` error."""

    def __init__(self, declared: int | None) -> None:
        super().__init__()
        self.declared = declared


def _too_large(host: str, limit: int, declared: int | None) -> Exception:
    # Not an httpx error: httpx passes what a transport raises through unchanged, and the one
    # jevrefine type lets every caller catch the cap alike, whichever reader hit it.
    return ResponseTooLargeError(
        f"the response from {host} is larger than max_response_bytes={limit:,}; "
        "the read stopped and the connection was closed",
        limit=limit,
    )


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


def _is_token(value: bytes) -> bool:
    return bool(value) and not value.translate(None, _TCHAR)


def _has_control(value: bytes) -> bool:
    return bool(value) and len(value.translate(None, _CONTROL)) != len(value)


class _Head:
    __slots__ = ("headers", "reason", "status", "version")

    def __init__(
        self, version: bytes, status: int, reason: bytes, headers: list[tuple[bytes, bytes]]
    ) -> None:
        self.version = version
        self.status = status
        self.reason = reason
        self.headers = headers


class _Framing:
    __slots__ = ("chunked", "keep_alive", "length")

    def __init__(self, *, chunked: bool, length: int | None, keep_alive: bool) -> None:
        self.chunked = chunked
        self.length = length
        self.keep_alive = keep_alive


async def _read_head(connection: _Connection, reused: bool) -> _Head:
    """The status line and headers of the final response; interim 1xx responses are skipped."""
    for _ in range(_MAX_INTERIM + 1):
        buffer = connection.buffer
        while (end := buffer.find(b"\r\n\r\n")) < 0:
            if len(buffer) > _MAX_HEAD:
                raise _malformed(f"the head is longer than {_MAX_HEAD} bytes")
            if not await connection.read_more(_READ_SIZE):
                if reused and not buffer:
                    raise _StaleConnection("the server closed an idle connection")
                raise httpx2.RemoteProtocolError(
                    "the server closed the connection without a full response"
                )
        if end > _MAX_HEAD:
            raise _malformed(f"the head is longer than {_MAX_HEAD} bytes")
        head = bytes(buffer[:end])
        del buffer[: end + 4]
        version, status, reason, headers = _parse_head(head)
        if status == 101:
            raise _malformed("101 Switching Protocols was never asked for")
        if status >= 200:
            return _Head(version, status, reason, headers)
    raise _malformed(f"more than {_MAX_INTERIM} interim (1xx) responses")


# The whole head at once, in C: a status line and at most 100 header lines, each a token, a colon
# and a value of visible bytes, spaces and tabs, at most 8 KiB a line. It accepts a subset of what
# the line-by-line reading (`_status_line`, `_field`) accepts; anything else goes to that, which
# names the fault. One regular expression instead of a Python call per line halved the head's
# CPU (`python -m benchmarks.bench_judge_client`). No nested quantifier can match the same byte
# two ways (a value holds no CR or LF, a name no colon), so a hostile head costs linear time.
_VALUE_BYTE: Final = rb"[\t\x20-\x7e\x80-\xff]"
_HEADER_LINE: Final = (
    rb"\r\n(?=[^\r\n]{1,%d}(?:\r\n|\Z))[" % _MAX_LINE
    + re.escape(_TCHAR)
    + rb"]+:"
    + _VALUE_BYTE
    + rb"*"
)
_HEAD: Final = re.compile(
    rb"(HTTP/1\.[01]) ([1-5][0-9][0-9])(?: (%s*))?((?:%s){0,%d})"
    % (_VALUE_BYTE, _HEADER_LINE, _MAX_HEADERS)
)
_PAIR: Final = re.compile(rb"\r\n([^:]+):[ \t]*([^\r\n]*)")


def _parse_head(head: bytes) -> tuple[bytes, int, bytes, list[tuple[bytes, bytes]]]:
    """(version, status, reason, header lines) of a head, without its final blank line."""
    match = _HEAD.fullmatch(head)
    if match is not None:
        version, status, reason, block = match.groups()
        fields = [(name, value.rstrip(b" \t")) for name, value in _PAIR.findall(block)]
        return version, int(status), reason or b"", fields
    lines = head.split(b"\r\n")
    version, code, reason = _status_line(lines[0])
    if len(lines) - 1 > _MAX_HEADERS:
        raise _malformed(f"more than {_MAX_HEADERS} header lines")
    return version, code, reason, [_field(line) for line in lines[1:]]


def _status_line(line: bytes) -> tuple[bytes, int, bytes]:
    version, _, rest = line.partition(b" ")
    status_text, _, reason = rest.partition(b" ")
    if (
        version not in (b"HTTP/1.1", b"HTTP/1.0")
        or len(status_text) != 3
        or not status_text.isdigit()  # ASCII digits only, for bytes
        or status_text[:1] not in b"12345"  # 100 to 599: RFC 9110's classes
        or _has_control(reason.replace(b"\t", b""))
    ):
        raise _malformed("bad status line", line)
    return version, int(status_text), reason


def _field(line: bytes) -> tuple[bytes, bytes]:
    """One header or trailer line as (name, value); a folded or broken line is an error."""
    if line[:1] in (b" ", b"\t"):
        # obs-fold: RFC 9112 lets a client unfold it, but no current server sends one, and a
        # continuation line is a classic way to hide a header from one parser and not another.
        raise _malformed("a folded header line (obs-fold)", line)
    if len(line) > _MAX_LINE:
        raise _malformed(f"a header line longer than {_MAX_LINE} bytes", line)
    name, sep, value = line.partition(b":")
    value = value.strip(b" \t")
    if not sep or not _is_token(name) or _has_control(value.replace(b"\t", b"")):
        raise _malformed("bad header line", line)
    return name, value


def _framing(head: _Head) -> _Framing:
    """How the body is delimited, and whether the connection may be reused afterwards."""
    lengths: list[bytes] = []
    codings: list[bytes] = []
    close = head.version == b"HTTP/1.0"
    for name, value in head.headers:
        lower = name.lower()
        if lower == b"content-length":
            lengths.append(value)
        elif lower == b"transfer-encoding":
            codings.extend(c.strip(b" \t").lower() for c in value.split(b","))
        elif lower == b"connection":
            tokens = {t.strip(b" \t").lower() for t in value.split(b",")}
            if b"close" in tokens:
                close = True
            elif b"keep-alive" in tokens:
                close = False
    if codings and lengths:
        # RFC 9112 §6.1: both at once is how responses are smuggled; refuse the message.
        raise _malformed("both transfer-encoding and content-length")
    if codings and codings != [b"chunked"]:
        # Any other coding would have to be undone here; httpx decodes content-encoding only.
        raise _malformed("unsupported transfer-encoding", b", ".join(codings))
    length = _content_length(lengths)
    return _Framing(chunked=bool(codings), length=length, keep_alive=not close)


def _content_length(values: list[bytes]) -> int | None:
    found: int | None = None
    for raw in values:
        for part in raw.split(b","):  # `Content-Length: 5, 5` is allowed when all agree
            digits = part.strip(b" \t")
            if not digits.isdigit():
                raise _malformed("bad content-length", raw)
            # More digits than any cap has: no need to build (or limit-check) a huge int.
            length = int(digits) if len(digits) <= _MAX_LENGTH_DIGITS else _HUGE
            if found is not None and length != found:
                raise _malformed("content-length values disagree", raw)
            found = length
    return found


async def _read_exactly(connection: _Connection, length: int, limit: int) -> bytes:
    if length > limit:
        raise _BodyTooLarge(length)
    buffer = connection.buffer
    while len(buffer) < length:
        if not await connection.read_more(length - len(buffer)):
            raise httpx2.RemoteProtocolError("incomplete response body")
    content = bytes(buffer[:length])
    del buffer[:length]
    return content


async def _read_until_close(connection: _Connection, limit: int) -> bytes:
    buffer = connection.buffer
    # Never ask for more than one byte past the cap: the cap bounds what is read, not only
    # what is kept (a stream reads no further; a protocol connection stops reading 64 KiB on).
    while len(buffer) <= limit and await connection.read_more(limit + 1 - len(buffer)):
        pass
    if len(buffer) > limit:
        raise _BodyTooLarge(None)
    content = bytes(buffer)
    buffer.clear()
    return content


async def _read_line(connection: _Connection, what: str) -> bytes:
    """One CRLF-terminated line of the chunked framing, at most `_MAX_LINE` bytes."""
    buffer = connection.buffer
    while (end := buffer.find(b"\r\n", 0, _MAX_LINE + 2)) < 0:
        if len(buffer) > _MAX_LINE:
            raise _malformed(f"{what} line longer than {_MAX_LINE} bytes", bytes(buffer))
        if not await connection.read_more(_READ_SIZE):
            raise httpx2.RemoteProtocolError("incomplete chunked body")
    line = bytes(buffer[:end])
    del buffer[: end + 2]
    return line


def _chunk_size(line: bytes) -> int:
    """`1*HEXDIG [ BWS ";" chunk-ext ]`; extensions are checked for control bytes, then ignored."""
    digits, sep, extension = line.partition(b";")
    if sep:
        digits = digits.rstrip(b" \t")  # BWS is allowed before the `;` only
        if _has_control(extension.replace(b"\t", b"")):
            raise _malformed("bad chunk extension", line)
    if not digits or len(digits) > _MAX_CHUNK_DIGITS or digits.translate(None, _HEXDIG):
        # Not int(x, 16): it takes '-', '+', '0x', blanks and '_', and a negative size once
        # let a server push the running total below zero and stream past the cap.
        raise _malformed("bad chunk size", line)
    return int(digits, 16)


async def _read_chunked(connection: _Connection, limit: int) -> bytes:
    buffer = connection.buffer
    parts: list[bytes] = []
    total = 0
    while True:
        size = _chunk_size(await _read_line(connection, "chunk size"))
        if size == 0:
            await _skip_trailers(connection)
            return b"".join(parts)
        total += size
        if total > limit:
            raise _BodyTooLarge(None)
        while len(buffer) < size + 2:
            if not await connection.read_more(size + 2 - len(buffer)):
                raise httpx2.RemoteProtocolError("incomplete chunk")
        if buffer[size : size + 2] != b"\r\n":
            raise _malformed("chunk data not followed by CRLF", bytes(buffer[size:]))
        parts.append(bytes(buffer[:size]))
        del buffer[: size + 2]


async def _skip_trailers(connection: _Connection) -> None:
    """Read the trailer section up to its blank line; trailers are checked, then dropped."""
    size = 0
    for _ in range(_MAX_HEADERS + 1):
        line = await _read_line(connection, "trailer")
        if not line:
            return
        size += len(line) + 2
        if size > _MAX_HEAD:
            raise _malformed(f"trailers longer than {_MAX_HEAD} bytes")
        _field(line)
    raise _malformed(f"more than {_MAX_HEADERS} trailer lines")
