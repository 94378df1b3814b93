"""`AnthropicChatModel.call`'s lean request against a hostile raw peer on 127.0.0.1.

Promises (issue 23): with a client it built itself and no proxy, the adapter sends the SDK's own
header lines (`Host`, the SDK's headers in its order with `x-stainless-retry-count` counting the
retries, `content-length`), retries as the SDK decides (5xx up to `max_retries`, a 429 after
its Retry-After, `x-should-retry`, never a batch's 429), and a body that does not read (wrong
types, NaN, numbers past any count, not JSON, cut off, missing content) raises the same
`jevrefine` error type as the SDK's `messages.create` path: never a raw `KeyError` or
`TypeError`. A body sent at a byte a second is cut off by `total_timeout`, and an API key the
server echoes back is in no exception text.
"""

from __future__ import annotations

import json
import math
import traceback
from typing import Any, Final

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
from anthropic._models import FinalRequestOptions

import jevrefine as jr
from jevrefine.exceptions import (
    ModelConnectionError,
    ModelError,
    ModelHTTPError,
    ModelTimeoutError,
)
from jevrefine.models.anthropic import AnthropicChatModel
from support import instant_retries, sdk_path

KEY = "sk-ant-hostile-lean-0123456789"
PROMPT = jr.Prompt((jr.UserMessage("hello"),))
MESSAGE: dict[str, Any] = {
    "id": "msg_1",
    "type": "message",
    "role": "assistant",
    "model": "claude-x",
    "content": [{"type": "text", "text": "hi"}],
    "stop_reason": "end_turn",
    "stop_sequence": None,
    "usage": {"input_tokens": 1, "output_tokens": 1},
}


def _json(value: object) -> bytes:
    return json.dumps(value).encode()


def _with(path: str, value: object) -> bytes:
    """`MESSAGE` with the value at the dotted `path` replaced (serialised as Python would)."""
    message = json.loads(json.dumps(MESSAGE))
    *parents, last = path.split(".")
    target: Any = message
    for part in parents:
        target = target[int(part)] if part.isdigit() else target[part]
    target[int(last) if last.isdigit() else last] = value
    return json.dumps(message).encode()


def _without(name: str) -> bytes:
    return _json({k: v for k, v in MESSAGE.items() if k != name})


HOSTILE_BODIES: dict[str, bytes] = {
    "content: 5": _with("content", 5),
    "content: null": _with("content", None),
    "content missing": _without("content"),
    "content: [1]": _with("content", [1]),
    "content: [null]": _with("content", [None]),
    "text: 5": _with("content.0.text", 5),
    "text: an object": _with("content.0.text", {"a": 1}),
    "tool_use input a string": _with(
        "content", [{"type": "tool_use", "id": "t", "name": "n", "input": "x"}]
    ),
    "tool_use id a number": _with(
        "content", [{"type": "tool_use", "id": 5, "name": "n", "input": {}}]
    ),
    "usage: 'lots'": _with("usage", "lots"),
    "usage: null": _with("usage", None),
    "usage missing": _without("usage"),
    "NaN tokens": _with("usage.output_tokens", math.nan),
    "infinite tokens": _with("usage.input_tokens", math.inf),
    "negative tokens": _with("usage.input_tokens", -1),
    "tokens past any count": _with("usage.input_tokens", 10**30),
    "tokens a string": _with("usage.cache_read_input_tokens", "12"),
    "tokens true": _with("usage.output_tokens", True),
    "a 5,000-digit number": _with("usage.input_tokens", 0).replace(
        b'"input_tokens": 0', b'"input_tokens": ' + b"9" * 5000
    ),
    "stop_reason: 7": _with("stop_reason", 7),
    "id: 5": _with("id", 5),
    "model: a list": _with("model", ["m"]),
    "a JSON list": b"[1, 2]",
    "a JSON string": b'"hello"',
    "JSON null": b"null",
    "an empty object": b"{}",
    "not JSON": b"<html>proxy error</html>",
    "deeply nested": b"[" * 100_000 + b"]" * 100_000,
    "bad UTF-8": b'{"id": "\xff\xfe", "content": []}',
}


def _model(server: HostileServer, *, retries: int = 0, **kwargs: Any) -> AnthropicChatModel:
    model = AnthropicChatModel(
        "claude-x", base_url=server.base_url, api_key=KEY, max_retries=retries, **kwargs
    )
    return instant_retries(model)  # the policy's backoff, made instant


@pytest.fixture(autouse=True)
def _no_proxy(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in PROXY_VARIABLES:
        monkeypatch.delenv(name, raising=False)


async def _outcome(body: bytes, *, lean: bool, content_type: bytes) -> object:
    answer = response(body).replace(b"application/json", content_type)
    async with HostileServer(answer) as server:
        model = _model(server) if lean else sdk_path(lambda: _model(server))
        assert model._wire.path == ("lean" if lean else "public")
        try:
            with anyio.fail_after(10):
                return await model.call(PROMPT)
        except Exception as exc:  # compared below, whatever it is
            return exc
        finally:
            await model.aclose()


CASES: Final = [
    *((name, b"application/json") for name in HOSTILE_BODIES),
    # Without a JSON content type the SDK tries JSON, then hands the text over as it is.
    *((name, b"text/plain") for name in ("not JSON", "a JSON list", "content: 5", "bad UTF-8")),
]


@pytest.mark.parametrize(("name", "content_type"), CASES)
async def test_a_hostile_body_is_the_same_typed_error_on_both_paths(
    name: str, content_type: bytes
) -> None:
    body = HOSTILE_BODIES[name]
    lean = await _outcome(body, lean=True, content_type=content_type)
    sdk = await _outcome(body, lean=False, content_type=content_type)
    assert isinstance(lean, ModelError), repr(lean)  # never a KeyError, TypeError, ...
    assert str(lean).startswith("claude-x at 127.0.0.1 "), str(lean)
    # Both paths read the raw body with the adapter's one reader (the SDK's models, which
    # coerced "12" into 12 on the old SDK path, are built on neither).
    assert type(lean) is type(sdk), (lean, sdk)


async def test_the_lean_request_sends_the_sdks_header_lines_and_counts_its_retries() -> None:
    busy = response(
        b'{"type":"error","error":{"type":"api_error","message":"busy"}}', status=b"500 Busy"
    )
    async with HostileServer(scripted(busy, response(_json(MESSAGE))), close=False) as server:
        model = _model(server, retries=2)
        port = server.base_url.rsplit(":", 1)[1].encode()
        with anyio.fail_after(10):
            answer = await model.call(PROMPT)
        sdk: Any = model.client
        timeout = sdk._calculate_nonstreaming_timeout(1, None)
        options = FinalRequestOptions.construct(
            method="post", url="/v1/messages", json_data=None, timeout=timeout
        )
        expected = [sdk._build_headers(options, retries_taken=n).raw for n in (0, 1)]
        await model.aclose()
    assert answer.result.output.text == "hi"
    first, second = (request_head(request) for request in server.requests)
    assert first[0] == b"POST /v1/messages HTTP/1.1"
    body = server.requests[0].partition(b"\r\n\r\n")[2]
    assert first[1:] == [
        b"Host: 127.0.0.1:" + port,
        *(b"%s: %s" % field for field in expected[0]),
        b"content-length: %d" % len(body),
    ]
    assert b"x-stainless-retry-count: 0" in first
    assert b"x-stainless-retry-count: 1" in second
    assert b"anthropic-version: " in b"\n".join(first)
    assert json.loads(body) == {
        "max_tokens": 1024,
        "messages": [{"role": "user", "content": "hello"}],
        "model": "claude-x",
    }
    assert server.requests[1].partition(b"\r\n\r\n")[2] == body


@pytest.mark.parametrize("status", [b"500 Internal", b"503 Unavailable", b"529 Overloaded"])
async def test_a_5xx_is_retried_the_sdks_number_of_times(status: bytes) -> None:
    error = response(
        b'{"type":"error","error":{"type":"overloaded_error","message":"x"}}', status=status
    )
    async with HostileServer(error, close=False) as server:
        model = _model(server, retries=3)
        with anyio.fail_after(10), pytest.raises(ModelHTTPError) as caught:
            await model.call(PROMPT)
        await model.aclose()
    assert len(server.requests) == 4  # the first attempt and max_retries=3
    assert caught.value.status_code == int(status[:3])
    assert caught.value.is_transient
    assert "overloaded_error: x" in str(caught.value)


async def test_a_429_is_retried_after_its_retry_after() -> None:
    limited = response(
        b'{"type":"error","error":{"type":"rate_limit_error","message":"slow"}}',
        status=b"429 Too Many Requests",
        headers=b"retry-after: 0.05\r\n",
    )
    async with HostileServer(scripted(limited, response(_json(MESSAGE))), close=False) as server:
        waits: list[float] = []
        model = instant_retries(_model(server, retries=2), waits)
        with anyio.fail_after(10):
            answer = await model.call(PROMPT)
        await model.aclose()
    assert answer.result.output.text == "hi"
    assert waits == [0.05]  # the policy's rule, as the SDKs': the server's wait, as given
    assert len(server.requests) == 2


async def test_x_should_retry_false_and_a_429_left_to_a_limiter_are_not_retried() -> None:
    refused = response(
        b'{"type":"error","error":{"type":"api_error","message":"no"}}',
        status=b"503 Unavailable",
        headers=b"x-should-retry: false\r\nretry-after: 7\r\n",
    )
    async with HostileServer(refused) as server:
        model = _model(server, retries=2)
        with anyio.fail_after(10), pytest.raises(ModelHTTPError) as caught:
            await model.call(PROMPT)
        await model.aclose()
    assert len(server.requests) == 1
    assert caught.value.retry_after == 7.0
    limited = response(
        b'{"type":"error","error":{"type":"rate_limit_error","message":"x"}}',
        status=b"429 Too Many Requests",
    )
    async with HostileServer(limited) as server:
        model = _model(server, retries=2)
        with anyio.fail_after(10), pytest.raises(ModelHTTPError) as caught:
            await model.without_rate_limit_retries().call(PROMPT)
        await model.aclose()
    assert caught.value.status_code == 429
    assert len(server.requests) == 1  # left to the rate limiter above (RateLimitedModel)


async def test_a_cut_body_is_a_connection_error_after_the_sdks_retries() -> None:
    cut = response(_json(MESSAGE))[:-20]  # the declared length never arrives

    async def script(writer: Writer) -> None:
        await writer.send(cut)
        writer.close()

    async with HostileServer(script) as server:
        model = _model(server, retries=1)
        with anyio.fail_after(10), pytest.raises(ModelConnectionError) as caught:
            await model.call(PROMPT)
        await model.aclose()
    assert len(server.requests) == 2
    assert "127.0.0.1" in str(caught.value)


async def test_a_body_at_a_byte_a_second_is_cut_off_by_the_total_timeout() -> None:
    """The per-read timeout never fires (a byte keeps coming); the call's own deadline does."""
    whole = response(_json(MESSAGE))
    head, _, rest = whole.partition(b"\r\n\r\n")

    async def script(writer: Writer) -> None:
        await writer.send(head + b"\r\n\r\n")
        for byte in rest:
            await writer.send(bytes([byte]))
            await anyio.sleep(1.0)

    async with HostileServer(script) as server:
        model = _model(server, retries=2, timeout=5.0, total_timeout=1.5)
        with anyio.fail_after(8), pytest.raises(ModelTimeoutError) as caught:
            await model.call(PROMPT)
        await model.aclose()
    assert "total_timeout=1.5" in str(caught.value)
    assert len(server.requests) == 1


async def test_an_echoed_key_is_in_no_exception_text() -> None:
    echoed = response(
        _json(
            {"type": "error", "error": {"type": "authentication_error", "message": f"bad {KEY}"}}
        ),
        status=b"401 Unauthorized",
        headers=f"request-id: req-{KEY}\r\n".encode(),
    )
    unreadable = _with("content.0.text", 5).replace(b'"msg_1"', _json(f"msg-{KEY}"))
    unreadable = unreadable.replace(b'"stop_reason": "end_turn"', b'"stop_reason": ' + _json([KEY]))
    for answer in (echoed, response(unreadable)):
        async with HostileServer(answer) as server:
            model = _model(server)
            assert model._wire.path == "lean"
            with anyio.fail_after(10), pytest.raises(ModelError) as caught:
                await model.call(PROMPT)
            await model.aclose()
        error = caught.value
        text = "".join(traceback.format_exception(error))
        assert KEY not in text
        assert KEY not in repr(error)
        assert KEY not in json.dumps(getattr(error, "body", None))


async def test_a_redirect_is_followed_through_the_sdk_with_creates_timeout() -> None:
    moved = (
        b"HTTP/1.1 307 Temporary Redirect\r\nlocation: /v2/messages\r\ncontent-length: 0\r\n\r\n"
    )

    async def script(writer: Writer) -> None:
        target = server.requests[-1].split(b"\r\n", 1)[0]
        await writer.send(response(_json(MESSAGE)) if b"/v2/" in target else moved)

    async with HostileServer(script, close=False) as server:
        model = _model(server, retries=0)
        with anyio.fail_after(10):
            answer = await model.call(PROMPT)
        await model.aclose()
    assert answer.result.output.text == "hi"
    heads = [request_head(r) for r in server.requests]
    assert [h[0] for h in heads] == [
        b"POST /v1/messages HTTP/1.1",  # the lean request: moved
        b"POST /v1/messages HTTP/1.1",  # the SDK's own post, which follows the move
        b"POST /v2/messages HTTP/1.1",
    ]
    # The SDK's resend carries `create`'s timeout, as the lean request did.
    assert all(b"x-stainless-timeout: 600" in h for h in heads), heads
