"""An aiohttp service that refines: `python examples/aiohttp_app.py`.

```
curl -s localhost:8080/refine -H 'content-type: application/json' \
     -d '{"prompt": "Why is the sky blue?"}'
curl -sN 'localhost:8080/refine/stream?prompt=Why+is+the+sky+blue%3F'   # Server-Sent Events
```

Open http://localhost:8080/ for the page that renders the stream live: each attempt's text as
it is generated, a rejected attempt struck through and replaced.

One `ChatClient` serves every request; its model's connection pool opens in a cleanup context at
startup and closes at cleanup. `handler_cancellation=True` makes aiohttp cancel a handler whose
client disconnected, which cancels the refinement. Spans join the caller's trace (`traceparent`).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager

from _shared import client_from_env
from aiohttp import web

from jevrefine import ChatClient
from jevrefine.integrations.aiohttp import add_refine_route, add_stream_routes

CLIENT = web.AppKey("client", ChatClient)
"""Where the shared client lives on the app."""


def create_app(
    open_client: Callable[[], AbstractAsyncContextManager[ChatClient]] = client_from_env,
) -> web.Application:
    """The app; `open_client` opens the shared client (tests pass one on fake servers)."""

    async def chat_client(app: web.Application) -> AsyncIterator[None]:
        async with open_client() as client:
            app[CLIENT] = client
            yield

    app = web.Application()
    app.cleanup_ctx.append(chat_client)
    add_refine_route(app, CLIENT)
    add_stream_routes(app, CLIENT)  # GET /refine/stream and the page at /
    return app


if __name__ == "__main__":
    web.run_app(create_app(), host="127.0.0.1", port=8080, handler_cancellation=True)
