"""What self-refine reads from a request: the judge's input, and the retry prompt.

Kept apart from the advisor so each rule (roles in `user_question`, tool results unpacked from the
prompt, feedback appended to the original last user message) stays small and testable alone.
"""

from __future__ import annotations

from collections import deque
from typing import TYPE_CHECKING, Any

from ...messages import (
    AssistantMessage,
    Message,
    Prompt,
    SystemMessage,
    ToolResponseMessage,
    UserMessage,
)

if TYPE_CHECKING:
    from collections.abc import Iterable, Sequence

    from ...tools import ToolCallRecord

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


def tool_calls_from_prompt(messages: Sequence[Message]) -> list[dict[str, Any]]:
    """Every tool call in `messages` with its result, `{name, arguments, result}`, in call order.

    A tool-response message carries no text of its own, so its results are unpacked here. A
    result with an id goes to the earliest open call with that id (ids reused across turns stay
    apart); a result with a blank id goes to the earliest open call of the same tool name that
    has a blank id too (providers such as Google GenAI leave every id blank), never to a call
    with an id of its own. A call never answered keeps `result: None`; a result that matches no
    call is kept as an entry of its own (`arguments: None`), after the calls that precede it.

    Linear in the calls and results: each open call waits in one queue, keyed by its id (or, when
    that is blank, by its name), so a result finds its call without scanning the history.
    """
    entries: list[dict[str, Any]] = []
    with_id: dict[str, deque[dict[str, Any]]] = {}
    blank_id: dict[str, deque[dict[str, Any]]] = {}
    for message in messages:
        if isinstance(message, AssistantMessage):
            for call in message.tool_calls:
                entry = {"name": call.name, "arguments": call.parsed_arguments(), "result": None}
                entries.append(entry)
                _queue(with_id, blank_id, call.id, call.name).append(entry)
        elif isinstance(message, ToolResponseMessage):
            for response in message.responses:
                waiting = _queue(with_id, blank_id, response.id, response.name)
                if waiting:
                    waiting.popleft()["result"] = response.data
                else:
                    entries.append(
                        {"name": response.name, "arguments": None, "result": response.data}
                    )
    return entries


def _queue(
    with_id: dict[str, deque[dict[str, Any]]],
    blank_id: dict[str, deque[dict[str, Any]]],
    call_id: str,
    name: str,
) -> deque[dict[str, Any]]:
    # An id is authoritative (only ambiguous across turns, where the earliest open call wins);
    # a blank id pairs by name, among blank-id calls only.
    queues, key = (with_id, call_id) if call_id else (blank_id, name)
    queue = queues.get(key)
    if queue is None:
        queue = queues[key] = deque()
    return queue


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
