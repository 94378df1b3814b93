"""SqliteFtsRetriever: BM25 ranking, top-k, quoting, persistence, concurrency."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import anyio
import pytest

from jevrefine import Document, Retriever, SqliteFtsRetriever, UserError
from jevrefine.retrieval import fts_query

CORPUS = [
    Document("eiffel", "The Eiffel Tower in Paris is 330 metres tall.", {"source": "wiki"}),
    Document("berlin", "Berlin's television tower is 368 metres tall."),
    Document("louvre", "The Louvre in Paris is the world's most visited museum."),
    Document("bread", "A baguette is a long, thin loaf of French bread."),
]


@pytest.fixture
async def store(tmp_path: Path) -> SqliteFtsRetriever:
    retriever = SqliteFtsRetriever(tmp_path / "docs.db")
    await retriever.add(CORPUS)
    return retriever


def test_it_is_a_retriever(tmp_path: Path) -> None:
    assert isinstance(SqliteFtsRetriever(tmp_path / "x.db"), Retriever)


async def test_a_natural_language_question_finds_the_passage_sharing_its_key_words(
    store: SqliteFtsRetriever,
) -> None:
    found = await store.retrieve("How tall is the Eiffel Tower?")
    assert found[0].id == "eiffel"
    assert found[0].metadata["source"] == "wiki"
    # BM25 rank: lower is better, in the order returned.
    ranks = [d.metadata["bm25"] for d in found]
    assert ranks == sorted(ranks)
    assert found[-1].id == "bread"  # shares only "is" with the question


async def test_stemming_matches_other_word_forms(store: SqliteFtsRetriever) -> None:
    found = await store.retrieve("museums in paris")
    assert found[0].id == "louvre"


async def test_top_k_bounds_the_result(store: SqliteFtsRetriever) -> None:
    assert len(await store.retrieve("Paris tall tower", top_k=1)) == 1
    assert len(await store.retrieve("Paris tall tower", top_k=10)) == 3
    default = SqliteFtsRetriever(store.path, top_k=2)
    assert len(await default.retrieve("Paris tall tower")) == 2
    with pytest.raises(UserError, match="top_k"):
        await store.retrieve("Paris", top_k=0)


@pytest.mark.parametrize(
    "query",
    [
        'tower" OR "bread',
        "NEAR(tower paris)",
        "tower AND NOT paris",
        "text: tower*",
        "(((",
        "^tower",
        "'; DROP TABLE jevrefine_documents; --",
    ],
)
async def test_user_text_is_never_parsed_as_fts_syntax(
    store: SqliteFtsRetriever, query: str
) -> None:
    # Every one of these would be a syntax error or an operator if passed to MATCH unquoted.
    await store.retrieve(query)
    assert await store.count() == len(CORPUS)


def test_the_query_is_quoted_words_or_ed() -> None:
    assert fts_query('How "tall" is it? NEAR(a b)') == (
        '"how" OR "tall" OR "is" OR "it" OR "near" OR "a" OR "b"'
    )
    assert fts_query("Tower tower TOWER") == '"tower"'
    assert fts_query(" ?! ") is None
    assert fts_query(" ".join(f"w{i}" for i in range(500))).count(" OR ") == 63


async def test_blank_queries_match_nothing(store: SqliteFtsRetriever) -> None:
    assert await store.retrieve("") == []
    assert await store.retrieve("?!") == []


async def test_add_replaces_by_id_and_delete_removes(store: SqliteFtsRetriever) -> None:
    await store.add([Document("eiffel", "The Eiffel Tower was finished in 1889.")])
    assert await store.count() == len(CORPUS)
    found = await store.retrieve("Eiffel")
    assert [(d.id, d.text) for d in found] == [("eiffel", "The Eiffel Tower was finished in 1889.")]
    assert "bm25" in found[0].metadata
    await store.delete(["eiffel", "no-such-id"])
    assert await store.retrieve("Eiffel") == []
    assert await store.count() == len(CORPUS) - 1


async def test_documents_survive_a_new_instance(tmp_path: Path) -> None:
    path = tmp_path / "persist.db"
    await SqliteFtsRetriever(path).add(CORPUS)
    reopened = SqliteFtsRetriever(path)
    assert (await reopened.retrieve("baguette"))[0].id == "bread"
    with sqlite3.connect(path) as connection:  # an ordinary SQLite file
        assert connection.execute("SELECT count(*) FROM jevrefine_documents").fetchone() == (4,)


async def test_concurrent_writers_and_readers(tmp_path: Path) -> None:
    store = SqliteFtsRetriever(tmp_path / "busy.db")
    await store.add(CORPUS[:1])

    async def write(n: int) -> None:
        await store.add([Document(f"doc{n}", f"passage number {n} about towers")])

    async def read() -> None:
        assert await store.retrieve("Eiffel")

    async with anyio.create_task_group() as group:
        for n in range(20):
            group.start_soon(write, n)
            group.start_soon(read)
    assert await store.count() == 21


def test_an_in_memory_database_is_refused() -> None:
    with pytest.raises(UserError, match="file path"):
        SqliteFtsRetriever(":memory:")


async def test_add_takes_documents_only(store: SqliteFtsRetriever) -> None:
    with pytest.raises(UserError, match="Documents"):
        await store.add(["text"])  # type: ignore[list-item]
