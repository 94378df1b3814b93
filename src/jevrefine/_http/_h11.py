"""The strict HTTP/1.1 response reader: every byte a server sends is checked against RFC 9112.

The server may be broken or hostile: the status line, at most 100 header lines of at most 8 KiB
each (no obs-fold, no control bytes, no bare LF line ends), one agreeing `Content-Length` of
digits only, `Transfer-Encoding: chunked` or nothing (never both), chunk sizes of 1 to 16 hex
digits with optional extensions, CRLF after every chunk, at most 100 trailer lines. A violation
raises `MalformedResponseError` (never retried: the server would answer so again). The body
readers stop one byte past the caller's cap (`BodyTooLarge`).

The readers see a connection only through `Readable`: its unparsed bytes and a way to get more.
The head is matched by one regular expression first (`HEAD_PATTERN`); what it refuses goes to the
line-by-line reading (`status_line`, `field_line`), which accepts or names the fault: the
expression is a subset of the lines' grammar, not a second parser
(`tests/reliability/test_hostile_jev_fast_paths.py` feeds both the same generated heads).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Final, Protocol

import httpx2

__all__ = [
    "EXCERPT",
    "HEAD_PATTERN",
    "MAX_HEAD",
    "MAX_HEADERS",
    "MAX_LINE",
    "READ_SIZE",
    "TCHAR",
    "BodyTooLarge",
    "ClosedBeforeResponse",
    "Framing",
    "Head",
    "MalformedResponseError",
    "Readable",
    "check_fields",
    "field_line",
    "framing_of",
    "has_control",
    "is_token",
    "malformed",
    "parse_head",
    "read_chunked",
    "read_exactly",
    "read_head",
    "read_until_close",
    "status_line",
]


MAX_HEAD: Final = 64 * 1024
"""The status line and headers together (and, separately, the trailers)."""

MAX_HEADERS: Final = 100
"""Header lines of one response (and trailer lines of one chunked body)."""

MAX_LINE: Final = 8 * 1024
"""One header, trailer or chunk-size line."""

_MAX_CHUNK_DIGITS: Final = 16
"""Hex digits of a chunk size: 16 already spell 2**64 - 1, far past any cap."""

_MAX_LENGTH_DIGITS: Final = 18
"""Digits of a Content-Length read as a number; longer ones are past any cap anyway."""

_HUGE: Final = 10**_MAX_LENGTH_DIGITS

_MAX_INTERIM: Final = 10
"""Interim (1xx) responses skipped before the final one."""

READ_SIZE: Final = 65536

EXCERPT: Final = 1024

_HEXDIG: Final = b"0123456789abcdefABCDEF"

TCHAR: Final = b"!#$%&'*+-.^_`|~0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"

_CONTROL: Final = bytes(range(32)) + b"\x7f"

NO_BODY_STATUSES: Final = frozenset({204, 304})


class Readable(Protocol):
    """What the readers need of a connection: its unparsed bytes and a way to get more."""

    buffer: bytearray
    """Bytes received and not yet parsed (the readers consume them from the front)."""

    async def read_more(self, at_most: int) -> bool:
        """Add at least one byte to `buffer` (up to `at_most`); False at the end of the stream."""
        ...


class ClosedBeforeResponse(httpx2.RemoteProtocolError):
    """The server closed the connection before sending a single byte of the response.

    On a reused keep-alive connection this is the server having closed it while idle: the pool
    may resend the request on a fresh one.
    """


class MalformedResponseError(httpx2.RemoteProtocolError):
    """The server's bytes are not a valid HTTP/1.1 response (not retried: it would answer so again).

    A connection that ends early is not this, but a plain `httpx2.RemoteProtocolError`.
    """

    def __init__(
        self, message: str, *, request: httpx2.Request | None = None, excerpt: bytes = b""
    ) -> None:
        super().__init__(message, request=request)
        self.excerpt = excerpt
        """The start of the offending bytes (up to 1 KiB), kept out of the message: the server
        may have put a secret in them, and only the caller knows which to scrub."""


def malformed(what: str, raw: bytes = b"") -> MalformedResponseError:
    # At most a prefix of what the server sent: enough to recognise it, never a flood.
    return MalformedResponseError(f"malformed response: {what}", excerpt=raw[:EXCERPT])


class BodyTooLarge(Exception):
    """Raised by the body readers; the transport turns it into its `too_large` error."""

    def __init__(self, declared: int | None) -> None:
        super().__init__()
        self.declared = declared


def is_token(value: bytes) -> bool:
    return bool(value) and not value.translate(None, TCHAR)


def has_control(value: bytes) -> bool:
    return bool(value) and len(value.translate(None, _CONTROL)) != len(value)


def check_fields(headers: Sequence[tuple[bytes, bytes]]) -> None:
    # httpx checks header values as it builds a Request; the raw path has none to do it, and a
    # CR or LF in a value (a key read from a file with its newline) would split the request.
    # All names, then all values, in one pass each: the common case is that all are fine.
    if len(headers) == 1 and headers[0][0] == b"content-length" and headers[0][1].isdigit():
        return  # a raw-core caller's one line of its own (`JudgeClient`): no full check needed
    names = b"".join(name for name, _ in headers)
    values = b"".join(value for _, value in headers).replace(b"\t", b"")
    if names.translate(None, TCHAR) or has_control(values) or not all(n for n, _ in headers):
        bad = next(
            name
            for name, value in headers
            if not is_token(name) or has_control(value.replace(b"\t", b""))
        )
        raise httpx2.LocalProtocolError(f"illegal header line {bad[:64]!r}")


class Head:
    __slots__ = ("headers", "reason", "status", "version")

    def __init__(
        self, version: bytes, status: int, reason: bytes, headers: list[tuple[bytes, bytes]]
    ) -> None:
        self.version = version
        self.status = status
        self.reason = reason
        self.headers = headers


class Framing:
    __slots__ = ("chunked", "keep_alive", "length")

    def __init__(self, *, chunked: bool, length: int | None, keep_alive: bool) -> None:
        self.chunked = chunked
        self.length = length
        self.keep_alive = keep_alive


async def read_head(connection: Readable) -> Head:
    """The status line and headers of the final response; interim 1xx responses are skipped.

    Raises:
        ClosedBeforeResponse: the stream ended before any byte came.
        MalformedResponseError: the head breaks RFC 9112 (a bare LF line end is seen as soon as
            it arrives, not after waiting for a CRLF that will never come).
        httpx2.RemoteProtocolError: the stream ended inside the head.
    """
    for _ in range(_MAX_INTERIM + 1):
        buffer = connection.buffer
        scanned = 0  # bytes already checked for bare LFs and for the end of the head
        while (end := buffer.find(b"\r\n\r\n", max(0, scanned - 3))) < 0:
            _refuse_bare_lf(buffer, scanned)
            scanned = len(buffer)
            if scanned > MAX_HEAD:
                raise malformed(f"the head is longer than {MAX_HEAD} bytes")
            if not await connection.read_more(READ_SIZE):
                if not buffer:
                    raise ClosedBeforeResponse("the server closed the connection before answering")
                raise httpx2.RemoteProtocolError(
                    "the server closed the connection without a full response"
                )
        if end > MAX_HEAD:
            raise malformed(f"the head is longer than {MAX_HEAD} bytes")
        head = bytes(buffer[:end])
        del buffer[: end + 4]
        version, status, reason, headers = parse_head(head)
        if status == 101:
            raise malformed("101 Switching Protocols was never asked for")
        if status >= 200:
            return Head(version, status, reason, headers)
    raise malformed(f"more than {_MAX_INTERIM} interim (1xx) responses")


def _refuse_bare_lf(buffer: bytearray, start: int) -> None:
    """Raise at an LF not preceded by CR in `buffer[start:]` (a head still being received).

    Such a server would otherwise be waited on for a CRLF CRLF it never sends, until the timeout.
    """
    lf = buffer.find(b"\n", start)
    while lf >= 0:
        if lf == 0 or buffer[lf - 1] != 0x0D:
            raise malformed("a line of the head ends in a bare LF, not CRLF", bytes(buffer))
        lf = buffer.find(b"\n", lf + 1)


# The whole head at once, in C: a status line and at most 100 header lines, each a token, a colon
# and a value of visible bytes, spaces and tabs, at most 8 KiB a line. It accepts a subset of what
# the line-by-line reading (`status_line`, `field_line`) accepts; anything else goes to that, which
# names the fault. One regular expression instead of a Python call per line halved the head's
# CPU (`python -m benchmarks.bench_judge_client`). No nested quantifier can match the same byte
# two ways (a value holds no CR or LF, a name no colon), so a hostile head costs linear time.
_VALUE_BYTE: Final = rb"[\t\x20-\x7e\x80-\xff]"

_HEADER_LINE: Final = (
    rb"\r\n(?=[^\r\n]{1,%d}(?:\r\n|\Z))[" % MAX_LINE
    + re.escape(TCHAR)
    + rb"]+:"
    + _VALUE_BYTE
    + rb"*"
)

HEAD_PATTERN: Final = re.compile(
    rb"(HTTP/1\.[01]) ([1-5][0-9][0-9])(?: (%s*))?((?:%s){0,%d})"
    % (_VALUE_BYTE, _HEADER_LINE, MAX_HEADERS)
)

_PAIR: Final = re.compile(rb"\r\n([^:]+):[ \t]*([^\r\n]*)")


def parse_head(head: bytes) -> tuple[bytes, int, bytes, list[tuple[bytes, bytes]]]:
    """(version, status, reason, header lines) of a head, without its final blank line."""
    match = HEAD_PATTERN.fullmatch(head)
    if match is not None:
        version, status, reason, block = match.groups()
        fields = [(name, value.rstrip(b" \t")) for name, value in _PAIR.findall(block)]
        return version, int(status), reason or b"", fields
    lines = head.split(b"\r\n")
    version, code, reason = status_line(lines[0])
    if len(lines) - 1 > MAX_HEADERS:
        raise malformed(f"more than {MAX_HEADERS} header lines")
    return version, code, reason, [field_line(line) for line in lines[1:]]


def status_line(line: bytes) -> tuple[bytes, int, bytes]:
    version, _, rest = line.partition(b" ")
    status_text, _, reason = rest.partition(b" ")
    if (
        version not in (b"HTTP/1.1", b"HTTP/1.0")
        or len(status_text) != 3
        or not status_text.isdigit()  # ASCII digits only, for bytes
        or status_text[:1] not in b"12345"  # 100 to 599: RFC 9110's classes
        or has_control(reason.replace(b"\t", b""))
    ):
        raise malformed("bad status line", line)
    return version, int(status_text), reason


def field_line(line: bytes) -> tuple[bytes, bytes]:
    """One header or trailer line as (name, value); a folded or broken line is an error."""
    if line[:1] in (b" ", b"\t"):
        # obs-fold: RFC 9112 lets a client unfold it, but no current server sends one, and a
        # continuation line is a classic way to hide a header from one parser and not another.
        raise malformed("a folded header line (obs-fold)", line)
    if len(line) > MAX_LINE:
        raise malformed(f"a header line longer than {MAX_LINE} bytes", line)
    name, sep, value = line.partition(b":")
    value = value.strip(b" \t")
    if not sep or not is_token(name) or has_control(value.replace(b"\t", b"")):
        raise malformed("bad header line", line)
    return name, value


def framing_of(head: Head) -> Framing:
    """How the body is delimited, and whether the connection may be reused afterwards."""
    lengths: list[bytes] = []
    codings: list[bytes] = []
    close = head.version == b"HTTP/1.0"
    for name, value in head.headers:
        lower = name.lower()
        if lower == b"content-length":
            lengths.append(value)
        elif lower == b"transfer-encoding":
            codings.extend(c.strip(b" \t").lower() for c in value.split(b","))
        elif lower == b"connection":
            tokens = {t.strip(b" \t").lower() for t in value.split(b",")}
            if b"close" in tokens:
                close = True
            elif b"keep-alive" in tokens:
                close = False
    if codings and lengths:
        # RFC 9112 §6.1: both at once is how responses are smuggled; refuse the message.
        raise malformed("both transfer-encoding and content-length")
    if codings and codings != [b"chunked"]:
        # Any other coding would have to be undone here; httpx decodes content-encoding only.
        raise malformed("unsupported transfer-encoding", b", ".join(codings))
    length = _content_length(lengths)
    return Framing(chunked=bool(codings), length=length, keep_alive=not close)


def _content_length(values: list[bytes]) -> int | None:
    found: int | None = None
    for raw in values:
        for part in raw.split(b","):  # `Content-Length: 5, 5` is allowed when all agree
            digits = part.strip(b" \t")
            if not digits.isdigit():
                raise malformed("bad content-length", raw)
            # More digits than any cap has: no need to build (or limit-check) a huge int.
            length = int(digits) if len(digits) <= _MAX_LENGTH_DIGITS else _HUGE
            if found is not None and length != found:
                raise malformed("content-length values disagree", raw)
            found = length
    return found


async def read_exactly(connection: Readable, length: int, limit: int) -> bytes:
    if length > limit:
        raise BodyTooLarge(length)
    buffer = connection.buffer
    while len(buffer) < length:
        if not await connection.read_more(length - len(buffer)):
            raise httpx2.RemoteProtocolError("incomplete response body")
    content = bytes(buffer[:length])
    del buffer[:length]
    return content


async def read_until_close(connection: Readable, limit: int) -> bytes:
    buffer = connection.buffer
    # Never ask for more than one byte past the cap: the cap bounds what is read, not only
    # what is kept (a stream reads no further; a protocol connection stops reading 64 KiB on).
    while len(buffer) <= limit and await connection.read_more(limit + 1 - len(buffer)):
        pass
    if len(buffer) > limit:
        raise BodyTooLarge(None)
    content = bytes(buffer)
    buffer.clear()
    return content


async def _read_line(connection: Readable, what: str) -> bytes:
    """One CRLF-terminated line of the chunked framing, at most `MAX_LINE` bytes."""
    buffer = connection.buffer
    while (end := buffer.find(b"\r\n", 0, MAX_LINE + 2)) < 0:
        if len(buffer) > MAX_LINE:
            raise malformed(f"{what} line longer than {MAX_LINE} bytes", bytes(buffer))
        if not await connection.read_more(READ_SIZE):
            raise httpx2.RemoteProtocolError("incomplete chunked body")
    line = bytes(buffer[:end])
    del buffer[: end + 2]
    return line


def _chunk_size(line: bytes) -> int:
    """`1*HEXDIG [ BWS ";" chunk-ext ]`; extensions are checked for control bytes, then ignored."""
    digits, sep, extension = line.partition(b";")
    if sep:
        digits = digits.rstrip(b" \t")  # BWS is allowed before the `;` only
        if has_control(extension.replace(b"\t", b"")):
            raise malformed("bad chunk extension", line)
    if not digits or len(digits) > _MAX_CHUNK_DIGITS or digits.translate(None, _HEXDIG):
        # Not int(x, 16): it takes '-', '+', '0x', blanks and '_', and a negative size once
        # let a server push the running total below zero and stream past the cap.
        raise malformed("bad chunk size", line)
    return int(digits, 16)


async def read_chunked(connection: Readable, limit: int) -> bytes:
    buffer = connection.buffer
    parts: list[bytes] = []
    total = 0
    while True:
        size = _chunk_size(await _read_line(connection, "chunk size"))
        if size == 0:
            await _skip_trailers(connection)
            return b"".join(parts)
        total += size
        if total > limit:
            raise BodyTooLarge(None)
        while len(buffer) < size + 2:
            if not await connection.read_more(size + 2 - len(buffer)):
                raise httpx2.RemoteProtocolError("incomplete chunk")
        if buffer[size : size + 2] != b"\r\n":
            raise malformed("chunk data not followed by CRLF", bytes(buffer[size:]))
        parts.append(bytes(buffer[:size]))
        del buffer[: size + 2]


async def _skip_trailers(connection: Readable) -> None:
    """Read the trailer section up to its blank line; trailers are checked, then dropped."""
    size = 0
    for _ in range(MAX_HEADERS + 1):
        line = await _read_line(connection, "trailer")
        if not line:
            return
        size += len(line) + 2
        if size > MAX_HEAD:
            raise malformed(f"trailers longer than {MAX_HEAD} bytes")
        field_line(line)
    raise malformed(f"more than {MAX_HEADERS} trailer lines")
