"""The request and response that travel through the advisor chain."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, TypeVar

from .exceptions import UserError

if TYPE_CHECKING:
    from .messages import ChatResponse, Prompt, Usage
    from .structured import OutputSpec
    from .tools import ToolCallback

__all__ = ["ChatClientRequest", "ChatClientResponse", "context_entry", "with_usage"]

V = TypeVar("V")


@dataclass(frozen=True, slots=True)
class ChatClientRequest:
    """One request as it travels through the advisor chain.

    Frozen: an advisor that changes the request derives a copy with `request.copy(...)`. The
    options live on `prompt.options`. `context` is a plain dict shared by the advisors of this
    request: passing a request on unchanged shares it, `copy()` makes a shallow copy unless
    `context=` is given (keep a mutable object under your key to share state across copies).
    `scope` is shared by every copy, even those an outer advisor made before yours ran.
    `output_spec` is the structured output `entity()` asked for: data, rendered into the prompt
    only by the chain's terminal link, so every advisor sees the caller's own text.
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
    remembers its input screening here). A new `ChatClientRequest` starts an empty one. Key it
    like the context (a dotted name of your own); it never reaches the response.

    Why not a mutable object in `context`: a copy an outer advisor made *before* yours first ran
    (self-refine's next attempt, copied from the original request) would not hold it.
    """
    output_spec: OutputSpec[Any] | None = None
    """The structured output asked for (`entity()`), rendered at the terminal link; `None`: text."""

    def __post_init__(self) -> None:
        if not isinstance(self.tools, tuple):
            object.__setattr__(self, "tools", tuple(self.tools))

    def copy(self, **changes: Any) -> ChatClientRequest:
        """A copy with `changes` applied (`prompt=`, `tools=`, `context=`, `output_spec=`).

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


def with_usage(response: ChatClientResponse, usage: Usage) -> ChatClientResponse:
    """`response` reporting `usage` (itself when it already does).

    The one place a response's usage is rewritten: an advisor that calls the model more than once
    (the tool loop's rounds, self-refine's attempts) reports the sum over its calls.
    """
    metadata = response.chat_response.metadata
    if metadata.usage == usage:
        return response
    chat_response = replace(response.chat_response, metadata=replace(metadata, usage=usage))
    return response.copy(chat_response=chat_response)


def context_entry(
    source: ChatClientResponse | ChatClientRequest | Mapping[str, Any],
    key: str,
    kind: type[V] | tuple[type[V], ...],
) -> V | None:
    """The value an advisor left under `key` in a response's (or request's) context, or `None`.

    The typed accessors (`RefineReport.of`, `GuardrailOutcome.of`, ...) read through this.

    Raises:
        UserError: `source` has no context, or the value under `key` is not a `kind`.
    """
    if isinstance(source, ChatClientResponse | ChatClientRequest):
        context: Mapping[str, Any] = source.context
    elif isinstance(source, Mapping):
        context = source
    else:
        raise UserError(
            f"cannot read {key!r} from a {type(source).__name__}: pass the ChatClientResponse "
            "(from spec.call()), a ChatClientRequest, or a context dict"
        )
    value = context.get(key)
    if value is None or isinstance(value, kind):
        return value
    names = kind.__name__ if isinstance(kind, type) else " or ".join(k.__name__ for k in kind)
    raise UserError(
        f"the context key {key!r} holds a {type(value).__name__}, not a {names}: something other "
        "than its advisor wrote it; leave jevrefine's keys (jevrefine.context_keys) to their "
        "advisors"
    )
