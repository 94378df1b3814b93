"""Calls skip their span and metric bookkeeping when nothing would record it, and only then."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import types

import pytest
from opentelemetry import metrics, trace
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.trace import TracerProvider

from jevrefine import ChatClient, ChatResponse, Prompt, SelfRefineAdvisor
from jevrefine import telemetry as telemetry_module
from jevrefine.exceptions import EmptyResponseError, UserError
from jevrefine.jev import JudgeClient
from jevrefine.judge import Judge, check
from jevrefine.models.base import ChatModel
from jevrefine.telemetry import CaptureMode, Telemetry, _fastpath
from jevrefine.testing import FunctionModel
from otel_support import Otel as InMemoryOtel
from support import Telemetry as Otel


def test_no_sdk_and_no_content_capture_is_inactive() -> None:
    # No global provider is ever set in this test process (the suite passes its providers).
    assert not Telemetry().active()
    assert not Telemetry(
        tracer_provider=trace.NoOpTracerProvider(), meter_provider=metrics.NoOpMeterProvider()
    ).active()
    # A proxy passed in stands for the global provider, which is unset.
    assert not Telemetry(tracer_provider=trace.get_tracer_provider()).active()


@pytest.mark.parametrize(
    "kwargs",
    [
        {"tracer_provider": TracerProvider()},
        {"meter_provider": MeterProvider()},
        {"capture_content": True},
        {"capture_content": CaptureMode.EVENT_ONLY},
    ],
    ids=["sdk tracer", "sdk meter", "content on spans", "content on events"],
)
def test_anything_that_records_makes_it_active(kwargs: dict[str, object]) -> None:
    assert Telemetry(**kwargs).active()  # type: ignore[arg-type]


def test_defaults_set_by_configure_count() -> None:
    saved = telemetry_module.configure(meter_provider=MeterProvider())
    try:
        assert Telemetry().active()
    finally:
        telemetry_module.restore(saved)


def test_an_unknown_meter_api_records_when_in_doubt(monkeypatch: pytest.MonkeyPatch) -> None:
    # Should the API's private globals move, the public getter decides, and its stand-in for an
    # unset provider is no longer recognised: metrics are recorded rather than lost.
    monkeypatch.setattr(_fastpath, "_metrics_api", None)
    monkeypatch.setattr(_fastpath, "_NO_OP_METER_PROVIDERS", (metrics.NoOpMeterProvider,))
    assert Telemetry().active()
    no_globals = types.SimpleNamespace()
    assert not _fastpath.global_provider_set(
        no_globals, "_TRACER_PROVIDER", trace.get_tracer_provider, (trace.ProxyTracerProvider,)
    )


class _WrongType(ChatModel):
    @property
    def model_name(self) -> str:
        return "wrong"

    async def call(self, prompt: Prompt) -> ChatResponse:
        return "not a response"  # type: ignore[return-value]


@pytest.fixture(params=["telemetry off", "telemetry on"])
def client_kwargs(request: pytest.FixtureRequest) -> dict[str, object]:
    if request.param == "telemetry off":
        return {}
    otel = Otel()
    return {"tracer_provider": otel.tracer_provider, "meter_provider": otel.meter_provider}


async def test_both_paths_check_the_models_answer(client_kwargs: dict[str, object]) -> None:
    with pytest.raises(UserError, match="must return a ChatResponse"):
        await ChatClient(_WrongType(), **client_kwargs).prompt("q").call()  # type: ignore[arg-type]
    empty = FunctionModel(lambda prompt: ChatResponse(()))
    with pytest.raises(EmptyResponseError):
        await ChatClient(empty, **client_kwargs).prompt("q").call()  # type: ignore[arg-type]


async def test_both_paths_answer_alike(client_kwargs: dict[str, object]) -> None:
    model = FunctionModel(lambda prompt: f"echo {prompt.messages[-1].text}")
    client = ChatClient(model, **client_kwargs)  # type: ignore[arg-type]
    response = await client.prompt("hi").advisors(conversation_id="c-1").call()
    assert response.content == "echo hi"
    assert response.context == {"conversation_id": "c-1"}


_INSTALL_LATER = textwrap.dedent(
    """
    import anyio
    from opentelemetry import metrics, trace
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from jevrefine import ChatClient
    from jevrefine.testing import FunctionModel

    async def main():
        client = ChatClient(FunctionModel(lambda prompt: "ok", model_name="fn"))
        await client.prompt("before").call()
        assert not client.telemetry.active()

        exporter, reader = InMemorySpanExporter(), InMemoryMetricReader()
        tracer_provider = TracerProvider()
        tracer_provider.add_span_processor(SimpleSpanProcessor(exporter))
        trace.set_tracer_provider(tracer_provider)
        metrics.set_meter_provider(MeterProvider(metric_readers=[reader]))

        assert client.telemetry.active()
        await client.prompt("after").call()
        names = sorted(span.name for span in exporter.get_finished_spans())
        data = reader.get_metrics_data()
        metric_names = sorted(
            m.name for r in data.resource_metrics for s in r.scope_metrics for m in s.metrics
        )
        print(names, metric_names)

    anyio.run(main)
    """
)


def test_an_sdk_installed_after_the_client_is_used_from_the_next_call() -> None:
    # Global providers can be set once per process: this runs in its own.
    done = subprocess.run(
        [sys.executable, "-c", _INSTALL_LATER],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == (
        "['chat fn', 'invoke_workflow jevrefine.chat_client'] "
        "['gen_ai.client.operation.duration', 'gen_ai.client.token.usage', "
        "'gen_ai.workflow.duration']"
    )


class _CountingTracer:
    """The API's no-op tracer, counting the spans it is asked for."""

    def __init__(self) -> None:
        self.started: list[str] = []

    def start_span(self, name: str, *args: object, **kwargs: object) -> trace.Span:
        self.started.append(name)
        return trace.INVALID_SPAN


async def _refine_with(**kwargs: object) -> tuple[list[str], InMemoryOtel]:
    """One refinement (a failed code check, then a pass); the spans asked for, and the SDK."""
    otel = InMemoryOtel()
    answers = iter(["too long an answer", "ok"])
    judge = Judge(
        JudgeClient("k", base_url="http://127.0.0.1:9"),  # never called: code checks only
        [check("short", lambda i: len(i.assistant_answer) < 5, "too long")],
    )
    client = ChatClient(
        FunctionModel(lambda prompt: next(answers)),
        advisors=[SelfRefineAdvisor(judge)],
        **{k: getattr(otel, v) for k, v in kwargs.items()},  # type: ignore[arg-type]
    )
    tracer = _CountingTracer()
    client.telemetry.tracer = tracer  # type: ignore[assignment]
    assert (await client.prompt("q").call()).content == "ok"
    return tracer.started, otel


async def test_a_loop_nobody_listens_to_builds_no_spans() -> None:
    started, _ = await _refine_with()
    assert [name for name in started if "self_refine" in name] == []


async def test_a_logger_provider_alone_still_gets_the_evaluation_results() -> None:
    # No tracer or meter records, but the results also go to the logs API: the loop runs its
    # telemetry (its spans are the tracer's no-ops) and the logger provider gets every result.
    started, otel = await _refine_with(logger_provider="logger_provider")
    assert started.count("self_refine.attempt") == 2
    records = [log.log_record for log in otel.logs()]
    results = [r for r in records if r.event_name == "gen_ai.evaluation.result"]
    assert [dict(r.attributes or {})["gen_ai.evaluation.score.label"] for r in results] == [
        "fail",
        "pass",
    ]
