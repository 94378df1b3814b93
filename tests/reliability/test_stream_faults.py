"""Faults in the middle of a model stream, through `ChatClient.stream`, on both adapters.

The stream has begun (text has reached the caller) when the fault hits: the connection is reset,
an event cannot be read (cut-off JSON, or JSON that is no chunk), or the server stalls past the
adapter's `timeout`. Each case proves the same promise: the typed `jevrefine.exceptions` error,
no hang, the request sent once (a stream that has begun is never resent), the broken connection
closed rather than handed back to the pool, and the same model answering the next call.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Callable
from typing import Any

import anyio
import anyio.lowlevel
import pytest

import jevrefine as jr
from jevrefine.exceptions import (
    IncompleteResponseError,
    ModelError,
    ModelResponseError,
    ModelTimeoutError,
)
from jevrefine.models.anthropic import AnthropicChatModel
from jevrefine.models.base import ChatModel
from jevrefine.models.openai import OpenAIChatModel
from jevrefine.testing import FakeAnthropicServer, FakeOpenAIServer
from jevrefine.testing._http import LoopbackHTTPServer
from support import pool_connections

TIMEOUT = 0.3
STALL = 2.0
ANSWER = " ".join(f"word{i}" for i in range(60))

Fault = Callable[[LoopbackHTTPServer], None]

FAULTS: dict[str, tuple[Fault, type[ModelError]]] = {
    "reset mid-stream": (lambda s: s.reset_mid_body(), IncompleteResponseError),
    "cut-off JSON event": (lambda s: s.malformed_event(after=6), ModelResponseError),
    "event that is no chunk": (
        lambda s: s.malformed_event(after=6, data=b"null"),
        ModelResponseError,
    ),
    "stall past the timeout": (lambda s: s.slow_body(STALL), ModelTimeoutError),
}


@pytest.fixture(params=["openai", "anthropic"])
async def adapter(request: pytest.FixtureRequest) -> AsyncIterator[tuple[Any, ChatModel]]:
    server: FakeOpenAIServer | FakeAnthropicServer
    model: OpenAIChatModel | AnthropicChatModel
    if request.param == "openai":
        server = FakeOpenAIServer()
        async with server:
            model = OpenAIChatModel("m", base_url=server.base_url, api_key="sk-t", timeout=TIMEOUT)
            async with model:
                yield server, model
    else:
        server = FakeAnthropicServer()
        async with server:
            model = AnthropicChatModel(
                "m", base_url=server.base_url, api_key="sk-t", timeout=TIMEOUT
            )
            async with model:
                yield server, model


@pytest.mark.parametrize("name", list(FAULTS))
async def test_stream_fault_raises_typed_and_releases_the_connection(
    adapter: tuple[Any, ChatModel], name: str
) -> None:
    """Promise: a stream broken after it began raises its typed error, without a hang or a
    resend; its connection is closed, not pooled; the next call is answered."""
    server, model = adapter
    fault, expected = FAULTS[name]
    client = jr.ChatClient(model)
    server.script(ANSWER)
    fault(server)
    pieces: list[str] = []

    async def read() -> None:
        async for piece in client.prompt("hello").stream():
            pieces.append(piece)

    started = time.perf_counter()
    with anyio.fail_after(5), pytest.raises(ModelError) as caught:
        await read()
    elapsed = time.perf_counter() - started
    assert type(caught.value) is expected, repr(caught.value)
    message = str(caught.value)
    assert "127.0.0.1" in message  # names the server...
    assert "could not reach" not in message  # ...which was reached: the stream broke
    assert pieces, "the fault should hit a stream that had begun"
    assert "".join(pieces).strip() != ANSWER  # the caller can tell the answer is incomplete
    assert len(server.requests) == 1  # never resent once begun
    assert elapsed < TIMEOUT + 1.0, elapsed  # a stall ends at the timeout, not at STALL
    await anyio.lowlevel.checkpoint()
    assert pool_connections(model) == (0, 0)  # closed, not handed back half read
    assert await client.prompt("again").content()
    assert pool_connections(model) == (0, 1)  # a fresh connection, back in the pool
