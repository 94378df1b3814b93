"""The raw keep-alive core: a per-host stack of idle HTTP/1.1 connections, and one exchange.

`ConnectionPool.exchange` takes method, URL parts, header lines and body bytes, and gives back
status, header lines and body bytes (`RawResponse`), with per-phase timeouts, the body cap,
keep-alive and httpx2's typed errors; no httpx objects. Why not httpx's pool: under load it
rescans every connection for every request (it `poll()`s each idle one), and it writes the head
and the body of each request in two system calls; a stack of idle connections per host (O(1) to
take and return) and one write per request cost far less CPU per call
(`python -m benchmarks.bench_judge_client`, `bench_adapter_cpu`; figures in docs/benchmarks.md).
For the same reason it takes a free connection slot without a checkpoint, and moves one deadline
from phase to phase instead of opening a cancel scope per phase.

Scope, deliberately small: HTTP/1.1 over TCP or TLS, request bodies already in memory,
`Content-Length`, chunked and read-until-close response bodies, each read whole before the
response is returned (so no streaming; decompression stays with httpx's `Response`). No proxies
and no HTTP/2: the wire routes those to httpx2 (`jevrefine._http.open_wire`). A reused
connection that the server closed while idle, before any byte of the response, is resent once on
a fresh one when `retry_stale` (as urllib3 does); otherwise the caller's retry policy decides.
"""

from __future__ import annotations

import asyncio
import ssl
import time
from collections import deque
from collections.abc import Callable, Sequence
from typing import TypeAlias

import anyio
import httpx2

from ..exceptions import ResponseTooLargeError
from ._clock import NO_LIMIT, acquire_by, loop_time
from ._connections import (
    FITS_SEND_BUFFER,
    Connection,
    Expired,
    PeerConnection,
    SocketOption,
    asyncio_loop,
    one_family,
    open_stream,
    phase_timeout,
)
from ._h11 import (
    NO_BODY_STATUSES,
    READ_SIZE,
    BodyTooLarge,
    ClosedBeforeResponse,
    check_fields,
    framing_of,
    read_chunked,
    read_exactly,
    read_head,
    read_until_close,
)
from ._limits import DEFAULT_MAX_RESPONSE_BYTES

__all__ = ["ConnectionPool", "HeaderLines", "RawResponse", "StaleConnection", "TooLarge"]


TooLarge: TypeAlias = Callable[[str, int, "int | None"], Exception]
"""Builds the error for a body over the cap: (host, limit, declared length or None)."""


class StaleConnection(Exception):
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


class HeaderLines:
    """Header lines checked and encoded once, for every request of a client (`fixed=`).

    A dozen SDK headers cost more to check and format on each call than to send.

    Raises:
        httpx2.LocalProtocolError: a name that is no token, or a value with a control byte.
    """

    __slots__ = ("encoded", "fields")

    def __init__(self, fields: Sequence[tuple[bytes, bytes]]) -> None:
        check_fields(fields)
        self.fields = tuple(fields)
        """The (name, value) pairs, in order."""
        self.encoded = b"".join(b"%s: %s\r\n" % field for field in self.fields)
        """The lines as sent, each ending in CRLF."""


class ConnectionPool:
    """HTTP/1.1 with a per-host stack of idle keep-alive connections: `exchange` is the raw core.

    Method, URL parts, header lines and body bytes in; status, header lines and body bytes out.
    `KeepAliveTransport` (`jevrefine._http._httpx`) is the same pool as an httpx2 transport.

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
        self._too_large = too_large or default_too_large
        self._socket_options = tuple(socket_options)
        self._keepalive_expiry = keepalive_expiry
        self._ssl_context = ssl_context
        self._idle: dict[tuple[str, str, int], deque[Connection]] = {}
        self._slots: anyio.Semaphore | None = None
        self._scratch: memoryview | None = None
        self._closed = False

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
        connect: float = NO_LIMIT,
        write: float = NO_LIMIT,
        read: float = NO_LIMIT,
        pool: float = NO_LIMIT,
        fixed: HeaderLines | None = None,
        deadline: float = NO_LIMIT,
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
        check_fields(headers)
        key = (scheme, host, port or (443 if scheme == "https" else 80))
        head = [b"%s %s HTTP/1.1\r\n" % (method.encode("ascii"), target)]
        if fixed is not None:
            head.append(fixed.encoded)
        head.extend(b"%s: %s\r\n" % field for field in headers)
        head.append(b"\r\n")
        head.append(body)
        payload = b"".join(head)
        del head  # its lines would stay alive for as long as the exchange lasts
        slots = self._slots
        if slots is None:
            slots = self._slots = anyio.Semaphore(self._max_connections)
        await _acquire(slots, deadline if pool == NO_LIMIT else min(loop_time() + pool, deadline))
        phases = (write, read, deadline)
        try:
            connection = await self._take_idle(key)
            if connection is not None:
                try:
                    return await self._exchange(connection, key, payload, method, phases, True)
                except StaleConnection as exc:
                    if not self._retry_stale:
                        # The caller retries (or not) by its own policy: the server may have
                        # read the request before it closed.
                        raise httpx2.RemoteProtocolError(str(exc)) from None
            connection = await self._connect(key, min(loop_time() + connect, deadline))
            try:
                return await self._exchange(connection, key, payload, method, phases, False)
            except StaleConnection as exc:  # pragma: no cover - only raised for reused ones
                raise httpx2.RemoteProtocolError(str(exc)) from None
        finally:
            slots.release()

    async def _take_idle(self, key: tuple[str, str, int]) -> Connection | None:
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

    async def _connect(self, key: tuple[str, str, int], until: float) -> Connection:
        scheme, host, port = key
        context = None
        if scheme == "https":
            context = self._ssl_context or httpx2.create_ssl_context()
            self._ssl_context = context
        loop = asyncio_loop()
        try:
            with anyio.fail_at(until):
                if loop is not None and await one_family(loop, host, port):
                    connection: Connection = await self._open_peer(loop, host, port, context)
                else:
                    connection = await open_stream(host, port, context)
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
    ) -> PeerConnection:
        scratch = self._scratch
        if scratch is None:
            scratch = self._scratch = memoryview(bytearray(READ_SIZE))
        connection = PeerConnection(loop, scratch)
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
        connection: Connection,
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
        writing = len(payload) > FITS_SEND_BUFFER
        now = loop_time()
        read_clock = until if per_read else min(now + read, until)
        deadline = min(now + write, until) if writing else read_clock
        connection.receive_timeout = read if per_read else NO_LIMIT
        connection.until = until
        connection.writing = writing
        try:
            if type(connection) is PeerConnection:
                # Its own waits carry the deadline (one timer each): no cancel scope, which
                # costs several times the timer (`bench_judge_client`; docs/benchmarks.md).
                connection.bound(deadline)
                try:
                    response, keep_alive = await self._transfer(
                        connection, key, payload, method, phases, reused
                    )
                except Expired:
                    raise phase_timeout(connection) from None
            else:
                with anyio.CancelScope(deadline=deadline) as scope:
                    connection.scope = scope  # the phases move its deadline
                    response, keep_alive = await self._transfer(
                        connection, key, payload, method, phases, reused
                    )
                if scope.cancelled_caught:
                    raise phase_timeout(connection)
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
        connection: Connection,
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
                raise StaleConnection(str(exc)) from None
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
        self, connection: Connection, host: str, method: str, reused: bool
    ) -> tuple[RawResponse, bool]:
        try:
            head = await read_head(connection)
        except ClosedBeforeResponse as exc:
            if reused:  # closed while idle: the request may go to a fresh connection
                raise StaleConnection(str(exc)) from None
            raise
        framing = framing_of(head)
        limit = self._max_response_bytes
        delimited = True
        try:
            if method == "HEAD" or head.status in NO_BODY_STATUSES:
                content = b""
            elif framing.chunked:
                content = await read_chunked(connection, limit)
            elif framing.length is not None:
                content = await read_exactly(connection, framing.length, limit)
            else:
                content = await read_until_close(connection, limit)
                delimited = False  # read to the end of the stream: nothing left to reuse
        except BodyTooLarge as exc:
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


async def _acquire(slots: anyio.Semaphore, until: float) -> None:
    """A connection slot, by `until` at most, else httpx's `PoolTimeout`."""
    try:
        await acquire_by(slots, until)
    except TimeoutError:
        # httpx's own name for it, so callers map it like every other transport timeout.
        raise httpx2.PoolTimeout("waiting for a free connection timed out") from None


def default_too_large(host: str, limit: int, declared: int | None) -> Exception:
    # Not an httpx error: httpx passes what a transport raises through unchanged, and the one
    # jevrefine type lets every caller catch the cap alike, whichever reader hit it.
    return ResponseTooLargeError(
        f"the response from {host} is larger than max_response_bytes={limit:,}; "
        "the read stopped and the connection was closed",
        limit=limit,
    )
