"""Chat memory: where `MessageChatMemoryAdvisor` keeps the earlier turns of a conversation.

- `ChatMemory` — the protocol (`get`, `add`, `clear`), for your own store.
- `InMemoryChatMemory(max_messages=...)` — in the process, a sliding window per conversation.
- `SqliteChatMemory(path)` — in a SQLite database file; survives a restart of the process.
"""

from __future__ import annotations

from .._sqlite_worker import DatabaseFileError as DatabaseFileError
from ._base import ChatMemory as ChatMemory
from ._in_memory import InMemoryChatMemory as InMemoryChatMemory
from ._sqlite import SqliteChatMemory as SqliteChatMemory

__all__ = ["ChatMemory", "DatabaseFileError", "InMemoryChatMemory", "SqliteChatMemory"]
