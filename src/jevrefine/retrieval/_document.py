"""`Document`, the `Retriever` protocol and the document post-processor protocol."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Protocol, runtime_checkable

from ..exceptions import UserError

__all__ = ["Document", "DocumentPostProcessor", "Retriever", "check_top_k"]


def check_top_k(top_k: Any, *, optional: bool = True) -> int | None:
    """`top_k` when it is a positive int (or `None` when `optional`); else `UserError`."""
    if top_k is None and optional:
        return None
    if isinstance(top_k, bool) or not isinstance(top_k, int) or top_k < 1:
        allowed = "a positive int or None" if optional else "a positive int"
        raise UserError(f"top_k must be {allowed}, got {top_k!r}")
    return top_k


@dataclass(frozen=True, slots=True)
class Document:
    """A retrieved passage: an id, its text, and metadata (source, score, classification...)."""

    id: str
    """Unique within its store."""
    text: str
    """The passage as it is put into the prompt."""
    metadata: dict[str, Any] = field(default_factory=dict)
    """Free-form; post-processors add their results here (`jev.classification`, `jev.score`)."""

    def with_metadata(self, **values: Any) -> Document:
        """A copy whose metadata also holds `values` (this document is left unchanged)."""
        return replace(self, metadata={**self.metadata, **values})


@runtime_checkable
class Retriever(Protocol):
    """Finds the documents that match a query; plug a vector store in by implementing it."""

    async def retrieve(self, query: str, *, top_k: int | None = None) -> list[Document]:
        """The best matches for `query`, best first; at most `top_k` (`None`: the default)."""
        ...


@runtime_checkable
class DocumentPostProcessor(Protocol):
    """Filters, reorders or annotates retrieved documents before they reach the prompt."""

    async def process(self, query: str, documents: list[Document]) -> list[Document]:
        """The documents to keep for `query`, in the order they should appear."""
        ...
