"""Tools the model may call: `@tool`, the `ToolCallback` protocol, recording and execution.

```python
import jevrefine as jr

@jr.tool
async def weather(location: str) -> str:  # the docstring becomes the description
    return f"{location}: sunny, 21 °C"

client = jr.ChatClient(model, tools=[weather])
```

The tool loop (`jevrefine.ToolCallingAdvisor`) runs a turn's calls concurrently; see
`execute_tool_calls`.
"""

from __future__ import annotations

from ._callback import ToolCallback as ToolCallback
from ._callback import tool_definitions as tool_definitions
from ._decorator import FunctionTool as FunctionTool
from ._decorator import result_text as result_text
from ._decorator import tool as tool
from ._errors import ToolArgumentsError as ToolArgumentsError
from ._errors import ToolError as ToolError
from ._errors import ToolRoundsExceededError as ToolRoundsExceededError
from ._errors import ToolTimeoutError as ToolTimeoutError
from ._errors import TooManyToolCallsError as TooManyToolCallsError
from ._errors import UnknownToolError as UnknownToolError
from ._executor import ToolOutcome as ToolOutcome
from ._executor import execute_tool_calls as execute_tool_calls
from ._recording import RecordingToolCallback as RecordingToolCallback
from ._recording import ToolCallRecord as ToolCallRecord
from ._recording import record_tool_calls as record_tool_calls

__all__ = [
    "FunctionTool",
    "RecordingToolCallback",
    "TooManyToolCallsError",
    "ToolArgumentsError",
    "ToolCallRecord",
    "ToolCallback",
    "ToolError",
    "ToolOutcome",
    "ToolRoundsExceededError",
    "ToolTimeoutError",
    "UnknownToolError",
    "execute_tool_calls",
    "record_tool_calls",
    "result_text",
    "tool",
    "tool_definitions",
]
