"""A small, real HTTP/1.1 server on loopback with fault injection: the base of the fake servers.

The server runs its own asyncio event loop in a daemon thread, so it answers whatever loop (or
thread) the code under test runs in, and a slow or blocked test never stalls it. It speaks enough
HTTP/1.1 for the official SDKs: keep-alive, `Content-Length` bodies, chunked responses for
server-sent events.

Faults are queued and consumed in order, one per request: `fail(...)`, `drop_connections()`,
`malformed()`, `delay(...)` (slow headers), `reset_mid_body()`, `slow_body(...)`,
`malformed_event()` (a broken event in a stream) and `huge_body(...)`.
`random_faults(rate, seed=...)` adds seeded random faults to requests that have none queued.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import random
import socket
import struct
import threading
from collections import deque
from dataclasses import dataclass, field
from http import HTTPStatus
from typing import TYPE_CHECKING, Any, Literal, Protocol, Self
from urllib.parse import parse_qs, urlsplit

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Mapping

__all__ = [
    "HTTPRequest",
    "HTTPResponse",
    "LoopbackHTTPServer",
    "RecordedRequest",
    "StreamingHTTPResponse",
]

_MAX_HEADER_LINES = 200
_MAX_BODY = 64 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class RecordedRequest:
    """A request a fake server received."""

    method: str
    """The HTTP method."""
    path: str
    """The path, without the query string."""
    headers: Mapping[str, str]
    """The headers, names lower-cased."""
    json: Any
    """The decoded JSON body, or `None` when there was no (JSON) body."""


@dataclass(frozen=True, slots=True)
class HTTPRequest:
    """A parsed request, as handed to a server's `handle` method."""

    method: str
    path: str
    query: Mapping[str, list[str]]
    headers: Mapping[str, str]
    body: bytes

    def json(self) -> Any:
        """The body decoded as JSON (`ValueError` when it is not)."""
        return json.loads(self.body)


@dataclass(frozen=True, slots=True)
class HTTPResponse:
    """A whole response."""

    status: int = 200
    body: bytes = b""
    headers: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def json(
        cls, value: Any, status: int = 200, headers: Mapping[str, str] | None = None
    ) -> HTTPResponse:
        """A JSON response."""
        return cls(
            status,
            json.dumps(value).encode(),
            {"content-type": "application/json", **(headers or {})},
        )


@dataclass(frozen=True, slots=True)
class StreamingHTTPResponse:
    """A response whose body is produced piece by piece (sent chunked), e.g. server-sent events."""

    chunks: AsyncIterator[bytes]
    status: int = 200
    headers: Mapping[str, str] = field(
        default_factory=lambda: {"content-type": "text/event-stream", "cache-control": "no-cache"}
    )


@dataclass(slots=True)
class _Fault:
    kind: Literal[
        "fail",
        "drop",
        "malformed",
        "delay",
        "reset_mid_body",
        "slow_body",
        "malformed_event",
        "huge_body",
    ]
    times: int
    status: int = 500
    body: Any = None
    headers: Mapping[str, str] = field(default_factory=dict)
    seconds: float = 0.0
    size: int = 0
    chunked: bool = False
    after: int = 1


class LoopbackHTTPServer:
    """A real HTTP server on 127.0.0.1 (free port) in its own thread. Subclasses implement `handle`.

    Use it as an async (or plain) context manager; `base_url` is known once it has started.
    `latency` delays every response; faults queued with `fail`, `drop_connections`, `malformed`
    and `delay` apply to the next requests, one fault per request, in the order queued.
    """

    def __init__(self, *, latency: float = 0.0, host: str = "127.0.0.1") -> None:
        self.latency = latency
        """Seconds every response waits before it is sent."""
        self.requests: list[RecordedRequest] = []
        """Every request received, oldest first."""
        self._host = host
        self._faults: deque[_Fault] = deque()
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._server: asyncio.Server | None = None
        self._connections: set[asyncio.Task[None]] = set()
        self._port: int | None = None
        self._random_rate = 0.0
        self._random: random.Random | None = None
        self._random_statuses: tuple[int, ...] = ()
        self.random_faults_injected = 0
        """How many requests met a random fault (see `random_faults`)."""

    # -- lifecycle -------------------------------------------------------------------------

    @property
    def port(self) -> int:
        """The port the server listens on."""
        if self._port is None:
            raise RuntimeError(f"{type(self).__name__} is not running; use `async with` first")
        return self._port

    @property
    def url(self) -> str:
        """`http://127.0.0.1:PORT` (no path)."""
        return f"http://{self._host}:{self.port}"

    def start(self) -> None:
        """Start the server thread and wait until the port is open."""
        if self._thread is not None:
            return
        loop = asyncio.new_event_loop()
        self._loop = loop
        self._thread = threading.Thread(
            target=loop.run_forever, name=f"{type(self).__name__}-loop", daemon=True
        )
        self._thread.start()
        future = asyncio.run_coroutine_threadsafe(self._open(), loop)
        future.result(timeout=10)

    async def _open(self) -> None:
        self._server = await asyncio.start_server(self._serve, self._host, 0, backlog=2048)
        self._port = self._server.sockets[0].getsockname()[1]

    def stop(self) -> None:
        """Close every connection, stop the thread."""
        loop, thread = self._loop, self._thread
        if loop is None or thread is None:
            return
        with contextlib.suppress(Exception):
            asyncio.run_coroutine_threadsafe(self._close(), loop).result(timeout=10)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout=10)
        loop.close()
        self._loop = self._thread = None
        self._port = None

    async def _close(self) -> None:
        if self._server is not None:
            self._server.close()
        for task in list(self._connections):
            task.cancel()
        if self._connections:
            await asyncio.gather(*self._connections, return_exceptions=True)
        if self._server is not None:
            await self._server.wait_closed()

    async def __aenter__(self) -> Self:
        self.start()
        return self

    # The exception, if any, is not looked at (it propagates): `*exc_info`, as typeshed's
    # `contextlib.closing` has it.
    async def __aexit__(self, *exc_info: object) -> None:
        self.stop()

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    # -- faults ----------------------------------------------------------------------------

    def fail(
        self,
        status: int,
        body: Any = None,
        headers: Mapping[str, str] | None = None,
        times: int = 1,
    ) -> None:
        """Answer the next `times` requests with `status` (and `body`: JSON value, str or bytes).

        Without `body`, the API's error body (`error_body`); `headers` go over `error_headers`.
        """
        merged = {**self.error_headers(status), **(headers or {})}
        self._queue(_Fault("fail", times, status=status, body=body, headers=merged))

    def drop_connections(self, times: int = 1) -> None:
        """Close the connection without answering, for the next `times` requests."""
        self._queue(_Fault("drop", times))

    def malformed(self, times: int = 1) -> None:
        """Answer the next `times` requests with 200 and a body that is not valid JSON."""
        self._queue(_Fault("malformed", times))

    def delay(self, seconds: float, times: int = 1) -> None:
        """Hold the next `times` responses back by `seconds` (on top of `latency`)."""
        self._queue(_Fault("delay", times, seconds=seconds))

    def reset_mid_body(self, times: int = 1) -> None:
        """Send the head and half the body of the next `times` answers, then reset the connection.

        The request was received and handled: a client that retries sends it a second time.
        """
        self._queue(_Fault("reset_mid_body", times))

    def slow_body(self, seconds: float, times: int = 1) -> None:
        """Send the head and half the body of the next `times` answers, the rest after `seconds`.

        Unlike `delay` (slow headers), the response has begun when the wait starts, which is
        what a read timeout on a slow body must catch.
        """
        self._queue(_Fault("slow_body", times, seconds=seconds))

    def malformed_event(self, times: int = 1, *, after: int = 1, data: bytes | None = None) -> None:
        """Slip a broken event into the next `times` streamed answers.

        Its `data` is cut-off JSON unless `data` gives another (e.g. `b"null"`: valid JSON that
        is no chunk). It follows the stream's first `after` chunks (events), and is named
        (`event: content_block_delta`), so clients that skip unnamed events read it too. An
        answer that is not streamed gets the malformed JSON body of `malformed()` instead.
        """
        if after < 0:
            raise ValueError(f"after must be 0 or more, got {after}")
        self._queue(_Fault("malformed_event", times, body=data, after=after))

    def huge_body(self, size: int, *, chunked: bool = False, times: int = 1) -> None:
        """Answer the next `times` requests with 200 and a body of `size` bytes (JSON-ish filler).

        With `chunked=False` the head declares the size (`content-length`); with `chunked=True`
        it does not, and the body comes in 64 KiB chunks, made as they are sent: only counting
        what arrives catches it. Sending stops when the client hangs up.
        """
        if size < 0:
            raise ValueError(f"size must be 0 or more, got {size}")
        self._queue(_Fault("huge_body", times, size=size, chunked=chunked))

    def random_faults(
        self,
        rate: float,
        *,
        seed: int = 0,
        statuses: tuple[int, ...] = (429, 500, 502, 503, 529),
    ) -> None:
        """From now on, fail each request that has no queued fault with probability `rate`.

        The fault is drawn (seeded, so a run repeats) among the `statuses` and a connection
        reset before or in the middle of the answer. `rate=0` turns it off.
        """
        if not 0 <= rate <= 1:
            raise ValueError(f"rate must be between 0 and 1, got {rate}")
        with self._lock:
            self._random_rate = rate
            self._random = random.Random(seed)
            self._random_statuses = statuses

    def reset_faults(self) -> None:
        """Drop every queued fault, and stop random ones."""
        with self._lock:
            self._faults.clear()
            self._random_rate = 0.0

    def _queue(self, fault: _Fault) -> None:
        if fault.times < 1:
            raise ValueError(f"times must be at least 1, got {fault.times}")
        with self._lock:
            self._faults.append(fault)

    def _take_fault(self) -> _Fault | None:
        with self._lock:
            if not self._faults:
                return self._random_fault()
            fault = self._faults[0]
            fault.times -= 1
            if fault.times == 0:
                self._faults.popleft()
            return fault

    def _random_fault(self) -> _Fault | None:
        rng = self._random
        if rng is None or self._random_rate <= 0 or rng.random() >= self._random_rate:
            return None
        self.random_faults_injected += 1
        choice = rng.randrange(len(self._random_statuses) + 2)
        if choice == 0:
            return _Fault("drop", 1)
        if choice == 1:
            return _Fault("reset_mid_body", 1)
        return _Fault("fail", 1, status=self._random_statuses[choice - 2])

    # -- the protocol ----------------------------------------------------------------------

    async def handle(self, request: HTTPRequest) -> HTTPResponse | StreamingHTTPResponse:
        """Answer one request. Subclasses implement the API here."""
        return HTTPResponse.json({"error": "not found"}, status=404)

    def error_body(self, status: int, body: Any) -> Any:
        """The body of an injected failure when the test gave none; subclasses use their API's."""
        return {"error": {"message": HTTPStatus(status).phrase, "code": status}}

    def error_headers(self, status: int) -> dict[str, str]:
        """Headers every injected failure carries (none here; e.g. an API's request id).

        Built once per `fail` call, so its `times` answers share them; the headers given to
        `fail` go over them.
        """
        return {}

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._connections.add(task)
        try:
            while await self._serve_one(reader, writer):
                pass
        except (ConnectionError, asyncio.IncompleteReadError, asyncio.LimitOverrunError):
            pass
        except asyncio.CancelledError:
            pass
        finally:
            self._connections.discard(task)
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()

    async def _serve_one(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bool:
        request = await _read_request(reader)
        if request is None:
            return False
        self.requests.append(_record(request))
        fault = self._take_fault()
        delay = self.latency + (fault.seconds if fault is not None and fault.kind == "delay" else 0)
        if delay > 0:
            await asyncio.sleep(delay)
        if fault is not None and fault.kind == "drop":
            transport = writer.transport
            with contextlib.suppress(Exception):
                sock = transport.get_extra_info("socket")
                if sock is not None:  # reset, not a clean close: what a crashed peer looks like
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            transport.abort()
            return False
        response: HTTPResponse | StreamingHTTPResponse
        if fault is not None and fault.kind == "fail":
            body = fault.body if fault.body is not None else self.error_body(fault.status, None)
            response = _response_of(fault.status, body, fault.headers)
        elif fault is not None and fault.kind == "huge_body":
            response = _huge_response(fault.size, chunked=fault.chunked)
        elif fault is not None and fault.kind == "malformed":
            response = HTTPResponse(
                200, b'{"this is": not json', {"content-type": "application/json"}
            )
        else:
            try:
                response = await self.handle(request)
            except Exception as exc:  # a bug in a scripted answer: tell the client, keep serving
                response = HTTPResponse.json(
                    {"error": {"message": f"fake server error: {exc!r}"}}, status=500
                )
        if fault is not None and fault.kind == "malformed_event":
            response = _with_malformed_event(response, fault.after, fault.body)
        keep_alive = request.headers.get("connection", "").lower() != "close"
        if fault is not None and fault.kind in ("reset_mid_body", "slow_body"):
            return await _write_split(writer, response, fault, keep_alive=keep_alive)
        await _write_response(writer, response, keep_alive=keep_alive)
        return keep_alive


class _ServableFake(Protocol):
    """What `serve_until_stdin_closes` needs of a fake server."""

    @property
    def base_url(self) -> str: ...

    def start(self) -> None: ...

    def stop(self) -> None: ...


def serve_until_stdin_closes(server: _ServableFake) -> None:
    """Start `server`, print its base URL, serve until stdin closes or Ctrl-C, then stop it.

    The body of the fake servers' `main()` (used by the benchmarks, which read the URL from the
    first line of output and close stdin to stop the server).
    """
    import sys

    server.start()
    print(server.base_url, flush=True)
    try:
        # Serve until stdin closes or the process is interrupted.
        if not sys.stdin.isatty():
            sys.stdin.read()
        else:  # pragma: no cover - interactive use
            threading.Event().wait()
    except KeyboardInterrupt:  # pragma: no cover - interactive use
        pass
    finally:
        server.stop()


async def _write_split(
    writer: asyncio.StreamWriter,
    response: HTTPResponse | StreamingHTTPResponse,
    fault: _Fault,
    *,
    keep_alive: bool,
) -> bool:
    """Write the head and half the body; then reset the connection, or wait and write the rest."""
    if isinstance(response, StreamingHTTPResponse):  # collect it: the split needs a whole body
        body = b"".join([chunk async for chunk in response.chunks])
        headers = {k: v for k, v in response.headers.items() if k.lower() != "transfer-encoding"}
        response = HTTPResponse(response.status, body, headers)
    connection = b"connection: keep-alive\r\n" if keep_alive else b"connection: close\r\n"
    head = [_status_line(response.status), connection]
    head.extend(f"{k}: {v}\r\n".encode("latin-1") for k, v in response.headers.items())
    head.append(f"content-length: {len(response.body)}\r\n\r\n".encode("latin-1"))
    # At least one body byte is held back, so the response is never complete before the fault.
    half = min(len(response.body) // 2, max(len(response.body) - 1, 0))
    writer.write(b"".join(head) + response.body[:half])
    await writer.drain()
    if fault.kind == "reset_mid_body":
        transport = writer.transport
        with contextlib.suppress(Exception):
            sock = transport.get_extra_info("socket")
            if sock is not None:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        transport.abort()
        return False
    await asyncio.sleep(fault.seconds)
    writer.write(response.body[half:])
    await writer.drain()
    return keep_alive


_BROKEN_EVENT = (
    b"event: content_block_delta\n"
    b'data: {"type": "content_block_delta", "index": 0, "delta": {"type": "text_del\n\n'
)
"""A server-sent event cut off in the middle of its JSON (named, so no client skips it)."""


def _with_malformed_event(
    response: HTTPResponse | StreamingHTTPResponse, after: int, data: bytes | None
) -> HTTPResponse | StreamingHTTPResponse:
    """`response` with a broken event after `after` chunks (a whole body: malformed JSON)."""
    if isinstance(response, HTTPResponse):
        return HTTPResponse(200, b'{"this is": not json', {"content-type": "application/json"})
    chunks = response.chunks
    event = (
        _BROKEN_EVENT if data is None else b"event: content_block_delta\ndata: " + data + b"\n\n"
    )

    async def broken() -> AsyncIterator[bytes]:
        sent = 0
        async for chunk in chunks:
            if sent == after:
                yield event
            yield chunk
            sent += 1
        if sent <= after:  # a shorter stream: the broken event at its end
            yield event

    return StreamingHTTPResponse(broken(), response.status, response.headers)


def _huge_response(size: int, *, chunked: bool) -> HTTPResponse | StreamingHTTPResponse:
    """A 200 of `size` bytes: declared up front, or streamed chunk by chunk without a length."""
    filler = b'{"pad": "' + b"x" * (64 * 1024 - 11) + b'"}'
    if not chunked:
        whole, rest = divmod(size, len(filler))
        return HTTPResponse(
            200, filler * whole + filler[:rest], {"content-type": "application/json"}
        )

    async def chunks() -> AsyncIterator[bytes]:
        left = size
        while left > 0:
            piece = filler[:left]
            left -= len(piece)
            yield piece

    return StreamingHTTPResponse(chunks(), 200, {"content-type": "application/json"})


def _response_of(status: int, body: Any, headers: Mapping[str, str]) -> HTTPResponse:
    if isinstance(body, bytes):
        return HTTPResponse(status, body, dict(headers))
    if isinstance(body, str):
        return HTTPResponse(status, body.encode(), {"content-type": "text/plain", **headers})
    return HTTPResponse.json(body, status=status, headers=headers)


def _record(request: HTTPRequest) -> RecordedRequest:
    decoded: Any = None
    if request.body:
        try:
            decoded = request.json()
        except ValueError:
            decoded = None
    return RecordedRequest(request.method, request.path, request.headers, decoded)


async def _read_request(reader: asyncio.StreamReader) -> HTTPRequest | None:
    line = await reader.readline()
    if not line.strip():
        return None
    try:
        method, target, _version = line.decode("latin-1").split()
    except ValueError:
        return None
    headers: dict[str, str] = {}
    for _ in range(_MAX_HEADER_LINES):
        raw = await reader.readline()
        if raw in (b"\r\n", b"\n", b""):
            break
        name, _, value = raw.decode("latin-1").partition(":")
        headers[name.strip().lower()] = value.strip()
    body = b""
    if headers.get("transfer-encoding", "").lower() == "chunked":
        parts: list[bytes] = []
        while True:
            size = int((await reader.readline()).split(b";")[0].strip() or b"0", 16)
            if size == 0:
                await reader.readline()
                break
            parts.append(await reader.readexactly(size))
            await reader.readline()
        body = b"".join(parts)
    elif (length := int(headers.get("content-length", "0") or 0)) > 0:
        body = await reader.readexactly(min(length, _MAX_BODY))
    split = urlsplit(target)
    return HTTPRequest(method.upper(), split.path, parse_qs(split.query), headers, body)


def _status_line(status: int) -> bytes:
    try:
        phrase = HTTPStatus(status).phrase
    except ValueError:
        phrase = "Unknown"
    return f"HTTP/1.1 {status} {phrase}\r\n".encode("latin-1")


async def _write_response(
    writer: asyncio.StreamWriter,
    response: HTTPResponse | StreamingHTTPResponse,
    *,
    keep_alive: bool,
) -> None:
    connection = b"connection: keep-alive\r\n" if keep_alive else b"connection: close\r\n"
    head = [_status_line(response.status), connection]
    head.extend(f"{k}: {v}\r\n".encode("latin-1") for k, v in response.headers.items())
    if isinstance(response, HTTPResponse):
        head.append(f"content-length: {len(response.body)}\r\n\r\n".encode("latin-1"))
        writer.write(b"".join(head) + response.body)
        await writer.drain()
        return
    head.append(b"transfer-encoding: chunked\r\n\r\n")
    writer.write(b"".join(head))
    await writer.drain()
    async for chunk in response.chunks:
        if chunk:
            writer.write(f"{len(chunk):x}\r\n".encode("latin-1") + chunk + b"\r\n")
            await writer.drain()
    writer.write(b"0\r\n\r\n")
    await writer.drain()
