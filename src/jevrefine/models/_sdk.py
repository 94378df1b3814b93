"""What the two vendor-SDK adapters share besides their settings (`_settings`).

`OpenAIChatModel` and `AnthropicChatModel` differ in their SDKs, not in what they give back on
`aclose()` (the key's registration with the log scrubber, the clients they built), in how they
turn jevrefine's read-only values into JSON for a request, in the chunk a stream yields for a
piece of text, in how they close an SDK stream, or in how they leave 429s to a rate limiter:
those are written once, here.
"""

from __future__ import annotations

import copy
import inspect
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from .._http._headers import url_password
from ..messages import AssistantMessage, ChatResponse, ChatResponseMetadata, Generation
from ._log_scrub import register_key, unregister_key

if TYPE_CHECKING:
    from .._http._vendor import VendorWire

__all__ = ["Holdings", "close_stream", "leaving_429", "plain", "text_chunk"]


class _Wired(Protocol):
    _wire: VendorWire


_W = TypeVar("_W", bound=_Wired)


class _Closable(Protocol):
    async def close(self) -> None: ...


class Holdings:
    """An adapter's secrets, registered with the log scrubber, and the SDK clients it built.

    The secrets are the API key and a base URL's password, if it has one. Built once the adapter
    knows both; `release()` is its `aclose()`. Clients passed in by the caller are not owned
    (`owned=None`) and stay open.
    """

    __slots__ = ("_key_held", "_keys", "_owned")

    def __init__(
        self,
        key: str | None,
        *,
        owned: tuple[_Closable, _Closable] | None,
        url: str | None = None,
    ) -> None:
        self._keys = (key, url_password(url))
        self._owned = owned
        for secret in self._keys:
            register_key(secret)
        self._key_held = True

    async def release(self) -> None:
        """Unregister the secrets (once, however often this runs); close the owned clients."""
        if self._key_held:
            self._key_held = False
            for secret in self._keys:
                unregister_key(secret)
        if self._owned is not None:
            client, stream_client = self._owned
            await client.close()
            if stream_client is not client:
                await stream_client.close()


def plain(value: Any) -> Any:
    """A deep copy with read-only mappings and tuples (how jevrefine stores them) as plain JSON."""
    if isinstance(value, Mapping):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    return value


def text_chunk(delta: str, response_id: str | None, model: str | None) -> ChatResponse:
    """The `ChatResponse` a stream yields for one piece of the answer's text."""
    return ChatResponse(
        (Generation(AssistantMessage(delta)),),
        ChatResponseMetadata(id=response_id, model=model),
    )


async def close_stream(stream: Any) -> None:
    """Close an SDK's `AsyncStream` now: the generator it reads through, then its response.

    The SDKs' own `close()` closes the HTTP response only. The generators the stream reads
    through (the SDK's `__stream__`, its SSE decoder, httpx's `aiter_bytes` and the `aiter_raw`
    that one closes with `aclosing`) stay suspended, and in `openai`'s stream the outermost one
    and the stream refer to each other: a stream left that way is cyclic garbage, and the
    collector finalizes every generator in it at once. The event loop then closes `aiter_raw`
    in a task of its own while `aiter_bytes`, closing in another, is still closing it: "async
    generator already executing", printed as an ignored exception. Closing the outermost
    generator here, while the adapter still holds it, unwinds the chain in order instead
    (each inner one is dropped, and closed, only once the one around it has finished).
    """
    try:
        # The SDKs' attribute for it (both name it so; pinned in tests/perf/test_fast_paths.py).
        iterator = getattr(stream, "_iterator", None)
        if inspect.isasyncgen(iterator):
            await iterator.aclose()
    finally:
        await stream.close()


def leaving_429(adapter: _W) -> _W:
    """A copy of `adapter` whose wire gives a 429 back at once (`without_rate_limit_retries`).

    Everything else is shared: the SDK clients, the connections, the settings, and what
    `aclose()` releases (closing either closes both; a `RateLimitedModel` closes neither).
    """
    sibling = copy.copy(adapter)
    sibling._wire = adapter._wire.without_rate_limit_retries()
    return sibling
