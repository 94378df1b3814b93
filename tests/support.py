"""Helpers shared by the tests (importable as `support`: pytest puts tests/ on the path)."""

from __future__ import annotations

import contextlib
import socket
from collections.abc import AsyncIterator, Iterator
from typing import Any

import anyio
import pydantic
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import jevrefine as jr
from jevrefine import _measured
from jevrefine._http import KeepAliveTransport
from jevrefine.models.base import ChatModel


@contextlib.contextmanager
def unmeasured(*distributions: str, version: str = "0.1.0") -> Iterator[None]:
    """Pretend `distributions` are installed at `version`, outside every measured series.

    What a user's `pip install -U` (or an old pin) gives: every fast path leaning on them is
    checked afresh (`takes_fast_path`'s cache is cleared on entry and exit), and the public
    path must run instead. Clients built inside the block keep the path they chose.
    """
    real = _measured.installed_version

    def fake(distribution: str) -> str | None:
        return version if distribution in distributions else real(distribution)

    _measured.installed_version = fake
    _measured.takes_fast_path.cache_clear()
    try:
        yield
    finally:
        _measured.installed_version = real
        _measured.takes_fast_path.cache_clear()


def measured_fast_paths() -> list[_measured.FastPath]:
    """Every fast path that leans on a dependency, as declared in the module that takes it."""
    from jevrefine._http import _httpx, _json, _vendor_anthropic, _vendor_openai
    from jevrefine.telemetry import _fastpath

    return [
        _httpx.HTTPX2_CORE,
        _vendor_openai.OPENAI_LEAN,
        _vendor_anthropic.ANTHROPIC_LEAN,
        _json.PYDANTIC_CORE_JSON,
        _fastpath.OTEL_GLOBALS,
    ]


def instant_retries(model: Any, waits: list[float] | None = None) -> Any:
    """`model` (an SDK adapter) with its retry policy's waits made instant, recorded in `waits`.

    The policy's own computed wait (Retry-After included) is what `waits` gets.
    """
    import dataclasses

    async def no_wait(seconds: float) -> None:
        if waits is not None:
            waits.append(seconds)

    wire = model._wire
    wire._policy = dataclasses.replace(wire._policy, sleep=no_wait)
    return model


def sdk_path(make: Any) -> Any:
    """`make()` built on the SDK's public request path (its SDK outside the measured series)."""
    with unmeasured("openai", "anthropic"):
        return make()


class Telemetry:
    """An SDK tracer and meter provider with in-memory exporters."""

    def __init__(self) -> None:
        self.exporter = InMemorySpanExporter()
        self.tracer_provider = TracerProvider()
        self.tracer_provider.add_span_processor(SimpleSpanProcessor(self.exporter))
        self.reader = InMemoryMetricReader()
        self.meter_provider = MeterProvider(metric_readers=[self.reader])

    def spans(self) -> list[ReadableSpan]:
        return list(self.exporter.get_finished_spans())

    def metrics(self) -> dict[str, list[object]]:
        """Metric name -> data points."""
        data = self.reader.get_metrics_data()
        found: dict[str, list[object]] = {}
        if data is None:
            return found
        for resource in data.resource_metrics:
            for scope in resource.scope_metrics:
                for metric in scope.metrics:
                    found.setdefault(metric.name, []).extend(metric.data.data_points)
        return found


class Sleeps:
    """An injected `sleep` (`RetryPolicy(sleep=...)`): records the delays, returns at once."""

    def __init__(self) -> None:
        self.delays: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.delays.append(seconds)


def closed_port() -> int:
    """A port on 127.0.0.1 that was free a moment ago, and that nobody listens on."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


class City(pydantic.BaseModel):
    """A small structured-output type for `entity()` tests."""

    name: str
    population: int


def pool_connections(model: ChatModel) -> tuple[int, int]:
    """(busy, idle) connections of the adapter's HTTP clients, all pools together.

    An adapter that built its SDK clients has two: whole responses on the lean keep-alive
    transport (mounted for the base URL) and streams on the SDK's default httpx pool.
    """
    sdks: Any = [model.client]  # type: ignore[attr-defined]
    stream_client = getattr(model, "_stream_client", None)
    if stream_client is not None and stream_client is not sdks[0]:
        sdks.append(stream_client)
    busy = idle = 0
    for sdk in sdks:
        http = sdk._client
        for transport in (http._transport, *http._mounts.values()):
            if isinstance(transport, KeepAliveTransport):
                slots = transport._slots
                busy += 0 if slots is None else transport._max_connections - slots.value
                idle += sum(len(stack) for stack in transport._idle.values())
            elif transport is not None and hasattr(transport, "_pool"):
                connections = transport._pool.connections
                busy += sum(1 for c in connections if not (c.is_idle() or c.is_closed()))
                idle += sum(1 for c in connections if c.is_idle())
    return busy, idle


class CallProbe(jr.BaseAdvisor):
    """The outermost advisor: counts calls and streams started, in flight and finished, and
    notes a cancel."""

    name = "probe"
    order = jr.HIGHEST_PRECEDENCE

    def __init__(self) -> None:
        self.started = 0
        self.in_flight = 0
        self.finished = 0
        self.peak = 0
        """The most calls or streams in flight at once."""
        self.cancelled = anyio.Event()

    @contextlib.contextmanager
    def _counted(self) -> Iterator[None]:
        self.started += 1
        self.in_flight += 1
        self.peak = max(self.peak, self.in_flight)
        try:
            yield
        except anyio.get_cancelled_exc_class():
            self.cancelled.set()
            raise
        finally:
            self.in_flight -= 1
        self.finished += 1

    async def advise_call(
        self, request: jr.ChatClientRequest, chain: jr.CallAdvisorChain
    ) -> jr.ChatClientResponse:
        with self._counted():
            return await chain.next_call(request)

    async def advise_stream(
        self, request: jr.ChatClientRequest, chain: jr.CallAdvisorChain
    ) -> AsyncIterator[jr.ChatClientResponse]:
        with self._counted():
            async for chunk in chain.next_stream(request):
                yield chunk
