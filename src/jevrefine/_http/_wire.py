"""The seam: `open_wire(base_url, ...)` -> a `Wire` whose `send` always returns a `RawResponse`.

A caller (the Jev client) says what to send and by when; the wire decides once, when it is
opened, which path carries it, and says so in one DEBUG line of the `jevrefine.http` logger:

- the raw keep-alive core (`ConnectionPool.exchange`): no proxy applies to the base URL, no
  `httpx2.AsyncClient` was given, and the installed httpx2 is in the series the core was measured
  with (`_httpx.HTTPX2_CORE`);
- httpx2 otherwise: the caller's own client (its proxies, transports, TLS), or one of ours that
  reads the proxy variables as httpx does.

Both paths raise the same things: httpx2's transport errors (`TimeoutException`,
`TransportError`), `MalformedResponseError` for bytes that are no HTTP/1.1,
`ResponseTooLargeError` past the cap, `httpx2.DecodingError` for a body that does not decode,
and `DeadlineExpired` once the caller's deadline has passed. A `content-encoding` the server
used although it was not asked to is undone on both, and its header line dropped.
"""

from __future__ import annotations

import logging
import urllib.request
from collections.abc import Mapping, Sequence
from typing import Final, Literal

import anyio
import httpx2

from .._measured import takes_fast_path
from ._clock import NO_LIMIT, loop_time
from ._httpx import HTTPX2_CORE
from ._limits import DEFAULT_MAX_RESPONSE_BYTES
from ._pool import ConnectionPool, HeaderLines, RawResponse

__all__ = ["DeadlineExpired", "Wire", "open_wire", "proxy_configured"]

_log: Final = logging.getLogger("jevrefine.http")


class DeadlineExpired(Exception):
    """The caller's deadline passed before an answer: the caller's own total-timeout error."""


class Wire:
    """Requests to one origin (scheme, host, port), whichever path carries them.

    Built by `open_wire`. `path` says which: `"raw"` (the keep-alive core) or `"httpx"`.
    """

    path: Literal["raw", "httpx"]

    async def send(
        self,
        method: str,
        target: str,
        body: bytes | None,
        *,
        headers: Sequence[tuple[bytes, bytes]] = (),
        timeout: float,  # noqa: ASYNC109 - per HTTP operation, as httpx's
        deadline: float = NO_LIMIT,
    ) -> RawResponse:
        """Send one request and read its whole answer, whatever its status.

        Args:
            method: `GET`, `POST`, ...
            target: the path and query under the base URL's origin, as sent (`/v1/systemone`).
            body: the request body, or `None`.
            headers: header lines for this request only, after the wire's own (`Host`, the
                client's fixed ones, `Content-Length`).
            timeout: seconds for each HTTP operation (connect, write, read).
            deadline: an `anyio.current_time()` past which nothing waits.

        Raises:
            DeadlineExpired: `deadline` passed first.
            httpx2.TimeoutException: one operation took longer than `timeout`.
            httpx2.TransportError: no answer (`MalformedResponseError`: bytes that are no
                HTTP/1.1; `httpx2.DecodingError`: a body that does not decode).
            ResponseTooLargeError: the body is over the cap.
        """
        raise NotImplementedError

    async def aclose(self) -> None:
        """Close what the wire opened (a client given to `open_wire` stays open)."""
        raise NotImplementedError


class _RawWire(Wire):
    """The keep-alive core, called directly: no httpx objects per request."""

    __slots__ = ("_fixed", "_host", "_pool", "_port", "_scheme")

    path = "raw"

    def __init__(self, url: httpx2.URL, headers: Mapping[str, str], pool: ConnectionPool) -> None:
        self._pool = pool
        self._scheme = url.scheme
        self._host = url.host
        self._port = url.port
        # The header lines httpx would send, less `accept-encoding`: the answer comes back as
        # sent, with no decoder to run (one that is encoded anyway is still decoded).
        host = httpx2.Request("GET", url).headers["host"]
        self._fixed = HeaderLines(
            [(b"host", host.encode("ascii"))]
            + [(k.encode("ascii"), v.encode("ascii")) for k, v in headers.items()]
        )

    async def send(
        self,
        method: str,
        target: str,
        body: bytes | None,
        *,
        headers: Sequence[tuple[bytes, bytes]] = (),
        timeout: float,  # noqa: ASYNC109 - per HTTP operation
        deadline: float = NO_LIMIT,
    ) -> RawResponse:
        lines = list(headers)
        if body is not None:
            lines.append((b"content-length", b"%d" % len(body)))
        try:
            raw = await self._pool.exchange(
                method,
                self._scheme,
                self._host,
                self._port,
                target.encode("ascii"),
                lines,
                body or b"",
                connect=timeout,
                write=timeout,
                read=timeout,
                fixed=self._fixed,
                deadline=deadline,
            )
        except httpx2.TimeoutException:
            if loop_time() >= deadline:
                raise DeadlineExpired from None  # the caller's bound, not a phase's timeout
            raise
        if raw.header(b"content-encoding") is not None:
            return await raw.decoded()  # not asked for, but sent anyway: undone as httpx would
        return raw

    async def aclose(self) -> None:
        await self._pool.aclose()


class _HttpxWire(Wire):
    """An `httpx2.AsyncClient`: the caller's, or ours when a proxy applies."""

    __slots__ = ("_client", "_headers", "_origin", "_owned")

    path = "httpx"

    def __init__(
        self,
        url: httpx2.URL,
        headers: Mapping[str, str],
        client: httpx2.AsyncClient,
        *,
        owned: bool,
    ) -> None:
        self._client = client
        self._owned = owned
        self._headers = dict(headers)
        self._origin = f"{url.scheme}://{url.netloc.decode('ascii')}"

    async def send(
        self,
        method: str,
        target: str,
        body: bytes | None,
        *,
        headers: Sequence[tuple[bytes, bytes]] = (),
        timeout: float,  # noqa: ASYNC109 - per HTTP operation
        deadline: float = NO_LIMIT,
    ) -> RawResponse:
        extra = {k.decode("latin-1"): v.decode("latin-1") for k, v in headers}
        with anyio.CancelScope(deadline=deadline) as scope:
            # No pool timeout: waiting for a free connection is queueing, not a slow server,
            # and is bounded by the deadline already.
            response = await self._client.request(
                method,
                self._origin + target,
                content=body,
                headers={**self._headers, **extra} if extra else self._headers,
                timeout=httpx2.Timeout(timeout, pool=None),
            )
        if scope.cancelled_caught:
            raise DeadlineExpired
        # httpx has undone any content-encoding: drop that line so nothing decodes it again.
        lines = [(k, v) for k, v in response.headers.raw if k.lower() != b"content-encoding"]
        reason = response.extensions.get("reason_phrase", b"")
        return RawResponse(response.status_code, bytes(reason), lines, response.content)

    async def aclose(self) -> None:
        if self._owned:
            await self._client.aclose()


def open_wire(
    base_url: str,
    *,
    headers: Mapping[str, str],
    timeout: float,
    http_client: httpx2.AsyncClient | None = None,
    max_connections: int = 100,
    keepalive_expiry: float = 30.0,
    max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES,
) -> Wire:
    """A wire to `base_url`'s origin that sends `headers` with every request.

    `http_client` (not closed by the wire), a proxy for the base URL, or an httpx2 outside the
    measured series choose httpx2; otherwise the keep-alive core, with `max_connections` and
    `keepalive_expiry`. `timeout` is the per-operation default of a client the wire builds.
    """
    url = httpx2.URL(base_url)
    if http_client is not None:
        _log.debug("wire to %s: the httpx2 client given", _origin(url))
        return _HttpxWire(url, headers, http_client, owned=False)
    reason = _httpx_reason(url)
    if reason is not None:
        _log.debug("wire to %s: httpx2, %s", _origin(url), reason)
        limits = httpx2.Limits(
            max_connections=max_connections, max_keepalive_connections=max_connections
        )
        client = httpx2.AsyncClient(timeout=timeout, limits=limits)
        return _HttpxWire(url, headers, client, owned=True)
    _log.debug("wire to %s: the keep-alive core", _origin(url))
    pool = ConnectionPool(
        max_connections=max_connections,
        keepalive_expiry=keepalive_expiry,
        max_response_bytes=max_response_bytes,
    )
    return _RawWire(url, headers, pool)


def _httpx_reason(url: httpx2.URL) -> str | None:
    """Why `url` needs httpx2's client rather than the core, or `None` when it does not."""
    if proxy_configured():
        return "a proxy is configured (the core speaks no proxy protocol)"
    if url.userinfo:
        return "the URL carries credentials (httpx2 sends them as Basic auth)"
    if not takes_fast_path(HTTPX2_CORE):
        return "the installed httpx2 is outside the series the core was measured with"
    return None


def proxy_configured() -> bool:
    """Whether the environment asks for an HTTP(S) proxy (`HTTPS_PROXY`, `ALL_PROXY`, ...)."""
    proxies = urllib.request.getproxies()
    return any(key in proxies for key in ("http", "https", "all"))


def _origin(url: httpx2.URL) -> str:
    """Scheme, host and port only: a URL's user-info may hold a credential."""
    return f"{url.scheme}://{url.host}" + (f":{url.port}" if url.port is not None else "")
