"""`JudgeInput`: what a judge reads about one answer, and the state it sends to the service."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Final

from ..jev.errors import JudgeUsageError

__all__ = ["JudgeInput"]

_RESERVED: Final = frozenset(
    {"user_question", "assistant_answer", "expected_output", "supporting_context", "tool_calls"}
)
_EMPTY: Mapping[str, Any] = MappingProxyType({})


def _tool_call_dict(value: Any) -> dict[str, Any]:
    if isinstance(value, Mapping):
        return {k: value.get(k) for k in ("name", "arguments", "result")}
    if all(hasattr(value, a) for a in ("name", "arguments", "result")):  # e.g. a ToolCallRecord
        return {"name": value.name, "arguments": value.arguments, "result": value.result}
    raise JudgeUsageError(
        f"a tool call is a dict with name, arguments and result, got {type(value).__name__}"
    )


def _document_text(value: Any) -> Any:
    # Retrieved documents carry their text in `.text`; plain strings and JSON values pass as is.
    text = getattr(value, "text", None)
    return text if isinstance(text, str) else value


@dataclass(frozen=True, slots=True)
class JudgeInput:
    """What the judge reads about one answer; `state()` is the state sent to the service."""

    user_question: str
    """The conversation the answer replies to, one `role: text` line per message."""
    assistant_answer: str
    """The answer being judged."""
    expected_output: str | None = None
    """A reference answer, when there is one."""
    supporting_context: Sequence[Any] = ()
    """Retrieved documents (text, or objects with a `.text`), one entry per document."""
    tool_calls: Sequence[Mapping[str, Any]] = ()
    """Tool calls and their results, `{name, arguments, result}` each."""
    extra: Mapping[str, Any] = field(default_factory=lambda: _EMPTY)
    """Custom fields, sent after the standard ones, in the order given."""

    def __post_init__(self) -> None:
        if not isinstance(self.user_question, str) or not isinstance(self.assistant_answer, str):
            raise JudgeUsageError("user_question and assistant_answer must be str")
        object.__setattr__(self, "supporting_context", tuple(self.supporting_context))
        calls = tuple(MappingProxyType(_tool_call_dict(c)) for c in self.tool_calls)
        object.__setattr__(self, "tool_calls", calls)
        clash = sorted(_RESERVED.intersection(self.extra))
        if clash:
            raise JudgeUsageError(f"extra field(s) {clash} would replace standard fields; rename")
        object.__setattr__(self, "extra", MappingProxyType(dict(self.extra)))

    def state(self) -> dict[str, Any]:
        """The state sent to the service, keys in the order the judge should read them.

        `user_question`, `assistant_answer`, then when present `expected_output`,
        `supporting_context`, `tool_calls`, then the custom fields. Empty lists are left out.
        """
        state: dict[str, Any] = {
            "user_question": self.user_question,
            "assistant_answer": self.assistant_answer,
        }
        if self.expected_output is not None:
            state["expected_output"] = self.expected_output
        if self.supporting_context:
            state["supporting_context"] = [_document_text(d) for d in self.supporting_context]
        if self.tool_calls:
            state["tool_calls"] = [dict(c) for c in self.tool_calls]
        state.update(self.extra)
        return state
