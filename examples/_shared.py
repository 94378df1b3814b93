"""What both example apps share: the client they serve, built from the environment."""

from __future__ import annotations

import contextlib
import os
from collections.abc import AsyncIterator

from jevrefine import ChatClient
from jevrefine.advisors.self_refine import SelfRefineAdvisor
from jevrefine.judge import rating_judge, reference_judge


@contextlib.asynccontextmanager
async def client_from_env() -> AsyncIterator[ChatClient]:
    """A self-refining client: OpenAI when OPENAI_API_KEY is set, else the local models.

    Offline the answers come from `OFFLINE_MODEL` and a separate, stronger local model judges
    them (`OFFLINE_JUDGE_MODEL`, reference-guided: it answers the question itself, then checks
    the answer agrees), never the answering model itself. Whatever it opens (HTTP pools, the
    local llama.cpp servers) it closes on exit, so the app's lifespan hook owns it.
    """
    async with contextlib.AsyncExitStack() as stack:
        if os.environ.get("OPENAI_API_KEY"):
            from jevrefine.models.openai import OpenAIChatModel

            model = await stack.enter_async_context(OpenAIChatModel("gpt-4o-mini"))
            judge = rating_judge(model)
        else:
            from jevrefine.local import OFFLINE_JUDGE_MODEL, OFFLINE_MODEL, LocalModelServer

            server = await stack.enter_async_context(LocalModelServer(OFFLINE_MODEL))
            model = await stack.enter_async_context(server.openai_model())
            judging = await stack.enter_async_context(LocalModelServer(OFFLINE_JUDGE_MODEL))
            judge_model = await stack.enter_async_context(judging.openai_model())
            judge = reference_judge(judge_model, constraint="grammar")
        # "live": the stream endpoint shows every attempt as it is written (call() is unchanged).
        advisor = SelfRefineAdvisor(judge, max_repeat_attempts=2, stream_mode="live")
        yield ChatClient(model, system="Answer in two sentences.", advisors=[advisor])
