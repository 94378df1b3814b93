"""FakeAnthropicServer: its wire format against llama.cpp's recordings and the official SDK."""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anthropic
import httpx2
import pytest

from jevrefine.testing import FakeAnthropicServer

FIXTURES = Path(__file__).parent.parent / "fixtures" / "llama"
HEADERS = {"x-api-key": "test", "anthropic-version": "2023-06-01"}


def load(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((FIXTURES / name).read_text())
    return data


def parse_sse(text: str) -> list[tuple[str, dict[str, Any]]]:
    """(event line, decoded data) per event; every event must have both lines."""
    events = []
    for raw in text.strip().split("\n\n"):
        lines = dict(line.split(": ", 1) for line in raw.strip().splitlines())
        assert set(lines) == {"event", "data"}, raw
        events.append((lines["event"], json.loads(lines["data"])))
    return events


def shape(value: Any) -> Any:
    """The keys and JSON types of a value, recursively (lists by their first item)."""
    if isinstance(value, dict):
        return {k: shape(v) for k, v in value.items()}
    if isinstance(value, list):
        return [shape(value[0])] if value else []
    if value is None:
        return "null"
    return type(value).__name__


def assert_covers(fake: Any, real: Any, where: str = "$") -> None:
    """Every key the real server sent is in the fake's output with the same JSON type."""
    if isinstance(real, dict):
        assert isinstance(fake, dict), f"{where}: expected an object, got {fake!r}"
        for key, value in real.items():
            assert key in fake, f"{where}.{key} is missing from the fake's output"
            assert_covers(fake[key], value, f"{where}.{key}")
    elif isinstance(real, list):
        assert isinstance(fake, list), f"{where}: expected a list"
        if real and fake:
            assert_covers(fake[0], real[0], f"{where}[0]")
    elif real != "null" and fake != "null":
        assert fake == real, f"{where}: the fake sends {fake}, llama.cpp {real}"


@pytest.fixture
async def fake() -> AsyncIterator[FakeAnthropicServer]:
    async with FakeAnthropicServer() as server:
        yield server


@pytest.fixture
async def http(fake: FakeAnthropicServer) -> AsyncIterator[httpx2.AsyncClient]:
    async with httpx2.AsyncClient(base_url=fake.base_url, headers=HEADERS) as client:
        yield client


# -- against the recordings of the real llama.cpp server --------------------------------------


async def test_message_has_the_shape_llama_cpp_sends(http: httpx2.AsyncClient) -> None:
    recorded = load("anthropic_message.json")
    response = await http.post("/v1/messages", json=recorded["request"])
    assert response.status_code == recorded["status"] == 200
    assert response.headers["content-type"].split(";")[0] == "application/json"
    fake, real = response.json(), recorded["body"]

    assert set(fake) == set(real)  # the same top-level fields, no more, no fewer
    assert_covers(shape(fake), shape(real))
    assert fake["type"] == real["type"] == "message"
    assert fake["role"] == real["role"] == "assistant"
    assert fake["model"] == real["model"] == recorded["request"]["model"]
    assert [b["type"] for b in fake["content"]] == [b["type"] for b in real["content"]]
    assert set(fake["content"][0]) == set(real["content"][0])


async def test_stream_has_the_events_llama_cpp_sends(http: httpx2.AsyncClient) -> None:
    recorded = load("anthropic_stream.json")
    response = await http.post("/v1/messages", json=recorded["request"])
    assert response.status_code == 200
    assert response.headers["content-type"] == recorded["content_type"] == "text/event-stream"
    fake = parse_sse(response.text)
    real = parse_sse(recorded["sse"])

    for events in (fake, real):
        # The `event:` line names the data's type, and the order is the API's.
        assert all(name == data["type"] for name, data in events)
        names = " ".join(name for name, _ in events if name != "ping")
        assert re.fullmatch(
            r"message_start( content_block_start( content_block_delta)+ content_block_stop)+"
            r" message_delta message_stop",
            names,
        ), names
    fake_by_type = {name: data for name, data in fake}
    for name, data in real:
        assert name in fake_by_type, f"the fake never sends {name}"
        assert set(fake_by_type[name]) == set(data), name
        assert_covers(shape(fake_by_type[name]), shape(data), name)
    # The real API (not llama.cpp) sends a ping after the first block starts; the SDK skips it.
    assert [name for name, _ in fake][2] == "ping"


async def test_streamed_text_and_usage_add_up(http: httpx2.AsyncClient) -> None:
    body = {**load("anthropic_stream.json")["request"], "max_tokens": 100}
    plain = (await http.post("/v1/messages", json={**body, "stream": False})).json()
    events = parse_sse((await http.post("/v1/messages", json=body)).text)
    text = "".join(d["delta"]["text"] for n, d in events if n == "content_block_delta")
    assert text == plain["content"][0]["text"]
    delta = next(d for n, d in events if n == "message_delta")
    assert delta["usage"]["output_tokens"] == plain["usage"]["output_tokens"]
    assert delta["delta"]["stop_reason"] == plain["stop_reason"] == "end_turn"


# -- the official SDK reads it (differential) -------------------------------------------------


async def test_sdk_reads_messages_and_streams(fake: FakeAnthropicServer) -> None:
    tool = {"name": "weather", "input": {"city": "Paris", "days": [1, 2]}, "id": "toolu_1"}
    fake.script({"text": "Checking the weather.", "tool_use": [tool], "id": "msg_a"})
    fake.script({"text": "Checking the weather.", "tool_use": [tool], "id": "msg_a"})
    async with anthropic.AsyncAnthropic(
        api_key="test", base_url=fake.base_url, max_retries=0
    ) as client:
        kwargs: dict[str, Any] = {
            "model": "claude-x",
            "max_tokens": 100,
            "messages": [{"role": "user", "content": "Weather in Paris?"}],
        }
        message = await client.messages.create(**kwargs)
        async with client.messages.stream(**kwargs) as stream:
            streamed = await stream.get_final_message()

    assert message.model_dump() == streamed.model_dump()
    assert message.id == "msg_a"
    assert message.stop_reason == "tool_use"
    text, call = message.content
    assert text.type == "text"
    assert text.text == "Checking the weather."
    assert call.type == "tool_use"
    assert (call.id, call.name, call.input) == ("toolu_1", "weather", tool["input"])
    assert message.usage.input_tokens > 0
    assert message.usage.output_tokens > 0


# -- replies ---------------------------------------------------------------------------------


async def test_script_is_used_in_order_before_the_reply_function(
    http: httpx2.AsyncClient, fake: FakeAnthropicServer
) -> None:
    seen: list[dict[str, Any]] = []

    def reply(request: dict[str, Any]) -> str:
        seen.append(request)
        return f"function saw {len(request['messages'])} message(s)"

    fake.reply = reply
    fake.script("first", {"text": "second"})
    assert fake.pending == 2
    body = {"model": "m", "max_tokens": 50, "messages": [{"role": "user", "content": "hi"}]}
    texts = [
        (await http.post("/v1/messages", json=body)).json()["content"][0]["text"] for _ in range(3)
    ]
    assert texts == ["first", "second", "function saw 1 message(s)"]
    assert fake.pending == 0
    assert seen == [body]


async def test_async_reply_function_gets_the_request() -> None:
    async def reply(request: dict[str, Any]) -> dict[str, Any]:
        return {"text": request["system"].upper(), "usage": {"input_tokens": 42}}

    async with (
        FakeAnthropicServer(reply, model="ignored") as server,
        httpx2.AsyncClient(base_url=server.base_url, headers=HEADERS) as http,
    ):
        body = {
            "model": "m",
            "max_tokens": 9,
            "system": "shout",
            "messages": [{"role": "user", "content": "x"}],
        }
        message = (await http.post("/v1/messages", json=body)).json()
    assert message["content"] == [{"type": "text", "text": "SHOUT"}]
    assert message["usage"]["input_tokens"] == 42
    assert message["model"] == "m"


async def test_default_reply_is_deterministic(http: httpx2.AsyncClient) -> None:
    body = {"model": "m", "max_tokens": 50, "messages": [{"role": "user", "content": "Hi there"}]}
    first = (await http.post("/v1/messages", json=body)).json()
    second = (await http.post("/v1/messages", json=body)).json()
    assert first["content"] == second["content"]
    assert "Hi there" in first["content"][0]["text"]
    assert first["id"] != second["id"]
    assert first["usage"]["input_tokens"] == 2


async def test_stop_sequences_and_max_tokens_cut_the_text(
    http: httpx2.AsyncClient, fake: FakeAnthropicServer
) -> None:
    fake.script(
        "alpha beta. gamma", "one two three four", {"text": "x y z", "stop_reason": "refusal"}
    )
    base = {"model": "m", "messages": [{"role": "user", "content": "go"}]}
    cut = (
        await http.post("/v1/messages", json={**base, "max_tokens": 50, "stop_sequences": ["."]})
    ).json()
    short = (await http.post("/v1/messages", json={**base, "max_tokens": 2})).json()
    explicit = (await http.post("/v1/messages", json={**base, "max_tokens": 1})).json()
    assert (cut["content"][0]["text"], cut["stop_reason"], cut["stop_sequence"]) == (
        "alpha beta",
        "stop_sequence",
        ".",
    )
    assert (short["content"][0]["text"], short["stop_reason"]) == ("one two ", "max_tokens")
    assert short["usage"]["output_tokens"] == 2
    # An explicit stop reason is taken as it is, text uncut.
    assert (explicit["content"][0]["text"], explicit["stop_reason"]) == ("x y z", "refusal")


async def test_streamed_tool_use_input_arrives_in_pieces(
    http: httpx2.AsyncClient, fake: FakeAnthropicServer
) -> None:
    arguments = {"city": "Paris", "units": "metric", "days": [1, 2, 3]}
    fake.script({"tool_use": [{"name": "weather", "input": arguments}]})
    body = {
        "model": "m",
        "max_tokens": 9,
        "stream": True,
        "messages": [{"role": "user", "content": "w"}],
    }
    events = parse_sse((await http.post("/v1/messages", json=body)).text)
    start = next(d for n, d in events if n == "content_block_start")
    assert start["content_block"]["type"] == "tool_use"
    assert start["content_block"]["input"] == {}
    pieces = [d["delta"]["partial_json"] for n, d in events if n == "content_block_delta"]
    assert len(pieces) > 2
    assert json.loads("".join(pieces)) == arguments
    delta = next(d for n, d in events if n == "message_delta")
    assert delta["delta"]["stop_reason"] == "tool_use"


async def test_count_tokens(http: httpx2.AsyncClient) -> None:
    body = {"model": "m", "system": "a b", "messages": [{"role": "user", "content": "c d e"}]}
    response = await http.post("/v1/messages/count_tokens", json=body)
    assert response.json() == {"input_tokens": 5}


# -- errors ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("status", "kind"),
    [(400, "invalid_request_error"), (401, "authentication_error"), (429, "rate_limit_error"),
     (500, "api_error"), (529, "overloaded_error"), (503, "api_error")],
)  # fmt: skip
async def test_injected_failures_carry_anthropic_error_bodies(
    http: httpx2.AsyncClient, fake: FakeAnthropicServer, status: int, kind: str
) -> None:
    fake.fail(status, headers={"retry-after": "1"})
    body = {"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": "x"}]}
    response = await http.post("/v1/messages", json=body)
    assert response.status_code == status
    assert response.headers["retry-after"] == "1"
    error = response.json()
    assert error["type"] == "error"
    assert error["error"]["type"] == kind
    assert error["error"]["message"]
    # The next request is answered normally again.
    assert (await http.post("/v1/messages", json=body)).status_code == 200


async def test_injected_failure_with_a_body_of_its_own(
    http: httpx2.AsyncClient, fake: FakeAnthropicServer
) -> None:
    fake.fail(418, body={"custom": True})
    response = await http.post("/v1/messages", json={})
    assert (response.status_code, response.json()) == (418, {"custom": True})


@pytest.mark.parametrize("missing", ["model", "max_tokens", "messages"])
async def test_requests_missing_a_required_field_are_rejected(
    http: httpx2.AsyncClient, missing: str
) -> None:
    body = {"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": "x"}]}
    del body[missing]
    response = await http.post("/v1/messages", json=body)
    assert response.status_code == 400
    assert response.json()["error"]["type"] == "invalid_request_error"
    assert missing in response.json()["error"]["message"]


async def test_requests_without_an_api_key_are_rejected(fake: FakeAnthropicServer) -> None:
    async with httpx2.AsyncClient(base_url=fake.base_url) as http:
        response = await http.post("/v1/messages", json={})
    assert response.status_code == 401
    assert response.json()["error"]["type"] == "authentication_error"


async def test_unknown_path_is_404(http: httpx2.AsyncClient) -> None:
    response = await http.get("/v1/models")
    assert response.status_code == 404
    assert response.json()["error"]["type"] == "not_found_error"


def test_bad_script_entries_are_refused() -> None:
    server = FakeAnthropicServer()
    with pytest.raises(TypeError):
        server.script(42)  # type: ignore[arg-type,unused-ignore]
    with pytest.raises(TypeError):
        FakeAnthropicServer("not callable")  # type: ignore[arg-type,unused-ignore]


@pytest.mark.parametrize(
    "messages",
    [[], [{"role": "system", "content": "x"}], [{"role": "user"}], "hello"],
)
async def test_messages_the_api_would_reject_are_rejected(
    http: httpx2.AsyncClient, messages: Any
) -> None:
    body = {"model": "m", "max_tokens": 5, "messages": messages}
    response = await http.post("/v1/messages", json=body)
    assert response.status_code == 400
    assert response.json()["error"]["type"] == "invalid_request_error"


async def test_a_failing_reply_function_is_an_api_error() -> None:
    def reply(request: dict[str, Any]) -> str:
        raise RuntimeError("boom")

    async with (
        FakeAnthropicServer(reply) as server,
        httpx2.AsyncClient(base_url=server.base_url, headers=HEADERS) as http,
    ):
        body = {"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": "x"}]}
        response = await http.post("/v1/messages", json=body)
    assert response.status_code == 500
    assert response.json()["error"]["type"] == "api_error"
    assert "boom" in response.json()["error"]["message"]
