"""FakeOpenAIServer: its wire format against recordings of the real llama.cpp server, and its
scripting, defaults and faults."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx2
import openai
import pydantic
import pytest

from jevrefine.testing import FakeOpenAIServer

FIXTURES = Path(__file__).parent.parent / "fixtures" / "llama"

# Fields llama.cpp adds that OpenAI's API does not have: the fake leaves them out.
LLAMA_ONLY_KEYS = {"timings"}
LLAMA_ONLY_TOKEN_KEYS = {"id"}  # a token's vocabulary id, inside logprob entries
LLAMA_ONLY_MODEL_KEYS = {"aliases", "tags", "architecture", "meta"}

MESSAGES = [
    {"role": "system", "content": "You are terse."},
    {"role": "user", "content": "Say hello in one sentence."},
]


def recorded(name: str) -> Any:
    return json.loads((FIXTURES / f"{name}.json").read_text(encoding="utf-8"))


def shape(value: Any) -> Any:
    """The structure of a JSON value: key sets and JSON types, lists by their first item."""
    if isinstance(value, dict):
        drop = set(LLAMA_ONLY_KEYS)
        if "token" in value:
            drop |= LLAMA_ONLY_TOKEN_KEYS
        return {k: shape(v) for k, v in value.items() if k not in drop}
    if isinstance(value, list):
        return [shape(value[0])] if value else []
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "int"
    if isinstance(value, float):
        return "float"
    return type(value).__name__


def assert_same_shape(fake: Any, real: Any) -> None:
    assert shape(fake) == shape(real)


@pytest.fixture
async def server():
    async with FakeOpenAIServer() as fake:
        yield fake


@pytest.fixture
async def http(server: FakeOpenAIServer):
    async with httpx2.AsyncClient(base_url=server.base_url, timeout=10) as client:
        yield client


# -- the wire format, checked against the recordings ---------------------------------------


def test_shape_helper_tells_structures_apart() -> None:
    # The comparison below is only worth something if it can fail.
    real = recorded("chat_completion")
    changed = json.loads(json.dumps(real))
    changed["usage"]["prompt_tokens"] = "25"
    assert shape(changed) != shape(real)
    missing = json.loads(json.dumps(real))
    del missing["choices"][0]["message"]["role"]
    assert shape(missing) != shape(real)


async def test_completion_matches_llama(server: FakeOpenAIServer, http: httpx2.AsyncClient) -> None:
    body = {"model": "smollm2", "messages": MESSAGES, "max_tokens": 12, "temperature": 0}
    response = await http.post("/chat/completions", json=body)
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("application/json")
    assert_same_shape(response.json(), recorded("chat_completion"))


async def test_json_schema_completion_matches_llama(http: httpx2.AsyncClient) -> None:
    schema = {
        "type": "object",
        "properties": {"city": {"type": "string", "maxLength": 12}},
        "required": ["city"],
        "additionalProperties": False,
    }
    body = {
        "model": "smollm2",
        "messages": [{"role": "user", "content": "Name one city in France as JSON."}],
        "max_tokens": 24,
        "response_format": {
            "type": "json_schema",
            "json_schema": {"name": "city", "schema": schema, "strict": True},
        },
    }
    data = (await http.post("/chat/completions", json=body)).json()
    real = recorded("chat_completion_json_schema")
    assert_same_shape(data, real)
    # Like the real server, the default answer is JSON that fits the schema.
    content = json.loads(data["choices"][0]["message"]["content"])
    assert set(content) == set(json.loads(real["choices"][0]["message"]["content"])) == {"city"}
    assert isinstance(content["city"], str)


async def test_logprobs_completion_matches_llama(http: httpx2.AsyncClient) -> None:
    body = {
        "model": "smollm2",
        "messages": MESSAGES,
        "max_tokens": 3,
        "logprobs": True,
        "top_logprobs": 2,
    }
    data = (await http.post("/chat/completions", json=body)).json()
    real = recorded("chat_completion_logprobs")
    assert_same_shape(data, real)
    entries = data["choices"][0]["logprobs"]["content"]
    assert "".join(e["token"] for e in entries) == data["choices"][0]["message"]["content"]
    assert all(len(e["top_logprobs"]) == 2 for e in entries)
    assert all(bytes(e["bytes"]).decode() == e["token"] for e in entries)


async def test_stream_matches_llama(http: httpx2.AsyncClient) -> None:
    body = {
        "model": "smollm2",
        "messages": MESSAGES,
        "max_tokens": 12,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    async with http.stream("POST", "/chat/completions", json=body) as response:
        assert response.status_code == 200
        content_type = response.headers["content-type"]
        lines = [line async for line in response.aiter_lines() if line.strip()]
    real = recorded("chat_completion_stream")
    assert content_type == real["content_type"]
    assert all(line.startswith("data: ") for line in lines)
    assert lines[-1] == real["lines"][-1] == "data: [DONE]"
    fake_events = [json.loads(line.removeprefix("data: ")) for line in lines[:-1]]
    real_events = [json.loads(line.removeprefix("data: ")) for line in real["lines"][:-1]]
    # First: the role; then content deltas; then the finish reason; then the usage chunk.
    assert_same_shape(fake_events[0], real_events[0])
    assert_same_shape(fake_events[1], real_events[1])
    assert_same_shape(fake_events[-2], real_events[-2])
    assert_same_shape(fake_events[-1], real_events[-1])
    assert len(fake_events) >= 4
    for event in fake_events[1:-2]:
        assert_same_shape(event, real_events[1])
    assert fake_events[-1]["choices"] == []
    assert fake_events[-2]["choices"][0]["finish_reason"] == "stop"
    text = "".join(e["choices"][0]["delta"]["content"] for e in fake_events[1:-2])
    assert text == "Echo: Say hello in one sentence."


async def test_error_body_matches_llama(http: httpx2.AsyncClient) -> None:
    response = await http.post("/chat/completions", json={"model": "smollm2", "messages": "nope"})
    real = recorded("error")
    assert response.status_code == real["status"] == 400
    error = response.json()["error"]
    # llama.cpp sends a subset of OpenAI's error fields (OpenAI's has `param` too).
    assert set(real["body"]["error"]) <= set(error)
    assert error["type"] == real["body"]["error"]["type"] == "invalid_request_error"
    assert set(error) == {"message", "type", "param", "code"}


async def test_models_match_llama(server: FakeOpenAIServer, http: httpx2.AsyncClient) -> None:
    data = (await http.get("/models")).json()
    real = recorded("models")
    assert data["object"] == real["object"] == "list"
    real_entry = {k: v for k, v in real["data"][0].items() if k not in LLAMA_ONLY_MODEL_KEYS}
    assert_same_shape(data["data"][0], real_entry)
    assert data["data"][0]["id"] == server.model == "fake-model"


async def test_official_sdk_parses_everything(server: FakeOpenAIServer) -> None:
    # A differential check: the official client's typed parser reads every kind of answer.
    server.script(
        {"content": "I will look.", "tool_calls": [{"name": "weather", "arguments": {"c": 1}}]},
        {"content": "Streaming now", "tool_calls": [{"name": "clock", "id": "call_x"}]},
    )
    async with openai.AsyncOpenAI(base_url=server.base_url, api_key="k", max_retries=0) as sdk:
        completion = await sdk.chat.completions.create(
            model="m", messages=[{"role": "user", "content": "hi"}], logprobs=True, top_logprobs=3
        )
        choice = completion.choices[0]
        assert choice.finish_reason == "tool_calls"
        assert choice.message.tool_calls is not None
        call = choice.message.tool_calls[0]
        assert call.type == "function"
        assert call.function.name == "weather"
        assert json.loads(call.function.arguments) == {"c": 1}
        assert choice.logprobs is not None
        assert choice.logprobs.content is not None
        assert all(len(t.top_logprobs) == 3 for t in choice.logprobs.content)
        assert completion.usage is not None
        assert completion.usage.total_tokens > 0

        stream = await sdk.chat.completions.create(
            model="m",
            messages=[{"role": "user", "content": "hi"}],
            stream=True,
            stream_options={"include_usage": True},
        )
        chunks = [chunk async for chunk in stream]
    assert chunks[-1].usage is not None
    deltas = [c.choices[0].delta for c in chunks if c.choices]
    assert "".join(d.content or "" for d in deltas) == "Streaming now"
    pieces = [tc for d in deltas for tc in d.tool_calls or ()]
    assert pieces[0].id == "call_x"
    assert pieces[0].function is not None
    assert pieces[0].function.name == "clock"
    assert "".join(p.function.arguments or "" for p in pieces if p.function) == "{}"


# -- scripting and defaults ----------------------------------------------------------------


async def chat(http: httpx2.AsyncClient, text: str = "hello", **extra: Any) -> dict[str, Any]:
    body = {"model": "m", "messages": [{"role": "user", "content": text}], **extra}
    response = await http.post("/chat/completions", json=body)
    assert response.status_code == 200, response.text
    data: dict[str, Any] = response.json()
    return data


async def test_default_reply_echoes_the_last_user_message(http: httpx2.AsyncClient) -> None:
    data = await chat(http, "what is up")
    assert data["choices"][0]["message"]["content"] == "Echo: what is up"
    assert data["choices"][0]["finish_reason"] == "stop"
    assert data["model"] == "m"
    assert data["usage"] == {
        "completion_tokens": 4,
        "prompt_tokens": 4,  # three words and the role
        "total_tokens": 8,
        "prompt_tokens_details": {"cached_tokens": 0},
    }


async def test_default_reply_respects_max_tokens(http: httpx2.AsyncClient) -> None:
    data = await chat(http, "one two three four five", max_tokens=3)
    assert data["choices"][0]["message"]["content"] == "Echo: one two"
    assert data["choices"][0]["finish_reason"] == "length"


async def test_default_reply_fits_a_pydantic_schema(http: httpx2.AsyncClient) -> None:
    class Inner(pydantic.BaseModel):
        flag: bool
        kind: str = pydantic.Field(json_schema_extra={"enum": ["a", "b"]})

    class Outer(pydantic.BaseModel):
        name: str
        count: int = pydantic.Field(ge=3)
        tags: list[str]
        inner: Inner
        maybe: float | None

    rf = {"type": "json_schema", "json_schema": {"name": "o", "schema": Outer.model_json_schema()}}
    data = await chat(http, response_format=rf)
    value = Outer.model_validate_json(data["choices"][0]["message"]["content"])
    assert value.count == 3
    assert value.inner.kind == "a"


async def test_script_is_consumed_in_order_then_reply_function(server: FakeOpenAIServer) -> None:
    seen: list[dict[str, Any]] = []

    async def reply(body: dict[str, Any]) -> str:
        seen.append(body)
        return f"function:{body['messages'][-1]['content']}"

    server.reply = reply
    server.script("first", server.Reply(content="second", finish_reason="length"))
    assert server.pending == 2
    async with httpx2.AsyncClient(base_url=server.base_url) as http:
        one = await chat(http, "a")
        two = await chat(http, "b")
        three = await chat(http, "c")
    assert one["choices"][0]["message"]["content"] == "first"
    assert two["choices"][0]["message"]["content"] == "second"
    assert two["choices"][0]["finish_reason"] == "length"
    assert three["choices"][0]["message"]["content"] == "function:c"
    assert [b["messages"][-1]["content"] for b in seen] == ["c"]
    assert server.pending == 0
    assert [r["messages"][0]["content"] for r in server.chat_requests] == ["a", "b", "c"]


async def test_sync_reply_function_and_scripted_usage_and_logprobs() -> None:
    def reply(body: dict[str, Any]) -> dict[str, Any]:
        return {
            "content": "yes",
            "usage": {"prompt_tokens": 11, "completion_tokens": 1},
            "logprobs": [("yes", -0.05)],
            "model": "gpt-4o-2024-08-06",
        }

    async with FakeOpenAIServer(reply) as server, httpx2.AsyncClient(base_url=server.base_url) as h:
        data = await chat(h, logprobs=True, top_logprobs=1)
    assert data["model"] == "gpt-4o-2024-08-06"
    assert data["usage"]["prompt_tokens"] == 11
    assert data["usage"]["total_tokens"] == 12
    entry = data["choices"][0]["logprobs"]["content"][0]
    assert (entry["token"], entry["logprob"]) == ("yes", -0.05)
    assert entry["top_logprobs"] == [{"token": "yes", "bytes": [121, 101, 115], "logprob": -0.05}]


async def test_no_logprobs_unless_asked(http: httpx2.AsyncClient) -> None:
    data = await chat(http)
    assert "logprobs" not in data["choices"][0]


async def test_whole_body_reply_is_sent_as_is(server: FakeOpenAIServer) -> None:
    server.script({"choices": [], "id": "x"})
    async with httpx2.AsyncClient(base_url=server.base_url) as http:
        assert await chat(http) == {"choices": [], "id": "x"}


def test_bad_replies_are_rejected() -> None:
    server = FakeOpenAIServer()
    with pytest.raises(TypeError, match="a reply is one of str, Mapping"):
        server.script(42)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="reply must be a function"):
        FakeOpenAIServer("not callable")  # type: ignore[arg-type]


async def test_unknown_reply_keys_are_reported(server: FakeOpenAIServer) -> None:
    server.script({"text": "oops"})
    async with httpx2.AsyncClient(base_url=server.base_url) as http:
        response = await http.post("/chat/completions", json={"model": "m", "messages": [{}]})
    assert response.status_code == 500
    assert "unknown reply key" in response.json()["error"]["message"]


async def test_tool_call_arguments_stream_in_pieces(server: FakeOpenAIServer) -> None:
    arguments = {"city": "Paris", "unit": "celsius"}
    server.script({"tool_calls": [{"name": "weather", "arguments": arguments, "id": "call_1"}]})
    body = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "stream": True}
    async with (
        httpx2.AsyncClient(base_url=server.base_url) as http,
        http.stream("POST", "/chat/completions", json=body) as response,
    ):
        lines = [line async for line in response.aiter_lines() if line.startswith("data: {")]
    events = [json.loads(line.removeprefix("data: ")) for line in lines]
    pieces = [tc for e in events for tc in e["choices"][0]["delta"].get("tool_calls", ())]
    assert len(pieces) >= 3  # the head, then the arguments in several parts
    assert pieces[0] == {
        "index": 0,
        "id": "call_1",
        "type": "function",
        "function": {"name": "weather", "arguments": ""},
    }
    assert all(set(p) == {"index", "function"} for p in pieces[1:])
    joined = "".join(p["function"]["arguments"] for p in pieces)
    assert json.loads(joined) == arguments
    assert events[-1]["choices"][0]["finish_reason"] == "tool_calls"
    # Without stream_options.include_usage there is no usage chunk.
    assert all("usage" not in e for e in events)


async def test_invalid_requests_get_openai_errors(http: httpx2.AsyncClient) -> None:
    no_model = await http.post("/chat/completions", json={"messages": [{"role": "user"}]})
    assert no_model.status_code == 400
    assert no_model.json()["error"]["param"] == "model"
    not_json = await http.post("/chat/completions", content=b"{", headers={"content-type": "x"})
    assert not_json.status_code == 400
    wrong_path = await http.get("/nothing")
    assert wrong_path.status_code == 404
    assert wrong_path.json()["error"]["type"] == "invalid_request_error"
    wrong_method = await http.get("/chat/completions")
    assert wrong_method.status_code == 405
    missing_model = await http.get("/models/gpt-9")
    assert missing_model.status_code == 404
    assert missing_model.json()["error"]["code"] == "model_not_found"
    assert (await http.get("/models/fake-model")).json()["id"] == "fake-model"


@pytest.mark.parametrize(
    ("status", "kind", "code"),
    [
        (401, "invalid_request_error", "invalid_api_key"),
        (429, "requests", "rate_limit_exceeded"),
        (500, "server_error", None),
        (503, "server_error", None),
    ],
)
async def test_injected_failures_have_openai_error_bodies(
    server: FakeOpenAIServer, http: httpx2.AsyncClient, status: int, kind: str, code: str | None
) -> None:
    server.fail(status)
    response = await http.post("/chat/completions", json={"model": "m", "messages": [{}]})
    assert response.status_code == status
    assert response.json() == {
        "error": {"message": response.reason_phrase, "type": kind, "param": None, "code": code}
    }
    # The fault was used up: the next request is answered.
    assert (await http.post("/chat/completions", json={"model": "m", "messages": [{}]})).is_success


def test_base_url_needs_a_running_server() -> None:
    with pytest.raises(RuntimeError, match="not running"):
        _ = FakeOpenAIServer().base_url
    with FakeOpenAIServer() as server:
        assert server.base_url == f"http://127.0.0.1:{server.port}/v1"
