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
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, TypeVar

import anyio

from ..client import ChatClient
from ..exceptions import JevrefineError, UserError
from ._common import ClientDisconnectedError, RefineRequest, RefineResponse, refine_one

try:
    from fastapi import APIRouter, HTTPException, Request
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise ImportError(
        "jevrefine.integrations.fastapi needs FastAPI: pip install fastapi uvicorn"
    ) from exc

if TYPE_CHECKING:
    from starlette.types import Message

__all__ = ["call_until_disconnect", "refine_router"]

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
        except UserError as exc:
            raise HTTPException(400, f"{type(exc).__name__}: {exc}") from None
        except JevrefineError as exc:
            raise HTTPException(502, f"{type(exc).__name__}: {exc}") from None

    return router
