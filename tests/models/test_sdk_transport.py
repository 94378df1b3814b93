"""The adapters' SDK clients: the lean keep-alive transport for whole responses, the SDK's own
HTTP client wherever the lean one cannot do what it does (proxies, streams).

Real servers on 127.0.0.1: the fake OpenAI / Anthropic servers, a raw asyncio "proxy" that
answers absolute-form requests itself (so a request that reached it went through the proxy),
and a TLS server whose certificate is signed by a CA made here with `openssl`, trusted only
through `SSL_CERT_FILE`.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import json
import shutil
import ssl
import subprocess
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx2
import pytest

import jevrefine as jr
from jevrefine._http import KeepAliveTransport
from jevrefine.exceptions import ModelConnectionError
from jevrefine.models.anthropic import AnthropicChatModel
from jevrefine.models.openai import OpenAIChatModel
from jevrefine.testing import FakeAnthropicServer, FakeOpenAIServer

PROXY_VARIABLES = ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY")

OPENAI_REPLY = {
    "id": "chatcmpl-proxy",
    "object": "chat.completion",
    "created": 1,
    "model": "m",
    "choices": [
        {"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": "hi"}}
    ],
    "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
}
ANTHROPIC_REPLY = {
    "id": "msg_proxy",
    "type": "message",
    "role": "assistant",
    "model": "m",
    "content": [{"type": "text", "text": "hi"}],
    "stop_reason": "end_turn",
    "usage": {"input_tokens": 1, "output_tokens": 1},
}


@pytest.fixture(autouse=True)
def _no_proxy_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in PROXY_VARIABLES:
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.lower(), raising=False)
    monkeypatch.delenv("SSL_CERT_FILE", raising=False)
    monkeypatch.delenv("SSL_CERT_DIR", raising=False)


@contextlib.asynccontextmanager
async def _served(kind: str) -> AsyncIterator[tuple[FakeOpenAIServer | FakeAnthropicServer, str]]:
    """The kind's fake server, running, and the base URL its adapter takes."""
    fake = FakeOpenAIServer() if kind == "openai" else FakeAnthropicServer()
    async with fake:
        yield fake, fake.url + ("/v1" if kind == "openai" else "")


def _model(kind: str, base_url: str, **kwargs: Any) -> OpenAIChatModel | AnthropicChatModel:
    if kind == "openai":
        return OpenAIChatModel("m", base_url=base_url, api_key="sk-test-key", **kwargs)
    return AnthropicChatModel("m", base_url=base_url, api_key="sk-test-key", **kwargs)


def _transport_for(model: OpenAIChatModel | AnthropicChatModel, url: str) -> object:
    http: Any = model.client._client
    return http._transport_for_url(httpx2.URL(url))


class _AnsweringProxy:
    """Answers every request itself, recording its request target (absolute-form via a proxy)."""

    def __init__(self, reply: dict[str, Any], *, tls: ssl.SSLContext | None = None) -> None:
        self.reply = json.dumps(reply).encode()
        self.targets: list[str] = []
        self.tls = tls
        self.server: asyncio.Server | None = None

    async def __aenter__(self) -> _AnsweringProxy:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0, ssl=self.tls)
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self.server is not None
        self.server.close()

    @property
    def port(self) -> int:
        assert self.server is not None
        return int(self.server.sockets[0].getsockname()[1])

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            for _ in range(100):  # keep-alive, bounded
                head = await reader.readuntil(b"\r\n\r\n")
                lines = head.decode("latin-1").split("\r\n")
                self.targets.append(lines[0].split(" ")[1])
                length = 0
                for line in lines[1:]:
                    name, _, value = line.partition(":")
                    if name.strip().lower() == "content-length":
                        length = int(value)
                await reader.readexactly(length)
                writer.write(
                    b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n"
                    b"content-length: %d\r\n\r\n%s" % (len(self.reply), self.reply)
                )
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()


@pytest.mark.parametrize("kind", ["openai", "anthropic"])
async def test_whole_responses_take_the_lean_transport_and_streams_the_sdks(kind: str) -> None:
    async with _served(kind) as (fake, base), _model(kind, base) as model:
        assert isinstance(_transport_for(model, base), KeepAliveTransport)
        assert await jr.ChatClient(model).prompt("hello").content()
        pieces = [p async for p in jr.ChatClient(model).prompt("hello").stream()]
        assert pieces
        stream_http: Any = model._stream_client._client
        stream_transport = stream_http._transport_for_url(httpx2.URL(base))
        assert not isinstance(stream_transport, KeepAliveTransport)
        assert len(fake.requests) == 2


@pytest.mark.parametrize("kind", ["openai", "anthropic"])
async def test_a_whole_response_is_freed_without_the_garbage_collector(kind: str) -> None:
    # The capped body stream once kept its response (the response holds the stream): every
    # call left a reference cycle of ~35 objects for the collector, which at 1,000 refinements
    # in flight piles up between collections. Saved garbage shows any cycle a call leaves.
    async with _served(kind) as (_, base), _model(kind, base) as model:
        client = jr.ChatClient(model)
        assert await client.prompt("warm up").content()  # lazy imports, the connection
        gc.collect()
        gc.disable()
        gc.set_debug(gc.DEBUG_SAVEALL)
        try:
            assert await client.prompt("hello").content()
            gc.collect()
            cyclic = [type(o).__name__ for o in gc.garbage if isinstance(o, httpx2.Response)]
        finally:
            gc.set_debug(0)
            gc.garbage.clear()
            gc.enable()
    assert cyclic == []


@pytest.mark.parametrize("kind", ["openai", "anthropic"])
async def test_an_http_proxy_from_the_environment_is_used(
    monkeypatch: pytest.MonkeyPatch, kind: str
) -> None:
    reply = OPENAI_REPLY if kind == "openai" else ANTHROPIC_REPLY
    async with _AnsweringProxy(reply) as proxy:
        monkeypatch.setenv("HTTP_PROXY", f"http://127.0.0.1:{proxy.port}")
        # Not resolvable: only a request sent through the proxy can be answered.
        base = "http://upstream.invalid:9" + ("/v1" if kind == "openai" else "")
        async with _model(kind, base, max_retries=0) as model:
            assert not isinstance(_transport_for(model, base), KeepAliveTransport)
            assert await jr.ChatClient(model).prompt("hello").content() == "hi"
        assert proxy.targets
        assert proxy.targets[0].startswith("http://upstream.invalid:9/")


@pytest.mark.parametrize("kind", ["openai", "anthropic"])
async def test_no_proxy_sends_the_host_direct_on_the_lean_transport(
    monkeypatch: pytest.MonkeyPatch, kind: str
) -> None:
    fake = FakeOpenAIServer() if kind == "openai" else FakeAnthropicServer()
    async with fake:
        monkeypatch.setenv("HTTP_PROXY", "http://127.0.0.1:9")  # nothing listens there
        monkeypatch.setenv("NO_PROXY", "localhost,127.0.0.1")
        base = fake.url + ("/v1" if kind == "openai" else "")
        async with _model(kind, base, max_retries=0) as model:
            assert isinstance(_transport_for(model, base), KeepAliveTransport)
            assert await jr.ChatClient(model).prompt("hello").content()
        assert len(fake.requests) == 1


def _make_ca(directory: Path) -> tuple[Path, Path, Path]:
    """(CA certificate, server certificate, server key): a CA and a cert for 127.0.0.1."""
    ca_key, ca_cert = directory / "ca.key", directory / "ca.pem"
    key, csr, cert = directory / "server.key", directory / "server.csr", directory / "server.pem"
    ext = directory / "ext.cnf"
    ext.write_text("subjectAltName=IP:127.0.0.1\nbasicConstraints=CA:FALSE\n")

    def openssl(*args: str) -> None:
        subprocess.run(["openssl", *args], check=True, capture_output=True, timeout=60)

    openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(ca_key), "-out",
            str(ca_cert), "-days", "2", "-subj", "/CN=jevrefine test CA")  # fmt: skip
    openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out", str(csr),
            "-subj", "/CN=127.0.0.1")  # fmt: skip
    openssl("x509", "-req", "-in", str(csr), "-CA", str(ca_cert), "-CAkey", str(ca_key),
            "-CAcreateserial", "-out", str(cert), "-days", "2", "-extfile", str(ext))  # fmt: skip
    return ca_cert, cert, key


@pytest.fixture(scope="module")
def certificates(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path]:
    if shutil.which("openssl") is None:
        pytest.skip("needs the openssl command to make a test CA")
    return _make_ca(tmp_path_factory.mktemp("ca"))


@pytest.fixture
async def tls_server(certificates: tuple[Path, Path, Path]) -> AsyncIterator[_AnsweringProxy]:
    _, cert, key = certificates
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(cert, key)
    async with _AnsweringProxy(OPENAI_REPLY, tls=context) as server:
        yield server


async def test_a_ca_from_ssl_cert_file_is_trusted_on_the_lean_transport(
    monkeypatch: pytest.MonkeyPatch,
    certificates: tuple[Path, Path, Path],
    tls_server: _AnsweringProxy,
) -> None:
    monkeypatch.setenv("SSL_CERT_FILE", str(certificates[0]))
    base = f"https://127.0.0.1:{tls_server.port}/v1"
    async with _model("openai", base, max_retries=0) as model:
        assert isinstance(_transport_for(model, base), KeepAliveTransport)
        assert await jr.ChatClient(model).prompt("hello").content() == "hi"
    assert tls_server.targets == ["/v1/chat/completions"]


async def test_without_the_ca_the_certificate_is_refused(tls_server: _AnsweringProxy) -> None:
    base = f"https://127.0.0.1:{tls_server.port}/v1"
    async with _model("openai", base, max_retries=0) as model:
        with pytest.raises(ModelConnectionError):
            await jr.ChatClient(model).prompt("hello").content()
    assert tls_server.targets == []
