"""SQLite from async code: each operation in a worker thread, with its own connection.

Shared by `SqliteChatMemory` and `SqliteFtsRetriever`.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Callable
from contextlib import closing
from typing import TypeVar

import anyio.to_thread

from .exceptions import UserError

__all__ = ["SqliteWorker", "database_file"]

T = TypeVar("T")


def database_file(path: str | os.PathLike[str], error: str) -> str:
    """`path` as text; `UserError(error)` when it is empty or names an in-memory database.

    Each operation opens its own connection, and an in-memory database dies with it.
    """
    path_text = os.fspath(path)
    if not path_text or path_text == ":memory:" or path_text.startswith("file::memory:"):
        raise UserError(error)
    return path_text


class SqliteWorker:
    """Runs operations on the database file `path`, each in a worker thread.

    Every operation gets its own connection (so the event loop never blocks and concurrent tasks
    never share a connection) and runs in one transaction: committed when it returns, rolled
    back when it raises. `schema` (idempotent DDL) is run on the first connection. Operations
    are not abandoned on cancellation: one that has started finishes (or rolls back) before the
    cancellation takes effect.
    """

    def __init__(self, path: str, schema: str, *, timeout: float) -> None:
        self._path = path
        self._schema = schema
        self._timeout = timeout
        self._schema_ready = False

    async def run(self, operation: Callable[[sqlite3.Connection], T]) -> T:
        """`operation(connection)` in a worker thread, in one transaction; its result."""
        return await anyio.to_thread.run_sync(self._with_connection, operation)

    def _with_connection(self, operation: Callable[[sqlite3.Connection], T]) -> T:
        with closing(sqlite3.connect(self._path, timeout=self._timeout)) as connection:
            if not self._schema_ready:
                connection.executescript(self._schema)
                self._schema_ready = True  # idempotent DDL: a race only repeats it
            with connection:  # one transaction: committed on success, rolled back on error
                return operation(connection)
