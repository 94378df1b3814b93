"""`SqliteChatMemory`: conversations in a SQLite database file (standard library `sqlite3`)."""

from __future__ import annotations

import functools
import logging
import os
import sqlite3
from collections.abc import Sequence
from typing import Final

import pydantic

from .. import _validate
from .._sqlite_worker import SqliteWorker, database_file
from ..messages import Message
from ._base import check_conversation_id, check_max_messages, window

__all__ = ["SqliteChatMemory"]

logger = logging.getLogger("jevrefine.memory")

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

    A path that is a directory, or in a directory that does not exist, is a `DatabaseFileError`
    (a `UserError` naming the path) here; a file that cannot be opened or is not a database is
    one at first use. A stored row that is not a message (written by hand, or by another
    program) is skipped with a warning on the `jevrefine.memory` logger, never failing a read.

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
        timeout = _validate.number("timeout", timeout, minimum=0, unit="seconds", example=30.0)
        self._db = SqliteWorker(self.path, _SCHEMA, timeout=timeout)

    async def get(self, conversation_id: str) -> list[Message]:
        """The conversation's messages, oldest first."""
        key = check_conversation_id(conversation_id)
        rows = await self._db.run(functools.partial(self._select, key))
        return window([m for m in map(_message_of, rows) if m is not None], self.max_messages)

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

    def _select(self, key: str, connection: sqlite3.Connection) -> list[tuple[object, object]]:
        # One row beyond the window tells `window` that the conversation was cut.
        limit = -1 if self.max_messages is None else self.max_messages + 1
        cursor = connection.execute(
            f"SELECT id, message FROM {_TABLE} WHERE conversation_id = ? ORDER BY id DESC LIMIT ?",
            (key, limit),
        )
        return [(row[0], row[1]) for row in reversed(cursor.fetchall())]

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


def _message_of(row: tuple[object, object]) -> Message | None:
    """The stored message of `row`, or `None` (logged) when the row holds no valid message."""
    row_id, stored = row
    try:
        if not isinstance(stored, str | bytes):
            raise TypeError(f"a {type(stored).__name__}, not JSON text")
        return _MESSAGE_ADAPTER.validate_json(stored)
    except (pydantic.ValidationError, ValueError, TypeError) as exc:
        # One bad row (written by hand or by another program) must not make the conversation
        # unreadable for good: skip it, and say so where an operator looks.
        logger.warning("%s row %s holds no valid message, skipped: %.200s", _TABLE, row_id, exc)
        return None
