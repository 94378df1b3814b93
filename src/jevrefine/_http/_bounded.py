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

Whole-response calls go through the shared lean transport (`jevrefine._transport`), mounted on
that client for the base URL's origin only, and only when no proxy applies to it (decided by
httpx's own reading of `HTTP(S)_PROXY` / `ALL_PROXY` / `NO_PROXY`): httpx's pool probes every
idle connection on each request, which at hundreds of connections costs more CPU than the rest
of the call. The lean transport reads the same trust store as httpx's (`SSL_CERT_FILE`,
`SSL_CERT_DIR`), has the same connection limit and keep-alive expiry as the SDK's defaults, the
same TCP keep-alive socket options where the SDK sets them, and caps the body as it reads it.
It reads each body whole, so streams get a second client: the SDK's default one, unchanged.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any, Final

import httpx2

from .. import _validate
from .._measured import takes_fast_path
from ..exceptions import ResponseTooLargeError
from ._connections import SocketOption
from ._httpx import HTTPX2_CORE, KeepAliveTransport
from ._limits import DEFAULT_MAX_RESPONSE_BYTES

__all__ = [
    "DEFAULT_MAX_RESPONSE_BYTES",
    "SDK_KEEPALIVE_EXPIRY",
    "SDK_MAX_CONNECTIONS",
    "bounded_http_client",
    "check_max_response_bytes",
    "lean_http_client",
    "lean_parts",
    "proxy_applies",
]


SDK_MAX_CONNECTIONS: Final = 1000
"""The vendor SDKs' default connection cap (both set 1,000), which the core mounted under them
keeps."""
SDK_KEEPALIVE_EXPIRY: Final = 5.0
"""httpx's default keep-alive expiry (seconds), which the SDKs' pools use and the core keeps."""


def check_max_response_bytes(value: object) -> int | None:
    """`value` as a cap: an int of at least 1, or `None` (no cap).

    Raises:
        UserError: anything else, naming the parameter, the value and what to pass.
    """
    return _validate.integer(
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


def proxy_applies(url: httpx2.URL) -> bool:
    """Whether httpx, reading the environment as it does, would send `url` through a proxy.

    Asked only inside the httpx2 series the core was measured with: it reads httpx2's own
    (private) proxy rules, so that the answer is httpx2's.
    """
    from httpx2._utils import URLPattern, get_environment_proxies

    patterns = sorted((URLPattern(key), proxy) for key, proxy in get_environment_proxies().items())
    for pattern, proxy in patterns:  # most specific first, as httpx orders its mounts
        if pattern.matches(url):
            return proxy is not None
    return False


def lean_http_client(
    factory: Callable[..., httpx2.AsyncClient],
    base_url: httpx2.URL,
    max_response_bytes: int,
    **options: Any,
) -> httpx2.AsyncClient:
    """`bounded_http_client`, with the lean transport mounted for `base_url`'s origin.

    Falls back to the plain bounded client when a proxy applies to `base_url`, or the URL is not
    plain `http`/`https`: the lean transport speaks no proxy protocol. `options` are
    `lean_parts`'s keywords (`max_connections`, `keepalive_expiry`, `error`, `socket_options`).
    """
    return lean_parts(factory, base_url, max_response_bytes, **options)[0]


def lean_parts(
    factory: Callable[..., httpx2.AsyncClient],
    base_url: httpx2.URL,
    max_response_bytes: int,
    *,
    max_connections: int = SDK_MAX_CONNECTIONS,
    keepalive_expiry: float = SDK_KEEPALIVE_EXPIRY,
    error: type[ResponseTooLargeError] = ResponseTooLargeError,
    socket_options: Sequence[SocketOption] = (),
) -> tuple[httpx2.AsyncClient, KeepAliveTransport | None]:
    """`lean_http_client`'s client, and the lean transport mounted in it (or `None`: fell back).

    For an adapter that also calls the transport's raw core itself: one pool serves both.
    """
    if (
        not takes_fast_path(HTTPX2_CORE)  # outside it, httpx2's own transport
        or base_url.scheme not in ("http", "https")
        or not base_url.host
        or base_url.userinfo  # httpx sends a URL's credentials as Basic auth; the core does not
        or proxy_applies(base_url)
    ):
        return bounded_http_client(factory, max_response_bytes, error=error), None

    def too_large(host: str, limit: int, declared: int | None) -> Exception:
        return _too_large(error, limit, host, declared)

    lean = KeepAliveTransport(
        max_connections=max_connections,
        keepalive_expiry=keepalive_expiry,
        max_response_bytes=max_response_bytes,
        too_large=too_large,
        socket_options=socket_options,
        per_read_timeout=True,  # the SDKs' `timeout` is per read; the adapters bound the call
        retry_stale=False,  # the SDK's max_retries decides about resending, as with httpx
    )
    origin = f"{base_url.scheme}://{base_url.netloc.decode('ascii')}"
    hook = _ResponseCap(max_response_bytes, error)
    return factory(event_hooks={"response": [hook]}, mounts={origin: lean}), lean


def _too_large(
    error: type[ResponseTooLargeError], limit: int, host: str, declared: int | None
) -> ResponseTooLargeError:
    what = (
        f"is larger than max_response_bytes={limit:,}"
        if declared is None
        else f"declares {declared:,} bytes, more than max_response_bytes={limit:,}"
    )
    return error(
        f"the response from {host} {what}; the read stopped and the "
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
            raise _too_large(self._error, limit, response.request.url.host, int(declared))
        stream = response.stream
        assert isinstance(stream, httpx2.AsyncByteStream)
        # The stream keeps the request (for the error's host), not the response: the response
        # holds its stream, so a back reference would make every response a reference cycle,
        # left for the garbage collector instead of freed when the SDK is done with it.
        response.stream = _CappedStream(stream, limit, self._error, response.request)


class _CappedStream(httpx2.AsyncByteStream):
    """A response body stream that raises once more than `limit` bytes have come through."""

    __slots__ = ("_error", "_limit", "_request", "_stream")

    def __init__(
        self,
        stream: httpx2.AsyncByteStream,
        limit: int,
        error: type[ResponseTooLargeError],
        request: httpx2.Request,
    ) -> None:
        self._stream = stream
        self._limit = limit
        self._error = error
        self._request = request

    async def __aiter__(self) -> AsyncIterator[bytes]:
        left = self._limit
        async for chunk in self._stream:
            left -= len(chunk)
            if left < 0:
                # Closing a response that was not read to its end closes the connection.
                await self._stream.aclose()
                raise _too_large(self._error, self._limit, self._request.url.host, None)
            yield chunk

    async def aclose(self) -> None:
        await self._stream.aclose()
