"""The judge side's fault matrix: `JudgeClient` on `FakeJevServer`, every fault x every policy.

Each case names the promise it proves: retried and succeeded, or the typed error after exactly
the promised number of attempts (requests the server saw). Backoff waits are recorded, not slept.
"""

from __future__ import annotations

import email.utils
import pickle
import time
from collections.abc import AsyncIterator, Callable

import pytest

from jevrefine._http._limits import DEFAULT_MAX_RESPONSE_BYTES
from jevrefine.exceptions import ResponseTooLargeError
from jevrefine.jev import (
    JudgeAPIError,
    JudgeAuthenticationError,
    JudgeBadRequestError,
    JudgeClient,
    JudgeConnectionError,
    JudgeError,
    JudgeNotFoundError,
    JudgeOverloadedError,
    JudgePermissionDeniedError,
    JudgeRateLimitError,
    JudgeRequestTimeoutError,
    JudgeRequestTooLargeError,
    JudgeResponseError,
    JudgeResponseTooLargeError,
    JudgeServerError,
    JudgeTimeoutError,
    JudgeValidationError,
    Noul,
    RetryPolicy,
    SystemOneResponse,
)
from jevrefine.jev.responses import UnknownAnswerWarning
from jevrefine.testing import FakeJevServer
from support import Sleeps, closed_port

QUESTIONS = {"grounded": Noul("Is every claim supported?")}
TIMEOUT = 1.0
"""The timeout for the slow faults, which must hit it once; their retry must answer within it,
even on a loaded machine (at 0.3 s, a retried slow body timed out a second time, now and then,
on a busy 2-core run: two backoff waits where one was promised)."""
SLOW = 2.5
RELAXED = 10.0
"""The timeout for every other transient fault, which must never hit it (as in
test_model_faults.py)."""


def _timeout_for(fault: str) -> float:
    return TIMEOUT if fault.startswith("slow") else RELAXED


def _client(
    server_url: str, recorder: Sleeps, retries: int, timeout: float = TIMEOUT
) -> JudgeClient:
    policy = RetryPolicy(max_retries=retries, sleep=recorder)
    return JudgeClient("test-key", base_url=server_url, retry=policy, timeout=timeout)


# Permanent faults do not wait on the clock; a long timeout keeps a loaded machine (the fake
# writing a 32 MiB body) from turning them into timeouts.
SLOW_OK = 10.0


Fault = Callable[[FakeJevServer], None]

# Transient faults: the default policy (2 retries) recovers from one; with retries off, the
# caller gets the typed error after one attempt.
TRANSIENT: dict[str, tuple[Fault, type[JudgeError]]] = {
    "reset mid-body": (lambda s: s.reset_mid_body(), JudgeConnectionError),
    "reset before answering": (lambda s: s.drop_connections(), JudgeConnectionError),
    "slow headers": (lambda s: s.delay(SLOW), JudgeTimeoutError),
    "slow body": (lambda s: s.slow_body(SLOW), JudgeTimeoutError),
    "408": (lambda s: s.fail(408), JudgeRequestTimeoutError),
    "429": (lambda s: s.fail(429), JudgeRateLimitError),
    "500": (lambda s: s.fail(500), JudgeServerError),
    "502": (lambda s: s.fail(502), JudgeServerError),
    "503": (lambda s: s.fail(503), JudgeServerError),
    "529": (lambda s: s.fail(529), JudgeOverloadedError),
}

# Permanent faults: never retried, whatever the policy; one request only.
PERMANENT: dict[str, tuple[Fault, type[JudgeError]]] = {
    "400": (lambda s: s.fail(400), JudgeBadRequestError),
    "401": (lambda s: s.fail(401), JudgeAuthenticationError),
    "403": (lambda s: s.fail(403), JudgePermissionDeniedError),
    "404": (lambda s: s.fail(404), JudgeNotFoundError),
    "413": (lambda s: s.fail(413), JudgeRequestTooLargeError),
    "422": (lambda s: s.fail(422), JudgeValidationError),
    "malformed JSON": (lambda s: s.malformed(), JudgeResponseError),
    "truncated JSON": (
        lambda s: s.fail(200, b'{"model": "jev-1.13.0", "answers": {"grounded": {"ty'),
        JudgeResponseError,
    ),
    "answers missing": (
        lambda s: s.fail(200, {"model": "jev-1.13.0", "usage": {"input_tokens": 1}}),
        JudgeResponseError,
    ),
    "answer field missing": (
        lambda s: s.fail(200, {"model": "jev-1.13.0", "answers": {"grounded": {"type": "noul"}}}),
        JudgeResponseError,
    ),
    "answers not an object": (
        lambda s: s.fail(200, {"model": "jev-1.13.0", "answers": ["grounded"]}),
        JudgeResponseError,
    ),
    # The declared length alone is over the bound: refused before the body is read.
    "huge body": (
        lambda s: s.huge_body(DEFAULT_MAX_RESPONSE_BYTES + 1),
        JudgeResponseTooLargeError,
    ),
}


async def _ask_through(
    server: FakeJevServer, name: str, *, faults: int, retries: int
) -> tuple[SystemOneResponse | JudgeError, Sleeps]:
    """Queue `faults` of the transient fault `name`, ask once; the answer (or error) and waits."""
    fault, _ = TRANSIENT[name]
    for _ in range(faults):
        fault(server)
    recorder = Sleeps()
    client = _client(server.base_url, recorder, retries=retries, timeout=_timeout_for(name))
    async with client:
        try:
            return await client.system_one("The sky is blue.", QUESTIONS), recorder
        except JudgeError as exc:
            return exc, recorder


@pytest.mark.parametrize("name", list(TRANSIENT))
async def test_transient_fault_is_retried_and_succeeds(
    jev_server: FakeJevServer, name: str
) -> None:
    """Promise: a single transient fault costs one retry, invisible to the caller."""
    response, recorder = await _ask_through(jev_server, name, faults=1, retries=2)
    assert isinstance(response, SystemOneResponse), response
    assert 0.0 <= response.noul("grounded").noul <= 1.0
    assert len(jev_server.requests) == 2
    assert len(recorder.delays) == 1
    # The retry says it is one, like the official SDK.
    assert jev_server.requests[1].headers.get("x-typesafe-retry-count") == "1"


@pytest.mark.parametrize("name", list(TRANSIENT))
async def test_transient_fault_without_retries_raises_typed(
    jev_server: FakeJevServer, name: str
) -> None:
    """Promise: with retries off, exactly one attempt and the typed error of that fault."""
    outcome, recorder = await _ask_through(jev_server, name, faults=1, retries=0)
    assert isinstance(outcome, TRANSIENT[name][1]), outcome
    assert len(jev_server.requests) == 1
    assert recorder.delays == []


@pytest.mark.parametrize("name", list(TRANSIENT))
async def test_persistent_transient_fault_stops_after_the_retries(
    jev_server: FakeJevServer, name: str
) -> None:
    """Promise: a fault that never clears costs exactly 1 + max_retries attempts, then raises."""
    outcome, recorder = await _ask_through(jev_server, name, faults=3, retries=2)
    assert isinstance(outcome, TRANSIENT[name][1]), outcome
    assert len(jev_server.requests) == 3
    assert len(recorder.delays) == 2


@pytest.mark.parametrize("name", list(PERMANENT))
@pytest.mark.parametrize("retries", [0, 2])
async def test_permanent_fault_is_never_retried(
    jev_server: FakeJevServer, name: str, retries: int
) -> None:
    """Promise: client errors and unreadable answers raise at once; the request is sent once."""
    fault, error = PERMANENT[name]
    fault(jev_server)
    recorder = Sleeps()
    async with _client(jev_server.base_url, recorder, retries=retries, timeout=SLOW_OK) as client:
        with pytest.raises(error) as caught:
            await client.system_one("The sky is blue.", QUESTIONS)
    assert len(jev_server.requests) == 1
    assert recorder.delays == []
    if isinstance(caught.value, JudgeAPIError):
        assert caught.value.request_id  # the fake's request id travels with the error
    # The client is still usable: nothing half-read is left on a pooled connection.
    async with _client(jev_server.base_url, recorder, retries=0) as client:
        await client.system_one("The sky is blue.", QUESTIONS)


async def test_huge_chunked_body_is_cut_off(jev_server: FakeJevServer) -> None:
    """Promise: a body with no declared length is read only up to the bound, not to the end."""
    from jevrefine._http import KeepAliveTransport
    from jevrefine.testing._http import HTTPRequest, StreamingHTTPResponse

    sent: list[int] = []

    async def flood() -> AsyncIterator[bytes]:
        for _ in range(1000):  # 1000 x 64 KiB = 64 MiB offered; the bound is 1 MiB
            sent.append(1)
            yield b"x" * 65536

    async def handle(request: HTTPRequest) -> StreamingHTTPResponse:
        return StreamingHTTPResponse(flood(), headers={"content-type": "application/json"})

    jev_server.handle = handle  # type: ignore[method-assign]
    import httpx2

    transport = KeepAliveTransport(max_response_bytes=1024 * 1024)
    async with httpx2.AsyncClient(transport=transport) as http:
        with pytest.raises(ResponseTooLargeError):
            await http.post(jev_server.base_url + "/v1/systemone", content=b"{}")
    # The server could only push what the socket buffers took beyond the 1 MiB read.
    assert len(sent) < 1000


async def test_a_huge_answer_is_the_one_too_large_error_of_both_trees(
    jev_server: FakeJevServer,
) -> None:
    """Promise: past the package's one cap (32 MiB, the models' too) the Jev client raises an
    error that both `except JudgeResponseError` and `except ResponseTooLargeError` catch, naming
    the cap; it is not transient and not retried."""
    jev_server.huge_body(DEFAULT_MAX_RESPONSE_BYTES + 1, chunked=True)
    async with _client(jev_server.base_url, Sleeps(), retries=2, timeout=SLOW_OK) as client:
        with pytest.raises(JudgeResponseTooLargeError) as caught:
            await client.system_one("The sky is blue.", QUESTIONS)
    error = caught.value
    assert isinstance(error, JudgeResponseError)
    assert isinstance(error, ResponseTooLargeError)
    assert error.limit == DEFAULT_MAX_RESPONSE_BYTES == 32 * 1024 * 1024
    assert f"max_response_bytes={DEFAULT_MAX_RESPONSE_BYTES:,}" in str(error)
    assert not error.is_transient
    assert len(jev_server.requests) == 1
    assert pickle.loads(pickle.dumps(error)).limit == error.limit


def _retry_after_date(seconds: int) -> str:
    return email.utils.formatdate(time.time() + seconds, usegmt=True)


@pytest.mark.parametrize(
    ("headers", "expected"),
    [
        ({"retry-after": "3"}, (3.0, 3.0)),
        ({"retry-after-ms": "1500"}, (1.5, 1.5)),
        ({"retry-after-ms": "1500", "retry-after": "9"}, (1.5, 1.5)),  # ms wins
        # An HTTP date: whole seconds on the wire, so allow the clock's rounding.
        # (The date is written when the test runs: see below.)
        ({"retry-after": "DATE+30"}, (28.0, 30.0)),
    ],
)
@pytest.mark.parametrize("status", [429, 503, 529])
async def test_retry_after_wins_over_backoff(
    jev_server: FakeJevServer, headers: dict[str, str], expected: tuple[float, float], status: int
) -> None:
    """Promise: the server's Retry-After (either form) is the wait before the retry."""
    if headers.get("retry-after") == "DATE+30":
        headers = {"retry-after": _retry_after_date(30)}
    jev_server.fail(status, headers=headers)
    recorder = Sleeps()
    policy = RetryPolicy(max_retries=2, sleep=recorder)
    # total_timeout above the longest wait, so the client waits instead of giving up early.
    client = JudgeClient("test-key", base_url=jev_server.base_url, retry=policy, total_timeout=60)
    async with client:
        await client.system_one("The sky is blue.", QUESTIONS)
    assert len(recorder.delays) == 1
    low, high = expected
    assert low <= recorder.delays[0] <= high


async def test_connection_refused_is_retried_then_typed() -> None:
    """Promise: nothing listening is a `JudgeConnectionError` after 1 + max_retries attempts."""
    port = closed_port()
    recorder = Sleeps()
    async with _client(f"http://127.0.0.1:{port}", recorder, retries=2) as client:
        with pytest.raises(JudgeConnectionError) as caught:
            await client.system_one("The sky is blue.", QUESTIONS)
    assert not isinstance(caught.value, JudgeTimeoutError)
    assert len(recorder.delays) == 2


async def test_unknown_answer_type_is_set_aside_with_a_warning(jev_server: FakeJevServer) -> None:
    """Promise: an answer type from a newer API is kept aside, the known answers still served."""
    body = {
        "model": "jev-1.14.0",
        "answers": {
            "grounded": {"type": "noul", "noul": 0.75},
            "region": {"type": "polygon", "points": [[0, 0]]},
        },
        "usage": {"input_tokens": 3, "output_tokens": 0},
        "latency_ms": 12,  # an extra top-level field is ignored
    }
    jev_server.fail(200, body)
    # The question of the newer type is sent in its wire form; only what was asked is answered.
    questions = {**QUESTIONS, "region": {"type": "polygon", "instructions": "Where is the sky?"}}
    async with _client(jev_server.base_url, Sleeps(), retries=2) as client:
        with pytest.warns(UnknownAnswerWarning, match="polygon"):
            response = await client.system_one("The sky is blue.", questions)
    assert response.noul("grounded").noul == 0.75
    assert set(response.unknown_answers) == {"region"}
    assert len(jev_server.requests) == 1


async def test_empty_answers_is_a_response_error(jev_server: FakeJevServer) -> None:
    """Promise: an empty answers map answers none of the questions asked: a `JudgeResponseError`
    naming `answers`, not retried (issue 16: it used to read as "no failure")."""
    from jevrefine.jev import JudgeResponseError

    jev_server.fail(200, {"model": "jev-1.13.0", "answers": {}, "usage": {"input_tokens": 1}})
    async with _client(jev_server.base_url, Sleeps(), retries=2) as client:
        with pytest.raises(JudgeResponseError, match="got none") as caught:
            await client.system_one("The sky is blue.", QUESTIONS)
    assert caught.value.field_path == "answers"
    assert len(jev_server.requests) == 1


async def test_total_timeout_bounds_the_whole_call(jev_server: FakeJevServer) -> None:
    """Promise: slow faults and backoff together never outlast `total_timeout`."""
    jev_server.delay(5.0, times=5)
    client = JudgeClient(
        "test-key",
        base_url=jev_server.base_url,
        retry=RetryPolicy(max_retries=5, initial_backoff=0.05),
        timeout=0.4,
        total_timeout=1.0,
    )
    start = time.monotonic()
    async with client:
        with pytest.raises(JudgeTimeoutError):
            await client.system_one("The sky is blue.", QUESTIONS)
    assert time.monotonic() - start < 2.0
    assert len(jev_server.requests) <= 3


async def test_waiting_for_a_pooled_connection_is_not_a_timeout(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Promise: calls beyond the pool size queue for a connection; only the server's slowness
    counts against `timeout` (before the fix, the queued calls failed with a bare TimeoutError).
    """
    import anyio

    import jevrefine.jev.client as client_module

    monkeypatch.setattr(client_module, "_POOL_SIZE", 2)
    outcomes: list[str] = []
    async with FakeJevServer(latency=0.15) as server:
        client = JudgeClient(
            "test-key", base_url=server.base_url, retry=RetryPolicy(max_retries=0), timeout=0.25
        )
        async with client:

            async def one() -> None:
                try:
                    await client.system_one("The sky is blue.", QUESTIONS)
                    outcomes.append("ok")
                except Exception as exc:
                    outcomes.append(type(exc).__name__)

            async with anyio.create_task_group() as group:
                for _ in range(6):
                    group.start_soon(one)
    assert outcomes == ["ok"] * 6
    assert len(server.requests) == 6


async def test_transport_pool_timeout_is_httpx_typed(jev_server: FakeJevServer) -> None:
    """Promise: the lean transport's pool wait raises httpx's `PoolTimeout`, a TimeoutException,
    never a bare `TimeoutError` that escapes every `except httpx.TransportError`.
    """
    import anyio
    import httpx2

    from jevrefine._http import KeepAliveTransport

    jev_server.delay(0.5)
    errors: list[BaseException] = []
    async with httpx2.AsyncClient(transport=KeepAliveTransport(max_connections=1)) as http:

        async def post() -> None:
            try:
                await http.get(
                    jev_server.base_url + "/v1/models", timeout=httpx2.Timeout(2, pool=0.1)
                )
            except Exception as exc:
                errors.append(exc)

        async with anyio.create_task_group() as group:
            group.start_soon(post)
            await anyio.sleep(0.05)
            group.start_soon(post)
    assert len(errors) == 1
    assert isinstance(errors[0], httpx2.PoolTimeout)


@pytest.mark.parametrize(
    ("fault", "requests", "ok"),
    [
        # No byte of an answer came back on a pooled connection: it may have been closed while
        # idle, so the transport sends once more on a new one (as urllib3 does).
        ("reset before answering", 2, True),
        # The answer had begun: the server handled the request, so it is never sent again.
        ("reset mid-body", 1, False),
    ],
)
async def test_a_reused_connection_is_resent_only_before_any_answer(
    jev_server: FakeJevServer, fault: str, requests: int, ok: bool
) -> None:
    """Promise: with retries off, a request is sent twice only when no answer had begun."""
    recorder = Sleeps()
    async with _client(jev_server.base_url, recorder, retries=0) as client:
        await client.system_one("warm", QUESTIONS)  # leaves a pooled keep-alive connection
        before = len(jev_server.requests)
        TRANSIENT[fault][0](jev_server)
        if ok:
            await client.system_one("The sky is blue.", QUESTIONS)
        else:
            with pytest.raises(JudgeConnectionError):
                await client.system_one("The sky is blue.", QUESTIONS)
    assert len(jev_server.requests) - before == requests
    assert recorder.delays == []
