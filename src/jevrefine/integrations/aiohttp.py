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
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TypeAlias

import pydantic

from ..client import ChatClient
from ..exceptions import JevrefineError, UserError
from ._common import RefineRequest, refine_one

try:
    from aiohttp import web
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise ImportError("jevrefine.integrations.aiohttp needs aiohttp: pip install aiohttp") from exc

__all__ = ["Handler", "add_refine_route", "refine_handler"]

Handler: TypeAlias = Callable[[web.Request], Awaitable[web.Response]]
"""An aiohttp request handler."""


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
        except UserError as exc:
            return web.json_response({"error": f"{type(exc).__name__}: {exc}"}, status=400)
        except JevrefineError as exc:
            return web.json_response({"error": f"{type(exc).__name__}: {exc}"}, status=502)
        return web.json_response(response.model_dump())

    return refine


def add_refine_route(
    app: web.Application, client_key: web.AppKey[ChatClient], *, path: str = "/refine"
) -> None:
    """Add `POST {path}` to `app`, refining with the client stored under `client_key`."""
    app.router.add_post(path, refine_handler(client_key))
