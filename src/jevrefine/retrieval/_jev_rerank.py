"""`JevDocumentReranker`: one Jev noul per (query, passage); the passages reordered by it."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final

from ..exceptions import UserError
from ..jev.questions import Noul
from ._document import check_top_k
from ._jev_common import ask_per_document, check_concurrency

if TYPE_CHECKING:
    from ..jev.protocol import SystemOneClient
    from ..jev.responses import SystemOneResponse
    from ._document import Document

__all__ = ["DEFAULT_RERANK_QUESTION", "RERANK_QUESTION_ID", "SCORE_KEY", "JevDocumentReranker"]

RERANK_QUESTION_ID: Final = "answers_query"
"""The id of the reranker's question."""
SCORE_KEY: Final = "jev.score"
"""Metadata key of a scored document's P(yes); absent when its call failed."""
DEFAULT_RERANK_QUESTION: Final = Noul(
    "Does `passage` contain information that answers `query`?",
    when_true="The passage answers the query, fully or in part",
    when_false="The passage does not help answer the query",
)
"""The default question: P(yes) is the passage's score."""


def _score(response: SystemOneResponse) -> float:
    return response.noul(RERANK_QUESTION_ID).noul


class JevDocumentReranker:
    """A document post-processor that orders passages by Jev's P(the passage answers the query).

    ```python
    advisor = RetrievalAdvisor(retriever, top_k=20,
                               post_processors=[JevDocumentReranker(JudgeClient(), top_k=4)])
    ```

    One `system_one` call per passage, at most `concurrency` at a time. Scored passages come
    first, best first (ties keep the retriever's order), each with its score in
    `metadata["jev.score"]`; those below `minimum_score` are dropped. A passage whose call
    failed is kept unscored, after every scored one (in the retriever's order), with one warning
    per batch counting them; so `top_k` cuts unscored passages before any scored one.

    Args:
        client: Whatever answers the question (`JudgeClient`, `ModelJudgeClient`).
        question: The `Noul` asked (id `answers_query`); P(yes) is the score.
        top_k: Keep at most this many (`None`: all).
        minimum_score: Drop scored passages below this (0 to 1).
        concurrency: At most this many calls in flight.
        model: The judge model (default: the client's).
    """

    def __init__(
        self,
        client: SystemOneClient,
        *,
        question: Noul = DEFAULT_RERANK_QUESTION,
        top_k: int | None = None,
        minimum_score: float = 0.0,
        concurrency: int = 4,
        model: str | None = None,
    ) -> None:
        if not callable(getattr(client, "system_one", None)):
            raise UserError(
                f"JevDocumentReranker needs a SystemOneClient, got {type(client).__name__}"
            )
        if not isinstance(question, Noul):
            raise UserError(f"question must be a Noul, got {type(question).__name__}")
        check_top_k(top_k)
        if not 0.0 <= minimum_score <= 1.0:
            raise UserError(f"minimum_score must be between 0 and 1, got {minimum_score!r}")
        self.client = client
        """What answers the question."""
        self.question = question
        """The question asked about each passage."""
        self.top_k = top_k
        """The most passages kept (`None`: all)."""
        self.minimum_score = minimum_score
        """Scored passages below this are dropped."""
        self.concurrency = check_concurrency(concurrency)
        """At most this many calls in flight."""
        self.model = model
        """The judge model (`None`: the client's)."""

    async def process(self, query: str, documents: list[Document]) -> list[Document]:
        """Scored passages by descending score, then the unscored ones; cut to `top_k`."""
        if not documents:
            return []
        results = await ask_per_document(
            "JevDocumentReranker",
            "unscored, after the scored ones",
            self.client,
            query,
            documents,
            {RERANK_QUESTION_ID: self.question},
            _score,
            concurrency=self.concurrency,
            model=self.model,
        )
        scored: list[tuple[float, int, Document]] = []
        unscored: list[Document] = []
        for index, (document, result) in enumerate(zip(documents, results, strict=True)):
            if result.error is not None or result.value is None:
                unscored.append(document)
            elif result.value >= self.minimum_score:
                scored.append(
                    (result.value, index, document.with_metadata(**{SCORE_KEY: result.value}))
                )
        # Descending score; the retriever's order breaks ties (its own ranking is information).
        scored.sort(key=_rank_key)
        ranked = [d for _, _, d in scored] + unscored
        return ranked if self.top_k is None else ranked[: self.top_k]

    def __repr__(self) -> str:
        return f"JevDocumentReranker({self.client!r}, top_k={self.top_k})"


def _rank_key(item: tuple[float, int, Any]) -> tuple[float, int]:
    return (-item[0], item[1])
