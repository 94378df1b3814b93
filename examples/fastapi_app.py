"""A FastAPI service that refines: `uvicorn --app-dir examples fastapi_app:app`.

```
curl -s localhost:8000/refine -H 'content-type: application/json' \
     -d '{"prompt": "Why is the sky blue?"}'
curl -sN 'localhost:8000/refine/stream?prompt=Why+is+the+sky+blue%3F'   # Server-Sent Events
```

Open http://localhost:8000/ for the page that renders the stream live: each attempt's text as
it is generated, a rejected attempt struck through and replaced.

One `ChatClient` serves every request; its model's connection pool opens in the lifespan hook at
startup and closes at shutdown. A client that disconnects cancels its refinement, and the
refinement's spans join the caller's trace (`traceparent`).
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager

from _shared import client_from_env
from fastapi import FastAPI, Request

from jevrefine import ChatClient
from jevrefine.integrations.fastapi import refine_router, stream_router


def create_app(
    open_client: Callable[[], AbstractAsyncContextManager[ChatClient]] = client_from_env,
) -> FastAPI:
    """The app; `open_client` opens the shared client (tests pass one on fake servers)."""

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        async with open_client() as client:
            app.state.client = client
            yield

    def client_of(request: Request) -> ChatClient:
        client: ChatClient = request.app.state.client
        return client

    app = FastAPI(title="jevrefine", lifespan=lifespan)
    app.include_router(refine_router(client_of))
    app.include_router(stream_router(client_of))  # GET /refine/stream and the page at /
    return app


app = create_app()
