"""`SqliteChatMemory`: conversations in a SQLite database file (standard library `sqlite3`)."""

from __future__ import annotations

import functools
import os
import sqlite3
from collections.abc import Sequence
from typing import Final

import pydantic

from .._sqlite_worker import SqliteWorker, database_file
from ..messages import Message
from ._base import check_conversation_id, check_max_messages, window

__all__ = ["SqliteChatMemory"]

_MESSAGE_ADAPTER: pydantic.TypeAdapter[Message] = pydantic.TypeAdapter(Message)
_TABLE: Final = "jevrefine_chat_memory"
_SCHEMA: Final = f"""
CREATE TABLE IF NOT EXISTS {_TABLE} (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    conversation_id TEXT NOT NULL,
    message TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS {_TABLE}_conversation ON {_TABLE} (conversation_id, id);
"""


class SqliteChatMemory:
    """A `ChatMemory` in a SQLite database file: it survives a restart of the process.

    Args:
        path: the database file (created when missing). Several processes may share it.
        max_messages: the most recent messages kept per conversation (`None`: all of them);
            older ones are deleted when a turn is added.
        timeout: seconds to wait for another writer's lock before failing.

    Every operation runs in a worker thread on its own connection, so the event loop never
    blocks and concurrent tasks never share a connection. A turn is written in one transaction:
    all its messages or none. Operations are not abandoned on cancellation: a write that has
    started finishes (or rolls back) before the cancellation takes effect.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        max_messages: int | None = 100,
        timeout: float = 30.0,
    ) -> None:
        self.path = database_file(
            path,
            "SqliteChatMemory needs a database file path; for memory that lives only in "
            "this process use InMemoryChatMemory()",
        )
        """The database file."""
        self.max_messages = check_max_messages(max_messages)
        """The most recent messages kept per conversation."""
        self._db = SqliteWorker(self.path, _SCHEMA, timeout=timeout)

    async def get(self, conversation_id: str) -> list[Message]:
        """The conversation's messages, oldest first."""
        key = check_conversation_id(conversation_id)
        rows = await self._db.run(functools.partial(self._select, key))
        return window([_MESSAGE_ADAPTER.validate_json(r) for r in rows], self.max_messages)

    async def add(self, conversation_id: str, messages: Sequence[Message]) -> None:
        """Append `messages` in one transaction and delete those beyond the window."""
        key = check_conversation_id(conversation_id)
        rows = [(key, _MESSAGE_ADAPTER.dump_json(m).decode()) for m in messages]
        if rows:
            await self._db.run(functools.partial(self._insert, key, rows))

    async def clear(self, conversation_id: str) -> None:
        """Forget the conversation."""
        key = check_conversation_id(conversation_id)
        await self._db.run(functools.partial(self._delete, key))

    async def conversation_ids(self) -> list[str]:
        """The ids of the stored conversations, sorted."""
        return await self._db.run(self._conversation_ids)

    def _select(self, key: str, connection: sqlite3.Connection) -> list[str]:
        # One row beyond the window tells `window` that the conversation was cut.
        limit = -1 if self.max_messages is None else self.max_messages + 1
        cursor = connection.execute(
            f"SELECT message FROM {_TABLE} WHERE conversation_id = ? ORDER BY id DESC LIMIT ?",
            (key, limit),
        )
        return [row[0] for row in reversed(cursor.fetchall())]

    def _insert(
        self, key: str, rows: list[tuple[str, str]], connection: sqlite3.Connection
    ) -> None:
        connection.executemany(
            f"INSERT INTO {_TABLE} (conversation_id, message) VALUES (?, ?)", rows
        )
        if self.max_messages is not None:
            # Keep one row beyond the window, so a read can tell that the window cut the
            # conversation (and must not start with an orphaned answer).
            connection.execute(
                f"DELETE FROM {_TABLE} WHERE conversation_id = ? AND id NOT IN "
                f"(SELECT id FROM {_TABLE} WHERE conversation_id = ? ORDER BY id DESC LIMIT ?)",
                (key, key, self.max_messages + 1),
            )

    def _delete(self, key: str, connection: sqlite3.Connection) -> None:
        connection.execute(f"DELETE FROM {_TABLE} WHERE conversation_id = ?", (key,))

    def _conversation_ids(self, connection: sqlite3.Connection) -> list[str]:
        cursor = connection.execute(f"SELECT DISTINCT conversation_id FROM {_TABLE} ORDER BY 1")
        return [row[0] for row in cursor.fetchall()]

    def __repr__(self) -> str:
        return f"SqliteChatMemory({self.path!r}, max_messages={self.max_messages})"
