"""`FakeAnthropicServer`: Anthropic's Messages API on loopback, scripted, with fault injection."""

from __future__ import annotations

import asyncio
import itertools
import json
import re
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from typing import Any, ClassVar, Final, TypeAlias

from ._http import HTTPRequest, HTTPResponse, StreamingHTTPResponse
from ._script import ScriptedServer

__all__ = ["AnthropicReply", "AnthropicReplyFunction", "FakeAnthropicServer"]

AnthropicReply: TypeAlias = str | Mapping[str, Any]
"""A scripted answer: the text, or a dict describing the message (see `FakeAnthropicServer`)."""
AnthropicReplyFunction: TypeAlias = Callable[
    [dict[str, Any]], AnthropicReply | Awaitable[AnthropicReply]
]
"""A function of the request's JSON body returning a reply; sync or async."""

ERROR_TYPES: Final[Mapping[int, str]] = {
    400: "invalid_request_error",
    401: "authentication_error",
    402: "billing_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    500: "api_error",
    504: "timeout_error",
    529: "overloaded_error",
}
"""The `error.type` Anthropic sends with each status (`api_error` for any other)."""

_ERROR_MESSAGES: Final[Mapping[str, str]] = {
    "invalid_request_error": "There was an issue with the format or content of your request.",
    "authentication_error": "invalid x-api-key",
    "billing_error": "There is an issue with your billing.",
    "permission_error": "Your API key does not have permission to use the specified resource.",
    "not_found_error": "The requested resource could not be found.",
    "request_too_large": "Request exceeds the maximum allowed number of bytes.",
    "rate_limit_error": "Your account has hit a rate limit.",
    "api_error": "An unexpected error has occurred internal to Anthropic's systems.",
    "timeout_error": "Request timed out.",
    "overloaded_error": "Overloaded",
}

_TOKEN = re.compile(r"\S+\s*|\s+")


class FakeAnthropicServer(ScriptedServer["AnthropicReply"]):
    """Anthropic's `POST /v1/messages` on a real loopback HTTP server: JSON and streaming (SSE).

    Point `AnthropicChatModel` (or `anthropic.AsyncAnthropic`) at `base_url`; any API key works.

    ```python
    from jevrefine import ChatClient
    from jevrefine.models.anthropic import AnthropicChatModel
    from jevrefine.testing import FakeAnthropicServer

    async def test_weather_tool() -> None:
        async with FakeAnthropicServer() as server:
            server.script(
                {"tool_use": [{"name": "weather", "input": {"city": "Paris"}}]},
                "It is sunny in Paris.",
            )
            async with AnthropicChatModel("claude-x", base_url=server.base_url) as model:
                answer = await ChatClient(model, tools=[weather]).prompt("Paris?").content()
            assert answer == "It is sunny in Paris."
            assert server.requests[1].json["messages"][-1]["content"][0]["type"] == "tool_result"
    ```

    Each request is answered by, in this order: the next reply queued with `script(...)`; else
    `reply(request_json)` (sync or async); else a deterministic default that names the last user
    message. A reply is the answer's text, or a dict with any of:

    - `text`: the text (one text block);
    - `tool_use`: a list of `{"name": ..., "input": {...}, "id": optional}` (tool_use blocks,
      after the text);
    - `content`: the content blocks exactly as sent (instead of `text` and `tool_use`);
    - `stop_reason` (default `tool_use` with tool calls, else `end_turn`) and `stop_sequence`;
    - `usage`: counts that replace the estimated ones (`input_tokens`, `output_tokens`,
      `cache_read_input_tokens`, `cache_creation_input_tokens`);
    - `id`, `model`: the message's id and model (default `msg_fake_…` and the request's model).

    As the real API does, the text of a reply whose `stop_reason` is not given is cut where one
    of the request's `stop_sequences` starts (`stop_sequence`) and after `max_tokens` tokens
    (`max_tokens`); a token is a word with its trailing space. Usage is estimated the same way.

    Streaming requests get the real API's event sequence: `message_start`, then per content
    block `content_block_start`, deltas (`text_delta`, `input_json_delta`) and
    `content_block_stop` (a `ping` after the first start), then `message_delta` and
    `message_stop`, each with its `event:` line.

    Requests without `model`, `max_tokens` or `messages` get a 400 `invalid_request_error`, and
    requests without an API key (`x-api-key` or `authorization`) a 401, as from the real API.
    Failures injected with `fail(status)` carry Anthropic's error body
    (`{"type": "error", "error": {"type": "overloaded_error", ...}}` for 529).
    `POST /v1/messages/count_tokens` answers `{"input_tokens": n}`.

    Args:
        reply: answers requests the script does not; `(request_json) -> str | dict`.
        latency: seconds every response waits before it is sent.
        model: the model reported when the request names none.
    """

    reply_types: ClassVar[tuple[type, ...]] = (str, Mapping)
    """What `script(...)` accepts: a str or a dict."""

    def __init__(
        self,
        reply: AnthropicReplyFunction | None = None,
        *,
        latency: float = 0.0,
        model: str = "fake-claude",
    ) -> None:
        super().__init__(reply, latency=latency)
        self.model = model
        """The model reported when a request names none."""
        self._counter = itertools.count(1)

    @property
    def base_url(self) -> str:
        """The URL to give the SDK (`http://127.0.0.1:PORT`; the SDK adds `/v1/messages`)."""
        return self.url

    def default_reply(self, body: dict[str, Any]) -> AnthropicReply:
        """The deterministic default reply."""
        return _default_reply(body)

    # -- the API -----------------------------------------------------------------------------

    def error_body(self, status: int, body: Any) -> Any:
        """Anthropic's error body for an injected failure: `{"type": "error", "error": {...}}`."""
        kind = ERROR_TYPES.get(status, "api_error")
        return _error(kind, _ERROR_MESSAGES[kind])

    async def handle(self, request: HTTPRequest) -> HTTPResponse | StreamingHTTPResponse:
        """Answer `POST /v1/messages` and `POST /v1/messages/count_tokens`."""
        if request.method != "POST" or request.path not in (
            "/v1/messages",
            "/v1/messages/count_tokens",
        ):
            return _error_response(404, "not_found_error", f"{request.method} {request.path}")
        if not (request.headers.get("x-api-key") or request.headers.get("authorization")):
            return _error_response(401, "authentication_error", "x-api-key header is required")
        try:
            body = request.json()
        except ValueError:
            return _error_response(400, "invalid_request_error", "the body is not valid JSON")
        if not isinstance(body, dict):
            return _error_response(400, "invalid_request_error", "the body must be an object")
        if request.path.endswith("/count_tokens"):
            return HTTPResponse.json({"input_tokens": _input_tokens(body)})
        for name in ("model", "max_tokens", "messages"):
            if name not in body:
                return _error_response(400, "invalid_request_error", f"{name}: Field required")
        if not isinstance(body["max_tokens"], int) or body["max_tokens"] < 1:
            return _error_response(
                400, "invalid_request_error", "max_tokens: must be a positive integer"
            )
        problem = _check_messages(body["messages"])
        if problem is not None:
            return _error_response(400, "invalid_request_error", problem)
        try:
            reply = await self.next_reply(body)
        except Exception as exc:  # a bug in the test's reply function: say so, keep serving
            return _error_response(500, "api_error", f"fake server: reply failed: {exc!r}")
        message = _message(reply, body, self._next_id(), self.model)
        if body.get("stream"):
            return StreamingHTTPResponse(_sse(message))
        return HTTPResponse.json(message, headers={"request-id": f"req_{message['id']}"})

    def _next_id(self) -> str:
        return f"msg_fake_{next(self._counter):06d}"  # itertools.count is atomic under the GIL


def _check_messages(messages: Any) -> str | None:
    """What the real API would reject in `messages` (the roles, as it checks them), or `None`."""
    if not isinstance(messages, list) or not messages:
        return "messages: at least one message is required"
    for index, message in enumerate(messages):
        if not isinstance(message, dict) or "content" not in message:
            return f"messages.{index}: a message needs a role and content"
        if message.get("role") not in ("user", "assistant"):
            return (
                f"messages.{index}.role: Unexpected role {message.get('role')!r}; use the "
                "top-level system parameter for system prompts"
            )
    return None


def _error(kind: str, message: str) -> dict[str, Any]:
    return {"type": "error", "error": {"type": kind, "message": message}, "request_id": "req_fake"}


def _error_response(status: int, kind: str, message: str) -> HTTPResponse:
    return HTTPResponse.json(_error(kind, message), status=status)


def _text_of(content: Any) -> str:
    """The text of a message's or system's content (a string or a list of blocks)."""
    if isinstance(content, str):
        return content
    parts: list[str] = []
    if isinstance(content, list):
        for block in content:
            if not isinstance(block, dict):
                continue
            if block.get("type") == "text":
                parts.append(str(block.get("text", "")))
            elif block.get("type") == "tool_result":
                parts.append(_text_of(block.get("content", "")))
            elif block.get("type") == "tool_use":
                parts.append(json.dumps(block.get("input", {})))
    return " ".join(parts)


def _count(text: str) -> int:
    return len(text.split())


def _input_tokens(body: Mapping[str, Any]) -> int:
    messages = body.get("messages") or []
    words = _count(_text_of(body.get("system", "")))
    words += sum(_count(_text_of(m.get("content", ""))) for m in messages if isinstance(m, dict))
    return max(1, words)


def _default_reply(body: Mapping[str, Any]) -> str:
    last = ""
    for message in reversed(body.get("messages") or []):
        if isinstance(message, dict) and message.get("role") == "user":
            last = " ".join(_text_of(message.get("content", "")).split())
            break
    return f"This is a fake answer to: {last[:80]}" if last else "This is a fake answer."


def _cut(text: str, body: Mapping[str, Any]) -> tuple[str, str | None, str | None]:
    """The text as the API would return it, and the stop reason and sequence when it was cut."""
    stop_reason: str | None = None
    matched: str | None = None
    sequences = body.get("stop_sequences") or []
    hits = [(text.find(s), s) for s in sequences if isinstance(s, str) and s and s in text]
    if hits:
        index, matched = min(hits)
        text, stop_reason = text[:index], "stop_sequence"
    tokens = _TOKEN.findall(text)
    if len(tokens) > body["max_tokens"]:
        text, stop_reason, matched = "".join(tokens[: body["max_tokens"]]), "max_tokens", None
    return text, stop_reason, matched


def _message(
    reply: AnthropicReply, body: Mapping[str, Any], message_id: str, default_model: str
) -> dict[str, Any]:
    """The whole `message` object answering `body`."""
    spec: Mapping[str, Any] = {"text": reply} if isinstance(reply, str) else reply
    stop_reason: str | None = spec.get("stop_reason")
    stop_sequence: str | None = spec.get("stop_sequence")
    content: list[dict[str, Any]]
    if "content" in spec:
        content = [dict(block) for block in spec["content"]]
    else:
        content = []
        text = spec.get("text")
        if text is not None:
            if stop_reason is None:
                text, stop_reason, stop_sequence = _cut(str(text), body)
            content.append({"type": "text", "text": text})
        for index, call in enumerate(spec.get("tool_use") or ()):
            content.append(
                {
                    "type": "tool_use",
                    "id": call.get("id") or f"toolu_fake_{message_id[-6:]}_{index}",
                    "name": call["name"],
                    "input": dict(call.get("input") or {}),
                }
            )
    if stop_reason is None:
        has_tools = any(block.get("type") == "tool_use" for block in content)
        stop_reason = "tool_use" if has_tools else "end_turn"
    output = sum(_count(_text_of([block])) for block in content)
    usage: dict[str, Any] = {
        "input_tokens": _input_tokens(body),
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": 0,
        "output_tokens": max(1, output),
        "service_tier": "standard",
    }
    usage.update(spec.get("usage") or {})
    return {
        "id": spec.get("id") or message_id,
        "type": "message",
        "role": "assistant",
        "content": content,
        "model": spec.get("model") or body.get("model") or default_model,
        "stop_reason": stop_reason,
        "stop_sequence": stop_sequence,
        "usage": usage,
    }


def _event(name: str, data: Mapping[str, Any]) -> bytes:
    return f"event: {name}\ndata: {json.dumps(data, separators=(',', ':'))}\n\n".encode()


def _pieces(text: str, size: int) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)] or [""]


async def _sse(message: Mapping[str, Any]) -> AsyncIterator[bytes]:
    """The event stream of a message, in the real API's order."""
    usage = message["usage"]
    start_usage = {**usage, "output_tokens": min(1, usage["output_tokens"])}
    yield _event(
        "message_start",
        {
            "type": "message_start",
            "message": {
                **message,
                "content": [],
                "stop_reason": None,
                "stop_sequence": None,
                "usage": start_usage,
            },
        },
    )
    for index, block in enumerate(message["content"]):
        kind = block.get("type")
        if kind == "text":
            start: dict[str, Any] = {"type": "text", "text": ""}
            deltas = [{"type": "text_delta", "text": t} for t in _TOKEN.findall(block["text"])]
        elif kind == "tool_use":
            start = {**block, "input": {}}
            # Like the real API: an empty first piece, then the JSON in a few fragments.
            raw = json.dumps(block.get("input", {}))
            deltas = [{"type": "input_json_delta", "partial_json": ""}]
            deltas += [{"type": "input_json_delta", "partial_json": p} for p in _pieces(raw, 12)]
        else:  # a raw block of another kind: sent whole at its start
            start, deltas = dict(block), []
        yield _event(
            "content_block_start",
            {"type": "content_block_start", "index": index, "content_block": start},
        )
        if index == 0:
            yield _event("ping", {"type": "ping"})
        for delta in deltas:
            await asyncio.sleep(0)  # let the client read chunk by chunk, as from a real server
            yield _event(
                "content_block_delta",
                {"type": "content_block_delta", "index": index, "delta": delta},
            )
        yield _event("content_block_stop", {"type": "content_block_stop", "index": index})
    yield _event(
        "message_delta",
        {
            "type": "message_delta",
            "delta": {
                "stop_reason": message["stop_reason"],
                "stop_sequence": message["stop_sequence"],
            },
            "usage": {"output_tokens": usage["output_tokens"]},
        },
    )
    yield _event("message_stop", {"type": "message_stop"})
