"""`Document`, the `Retriever` protocol and the document post-processor protocol."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Protocol, runtime_checkable

from .. import _validate
from ..exceptions import UserError

__all__ = ["Document", "DocumentPostProcessor", "Retriever", "check_top_k"]


def check_top_k(top_k: Any, *, optional: bool = True) -> int | None:
    """`top_k` when it is a positive int (or `None` when `optional`); else `UserError`."""
    if optional:
        return _validate.integer("top_k", top_k, minimum=1, optional=True, example=4)
    return _validate.integer("top_k", top_k, minimum=1, example=4)


@dataclass(frozen=True, slots=True)
class Document:
    """A retrieved passage: an id, its text, and metadata (source, score, classification...).

    Checked when made: `id` a non-empty `str`, `text` a `str`, `metadata` a mapping with `str`
    keys (`None` reads as no metadata; another mapping type is copied into a `dict`). A bad value
    is a `UserError` naming the field, so a bad document never reaches a store.
    """

    id: str
    """Unique within its store."""
    text: str
    """The passage as it is put into the prompt."""
    metadata: dict[str, Any] = field(default_factory=dict)
    """Free-form; post-processors add their results here (`jev.classification`, `jev.score`)."""

    def __post_init__(self) -> None:
        _validate.text("id", self.id, example="doc-1")
        if not self.id:
            raise UserError("Document id='' is empty: pass a non-empty id, e.g. id='doc-1'")
        _validate.text("text", self.text, example="The Eiffel Tower is 330 metres tall.")
        metadata: Any = self.metadata
        if metadata is None:
            object.__setattr__(self, "metadata", {})
            return
        if not isinstance(metadata, Mapping):
            raise UserError(
                f"Document metadata={_validate.shown(metadata)} is not a mapping: pass a dict, "
                "e.g. metadata={'source': 'guide.md'}, or leave it out"
            )
        bad = next((k for k in metadata if not isinstance(k, str)), None)
        if bad is not None:
            raise UserError(
                f"Document metadata key {_validate.shown(bad)} is not a str: metadata keys are "
                "names, e.g. metadata={'source': 'guide.md'}"
            )
        if not isinstance(metadata, dict):
            object.__setattr__(self, "metadata", dict(metadata))

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
