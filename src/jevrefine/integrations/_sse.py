"""`stream_events()` as Server-Sent Events, and the page that shows a live refinement.

Both web integrations serve the same stream: `GET {path}?prompt=...[&system=...]` answers
`text/event-stream` with these named events, each `data` one JSON object:

| event | data | when |
|---|---|---|
| `delta` | `{"attempt": n, "text": "..."}` | a piece of attempt n's text |
| `judged` | `{"attempt": n, "passed": bool, "summary": str or null}` | attempt n's verdict |
| `rejected` | `{"attempt": n, "feedback": "..."}` | attempt n is not the answer: strike it |
| `done` | a `RefineResponse` (`answer`, `passed`, `outcome`, `attempts`, `tokens`) | the end |
| `failed` | `{"error": "Type: message"}` | the refinement failed after the stream began |

A failure before the first event (a bad query, a chain that cannot stream) is an HTTP error
instead (400, or 502 for the model or judge), as for the refine endpoint.

A client that stops reading while it keeps its connection would otherwise hold the refinement,
and the model's stream under it, for as long as it stays: the server's next send waits for room
that never comes. So each send has `send_timeout` seconds (`DEFAULT_SEND_TIMEOUT`, 30 s); past
it the client is given up on: the frames are closed, which closes the model's stream and cancels
any judging call, a WARNING is logged on `jevrefine.integrations`, and the connection is closed.
A slow refinement is no slow client: only a send that cannot proceed is timed, never the wait
for the next event.
"""

from __future__ import annotations

import base64
import hashlib
import html
import json
import logging
from collections.abc import AsyncGenerator, AsyncIterable, AsyncIterator, Callable, Mapping
from typing import Any, Final

import anyio
import pydantic

from .. import _validate
from ..client import ChatClient, PromptSpec
from ..exceptions import JevrefineError
from ..streaming import AttemptJudged, AttemptRejected, Completed, StreamEvent, TextDelta
from ._common import RefineRequest, error_reply, incoming_context, response_body

__all__ = [
    "DEFAULT_SEND_TIMEOUT",
    "EVENT_STREAM",
    "SSE_HEADERS",
    "begin_stream",
    "checked_send_timeout",
    "close_frames",
    "event_frames",
    "invalid_body_message",
    "log_stalled_client",
    "open_event_stream",
    "sse_frame",
    "stream_page",
    "stream_request",
]

EVENT_STREAM: Final = "text/event-stream"
"""The media type of an SSE response."""
# No proxy or browser may keep or transform a live stream.
SSE_HEADERS: Final = {"cache-control": "no-store", "x-accel-buffering": "no"}
DEFAULT_SEND_TIMEOUT: Final = 30.0
"""Seconds one send to a stream's client may wait for room (the client reads nothing) before
the stream is closed and its model stream released."""
_CLOSE_BOUND: Final = 10.0
"""Seconds closing a stream's frames may take, even in a cancelled scope."""

_log = logging.getLogger("jevrefine.integrations")


def checked_send_timeout(value: object) -> float:
    """`send_timeout` as given to a stream endpoint: a positive number of seconds.

    Raises:
        UserError: anything else (`None` too: a stream's sends are always bounded).
    """
    return _validate.number(
        "send_timeout", value, above=0, unit="seconds", example=DEFAULT_SEND_TIMEOUT
    )


def log_stalled_client(send_timeout: float) -> None:
    """Say that a stream was given up on because its client stopped reading."""
    _log.warning(
        "a client of the event stream stopped reading (nothing could be sent to it for %g s, "
        "the send_timeout): the stream is closed and its refinement cancelled",
        send_timeout,
    )


async def close_frames(frames: AsyncIterable[Any]) -> None:
    """Close a stream's frames, and so the model's stream under them.

    Also when the caller is being cancelled (a client gone, a server shutting down): shielded,
    and bounded.
    """
    aclose = getattr(frames, "aclose", None)
    if aclose is not None:
        with anyio.move_on_after(_CLOSE_BOUND, shield=True):
            await aclose()


def stream_request(query: Mapping[str, str]) -> RefineRequest:
    """The `RefineRequest` in a stream's query string (`prompt`, optional `system`).

    Raises:
        pydantic.ValidationError: no prompt, an empty one, or an unknown parameter.
    """
    return RefineRequest.model_validate(dict(query))


def sse_frame(event: str, data: Mapping[str, Any]) -> bytes:
    """One SSE message: `event: {event}` and its data as one line of JSON."""
    # JSON never holds a raw newline, so the data is always a single `data:` line.
    return f"event: {event}\ndata: {json.dumps(data, separators=(',', ':'))}\n\n".encode()


def _frame(event: StreamEvent) -> bytes | None:
    match event:
        case TextDelta(attempt=attempt, text=text):
            return sse_frame("delta", {"attempt": attempt, "text": text})
        case AttemptJudged(attempt=attempt, passed=passed, verdict=verdict):
            summary = verdict.summary() if verdict is not None else None
            return sse_frame("judged", {"attempt": attempt, "passed": passed, "summary": summary})
        case AttemptRejected(attempt=attempt, feedback=feedback):
            return sse_frame("rejected", {"attempt": attempt, "feedback": feedback})
        case Completed(response=response):
            return sse_frame("done", response_body(response).model_dump())
    return None  # AttemptStarted: the first delta of an attempt says as much


def _spec(client: ChatClient, body: RefineRequest) -> PromptSpec:
    spec = client.prompt()
    if body.system is not None:
        spec = spec.system(body.system)
    return spec.user(body.prompt)


async def open_event_stream(
    client: ChatClient, body: RefineRequest, headers: Mapping[str, str]
) -> AsyncGenerator[bytes, None]:
    """Start the refinement and return its SSE frames, the first event already read.

    Reading the first event here lets a chain that cannot stream (or a live chain asked for
    text) fail before any response has been sent, so the caller can answer with an HTTP error.

    Raises:
        JevrefineError: raised before the first event (the chain cannot stream, the model
            failed at once).
    """
    with incoming_context(headers):
        # The spec's spans get the incoming trace as parent; the stream keeps it explicitly.
        events = _spec(client, body).stream_events()
        first = await anext(events)
    return event_frames(first, events)


async def begin_stream(
    client_of: Callable[[], ChatClient], query: Mapping[str, str], headers: Mapping[str, str]
) -> AsyncGenerator[bytes, None] | tuple[int, str]:
    """What a stream endpoint answers: the frames, or the HTTP status and text that refuse it.

    Both web integrations' stream handlers go through this, so a refusal is the same in each:
    a bad query is a 400 (`invalid query: ...`), a jevrefine error before the first event is
    `error_reply`'s status and text. `client_of` is called only once the query reads, as the
    handlers did before they shared this.
    """
    try:
        body = stream_request(query)
    except pydantic.ValidationError as exc:
        return 400, invalid_body_message(exc)
    try:
        return await open_event_stream(client_of(), body, headers)
    except JevrefineError as exc:
        return error_reply(exc)


async def event_frames(
    first: StreamEvent, events: AsyncIterator[StreamEvent]
) -> AsyncGenerator[bytes, None]:
    """`first`, then the rest of `events`, as SSE frames; a failure ends with an `error` frame.

    Leaving early (the client went away, the server cancelled the handler) closes `events`,
    which closes the model's stream and cancels any judging call.
    """
    try:
        frame = _frame(first)
        if frame is not None:
            yield frame
        async for event in events:
            frame = _frame(event)
            if frame is not None:
                yield frame
    except JevrefineError as exc:
        # The response has begun (status 200): the failure can only be told in the stream.
        yield sse_frame("failed", {"error": error_reply(exc)[1]})
    finally:
        aclose = getattr(events, "aclose", None)
        if aclose is not None:
            await aclose()


def invalid_body_message(error: pydantic.ValidationError) -> str:
    """The one-line text of a 400 for a bad query."""
    return f"invalid query: {error.errors()[0]['msg']}"


_PAGE_STYLE: Final = """
body { font: 16px/1.5 system-ui, sans-serif; max-width: 46rem; margin: 2rem auto; padding: 0 1rem;
       color: #1d1d1f; background: #fff; }
form { display: flex; gap: .5rem; margin-bottom: 1.5rem; }
input { flex: 1; font: inherit; padding: .4rem .6rem; }
button { font: inherit; padding: .4rem 1rem; }
.attempt { border-left: 3px solid #7aa7e0; padding: .3rem .8rem; margin: .8rem 0; }
.attempt .label { font-size: .8rem; color: #666; }
.attempt .text { white-space: pre-wrap; }
.attempt.rejected { border-color: #d88; }
.attempt.rejected .text { text-decoration: line-through; color: #888; }
.attempt .feedback { font-size: .85rem; color: #a33; white-space: pre-wrap; }
.attempt.passed { border-color: #4a4; }
#answer { white-space: pre-wrap; border: 1px solid #4a4; padding: .6rem .8rem; }
#answer::before { content: "answer"; display: block; font-size: .8rem; color: #666; }
#answer:empty { display: none; }
#answer.failed { border-color: #d88; }
#answer.failed::before { content: "best attempt (it did not pass the judge)"; color: #a33; }
#note { font-size: .9rem; color: #a33; margin: .8rem 0 .3rem; }
#note:empty { display: none; }
#status { font-size: .85rem; color: #666; }
"""

# Text is only ever set as textContent: nothing a model writes becomes markup.
_PAGE_SCRIPT: Final = """
const form = document.getElementById("ask");
const attempts = document.getElementById("attempts");
const answer = document.getElementById("answer");
const note = document.getElementById("note");
const status = document.getElementById("status");
let source = null;

function block(n) {
  let el = document.getElementById("attempt-" + n);
  if (el === null) {
    el = document.createElement("div");
    el.id = "attempt-" + n;
    el.className = "attempt";
    const label = document.createElement("div");
    label.className = "label";
    label.textContent = "attempt " + n;
    const text = document.createElement("div");
    text.className = "text";
    el.append(label, text);
    attempts.append(el);
  }
  return el;
}

function start(prompt) {
  if (source !== null) source.close();
  attempts.replaceChildren();
  answer.textContent = "";
  answer.className = "";
  note.textContent = "";
  status.textContent = "generating…";
  source = new EventSource(form.dataset.stream + "?prompt=" + encodeURIComponent(prompt));
  source.addEventListener("delta", (e) => {
    const d = JSON.parse(e.data);
    block(d.attempt).querySelector(".text").append(d.text);
  });
  source.addEventListener("judged", (e) => {
    const d = JSON.parse(e.data);
    const el = block(d.attempt);
    if (d.passed) el.classList.add("passed");
    el.querySelector(".label").textContent = "attempt " + d.attempt +
      (d.passed ? " · passed" : d.summary === null ? " · not judged" : " · failed");
  });
  source.addEventListener("rejected", (e) => {
    const d = JSON.parse(e.data);
    const el = block(d.attempt);
    el.classList.add("rejected");
    const note = document.createElement("div");
    note.className = "feedback";
    note.textContent = "sent back: " + d.feedback;
    el.append(note);
  });
  source.addEventListener("done", (e) => {
    const d = JSON.parse(e.data);
    answer.textContent = d.answer;
    // A failed answer is never shown as a passed one: say that none passed, and its verdict.
    if (d.passed === false) {
      answer.className = "failed";
      note.textContent = "no attempt passed; best attempt shown" +
        (d.chosen ? " (attempt " + d.chosen + (d.verdict ? ": " + d.verdict : "") + ")" : "");
    }
    status.textContent = "done: " + (d.outcome || "answered") + ", " + d.attempts +
      " attempt(s), " + d.tokens + " tokens";
    source.close();
  });
  source.addEventListener("failed", (e) => {
    status.textContent = "failed: " + JSON.parse(e.data).error;
    source.close();
  });
  source.onerror = () => {
    if (source.readyState !== EventSource.CLOSED) status.textContent = "connection lost";
    source.close();
  };
}

form.addEventListener("submit", (e) => {
  e.preventDefault();
  start(form.elements.prompt.value);
});
const asked = new URLSearchParams(location.search).get("prompt");
if (asked) {
  form.elements.prompt.value = asked;
  start(asked);
}
"""


def _hash_source(source: str) -> str:
    digest = hashlib.sha256(source.encode("utf-8")).digest()
    return "'sha256-" + base64.b64encode(digest).decode("ascii") + "'"


# Only this script, this style and the stream (same origin) are allowed: nothing else loads.
_PAGE_CSP: Final = (
    f"default-src 'none'; script-src {_hash_source(_PAGE_SCRIPT)}; "
    f"style-src {_hash_source(_PAGE_STYLE)}; connect-src 'self'; base-uri 'none'; "
    "form-action 'none'"
)


def stream_page(stream_path: str) -> str:
    """The page that asks `stream_path` and renders a live refinement.

    One HTML document: no build step, nothing loaded from elsewhere (its policy forbids it).
    Text appears as it is generated, a rejected attempt is struck through, the returned answer
    is shown at the end: as "the answer" when it passed, else under "no attempt passed; best
    attempt shown" with its verdict. `?prompt=...` in its URL starts at once.
    """
    return (
        '<!doctype html>\n<html lang="en"><head><meta charset="utf-8">'
        f'<meta http-equiv="Content-Security-Policy" content="{_PAGE_CSP}">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>jevrefine · live refinement</title><style>{_PAGE_STYLE}</style></head><body>"
        "<h1>Live refinement</h1>"
        f'<form id="ask" data-stream="{html.escape(stream_path, quote=True)}">'
        '<input name="prompt" placeholder="Ask something" autocomplete="off">'
        "<button>Ask</button></form>"
        '<div id="attempts"></div><p id="note"></p><div id="answer"></div><p id="status"></p>'
        f"<script>{_PAGE_SCRIPT}</script></body></html>\n"
    )
