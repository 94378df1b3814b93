"""The span tree of a run, as indented text: what `jevrefine demo --trace` prints.

Works on finished spans of the OpenTelemetry SDK (`ReadableSpan`); the SDK is imported only by
`collect_spans`, so jevrefine itself keeps depending on the API alone.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

__all__ = ["collect_spans", "format_span_tree"]

# The attributes worth a glance on each kind of span, with their short labels.
_KEY_ATTRIBUTES: Final = (
    ("gen_ai.provider.name", "provider"),
    ("gen_ai.response.model", "model"),
    ("gen_ai.usage.input_tokens", "in"),
    ("gen_ai.usage.output_tokens", "out"),
    ("gen_ai.response.finish_reasons", "finish"),
    ("gen_ai.tool.call.id", "call"),
    ("jevrefine.refine.attempt", "attempt"),
    ("jevrefine.refine.passed", "passed"),
    ("jevrefine.refine.attempts", "attempts"),
    ("jevrefine.refine.outcome", "outcome"),
    ("gen_ai.guardrail.result.value", "result"),
    ("error.type", "error"),
)


def collect_spans() -> tuple[TracerProvider, InMemorySpanExporter]:
    """A tracer provider that keeps every finished span in memory, and its exporter.

    Raises:
        ImportError: `opentelemetry-sdk` is not installed.
    """
    from opentelemetry.sdk.trace import TracerProvider as SdkTracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import (
        InMemorySpanExporter as Exporter,
    )

    exporter = Exporter()
    provider = SdkTracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider, exporter


def format_span_tree(spans: Sequence[ReadableSpan]) -> str:
    """One indented tree per trace: name, kind, duration, key attributes and events."""
    ids = {s.context.span_id for s in spans if s.context is not None}
    children: dict[int | None, list[ReadableSpan]] = {}
    for span in spans:
        parent = span.parent.span_id if span.parent is not None else None
        # A span whose parent is not among these (another process's) is shown as a root.
        children.setdefault(parent if parent in ids else None, []).append(span)
    lines: list[str] = []
    for root in _in_start_order(children.get(None, [])):
        lines.extend(_lines(root, children, prefix="", last=True, top=True))
        lines.append("")
    return "\n".join(lines).rstrip() + "\n" if lines else ""


def _in_start_order(spans: list[ReadableSpan]) -> list[ReadableSpan]:
    return sorted(spans, key=lambda s: s.start_time or 0)


def _lines(
    span: ReadableSpan,
    children: Mapping[int | None, list[ReadableSpan]],
    *,
    prefix: str,
    last: bool,
    top: bool = False,
) -> Iterator[str]:
    branch = "" if top else ("└─ " if last else "├─ ")
    yield f"{prefix}{branch}{_describe(span)}"
    inner = prefix if top else prefix + ("   " if last else "│  ")
    for event in _events(span):
        yield f"{inner}  · {event}"
    kids = _in_start_order(children.get(span.context.span_id if span.context else None, []))
    for index, child in enumerate(kids):
        yield from _lines(child, children, prefix=inner, last=index == len(kids) - 1)


def _describe(span: ReadableSpan) -> str:
    duration = ""
    if span.start_time is not None and span.end_time is not None:
        duration = f"  {(span.end_time - span.start_time) / 1e6:.1f} ms"
    attributes: Mapping[str, Any] = span.attributes or {}
    shown = [
        f"{label}={_value(attributes[key])}" for key, label in _KEY_ATTRIBUTES if key in attributes
    ]
    status = "  ERROR" if span.status.status_code.name == "ERROR" else ""
    details = f"  [{' '.join(shown)}]" if shown else ""
    return f"{span.name}  ({span.kind.name.lower()}){duration}{status}{details}"


def _events(span: ReadableSpan) -> Iterator[str]:
    for event in span.events:
        attributes: Mapping[str, Any] = event.attributes or {}
        if event.name == "gen_ai.evaluation.result":
            score = attributes.get("gen_ai.evaluation.score.value")
            value = f" ({score:.2f})" if isinstance(score, float) else ""
            yield (
                f"evaluation {attributes.get('gen_ai.evaluation.name')}="
                f"{attributes.get('gen_ai.evaluation.score.label')}{value}"
            )
        elif event.name == "gen_ai.guardrail.result":
            if attributes.get("gen_ai.guardrail.result.type") == "outcome":
                yield f"guardrail {attributes.get('gen_ai.guardrail.result.value')}"
        elif event.name == "jevrefine.retry":
            yield (
                f"retry {attributes.get('jevrefine.retry.attempt')} after "
                f"{attributes.get('error.type')}"
            )


def _value(value: Any) -> str:
    if isinstance(value, (tuple, list)):
        return ",".join(str(v) for v in value)
    return str(value)
