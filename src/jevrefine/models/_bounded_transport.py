"""A cap on how many bytes of a response the vendor SDKs read.

`openai` and `anthropic` read a response body whole into memory before they parse it, however
large it is (and a streamed one for as long as it lasts). When an adapter builds its SDK client
itself, it gives the SDK an HTTP client that counts the bytes of every response as they arrive
and stops at `max_response_bytes`: the read ends, the connection is closed (never handed back
to the pool half read), and the call raises `ResponseTooLargeError`, naming the cap and how to
raise it. A declared `content-length` over the cap fails before any of the body is read.

The HTTP client is the SDK's own default one (`DefaultAsyncHttpxClient`: its pool limits,
timeouts, redirects, proxies from the environment and, for Anthropic, TCP keep-alive socket
options), with one response hook that wraps the body stream. A wrapped transport would do the
counting as well, but httpx stops reading the proxy variables once it is handed a transport,
and Anthropic's default client configures its own; the hook leaves all of that as the SDK has it,
and bounds redirected and proxied responses too.

The cost per chunk is one subtraction and one comparison; the limit counts bytes on the wire
(compressed bytes, when the server compresses).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable

import httpx2

from .._limits import DEFAULT_MAX_RESPONSE_BYTES
from .._validate import integer
from ..exceptions import ResponseTooLargeError

__all__ = [
    "DEFAULT_MAX_RESPONSE_BYTES",
    "bounded_http_client",
    "check_max_response_bytes",
]


def check_max_response_bytes(value: object) -> int | None:
    """`value` as a cap: an int of at least 1, or `None` (no cap).

    Raises:
        UserError: anything else, naming the parameter, the value and what to pass.
    """
    return integer(
        "max_response_bytes", value, minimum=1, optional=True, example=DEFAULT_MAX_RESPONSE_BYTES
    )


def bounded_http_client(
    factory: Callable[..., httpx2.AsyncClient],
    max_response_bytes: int,
    *,
    error: type[ResponseTooLargeError] = ResponseTooLargeError,
) -> httpx2.AsyncClient:
    """An HTTP client from `factory` (the SDK's default one) whose responses are capped.

    `error` is the type raised; an adapter whose SDK wraps and retries unknown exceptions
    passes a subclass the SDK lets through.
    """
    return factory(event_hooks={"response": [_ResponseCap(max_response_bytes, error)]})


def _too_large(
    error: type[ResponseTooLargeError], limit: int, response: httpx2.Response, declared: int | None
) -> ResponseTooLargeError:
    what = (
        f"is larger than max_response_bytes={limit:,}"
        if declared is None
        else f"declares {declared:,} bytes, more than max_response_bytes={limit:,}"
    )
    return error(
        f"the response from {response.request.url.host} {what}; the read stopped and the "
        "connection was closed. If answers this large are expected, pass a larger "
        "max_response_bytes= to the model (None turns the cap off)",
        limit=limit,
    )


class _ResponseCap:
    """The response hook: fails a declared length over the cap, counts everything else."""

    __slots__ = ("_error", "_limit")

    def __init__(self, limit: int, error: type[ResponseTooLargeError]) -> None:
        self._limit = limit
        self._error = error

    async def __call__(self, response: httpx2.Response) -> None:
        limit = self._limit
        declared = response.headers.get("content-length")
        if declared is not None and declared.isdigit() and int(declared) > limit:
            # httpx closes the unread response, which closes its connection.
            raise _too_large(self._error, limit, response, int(declared))
        stream = response.stream
        assert isinstance(stream, httpx2.AsyncByteStream)
        response.stream = _CappedStream(stream, limit, self._error, response)


class _CappedStream(httpx2.AsyncByteStream):
    """A response body stream that raises once more than `limit` bytes have come through."""

    __slots__ = ("_error", "_limit", "_response", "_stream")

    def __init__(
        self,
        stream: httpx2.AsyncByteStream,
        limit: int,
        error: type[ResponseTooLargeError],
        response: httpx2.Response,
    ) -> None:
        self._stream = stream
        self._limit = limit
        self._error = error
        self._response = response

    async def __aiter__(self) -> AsyncIterator[bytes]:
        left = self._limit
        async for chunk in self._stream:
            left -= len(chunk)
            if left < 0:
                # Closing a response that was not read to its end closes the connection.
                await self._stream.aclose()
                raise _too_large(self._error, self._limit, self._response, None)
            yield chunk

    async def aclose(self) -> None:
        await self._stream.aclose()
