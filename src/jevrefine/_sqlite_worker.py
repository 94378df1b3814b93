"""SQLite from async code: each operation in a worker thread, with its own connection.

Shared by `SqliteChatMemory` and `SqliteFtsRetriever`. A path that cannot hold a database is a
`DatabaseFileError` naming it: at construction when a stat shows it (a directory, a directory
that does not exist), at first use for what only opening it tells (no permission, `/proc`, a file
that is not a database).
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Callable
from contextlib import closing
from typing import Final, TypeVar

import anyio.to_thread

from .exceptions import UserError

__all__ = ["DatabaseFileError", "SqliteWorker", "database_file"]

T = TypeVar("T")

_FILE_ERRORS: Final = (
    "SQLITE_CANTOPEN",
    "SQLITE_NOTADB",
    "SQLITE_READONLY",
    "SQLITE_PERM",
    "SQLITE_IOERR",
    "SQLITE_CORRUPT",
    "SQLITE_AUTH",
    "SQLITE_FULL",
)
"""sqlite error names that say the file itself is unusable (prefixes: `SQLITE_IOERR_READ`...).
A busy or locked database is not among them: that is another writer, not a wrong path."""


class DatabaseFileError(UserError):
    """The database path cannot hold a SQLite database; the message names it and the fix."""

    def __init__(self, message: str, *, path: str) -> None:
        super().__init__(message)
        self.path = path
        """The path that was given."""


def database_file(path: str | os.PathLike[str], error: str) -> str:
    """`path` as text, checked as far as a stat can tell; `UserError(error)` for no file at all.

    Each operation opens its own connection, and an in-memory database dies with it, so an empty
    path or `:memory:` is refused. A directory, or a path whose directory does not exist, is a
    `DatabaseFileError` here rather than at first use.
    """
    if not isinstance(path, str | os.PathLike):
        raise UserError(
            f"path={path!r:.60} is not a file path: pass a str or pathlib.Path, e.g. 'store.db'"
        )
    path_text = os.fspath(path)
    if not isinstance(path_text, str):  # a PathLike of bytes
        raise UserError(f"path={path_text!r:.60} is bytes: pass the path as a str or pathlib.Path")
    if not path_text or path_text == ":memory:" or path_text.startswith("file::memory:"):
        raise UserError(error)
    if os.path.isdir(path_text):
        raise DatabaseFileError(
            f"the database path {path_text!r} is a directory: pass a file path inside it, e.g. "
            f"{os.path.join(path_text, 'jevrefine.db')!r}",
            path=path_text,
        )
    parent = os.path.dirname(os.path.abspath(path_text))
    if not os.path.isdir(parent):
        raise DatabaseFileError(
            f"the database path {path_text!r} is in a directory that does not exist ({parent!r}):"
            " create the directory first, or pass a path in an existing one",
            path=path_text,
        )
    return path_text


def _file_error(path: str, exc: sqlite3.Error) -> DatabaseFileError | None:
    name = getattr(exc, "sqlite_errorname", "") or ""
    if not name.startswith(_FILE_ERRORS):
        return None
    return DatabaseFileError(
        f"cannot use {path!r} as a SQLite database ({name}: {exc}): pass the path of a "
        "database file (new or one jevrefine made) in a directory this process may write to",
        path=path,
    )


class SqliteWorker:
    """Runs operations on the database file `path`, each in a worker thread.

    Every operation gets its own connection (so the event loop never blocks and concurrent tasks
    never share a connection) and runs in one transaction: committed when it returns, rolled
    back when it raises. `schema` (idempotent DDL) is run on the first connection. Operations
    are not abandoned on cancellation: one that has started finishes (or rolls back) before the
    cancellation takes effect. A file that cannot be opened or is not a database raises
    `DatabaseFileError`; a locked database raises `sqlite3.OperationalError` as it is.
    """

    def __init__(self, path: str, schema: str, *, timeout: float) -> None:
        self._path = path
        self._schema = schema
        self._timeout = timeout
        self._schema_ready = False

    async def run(self, operation: Callable[[sqlite3.Connection], T]) -> T:
        """`operation(connection)` in a worker thread, in one transaction; its result."""
        return await anyio.to_thread.run_sync(self._guarded, operation)

    def _guarded(self, operation: Callable[[sqlite3.Connection], T]) -> T:
        try:
            return self._with_connection(operation)
        except sqlite3.Error as exc:
            error = _file_error(self._path, exc)
            if error is None:
                raise
            raise error from exc

    def _with_connection(self, operation: Callable[[sqlite3.Connection], T]) -> T:
        with closing(sqlite3.connect(self._path, timeout=self._timeout)) as connection:
            if not self._schema_ready:
                connection.executescript(self._schema)
                self._schema_ready = True  # idempotent DDL: a race only repeats it
            with connection:  # one transaction: committed on success, rolled back on error
                return operation(connection)
