"""`SqliteFtsRetriever`: a persistent full-text retriever on SQLite FTS5, ranked by BM25."""

from __future__ import annotations

import functools
import json
import os
import re
import sqlite3
from collections.abc import Iterable, Sequence
from typing import Final

from .._sqlite_worker import SqliteWorker, database_file
from ..exceptions import UserError
from ._document import Document, check_top_k

__all__ = ["SqliteFtsRetriever", "fts_query"]

_WORD: Final = re.compile(r"\w+", re.UNICODE)
_MAX_QUERY_WORDS: Final = 64
"""Longer queries are cut: a retry query carrying the judge's feedback can be long, and every
extra OR-ed word costs a posting-list scan."""


def fts_query(text: str) -> str | None:
    """`text` as an FTS5 query: each word quoted as a string, the words OR-ed.

    Quoting makes every word a literal: FTS5 operators (`AND`, `NEAR`, `*`, `:`, parentheses) in
    user text are matched as words, never parsed. Repeated words are sent once. `None` when the
    text has no word at all (nothing can match).
    """
    words: list[str] = []
    seen: set[str] = set()
    for match in _WORD.finditer(text):
        word = match.group().casefold()
        if word not in seen:
            seen.add(word)
            words.append(word)
        if len(words) == _MAX_QUERY_WORDS:
            break
    if not words:
        return None
    # A double quote inside an FTS5 string is written twice; \w+ never yields one, but the rule
    # is kept here so a change to the tokenising regex cannot open an injection.
    return " OR ".join('"' + w.replace('"', '""') + '"' for w in words)


_SCHEMA: Final = """
CREATE TABLE IF NOT EXISTS jevrefine_documents (
    rowid INTEGER PRIMARY KEY,
    id TEXT NOT NULL UNIQUE,
    metadata TEXT NOT NULL
);
CREATE VIRTUAL TABLE IF NOT EXISTS jevrefine_documents_fts
    USING fts5(text, tokenize = 'porter unicode61');
"""


class SqliteFtsRetriever:
    """A `Retriever` over a SQLite database file: full-text search (FTS5), BM25 ranking.

    ```python
    retriever = SqliteFtsRetriever("docs.db")
    await retriever.add([Document("eiffel", "The Eiffel Tower is 330 metres tall.")])
    documents = await retriever.retrieve("How tall is the Eiffel Tower?", top_k=3)
    ```

    Each word of the query is quoted and the words are OR-ed, so a natural-language question
    finds the passages that share its key words, the rarest words weighing most (BM25), and
    nothing in user text is read as FTS5 syntax. Words are stemmed (`porter`): "towers" finds
    "tower". Each returned document carries its BM25 rank in `metadata["bm25"]` (lower is better).

    Args:
        path: The database file (created when missing); documents survive a restart.
        top_k: How many documents `retrieve` returns when not told.
        timeout: Seconds to wait for another writer's lock before failing.

    Every operation runs in a worker thread on its own connection, so the event loop never
    blocks and concurrent tasks never share a connection; `add` and `delete` are one transaction.
    """

    def __init__(
        self, path: str | os.PathLike[str], *, top_k: int = 4, timeout: float = 30.0
    ) -> None:
        self.path = database_file(
            path,
            "SqliteFtsRetriever needs a database file path (an in-memory database would be "
            "empty on every call); use a temporary file for throwaway stores",
        )
        """The database file."""
        check_top_k(top_k, optional=False)
        self.top_k = top_k
        """How many documents `retrieve` returns by default."""
        self._db = SqliteWorker(self.path, _SCHEMA, timeout=timeout)

    async def add(self, documents: Iterable[Document]) -> None:
        """Store `documents`; one with an id already stored replaces it."""
        rows = []
        for document in documents:
            if not isinstance(document, Document):
                raise UserError(f"add() takes Documents, got {type(document).__name__}")
            rows.append((document.id, document.text, json.dumps(document.metadata, default=str)))
        if rows:
            await self._db.run(functools.partial(_insert, rows))

    async def delete(self, ids: Iterable[str]) -> None:
        """Remove the documents with these ids (unknown ids are ignored)."""
        keys = [str(i) for i in ids]
        if keys:
            await self._db.run(functools.partial(_delete, keys))

    async def count(self) -> int:
        """How many documents are stored."""
        return await self._db.run(_count)

    async def retrieve(self, query: str, *, top_k: int | None = None) -> list[Document]:
        """The best matches for `query` by BM25, best first; at most `top_k` (default `self.top_k`).

        A query without a word (blank, punctuation only) matches nothing.
        """
        limit = self.top_k if top_k is None else top_k
        check_top_k(limit, optional=False)
        match = fts_query(query)
        if match is None:
            return []
        return await self._db.run(functools.partial(_search, match, limit))

    def __repr__(self) -> str:
        return f"SqliteFtsRetriever({self.path!r}, top_k={self.top_k})"


def _delete_rows(connection: sqlite3.Connection, ids: Sequence[str]) -> None:
    for key in ids:
        row = connection.execute(
            "SELECT rowid FROM jevrefine_documents WHERE id = ?", (key,)
        ).fetchone()
        if row is not None:
            connection.execute("DELETE FROM jevrefine_documents_fts WHERE rowid = ?", row)
            connection.execute("DELETE FROM jevrefine_documents WHERE rowid = ?", row)


def _insert(rows: Sequence[tuple[str, str, str]], connection: sqlite3.Connection) -> None:
    _delete_rows(connection, [r[0] for r in rows])
    for key, text, metadata in rows:
        cursor = connection.execute(
            "INSERT INTO jevrefine_documents (id, metadata) VALUES (?, ?)", (key, metadata)
        )
        connection.execute(
            "INSERT INTO jevrefine_documents_fts (rowid, text) VALUES (?, ?)",
            (cursor.lastrowid, text),
        )


def _delete(ids: Sequence[str], connection: sqlite3.Connection) -> None:
    _delete_rows(connection, ids)


def _count(connection: sqlite3.Connection) -> int:
    row = connection.execute("SELECT count(*) FROM jevrefine_documents").fetchone()
    return int(row[0])


def _search(match: str, limit: int, connection: sqlite3.Connection) -> list[Document]:
    # The match expression is a bound parameter built by fts_query: quoted words only.
    cursor = connection.execute(
        "SELECT d.id, f.text, d.metadata, bm25(jevrefine_documents_fts) AS rank "
        "FROM jevrefine_documents_fts AS f JOIN jevrefine_documents AS d ON d.rowid = f.rowid "
        "WHERE jevrefine_documents_fts MATCH ? ORDER BY rank, d.rowid LIMIT ?",
        (match, limit),
    )
    documents = []
    for key, text, metadata, rank in cursor.fetchall():
        values = json.loads(metadata)
        values["bm25"] = rank
        documents.append(Document(key, text, values))
    return documents
