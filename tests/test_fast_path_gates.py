"""Every fast path is taken only inside the dependency versions it was measured with.

Promise: with an SDK, httpx2, pydantic-core or opentelemetry-api outside the series a fast path
was measured with (what a user's `pip install -U` may give), the public path runs instead, says
so in one DEBUG line, and answers exactly as the fast path does: against real loopback servers
(`FakeOpenAIServer`, `FakeAnthropicServer`, `FakeJevServer`), retries included.
"""

from __future__ import annotations

import importlib
import logging

import anyio
import pytest

from jevrefine._http import _json
from jevrefine.jev import JudgeClient, Noul
from jevrefine.messages import ChatOptions, Prompt, UserMessage
from jevrefine.models.anthropic import AnthropicChatModel
from jevrefine.models.openai import OpenAIChatModel
from jevrefine.telemetry import _fastpath
from jevrefine.testing import FakeAnthropicServer, FakeJevServer, FakeOpenAIServer
from support import instant_retries, unmeasured

PROMPT = Prompt((UserMessage("hello"),), ChatOptions(temperature=0.0))
KEY = "sk-gates-0123456789"


async def _openai_answers(server: FakeOpenAIServer) -> tuple[str, str, list[str]]:
    """The model's path, its answer after one retried 503, and its streamed chunks."""
    server.fail(503)
    server.script("a whole answer", "a streamed answer")
    async with OpenAIChatModel("m", base_url=server.base_url, api_key=KEY) as model:
        instant_retries(model)
        with anyio.fail_after(10):
            answer = await model.call(PROMPT)
            chunks = [c.text async for c in model.stream(PROMPT)]
        return model._wire.path, answer.text, chunks


async def test_an_unmeasured_openai_runs_the_sdks_public_request_with_the_same_answers(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async with FakeOpenAIServer() as fast_server:
        fast = await _openai_answers(fast_server)
    caplog.set_level(logging.DEBUG, logger="jevrefine.fastpath")
    with unmeasured("openai"):
        async with FakeOpenAIServer() as public_server:
            public = await _openai_answers(public_server)
    assert fast[0] == "lean"
    assert public[0] == "public"
    assert fast[1:] == public[1:]
    assert fast[1] == "a whole answer"
    assert "".join(public[2]) == "a streamed answer"
    assert len(public_server.requests) == len(fast_server.requests) == 3  # 503, retry, stream
    said = [r.getMessage() for r in caplog.records if r.name == "jevrefine.fastpath"]
    assert any("lean OpenAI request" in m and "is not used" in m and "0.1.0" in m for m in said)


async def _anthropic_answer(server: FakeAnthropicServer) -> tuple[str, str]:
    server.fail(529)
    server.script("claude says hi")
    async with AnthropicChatModel("claude-x", base_url=server.base_url, api_key=KEY) as model:
        instant_retries(model)
        with anyio.fail_after(10):
            answer = await model.call(PROMPT)
        return model._wire.path, answer.text


async def test_an_unmeasured_anthropic_runs_the_sdks_public_create_with_the_same_answer() -> None:
    async with FakeAnthropicServer() as server:
        fast = await _anthropic_answer(server)
    with unmeasured("anthropic"):
        async with FakeAnthropicServer() as server:
            public = await _anthropic_answer(server)
            assert len(server.requests) == 2  # the 529 was retried by the wire's policy
    assert (fast[0], public[0]) == ("lean", "public")
    assert fast[1] == public[1] == "claude says hi"


async def test_an_unmeasured_httpx2_runs_httpx_clients_for_the_jev_side_and_the_models() -> None:
    questions = {"ok": Noul("Is `assistant_answer` polite?")}
    with unmeasured("httpx2"):
        async with (
            FakeJevServer(lambda _state, _questions: {"ok": 0.9}) as jev_server,
            JudgeClient("jev-key", base_url=jev_server.base_url) as client,
            FakeOpenAIServer() as model_server,
        ):
            assert client._wire.path == "httpx"
            response = await client.system_one({"assistant_answer": "Thanks!"}, questions)
            model_server.script("via httpx")
            async with OpenAIChatModel("m", base_url=model_server.base_url, api_key=KEY) as model:
                assert model._wire.path == "public"  # no keep-alive core mounted under the SDK
                assert (await model.call(PROMPT)).text == "via httpx"
    assert response.noul("ok").noul == pytest.approx(0.9)


def test_an_unmeasured_pydantic_core_uses_the_standard_librarys_json_alike() -> None:
    values = [{"a": [1, 2.5, "é", None, True]}, "text", 10**30, {"nested": {"x": []}}]
    fast = [(_json.dumps(v), _json.loads(_json.dumps(v))) for v in values]
    assert _json.loads is _json._fast_loads
    try:
        with unmeasured("pydantic-core"):
            importlib.reload(_json)
            assert _json.loads is _json._plain_loads
            plain = [(_json.dumps(v), _json.loads(_json.dumps(v))) for v in values]
            with pytest.raises(ValueError, match="not JSON compliant"):
                _json.dumps(float("nan"))
    finally:
        importlib.reload(_json)
    assert plain == fast


def test_an_unmeasured_opentelemetry_reads_no_private_global() -> None:
    try:
        with unmeasured("opentelemetry-api"):
            importlib.reload(_fastpath)
            assert _fastpath._trace_api is None
            assert _fastpath._metrics_api is None
            # The public getters answer instead. The tracer's stand-in for "unset" is public;
            # the meter's and the logger's are not, so those count as set: recorded when in
            # doubt, never lost (only the shortcut is lost).
            assert not _fastpath.global_tracer_set()
            assert _fastpath.global_meter_set()
            assert _fastpath.global_logger_set()
    finally:
        importlib.reload(_fastpath)
    assert _fastpath._trace_api is not None
