"""The fast paths the benchmarks justify, pinned (`nox -s perf`, not the suite).

Each fails loudly when what a fast path relies on moves, so that a dependency bump is a perf
task: outside the measured series the library already runs the public path, and the suite
(`tests/test_fast_path_gates.py`) shows it answering correctly there.

- Every `jevrefine._measured.FastPath` (the keep-alive core on httpx2, the lean OpenAI and
  Anthropic requests on the SDKs' private helpers, the JSON codec on pydantic-core, the
  inactive-telemetry check on OpenTelemetry's globals): the installed version is the measured
  one, and the private names each reads still exist with the shapes it uses.
- `CallAdvisorChain.next_call` hands back the next advisor's own coroutine, no wrapper of its own
  (`benchmarks/bench_chain_overhead.py`).
- On asyncio the core's connections are asyncio protocols, not anyio streams, and read into one
  64 KiB scratch; its clock is the loop's (`bench_judge_client.py`).
- Both adapters close the SDK stream's generator (`models/_sdk.close_stream`).
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass, field
from typing import Any

import anyio
import httpx2
import pytest
from opentelemetry import _logs, metrics, trace

import jevrefine as jr
from jevrefine._http import _clock, _connections, _httpx
from jevrefine._measured import FastPath, installed_version, takes_fast_path
from jevrefine.advisors.chain import CallAdvisorChain
from jevrefine.client import ChatClientRequest, ChatClientResponse
from jevrefine.telemetry import _fastpath
from jevrefine.testing import FunctionModel
from support import measured_fast_paths


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


FAST_PATHS: list[FastPath] = measured_fast_paths()
"""Every fast path that leans on a dependency, as declared where it is taken."""


@pytest.mark.parametrize("path", FAST_PATHS, ids=lambda p: p.distribution)
def test_the_installed_dependency_is_the_series_the_fast_path_was_measured_with(
    path: FastPath,
) -> None:
    """Promise (perf): the installed version is the one the fast path was measured with, so
    this run takes it. Outside the series the library runs the public path (the suite's
    `tests/test_fast_path_gates.py` shows it answering correctly); this says the speed-up is
    not being had: re-run the benchmark and widen `measured` where the fast path is declared."""
    installed = installed_version(path.distribution)
    assert installed is not None
    assert path.covers(installed), (
        f"{path.distribution} {installed} is outside {path.measured} (exclusive), the series "
        f"{path.name} was measured with: check what it relies on (this file's other tests), "
        f"re-run `{path.benchmark}`, and if it still pays, widen `measured`"
    )
    assert takes_fast_path(path)


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

        def recording(self: _connections.PeerConnection, nbytes: int) -> None:
            sizes.append(nbytes)
            landed(self, nbytes)

        _connections.PeerConnection.buffer_updated = recording  # type: ignore[method-assign]
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


_LEAN_HELPERS: dict[str, list[str]] = {
    "_build_headers": ["self", "options", "retries_taken"],
    "_prepare_url": ["self", "url"],
}
"""The private helpers `_http/_vendor.py` calls on either SDK client (one generator made both),
with the parameters it passes (retries and status errors are the wire's own)."""


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


def test_the_json_codec_relies_on_how_pydantic_core_writes_non_finite_floats() -> None:
    """Promise: `jevrefine._http._json` relies on how pydantic-core writes non-finite floats
    (`NaN`, `Infinity`, which `_json.dumps` hands to `json.dumps` to refuse)."""
    import pydantic_core

    assert pydantic_core.to_json([float("nan"), float("inf")]) == b"[NaN,Infinity]"


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


def test_the_opentelemetry_private_names_the_telemetry_check_reads_exist() -> None:
    # The module globals the public getters return, and the meter API's stand-in class.
    assert hasattr(trace, "_TRACER_PROVIDER")
    assert _fastpath._metrics_api is not None
    assert hasattr(_fastpath._metrics_api, "_METER_PROVIDER")
    assert _fastpath.PROXY_METER_PROVIDERS
    assert isinstance(metrics.get_meter_provider(), _fastpath.PROXY_METER_PROVIDERS)
    # The logs API's, for the self-refine loop's `Telemetry.listening()`.
    assert _fastpath._logs_api is not None
    assert hasattr(_fastpath._logs_api, "_LOGGER_PROVIDER")
    assert isinstance(_logs.get_logger_provider(), _fastpath._PROXY_LOGGER_PROVIDERS)
