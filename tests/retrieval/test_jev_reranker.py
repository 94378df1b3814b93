"""JevDocumentReranker: ordering by P(yes), minimum score, top_k, and failure ordering."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

import pytest

from jevrefine import Document, UserError
from jevrefine.jev import JudgeClient, JudgeServerError, Noul, NoulAnswer, SystemOneResponse
from jevrefine.retrieval import RERANK_QUESTION_ID, SCORE_KEY, JevDocumentReranker
from jevrefine.testing import FakeJevServer


class Scripted:
    """Scores passages by a table; passages marked FAIL raise."""

    def __init__(self, scores: Mapping[str, float]) -> None:
        self.scores = scores
        self.questions: list[Mapping[str, Any]] = []

    async def system_one(
        self, state: Mapping[str, Any], questions: Mapping[str, Any], **kwargs: Any
    ) -> SystemOneResponse:
        self.questions.append(questions)
        text = state["passage"]
        if text.startswith("FAIL"):
            raise JudgeServerError(500, {"detail": "upstream exploded"})
        return SystemOneResponse("m", {RERANK_QUESTION_ID: NoulAnswer(self.scores[text])})


def docs(*texts: str) -> list[Document]:
    return [Document(f"d{i}", t) for i, t in enumerate(texts)]


async def test_documents_are_reordered_by_score_ties_keep_the_retriever_order() -> None:
    client = Scripted({"low": 0.1, "high": 0.9, "mid": 0.5, "mid2": 0.5})
    ranked = await JevDocumentReranker(client).process("q", docs("low", "high", "mid", "mid2"))
    assert [d.text for d in ranked] == ["high", "mid", "mid2", "low"]
    assert [d.metadata[SCORE_KEY] for d in ranked] == [0.9, 0.5, 0.5, 0.1]


async def test_minimum_score_and_top_k() -> None:
    client = Scripted({"a": 0.2, "b": 0.8, "c": 0.6, "d": 0.7})
    reranker = JevDocumentReranker(client, minimum_score=0.5, top_k=2)
    ranked = await reranker.process("q", docs("a", "b", "c", "d"))
    assert [d.text for d in ranked] == ["b", "d"]


async def test_failed_passages_come_after_every_scored_one_and_top_k_cuts_them_first(
    caplog: pytest.LogCaptureFixture,
) -> None:
    client = Scripted({"weak": 0.05, "good": 0.9})
    documents = docs("FAIL first", "weak", "FAIL second", "good")
    with caplog.at_level(logging.WARNING, logger="jevrefine.retrieval"):
        everything = await JevDocumentReranker(client).process("q", documents)
        cut = await JevDocumentReranker(client, top_k=3).process("q", documents)
    # Unscored after scored, even after a scored passage as weak as 0.05; retriever order kept.
    assert [d.text for d in everything] == ["good", "weak", "FAIL first", "FAIL second"]
    assert SCORE_KEY not in everything[2].metadata
    assert [d.text for d in cut] == ["good", "weak", "FAIL first"]
    warnings = [r.getMessage() for r in caplog.records if r.name == "jevrefine.retrieval"]
    assert len(warnings) == 2  # one per batch
    assert all("2 of 4" in w and "JudgeServerError" in w for w in warnings)


async def test_minimum_score_does_not_drop_unscored_passages() -> None:
    client = Scripted({"a": 0.1})
    ranked = await JevDocumentReranker(client, minimum_score=0.5).process("q", docs("a", "FAIL"))
    assert [d.text for d in ranked] == ["FAIL"]


async def test_a_custom_question_goes_out_under_the_pinned_id() -> None:
    question = Noul("Is `passage` from an official source answering `query`?")
    seen: list[dict[str, Any]] = []

    def answer(state: dict[str, Any], questions: dict[str, Any]) -> dict[str, float]:
        seen.append(questions)
        return {RERANK_QUESTION_ID: 0.9 if "official" in state["passage"] else 0.3}

    async with FakeJevServer(answer) as server, JudgeClient("k", base_url=server.base_url) as jev:
        ranked = await JevDocumentReranker(jev, question=question).process(
            "q", docs("a blog post", "the official gazette")
        )
    assert [d.text for d in ranked] == ["the official gazette", "a blog post"]
    assert all(list(q) == [RERANK_QUESTION_ID] for q in seen)
    assert seen[0][RERANK_QUESTION_ID]["instructions"] == question.instructions


def test_bad_arguments_are_refused() -> None:
    client = Scripted({})
    with pytest.raises(UserError, match="top_k"):
        JevDocumentReranker(client, top_k=0)
    with pytest.raises(UserError, match="minimum_score"):
        JevDocumentReranker(client, minimum_score=2)
    with pytest.raises(UserError, match="Noul"):
        JevDocumentReranker(client, question="text")  # type: ignore[arg-type]


async def test_a_bug_in_the_client_is_raised_not_counted_as_a_failed_call() -> None:
    class Broken:
        async def system_one(self, *args: Any, **kwargs: Any) -> SystemOneResponse:
            raise TypeError("a bug")

    with pytest.raises(TypeError, match="a bug"):
        await JevDocumentReranker(Broken()).process("q", docs("a"))


def test_concurrency_is_checked_at_construction() -> None:
    from jevrefine.retrieval import JevDocumentFilter

    with pytest.raises(UserError, match="concurrency"):
        JevDocumentReranker(Scripted({}), concurrency=0)
    with pytest.raises(UserError, match="concurrency"):
        JevDocumentFilter(Scripted({}), concurrency=0)
