"""The `ChatMemory` protocol: where a conversation's earlier turns are kept."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

from .. import _validate
from ..exceptions import UserError
from ..messages import Message

__all__ = ["ChatMemory", "check_conversation_id", "check_max_messages", "window"]


@runtime_checkable
class ChatMemory(Protocol):
    """Stores the messages of conversations, each under its id.

    Implementations must be safe to use from concurrent tasks, and `add` must store its
    messages all or none, so a turn (the user message and the answer) is never half-written.
    """

    async def get(self, conversation_id: str) -> list[Message]:
        """The conversation's messages, oldest first (at most the memory's window)."""
        ...

    async def add(self, conversation_id: str, messages: Sequence[Message]) -> None:
        """Append `messages` to the conversation, all or none."""
        ...

    async def clear(self, conversation_id: str) -> None:
        """Forget the conversation."""
        ...


def check_conversation_id(conversation_id: object) -> str:
    """Check that a conversation id is a non-empty string and return it."""
    text = _validate.text("conversation_id", conversation_id, example="user-42")
    if not text:
        raise UserError(
            "conversation_id='' is empty: pass a non-empty id, e.g. "
            ".advisors(conversation_id='user-42')"
        )
    return text


def check_max_messages(max_messages: int | None) -> int | None:
    """Check a window size: a positive int, or `None` for no limit."""
    return _validate.integer("max_messages", max_messages, minimum=1, optional=True, example=100)


def window(messages: Sequence[Message], max_messages: int | None) -> list[Message]:
    """The last `max_messages` messages, never starting with an orphaned answer."""
    if max_messages is None or len(messages) <= max_messages:
        return list(messages)
    kept = messages[-max_messages:]
    # A window that starts with an assistant message would show the model an answer to a
    # question it cannot see: start at the first user message.
    start = next((i for i, m in enumerate(kept) if m.role == "user"), len(kept))
    return list(kept[start:])
