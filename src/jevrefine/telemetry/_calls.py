"""One recorded call: the `chat {model}` CLIENT span, its metrics, and how failures are named."""

from __future__ import annotations

import contextlib
import json
import time
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any, Protocol, Self

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry._logs import SeverityNumber
from opentelemetry.trace import SpanKind, Status, StatusCode

from ._content import as_json, input_content, output_content
from ._events import emit_log_event
from ._names import (
    CHAT,
    ERROR_TYPE,
    GEN_AI_CONVERSATION_ID,
    GEN_AI_OPERATION_NAME,
    GEN_AI_OUTPUT_MESSAGES,
    GEN_AI_OUTPUT_TYPE,
    GEN_AI_PROVIDER_NAME,
    GEN_AI_REQUEST_MAX_TOKENS,
    GEN_AI_REQUEST_MODEL,
    GEN_AI_REQUEST_SEED,
    GEN_AI_REQUEST_STOP_SEQUENCES,
    GEN_AI_REQUEST_STREAM,
    GEN_AI_REQUEST_TEMPERATURE,
    GEN_AI_REQUEST_TOP_P,
    GEN_AI_RESPONSE_FINISH_REASONS,
    GEN_AI_RESPONSE_ID,
    GEN_AI_RESPONSE_MODEL,
    GEN_AI_RESPONSE_TIME_TO_FIRST_CHUNK,
    GEN_AI_SYSTEM,
    GEN_AI_USAGE_CACHE_CREATION_INPUT_TOKENS,
    GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS,
    GEN_AI_USAGE_INPUT_TOKENS,
    GEN_AI_USAGE_OUTPUT_TOKENS,
    GEN_AI_USAGE_TOTAL_TOKENS,
    HTTP_RESPONSE_STATUS_CODE,
    INFERENCE_DETAILS_EVENT,
    SERVER_ADDRESS,
    SERVER_PORT,
)
from ._settings import CaptureMode

if TYPE_CHECKING:
    from collections.abc import Iterator, Mapping

    from opentelemetry.context import Context

    from ..messages import ChatResponse, Prompt, Usage
    from ._runtime import Telemetry

__all__ = [
    "CallRecorder",
    "ModelCallRecorder",
    "ServedModel",
    "call_attributes",
    "clear_last_call",
    "error_type_of",
    "joined_span",
    "last_call",
    "mark_failed",
    "record_time_to_first_chunk",
    "same_call",
    "status_code_of",
    "usage_attributes",
]


def status_code_of(exc: BaseException) -> int | None:
    """The HTTP status a failure carries (`ModelHTTPError`, `JudgeAPIError`), if any."""
    status = getattr(exc, "status_code", None)
    return status if isinstance(status, int) and not isinstance(status, bool) else None


def error_type_of(exc: BaseException) -> str:
    """The low-cardinality `error.type` of a failure, as opentelemetry-util-genai names it.

    The HTTP status code (`"429"`) when the failure is an error response, so that a rate limit,
    a bad key and a server error are told apart; else the exception class's qualified name.
    """
    status = status_code_of(exc)
    return str(status) if status is not None else type(exc).__qualname__


def status_description(exc: BaseException) -> str:
    """The span status text: the class and message (ours or the provider's, never a key)."""
    return f"{type(exc).__qualname__}: {exc}"[:1000]


def mark_failed(span: trace.Span, exc: BaseException, *, describe: bool = True) -> str:
    """Status ERROR, `error.type` and `http.response.status_code` on `span`; returns the type.

    `describe=False` keeps the exception's text out of the status (for spans whose failures may
    quote content, such as the refine loop's).
    """
    error_type = error_type_of(exc)
    if span.is_recording():
        span.set_attribute(ERROR_TYPE, error_type)
        status = status_code_of(exc)
        if status is not None:
            span.set_attribute(HTTP_RESPONSE_STATUS_CODE, status)
        text = status_description(exc) if describe else type(exc).__qualname__
        span.set_status(Status(StatusCode.ERROR, text))
    return error_type


def usage_attributes(usage: Usage, *, legacy: bool = False) -> dict[str, int]:
    """The span attributes of a call's token counts (cache counts only when the provider sent).

    `legacy` adds seed 004's `gen_ai.usage.total_tokens` (input + output).
    """
    attributes = {
        GEN_AI_USAGE_INPUT_TOKENS: usage.input_tokens,
        GEN_AI_USAGE_OUTPUT_TOKENS: usage.output_tokens,
    }
    if legacy:
        attributes[GEN_AI_USAGE_TOTAL_TOKENS] = usage.total_tokens
    if usage.cache_read_input_tokens:
        attributes[GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS] = usage.cache_read_input_tokens
    if usage.cache_creation_input_tokens:
        attributes[GEN_AI_USAGE_CACHE_CREATION_INPUT_TOKENS] = usage.cache_creation_input_tokens
    return attributes


def call_attributes(
    telemetry: Telemetry,
    *,
    operation: str,
    provider: str,
    request_model: str,
    address: str | None,
    port: int | None,
) -> dict[str, Any]:
    """The attributes a call's span and every metric of it share: what, whose, which model, where.

    `gen_ai.system` joins them when the settings keep the legacy names; the port only comes with
    an address, as a port alone names no server.
    """
    attributes: dict[str, Any] = {
        GEN_AI_OPERATION_NAME: operation,
        GEN_AI_PROVIDER_NAME: provider,
        GEN_AI_REQUEST_MODEL: request_model,
    }
    if telemetry.legacy_attributes:
        attributes[GEN_AI_SYSTEM] = provider
    if address is not None:
        attributes[SERVER_ADDRESS] = address
        if port is not None:
            attributes[SERVER_PORT] = port
    return attributes


class CallRecorder:
    """What a call's recorder shares (`ModelCallRecorder`, the Jev client's `JudgeCallRecorder`).

    `with recorder:` makes the call's span the current one inside the block; an exception that
    leaves the block is recorded with `fail` (which ends the span) and propagates unchanged. On
    success the span stays open: the caller ends it with `finish(...)`, which needs what the
    block produced.
    """

    __slots__ = ("_token",)

    span: trace.Span
    """The call's span, open until the recorder finishes or fails."""

    def fail(self, exc: BaseException, /) -> None:
        """Record the failure and end the span."""
        raise NotImplementedError

    def __enter__(self) -> Self:
        # What `trace.use_span(span, record_exception=False, set_status_on_exception=False)`
        # does, without its generator: this runs on every recorded call (`bench_telemetry`).
        self._token = otel_context.attach(trace.set_span_in_context(self.span))
        return self

    def __exit__(self, exc_type: object, exc: BaseException | None, tb: object) -> None:
        otel_context.detach(self._token)
        if exc is not None:
            self.fail(exc)


# -- one call, one span -----------------------------------------------------------------------

_joined: ContextVar[trace.Span | None] = ContextVar("jevrefine_joined_span", default=None)


@contextlib.contextmanager
def same_call() -> Iterator[None]:
    """Inside this block, a client call *is* the current model call, not a call of its own.

    For a `ChatModel` whose each call is exactly one call of a client that records its own span
    (`JevChatModel` over a `JudgeClient`): that client records into the current span (retries
    included) instead of opening a second span for the same call. Clients that make calls of
    their own (a `ModelJudgeClient` asking a model once per question) still open theirs.
    """
    token = _joined.set(trace.get_current_span())
    try:
        yield
    finally:
        _joined.reset(token)


def joined_span() -> trace.Span | None:
    """The span a client call records into, when it runs inside `same_call()` directly."""
    span = _joined.get()
    if span is None or span is not trace.get_current_span():
        return None  # not inside same_call, or another span opened in between
    return span


_last_call: ContextVar[trace.Span | None] = ContextVar("jevrefine_last_call", default=None)


def clear_last_call() -> None:
    """Forget the last recorded call of this context (before making the call to be judged)."""
    _last_call.set(None)


def last_call() -> trace.Span | None:
    """The span of the model call recorded last in this context, e.g. the answer a judge judges.

    Set by `ModelCallRecorder.finish` in the caller's context (the chain awaits the model call
    in the same task), so an advisor reads it right after `chain.next_call(...)` returns.
    """
    return _last_call.get()


def _legacy_finish_reason(reason: str) -> str:
    return reason.upper()


class ServedModel(Protocol):
    """What a `chat` span says about the model called: the part of a `ChatModel` it reads.

    Any `jevrefine.models.ChatModel` is one; telemetry needs no more of it, and so imports no
    model type.
    """

    @property
    def provider(self) -> str:
        """The `gen_ai.provider.name`."""
        ...

    @property
    def model_name(self) -> str:
        """The model asked when the prompt's options name none."""
        ...

    @property
    def server_address(self) -> str | None:
        """The host the model is served from; `None` when in-process."""
        ...

    @property
    def server_port(self) -> int | None:
        """The port the model is served from."""
        ...


class ModelCallRecorder(CallRecorder):
    """Records one model call as a `chat {model}` CLIENT span plus duration and token metrics.

    Used by `jevrefine.models.InstrumentedModel` for every model, for `call` and `stream` alike:
    build it, then `finish(response)` or `fail(exc)`; a stream calls `chunk()` for each chunk.
    """

    __slots__ = (
        "_attributes",
        "_chunks",
        "_first_chunk",
        "_input",
        "_last_chunk",
        "_metric_attributes",
        "_started",
        "_telemetry",
        "prompt",
        "span",
    )

    def __init__(
        self,
        telemetry: Telemetry,
        model: ServedModel,
        prompt: Prompt,
        *,
        stream: bool = False,
        conversation_id: str | None = None,
        parent: Context | None = None,
    ) -> None:
        self._telemetry = telemetry
        self.prompt = prompt
        options = prompt.options
        request_model = options.model or model.model_name
        metric_attributes = call_attributes(
            telemetry,
            operation=CHAT,
            provider=model.provider,
            request_model=request_model,
            address=model.server_address,
            port=model.server_port,
        )
        attributes = dict(metric_attributes)
        if options.temperature is not None:
            attributes[GEN_AI_REQUEST_TEMPERATURE] = options.temperature
        if options.top_p is not None:
            attributes[GEN_AI_REQUEST_TOP_P] = options.top_p
        if options.max_tokens is not None:
            attributes[GEN_AI_REQUEST_MAX_TOKENS] = options.max_tokens
        if options.stop:
            attributes[GEN_AI_REQUEST_STOP_SEQUENCES] = list(options.stop)
        if options.seed is not None:
            attributes[GEN_AI_REQUEST_SEED] = options.seed
        if options.response_format is not None and options.response_format.type != "text":
            attributes[GEN_AI_OUTPUT_TYPE] = "json"
        if stream:
            attributes[GEN_AI_REQUEST_STREAM] = True
        if conversation_id is not None:
            attributes[GEN_AI_CONVERSATION_ID] = conversation_id
        self._metric_attributes = metric_attributes
        self._attributes = attributes
        self.span = telemetry.tracer.start_span(
            f"{CHAT} {request_model}", context=parent, kind=SpanKind.CLIENT, attributes=attributes
        )
        # Built once for both the span and the event (span_and_event), and only on opt-in.
        self._input = None if telemetry.capture is CaptureMode.NO_CONTENT else input_content(prompt)
        if self._input is not None and telemetry.capture.on_spans and self.span.is_recording():
            self.span.set_attributes(as_json(self._input))
        self._chunks = 0
        self._first_chunk: float | None = None
        self._last_chunk = 0.0
        self._started = time.perf_counter()

    def chunk(self) -> None:
        """Note one streamed chunk: the first sets the time to first chunk."""
        now = time.perf_counter()
        self._chunks += 1
        if self._first_chunk is None:
            self._first_chunk = now
        self._last_chunk = now

    def finish(self, response: ChatResponse) -> None:
        """Record a successful response and end the span."""
        elapsed = time.perf_counter() - self._started
        meta = response.metadata
        span = self.span
        telemetry = self._telemetry
        metric_attributes = self._metric_attributes
        if meta.model:
            metric_attributes[GEN_AI_RESPONSE_MODEL] = meta.model
        first_chunk = self._first_chunk
        if span.is_recording():
            legacy = telemetry.legacy_attributes
            attributes: dict[str, Any] = usage_attributes(meta.usage, legacy=legacy)
            if meta.id:
                attributes[GEN_AI_RESPONSE_ID] = meta.id
            if meta.model:
                attributes[GEN_AI_RESPONSE_MODEL] = meta.model
            reasons = meta.finish_reasons or tuple(
                g.finish_reason for g in response.results if g.finish_reason
            )
            if reasons:
                attributes[GEN_AI_RESPONSE_FINISH_REASONS] = [
                    _legacy_finish_reason(r) if legacy else r for r in reasons
                ]
            if first_chunk is not None:
                record_time_to_first_chunk(span, first_chunk - self._started)
            if telemetry.capture.on_spans:
                attributes[GEN_AI_OUTPUT_MESSAGES] = json.dumps(
                    output_content(response), ensure_ascii=False
                )
            span.set_attributes(attributes)
        if telemetry.capture.on_events:
            self._details_event(response)
        span.end()
        _last_call.set(span)
        telemetry.operation_duration.record(elapsed, metric_attributes)
        if first_chunk is not None:
            telemetry.time_to_first_chunk.record(first_chunk - self._started, metric_attributes)
            if self._chunks > 1:
                per_chunk = (self._last_chunk - first_chunk) / (self._chunks - 1)
                telemetry.time_per_output_chunk.record(per_chunk, metric_attributes)
        usage = meta.usage
        if usage.input_tokens or usage.output_tokens:
            telemetry.record_usage(usage, metric_attributes)

    def _details_event(self, response: ChatResponse) -> None:
        """The opt-in `gen_ai.client.inference.operation.details` log event, content structured."""
        meta = response.metadata
        attributes: dict[str, Any] = {**self._attributes, **(self._input or {})}
        attributes[GEN_AI_OUTPUT_MESSAGES] = output_content(response)
        if meta.id:
            attributes[GEN_AI_RESPONSE_ID] = meta.id
        if meta.model:
            attributes[GEN_AI_RESPONSE_MODEL] = meta.model
        attributes.update(usage_attributes(meta.usage, legacy=self._telemetry.legacy_attributes))
        emit_log_event(
            self._telemetry.events,
            self.span,
            INFERENCE_DETAILS_EVENT,
            attributes,
            severity=SeverityNumber.DEBUG,
        )

    def fail(self, exc: BaseException) -> None:
        """Record a failure (status ERROR, `error.type`) and end the span."""
        elapsed = time.perf_counter() - self._started
        error_type = mark_failed(self.span, exc)
        self.span.end()
        attributes: Mapping[str, Any] = {**self._metric_attributes, ERROR_TYPE: error_type}
        self._telemetry.operation_duration.record(elapsed, attributes)


def record_time_to_first_chunk(span: trace.Span, seconds: float) -> None:
    """Record on `span` how long a stream took to deliver its first chunk, in seconds.

    The one place the attribute is written (`gen_ai.response.time_to_first_chunk`), for model
    streams and for each streamed self-refine attempt alike.
    """
    span.set_attribute(GEN_AI_RESPONSE_TIME_TO_FIRST_CHUNK, seconds)
