"""The events of `spec.stream_events()`: what a refining stream tells a user interface.

```python
async for event in client.prompt("Write a haiku about rain").stream_events():
    match event:
        case TextDelta(attempt=n, text=text):
            show(n, text)                          # text as it is generated
        case AttemptRejected(attempt=n):
            strike(n)                              # the judge sent that attempt back
        case Completed(response=response):
            final(response.content)                # always the answer returned
```

Every stream starts with `AttemptStarted` and a successful one ends with `Completed`. Without a
self-refine advisor in the chain there is one attempt: `AttemptStarted(1)`, the deltas,
`Completed`. With one, what appears depends on its `stream_mode` (see `SelfRefineAdvisor`):
`"buffered"` shows only the returned answer's text, after its verdict; `"live"` shows every
attempt's text as the model writes it and follows each attempt that is not returned with
`AttemptRejected`.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final, TypeAlias

from ._request import ChatClientRequest, ChatClientResponse
from .messages import ChatResponse

if TYPE_CHECKING:
    from collections.abc import Sequence

    from .judge.verdict import Verdict

__all__ = [
    "AttemptJudged",
    "AttemptRejected",
    "AttemptStarted",
    "Completed",
    "StreamEvent",
    "TextDelta",
]


@dataclass(frozen=True, slots=True)
class AttemptStarted:
    """The model was asked for attempt `attempt` (1 for the first)."""

    attempt: int
    """1 for the first attempt."""


@dataclass(frozen=True, slots=True)
class TextDelta:
    """A piece of attempt `attempt`'s text, in the order the model wrote it."""

    attempt: int
    """The attempt the text belongs to."""
    text: str
    """The new text (never empty)."""


@dataclass(frozen=True, slots=True)
class AttemptJudged:
    """The judge's verdict on attempt `attempt`.

    `verdict` is `None` when the attempt was not judged (the skip predicate returned it, e.g. a
    guardrail refusal, or the judging call failed open); `passed` is then `False`.
    """

    attempt: int
    """The attempt judged."""
    passed: bool
    """Whether the verdict passed."""
    verdict: Verdict | None
    """The verdict (`None` when unjudged)."""


@dataclass(frozen=True, slots=True)
class AttemptRejected:
    """Attempt `attempt` is not the answer: a user interface drops (or strikes) its text.

    Only in live mode, where that text was shown. An attempt that failed the judge is rejected
    when the next one starts; when attempts run out and an earlier attempt is returned as the
    best, the last one is rejected too, and `Completed.response.content` is the text to show.
    """

    attempt: int
    """The attempt rejected."""
    feedback: str
    """The verdict's feedback: what the next attempt is asked to fix."""


@dataclass(frozen=True, slots=True)
class Completed:
    """The stream ended: `response` is what `call()` would have returned.

    Its `content` is the answer to show, its usage the model's tokens over every attempt, and its
    context carries the `RefineReport` (`context_keys.REFINE_REPORT`) as for `call()`.
    """

    response: ChatClientResponse
    """The returned response."""


StreamEvent: TypeAlias = AttemptStarted | TextDelta | AttemptJudged | AttemptRejected | Completed
"""Any event of `spec.stream_events()`."""

# Where the sink lives: in `request.scope`, which every copy of the request shares, so an
# advisor deep in the chain reaches the consumer of `stream_events()` without a context key.
_SINK_KEY: Final = "jevrefine.streaming.sink"

FLUSH: Final = ChatResponse.of_text("")
"""An empty chunk an advisor yields so that the events it put in the sink reach the consumer now
(rather than with the next chunk of text); `stream_events()` drops it, text streams skip it."""


class EventSink:
    """The events advisors emit during one `stream_events()` call, in order.

    Advisors append; the consumer drains before each chunk that reaches it, so an event is
    always delivered before the text that followed it.
    """

    __slots__ = ("_events", "_holds", "attempt", "live")

    def __init__(self) -> None:
        self._events: deque[StreamEvent] = deque()
        self._holds = 0
        self.attempt = 1
        """The attempt the chunks reaching the consumer belong to."""
        self.live = False
        """True once a live self-refine sends its text as events (its chunks are not shown
        again)."""

    def emit(self, event: StreamEvent) -> None:
        """Queue `event` for the consumer."""
        self._events.append(event)

    def drain(self) -> Sequence[StreamEvent]:
        """The queued events, oldest first; the queue is left empty."""
        events = self._events
        if not events:
            return ()  # the usual case, once per chunk: no list made
        drained = list(events)
        events.clear()
        return drained

    @property
    def held(self) -> bool:
        """True while an outer advisor must see the whole answer before any text is shown.

        The guardrail holds while it screens the output; a live self-refine then streams
        buffered.
        """
        return self._holds > 0

    def hold(self) -> None:
        """Start holding text back (pair with `release`)."""
        self._holds += 1

    def release(self) -> None:
        """Stop one hold."""
        self._holds -= 1


def attach_sink(request: ChatClientRequest) -> EventSink:
    """Give `request` (and every copy of it) a new sink."""
    sink = EventSink()
    request.scope[_SINK_KEY] = sink
    return sink


def sink_of(request: ChatClientRequest) -> EventSink | None:
    """The sink of the `stream_events()` call `request` belongs to, if any."""
    sink = request.scope.get(_SINK_KEY)
    return sink if isinstance(sink, EventSink) else None
