"""The public paths: what runs outside every measured series (and on the oldest SDKs supported).

Promise: with the SDKs' public requests and httpx2's own client (every fast path off, as with an
SDK or httpx2 outside the series it was measured with, or the lower bounds of pyproject.toml's
ranges under `nox -s compat`), both adapters answer, stream, retry by the wire's policy and map
errors to jevrefine's types, and `JudgeClient` judges: against real loopback servers.
"""

from __future__ import annotations

from collections.abc import Iterator

import anyio
import pytest

from jevrefine.exceptions import ModelHTTPError, ModelTimeoutError
from jevrefine.jev import JudgeClient, JudgeRateLimitError, Noul, RetryPolicy
from jevrefine.messages import ChatOptions, Prompt, UserMessage
from jevrefine.models.anthropic import AnthropicChatModel
from jevrefine.models.openai import OpenAIChatModel
from jevrefine.testing import FakeAnthropicServer, FakeJevServer, FakeOpenAIServer
from support import instant_retries, unmeasured

PROMPT = Prompt((UserMessage("hello"),), ChatOptions(temperature=0.0, max_tokens=20))
KEY = "sk-public-0123456789"


@pytest.fixture(autouse=True)
def public_paths() -> Iterator[None]:
    """Every fast path off for the clients each test builds."""
    with unmeasured("openai", "anthropic", "httpx2", "pydantic-core"):
        yield


async def test_openai_answers_streams_and_retries_on_the_public_path() -> None:
    waits: list[float] = []
    async with FakeOpenAIServer() as server:
        server.fail(429, headers={"retry-after": "0.2"})
        server.script("one", "two three")
        async with OpenAIChatModel("m", base_url=server.base_url, api_key=KEY) as model:
            assert model._wire.path == "public"
            instant_retries(model, waits)
            with anyio.fail_after(10):
                answer = await model.call(PROMPT)
                streamed = "".join([c.text async for c in model.stream(PROMPT)])
    assert answer.text == "one"
    assert answer.metadata.usage.total_tokens > 0
    assert streamed == "two three"
    assert waits == [0.2]  # the server's Retry-After, by the wire's policy


async def test_openai_maps_a_status_and_a_timeout_on_the_public_path() -> None:
    async with FakeOpenAIServer() as server:
        server.fail(404)
        async with OpenAIChatModel("m", base_url=server.base_url, api_key=KEY) as model:
            with anyio.fail_after(10), pytest.raises(ModelHTTPError) as caught:
                await model.call(PROMPT)
        assert caught.value.status_code == 404
        assert len(server.requests) == 1
        server.delay(3)
        async with OpenAIChatModel(
            "m", base_url=server.base_url, api_key=KEY, timeout=0.2, max_retries=0
        ) as model:
            with anyio.fail_after(10), pytest.raises(ModelTimeoutError):
                await model.call(PROMPT)


async def test_anthropic_answers_and_streams_on_the_public_path() -> None:
    async with FakeAnthropicServer() as server:
        server.fail(529)
        server.script("claude", "claude streams")
        async with AnthropicChatModel("c", base_url=server.base_url, api_key=KEY) as model:
            assert model._wire.path == "public"
            instant_retries(model)
            with anyio.fail_after(10):
                answer = await model.call(PROMPT)
                streamed = "".join([c.text async for c in model.stream(PROMPT)])
    assert answer.text == "claude"
    assert streamed == "claude streams"


async def test_the_jev_client_judges_and_retries_on_httpx() -> None:
    async def no_wait(_seconds: float) -> None:
        return None

    questions = {"polite": Noul("Is `assistant_answer` polite?")}
    async with (
        FakeJevServer(lambda _state, _questions: {"polite": 0.8}) as server,
        JudgeClient(
            "jev-key", base_url=server.base_url, retry=RetryPolicy(sleep=no_wait)
        ) as client,
    ):
        assert client._wire.path == "httpx"
        server.fail(429, headers={"retry-after": "0.1"})
        response = await client.system_one({"assistant_answer": "Thanks!"}, questions)
        server.fail(429, times=3, headers={"retry-after": "0.1"})
        with pytest.raises(JudgeRateLimitError):
            await client.system_one({"assistant_answer": "Thanks!"}, questions)
    assert response.noul("polite").noul == pytest.approx(0.8)
