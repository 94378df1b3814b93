"""A stream client that stops reading, against both SSE integrations (issue 29, RT-17).

The client is a raw socket with a 4 KiB receive buffer: it sends `GET /refine/stream` and then
never reads, but keeps its connection. The model behind the app is a raw asyncio peer streaming
an endless answer (8 KiB deltas) through the real `OpenAIChatModel`. Once every buffer on the
way is full, the app's next send blocks. Before the fix that send waited as long as the client
kept the connection, and the model stream stayed open, pinned, with it (20 such clients held 20
model streams 45 s). Promise: after `send_timeout` the app gives up on the client, closes the
refinement's stream and so the model's (its connection to the model server closes), for
FastAPI on uvicorn and for aiohttp on its runner.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import socket
from collections.abc import AsyncIterator
from typing import Any
from urllib.parse import urlsplit

import anyio
import httpx2
import pytest
from _hostile_model_peer import HostilePeer, _head

import jevrefine as jr
from jevrefine.models.openai import OpenAIChatModel
from test_integrations import serve_aiohttp, serve_fastapi

SEND_TIMEOUT = 1.0
BOUND = 30.0
"""Far above `SEND_TIMEOUT` plus filling the buffers; far below "as long as the client stays"."""
DELTA = "x" * 8192
CAP = 32 * 1024 * 1024
"""The adapter's response cap: the stream must be released long before it could end there."""
SILENT_CLIENTS = 3


class EndlessStream:
    """An OpenAI chat completion stream that never ends: one 8 KiB delta after another."""

    def __init__(self) -> None:
        self.sent: list[int] = []
        """Bytes of events written so far, per connection."""

    async def __call__(self, writer: asyncio.StreamWriter) -> None:
        head = [("content-type", "text/event-stream"), ("connection", "close")]
        writer.write(_head(200, head))
        chunk = {
            "id": "c",
            "object": "chat.completion.chunk",
            "created": 1,
            "model": "endless",
            "choices": [{"index": 0, "delta": {"content": DELTA}, "finish_reason": None}],
        }
        event = b"data: " + json.dumps(chunk).encode() + b"\n\n"
        connection = len(self.sent)
        self.sent.append(0)
        while True:  # until the adapter closes the connection (drain then raises)
            writer.write(event)
            self.sent[connection] += len(event)
            await writer.drain()


def fastapi_app(client: jr.ChatClient) -> Any:
    from fastapi import FastAPI

    from jevrefine.integrations.fastapi import stream_router

    app = FastAPI()
    app.include_router(stream_router(lambda request: client, send_timeout=SEND_TIMEOUT))
    return app


def aiohttp_app(client: jr.ChatClient) -> Any:
    from aiohttp import web

    from jevrefine.integrations.aiohttp import add_stream_routes

    key = web.AppKey("client", jr.ChatClient)
    app = web.Application()
    app[key] = client
    add_stream_routes(app, key, send_timeout=SEND_TIMEOUT)
    return app


FRAMEWORKS = [
    pytest.param(fastapi_app, serve_fastapi, id="fastapi"),
    pytest.param(aiohttp_app, serve_aiohttp, id="aiohttp"),
]


@contextlib.asynccontextmanager
async def silent_client(url: str) -> AsyncIterator[socket.socket]:
    """A client that asks for the stream, then reads nothing while it keeps the connection."""
    where = urlsplit(url)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        # Before connecting, so the window the client offers stays small from the start.
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        sock.setblocking(False)
        loop = asyncio.get_running_loop()
        await loop.sock_connect(sock, (where.hostname, where.port))
        head = (
            f"GET /refine/stream?prompt=go HTTP/1.1\r\nhost: {where.netloc}\r\n"
            "accept: text/event-stream\r\n\r\n"
        )
        await loop.sock_sendall(sock, head.encode())
        yield sock
    finally:
        sock.close()


@pytest.mark.parametrize(("make_app", "serve"), FRAMEWORKS)
async def test_a_client_that_stops_reading_releases_the_model_stream(
    make_app: Any, serve: Any, caplog: pytest.LogCaptureFixture
) -> None:
    endless = EndlessStream()
    async with (
        HostilePeer() as peer,
        OpenAIChatModel("endless", base_url=peer.url + "/v1", api_key="sk-slow-test") as model,
    ):
        peer.script(endless)
        async with (
            serve(make_app(jr.ChatClient(model))) as url,
            contextlib.AsyncExitStack() as clients,
        ):
            for _ in range(SILENT_CLIENTS):
                await clients.enter_async_context(silent_client(url))
            with anyio.fail_after(BOUND):
                while len(peer.requests) < SILENT_CLIENTS:  # noqa: ASYNC110 - a peer's count
                    await anyio.sleep(0.01)
                # The clients still hold their connections: only the send timeout can end the
                # streams (before the fix they stayed open until the clients left).
                while peer.open_connections:  # noqa: ASYNC110 - a peer's count
                    await anyio.sleep(0.05)
            assert len(endless.sent) == SILENT_CLIENTS
            assert max(endless.sent) < CAP  # released by the timeout, not by the response cap
            # The app goes on serving.
            async with httpx2.AsyncClient(base_url=url, timeout=10) as http:
                assert (await http.get("/refine/stream")).status_code == 400
    stalled = [r for r in caplog.records if "stopped reading" in r.getMessage()]
    assert len(stalled) == SILENT_CLIENTS
    assert all(r.levelno == logging.WARNING for r in stalled)
    assert "1 s" in stalled[0].getMessage()


@pytest.mark.parametrize(
    ("name", "value"),
    [("send_timeout", 0), ("send_timeout", -1.0), ("send_timeout", "30"), ("send_timeout", None)],
)
def test_a_bad_send_timeout_is_a_user_error_naming_it(name: str, value: object) -> None:
    from aiohttp import web

    from jevrefine.integrations.aiohttp import add_stream_routes
    from jevrefine.integrations.fastapi import stream_router

    key = web.AppKey("client", jr.ChatClient)
    with pytest.raises(jr.UserError, match=name):
        stream_router(lambda request: None, send_timeout=value)  # type: ignore[arg-type, return-value]
    with pytest.raises(jr.UserError, match=name):
        add_stream_routes(web.Application(), key, send_timeout=value)  # type: ignore[arg-type]


async def slow_answer(writer: asyncio.StreamWriter) -> None:
    """Three deltas, 3 × `SEND_TIMEOUT` apart, then the end: a slow model, not a slow client."""
    writer.write(_head(200, [("content-type", "text/event-stream"), ("connection", "close")]))
    for index, text in enumerate(("slow ", "but ", "steady")):
        if index:
            await asyncio.sleep(3 * SEND_TIMEOUT)
        delta = {"index": 0, "delta": {"content": text}, "finish_reason": None}
        chunk = {"id": "c", "object": "chat.completion.chunk", "created": 1, "model": "slow"}
        writer.write(b"data: " + json.dumps({**chunk, "choices": [delta]}).encode() + b"\n\n")
        await writer.drain()
    end = {"index": 0, "delta": {}, "finish_reason": "stop"}
    writer.write(b"data: " + json.dumps({**chunk, "choices": [end]}).encode() + b"\n\n")
    writer.write(b"data: [DONE]\n\n")
    await writer.drain()
    writer.write_eof()


@pytest.mark.parametrize(("make_app", "serve"), FRAMEWORKS)
async def test_a_slow_refinement_is_not_a_stalled_client(make_app: Any, serve: Any) -> None:
    """Only a send that cannot proceed is timed: gaps between events longer than
    `send_timeout` leave a reading client's stream whole."""
    async with (
        HostilePeer() as peer,
        OpenAIChatModel("slow", base_url=peer.url + "/v1", api_key="sk-slow-test") as model,
    ):
        peer.script(slow_answer)
        async with (
            serve(make_app(jr.ChatClient(model))) as url,
            httpx2.AsyncClient(base_url=url, timeout=BOUND) as http,
        ):
            response = await http.get("/refine/stream?prompt=go")
    events = [block.split("\n")[0] for block in response.text.split("\n\n") if block]
    assert events == ["event: delta"] * 3 + ["event: done"]
    assert '"answer":"slow but steady"' in response.text
