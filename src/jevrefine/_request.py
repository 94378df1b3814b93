"""The request and response that travel through the advisor chain."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .messages import ChatResponse, Prompt
    from .tools import ToolCallback

__all__ = ["ChatClientRequest", "ChatClientResponse"]


@dataclass(frozen=True, slots=True)
class ChatClientRequest:
    """One request as it travels through the advisor chain.

    Frozen: an advisor that changes the request derives a copy with `request.copy(...)`. The
    options live on `prompt.options`. `context` is a plain dict shared by the advisors of this
    request: passing a request on unchanged shares it, `copy()` makes a shallow copy unless
    `context=` is given (keep a mutable object under your key to share state across copies).
    `scope` is shared by every copy, even those an outer advisor made before yours ran.
    """

    prompt: Prompt
    """The messages and options to send."""
    tools: tuple[ToolCallback, ...] = ()
    """The tools the model may call on this request."""
    context: dict[str, Any] = field(default_factory=dict)
    """State shared by the advisors of this request (see `jevrefine.context_keys`)."""
    scope: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)
    """Private state of the advisors, shared by every copy of this request.

    Unlike `context`, `copy()` never duplicates it, so what an advisor notes here reaches every
    attempt and tool round of the same request, whichever advisor made the copy (the guardrail
    remembers its input screening here). A new `ChatClientRequest` starts an empty one.
    """

    def __post_init__(self) -> None:
        if not isinstance(self.tools, tuple):
            object.__setattr__(self, "tools", tuple(self.tools))

    def copy(self, **changes: Any) -> ChatClientRequest:
        """A copy with `changes` applied (`prompt=`, `tools=`, `context=`).

        Without `context=`, the copy gets a shallow copy of this request's context.
        """
        if "context" not in changes:
            changes["context"] = dict(self.context)
        return replace(self, **changes)


@dataclass(frozen=True, slots=True)
class ChatClientResponse:
    """A model response and the context of the request that produced it."""

    chat_response: ChatResponse
    """The model's response."""
    context: dict[str, Any] = field(default_factory=dict)
    """The context of the request that produced this response."""

    @property
    def content(self) -> str:
        """The first generation's text."""
        return self.chat_response.text

    def copy(self, **changes: Any) -> ChatClientResponse:
        """A copy with `changes` applied (`chat_response=`, `context=`)."""
        return replace(self, **changes)
