"""Secrets: API keys, from arguments or the environment, never show anywhere we print.

Every client is driven through success and through the faults that produce messages (a server
that echoes the key back in its error body, 500s, resets, timeouts), with every logger at DEBUG
and spans recorded in memory; then the logs, span attributes and events, exception messages and
tracebacks (causes included) and the reprs of clients and errors are all searched for the keys.
"""

from __future__ import annotations

import logging
import traceback
from collections.abc import Iterator
from typing import Any

import pytest

import jevrefine as jr
from jevrefine.advisors.self_refine import JudgeErrorPolicy, SelfRefineAdvisor
from jevrefine.jev import JudgeClient, Noul, RetryPolicy
from jevrefine.judge import Judge
from jevrefine.judge.criteria import noul
from jevrefine.messages import ChatOptions, Prompt, UserMessage
from jevrefine.models.anthropic import AnthropicChatModel
from jevrefine.models.openai import OpenAIChatModel
from jevrefine.testing import FakeAnthropicServer, FakeJevServer, FakeOpenAIServer
from support import Telemetry

ARG_KEY = "sk-arg-0f1e2d3c4b5a69788796a5b4c3d2e1f0"
ENV_KEY = "sk-env-a1b2c3d4e5f60718293a4b5c6d7e8f90"
KEYS = (ARG_KEY, ENV_KEY)
PROMPT = Prompt((UserMessage("hello there"),), ChatOptions())


@pytest.fixture
def env_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "TYPESAFE_API_KEY"):
        monkeypatch.setenv(name, ENV_KEY)


def _texts_of_error(error: BaseException) -> Iterator[str]:
    yield str(error)
    yield repr(error)
    yield "".join(traceback.format_exception(error))
    for value in vars(error).values() if hasattr(error, "__dict__") else ():
        yield repr(value)


def _echo(key: str) -> dict[str, Any]:
    """A hostile or careless server's error body that repeats the key it was sent."""
    return {"error": {"message": f"Incorrect API key provided: {key}", "key": key}}


def _assert_clean(texts: list[str]) -> None:
    for text in texts:
        for key in KEYS:
            assert key not in text, f"key leaked in: {text[:300]}"


def _span_texts(telemetry: Telemetry) -> list[str]:
    texts: list[str] = []
    for span in telemetry.spans():
        texts.append(repr(dict(span.attributes or {})))
        texts.append(span.name)
        texts.extend(f"{e.name} {dict(e.attributes or {})}" for e in span.events)
        if span.status.description:
            texts.append(span.status.description)
    return texts


@pytest.mark.usefixtures("env_keys")
@pytest.mark.parametrize("source", ["argument", "environment"])
async def test_judge_client_never_shows_the_key(
    caplog: pytest.LogCaptureFixture, source: str
) -> None:
    """Promise: the Jev key is in no log, span, error, traceback or repr."""
    caplog.set_level(logging.DEBUG)
    telemetry = Telemetry()
    texts: list[str] = []
    async with FakeJevServer() as server:
        key = ARG_KEY if source == "argument" else None
        client = JudgeClient(
            key,
            base_url=server.base_url,
            retry=RetryPolicy(max_retries=1, sleep=_no_wait),
            timeout=0.3,
            tracer_provider=telemetry.tracer_provider,
            meter_provider=telemetry.meter_provider,
        )
        async with client:
            texts.append(repr(client))
            await client.system_one("state", {"q": Noul("Yes?")})
            for fault in (
                lambda: server.fail(401, _echo(key or ENV_KEY)),
                lambda: server.fail(400, f"bad key {key or ENV_KEY}"),
                lambda: server.fail(500, _echo(key or ENV_KEY), times=2),
                # Three: a reused connection's reset is retried once by the transport itself.
                lambda: server.drop_connections(times=3),
                lambda: server.delay(1.0, times=2),
                lambda: server.fail(200, {"model": "m", "answers": {"q": key or ENV_KEY}}),
            ):
                fault()
                with pytest.raises(jr.JevrefineError) as caught:
                    await client.system_one("state", {"q": Noul("Yes?")})
                texts.extend(_texts_of_error(caught.value))
    texts.extend(record.getMessage() for record in caplog.records)
    texts.extend(_span_texts(telemetry))
    _assert_clean(texts)


async def _no_wait(seconds: float) -> None:
    return None


@pytest.mark.usefixtures("env_keys")
@pytest.mark.parametrize("kind", ["openai", "anthropic"])
@pytest.mark.parametrize("source", ["argument", "environment"])
async def test_model_adapters_never_show_the_key(
    caplog: pytest.LogCaptureFixture, kind: str, source: str
) -> None:
    """Promise: the model key is in no log, error, traceback or repr, even when echoed back."""
    caplog.set_level(logging.DEBUG)
    texts: list[str] = []
    key = ARG_KEY if source == "argument" else ENV_KEY
    server = FakeOpenAIServer() if kind == "openai" else FakeAnthropicServer()
    async with server:
        model: OpenAIChatModel | AnthropicChatModel
        if kind == "openai":
            model = OpenAIChatModel(
                "m", base_url=server.url + "/v1",
                api_key=ARG_KEY if source == "argument" else None, max_retries=0, timeout=0.3,
            )  # fmt: skip
        else:
            model = AnthropicChatModel(
                "m", base_url=server.url,
                api_key=ARG_KEY if source == "argument" else None, max_retries=0, timeout=0.3,
            )  # fmt: skip
        async with model:
            texts.append(repr(model))
            texts.append(repr(jr.ChatClient(model)))
            await model.call(PROMPT)
            for fault in (
                lambda: server.fail(401, _echo(key)),
                lambda: server.fail(400, f"bad key {key}"),
                lambda: server.fail(500, _echo(key)),
                lambda: server.drop_connections(),
                lambda: server.delay(1.0),
                lambda: server.fail(200, f"not json {key}".encode()),
            ):
                fault()
                with pytest.raises(jr.JevrefineError) as caught:
                    await model.call(PROMPT)
                texts.extend(_texts_of_error(caught.value))
    texts.extend(record.getMessage() for record in caplog.records)
    _assert_clean(texts)


@pytest.mark.usefixtures("env_keys")
async def test_full_chain_spans_and_logs_never_show_the_keys(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Promise: through the whole chain (model, judge failing open), no key in spans or logs."""
    caplog.set_level(logging.DEBUG)
    telemetry = Telemetry()
    async with FakeOpenAIServer() as model_server, FakeJevServer() as judge_server:
        model = OpenAIChatModel("m", base_url=model_server.base_url, max_retries=0)
        judge_client = JudgeClient(
            base_url=judge_server.base_url,
            retry=RetryPolicy(max_retries=0),
            tracer_provider=telemetry.tracer_provider,
            meter_provider=telemetry.meter_provider,
        )
        judge = Judge(judge_client, [noul("ok", Noul("Is it ok?"), 0.5)])
        client = jr.ChatClient(
            model,
            advisors=[SelfRefineAdvisor(judge, judge_error_policy=JudgeErrorPolicy.FAIL_OPEN)],
            tracer_provider=telemetry.tracer_provider,
            meter_provider=telemetry.meter_provider,
        )
        async with model, judge_client:
            await client.prompt("hello").content()
            judge_server.fail(503, _echo(ENV_KEY))  # fails open, with a warning
            await client.prompt("hello").content()
            model_server.fail(401, _echo(ENV_KEY))
            with pytest.raises(jr.JevrefineError) as caught:
                await client.prompt("hello").content()
        texts = list(_texts_of_error(caught.value))
        texts.extend(repr(x) for x in (client, judge, judge_client, model))
    texts.extend(record.getMessage() for record in caplog.records)
    texts.extend(_span_texts(telemetry))
    assert telemetry.spans()
    _assert_clean(texts)
