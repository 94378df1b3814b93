"""A refine endpoint for aiohttp, cancelled when the client disconnects.

Needs `aiohttp` (`pip install aiohttp`).

```python
CLIENT = web.AppKey("client", ChatClient)

async def chat_client(app: web.Application) -> AsyncIterator[None]:
    async with OpenAIChatModel("gpt-4o-mini") as model:  # pools open at startup...
        app[CLIENT] = ChatClient(model, advisors=[SelfRefineAdvisor(judge)])
        yield                                            # ...and close at cleanup

app = web.Application()
app.cleanup_ctx.append(chat_client)
add_refine_route(app, CLIENT)
web.run_app(app, handler_cancellation=True)
```

With `handler_cancellation=True` (off by default since aiohttp 3.7) aiohttp cancels the handler
when its client disconnects; the cancellation reaches the refinement (model and judge calls) and
stops it.

`add_stream_routes` serves `spec.stream_events()` as Server-Sent Events (`GET
/refine/stream?prompt=`, events `delta`, `judged`, `rejected`, `done`; see
`jevrefine.integrations`) and the page that renders them (`GET /`). A stream client that stops
reading is dropped after `send_timeout` (30 s by default) of a send waiting for it, which
releases the model's stream.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TypeAlias

import anyio
import pydantic

from ..client import ChatClient
from ..exceptions import JevrefineError
from ._common import RefineRequest, error_reply, refine_one
from ._sse import (
    DEFAULT_SEND_TIMEOUT,
    EVENT_STREAM,
    SSE_HEADERS,
    begin_stream,
    checked_send_timeout,
    close_frames,
    log_stalled_client,
    stream_page,
)

try:
    from aiohttp import web
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise ImportError("jevrefine.integrations.aiohttp needs aiohttp: pip install aiohttp") from exc

__all__ = [
    "Handler",
    "StreamHandler",
    "add_refine_route",
    "add_stream_routes",
    "refine_handler",
    "stream_handler",
]

Handler: TypeAlias = Callable[[web.Request], Awaitable[web.Response]]
"""An aiohttp request handler."""
StreamHandler: TypeAlias = Callable[[web.Request], Awaitable[web.StreamResponse]]
"""An aiohttp request handler that streams its response."""


def _error_response(error: JevrefineError) -> web.Response:
    status, message = error_reply(error)
    return web.json_response({"error": message}, status=status)


def refine_handler(client_key: web.AppKey[ChatClient]) -> Handler:
    """A handler for `POST`: `RefineRequest` JSON in, `RefineResponse` JSON out.

    The client is `request.app[client_key]`. A bad body or a `UserError` is a 400, any other
    jevrefine error a 502, each with `{"error": "Type: message"}`.
    """

    async def refine(request: web.Request) -> web.Response:
        try:
            body = RefineRequest.model_validate_json(await request.read())
        except pydantic.ValidationError as exc:
            return web.json_response(
                {"error": f"invalid body: {exc.errors()[0]['msg']}"}, status=400
            )
        try:
            response = await refine_one(request.app[client_key], body, request.headers)
        except JevrefineError as exc:
            return _error_response(exc)
        return web.json_response(response.model_dump())

    return refine


def add_refine_route(
    app: web.Application, client_key: web.AppKey[ChatClient], *, path: str = "/refine"
) -> None:
    """Add `POST {path}` to `app`, refining with the client stored under `client_key`."""
    app.router.add_post(path, refine_handler(client_key))


def stream_handler(
    client_key: web.AppKey[ChatClient], *, send_timeout: float = DEFAULT_SEND_TIMEOUT
) -> StreamHandler:
    """A handler for `GET ?prompt=...`: the refinement's events as Server-Sent Events.

    The client is `request.app[client_key]`; its self-refine advisor needs `stream_mode="live"`
    (or `"buffered"`). A bad query or a `UserError` before the first event is a 400, any other
    jevrefine error then a 502; once the stream has begun, a failure is its last event
    (`failed`). Serve with `handler_cancellation=True`: a client that goes away then cancels
    the handler, which closes the model's stream and cancels any judging call.

    A client that keeps its connection but stops reading makes a write wait for room that never
    comes: after `send_timeout` seconds of that (`DEFAULT_SEND_TIMEOUT`, 30 s) the stream is
    closed (the model's stream with it), a WARNING is logged and the connection is dropped.

    Raises:
        UserError: `send_timeout` is not a positive number of seconds.
    """
    send_timeout = checked_send_timeout(send_timeout)

    async def stream(request: web.Request) -> web.StreamResponse:
        frames = await begin_stream(lambda: request.app[client_key], request.query, request.headers)
        if isinstance(frames, tuple):
            status, message = frames
            return web.json_response({"error": message}, status=status)
        response = web.StreamResponse(headers={"content-type": EVENT_STREAM, **SSE_HEADERS})
        stalled = False
        try:
            await response.prepare(request)
            async for frame in frames:
                with anyio.move_on_after(send_timeout) as waited:
                    await response.write(frame)
                if waited.cancelled_caught:
                    stalled = True
                    break
        except ConnectionResetError:
            pass  # gone without handler_cancellation: noticed at this write, stopped here
        finally:
            await close_frames(frames)
        if stalled:
            log_stalled_client(send_timeout)
            # Dropped, not closed: a close would wait to flush bytes the client never reads.
            if request.transport is not None:
                request.transport.abort()
        return response

    return stream


def add_stream_routes(
    app: web.Application,
    client_key: web.AppKey[ChatClient],
    *,
    path: str = "/refine/stream",
    page_path: str | None = "/",
    send_timeout: float = DEFAULT_SEND_TIMEOUT,
) -> None:
    """Add `GET {path}` (the event stream) and, unless `page_path` is None, the page.

    `send_timeout`: see `stream_handler`.

    Raises:
        UserError: `send_timeout` is not a positive number of seconds.
    """
    app.router.add_get(path, stream_handler(client_key, send_timeout=send_timeout))
    if page_path is not None:
        page = stream_page(path)

        async def page_view(request: web.Request) -> web.Response:
            return web.Response(text=page, content_type="text/html")

        app.router.add_get(page_path, page_view)
