"""Hostile SQLite paths and rows (issue 16 item 9).

A path that cannot hold a database is a `DatabaseFileError` naming it (at construction when a
stat shows it, else at first use); documents are checked on the way in; a bad stored row, written
by hand with `sqlite3`, never poisons reads.
"""

from __future__ import annotations

import logging
import os
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import jevrefine as jr
from jevrefine import AssistantMessage, UserMessage
from jevrefine.memory import DatabaseFileError, SqliteChatMemory
from jevrefine.retrieval import Document, SqliteFtsRetriever

Store = Callable[[Any], Any]
STORES: list[Store] = [SqliteChatMemory, SqliteFtsRetriever]


async def first_use(store: Any) -> None:
    if isinstance(store, SqliteChatMemory):
        await store.get("c")
    else:
        await store.retrieve("tower")


@pytest.mark.parametrize("store", STORES, ids=["memory", "fts"])
def test_a_directory_is_refused_at_construction(tmp_path: Path, store: Store) -> None:
    with pytest.raises(DatabaseFileError, match="is a directory: pass a file path inside it") as e:
        store(tmp_path)
    assert e.value.path == str(tmp_path)
    assert isinstance(e.value, jr.UserError)


@pytest.mark.parametrize("store", STORES, ids=["memory", "fts"])
def test_a_missing_directory_is_refused_at_construction(tmp_path: Path, store: Store) -> None:
    path = tmp_path / "no" / "such" / "dir" / "x.db"
    with pytest.raises(DatabaseFileError, match="directory that does not exist") as e:
        store(path)
    assert str(path) in str(e.value)


@pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="needs Linux /proc")
@pytest.mark.parametrize("store", STORES, ids=["memory", "fts"])
async def test_proc_is_a_typed_error_at_first_use(store: Store) -> None:
    made = store("/proc/self/jevrefine.db")
    with pytest.raises(DatabaseFileError, match=r"cannot use '/proc/self/jevrefine\.db'") as e:
        await first_use(made)
    assert "SQLITE_CANTOPEN" in str(e.value)
    assert isinstance(e.value.__cause__, sqlite3.OperationalError)


@pytest.mark.parametrize("store", STORES, ids=["memory", "fts"])
async def test_a_file_that_is_not_a_database_is_a_typed_error(tmp_path: Path, store: Store) -> None:
    path = tmp_path / "notes.txt"
    path.write_text("these are my notes, not a database\n" * 100, encoding="utf-8")
    with pytest.raises(DatabaseFileError, match="SQLITE_NOTADB"):
        await first_use(store(path))
    assert path.read_text(encoding="utf-8").startswith("these are my notes")


@pytest.mark.parametrize(
    ("path", "match"),
    [(123, "path=123 is not a file path"), (b"x.db", "path=b'x.db' is not a file path")],
)
def test_a_path_that_is_not_text_is_refused(path: Any, match: str) -> None:
    with pytest.raises(jr.UserError, match=match):
        SqliteChatMemory(path)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"id": "d", "text": "t", "metadata": ["a"]}, "metadata=\\['a'\\] is not a mapping"),
        ({"id": "", "text": "t"}, "id='' is empty"),
        ({"id": 7, "text": "t"}, "id=7 is not a string"),
        ({"id": "d", "text": None}, "text=None is not a string"),
        ({"id": "d", "text": "t", "metadata": {1: "x"}}, "key 1 is not a str"),
    ],
)
def test_bad_documents_are_refused_when_made(kwargs: dict[str, Any], match: str) -> None:
    with pytest.raises(jr.UserError, match=match):
        Document(**kwargs)


async def test_metadata_none_is_no_metadata_and_reads_back(tmp_path: Path) -> None:
    # Before: stored as JSON null, and every retrieve() on the file failed for good.
    store = SqliteFtsRetriever(tmp_path / "docs.db")
    await store.add([Document("eiffel", "The Eiffel tower", None)])  # type: ignore[arg-type]
    await store.add([Document("pisa", "The leaning tower of Pisa", {"city": "Pisa"})])
    found = {d.id: d.metadata for d in await store.retrieve("tower")}
    assert set(found) == {"eiffel", "pisa"}
    assert found["pisa"]["city"] == "Pisa"
    assert set(found["eiffel"]) == {"bm25"}


async def test_metadata_json_cannot_hold_is_refused_naming_the_document(tmp_path: Path) -> None:
    store = SqliteFtsRetriever(tmp_path / "docs.db")
    looped: dict[str, Any] = {}
    looped["self"] = looped
    with pytest.raises(jr.UserError, match="Document 'loop': its metadata cannot be stored"):
        await store.add([Document("ok", "fine"), Document("loop", "text", looped)])
    with pytest.raises(jr.UserError, match=r"'nan'.*cannot be stored"):
        await store.add([Document("nan", "text", {"score": float("nan")})])
    assert await store.count() == 0  # nothing of a refused batch is stored


@pytest.mark.parametrize("bad", ["null", "[1, 2]", "{not json", "7", None, b"\xff\xfe"])
async def test_a_bad_stored_metadata_row_never_poisons_reads(
    tmp_path: Path, bad: Any, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "docs.db"
    store = SqliteFtsRetriever(path)
    await store.add([Document("good", "a tower", {"n": 1}), Document("bad", "another tower")])
    with sqlite3.connect(path) as db:  # what an older version or a hand edit left behind
        if bad is None:
            db.execute("DROP TABLE jevrefine_documents")
            db.execute(
                "CREATE TABLE jevrefine_documents (rowid INTEGER PRIMARY KEY, id TEXT UNIQUE, "
                "metadata TEXT)"
            )
            db.execute("INSERT INTO jevrefine_documents VALUES (1, 'good', '{\"n\": 1}')")
            db.execute("INSERT INTO jevrefine_documents VALUES (2, 'bad', NULL)")
        else:
            db.execute("UPDATE jevrefine_documents SET metadata = ? WHERE id = 'bad'", (bad,))
    db.close()
    with caplog.at_level(logging.WARNING, logger="jevrefine.retrieval"):
        for _ in range(2):  # and again: nothing is left broken
            found = {d.id: d for d in await store.retrieve("tower")}
            assert set(found) == {"good", "bad"}
            assert found["good"].metadata["n"] == 1
            assert set(found["bad"].metadata) == {"bm25"}
    assert "not a JSON object" in caplog.text


async def test_a_stored_row_without_text_is_skipped(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "docs.db"
    store = SqliteFtsRetriever(path)
    await store.add([Document("good", "a tower"), Document("blank", "tower too")])
    with sqlite3.connect(path) as db:
        db.execute("UPDATE jevrefine_documents SET id = '' WHERE id = 'blank'")
    db.close()
    with caplog.at_level(logging.WARNING, logger="jevrefine.retrieval"):
        assert [d.id for d in await store.retrieve("tower")] == ["good"]
    assert "no usable id or text" in caplog.text


@pytest.mark.parametrize(
    "bad", ["{not json", '{"role": "wizard", "text": "x"}', "null", 42, b"\x00"]
)
async def test_a_bad_memory_row_is_skipped_with_a_warning(
    tmp_path: Path, bad: Any, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "memory.db"
    memory = SqliteChatMemory(path)
    await memory.add("c", [UserMessage("q1"), AssistantMessage("a1")])
    with sqlite3.connect(path) as db:
        db.execute(
            "INSERT INTO jevrefine_chat_memory (conversation_id, message) VALUES ('c', ?)", (bad,)
        )
    db.close()
    await memory.add("c", [UserMessage("q2"), AssistantMessage("a2")])
    with caplog.at_level(logging.WARNING, logger="jevrefine.memory"):
        assert await memory.get("c") == [
            UserMessage("q1"),
            AssistantMessage("a1"),
            UserMessage("q2"),
            AssistantMessage("a2"),
        ]
    assert "holds no valid message, skipped" in caplog.text


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"timeout": "5"}, "timeout='5' is not a number"),
        ({"timeout": -1}, "timeout=-1 must be at least 0"),
        ({"top_k": 0}, "top_k=0 is out of range"),
    ],
)
def test_retriever_settings_are_checked(tmp_path: Path, kwargs: dict[str, Any], match: str) -> None:
    with pytest.raises(jr.UserError, match=match):
        SqliteFtsRetriever(tmp_path / "x.db", **kwargs)


async def test_add_and_delete_refuse_a_bare_string(tmp_path: Path) -> None:
    store = SqliteFtsRetriever(tmp_path / "x.db")
    with pytest.raises(jr.UserError, match="add\\(\\) takes an iterable of Documents"):
        await store.add(Document("d", "t"))  # type: ignore[arg-type]
    with pytest.raises(jr.UserError, match="delete\\(\\) takes an iterable of ids"):
        await store.delete("doc-1")
    with pytest.raises(jr.UserError, match="query=3 is not a string"):
        await store.retrieve(3)  # type: ignore[arg-type]
