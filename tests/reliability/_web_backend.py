"""The backend the web-app tests serve the example apps from: both fakes, held on request.

A test holds one phase (`hold("model")`, `"judge"`, …): the next request that gets there waits
`HOLD` seconds (far longer than any test may take) after saying it arrived, so a client can hang
up while the refinement is inside that phase. Subclasses say what the model and the judge answer
and build the `ChatClient` (`open_client`); `backend_fixture` makes the pytest fixture.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import AsyncIterator, Callable, Iterable
from typing import Any

import pytest

import jevrefine as jr
from jevrefine.jev import JudgeClient
from jevrefine.models.openai import OpenAIChatModel
from jevrefine.testing import FakeJevServer, FakeOpenAIServer
from support import CallProbe

HOLD = 30.0
"""How long a held phase lasts: far longer than any test may take."""


class HeldBackend:
    """The fakes, where a request got to, the outermost probe, and the clients the app opened."""

    phases: tuple[str, ...] = ("model", "judge")

    def __init__(self, model_server: FakeOpenAIServer, jev_server: FakeJevServer) -> None:
        self.model_server = model_server
        self.jev_server = jev_server
        self.reached = {phase: threading.Event() for phase in self.phases}
        self.held: str | None = None
        self.probe = CallProbe()
        self.model: OpenAIChatModel | None = None
        self.jev: JudgeClient | None = None

    def hold(self, phase: str) -> None:
        """Hold the next request that reaches `phase` for `HOLD` seconds."""
        self.held = phase

    def clear(self) -> None:
        """Forget which phases were reached (after a warm-up request)."""
        for event in self.reached.values():
            event.clear()

    async def arrive(self, phase: str) -> None:
        """Say `phase` was reached; wait there if the test holds it."""
        self.reached[phase].set()
        if self.held == phase:
            self.held = None
            await asyncio.sleep(HOLD)  # on the fake's own loop and thread

    async def reply(self, body: dict[str, Any]) -> str:
        """The model's answer to a chat request."""
        raise NotImplementedError

    async def answer(self, state: Any, questions: Iterable[str]) -> dict[str, float]:
        """The judge's noul per question."""
        raise NotImplementedError

    def open_client(self) -> contextlib.AbstractAsyncContextManager[jr.ChatClient]:
        """The shared client the app is built with."""
        raise NotImplementedError


def backend_fixture(
    kind: type[HeldBackend],
) -> Callable[[], AsyncIterator[HeldBackend]]:
    """A pytest fixture that serves both fakes for a `kind` backend."""

    async def backend() -> AsyncIterator[HeldBackend]:
        made: HeldBackend
        async with (
            FakeOpenAIServer(lambda body: made.reply(body)) as model_server,
            FakeJevServer(lambda state, questions: made.answer(state, questions)) as jev_server,
        ):
            made = kind(model_server, jev_server)
            yield made

    return pytest.fixture(backend)  # type: ignore[no-any-return]
