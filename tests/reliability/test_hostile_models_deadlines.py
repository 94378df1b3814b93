"""A model call has a deadline as a whole, not per socket read: against a peer that drips bytes.

The SDKs apply `timeout=` to each read, and a peer that sends one byte every 0.5 s never lets a
read wait 3 s: before the adapters kept their own deadline, `OpenAIChatModel(timeout=3)` ran for
minutes against it. Promise: `call()` ends within `total_timeout` (by default what the per-read
`timeout` allows an honest server: one `timeout` per attempt, plus the backoff); a stream ends
when its first chunk is later than `total_timeout`, a gap between chunks is longer than `timeout`,
or the whole stream is longer than `stream_timeout`. Each raises `ModelTimeoutError` (transient)
naming the setting, and the connection is closed, not handed back to the pool.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from typing import Any

import anyio
import pytest
from _hostile_model_peer import Answer, HostilePeer, drip, raw

from jevrefine.exceptions import ModelHTTPError, ModelTimeoutError, UserError
from jevrefine.messages import ChatOptions, Prompt, UserMessage
from jevrefine.models.anthropic import AnthropicChatModel
from jevrefine.models.base import ChatModel
from jevrefine.models.openai import OpenAIChatModel
from support import pool_connections

PROMPT = Prompt((UserMessage("hello"),), ChatOptions())
SLACK = 1.5
"""Room above a deadline for a loaded 2-core machine (closing the connection included)."""
EVERY = 0.5
"""The peer's pace: one byte per half second, so no single read ever waits long."""
_RETRY_20 = ("retry-after", "20")

OPENAI_BODY = json.dumps(
    {
        "id": "c",
        "object": "chat.completion",
        "created": 1,
        "model": "m",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "hi"}}],
    }
).encode()
ANTHROPIC_BODY = json.dumps(
    {
        "id": "msg",
        "type": "message",
        "role": "assistant",
        "model": "m",
        "content": [{"type": "text", "text": "hi"}],
        "stop_reason": "end_turn",
        "usage": {"input_tokens": 1, "output_tokens": 1},
    }
).encode()


def _openai_chunk(text: str) -> bytes:
    chunk = {"id": "c", "model": "m", "choices": [{"index": 0, "delta": {"content": text}}]}
    return b"data: " + json.dumps(chunk).encode() + b"\n\n"


def _anthropic_opening() -> bytes:
    message = {
        "id": "msg",
        "type": "message",
        "role": "assistant",
        "model": "m",
        "content": [],
        "usage": {"input_tokens": 1, "output_tokens": 0},
    }
    start = {"type": "message_start", "message": message}
    return b"event: message_start\ndata: " + json.dumps(start).encode() + b"\n\n"


def _anthropic_text(text: str) -> bytes:
    delta = {
        "type": "content_block_delta",
        "index": 0,
        "delta": {"type": "text_delta", "text": text},
    }
    return b"event: content_block_delta\ndata: " + json.dumps(delta).encode() + b"\n\n"


def _model(kind: str, peer: HostilePeer, **limits: Any) -> ChatModel:
    if kind == "openai":
        return OpenAIChatModel("m", base_url=peer.url + "/v1", api_key="sk-deadline", **limits)
    return AnthropicChatModel("m", base_url=peer.url, api_key="sk-deadline", **limits)


@pytest.fixture
async def peer() -> AsyncIterator[HostilePeer]:
    async with HostilePeer() as server:
        yield server


async def _closed(peer: HostilePeer, model: ChatModel) -> None:
    """The connection the deadline cut is closed: by the client, and not kept in its pool."""
    with anyio.fail_after(5):
        while peer.open_connections:  # noqa: ASYNC110 - a counter the peer's handlers keep
            await asyncio.sleep(0.02)
    assert pool_connections(model) == (0, 0)


async def _timed_out(coroutine: Any) -> tuple[ModelTimeoutError, float]:
    started = time.perf_counter()
    with anyio.fail_after(30), pytest.raises(ModelTimeoutError) as caught:
        await coroutine
    return caught.value, time.perf_counter() - started


def _dripped_body(kind: str) -> Answer:
    return drip(OPENAI_BODY if kind == "openai" else ANTHROPIC_BODY, every=EVERY)


@pytest.mark.parametrize("kind", ["openai", "anthropic"])
async def test_a_dripped_body_ends_at_total_timeout(peer: HostilePeer, kind: str) -> None:
    """Promise: `call()` with `timeout=3` and `total_timeout=1` ends at 1 s, though no read
    ever waits 3 s (before: it ran for the whole dripped body, over a minute)."""
    peer.script(_dripped_body(kind))
    async with _model(kind, peer, timeout=3, total_timeout=1) as model:
        error, elapsed = await _timed_out(model.call(PROMPT))
        assert 1 <= elapsed < 1 + SLACK, elapsed
        assert "total_timeout=1 s" in str(error)
        assert "127.0.0.1" in str(error)
        assert error.is_transient
        await _closed(peer, model)
    assert len(peer.requests) == 1


@pytest.mark.parametrize("kind", ["openai", "anthropic"])
async def test_a_back_off_past_total_timeout_gives_the_real_error_at_once(
    peer: HostilePeer, kind: str
) -> None:
    """Promise: a server that answers 503 with `Retry-After: 20` gets no second request from a
    call with `total_timeout=5` (the retry would start past it): the wire's policy gives the
    server's own error at once, with its `retry_after`, instead of waiting out the budget."""
    overloaded = raw(b'{"error": {"message": "overloaded"}}', status=503, headers=[_RETRY_20])
    peer.script(overloaded)
    async with _model(kind, peer, timeout=3, total_timeout=5, max_retries=2) as model:
        started = anyio.current_time()
        with anyio.fail_after(10), pytest.raises(ModelHTTPError) as caught:
            await model.call(PROMPT)
        assert anyio.current_time() - started < 5, "waited out the budget for no retry"
    assert caught.value.status_code == 503
    assert caught.value.retry_after == 20.0
    assert len(peer.requests) == 1


@pytest.mark.parametrize("kind", ["openai", "anthropic"])
async def test_a_retry_inside_the_deadline_still_runs(peer: HostilePeer, kind: str) -> None:
    """Promise: the deadline cuts only what would pass it: a 503 with `Retry-After: 0.2` is
    retried within `total_timeout=5`, and the second answer is the call's."""
    ok = raw(OPENAI_BODY if kind == "openai" else ANTHROPIC_BODY)
    soon = raw(b"{}", status=503, headers=[("retry-after-ms", "200")])
    peer.script(soon, ok)
    async with _model(kind, peer, timeout=3, total_timeout=5, max_retries=2) as model:
        with anyio.fail_after(10):
            response = await model.call(PROMPT)
    assert response.text == "hi"
    assert len(peer.requests) == 2


@pytest.mark.parametrize("kind", ["openai", "anthropic"])
async def test_the_default_total_follows_the_per_read_timeout(peer: HostilePeer, kind: str) -> None:
    """Promise: with only `timeout=` given, the call is still bounded: one `timeout` per attempt
    plus 1 s (here `timeout=0.8`, no retries: 1.8 s), not minutes."""
    peer.script(_dripped_body(kind))
    async with _model(kind, peer, timeout=0.8, max_retries=0) as model:
        error, elapsed = await _timed_out(model.call(PROMPT))
        assert elapsed < 1.8 + SLACK, elapsed
        assert "total_timeout=1.8 s" in str(error)
        await _closed(peer, model)


@pytest.mark.parametrize("kind", ["openai", "anthropic"])
async def test_a_stream_without_a_first_chunk_ends_at_total_timeout(
    peer: HostilePeer, kind: str
) -> None:
    """Promise: a stream whose first event is dripped ends at `total_timeout`."""
    first = _openai_chunk("Hello") if kind == "openai" else _anthropic_opening()
    peer.script(drip(first, every=EVERY, event_stream=True))
    async with _model(kind, peer, timeout=3, total_timeout=1) as model:
        error, elapsed = await _timed_out(_drain(model))
        assert 1 <= elapsed < 1 + SLACK, elapsed
        assert "no first chunk within total_timeout=1 s" in str(error)
        await _closed(peer, model)


@pytest.mark.parametrize("kind", ["openai", "anthropic"])
async def test_a_stream_that_stalls_between_chunks_ends_at_timeout(
    peer: HostilePeer, kind: str
) -> None:
    """Promise: once a stream has begun, a gap longer than `timeout` between two chunks ends it
    (the text already delivered is not passed off as the answer)."""
    if kind == "openai":
        before, rest = _openai_chunk("Hello"), _openai_chunk(" world")
    else:
        before, rest = _anthropic_opening(), _anthropic_text(" world")
    peer.script(drip(rest, every=EVERY, event_stream=True, before=before))
    async with _model(kind, peer, timeout=1, total_timeout=20) as model:
        error, elapsed = await _timed_out(_drain(model))
        assert 1 <= elapsed < 1 + SLACK, elapsed
        assert "sent no chunk for timeout=1 s; the answer is incomplete" in str(error)
        await _closed(peer, model)


@pytest.mark.parametrize("kind", ["openai", "anthropic"])
async def test_a_stream_that_never_ends_stops_at_stream_timeout(
    peer: HostilePeer, kind: str
) -> None:
    """Promise: a stream that keeps sending chunks, each in time, still ends at
    `stream_timeout`."""
    pieces = [_openai_chunk(" more") if kind == "openai" else _anthropic_text(" more")]
    before = b"" if kind == "openai" else _anthropic_opening()
    peer.script(_endless(before, pieces[0], every=0.2))
    async with _model(kind, peer, timeout=1, stream_timeout=1.5) as model:
        error, elapsed = await _timed_out(_drain(model))
        assert 1.5 <= elapsed < 1.5 + SLACK, elapsed
        assert "stream_timeout=1.5 s" in str(error)
        await _closed(peer, model)


def _endless(before: bytes, chunk: bytes, *, every: float) -> Answer:
    async def answer(writer: asyncio.StreamWriter) -> None:
        head = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\n"
        writer.write(head + before)
        while True:
            writer.write(chunk)
            await writer.drain()
            await asyncio.sleep(every)

    return answer


async def _drain(model: ChatModel) -> None:
    async for _ in model.stream(PROMPT):
        pass


@pytest.mark.parametrize("kind", ["openai", "anthropic"])
@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("timeout", -5),
        ("timeout", float("nan")),
        ("timeout", "3"),
        ("total_timeout", 0),
        ("total_timeout", float("inf")),
        ("stream_timeout", "300"),
        ("max_retries", "2"),
        ("max_retries", -1),
        ("max_response_bytes", "x"),
        ("max_response_bytes", 0),
    ],
)
def test_bad_limits_are_user_errors_naming_the_parameter(
    kind: str, name: str, value: object
) -> None:
    """Promise: each limit is checked once, at construction, by the shared validators: the
    message names the parameter, the value and what to pass instead."""
    with pytest.raises(UserError) as caught:
        _model(kind, _NoPeer(), **{name: value})
    message = str(caught.value)
    assert message.startswith(f"{name}={value!r}"), message
    assert "pass " in message, message


@pytest.mark.parametrize(
    ("kwargs", "start"),
    [
        ({"max_tokens": "256"}, "max_tokens='256' is not a whole number"),
        ({"max_tokens": 0}, "max_tokens=0 is out of range"),
        ({"model": 5}, "model=5 is not a string"),
        ({"base_url": 8080}, "base_url=8080 is not a string"),
    ],
)
def test_anthropic_arguments_are_checked_by_the_shared_validators(
    kwargs: dict[str, Any], start: str
) -> None:
    """Promise: `AnthropicChatModel(max_tokens='256')` is a `UserError`, not a `TypeError`."""
    arguments: dict[str, Any] = {"model": "m", "base_url": "http://127.0.0.1:1", **kwargs}
    model = arguments.pop("model")
    with pytest.raises(UserError, match="^" + start.replace("(", r"\(")):
        AnthropicChatModel(model, api_key="sk-validate", **arguments)


def test_an_api_key_that_is_no_string_is_refused_without_showing_it() -> None:
    """Promise: `api_key=123` is a `UserError` that does not print the value (it may be a key)."""
    for build in (
        lambda: OpenAIChatModel("m", base_url="http://127.0.0.1:1/v1", api_key=12345678),  # type: ignore[arg-type]
        lambda: AnthropicChatModel("m", base_url="http://127.0.0.1:1", api_key=12345678),  # type: ignore[arg-type]
    ):
        with pytest.raises(UserError) as caught:
            build()
        assert "12345678" not in str(caught.value)
        assert "api_key" in str(caught.value)


class _NoPeer:
    url = "http://127.0.0.1:1"


@pytest.mark.parametrize("kind", ["openai", "anthropic"])
async def test_a_slow_consumer_is_not_a_stalled_server(peer: HostilePeer, kind: str) -> None:
    """Promise: the gap between chunks is the server's: a consumer that takes longer than
    `timeout` over each chunk does not make the stream time out."""
    if kind == "openai":
        events = [_openai_chunk("a"), _openai_chunk("b"), _openai_finish(), b"data: [DONE]\n\n"]
    else:
        events = [_anthropic_opening(), _anthropic_text("a"), _anthropic_text("b"), *_ANTHROPIC_END]
    peer.script(_at_once(events))
    pieces: list[str] = []
    async with _model(kind, peer, timeout=0.5) as model:
        async for chunk in model.stream(PROMPT):
            pieces.append(chunk.result.text)
            await anyio.sleep(0.8)
    assert "".join(pieces) == "ab"


def _openai_finish() -> bytes:
    chunk = {
        "id": "c",
        "model": "m",
        "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}],
    }
    return b"data: " + json.dumps(chunk).encode() + b"\n\n"


_ANTHROPIC_END = [
    b"event: message_delta\ndata: "
    + json.dumps(
        {
            "type": "message_delta",
            "delta": {"stop_reason": "end_turn"},
            "usage": {"output_tokens": 2},
        }
    ).encode()
    + b"\n\n",
    b'event: message_stop\ndata: {"type": "message_stop"}\n\n',
]


def _at_once(events: list[bytes]) -> Answer:
    async def answer(writer: asyncio.StreamWriter) -> None:
        head = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\n"
        writer.write(head + b"".join(events))
        writer.write_eof()

    return answer
