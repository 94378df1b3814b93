"""The Jev transport against a hostile raw peer: strict framing, a cap that holds, no hangs.

Promises (issue 16, item 1): chunk sizes, the status line, header lines, `Content-Length`,
`Transfer-Encoding` and trailers are parsed strictly; anything else is `MalformedResponseError`
(a `JudgeResponseError` through `JudgeClient`, never retried) and the connection is closed, never
pooled. `max_response_bytes` holds for every framing: no more than one byte past it is parsed.
A hypothesis fuzz over all of it raises only the documented types, never hangs.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable
from typing import Any

import anyio
import anyio.abc
import httpx2
import pytest
from _hostile_jev import HostileServer, Writer, flood, response
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from jevrefine._http import (
    KeepAliveTransport,
    MalformedResponseError,
    _connections,
)
from jevrefine.exceptions import ResponseTooLargeError
from jevrefine.jev import JudgeClient, JudgeError, JudgeResponseError, Noul, RetryPolicy

CAP = 64 * 1024
EXAMPLES = int(os.environ.get("JEVREFINE_FUZZ_EXAMPLES", "100"))
FUZZ = settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
OK_BODY = (
    b'{"model":"jev-1","answers":{"g":{"type":"noul","noul":0.9}},'
    b'"usage":{"input_tokens":1,"output_tokens":0}}'
)


class Counted:
    """Every byte the transport receives from the network, counted at the socket."""

    def __init__(self) -> None:
        self.received = 0

    def install(self, monkeypatch: pytest.MonkeyPatch) -> None:
        connect = anyio.connect_tcp
        counter = self

        class Stream(anyio.abc.ByteStream):
            def __init__(self, inner: anyio.abc.ByteStream) -> None:
                self.inner = inner

            async def receive(self, max_bytes: int = 65536) -> bytes:
                data = await self.inner.receive(max_bytes)
                counter.received += len(data)
                return data

            async def send(self, item: bytes) -> None:
                await self.inner.send(item)

            async def send_eof(self) -> None:
                await self.inner.send_eof()

            async def aclose(self) -> None:
                await self.inner.aclose()

        async def counting(*args: Any, **kwargs: Any) -> anyio.abc.ByteStream:
            return Stream(await connect(*args, **kwargs))

        monkeypatch.setattr(_connections.anyio, "connect_tcp", counting)
        # On asyncio the transport's connections are their own protocols (`_PeerConnection`):
        # what the event loop reads into one is counted as it lands.
        landed = _connections.PeerConnection.buffer_updated

        def counting_landed(connection: Any, nbytes: int) -> None:
            counter.received += nbytes
            landed(connection, nbytes)

        monkeypatch.setattr(_connections.PeerConnection, "buffer_updated", counting_landed)


async def _get(server: HostileServer, *, cap: int = CAP, times: int = 1) -> list[Any]:
    """`times` GETs through one transport: each a response or the exception it raised."""
    outcomes: list[Any] = []
    transport = KeepAliveTransport(max_response_bytes=cap)
    async with httpx2.AsyncClient(transport=transport, timeout=5.0) as http:
        for _ in range(times):
            try:
                outcomes.append(await http.get(server.base_url + "/x"))
            except Exception as exc:
                outcomes.append(exc)
    return outcomes


@pytest.fixture
def counted(monkeypatch: pytest.MonkeyPatch) -> Counted:
    counter = Counted()
    counter.install(monkeypatch)
    return counter


# -- chunk sizes -------------------------------------------------------------------------------


async def test_a_negative_chunk_size_cannot_stream_past_the_cap(counted: Counted) -> None:
    """Promise: `-FFFFFFFFFFFF` (which `int(x, 16)` took) is a typed error at once; the flood
    behind it is never read (it used to read 600 MiB past a 16 MiB cap)."""

    async def script(writer: Writer) -> None:
        head = b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n-FFFFFFFFFFFF\r\n"
        await flood(writer, head, piece=b"10000\r\n" + b"x" * 0x10000 + b"\r\n", total=64 << 20)

    async with HostileServer(script) as server:
        with anyio.fail_after(10):
            [outcome] = await _get(server)
    assert isinstance(outcome, MalformedResponseError)
    assert "bad chunk size" in str(outcome)
    assert counted.received <= 2 * 65536  # one read, maybe two: never the flood


BAD_CHUNK_LINES = {
    "negative": b"-5",
    "plus sign": b"+5",
    "0x prefix": b"0x5",
    "space inside": b"5 5",
    "leading space": b" 5",
    "trailing space without extension": b"5 ",
    "underscore": b"1_0",
    "17 hex digits": b"1" + b"0" * 16,
    "empty": b"",
    "not hex": b"zz",
    "non-ascii digit": "٥".encode(),
    "control byte in extension": b"5;a=\x01",
}


@pytest.mark.parametrize("line", list(BAD_CHUNK_LINES.values()), ids=list(BAD_CHUNK_LINES))
async def test_bad_chunk_size_lines_are_malformed(line: bytes) -> None:
    """Promise: a chunk size is 1 to 16 hex digits, optionally `;extensions`; nothing else."""
    raw = (
        b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n" + line + b"\r\nhello\r\n0\r\n\r\n"
    )
    async with HostileServer(raw) as server:
        with anyio.fail_after(5):
            [outcome] = await _get(server)
    assert isinstance(outcome, MalformedResponseError), outcome


@pytest.mark.parametrize(
    "body",
    [
        b"5\r\nhelloXX0\r\n\r\n",  # chunk data not followed by CRLF
        b"5\nhello\r\n0\r\n\r\n",  # bare LF after the size
        b"5\r\nhello\r\n0\r\nx-t: 1\r\n bad fold\r\n\r\n",  # a folded trailer
        b"5\r\nhello\r\n0\r\nno colon\r\n\r\n",  # a trailer that is no field
        b"5\r\nhello\r\n0\r\n" + b"t: v\r\n" * 101 + b"\r\n",  # too many trailers
        b"5\r\nhello\r\n0\r\n" + b"t: " + b"v" * 9000 + b"\r\n\r\n",  # a trailer line too long
        b"5" * 9000,  # a chunk-size line that never ends
    ],
    ids=["no-crlf", "bare-lf", "folded-trailer", "bad-trailer", "101-trailers", "long-trailer",
         "endless-size-line"],
)  # fmt: skip
async def test_broken_chunk_framing_and_trailers_are_malformed(body: bytes) -> None:
    """Promise: CRLF after every chunk; trailers bounded and well-formed; lines bounded."""
    raw = b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n" + body
    async with HostileServer(raw) as server:
        with anyio.fail_after(5):
            [outcome] = await _get(server)
    assert isinstance(outcome, MalformedResponseError), outcome


async def test_valid_chunked_bodies_with_extensions_and_trailers_still_read() -> None:
    """Promise: strict is not stricter than RFC 9112: extensions, BWS before `;`, trailers."""
    raw = (
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: Chunked\r\n\r\n"
        b"5 ;name=value;flag\r\nhello\r\nA\r\n, world!!!\r\n0\r\nx-checksum: 1\r\n\r\n"
    )
    async with HostileServer(raw, close=False) as server:
        with anyio.fail_after(5):
            first, second = await _get(server, times=2)
    assert first.content == second.content == b"hello, world!!!"
    assert server.connections == 1  # a well-framed response keeps its connection


# -- status line and headers -------------------------------------------------------------------

BAD_HEADS = {
    "four-digit status": b"HTTP/1.1 2000 OK\r\ncontent-length: 0\r\n\r\n",
    "negative status": b"HTTP/1.1 -20 OK\r\ncontent-length: 0\r\n\r\n",
    "status 600": b"HTTP/1.1 600 Odd\r\ncontent-length: 0\r\n\r\n",
    "HTTP/2": b"HTTP/2 200 OK\r\ncontent-length: 0\r\n\r\n",
    "not HTTP": b"ICY 200 OK\r\ncontent-length: 0\r\n\r\n",
    "control byte in reason": b"HTTP/1.1 200 O\x00K\r\ncontent-length: 0\r\n\r\n",
    "obs-fold": b"HTTP/1.1 200 OK\r\nx-a: 1\r\n  continued\r\ncontent-length: 0\r\n\r\n",
    "space before colon": b"HTTP/1.1 200 OK\r\ncontent-length : 0\r\n\r\n",
    "no colon": b"HTTP/1.1 200 OK\r\nnonsense\r\ncontent-length: 0\r\n\r\n",
    "bare CR in value": b"HTTP/1.1 200 OK\r\nx-a: 1\r2\r\ncontent-length: 0\r\n\r\n",
    "negative length": b"HTTP/1.1 200 OK\r\ncontent-length: -1\r\n\r\n",
    "non-digit length": b"HTTP/1.1 200 OK\r\ncontent-length: 1e3\r\n\r\n",
    "plus length": b"HTTP/1.1 200 OK\r\ncontent-length: +3\r\n\r\nabc",
    "disagreeing lengths": b"HTTP/1.1 200 OK\r\ncontent-length: 3\r\ncontent-length: 4\r\n\r\nabcd",
    "disagreeing list": b"HTTP/1.1 200 OK\r\ncontent-length: 3, 4\r\n\r\nabcd",
    "length and chunked": (
        b"HTTP/1.1 200 OK\r\ncontent-length: 3\r\ntransfer-encoding: chunked\r\n\r\n0\r\n\r\n"
    ),
    "gzip transfer coding": b"HTTP/1.1 200 OK\r\ntransfer-encoding: gzip, chunked\r\n\r\n0\r\n\r\n",
    "101 headers": b"HTTP/1.1 200 OK\r\n" + b"x-a: 1\r\n" * 101 + b"content-length: 0\r\n\r\n",
    "long header line": b"HTTP/1.1 200 OK\r\nx-a: "
    + b"v" * 9000
    + b"\r\ncontent-length: 0\r\n\r\n",
    "head past 64 KiB": b"HTTP/1.1 200 OK\r\n" + b"x-a: " + b"v" * 70000,
    "101 switching": b"HTTP/1.1 101 Switching Protocols\r\nupgrade: h2c\r\n\r\n",
    "endless 100 continue": b"HTTP/1.1 100 Continue\r\n\r\n" * 12,
}


@pytest.mark.parametrize("raw", list(BAD_HEADS.values()), ids=list(BAD_HEADS))
async def test_bad_status_lines_and_headers_are_malformed(raw: bytes) -> None:
    """Promise: status line, header syntax and body framing headers are checked strictly."""
    async with HostileServer(raw) as server:
        with anyio.fail_after(5):
            [outcome] = await _get(server)
    assert isinstance(outcome, MalformedResponseError), outcome


async def test_agreeing_duplicate_lengths_and_interim_responses_are_fine() -> None:
    raw = (
        b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nlink: </a>\r\n\r\n"
        b"HTTP/1.1 200 OK\r\ncontent-length: 3\r\nContent-Length: 3, 03\r\n\r\nabc"
    )
    async with HostileServer(raw) as server:
        with anyio.fail_after(5):
            [outcome] = await _get(server)
    assert outcome.status_code == 200
    assert outcome.content == b"abc"


async def test_a_huge_content_length_is_too_large_without_building_the_number() -> None:
    """Promise: a 5,000-digit length is the too-large error, not Python's int-str ValueError."""
    raw = b"HTTP/1.1 200 OK\r\ncontent-length: " + b"9" * 5000 + b"\r\n\r\n"
    async with HostileServer(raw) as server:
        with anyio.fail_after(5):
            [outcome] = await _get(server)
    assert isinstance(outcome, ResponseTooLargeError)


# -- the cap, under every framing --------------------------------------------------------------


def _declared(writer: Writer) -> Any:
    head = b"HTTP/1.1 200 OK\r\ncontent-length: " + str(CAP + 1).encode() + b"\r\n\r\n"
    return flood(writer, head, piece=b"x" * 4096, total=CAP * 64)


def _chunked(writer: Writer) -> Any:
    head = b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n"
    return flood(writer, head, piece=b"1000\r\n" + b"x" * 0x1000 + b"\r\n", total=CAP * 64)


def _until_close(writer: Writer) -> Any:
    return flood(writer, b"HTTP/1.1 200 OK\r\n\r\n", piece=b"x" * 4096, total=CAP * 64)


@pytest.mark.parametrize("script", [_declared, _chunked, _until_close])
async def test_the_cap_holds_for_every_framing(
    counted: Counted, script: Callable[[Writer], Any]
) -> None:
    """Promise: past `max_response_bytes` the read stops, whatever the framing; at most the
    cap, one read of framing and the head ever come off the socket."""
    async with HostileServer(script) as server:
        with anyio.fail_after(10):
            [outcome] = await _get(server)
    assert isinstance(outcome, ResponseTooLargeError), outcome
    assert counted.received <= CAP + 2 * 65536


# -- through JudgeClient: typed, never retried, never pooled -----------------------------------


async def test_malformed_framing_is_a_judge_response_error_and_the_connection_is_dropped() -> None:
    """Promise: through `JudgeClient` a broken response is a `JudgeResponseError` (not retried);
    the next call opens a fresh connection."""
    bad = b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n-1\r\n"
    good = response(OK_BODY)
    answers = iter([bad, good])

    async def script(writer: Writer) -> None:
        await writer.send(next(answers))

    async with (
        HostileServer(script, close=False) as server,
        JudgeClient("k", base_url=server.base_url, retry=RetryPolicy(max_retries=3)) as client,
    ):
        with anyio.fail_after(5), pytest.raises(JudgeResponseError, match="bad chunk size"):
            await client.system_one("s", {"g": Noul("q?")})
        assert len(server.requests) == 1  # not retried
        with anyio.fail_after(5):
            answer = await client.system_one("s", {"g": Noul("q?")})
    assert answer.noul("g").noul == 0.9
    assert server.connections == 2  # the broken connection was closed, not pooled


# -- fuzz --------------------------------------------------------------------------------------

_token = st.text("abcdefghijklmnopqrstuvwxyz-", min_size=1, max_size=12).map(str.encode)
_bytes = st.binary(max_size=40)
_header_line = st.one_of(
    st.tuples(_token, st.text(max_size=20).map(lambda t: t.encode("utf-8", "replace"))).map(
        lambda nv: nv[0] + b": " + nv[1]
    ),
    st.sampled_from(
        [
            b"content-length: 5",
            b"content-length: -5",
            b"content-length: 99999999999999999999",
            b"transfer-encoding: chunked",
            b"transfer-encoding: gzip",
            b"connection: close",
            b"content-length: 5, 6",
            b" folded",
            b"content-length:",
            b"x\x00: y",
        ]
    ),
    _bytes,
)
_status = st.one_of(
    st.sampled_from([b"HTTP/1.1 200 OK", b"HTTP/1.0 200 OK", b"HTTP/1.1 100 Continue",
                     b"HTTP/1.1 500 Oops", b"HTTP/1.1 204 No Content", b"HTTP/1.1 200"]),
    _bytes.map(lambda b: b"HTTP/1.1 " + b),
    _bytes,
)  # fmt: skip
_chunk = st.one_of(
    st.binary(max_size=30).map(lambda d: f"{len(d):x}".encode() + b"\r\n" + d + b"\r\n"),
    st.tuples(st.sampled_from([b"-1", b"+2", b"0x2", b"fffffffffffffffff", b"2;e", b"2 ;e=v",
                               b"", b" 2", b"ZZ"]), st.binary(max_size=6))
    .map(lambda t: t[0] + b"\r\n" + t[1] + b"\r\n"),
    _bytes,
)  # fmt: skip
_trailers = st.lists(st.one_of(_header_line, _bytes), max_size=3).map(
    lambda lines: b"0\r\n" + b"".join(line + b"\r\n" for line in lines) + b"\r\n"
)
_response = st.tuples(
    _status,
    st.lists(_header_line, max_size=6),
    st.lists(_chunk, max_size=4),
    st.one_of(_trailers, st.just(b""), _bytes),
    st.booleans(),
).map(
    lambda t: t[0] + b"\r\n" + b"".join(h + b"\r\n" for h in t[1]) + b"\r\n"
    + (b"".join(t[2]) + t[3] if t[4] else b"".join(t[2]))
)  # fmt: skip

_ALLOWED_TRANSPORT = (MalformedResponseError, ResponseTooLargeError, httpx2.RemoteProtocolError)


async def _fuzz_once(raw: bytes, cap: int) -> None:
    async with HostileServer(raw) as server:
        with anyio.fail_after(5):  # a hang fails the example
            outcomes = await _get(server, cap=cap, times=2)
    for outcome in outcomes:
        if isinstance(outcome, Exception):
            assert isinstance(outcome, _ALLOWED_TRANSPORT), repr(outcome)
        else:
            assert len(outcome.content) <= cap


@pytest.mark.slow
@FUZZ
@given(raw=_response, cap=st.sampled_from([16, 1024, CAP]))
def test_fuzz_the_transport_raises_only_documented_errors(raw: bytes, cap: int) -> None:
    """Promise: any bytes at all give a response within the cap or a documented error, in time."""
    anyio.run(_fuzz_once, raw, cap)


async def _fuzz_client_once(raw: bytes) -> None:
    async with HostileServer(raw) as server:
        client = JudgeClient(
            "k",
            base_url=server.base_url,
            retry=RetryPolicy(max_retries=1, initial_backoff=0),
            timeout=2.0,
            total_timeout=4.0,
        )
        async with client:
            # Any other exception propagates and fails the example.
            with anyio.fail_after(6), contextlib.suppress(JudgeError):
                await client.system_one("s", {"g": Noul("q?")})


@pytest.mark.slow
@FUZZ
@given(raw=_response)
def test_fuzz_judge_client_raises_only_judge_errors(raw: bytes) -> None:
    """Promise: through `JudgeClient`, whatever the bytes, only the `JudgeError` tree."""
    anyio.run(_fuzz_client_once, raw)
