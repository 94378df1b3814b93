"""A lean HTTP/1.1 keep-alive transport for `httpx2.AsyncClient`.

Used by `JudgeClient`, and under the `openai` and `anthropic` SDKs' clients by the model
adapters for their whole-response calls (`models/_bounded_transport.py` decides when).

Why not httpx's default transport: under load its connection pool rescans every connection for
every request (it `poll()`s each idle one: 642 µs per call with 1 idle connection, 4,054 µs with
200), and it writes the head and the body of each request in two system calls. A judge or a
batch of model calls sends many small, independent POSTs to one host, so a stack of idle
connections per host (O(1) to take and return) and one write per request cut the client's CPU
per call substantially (see `benchmarks/bench_judge_client.py`, `bench_adapter_cpu.py`).

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
(declared length, chunked, read until close): no more than one byte past it is ever read, and
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

import contextlib
import socket
import ssl
import time
from collections import deque
from collections.abc import Callable, Sequence
from typing import Final, TypeAlias

import anyio
import anyio.abc
import httpx2

from ._limits import DEFAULT_MAX_RESPONSE_BYTES
from .exceptions import ResponseTooLargeError

__all__ = [
    "MEASURED_WITH_HTTPX2",
    "KeepAliveTransport",
    "MalformedResponseError",
    "SocketOption",
    "TooLarge",
]

SocketOption: TypeAlias = tuple[int, int, int]
"""`(level, option, value)` for `socket.setsockopt`, e.g. TCP keep-alive probes."""

TooLarge: TypeAlias = Callable[[httpx2.Request, int, "int | None"], Exception]
"""Builds the error for a body over the cap: (request, limit, declared length or None)."""

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

MEASURED_WITH_HTTPX2: Final = ((2, 16), (2, 17))
"""The httpx2 versions (from, up to but not including) this transport was benchmarked with:
`python -m benchmarks --only bench_judge_client bench_adapter_cpu`, run 2026-12-01 with httpx2
2.16.2."""


class MalformedResponseError(httpx2.RemoteProtocolError):
    """The server's bytes are not a valid HTTP/1.1 response (not retried: it would answer so again).

    A connection that ends early is not this, but a plain `httpx2.RemoteProtocolError`.
    """

    def __init__(self, message: str, *, request: httpx2.Request, excerpt: bytes = b"") -> None:
        super().__init__(message, request=request)
        self.excerpt = excerpt
        """The start of the offending bytes (up to 1 KiB), kept out of the message: the server
        may have put a secret in them, and only the caller knows which to scrub."""


class _StaleConnection(Exception):
    """A reused connection failed before the response began: safe to try a new one."""


class _Connection:
    __slots__ = ("buffer", "idle_since", "receive_timeout", "stream")

    def __init__(self, stream: anyio.abc.ByteStream) -> None:
        self.stream = stream
        self.buffer = bytearray()
        self.idle_since = 0.0
        self.receive_timeout = _NO_LIMIT
        """Seconds one receive may wait (httpx's per-read timeout); inf when the whole response
        is bounded instead."""

    async def read_more(self, at_most: int) -> bool:
        """Append up to `at_most` bytes (and never more than 64 KiB) to the buffer."""
        size = min(at_most, _READ_SIZE)
        try:
            if self.receive_timeout == _NO_LIMIT:  # no cancel scope to pay for on each read
                chunk = await self.stream.receive(size)
            else:
                with anyio.fail_after(self.receive_timeout):
                    chunk = await self.stream.receive(size)
        except (anyio.EndOfStream, anyio.BrokenResourceError, anyio.ClosedResourceError):
            return False
        self.buffer += chunk
        return True

    async def close(self) -> None:
        with (
            anyio.CancelScope(shield=True),
            contextlib.suppress(OSError, anyio.BrokenResourceError, anyio.ClosedResourceError),
        ):
            await self.stream.aclose()


def _timeout(request: httpx2.Request, phase: str) -> float:
    value = request.extensions.get("timeout", {}).get(phase)
    return float("inf") if value is None else float(value)


class KeepAliveTransport(httpx2.AsyncBaseTransport):
    """HTTP/1.1 with a per-host stack of idle keep-alive connections.

    Args:
        max_connections: At most this many connections open at once (requests beyond wait).
        keepalive_expiry: Idle connections older than this (seconds) are closed, not reused.
        ssl_context: TLS settings for `https` (default: httpx's, with the system's trust store).
        max_response_bytes: A response body longer than this raises `ResponseTooLargeError`
            as soon as that is known (the declared length, or the bytes read so far), and the
            connection is closed: memory per request stays bounded.
        too_large: builds that error instead (an SDK adapter raises its own type, one the SDK
            neither wraps nor retries).
        socket_options: set on every new TCP connection (an SDK's keep-alive probes).
        retry_stale: a reused connection that fails before any byte of the response is retried
            once on a fresh one (as urllib3 does). Off, it raises `RemoteProtocolError` and the
            caller's own retry policy decides (an SDK's `max_retries=0` then means no resend).
        per_read_timeout: apply the request's `read` timeout to each receive, as httpx does
            (a body that keeps arriving is never cut off), instead of to the whole response.
            Under an SDK whose `timeout` is documented per read, with a total deadline kept
            around the call, this keeps the SDK's meaning.
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
        self._closed = False

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        """Send `request` and read the whole response."""
        if self._closed:
            raise httpx2.TransportError("the transport is closed", request=request)
        if self._slots is None:
            self._slots = anyio.Semaphore(self._max_connections)
        url = request.url
        scheme = url.scheme
        if scheme not in ("http", "https"):
            raise httpx2.UnsupportedProtocol(f"unsupported URL scheme {scheme!r}", request=request)
        port = url.port or (443 if scheme == "https" else 80)
        key = (scheme, url.host, port)
        body = await request.aread()
        head = [f"{request.method} {url.raw_path.decode('ascii')} HTTP/1.1\r\n".encode("ascii")]
        head.extend(b"%s: %s\r\n" % (name, value) for name, value in request.headers.raw)
        head.append(b"\r\n")
        payload = b"".join(head) + body
        del head  # its lines would stay alive (about 1 KB) for as long as the exchange lasts
        try:
            with anyio.fail_after(_timeout(request, "pool")):
                await self._slots.acquire()
        except TimeoutError:
            # httpx's own name for it, so callers map it like every other transport timeout.
            raise httpx2.PoolTimeout(
                "waiting for a free connection timed out", request=request
            ) from None
        try:
            connection = await self._take_idle(key)
            if connection is not None:
                try:
                    return await self._exchange(connection, request, key, payload, reused=True)
                except _StaleConnection as exc:
                    if not self._retry_stale:
                        # The caller retries (or not) by its own policy: the server may have
                        # read the request before it closed.
                        raise httpx2.RemoteProtocolError(str(exc), request=request) from None
            connection = await self._connect(request, key)
            try:
                return await self._exchange(connection, request, key, payload, reused=False)
            except _StaleConnection as exc:  # pragma: no cover - only raised for reused ones
                raise httpx2.RemoteProtocolError(str(exc), request=request) from None
        finally:
            self._slots.release()

    async def _take_idle(self, key: tuple[str, str, int]) -> _Connection | None:
        stack = self._idle.get(key)
        if not stack:
            return None
        oldest_allowed = time.monotonic() - self._keepalive_expiry
        while stack:
            connection = stack.pop()  # the most recently used one is the most likely alive
            fresh = connection.idle_since >= oldest_allowed and not connection.buffer
            if fresh and _still_open(connection.stream):
                return connection
            await connection.close()  # expired, closed by the server, or holding stray bytes
        return None

    async def _connect(self, request: httpx2.Request, key: tuple[str, str, int]) -> _Connection:
        scheme, host, port = key
        try:
            with anyio.fail_after(_timeout(request, "connect")):
                if scheme == "https":
                    context = self._ssl_context or httpx2.create_ssl_context()
                    self._ssl_context = context
                    stream: anyio.abc.ByteStream = await anyio.connect_tcp(
                        host, port, ssl_context=context, tls_hostname=host
                    )
                else:
                    stream = await anyio.connect_tcp(host, port)
                if self._socket_options:
                    _set_options(stream, self._socket_options)
        except TimeoutError:
            raise httpx2.ConnectTimeout(
                f"connecting to {host}:{port} timed out", request=request
            ) from None
        except (OSError, anyio.BrokenResourceError, ssl.SSLError) as exc:
            raise httpx2.ConnectError(f"{type(exc).__name__}: {exc}", request=request) from None
        return _Connection(stream)

    async def _exchange(
        self,
        connection: _Connection,
        request: httpx2.Request,
        key: tuple[str, str, int],
        payload: bytes,
        *,
        reused: bool,
    ) -> httpx2.Response:
        done = False
        try:
            try:
                with anyio.fail_after(_timeout(request, "write")):
                    await connection.stream.send(payload)
            except TimeoutError:
                raise httpx2.WriteTimeout(
                    "writing the request timed out", request=request
                ) from None
            except (OSError, anyio.BrokenResourceError, anyio.ClosedResourceError) as exc:
                if reused:
                    raise _StaleConnection(str(exc)) from None
                raise httpx2.WriteError(f"{type(exc).__name__}: {exc}", request=request) from None
            read_timeout = _timeout(request, "read")
            whole = _NO_LIMIT
            if self._per_read_timeout:
                connection.receive_timeout = read_timeout
            else:
                connection.receive_timeout, whole = whole, read_timeout
            try:
                with anyio.fail_after(whole):
                    response, keep_alive = await self._read_response(connection, request, reused)
            except TimeoutError:
                raise httpx2.ReadTimeout(
                    "reading the response timed out", request=request
                ) from None
            except OSError as exc:
                raise httpx2.ReadError(f"{type(exc).__name__}: {exc}", request=request) from None
            done = True
        finally:
            if not done:
                await connection.close()
        if keep_alive and not self._closed:
            connection.idle_since = time.monotonic()
            self._idle.setdefault(key, deque()).append(connection)
        else:
            await connection.close()
        return response

    async def _read_response(
        self, connection: _Connection, request: httpx2.Request, reused: bool
    ) -> tuple[httpx2.Response, bool]:
        head = await _read_head(connection, request, reused)
        framing = _framing(head, request)
        limit = self._max_response_bytes
        delimited = True
        try:
            if request.method == "HEAD" or head.status in _NO_BODY_STATUSES:
                content = b""
            elif framing.chunked:
                content = await _read_chunked(connection, request, limit)
            elif framing.length is not None:
                content = await _read_exactly(connection, request, framing.length, limit)
            else:
                content = await _read_until_close(connection, request, limit)
                delimited = False  # read to the end of the stream: nothing left to reuse
        except _BodyTooLarge as exc:
            raise self._too_large(request, limit, exc.declared) from None
        response = httpx2.Response(
            head.status,
            headers=head.headers,
            stream=httpx2.ByteStream(content),
            extensions={"http_version": b"HTTP/1.1", "reason_phrase": head.reason},
        )
        return response, framing.keep_alive and delimited

    async def aclose(self) -> None:
        """Close every idle connection."""
        self._closed = True
        stacks, self._idle = self._idle, {}
        for stack in stacks.values():
            for connection in stack:
                await connection.close()


# -- reading a response: every byte the server sends is checked against RFC 9112 -------------


def _malformed(request: httpx2.Request, what: str, raw: bytes = b"") -> MalformedResponseError:
    # At most a prefix of what the server sent: enough to recognise it, never a flood.
    return MalformedResponseError(
        f"malformed response: {what}", request=request, excerpt=raw[:_EXCERPT]
    )


class _BodyTooLarge(Exception):
    """Raised by the body readers; the transport turns it into its `too_large` error."""

    def __init__(self, declared: int | None) -> None:
        super().__init__()
        self.declared = declared


def _too_large(request: httpx2.Request, limit: int, declared: int | None) -> Exception:
    # Not an httpx error: httpx passes what a transport raises through unchanged, and the one
    # jevrefine type lets every caller catch the cap alike, whichever reader hit it.
    return ResponseTooLargeError(
        f"the response from {request.url.host} is larger than max_response_bytes={limit:,}; "
        "the read stopped and the connection was closed",
        limit=limit,
    )


def _still_open(stream: anyio.abc.ByteStream) -> bool:
    """Whether the peer has neither closed an idle connection nor sent on it unasked.

    One non-blocking peek at the one connection about to be reused (never a scan of the pool):
    a server that closed it while idle shows as end of stream, and the request goes to a fresh
    connection instead of failing. Over TLS, bytes waiting may be a ticket or a close alert:
    either way the connection is dropped, as httpcore does.
    """
    raw = stream.extra(anyio.abc.SocketAttribute.raw_socket, None)
    if not isinstance(raw, socket.socket):
        return True
    try:
        raw.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT)
    except BlockingIOError:
        return True  # nothing to read: open and quiet, as an idle connection should be
    except OSError:
        return False
    return False  # b"" (the peer closed it) or bytes nobody asked for


def _set_options(stream: anyio.abc.ByteStream, options: tuple[SocketOption, ...]) -> None:
    raw = stream.extra(anyio.abc.SocketAttribute.raw_socket, None)
    if isinstance(raw, socket.socket):
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


async def _read_head(connection: _Connection, request: httpx2.Request, reused: bool) -> _Head:
    """The status line and headers of the final response; interim 1xx responses are skipped."""
    for _ in range(_MAX_INTERIM + 1):
        buffer = connection.buffer
        while (end := buffer.find(b"\r\n\r\n")) < 0:
            if len(buffer) > _MAX_HEAD:
                raise _malformed(request, f"the head is longer than {_MAX_HEAD} bytes")
            if not await connection.read_more(_READ_SIZE):
                if reused and not buffer:
                    raise _StaleConnection("the server closed an idle connection")
                raise httpx2.RemoteProtocolError(
                    "the server closed the connection without a full response", request=request
                )
        if end > _MAX_HEAD:
            raise _malformed(request, f"the head is longer than {_MAX_HEAD} bytes")
        lines = bytes(buffer[:end]).split(b"\r\n")
        del buffer[: end + 4]
        version, status, reason = _status_line(lines[0], request)
        if len(lines) - 1 > _MAX_HEADERS:
            raise _malformed(request, f"more than {_MAX_HEADERS} header lines")
        headers = [_field(line, request) for line in lines[1:]]
        if status == 101:
            raise _malformed(request, "101 Switching Protocols was never asked for")
        if status >= 200:
            return _Head(version, status, reason, headers)
    raise _malformed(request, f"more than {_MAX_INTERIM} interim (1xx) responses")


def _status_line(line: bytes, request: httpx2.Request) -> tuple[bytes, int, bytes]:
    version, _, rest = line.partition(b" ")
    status_text, _, reason = rest.partition(b" ")
    if (
        version not in (b"HTTP/1.1", b"HTTP/1.0")
        or len(status_text) != 3
        or not status_text.isdigit()  # ASCII digits only, for bytes
        or status_text[:1] not in b"12345"  # 100 to 599: RFC 9110's classes
        or _has_control(reason.replace(b"\t", b""))
    ):
        raise _malformed(request, "bad status line", line)
    return version, int(status_text), reason


def _field(line: bytes, request: httpx2.Request) -> tuple[bytes, bytes]:
    """One header or trailer line as (name, value); a folded or broken line is an error."""
    if line[:1] in (b" ", b"\t"):
        # obs-fold: RFC 9112 lets a client unfold it, but no current server sends one, and a
        # continuation line is a classic way to hide a header from one parser and not another.
        raise _malformed(request, "a folded header line (obs-fold)", line)
    if len(line) > _MAX_LINE:
        raise _malformed(request, f"a header line longer than {_MAX_LINE} bytes", line)
    name, sep, value = line.partition(b":")
    value = value.strip(b" \t")
    if not sep or not _is_token(name) or _has_control(value.replace(b"\t", b"")):
        raise _malformed(request, "bad header line", line)
    return name, value


def _framing(head: _Head, request: httpx2.Request) -> _Framing:
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
        raise _malformed(request, "both transfer-encoding and content-length")
    if codings and codings != [b"chunked"]:
        # Any other coding would have to be undone here; httpx decodes content-encoding only.
        raise _malformed(request, "unsupported transfer-encoding", b", ".join(codings))
    length = _content_length(lengths, request)
    return _Framing(chunked=bool(codings), length=length, keep_alive=not close)


def _content_length(values: list[bytes], request: httpx2.Request) -> int | None:
    found: int | None = None
    for raw in values:
        for part in raw.split(b","):  # `Content-Length: 5, 5` is allowed when all agree
            digits = part.strip(b" \t")
            if not digits.isdigit():
                raise _malformed(request, "bad content-length", raw)
            # More digits than any cap has: no need to build (or limit-check) a huge int.
            length = int(digits) if len(digits) <= _MAX_LENGTH_DIGITS else _HUGE
            if found is not None and length != found:
                raise _malformed(request, "content-length values disagree", raw)
            found = length
    return found


async def _read_exactly(
    connection: _Connection, request: httpx2.Request, length: int, limit: int
) -> bytes:
    if length > limit:
        raise _BodyTooLarge(length)
    buffer = connection.buffer
    while len(buffer) < length:
        if not await connection.read_more(length - len(buffer)):
            raise httpx2.RemoteProtocolError("incomplete response body", request=request)
    content = bytes(buffer[:length])
    del buffer[:length]
    return content


async def _read_until_close(connection: _Connection, request: httpx2.Request, limit: int) -> bytes:
    buffer = connection.buffer
    # Never ask for more than one byte past the cap: the cap bounds what is read, not only
    # what is kept.
    while len(buffer) <= limit and await connection.read_more(limit + 1 - len(buffer)):
        pass
    if len(buffer) > limit:
        raise _BodyTooLarge(None)
    content = bytes(buffer)
    buffer.clear()
    return content


async def _read_line(connection: _Connection, request: httpx2.Request, what: str) -> bytes:
    """One CRLF-terminated line of the chunked framing, at most `_MAX_LINE` bytes."""
    buffer = connection.buffer
    while (end := buffer.find(b"\r\n", 0, _MAX_LINE + 2)) < 0:
        if len(buffer) > _MAX_LINE:
            raise _malformed(request, f"{what} line longer than {_MAX_LINE} bytes", bytes(buffer))
        if not await connection.read_more(_READ_SIZE):
            raise httpx2.RemoteProtocolError("incomplete chunked body", request=request)
    line = bytes(buffer[:end])
    del buffer[: end + 2]
    return line


def _chunk_size(line: bytes, request: httpx2.Request) -> int:
    """`1*HEXDIG [ BWS ";" chunk-ext ]`; extensions are checked for control bytes, then ignored."""
    digits, sep, extension = line.partition(b";")
    if sep:
        digits = digits.rstrip(b" \t")  # BWS is allowed before the `;` only
        if _has_control(extension.replace(b"\t", b"")):
            raise _malformed(request, "bad chunk extension", line)
    if not digits or len(digits) > _MAX_CHUNK_DIGITS or digits.translate(None, _HEXDIG):
        # Not int(x, 16): it takes '-', '+', '0x', blanks and '_', and a negative size once
        # let a server push the running total below zero and stream past the cap.
        raise _malformed(request, "bad chunk size", line)
    return int(digits, 16)


async def _read_chunked(connection: _Connection, request: httpx2.Request, limit: int) -> bytes:
    buffer = connection.buffer
    parts: list[bytes] = []
    total = 0
    while True:
        size = _chunk_size(await _read_line(connection, request, "chunk size"), request)
        if size == 0:
            await _skip_trailers(connection, request)
            return b"".join(parts)
        total += size
        if total > limit:
            raise _BodyTooLarge(None)
        while len(buffer) < size + 2:
            if not await connection.read_more(size + 2 - len(buffer)):
                raise httpx2.RemoteProtocolError("incomplete chunk", request=request)
        if buffer[size : size + 2] != b"\r\n":
            raise _malformed(request, "chunk data not followed by CRLF", bytes(buffer[size:]))
        parts.append(bytes(buffer[:size]))
        del buffer[: size + 2]


async def _skip_trailers(connection: _Connection, request: httpx2.Request) -> None:
    """Read the trailer section up to its blank line; trailers are checked, then dropped."""
    size = 0
    for _ in range(_MAX_HEADERS + 1):
        line = await _read_line(connection, request, "trailer")
        if not line:
            return
        size += len(line) + 2
        if size > _MAX_HEAD:
            raise _malformed(request, f"trailers longer than {_MAX_HEAD} bytes")
        _field(line, request)
    raise _malformed(request, f"more than {_MAX_HEADERS} trailer lines")
