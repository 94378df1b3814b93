"""Web-service integrations: a refine endpoint for FastAPI and for aiohttp.

- `jevrefine.integrations.fastapi` (needs `fastapi`): `refine_router`, `call_until_disconnect`,
  and for streaming `stream_router`, `EventStreamResponse`.
- `jevrefine.integrations.aiohttp` (needs `aiohttp`): `refine_handler`, `add_refine_route`,
  and for streaming `stream_handler`, `add_stream_routes`.

Both share the request and response bodies below, run the refinement in the incoming request's
OpenTelemetry context (W3C `traceparent`), and cancel it when the client disconnects. The
`ChatClient` (and the connection pools of its model and judge) is created once at startup, in
the framework's lifespan hook, and shared by every request: see `examples/`.

Streaming: `GET /refine/stream?prompt=...` serves `spec.stream_events()` as Server-Sent Events
with the named events `delta` (`{"attempt", "text"}`), `judged` (`{"attempt", "passed",
"summary"}`), `rejected` (`{"attempt", "feedback"}`), `done` (a `RefineResponse`) and, when
the refinement fails after the stream began, `failed` (`{"error"}`). `stream_page(path)` is the
page that renders it live (one HTML document, nothing loaded from elsewhere). A stream client
that stops reading is dropped after `send_timeout` seconds of a send waiting for it
(`DEFAULT_SEND_TIMEOUT`, 30 s), which releases the model's stream.
"""

from __future__ import annotations

from ._common import ClientDisconnectedError as ClientDisconnectedError
from ._common import RefineRequest as RefineRequest
from ._common import RefineResponse as RefineResponse
from ._common import incoming_context as incoming_context
from ._common import refine_one as refine_one
from ._common import response_body as response_body
from ._sse import DEFAULT_SEND_TIMEOUT as DEFAULT_SEND_TIMEOUT
from ._sse import event_frames as event_frames
from ._sse import open_event_stream as open_event_stream
from ._sse import sse_frame as sse_frame
from ._sse import stream_page as stream_page
from ._sse import stream_request as stream_request

__all__ = [
    "DEFAULT_SEND_TIMEOUT",
    "ClientDisconnectedError",
    "RefineRequest",
    "RefineResponse",
    "event_frames",
    "incoming_context",
    "open_event_stream",
    "refine_one",
    "response_body",
    "sse_frame",
    "stream_page",
    "stream_request",
]
