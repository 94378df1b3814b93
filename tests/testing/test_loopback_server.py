"""The loopback HTTP server under the fakes: real sockets, keep-alive, chunked streams, faults."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import httpx2
import pytest

from jevrefine.testing import (
    HTTPRequest,
    HTTPResponse,
    LoopbackHTTPServer,
    StreamingHTTPResponse,
)


class Echo(LoopbackHTTPServer):
    async def handle(self, request: HTTPRequest) -> HTTPResponse | StreamingHTTPResponse:
        if request.path == "/stream":

            async def events() -> AsyncIterator[bytes]:
                for i in range(3):
                    yield f"data: {i}\n\n".encode()
                    await asyncio.sleep(0)

            return StreamingHTTPResponse(events())
        return HTTPResponse.json(
            {"path": request.path, "body": request.json() if request.body else None}
        )


async def test_answers_over_a_real_socket_with_keep_alive() -> None:
    async with Echo() as server, httpx2.AsyncClient(base_url=server.url) as http:
        first = await http.post("/a", json={"x": 1})
        second = await http.get("/b")
    assert first.json() == {"path": "/a", "body": {"x": 1}}
    assert second.json() == {"path": "/b", "body": None}
    assert [(r.method, r.path, r.json) for r in server.requests] == [
        ("POST", "/a", {"x": 1}),
        ("GET", "/b", None),
    ]


async def test_streams_chunked_events() -> None:
    async with (
        Echo() as server,
        httpx2.AsyncClient(base_url=server.url) as http,
        http.stream("GET", "/stream") as response,
    ):
        lines = [line async for line in response.aiter_lines() if line]
    assert lines == ["data: 0", "data: 1", "data: 2"]


async def test_faults_apply_in_order_one_per_request() -> None:
    async with Echo() as server, httpx2.AsyncClient(base_url=server.url) as http:
        server.fail(503, {"error": "down"}, headers={"retry-after": "2"}, times=2)
        server.malformed()
        for _ in range(2):
            failed = await http.get("/x")
            assert failed.status_code == 503
            assert failed.headers["retry-after"] == "2"
            assert failed.json() == {"error": "down"}
        broken = await http.get("/x")
        assert broken.status_code == 200
        with pytest.raises(ValueError, match="Expecting value"):
            broken.json()
        assert (await http.get("/x")).status_code == 200


async def test_dropped_connection_is_seen_by_the_client() -> None:
    async with Echo() as server, httpx2.AsyncClient(base_url=server.url) as http:
        server.drop_connections()
        with pytest.raises(httpx2.TransportError):
            await http.get("/x")
        assert (await http.get("/x")).status_code == 200


async def test_delay_trips_a_client_timeout() -> None:
    async with Echo() as server, httpx2.AsyncClient(base_url=server.url, timeout=0.2) as http:
        server.delay(2.0)
        with pytest.raises(httpx2.TimeoutException):
            await http.get("/slow")


def test_times_must_be_positive() -> None:
    with pytest.raises(ValueError, match="times"):
        Echo().fail(500, times=0)


def test_url_before_start_is_an_error() -> None:
    with pytest.raises(RuntimeError, match="not running"):
        _ = Echo().url
