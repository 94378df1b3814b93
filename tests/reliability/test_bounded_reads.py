"""Bounded reads: the adapters never read more of a response than `max_response_bytes`.

The vendor SDKs read a response body whole. An adapter that builds its SDK client gives it the
SDK's own default HTTP client with a cap on every response body (32 MiB unless
`max_response_bytes=` says otherwise). These tests send bodies past the cap from the loopback
fakes (declared by `content-length`, chunked without a length, and a streamed answer that goes
on and on) and check the promise: `ResponseTooLargeError` naming the cap and how to raise it,
never retried, the connection closed, the model still usable; and that the capped client keeps
the SDK's pool limits, timeouts and socket options.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import anthropic
import anyio
import anyio.lowlevel
import openai
import pytest

import jevrefine as jr
from jevrefine._http._limits import DEFAULT_MAX_RESPONSE_BYTES
from jevrefine.exceptions import ResponseTooLargeError, UserError
from jevrefine.messages import ChatOptions, Prompt, UserMessage
from jevrefine.models.anthropic import AnthropicChatModel
from jevrefine.models.base import ChatModel
from jevrefine.models.openai import OpenAIChatModel
from jevrefine.testing import FakeAnthropicServer, FakeOpenAIServer
from support import pool_connections

CAP = 64 * 1024
PROMPT = Prompt((UserMessage("hello"),), ChatOptions())


class Adapter:
    def __init__(self, kind: str, server: FakeOpenAIServer | FakeAnthropicServer) -> None:
        self.kind = kind
        self.server = server

    def model(self, **kwargs: Any) -> OpenAIChatModel | AnthropicChatModel:
        if self.kind == "openai":
            return OpenAIChatModel("m", base_url=self.server.base_url, api_key="sk-t", **kwargs)
        return AnthropicChatModel("m", base_url=self.server.base_url, api_key="sk-t", **kwargs)


@pytest.fixture(params=["openai", "anthropic"])
async def adapter(request: pytest.FixtureRequest) -> AsyncIterator[Adapter]:
    server = FakeOpenAIServer() if request.param == "openai" else FakeAnthropicServer()
    async with server:
        yield Adapter(request.param, server)


def _check(error: ResponseTooLargeError, cap: int) -> None:
    assert type(error) is ResponseTooLargeError  # jevrefine's own type, no vendor type
    assert error.limit == cap
    assert f"max_response_bytes={cap:,}" in str(error)  # names the cap...
    assert "pass a larger max_response_bytes=" in str(error)  # ...and how to raise it
    assert not error.is_transient


@pytest.mark.parametrize("how", ["declared", "chunked", "streamed"])
async def test_huge_body_is_cut_off_at_the_cap(adapter: Adapter, how: str) -> None:
    """Promise: a body past `max_response_bytes` raises `ResponseTooLargeError` once (never
    retried), the read stops there and the connection is closed; the model goes on working."""

    async def ask(model: ChatModel) -> None:
        if how == "streamed":  # an answer that goes on and on, event by event
            async for _ in jr.ChatClient(model).prompt("hello").stream():
                pass
        else:
            await model.call(PROMPT)

    if how == "streamed":
        adapter.server.script(" ".join(["word"] * 5_000))
    else:
        adapter.server.huge_body(16 * CAP, chunked=how == "chunked")
    async with adapter.model(max_response_bytes=CAP, max_retries=2) as model:
        with anyio.fail_after(5), pytest.raises(ResponseTooLargeError) as caught:
            await ask(model)
        _check(caught.value, CAP)
        assert len(adapter.server.requests) == 1  # the same body would come back: no retry
        await anyio.lowlevel.checkpoint()
        assert pool_connections(model) == (0, 0)  # closed, not pooled half read
        assert (await model.call(PROMPT)).result.output.text


async def test_default_cap_is_32_mib(adapter: Adapter) -> None:
    """Promise: with no `max_response_bytes`, the cap is 32 MiB; `None` turns it off."""
    assert DEFAULT_MAX_RESPONSE_BYTES == 32 * 1024 * 1024
    adapter.server.huge_body(DEFAULT_MAX_RESPONSE_BYTES + 1)
    async with adapter.model(max_retries=0) as model:
        with anyio.fail_after(5), pytest.raises(ResponseTooLargeError) as caught:
            await model.call(PROMPT)
    _check(caught.value, DEFAULT_MAX_RESPONSE_BYTES)
    adapter.server.huge_body(2 * CAP)
    async with adapter.model(max_retries=0, max_response_bytes=None) as model:
        with pytest.raises(jr.ModelError) as unread:  # read whole, then not a chat answer
            await model.call(PROMPT)
    assert not isinstance(unread.value, ResponseTooLargeError)


async def test_capped_client_keeps_the_sdk_defaults(adapter: Adapter) -> None:
    """Promise: the capped client is the SDK's own default one: same pool limits, timeouts,
    redirects and socket options; `max_response_bytes` is refused with a caller's client."""
    async with adapter.model() as model:
        ours: Any = model.client._client
        plain: Any
        if adapter.kind == "openai":
            plain = openai.AsyncOpenAI(api_key="sk-t", base_url=adapter.server.base_url)._client
            given: Any = openai.AsyncOpenAI(api_key="sk-t", base_url=adapter.server.base_url)
            with pytest.raises(UserError, match="max_response_bytes"):
                OpenAIChatModel("m", client=given, max_response_bytes=CAP)
        else:
            plain = anthropic.AsyncAnthropic(api_key="sk-t", base_url=adapter.server.base_url)
            given = plain
            plain = plain._client
            with pytest.raises(UserError, match="max_response_bytes"):
                AnthropicChatModel("m", client=given, max_response_bytes=CAP)
        try:
            assert model.client.timeout == given.timeout
            assert ours.timeout == plain.timeout
            assert ours.follow_redirects == plain.follow_redirects
            ours_pool, plain_pool = ours._transport._pool, plain._transport._pool
            assert ours_pool._max_connections == plain_pool._max_connections == 1000
            assert ours_pool._max_keepalive_connections == plain_pool._max_keepalive_connections
            assert ours_pool._keepalive_expiry == plain_pool._keepalive_expiry
            assert ours_pool._socket_options == plain_pool._socket_options
            assert ours._trust_env == plain._trust_env
        finally:
            await plain.aclose()
            await given.close()
        with pytest.raises(UserError, match="max_response_bytes"):
            adapter.model(max_response_bytes=0)
