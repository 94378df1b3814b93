"""Tools the model may call: the `ToolCallback` protocol."""

from __future__ import annotations

from ._callback import ToolCallback as ToolCallback
from ._callback import tool_definitions as tool_definitions

__all__ = ["ToolCallback", "tool_definitions"]
