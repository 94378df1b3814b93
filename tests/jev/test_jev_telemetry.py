import pytest
from opentelemetry.trace import SpanKind, StatusCode

from jevrefine.jev import JudgeAuthenticationError, JudgeClient, JudgeServerError, Noul, RetryPolicy
from jevrefine.telemetry import same_call
from jevrefine.testing import FakeJevServer

API_KEY = "sk-test-SECRET-telemetry"


class _NoWait:
    async def __call__(self, seconds: float) -> None:
        return None


def _client(server, otel, **kwargs):
    return JudgeClient(
        API_KEY,
        base_url=server.base_url,
        retry=RetryPolicy(sleep=_NoWait(), jitter=0.0),
        tracer_provider=otel.tracer_provider,
        meter_provider=otel.meter_provider,
        **kwargs,
    )


async def test_a_call_is_one_client_span_with_genai_attributes(otel) -> None:
    async with FakeJevServer() as server, _client(server, otel) as client:
        response = await client.system_one("x", {"q": Noul("q?")})
        port = server.port
    (span,) = otel.spans()
    # A Jev call is its own operation, not a chat (documented in docs/guide/telemetry.md).
    assert span.name == "system_one jev-latest"
    assert span.kind is SpanKind.CLIENT
    attrs = dict(span.attributes)
    assert attrs["gen_ai.operation.name"] == "system_one"
    assert attrs["gen_ai.provider.name"] == "typesafe"
    assert attrs["gen_ai.request.model"] == "jev-latest"
    assert attrs["gen_ai.response.model"] == "jev-1.13.0"
    assert attrs["gen_ai.response.id"] == response.request_id
    assert "gen_ai.response.finish_reasons" not in attrs  # Jev sends none; none is made up
    assert attrs["gen_ai.usage.input_tokens"] == response.usage.input_tokens
    assert attrs["gen_ai.usage.output_tokens"] == response.usage.output_tokens
    assert attrs["server.address"] == "127.0.0.1"
    assert attrs["server.port"] == port
    assert "gen_ai.system" not in attrs
    metrics = otel.metrics()
    assert len(metrics["gen_ai.client.operation.duration"]) == 1
    token_types = {
        dict(p.attributes)["gen_ai.token.type"] for p in metrics["gen_ai.client.token.usage"]
    }
    assert token_types == {"input", "output"}


async def test_retries_are_span_events_and_failures_set_error(otel) -> None:
    async with FakeJevServer() as server, _client(server, otel) as client:
        server.fail(503, times=3)
        try:
            await client.system_one("x", {"q": Noul("q?")})
        except JudgeServerError:
            pass
        else:  # pragma: no cover
            raise AssertionError("expected a JudgeServerError")
    (span,) = otel.spans()
    events = [e for e in span.events if e.name == "jevrefine.retry"]
    assert [e.attributes["jevrefine.retry.attempt"] for e in events] == [1, 2]
    assert [e.attributes["jevrefine.retry.delay_s"] for e in events] == [0.5, 1.0]
    assert {e.attributes["http.response.status_code"] for e in events} == {503}
    assert {e.attributes["error.type"] for e in events} == {"503"}
    assert span.status.status_code is StatusCode.ERROR
    # The status code names the failure, on the span, its metric and its retry events alike;
    # no exception event in another form (`jevrefine.jev.errors.JudgeServerError`) beside it.
    assert span.attributes["error.type"] == "503"
    assert span.attributes["http.response.status_code"] == 503
    assert [e.name for e in span.events if e.name == "exception"] == []
    (point,) = otel.metrics()["gen_ai.client.operation.duration"]
    assert dict(point.attributes)["error.type"] == "503"


async def test_the_key_never_reaches_spans(otel) -> None:
    async with FakeJevServer(api_key="other") as server, _client(server, otel) as client:
        with pytest.raises(JudgeAuthenticationError) as info:
            await client.system_one("x", {"q": Noul("q?")})
        assert API_KEY not in str(info.value)
        server.api_key = None
        await client.system_one("x", {"q": Noul("q?")})
    spans = otel.spans()
    assert [s.status.status_code for s in spans] == [StatusCode.ERROR, StatusCode.UNSET]
    for span in spans:
        assert API_KEY not in span.to_json()


async def test_inside_same_call_it_opens_no_span_and_records_retries_on_the_callers(otel) -> None:
    tracer = otel.tracer_provider.get_tracer("test")
    async with FakeJevServer() as server, _client(server, otel) as client:
        server.fail(529)
        with tracer.start_as_current_span("chat jev-latest"), same_call():
            response = await client.system_one("x", {"q": Noul("q?")})
    assert response.noul("q")
    (span,) = otel.spans()
    assert span.name == "chat jev-latest"
    assert [e.name for e in span.events] == ["jevrefine.retry"]
    assert "gen_ai.client.operation.duration" not in otel.metrics()


async def test_a_span_opened_inside_same_call_gets_its_own_jev_span(otel) -> None:
    tracer = otel.tracer_provider.get_tracer("test")
    async with FakeJevServer() as server, _client(server, otel) as client:
        with (
            tracer.start_as_current_span("outer"),
            same_call(),
            tracer.start_as_current_span("inner"),
        ):
            await client.system_one("x", {"q": Noul("q?")})
    assert sorted(s.name for s in otel.spans()) == ["inner", "outer", "system_one jev-latest"]
