"""One request through memory, guardrail, self-refine, the tool loop and the judge, against the
telemetry spec: the exact tree, kinds, attributes at span start, events and their parents, errors,
metrics, and no content or secret unless opted in (and never the API key)."""

from __future__ import annotations

import json
import threading
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import anyio
import pytest
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import SpanKind, StatusCode

import jevrefine as jr
from jevrefine import telemetry
from jevrefine.jev import JudgeAuthenticationError, JudgeClient, Noul, RetryPolicy
from jevrefine.judge import Judge, ModelJudgeClient
from jevrefine.judge.criteria import noul
from jevrefine.messages import (
    AssistantMessage,
    ChatResponse,
    ChatResponseMetadata,
    Generation,
    Prompt,
    ToolCall,
    ToolResponseMessage,
    Usage,
)
from jevrefine.streaming import Completed
from jevrefine.telemetry import ATTEMPT_BUCKETS, DURATION_BUCKETS, TOKEN_BUCKETS, CaptureMode
from jevrefine.testing import FakeJevServer, FunctionModel
from otel_support import Otel

SECRET = "sk-conformance-SECRET-0123456789"
QUESTION = "How much is 3 euros in Paris money?"
SYNC_TOOL_INNER = "convert.inner"


class Boom(Exception):
    """The model's failure in the error tests."""


@dataclass
class Service:
    """The fake Jev answers: screenings are harmless; an answer passes when it says v2."""

    judged: list[str] = field(default_factory=list)
    answer_judge: bool = True

    def __call__(self, state: Any, questions: Mapping[str, Any]) -> dict[str, Any]:
        if isinstance(state, dict) and set(state) == {"text"}:
            answers: dict[str, Any] = {q: 0.01 for q, w in questions.items() if w["type"] == "noul"}
            answers["severity"] = 0.0
            return answers
        self.judged.append(state["assistant_answer"])
        if not self.answer_judge:
            raise RuntimeError("the judge is down")  # the fake answers 500
        return {"complete": 0.95 if "v2" in state["assistant_answer"] else 0.1}


@dataclass
class Scenario:
    """The model script: each attempt calls both tools, then answers (v2 once told off)."""

    fail_model: bool = False
    fail_tool: bool = False
    tool_threads: list[str] = field(default_factory=list)
    calls: int = 0

    def model(self, prompt: Prompt) -> ChatResponse:
        self.calls += 1
        if self.fail_model:
            raise Boom("the model is down")
        last = prompt.messages[-1]
        if isinstance(last, ToolResponseMessage):
            user = prompt.last_user_message()
            told_off = user is not None and "broke these rules" in user.text
            text = "v2: 3 euros are 3 euros" if told_off else "v1: it depends"
            return ChatResponse(
                (Generation(AssistantMessage(text), {"finish_reason": "stop"}),),
                ChatResponseMetadata(
                    id=f"resp-{self.calls}",
                    model="function-2026",
                    usage=Usage(12, 6),
                    finish_reasons=("stop",),
                ),
            )
        calls = (
            ToolCall(f"call-a{self.calls}", "lookup", '{"city": "Paris"}'),
            ToolCall(f"call-b{self.calls}", "convert", '{"amount": 3}'),
        )
        return ChatResponse(
            (Generation(AssistantMessage("", calls), {"finish_reason": "tool_calls"}),),
            ChatResponseMetadata(model="function-2026", usage=Usage(10, 4)),
        )

    def tools(self, otel: Otel) -> list[Any]:
        inner_tracer = otel.tracer_provider.get_tracer("app")

        @jr.tool
        async def lookup(city: str) -> str:
            """The currency of a city."""
            if self.fail_tool:
                raise RuntimeError("lookup service down")
            return f"{city}: EUR"

        @jr.tool
        def convert(amount: float) -> str:
            """Convert an amount to euros (sync: runs in a worker thread)."""
            self.tool_threads.append(threading.current_thread().name)
            # The app's own span, opened in the worker thread: must land under execute_tool.
            with inner_tracer.start_as_current_span(SYNC_TOOL_INNER):
                return f"{amount} EUR"

        return [lookup, convert]


async def _no_sleep(seconds: float) -> None:
    return None


@pytest.fixture
def service() -> Service:
    return Service()


@pytest.fixture
async def server(service: Service) -> AsyncIterator[FakeJevServer]:
    async with FakeJevServer(service) as fake:
        yield fake


async def run_request(
    otel: Otel,
    server: FakeJevServer,
    scenario: Scenario,
    *,
    capture: bool | CaptureMode | None = None,
    stream_mode: str | None = None,
) -> jr.ChatClientResponse:
    """The request through `call()`, or with `stream_mode` through `stream_events()`."""
    async with JudgeClient(
        SECRET,
        base_url=server.base_url,
        retry=RetryPolicy(max_retries=0, sleep=_no_sleep),
        capture_content=capture,
        **otel.providers,
    ) as jev:
        judge = Judge(
            jev,
            [noul("complete", Noul("Is the answer complete?", when_false="Incomplete"), 0.5)],
        )
        client = jr.ChatClient(
            FunctionModel(scenario.model),
            tools=scenario.tools(otel),
            advisors=[
                jr.MessageChatMemoryAdvisor(jr.InMemoryChatMemory()),
                jr.GuardrailAdvisor(jev, order=jr.GuardrailAdvisor.PER_TURN_ORDER),
                jr.SelfRefineAdvisor(
                    judge,
                    max_repeat_attempts=2,
                    order=jr.SelfRefineAdvisor.BEFORE_TOOLS_ORDER,
                    stream_mode=stream_mode,
                ),
            ],
            capture_content=capture,
            **otel.providers,
        )
        if stream_mode is None:
            return await client.prompt(QUESTION).call()
        events = [event async for event in client.prompt(QUESTION).stream_events()]
        last = events[-1]
        assert isinstance(last, Completed)
        return last.response


def tree(spans: list[ReadableSpan]) -> list[Any]:
    """The spans as nested `(name, kind, [children])`, children in start order."""
    by_parent: dict[int | None, list[ReadableSpan]] = {}
    ids = {s.context.span_id for s in spans}
    for span in spans:
        parent = span.parent.span_id if span.parent is not None else None
        assert parent is None or parent in ids, f"{span.name} has a parent outside the trace"
        by_parent.setdefault(parent, []).append(span)

    def build(parent: int | None) -> list[Any]:
        children = sorted(by_parent.get(parent, []), key=lambda s: s.start_time or 0)
        return [(s.name, s.kind.name, build(s.context.span_id)) for s in children]

    return build(None)


def attempt_shape() -> tuple[str, str, list[Any]]:
    return (
        "self_refine.attempt",
        "INTERNAL",
        [
            ("chat function", "CLIENT", []),
            ("execute_tool lookup", "INTERNAL", []),
            ("execute_tool convert", "INTERNAL", [(SYNC_TOOL_INNER, "INTERNAL", [])]),
            ("chat function", "CLIENT", []),
            ("system_one jev-latest", "CLIENT", []),
        ],
    )


EXPECTED_TREE = [
    (
        "invoke_workflow jevrefine.chat_client",
        "INTERNAL",
        [
            (
                "apply_guardrail jev_guardrail.input",
                "INTERNAL",
                [("system_one jev-latest", "CLIENT", [])],
            ),
            ("invoke_workflow self_refine", "INTERNAL", [attempt_shape(), attempt_shape()]),
            (
                "apply_guardrail jev_guardrail.output",
                "INTERNAL",
                [("system_one jev-latest", "CLIENT", [])],
            ),
        ],
    )
]


def by_name(spans: list[ReadableSpan], name: str) -> list[ReadableSpan]:
    return [s for s in spans if s.name == name]


def everything(otel: Otel) -> str:
    """Every attribute, event, status text, log body and metric attribute, as one text."""
    parts: list[str] = []
    for span in otel.spans():
        parts += [span.name, repr(dict(span.attributes or {})), str(span.status.description)]
        for event in span.events:
            parts += [event.name, repr(dict(event.attributes or {}))]
    for log in otel.logs():
        record = log.log_record
        parts += [repr(record.body), repr(dict(record.attributes or {})), str(record.event_name)]
    for metric in otel.metrics().values():
        parts += [repr(dict(p.attributes or {})) for p in metric.data.data_points]  # type: ignore[union-attr]
    return "\n".join(parts)


# -- the tree --------------------------------------------------------------------------------


async def test_one_request_is_one_tree_of_the_spec_shape(rec: Otel, server: FakeJevServer) -> None:
    scenario = Scenario()
    response = await run_request(rec, server, scenario)
    assert response.content.startswith("v2")
    spans = rec.spans()
    assert len({s.context.trace_id for s in spans}) == 1
    assert tree(spans) == EXPECTED_TREE
    # The sync tool really ran in a worker thread, and its span still found its parent there.
    assert scenario.tool_threads
    assert all(name != threading.main_thread().name for name in scenario.tool_threads)


@pytest.mark.parametrize("mode", ["buffered", "live"])
async def test_a_streamed_refinement_records_the_same_tree_and_events_as_a_call(
    rec: Otel, server: FakeJevServer, mode: str
) -> None:
    """Promise: streaming through guardrail, self-refine and the tool loop records the spans of
    call(), nested alike, the same evaluation events on the attempt spans, and each attempt's
    time to its first chunk."""
    response = await run_request(rec, server, Scenario(), stream_mode=mode)
    assert response.content.startswith("v2")
    spans = rec.spans()
    assert len({s.context.trace_id for s in spans}) == 1
    streamed_tree = tree(spans)
    # A stream's chat spans are the same spans: only the request.stream attribute differs.
    assert streamed_tree == EXPECTED_TREE
    attempts = by_name(spans, "self_refine.attempt")
    assert len(attempts) == 2
    for attempt, label in zip(attempts, ("fail", "pass"), strict=True):
        first_chunk = dict(attempt.attributes or {})["gen_ai.response.time_to_first_chunk"]
        assert isinstance(first_chunk, float)
        assert first_chunk >= 0
        (event,) = [e for e in attempt.events if e.name == "gen_ai.evaluation.result"]
        assert dict(event.attributes or {})["gen_ai.evaluation.score.label"] == label
    for chat in by_name(spans, "chat function"):
        assert dict(chat.attributes or {})["gen_ai.request.stream"] is True
    (loop,) = by_name(spans, "invoke_workflow self_refine")
    assert dict(loop.attributes or {})["jevrefine.refine.outcome"] == "passed"
    logs = [r for r in rec.logs() if r.log_record.event_name == "gen_ai.evaluation.result"]
    assert [r.log_record.span_id for r in logs] == [a.context.span_id for a in attempts]


async def test_required_attributes_are_present_at_span_start(
    rec: Otel, server: FakeJevServer
) -> None:
    await run_request(rec, server, Scenario())
    seen = {s.name: s for s in rec.sampler.seen}
    assert len(rec.sampler.seen) == len(rec.spans())
    for sampled in rec.sampler.seen:
        attrs = sampled.attributes
        if sampled.name.startswith(("chat ", "system_one ")):
            operation, model = sampled.name.split(" ", 1)
            assert sampled.kind is SpanKind.CLIENT
            assert attrs["gen_ai.operation.name"] == operation
            assert attrs["gen_ai.request.model"] == model
            assert attrs["gen_ai.provider.name"] in ("function", "typesafe")
            if attrs["gen_ai.provider.name"] == "typesafe":
                assert attrs["server.address"] == "127.0.0.1"
                assert attrs["server.port"] == server.port
        elif sampled.name.startswith("execute_tool "):
            assert attrs["gen_ai.operation.name"] == "execute_tool"
            assert attrs["gen_ai.tool.name"] == sampled.name.removeprefix("execute_tool ")
            assert attrs["gen_ai.tool.type"] == "function"
            assert str(attrs["gen_ai.tool.call.id"]).startswith("call-")
            assert attrs["gen_ai.tool.description"]
        elif sampled.name.startswith("apply_guardrail "):
            assert attrs["gen_ai.operation.name"] == "apply_guardrail"
            component = sampled.name.removeprefix("apply_guardrail ")
            assert attrs["gen_ai.guardrail.component.name"] == component
        elif sampled.name.startswith("invoke_workflow "):
            assert attrs["gen_ai.operation.name"] == "invoke_workflow"
            assert attrs["gen_ai.workflow.name"] == sampled.name.removeprefix("invoke_workflow ")
    assert (
        seen["invoke_workflow self_refine"].attributes["jevrefine.refine.max_repeat_attempts"] == 2
    )
    # Finished chat spans carry the response side.
    for span in rec.spans():
        if span.name == "chat function":
            attrs = dict(span.attributes or {})
            assert attrs["gen_ai.response.model"] == "function-2026"
            assert attrs["gen_ai.usage.input_tokens"] in (10, 12)
            assert attrs["gen_ai.response.finish_reasons"] in (("stop",), ("tool_calls",))
        if span.name == "system_one jev-latest":
            attrs = dict(span.attributes or {})
            assert attrs["gen_ai.response.id"]
            # A classification reports no finish reason (none is sent; none is made up).
            assert "gen_ai.response.finish_reasons" not in attrs
    (loop,) = by_name(rec.spans(), "invoke_workflow self_refine")
    assert dict(loop.attributes or {})["jevrefine.refine.attempts"] == 2
    assert dict(loop.attributes or {})["jevrefine.refine.outcome"] == "passed"


# -- events ----------------------------------------------------------------------------------


async def test_evaluation_events_on_the_attempt_span_and_as_parented_log_events(
    rec: Otel, server: FakeJevServer
) -> None:
    await run_request(rec, server, Scenario())
    attempts = by_name(rec.spans(), "self_refine.attempt")
    logs = [
        r.log_record for r in rec.logs() if r.log_record.event_name == "gen_ai.evaluation.result"
    ]
    assert len(logs) == 2
    for attempt, label, score in zip(attempts, ("fail", "pass"), (0.1, 0.95), strict=True):
        (event,) = [e for e in attempt.events if e.name == "gen_ai.evaluation.result"]
        attrs = dict(event.attributes or {})
        assert attrs["gen_ai.evaluation.name"] == "complete"
        assert attrs["gen_ai.evaluation.score.label"] == label
        assert attrs["gen_ai.evaluation.score.value"] == pytest.approx(score)
        assert str(attrs["gen_ai.response.id"]).startswith("resp-")
        if label == "fail":
            assert attrs["gen_ai.evaluation.explanation"]
        # The log event is parented to the `chat` span of the answer it judges (the attempt's
        # last model call), as the conventions ask; the span event stays on the attempt.
        answer_span = [
            s
            for s in by_name(rec.spans(), "chat function")
            if s.parent is not None and s.parent.span_id == attempt.context.span_id
        ][-1]
        (log,) = [r for r in logs if r.span_id == answer_span.context.span_id]
        assert log.trace_id == attempt.context.trace_id
        assert dict(log.attributes or {}) == attrs


async def test_guardrail_events_on_their_span_and_as_parented_log_events(
    rec: Otel, server: FakeJevServer
) -> None:
    await run_request(rec, server, Scenario())
    logs = [
        r.log_record for r in rec.logs() if r.log_record.event_name == "gen_ai.guardrail.result"
    ]
    for direction in ("input", "output"):
        (span,) = by_name(rec.spans(), f"apply_guardrail jev_guardrail.{direction}")
        events = [e for e in span.events if e.name == "gen_ai.guardrail.result"]
        assert events
        for event in events:
            attrs = dict(event.attributes or {})
            assert attrs["gen_ai.guardrail.component.name"] == f"jev_guardrail.{direction}"
            assert attrs["gen_ai.guardrail.source"] == direction
            assert attrs["gen_ai.guardrail.result.type"] in ("hazard", "outcome")
        assert dict(events[-1].attributes or {})["gen_ai.guardrail.result.value"] == "PASS"
        mine = [r for r in logs if r.span_id == span.context.span_id]
        assert [dict(r.attributes or {}) for r in mine] == [
            dict(e.attributes or {}) for e in events
        ]


# -- errors ----------------------------------------------------------------------------------


def assert_failed(span: ReadableSpan, error_type: str) -> None:
    assert span.status.status_code is StatusCode.ERROR, span.name
    assert dict(span.attributes or {})["error.type"] == error_type, span.name


async def test_a_model_failure_marks_every_span_up_to_the_root(
    rec: Otel, server: FakeJevServer
) -> None:
    with pytest.raises(Boom):
        await run_request(rec, server, Scenario(fail_model=True))
    spans = rec.spans()
    for name in (
        "chat function",
        "self_refine.attempt",
        "invoke_workflow self_refine",
        "invoke_workflow jevrefine.chat_client",
    ):
        (span,) = by_name(spans, name)
        assert_failed(span, "Boom")
    (guard,) = by_name(spans, "apply_guardrail jev_guardrail.input")
    assert guard.status.status_code is StatusCode.UNSET
    points = rec.metrics()["gen_ai.client.operation.duration"].data.data_points
    failed = [p for p in points if dict(p.attributes or {}).get("error.type") == "Boom"]
    assert len(failed) == 1
    assert dict(failed[0].attributes or {})["gen_ai.provider.name"] == "function"
    assert "jevrefine.refine.outcome" not in rec.metrics()


async def test_a_guardrail_failure_marks_the_screening_and_its_jev_call(
    rec: Otel, server: FakeJevServer
) -> None:
    server.fail(401)
    with pytest.raises(JudgeAuthenticationError):
        await run_request(rec, server, Scenario())
    spans = rec.spans()
    assert tree(spans) == [
        (
            "invoke_workflow jevrefine.chat_client",
            "INTERNAL",
            [
                (
                    "apply_guardrail jev_guardrail.input",
                    "INTERNAL",
                    [("system_one jev-latest", "CLIENT", [])],
                )
            ],
        )
    ]
    for span in spans:
        assert_failed(span, "401")  # the status code tells a bad key from an outage
    (chat,) = by_name(spans, "system_one jev-latest")
    assert dict(chat.attributes or {})["http.response.status_code"] == 401


async def test_a_tool_failure_marks_its_span_and_metric_and_the_request_goes_on(
    rec: Otel, server: FakeJevServer
) -> None:
    response = await run_request(rec, server, Scenario(fail_tool=True))
    assert response.content
    for span in by_name(rec.spans(), "execute_tool lookup"):
        assert_failed(span, "RuntimeError")
    for span in by_name(rec.spans(), "execute_tool convert"):
        assert span.status.status_code is StatusCode.UNSET
    points = rec.metrics()["gen_ai.execute_tool.duration"].data.data_points
    errors = {
        dict(p.attributes or {})["gen_ai.tool.name"]: dict(p.attributes or {}).get("error.type")
        for p in points
    }
    assert errors == {"lookup": "RuntimeError", "convert": None}


# -- metrics ---------------------------------------------------------------------------------


async def test_metrics_names_units_buckets_and_attributes(rec: Otel, server: FakeJevServer) -> None:
    await run_request(rec, server, Scenario())
    metrics = rec.metrics()
    duration = metrics["gen_ai.client.operation.duration"]
    assert duration.unit == "s"
    by_provider: dict[str, int] = {}
    for point in duration.data.data_points:
        attrs = dict(point.attributes or {})
        assert tuple(point.explicit_bounds) == DURATION_BUCKETS  # type: ignore[attr-defined]
        assert attrs["gen_ai.operation.name"] == (
            "system_one" if attrs["gen_ai.provider.name"] == "typesafe" else "chat"
        )
        assert "gen_ai.request.model" in attrs
        by_provider[str(attrs["gen_ai.provider.name"])] = (
            by_provider.get(str(attrs["gen_ai.provider.name"]), 0) + point.count  # type: ignore[attr-defined]
        )
    # 2 attempts x 2 model rounds; 2 screenings + 2 judgings on Jev.
    assert by_provider == {"function": 4, "typesafe": 4}
    tokens = metrics["gen_ai.client.token.usage"]
    assert tokens.unit == "{token}"
    seen = set()
    for point in tokens.data.data_points:
        attrs = dict(point.attributes or {})
        assert tuple(point.explicit_bounds) == TOKEN_BUCKETS  # type: ignore[attr-defined]
        seen.add((attrs["gen_ai.provider.name"], attrs["gen_ai.token.type"]))
    assert seen == {(p, t) for p in ("function", "typesafe") for t in ("input", "output")}
    function_input = [
        p
        for p in tokens.data.data_points
        if dict(p.attributes or {})["gen_ai.token.type"] == "input"
        and dict(p.attributes or {})["gen_ai.provider.name"] == "function"
    ]
    assert sum(p.sum for p in function_input) == 2 * (10 + 12)  # type: ignore[attr-defined,misc]
    tools = metrics["gen_ai.execute_tool.duration"]
    assert tools.unit == "s"
    counts = {}
    for point in tools.data.data_points:
        attrs = dict(point.attributes or {})
        assert tuple(point.explicit_bounds) == DURATION_BUCKETS  # type: ignore[attr-defined]
        assert attrs["gen_ai.operation.name"] == "execute_tool"
        counts[attrs["gen_ai.tool.name"]] = point.count  # type: ignore[attr-defined]
    assert counts == {"lookup": 2, "convert": 2}
    outcome = metrics["jevrefine.refine.outcome"]
    assert outcome.unit == "{refinement}"
    assert [(dict(p.attributes or {}), p.value) for p in outcome.data.data_points] == [  # type: ignore[attr-defined]
        ({"jevrefine.refine.outcome": "passed"}, 1)
    ]
    attempts = metrics["jevrefine.refine.attempts"]
    assert attempts.unit == "{attempt}"
    (point,) = attempts.data.data_points
    assert tuple(point.explicit_bounds) == ATTEMPT_BUCKETS  # type: ignore[attr-defined]
    assert (point.count, point.sum) == (1, 2)  # type: ignore[attr-defined]


# -- content and secrets ---------------------------------------------------------------------


async def test_no_content_and_no_secret_by_default(rec: Otel, server: FakeJevServer) -> None:
    await run_request(rec, server, Scenario())
    dump = everything(rec)
    assert SECRET not in dump
    assert "Bearer" not in dump
    for content in (QUESTION, "v2: 3 euros", "Paris: EUR", '"amount"'):
        assert content not in dump, content
    assert not any(r.log_record.event_name.endswith("operation.details") for r in rec.logs())  # type: ignore[union-attr]


@pytest.mark.parametrize(
    "mode", [CaptureMode.SPAN_ONLY, CaptureMode.EVENT_ONLY, CaptureMode.SPAN_AND_EVENT]
)
async def test_content_on_opt_in_and_the_key_never(
    rec: Otel, server: FakeJevServer, mode: CaptureMode, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", mode.value)
    await run_request(rec, server, Scenario())
    dump = everything(rec)
    assert SECRET not in dump
    assert "Bearer" not in dump
    assert QUESTION in dump  # the opt-in took effect, so the scan above could have failed
    spans = rec.spans()
    chats = by_name(spans, "chat function")
    details = [
        r.log_record
        for r in rec.logs()
        if r.log_record.event_name == "gen_ai.client.inference.operation.details"
    ]
    if mode.on_spans:
        attrs = dict(chats[1].attributes or {})  # attempt 1, after its tool round
        messages = json.loads(str(attrs["gen_ai.input.messages"]))
        assert messages[0] == {"role": "user", "parts": [{"type": "text", "content": QUESTION}]}
        assert messages[1]["parts"][0]["type"] == "tool_call"
        assert messages[2]["parts"][0]["type"] == "tool_call_response"
        output = json.loads(str(attrs["gen_ai.output.messages"]))
        assert output[0]["role"] == "assistant"
        assert output[0]["finish_reason"] == "stop"
        tool = dict(by_name(spans, "execute_tool convert")[0].attributes or {})
        assert json.loads(str(tool["gen_ai.tool.call.arguments"])) == {"amount": 3}
        assert tool["gen_ai.tool.call.result"] == "3.0 EUR"
        jev = dict(by_name(spans, "system_one jev-latest")[0].attributes or {})
        assert "gen_ai.input.messages" in jev
    else:
        for span in spans:
            assert "gen_ai.input.messages" not in dict(span.attributes or {})
            assert "gen_ai.tool.call.arguments" not in dict(span.attributes or {})
    if mode.on_events:
        # One per model call and per Jev call, parented to its span, content structured.
        chat_ids = {s.context.span_id for s in spans if s.name.startswith(("chat ", "system_one "))}
        assert {r.span_id for r in details} == chat_ids
        model_details = [
            r for r in details if dict(r.attributes or {})["gen_ai.provider.name"] == "function"
        ]
        first = dict(model_details[0].attributes or {})["gen_ai.input.messages"]
        assert first[0]["parts"][0]["content"] == QUESTION  # type: ignore[index]
    else:
        assert details == []


# -- parents across tasks, clients and configure() -------------------------------------------


async def test_concurrent_requests_are_separate_trees(rec: Otel) -> None:
    client = jr.ChatClient(FunctionModel(lambda p: "ok"), **rec.providers)

    async with anyio.create_task_group() as group:
        for index in range(5):
            group.start_soon(client.prompt(f"q{index}").call)
    spans = rec.spans()
    roots = [s for s in spans if s.parent is None]
    assert len(roots) == 5
    assert len({s.context.trace_id for s in roots}) == 5
    for chat in by_name(spans, "chat function"):
        (root,) = [r for r in roots if r.context.trace_id == chat.context.trace_id]
        assert chat.parent is not None
        assert chat.parent.span_id == root.context.span_id


async def test_model_judge_calls_nest_under_the_attempt_across_its_task_group(rec: Otel) -> None:
    judge_model = FunctionModel(lambda p: '{"answer": "yes"}', model_name="judge-model")
    judge = Judge(
        ModelJudgeClient(judge_model, logprobs=False, **rec.providers),
        [noul("a", Noul("A?"), 0.5), noul("b", Noul("B?"), 0.5)],
    )
    client = jr.ChatClient(
        FunctionModel(lambda p: "answer"), advisors=[jr.SelfRefineAdvisor(judge)], **rec.providers
    )
    await client.prompt("q").call()
    assert tree(rec.spans()) == [
        (
            "invoke_workflow jevrefine.chat_client",
            "INTERNAL",
            [
                (
                    "invoke_workflow self_refine",
                    "INTERNAL",
                    [
                        (
                            "self_refine.attempt",
                            "INTERNAL",
                            [
                                ("chat function", "CLIENT", []),
                                ("chat judge-model", "CLIENT", []),
                                ("chat judge-model", "CLIENT", []),
                            ],
                        )
                    ],
                )
            ],
        )
    ]
    points = rec.metrics()["gen_ai.client.operation.duration"].data.data_points
    assert {dict(p.attributes or {})["gen_ai.request.model"] for p in points} == {
        "function",
        "judge-model",
    }


async def test_configure_sets_the_defaults_of_every_client(
    rec: Otel, server: FakeJevServer
) -> None:
    telemetry.configure(**rec.providers, capture_content=CaptureMode.SPAN_AND_EVENT)
    async with JudgeClient(SECRET, base_url=server.base_url) as jev:
        await jev.system_one({"text": "x"}, {"q": Noul("q?")})
    await ModelJudgeClient(FunctionModel(lambda p: '{"answer": "no"}'), logprobs=False).system_one(
        "x", {"q": Noul("q?")}
    )
    await jr.ChatClient(FunctionModel(lambda p: "hello")).prompt("hi").call()
    names = [s.name for s in rec.spans()]
    assert names == [
        "system_one jev-latest",
        "chat function",
        "invoke_workflow jevrefine.chat_client",
        "chat function",
    ]
    assert all(
        "gen_ai.input.messages" in dict(s.attributes or {})
        for s in rec.spans()
        if s.name.startswith("chat")
    )
    assert len(rec.logs()) == 3  # one content event per model / Jev call
    # An explicit constructor argument wins over the defaults.
    rec.span_exporter.clear()
    other = Otel()
    await (
        jr.ChatClient(FunctionModel(lambda p: "x"), tracer_provider=other.tracer_provider)
        .prompt("hi")
        .call()
    )
    assert rec.spans() == []
    assert len(other.spans()) == 2
    # configure() with no arguments goes back to the global providers and the environment.
    telemetry.configure()
    await jr.ChatClient(FunctionModel(lambda p: "x")).prompt("hi").call()
    assert rec.spans() == []


async def test_trace_advisors_puts_an_advisor_span_per_advisor(rec: Otel) -> None:
    client = jr.ChatClient(
        FunctionModel(lambda p: "x"),
        advisors=[jr.MessageChatMemoryAdvisor(jr.InMemoryChatMemory())],
        trace_advisors=True,
        **rec.providers,
    )
    await client.prompt("hi").call()
    name = jr.MessageChatMemoryAdvisor.name
    ((_, _, children),) = tree(rec.spans())
    assert children == [(f"advisor {name}", "INTERNAL", [("chat function", "CLIENT", [])])]
    (advisor,) = by_name(rec.spans(), f"advisor {name}")
    assert dict(advisor.attributes or {})["jevrefine.advisor.name"] == name


async def test_a_failed_judging_call_is_an_evaluation_event_with_error_type(
    rec: Otel, server: FakeJevServer, service: Service
) -> None:
    service.answer_judge = False
    response = await run_request(rec, server, Scenario())
    # An outage fails open: the answer is returned unjudged, and the telemetry says why.
    assert response.context[jr.context_keys.REFINE_REPORT].outcome == "unjudged"
    error_type = "500"
    (attempt,) = by_name(rec.spans(), "self_refine.attempt")
    judging = [
        s for s in by_name(rec.spans(), "system_one jev-latest") if s.parent == attempt.context
    ]
    assert len(judging) == 1
    assert_failed(judging[0], error_type)
    (event,) = [e for e in attempt.events if e.name == "gen_ai.evaluation.result"]
    attrs = dict(event.attributes or {})
    assert attrs["gen_ai.evaluation.name"] == "complete"
    assert attrs["error.type"] == error_type
    assert "gen_ai.evaluation.score.value" not in attrs
    logs = [
        r.log_record for r in rec.logs() if r.log_record.event_name == "gen_ai.evaluation.result"
    ]
    assert [r.span_id for r in logs] == [attempt.context.span_id]
