"""`SqliteFtsRetriever`: a persistent full-text retriever on SQLite FTS5, ranked by BM25."""

from __future__ import annotations

import functools
import json
import logging
import os
import re
import sqlite3
from collections.abc import Iterable, Sequence
from typing import Final

from .. import _validate
from .._sqlite_worker import SqliteWorker, database_file
from ..exceptions import UserError
from ._document import Document

__all__ = ["SqliteFtsRetriever", "fts_query"]

logger = logging.getLogger("jevrefine.retrieval")

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

    A path that is a directory, or in a directory that does not exist, is a `DatabaseFileError`
    (a `UserError` naming the path) here; a file that cannot be opened or is not a database is
    one at first use. `add` stores only metadata that JSON can hold (values it cannot are stored
    as their `str()`), else raises a `UserError` naming the document. A stored row whose
    metadata is not a JSON object (written by hand, or by another program) is returned with
    empty metadata and a warning on the `jevrefine.retrieval` logger: it never fails a read.
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
        self.top_k = _validate.integer("top_k", top_k, minimum=1, example=4)
        """How many documents `retrieve` returns by default."""
        timeout = _validate.number("timeout", timeout, minimum=0, unit="seconds", example=30.0)
        self._db = SqliteWorker(self.path, _SCHEMA, timeout=timeout)

    async def add(self, documents: Iterable[Document]) -> None:
        """Store `documents`; one with an id already stored replaces it."""
        if isinstance(documents, str | bytes | Document):
            raise UserError(
                f"add() takes an iterable of Documents, got a {type(documents).__name__}: "
                "pass a list, e.g. add([Document('doc-1', 'text')])"
            )
        rows = [(d.id, d.text, _metadata_json(d)) for d in _documents(documents)]
        if rows:
            await self._db.run(functools.partial(_insert, rows))

    async def delete(self, ids: Iterable[str]) -> None:
        """Remove the documents with these ids (unknown ids are ignored)."""
        if isinstance(ids, str | bytes):
            raise UserError(
                f"delete() takes an iterable of ids, got the {type(ids).__name__} "
                f"{_validate.shown(ids)}: pass a list, e.g. delete(['doc-1'])"
            )
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
        limit = self.top_k if top_k is None else _validate.integer("top_k", top_k, minimum=1)
        match = fts_query(_validate.text("query", query, example="How tall is the tower?"))
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
        document = _stored_document(key, text, metadata, rank)
        if document is not None:
            documents.append(document)
    return documents


def _documents(documents: Iterable[Document]) -> list[Document]:
    checked = []
    for document in documents:
        if not isinstance(document, Document):
            raise UserError(
                f"add() takes Documents, got {type(document).__name__} "
                f"{_validate.shown(document)}: wrap it, e.g. Document('doc-1', 'text')"
            )
        checked.append(document)
    return checked


def _metadata_json(document: Document) -> str:
    try:
        # default=str: a date or a path is stored as its text rather than refused.
        return json.dumps(document.metadata, default=str, allow_nan=False)
    except (TypeError, ValueError, RecursionError) as exc:
        raise UserError(
            f"Document {document.id!r}: its metadata cannot be stored as JSON ({exc}): pass "
            "metadata of str keys and JSON values (str, number, bool, None, lists, dicts)"
        ) from None


def _stored_document(key: object, text: object, metadata: object, rank: float) -> Document | None:
    """The document of one stored row; a bad row is logged, never raised to the reader."""
    if not isinstance(key, str) or not key or not isinstance(text, str):
        logger.warning("a stored document row (id %.80r) has no usable id or text, skipped", key)
        return None
    values = _stored_metadata(key, metadata)
    values["bm25"] = rank
    return Document(key, text, values)


def _stored_metadata(key: str, metadata: object) -> dict[str, object]:
    try:
        values = json.loads(metadata) if isinstance(metadata, str | bytes) else None
    except (ValueError, RecursionError):
        values = None
    if isinstance(values, dict):
        return values
    # Keep the passage (its text is fine) and drop only what cannot be read.
    logger.warning("document %.80r has stored metadata that is not a JSON object; read as {}", key)
    return {}
