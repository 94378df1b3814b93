"""Fuzzed model bodies and streams (both adapters) and structured-output parsing.

hypothesis builds chat completions, messages and event streams near the real ones (a field
replaced by any JSON value, a number of thousands of digits, bytes that are not UTF-8, events
dropped or cut), and the bytes go through the real SDK and the real adapter: the adapter's model
is given an SDK client whose HTTP transport answers in-process (`httpx2.MockTransport`), so one
example costs a millisecond instead of a socket round trip. Promise: every example ends in a
well-typed `ChatResponse` (text a `str`, token counts whole numbers from 0) or in a
`jevrefine.exceptions` error; no other exception. Structured-output parsing of any text ends in
the value or in `StructuredOutputError`.

Short by default (CI: 100 examples per test); `JEVREFINE_FUZZ_EXAMPLES=5000` runs more, with
each test's time limit raised to match.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Callable
from typing import Any

import anyio
import httpx2
import pydantic
import pytest

pytest.importorskip("hypothesis", reason="the fuzz tests need hypothesis (a dev dependency)")

import anthropic
import openai
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from jevrefine.exceptions import JevrefineError, StructuredOutputError
from jevrefine.messages import ChatOptions, ChatResponse, Prompt, UserMessage
from jevrefine.models._reading import MAX_TOKEN_COUNT
from jevrefine.models.anthropic import AnthropicChatModel
from jevrefine.models.base import ChatModel
from jevrefine.models.openai import OpenAIChatModel
from jevrefine.structured import output_spec

EXAMPLES = int(os.environ.get("JEVREFINE_FUZZ_EXAMPLES", "100"))
FUZZ = settings(
    max_examples=EXAMPLES,
    deadline=None,
    derandomize=True,  # the same examples on every run: deterministic CI
    database=None,
    suppress_health_check=[HealthCheck.too_slow],
)
PROMPT = Prompt((UserMessage("hello"),), ChatOptions())
pytestmark = pytest.mark.timeout(max(120, EXAMPLES // 4))
"""A loaded machine runs a few examples a second at worst: the suite's 120 s, or more."""

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(10**30), max_value=10**30)
    | st.floats()
    | st.text(max_size=12),
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=8), children, max_size=3)
    ),
    max_leaves=12,
)
RAW_NUMBERS = [b"1" * 4301, b"-" + b"9" * 5000, b"1" + b"0" * 310 + b".5", b"1e999", b"NaN"]
"""Numbers no JSON encoder writes, put into the bytes by hand."""

OPENAI_OK: dict[str, Any] = {
    "id": "c",
    "object": "chat.completion",
    "created": 1,
    "model": "m",
    "choices": [
        {
            "index": 0,
            "message": {
                "role": "assistant",
                "content": "hi",
                "tool_calls": [
                    {"id": "t", "type": "function", "function": {"name": "f", "arguments": "{}"}}
                ],
            },
            "finish_reason": "stop",
            "logprobs": {"content": [{"token": "hi", "logprob": -0.1, "top_logprobs": []}]},
        }
    ],
    "usage": {"prompt_tokens": 3, "completion_tokens": 1},
}
ANTHROPIC_OK: dict[str, Any] = {
    "id": "msg",
    "type": "message",
    "role": "assistant",
    "model": "m",
    "content": [
        {"type": "text", "text": "hi"},
        {"type": "tool_use", "id": "t", "name": "f", "input": {"a": 1}},
    ],
    "stop_reason": "end_turn",
    "stop_sequence": None,
    "usage": {"input_tokens": 3, "output_tokens": 1, "cache_read_input_tokens": 0},
}


def _paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every path into `value` (keys and list indexes), the root excluded."""
    found: list[tuple[Any, ...]] = []
    items = value.items() if isinstance(value, dict) else enumerate(value)
    for key, child in items:
        found.append((*prefix, key))
        if isinstance(child, (dict, list)):
            found.extend(_paths(child, (*prefix, key)))
    return found


def _replace(document: Any, path: tuple[Any, ...], value: Any) -> Any:
    copy = json.loads(json.dumps(document))
    target = copy
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    return copy


_MARK = "\u2603number\u2603"


def _mutated(document: dict[str, Any]) -> st.SearchStrategy[bytes]:
    """`document` with one to three values replaced (by JSON values or raw huge numbers), as
    bytes, sometimes with one byte flipped."""
    paths = _paths(document)

    @st.composite
    def build(draw: Callable[..., Any]) -> bytes:
        result: Any = document
        for _ in range(draw(st.integers(1, 3))):
            path = draw(st.sampled_from(paths))
            try:
                replacement = draw(st.one_of(json_values, st.just(_MARK)))
                result = _replace(result, path, replacement)
            except (KeyError, IndexError, TypeError):
                continue  # an earlier replacement removed the path
        encoded = json.dumps(result).encode()
        marker = json.dumps(_MARK).encode()
        if marker in encoded:
            encoded = encoded.replace(marker, draw(st.sampled_from(RAW_NUMBERS)))
        if draw(st.booleans()) and encoded:
            at = draw(st.integers(0, len(encoded) - 1))
            encoded = encoded[:at] + bytes([draw(st.integers(0, 255))]) + encoded[at + 1 :]
        return encoded

    return build()


Handler = Callable[[httpx2.Request], httpx2.Response]


def _openai_model(handler: Handler) -> tuple[ChatModel, Any]:
    sdk = openai.AsyncOpenAI(
        api_key="sk-fuzz-0000000000",
        base_url="http://fuzz.invalid/v1",
        max_retries=0,
        http_client=httpx2.AsyncClient(transport=httpx2.MockTransport(handler)),
    )
    return OpenAIChatModel("m", client=sdk), sdk


def _anthropic_model(handler: Handler) -> tuple[ChatModel, Any]:
    sdk = anthropic.AsyncAnthropic(
        api_key="sk-fuzz-0000000000",
        base_url="http://fuzz.invalid",
        max_retries=0,
        http_client=httpx2.AsyncClient(transport=httpx2.MockTransport(handler)),
    )
    return AnthropicChatModel("m", client=sdk), sdk


def _answer(content: bytes, kind: str) -> Handler:
    headers = {"content-type": kind}
    return lambda request: httpx2.Response(200, content=content, headers=headers)


def _well_typed(response: ChatResponse) -> None:
    for generation in response.results:
        assert type(generation.text) is str
        for call in generation.output.tool_calls:
            assert isinstance(call.id, str)
            assert isinstance(call.name, str)
            assert isinstance(call.arguments, str)
    usage = response.metadata.usage
    for count in (usage.input_tokens, usage.output_tokens):
        assert type(count) is int
        assert 0 <= count <= 3 * MAX_TOKEN_COUNT
    for value in (response.metadata.id, response.metadata.model):
        assert value is None or type(value) is str
    assert all(type(reason) is str for reason in response.metadata.finish_reasons)


def _outcome(built: tuple[ChatModel, Any], *, stream: bool) -> None:
    model, sdk = built

    async def run() -> None:
        async with sdk, model:
            try:
                if stream:
                    async for chunk in model.stream(PROMPT):
                        _well_typed(chunk)
                else:
                    _well_typed(await model.call(PROMPT))
            except JevrefineError:
                pass  # a typed error is a right answer to a hostile body

    anyio.run(run)


@FUZZ
@given(_mutated(OPENAI_OK))
def test_openai_call_reads_any_body_or_raises_typed(content: bytes) -> None:
    """Promise: any near-valid chat completion reads well-typed, or is a typed error."""
    _outcome(_openai_model(_answer(content, "application/json")), stream=False)


@FUZZ
@given(_mutated(ANTHROPIC_OK))
def test_anthropic_call_reads_any_body_or_raises_typed(content: bytes) -> None:
    """Promise: any near-valid message reads well-typed, or is a typed error."""
    _outcome(_anthropic_model(_answer(content, "application/json")), stream=False)


OPENAI_CHUNKS: list[dict[str, Any]] = [
    {"id": "c", "model": "m", "choices": [{"index": 0, "delta": {"role": "assistant"}}]},
    {"id": "c", "model": "m", "choices": [{"index": 0, "delta": {"content": "Hel"}}]},
    {
        "id": "c",
        "model": "m",
        "choices": [
            {
                "index": 0,
                "delta": {
                    "tool_calls": [
                        {"index": 0, "id": "t", "function": {"name": "f", "arguments": "{}"}}
                    ]
                },
            }
        ],
    },
    {"id": "c", "model": "m", "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
    {"id": "c", "model": "m", "choices": [], "usage": {"prompt_tokens": 1, "completion_tokens": 2}},
]
ANTHROPIC_EVENTS: list[dict[str, Any]] = [
    {
        "type": "message_start",
        "message": {**ANTHROPIC_OK, "content": [], "stop_reason": None},
    },
    {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
    {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Hi"}},
    {
        "type": "content_block_start",
        "index": 1,
        "content_block": {"type": "tool_use", "id": "t", "name": "f", "input": {}},
    },
    {
        "type": "content_block_delta",
        "index": 1,
        "delta": {"type": "input_json_delta", "partial_json": '{"a": 1}'},
    },
    {
        "type": "message_delta",
        "delta": {"stop_reason": "end_turn", "stop_sequence": None},
        "usage": {"output_tokens": 2},
    },
    {"type": "message_stop"},
]


@st.composite
def _event_stream(draw: Callable[..., Any], events: list[dict[str, Any]], named: bool) -> bytes:
    """The events, each kept, dropped or mutated, as an SSE body (OpenAI's ends in [DONE])."""
    out: list[bytes] = []
    for event in events:
        action = draw(st.sampled_from(["keep", "keep", "mutate", "drop"]))
        if action == "drop":
            continue
        data = draw(_mutated(event)) if action == "mutate" else json.dumps(event).encode()
        name = f"event: {event['type']}\n".encode() if named else b""
        out.append(name + b"data: " + data + b"\n\n")
    if not named and draw(st.booleans()):
        out.append(b"data: [DONE]\n\n")
    body = b"".join(out)
    if draw(st.booleans()) and body:
        body = body[: draw(st.integers(0, len(body)))]  # cut off anywhere
    return body


@FUZZ
@given(_event_stream(OPENAI_CHUNKS, named=False))
def test_openai_stream_reads_any_events_or_raises_typed(content: bytes) -> None:
    """Promise: any near-valid event stream yields well-typed chunks, or a typed error."""
    _outcome(_openai_model(_answer(content, "text/event-stream")), stream=True)


@FUZZ
@given(_event_stream(ANTHROPIC_EVENTS, named=True))
def test_anthropic_stream_reads_any_events_or_raises_typed(content: bytes) -> None:
    """Promise: any near-valid event stream yields well-typed chunks, or a typed error."""
    _outcome(_anthropic_model(_answer(content, "text/event-stream")), stream=True)


class _Point(pydantic.BaseModel):
    x: int
    y: float
    label: str = ""


TARGETS = [_Point, list[int], dict[str, float], int, float, str, bool]


@st.composite
def _answers(draw: Callable[..., Any]) -> str:
    """A model's answer near JSON: values, the `{"result": ...}` wrapper, fences, prose, raw
    huge numbers."""
    value = draw(
        st.one_of(json_values, st.fixed_dictionaries({"x": json_values, "y": json_values}))
    )
    text = json.dumps(value)
    if draw(st.booleans()):
        text = json.dumps({"result": value})
    shape = draw(st.sampled_from(["plain", "fence", "prose", "number", "cut"]))
    if shape == "fence":
        text = f"```json\n{text}\n```"
    elif shape == "prose":
        text = f"Sure! {text} Hope that helps."
    elif shape == "number":
        text = '{"result": ' + draw(st.sampled_from(RAW_NUMBERS)).decode() + "}"
    elif shape == "cut":
        text = text[: draw(st.integers(0, len(text)))]
    return text


@FUZZ
@given(st.sampled_from(TARGETS), st.one_of(_answers(), st.text(max_size=60)))
def test_structured_output_parses_any_answer_or_raises_typed(target: Any, text: str) -> None:
    """Promise: reading an answer as a type gives the value or `StructuredOutputError`."""
    spec = output_spec(target)
    try:
        value = spec.parse(text, model_name="m")
    except StructuredOutputError as error:
        raw_text = error.raw_text
        assert raw_text == text
    else:
        if isinstance(value, float):
            assert math.isfinite(value)  # never infinity or NaN read from a number


@pytest.mark.parametrize("digits", [b"1" * 4301, b"1" + b"0" * 310 + b".0"])
@pytest.mark.parametrize("target", [int, float, _Point])
def test_structured_output_with_a_huge_number_is_typed(digits: bytes, target: Any) -> None:
    """Promise: a 4,301-digit integer or a 310-digit float in an answer is a
    `StructuredOutputError` naming the number, never a bare `ValueError` nor infinity."""
    text = '{"result": ' + digits.decode() + ', "x": ' + digits.decode() + ', "y": 1}'
    with pytest.raises(StructuredOutputError, match=r"4,300 digits|range of a float"):
        output_spec(target).parse(text)
