"""RT-4: a password in a base URL is a secret, like the API key.

Promise: `https://alice:S3CRET@host/v1` is shown as `https://***@host/v1` wherever a URL is shown
(one helper, `_http._headers.redact_url`): the adapters' and `JudgeClient`'s repr, every
connection and status error, the retry log lines, and `check-config`'s listing. Against a port
that refuses connections and a raw loopback server that answers 500 (so every error path runs).
"""

from __future__ import annotations

import logging
import socket

import anyio
import pytest
from _hostile_jev import PROXY_VARIABLES, HostileServer, response

import jevrefine as jr
from jevrefine._http._headers import redact_url
from jevrefine.cli._config import load_config
from jevrefine.jev import JudgeClient, JudgeError, Noul, RetryPolicy
from jevrefine.models.anthropic import AnthropicChatModel
from jevrefine.models.openai import OpenAIChatModel
from support import instant_retries

PASSWORD = "S3CRET-pass-word"
KEY = "sk-key-0123456789"
PROMPT = jr.Prompt((jr.UserMessage("hi"),))


@pytest.fixture(autouse=True)
def _no_proxy(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in PROXY_VARIABLES:
        monkeypatch.delenv(name, raising=False)


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _bases(port: str) -> tuple[str, str]:
    """The answering server's URL and a refusing port's, both with a password."""
    return (
        f"http://alice:{PASSWORD}@127.0.0.1:{port}",
        f"http://alice:{PASSWORD}@127.0.0.1:{_closed_port()}",
    )


def _texts(error: BaseException | None) -> list[str]:
    """Every text a traceback of `error` prints: its chain of causes and contexts shown."""
    texts: list[str] = []
    while error is not None:
        texts += [str(error), repr(error)]
        error = error.__cause__ or (None if error.__suppress_context__ else error.__context__)
    return texts


def test_the_helper_blanks_user_info_and_leaves_other_urls_alone() -> None:
    assert (
        redact_url(f"https://alice:{PASSWORD}@proxy:8443/v1?x=1") == "https://***@proxy:8443/v1?x=1"
    )
    assert redact_url("https://token-only@proxy/v1") == "https://***@proxy/v1"
    assert redact_url("http://127.0.0.1:8080/v1") == "http://127.0.0.1:8080/v1"
    assert redact_url("http://[::1") == "<a URL that does not parse>"


@pytest.mark.parametrize("kind", ["openai", "anthropic"])
async def test_model_errors_and_reprs_never_show_the_password(
    kind: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    busy = response(b'{"error": {"message": "busy"}}', status=b"500 Busy")
    async with HostileServer(busy, close=False) as server:
        port = server.base_url.rsplit(":", 1)[1]
        for base in (
            f"http://alice:{PASSWORD}@127.0.0.1:{port}",
            f"http://alice:{PASSWORD}@127.0.0.1:{_closed_port()}",
        ):
            if kind == "openai":
                model: jr.ChatModel = OpenAIChatModel(
                    "m", base_url=base + "/v1", api_key="sk-x-0123456789", max_retries=1
                )
            else:
                model = AnthropicChatModel(
                    "m", base_url=base, api_key="sk-x-0123456789", max_retries=1
                )
            instant_retries(model)
            try:
                assert PASSWORD not in repr(model)
                with anyio.fail_after(10), pytest.raises(jr.ModelError) as caught:
                    await model.call(PROMPT)
            finally:
                await model.aclose()
            for text in _texts(caught.value):
                assert PASSWORD not in text, text
    assert PASSWORD not in caplog.text


async def test_judge_client_errors_logs_and_repr_never_show_the_password(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)

    async def no_wait(_seconds: float) -> None:
        return None

    busy = response(b'{"detail": "busy"}', status=b"503 Busy")
    async with HostileServer(busy, close=False) as server:
        port = server.base_url.rsplit(":", 1)[1]
        for base in (
            f"http://alice:{PASSWORD}@127.0.0.1:{port}",
            f"http://alice:{PASSWORD}@127.0.0.1:{_closed_port()}",
        ):
            async with JudgeClient(
                "jev-key-0123456789", base_url=base, retry=RetryPolicy(sleep=no_wait)
            ) as client:
                assert PASSWORD not in repr(client)
                with anyio.fail_after(10), pytest.raises(JudgeError) as caught:
                    await client.system_one({"assistant_answer": "x"}, {"q": Noul("Is it?")})
            for text in _texts(caught.value):
                assert PASSWORD not in text, text
    assert PASSWORD not in caplog.text


def test_check_config_masks_the_password_as_it_masks_the_keys() -> None:
    config = load_config(None, {"model": {"base_url": f"https://alice:{PASSWORD}@proxy/v1"}})
    described = config.describe()
    assert described["model"]["base_url"] == "https://***@proxy/v1"
    assert PASSWORD not in repr(described)
