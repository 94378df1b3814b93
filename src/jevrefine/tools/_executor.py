"""Running the tool calls of one model turn: concurrently, bounded, each under its own timeout.

Every call becomes a `ToolOutcome`. A tool that raises, times out, gets invalid arguments or does
not exist yields an error result for that call only; its siblings keep running. Calls beyond
`max_calls` are not run: each is answered with a `TooManyToolCallsError` result. Outcomes come
back in call order whatever order the calls finish in. Cancelling the caller cancels every
running async tool before `execute_tool_calls` returns; no task outlives it.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import anyio
from opentelemetry import trace
from opentelemetry.trace import SpanKind, Status, StatusCode

from ..messages import ToolCall, ToolResponse
from ..telemetry import (
    ERROR_TYPE,
    GEN_AI_OPERATION_NAME,
    GEN_AI_TOOL_CALL_ARGUMENTS,
    GEN_AI_TOOL_CALL_ID,
    GEN_AI_TOOL_CALL_RESULT,
    GEN_AI_TOOL_DESCRIPTION,
    GEN_AI_TOOL_NAME,
    GEN_AI_TOOL_TYPE,
    Telemetry,
    error_type_of,
)
from ._callback import ToolCallback
from ._errors import ToolError, ToolTimeoutError, TooManyToolCallsError, UnknownToolError

if TYPE_CHECKING:
    from opentelemetry.context import Context

__all__ = ["ToolOutcome", "execute_tool_calls"]

logger = logging.getLogger("jevrefine.tools")


@dataclass(frozen=True, slots=True)
class ToolOutcome:
    """What one tool call produced."""

    call: ToolCall
    """The model's call."""
    tool: ToolCallback | None
    """The tool that was called (`None` when the name matched none)."""
    data: str
    """The text sent back to the model: the result, or an error note."""
    error: Exception | None = None
    """Why the call failed, or `None` when it succeeded."""

    @property
    def response(self) -> ToolResponse:
        """The `ToolResponse` answering the call (same id and name)."""
        return ToolResponse(self.call.id, self.call.name, self.data)

    @property
    def returns_direct(self) -> bool:
        """Whether this call succeeded on a `return_direct` tool."""
        return self.error is None and self.tool is not None and self.tool.return_direct


async def execute_tool_calls(
    calls: Sequence[ToolCall],
    tools: Sequence[ToolCallback],
    *,
    max_parallel: int,
    call_timeout: float | None,
    telemetry: Telemetry,
    parent: Context | None = None,
    max_calls: int | None = None,
) -> list[ToolOutcome]:
    """Run `calls` against `tools` concurrently and return their outcomes in call order.

    Args:
        calls: one model turn's tool calls.
        tools: the tools of the request, looked up by name.
        max_parallel: at most this many calls run at once.
        call_timeout: seconds each call may take once it has started (`None`: no limit).
        telemetry: where the `execute_tool` spans and duration metric go.
        parent: the spans' parent context (the current context when `None`).
        max_calls: run at most this many calls (the first ones); each call beyond it gets a
            `TooManyToolCallsError` result without running (`None`: no limit).
    """
    by_name: Mapping[str, ToolCallback] = {t.name: t for t in tools}
    excess: list[ToolOutcome] = []
    if max_calls is not None and len(calls) > max_calls:
        excess = _refused(calls[max_calls:], len(calls), max_calls, by_name)
        calls = calls[:max_calls]
    outcomes: list[ToolOutcome | None] = [None] * len(calls)
    limiter = anyio.CapacityLimiter(max_parallel)

    async def run(index: int, call: ToolCall) -> None:
        async with limiter:
            outcomes[index] = await _run_one(call, by_name, call_timeout, telemetry, parent)

    # Each task catches its tool's exceptions, so only cancellation can end the group early.
    async with anyio.create_task_group() as group:
        for index, call in enumerate(calls):
            group.start_soon(run, index, call)
    return [o for o in outcomes if o is not None] + excess


def _refused(
    calls: Sequence[ToolCall], asked: int, limit: int, by_name: Mapping[str, ToolCallback]
) -> list[ToolOutcome]:
    # Answered rather than dropped: a provider rejects a turn whose calls lack results, and the
    # model learns from the error text to ask for fewer.
    logger.warning(
        "a model turn asked for %d tool calls; the %d beyond %d were not run",
        asked,
        asked - limit,
        limit,
    )
    refused = []
    for call in calls:
        error = TooManyToolCallsError(call.name, asked, limit)
        refused.append(
            ToolOutcome(call, by_name.get(call.name), _error_text(call.name, error), error)
        )
    return refused


async def _run_one(
    call: ToolCall,
    by_name: Mapping[str, ToolCallback],
    call_timeout: float | None,
    telemetry: Telemetry,
    parent: Context | None,
) -> ToolOutcome:
    tool = by_name.get(call.name)
    attributes: dict[str, Any] = {
        GEN_AI_OPERATION_NAME: "execute_tool",
        GEN_AI_TOOL_NAME: call.name,
        GEN_AI_TOOL_TYPE: "function",
    }
    if call.id:
        attributes[GEN_AI_TOOL_CALL_ID] = call.id
    if tool is not None and tool.description:
        attributes[GEN_AI_TOOL_DESCRIPTION] = tool.description
    capture = telemetry.capture.on_spans
    if capture:
        attributes[GEN_AI_TOOL_CALL_ARGUMENTS] = call.arguments
    span = telemetry.tracer.start_span(
        f"execute_tool {call.name}", context=parent, kind=SpanKind.INTERNAL, attributes=attributes
    )
    started = time.perf_counter()
    metric_attributes: dict[str, Any] = {
        GEN_AI_OPERATION_NAME: "execute_tool",
        GEN_AI_TOOL_NAME: call.name,
        GEN_AI_TOOL_TYPE: "function",
    }
    try:
        # Spans the tool opens itself (a nested model call) become children of this one.
        with trace.use_span(span, record_exception=False, set_status_on_exception=False):
            outcome = await _outcome(call, tool, by_name, call_timeout)
    except BaseException as exc:  # cancellation of the caller: record it and let it go on
        span.set_attribute(ERROR_TYPE, error_type_of(exc))
        span.set_status(Status(StatusCode.ERROR, type(exc).__qualname__))
        span.end()
        raise
    if outcome.error is not None:
        error_type = error_type_of(outcome.error)
        span.set_attribute(ERROR_TYPE, error_type)
        span.set_status(Status(StatusCode.ERROR, f"{error_type}: {outcome.error}"[:1000]))
        metric_attributes[ERROR_TYPE] = error_type
    if capture:
        span.set_attribute(GEN_AI_TOOL_CALL_RESULT, outcome.data)
    span.end()
    telemetry.tool_duration.record(time.perf_counter() - started, metric_attributes)
    return outcome


async def _outcome(
    call: ToolCall,
    tool: ToolCallback | None,
    by_name: Mapping[str, ToolCallback],
    call_timeout: float | None,
) -> ToolOutcome:
    try:
        if tool is None:
            raise UnknownToolError(call.name, list(by_name))
        with anyio.move_on_after(call_timeout) as scope:
            data = await tool.call(call.arguments)
        if scope.cancelled_caught:
            raise ToolTimeoutError(call.name, call_timeout or 0.0)
        if not isinstance(data, str):
            raise TypeError(f"{type(tool).__name__}.call returned {type(data).__name__}, not str")
    except Exception as exc:  # one call's failure is its own result, never its siblings'
        logger.debug("tool %r failed: %s", call.name, exc)
        return ToolOutcome(call, tool, _error_text(call.name, exc), exc)
    return ToolOutcome(call, tool, data)


def _error_text(name: str, exc: Exception) -> str:
    if isinstance(exc, ToolError):
        return f"Error: {exc}"
    return f"Error: tool {name!r} failed: {type(exc).__name__}: {exc}"
