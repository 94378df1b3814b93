"""Issue 20's OpenTelemetry items, each held against the conventions' names as the released
`opentelemetry-semantic-conventions` package spells them (never strings copied here)."""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.semconv._incubating.attributes import gen_ai_attributes as gen_ai
from opentelemetry.semconv._incubating.metrics import gen_ai_metrics
from opentelemetry.semconv.attributes import error_attributes, http_attributes

import jevrefine as jr
from jevrefine import telemetry
from jevrefine.exceptions import ModelHTTPError, UserError
from jevrefine.jev import Noul
from jevrefine.judge import Judge, ModelJudgeClient, noul
from jevrefine.messages import (
    AssistantMessage,
    ChatResponse,
    ChatResponseMetadata,
    Generation,
    Prompt,
    ToolCall,
    Usage,
)
from jevrefine.models import InstrumentedModel, instrument_model
from jevrefine.models.anthropic import AnthropicChatModel
from jevrefine.telemetry import CaptureMode, InstrumentationSettings, Telemetry
from jevrefine.testing import FakeAnthropicServer, FunctionModel
from otel_support import Otel


def chat_spans(otel: Otel) -> list[Any]:
    return [s for s in otel.spans() if s.name.startswith("chat ")]


def points(otel: Otel, name: str) -> list[Any]:
    metric = otel.metrics().get(name)
    return [] if metric is None else list(metric.data.data_points)


@jr.tool
def lookup(city: str) -> str:
    """The currency of a city."""
    return f"{city}: EUR"


def tool_round(prompt: Prompt) -> ChatResponse:
    """Calls `lookup` once, then answers."""
    if prompt.messages[-1].role == "tool":
        return ChatResponse.of_text("EUR")
    call = ToolCall("call-1", "lookup", '{"city": "Paris"}')
    return ChatResponse(
        (Generation(AssistantMessage("", (call,)), {"finish_reason": "tool_calls"}),),
        ChatResponseMetadata(model="fn", usage=Usage(3, 2), finish_reasons=("tool_calls",)),
    )


# -- names come from the released package ------------------------------------------------------


def test_our_names_are_the_released_packages() -> None:
    assert telemetry.GEN_AI_OPERATION_NAME == gen_ai.GEN_AI_OPERATION_NAME
    assert telemetry.GEN_AI_PROVIDER_NAME == gen_ai.GEN_AI_PROVIDER_NAME
    first_chunk = gen_ai.GEN_AI_RESPONSE_TIME_TO_FIRST_CHUNK
    assert first_chunk == telemetry.GEN_AI_RESPONSE_TIME_TO_FIRST_CHUNK
    cache_read = gen_ai.GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS
    assert cache_read == telemetry.GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS
    cache_creation = gen_ai.GEN_AI_USAGE_CACHE_CREATION_INPUT_TOKENS
    assert cache_creation == telemetry.GEN_AI_USAGE_CACHE_CREATION_INPUT_TOKENS
    assert telemetry.GEN_AI_TOOL_DEFINITIONS == gen_ai.GEN_AI_TOOL_DEFINITIONS
    assert telemetry.GEN_AI_TOOL_TYPE == gen_ai.GEN_AI_TOOL_TYPE
    assert telemetry.GEN_AI_TOOL_NAME == gen_ai.GEN_AI_TOOL_NAME
    assert telemetry.GEN_AI_TOOL_DESCRIPTION == gen_ai.GEN_AI_TOOL_DESCRIPTION
    assert telemetry.GEN_AI_TOOL_CALL_ID == gen_ai.GEN_AI_TOOL_CALL_ID
    assert telemetry.GEN_AI_TOOL_CALL_ARGUMENTS == gen_ai.GEN_AI_TOOL_CALL_ARGUMENTS
    assert telemetry.GEN_AI_TOOL_CALL_RESULT == gen_ai.GEN_AI_TOOL_CALL_RESULT
    assert telemetry.HTTP_RESPONSE_STATUS_CODE == http_attributes.HTTP_RESPONSE_STATUS_CODE
    assert telemetry.ERROR_TYPE == error_attributes.ERROR_TYPE
    released = telemetry.RELEASED_NAMES
    assert released.inference_duration == gen_ai_metrics.GEN_AI_CLIENT_OPERATION_DURATION
    assert released.token_usage == gen_ai_metrics.GEN_AI_CLIENT_TOKEN_USAGE
    ttfc = gen_ai_metrics.GEN_AI_CLIENT_OPERATION_TIME_TO_FIRST_CHUNK
    assert released.time_to_first_chunk == ttfc
    tpoc = gen_ai_metrics.GEN_AI_CLIENT_OPERATION_TIME_PER_OUTPUT_CHUNK
    assert released.time_per_output_chunk == tpoc


async def test_the_default_metric_names_are_the_released_ones(
    rec: Otel, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("OTEL_SEMCONV_STABILITY_OPT_IN", raising=False)
    await jr.ChatClient(FunctionModel(lambda p: "hi"), **rec.providers).prompt("q").call()
    assert points(rec, gen_ai_metrics.GEN_AI_CLIENT_OPERATION_DURATION)
    assert points(rec, gen_ai_metrics.GEN_AI_CLIENT_TOKEN_USAGE)


async def test_the_stability_opt_in_switches_to_the_newest_names(
    rec: Otel, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OTEL_SEMCONV_STABILITY_OPT_IN", "http, gen_ai_latest_experimental")
    await jr.ChatClient(FunctionModel(lambda p: "hi"), **rec.providers).prompt("q").call()
    names = set(rec.metrics())
    assert gen_ai_metrics.GEN_AI_CLIENT_OPERATION_DURATION not in names
    assert gen_ai_metrics.GEN_AI_CLIENT_TOKEN_USAGE not in names
    assert {
        "gen_ai.client.inference.duration",
        "gen_ai.client.inference.usage.input_tokens",
        "gen_ai.client.inference.usage.output_tokens",
    } <= names
    (point,) = points(rec, "gen_ai.client.inference.usage.input_tokens")
    assert gen_ai.GEN_AI_TOKEN_TYPE not in dict(point.attributes or {})


# -- event_only: content on log events only ----------------------------------------------------


async def test_event_only_puts_no_content_on_span_events(rec: Otel) -> None:
    client = jr.ChatClient(
        FunctionModel(lambda p: "the answer"),
        capture_content=CaptureMode.EVENT_ONLY,
        **rec.providers,
    )
    await client.prompt("the question").call()
    for span in rec.spans():
        assert gen_ai.GEN_AI_INPUT_MESSAGES not in dict(span.attributes or {})
        for event in span.events:
            attrs = dict(event.attributes or {})
            assert gen_ai.GEN_AI_INPUT_MESSAGES not in attrs, event.name
            assert gen_ai.GEN_AI_OUTPUT_MESSAGES not in attrs, event.name
    (log,) = [r.log_record for r in rec.logs()]
    content = dict(log.attributes or {})[gen_ai.GEN_AI_INPUT_MESSAGES]
    assert content[0]["parts"][0]["content"] == "the question"  # type: ignore[index]


# -- error.type tells failures apart ----------------------------------------------------------


@pytest.mark.parametrize("status", [401, 429, 500])
async def test_http_failures_are_told_apart_by_status(rec: Otel, status: int) -> None:
    def fail(prompt: Prompt) -> str:
        raise ModelHTTPError(status, {"error": "no"}, model_name="fn")

    with pytest.raises(ModelHTTPError):
        await jr.ChatClient(FunctionModel(fail), **rec.providers).prompt("q").call()
    (chat,) = chat_spans(rec)
    attrs = dict(chat.attributes or {})
    assert attrs[error_attributes.ERROR_TYPE] == str(status)
    assert attrs[http_attributes.HTTP_RESPONSE_STATUS_CODE] == status
    (point,) = points(rec, gen_ai_metrics.GEN_AI_CLIENT_OPERATION_DURATION)
    assert dict(point.attributes or {})[error_attributes.ERROR_TYPE] == str(status)


async def test_other_failures_are_named_by_their_class(rec: Otel) -> None:
    def fail(prompt: Prompt) -> str:
        raise TimeoutError("slow")

    with pytest.raises(TimeoutError):
        await jr.ChatClient(FunctionModel(fail), **rec.providers).prompt("q").call()
    (chat,) = chat_spans(rec)
    assert dict(chat.attributes or {})[error_attributes.ERROR_TYPE] == "TimeoutError"
    assert http_attributes.HTTP_RESPONSE_STATUS_CODE not in dict(chat.attributes or {})


# -- streaming ------------------------------------------------------------------------------


async def test_a_stream_records_time_to_first_chunk_and_the_chunk_metrics(rec: Otel) -> None:
    client = jr.ChatClient(FunctionModel(lambda p: "one two three four"), **rec.providers)
    chunks = [c async for c in client.prompt("q").stream()]
    assert len(chunks) > 1
    (chat,) = chat_spans(rec)
    first = dict(chat.attributes or {})[gen_ai.GEN_AI_RESPONSE_TIME_TO_FIRST_CHUNK]
    assert isinstance(first, float)
    assert first >= 0
    (ttfc,) = points(rec, gen_ai_metrics.GEN_AI_CLIENT_OPERATION_TIME_TO_FIRST_CHUNK)
    assert ttfc.count == 1
    (tpoc,) = points(rec, gen_ai_metrics.GEN_AI_CLIENT_OPERATION_TIME_PER_OUTPUT_CHUNK)
    assert tpoc.count == 1
    assert dict(tpoc.attributes or {})[gen_ai.GEN_AI_OPERATION_NAME] == "chat"


async def test_a_plain_call_has_no_chunk_timing(rec: Otel) -> None:
    await jr.ChatClient(FunctionModel(lambda p: "x"), **rec.providers).prompt("q").call()
    (chat,) = chat_spans(rec)
    assert gen_ai.GEN_AI_RESPONSE_TIME_TO_FIRST_CHUNK not in dict(chat.attributes or {})
    assert not points(rec, gen_ai_metrics.GEN_AI_CLIENT_OPERATION_TIME_TO_FIRST_CHUNK)


# -- Anthropic cache tokens -------------------------------------------------------------------


@pytest.fixture
async def anthropic() -> AsyncIterator[FakeAnthropicServer]:
    async with FakeAnthropicServer() as server:
        yield server


@pytest.mark.parametrize("stream", [False, True], ids=["call", "stream"])
async def test_anthropic_cache_tokens_reach_the_span(
    rec: Otel, anthropic: FakeAnthropicServer, stream: bool
) -> None:
    usage = {
        "input_tokens": 5,
        "output_tokens": 2,
        "cache_read_input_tokens": 100,
        "cache_creation_input_tokens": 40,
    }
    anthropic.script({"text": "hi there", "usage": usage})
    async with AnthropicChatModel(
        "claude-test", base_url=anthropic.base_url, api_key="k", max_retries=0
    ) as model:
        spec = jr.ChatClient(model, **rec.providers).prompt("q")
        if stream:
            [c async for c in spec.stream()]
        else:
            await spec.call()
    (chat,) = chat_spans(rec)
    attrs = dict(chat.attributes or {})
    assert attrs[gen_ai.GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS] == 100
    assert attrs[gen_ai.GEN_AI_USAGE_CACHE_CREATION_INPUT_TOKENS] == 40
    assert attrs[gen_ai.GEN_AI_USAGE_INPUT_TOKENS] == 145  # cached tokens counted in input


# -- workflows and tools ------------------------------------------------------------------------


async def test_invoke_workflow_spans_have_a_duration_metric(rec: Otel) -> None:
    judge = Judge(
        ModelJudgeClient(FunctionModel(lambda p: '{"answer": "yes"}'), logprobs=False),
        [noul("ok", Noul("Ok?"), 0.5)],
    )
    client = jr.ChatClient(
        FunctionModel(lambda p: "x"), advisors=[jr.SelfRefineAdvisor(judge)], **rec.providers
    )
    await client.prompt("q").call()
    found = {
        dict(p.attributes or {})[gen_ai.GEN_AI_WORKFLOW_NAME]: p
        for p in points(rec, "gen_ai.workflow.duration")
    }
    assert set(found) == {"jevrefine.chat_client", "self_refine"}
    for point in found.values():
        assert dict(point.attributes or {})[gen_ai.GEN_AI_OPERATION_NAME] == "invoke_workflow"
        assert point.count == 1
        assert tuple(point.explicit_bounds) == telemetry.WORKFLOW_BUCKETS


async def test_tool_duration_metric_carries_the_tool_type(rec: Otel) -> None:
    client = jr.ChatClient(FunctionModel(tool_round), tools=[lookup], **rec.providers)
    await client.prompt("q").call()
    (point,) = points(rec, "gen_ai.execute_tool.duration")
    assert dict(point.attributes or {})[gen_ai.GEN_AI_TOOL_TYPE] == "function"


@pytest.mark.parametrize("capture", [True, False])
async def test_tool_definitions_only_with_content_capture(rec: Otel, capture: bool) -> None:
    client = jr.ChatClient(
        FunctionModel(tool_round), tools=[lookup], capture_content=capture, **rec.providers
    )
    await client.prompt("q").call()
    first = min(chat_spans(rec), key=lambda s: s.start_time or 0)
    attrs = dict(first.attributes or {})
    if not capture:
        assert gen_ai.GEN_AI_TOOL_DEFINITIONS not in attrs
        return
    (definition,) = json.loads(str(attrs[gen_ai.GEN_AI_TOOL_DEFINITIONS]))
    assert definition["type"] == "function"
    assert definition["name"] == "lookup"
    assert definition["parameters"]["properties"]["city"]["type"] == "string"
    # The output message uses the schema's finish reason (`tool_call`), not OpenAI's spelling.
    (output,) = json.loads(str(attrs[gen_ai.GEN_AI_OUTPUT_MESSAGES]))
    assert output["finish_reason"] == "tool_call"


# -- the seam --------------------------------------------------------------------------------


async def test_instrumenting_twice_records_one_span(rec: Otel) -> None:
    tel = Telemetry(tracer_provider=rec.tracer_provider)
    once = instrument_model(FunctionModel(lambda p: "x"), tel)
    assert isinstance(once, InstrumentedModel)
    assert instrument_model(once, Telemetry()) is once
    await jr.ChatClient(once, **rec.providers).prompt("q").call()
    assert len(chat_spans(rec)) == 1


async def test_one_settings_value_serves_every_client(rec: Otel) -> None:
    settings = InstrumentationSettings(**rec.providers)
    judge_client = ModelJudgeClient(
        FunctionModel(lambda p: '{"answer": "yes"}', model_name="judge"),
        logprobs=False,
        instrumentation=settings,
    )
    await judge_client.system_one("x", {"q": Noul("q?")})
    await jr.ChatClient(FunctionModel(lambda p: "x"), instrumentation=settings).prompt("q").call()
    assert sorted(s.name for s in chat_spans(rec)) == ["chat function", "chat judge"]


def test_settings_and_loose_arguments_together_are_refused(rec: Otel) -> None:
    with pytest.raises(UserError, match="either instrumentation= or tracer_provider="):
        jr.ChatClient(
            FunctionModel(lambda p: "x"),
            instrumentation=InstrumentationSettings(),
            tracer_provider=rec.tracer_provider,
        )
    with pytest.raises(UserError, match="not a bool or a CaptureMode"):
        InstrumentationSettings(capture_content="yes")  # type: ignore[arg-type]


# -- the guide's tables match what is emitted ---------------------------------------------------

GUIDE = Path(__file__).resolve().parents[2] / "docs" / "guide" / "telemetry.md"


def _first_column(section: str) -> set[str]:
    names = set()
    for line in section.splitlines():
        found = re.match(r"\| `([a-z_.{} ]+)`", line)
        if found:
            names.add(found.group(1))
    return names


def documented_metrics() -> set[str]:
    text = GUIDE.read_text(encoding="utf-8")
    section = text.split("## Metrics", 1)[1].split("The conventions are moving", 1)[0]
    return _first_column(section)


def documented_spans() -> set[str]:
    text = GUIDE.read_text(encoding="utf-8")
    return _first_column(text.split("## One trace per request", 1)[1].split("## Metrics", 1)[0])


async def test_the_guides_metric_table_is_what_is_emitted(rec: Otel) -> None:
    judge = Judge(
        ModelJudgeClient(FunctionModel(lambda p: '{"answer": "yes"}'), logprobs=False),
        [noul("ok", Noul("Ok?"), 0.5)],
    )
    client = jr.ChatClient(
        FunctionModel(tool_round),
        tools=[lookup],
        advisors=[jr.SelfRefineAdvisor(judge)],
        **rec.providers,
    )
    await client.prompt("q").call()
    [
        c
        async for c in jr.ChatClient(FunctionModel(lambda p: "a b c"), **rec.providers)
        .prompt("q")
        .stream()
    ]
    assert set(rec.metrics()) == documented_metrics()


async def test_the_guides_span_table_names_what_is_emitted(rec: Otel) -> None:
    def shape(name: str) -> str:
        operation = name.partition(" ")[0]
        if operation in ("chat", "system_one"):
            return f"{operation} {{model}}"
        if operation == "execute_tool":
            return "execute_tool {name}"
        if operation == "advisor":
            return "advisor {name}"
        return name

    judge = Judge(
        ModelJudgeClient(FunctionModel(lambda p: '{"answer": "yes"}'), logprobs=False),
        [noul("ok", Noul("Ok?"), 0.5)],
    )
    client = jr.ChatClient(
        FunctionModel(tool_round),
        tools=[lookup],
        advisors=[jr.SelfRefineAdvisor(judge)],
        trace_advisors=True,
        **rec.providers,
    )
    await client.prompt("q").call()
    emitted = {shape(s.name) for s in rec.spans()}
    documented = documented_spans()
    assert emitted <= documented, emitted - documented
