"""AnthropicChatModel against FakeAnthropicServer (real HTTP on loopback) and the local model."""

from __future__ import annotations

import email.utils
import importlib
import json
import sys
import time
from collections.abc import AsyncIterator
from typing import Any

import anthropic
import httpx2
import pytest

from jevrefine import ChatClient, tool
from jevrefine._http._headers import parse_retry_after as retry_after_seconds
from jevrefine.exceptions import (
    ModelConnectionError,
    ModelError,
    ModelHTTPError,
    ModelTimeoutError,
    UserError,
)
from jevrefine.messages import (
    AssistantMessage,
    ChatOptions,
    ChatResponse,
    Prompt,
    ResponseFormat,
    SystemMessage,
    ToolCall,
    ToolDefinition,
    ToolResponse,
    ToolResponseMessage,
    UserMessage,
    concat_chunks,
)
from jevrefine.models.anthropic import AnthropicChatModel
from jevrefine.structured import FORMAT_INSTRUCTIONS_MARKER
from jevrefine.testing import FakeAnthropicServer, HTTPRequest, StreamingHTTPResponse
from support import City, closed_port

SECRET = "sk-ant-test-0123456789-very-secret"
WEATHER = ToolDefinition(
    "weather",
    "Get the current weather for a city.",
    {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
)


def sent_key(request: Any) -> str | None:
    """The API key a request carried (the SDK sends it as `x-api-key` or as a bearer token)."""
    headers = request.headers
    if "x-api-key" in headers:
        return str(headers["x-api-key"])
    auth = headers.get("authorization", "")
    return auth.removeprefix("Bearer ") if auth else None


def ask(*messages: Any, **options: Any) -> Prompt:
    built = tuple(UserMessage(m) if isinstance(m, str) else m for m in messages)
    return Prompt(built, ChatOptions(**options))


@pytest.fixture
async def fake() -> AsyncIterator[FakeAnthropicServer]:
    async with FakeAnthropicServer() as server:
        yield server


@pytest.fixture
async def model(fake: FakeAnthropicServer) -> AsyncIterator[AnthropicChatModel]:
    async with AnthropicChatModel(
        "claude-test", base_url=fake.base_url, api_key=SECRET, max_retries=0
    ) as m:
        yield m


# -- call ------------------------------------------------------------------------------------


async def test_call_returns_text_id_model_usage(
    fake: FakeAnthropicServer, model: AnthropicChatModel
) -> None:
    fake.script(
        {
            "text": "Paris is sunny.",
            "id": "msg_123",
            "model": "claude-test-20261101",
            "usage": {
                "input_tokens": 11,
                "output_tokens": 4,
                "cache_read_input_tokens": 5,
                "cache_creation_input_tokens": 3,
            },
        }
    )
    response = await model.call(ask("What is the weather in Paris?"))

    assert response.text == "Paris is sunny."
    assert response.result.finish_reason == "stop"
    meta = response.metadata
    assert (meta.id, meta.model) == ("msg_123", "claude-test-20261101")
    # Input tokens include the cache reads and writes (OpenTelemetry's meaning of input).
    assert (meta.usage.input_tokens, meta.usage.output_tokens) == (19, 4)
    assert meta.extra["cache_read_input_tokens"] == 5
    assert meta.extra["cache_creation_input_tokens"] == 3
    assert meta.extra["stop_reason"] == "end_turn"
    assert meta.finish_reasons == ("stop",)

    (sent,) = fake.requests
    assert (sent.method, sent.path) == ("POST", "/v1/messages")
    assert sent_key(sent) == SECRET
    assert sent.json == {
        "model": "claude-test",
        "max_tokens": 1024,
        "messages": [{"role": "user", "content": "What is the weather in Paris?"}],
    }


async def test_system_messages_become_the_system_parameter(
    fake: FakeAnthropicServer, model: AnthropicChatModel
) -> None:
    await model.call(
        ask(SystemMessage("Be brief."), SystemMessage("Answer in French."), "Hello", "Again")
    )
    body = fake.requests[0].json
    assert body["system"] == "Be brief.\n\nAnswer in French."
    # No system role among the messages, and the two user turns merged into one.
    assert body["messages"] == [
        {
            "role": "user",
            "content": [{"type": "text", "text": "Hello"}, {"type": "text", "text": "Again"}],
        }
    ]


async def test_options_are_mapped(fake: FakeAnthropicServer) -> None:
    defaults = ChatOptions(temperature=0.2, max_tokens=50, extra_body={"top_k": 5})
    async with AnthropicChatModel(
        "claude-test", base_url=fake.base_url, api_key=SECRET, options=defaults, max_tokens=77
    ) as m:
        await m.call(ask("hi", top_p=0.9, stop=("END", "STOP"), model="claude-other"))
        await m.call(ask("hi", max_tokens=9, temperature=1.0))
    first, second = (r.json for r in fake.requests)
    assert first["model"] == "claude-other"
    assert first["temperature"] == 0.2
    assert first["top_p"] == 0.9
    assert first["max_tokens"] == 50  # the model's default options win over its max_tokens
    assert first["stop_sequences"] == ["END", "STOP"]
    assert first["top_k"] == 5  # extra_body is sent as it is
    assert "tools" not in first
    assert "tool_choice" not in first
    assert (second["model"], second["max_tokens"], second["temperature"]) == ("claude-test", 9, 1.0)


async def test_max_tokens_default_comes_from_the_constructor(fake: FakeAnthropicServer) -> None:
    async with AnthropicChatModel(
        "claude-test", base_url=fake.base_url, api_key=SECRET, max_tokens=33
    ) as m:
        await m.call(ask("hi"))
    assert fake.requests[0].json["max_tokens"] == 33


async def test_temperature_above_one_is_rejected_before_sending(
    fake: FakeAnthropicServer, model: AnthropicChatModel
) -> None:
    with pytest.raises(UserError, match="between 0 and 1"):
        await model.call(ask("hi", temperature=1.5))
    assert fake.requests == []


# -- tools -----------------------------------------------------------------------------------


async def test_tool_definitions_are_sent_and_tool_use_is_parsed(
    fake: FakeAnthropicServer, model: AnthropicChatModel
) -> None:
    fake.script(
        {
            "text": "Let me look.",
            "tool_use": [
                {"id": "toolu_1", "name": "weather", "input": {"city": "Paris"}},
                {"id": "toolu_2", "name": "weather", "input": {"city": "Rome"}},
            ],
        }
    )
    response = await model.call(ask("Weather in Paris and Rome?", tools=(WEATHER,)))

    body = fake.requests[0].json
    assert body["tools"] == [
        {
            "name": "weather",
            "description": "Get the current weather for a city.",
            "input_schema": {
                "type": "object",
                "properties": {"city": {"type": "string"}},
                "required": ["city"],
            },
        }
    ]
    assert "tool_choice" not in body
    output = response.result.output
    assert output.text == "Let me look."
    assert [(c.id, c.name, json.loads(c.arguments)) for c in output.tool_calls] == [
        ("toolu_1", "weather", {"city": "Paris"}),
        ("toolu_2", "weather", {"city": "Rome"}),
    ]
    assert response.result.finish_reason == "tool_calls"


@pytest.mark.parametrize(
    ("choice", "wire"),
    [("auto", {"type": "auto"}), ("required", {"type": "any"}), ("none", {"type": "none"})],
)
async def test_tool_choice_is_mapped(
    fake: FakeAnthropicServer, model: AnthropicChatModel, choice: str, wire: dict[str, str]
) -> None:
    await model.call(ask("hi", tools=(WEATHER,), tool_choice=choice))
    await model.call(ask("hi", tool_choice=choice))  # without tools: no tool_choice either
    with_tools, without = (r.json for r in fake.requests)
    assert with_tools["tool_choice"] == wire
    assert "tool_choice" not in without


async def test_tool_history_maps_to_tool_use_and_tool_result_blocks(
    fake: FakeAnthropicServer, model: AnthropicChatModel
) -> None:
    calls = (ToolCall("toolu_1", "weather", '{"city": "Paris"}'), ToolCall("toolu_2", "clock", ""))
    await model.call(
        ask(
            SystemMessage("Use tools."),
            "Weather and time in Paris?",
            AssistantMessage("Checking.", calls),
            ToolResponseMessage((ToolResponse("toolu_1", "weather", "sunny"),)),
            ToolResponseMessage((ToolResponse("toolu_2", "clock", "12:00"),)),
            UserMessage("Thanks."),
        )
    )
    assert fake.requests[0].json["messages"] == [
        {"role": "user", "content": "Weather and time in Paris?"},
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "Checking."},
                {
                    "type": "tool_use",
                    "id": "toolu_1",
                    "name": "weather",
                    "input": {"city": "Paris"},
                },
                {"type": "tool_use", "id": "toolu_2", "name": "clock", "input": {}},
            ],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "toolu_1", "content": "sunny"},
                {"type": "tool_result", "tool_use_id": "toolu_2", "content": "12:00"},
                {"type": "text", "text": "Thanks."},
            ],
        },
    ]


async def test_tool_results_go_before_text_in_a_merged_user_turn(
    fake: FakeAnthropicServer, model: AnthropicChatModel
) -> None:
    await model.call(
        ask(
            "Weather?",
            AssistantMessage("", (ToolCall("t1", "weather", "{}"),)),
            UserMessage("Also, hurry."),
            ToolResponseMessage((ToolResponse("t1", "weather", "rain"),)),
        )
    )
    assistant, user = fake.requests[0].json["messages"][1:]
    assert assistant["content"] == [
        {"type": "tool_use", "id": "t1", "name": "weather", "input": {}}
    ]
    assert [b["type"] for b in user["content"]] == ["tool_result", "text"]


async def test_tool_call_arguments_that_are_not_an_object_are_rejected(
    fake: FakeAnthropicServer, model: AnthropicChatModel
) -> None:
    bad = AssistantMessage("", (ToolCall("t1", "weather", "[1, 2]"),))
    with pytest.raises(UserError, match="not a JSON object"):
        await model.call(ask("hi", bad))
    assert fake.requests == []


# -- stop reasons ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("stop_reason", "finish"),
    [
        ("end_turn", "stop"),
        ("stop_sequence", "stop"),
        ("max_tokens", "length"),
        ("tool_use", "tool_calls"),
        ("refusal", "content_filter"),
        ("model_context_window_exceeded", "length"),
        ("Something_New", "something_new"),
    ],
)
async def test_stop_reasons_are_mapped(
    fake: FakeAnthropicServer, model: AnthropicChatModel, stop_reason: str, finish: str
) -> None:
    fake.script({"text": "x", "stop_reason": stop_reason})
    response = await model.call(ask("hi"))
    assert response.result.finish_reason == finish
    assert response.metadata.finish_reasons == (finish,)
    assert response.metadata.extra["stop_reason"] == stop_reason


async def test_stop_sequence_and_max_tokens_end_the_answer(
    fake: FakeAnthropicServer, model: AnthropicChatModel
) -> None:
    fake.script("One two. Three four five six.", "One two three four five six.")
    cut = await model.call(ask("count", stop=(".",)))
    assert cut.text == "One two"
    assert cut.result.finish_reason == "stop"
    assert cut.metadata.extra["stop_sequence"] == "."

    short = await model.call(ask("count", max_tokens=3))
    assert short.text == "One two three "
    assert short.result.finish_reason == "length"


# -- stream ----------------------------------------------------------------------------------


async def test_stream_yields_text_deltas_then_a_final_chunk(
    fake: FakeAnthropicServer, model: AnthropicChatModel
) -> None:
    fake.script(
        {
            "text": "It is sunny in Paris today.",
            "id": "msg_s1",
            "usage": {"input_tokens": 12, "output_tokens": 6, "cache_read_input_tokens": 2},
        }
    )
    chunks = [c async for c in model.stream(ask(SystemMessage("Be brief."), "Weather?"))]

    texts = [c.text for c in chunks[:-1]]
    assert len(texts) >= 3
    assert "".join(texts) == "It is sunny in Paris today."
    for chunk in chunks[:-1]:
        assert chunk.metadata.usage.total_tokens == 0  # usage only on the last chunk
        assert chunk.result.finish_reason is None
        assert chunk.metadata.id == "msg_s1"
    last = chunks[-1]
    assert last.text == ""
    assert last.result.finish_reason == "stop"
    assert (last.metadata.id, last.metadata.model) == ("msg_s1", "claude-test")
    assert (last.metadata.usage.input_tokens, last.metadata.usage.output_tokens) == (14, 6)
    body = fake.requests[0].json
    assert body["stream"] is True
    assert body["system"] == "Be brief."


async def test_stream_assembles_tool_use_input_in_the_final_chunk(
    fake: FakeAnthropicServer, model: AnthropicChatModel
) -> None:
    arguments = {"city": "Paris", "units": "metric", "days": [1, 2, 3]}
    fake.script(
        {
            "text": "Checking.",
            "tool_use": [{"id": "toolu_9", "name": "weather", "input": arguments}],
        }
    )
    chunks = [c async for c in model.stream(ask("Weather?", tools=(WEATHER,)))]

    assert all(not c.result.output.tool_calls for c in chunks[:-1])
    (call,) = chunks[-1].result.output.tool_calls
    assert (call.id, call.name, json.loads(call.arguments)) == ("toolu_9", "weather", arguments)
    assert chunks[-1].result.finish_reason == "tool_calls"
    joined = concat_chunks(chunks)
    assert joined.text == "Checking."
    assert joined.result.output.tool_calls == (call,)


async def test_stream_that_ends_early_is_an_error() -> None:
    class Truncating(FakeAnthropicServer):
        async def handle(self, request: HTTPRequest) -> Any:
            async def events() -> AsyncIterator[bytes]:
                start = {
                    "type": "message_start",
                    "message": {
                        "id": "m",
                        "type": "message",
                        "role": "assistant",
                        "content": [],
                        "model": "c",
                        "stop_reason": None,
                        "stop_sequence": None,
                        "usage": {"input_tokens": 1, "output_tokens": 0},
                    },
                }
                yield f"event: message_start\ndata: {json.dumps(start)}\n\n".encode()

            return StreamingHTTPResponse(events())

    async with (
        Truncating() as server,
        AnthropicChatModel("c", base_url=server.base_url, max_retries=0) as m,
    ):
        with pytest.raises(ModelConnectionError, match="ended before message_stop"):
            [c async for c in m.stream(ask("hi"))]


async def test_error_event_inside_a_stream_maps_to_its_status() -> None:
    class Overloaded(FakeAnthropicServer):
        async def handle(self, request: HTTPRequest) -> Any:
            async def events() -> AsyncIterator[bytes]:
                error = self.error_body(529, None)
                yield f"event: error\ndata: {json.dumps(error)}\n\n".encode()

            return StreamingHTTPResponse(events())

    async with (
        Overloaded() as server,
        AnthropicChatModel("c", base_url=server.base_url, max_retries=0) as m,
    ):
        with pytest.raises(ModelHTTPError) as info:
            [c async for c in m.stream(ask("hi"))]
    assert info.value.status_code == 529
    assert info.value.is_transient
    assert "overloaded_error" in str(info.value)


async def test_stream_error_status_is_mapped(
    fake: FakeAnthropicServer, model: AnthropicChatModel
) -> None:
    fake.fail(429, headers={"retry-after": "3"})
    with pytest.raises(ModelHTTPError) as info:
        [c async for c in model.stream(ask("hi"))]
    assert (info.value.status_code, info.value.retry_after) == (429, 3.0)


async def test_stream_stopped_early_leaves_the_model_usable(
    fake: FakeAnthropicServer, model: AnthropicChatModel
) -> None:
    fake.script("one two three four five six seven", "after")
    stream = model.stream(ask("hi"))
    first = await anext(aiter(stream))
    await stream.aclose()  # type: ignore[attr-defined]
    assert first.text == "one "
    assert (await model.call(ask("again"))).text == "after"


# -- errors ----------------------------------------------------------------------------------


async def test_401_maps_to_http_error_without_the_key(fake: FakeAnthropicServer) -> None:
    fake.fail(401)
    async with AnthropicChatModel(
        "claude-test", base_url=fake.base_url, api_key=SECRET, max_retries=2
    ) as m:
        with pytest.raises(ModelHTTPError) as info:
            await m.call(ask("hi"))
        assert SECRET not in repr(m)
    error = info.value
    assert error.status_code == 401
    assert not error.is_transient
    assert len(fake.requests) == 1  # 401 is not retried
    assert error.body["error"]["type"] == "authentication_error"
    assert "authentication_error" in str(error)
    assert "API key" in str(error)
    # The wire reads the status itself: no SDK exception (holding the request) is chained.
    assert error.__cause__ is None
    for text in (str(error), repr(error), repr(error.headers), repr(error.body)):
        assert SECRET not in text


@pytest.mark.parametrize(
    ("headers", "expected"),
    [({"retry-after": "7"}, 7.0), ({"retry-after-ms": "1500", "retry-after": "2"}, 1.5)],
)
async def test_429_carries_retry_after(
    fake: FakeAnthropicServer,
    model: AnthropicChatModel,
    headers: dict[str, str],
    expected: float,
) -> None:
    fake.fail(429, headers=headers)
    with pytest.raises(ModelHTTPError) as info:
        await model.call(ask("hi"))
    assert info.value.status_code == 429
    assert info.value.retry_after == expected
    assert info.value.is_transient
    assert len(fake.requests) == 1


async def test_429_retry_after_as_an_http_date(
    fake: FakeAnthropicServer, model: AnthropicChatModel
) -> None:
    fake.fail(429, headers={"retry-after": email.utils.formatdate(time.time() + 30, usegmt=True)})
    with pytest.raises(ModelHTTPError) as info:
        await model.call(ask("hi"))
    assert info.value.retry_after is not None
    assert 25 <= info.value.retry_after <= 31


def test_retry_after_parsing() -> None:
    now = 1_800_000_000.0
    date = email.utils.formatdate(now + 12, usegmt=True)
    assert retry_after_seconds({"Retry-After": date}, now=now) == pytest.approx(12, abs=1)
    assert retry_after_seconds({"retry-after": email.utils.formatdate(now - 60)}, now=now) == 0.0
    assert retry_after_seconds({"retry-after": "soon"}) is None
    assert retry_after_seconds({"retry-after-ms": "x", "retry-after": "4"}) == 4.0
    assert retry_after_seconds({}) is None


async def test_529_overloaded_is_transient_and_retried_by_the_sdk(
    fake: FakeAnthropicServer,
) -> None:
    fake.fail(529, headers={"retry-after-ms": "10"}, times=2)
    async with AnthropicChatModel(
        "claude-test", base_url=fake.base_url, api_key=SECRET, max_retries=1
    ) as m:
        with pytest.raises(ModelHTTPError) as info:
            await m.call(ask("hi"))
    assert len(fake.requests) == 2  # the first try and one retry
    assert info.value.status_code == 529
    assert info.value.is_transient
    assert info.value.body["error"]["type"] == "overloaded_error"
    assert info.value.retry_after == 0.01


async def test_500_then_success_within_the_retries(fake: FakeAnthropicServer) -> None:
    fake.fail(500, headers={"retry-after-ms": "10"})
    fake.script("recovered")
    async with AnthropicChatModel(
        "claude-test", base_url=fake.base_url, api_key=SECRET, max_retries=1
    ) as m:
        assert (await m.call(ask("hi"))).text == "recovered"
    assert len(fake.requests) == 2


async def test_500_without_retries(fake: FakeAnthropicServer, model: AnthropicChatModel) -> None:
    fake.fail(500)
    with pytest.raises(ModelHTTPError) as info:
        await model.call(ask("hi"))
    assert (info.value.status_code, info.value.is_transient) == (500, True)
    assert info.value.body["error"]["type"] == "api_error"
    assert len(fake.requests) == 1


async def test_connection_refused_maps_to_connection_error() -> None:
    port = closed_port()
    async with AnthropicChatModel(
        "claude-test", base_url=f"http://127.0.0.1:{port}", api_key=SECRET, max_retries=0
    ) as m:
        with pytest.raises(ModelConnectionError) as info:
            await m.call(ask("hi"))
    assert type(info.value) is ModelConnectionError
    assert info.value.is_transient
    assert "127.0.0.1" in str(info.value)
    assert SECRET not in str(info.value)
    assert isinstance(info.value.__cause__, httpx2.ConnectError)  # the transport's own error


async def test_dropped_connection_maps_to_connection_error(
    fake: FakeAnthropicServer, model: AnthropicChatModel
) -> None:
    fake.drop_connections()
    with pytest.raises(ModelConnectionError):
        await model.call(ask("hi"))


async def test_timeout_maps_to_timeout_error(fake: FakeAnthropicServer) -> None:
    fake.delay(2.0)
    async with AnthropicChatModel(
        "claude-test", base_url=fake.base_url, api_key=SECRET, max_retries=0, timeout=0.3
    ) as m:
        started = time.perf_counter()
        with pytest.raises(ModelTimeoutError) as info:
            await m.call(ask("hi"))
    assert time.perf_counter() - started < 1.5
    assert info.value.is_transient
    assert isinstance(info.value.__cause__, httpx2.TimeoutException)


async def test_malformed_body_maps_to_model_error(
    fake: FakeAnthropicServer, model: AnthropicChatModel
) -> None:
    fake.malformed()
    with pytest.raises(ModelError, match="could not be read: JSONDecodeError"):
        await model.call(ask("hi"))


# -- construction ----------------------------------------------------------------------------


async def test_api_key_from_the_environment(
    fake: FakeAnthropicServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-from-env")
    async with AnthropicChatModel("claude-test", base_url=fake.base_url) as m:
        await m.call(ask("hi"))
    async with AnthropicChatModel("claude-test", base_url=fake.base_url, api_key="explicit") as m:
        await m.call(ask("hi"))
    assert [sent_key(r) for r in fake.requests] == ["sk-ant-from-env", "explicit"]


async def test_base_url_without_any_key_sends_a_placeholder(
    fake: FakeAnthropicServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    async with AnthropicChatModel("claude-test", base_url=fake.base_url) as m:
        assert (await m.call(ask("hi"))).text
    assert sent_key(fake.requests[0])


def test_no_key_and_no_base_url_is_a_user_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    with pytest.raises(UserError, match="ANTHROPIC_API_KEY"):
        AnthropicChatModel("claude-test")


async def test_default_server_is_anthropics(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ANTHROPIC_BASE_URL", raising=False)
    async with AnthropicChatModel("claude-test", api_key=SECRET) as m:
        assert (m.server_address, m.server_port) == ("api.anthropic.com", 443)
        assert m.provider == "anthropic"
        assert m.supports_tools
        assert not m.supports_native_structured_output
        assert SECRET not in repr(m)
        assert "claude-test" in repr(m)


def test_missing_sdk_gives_the_install_command(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "anthropic", None)  # makes `import anthropic` fail
    monkeypatch.delitem(sys.modules, "jevrefine.models.anthropic")
    with pytest.raises(ImportError, match=r'pip install "jevrefine\[anthropic\]"'):
        importlib.import_module("jevrefine.models.anthropic")


@pytest.mark.parametrize("kwargs", [{"max_tokens": 0}, {"max_retries": -1}, {"options": {}}])
def test_invalid_arguments(kwargs: dict[str, Any]) -> None:
    with pytest.raises(UserError):
        AnthropicChatModel("claude-test", api_key=SECRET, **kwargs)


async def test_given_client_is_used_and_not_closed(fake: FakeAnthropicServer) -> None:
    client = anthropic.AsyncAnthropic(api_key=SECRET, base_url=fake.base_url, max_retries=0)
    try:
        with pytest.raises(UserError, match="not both"):
            AnthropicChatModel("claude-test", client=client, base_url=fake.base_url)
        m = AnthropicChatModel("claude-test", client=client)
        assert (m.server_address, m.server_port) == ("127.0.0.1", fake.port)
        assert (await m.call(ask("hi"))).text
        await m.aclose()
        assert not client.is_closed()
        assert (await m.call(ask("still open"))).text
    finally:
        await client.close()
    assert len(fake.requests) == 2


async def test_aclose_closes_the_client_it_created(fake: FakeAnthropicServer) -> None:
    m = AnthropicChatModel("claude-test", base_url=fake.base_url, api_key=SECRET)
    await m.call(ask("hi"))
    await m.aclose()
    assert m.client.is_closed()


# -- through ChatClient ----------------------------------------------------------------------


async def test_entity_uses_prompt_based_structured_output(
    fake: FakeAnthropicServer, model: AnthropicChatModel
) -> None:
    fake.script('Here you go:\n```json\n{"name": "Paris", "population": 2100000}\n```')
    city = await ChatClient(model).prompt("Biggest city of France?").entity(City)

    assert city == City(name="Paris", population=2100000)
    body = fake.requests[0].json
    assert "output_config" not in body
    text = body["messages"][-1]["content"]
    assert text.startswith("Biggest city of France?" + FORMAT_INSTRUCTIONS_MARKER)
    assert '"population"' in text


async def test_native_structured_output_goes_to_output_config(
    fake: FakeAnthropicServer, model: AnthropicChatModel
) -> None:
    fake.script('{"name": "Rome", "population": 2800000}')
    city = await ChatClient(model).prompt("Biggest city of Italy?").entity(City, native=True)
    assert city.name == "Rome"
    body = fake.requests[0].json
    assert body["output_config"]["format"]["type"] == "json_schema"
    assert body["output_config"]["format"]["schema"]["required"] == ["name", "population"]
    # A json_object format has no Anthropic equivalent and is not sent.
    await model.call(ask("hi", response_format=ResponseFormat(type="json_object")))
    assert "output_config" not in fake.requests[1].json


async def test_chat_span_of_an_anthropic_call(
    fake: FakeAnthropicServer, model: AnthropicChatModel, otel: Any
) -> None:
    fake.script(
        {"text": "Hi!", "id": "msg_span", "model": "claude-test-x", "usage": {"input_tokens": 9}}
    )
    client = ChatClient(model, tracer_provider=otel.tracer_provider)
    assert await client.prompt("hello").options(max_tokens=20).content() == "Hi!"

    (span,) = [s for s in otel.spans() if s.name == "chat claude-test"]
    attributes = dict(span.attributes)
    assert attributes["gen_ai.provider.name"] == "anthropic"
    assert attributes["gen_ai.operation.name"] == "chat"
    assert attributes["server.address"] == "127.0.0.1"
    assert attributes["server.port"] == fake.port
    assert attributes["gen_ai.request.max_tokens"] == 20
    assert attributes["gen_ai.response.id"] == "msg_span"
    assert attributes["gen_ai.response.model"] == "claude-test-x"
    assert attributes["gen_ai.usage.input_tokens"] == 9
    assert attributes["gen_ai.usage.output_tokens"] == 1
    assert tuple(attributes["gen_ai.response.finish_reasons"]) == ("stop",)
    assert all(s.instrumentation_scope.name == "jevrefine" for s in otel.spans())
    assert model.client.open_telemetry["traces"]["enabled"] is False


async def test_the_sdks_own_spans_are_turned_off(fake: FakeAnthropicServer, otel: Any) -> None:
    client = anthropic.AsyncAnthropic(
        api_key=SECRET,
        base_url=fake.base_url,
        open_telemetry={"tracer_provider": otel.tracer_provider},
    )
    async with client:
        # The control: this client, called directly, records a span of its own.
        await client.messages.create(
            model="m", max_tokens=5, messages=[{"role": "user", "content": "x"}]
        )
        assert [s.name for s in otel.spans()] == ["anthropic.messages.create"]
        otel.exporter.clear()
        model = AnthropicChatModel("claude-test", client=client)
        await ChatClient(model, tracer_provider=otel.tracer_provider).prompt("hi").content()
    # Through the adapter, the chain's `chat` span is the one span of the model call.
    assert sorted(s.name for s in otel.spans()) == [
        "chat claude-test",
        "invoke_workflow jevrefine.chat_client",
    ]


async def test_chat_span_of_a_failed_call(
    fake: FakeAnthropicServer, model: AnthropicChatModel, otel: Any
) -> None:
    fake.fail(529)
    client = ChatClient(model, tracer_provider=otel.tracer_provider)
    with pytest.raises(ModelHTTPError):
        await client.prompt("hello").content()
    (span,) = [s for s in otel.spans() if s.name == "chat claude-test"]
    assert span.attributes["error.type"] == "529"  # the status tells an overload apart
    assert span.attributes["http.response.status_code"] == 529
    assert not span.status.is_ok
    assert SECRET not in (span.status.description or "")


async def test_chat_client_stream(
    fake: FakeAnthropicServer, model: AnthropicChatModel, otel: Any
) -> None:
    fake.script({"text": "Once upon a time.", "usage": {"input_tokens": 4, "output_tokens": 5}})
    client = ChatClient(model, tracer_provider=otel.tracer_provider)
    pieces = [p async for p in client.prompt("Tell a story").stream()]
    assert len(pieces) > 1
    assert "".join(pieces) == "Once upon a time."
    (span,) = [s for s in otel.spans() if s.name == "chat claude-test"]
    assert span.attributes["gen_ai.usage.output_tokens"] == 5
    assert span.attributes["gen_ai.request.stream"] is True


# -- the real local model --------------------------------------------------------------------


@pytest.mark.local_model
async def test_local_model_message(local_server: Any) -> None:
    async with local_server.anthropic_model(max_tokens=16) as m:
        response = await m.call(
            ask(SystemMessage("Answer in one sentence."), "Say hello.", temperature=0.0)
        )
    assert isinstance(response, ChatResponse)
    assert response.text.strip()
    usage = response.metadata.usage
    assert usage.input_tokens > 0
    assert 0 < usage.output_tokens <= 16
    assert response.result.finish_reason in ("stop", "length")
    assert response.metadata.id
    assert response.metadata.model


@pytest.mark.local_model
async def test_local_model_stream(local_server: Any) -> None:
    async with local_server.anthropic_model(max_tokens=16) as m:
        chunks = [c async for c in m.stream(ask("Count from one to ten.", temperature=0.0))]
    texts = [c.text for c in chunks[:-1]]
    assert len(texts) >= 3
    assert "".join(texts).strip()
    last = chunks[-1]
    assert last.metadata.usage.input_tokens > 0
    assert 0 < last.metadata.usage.output_tokens <= 16
    assert last.result.finish_reason in ("stop", "length")
    assert all(c.metadata.usage.total_tokens == 0 for c in chunks[:-1])


async def test_tool_loop_through_chat_client(
    fake: FakeAnthropicServer, model: AnthropicChatModel
) -> None:
    @tool
    async def weather(city: str) -> str:
        """Get the current weather for a city."""
        return f"sunny in {city}"

    fake.script(
        {"tool_use": [{"id": "toolu_w", "name": "weather", "input": {"city": "Paris"}}]},
        "It is sunny in Paris.",
    )
    answer = await ChatClient(model, tools=[weather]).prompt("Weather in Paris?").content()

    assert answer == "It is sunny in Paris."
    first, second = (r.json for r in fake.requests)
    assert [t["name"] for t in first["tools"]] == ["weather"]
    assert first["tools"][0]["input_schema"]["properties"]["city"]["type"] == "string"
    assert second["messages"][1] == {
        "role": "assistant",
        "content": [
            {"type": "tool_use", "id": "toolu_w", "name": "weather", "input": {"city": "Paris"}}
        ],
    }
    assert second["messages"][2] == {
        "role": "user",
        "content": [{"type": "tool_result", "tool_use_id": "toolu_w", "content": "sunny in Paris"}],
    }


async def test_call_with_a_large_max_tokens_streams_under_the_hood(
    fake: FakeAnthropicServer, model: AnthropicChatModel
) -> None:
    # The SDK refuses non-streaming calls it expects to run past 10 minutes.
    fake.script({"text": "A long answer.", "tool_use": [{"id": "t", "name": "f", "input": {}}]})
    response = await model.call(ask("Write a book.", max_tokens=64_000))
    assert response.text == "A long answer."
    assert response.result.output.tool_calls == (ToolCall("t", "f", "{}"),)
    assert response.result.finish_reason == "tool_calls"
    assert response.metadata.usage.output_tokens > 0
    body = fake.requests[0].json
    assert body["stream"] is True
    assert body["max_tokens"] == 64_000
