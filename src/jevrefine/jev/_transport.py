"""A lean HTTP/1.1 keep-alive transport for `httpx2.AsyncClient`, used by `JudgeClient`.

Why not httpx's default transport: under load its connection pool rescans every connection for
every request (quadratic at 64 requests in flight), and it writes the head and the body of each
request in two system calls. A judge client sends many small, independent POSTs to one host, so
a stack of idle connections per host (O(1) to take and return) and one write per request cut the
client's CPU per call substantially (see `benchmarks/bench_judge_client.py`).

Scope, deliberately small: HTTP/1.1 over TCP or TLS, request bodies already in memory,
`Content-Length`, chunked and read-until-close response bodies (decompression stays with
httpx's `Response`). No proxies and no HTTP/2: pass your own `http_client=` for those.
A pooled connection that the server closed while idle is retried once on a fresh connection,
when the failure came before any byte of the response (as urllib3 does).
"""

from __future__ import annotations

import contextlib
import ssl
import time
from collections import deque
from typing import Final

import anyio
import anyio.abc
import httpx2

__all__ = ["DEFAULT_MAX_RESPONSE_BYTES", "KeepAliveTransport", "ResponseTooLargeError"]

_MAX_HEAD: Final = 64 * 1024
_READ_SIZE: Final = 65536
_NO_BODY_STATUSES: Final = frozenset({204, 304})
DEFAULT_MAX_RESPONSE_BYTES: Final = 16 * 1024 * 1024
"""A System One answer is kilobytes; a body past this is a broken or hostile server, and reading
it whole would let one response take the process's memory."""


class ResponseTooLargeError(httpx2.TransportError):
    """The response body is longer than the transport's `max_response_bytes` (not retried)."""


class _StaleConnection(Exception):
    """A reused connection failed before the response began: safe to try a new one."""


class _Connection:
    __slots__ = ("buffer", "idle_since", "stream")

    def __init__(self, stream: anyio.abc.ByteStream) -> None:
        self.stream = stream
        self.buffer = bytearray()
        self.idle_since = 0.0

    async def read_more(self) -> bool:
        try:
            chunk = await self.stream.receive(_READ_SIZE)
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
    """

    def __init__(
        self,
        *,
        max_connections: int = 100,
        keepalive_expiry: float = 30.0,
        ssl_context: ssl.SSLContext | None = None,
        max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES,
    ) -> None:
        self._max_connections = max_connections
        self._max_response_bytes = max_response_bytes
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
                except _StaleConnection:
                    pass
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
            if connection.idle_since >= oldest_allowed and not connection.buffer:
                return connection
            await connection.close()  # expired, or holding bytes nobody asked for
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
            try:
                with anyio.fail_after(_timeout(request, "read")):
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
        buffer = connection.buffer
        while (end := buffer.find(b"\r\n\r\n")) < 0:
            if len(buffer) > _MAX_HEAD:
                raise httpx2.RemoteProtocolError("response head too large", request=request)
            if not await connection.read_more():
                if reused and not buffer:
                    raise _StaleConnection("the server closed an idle connection")
                raise httpx2.RemoteProtocolError(
                    "the server closed the connection without a full response", request=request
                )
        lines = bytes(buffer[:end]).split(b"\r\n")
        del buffer[: end + 4]
        try:
            version, status_text, *reason = lines[0].split(b" ", 2)
            status = int(status_text)
        except ValueError:
            raise httpx2.RemoteProtocolError(
                f"malformed status line {lines[0][:100]!r}", request=request
            ) from None
        headers: list[tuple[bytes, bytes]] = []
        length: int | None = None
        chunked = False
        close = version == b"HTTP/1.0"
        for line in lines[1:]:
            name, sep, value = line.partition(b":")
            if not sep:
                raise httpx2.RemoteProtocolError("malformed response header", request=request)
            name, value = name.strip(), value.strip()
            headers.append((name, value))
            lower = name.lower()
            if lower == b"content-length":
                try:
                    length = int(value)
                except ValueError:
                    raise httpx2.RemoteProtocolError(
                        "bad content-length", request=request
                    ) from None
            elif lower == b"transfer-encoding":
                chunked = b"chunked" in value.lower()
            elif lower == b"connection":
                token = value.lower()
                close = close or b"close" in token
                if b"keep-alive" in token:
                    close = False
        if request.method == "HEAD" or status in _NO_BODY_STATUSES or 100 <= status < 200:
            content = b""
        elif chunked:
            content = await _read_chunked(connection, request, self._max_response_bytes)
        elif length is not None:
            if length > self._max_response_bytes:
                raise self._too_large(request)
            while len(buffer) < length:
                if not await connection.read_more():
                    raise httpx2.RemoteProtocolError("incomplete response body", request=request)
            content = bytes(buffer[:length])
            del buffer[:length]
        else:
            while await connection.read_more():
                if len(buffer) > self._max_response_bytes:
                    raise self._too_large(request)
            content = bytes(buffer)
            buffer.clear()
            close = True
        response = httpx2.Response(
            status,
            headers=headers,
            stream=httpx2.ByteStream(content),
            extensions={
                "http_version": b"HTTP/1.1",
                "reason_phrase": reason[0] if reason else b"",
            },
        )
        return response, not close

    def _too_large(self, request: httpx2.Request) -> ResponseTooLargeError:
        return ResponseTooLargeError(
            f"the response body is longer than {self._max_response_bytes} bytes",
            request=request,
        )

    async def aclose(self) -> None:
        """Close every idle connection."""
        self._closed = True
        stacks, self._idle = self._idle, {}
        for stack in stacks.values():
            for connection in stack:
                await connection.close()


async def _read_chunked(connection: _Connection, request: httpx2.Request, limit: int) -> bytes:
    buffer = connection.buffer
    parts: list[bytes] = []
    total = 0
    while True:
        while (line_end := buffer.find(b"\r\n")) < 0:
            if not await connection.read_more():
                raise httpx2.RemoteProtocolError("incomplete chunked body", request=request)
        try:
            size = int(bytes(buffer[:line_end]).split(b";", 1)[0].strip(), 16)
        except ValueError:
            raise httpx2.RemoteProtocolError("bad chunk size", request=request) from None
        del buffer[: line_end + 2]
        total += size
        if total > limit:
            raise ResponseTooLargeError(
                f"the response body is longer than {limit} bytes", request=request
            )
        if size == 0:
            # Skip optional trailers up to the blank line.
            while (trailer_end := buffer.find(b"\r\n")) != 0:
                if trailer_end > 0:
                    del buffer[: trailer_end + 2]
                elif not await connection.read_more():
                    raise httpx2.RemoteProtocolError("incomplete chunked body", request=request)
            del buffer[:2]
            return b"".join(parts)
        while len(buffer) < size + 2:
            if not await connection.read_more():
                raise httpx2.RemoteProtocolError("incomplete chunk", request=request)
        parts.append(bytes(buffer[:size]))
        del buffer[: size + 2]
