"""Leaving a refining stream early stops everything under it and leaves nothing checked out.

`OpenAIChatModel` on `FakeOpenAIServer` (a long answer: most of its SSE body is still unread when
the consumer leaves), self-refine in live mode with a `JudgeClient` on `FakeJevServer`. The
consumer leaves while the model's stream is being read (`break`, with and without closing the
iterator), while the judging call is in flight, or while the judge's retry backoff waits (the
fake and the backoff hold those for 30 s; the test gives up after 10). Then: no task of ours is
left, neither pool holds a connection, and the same client streams the next request whole.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import AsyncIterator
from typing import Any

import anyio
import pytest
from _fullchain import assert_nothing_left, model_pool_busy

import jevrefine as jr
from jevrefine.advisors.self_refine import SelfRefineAdvisor
from jevrefine.jev import JudgeClient, Noul, RetryPolicy
from jevrefine.judge import Judge, noul
from jevrefine.models.openai import OpenAIChatModel
from jevrefine.streaming import AttemptJudged, Completed, TextDelta
from jevrefine.testing import FakeJevServer, FakeOpenAIServer

HOLD = 30.0
LONG_ANSWER = " ".join(f"word{i}" for i in range(400))


class Backend:
    """The fakes, where the request got to, and the client every test streams through."""

    def __init__(self, model_server: FakeOpenAIServer, jev_server: FakeJevServer) -> None:
        self.model_server = model_server
        self.jev_server = jev_server
        self.judge_reached = threading.Event()
        self.backoff_reached = threading.Event()
        self.hold_judge = False
        self.hold_backoff = False

    async def answer(self, state: Any, questions: dict[str, Any]) -> dict[str, float]:
        self.judge_reached.set()
        if self.hold_judge:
            self.hold_judge = False
            await asyncio.sleep(HOLD)  # the fake's own loop, on its own thread
        return dict.fromkeys(questions, 0.9)

    async def backoff(self, seconds: float) -> None:
        self.backoff_reached.set()
        if self.hold_backoff:
            self.hold_backoff = False
            await anyio.sleep(HOLD)  # the client's loop: this is what must be cancelled


@pytest.fixture
async def backend() -> AsyncIterator[Backend]:
    backend: Backend
    async with (
        FakeOpenAIServer(lambda body: LONG_ANSWER) as model_server,
        FakeJevServer(lambda state, questions: backend.answer(state, questions)) as jev_server,
    ):
        backend = Backend(model_server, jev_server)
        yield backend


@contextlib.asynccontextmanager
async def streaming_client(backend: Backend) -> AsyncIterator[tuple[jr.ChatClient, Any, Any]]:
    retry = RetryPolicy(max_retries=2, sleep=backend.backoff)
    async with (
        OpenAIChatModel("m", base_url=backend.model_server.base_url, api_key="sk-t") as model,
        JudgeClient("jev-t", base_url=backend.jev_server.base_url, retry=retry) as jev,
    ):
        judge = Judge(jev, [noul("is_good", Noul("Is it good?"), 0.5)])
        advisor = SelfRefineAdvisor(judge, max_repeat_attempts=1, stream_mode="live")
        yield jr.ChatClient(model, advisors=[advisor]), model, jev


async def assert_next_stream_is_whole(client: jr.ChatClient) -> None:
    events = [e async for e in client.prompt("next").stream_events()]
    last = events[-1]
    assert isinstance(last, Completed)
    assert last.response.content == LONG_ANSWER


@pytest.mark.parametrize(
    "close",
    [
        "aclose",
        "break",
    ],
)
async def test_leaving_while_the_model_streams_closes_its_stream(
    backend: Backend, close: str
) -> None:
    """Promise: a consumer that stops reading mid-answer closes the model's HTTP stream at once
    (`aclose`) or when the event loop finalizes the iterator (a bare `break`)."""
    async with streaming_client(backend) as (client, model, jev):
        await assert_next_stream_is_whole(client)  # warms both pools up
        before = set(asyncio.all_tasks())
        seen = 0
        with anyio.fail_after(10):
            if close == "aclose":
                async with contextlib.aclosing(client.prompt("go").stream_events()) as events:
                    async for event in events:
                        seen += isinstance(event, TextDelta)
                        if seen == 3:
                            break
                assert model_pool_busy(model) == 0  # closed when the block left, not later
            else:
                async for event in client.prompt("go").stream_events():
                    seen += isinstance(event, TextDelta)
                    if seen == 3:
                        break
        assert seen == 3
        assert not backend.judge_reached.is_set() or len(backend.jev_server.requests) == 1
        await assert_nothing_left(before, model, jev)
        await assert_next_stream_is_whole(client)


@pytest.mark.parametrize("phase", ["judge", "backoff"])
async def test_cancelling_while_judging_cancels_the_judge_call(
    backend: Backend, phase: str
) -> None:
    """Promise: cancelling the task that reads the stream while the attempt is being judged (the
    call in flight, or its retry backoff waiting) stops it there; nothing is left behind."""
    async with streaming_client(backend) as (client, model, jev):
        await assert_next_stream_is_whole(client)
        judges_before = len(backend.jev_server.requests)
        backend.judge_reached.clear()
        backend.backoff_reached.clear()
        if phase == "judge":
            backend.hold_judge = True
            reached = backend.judge_reached
        else:
            backend.hold_backoff = True
            backend.jev_server.fail(503)
            reached = backend.backoff_reached
        before = set(asyncio.all_tasks())
        judged: list[object] = []

        async def read(scope: anyio.CancelScope) -> None:
            async for event in client.prompt("go").stream_events():
                if isinstance(event, AttemptJudged):
                    judged.append(event)

        with anyio.fail_after(10):  # a judge call that is not cancelled fails here, not at 30 s
            async with anyio.create_task_group() as group:
                group.start_soon(read, group.cancel_scope)
                while not reached.is_set():  # noqa: ASYNC110 - set by the fake's thread
                    await anyio.sleep(0.005)
                group.cancel_scope.cancel()
        assert judged == []  # it never got a verdict
        assert len(backend.jev_server.requests) == judges_before + 1  # no retry was sent
        await assert_nothing_left(before, model, jev)
        await assert_next_stream_is_whole(client)
