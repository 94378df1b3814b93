"""A Jev server that echoes the API key back never gets it into anything we keep or show.

Promise (issue 16, item 11): the key a server sends back (in `x-typesafe-request-id`, a 200 body's
`model`, an error message, a malformed status line) is scrubbed once, where the response is
read, before it is stored: it is in no exception text or body, span attribute, span event,
metric attribute, OTel log record or Python log line. Real OTel SDK, in-memory exporters.
"""

from __future__ import annotations

import logging
from typing import Any

import anyio
import pytest
from _hostile_jev import HostileServer, Writer, response

from jevrefine import telemetry
from jevrefine.jev import JudgeClient, JudgeError, Noul, RetryPolicy
from otel_support import Otel

KEY = "sk-hostile-echo-0123456789abcdef"
QUESTIONS = {"g": Noul("Grounded?")}
ECHO_HEADERS = f"x-typesafe-request-id: rid-{KEY}\r\n".encode()


@pytest.fixture(autouse=True)
def _restore_telemetry_defaults() -> Any:
    saved = telemetry.defaults()
    yield
    telemetry.restore(saved)


def _everything(otel: Otel) -> str:
    """Every string the three OTel pipelines kept, in one text."""
    parts: list[str] = []
    for span in otel.spans():
        parts.append(span.name)
        parts.extend(str(v) for v in (span.attributes or {}).values())
        parts.append(str(span.status.description))
        for event in span.events:
            parts.append(event.name)
            parts.extend(str(v) for v in (event.attributes or {}).values())
    for metric in otel.metrics().values():
        for point in metric.data.data_points:
            parts.extend(str(v) for v in (point.attributes or {}).values())
    for record in otel.logs():
        log = record.log_record
        parts.append(str(log.body))
        parts.extend(str(v) for v in (log.attributes or {}).values())
    return "\n".join(parts)


def _client(server: HostileServer, otel: Otel) -> JudgeClient:
    return JudgeClient(
        KEY,
        base_url=server.base_url,
        retry=RetryPolicy(max_retries=2, initial_backoff=0),
        capture_content=True,
        **otel.providers,
    )


def _assert_clean(otel: Otel, caplog: pytest.LogCaptureFixture, *texts: object) -> None:
    assert KEY not in _everything(otel)
    assert KEY not in caplog.text
    for text in texts:
        assert KEY not in str(text)
        assert KEY not in repr(text)


async def test_an_echoed_key_in_a_good_answer_is_scrubbed(caplog: pytest.LogCaptureFixture) -> None:
    body = (
        b'{"model":"jev-' + KEY.encode() + b'","answers":{"g":{"type":"noul","noul":0.9}},'
        b'"usage":{"input_tokens":1,"output_tokens":0}}'
    )
    otel = Otel()
    caplog.set_level(logging.DEBUG)
    raw = response(body, headers=ECHO_HEADERS)
    async with HostileServer(raw) as server, _client(server, otel) as client:
        with anyio.fail_after(5):
            answer = await client.system_one("s", QUESTIONS)
    assert answer.model == "jev-***"
    assert answer.request_id == "rid-***"
    spans = otel.spans()
    assert spans[-1].attributes is not None
    assert spans[-1].attributes["gen_ai.response.id"] == "rid-***"
    assert spans[-1].attributes["gen_ai.response.model"] == "jev-***"
    _assert_clean(otel, caplog, answer)


async def test_an_echoed_key_in_errors_is_scrubbed(caplog: pytest.LogCaptureFixture) -> None:
    """Retried 5xx errors (logged, put on span events), then the final error: all clean."""
    error = b'{"error":{"message":"invalid key ' + KEY.encode() + b'"}}'
    raw = response(error, status=b"503 Service Unavailable", headers=ECHO_HEADERS)
    otel = Otel()
    caplog.set_level(logging.DEBUG)
    async with HostileServer(raw) as server, _client(server, otel) as client:
        with anyio.fail_after(5), pytest.raises(JudgeError) as caught:
            await client.system_one("s", QUESTIONS)
    assert len(server.requests) == 3
    assert "***" in str(caught.value)
    _assert_clean(otel, caplog, caught.value, caught.value.args, vars(caught.value))


@pytest.mark.parametrize(
    "raw",
    [
        f"HTTP/1.1 200 {KEY}\x00\r\ncontent-length: 0\r\n\r\n".encode(),  # quoted status line
        b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n" + KEY.encode() + b"\r\n",
        b"HTTP/1.1 200 OK\r\n" + ECHO_HEADERS + b"content-length: 5\r\n\r\n" + KEY[:5].encode(),
        response(b'{"model":"' + KEY.encode() + b'","answers":{"g":{"noul":7.5,"type":"noul"}}}'),
        response(b"not json " + KEY.encode(), headers=ECHO_HEADERS),
        # The key across the point where a message or a kept body is cut: scrubbed before it.
        f"HTTP/1.1 200 {'x' * 40}{KEY}\x00\r\ncontent-length: 0\r\n\r\n".encode(),
        response(b"x" * 990 + KEY.encode()),
        response(b"x" * 1990 + KEY.encode(), status=b"500 Oops"),
    ],
    ids=[
        "status-line",
        "chunk-size",
        "not-json-header",
        "bad-answer-body",
        "not-json-body",
        "cut-status-line",
        "cut-body",
        "cut-error-body",
    ],
)
async def test_an_echoed_key_in_a_broken_response_is_scrubbed(
    raw: bytes, caplog: pytest.LogCaptureFixture
) -> None:
    otel = Otel()
    caplog.set_level(logging.DEBUG)
    async with HostileServer(raw) as server, _client(server, otel) as client:
        with anyio.fail_after(5), pytest.raises(JudgeError) as caught:
            await client.system_one("s", QUESTIONS)
    _assert_clean(otel, caplog, caught.value, caught.value.args, vars(caught.value))
    assert KEY[:6] not in str(caught.value) + repr(vars(caught.value))  # not even a prefix


async def test_an_echoed_key_in_a_reset_connection_message_is_scrubbed(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A connection error after a partial head quoting the key: retried, logged, raised clean."""

    async def script(writer: Writer) -> None:
        await writer.send(f"HTTP/1.1 200 {KEY}\r\n".encode())
        writer.close()

    otel = Otel()
    caplog.set_level(logging.DEBUG)
    async with HostileServer(script) as server, _client(server, otel) as client:
        with anyio.fail_after(5), pytest.raises(JudgeError) as caught:
            await client.system_one("s", QUESTIONS)
    _assert_clean(otel, caplog, caught.value, caught.value.args)
