"""The example apps' Server-Sent Events stream, started for real on the fake servers.

FastAPI (on uvicorn) and aiohttp (on its runner) serve `GET /refine/stream` from one shared
`ChatClient`: live self-refine with a `JudgeClient` on `FakeJevServer`, around `OpenAIChatModel`
on `FakeOpenAIServer`. The model answers wrongly until the judge's feedback reaches it. Checked:
the named events in order, the page and its policy, errors before the stream as HTTP statuses,
and a client that hangs up (while the model is asked, or the judge) cancelling the refinement
with nothing left running and no connection checked out.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import threading
from collections.abc import AsyncIterator, Iterable
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlsplit

import anyio
import httpx2
import pytest
from _fullchain import assert_nothing_left
from _web_backend import HeldBackend, backend_fixture

import jevrefine as jr
from jevrefine.advisors.self_refine import SelfRefineAdvisor
from jevrefine.jev import JudgeClient, Noul
from jevrefine.judge import Judge, noul
from jevrefine.models.openai import OpenAIChatModel
from test_integrations import APPS, Serve, load_example

WRONG = "Lyon is the capital of France, I think."
RIGHT = "Paris is the capital of France."
HOLD = 30.0


class Backend(HeldBackend):
    """Live self-refine; the model answers wrongly until the judge's feedback reaches it."""

    async def reply(self, body: dict[str, Any]) -> str:
        await self.arrive("model")
        return RIGHT if "broke these rules" in json.dumps(body["messages"]) else WRONG

    async def answer(self, state: Any, questions: Iterable[str]) -> dict[str, float]:
        await self.arrive("judge")
        return dict.fromkeys(questions, 0.9 if state["assistant_answer"] == RIGHT else 0.1)

    @contextlib.asynccontextmanager
    async def open_client(self) -> AsyncIterator[jr.ChatClient]:
        async with (
            OpenAIChatModel("m", base_url=self.model_server.base_url, api_key="sk-t") as model,
            JudgeClient("jev-t", base_url=self.jev_server.base_url) as jev,
        ):
            self.model, self.jev = model, jev
            judge = Judge(jev, [noul("is_right", Noul("Is it right?", when_false="Wrong"), 0.5)])
            advisor = SelfRefineAdvisor(judge, max_repeat_attempts=2, stream_mode="live")
            yield jr.ChatClient(model, advisors=[self.probe, advisor])


backend = backend_fixture(Backend)


def parse_sse(text: str) -> list[tuple[str, dict[str, Any]]]:
    """`(event, data)` per message of an SSE body."""
    messages = []
    for block in text.split("\n\n"):
        if not block.strip():
            continue
        fields = dict(line.split(": ", 1) for line in block.splitlines())
        messages.append((fields["event"], json.loads(fields["data"])))
    return messages


def stream_url(prompt: str) -> str:
    return "/refine/stream?prompt=" + quote(prompt)


@pytest.mark.parametrize(("example", "serve"), APPS)
async def test_the_stream_sends_the_named_events_in_order(
    example: str, serve: Serve, backend: Backend, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Promise: `delta` as generated, `judged`, `rejected` for the failed attempt, and `done`
    with the returned answer and the refinement's numbers."""
    app = load_example(example, monkeypatch).create_app(backend.open_client)
    async with serve(app) as url, httpx2.AsyncClient(base_url=url, timeout=10) as http:
        response = await http.get(stream_url("Capital of France?"))
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/event-stream")
    assert response.headers["cache-control"] == "no-store"
    messages = parse_sse(response.text)
    shown: dict[int, str] = {}
    for event, data in messages:
        if event == "delta":
            shown[data["attempt"]] = shown.get(data["attempt"], "") + data["text"]
    assert shown == {1: WRONG, 2: RIGHT}
    assert [(e, d.get("attempt")) for e, d in messages if e != "delta"] == [
        ("judged", 1),
        ("rejected", 1),
        ("judged", 2),
        ("done", None),
    ]
    judged = [d for e, d in messages if e == "judged"]
    assert [d["passed"] for d in judged] == [False, True]
    assert "is_right" in judged[0]["summary"]
    rejected = next(d for e, d in messages if e == "rejected")
    assert "Wrong" in rejected["feedback"]
    done = messages[-1][1]
    assert done["answer"] == RIGHT
    assert (done["passed"], done["outcome"], done["attempts"]) == (True, "passed", 2)
    assert done["tokens"] > 0
    assert backend.probe.finished == 1


@pytest.mark.parametrize(("example", "serve"), APPS)
async def test_the_page_is_served_with_a_policy_that_loads_nothing_else(
    example: str, serve: Serve, backend: Backend, monkeypatch: pytest.MonkeyPatch
) -> None:
    app = load_example(example, monkeypatch).create_app(backend.open_client)
    async with serve(app) as url, httpx2.AsyncClient(base_url=url, timeout=10) as http:
        page = await http.get("/")
        missing = await http.get("/refine/stream")
        empty = await http.get("/refine/stream?prompt=")
    assert page.status_code == 200
    assert page.headers["content-type"].startswith("text/html")
    assert "default-src 'none'" in page.text
    assert "connect-src 'self'" in page.text
    assert 'data-stream="/refine/stream"' in page.text
    assert "http" not in page.text.split("<body>", 1)[1]  # no URL to anywhere else
    assert (missing.status_code, empty.status_code) == (400, 400)
    assert "invalid query" in missing.json()["error"]


@pytest.mark.parametrize(("example", "serve"), APPS)
async def test_a_chain_that_cannot_stream_is_an_http_error_not_a_broken_stream(
    example: str, serve: Serve, backend: Backend, monkeypatch: pytest.MonkeyPatch
) -> None:
    @contextlib.asynccontextmanager
    async def refusing() -> AsyncIterator[jr.ChatClient]:
        async with backend.open_client() as client:
            judge = Judge(client.advisors[1].judge.client, [noul("ok", Noul("Ok?"), 0.5)])
            yield jr.ChatClient(client.model, advisors=[SelfRefineAdvisor(judge)])

    app = load_example(example, monkeypatch).create_app(refusing)
    async with serve(app) as url, httpx2.AsyncClient(base_url=url, timeout=10) as http:
        response = await http.get(stream_url("Capital?"))
    assert response.status_code == 502
    assert "StreamingNotSupportedError" in response.json()["error"]
    assert "self_refine" in response.json()["error"]


async def get_then_hang_up(url: str, path: str, reached: threading.Event) -> bytes:
    """GET over a raw socket; close the socket once the refinement reached its phase."""
    where = urlsplit(url)
    assert where.hostname is not None
    assert where.port is not None
    head = f"GET {path} HTTP/1.1\r\nhost: {where.netloc}\r\naccept: text/event-stream\r\n\r\n"
    received = b""
    async with await anyio.connect_tcp(where.hostname, where.port) as stream:
        await stream.send(head.encode())
        received = await stream.receive()  # the headers, and the first events
        while not reached.is_set():  # noqa: ASYNC110 - set by a fake server's thread
            await anyio.sleep(0.005)
    return received  # leaving the block closed the socket: the client is gone


@pytest.mark.parametrize("phase", ["model", "judge"])
@pytest.mark.parametrize(("example", "serve"), APPS)
async def test_a_hang_up_cancels_the_streamed_refinement_and_leaves_nothing_running(
    example: str, serve: Serve, phase: str, backend: Backend, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Promise: a stream's client that disconnects while the model is being asked or the
    attempt judged cancels the refinement there; no task, advisor or pooled connection is left
    busy, and the shared client streams the next request."""
    app = load_example(example, monkeypatch).create_app(backend.open_client)
    async with serve(app) as url, httpx2.AsyncClient(base_url=url, timeout=10) as http:
        warm = await http.get(stream_url("warm up"))  # opens both pools
        assert parse_sse(warm.text)[-1][0] == "done"
        assert backend.model is not None
        assert backend.jev is not None
        models_before = len(backend.model_server.chat_requests)
        judges_before = len(backend.jev_server.requests)
        backend.clear()
        before = set(asyncio.all_tasks())

        backend.hold(phase)
        with anyio.fail_after(10):  # a refinement that is not cancelled fails here, not at 30 s
            first = await get_then_hang_up(url, stream_url("hang up"), backend.reached[phase])
            await backend.probe.cancelled.wait()
        assert first.startswith(b"HTTP/1.1 200")

        assert len(backend.model_server.chat_requests) == models_before + 1
        assert len(backend.jev_server.requests) == judges_before + (phase == "judge")
        assert (backend.probe.started, backend.probe.finished) == (2, 1)
        assert backend.probe.in_flight == 0
        await assert_nothing_left(before, backend.model, backend.jev)

        nxt = await http.get(stream_url("next"))
        done = parse_sse(nxt.text)[-1]
        assert done[0] == "done"
        assert done[1]["answer"] == RIGHT


async def test_the_fastapi_response_stops_at_a_disconnect_under_asgi_2_4() -> None:
    """Promise: `EventStreamResponse` stops its body when the client disconnects even where
    Starlette itself would wait for a failed send (ASGI 2.4), which a stream waiting on its
    judge never makes."""
    from jevrefine.integrations.fastapi import EventStreamResponse

    body_closed = anyio.Event()
    sent: list[dict[str, Any]] = []

    async def body() -> AsyncIterator[bytes]:
        try:
            yield b"event: delta\n\n"
            await anyio.sleep(HOLD)  # a judging call that takes its time
            yield b"never"
        finally:
            body_closed.set()

    disconnect = anyio.Event()

    async def receive() -> dict[str, Any]:
        await disconnect.wait()
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)
        if message.get("body") == b"event: delta\n\n":
            disconnect.set()  # the client goes away once it has the first event

    scope = {"type": "http", "asgi": {"version": "3.0", "spec_version": "2.4"}}
    with anyio.fail_after(5):
        await EventStreamResponse(body(), media_type="text/event-stream")(scope, receive, send)
    assert body_closed.is_set()
    assert [m["type"] for m in sent] == ["http.response.start", "http.response.body"]


# -- the page, in a real browser -------------------------------------------------------------

SCREENSHOT = Path(__file__).resolve().parents[2] / "docs" / "img" / "streaming-live.png"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run"]
RECORD_VIOLATIONS = (
    "window.__violations = [];"
    "document.addEventListener('securitypolicyviolation', e =>"
    " window.__violations.push(e.violatedDirective + ' ' + e.blockedURI));"
)


def _chromium() -> str:
    found = os.environ.get("JEVREFINE_CHROMIUM") or shutil.which("chromium")
    if found and os.access(found, os.X_OK):
        return found
    reason = "no chromium (apt-get install chromium, or set JEVREFINE_CHROMIUM)"
    if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
        pytest.fail(f"CI must run the browser tests: {reason}")
    pytest.skip(reason)


@pytest.mark.slow
@pytest.mark.parametrize(("example", "serve"), APPS)
async def test_the_page_renders_a_live_refinement_in_a_real_browser(
    example: str,
    serve: Serve,
    backend: Backend,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    """Promise: in headless Chromium, the page shows the first attempt's text while it is being
    judged, then strikes it through with the judge's feedback, shows the second, and ends with
    the returned answer; it loads nothing but itself and the stream, and no script fails."""
    playwright_api = pytest.importorskip("playwright.async_api")
    executable = _chromium()
    release = threading.Event()
    judge = backend.answer

    async def judged_after_release(state: Any, questions: dict[str, Any]) -> dict[str, float]:
        # The first verdict waits until the browser has shown the first attempt's text.
        if state["assistant_answer"] == WRONG:
            for _ in range(1000):  # bounded: 10 s
                if release.is_set():
                    break
                await asyncio.sleep(0.01)
        return await judge(state, questions)

    backend.jev_server.answer = judged_after_release
    app = load_example(example, monkeypatch).create_app(backend.open_client)
    async with serve(app) as url, playwright_api.async_playwright() as driver:
        browser = await driver.chromium.launch(executable_path=executable, args=CHROMIUM_ARGS)
        try:
            context = await browser.new_context(viewport={"width": 900, "height": 560})
            await context.add_init_script(RECORD_VIOLATIONS)
            page = await context.new_page()
            requests: list[str] = []
            errors: list[str] = []
            page.on("request", lambda request: requests.append(request.url))
            page.on("pageerror", lambda error: errors.append(str(error)))

            async def only_the_app(route: Any) -> None:
                if route.request.url.startswith(url):
                    await route.continue_()
                else:
                    await route.abort()

            await context.route("**/*", only_the_app)
            await page.goto(f"{url}/?prompt={quote('What is the capital of France?')}")

            first = page.locator("#attempt-1 .text")
            await page.wait_for_function(
                "t => document.querySelector('#attempt-1 .text')?.textContent === t",
                arg=WRONG,
                timeout=10_000,
            )
            # Shown while the judge still holds its verdict: live, not after the fact.
            assert "rejected" not in (await page.locator("#attempt-1").get_attribute("class"))
            release.set()
            await page.locator("#answer").wait_for(state="visible", timeout=10_000)

            assert await page.locator("#answer").text_content() == RIGHT
            assert await first.text_content() == WRONG
            assert "rejected" in (await page.locator("#attempt-1").get_attribute("class"))
            decoration = await first.evaluate("el => getComputedStyle(el).textDecorationLine")
            assert decoration == "line-through"
            assert "Wrong" in (await page.locator("#attempt-1 .feedback").text_content() or "")
            assert await page.locator("#attempt-2 .text").text_content() == RIGHT
            second = await page.locator("#attempt-2").get_attribute("class")
            assert "passed" in second
            assert "rejected" not in second
            assert "done: passed, 2 attempt(s)" in (await page.locator("#status").text_content())

            assert errors == []
            assert await page.evaluate("window.__violations") == []
            assert {r.split("?")[0] for r in requests} == {f"{url}/", f"{url}/refine/stream"}
            await page.screenshot(path=str(tmp_path / "streaming-live.png"), full_page=True)
            if example == "fastapi_app":
                SCREENSHOT.parent.mkdir(parents=True, exist_ok=True)
                await page.screenshot(path=str(SCREENSHOT), full_page=True)
            await context.close()
        finally:
            await browser.close()


@pytest.mark.slow
@pytest.mark.parametrize(("example", "serve"), APPS)
async def test_the_page_never_shows_a_failed_answer_as_the_answer(
    example: str, serve: Serve, backend: Backend, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Promise (issue 32, 2): when every attempt fails, the page says "no attempt passed; best
    attempt shown" with the returned attempt and its verdict, and marks the answer box failed
    (red, "best attempt (it did not pass the judge)"), never the green "answer"."""
    playwright_api = pytest.importorskip("playwright.async_api")
    executable = _chromium()

    async def always_wrong(state: Any, questions: Iterable[str]) -> dict[str, float]:
        return dict.fromkeys(questions, 0.1)

    backend.jev_server.answer = always_wrong
    app = load_example(example, monkeypatch).create_app(backend.open_client)
    async with serve(app) as url, playwright_api.async_playwright() as driver:
        browser = await driver.chromium.launch(executable_path=executable, args=CHROMIUM_ARGS)
        try:
            page = await browser.new_page(viewport={"width": 900, "height": 700})
            await page.goto(f"{url}/?prompt={quote('What is the capital of France?')}")
            await page.locator("#answer").wait_for(state="visible", timeout=10_000)
            note = await page.locator("#note").text_content()
            assert note == (
                "no attempt passed; best attempt shown (attempt 3: passed=false [is_right=FAILED])"
            )
            assert await page.locator("#answer").get_attribute("class") == "failed"
            label = await page.locator("#answer").evaluate(
                "el => getComputedStyle(el, '::before').content"
            )
            assert "did not pass" in label
            assert "done: best_attempt, 3 attempt(s)" in (
                await page.locator("#status").text_content() or ""
            )
            await page.screenshot(path=str(tmp_path / "failed.png"), full_page=True)
        finally:
            await browser.close()
