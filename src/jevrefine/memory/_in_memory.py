"""`InMemoryChatMemory`: conversations kept in the process, in a sliding window."""

from __future__ import annotations

from collections.abc import Sequence

from ..messages import Message
from ._base import check_conversation_id, check_max_messages, window

__all__ = ["InMemoryChatMemory"]


class InMemoryChatMemory:
    """A `ChatMemory` in a dict; lost when the process ends.

    Args:
        max_messages: the most recent messages kept per conversation (`None`: all of them).

    Safe under concurrency: every method runs without awaiting, so no other task can interleave
    with it on the event loop.
    """

    def __init__(self, *, max_messages: int | None = 100) -> None:
        self.max_messages = check_max_messages(max_messages)
        """The most recent messages kept per conversation."""
        self._conversations: dict[str, list[Message]] = {}

    async def get(self, conversation_id: str) -> list[Message]:
        """The conversation's messages, oldest first."""
        return list(self._conversations.get(check_conversation_id(conversation_id), ()))

    async def add(self, conversation_id: str, messages: Sequence[Message]) -> None:
        """Append `messages` and trim the conversation to the window."""
        key = check_conversation_id(conversation_id)
        stored = [*self._conversations.get(key, ()), *messages]
        self._conversations[key] = window(stored, self.max_messages)

    async def clear(self, conversation_id: str) -> None:
        """Forget the conversation."""
        self._conversations.pop(check_conversation_id(conversation_id), None)

    def __repr__(self) -> str:
        return (
            f"InMemoryChatMemory(max_messages={self.max_messages}, "
            f"conversations={len(self._conversations)})"
        )
