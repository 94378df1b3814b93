"""Errors of tools and of the tool loop (part of the `JevrefineError` tree).

```
JevrefineError
└── ToolError                    a tool call could not produce a result
    ├── ToolArgumentsError       the model's arguments are not valid JSON or do not fit the schema
    ├── ToolTimeoutError         the tool did not finish in time
    ├── TooManyToolCallsError    the turn asked for more calls than one turn may run
    └── UnknownToolError         the model asked for a tool the request does not carry
ToolRoundsExceededError          the model still asked for tools after `max_rounds` rounds
```

The `ToolError`s never escape the tool loop: each becomes the error result of its own call, so
the model reads what went wrong. Only `ToolRoundsExceededError` reaches the caller.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from ..exceptions import JevrefineError

if TYPE_CHECKING:
    from ..messages import ChatResponse, Message

__all__ = [
    "TooManyToolCallsError",
    "ToolArgumentsError",
    "ToolError",
    "ToolRoundsExceededError",
    "ToolTimeoutError",
    "UnknownToolError",
]


class ToolError(JevrefineError):
    """A tool call could not produce a result; the tool loop turns it into an error result."""

    def __init__(self, message: str, *, tool_name: str) -> None:
        super().__init__(message)
        self.tool_name = tool_name
        """The name of the tool that was called."""


class ToolArgumentsError(ToolError):
    """The model's arguments are not valid JSON, or do not fit the tool's parameters."""


class ToolTimeoutError(ToolError):
    """The tool did not finish within its timeout.

    A sync tool's worker thread cannot be stopped: its result is abandoned and the thread
    finishes on its own.
    """

    def __init__(self, tool_name: str, timeout: float) -> None:
        super().__init__(f"tool {tool_name!r} timed out after {timeout:g} s", tool_name=tool_name)
        self.timeout = timeout
        """The timeout that ran out, in seconds."""


class TooManyToolCallsError(ToolError):
    """One model turn asked for more tool calls than a turn may run; this call was not run.

    The calls beyond the limit are answered with this error (in call order, after the ones that
    ran), so the model reads why and can ask again for fewer: none is dropped unanswered.
    """

    def __init__(self, tool_name: str, asked: int, limit: int) -> None:
        super().__init__(
            f"this call to {tool_name!r} was not run: the turn asked for {asked} tool calls and "
            f"at most {limit} run per turn; ask for fewer calls at a time (the limit is "
            "ToolCallingAdvisor(max_tool_calls=...))",
            tool_name=tool_name,
        )
        self.asked = asked
        """How many calls the turn asked for."""
        self.limit = limit
        """The most calls one turn may run."""


class UnknownToolError(ToolError):
    """The model asked for a tool that the request does not carry."""

    def __init__(self, tool_name: str, available: Sequence[str]) -> None:
        names = ", ".join(sorted(available)) or "none"
        super().__init__(
            f"there is no tool named {tool_name!r}; the available tools are: {names}",
            tool_name=tool_name,
        )


class ToolRoundsExceededError(JevrefineError):
    """The model still asked for tools after `max_rounds` tool rounds.

    The conversation so far is kept on the error, so nothing is lost: `messages` ends with the
    assistant message whose tool calls were not run.
    """

    def __init__(
        self, max_rounds: int, messages: Sequence[Message], response: ChatResponse
    ) -> None:
        super().__init__(
            f"the model still asked for tools after {max_rounds} tool round(s); raise "
            "ToolCallingAdvisor(max_rounds=...) if the task needs more, or check that the tools' "
            "results let the model finish"
        )
        self.max_rounds = max_rounds
        """The limit that was reached."""
        self.messages = tuple(messages)
        """The conversation so far, oldest first, ending with the unanswered tool calls."""
        self.response = response
        """The last model response (the one whose tool calls were not run)."""
