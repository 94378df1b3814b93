"""The wire: every byte jevrefine puts on a socket, and the one way in to send them.

Below this package nothing knows what a chat model or a judge is; above it nothing knows HTTP/1.1
framing, connection pools or an SDK's private request helpers.

- `_wire`: the seam, `open_wire(base_url, ...)` -> `Wire.send(...)` -> `RawResponse`.
- `_retry`: the one retry policy and loop (`RetryPolicy`, `retrying`).
- `_clock`: the event loop's clock and waits bounded by a deadline.
- `_h11`: the strict RFC 9112 response reader (`MalformedResponseError`).
- `_connections`: a connection over an anyio stream, or an asyncio protocol.
- `_pool`: the raw keep-alive core (`ConnectionPool.exchange` -> `RawResponse`).
- `_httpx`: the same pool as an httpx2 transport (`KeepAliveTransport`).
- `_bounded`: the byte cap for the vendor SDKs' own HTTP clients, and the pool mounted in them.
- `_vendor`, `_vendor_openai`, `_vendor_anthropic`: an SDK's request semantics on the raw core.
- `_json`, `_headers`, `_limits`: the JSON codec of bodies, header helpers, the one body cap.
"""

from __future__ import annotations

from ._clock import NO_LIMIT, acquire_by, loop_time
from ._connections import SocketOption
from ._h11 import MalformedResponseError
from ._httpx import KeepAliveTransport
from ._pool import ConnectionPool, HeaderLines, RawResponse, TooLarge
from ._wire import DeadlineExpired, Wire, open_wire, proxy_configured

__all__ = [
    "NO_LIMIT",
    "ConnectionPool",
    "DeadlineExpired",
    "HeaderLines",
    "KeepAliveTransport",
    "MalformedResponseError",
    "RawResponse",
    "SocketOption",
    "TooLarge",
    "Wire",
    "acquire_by",
    "loop_time",
    "open_wire",
    "proxy_configured",
]
