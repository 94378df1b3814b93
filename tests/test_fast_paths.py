"""The fast paths the benchmarks justify, pinned: each fails loudly when what it relies on moves.

- `CallAdvisorChain.next_call` hands back the next advisor's own coroutine, no wrapper of its own
  (`benchmarks/bench_chain_overhead.py`).
- The Jev client's keep-alive transport (`jevrefine/_http/_httpx.py`) was measured with one
  httpx2 series and relies on how httpx2 treats a transport (`benchmarks/bench_judge_client.py`).
- On asyncio the transport's connections are asyncio protocols, not anyio streams, and read into
  one 64 KiB scratch; its clock is the loop's (`bench_judge_client.py`, issue 23).
- `OpenAIChatModel.call`'s lean request (`jevrefine/models/_lean_openai.py`) calls private helpers
  of one `openai` series for the SDK's headers, retries and errors (`bench_adapter_cpu.py`);
  `AnthropicChatModel.call`'s (`jevrefine/models/_lean_anthropic.py`) those of one `anthropic`
  series. Both adapters close the SDK stream's generator (`models/_sdk.close_stream`).
- `jevrefine._json` encodes and decodes model bodies with one pydantic-core series
  (`bench_adapter_cpu.py`).

The third, the inactive-telemetry shortcut, belongs to the telemetry module and its tests.
"""

from __future__ import annotations

import importlib.metadata
import inspect
from dataclasses import dataclass, field
from typing import Any

import anyio
import httpx2
import pytest

import jevrefine as jr
from jevrefine._http import _clock, _connections, _httpx
from jevrefine.advisors.chain import CallAdvisorChain
from jevrefine.client import ChatClientRequest, ChatClientResponse
from jevrefine.testing import FunctionModel


@dataclass
class _Peek:
    """Looks at what `next_call` hands back before awaiting it."""

    name: str
    order: int
    seen: list[Any] = field(default_factory=list)

    async def advise_call(
        self, request: ChatClientRequest, chain: CallAdvisorChain
    ) -> ChatClientResponse:
        step = chain.next_call(request)
        self.seen.append(step)
        return await step


async def test_next_call_hands_back_the_next_advisors_own_coroutine() -> None:
    """Promise: between two advisors the chain adds no coroutine of its own. An `async def
    next_call` (or any wrapper) would be one more frame resumed at every I/O wake-up, which
    `bench_chain_overhead` measured; if this must change, re-run that benchmark."""
    outer, inner = _Peek("outer", 1), _Peek("inner", 2)
    client = jr.ChatClient(FunctionModel(lambda _messages: "ok"), advisors=[outer, inner])
    assert await client.prompt("hi").content() == "ok"
    assert not inspect.iscoroutinefunction(CallAdvisorChain.next_call)
    [step] = outer.seen
    assert inspect.iscoroutine(step)
    assert step.cr_code is _Peek.advise_call.__code__  # the inner advisor's coroutine itself
    [last] = inner.seen
    assert inspect.iscoroutine(last)
    assert last.cr_code.co_name != "next_call"


def _series(version: str) -> tuple[int, int]:
    major, minor = version.split(".")[:2]
    return int(major), int(minor)


def _assert_series(
    package: str, measured: tuple[tuple[int, int], tuple[int, int]], what: str
) -> None:
    installed = importlib.metadata.version(package)
    low, high = measured
    assert low <= _series(installed) < high, (
        f"{package} {installed} is outside {low}..{high} (exclusive), the series {what}"
    )


def test_httpx2_is_the_series_the_keep_alive_transport_was_measured_with() -> None:
    """Promise: the transport's speed-up holds for the httpx2 it was measured with; another
    series may have changed what the transport works around (its pool, its writes)."""
    _assert_series(
        "httpx2",
        _httpx.MEASURED_WITH_HTTPX2,
        "the Jev keep-alive transport was benchmarked with: re-run `python -m benchmarks --only "
        "bench_judge_client` against httpx's default transport (http_client=httpx2.AsyncClient()), "
        "and if the transport still wins, widen MEASURED_WITH_HTTPX2 in jevrefine/_http/_httpx.py",
    )


class _Raising(httpx2.AsyncBaseTransport):
    def __init__(self) -> None:
        self.timeouts: dict[str, Any] = {}

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        self.timeouts = dict(request.extensions["timeout"])
        raise jr.ResponseTooLargeError("too large", limit=1)


async def test_httpx2_passes_a_transports_own_error_through_and_hands_it_the_timeouts() -> None:
    """Promise: the two httpx2 behaviours the transport relies on: what it raises reaches the
    caller unchanged (the cap's error), and the per-phase timeouts arrive in the request."""
    transport = _Raising()
    async with httpx2.AsyncClient(transport=transport) as http:
        with pytest.raises(jr.ResponseTooLargeError):
            await http.get("http://127.0.0.1:9/", timeout=httpx2.Timeout(3.0, pool=None))
    assert transport.timeouts == {"connect": 3.0, "read": 3.0, "write": 3.0, "pool": None}


async def test_on_asyncio_connections_are_protocols_that_read_into_a_bounded_scratch() -> None:
    """Promise: the asyncio fast path is the one taken, and it relies on asyncio calling
    `get_buffer` before each read and reading no more than the buffer it got (the bound on what
    a flood can make it hold); anyio's cancel scope cancels its wait. If this fails, the transport
    is back on anyio streams or over-reads: re-run `python -m benchmarks.bench_judge_client`."""
    import asyncio

    sizes: list[int] = []
    landed = _connections.PeerConnection.buffer_updated

    served = asyncio.Event()

    async def flood(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            await reader.readuntil(b"\r\n\r\n")
            writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: 1048576\r\n\r\n" + b"x" * (1 << 20))
            await writer.drain()
            while await reader.read(65536):  # then silent until the client leaves
                pass
        finally:
            writer.close()
            served.set()

    server = await asyncio.start_server(flood, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    transport = _httpx.KeepAliveTransport()
    try:
        _connections.PeerConnection.buffer_updated = lambda self, n: (  # type: ignore[method-assign]
            sizes.append(n),
            landed(self, n),
        )[-1]
        raw = await transport.exchange(
            "GET", "http", "127.0.0.1", port, b"/", [(b"host", b"h")], b""
        )
        assert len(raw.content) == 1 << 20
        [connection] = transport._idle[("http", "127.0.0.1", port)]
        assert type(connection) is _connections.PeerConnection
        assert sizes
        assert max(sizes) <= 65536
        with anyio.move_on_after(0.1) as scope:  # the server says nothing more: a bare wait
            await transport.exchange("GET", "http", "127.0.0.1", port, b"/", [], b"")
        assert scope.cancelled_caught
        assert abs(_clock.loop_time() - anyio.current_time()) < 0.05
    finally:
        _connections.PeerConnection.buffer_updated = landed  # type: ignore[method-assign]
        await transport.aclose()
        with anyio.fail_after(5):
            await served.wait()
        server.close()
        await server.wait_closed()


def test_openai_is_the_series_the_lean_request_was_measured_with() -> None:
    """Promise: `OpenAIChatModel.call`'s lean request (`models/_lean_openai.py`) calls private
    helpers of one `openai` series; another may have moved them or changed what they mean."""
    from jevrefine._http import _vendor_openai as _lean_openai

    _assert_series(
        "openai",
        _lean_openai.MEASURED_WITH_OPENAI,
        "the lean request was written against: check the SDK helpers it calls (this file's "
        "next test), re-run `python -m benchmarks.bench_adapter_cpu`, then widen "
        "MEASURED_WITH_OPENAI in jevrefine/models/_lean_openai.py",
    )


_LEAN_HELPERS: dict[str, list[str]] = {
    "_build_headers": ["self", "options", "retries_taken"],
    "_should_retry": ["self", "response"],
    "_calculate_retry_timeout": ["self", "remaining_retries", "options", "response_headers"],
    "_make_status_error_from_response": ["self", "response"],
    "_prepare_url": ["self", "url"],
}
"""The private helpers `models/_lean.py` calls on either SDK client (one generator made both),
with the parameters it passes."""


def _parameters(sdk_class: type, name: str) -> list[str]:
    return list(inspect.signature(getattr(sdk_class, name)).parameters)


def _assert_lean_helpers(sdk_class: type) -> None:
    for name, expected in _LEAN_HELPERS.items():
        assert _parameters(sdk_class, name) == expected, name


def test_the_openai_helpers_the_lean_request_calls_keep_their_shape() -> None:
    """Promise: each private SDK helper the lean request calls exists with the parameters it
    passes, and a client the adapter builds has none of the SDK's other auth modes."""
    from openai import AsyncOpenAI

    from jevrefine._http._vendor_openai import eligible

    _assert_lean_helpers(AsyncOpenAI)
    client: Any = AsyncOpenAI(api_key="sk-pinned-0123", base_url="http://127.0.0.1:9/v1")
    for name in ("_platform", "_provider_runtime", "_api_key_provider", "_idempotency_header"):
        assert hasattr(client, name), name
    assert eligible(client)


def test_pydantic_core_is_the_series_the_json_codec_was_measured_with() -> None:
    """Promise: `jevrefine._json` (model bodies in and out) was measured faster than the standard
    library with one pydantic-core series, and relies on how it writes non-finite floats (`NaN`,
    `Infinity`, which `_json.dumps` hands to `json.dumps` to refuse)."""
    import pydantic_core

    from jevrefine._http import _json

    _assert_series(
        "pydantic-core",
        _json.MEASURED_WITH_PYDANTIC_CORE,
        "jevrefine/_json.py was measured with: re-run `python -m benchmarks.bench_adapter_cpu` "
        "(the OpenAIChatModel.call row), then widen MEASURED_WITH_PYDANTIC_CORE",
    )
    assert pydantic_core.to_json([float("nan"), float("inf")]) == b"[NaN,Infinity]"


def test_anthropic_is_the_series_the_lean_request_was_measured_with() -> None:
    """Promise: `AnthropicChatModel.call`'s lean request (`models/_lean_anthropic.py`) calls
    private helpers of one `anthropic` series; another may have moved them or changed them."""
    from jevrefine._http import _vendor_anthropic as _lean_anthropic

    _assert_series(
        "anthropic",
        _lean_anthropic.MEASURED_WITH_ANTHROPIC,
        "the lean request was written against: check the SDK helpers it calls (this file's "
        "next test), re-run `python -m benchmarks.bench_adapter_cpu`, then widen "
        "MEASURED_WITH_ANTHROPIC in jevrefine/models/_lean_anthropic.py",
    )


def test_the_anthropic_helpers_the_lean_request_calls_keep_their_shape() -> None:
    """Promise: each private SDK helper the lean request calls exists with the parameters it
    passes, `create`'s own timeout is one for every `max_tokens` it lets through (the lean
    request builds its headers once), and a client the adapter builds has none of the SDK's
    other auth modes."""
    from anthropic import AsyncAnthropic
    from anthropic._constants import DEFAULT_TIMEOUT

    from jevrefine._http._vendor_anthropic import eligible

    _assert_lean_helpers(AsyncAnthropic)
    assert _parameters(AsyncAnthropic, "_calculate_nonstreaming_timeout") == [
        "self",
        "max_tokens",
        "max_nonstreaming_tokens",
    ]
    client: Any = AsyncAnthropic(
        api_key="sk-ant-pinned-0123", base_url="http://127.0.0.1:9", open_telemetry=False
    )
    assert client.timeout == DEFAULT_TIMEOUT
    timeouts = {str(client._calculate_nonstreaming_timeout(n, None)) for n in (1, 1024, 21_333)}
    assert len(timeouts) == 1
    with pytest.raises(ValueError, match="Streaming is required"):
        client._calculate_nonstreaming_timeout(100_000, None)
    for name in (
        "_platform",
        "_token_cache",
        "_credential_headers",
        "_idempotency_header",
        "_tracer",
        "credentials",
        "auth_token",
        "middleware",
    ):
        assert hasattr(client, name), name
    assert eligible(client)


async def test_the_sdk_streams_keep_the_generator_the_adapters_close() -> None:
    """Promise: both SDKs' `AsyncStream` read through an async generator at `_iterator`, which
    `models/_sdk.close_stream` closes (else the collector does, racing httpx's own close)."""
    import anthropic
    import openai

    clients: list[Any] = [
        openai.AsyncOpenAI(api_key="sk-pinned-0123", base_url="http://127.0.0.1:9/v1"),
        anthropic.AsyncAnthropic(api_key="sk-ant-pinned-0123", base_url="http://127.0.0.1:9"),
    ]
    for client, stream_type in zip(
        clients, (openai.AsyncStream, anthropic.AsyncStream), strict=True
    ):
        response = httpx2.Response(200, content=b"", request=httpx2.Request("POST", "http://x/"))
        stream: Any = stream_type(cast_to=object, response=response, client=client)
        iterator = stream._iterator
        assert inspect.isasyncgen(iterator), type(stream)
        await iterator.aclose()
        await stream.close()
        await client.close()
