"""Streaming refinement: `stream_mode`, `spec.stream_events()`, and the same report as `call()`.

The judge is a `JudgeClient` on `FakeJevServer` whose verdict is looked up by the answer judged;
the model is a `FunctionModel` streaming each answer in a few chunks (the adapters over their
fake servers are in `test_refine_stream_adapters.py`).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import anyio
import pytest

import jevrefine as jr
from jevrefine import (
    ChatClient,
    Prompt,
    RefineReport,
    SelfRefineAdvisor,
    SelfRefineFailedError,
    StreamingNotSupportedError,
    UserError,
    context_keys,
)
from jevrefine.jev import JudgeClient, Noul
from jevrefine.judge import Judge, check, noul
from jevrefine.streaming import (
    FLUSH,
    AttemptJudged,
    AttemptRejected,
    AttemptStarted,
    Completed,
    StreamEvent,
    TextDelta,
)
from jevrefine.testing import FakeJevServer, FunctionModel
from otel_support import Otel

IS_CORRECT = Noul("Is `assistant_answer` correct?", when_false="The answer is wrong")
VERDICTS = {"Lyon is it.": 0.1, "Marseille, surely.": 0.2, "Paris is the capital.": 0.9}


class Drafts:
    """A model answering with `texts` in order (the last repeated), streamed word by word.

    It records whether it was ever called without streaming: each attempt must be streamed.
    """

    def __init__(self, *texts: str) -> None:
        self.texts = list(texts)
        self.calls = 0
        self.model = FunctionModel(self._call, stream_function=self._stream)

    def _next(self) -> str:
        return self.texts.pop(0) if len(self.texts) > 1 else self.texts[0]

    def _call(self, prompt: Prompt) -> str:
        self.calls += 1
        return self._next()

    async def _stream(self, prompt: Prompt) -> AsyncIterator[str]:
        words = self._next().split(" ")
        for index, word in enumerate(words):
            yield word if index == 0 else " " + word


def judged_by_answer(state: Any, questions: dict[str, Any]) -> dict[str, float]:
    return dict.fromkeys(questions, VERDICTS[state["assistant_answer"]])


def refining(drafts: Drafts, jev: JudgeClient, mode: str | None, **options: Any) -> ChatClient:
    judge = Judge(jev, [noul("ok", IS_CORRECT, minimum=0.7)])
    advisor = SelfRefineAdvisor(judge, stream_mode=mode, **options)
    return ChatClient(drafts.model, advisors=[advisor])


async def collect(client: ChatClient, text: str = "Capital of France?") -> list[StreamEvent]:
    return [event async for event in client.prompt(text).stream_events()]


def shape(events: list[StreamEvent]) -> list[str]:
    """The events as short names, deltas joined per attempt: easy to compare whole."""
    names: list[str] = []
    for event in events:
        match event:
            case AttemptStarted(attempt=n):
                names.append(f"start {n}")
            case TextDelta(attempt=n, text=t):
                if names and names[-1].startswith(f"text {n}: "):
                    names[-1] += t
                else:
                    names.append(f"text {n}: {t}")
            case AttemptJudged(attempt=n, passed=p):
                names.append(f"judged {n} {'passed' if p else 'failed'}")
            case AttemptRejected(attempt=n):
                names.append(f"rejected {n}")
            case Completed(response=r):
                names.append(f"completed: {r.content}")
    return names


def report_of(response: jr.ChatClientResponse) -> RefineReport:
    report = response.context[context_keys.REFINE_REPORT]
    assert isinstance(report, RefineReport)
    return report


def completed(events: list[StreamEvent]) -> jr.ChatClientResponse:
    last = events[-1]
    assert isinstance(last, Completed)
    return last.response


@pytest.fixture(autouse=True)
def _verdicts(jev_server: FakeJevServer) -> None:
    jev_server.answer = judged_by_answer


async def test_without_a_stream_mode_both_streams_refuse_naming_the_advisor(
    jev: JudgeClient,
) -> None:
    client = refining(Drafts("Paris is the capital."), jev, None)
    with pytest.raises(StreamingNotSupportedError, match=r"self_refine.*stream_mode"):
        await collect(client)
    with pytest.raises(StreamingNotSupportedError, match="self_refine"):
        [chunk async for chunk in client.prompt("Capital?").stream()]
    with pytest.raises(UserError, match=r"'sideways' is not a stream mode.*'buffered'.*'live'"):
        SelfRefineAdvisor(Judge(jev, [noul("ok", IS_CORRECT)]), stream_mode="sideways")


async def test_buffered_shows_only_the_returned_answer_after_every_verdict(
    jev: JudgeClient,
) -> None:
    drafts = Drafts("Lyon is it.", "Paris is the capital.")
    events = await collect(refining(drafts, jev, "buffered"))
    assert shape(events) == [
        "start 1",
        "judged 1 failed",
        "start 2",
        "judged 2 passed",
        "text 2: Paris is the capital.",
        "completed: Paris is the capital.",
    ]
    judged = [e for e in events if isinstance(e, AttemptJudged)]
    assert judged[0].verdict is not None
    assert not judged[0].verdict.passed
    assert drafts.calls == 0  # every attempt was streamed from the model, none called


async def test_buffered_stream_yields_exactly_the_returned_text(jev: JudgeClient) -> None:
    client = refining(Drafts("Lyon is it.", "Paris is the capital."), jev, "buffered")
    chunks = [chunk async for chunk in client.prompt("Capital of France?").stream()]
    assert "".join(chunks) == "Paris is the capital."
    assert len(chunks) > 1  # streamed, not one block


async def test_live_shows_each_attempt_as_generated_and_rejects_the_failed_one(
    jev: JudgeClient,
) -> None:
    drafts = Drafts("Lyon is it.", "Paris is the capital.")
    events = await collect(refining(drafts, jev, "live"))
    assert shape(events) == [
        "start 1",
        "text 1: Lyon is it.",
        "judged 1 failed",
        "rejected 1",
        "start 2",
        "text 2: Paris is the capital.",
        "judged 2 passed",
        "completed: Paris is the capital.",
    ]
    rejected = next(e for e in events if isinstance(e, AttemptRejected))
    assert "The answer is wrong" in rejected.feedback
    assert drafts.calls == 0
    assert [e.text for e in events if isinstance(e, TextDelta)][:3] == ["Lyon", " is", " it."]


async def test_live_refuses_a_text_stream_and_says_to_use_stream_events(jev: JudgeClient) -> None:
    client = refining(Drafts("Paris is the capital."), jev, "live")
    with pytest.raises(UserError, match=r"stream_events\(\)"):
        [chunk async for chunk in client.prompt("Capital?").stream()]


@pytest.mark.parametrize("mode", ["buffered", "live"])
async def test_an_earlier_best_attempt_is_returned_and_the_last_rejected(
    jev: JudgeClient, mode: str
) -> None:
    # Both fail the noul; only attempt 1 passes the check, so it is the best (net 0 vs -2).
    drafts = Drafts("Marseille, surely.", "Lyon is it.")
    judge = Judge(
        jev,
        [
            noul("ok", IS_CORRECT, minimum=0.7),
            check("has_comma", lambda i: "," in i.assistant_answer, "Use a comma."),
        ],
    )
    client = ChatClient(
        drafts.model,
        advisors=[SelfRefineAdvisor(judge, stream_mode=mode, max_repeat_attempts=1)],
    )
    events = await collect(client)
    response = completed(events)
    assert response.content == "Marseille, surely."
    report = report_of(response)
    assert (report.outcome, report.chosen) == ("best_attempt", 1)
    if mode == "buffered":
        assert shape(events) == [
            "start 1",
            "judged 1 failed",
            "start 2",
            "judged 2 failed",
            "text 1: Marseille, surely.",
            "completed: Marseille, surely.",
        ]
    else:
        assert shape(events) == [
            "start 1",
            "text 1: Marseille, surely.",
            "judged 1 failed",
            "rejected 1",
            "start 2",
            "text 2: Lyon is it.",
            "judged 2 failed",
            "rejected 2",
            "completed: Marseille, surely.",
        ]


@pytest.mark.parametrize("mode", ["buffered", "live"])
@pytest.mark.parametrize(
    "order", [SelfRefineAdvisor.DEFAULT_ORDER, SelfRefineAdvisor.BEFORE_TOOLS_ORDER]
)
async def test_the_report_and_usage_are_those_of_call(
    jev_server: FakeJevServer, mode: str, order: int
) -> None:
    """Promise: a stream and a call of the same refinement give the same answer, attempts,
    verdicts, outcome and summed usage (fresh judges: the fake's usage is per request)."""

    async def run(streamed: bool) -> jr.ChatClientResponse:
        async with JudgeClient("sk-t", base_url=jev_server.base_url) as jev:
            client = refining(Drafts("Lyon is it.", "Paris is the capital."), jev, mode)
            client = ChatClient(
                client.model,
                advisors=[
                    SelfRefineAdvisor(
                        Judge(jev, [noul("ok", IS_CORRECT, minimum=0.7)]),
                        stream_mode=mode,
                        order=order,
                    )
                ],
            )
            if streamed:
                return completed(await collect(client))
            return await client.prompt("Capital of France?").call()

    called, streamed = await run(False), await run(True)
    assert streamed.content == called.content == "Paris is the capital."
    assert streamed.chat_response.metadata.usage == called.chat_response.metadata.usage
    assert streamed.chat_response.metadata.usage.total_tokens > 0
    a, b = report_of(called), report_of(streamed)
    assert (b.outcome, b.chosen, b.model_usage, b.judge_usage) == (
        a.outcome,
        a.chosen,
        a.model_usage,
        a.judge_usage,
    )
    assert [(x.index, x.answer, x.usage) for x in b.attempts] == [
        (x.index, x.answer, x.usage) for x in a.attempts
    ]
    assert [x.verdict.passed for x in b.attempts if x.verdict] == [False, True]


async def test_without_self_refine_one_attempt_and_its_deltas(jev: JudgeClient) -> None:
    events = await collect(ChatClient(Drafts("Paris is the capital.").model))
    assert shape(events) == [
        "start 1",
        "text 1: Paris is the capital.",
        "completed: Paris is the capital.",
    ]
    assert completed(events).chat_response.metadata.usage.total_tokens > 0


async def test_attempts_running_out_with_the_flag_raise_from_the_stream(
    jev: JudgeClient,
) -> None:
    client = refining(
        Drafts("Lyon is it."),
        jev,
        "live",
        max_repeat_attempts=1,
        fail_on_exhausted_attempts=True,
    )
    seen: list[StreamEvent] = []

    async def read() -> None:
        async for event in client.prompt("Capital of France?").stream_events():
            seen.append(event)

    with pytest.raises(SelfRefineFailedError):
        await read()
    assert shape(seen)[-1] == "judged 2 failed"
    assert not any(isinstance(e, Completed) for e in seen)


class _FlushThenWait(jr.BaseAdvisor):
    """Below self-refine: a `FLUSH` chunk at once, then a pause, then the model's chunks."""

    name = "flush_then_wait"
    order = jr.LOWEST_PRECEDENCE

    async def advise_call(
        self, request: jr.ChatClientRequest, chain: jr.CallAdvisorChain
    ) -> jr.ChatClientResponse:
        return await chain.next_call(request)

    async def advise_stream(
        self, request: jr.ChatClientRequest, chain: jr.CallAdvisorChain
    ) -> AsyncIterator[jr.ChatClientResponse]:
        yield jr.ChatClientResponse(FLUSH, request.context)
        await anyio.sleep(0.05)
        async for chunk in chain.next_stream(request):
            yield chunk


@pytest.mark.parametrize("mode", ["buffered", "live"])
async def test_an_inner_flush_is_passed_on_but_is_no_part_of_the_attempt(
    jev: JudgeClient, mode: str
) -> None:
    """An inner advisor's flush is no part of the attempt: its time to first chunk is the
    model's, and the returned text is the model's."""
    otel = Otel()
    judge = Judge(jev, [noul("ok", IS_CORRECT, minimum=0.7)])
    client = ChatClient(
        Drafts("Paris is the capital.").model,
        advisors=[SelfRefineAdvisor(judge, stream_mode=mode), _FlushThenWait()],
        **otel.providers,
    )
    events = await collect(client)
    assert shape(events)[-1] == "completed: Paris is the capital."
    returned = completed(events)
    assert returned.content == "Paris is the capital."
    (attempt,) = [s for s in otel.spans() if s.name == "self_refine.attempt"]
    first_chunk = dict(attempt.attributes or {})["gen_ai.response.time_to_first_chunk"]
    assert isinstance(first_chunk, float)
    assert first_chunk >= 0.05  # timed at the model's first chunk, not at the flush
    assert "text 1: Paris is the capital." in shape(events)  # the model's text, whole
