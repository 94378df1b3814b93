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
import platform
import statistics
import sys
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import anyio

import jevrefine as jr
from jevrefine.jev import Judge, ModelJudgeClient, Noul
from jevrefine.jev.criteria import noul
from jevrefine.messages import AssistantMessage, Prompt, ToolCall, ToolResponseMessage
from jevrefine.telemetry import CaptureMode
from jevrefine.testing import FunctionModel

CALLS_PER_REFINEMENT = 8
"""4 model calls, 2 tool calls, 2 judge calls."""
TARGET_US = 100.0


def _answer(prompt: Prompt) -> AssistantMessage:
    last = prompt.messages[-1]
    if not isinstance(last, ToolResponseMessage):
        return AssistantMessage("", (ToolCall("call-1", "weather", '{"city": "Paris"}'),))
    user = prompt.last_user_message()
    told_off = user is not None and "reviewer rejected" in user.text
    return AssistantMessage("v2: sunny, 21 C" if told_off else "v1: nice")


def _judge_answer(prompt: Prompt) -> str:
    return '{"answer": "yes"}' if "v2" in prompt.messages[-1].text else '{"answer": "no"}'  # type: ignore[union-attr]


@jr.tool
async def weather(city: str) -> str:
    """The weather in a city."""
    return f"{city}: sunny, 21 C"


def _providers(capture: bool, exemplars: bool = True) -> dict[str, Any]:
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

    tracer_provider = TracerProvider()
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
                judge, max_repeat_attempts=2, order=jr.SelfRefineAdvisor.BEFORE_TOOLS_ORDER
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


async def measure(*, rounds: int, ops: int, warmup: int) -> dict[str, list[float]]:
    """CPU seconds per refinement of each contender, one value per round."""
    contenders = {
        "off": _refinement({}),
        "sdk": _refinement(_providers(capture=False)),
        "sdk + content": _refinement(_providers(capture=True)),
        "sdk, no exemplars": _refinement(_providers(capture=False, exemplars=False)),
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
            started = time.process_time()
            for _ in range(ops):
                await refine()
            times[name].append((time.process_time() - started) / ops)
    return times


def report(
    times: dict[str, list[float]], floor: float, *, quick: bool, rounds: int, ops: int
) -> str:
    """The Markdown section."""
    off = statistics.median(times["off"])
    lines = [
        "## Telemetry overhead",
        "",
        f"CPU time per refinement (2 attempts: {CALLS_PER_REFINEMENT} model, judge and tool "
        f"calls) on zero-latency `FunctionModel`s; median of {rounds} interleaved rounds of "
        f"{ops} refinements{' (quick mode)' if quick else ''}; Python "
        f"{platform.python_version()}. Produced by `python -m benchmarks.bench_telemetry`.",
        "",
        "| telemetry | CPU per refinement | IQR | added per refinement | added per call |",
        "|---|---:|---:|---:|---:|",
    ]
    verdicts = []
    for name, values in times.items():
        median = statistics.median(values)
        q = statistics.quantiles(values, n=4) if len(values) >= 4 else [min(values), 0, max(values)]
        added = median - off
        per_call = added / CALLS_PER_REFINEMENT
        lines.append(
            f"| {name} | {median * 1e6:,.0f} µs | {q[0] * 1e6:,.0f}–{q[2] * 1e6:,.0f} µs | "
            + ("—" if name == "off" else f"{added * 1e6:,.0f} µs")
            + " | "
            + ("—" if name == "off" else f"{per_call * 1e6:,.1f} µs")
            + " |"
        )
        if name != "off":
            verdicts.append(
                f"`{name}` adds {per_call * 1e6:,.1f} µs per call: "
                + ("within" if per_call * 1e6 <= TARGET_US else "**over**")
                + f" the {TARGET_US:.0f} µs target."
            )
    lines += [
        "",
        *verdicts,
        "",
        f"For scale, the SDK's own floor on this machine — one CLIENT span with the required "
        f"attributes plus the three required histogram records, i.e. what any conforming "
        f"instrumentation pays per model call — is {floor * 1e6:,.1f} µs. Each refinement also "
        "carries 4 spans that are not calls (the request root, the refine loop, two attempts), 2 "
        "refine metrics and 2 evaluation events, spread over the 8 calls above.",
        "",
    ]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help="a short run, for a smoke test")
    args = parser.parse_args(argv)
    rounds, ops, warmup = (5, 40, 20) if args.quick else (15, 300, 200)
    times = anyio.run(lambda: measure(rounds=rounds, ops=ops, warmup=warmup))
    floor = sdk_floor(ops * 8)
    print(report(times, floor, quick=args.quick, rounds=rounds, ops=ops))
    return 0


if __name__ == "__main__":
    sys.exit(main())
