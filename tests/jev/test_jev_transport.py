"""KeepAliveTransport: HTTP/1.1 framing and connection reuse, against raw loopback servers."""

from collections.abc import Callable
from typing import Any

import anyio
import httpx2
import pytest
from anyio.abc import SocketStream

from jevrefine._http import (
    HeaderLines,
    KeepAliveTransport,
    _pool,
)
from jevrefine.testing import HTTPResponse, LoopbackHTTPServer, StreamingHTTPResponse


@pytest.fixture(autouse=True, params=["asyncio-protocol", "anyio-stream"])
def connection_kind(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Every test on both kinds of connection: asyncio's protocol (the fast path on asyncio)
    and anyio's stream (every other backend), forced by hiding the asyncio loop."""
    if request.param == "anyio-stream":
        monkeypatch.setattr(_pool, "asyncio_loop", lambda: None)
    return str(request.param)


class RawServer:
    """A TCP server whose connections are handled by `handler(stream, connection_number)`."""

    def __init__(self, handler: Callable[..., Any]) -> None:
        self.handler = handler
        self.connections = 0

    async def __aenter__(self):
        self.listener = await anyio.create_tcp_listener(local_host="127.0.0.1")
        self.port = self.listener.extra(anyio.abc.SocketAttribute.local_port)
        self.group = anyio.create_task_group()
        await self.group.__aenter__()
        self.group.start_soon(self.listener.serve, self._serve)
        return self

    async def _serve(self, stream: SocketStream) -> None:
        self.connections += 1
        async with stream:
            await self.handler(stream, self.connections)

    async def __aexit__(self, *exc):
        self.group.cancel_scope.cancel()
        await self.group.__aexit__(None, None, None)
        await self.listener.aclose()


async def read_request(stream: SocketStream) -> bytes:
    data = b""
    while b"\r\n\r\n" not in data:
        data += await stream.receive()
    head, _, rest = data.partition(b"\r\n\r\n")
    length = 0
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value)
    while len(rest) < length:
        rest += await stream.receive()
    return head


def client(port: int, **kwargs) -> httpx2.AsyncClient:
    return httpx2.AsyncClient(
        transport=KeepAliveTransport(**kwargs), base_url=f"http://127.0.0.1:{port}", timeout=5
    )


def answering(reply: bytes, heads: list[bytes]) -> Callable[..., Any]:
    """A handler that answers every request on a connection with `reply`, keeping the heads."""

    async def handler(stream, number) -> None:
        while True:
            try:
                heads.append(await read_request(stream))
            except anyio.EndOfStream:
                return
            await stream.send(reply)

    return handler


async def test_one_write_per_request_and_connection_reuse() -> None:
    heads: list[bytes] = []
    handler = answering(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok", heads)

    async with RawServer(handler) as server, client(server.port) as http:
        for _ in range(3):
            response = await http.post("/x", content=b'{"a": 1}')
            assert (response.status_code, response.text) == (200, "ok")
    assert server.connections == 1
    assert heads[0].startswith(b"POST /x HTTP/1.1\r\n")
    assert b"content-length: 8" in heads[0].lower()


async def test_a_connection_closed_while_idle_is_replaced_transparently() -> None:
    async def handler(stream, number) -> None:
        await read_request(stream)
        # No "connection: close": the client believes it may reuse the connection.
        await stream.send(b"HTTP/1.1 200 OK\r\ncontent-length: 1\r\n\r\n" + str(number).encode())

    async with RawServer(handler) as server, client(server.port) as http:
        first = await http.post("/", content=b"x")
        await anyio.sleep(0.05)  # let the server's close arrive
        second = await http.post("/", content=b"x")
    assert (first.text, second.text) == ("1", "2")


async def test_read_until_close_and_connection_close_header() -> None:
    async def handler(stream, number) -> None:
        await read_request(stream)
        await stream.send(b"HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\n\r\nuntil close")

    async with RawServer(handler) as server, client(server.port) as http:
        assert (await http.get("/")).text == "until close"
        assert (await http.get("/")).text == "until close"
    assert server.connections == 2


async def test_chunked_responses_and_keep_alive() -> None:
    async def chunks():
        for piece in (b'{"a": ', b"1", b"}"):
            yield piece

    class Server(LoopbackHTTPServer):
        async def handle(self, request):
            if request.path == "/chunked":
                return StreamingHTTPResponse(chunks(), headers={"content-type": "application/json"})
            return HTTPResponse.json({"plain": True})

    async with Server() as server, client(server.port) as http:
        assert (await http.get("/chunked")).json() == {"a": 1}
        assert (await http.get("/plain")).json() == {"plain": True}
        assert (await http.get("/chunked")).json() == {"a": 1}


async def test_gzip_bodies_are_decoded_by_httpx() -> None:
    import gzip

    async def handler(stream, number) -> None:
        await read_request(stream)
        body = gzip.compress(b'{"z": 1}')
        await stream.send(
            b"HTTP/1.1 200 OK\r\ncontent-encoding: gzip\r\ncontent-length: %d\r\n\r\n" % len(body)
            + body
        )

    async with RawServer(handler) as server, client(server.port) as http:
        assert (await http.get("/")).json() == {"z": 1}


async def test_expired_idle_connections_are_not_reused() -> None:
    async def handler(stream, number) -> None:
        while True:
            try:
                await read_request(stream)
            except (anyio.EndOfStream, anyio.BrokenResourceError):
                return
            await stream.send(b"HTTP/1.1 204 No Content\r\n\r\n")

    async with RawServer(handler) as server, client(server.port, keepalive_expiry=0.0) as http:
        await http.get("/")
        await anyio.sleep(0.01)
        await http.get("/")
    assert server.connections == 2


@pytest.mark.parametrize(
    ("reply", "error"),
    [
        (b"garbage\r\n\r\n", httpx2.RemoteProtocolError),
        (b"HTTP/1.1 200 OK\r\ncontent-length: 10\r\n\r\nshort", httpx2.RemoteProtocolError),
        (b"HTTP/1.1 200 OK\r\nbroken header\r\n\r\n", httpx2.RemoteProtocolError),
    ],
)
async def test_protocol_errors(reply, error) -> None:
    async def handler(stream, number) -> None:
        await read_request(stream)
        await stream.send(reply)

    async with RawServer(handler) as server, client(server.port) as http:
        with pytest.raises(error):
            await http.get("/")


async def test_timeouts_and_refused_connections() -> None:
    async def handler(stream, number) -> None:
        await read_request(stream)
        await anyio.sleep(5)

    async with (
        RawServer(handler) as server,
        httpx2.AsyncClient(transport=KeepAliveTransport(), timeout=0.1) as http,
    ):
        with pytest.raises(httpx2.ReadTimeout):
            await http.get(f"http://127.0.0.1:{server.port}/")
    async with httpx2.AsyncClient(transport=KeepAliveTransport(), timeout=1) as http:
        with pytest.raises(httpx2.ConnectError):
            await http.get("http://127.0.0.1:9/")
        with pytest.raises(httpx2.UnsupportedProtocol):
            await http.get("ftp://127.0.0.1:9/")


async def test_max_connections_bounds_open_connections() -> None:
    open_now = 0
    peak = 0

    async def handler(stream, number) -> None:
        nonlocal open_now, peak
        open_now += 1
        peak = max(peak, open_now)
        try:
            while True:
                try:
                    await read_request(stream)
                except (anyio.EndOfStream, anyio.BrokenResourceError):
                    return
                await anyio.sleep(0.02)
                await stream.send(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n")
        finally:
            open_now -= 1

    async with (
        RawServer(handler) as server,
        client(server.port, max_connections=2) as http,
        anyio.create_task_group() as group,
    ):
        for _ in range(8):
            group.start_soon(http.get, "/")
    assert server.connections == 2
    assert peak == 2


# -- the raw core: `exchange`, below httpx2's client layer ------------------------------------


async def test_exchange_sends_the_head_as_given_and_returns_status_headers_and_body() -> None:
    heads: list[bytes] = []
    reply = b"HTTP/1.1 201 Created\r\nX-Request-Id: abc\r\ncontent-length: 4\r\n\r\nbody"
    handler = answering(reply, heads)
    transport = KeepAliveTransport()
    async with RawServer(handler) as server:
        fields = [(b"Host", b"127.0.0.1"), (b"content-length", b"2")]
        for _ in range(2):
            raw = await transport.exchange(
                "POST", "http", "127.0.0.1", server.port, b"/v1/x?q=1", fields, b"{}"
            )
            assert (raw.status_code, raw.reason, raw.content) == (201, b"Created", b"body")
            assert raw.header(b"x-request-id") == "abc"
            assert raw.header(b"retry-after") is None
            assert raw.headers["x-request-id"] == "abc"  # httpx2.Headers, built on demand
        await transport.aclose()
    assert server.connections == 1  # kept alive between the two
    assert heads[0] == b"POST /v1/x?q=1 HTTP/1.1\r\nHost: 127.0.0.1\r\ncontent-length: 2"


@pytest.mark.parametrize(
    "field",
    [
        (b"x-key", b"secret\r\nx-injected: 1"),
        (b"x-key", b"line\nfeed"),
        (b"x-key", b"nul\x00byte"),
        (b"bad name", b"v"),
        (b"", b"v"),
    ],
)
async def test_exchange_refuses_a_header_line_that_would_split_the_request(field) -> None:
    """httpx checks header values as it builds a Request; the raw core has to check them
    itself, or a value with a newline (a key read from a file) would inject header lines."""
    sent: list[bytes] = []

    async def handler(stream, number) -> None:
        sent.append(await stream.receive())

    transport = KeepAliveTransport()
    async with RawServer(handler) as server:
        with pytest.raises(httpx2.LocalProtocolError):
            await transport.exchange(
                "GET", "http", "127.0.0.1", server.port, b"/", [(b"Host", b"h"), field], b""
            )
        await transport.aclose()
    assert sent == []
    assert server.connections == 0  # refused before connecting
    with pytest.raises(httpx2.LocalProtocolError):
        HeaderLines([(b"Host", b"h"), field])  # the once-checked lines of a client too


async def test_fixed_header_lines_go_first_then_the_calls_own() -> None:
    heads: list[bytes] = []
    handler = answering(b"HTTP/1.1 204 No Content\r\n\r\n", heads)
    fixed = HeaderLines([(b"Host", b"h"), (b"authorization", b"Bearer k")])
    assert fixed.encoded == b"Host: h\r\nauthorization: Bearer k\r\n"
    transport = KeepAliveTransport()
    async with RawServer(handler) as server:
        raw = await transport.exchange(
            "GET", "http", "127.0.0.1", server.port, b"/", [(b"x-n", b"1")], b"", fixed=fixed
        )
        await transport.aclose()
    assert (raw.status_code, raw.content) == (204, b"")
    assert heads == [b"GET / HTTP/1.1\r\nHost: h\r\nauthorization: Bearer k\r\nx-n: 1"]


async def test_exchange_timeouts_name_their_phase_and_the_connection_is_not_pooled() -> None:
    async def handler(stream, number) -> None:
        await read_request(stream)
        await stream.send(b"HTTP/1.1 200 OK\r\ncontent-length: 5\r\n\r\nhe")  # then stalls
        await anyio.sleep(5)

    transport = KeepAliveTransport()
    async with RawServer(handler) as server:
        with pytest.raises(httpx2.ReadTimeout) as caught:
            await transport.exchange(
                "GET", "http", "127.0.0.1", server.port, b"/", [(b"Host", b"h")], b"", read=0.2
            )
        assert caught.value._request is None  # the raw core has no httpx2.Request to name
        assert transport._idle == {} or not any(transport._idle.values())
        await transport.aclose()


async def test_per_read_timeout_lets_a_slow_but_steady_body_finish() -> None:
    async def handler(stream, number) -> None:
        await read_request(stream)
        await stream.send(b"HTTP/1.1 200 OK\r\ncontent-length: 6\r\n\r\n")
        for piece in (b"ab", b"cd", b"ef"):
            await anyio.sleep(0.15)
            await stream.send(piece)

    steady = KeepAliveTransport(per_read_timeout=True)
    whole = KeepAliveTransport()
    async with RawServer(handler) as server:
        args = ("GET", "http", "127.0.0.1", server.port, b"/", [(b"Host", b"h")], b"")
        raw = await steady.exchange(*args, read=0.3)  # each gap 0.15 s < 0.3 s
        assert raw.content == b"abcdef"
        with pytest.raises(httpx2.ReadTimeout):
            await whole.exchange(*args, read=0.3)  # the whole body takes 0.45 s
    await steady.aclose()
    await whole.aclose()


async def test_the_httpx_adapter_names_the_request_on_the_cores_errors() -> None:
    async with httpx2.AsyncClient(transport=KeepAliveTransport(), timeout=1) as http:
        with pytest.raises(httpx2.ConnectError) as caught:
            await http.get("http://127.0.0.1:9/x")
    assert caught.value.request.url == "http://127.0.0.1:9/x"
