"""RT-11: an answer that is not valid HTTP/1.1 is never retried, on any path.

Promise: the keep-alive core refuses what RFC 9112 forbids (bare-LF line ends, obs-fold,
`Transfer-Encoding` with `Content-Length`, more than 100 header lines, a header line over
8 KiB). Through either model adapter and through `JudgeClient` that is a typed, non-transient
error after exactly one request (the server would answer the same again, and each resend is
billed), and a bare-LF head is refused when it arrives, not after the timeout. Each against a raw
asyncio peer on 127.0.0.1 that keeps the connection open (a peer that closed it would end the
read anyway).
"""

from __future__ import annotations

import json

import anyio
import pytest
from _hostile_jev import PROXY_VARIABLES, HostileServer

import jevrefine as jr
from jevrefine.exceptions import ModelResponseError
from jevrefine.jev import JudgeClient, JudgeResponseError, Noul, RetryPolicy
from jevrefine.models.anthropic import AnthropicChatModel
from jevrefine.models.openai import OpenAIChatModel
from support import instant_retries

KEY = "sk-malformed-0123456789"
BODY = json.dumps({"id": "x", "choices": []}).encode()
LENGTH = b"content-length: %d" % len(BODY)

MALFORMED: dict[str, bytes] = {
    "bare LF line ends": b"HTTP/1.1 200 OK\ncontent-type: application/json\n" + LENGTH + b"\n\n",
    "obs-fold": b"HTTP/1.1 200 OK\r\nx-a: one\r\n  two\r\n" + LENGTH + b"\r\n\r\n" + BODY,
    "TE and CL": b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n" + LENGTH + b"\r\n\r\n",
    "101 header lines": b"HTTP/1.1 200 OK\r\n"
    + b"".join(b"x-h%d: v\r\n" % i for i in range(101))
    + LENGTH
    + b"\r\n\r\n"
    + BODY,
    "a 9 KiB header line": b"HTTP/1.1 200 OK\r\nx-big: "
    + b"v" * 9000
    + b"\r\n"
    + LENGTH
    + b"\r\n\r\n"
    + BODY,
}
TIMEOUT = 20.0
"""The per-read timeout: far longer than the test may take, so a wait for it would show."""


@pytest.fixture(autouse=True)
def _no_proxy(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in PROXY_VARIABLES:
        monkeypatch.delenv(name, raising=False)


def _openai(server: HostileServer) -> jr.ChatModel:
    return OpenAIChatModel(
        "m", base_url=server.base_url + "/v1", api_key=KEY, max_retries=2, timeout=TIMEOUT
    )


def _anthropic(server: HostileServer) -> jr.ChatModel:
    return AnthropicChatModel(
        "m", base_url=server.base_url, api_key=KEY, max_retries=2, timeout=TIMEOUT
    )


@pytest.mark.parametrize("name", list(MALFORMED))
@pytest.mark.parametrize("adapter", [_openai, _anthropic], ids=["openai", "anthropic"])
async def test_a_malformed_answer_is_one_request_and_a_response_error(name, adapter) -> None:
    async with HostileServer(MALFORMED[name], close=False) as server:
        model = instant_retries(adapter(server))
        assert model._wire.path == "lean"
        try:
            with anyio.fail_after(5), pytest.raises(ModelResponseError) as caught:
                await model.call(jr.Prompt((jr.UserMessage("hi"),)))
        finally:
            await model.aclose()
    assert len(server.requests) == 1, "a malformed answer was asked for again (and billed)"
    assert not caught.value.is_transient
    assert "not valid HTTP" in str(caught.value)


@pytest.mark.parametrize("name", list(MALFORMED))
async def test_the_jev_client_sends_once_too(name: str) -> None:
    async def no_wait(_seconds: float) -> None:
        return None

    async with (
        HostileServer(MALFORMED[name], close=False) as server,
        JudgeClient(
            KEY, base_url=server.base_url, timeout=TIMEOUT, retry=RetryPolicy(sleep=no_wait)
        ) as client,
    ):
        with anyio.fail_after(5), pytest.raises(JudgeResponseError):
            await client.system_one({"assistant_answer": "x"}, {"q": Noul("Is it?")})
    assert len(server.requests) == 1
