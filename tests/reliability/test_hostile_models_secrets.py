"""A server that echoes the configured API key back: in a header, in a 200 body, in an error.

The adapters never print their own key, but what a server sends is stored (the response id and
model become span attributes and metric dimensions, error bodies become exception text) and the
SDKs log some of it. Promise: the configured key is blanked out (`***`) of every server-provided
string where the response is read, before anything stores it: no exception text or traceback,
span attribute or event, metric attribute, log record (every logger at DEBUG, the OTel logs
too) or warning holds it. Checked with the real OpenTelemetry SDK's in-memory exporters.
"""

from __future__ import annotations

import json
import logging
import traceback
import warnings
from collections.abc import AsyncIterator, Iterator

import pytest
from _hostile_model_peer import Answer, HostilePeer, body, sse, sse_events

import jevrefine as jr
from jevrefine.models.anthropic import AnthropicChatModel
from jevrefine.models.base import ChatModel
from jevrefine.models.openai import OpenAIChatModel
from otel_support import Otel

KEY = "sk-echo-5f4e3d2c1b0a99887766554433221100"


def _echoing_headers() -> list[tuple[str, str]]:
    return [("x-request-id", f"req-{KEY}"), ("request-id", f"req-{KEY}")]


def _openai_answers() -> list[Answer]:
    completion = {
        "id": f"chatcmpl-{KEY}",
        "object": "chat.completion",
        "created": 1,
        "model": f"m-{KEY}",
        "system_fingerprint": KEY,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": f"the key is {KEY}"},
                "finish_reason": "stop",
            }
        ],
        "usage": {"prompt_tokens": 1, "completion_tokens": 1},
    }
    chunk = {
        "id": f"chatcmpl-{KEY}",
        "model": f"m-{KEY}",
        "choices": [{"index": 0, "delta": {"content": f"key {KEY}"}, "finish_reason": "stop"}],
    }
    return [
        body(completion, headers=_echoing_headers()),
        sse([json.dumps(chunk).encode(), b"[DONE]"], headers=_echoing_headers()),
        body({"error": {"message": f"bad key {KEY}"}}, status=401, headers=_echoing_headers()),
        body({"choices": [{"index": 0, "message": {"content": 5}}], "id": KEY}),
    ]


def _anthropic_answers() -> list[Answer]:
    message = {
        "id": f"msg-{KEY}",
        "type": "message",
        "role": "assistant",
        "model": f"m-{KEY}",
        "content": [{"type": "text", "text": f"the key is {KEY}"}],
        "stop_reason": "end_turn",
        "usage": {"input_tokens": 1, "output_tokens": 1},
    }
    start = {"type": "message_start", "message": {**message, "content": []}}
    delta = {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta"}}
    delta["delta"]["text"] = f"key {KEY}"  # type: ignore[index]
    stop = {"type": "message_delta", "delta": {"stop_reason": KEY}, "usage": {"output_tokens": 1}}
    return [
        body(message, headers=_echoing_headers()),
        sse_events(
            [
                ("message_start", start),
                ("content_block_delta", delta),
                ("message_delta", stop),
                ("message_stop", {"type": "message_stop"}),
            ]
        ),
        body({"error": {"type": "x", "message": f"bad key {KEY}"}}, status=401),
        body({**message, "content": [{"type": "text", "text": 5}]}),
    ]


@pytest.fixture
async def peer() -> AsyncIterator[HostilePeer]:
    async with HostilePeer() as server:
        yield server


def _model(kind: str, peer: HostilePeer) -> ChatModel:
    if kind == "openai":
        return OpenAIChatModel("m", base_url=peer.url + "/v1", api_key=KEY, max_retries=0)
    return AnthropicChatModel("m", base_url=peer.url, api_key=KEY, max_retries=0)


def _error_texts(error: BaseException) -> Iterator[str]:
    yield str(error)
    yield repr(error)
    yield "".join(traceback.format_exception(error))
    yield from (repr(value) for value in vars(error).values())


def _telemetry_texts(otel: Otel) -> Iterator[str]:
    for span in otel.spans():
        yield span.name
        yield repr(dict(span.attributes or {}))
        yield from (f"{e.name} {dict(e.attributes or {})}" for e in span.events)
        yield span.status.description or ""
    for metric in otel.metrics().values():
        for point in metric.data.data_points:
            yield repr(dict(point.attributes or {}))
    for record in otel.logs():
        yield repr(record.log_record.body)
        yield repr(dict(record.log_record.attributes or {}))


@pytest.mark.parametrize("kind", ["openai", "anthropic"])
async def test_an_echoed_key_is_blanked_out_everywhere(
    peer: HostilePeer, kind: str, caplog: pytest.LogCaptureFixture
) -> None:
    """Promise: an echoed key reaches no span, metric, log, warning or exception text."""
    caplog.set_level(logging.DEBUG)
    otel = Otel()
    peer.script(*(_openai_answers() if kind == "openai" else _anthropic_answers()))
    texts: list[str] = []
    with warnings.catch_warnings(record=True) as caught_warnings:
        warnings.simplefilter("always")
        async with _model(kind, peer) as model:
            client = jr.ChatClient(model, **otel.providers, capture_content=True)
            response = await client.prompt("hello").call()
            texts.append(repr(response.chat_response))
            assert "***" in (response.chat_response.metadata.id or "")
            streamed = [piece async for piece in client.prompt("hello").stream()]
            assert "".join(streamed) == "key ***"
            for _ in range(2):  # the error body, then an unreadable 200 that names its id
                with pytest.raises(jr.JevrefineError) as caught:
                    await client.prompt("hello").call()
                texts.extend(_error_texts(caught.value))
    texts.extend(record.getMessage() for record in caplog.records)
    texts.extend(str(warning.message) for warning in caught_warnings)
    texts.extend(_telemetry_texts(otel))
    assert any("***" in text for text in texts)
    leaks = [text[:300] for text in texts if KEY in text]
    assert not leaks, leaks


def test_a_short_placeholder_key_is_not_blanked_out() -> None:
    """The control: a key shorter than 8 characters (a local server's `"local"`) is not searched
    for, so ordinary words holding it are left alone."""
    from jevrefine.models._reading import Reader

    assert Reader("local").text("locally", "x") == "locally"
    assert Reader(KEY).text(f"a{KEY}b", "x") == "a***b"
    assert Reader(None).optional_text("", "x") is None


def test_the_log_filter_rewrites_only_records_holding_a_key() -> None:
    """The filter blanks a registered key out of the SDK loggers' records, leaves other records
    as they are, and never raises for a record whose arguments do not format."""
    from jevrefine.models._log_scrub import _FILTER, register_key, unregister_key

    def record(msg: str, *args: object) -> logging.LogRecord:
        return logging.LogRecord("openai._base_client", logging.DEBUG, __file__, 1, msg, args, None)

    register_key(KEY)
    try:
        echoed = record("request_id: %s", f"req-{KEY}")
        assert _FILTER.filter(echoed)
        assert echoed.getMessage() == "request_id: req-***"
        plain = record("request_id: %s", "req-1")
        assert _FILTER.filter(plain)
        assert plain.args == ("req-1",)
        assert _FILTER.filter(record("%d", "not a number"))
    finally:
        unregister_key(KEY)
    untouched = record("%s", KEY)
    assert _FILTER.filter(untouched)
    assert untouched.getMessage() == KEY  # once no adapter holds the key, it is not searched for
