"""A web client that hangs up cancels its refinement: both example apps, started for real.

The FastAPI app (on uvicorn) and the aiohttp app (on its runner) serve on 127.0.0.1 with one
shared `ChatClient`: self-refine with a `JudgeClient` on `FakeJevServer`, around
`OpenAIChatModel` on `FakeOpenAIServer`. A raw TCP client posts a refine request and closes its
socket once the refinement is inside the model call, inside the judge call, or in the judge's
retry backoff (the fake servers and the backoff say when; each holds that first request for
30 s). Then: the refinement was cancelled (an outermost advisor saw it start and be cancelled,
never finish), nothing is left running (no new task, no advisor in flight, neither connection
pool holding a connection), and the same shared client answers the next request.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
from collections.abc import AsyncIterator, Callable, Iterable
from typing import Any
from urllib.parse import urlsplit

import anyio
import httpx2
import pytest
from _fullchain import assert_nothing_left
from _web_backend import HeldBackend, backend_fixture

import jevrefine as jr
from jevrefine.advisors.self_refine import SelfRefineAdvisor
from jevrefine.jev import JudgeClient, Noul, RetryPolicy
from jevrefine.judge import Judge
from jevrefine.judge.criteria import noul
from jevrefine.models.openai import OpenAIChatModel
from test_integrations import load_example, serve_aiohttp, serve_fastapi

Serve = Callable[[Any], contextlib.AbstractAsyncContextManager[str]]
APPS = [
    pytest.param("fastapi_app", serve_fastapi, id="fastapi"),
    pytest.param("aiohttp_app", serve_aiohttp, id="aiohttp"),
]
PHASES = ["model", "judge", "backoff"]


class Backend(HeldBackend):
    """The model and the judge say yes at once; a held backoff makes the judge fail once."""

    phases = tuple(PHASES)

    def hold(self, phase: str) -> None:
        """Hold the next request in `phase` (a backoff: the judge call fails once, its retry
        waits)."""
        super().hold(phase)
        if phase == "backoff":
            self.jev_server.fail(503)

    async def reply(self, body: dict[str, Any]) -> str:
        await self.arrive("model")
        return "a good answer"

    async def answer(self, state: Any, questions: Iterable[str]) -> dict[str, float]:
        await self.arrive("judge")
        return dict.fromkeys(questions, 0.9)

    async def backoff(self, seconds: float) -> None:
        await self.arrive("backoff")

    @contextlib.asynccontextmanager
    async def open_client(self) -> AsyncIterator[jr.ChatClient]:
        retry = RetryPolicy(max_retries=2, sleep=self.backoff)
        async with (
            OpenAIChatModel("m", base_url=self.model_server.base_url, api_key="sk-t") as model,
            JudgeClient("jev-t", base_url=self.jev_server.base_url, retry=retry) as jev,
        ):
            self.model, self.jev = model, jev
            judge = Judge(jev, [noul("is_good", Noul("Is it good?"), 0.5)])
            yield jr.ChatClient(
                model, advisors=[self.probe, SelfRefineAdvisor(judge, max_repeat_attempts=1)]
            )


backend = backend_fixture(Backend)


async def post_then_hang_up(url: str, prompt: str, reached: threading.Event) -> None:
    """POST /refine over a raw socket; close the socket once the refinement reached its phase."""
    where = urlsplit(url)
    assert where.hostname is not None
    assert where.port is not None
    body = json.dumps({"prompt": prompt}).encode()
    head = (
        f"POST /refine HTTP/1.1\r\nhost: {where.netloc}\r\ncontent-type: application/json\r\n"
        f"content-length: {len(body)}\r\n\r\n"
    ).encode()
    async with await anyio.connect_tcp(where.hostname, where.port) as stream:
        await stream.send(head + body)
        while not reached.is_set():  # noqa: ASYNC110 - set by a fake server's thread
            await anyio.sleep(0.005)
    # Leaving the block closed the socket: the client is gone.


@pytest.mark.parametrize("phase", PHASES)
@pytest.mark.parametrize(("example", "serve"), APPS)
async def test_a_hang_up_cancels_the_refinement_and_leaves_nothing_running(
    example: str, serve: Serve, phase: str, backend: Backend, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Promise: a web client that disconnects while its refinement is in the model call, the
    judge call or the judge's backoff cancels it; no task, advisor or pooled connection is left
    busy, and the shared client serves the next request."""
    app = load_example(example, monkeypatch).create_app(backend.open_client)
    async with serve(app) as url, httpx2.AsyncClient(base_url=url, timeout=10) as http:
        warm = await http.post("/refine", json={"prompt": "warm up"})  # opens both pools
        assert warm.status_code == 200, warm.text
        assert backend.model is not None
        assert backend.jev is not None
        models_before = len(backend.model_server.chat_requests)
        judges_before = len(backend.jev_server.requests)
        backend.clear()
        before = set(asyncio.all_tasks())

        backend.hold(phase)
        with anyio.fail_after(10):  # a refinement that is not cancelled fails here, not at 30 s
            await post_then_hang_up(url, "hang up on me", backend.reached[phase])
            await backend.probe.cancelled.wait()

        # It was under way where the test held it...
        assert len(backend.model_server.chat_requests) == models_before + 1
        judged = {"model": 0, "judge": 1, "backoff": 1}[phase]  # backoff: no retry was sent
        assert len(backend.jev_server.requests) == judges_before + judged
        # ...and it was cancelled there: started, never finished.
        assert (backend.probe.started, backend.probe.finished) == (2, 1)
        assert backend.probe.in_flight == 0
        await assert_nothing_left(before, backend.model, backend.jev)

        # The shared client (model pool, judge pool) serves the next request.
        nxt = await http.post("/refine", json={"prompt": "next"})
        assert nxt.status_code == 200, nxt.text
        assert nxt.json()["answer"] == "a good answer"
        assert backend.probe.in_flight == 0


@pytest.mark.parametrize(
    ("example", "serve"),
    [
        pytest.param("fastapi_app", serve_fastapi, id="fastapi"),
        pytest.param("aiohttp_app", serve_aiohttp, id="aiohttp"),
    ],
)
async def test_watching_for_a_hang_up_keeps_a_failure_a_502(
    example: str, serve: Serve, backend: Backend, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Promise: the disconnect watch changes nothing for a client that stays: a model that
    fails is a 502 naming the typed error, and the client serves the next request."""
    app = load_example(example, monkeypatch).create_app(backend.open_client)
    async with serve(app) as url, httpx2.AsyncClient(base_url=url, timeout=10) as http:
        backend.model_server.fail(400)
        failed = await http.post("/refine", json={"prompt": "fail"})
        nxt = await http.post("/refine", json={"prompt": "next"})
    # Asserted once the server has shut down: a failure inside would cancel it, not stop it.
    assert failed.status_code == 502, failed.text
    assert "ModelHTTPError" in failed.text
    assert nxt.status_code == 200, nxt.text
    assert backend.probe.in_flight == 0
