"""What the Jev post-processors share: one `system_one` call per passage, failures counted."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from .._fanout import BatchResult
from ..exceptions import JevrefineError, UserError
from ..jev.batch import SystemOneRequest, system_one_all

if TYPE_CHECKING:
    from ..jev.protocol import SystemOneClient
    from ..jev.questions import Question
    from ..jev.responses import SystemOneResponse
    from ._document import Document

__all__ = ["ask_per_document", "check_concurrency", "passage_state"]

_log = logging.getLogger("jevrefine.retrieval")

R = TypeVar("R")


def check_concurrency(concurrency: Any) -> int:
    """`concurrency` when it is a positive int; else `UserError`, before any call."""
    if isinstance(concurrency, bool) or not isinstance(concurrency, int) or concurrency < 1:
        raise UserError(f"concurrency must be an int >= 1, got {concurrency!r}")
    return concurrency


def passage_state(query: str, document: Document) -> dict[str, Any]:
    """The state a post-processor's judge reads: the query, then the passage."""
    return {"query": query, "passage": document.text}


async def ask_per_document(
    who: str,
    kept_as: str,
    client: SystemOneClient,
    query: str,
    documents: Sequence[Document],
    questions: Mapping[str, Question],
    parse: Callable[[SystemOneResponse], R],
    *,
    concurrency: int,
    model: str | None,
) -> list[BatchResult[R]]:
    """One `system_one` call per document, at most `concurrency` at a time, aligned with input.

    `parse` reads each response; a response it cannot read (an answer missing) counts as a failed
    call. Failed calls stay in their slots; one warning per batch counts them (the error types
    only: an error's text may quote the passage or the server's reply). An exception that is
    not a `JevrefineError` is a bug, not a failed call, and is raised.
    """
    requests = [SystemOneRequest(passage_state(query, d), questions, model) for d in documents]
    raw = await system_one_all(client, requests, concurrency=concurrency)
    for item in raw:
        # Only the judging side's failures mean "no verdict on this passage"; anything else
        # (a TypeError in a custom client) is a bug and must not be mistaken for one.
        if item.error is not None and not isinstance(item.error, JevrefineError):
            raise item.error
    results: list[BatchResult[R]] = []
    for item in raw:
        if item.error is not None or item.value is None:
            results.append(BatchResult(item.index, None, item.error))
            continue
        try:
            results.append(BatchResult(item.index, parse(item.value)))
        except JevrefineError as exc:
            results.append(BatchResult(item.index, None, exc))
    failed = [r for r in results if not r.ok]
    if failed:
        kinds = sorted({type(r.error).__name__ for r in failed})
        _log.warning(
            "%s: %d of %d passage call(s) failed (%s); the affected passages are kept %s",
            who,
            len(failed),
            len(results),
            ", ".join(kinds),
            kept_as,
        )
    return results
