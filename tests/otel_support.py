"""OpenTelemetry SDK in memory (traces, metrics, logs), with a sampler that records what each span
carried at its start. Importable as `otel_support` (tests/ is on the path)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from opentelemetry.context import Context
from opentelemetry.sdk._logs import LoggerProvider, ReadableLogRecord
from opentelemetry.sdk._logs.export import InMemoryLogRecordExporter, SimpleLogRecordProcessor
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader, Metric
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.trace.sampling import Decision, Sampler, SamplingResult
from opentelemetry.trace import Link, SpanKind, TraceState


@dataclass
class Sampled:
    """What a sampler sees of a span: its name, kind and attributes at start."""

    name: str
    kind: SpanKind
    attributes: dict[str, Any]


@dataclass
class RecordingSampler(Sampler):
    """Samples everything and remembers what each span carried when it started."""

    seen: list[Sampled] = field(default_factory=list)

    def should_sample(
        self,
        parent_context: Context | None,
        trace_id: int,
        name: str,
        kind: SpanKind | None = None,
        attributes: Mapping[str, Any] | None = None,
        links: Sequence[Link] | None = None,
        trace_state: TraceState | None = None,
    ) -> SamplingResult:
        self.seen.append(Sampled(name, kind or SpanKind.INTERNAL, dict(attributes or {})))
        return SamplingResult(Decision.RECORD_AND_SAMPLE, attributes)

    def get_description(self) -> str:
        return "RecordingSampler"


class Otel:
    """Tracer, meter and logger providers, each exporting to memory."""

    def __init__(self) -> None:
        self.sampler = RecordingSampler()
        self.span_exporter = InMemorySpanExporter()
        self.tracer_provider = TracerProvider(sampler=self.sampler)
        self.tracer_provider.add_span_processor(SimpleSpanProcessor(self.span_exporter))
        self.reader = InMemoryMetricReader()
        self.meter_provider = MeterProvider(metric_readers=[self.reader])
        self.log_exporter = InMemoryLogRecordExporter()
        self.logger_provider = LoggerProvider()
        self.logger_provider.add_log_record_processor(SimpleLogRecordProcessor(self.log_exporter))

    @property
    def providers(self) -> dict[str, Any]:
        """The three providers as constructor keywords."""
        return {
            "tracer_provider": self.tracer_provider,
            "meter_provider": self.meter_provider,
            "logger_provider": self.logger_provider,
        }

    def spans(self) -> list[ReadableSpan]:
        """Finished spans, in start order."""
        return sorted(self.span_exporter.get_finished_spans(), key=lambda s: s.start_time or 0)

    def logs(self) -> list[ReadableLogRecord]:
        """Emitted log records."""
        return list(self.log_exporter.get_finished_logs())

    def metrics(self) -> dict[str, Metric]:
        """Metric name -> metric (unit, data points)."""
        data = self.reader.get_metrics_data()
        found: dict[str, Metric] = {}
        if data is None:
            return found
        for resource in data.resource_metrics:
            for scope in resource.scope_metrics:
                for metric in scope.metrics:
                    found[metric.name] = metric
        return found
