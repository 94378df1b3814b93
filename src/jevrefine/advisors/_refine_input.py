"""What self-refine reads from a request: the judge's input, and the retry prompt.

Kept apart from the advisor so each rule (roles in `user_question`, tool results unpacked from the
prompt, feedback appended to the original last user message) stays small and testable alone.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..messages import (
    AssistantMessage,
    Message,
    Prompt,
    SystemMessage,
    ToolResponseMessage,
    UserMessage,
)

if TYPE_CHECKING:
    from collections.abc import Iterable, Sequence

    from ..tools import ToolCallRecord

__all__ = ["retry_prompt", "tool_calls_from_prompt", "tool_calls_from_records", "user_question"]


def user_question(prompt: Prompt) -> str:
    """The system message and the user/assistant turns, one `role: text` line each.

    Tool traffic is left out (it goes to `tool_calls`), and so are assistant turns that only
    called tools.
    """
    lines: list[str] = []
    for message in prompt.messages:
        if isinstance(message, SystemMessage | UserMessage):
            lines.append(f"{message.role}: {message.text}")
        elif isinstance(message, AssistantMessage) and message.text:
            lines.append(f"assistant: {message.text}")
    return "\n".join(lines)


class _OpenCall:
    __slots__ = ("entry", "id", "name", "open")

    def __init__(self, call_id: str, name: str, entry: dict[str, Any]) -> None:
        self.id = call_id
        self.name = name
        self.entry = entry
        self.open = True


def tool_calls_from_prompt(messages: Sequence[Message]) -> list[dict[str, Any]]:
    """Every tool call in `messages` with its result, `{name, arguments, result}`, in call order.

    A tool-response message carries no text of its own, so its results are unpacked here. Each
    result goes to the earliest open call with the same id, or, when the provider left the ids
    blank, with the same tool name: parallel calls and ids reused across turns stay apart. A call
    never answered keeps `result: None`; a result that matches no call is kept on its own.
    """
    entries: list[dict[str, Any]] = []
    calls: list[_OpenCall] = []
    for message in messages:
        if isinstance(message, AssistantMessage):
            for call in message.tool_calls:
                entry = {"name": call.name, "arguments": call.parsed_arguments(), "result": None}
                entries.append(entry)
                calls.append(_OpenCall(call.id, call.name, entry))
        elif isinstance(message, ToolResponseMessage):
            for response in message.responses:
                target = _match(calls, response.id, response.name)
                if target is None:
                    entries.append(
                        {"name": response.name, "arguments": None, "result": response.data}
                    )
                else:
                    target.open = False
                    target.entry["result"] = response.data
    return entries


def _match(calls: Iterable[_OpenCall], call_id: str, name: str) -> _OpenCall | None:
    if call_id:
        # An id is authoritative; it is only ambiguous across turns, where the earliest open wins.
        return next((c for c in calls if c.open and c.id == call_id), None)
    return next((c for c in calls if c.open and c.name == name), None)


def tool_calls_from_records(records: Iterable[ToolCallRecord]) -> list[dict[str, Any]]:
    """Recorded tool calls as `{name, arguments, result}` (a failed call: `error: <message>`)."""
    return [{"name": r.name, "arguments": r.arguments, "result": r.result} for r in records]


def retry_prompt(original: Prompt, section: str) -> Prompt:
    """`original` with `section` appended to its last user message (a new one when it has none).

    Always built from the original request, so feedback never compounds across attempts.
    """
    messages = list(original.messages)
    for index in range(len(messages) - 1, -1, -1):
        message = messages[index]
        if isinstance(message, UserMessage):
            messages[index] = UserMessage(message.text + section)
            return original.with_messages(messages)
    messages.append(UserMessage(section.lstrip()))
    return original.with_messages(messages)
