"""`AnthropicChatModel.call`'s lean request gives what `messages.create` gives, sends what it sends.

Promises (issue 23): for a client the adapter built itself, `call()` posts on the lean
transport's raw core (`_lean_anthropic`) and reads the JSON body without the SDK's models; the
`ChatResponse` is the one the SDK's path gives for the same answer (text, tool calls, thinking
blocks left out, usage with the cache counts, stop reason and sequence, id, model), the request
carries the same body and the same headers (the SDK's own, but for the two httpx adds), and the
SDK's own checks (`Streaming is required`) and its fallbacks (a caller's client, no cap, another
auth mode) stay. Each against `FakeAnthropicServer` on loopback, both paths on the same answers.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import anthropic
import pytest
from anthropic._constants import ANTHROPIC_API_VERSION
from anthropic._data import DEPRECATED_MODELS

import jevrefine as jr
from jevrefine._http import _vendor_anthropic as _lean_anthropic
from jevrefine.exceptions import ModelHTTPError
from jevrefine.messages import ChatOptions, ChatResponse, Prompt, ToolDefinition, UserMessage
from jevrefine.models.anthropic import AnthropicChatModel
from jevrefine.testing import FakeAnthropicServer
from support import sdk_path

KEY = "sk-ant-lean-0123456789"
PROMPT = Prompt((jr.SystemMessage("Be brief."), UserMessage("hello")))
WEATHER = ToolDefinition(
    "weather",
    "The weather in a city.",
    {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
)
HTTPX_ONLY = frozenset({"accept-encoding", "connection", "x-stainless-raw-response"})
"""The headers the SDK's path adds and the raw core leaves out: httpx's two (HTTP/1.1 keeps the
connection alive by default; answers come back as sent), and the one `with_raw_response` adds
to say it wants the raw answer."""

REPLIES: dict[str, Any] = {
    "text": "Hello there.",
    "tool use": {
        "text": "Let me look.",
        "tool_use": [{"id": "toolu_a", "name": "weather", "input": {"city": "Oslo", "n": 1.5}}],
    },
    "blocks as sent": {
        "content": [
            {"type": "thinking", "thinking": "hmm", "signature": "sig"},
            {"type": "text", "text": "Part one, "},
            {"type": "redacted_thinking", "data": "xyz"},
            {"type": "text", "text": "part two."},
            {"type": "tool_use", "id": "toolu_1", "name": "weather", "input": {}},
            {"type": "server_tool_use", "id": "srv_1", "name": "web_search", "input": {}},
        ],
        "stop_reason": "tool_use",
    },
    "cache counts": {
        "text": "cached",
        "usage": {
            "input_tokens": 3,
            "output_tokens": 2,
            "cache_read_input_tokens": 40,
            "cache_creation_input_tokens": 7,
        },
    },
    "stop sequence": {"text": "one two", "stop_reason": "stop_sequence", "stop_sequence": "END"},
    "cut at max_tokens": {"text": "a b c d e f g h", "stop_reason": "max_tokens"},
    "unknown stop reason": {"text": "x", "stop_reason": "Something_New", "id": "msg_9"},
}


@pytest.fixture
async def server() -> AsyncIterator[FakeAnthropicServer]:
    async with FakeAnthropicServer(model="claude-fake") as fake:
        yield fake


def _models(server: FakeAnthropicServer, **kwargs: Any) -> tuple[AnthropicChatModel, ...]:
    """The same adapter twice: on the lean request, and on the SDK's `messages.create`."""
    lean = AnthropicChatModel("claude-fake", base_url=server.base_url, api_key=KEY, **kwargs)
    sdk = sdk_path(
        lambda: AnthropicChatModel("claude-fake", base_url=server.base_url, api_key=KEY, **kwargs)
    )
    assert lean._wire.path == "lean"
    assert sdk._wire.path == "public"
    return lean, sdk


async def _both(
    server: FakeAnthropicServer, reply: Any, prompt: Prompt = PROMPT, **kwargs: Any
) -> tuple[ChatResponse, ChatResponse]:
    lean, sdk = _models(server, **kwargs)
    # One id for both answers (the fake numbers its messages): nothing else may differ.
    reply = {"text": reply} if isinstance(reply, str) else reply
    reply = {"id": "msg_same", **reply}
    try:
        server.script(reply, reply)
        return await lean.call(prompt), await sdk.call(prompt)
    finally:
        await lean.aclose()
        await sdk.aclose()


@pytest.mark.parametrize("name", list(REPLIES))
async def test_the_lean_request_reads_an_answer_as_the_sdk_does(
    server: FakeAnthropicServer, name: str
) -> None:
    options = ChatOptions(tools=(WEATHER,), stop=("END",), temperature=0.5)
    lean, sdk = await _both(server, REPLIES[name], PROMPT.with_options(options))
    assert lean == sdk
    assert lean.result.output.text == sdk.result.output.text  # not two equal empties
    assert lean.metadata.extra == sdk.metadata.extra


async def test_the_blocks_are_read_as_the_adapter_documents(server: FakeAnthropicServer) -> None:
    """Not only equal to the SDK's path: what the conventions say (so both cannot drift)."""
    lean, _ = await _both(server, REPLIES["blocks as sent"])
    assert lean.result.output.text == "Part one, part two."
    assert [(c.id, c.name, c.arguments) for c in lean.result.output.tool_calls] == [
        ("toolu_1", "weather", "{}")
    ]
    assert lean.metadata.finish_reasons == ("tool_calls",)
    cached, _ = await _both(server, REPLIES["cache counts"])
    usage = cached.metadata.usage
    assert (usage.input_tokens, usage.output_tokens) == (50, 2)
    assert cached.metadata.extra["cache_read_input_tokens"] == 40


async def test_the_lean_request_sends_the_sdks_body_and_headers(
    server: FakeAnthropicServer,
) -> None:
    options = ChatOptions(
        tools=(WEATHER,),
        tool_choice="required",
        stop=("END",),
        temperature=0.25,
        top_p=0.9,
        max_tokens=77,
        extra_body={"metadata": {"user_id": "u1"}, "max_tokens": 55},
    )
    await _both(server, "ok", PROMPT.with_options(options))
    lean_request, sdk_request = server.requests
    assert lean_request.path == sdk_request.path == "/v1/messages"
    assert lean_request.json == sdk_request.json
    assert list(lean_request.json) == list(sdk_request.json)  # the SDK's key order too
    assert lean_request.json["max_tokens"] == 55  # extra_body wins, as in the SDK
    sdk_headers = {k: v for k, v in sdk_request.headers.items() if k not in HTTPX_ONLY}
    assert dict(lean_request.headers) == sdk_headers
    assert lean_request.headers["authorization"] == f"Bearer {KEY}"
    assert lean_request.headers["anthropic-version"] == ANTHROPIC_API_VERSION


async def test_a_timeout_of_the_adapters_reaches_the_sdks_headers_alike(
    server: FakeAnthropicServer,
) -> None:
    """With `timeout=` the client's timeout applies, and `create` passes none of its own."""
    await _both(server, "ok", timeout=12.5)
    lean_request, sdk_request = server.requests
    for name in ("x-stainless-timeout", "x-stainless-read-timeout"):
        assert lean_request.headers[name] == sdk_request.headers[name], name
    assert lean_request.headers["x-stainless-read-timeout"] == "12.5"


async def test_a_long_max_tokens_streams_on_both_paths(server: FakeAnthropicServer) -> None:
    """The SDK refuses a request it expects to run past 10 minutes; the adapter streams it."""
    prompt = PROMPT.with_options(ChatOptions(max_tokens=100_000))
    lean, sdk = await _both(server, "streamed anyway", prompt)
    assert lean.result.output.text == sdk.result.output.text == "streamed anyway"
    assert [r.json.get("stream") for r in server.requests] == [True, True]


async def test_an_error_status_is_the_same_error_on_both_paths(
    server: FakeAnthropicServer,
) -> None:
    errors = []
    for model in _models(server, max_retries=0):
        server.fail(400)
        with pytest.raises(ModelHTTPError) as caught:
            await model.call(PROMPT)
        await model.aclose()
        errors.append(caught.value)
    lean, sdk = errors
    assert (lean.status_code, lean.body, str(lean)) == (sdk.status_code, sdk.body, str(sdk))


async def test_the_sdks_own_create_is_used_when_the_lean_request_cannot_keep_its_semantics(
    server: FakeAnthropicServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = server.base_url
    async with AnthropicChatModel("m", base_url=url, api_key=KEY) as model:
        assert model._wire.path == "lean"
    sdk = anthropic.AsyncAnthropic(api_key=KEY, base_url=url)
    async with AnthropicChatModel("m", client=sdk) as model:
        assert model._wire.path == "public"
    async with AnthropicChatModel("m", base_url=url, api_key=KEY, max_response_bytes=None) as m:
        assert m._wire.path == "public"
    plain = anthropic.AsyncAnthropic(api_key=KEY, base_url=url, open_telemetry=False)
    others = (
        anthropic.AsyncAnthropic(auth_token="tok-0123456789", base_url=url, open_telemetry=False),
        plain.with_options(default_query={"beta": "1"}),
        anthropic.AsyncAnthropic(api_key=KEY, base_url="http://my_host:9", open_telemetry=False),
    )
    assert _lean_anthropic.eligible(plain)
    assert [_lean_anthropic.eligible(other) for other in others] == [False, False, False]
    for client in (plain, *others):
        await client.close()
    await sdk.close()
    monkeypatch.setenv("HTTP_PROXY", "http://127.0.0.1:3128")
    async with AnthropicChatModel("m", base_url=url, api_key=KEY) as model:
        assert model._wire.path == "public"


async def test_a_deprecated_model_is_warned_about_on_both_paths(
    server: FakeAnthropicServer,
) -> None:
    deprecated = next(iter(DEPRECATED_MODELS))
    for model in _models(server):
        with pytest.warns(DeprecationWarning, match=deprecated):
            await model.call(PROMPT.with_options(ChatOptions(model=deprecated)))
        await model.aclose()
