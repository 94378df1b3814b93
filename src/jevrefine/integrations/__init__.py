"""Web-service integrations: a refine endpoint for FastAPI and for aiohttp.

- `jevrefine.integrations.fastapi` (needs `fastapi`): `refine_router`, `call_until_disconnect`.
- `jevrefine.integrations.aiohttp` (needs `aiohttp`): `refine_handler`, `add_refine_route`.

Both share the request and response bodies below, run the refinement in the incoming request's
OpenTelemetry context (W3C `traceparent`), and cancel it when the client disconnects. The
`ChatClient` (and the connection pools of its model and judge) is created once at startup, in
the framework's lifespan hook, and shared by every request: see `examples/`.
"""

from __future__ import annotations

from ._common import ClientDisconnectedError as ClientDisconnectedError
from ._common import RefineRequest as RefineRequest
from ._common import RefineResponse as RefineResponse
from ._common import incoming_context as incoming_context
from ._common import refine_one as refine_one

__all__ = [
    "ClientDisconnectedError",
    "RefineRequest",
    "RefineResponse",
    "incoming_context",
    "refine_one",
]
