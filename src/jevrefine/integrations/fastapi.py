"""A refine endpoint for FastAPI, cancelled when the client disconnects.

Needs `fastapi` (`pip install fastapi uvicorn`).

```python
@contextlib.asynccontextmanager
async def lifespan(app: FastAPI) -> AsyncIterator[None]:
    async with OpenAIChatModel("gpt-4o-mini") as model:  # pools open at startup...
        app.state.client = ChatClient(model, advisors=[SelfRefineAdvisor(judge)])
        yield                                            # ...and close at shutdown

app = FastAPI(lifespan=lifespan)
app.include_router(refine_router(lambda request: request.app.state.client))
```

Starlette does not cancel a handler when its client goes away; `call_until_disconnect` watches
the connection and cancels the refinement itself, so an abandoned request stops spending tokens.

`stream_router` serves `spec.stream_events()` as Server-Sent Events (`GET /refine/stream?prompt=`,
events `delta`, `judged`, `rejected`, `done`; see `jevrefine.integrations`) and the page that
renders them (`GET /`); `EventStreamResponse` stops the stream when the client goes away, and
when it stops reading: a send that waits longer than `send_timeout` (30 s by default) for the
client ends the stream and releases the model's.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any, TypeVar

import anyio

from ..client import ChatClient
from ..exceptions import JevrefineError
from ._common import (
    ClientDisconnectedError,
    RefineRequest,
    RefineResponse,
    error_reply,
    refine_one,
)
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
    from fastapi import APIRouter, HTTPException, Request
    from fastapi.responses import HTMLResponse, JSONResponse, Response, StreamingResponse
    from starlette.background import BackgroundTask
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise ImportError(
        "jevrefine.integrations.fastapi needs FastAPI: pip install fastapi uvicorn"
    ) from exc

if TYPE_CHECKING:
    from starlette.types import Message, Receive, Scope, Send

__all__ = ["EventStreamResponse", "call_until_disconnect", "refine_router", "stream_router"]

T = TypeVar("T")

# Status for a refinement cancelled by a disconnect; nobody reads it (nginx's convention).
CLIENT_CLOSED_REQUEST = 499


async def call_until_disconnect(request: Request, function: Callable[[], Awaitable[T]]) -> T:
    """Await `function()`, cancelling it if the client disconnects first.

    Call it once the request body has been read (FastAPI has read it when it parsed a body
    parameter): from then on the only message the connection sends is the disconnect.

    Raises:
        ClientDisconnectedError: the client went away; `function` was cancelled.
    """
    result: list[T] = []

    async def watch(scope: anyio.CancelScope) -> None:
        message: Message = {"type": ""}
        # Bounded: each receive waits for the next message, and after the body the only one
        # left is http.disconnect.
        while message["type"] != "http.disconnect":
            message = await request.receive()
        scope.cancel()

    failure: Exception | None = None
    async with anyio.create_task_group() as group:
        group.start_soon(watch, group.cancel_scope)
        try:
            result.append(await function())
        except Exception as exc:
            # Raised from here, the task group would wrap it in an ExceptionGroup, and the
            # caller's `except JevrefineError` would no longer see it.
            failure = exc
        group.cancel_scope.cancel()
    if failure is not None:
        raise failure
    if not result:
        raise ClientDisconnectedError("the client disconnected; the refinement was cancelled")
    return result[0]


def refine_router(
    client_of: Callable[[Request], ChatClient], *, path: str = "/refine"
) -> APIRouter:
    """A router with `POST {path}`: `RefineRequest` in, `RefineResponse` out.

    Args:
        client_of: returns the shared client for a request (e.g. from `request.app.state`).
        path: the endpoint's path.

    A `UserError` is a 400, any other jevrefine error a 502 (the model or judge failed); the
    body says the error's type and message, which never hold secrets.
    """
    router = APIRouter()

    @router.post(path, response_model=RefineResponse)
    async def refine(body: RefineRequest, request: Request) -> RefineResponse:
        client = client_of(request)
        try:
            return await call_until_disconnect(
                request, lambda: refine_one(client, body, request.headers)
            )
        except ClientDisconnectedError:
            raise HTTPException(CLIENT_CLOSED_REQUEST, "client disconnected") from None
        except JevrefineError as exc:
            raise HTTPException(*error_reply(exc)) from None

    return router


class _ClientStalledError(Exception):
    """A send waited past `send_timeout` for a client that reads nothing."""


class EventStreamResponse(StreamingResponse):
    """A `StreamingResponse` whose body stops as soon as the client disconnects or stalls.

    Starlette watches for the disconnect only under ASGI versions before 2.4; after that it
    learns of it from the next failed send, which a refinement waiting on its judge never
    makes. This response always watches, so leaving closes the model's stream and cancels the
    judging call at once.

    A client that keeps its connection but stops reading makes a send wait for room that never
    comes; after `send_timeout` seconds of that (`DEFAULT_SEND_TIMEOUT`, 30 s) the response
    gives up on it: the body is closed (the model's stream with it), a WARNING is logged, and
    the server closes the connection (uvicorn: once what it holds is flushed, or the client
    goes). Only sends are timed: a refinement slow to produce its next event is not a stall.

    Raises:
        UserError: `send_timeout` is not a positive number of seconds.
    """

    def __init__(
        self,
        content: Any,
        status_code: int = 200,
        headers: Mapping[str, str] | None = None,
        media_type: str | None = None,
        background: BackgroundTask | None = None,
        *,
        send_timeout: float = DEFAULT_SEND_TIMEOUT,
    ) -> None:
        self.send_timeout = checked_send_timeout(send_timeout)
        """Seconds one send may wait for the client before the stream is given up."""
        super().__init__(content, status_code, headers, media_type, background)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Send the body until it ends, or the client disconnects or stops reading."""

        async def watch(group: anyio.abc.TaskGroup) -> None:
            message: Message = {"type": ""}
            # Bounded: after the request body the only message left is http.disconnect.
            while message["type"] != "http.disconnect":
                message = await receive()
            group.cancel_scope.cancel()

        async def send_in_time(message: Message) -> None:
            with anyio.move_on_after(self.send_timeout) as waited:
                await send(message)
            if waited.cancelled_caught:
                raise _ClientStalledError

        try:
            async with anyio.create_task_group() as group:
                group.start_soon(watch, group)
                try:
                    await self.stream_response(send_in_time)
                except OSError:
                    pass  # the client went away in the middle of a send; nothing to tell it
                except _ClientStalledError:
                    # Returning with the response unfinished: the server closes the connection.
                    log_stalled_client(self.send_timeout)
                group.cancel_scope.cancel()
        finally:
            # A send that failed or timed out leaves the body suspended, not closed; closing it
            # here closes the model's stream now rather than when it is garbage-collected.
            await close_frames(self.body_iterator)


def stream_router(
    client_of: Callable[[Request], ChatClient],
    *,
    path: str = "/refine/stream",
    page_path: str | None = "/",
    send_timeout: float = DEFAULT_SEND_TIMEOUT,
) -> APIRouter:
    """A router with `GET {path}?prompt=...`: the refinement's events as Server-Sent Events.

    Args:
        client_of: returns the shared client for a request; its self-refine advisor needs
            `stream_mode="live"` (or `"buffered"`).
        path: the stream's path.
        page_path: where the page that renders the stream is served (`None`: nowhere).
        send_timeout: seconds one send may wait for a client that reads nothing before its
            stream is closed and the model's stream released (see `EventStreamResponse`).

    A bad query or a `UserError` before the first event is a 400, any other jevrefine error
    then a 502; once the stream has begun, a failure is its last event (`failed`).

    Raises:
        UserError: `send_timeout` is not a positive number of seconds.
    """
    send_timeout = checked_send_timeout(send_timeout)
    router = APIRouter()

    @router.get(path)
    async def stream(request: Request) -> Response:
        frames = await begin_stream(
            lambda: client_of(request), request.query_params, request.headers
        )
        if isinstance(frames, tuple):
            status, message = frames
            return JSONResponse({"error": message}, status_code=status)
        return EventStreamResponse(
            frames, media_type=EVENT_STREAM, headers=SSE_HEADERS, send_timeout=send_timeout
        )

    if page_path is not None:
        page = stream_page(path)

        @router.get(page_path, response_class=HTMLResponse)
        async def stream_page_view() -> HTMLResponse:
            return HTMLResponse(page)

    return router
