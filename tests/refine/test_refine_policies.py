"""Self-refine: judge-error policies, guardrail refusals, memory, streaming, telemetry."""

from __future__ import annotations

import logging
from typing import Any

import pytest
from opentelemetry.trace import SpanKind, StatusCode

import jevrefine as jr
from jevrefine import (
    LOWEST_PRECEDENCE,
    ChatClient,
    ChatResponse,
    InMemoryChatMemory,
    JudgeErrorPolicy,
    MessageChatMemoryAdvisor,
    ModelHTTPError,
    Prompt,
    RefineReport,
    SelfRefineAdvisor,
    StreamingNotSupportedError,
    UserMessage,
    context_keys,
)
from jevrefine.jev import (
    JudgeAuthenticationError,
    JudgeClient,
    JudgeConnectionError,
    JudgeRateLimitError,
    JudgeServerError,
    JudgeTimeoutError,
    JudgeValidationError,
    Noul,
    RetryPolicy,
)
from jevrefine.judge import Judge, ModelJudgeClient, check, noul
from jevrefine.testing import FakeJevServer, FunctionModel
from support import Telemetry

OK = Noul("Is `assistant_answer` acceptable?", when_false="The answer is not acceptable")


def counting_model(text: str = "an answer") -> FunctionModel:
    return FunctionModel(lambda prompt: text)


def refine(jev: JudgeClient, **options: Any) -> SelfRefineAdvisor:
    return SelfRefineAdvisor(Judge(jev, [noul("ok", OK)]), **options)


# -- when judging fails ------------------------------------------------------------------------


@pytest.mark.parametrize("status", [503, 429])
async def test_fail_open_returns_the_answer_unjudged_on_transient_statuses(
    jev_server: FakeJevServer,
    jev: JudgeClient,
    status: int,
    caplog: pytest.LogCaptureFixture,
) -> None:
    jev_server.fail(status, times=2)  # outlasts the client's one retry
    model = counting_model()
    with caplog.at_level(logging.WARNING, logger="jevrefine.self_refine"):
        response = await ChatClient(model, advisors=[refine(jev)]).prompt("Hi").call()
    assert response.content == "an answer"
    assert len(model.prompts) == 1  # no retry: an outage says nothing about the answer
    assert len(jev_server.requests) == 2
    report: RefineReport = response.context[context_keys.REFINE_REPORT]
    assert report.outcome == "unjudged"
    assert report.attempts[0].verdict is None
    assert f"HTTP {status}" in caplog.text
    assert "sk-refine-SECRET-42" not in caplog.text


async def test_fail_open_on_a_timeout(jev_server: FakeJevServer) -> None:
    jev_server.delay(0.3, times=2)
    retry = RetryPolicy(max_retries=1, initial_backoff=0.0)
    async with JudgeClient("k", base_url=jev_server.base_url, retry=retry, timeout=0.05) as jev:
        model = counting_model()
        response = await ChatClient(model, advisors=[refine(jev)]).prompt("Hi").call()
    assert response.context[context_keys.REFINE_REPORT].outcome == "unjudged"
    assert len(model.prompts) == 1


async def test_fail_open_on_dropped_connections(
    jev_server: FakeJevServer, jev: JudgeClient
) -> None:
    jev_server.drop_connections(times=2)
    response = await ChatClient(counting_model(), advisors=[refine(jev)]).prompt("Hi").call()
    assert response.context[context_keys.REFINE_REPORT].outcome == "unjudged"


@pytest.mark.parametrize(
    ("status", "error"), [(401, JudgeAuthenticationError), (422, JudgeValidationError)]
)
@pytest.mark.parametrize("policy", list(JudgeErrorPolicy))
async def test_client_errors_are_always_raised(
    jev_server: FakeJevServer,
    jev: JudgeClient,
    status: int,
    error: type[Exception],
    policy: JudgeErrorPolicy,
) -> None:
    jev_server.fail(status)
    client = ChatClient(counting_model(), advisors=[refine(jev, judge_error_policy=policy)])
    with pytest.raises(error) as info:
        await client.prompt("Hi").call()
    assert "sk-refine-SECRET-42" not in str(info.value)


@pytest.mark.parametrize(
    ("fault", "error"),
    [
        ("503", JudgeServerError),
        ("429", JudgeRateLimitError),
        ("timeout", JudgeTimeoutError),
        ("drop", JudgeConnectionError),
    ],
)
async def test_fail_closed_raises_every_judging_error(
    jev_server: FakeJevServer, fault: str, error: type[Exception]
) -> None:
    if fault == "timeout":
        jev_server.delay(0.3, times=2)
    elif fault == "drop":
        jev_server.drop_connections(times=2)
    else:
        jev_server.fail(int(fault), times=2)
    retry = RetryPolicy(max_retries=1, initial_backoff=0.0)
    async with JudgeClient("k", base_url=jev_server.base_url, retry=retry, timeout=0.05) as jev:
        advisor = refine(jev, judge_error_policy=JudgeErrorPolicy.FAIL_CLOSED)
        with pytest.raises(error):
            await ChatClient(counting_model(), advisors=[advisor]).prompt("Hi").call()


async def test_a_transient_failure_on_a_retry_returns_that_attempt_without_feedback(
    jev_server: FakeJevServer, jev: JudgeClient
) -> None:
    calls = 0

    def answer(state: Any, questions: dict[str, Any]) -> dict[str, float]:
        nonlocal calls
        calls += 1
        if calls == 1:
            jev_server.fail(503, times=2)  # the next judging call fails, retry included
        return {"ok": 0.1}

    jev_server.answer = answer
    model = FunctionModel(lambda prompt: f"draft {len(model.prompts)}")
    response = await ChatClient(model, advisors=[refine(jev)]).prompt("Hi").call()
    assert response.content == "draft 2"
    report: RefineReport = response.context[context_keys.REFINE_REPORT]
    assert report.outcome == "unjudged"
    assert [a.verdict is None for a in report.attempts] == [False, True]
    # The transport error never becomes feedback: only the verdict's text reached the model.
    last = model.prompts[1].messages[-1]
    assert isinstance(last, UserMessage)
    assert "503" not in last.text
    assert "not acceptable" in last.text


async def test_a_code_check_exception_always_propagates(
    jev_server: FakeJevServer, jev: JudgeClient
) -> None:
    def broken(judge_input: Any) -> bool:
        # Even an error type the policy would forgive is a bug when a check raises it.
        raise JudgeConnectionError("the check itself is broken")

    judge = Judge(jev, [check("c", broken, defect="x"), noul("ok", OK)])
    client = ChatClient(counting_model(), advisors=[SelfRefineAdvisor(judge)])
    with pytest.raises(JudgeConnectionError, match="the check itself is broken"):
        await client.prompt("Hi").call()
    assert jev_server.requests == []


async def test_model_judge_failures_follow_the_same_policy() -> None:
    def failing(status: int) -> FunctionModel:
        def answer(prompt: Prompt) -> str:
            raise ModelHTTPError(status, {"error": {"message": "judge model down"}})

        return FunctionModel(answer)

    judge = Judge(ModelJudgeClient(failing(503)), [noul("ok", OK)])
    response = (
        await ChatClient(counting_model(), advisors=[SelfRefineAdvisor(judge)]).prompt("Hi").call()
    )
    assert response.context[context_keys.REFINE_REPORT].outcome == "unjudged"
    judge = Judge(ModelJudgeClient(failing(401)), [noul("ok", OK)])
    with pytest.raises(ModelHTTPError, match="401"):
        await ChatClient(counting_model(), advisors=[SelfRefineAdvisor(judge)]).prompt("Hi").call()


# -- guardrail refusals (a stub of the guardrail: the context key is the contract) --------------


class RefusingGuardrail:
    """Stands in for GuardrailAdvisor at its default order: replaces every answer by a refusal."""

    name = "guardrail_stub"
    order = LOWEST_PRECEDENCE - 1000

    async def advise_call(
        self, request: jr.ChatClientRequest, chain: jr.CallAdvisorChain
    ) -> jr.ChatClientResponse:
        await chain.next_call(request)
        request.context[context_keys.GUARDRAIL_OUTCOME] = "BLOCK"
        return jr.ChatClientResponse(
            ChatResponse.of_text("I can't help with that."), request.context
        )


async def test_a_guardrail_refusal_is_returned_unjudged(
    jev_server: FakeJevServer, jev: JudgeClient
) -> None:
    model = counting_model()
    client = ChatClient(model, advisors=[refine(jev), RefusingGuardrail()])
    response = await client.prompt("Something unsafe").call()
    assert response.content == "I can't help with that."
    assert jev_server.requests == []
    assert len(model.prompts) == 1
    report: RefineReport = response.context[context_keys.REFINE_REPORT]
    assert report.outcome == "skipped"


async def test_the_seeds_older_behaviour_is_one_argument_away(
    jev_server: FakeJevServer, jev: JudgeClient
) -> None:
    jev_server.answer = lambda state, questions: {"ok": 0.0}  # the refusal is judged and fails

    def skip_tool_calls_only(
        request: jr.ChatClientRequest, response: jr.ChatClientResponse
    ) -> bool:
        return bool(response.context.get(context_keys.TOOL_RETURN_DIRECT))

    advisor = refine(jev, skip_evaluation=skip_tool_calls_only, max_repeat_attempts=2)
    model = counting_model()
    response = await ChatClient(model, advisors=[advisor, RefusingGuardrail()]).prompt("x").call()
    assert response.content == "I can't help with that."
    assert len(model.prompts) == 3  # up to max_repeat_attempts more rounds, as the seed warns
    # The refusal repeats word for word: the default guard keeps its first verdict unasked.
    assert len(jev_server.requests) == 1


# -- memory --------------------------------------------------------------------------------------


async def test_memory_records_only_the_answer_finally_returned(
    jev_server: FakeJevServer, jev: JudgeClient
) -> None:
    jev_server.answer = lambda state, questions: {
        "ok": 0.9 if "good" in state["assistant_answer"] else 0.1
    }
    answers = iter(["bad draft", "good answer", "good second"])
    model = FunctionModel(lambda prompt: next(answers))
    memory = InMemoryChatMemory()
    client = ChatClient(model, advisors=[MessageChatMemoryAdvisor(memory), refine(jev)])
    await client.prompt("First question").call()
    assert await memory.get("default") == [
        UserMessage("First question"),
        jr.AssistantMessage("good answer"),
    ]
    await client.prompt("Second question").call()
    history = model.prompts[-1].messages
    assert history[:2] == (UserMessage("First question"), jr.AssistantMessage("good answer"))
    texts = " ".join(getattr(m, "text", "") for m in history)
    assert "bad draft" not in texts
    assert "rejected" not in texts
    # The judge saw the earlier turn in user_question, from memory.
    assert jev_server.requests[-1].json["state"]["user_question"] == (
        "user: First question\nassistant: good answer\nuser: Second question"
    )


@pytest.mark.parametrize(
    "order", [SelfRefineAdvisor.DEFAULT_ORDER, SelfRefineAdvisor.BEFORE_TOOLS_ORDER]
)
async def test_memory_interplay_holds_at_both_orders(
    jev_server: FakeJevServer, jev: JudgeClient, order: int
) -> None:
    jev_server.answer = lambda state, questions: {
        "ok": 0.9 if state["assistant_answer"] == "v2" else 0.1
    }
    answers = iter(["v1", "v2"])
    memory = InMemoryChatMemory()
    client = ChatClient(
        FunctionModel(lambda prompt: next(answers)),
        advisors=[MessageChatMemoryAdvisor(memory), refine(jev, order=order)],
    )
    await client.prompt("Q").call()
    assert await memory.get("default") == [UserMessage("Q"), jr.AssistantMessage("v2")]


# -- streaming -------------------------------------------------------------------------------------


async def test_streaming_is_refused_before_the_model_is_called(jev: JudgeClient) -> None:
    model = counting_model()
    client = ChatClient(model, advisors=[refine(jev)])
    with pytest.raises(StreamingNotSupportedError, match="self_refine"):
        async for _ in client.prompt("Hi").stream():
            pass
    assert model.prompts == []


async def test_advise_stream_raises_not_implemented(jev: JudgeClient) -> None:
    advisor = refine(jev)
    request = ChatClient(counting_model()).prompt("Hi").request()
    with pytest.raises(NotImplementedError, match="whole answer"):
        async for _ in advisor.advise_stream(request, None):  # type: ignore[arg-type]
            pass


# -- telemetry -------------------------------------------------------------------------------------


async def test_loop_span_attempt_spans_and_evaluation_events(
    jev_server: FakeJevServer, otel: Telemetry
) -> None:
    jev_server.answer = lambda state, questions: {
        "ok": 0.9 if state["assistant_answer"] == "v2" else 0.2
    }
    answers = iter(["v1", "v2"])
    async with JudgeClient(
        "k", base_url=jev_server.base_url, tracer_provider=otel.tracer_provider
    ) as jev:
        judge = Judge(
            jev,
            [check("short", lambda i: len(i.assistant_answer) < 5, defect="long"), noul("ok", OK)],
        )
        client = ChatClient(
            FunctionModel(lambda prompt: next(answers)),
            advisors=[SelfRefineAdvisor(judge)],
            tracer_provider=otel.tracer_provider,
            meter_provider=otel.meter_provider,
        )
        await client.prompt("Hi").call()
    spans = {s.name: s for s in otel.spans()}
    loop = spans["invoke_workflow self_refine"]
    assert loop.kind is SpanKind.INTERNAL
    assert loop.attributes is not None
    assert loop.attributes["jevrefine.refine.attempts"] == 2
    assert loop.attributes["jevrefine.refine.max_repeat_attempts"] == 3
    assert loop.attributes["jevrefine.refine.outcome"] == "passed"
    assert loop.attributes["gen_ai.operation.name"] == "invoke_workflow"
    root = spans["invoke_workflow jevrefine.chat_client"]
    assert loop.parent is not None
    assert loop.parent.span_id == root.context.span_id
    attempts = [s for s in otel.spans() if s.name == "self_refine.attempt"]
    assert len(attempts) == 2
    for number, attempt in enumerate(sorted(attempts, key=lambda s: s.start_time or 0), 1):
        assert attempt.parent is not None
        assert attempt.parent.span_id == loop.context.span_id
        events = [e for e in attempt.events if e.name == "gen_ai.evaluation.result"]
        assert [e.attributes["gen_ai.evaluation.name"] for e in events if e.attributes] == [
            "short",
            "ok",
        ]
        ok = events[1].attributes
        assert ok is not None
        assert ok["gen_ai.evaluation.score.label"] == ("fail" if number == 1 else "pass")
        assert ok["gen_ai.evaluation.score.value"] == (0.2 if number == 1 else 0.9)
        # The model call and the judging call of an attempt are children of its span.
        children = {
            s.name for s in otel.spans() if s.parent and s.parent.span_id == attempt.context.span_id
        }
        assert children == {"chat function", "system_one jev-latest"}
    first_ok = sorted(attempts, key=lambda s: s.start_time or 0)[0].events[1].attributes
    assert first_ok is not None
    assert "The answer is not acceptable" in str(first_ok["gen_ai.evaluation.explanation"])
    points = otel.metrics()["jevrefine.refine.outcome"]
    assert [(p.attributes["jevrefine.refine.outcome"], p.value) for p in points] == [("passed", 1)]  # type: ignore[attr-defined]


async def test_a_failing_loop_marks_its_span(jev_server: FakeJevServer, otel: Telemetry) -> None:
    jev_server.fail(401)
    async with JudgeClient("k", base_url=jev_server.base_url) as jev:
        client = ChatClient(
            counting_model(), advisors=[refine(jev)], tracer_provider=otel.tracer_provider
        )
        with pytest.raises(JudgeAuthenticationError):
            await client.prompt("Hi").call()
    (loop,) = [s for s in otel.spans() if s.name == "invoke_workflow self_refine"]
    assert loop.status.status_code is StatusCode.ERROR
    assert loop.attributes is not None
    assert loop.attributes["error.type"] == "401"
    (attempt,) = [s for s in otel.spans() if s.name == "self_refine.attempt"]
    assert attempt.status.status_code is StatusCode.ERROR
    # The type, never the message (exception texts may quote model output).
    assert attempt.status.description == "JudgeAuthenticationError"
    # The judging call failed: an evaluation result with the error's type and no score.
    assert [dict(e.attributes or {}) for e in attempt.events] == [
        {"gen_ai.evaluation.name": "ok", "error.type": "401"}
    ]
