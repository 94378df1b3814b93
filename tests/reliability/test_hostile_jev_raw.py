"""JudgeClient on the transport's raw core (no httpx client): what that path does itself.

Promises (issue 23): with its own pool, `JudgeClient` calls `KeepAliveTransport.exchange`
directly. So it writes its own request head (the header lines httpx sent, less
`accept-encoding`), undoes a `content-encoding` the server sends anyway (a body that does not
decode is a `JudgeResponseError`, never retried), and skips the key scrub over an answer whose
raw bytes cannot hold the key, while an echoed key in any JSON spelling is still blanked out.
Each against a raw asyncio peer on 127.0.0.1.
"""

from __future__ import annotations

import gzip
import json

import anyio
import pytest
from _hostile_jev import HostileServer, Writer, response

from jevrefine._version import __version__
from jevrefine.jev import (
    JudgeClient,
    JudgeResponseError,
    JudgeServerError,
    JudgeTimeoutError,
    Noul,
    RetryPolicy,
)

KEY = "ts-secret-key-0123456789"
OK_BODY = (
    b'{"model":"jev-1","answers":{"g":{"type":"noul","noul":0.9}},'
    b'"usage":{"input_tokens":1,"output_tokens":0}}'
)
QUESTIONS = {"g": Noul("q?")}


def _fields(request: bytes) -> tuple[bytes, list[tuple[bytes, bytes]], bytes]:
    head, _, body = request.partition(b"\r\n\r\n")
    start, *lines = head.split(b"\r\n")
    pairs = [line.split(b": ", 1) for line in lines]
    return start, [(name, value) for name, value in pairs], body


async def test_the_raw_path_sends_the_head_httpx_sent_and_the_retry_count_on_retries() -> None:
    answers = iter([response(b'{"error":{"message":"busy"}}', status=b"503 Busy"), None])

    async def script(writer: Writer) -> None:
        answer = next(answers)
        await writer.send(answer if answer is not None else response(OK_BODY))

    async def no_wait(seconds: float) -> None:
        pass

    fast = RetryPolicy(max_retries=1, sleep=no_wait)
    async with (
        HostileServer(script, close=False) as server,
        JudgeClient(KEY, base_url=server.base_url + "/prefix", retry=fast) as client,
    ):
        assert client._wire.path == "raw"  # the raw path, not an httpx client
        port = server.base_url.rsplit(":", 1)[1]
        with anyio.fail_after(5):
            answer = await client.system_one("s", QUESTIONS)
    assert answer.noul("g").noul == 0.9
    first, second = (_fields(request) for request in server.requests)
    assert first[0] == b"POST /prefix/v1/systemone HTTP/1.1"
    assert first[1] == [
        (b"host", f"127.0.0.1:{port}".encode()),
        (b"accept", b"application/json"),
        (b"content-type", b"application/json"),
        (b"user-agent", f"jevrefine/{__version__}".encode()),
        (b"authorization", f"Bearer {KEY}".encode()),
        (b"content-length", str(len(first[2])).encode()),
    ]
    assert json.loads(first[2])["state"] == "s"
    assert (b"x-typesafe-retry-count", b"1") in second[1]
    assert second[2] == first[2]


async def test_a_content_encoding_sent_unasked_is_decoded() -> None:
    body = gzip.compress(OK_BODY)
    answer = response(body, headers=b"content-encoding: gzip\r\n")
    async with HostileServer(answer) as server, JudgeClient(KEY, base_url=server.base_url) as c:
        with anyio.fail_after(5):
            result = await c.system_one("s", QUESTIONS)
    assert result.noul("g").noul == 0.9


async def test_a_body_that_does_not_decode_is_a_response_error_and_not_retried() -> None:
    answer = response(b"this is not gzip", headers=b"content-encoding: gzip\r\n")
    async with (
        HostileServer(answer) as server,
        JudgeClient(KEY, base_url=server.base_url, retry=RetryPolicy(max_retries=3)) as client,
    ):
        with anyio.fail_after(5), pytest.raises(JudgeResponseError, match="does not decode"):
            await client.system_one("s", QUESTIONS)
    assert len(server.requests) == 1


@pytest.mark.parametrize(
    "spelling",
    [
        KEY,  # as is
        "".join(f"\\u{ord(c):04x}" for c in KEY),  # every character escaped
        KEY[:2] + "\\u002d" + KEY[3:],  # one escape inside it (the "-")
    ],
)
async def test_an_echoed_key_is_blanked_out_in_any_json_spelling(spelling: str) -> None:
    """The scrub is skipped only when the raw bytes hold neither the key nor an escape."""
    body = OK_BODY.replace(b'"jev-1"', b'"jev-1 ' + spelling.encode() + b'"')
    async with (
        HostileServer(response(body)) as server,
        JudgeClient(KEY, base_url=server.base_url) as client,
    ):
        with anyio.fail_after(5):
            result = await client.system_one("s", QUESTIONS)
    assert KEY not in repr(result)
    assert result.model == "jev-1 ***"


async def test_an_echoed_key_in_an_error_body_is_blanked_out() -> None:
    body = json.dumps({"error": {"message": f"bad key {KEY}"}}).encode()
    async with (
        HostileServer(response(body, status=b"500 Oops")) as server,
        JudgeClient(KEY, base_url=server.base_url, retry=RetryPolicy(max_retries=0)) as client,
    ):
        with anyio.fail_after(5), pytest.raises(JudgeServerError) as caught:
            await client.system_one("s", QUESTIONS)
    assert KEY not in str(caught.value)
    assert KEY not in repr(caught.value.body)


async def test_the_budget_bounds_the_wait_for_a_concurrency_slot_and_the_read() -> None:
    """On the raw path no cancel scope surrounds the call: the core bounds each phase by the
    deadline, and the wait for a `max_concurrency` slot is bounded by it too."""

    async def stall(writer: Writer) -> None:
        await anyio.sleep(5)

    outcomes: list[BaseException] = []

    async def ask(client: JudgeClient) -> None:
        try:
            await client.system_one("s", QUESTIONS)
        except JudgeTimeoutError as exc:
            outcomes.append(exc)

    async with (
        HostileServer(stall) as server,
        JudgeClient(
            KEY, base_url=server.base_url, max_concurrency=1, total_timeout=0.5, timeout=3.0
        ) as client,
    ):
        with anyio.fail_after(3):
            async with anyio.create_task_group() as group:
                group.start_soon(ask, client)
                group.start_soon(ask, client)  # waits for the one slot, past the budget
    assert len(outcomes) == 2
    assert all("total_timeout=0.5" in str(error) for error in outcomes)
    assert len(server.requests) == 1  # the second never got a slot
