"""Hostile model bodies, on both adapters, call and stream, from a raw asyncio peer.

Each body is well-formed HTTP carrying what no honest server sends: a value of the wrong type
where the API has an object, a string, or a count (`choices: [1]`, `content: 5`, `usage: "lots"`,
NaN tokens), a number past Python's 4,300-digit limit or past the float range, one byte that
is not UTF-8 inside an event, a stream cut off mid-answer. Promise: every one is a typed
`ModelError` naming the model and the server, raised after exactly one request (reading the same
body again would fail the same way), never a bare `ValueError`, `AttributeError`, `TypeError`
or `UnicodeDecodeError`, and never a wrong answer returned as if it were right (`content: 5`
used to come back as the int 5).
"""

from __future__ import annotations

import copy
import json
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
from _hostile_model_peer import Answer, HostilePeer, body, raw, sse, sse_events

from jevrefine.exceptions import (
    IncompleteResponseError,
    ModelError,
    ModelHTTPError,
    ModelResponseError,
)
from jevrefine.messages import ChatOptions, Prompt, UserMessage
from jevrefine.models.anthropic import AnthropicChatModel
from jevrefine.models.base import ChatModel
from jevrefine.models.openai import OpenAIChatModel

MODEL = "hostile-model"
PROMPT = Prompt((UserMessage("hello"),), ChatOptions())
HUGE_INT = b"1" * 4301
"""One digit past `sys.get_int_max_str_digits()`: `json.loads` raises a bare `ValueError`."""
HUGE_FLOAT = b"1" + b"0" * 310 + b".0"
"""Past the float range: `json.loads` reads it as `inf`."""


def _with_number(document: dict[str, Any], key: str, digits: bytes) -> Answer:
    """`document` as JSON with the token count `key` written as `digits` (no JSON encoder
    writes such a number, so it is put into the bytes by hand)."""
    encoded = json.dumps(document).encode()
    field = f'"{key}": 3'.encode()
    assert field in encoded
    return raw(encoded.replace(field, f'"{key}": '.encode() + digits))


# -- OpenAI -----------------------------------------------------------------------------------

OPENAI_OK: dict[str, Any] = {
    "id": "chatcmpl-1",
    "object": "chat.completion",
    "created": 1,
    "model": MODEL,
    "choices": [
        {
            "index": 0,
            "message": {"role": "assistant", "content": "hi"},
            "finish_reason": "stop",
        }
    ],
    "usage": {"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4},
}


def _openai(path: str, value: Any) -> Answer:
    """`OPENAI_OK` with the value at `path` (dot-separated, ints index lists) replaced."""
    return body(_replaced(OPENAI_OK, path, value))


def _replaced(document: dict[str, Any], path: str, value: Any) -> dict[str, Any]:
    result = copy.deepcopy(document)
    target: Any = result
    *parents, last = path.split(".")
    for part in parents:
        target = target[int(part)] if part.isdigit() else target[part]
    target[int(last) if last.isdigit() else last] = value
    return result


def _openai_tool_call(call: dict[str, Any]) -> Answer:
    message = {"role": "assistant", "content": None, "tool_calls": [call]}
    return _openai("choices.0.message", message)


OPENAI_CALL_BODIES: dict[str, Answer] = {
    "choices: [1]": _openai("choices", [1]),
    "choices: 'x'": _openai("choices", "x"),
    "message: null": _openai("choices.0.message", None),
    "finish_reason: 7": _openai("choices.0.finish_reason", 7),
    "content: 5": _openai("choices.0.message.content", 5),
    "content: a list": _openai("choices.0.message.content", ["hi"]),
    "usage: 'lots'": _openai("usage", "lots"),
    "negative tokens": _openai("usage.prompt_tokens", -5),
    "NaN tokens": _openai("usage.completion_tokens", float("nan")),
    "tokens as words": _openai("usage.completion_tokens", "twelve"),
    "a trillion trillion tokens": _openai("usage.prompt_tokens", 10**24),
    "id: 5": _openai("id", 5),
    "model: an object": _openai("model", {"name": MODEL}),
    "index: 'first'": _openai("choices.0.index", "first"),
    "tool call arguments an object": _openai_tool_call(
        {"id": "c1", "type": "function", "function": {"name": "f", "arguments": {"a": 1}}}
    ),
    "tool call id a number": _openai_tool_call(
        {"id": 7, "type": "function", "function": {"name": "f", "arguments": "{}"}}
    ),
    "tool call name null list": _openai_tool_call(
        {"id": "c1", "type": "function", "function": {"name": [None], "arguments": "{}"}}
    ),
    "tool_calls: 'x'": _openai("choices.0.message.tool_calls", "x"),
    "4,301-digit number": _with_number(OPENAI_OK, "prompt_tokens", HUGE_INT),
    "310-digit float": _with_number(OPENAI_OK, "prompt_tokens", HUGE_FLOAT),
    "invalid UTF-8": raw(json.dumps(OPENAI_OK).encode().replace(b'"hi"', b'"h\xffi"')),
}


def _chunk(delta: dict[str, Any], finish: Any = None, **extra: Any) -> bytes:
    choice = {"index": 0, "delta": delta, "finish_reason": finish}
    return json.dumps({"id": "c", "model": MODEL, "choices": [choice], **extra}).encode()


_OPENING = _chunk({"role": "assistant", "content": "Hello"})
_CLOSING = [_chunk({}, "stop"), b"[DONE]"]

OPENAI_STREAMS: dict[str, tuple[Answer, type[ModelError]]] = {
    "invalid UTF-8 in an event": (
        sse([_OPENING, _chunk({"content": "X"}).replace(b"X", b"\xff"), *_CLOSING]),
        ModelResponseError,
    ),
    "delta content 5": (sse([_OPENING, _chunk({"content": 5}), *_CLOSING]), ModelResponseError),
    "delta: null": (
        sse([_OPENING, json.dumps({"choices": [{"index": 0, "delta": None}]}).encode()]),
        ModelResponseError,
    ),
    "choices: [1]": (sse([_OPENING, b'{"choices": [1]}', *_CLOSING]), ModelResponseError),
    "finish_reason: 7": (sse([_OPENING, _chunk({}, 7), b"[DONE]"]), ModelResponseError),
    "usage: 'lots'": (
        sse([_OPENING, _chunk({}, "stop", usage="lots"), b"[DONE]"]),
        ModelResponseError,
    ),
    "NaN tokens": (
        sse([_OPENING, _chunk({}, "stop", usage={"prompt_tokens": float("nan")}), b"[DONE]"]),
        ModelResponseError,
    ),
    "tool call arguments a number": (
        sse([_chunk({"tool_calls": [{"index": 0, "id": "c", "function": {"arguments": 5}}]})]),
        ModelResponseError,
    ),
    "4,301-digit index": (
        sse([_OPENING, b'{"choices": [{"index": ' + HUGE_INT + b', "delta": {}}]}', *_CLOSING]),
        ModelResponseError,
    ),
    "cut off mid-answer (no [DONE], no finish reason)": (
        sse([_OPENING, _chunk({"content": " wor"})]),
        IncompleteResponseError,
    ),
    "a chunk that is a list": (sse([_OPENING, b"[1, 2]", *_CLOSING]), ModelResponseError),
}

# -- Anthropic --------------------------------------------------------------------------------

ANTHROPIC_OK: dict[str, Any] = {
    "id": "msg_1",
    "type": "message",
    "role": "assistant",
    "model": MODEL,
    "content": [{"type": "text", "text": "hi"}],
    "stop_reason": "end_turn",
    "stop_sequence": None,
    "usage": {"input_tokens": 3, "output_tokens": 1},
}


def _anthropic(path: str, value: Any) -> Answer:
    return body(_replaced(ANTHROPIC_OK, path, value))


ANTHROPIC_CALL_BODIES: dict[str, Answer] = {
    "content: 5": _anthropic("content", 5),
    "content: [1]": _anthropic("content", [1]),
    "text: 5": _anthropic("content.0.text", 5),
    "stop_reason: 7": _anthropic("stop_reason", 7),
    "usage: 'lots'": _anthropic("usage", "lots"),
    "usage: null": _anthropic("usage", None),
    "negative tokens": _anthropic("usage.input_tokens", -1),
    "NaN tokens": _anthropic("usage.output_tokens", float("nan")),
    "infinite tokens": _anthropic("usage.output_tokens", float("inf")),
    "id: 5": _anthropic("id", 5),
    "model: a list": _anthropic("model", [MODEL]),
    "tool_use input a string": _anthropic(
        "content", [{"type": "tool_use", "id": "t1", "name": "f", "input": "{}"}]
    ),
    "tool_use id a number": _anthropic(
        "content", [{"type": "tool_use", "id": 9, "name": "f", "input": {}}]
    ),
    "4,301-digit number": _with_number(ANTHROPIC_OK, "input_tokens", HUGE_INT),
    "310-digit float": _with_number(ANTHROPIC_OK, "input_tokens", HUGE_FLOAT),
    "invalid UTF-8": raw(json.dumps(ANTHROPIC_OK).encode().replace(b'"hi"', b'"h\xffi"')),
}

_START = (
    "message_start",
    {"type": "message_start", "message": {**ANTHROPIC_OK, "content": [], "stop_reason": None}},
)
_BLOCK = (
    "content_block_start",
    {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
)


def _text(text: Any) -> tuple[str, Any]:
    delta = {"type": "text_delta", "text": text}
    return "content_block_delta", {"type": "content_block_delta", "index": 0, "delta": delta}


_END = [
    ("content_block_stop", {"type": "content_block_stop", "index": 0}),
    (
        "message_delta",
        {
            "type": "message_delta",
            "delta": {"stop_reason": "end_turn", "stop_sequence": None},
            "usage": {"output_tokens": 2},
        },
    ),
    ("message_stop", {"type": "message_stop"}),
]


def _message_delta(usage: Any, reason: Any = "end_turn") -> tuple[str, Any]:
    delta = {"stop_reason": reason, "stop_sequence": None}
    return "message_delta", {"type": "message_delta", "delta": delta, "usage": usage}


_HUGE_DELTA = b'{"type": "message_delta", "delta": {}, "usage": {"output_tokens": %s}}' % HUGE_INT

ANTHROPIC_STREAMS: dict[str, tuple[Answer, type[ModelError]]] = {
    "invalid UTF-8 in an event": (
        sse_events([_START, _BLOCK, _text("Hello"), ("content_block_delta", b'{"x": "\xff"}')]),
        ModelResponseError,
    ),
    "text delta 5": (
        sse_events([_START, _BLOCK, _text("Hello"), _text(5), *_END]),
        ModelResponseError,
    ),
    "message: null": (
        sse_events([("message_start", {"type": "message_start", "message": None})]),
        ModelResponseError,
    ),
    "usage: 'lots'": (
        sse_events([_START, _BLOCK, _text("Hi"), _message_delta("lots"), *_END[2:]]),
        ModelResponseError,
    ),
    "NaN tokens": (
        sse_events([_START, _BLOCK, _text("Hi"), _message_delta({"output_tokens": "NaN"})]),
        ModelResponseError,
    ),
    "stop_reason: 7": (
        sse_events([_START, _BLOCK, _text("Hi"), _message_delta({"output_tokens": 1}, 7)]),
        ModelResponseError,
    ),
    "4,301-digit number": (
        sse_events([_START, _BLOCK, ("message_delta", _HUGE_DELTA)]),
        ModelResponseError,
    ),
    "cut off mid-answer (no message_stop)": (
        sse_events([_START, _BLOCK, _text("Hello"), _text(" wor")]),
        IncompleteResponseError,
    ),
}

# -- the tests --------------------------------------------------------------------------------


@pytest.fixture
async def peer() -> AsyncIterator[HostilePeer]:
    async with HostilePeer() as server:
        yield server


def _model(kind: str, peer: HostilePeer) -> ChatModel:
    if kind == "openai":
        return OpenAIChatModel(
            MODEL, base_url=peer.url + "/v1", api_key="sk-hostile-test", timeout=5
        )
    return AnthropicChatModel(MODEL, base_url=peer.url, api_key="sk-hostile-test", timeout=5)


def _assert_names_the_server(error: ModelError) -> None:
    text = str(error)
    assert MODEL in text, text
    assert "127.0.0.1" in text, text
    assert error.model_name == MODEL


async def _fails(
    kind: str, peer: HostilePeer, answer: Answer, run: Callable[[ChatModel], Any]
) -> ModelError:
    peer.script(answer)
    async with _model(kind, peer) as model:
        with pytest.raises(ModelError) as caught:
            await run(model)
    assert len(peer.requests) == 1, "a body that cannot be read was asked for again"
    _assert_names_the_server(caught.value)
    return caught.value


async def _call(model: ChatModel) -> None:
    await model.call(PROMPT)


async def _stream(model: ChatModel) -> None:
    async for _ in model.stream(PROMPT):
        pass


@pytest.mark.parametrize("name", list(OPENAI_CALL_BODIES))
async def test_openai_call_refuses_a_hostile_body(peer: HostilePeer, name: str) -> None:
    """Promise: a hostile chat completion is a `ModelResponseError` naming the server, sent once."""
    error = await _fails("openai", peer, OPENAI_CALL_BODIES[name], _call)
    assert type(error) is ModelResponseError
    assert "could not be read" in str(error)


@pytest.mark.parametrize("name", list(ANTHROPIC_CALL_BODIES))
async def test_anthropic_call_refuses_a_hostile_body(peer: HostilePeer, name: str) -> None:
    """Promise: a hostile message is a `ModelResponseError` naming the server, sent once."""
    error = await _fails("anthropic", peer, ANTHROPIC_CALL_BODIES[name], _call)
    assert type(error) is ModelResponseError
    assert "could not be read" in str(error)


@pytest.mark.parametrize("name", list(OPENAI_STREAMS))
async def test_openai_stream_refuses_a_hostile_event(peer: HostilePeer, name: str) -> None:
    """Promise: a hostile or cut-off stream is a typed error naming the server."""
    answer, expected = OPENAI_STREAMS[name]
    error = await _fails("openai", peer, answer, _stream)
    assert type(error) is expected, repr(error)


@pytest.mark.parametrize("name", list(ANTHROPIC_STREAMS))
async def test_anthropic_stream_refuses_a_hostile_event(peer: HostilePeer, name: str) -> None:
    """Promise: a hostile or cut-off stream is a typed error naming the server."""
    answer, expected = ANTHROPIC_STREAMS[name]
    error = await _fails("anthropic", peer, answer, _stream)
    assert type(error) is expected, repr(error)


@pytest.mark.parametrize("kind", ["openai", "anthropic"])
async def test_a_truncated_stream_says_the_answer_is_incomplete(
    peer: HostilePeer, kind: str
) -> None:
    """Promise: a stream that closes mid-answer is never returned as the whole answer: the text
    already delivered is followed by `IncompleteResponseError` (transient), not by a last chunk."""
    if kind == "openai":
        peer.script(sse([_OPENING, _chunk({"content": " wor"})]))
    else:
        peer.script(sse_events([_START, _BLOCK, _text("Hello"), _text(" wor")]))
    pieces: list[str] = []

    async def read(model: ChatModel) -> None:
        async for chunk in model.stream(PROMPT):
            pieces.append(chunk.result.text)

    async with _model(kind, peer) as model:
        with pytest.raises(IncompleteResponseError, match="incomplete") as caught:
            await read(model)
    assert "".join(pieces) == "Hello wor"
    assert caught.value.is_transient
    _assert_names_the_server(caught.value)


@pytest.mark.parametrize("kind", ["openai", "anthropic"])
async def test_the_good_bodies_still_read(peer: HostilePeer, kind: str) -> None:
    """The control: the same peer with the unaltered bodies answers, call and stream."""
    if kind == "openai":
        peer.script(body(OPENAI_OK), sse([_OPENING, _chunk({"content": "!"}), *_CLOSING]))
    else:
        peer.script(body(ANTHROPIC_OK), sse_events([_START, _BLOCK, _text("Hello"), *_END]))
    async with _model(kind, peer) as model:
        response = await model.call(PROMPT)
        assert response.result.text == "hi"
        assert response.metadata.usage.input_tokens == 3
        text = "".join([chunk.result.text async for chunk in model.stream(PROMPT)])
    assert text == ("Hello!" if kind == "openai" else "Hello")


async def test_a_call_made_through_a_stream_says_the_answer_is_incomplete(
    peer: HostilePeer,
) -> None:
    """Promise: an Anthropic call the SDK must stream (a large `max_tokens`) that is cut off
    mid-answer raises `IncompleteResponseError` too; the partial text is not returned."""
    peer.script(sse_events([_START, _BLOCK, _text("Hello"), _text(" wor")]))
    async with AnthropicChatModel(
        MODEL, base_url=peer.url, api_key="sk-hostile-test", max_tokens=64_000
    ) as model:
        with pytest.raises(IncompleteResponseError, match="incomplete") as caught:
            await model.call(PROMPT)
    _assert_names_the_server(caught.value)
    assert b'"stream":true' in peer.requests[0].replace(b" ", b"")


async def test_an_unreadable_error_event_is_a_server_error(peer: HostilePeer) -> None:
    """Promise: an Anthropic `error` event whose body does not decode (a 4,301-digit number)
    is a `ModelHTTPError` 500, transient, not an "HTTP 200" error."""
    event = b'{"type": "error", "error": {"type": "x", "code": ' + HUGE_INT + b"}}"
    peer.script(sse_events([("error", event)]))
    async with _model("anthropic", peer) as model:
        with pytest.raises(ModelHTTPError) as caught:
            await _stream(model)
    assert caught.value.status_code == 500
    assert caught.value.is_transient
