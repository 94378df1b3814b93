"""Recording tool calls for one attempt, through the per-request tool seam.

An outer advisor (self-refine at `BEFORE_TOOLS_ORDER`) wraps the request's tools for one attempt
and reads what the tool loop did with them:

```python
tools, records = record_tool_calls(request.tools)
response = await chain.next_call(request.copy(tools=tools))
for record in records:
    print(record.name, record.arguments, record.result)
```

The records live in a list owned by the caller: no global or context-variable state, so
concurrent requests and attempts never see each other's calls.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from ..messages import ToolCall
from ._callback import ToolCallback

__all__ = ["RecordingToolCallback", "ToolCallRecord", "record_tool_calls"]

_PENDING = "error: cancelled before it finished"


@dataclass(frozen=True, slots=True)
class ToolCallRecord:
    """One recorded tool call: what the model sent and what the tool returned."""

    name: str
    """The tool's name."""
    arguments: Any
    """The parsed JSON arguments (the raw string when they are not valid JSON)."""
    result: str
    """The tool's text, or `error: <message>` when the call failed."""

    @property
    def failed(self) -> bool:
        """Whether the call failed (its result is an `error: ...` note)."""
        return self.result.startswith("error: ")


class RecordingToolCallback:
    """A `ToolCallback` that forwards to `tool` and appends a `ToolCallRecord` to `records`.

    A record's slot is taken when the call starts, so records keep the order calls started in
    (the tool loop starts a turn's calls in the model's order). A call that is cancelled or times
    out from outside keeps the note `error: cancelled before it finished`.
    """

    __slots__ = ("records", "tool")

    def __init__(self, tool: ToolCallback, records: list[ToolCallRecord]) -> None:
        self.tool = tool
        """The wrapped tool."""
        self.records = records
        """Where the calls are recorded."""

    @property
    def name(self) -> str:
        """The wrapped tool's name."""
        return self.tool.name

    @property
    def description(self) -> str:
        """The wrapped tool's description."""
        return self.tool.description

    @property
    def parameters_schema(self) -> Mapping[str, Any]:
        """The wrapped tool's parameter schema."""
        return self.tool.parameters_schema

    @property
    def return_direct(self) -> bool:
        """The wrapped tool's `return_direct`."""
        return self.tool.return_direct

    async def call(self, arguments: str) -> str:
        """Call the wrapped tool and record the arguments and the result or the error."""
        arguments_value = ToolCall("", self.name, arguments).parsed_arguments()
        index = len(self.records)
        self.records.append(ToolCallRecord(self.name, arguments_value, _PENDING))
        try:
            result = await self.tool.call(arguments)
        except Exception as exc:
            self.records[index] = ToolCallRecord(self.name, arguments_value, f"error: {exc}")
            raise
        self.records[index] = ToolCallRecord(self.name, arguments_value, result)
        return result

    def __repr__(self) -> str:
        return f"RecordingToolCallback({self.tool!r})"


def record_tool_calls(
    tools: Iterable[ToolCallback],
) -> tuple[tuple[ToolCallback, ...], list[ToolCallRecord]]:
    """Wrap `tools` so that every call is recorded in one new list.

    Returns:
        The wrapped tools (pass them on with `request.copy(tools=...)`) and the list the calls
        land in, in the order they started.
    """
    records: list[ToolCallRecord] = []
    return tuple(RecordingToolCallback(t, records) for t in tools), records
