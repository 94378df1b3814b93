"""What both example apps share: the client they serve, built from the environment."""

from __future__ import annotations

import contextlib
import os
from collections.abc import AsyncIterator

from jevrefine import ChatClient
from jevrefine.advisors.self_refine import SelfRefineAdvisor
from jevrefine.judge._judge import rating_judge


@contextlib.asynccontextmanager
async def client_from_env() -> AsyncIterator[ChatClient]:
    """A self-refining client: OpenAI when OPENAI_API_KEY is set, else the local model.

    Whatever it opens (HTTP pools, the local llama.cpp server) it closes on exit, so the app's
    lifespan hook owns it.
    """
    async with contextlib.AsyncExitStack() as stack:
        if os.environ.get("OPENAI_API_KEY"):
            from jevrefine.models.openai import OpenAIChatModel

            model = await stack.enter_async_context(OpenAIChatModel("gpt-4o-mini"))
        else:
            from jevrefine.local import LocalModelServer

            server = await stack.enter_async_context(LocalModelServer())
            model = await stack.enter_async_context(server.openai_model())
        # "live": the stream endpoint shows every attempt as it is written (call() is unchanged).
        advisor = SelfRefineAdvisor(rating_judge(model), max_repeat_attempts=2, stream_mode="live")
        yield ChatClient(model, system="Answer in two sentences.", advisors=[advisor])
