"""Shared fixtures: the real local model server (once per session) and OpenTelemetry in memory."""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Iterator

import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from jevrefine.local import LocalModelServer, LocalModelUnavailableError


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="session")
def local_server() -> Iterator[LocalModelServer]:
    """The real llama.cpp server with SmolLM2, one thread, shared by the whole session.

    Skipped (with the reason) only when xllamacpp is missing and CI is unset; under CI=true a
    missing local model fails the run.
    """
    if importlib.util.find_spec("xllamacpp") is None and not os.environ.get("CI"):
        pytest.skip('the local model needs xllamacpp: pip install "jevrefine[local]"')
    server = LocalModelServer(threads=1, ctx=4096)
    try:
        server.start()
    except LocalModelUnavailableError as exc:
        if os.environ.get("CI"):
            raise
        pytest.skip(f"local model unavailable: {exc}")
    yield server
    server.stop()


class Telemetry:
    """An SDK tracer and meter provider with in-memory exporters."""

    def __init__(self) -> None:
        self.exporter = InMemorySpanExporter()
        self.tracer_provider = TracerProvider()
        self.tracer_provider.add_span_processor(SimpleSpanProcessor(self.exporter))
        self.reader = InMemoryMetricReader()
        self.meter_provider = MeterProvider(metric_readers=[self.reader])

    def spans(self):  # type: ignore[no-untyped-def]
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


@pytest.fixture
def otel() -> Telemetry:
    return Telemetry()
