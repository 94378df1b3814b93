"""The model side's fault matrix: both adapters on their scripted loopback servers.

The adapters keep their SDK's own retries (connection errors, timeouts, 408, 409, 429, 5xx). Each
case proves the promise for one fault under one policy (`max_retries=2`, the default, or `0`):
retried and succeeded, or the typed `jevrefine.exceptions` error after exactly the promised
number of requests. The SDK's backoff is recorded, not slept, so the matrix runs in seconds.
"""

from __future__ import annotations

import dataclasses
import email.utils
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from jevrefine.exceptions import (
    ModelConnectionError,
    ModelError,
    ModelHTTPError,
    ModelTimeoutError,
)
from jevrefine.messages import ChatOptions, Prompt, UserMessage
from jevrefine.models.anthropic import AnthropicChatModel
from jevrefine.models.base import ChatModel
from jevrefine.models.openai import OpenAIChatModel
from jevrefine.testing import FakeAnthropicServer, FakeOpenAIServer
from jevrefine.testing._http import LoopbackHTTPServer

TIMEOUT = 1.0
"""The timeout for the slow faults, which must hit it once; their retry must answer within it,
even on a loaded machine (at 0.3 s, a retried slow body timed out a second time, now and then,
on a busy 2-core run)."""
SLOW = 2.5
RELAXED = 10.0
"""The timeout for every other fault, which must not hit it even on a loaded machine (a 0.3 s
timeout made a retried 529 time out a second time, now and then, on a busy 2-core run)."""
PROMPT = Prompt((UserMessage("hello there"),), ChatOptions())

Fault = Callable[[LoopbackHTTPServer], None]


class Adapter:
    """One adapter under test: its fake server and a model built on it, backoff recorded."""

    def __init__(self, kind: str, server: LoopbackHTTPServer) -> None:
        self.kind = kind
        self.server = server
        self.delays: list[float] = []

    def model(
        self, retries: int, monkeypatch: pytest.MonkeyPatch, *, timeout: float = RELAXED
    ) -> ChatModel:
        model: OpenAIChatModel | AnthropicChatModel
        if self.kind == "openai":
            assert isinstance(self.server, FakeOpenAIServer)
            model = OpenAIChatModel(
                "m",
                base_url=self.server.base_url,
                api_key="sk-test",
                max_retries=retries,
                timeout=timeout,
            )
        else:
            assert isinstance(self.server, FakeAnthropicServer)
            model = AnthropicChatModel(
                "m",
                base_url=self.server.base_url,
                api_key="sk-ant-test",
                max_retries=retries,
                timeout=timeout,
            )
        wire: Any = model._wire

        async def record(seconds: float) -> None:
            # Keep the policy's wait (Retry-After included) for the assertions; wait 0.
            self.delays.append(seconds)

        wire._policy = dataclasses.replace(wire._policy, sleep=record)
        return model


@pytest.fixture(params=["openai", "anthropic"])
async def adapter(request: pytest.FixtureRequest) -> AsyncIterator[Adapter]:
    server: LoopbackHTTPServer = (
        FakeOpenAIServer() if request.param == "openai" else FakeAnthropicServer()
    )
    async with server:
        yield Adapter(request.param, server)


TRANSIENT: dict[str, tuple[Fault, type[ModelError], int | None]] = {
    "reset before answering": (lambda s: s.drop_connections(), ModelConnectionError, None),
    "reset mid-body": (lambda s: s.reset_mid_body(), ModelConnectionError, None),
    # Only these two need the short TIMEOUT (see `_timeout_for`).
    "slow headers": (lambda s: s.delay(SLOW), ModelTimeoutError, None),
    "slow body": (lambda s: s.slow_body(SLOW), ModelTimeoutError, None),
    "408": (lambda s: s.fail(408), ModelHTTPError, 408),
    "429": (lambda s: s.fail(429), ModelHTTPError, 429),
    "500": (lambda s: s.fail(500), ModelHTTPError, 500),
    "502": (lambda s: s.fail(502), ModelHTTPError, 502),
    "503": (lambda s: s.fail(503), ModelHTTPError, 503),
    "529": (lambda s: s.fail(529), ModelHTTPError, 529),
}

PERMANENT: dict[str, tuple[Fault, type[ModelError], int | None]] = {
    "400": (lambda s: s.fail(400), ModelHTTPError, 400),
    "401": (lambda s: s.fail(401), ModelHTTPError, 401),
    "403": (lambda s: s.fail(403), ModelHTTPError, 403),
    "404": (lambda s: s.fail(404), ModelHTTPError, 404),
    "413": (lambda s: s.fail(413), ModelHTTPError, 413),
    "422": (lambda s: s.fail(422), ModelHTTPError, 422),
    "malformed JSON": (lambda s: s.malformed(), ModelError, None),
    "truncated JSON": (lambda s: s.fail(200, b'{"id": "x", "choices": [{"mess'), ModelError, None),
    "not an object": (lambda s: s.fail(200, [1, 2, 3]), ModelError, None),
    "empty object": (lambda s: s.fail(200, {}), ModelError, None),
}


def _timeout_for(fault: str) -> float:
    return TIMEOUT if fault.startswith("slow") else RELAXED


def _check(error: BaseException, expected: type[ModelError], status: int | None) -> None:
    assert type(error) is expected or (expected is ModelError and isinstance(error, ModelError))
    if status is not None:
        assert isinstance(error, ModelHTTPError)
        assert error.status_code == status


@pytest.mark.parametrize("name", list(TRANSIENT))
async def test_transient_fault_is_retried_and_succeeds(
    adapter: Adapter, name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Promise: one transient fault costs one retry by the SDK; the caller gets the answer."""
    TRANSIENT[name][0](adapter.server)
    async with adapter.model(2, monkeypatch, timeout=_timeout_for(name)) as model:
        response = await model.call(PROMPT)
    assert response.result.output.text
    assert len(adapter.server.requests) == 2
    assert len(adapter.delays) == 1


@pytest.mark.parametrize("name", list(TRANSIENT))
async def test_transient_fault_without_retries_raises_typed(
    adapter: Adapter, name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Promise: with `max_retries=0`, one request and the typed error, transient-flagged."""
    fault, expected, status = TRANSIENT[name]
    fault(adapter.server)
    async with adapter.model(0, monkeypatch, timeout=_timeout_for(name)) as model:
        with pytest.raises(ModelError) as caught:
            await model.call(PROMPT)
    _check(caught.value, expected, status)
    assert caught.value.is_transient
    assert len(adapter.server.requests) == 1


@pytest.mark.parametrize("name", list(PERMANENT))
@pytest.mark.parametrize("retries", [0, 2])
async def test_permanent_fault_is_never_retried(
    adapter: Adapter, name: str, retries: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Promise: client errors and unreadable answers raise at once; the request is sent once."""
    fault, expected, status = PERMANENT[name]
    fault(adapter.server)
    async with adapter.model(retries, monkeypatch) as model:
        with pytest.raises(ModelError) as caught:
            await model.call(PROMPT)
        _check(caught.value, expected, status)
        assert not caught.value.is_transient
        assert len(adapter.server.requests) == 1
        # The adapter is still usable afterwards.
        assert (await model.call(PROMPT)).result.output.text


@pytest.mark.parametrize("form", ["seconds", "http-date"])
async def test_retry_after_is_honoured(
    adapter: Adapter, form: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Promise: the SDK waits what the server's Retry-After says, and the error carries it."""
    value = "7" if form == "seconds" else email.utils.formatdate(time.time() + 30, usegmt=True)
    adapter.server.fail(429, headers={"retry-after": value})
    async with adapter.model(2, monkeypatch) as model:
        await model.call(PROMPT)
    low, high = (7.0, 7.0) if form == "seconds" else (27.0, 30.0)
    assert len(adapter.delays) == 1
    assert low <= adapter.delays[0] <= high
    adapter.server.fail(429, headers={"retry-after": value})
    async with adapter.model(0, monkeypatch) as model:
        with pytest.raises(ModelHTTPError) as caught:
            await model.call(PROMPT)
    assert caught.value.retry_after is not None
    assert low - 1 <= caught.value.retry_after <= high
