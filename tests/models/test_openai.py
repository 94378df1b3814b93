"""OpenAIChatModel against FakeOpenAIServer (wire mapping, errors, telemetry) and against the
real local llama.cpp model."""

from __future__ import annotations

import email.utils
import importlib
import json
import sys
import time
from typing import Any

import httpx2
import openai
import pydantic
import pytest
from opentelemetry.trace import SpanKind

from jevrefine import ChatClient, tool
from jevrefine.exceptions import (
    EmptyResponseError,
    ModelConnectionError,
    ModelError,
    ModelHTTPError,
    ModelTimeoutError,
    UserError,
)
from jevrefine.local import LocalModelServer
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
from jevrefine.models.openai import OpenAIChatModel
from jevrefine.structured import FORMAT_INSTRUCTIONS_MARKER
from jevrefine.testing import FakeOpenAIServer
from support import City, closed_port

SECRET = "sk-test-0123456789abcdef"


@pytest.fixture
async def server():
    async with FakeOpenAIServer() as fake:
        yield fake


@pytest.fixture
async def model(server: FakeOpenAIServer):
    async with OpenAIChatModel(
        "gpt-test", base_url=server.base_url, api_key=SECRET, max_retries=0
    ) as m:
        yield m


def prompt(text: str = "hello there", **options: Any) -> Prompt:
    return Prompt((UserMessage(text),), ChatOptions(**options))


# -- calls ---------------------------------------------------------------------------------


async def test_call_maps_request_and_response(
    server: FakeOpenAIServer, model: OpenAIChatModel
) -> None:
    response = await model.call(
        prompt("hi you", temperature=0.3, top_p=0.9, max_tokens=20, stop=("END",), seed=7)
    )
    assert response.text == "Echo: hi you"
    assert response.result.finish_reason == "stop"
    meta = response.metadata
    assert meta.id is not None
    assert meta.id.startswith("chatcmpl-")
    assert meta.model == "gpt-test"
    assert meta.finish_reasons == ("stop",)
    assert (meta.usage.input_tokens, meta.usage.output_tokens) == (3, 3)
    (sent,) = server.chat_requests
    assert sent == {
        "model": "gpt-test",
        "messages": [{"role": "user", "content": "hi you"}],
        "temperature": 0.3,
        "top_p": 0.9,
        "max_tokens": 20,
        "stop": ["END"],
        "seed": 7,
    }
    headers = server.requests[0].headers
    assert headers["authorization"] == f"Bearer {SECRET}"


async def test_default_options_merge_under_the_prompts(server: FakeOpenAIServer) -> None:
    defaults = ChatOptions(model="gpt-other", temperature=0.1, max_tokens=5)
    async with OpenAIChatModel(
        "gpt-test", base_url=server.base_url, options=defaults, max_retries=0
    ) as model:
        assert model.model_name == "gpt-other"
        await model.call(prompt(temperature=0.5))
        await model.call(prompt(model="gpt-third"))
    first, second = server.chat_requests
    assert (first["model"], first["temperature"], first["max_tokens"]) == ("gpt-other", 0.5, 5)
    assert (second["model"], second["temperature"]) == ("gpt-third", 0.1)


async def test_messages_map_both_ways_with_tool_calls(
    server: FakeOpenAIServer, model: OpenAIChatModel
) -> None:
    server.script(
        {
            "content": None,
            "tool_calls": [
                {"name": "weather", "arguments": {"city": "Oslo"}, "id": "call_b"},
                {"name": "clock", "arguments": "{}", "id": "call_c"},
            ],
        }
    )
    conversation = (
        SystemMessage("Be brief."),
        UserMessage("Weather in Paris and the time?"),
        AssistantMessage(
            "Checking.",
            (ToolCall("call_1", "weather", '{"city":"Paris"}'), ToolCall("call_2", "clock", "")),
        ),
        ToolResponseMessage(
            (ToolResponse("call_1", "weather", "sunny"), ToolResponse("call_2", "clock", "12:00"))
        ),
        AssistantMessage("It is sunny and noon."),
        UserMessage("And Oslo?"),
    )
    response = await model.call(Prompt(conversation))
    assert server.chat_requests[0]["messages"] == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Weather in Paris and the time?"},
        {
            "role": "assistant",
            "content": "Checking.",
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "weather", "arguments": '{"city":"Paris"}'},
                },
                {
                    "id": "call_2",
                    "type": "function",
                    "function": {"name": "clock", "arguments": "{}"},
                },
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": "sunny"},
        {"role": "tool", "tool_call_id": "call_2", "content": "12:00"},
        {"role": "assistant", "content": "It is sunny and noon."},
        {"role": "user", "content": "And Oslo?"},
    ]
    output = response.result.output
    assert output.text == ""
    assert output.tool_calls == (
        ToolCall("call_b", "weather", '{"city": "Oslo"}'),
        ToolCall("call_c", "clock", "{}"),
    )
    assert output.tool_calls[0].parsed_arguments() == {"city": "Oslo"}
    assert response.result.finish_reason == "tool_calls"


async def test_assistant_turn_with_only_tool_calls_sends_null_content(
    server: FakeOpenAIServer, model: OpenAIChatModel
) -> None:
    conversation = (
        UserMessage("time?"),
        AssistantMessage("", (ToolCall("c1", "clock", "{}"),)),
        ToolResponseMessage((ToolResponse("c1", "clock", "noon"),)),
    )
    await model.call(Prompt(conversation))
    assistant = server.chat_requests[0]["messages"][1]
    assert assistant["content"] is None
    assert assistant["tool_calls"][0]["id"] == "c1"


async def test_tool_definitions_and_tool_choice_are_sent(
    server: FakeOpenAIServer, model: OpenAIChatModel
) -> None:
    schema = {
        "type": "object",
        "properties": {"city": {"type": "string"}},
        "required": ["city"],
    }
    tools = (ToolDefinition("weather", "Current weather for a city.", schema),)
    await model.call(prompt(tools=tools, tool_choice="required"))
    sent = server.chat_requests[0]
    assert sent["tools"] == [
        {
            "type": "function",
            "function": {
                "name": "weather",
                "description": "Current weather for a city.",
                "parameters": schema,
            },
        }
    ]
    assert sent["tool_choice"] == "required"


@pytest.mark.parametrize(
    ("sent", "expected"),
    [
        ("stop", "stop"),
        ("length", "length"),
        ("tool_calls", "tool_calls"),
        ("content_filter", "content_filter"),
        ("function_call", "tool_calls"),
        ("STOP", "stop"),
    ],
)
async def test_finish_reasons_are_lowercase_conventions(
    server: FakeOpenAIServer, model: OpenAIChatModel, sent: str, expected: str
) -> None:
    server.script({"content": "x", "finish_reason": sent}, {"content": "x", "finish_reason": sent})
    response = await model.call(prompt())
    assert response.result.finish_reason == expected
    assert response.metadata.finish_reasons == (expected,)
    streamed = concat_chunks([c async for c in model.stream(prompt())])
    assert streamed.metadata.finish_reasons == (expected,)


async def test_usage_is_reported(server: FakeOpenAIServer, model: OpenAIChatModel) -> None:
    server.script({"content": "ok", "usage": {"prompt_tokens": 120, "completion_tokens": 7}})
    usage = (await model.call(prompt())).metadata.usage
    assert (usage.input_tokens, usage.output_tokens, usage.total_tokens) == (120, 7, 127)


async def test_logprobs_are_requested_and_parsed(
    server: FakeOpenAIServer, model: OpenAIChatModel
) -> None:
    response = await model.call(prompt("a b c", logprobs=True, top_logprobs=2))
    sent = server.chat_requests[0]
    assert (sent["logprobs"], sent["top_logprobs"]) == (True, 2)
    logprobs = response.result.logprobs
    assert logprobs is not None
    assert "".join(t.token for t in logprobs) == response.text == "Echo: a b c"
    assert all(len(t.top) == 2 and t.top[0] == (t.token, t.logprob) for t in logprobs)
    assert [t.logprob for t in logprobs] == pytest.approx([-0.1, -0.2, -0.3, -0.4])


async def test_top_logprobs_alone_implies_logprobs(
    server: FakeOpenAIServer, model: OpenAIChatModel
) -> None:
    await model.call(prompt(top_logprobs=3))
    assert server.chat_requests[0]["logprobs"] is True
    assert (await model.call(prompt())).result.logprobs is None


async def test_response_formats_and_extra_body_are_sent(
    server: FakeOpenAIServer, model: OpenAIChatModel
) -> None:
    schema = {"type": "object", "properties": {"ok": {"type": "boolean"}}}
    await model.call(
        prompt(
            response_format=ResponseFormat(name="answer", schema=schema, strict=True),
            extra_body={"grammar": 'root ::= "yes" | "no"', "cache_prompt": False},
        )
    )
    await model.call(prompt(response_format=ResponseFormat(type="json_object")))
    first, second = server.chat_requests
    assert first["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "answer", "schema": schema, "strict": True},
    }
    assert first["grammar"] == 'root ::= "yes" | "no"'
    assert first["cache_prompt"] is False
    assert second["response_format"] == {"type": "json_object"}
    assert "grammar" not in second


async def test_multiple_choices_become_generations(
    server: FakeOpenAIServer, model: OpenAIChatModel
) -> None:
    def choice(index: int, text: str, reason: str) -> dict[str, Any]:
        message = {"role": "assistant", "content": text}
        return {"index": index, "message": message, "finish_reason": reason}

    server.script(
        {
            "id": "resp-1",
            "object": "chat.completion",
            "created": 0,
            "model": "gpt-test-0613",
            "choices": [choice(1, "second", "length"), choice(0, "first", "stop")],
        }
    )
    response = await model.call(prompt())
    assert [g.text for g in response.results] == ["first", "second"]
    assert response.metadata.finish_reasons == ("stop", "length")
    assert response.metadata.model == "gpt-test-0613"
    assert response.metadata.usage.total_tokens == 0  # none reported


async def test_no_choices_is_an_empty_response(
    server: FakeOpenAIServer, model: OpenAIChatModel
) -> None:
    server.script(
        {"id": "x", "object": "chat.completion", "created": 0, "model": "m", "choices": []}
    )
    with pytest.raises(EmptyResponseError, match="no choices") as info:
        await model.call(prompt())
    assert info.value.model_name == "gpt-test"


# -- streaming -----------------------------------------------------------------------------


async def test_stream_yields_text_deltas_then_a_final_chunk(
    server: FakeOpenAIServer, model: OpenAIChatModel
) -> None:
    server.script("The sky is blue today.")
    chunks = [chunk async for chunk in model.stream(prompt())]
    texts = [c.text for c in chunks[:-1]]
    assert texts == ["The", " sky", " is", " blue", " today."]
    final = chunks[-1]
    assert final.text == ""
    assert final.result.finish_reason == "stop"
    assert final.metadata.usage.input_tokens == 3
    assert final.metadata.usage.output_tokens == 5
    assert final.metadata.id is not None
    assert final.metadata.model == "gpt-test"
    assert all(c.metadata.usage.total_tokens == 0 for c in chunks[:-1])
    whole = concat_chunks(chunks)
    assert whole.text == "The sky is blue today."
    sent = server.chat_requests[0]
    assert sent["stream"] is True
    assert sent["stream_options"] == {"include_usage": True}


async def test_stream_delivers_tool_calls_whole_in_the_last_chunk(
    server: FakeOpenAIServer, model: OpenAIChatModel
) -> None:
    arguments = {"city": "Paris", "days": 3, "unit": "celsius"}
    server.script(
        {
            "content": "Let me check.",
            "tool_calls": [
                {"name": "weather", "arguments": arguments, "id": "call_w"},
                {"name": "clock", "arguments": {"tz": "CET"}, "id": "call_c"},
            ],
        }
    )
    chunks = [chunk async for chunk in model.stream(prompt())]
    assert all(not c.result.output.tool_calls for c in chunks[:-1])
    calls = chunks[-1].result.output.tool_calls
    assert [(c.id, c.name) for c in calls] == [("call_w", "weather"), ("call_c", "clock")]
    assert calls[0].parsed_arguments() == arguments
    assert calls[1].parsed_arguments() == {"tz": "CET"}
    assert chunks[-1].result.finish_reason == "tool_calls"
    assert concat_chunks(chunks).text == "Let me check."


async def test_stream_collects_logprobs_in_the_last_chunk(model: OpenAIChatModel) -> None:
    chunks = [c async for c in model.stream(prompt("x y", logprobs=True, top_logprobs=1))]
    logprobs = chunks[-1].result.logprobs
    assert logprobs is not None
    assert "".join(t.token for t in logprobs) == concat_chunks(chunks).text == "Echo: x y"


async def test_stream_without_choices_is_an_empty_response(
    server: FakeOpenAIServer, model: OpenAIChatModel
) -> None:
    server.script({"choices": []})  # sent as a plain JSON body: not one chunk in it
    with pytest.raises(EmptyResponseError):
        _ = [c async for c in model.stream(prompt())]


async def test_stream_errors_are_mapped(server: FakeOpenAIServer, model: OpenAIChatModel) -> None:
    server.fail(503)
    with pytest.raises(ModelHTTPError) as info:
        _ = [c async for c in model.stream(prompt())]
    assert info.value.status_code == 503


async def test_stopping_a_stream_early_closes_it(
    server: FakeOpenAIServer, model: OpenAIChatModel
) -> None:
    server.script("one two three four five six")
    stream = model.stream(prompt())
    first = await anext(stream)
    await stream.aclose()  # type: ignore[attr-defined]  # an async generator underneath
    assert first.text == "one"
    # The model is still usable afterwards.
    assert (await model.call(prompt("again"))).text == "Echo: again"


# -- structured output through ChatClient --------------------------------------------------


async def test_entity_native_sends_the_schema(
    server: FakeOpenAIServer, model: OpenAIChatModel
) -> None:
    server.script('{"name": "Paris", "population": 2100000}')
    city = await ChatClient(model).prompt("Largest city in France?").entity(City)
    assert city == City(name="Paris", population=2100000)
    sent = server.chat_requests[0]
    assert sent["response_format"]["type"] == "json_schema"
    schema = sent["response_format"]["json_schema"]["schema"]
    assert set(schema["properties"]) == {"name", "population"}
    assert FORMAT_INSTRUCTIONS_MARKER not in sent["messages"][-1]["content"]


async def test_entity_native_with_the_fakes_default_answer(model: OpenAIChatModel) -> None:
    city = await ChatClient(model).prompt("Any city.").entity(City)
    assert isinstance(city, City)


async def test_entity_prompt_based(server: FakeOpenAIServer, model: OpenAIChatModel) -> None:
    server.script('```json\n{"name": "Lyon", "population": 500000}\n```')
    city = await ChatClient(model).prompt("A city?").entity(City, native=False)
    assert city == City(name="Lyon", population=500000)
    sent = server.chat_requests[0]
    assert "response_format" not in sent
    assert FORMAT_INSTRUCTIONS_MARKER in sent["messages"][-1]["content"]
    assert '"population"' in sent["messages"][-1]["content"]


async def test_client_streams_text(server: FakeOpenAIServer, model: OpenAIChatModel) -> None:
    server.script("Streaming through the client.")
    parts = [p async for p in ChatClient(model).prompt("go").stream()]
    assert len(parts) >= 3
    assert "".join(parts) == "Streaming through the client."


async def test_tool_loop_round_trip_through_the_client(
    server: FakeOpenAIServer, model: OpenAIChatModel
) -> None:
    # The docstring example of FakeOpenAIServer, end to end through ChatClient's tool loop.
    @tool
    async def weather(city: str) -> str:
        """Current weather for a city."""
        return f"sunny in {city}"

    server.script(
        {"tool_calls": [{"name": "weather", "arguments": {"city": "Paris"}, "id": "call_p"}]},
        "It is sunny in Paris.",
    )
    answer = await ChatClient(model, tools=[weather]).prompt("Paris?").content()
    assert answer == "It is sunny in Paris."
    first, second = server.chat_requests
    assert [t["function"]["name"] for t in first["tools"]] == ["weather"]
    assert first["tools"][0]["function"]["parameters"]["properties"]["city"]["type"] == "string"
    assert second["messages"][-2]["tool_calls"][0]["id"] == "call_p"
    assert second["messages"][-1] == {
        "role": "tool",
        "tool_call_id": "call_p",
        "content": "sunny in Paris",
    }


async def test_tool_loop_streams_through_the_client(
    server: FakeOpenAIServer, model: OpenAIChatModel
) -> None:
    @tool
    def clock(tz: str) -> str:
        """The time in a time zone."""
        return f"12:00 {tz}"

    server.script(
        {"tool_calls": [{"name": "clock", "arguments": {"tz": "CET"}, "id": "call_t"}]},
        "It is noon in CET.",
    )
    parts = [p async for p in ChatClient(model, tools=[clock]).prompt("Time?").stream()]
    assert "".join(parts) == "It is noon in CET."
    assert len(parts) >= 3
    assert server.chat_requests[1]["messages"][-1]["content"] == "12:00 CET"
    assert all(r["stream"] for r in server.chat_requests)


# -- errors --------------------------------------------------------------------------------


async def test_401_is_a_permanent_http_error_without_the_key(
    server: FakeOpenAIServer,
) -> None:
    body = {"error": {"message": f"Incorrect API key provided: {SECRET}.", "type": "x"}}
    server.fail(401, body=body, times=3)
    async with OpenAIChatModel(
        "gpt-test", base_url=server.base_url, api_key=SECRET, max_retries=2
    ) as model:
        with pytest.raises(ModelHTTPError) as info:
            await model.call(prompt())
        assert SECRET not in repr(model)
    error = info.value
    assert error.status_code == 401
    assert not error.is_transient
    assert error.model_name == "gpt-test"
    # The wire reads the status itself: no SDK exception (holding the request) is chained.
    assert error.__cause__ is None
    assert error.body == {"error": {"message": "Incorrect API key provided: ***.", "type": "x"}}
    assert SECRET not in str(error)
    assert SECRET not in repr(error)
    assert "check the API key" in str(error)
    assert len(server.requests) == 1  # the SDK does not retry a 401


@pytest.mark.parametrize(
    ("headers", "expected"),
    [
        ({"retry-after": "7"}, 7.0),
        ({"retry-after": "1.5"}, 1.5),
        ({"retry-after-ms": "250"}, 0.25),
        ({"retry-after-ms": "250", "retry-after": "9"}, 0.25),
        ({"retry-after": "soon"}, None),
        ({}, None),
    ],
)
async def test_429_carries_retry_after(
    server: FakeOpenAIServer, model: OpenAIChatModel, headers: dict[str, str], expected: float
) -> None:
    server.fail(429, headers=headers)
    with pytest.raises(ModelHTTPError) as info:
        await model.call(prompt())
    assert info.value.status_code == 429
    assert info.value.is_transient
    assert info.value.retry_after == expected
    assert info.value.body["error"]["code"] == "rate_limit_exceeded"
    assert len(server.requests) == 1


async def test_429_retry_after_as_an_http_date(
    server: FakeOpenAIServer, model: OpenAIChatModel
) -> None:
    server.fail(429, headers={"retry-after": email.utils.formatdate(time.time() + 30, usegmt=True)})
    with pytest.raises(ModelHTTPError) as info:
        await model.call(prompt())
    assert info.value.retry_after is not None
    assert 25 <= info.value.retry_after <= 31


async def test_500_after_the_sdks_retries(server: FakeOpenAIServer) -> None:
    # retry-after-ms keeps the SDK's backoff short; the retries are the SDK's own.
    server.fail(500, headers={"retry-after-ms": "10"}, times=2)
    async with OpenAIChatModel("m", base_url=server.base_url, max_retries=1) as model:
        with pytest.raises(ModelHTTPError) as info:
            await model.call(prompt())
    assert info.value.status_code == 500
    assert info.value.is_transient
    assert info.value.body == {
        "error": {
            "message": "Internal Server Error",
            "type": "server_error",
            "param": None,
            "code": None,
        }
    }
    assert len(server.requests) == 2


async def test_transient_failure_recovered_by_the_sdk(server: FakeOpenAIServer) -> None:
    server.fail(503, headers={"retry-after-ms": "10"})
    async with OpenAIChatModel("m", base_url=server.base_url, max_retries=1) as model:
        response = await model.call(prompt("ok"))
    assert response.text == "Echo: ok"
    assert len(server.requests) == 2


async def test_non_json_error_body_is_kept_as_text(
    server: FakeOpenAIServer, model: OpenAIChatModel
) -> None:
    server.fail(502, body="<html>bad gateway</html>")
    with pytest.raises(ModelHTTPError) as info:
        await model.call(prompt())
    assert info.value.body == "<html>bad gateway</html>"


async def test_connection_refused() -> None:
    port = closed_port()
    async with OpenAIChatModel(
        "m", base_url=f"http://127.0.0.1:{port}/v1", api_key=SECRET, max_retries=0
    ) as model:
        with pytest.raises(ModelConnectionError) as info:
            await model.call(prompt())
        with pytest.raises(ModelConnectionError):
            _ = [c async for c in model.stream(prompt())]
    assert type(info.value) is ModelConnectionError
    assert info.value.is_transient
    assert f"127.0.0.1:{port}" in str(info.value)
    assert SECRET not in str(info.value)
    assert isinstance(info.value.__cause__, httpx2.ConnectError)  # the transport's own error


async def test_dropped_connection(server: FakeOpenAIServer, model: OpenAIChatModel) -> None:
    server.drop_connections()
    with pytest.raises(ModelConnectionError):
        await model.call(prompt())


async def test_timeout(server: FakeOpenAIServer) -> None:
    server.delay(2.0)
    async with OpenAIChatModel("m", base_url=server.base_url, max_retries=0, timeout=0.3) as model:
        started = time.monotonic()
        with pytest.raises(ModelTimeoutError) as info:
            await model.call(prompt())
    assert time.monotonic() - started < 1.5
    assert info.value.is_transient
    assert isinstance(info.value.__cause__, httpx2.TimeoutException)


async def test_malformed_body(server: FakeOpenAIServer, model: OpenAIChatModel) -> None:
    server.malformed()
    with pytest.raises(ModelError, match="could not be read"):
        await model.call(prompt())


# -- construction --------------------------------------------------------------------------


def test_missing_key_without_base_url(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    with pytest.raises(UserError, match="OPENAI_API_KEY"):
        OpenAIChatModel("gpt-4o-mini")


async def test_key_from_the_environment(
    server: FakeOpenAIServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-from-env-0000000000")
    async with OpenAIChatModel("m", base_url=server.base_url, max_retries=0) as model:
        await model.call(prompt())
        assert "sk-from-env" not in repr(model)
    assert server.requests[0].headers["authorization"] == "Bearer sk-from-env-0000000000"


async def test_local_server_needs_no_key(
    server: FakeOpenAIServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    async with OpenAIChatModel("m", base_url=server.base_url, max_retries=0) as model:
        assert (await model.call(prompt("x"))).text == "Echo: x"
    assert server.requests[0].headers["authorization"].startswith("Bearer ")


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"max_retries": -1}, "max_retries"),
        ({"timeout": 0}, "timeout"),
        ({"options": {"temperature": 1}}, "ChatOptions"),
    ],
)
def test_bad_arguments(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(UserError, match=message):
        OpenAIChatModel("m", base_url="http://127.0.0.1:1/v1", **kwargs)
    with pytest.raises(UserError, match="model=''"):
        OpenAIChatModel("", base_url="http://127.0.0.1:1/v1")


async def test_a_given_client_stays_open(server: FakeOpenAIServer) -> None:
    async with openai.AsyncOpenAI(base_url=server.base_url, api_key="k", max_retries=0) as client:
        model = OpenAIChatModel("m", client=client)
        assert model.client is client
        assert (await model.call(prompt("x"))).text == "Echo: x"
        await model.aclose()
        assert not client.is_closed()
        assert (await model.call(prompt("y"))).text == "Echo: y"
        with pytest.raises(UserError, match="not both"):
            OpenAIChatModel("m", client=client, base_url=server.base_url)


async def test_an_own_client_is_closed(server: FakeOpenAIServer) -> None:
    model = OpenAIChatModel("m", base_url=server.base_url)
    await model.aclose()
    assert model.client.is_closed()


def test_server_address_and_port() -> None:
    local = OpenAIChatModel("m", base_url="http://127.0.0.1:8123/v1")
    assert (local.server_address, local.server_port) == ("127.0.0.1", 8123)
    remote = OpenAIChatModel("m", api_key=SECRET, base_url="https://api.openai.com/v1")
    assert (remote.server_address, remote.server_port) == ("api.openai.com", 443)
    assert remote.provider == "openai"
    assert remote.supports_tools
    assert remote.supports_native_structured_output
    assert SECRET not in repr(remote)


def test_missing_openai_package_says_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "openai", None)
    monkeypatch.delitem(sys.modules, "jevrefine.models.openai")
    with pytest.raises(ImportError, match=r'pip install "jevrefine\[openai\]"'):
        importlib.import_module("jevrefine.models.openai")


# -- telemetry -----------------------------------------------------------------------------


async def test_client_span_for_this_model(
    server: FakeOpenAIServer, model: OpenAIChatModel, otel: Any
) -> None:
    server.script(
        {
            "content": "Done.",
            "usage": {"prompt_tokens": 9, "completion_tokens": 2},
            "model": "gpt-test-2026-01-01",
        }
    )
    client = ChatClient(
        model, tracer_provider=otel.tracer_provider, meter_provider=otel.meter_provider
    )
    assert await client.prompt("go").options(max_tokens=10, temperature=0.2).content() == "Done."
    chat_spans = [s for s in otel.spans() if s.name == "chat gpt-test"]
    assert len(chat_spans) == 1
    span = chat_spans[0]
    assert span.kind is SpanKind.CLIENT
    attrs = dict(span.attributes)
    assert attrs["gen_ai.provider.name"] == "openai"
    assert attrs["gen_ai.request.model"] == "gpt-test"
    assert attrs["server.address"] == "127.0.0.1"
    assert attrs["server.port"] == server.port
    assert attrs["gen_ai.response.id"] == "chatcmpl-fake1"
    assert attrs["gen_ai.response.model"] == "gpt-test-2026-01-01"
    assert attrs["gen_ai.usage.input_tokens"] == 9
    assert attrs["gen_ai.usage.output_tokens"] == 2
    assert tuple(attrs["gen_ai.response.finish_reasons"]) == ("stop",)
    assert attrs["gen_ai.request.max_tokens"] == 10
    assert SECRET not in json.dumps({k: str(v) for k, v in attrs.items()})


async def test_client_span_on_failure(
    server: FakeOpenAIServer, model: OpenAIChatModel, otel: Any
) -> None:
    server.fail(429)
    client = ChatClient(model, tracer_provider=otel.tracer_provider)
    with pytest.raises(ModelHTTPError):
        await client.prompt("go").content()
    (span,) = [s for s in otel.spans() if s.name == "chat gpt-test"]
    assert span.attributes["error.type"] == "429"  # the status tells a rate limit apart
    assert span.attributes["http.response.status_code"] == 429
    assert not span.status.is_ok


# -- the real local model ------------------------------------------------------------------


@pytest.fixture
async def local(local_server: LocalModelServer):
    async with local_server.openai_model(max_retries=0, timeout=60) as m:
        yield m


INSTRUCTION = "Answer in one short sentence."


@pytest.mark.local_model
async def test_local_chat(local: OpenAIChatModel, local_server: LocalModelServer) -> None:
    response = await local.call(
        Prompt(
            (SystemMessage(INSTRUCTION), UserMessage("What colour is the sky?")),
            ChatOptions(max_tokens=16, temperature=0.0),
        )
    )
    assert response.text.strip()
    assert response.metadata.usage.input_tokens > 0
    assert 0 < response.metadata.usage.output_tokens <= 16
    assert response.result.finish_reason in {"stop", "length"}
    assert response.metadata.model == local_server.alias
    assert response.metadata.id
    assert local.server_port == local_server.port


@pytest.mark.local_model
async def test_local_stream(local: OpenAIChatModel) -> None:
    options = ChatOptions(max_tokens=16, temperature=0.0)
    chunks: list[ChatResponse] = [
        c
        async for c in local.stream(
            Prompt((SystemMessage(INSTRUCTION), UserMessage("Name a fruit.")), options)
        )
    ]
    text_chunks = [c for c in chunks[:-1] if c.text]
    assert len(text_chunks) >= 3
    whole = concat_chunks(chunks)
    assert whole.text == "".join(c.text for c in chunks)
    assert whole.text.strip()
    last = chunks[-1]
    assert last.metadata.usage.input_tokens > 0
    # One chunk per token; a token whose text is held back (part of a UTF-8 sequence) has none.
    assert last.metadata.usage.output_tokens >= len(text_chunks)
    assert last.result.finish_reason in {"stop", "length"}


class Capital(pydantic.BaseModel):
    city: str = pydantic.Field(max_length=12)


@pytest.mark.local_model
async def test_local_json_schema(local: OpenAIChatModel) -> None:
    client = ChatClient(local, options=ChatOptions(max_tokens=32, temperature=0.0))
    capital = await client.prompt("Name the capital of France as JSON.").entity(Capital)
    assert isinstance(capital, Capital)
    assert 0 < len(capital.city) <= 12


@pytest.mark.local_model
async def test_local_logprobs(local: OpenAIChatModel) -> None:
    response = await local.call(
        Prompt(
            (UserMessage("Is water wet? Answer yes or no."),),
            ChatOptions(max_tokens=4, logprobs=True, top_logprobs=2, temperature=0.0),
        )
    )
    logprobs = response.result.logprobs
    assert logprobs
    assert len(logprobs) == response.metadata.usage.output_tokens
    assert "".join(t.token for t in logprobs) == response.text
    for token in logprobs:
        assert token.logprob <= 0.0
        assert len(token.top) == 2
        assert token.top[0][1] >= token.top[1][1]
