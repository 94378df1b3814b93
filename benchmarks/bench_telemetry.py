"""CPU cost of OpenTelemetry on one refinement: off, SDK with a no-op exporter, content capture on.

One refinement, all on in-process `FunctionModel`s with zero latency (so that the instrumentation's
cost is what there is to see): a `ChatClient` with a `SelfRefineAdvisor` (before the tools) whose
judge is a `ModelJudgeClient`; each of the two attempts is a tool-call round, one sync-free async
tool call and the answer round, then one judging call. Per refinement: 4 model calls, 2 tool
calls and 2 judge calls (8 instrumented calls), plus the root, loop and attempt spans.

Contenders, interleaved round by round in one process, CPU time (`time.process_time`, all
threads, so the SDK's export threads count too):

- `off`: no providers given and none installed globally: the API's no-op tracer and meter;
- `sdk`: the SDK's tracer, meter and logger providers, spans and logs sent by the SDK's batch
  processors to an exporter that drops them, metrics aggregated in memory;
- `sdk + content`: the same with `capture_content=CaptureMode.SPAN_AND_EVENT` (message content on
  spans and as log events);
- `sdk, no exemplars`: `sdk` with the meter provider's exemplar filter off (the SDK's default,
  trace-based, samples an exemplar for every record made inside a sampled span).

Target: the SDK adds at most 100 µs of CPU per model, judge or tool call.
"""

from __future__ import annotations

import argparse
import gc
import platform
import statistics
import sys
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

import anyio

import jevrefine as jr
from jevrefine.jev import Noul
from jevrefine.judge import Judge, ModelJudgeClient
from jevrefine.judge.criteria import noul
from jevrefine.messages import AssistantMessage, Prompt, ToolCall, ToolResponseMessage
from jevrefine.telemetry import CaptureMode
from jevrefine.testing import FunctionModel

from ._harness import bar, emit, figure, python_calls_per_op
from ._loop import SHIPPED_LOOP

CALLS_PER_REFINEMENT = 8
"""4 model calls, 2 tool calls, 2 judge calls."""
TARGET_US = 100.0
REPLAY = "the SDK alone, same telemetry"


def _answer(prompt: Prompt) -> AssistantMessage:
    last = prompt.messages[-1]
    if not isinstance(last, ToolResponseMessage):
        return AssistantMessage("", (ToolCall("call-1", "weather", '{"city": "Paris"}'),))
    user = prompt.last_user_message()
    told_off = user is not None and "broke these rules" in user.text
    return AssistantMessage("v2: sunny, 21 C" if told_off else "v1: nice")


def _judge_answer(prompt: Prompt) -> str:
    return '{"answer": "yes"}' if "v2" in prompt.messages[-1].text else '{"answer": "no"}'  # type: ignore[union-attr]


@jr.tool
async def weather(city: str) -> str:
    """The weather in a city."""
    return f"{city}: sunny, 21 C"


def _providers(capture: bool, exemplars: bool = True, sampled: float = 1.0) -> dict[str, Any]:
    from opentelemetry.sdk._logs import LoggerProvider
    from opentelemetry.sdk._logs.export import (
        BatchLogRecordProcessor,
        LogRecordExporter,
        LogRecordExportResult,
    )
    from opentelemetry.sdk.metrics import AlwaysOffExemplarFilter, MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import (
        BatchSpanProcessor,
        SpanExporter,
        SpanExportResult,
    )

    class DropSpans(SpanExporter):
        def export(self, spans: Sequence[Any]) -> SpanExportResult:
            return SpanExportResult.SUCCESS

    class DropLogs(LogRecordExporter):
        def export(self, batch: Sequence[Any]) -> LogRecordExportResult:
            return LogRecordExportResult.SUCCESS

        def shutdown(self) -> None:
            return None

        def force_flush(self, timeout_millis: int = 30000) -> bool:
            return True

    from opentelemetry.sdk.trace.sampling import ParentBased, TraceIdRatioBased

    tracer_provider = TracerProvider(sampler=ParentBased(TraceIdRatioBased(sampled)))
    tracer_provider.add_span_processor(BatchSpanProcessor(DropSpans()))
    logger_provider = LoggerProvider()
    logger_provider.add_log_record_processor(BatchLogRecordProcessor(DropLogs()))
    return {
        "tracer_provider": tracer_provider,
        "meter_provider": MeterProvider(
            metric_readers=[InMemoryMetricReader()],
            **({} if exemplars else {"exemplar_filter": AlwaysOffExemplarFilter()}),
        ),
        "logger_provider": logger_provider,
        "capture_content": CaptureMode.SPAN_AND_EVENT if capture else CaptureMode.NO_CONTENT,
    }


def _refinement(telemetry: dict[str, Any]) -> Callable[[], Awaitable[object]]:
    judge = Judge(
        ModelJudgeClient(FunctionModel(_judge_answer), logprobs=False, **telemetry),
        [noul("complete", Noul("Is the answer complete?", when_false="Incomplete"), 0.5)],
    )
    client = jr.ChatClient(
        FunctionModel(_answer),
        tools=[weather],
        advisors=[
            jr.SelfRefineAdvisor(
                judge,
                max_repeat_attempts=2,
                order=jr.SelfRefineAdvisor.BEFORE_TOOLS_ORDER,
                strategy=SHIPPED_LOOP,
            )
        ],
        **telemetry,
    )
    spec = client.prompt("What is the weather in Paris?")

    async def refine() -> object:
        response = await spec.call()
        report = response.context[jr.context_keys.REFINE_REPORT]
        if report.outcome != "passed" or len(report.attempts) != 2:
            raise AssertionError(f"the scenario changed: {report}")
        return response

    return refine


def sdk_floor(ops: int) -> float:
    """CPU seconds the SDK itself takes for what the conventions require of one model call.

    One CLIENT span with the start and response attributes, ended, plus the three histogram
    records (duration, input and output tokens), on the same kind of providers as `sdk`: the
    cost any conforming instrumentation pays, whatever the library.
    """
    from opentelemetry.trace import SpanKind

    telemetry = _providers(capture=False)
    tracer = telemetry["tracer_provider"].get_tracer("floor")
    meter = telemetry["meter_provider"].get_meter("floor")
    duration = meter.create_histogram("duration", unit="s")
    tokens = meter.create_histogram("tokens", unit="{token}")
    start = {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": "function",
        "gen_ai.request.model": "function",
    }
    end = {
        "gen_ai.response.model": "function",
        "gen_ai.response.finish_reasons": ("stop",),
        "gen_ai.usage.input_tokens": 12,
        "gen_ai.usage.output_tokens": 6,
    }
    samples = []
    for _ in range(5):
        started = time.process_time()
        for _ in range(ops):
            span = tracer.start_span("chat function", kind=SpanKind.CLIENT, attributes=start)
            span.set_attributes(end)
            span.end()
            duration.record(0.001, start)
            tokens.record(12, {**start, "gen_ai.token.type": "input"})
            tokens.record(6, {**start, "gen_ai.token.type": "output"})
        samples.append((time.process_time() - started) / ops)
    return statistics.median(samples)


@dataclass(frozen=True)
class Emissions:
    """What one refinement hands the SDK: spans (with their events), measurements, log events."""

    spans: list[Any]
    measurements: list[tuple[str, str, str, float, dict[str, Any]]]
    """(instrument kind, name, unit, value, attributes), one per record or add."""
    logs: list[tuple[str, dict[str, Any], int, int | None]]
    """(event name, attributes, severity number, span id), one per log event."""


async def capture_emissions() -> Emissions:
    """Run one refinement on in-memory exporters and keep everything it emitted."""
    from opentelemetry.sdk._logs import LoggerProvider
    from opentelemetry.sdk._logs.export import InMemoryLogRecordExporter, SimpleLogRecordProcessor
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import HistogramDataPoint, InMemoryMetricReader
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    span_exporter, reader = InMemorySpanExporter(), InMemoryMetricReader()
    log_exporter = InMemoryLogRecordExporter()
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(span_exporter))
    logger_provider = LoggerProvider()
    logger_provider.add_log_record_processor(SimpleLogRecordProcessor(log_exporter))
    refine = _refinement(
        {
            "tracer_provider": tracer_provider,
            "meter_provider": MeterProvider(metric_readers=[reader]),
            "logger_provider": logger_provider,
            "capture_content": CaptureMode.NO_CONTENT,
        }
    )
    await refine()
    measurements: list[tuple[str, str, str, float, dict[str, Any]]] = []
    data = reader.get_metrics_data()
    assert data is not None
    for resource in data.resource_metrics:
        for scope in resource.scope_metrics:
            for metric in scope.metrics:
                for point in metric.data.data_points:
                    attributes = dict(point.attributes or {})
                    if isinstance(point, HistogramDataPoint):
                        measurements += [
                            (
                                "histogram",
                                metric.name,
                                metric.unit or "",
                                point.sum / point.count,
                                attributes,
                            )
                        ] * point.count
                    else:
                        measurements.append(
                            (
                                "counter",
                                metric.name,
                                metric.unit or "",
                                float(point.value),
                                attributes,
                            )
                        )
    logs = []
    for record in log_exporter.get_finished_logs():
        log = record.log_record
        logs.append(
            (
                log.event_name or "",
                dict(log.attributes or {}),
                int(log.severity_number.value) if log.severity_number else 9,
                log.span_id or None,
            )
        )
    return Emissions(list(span_exporter.get_finished_spans()), measurements, logs)


def _replay(emissions: Emissions, telemetry: dict[str, Any]) -> Callable[[], Awaitable[object]]:
    """The SDK alone doing what one refinement asks of it: no jevrefine code, no model.

    The same spans (name, kind, parent, attributes, events), the same metric records and the
    same log events, on providers configured like `sdk`'s. What this costs, any instrumentation
    that emits the telemetry the conventions require pays; the rest of `sdk`'s cost is
    jevrefine's own.
    """
    from opentelemetry import trace
    from opentelemetry._logs import SeverityNumber

    tracer = telemetry["tracer_provider"].get_tracer("replay")
    meter = telemetry["meter_provider"].get_meter("replay")
    logger = telemetry["logger_provider"].get_logger("replay")
    instruments: dict[tuple[str, str], Any] = {}
    records = []
    for kind, name, unit, value, attributes in emissions.measurements:
        key = (kind, name)
        if key not in instruments:
            create = meter.create_histogram if kind == "histogram" else meter.create_counter
            instruments[key] = create(name, unit=unit)
        method = instruments[key].record if kind == "histogram" else instruments[key].add
        records.append((method, value, attributes))
    # Starts and ends in time order, so parents are open when their children start.
    steps = sorted(
        [(s.start_time, 0, s) for s in emissions.spans]
        + [(s.end_time, 1, s) for s in emissions.spans],
        key=lambda step: (step[0], step[1]),
    )
    logs_by_span: dict[int | None, list[tuple[str, dict[str, Any], int]]] = {}
    for event_name, attributes, severity, span_id in emissions.logs:
        logs_by_span.setdefault(span_id, []).append((event_name, attributes, severity))

    async def replay() -> object:
        live: dict[int, Any] = {}
        for _, is_end, recorded in steps:
            span_id = recorded.context.span_id
            if not is_end:
                parent = live.get(recorded.parent.span_id) if recorded.parent else None
                live[span_id] = tracer.start_span(
                    recorded.name,
                    context=trace.set_span_in_context(parent) if parent is not None else None,
                    kind=recorded.kind,
                    attributes=recorded.attributes,
                )
                continue
            span = live.pop(span_id)
            for event in recorded.events:
                span.add_event(event.name, event.attributes)
            for event_name, attributes, severity in logs_by_span.get(span_id, ()):
                logger.emit(
                    event_name=event_name,
                    attributes=attributes,
                    context=trace.set_span_in_context(span),
                    severity_number=SeverityNumber(severity),
                )
            span.end()
        for method, value, attributes in records:
            method(value, attributes)
        return None

    return replay


async def measure(
    *, rounds: int, ops: int, warmup: int
) -> tuple[dict[str, list[float]], dict[str, float]]:
    """CPU seconds per refinement of each contender, one value per round; and the Python
    function calls each makes per refinement."""
    emissions = await capture_emissions()
    contenders = {
        "off": _refinement({}),
        "sdk": _refinement(_providers(capture=False)),
        "sdk + content": _refinement(_providers(capture=True)),
        "sdk, no exemplars": _refinement(_providers(capture=False, exemplars=False)),
        "sdk, 10% of traces sampled": _refinement(_providers(capture=False, sampled=0.1)),
        REPLAY: _replay(emissions, _providers(capture=False)),
    }
    for refine in contenders.values():
        for _ in range(warmup):
            await refine()
    times: dict[str, list[float]] = {name: [] for name in contenders}
    names = list(contenders)
    for index in range(rounds):
        order = names if index % 2 == 0 else names[::-1]
        for name in order:
            refine = contenders[name]
            gc.collect()  # each block starts from the same heap, not the last one's garbage
            started = time.process_time()
            for _ in range(ops):
                await refine()
            times[name].append((time.process_time() - started) / ops)
    calls = {name: await python_calls_per_op(refine, 50) for name, refine in contenders.items()}
    return times, calls


def report(
    times: dict[str, list[float]],
    calls: dict[str, float],
    floor: float,
    *,
    quick: bool,
    rounds: int,
    ops: int,
) -> tuple[str, dict[str, Any]]:
    """The Markdown section and its numbers."""
    off = statistics.median(times["off"])
    replay = statistics.median(times[REPLAY])
    lines = [
        "## Telemetry overhead",
        "",
        f"CPU time per refinement (2 attempts: {CALLS_PER_REFINEMENT} model, judge and tool "
        f"calls) on zero-latency `FunctionModel`s; median of {rounds} interleaved rounds of "
        f"{ops} refinements{' (quick mode)' if quick else ''}; Python "
        f"{platform.python_version()}. Command: `python -m benchmarks.bench_telemetry"
        f"{' --quick' if quick else ''}`.",
        "",
        "| telemetry | CPU per refinement | IQR | added per refinement | added per call "
        "| Python calls per refinement |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    added_per_call: dict[str, float] = {}
    for name, values in times.items():
        median = statistics.median(values)
        q = statistics.quantiles(values, n=4) if len(values) >= 4 else [min(values), 0, max(values)]
        added = median if name == REPLAY else median - off
        per_call = added / CALLS_PER_REFINEMENT
        if name != "off":
            added_per_call[name] = per_call
        lines.append(
            f"| {name} | {median * 1e6:,.0f} µs | {q[0] * 1e6:,.0f}–{q[2] * 1e6:,.0f} µs | "
            + ("—" if name == "off" else f"{added * 1e6:,.0f} µs")
            + " | "
            + ("—" if name == "off" else f"{per_call * 1e6:,.1f} µs")
            + f" | {calls[name]:,.0f} |"
        )
    sdk_added = statistics.median(times["sdk"]) - off
    own = (sdk_added - replay) / CALLS_PER_REFINEMENT
    own_calls = calls["sdk"] - calls["off"] - calls[REPLAY]
    lines += [
        "",
        *(
            f"- `{name}` adds {per_call * 1e6:,.1f} µs per call: "
            + ("within" if per_call * 1e6 <= TARGET_US else "**over**")
            + f" the {TARGET_US:.0f} µs target."
            for name, per_call in added_per_call.items()
            if name != REPLAY
        ),
        f"- Of `sdk`'s {sdk_added / CALLS_PER_REFINEMENT * 1e6:,.1f} µs per call, the SDK "
        f"processing exactly the same spans, records and events with no jevrefine code "
        f"(`{REPLAY}`) takes {replay / CALLS_PER_REFINEMENT * 1e6:,.1f} µs; jevrefine's own "
        f"instrumentation code (building attributes, opening and closing spans around the "
        f"calls) adds **{own * 1e6:,.1f} µs per call** by time. Counted in Python function "
        f"calls, which machine noise cannot blur, `sdk` makes {calls['sdk'] - calls['off']:,.0f} "
        f"more per refinement than `off` and the SDK alone makes {calls[REPLAY]:,.0f}: "
        f"jevrefine's own share is {own_calls:,.0f} calls per refinement "
        f"({own_calls / CALLS_PER_REFINEMENT:,.0f} per call).",
        f"- For scale, one conforming model call alone — one CLIENT span with the required "
        f"attributes plus the three required histogram records — costs the SDK "
        f"{floor * 1e6:,.1f} µs here. Each refinement also carries 4 spans that are not calls "
        "(the request root, the refine loop, two attempts), 2 refine metrics and 2 evaluation "
        "events, spread over the 8 calls above.",
        "",
    ]
    data = {
        "rounds": rounds,
        "ops": ops,
        "calls_per_refinement": CALLS_PER_REFINEMENT,
        "cpu_per_refinement": times,
        "python_calls_per_refinement": calls,
        "added_per_call": added_per_call,
        "jevrefine_own_per_call": own,
        "sdk_floor_per_model_call": floor,
        "target_per_call": TARGET_US / 1e6,
    }
    return "\n".join(lines), data


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help="a short run, for a smoke test")
    args = parser.parse_args(argv)
    rounds, ops, warmup = (5, 40, 20) if args.quick else (15, 300, 200)
    times, calls = anyio.run(lambda: measure(rounds=rounds, ops=ops, warmup=warmup))
    floor = sdk_floor(ops * 8)
    markdown, data = report(times, calls, floor, quick=args.quick, rounds=rounds, ops=ops)
    off = statistics.median(times["off"])
    bars = [
        bar(
            name,
            [(v if name == REPLAY else v - off) / CALLS_PER_REFINEMENT for v in values],
            scale=1e6,
        )
        for name, values in times.items()
        if name != "off"
    ]
    emit(
        markdown,
        data,
        [
            figure(
                "telemetry",
                "CPU the OpenTelemetry SDK adds per model, judge or tool call",
                "µs per call",
                bars,
                ideal=TARGET_US,
                ideal_label=f"target ({TARGET_US:.0f} µs)",
            )
        ],
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
