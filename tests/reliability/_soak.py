"""The soak's fault layer: a raw asyncio proxy on 127.0.0.1 in front of each fake server.

The proxy reads each HTTP/1.1 request whole, finds the refinement it belongs to (`soak-<n>` in
the body), and decides from a seeded hash of (seed, server, refinement, how many requests of that
refinement it has seen) whether to forward it or to break it. The decision does not depend on
arrival order, so the faults a refinement meets are the same on every run, however the 1,000
refinements interleave.

Faults: a connection reset before any answer, a reset in the middle of the answer (the server
did handle the request), 429 with `Retry-After`, 500, a stall past the client's timeout, and a
200 whose body is not JSON (cut-off JSON or plain garbage).

`python _soak.py SEED RATE TIMEOUT` runs both fake servers (model: `FakeOpenAIServer`, judge:
`FakeJevServer`) with a proxy in front of each, in a process of their own: their work then neither
holds the GIL of the process under test nor counts as a stall of its event loop, as with real
servers. It prints the proxies' ports as one JSON line, serves until stdin closes, then prints
what each proxy saw (`ProxyLog.to_json`) as a second line.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import re
import socket
import struct
import sys
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final, Literal, TypeAlias

from jevrefine.advisors.self_refine import DEFAULT_FEEDBACK_TEMPLATE

FaultKind: TypeAlias = Literal["reset", "reset_mid_body", "429", "500", "stall", "malformed"]
KINDS: Final[tuple[FaultKind, ...]] = (
    "reset",
    "reset_mid_body",
    "429",
    "500",
    "stall",
    "malformed",
)
TRANSIENT_KINDS: Final = frozenset({"reset", "reset_mid_body", "429", "500", "stall"})
RETRY_AFTER_SECONDS: Final = 1
"""What a 429 asks for; the next request of that refinement must come no sooner."""

_KEY = re.compile(rb"soak-(\d+)")
_MAX_HEAD = 64 * 1024


@dataclass(frozen=True, slots=True)
class FaultPlan:
    """Which request meets which fault: a pure function of the seed and the request's place."""

    seed: int
    rate: float
    kinds: tuple[FaultKind, ...] = KINDS
    """The faults drawn among (evenly)."""

    def decide(self, server: str, key: int, nth: int) -> FaultKind | None:
        """The fault for the `nth` (0-based) request of refinement `key` at `server`, if any."""
        text = f"{self.seed}:{server}:{key}:{nth}".encode()
        digest = hashlib.blake2b(text, digest_size=16).digest()
        draw = int.from_bytes(digest[:8], "big") / 2**64
        if draw >= self.rate:
            return None
        return self.kinds[int.from_bytes(digest[8:], "big") % len(self.kinds)]


@dataclass(frozen=True, slots=True)
class Seen:
    """One request the proxy received: when, and the fault it met (`None`: forwarded)."""

    at: float
    fault: FaultKind | None


@dataclass
class ProxyLog:
    """What one proxy saw, per refinement."""

    requests: dict[int, list[Seen]] = field(default_factory=lambda: defaultdict(list))
    faults: Counter[str] = field(default_factory=Counter)
    unkeyed: int = 0
    broken: list[str] = field(default_factory=list)

    def total(self) -> int:
        return sum(len(seen) for seen in self.requests.values())

    def to_json(self) -> dict[str, Any]:
        return {
            "requests": {str(k): [[s.at, s.fault] for s in v] for k, v in self.requests.items()},
            "unkeyed": self.unkeyed,
            "broken": self.broken,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ProxyLog:
        log = cls(unkeyed=data["unkeyed"], broken=list(data["broken"]))
        for key, seen in data["requests"].items():
            log.requests[int(key)] = [Seen(at, fault) for at, fault in seen]
            log.faults.update(fault for _, fault in seen if fault is not None)
        return log


class FaultProxy:
    """Forwards HTTP/1.1 to `upstream` (host, port), breaking requests as `plan` says.

    `timeout` is the client's timeout: a stall holds the request until the client hangs up, or
    six times that long (a client whose own loop is slow must still be the one that gives up,
    so that a stall always ends in its timeout). `error_body(status)` is the API's error body
    for a status; `bad_answers`, when given, replace the unreadable bodies of `malformed`.
    """

    def __init__(
        self,
        name: str,
        upstream: tuple[str, int],
        plan: FaultPlan,
        *,
        timeout: float,
        error_body: Callable[[int], bytes],
        bad_answers: tuple[bytes, ...] = (),
    ) -> None:
        self.name = name
        self._bad_answers = bad_answers
        self.log = ProxyLog()
        self._upstream = upstream
        self._plan = plan
        self._stall = 6 * timeout
        self._error_body = error_body
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self.port = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def open(self) -> None:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0, backlog=4096)
        self.port = self._server.sockets[0].getsockname()[1]

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        if self._server is not None:
            await self._server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        upstream: tuple[asyncio.StreamReader, asyncio.StreamWriter] | None = None
        try:
            while True:
                request = await _read_message(reader, request=True)
                if request is None:
                    return
                head, body = request
                fault = self._record(body)
                if fault == "reset":
                    _reset(writer)
                    return
                if fault == "stall":
                    # Hold the request until the client gives up (it closes) or long past it.
                    with contextlib.suppress(TimeoutError, ConnectionError):
                        await asyncio.wait_for(reader.read(1), self._stall)
                    _reset(writer)
                    return
                if fault in ("429", "500"):
                    writer.write(self._error(int(fault)))
                    await writer.drain()
                    continue
                if fault == "malformed":
                    writer.write(self._malformed(body))
                    await writer.drain()
                    continue
                if upstream is None:
                    upstream = await asyncio.open_connection(*self._upstream)
                upstream[1].write(head + body)
                await upstream[1].drain()
                response = await _read_message(upstream[0], request=False)
                if response is None:
                    _reset(writer)
                    return
                whole = response[0] + response[1]
                if fault == "reset_mid_body":
                    writer.write(whole[: len(response[0]) + len(response[1]) // 2])
                    await writer.drain()
                    _reset(writer)
                    return
                writer.write(whole)
                await writer.drain()
        except (ConnectionError, asyncio.IncompleteReadError, asyncio.LimitOverrunError) as exc:
            self.log.broken.append(f"{type(exc).__name__}: {exc}"[:200])
        except asyncio.CancelledError:
            pass
        finally:
            self._tasks.discard(task)
            if upstream is not None:
                upstream[1].close()
            writer.close()

    def _record(self, body: bytes) -> FaultKind | None:
        match = _KEY.search(body)
        if match is None:  # not a soak request (none is expected): pass it through untouched
            self.log.unkeyed += 1
            return None
        key = int(match.group(1))
        seen = self.log.requests[key]
        fault = self._plan.decide(self.name, key, len(seen))
        seen.append(Seen(time.monotonic(), fault))
        if fault is not None:
            self.log.faults[fault] += 1
        return fault

    def _error(self, status: int) -> bytes:
        body = self._error_body(status)
        extra = f"retry-after: {RETRY_AFTER_SECONDS}\r\n" if status == 429 else ""
        phrase = "Too Many Requests" if status == 429 else "Internal Server Error"
        head = (
            f"HTTP/1.1 {status} {phrase}\r\ncontent-type: application/json\r\n{extra}"
            f"content-length: {len(body)}\r\nconnection: keep-alive\r\n\r\n"
        )
        return head.encode("latin-1") + body

    def _malformed(self, request_body: bytes) -> bytes:
        match = _KEY.search(request_body)
        key = int(match.group(1)) if match else 0
        if self._bad_answers:  # valid JSON that is no valid answer, picked by the refinement
            return _ok(self._bad_answers[key % len(self._bad_answers)])
        # Two shapes, picked by the refinement so a run repeats: cut-off JSON, and not JSON.
        return _ok(b'{"id": "x", "choices": [{"mess' if key % 2 else b"<html>oops</html>")


def _ok(body: bytes) -> bytes:
    head = (
        "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n"
        f"content-length: {len(body)}\r\nconnection: keep-alive\r\n\r\n"
    )
    return head.encode("latin-1") + body


def _reset(writer: asyncio.StreamWriter) -> None:
    """Close with RST (SO_LINGER 0), what a crashed peer looks like, not a clean FIN."""
    with contextlib.suppress(OSError):
        sock = writer.transport.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    writer.transport.abort()


async def _read_message(
    reader: asyncio.StreamReader, *, request: bool
) -> tuple[bytes, bytes] | None:
    """One HTTP/1.1 message with a `content-length` body: (head, body); `None` at a clean EOF."""
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except asyncio.IncompleteReadError as exc:
        if not exc.partial:
            return None
        raise
    if len(head) > _MAX_HEAD:
        raise ConnectionError("head too large")
    length = 0
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        lower = name.strip().lower()
        if lower == b"content-length":
            length = int(value.strip())
        elif lower == b"transfer-encoding":
            # Neither the clients' requests nor the fakes' JSON answers are chunked.
            raise ConnectionError(f"chunked {'request' if request else 'response'} not expected")
    body = await reader.readexactly(length) if length else b""
    return head, body


class ProxyThread:
    """Runs proxies on their own event loop in a daemon thread."""

    def __init__(self, *proxies: FaultProxy) -> None:
        self.proxies = proxies
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="soak-proxies")
        self._thread.daemon = True

    def __enter__(self) -> ProxyThread:
        self._thread.start()
        for proxy in self.proxies:
            asyncio.run_coroutine_threadsafe(proxy.open(), self._loop).result(timeout=10)
        return self

    def call(self, function: Callable[[], Any]) -> Any:
        """`function()` run on the proxies' loop, so it reads their state between two events."""

        async def run() -> Any:
            return function()

        return asyncio.run_coroutine_threadsafe(run(), self._loop).result(timeout=10)

    def __exit__(self, *exc: object) -> None:
        for proxy in self.proxies:
            with contextlib.suppress(Exception):
                asyncio.run_coroutine_threadsafe(proxy.close(), self._loop).result(timeout=10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=10)
        self._loop.close()


# -- the servers' side, in its own process -------------------------------------------------------

REJECTED_FIRST: Final = 5
"""Every fifth refinement's first answer is rejected by the judge, so its loop runs twice."""
_TEXT_KEY = re.compile(r"soak-(\d+)")


def _key_of(text: str) -> int:
    match = _TEXT_KEY.search(text)
    if match is None:
        raise ValueError(f"no soak key in {text[:200]!r}")
    return int(match.group(1))


# What a retry's prompt carries, read from the template so that its wording may change.
_RETRY_MARK = DEFAULT_FEEDBACK_TEMPLATE.split("{feedback}")[0].strip()


def model_reply(body: dict[str, Any]) -> str:
    """The model's answer names its refinement, and says when it is a revision."""
    last = str(body["messages"][-1]["content"])
    prefix = "Revised answer" if _RETRY_MARK in last else "Answer"
    return f"{prefix} for soak-{_key_of(last)}."


def judge_answer(state: Any, questions: dict[str, Any]) -> dict[str, Any]:
    """Pass every answer but the first one of every fifth refinement."""
    text = json.dumps(state)
    rejected = _key_of(text) % REJECTED_FIRST == 0 and "Revised answer" not in text
    return {"grounded": 0.2 if rejected else 0.9}


def _openai_error(status: int) -> bytes:
    kind = "rate_limit_exceeded" if status == 429 else "server_error"
    return json.dumps({"error": {"message": "injected", "type": kind, "code": None}}).encode()


def _jev_error(status: int) -> bytes:
    text = "Rate limit exceeded. Please retry later." if status == 429 else "Internal Server Error"
    return json.dumps({"detail": text}).encode()


def _jev_answer(answers: str) -> bytes:
    usage = '"usage": {"input_tokens": 10, "output_tokens": 6}'
    return f'{{"model": "jev-1.13.0", "answers": {answers}, {usage}}}'.encode()


BAD_ANSWERS: Final[dict[str, bytes]] = {
    "empty answers": _jev_answer("{}"),
    "another id": _jev_answer('{"other": {"type": "noul", "noul": 0.9}}'),
    "wrong type": _jev_answer('{"grounded": {"type": "choice", "choice": "yes"}}'),
    "noul Infinity": _jev_answer('{"grounded": {"type": "noul", "noul": Infinity}}'),
    "noul 1e999": _jev_answer('{"grounded": {"type": "noul", "noul": 1e999}}'),
    "noul 7.5": _jev_answer('{"grounded": {"type": "noul", "noul": 7.5}}'),
    "noul NaN": _jev_answer('{"grounded": {"type": "noul", "noul": NaN}}'),
}
"""200 bodies from a broken judge for the question `grounded` (a noul): JSON, but no answer."""


def bad_answer_for(key: int) -> str:
    """The name of the bad answer refinement `key`'s judge gets (`FaultProxy._malformed`)."""
    return list(BAD_ANSWERS)[key % len(BAD_ANSWERS)]


def main(argv: list[str]) -> None:
    """Serve both fakes behind their proxies until stdin closes; print ports, then the logs.

    `argv`: seed, rate, timeout, and a mode: `faults` (every fault on both sides) or
    `bad-answers` (only the judge breaks, each time with one of `BAD_ANSWERS`).
    """
    # Imported here: the test process imports this module for its types only.
    from jevrefine.testing import FakeJevServer, FakeOpenAIServer

    seed, rate, timeout, mode = int(argv[0]), float(argv[1]), float(argv[2]), argv[3]
    plan = FaultPlan(seed=seed, rate=rate)
    bad = mode == "bad-answers"
    model_plan = FaultPlan(seed=seed, rate=0.0) if bad else plan
    judge_plan = FaultPlan(seed=seed, rate=rate, kinds=("malformed",)) if bad else plan
    with FakeOpenAIServer(model_reply) as model_server, FakeJevServer(judge_answer) as jev:
        model = FaultProxy(
            "model",
            ("127.0.0.1", model_server.port),
            model_plan,
            timeout=timeout,
            error_body=_openai_error,
        )
        judge = FaultProxy(
            "judge",
            ("127.0.0.1", jev.port),
            judge_plan,
            timeout=timeout,
            error_body=_jev_error,
            bad_answers=tuple(BAD_ANSWERS.values()) if bad else (),
        )
        with ProxyThread(model, judge) as proxies:
            print(json.dumps({"model": model.port, "judge": judge.port}), flush=True)
            sys.stdin.read()
            logs = proxies.call(lambda: {p.name: p.log.to_json() for p in (model, judge)})
    print(json.dumps(logs), flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
