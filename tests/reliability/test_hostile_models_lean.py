"""`OpenAIChatModel.call`'s lean request (the SDK's semantics on the transport's raw core).

Promises (issue 23): with a client it built itself and no proxy, the adapter sends the SDK's
own header lines (auth, `X-Stainless-*`, `x-stainless-retry-count` counting the retries) with
`Host` and `Content-Length`, retries as the SDK decides (`x-should-retry`, the statuses, its
backoff, never a batch's 429), raises the SDK's errors translated as before, follows a redirect
through the SDK, and decodes a `content-encoding` sent unasked. With `client=`, a proxy, or no
cap, the SDK's own `post` is used. Each against a raw asyncio peer on 127.0.0.1.
"""

from __future__ import annotations

import gzip
import json
from typing import Any

import anyio
import pytest
from _hostile_jev import (
    PROXY_VARIABLES,
    HostileServer,
    Writer,
    request_head,
    response,
    scripted,
)
from openai import AsyncOpenAI
from openai._models import FinalRequestOptions

import jevrefine as jr
from jevrefine.exceptions import ModelHTTPError, ModelResponseError
from jevrefine.models.openai import OpenAIChatModel
from support import instant_retries

KEY = "sk-lean-test-0123456789"
COMPLETION = json.dumps(
    {
        "id": "c1",
        "object": "chat.completion",
        "model": "m",
        "choices": [
            {"index": 0, "message": {"role": "assistant", "content": "hi"}, "finish_reason": "stop"}
        ],
        "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
    }
).encode()
PROMPT = jr.Prompt((jr.UserMessage("hello"),))


def _model(server: HostileServer, *, retries: int = 2, **kwargs: Any) -> OpenAIChatModel:
    model = OpenAIChatModel(
        "m", base_url=server.base_url + "/v1", api_key=KEY, max_retries=retries, **kwargs
    )
    return instant_retries(model)  # the policy's backoff, made instant


@pytest.fixture(autouse=True)
def _no_proxy(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in PROXY_VARIABLES:
        monkeypatch.delenv(name, raising=False)


async def test_the_lean_request_sends_the_sdks_header_lines_and_counts_its_retries() -> None:
    busy = response(b'{"error":{"message":"busy"}}', status=b"500 Busy")
    script = scripted(busy, response(COMPLETION))
    async with HostileServer(script, close=False) as server:
        model = _model(server)
        assert model._wire.path == "lean"  # the lean path, not the SDK's post
        port = server.base_url.rsplit(":", 1)[1].encode()
        with anyio.fail_after(10):
            answer = await model.call(PROMPT)
        sdk: Any = model.client
        options = FinalRequestOptions.construct(method="post", url="/chat/completions")
        expected = [sdk._build_headers(options, retries_taken=n).raw for n in (0, 1)]
        await model.aclose()
    assert answer.result.output.text == "hi"
    first, second = (request_head(request) for request in server.requests)
    assert first[0] == b"POST /v1/chat/completions HTTP/1.1"
    body = server.requests[0].partition(b"\r\n\r\n")[2]
    assert first[1:] == [
        b"Host: 127.0.0.1:" + port,
        *(b"%s: %s" % field for field in expected[0]),
        b"content-length: %d" % len(body),
    ]
    assert b"Authorization: Bearer " + KEY.encode() in first
    assert b"x-stainless-retry-count: 0" in first
    assert b"x-stainless-retry-count: 1" in second
    assert json.loads(body) == {"model": "m", "messages": [{"role": "user", "content": "hello"}]}
    assert server.requests[1].partition(b"\r\n\r\n")[2] == body


async def test_x_should_retry_false_is_obeyed_and_the_status_error_is_translated() -> None:
    error = response(
        b'{"error":{"message":"nope","type":"server_error"}}',
        status=b"503 Unavailable",
        headers=b"x-should-retry: false\r\nretry-after: 7\r\n",
    )
    async with HostileServer(error) as server:
        model = _model(server)
        with anyio.fail_after(10), pytest.raises(ModelHTTPError) as caught:
            await model.call(PROMPT)
        await model.aclose()
    assert len(server.requests) == 1
    assert caught.value.status_code == 503
    assert caught.value.retry_after == 7.0
    assert caught.value.body == {"error": {"message": "nope", "type": "server_error"}}


async def test_a_429_is_left_to_a_rate_limiter_above_when_the_model_is_told() -> None:
    """`without_rate_limit_retries()` (what `RateLimitedModel` asks): one request, the 429
    given back at once instead of retried by the SDKs' rules (which retry 429)."""
    limited = response(b'{"error":{"message":"slow down"}}', status=b"429 Too Many Requests")
    async with HostileServer(limited) as server:
        model = _model(server)
        with anyio.fail_after(10), pytest.raises(ModelHTTPError) as caught:
            await model.without_rate_limit_retries().call(PROMPT)
        await model.aclose()
    assert caught.value.status_code == 429
    assert len(server.requests) == 1  # the limiter above pauses everyone and retries it


async def test_a_redirect_is_followed_through_the_sdk() -> None:
    async def script(writer: Writer) -> None:
        if len(server.requests) == 1:  # the lean request: moved
            await writer.send(
                b"HTTP/1.1 307 Temporary Redirect\r\nlocation: /v2/chat/completions\r\n"
                b"content-length: 0\r\n\r\n"
            )
        elif b"/v2/" in server.requests[-1].split(b"\r\n", 1)[0]:
            await writer.send(response(COMPLETION))
        else:  # the SDK's resend of the original request: moved again
            await writer.send(
                b"HTTP/1.1 307 Temporary Redirect\r\nlocation: /v2/chat/completions\r\n"
                b"content-length: 0\r\n\r\n"
            )

    async with HostileServer(script, close=False) as server:
        model = _model(server)
        with anyio.fail_after(10):
            answer = await model.call(PROMPT)
        await model.aclose()
    assert answer.result.output.text == "hi"
    assert [request_head(r)[0] for r in server.requests] == [
        b"POST /v1/chat/completions HTTP/1.1",
        b"POST /v1/chat/completions HTTP/1.1",
        b"POST /v2/chat/completions HTTP/1.1",
    ]


async def test_a_content_encoding_sent_unasked_is_decoded() -> None:
    answer = response(gzip.compress(COMPLETION), headers=b"content-encoding: gzip\r\n")
    async with HostileServer(answer) as server:
        model = _model(server)
        with anyio.fail_after(10):
            result = await model.call(PROMPT)
        await model.aclose()
    assert result.result.output.text == "hi"
    assert b"accept-encoding" not in server.requests[0].lower()


async def test_a_body_that_does_not_decode_is_a_response_error_sent_once() -> None:
    """The wire's policy: an answer that does not decode would come back the same (and be
    billed again), so it is a `ModelResponseError`, never retried (the SDK retried it)."""
    answer = response(b"not gzip at all", headers=b"content-encoding: gzip\r\n")
    async with HostileServer(answer, close=False) as server:
        model = _model(server, retries=2)
        with anyio.fail_after(10), pytest.raises(ModelResponseError):
            await model.call(PROMPT)
        await model.aclose()
    assert len(server.requests) == 1


async def test_the_sdks_own_post_is_used_with_a_callers_client_a_proxy_no_cap_or_an_odd_host(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    url = "http://127.0.0.1:9/v1"
    async with OpenAIChatModel("m", base_url=url, api_key=KEY) as model:
        assert model._wire.path == "lean"
    sdk = AsyncOpenAI(api_key=KEY, base_url=url)
    async with OpenAIChatModel("m", client=sdk) as model:
        assert model._wire.path == "public"
    await sdk.close()
    async with OpenAIChatModel("m", base_url=url, api_key=KEY, max_response_bytes=None) as model:
        assert model._wire.path == "public"
    # httpx names such a host differently in TLS (SNI): the SDK's own path keeps its behaviour.
    async with OpenAIChatModel("m", base_url="http://my_host:9/v1", api_key=KEY) as model:
        assert model._wire.path == "public"
    monkeypatch.setenv("HTTP_PROXY", "http://127.0.0.1:3128")
    async with OpenAIChatModel("m", base_url=url, api_key=KEY) as model:
        assert model._wire.path == "public"
