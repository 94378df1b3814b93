"""Client factories for the Ray actors (pickled by value into the workers)."""

from __future__ import annotations

import contextlib
import os
from collections.abc import AsyncIterator
from pathlib import Path

import jevrefine as jr
from jevrefine.jev import JudgeClient
from jevrefine.models.openai import OpenAIChatModel

TEST_KEY = "sk-test-not-a-secret"


class Exploder(jr.BaseAdvisor):
    """Fails the prompts that ask it to: a per-row failure."""

    name = "exploder"

    def before(self, request: jr.ChatClientRequest) -> jr.ChatClientRequest:
        if "explode" in request.prompt.messages[-1].text:
            raise ValueError("asked to explode")
        return request


async def openai_client(base_url: str) -> jr.ChatClient:
    """An async factory: an OpenAI-compatible model on the fake server, plus the exploder."""
    model = OpenAIChatModel("fake-model", base_url=base_url, api_key=TEST_KEY)
    return jr.ChatClient(model, advisors=[Exploder()])


def mark(markers: str, what: str) -> None:
    """Leave a file in `markers` saying `what` happened in this worker process."""
    (Path(markers) / f"{what}-{os.getpid()}").write_text("", encoding="utf-8")


class MarkedModel(OpenAIChatModel):
    """An OpenAI model that leaves a marker file when it is closed."""

    markers: str

    async def aclose(self) -> None:
        await super().aclose()
        mark(self.markers, "model-closed")


class MarkedJudgeClient(JudgeClient):
    """A Jev client that leaves a marker file when it is closed."""

    markers: str

    async def aclose(self) -> None:
        await super().aclose()
        mark(self.markers, "judge-closed")


def judged_client(base_url: str, jev_url: str, markers: str) -> jr.ChatClient:
    """A sync factory: a model and a Jev judge, both owned (and closed) by the actor."""
    from jevrefine.advisors.self_refine import SelfRefineAdvisor
    from jevrefine.jev import Noul
    from jevrefine.judge._judge import Judge
    from jevrefine.judge.criteria import noul

    model = MarkedModel("fake-model", base_url=base_url, api_key=TEST_KEY)
    model.markers = markers
    jev = MarkedJudgeClient(api_key=TEST_KEY, base_url=jev_url)
    jev.markers = markers
    judge = Judge(jev, [noul("is_good", Noul("Is `assistant_answer` good?"), 0.0)])
    mark(markers, "built")
    return jr.ChatClient(model, advisors=[SelfRefineAdvisor(judge, max_repeat_attempts=1)])


@contextlib.asynccontextmanager
async def context_client(base_url: str, markers: str) -> AsyncIterator[jr.ChatClient]:
    """A factory that is an async context manager: the actor exits it at teardown."""
    async with OpenAIChatModel("fake-model", base_url=base_url, api_key=TEST_KEY) as model:
        mark(markers, "entered")
        yield jr.ChatClient(model)
    mark(markers, "exited")
