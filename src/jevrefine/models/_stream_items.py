"""One error for a streamed item the vendor SDK parsed but the adapter cannot read."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator

from ..exceptions import ModelError

__all__ = ["unreadable_items_raise"]


@contextlib.contextmanager
def unreadable_items_raise(
    model: str, origin: str, item: str, scrub: Callable[[str], str] = str
) -> Iterator[None]:
    """Turn a malformed stream item into a `ModelError` naming the server.

    A server can send valid JSON that is no chunk (a list, `null`, a choice without its delta);
    the SDKs hand it over as it is, and reading it fails with a bare `AttributeError` or the like.
    `scrub` blanks secrets out of the exception text.
    """
    try:
        yield
    except (AttributeError, TypeError, KeyError, IndexError) as exc:
        raise ModelError(
            f"{model} at {origin} sent a {item} that could not be read: "
            f"{type(exc).__name__}: {scrub(str(exc))}",
            model_name=model,
        ) from exc
