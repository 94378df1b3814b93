"""Spans and metrics of ChatClient calls, on the real OpenTelemetry SDK with in-memory exporters."""

from __future__ import annotations

import json
from typing import Any

import pytest
from opentelemetry.trace import SpanKind, StatusCode

from jevrefine import ChatClient, ChatOptions, ChatResponse, Prompt
from jevrefine.telemetry import DURATION_BUCKETS, TOKEN_BUCKETS, CaptureMode, capture_mode_from_env
from jevrefine.testing import FunctionModel
from support import Telemetry


def client_for(otel: Telemetry, model: FunctionModel, **kwargs: object) -> ChatClient:
    return ChatClient(
        model,
        tracer_provider=otel.tracer_provider,
        meter_provider=otel.meter_provider,
        **kwargs,  # type: ignore[arg-type]
    )


async def test_one_trace_root_span_and_chat_span(otel: Telemetry) -> None:
    model = FunctionModel(lambda p: "four words in here", model_name="fn-1")
    client = client_for(otel, model, options=ChatOptions(temperature=0.3, max_tokens=20, seed=1))
    await client.prompt("how are you").call()
    chat, root = otel.spans()
    assert root.name == "invoke_workflow jevrefine.chat_client"
    assert root.kind == SpanKind.INTERNAL
    assert root.parent is None
    assert chat.name == "chat fn-1"
    assert chat.kind == SpanKind.CLIENT
    assert chat.parent is not None
    assert chat.parent.span_id == root.context.span_id
    assert chat.context.trace_id == root.context.trace_id
    attrs = dict(chat.attributes or {})
    assert attrs["gen_ai.operation.name"] == "chat"
    assert attrs["gen_ai.provider.name"] == "function"
    assert attrs["gen_ai.request.model"] == "fn-1"
    assert attrs["gen_ai.request.temperature"] == 0.3
    assert attrs["gen_ai.request.max_tokens"] == 20
    assert attrs["gen_ai.request.seed"] == 1
    assert attrs["gen_ai.response.model"] == "fn-1"
    assert attrs["gen_ai.response.finish_reasons"] == ("stop",)
    assert attrs["gen_ai.usage.input_tokens"] == 3
    assert attrs["gen_ai.usage.output_tokens"] == 4
    assert "gen_ai.input.messages" not in attrs  # content is opt-in
    assert "gen_ai.system" not in attrs  # legacy attribute is opt-in


async def test_model_named_in_options_names_the_span(otel: Telemetry) -> None:
    await client_for(otel, FunctionModel(lambda p: "x")).prompt("q").options(model="other").call()
    assert otel.spans()[0].name == "chat other"


async def test_failure_sets_error_status_and_type(otel: Telemetry) -> None:
    class QuotaError(Exception):
        pass

    def fail(prompt: Prompt) -> str:
        raise QuotaError("over quota")

    with pytest.raises(QuotaError):
        await client_for(otel, FunctionModel(fail)).prompt("q").call()
    chat, root = otel.spans()
    for span in (chat, root):
        assert span.status.status_code == StatusCode.ERROR
        assert span.attributes is not None
        assert (
            span.attributes["error.type"]
            == "test_failure_sets_error_status_and_type.<locals>.QuotaError"
        )
    durations = otel.metrics()["gen_ai.client.operation.duration"]
    assert any(dict(p.attributes).get("error.type") for p in durations)  # type: ignore[attr-defined]


async def test_metrics_have_the_convention_buckets_and_token_types(otel: Telemetry) -> None:
    await client_for(otel, FunctionModel(lambda p: "one two")).prompt("a b c").call()
    metrics = otel.metrics()
    (duration,) = metrics["gen_ai.client.operation.duration"]
    assert tuple(duration.explicit_bounds) == DURATION_BUCKETS  # type: ignore[attr-defined]
    assert dict(duration.attributes)["gen_ai.operation.name"] == "chat"  # type: ignore[attr-defined]
    tokens = {
        dict(p.attributes)["gen_ai.token.type"]: p for p in metrics["gen_ai.client.token.usage"]
    }  # type: ignore[attr-defined]
    assert set(tokens) == {"input", "output"}
    assert tokens["input"].sum == 3  # type: ignore[attr-defined]
    assert tokens["output"].sum == 2  # type: ignore[attr-defined]
    assert tuple(tokens["input"].explicit_bounds) == TOKEN_BUCKETS  # type: ignore[attr-defined]


async def test_content_is_captured_only_on_opt_in(otel: Telemetry) -> None:
    client = client_for(otel, FunctionModel(lambda p: "answer"), capture_content=True, system="sys")
    await client.prompt("question").call()
    attrs = dict(otel.spans()[0].attributes or {})
    assert json.loads(attrs["gen_ai.input.messages"]) == [  # type: ignore[arg-type]
        {"role": "user", "parts": [{"type": "text", "content": "question"}]}
    ]
    assert json.loads(attrs["gen_ai.system_instructions"]) == [{"type": "text", "content": "sys"}]  # type: ignore[arg-type]
    output = json.loads(attrs["gen_ai.output.messages"])  # type: ignore[arg-type]
    assert output[0]["parts"][0]["content"] == "answer"
    assert output[0]["finish_reason"] == "stop"


def test_capture_mode_from_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    env = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"
    monkeypatch.delenv(env, raising=False)
    assert capture_mode_from_env() is CaptureMode.NO_CONTENT
    monkeypatch.setenv(env, "span_and_event")
    assert capture_mode_from_env() is CaptureMode.SPAN_AND_EVENT
    monkeypatch.setenv(env, "nonsense")
    assert capture_mode_from_env() is CaptureMode.NO_CONTENT


async def test_legacy_attributes_on_opt_in(otel: Telemetry) -> None:
    client = client_for(otel, FunctionModel(lambda p: "x y"), legacy_attributes=True)
    await client.prompt("q").call()
    attrs = dict(otel.spans()[0].attributes or {})
    assert attrs["gen_ai.system"] == "function"
    assert attrs["gen_ai.response.finish_reasons"] == ("STOP",)
    types = {
        dict(p.attributes)["gen_ai.token.type"] for p in otel.metrics()["gen_ai.client.token.usage"]
    }  # type: ignore[attr-defined]
    assert types == {"input", "output", "total"}
    # Seed 004's span attribute too (issue 31): input + output, only on this opt-in.
    assert attrs["gen_ai.usage.total_tokens"] == (
        attrs["gen_ai.usage.input_tokens"] + attrs["gen_ai.usage.output_tokens"]
    )


async def test_total_tokens_is_not_emitted_by_default(otel: Telemetry) -> None:
    client = client_for(otel, FunctionModel(lambda p: "x y"))
    await client.prompt("q").call()
    attrs = dict(otel.spans()[0].attributes or {})
    assert "gen_ai.usage.output_tokens" in attrs
    assert "gen_ai.usage.total_tokens" not in attrs


async def test_the_jev_span_carries_total_tokens_with_legacy_attributes(
    otel: Telemetry, jev_server: Any
) -> None:
    from jevrefine.jev import JudgeClient, Noul

    async with JudgeClient(
        "ts-test", base_url=jev_server.base_url, tracer_provider=otel.tracer_provider,
        legacy_attributes=True,
    ) as jev:  # fmt: skip
        await jev.system_one("The sky is blue.", {"q": Noul("Is it about the sky?")})
    (span,) = [s for s in otel.spans() if s.name.startswith("system_one")]
    attrs = dict(span.attributes or {})
    assert attrs["gen_ai.usage.total_tokens"] == (
        attrs["gen_ai.usage.input_tokens"] + attrs["gen_ai.usage.output_tokens"]
    )


async def test_stream_spans_share_the_trace(otel: Telemetry) -> None:
    client = client_for(otel, FunctionModel(lambda p: "streamed answer text"))
    assert "".join([c async for c in client.prompt("q").stream()]) == "streamed answer text"
    chat, root = otel.spans()
    assert chat.parent is not None
    assert chat.parent.span_id == root.context.span_id
    assert dict(chat.attributes or {})["gen_ai.request.stream"] is True
    assert dict(chat.attributes or {})["gen_ai.usage.output_tokens"] == 3


async def test_advisor_spans_on_request(otel: Telemetry) -> None:
    class Noop:
        name = "noop"
        order = 0

        async def advise_call(self, request, chain):  # type: ignore[no-untyped-def]
            return await chain.next_call(request)

    client = client_for(otel, FunctionModel(lambda p: "x"), advisors=[Noop()], trace_advisors=True)
    await client.prompt("q").call()
    chat, advisor, root = otel.spans()
    assert advisor.name == "advisor noop"
    assert advisor.parent is not None
    assert advisor.parent.span_id == root.context.span_id
    assert chat.parent is not None
    assert chat.parent.span_id == advisor.context.span_id


async def test_conversation_id_is_recorded(otel: Telemetry) -> None:
    client = client_for(otel, FunctionModel(lambda p: ChatResponse.of_text("x")))
    await client.prompt("q").advisors(conversation_id="conv-1").call()
    assert dict(otel.spans()[0].attributes or {})["gen_ai.conversation.id"] == "conv-1"
