"""The `ToolCallback` protocol: what the chain needs to know about a tool and how to call it."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from ..exceptions import UserError
from ..messages import ToolDefinition

if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping

__all__ = ["ToolCallback", "tool_definitions"]


@runtime_checkable
class ToolCallback(Protocol):
    """A tool the model may call.

    `@tool` turns a typed function into one; implement the protocol directly for tools that are
    not functions (a remote service, a tool registry).
    """

    @property
    def name(self) -> str:
        """The tool's name, unique within a request."""
        ...

    @property
    def description(self) -> str:
        """What the tool does, for the model."""
        ...

    @property
    def parameters_schema(self) -> Mapping[str, Any]:
        """The JSON schema of the tool's arguments (an object schema)."""
        ...

    @property
    def return_direct(self) -> bool:
        """Whether the tool's result ends the tool loop and becomes the response."""
        ...

    async def call(self, arguments: str) -> str:
        """Run the tool with the model's JSON arguments; return the result as text."""
        ...


def tool_definitions(tools: Iterable[ToolCallback]) -> tuple[ToolDefinition, ...]:
    """The definitions sent to the model for `tools`, checking that names are unique."""
    definitions: list[ToolDefinition] = []
    seen: set[str] = set()
    for tool in tools:
        if tool.name in seen:
            raise UserError(f"two tools are named {tool.name!r}; tool names must be unique")
        seen.add(tool.name)
        definitions.append(ToolDefinition(tool.name, tool.description, tool.parameters_schema))
    return tuple(definitions)
