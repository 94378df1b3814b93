"""The raw core as an httpx2 transport: `KeepAliveTransport`, for an `httpx2.AsyncClient`.

Mounted under the `openai` and `anthropic` SDKs' clients for their whole-response calls (see
`jevrefine._http._bounded`), and usable under any `httpx2.AsyncClient`. It relies on how httpx2
treats a transport: what `handle_async_request` raises reaches the caller unchanged, the
per-request timeouts are in `request.extensions["timeout"]`, and a `Response` built on a
`ByteStream` is complete. Those hold for the httpx2 series it was measured with
(`HTTPX2_CORE`); outside it the wire mounts nothing of its own.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

import httpx2

from .._measured import FastPath
from ._clock import NO_LIMIT
from ._pool import ConnectionPool

__all__ = ["HTTPX2_CORE", "KeepAliveTransport"]

HTTPX2_CORE: Final = FastPath(
    name="the keep-alive core (the Jev client's requests, and mounted under the SDKs)",
    distribution="httpx2",
    measured=((2, 16), (2, 17)),
    benchmark="python -m benchmarks --only bench_judge_client bench_adapter_cpu",
)
"""The httpx2 series the core and this transport were measured with; outside it the wire uses
httpx2's own client and transports (`open_wire`, `_bounded.lean_parts`)."""


class KeepAliveTransport(ConnectionPool, httpx2.AsyncBaseTransport):
    """`ConnectionPool` with `handle_async_request`: the raw core under an `httpx2.AsyncClient`.

    One pool serves both doors: `exchange` for the wire's own requests, and httpx2's transport
    interface for an SDK's. The constructor is `ConnectionPool`'s.
    """

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        """Send `request` and read the whole response (`exchange`, for `httpx2.AsyncClient`)."""
        url = request.url
        body = await request.aread()
        timeouts = request.extensions.get("timeout", {})
        try:
            raw = await self.exchange(
                request.method,
                url.scheme,
                url.host,
                url.port,
                url.raw_path,
                request.headers.raw,
                body,
                connect=_phase_seconds(timeouts, "connect"),
                write=_phase_seconds(timeouts, "write"),
                read=_phase_seconds(timeouts, "read"),
                pool=_phase_seconds(timeouts, "pool"),
            )
        except httpx2.RequestError as exc:
            exc.request = request  # httpx's errors name their request; the core knows none
            raise
        return httpx2.Response(
            raw.status_code,
            headers=raw.raw_headers,
            stream=httpx2.ByteStream(raw.content),
            extensions={"http_version": b"HTTP/1.1", "reason_phrase": raw.reason},
        )


def _phase_seconds(timeouts: Mapping[str, float | None], phase: str) -> float:
    value = timeouts.get(phase)
    return NO_LIMIT if value is None else float(value)
