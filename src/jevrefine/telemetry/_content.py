"""Message content in the conventions' JSON shapes (recorded only on opt-in)."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, Final

from ..messages import AssistantMessage, SystemMessage, UserMessage
from ._names import GEN_AI_INPUT_MESSAGES, GEN_AI_SYSTEM_INSTRUCTIONS, GEN_AI_TOOL_DEFINITIONS

if TYPE_CHECKING:
    from collections.abc import Mapping

    from ..messages import ChatResponse, Message, Prompt

__all__ = ["as_json", "finish_reason_of", "input_content", "output_content"]

_FINISH_REASONS: Final = {
    # The output-messages schema's values: `tool_call` (singular), `length`, `content_filter`,
    # `stop`, `error`. Providers' spellings map onto them; others pass through.
    "tool_calls": "tool_call",
    "tool_use": "tool_call",
    "function_call": "tool_call",
    "max_tokens": "length",
    "end_turn": "stop",
    "stop_sequence": "stop",
}


def finish_reason_of(reason: str | None) -> str | None:
    """The output-messages schema's finish reason for a provider's (`tool_calls` -> `tool_call`)."""
    if reason is None:
        return None
    return _FINISH_REASONS.get(reason, reason)


def _parts_of(message: Message) -> list[dict[str, Any]]:
    if isinstance(message, (SystemMessage, UserMessage)):
        return [{"type": "text", "content": message.text}]
    if isinstance(message, AssistantMessage):
        parts: list[dict[str, Any]] = []
        if message.text:
            parts.append({"type": "text", "content": message.text})
        parts.extend(
            {"type": "tool_call", "id": c.id, "name": c.name, "arguments": c.parsed_arguments()}
            for c in message.tool_calls
        )
        return parts
    return [
        {"type": "tool_call_response", "id": r.id, "response": r.data} for r in message.responses
    ]


def input_content(prompt: Prompt) -> dict[str, list[dict[str, Any]]]:
    """`gen_ai.input.messages`, `gen_ai.system_instructions` and `gen_ai.tool.definitions`."""
    system = [
        {"type": "text", "content": m.text} for m in prompt.messages if isinstance(m, SystemMessage)
    ]
    messages: list[dict[str, Any]] = [
        {"role": m.role, "parts": _parts_of(m)}
        for m in prompt.messages
        if not isinstance(m, SystemMessage)
    ]
    attributes: dict[str, list[dict[str, Any]]] = {GEN_AI_INPUT_MESSAGES: messages}
    if system:
        attributes[GEN_AI_SYSTEM_INSTRUCTIONS] = system
    tools = prompt.options.tools
    if tools:
        # Definitions can hold descriptions written from user data: content, so opt-in only.
        attributes[GEN_AI_TOOL_DEFINITIONS] = [
            {
                "type": "function",
                "name": t.name,
                "description": t.description,
                "parameters": t.parameters,
            }
            for t in tools
        ]
    return attributes


def as_json(structured: Mapping[str, Any]) -> dict[str, str]:
    """Span attributes cannot hold objects: the conventions let spans store the JSON text."""
    return {k: json.dumps(v, ensure_ascii=False) for k, v in structured.items()}


def output_content(response: ChatResponse) -> list[dict[str, Any]]:
    """`gen_ai.output.messages`: one assistant message per generation."""
    return [
        {
            "role": "assistant",
            "parts": _parts_of(g.output),
            "finish_reason": finish_reason_of(g.finish_reason),
        }
        for g in response.results
    ]
