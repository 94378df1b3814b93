import json
import time
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime

import anyio
import httpx2
import pytest

from jevrefine.exceptions import JevrefineError
from jevrefine.jev import (
    Choice,
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
    JudgeServerError,
    JudgeTimeoutError,
    JudgeUsageError,
    JudgeValidationError,
    Noul,
    RetryPolicy,
    Score,
    SystemOneClient,
    UnknownAnswerWarning,
)
from jevrefine.testing import FakeJevServer

API_KEY = "sk-test-SECRET-0123456789"  # the key conftest.py gives the `jev` fixture

QUESTIONS = {
    "is_grounded": Noul("Is every claim supported?", when_false="States an unsupported claim"),
    "department": Choice("Which team?", options={"billing": "Payments", "sales": None}),
    "frustration": Score("How frustrated?", levels=["Calm", "Frustrated", "Very angry"]),
}


# -- construction ----------------------------------------------------------------------------


def test_missing_key_is_an_error_at_construction(monkeypatch) -> None:
    monkeypatch.delenv("TYPESAFE_API_KEY", raising=False)
    with pytest.raises(JudgeUsageError, match="TYPESAFE_API_KEY"):
        JudgeClient()


async def test_environment_fallbacks_and_explicit_arguments_win(monkeypatch, jev_server) -> None:
    monkeypatch.setenv("TYPESAFE_API_KEY", "env-key")
    monkeypatch.setenv("TYPESAFE_BASE_URL", jev_server.base_url + "/")
    monkeypatch.setenv("TYPESAFE_DEFAULT_MODEL", "jev-preview")
    async with JudgeClient() as client:
        assert client.base_url == jev_server.base_url
        assert client.model == "jev-preview"
        await client.system_one("x", {"q": Noul("q?")})
    request = jev_server.requests[-1]
    assert request.headers["authorization"] == "Bearer env-key"
    assert request.json["model"] == "jev-preview"
    async with JudgeClient("explicit", base_url=jev_server.base_url, model="jev-1.13.0") as c:
        await c.system_one("x", {"q": Noul("q?")})
    assert jev_server.requests[-1].headers["authorization"] == "Bearer explicit"
    assert jev_server.requests[-1].json["model"] == "jev-1.13.0"


async def test_an_explicit_empty_key_sends_no_authorization(monkeypatch, jev_server) -> None:
    monkeypatch.delenv("TYPESAFE_API_KEY", raising=False)
    async with JudgeClient("", base_url=jev_server.base_url) as client:
        await client.system_one("x", {"q": Noul("q?")})
    assert "authorization" not in jev_server.requests[-1].headers


@pytest.mark.parametrize(
    "kwargs",
    [
        {"timeout": 0},
        {"total_timeout": -1},
        {"max_concurrency": 0},
        {"base_url": "ftp://x"},
        {"retry": "no"},
    ],
)
def test_bad_settings_are_rejected(kwargs) -> None:
    with pytest.raises(JudgeUsageError):
        JudgeClient("k", **kwargs)


def test_bad_keys_are_rejected_without_echoing_them() -> None:
    with pytest.raises(JudgeUsageError) as info:
        JudgeClient("bad key\n")
    assert "bad key" not in str(info.value)


def test_the_key_is_not_in_the_repr() -> None:
    client = JudgeClient(API_KEY, base_url="http://127.0.0.1:9")
    assert API_KEY not in repr(client)
    assert isinstance(client, SystemOneClient)


# -- the wire --------------------------------------------------------------------------------


async def test_request_shape_and_parsed_answers(jev, jev_server) -> None:
    state = {"user_question": "Refund?", "assistant_answer": "Yes", "z": 1}
    response = await jev.system_one(state, QUESTIONS)
    request = jev_server.requests[-1]
    assert (request.method, request.path) == ("POST", "/v1/systemone")
    assert request.headers["authorization"] == f"Bearer {API_KEY}"
    assert request.headers["accept"] == "application/json"
    assert request.headers["content-type"] == "application/json"
    assert "x-typesafe-retry-count" not in request.headers
    assert list(request.json) == ["state", "model", "questions"]
    assert list(request.json["state"]) == ["user_question", "assistant_answer", "z"]
    assert request.json == {
        "state": state,
        "model": "jev-latest",
        "questions": {qid: q.to_wire() for qid, q in QUESTIONS.items()},
    }
    assert response.model == "jev-1.13.0"
    assert response.request_id is not None
    assert response.request_id.startswith("req_fake_")
    assert list(response.answers) == list(QUESTIONS)
    assert response.usage.input_tokens > 0
    assert response.choice("department").choice in ("billing", "sales")
    score = response.score("frustration")
    assert sum(level * p for level, p in score.probabilities.items()) == pytest.approx(score.score)


async def test_scripted_answers_and_per_call_model(jev, jev_server) -> None:
    jev_server.answer = lambda state, questions: {
        "is_grounded": 0.25,
        "department": "sales",
        "frustration": 1.5,
    }
    response = await jev.system_one("text", QUESTIONS, model="jev-1.13.0")
    assert jev_server.requests[-1].json["model"] == "jev-1.13.0"
    assert response.noul("is_grounded").noul == 0.25
    assert response.choice("department").choice == "sales"
    assert response.score("frustration").score == 1.5
    assert response.score("frustration").probabilities == {0: 0.0, 1: 0.5, 2: 0.5}


async def test_local_validation_happens_before_any_request(jev, jev_server) -> None:
    with pytest.raises(JudgeUsageError, match="at least one question"):
        await jev.system_one("x", {})
    with pytest.raises(JudgeUsageError, match="state must be"):
        await jev.system_one(3, QUESTIONS)  # type: ignore[arg-type]
    with pytest.raises(JudgeUsageError, match="'q'"):
        await jev.system_one("x", {"q": {"type": "score", "instructions": "i", "criteria": ["a"]}})
    assert jev_server.requests == []


async def test_unknown_answer_types_do_not_crash(jev) -> None:
    questions = {"ok": Noul("Fine?"), "dog": {"type": "box", "instructions": "The dog"}}
    with pytest.warns(UnknownAnswerWarning, match="dog"):
        response = await jev.system_one("x", questions, model="jev-1.14.0")
    assert list(response.answers) == ["ok"]
    assert response.unknown_answers["dog"]["type"] == "box"


async def test_models(jev, jev_server) -> None:
    models = await jev.models()
    assert [m.name for m in models] == ["jev-latest", "jev-preview"]
    assert jev_server.requests[-1].method == "GET"


# -- statuses and error bodies ---------------------------------------------------------------

STATUS_CASES = [
    (400, JudgeBadRequestError, False),
    (401, JudgeAuthenticationError, False),
    (403, JudgePermissionDeniedError, False),
    (404, JudgeNotFoundError, False),
    (408, JudgeRequestTimeoutError, True),
    (413, JudgeRequestTooLargeError, False),
    (422, JudgeValidationError, False),
    (429, JudgeRateLimitError, True),
    (500, JudgeServerError, True),
    (503, JudgeServerError, True),
    (529, JudgeOverloadedError, True),
    (418, JudgeAPIError, False),
]


@pytest.mark.parametrize(("status", "cls", "transient"), STATUS_CASES)
async def test_every_status_maps_to_its_error(
    jev, jev_server, sleeps, status, cls, transient
) -> None:
    jev_server.fail(status, times=3)
    with pytest.raises(cls) as info:
        await jev.system_one("x", {"q": Noul("q?")})
    error = info.value
    assert type(error) is cls
    assert isinstance(error, JudgeError)
    assert isinstance(error, JevrefineError)
    assert error.status_code == status
    assert error.is_transient is transient
    assert error.request_id is not None
    assert error.request_id in str(error)
    assert f"HTTP {status}" in str(error)
    assert API_KEY not in str(error)
    assert API_KEY not in repr(error)
    # Transient statuses are retried (2 retries by default), the others never.
    assert len(jev_server.requests) == (3 if transient else 1)
    assert len(sleeps.delays) == (2 if transient else 0)


async def test_529_is_a_server_error_too(jev, jev_server) -> None:
    jev_server.fail(529, times=3)
    with pytest.raises(JudgeServerError, match="Overloaded"):
        await jev.system_one("x", {"q": Noul("q?")})


@pytest.mark.parametrize(
    ("body", "message", "error_type"),
    [
        (
            {"detail": {"error_type": "api_usage_error", "message": "Unknown model: jev-9"}},
            "Unknown model: jev-9",
            "api_usage_error",
        ),
        ({"detail": "Invalid request."}, "Invalid request.", None),
        (
            {"detail": {"error_type": "max_tokens_exceeded"}},
            "longer than the model's context",
            "max_tokens_exceeded",
        ),
        ("plain text failure", "plain text failure", None),
        ({"error": {"message": "from error.message"}}, "from error.message", None),
    ],
)
async def test_detail_shapes_400(jev, jev_server, body, message, error_type) -> None:
    jev_server.fail(400, body=body)
    with pytest.raises(JudgeBadRequestError) as info:
        await jev.system_one("x", {"q": Noul("q?")})
    assert message in info.value.message
    assert message in str(info.value)
    assert info.value.error_type == error_type
    assert info.value.body == body


async def test_detail_list_422_keeps_the_validation_errors(jev, jev_server) -> None:
    detail = [
        {"type": "missing", "loc": ["body", "state"], "msg": "Field required"},
        {
            "type": "string_type",
            "loc": ["body", "questions", "q", "x"],
            "msg": "Input should be a valid string",
        },
    ]
    jev_server.fail(422, body={"detail": detail})
    with pytest.raises(JudgeValidationError) as info:
        await jev.system_one("x", {"q": Noul("q?")})
    assert info.value.errors == detail
    assert info.value.message == (
        "state: Field required; questions.q.x: Input should be a valid string"
    )


async def test_real_server_side_rejections(jev_server, sleeps) -> None:
    async with JudgeClient(
        API_KEY, base_url=jev_server.base_url, retry=RetryPolicy(sleep=sleeps)
    ) as client:
        with pytest.raises(JudgeBadRequestError, match="Unknown model: jev-9"):
            await client.system_one("x", {"q": Noul("q?")}, model="jev-9")
        with pytest.raises(JudgeBadRequestError, match="Invalid request"):
            await client.system_one("x", {"q": {"type": "mystery", "instructions": "?"}})
        with pytest.raises(JudgeBadRequestError, match="Box questions"):
            await client.system_one("x", {"q": {"type": "box", "instructions": "?"}})


async def test_missing_and_wrong_keys(jev_server, sleeps) -> None:
    jev_server.api_key = API_KEY
    async with JudgeClient("", base_url=jev_server.base_url) as client:
        with pytest.raises(JudgePermissionDeniedError, match="api_key"):
            await client.system_one("x", {"q": Noul("q?")})
    async with JudgeClient("sk-wrong-key", base_url=jev_server.base_url) as client:
        with pytest.raises(JudgeAuthenticationError) as info:
            await client.system_one("x", {"q": Noul("q?")})
    assert "sk-wrong-key" not in str(info.value)
    assert "sk-wrong-key" not in repr(info.value)
    async with JudgeClient(API_KEY, base_url=jev_server.base_url) as client:
        await client.system_one("x", {"q": Noul("q?")})


async def test_malformed_json_is_a_response_error_and_not_retried(jev, jev_server) -> None:
    jev_server.malformed()
    with pytest.raises(JudgeResponseError, match="not JSON"):
        await jev.system_one("x", {"q": Noul("q?")})
    assert len(jev_server.requests) == 1


async def test_invalid_answer_is_a_response_error(jev, jev_server) -> None:
    jev_server.answer = lambda s, q: {"q": {"type": "noul", "noul": "high"}}
    with pytest.raises(JudgeResponseError) as info:
        await jev.system_one("x", {"q": Noul("q?")})
    assert info.value.field_path == "answers.q.noul"


async def test_wrong_base_url_path_is_404(jev_server) -> None:
    async with JudgeClient(API_KEY, base_url=jev_server.base_url + "/v1") as client:
        with pytest.raises(JudgeNotFoundError, match="without /v1"):
            await client.system_one("x", {"q": Noul("q?")})


# -- retries ---------------------------------------------------------------------------------


async def test_backoff_doubles_and_retry_count_header_is_sent(jev, jev_server, sleeps) -> None:
    jev_server.fail(503, times=2)
    response = await jev.system_one("x", {"q": Noul("q?")})
    assert response.noul("q")
    assert sleeps.delays == [0.5, 1.0]
    headers = [r.headers.get("x-typesafe-retry-count") for r in jev_server.requests]
    assert headers == [None, "1", "2"]


async def test_backoff_is_capped_and_jitter_stays_in_bounds(jev_server, sleeps) -> None:
    policy = RetryPolicy(max_retries=6, sleep=sleeps, jitter=0.0)
    assert [policy.backoff(n) for n in range(1, 7)] == [0.5, 1.0, 2.0, 4.0, 5.0, 5.0]
    jittered = RetryPolicy(jitter=0.25)
    for n in range(1, 5):
        base = min(5.0, 0.5 * 2 ** (n - 1))
        for _ in range(50):
            assert base * 0.75 <= jittered.backoff(n) <= base
    assert RetryPolicy(initial_backoff=0).backoff(3) == 0.0


async def test_max_retries_zero_means_one_attempt(jev_server, sleeps) -> None:
    async with JudgeClient(
        API_KEY, base_url=jev_server.base_url, retry=RetryPolicy(max_retries=0, sleep=sleeps)
    ) as client:
        jev_server.fail(503)
        with pytest.raises(JudgeServerError):
            await client.system_one("x", {"q": Noul("q?")})
    assert len(jev_server.requests) == 1
    assert sleeps.delays == []


async def test_retry_statuses_are_configurable(jev_server, sleeps) -> None:
    policy = RetryPolicy(retry_statuses=frozenset({500}), sleep=sleeps)
    async with JudgeClient(API_KEY, base_url=jev_server.base_url, retry=policy) as client:
        jev_server.fail(503)
        with pytest.raises(JudgeServerError):
            await client.system_one("x", {"q": Noul("q?")})
    assert len(jev_server.requests) == 1


async def test_retry_after_ms_wins_over_retry_after(jev, jev_server, sleeps) -> None:
    jev_server.fail(429, headers={"retry-after-ms": "250", "retry-after": "7"})
    await jev.system_one("x", {"q": Noul("q?")})
    assert sleeps.delays == [0.25]


async def test_retry_after_in_seconds(jev, jev_server, sleeps) -> None:
    jev_server.fail(529, headers={"retry-after": "3"})
    await jev.system_one("x", {"q": Noul("q?")})
    assert sleeps.delays == [3.0]


async def test_retry_after_as_http_date(jev, jev_server, sleeps) -> None:
    when = datetime.now(UTC) + timedelta(seconds=4)
    jev_server.fail(429, headers={"retry-after": format_datetime(when, usegmt=True)})
    await jev.system_one("x", {"q": Noul("q?")})
    assert len(sleeps.delays) == 1
    assert 2.5 <= sleeps.delays[0] <= 4.0


async def test_rate_limit_error_carries_retry_after(jev_server, sleeps) -> None:
    async with JudgeClient(
        API_KEY, base_url=jev_server.base_url, retry=RetryPolicy(max_retries=0, sleep=sleeps)
    ) as client:
        jev_server.fail(429, headers={"retry-after": "12"})
        with pytest.raises(JudgeRateLimitError) as info:
            await client.system_one("x", {"q": Noul("q?")})
    assert info.value.retry_after == 12.0


async def test_retry_after_ignored_when_not_respected(jev_server, sleeps) -> None:
    policy = RetryPolicy(respect_retry_after=False, jitter=0.0, sleep=sleeps)
    async with JudgeClient(API_KEY, base_url=jev_server.base_url, retry=policy) as client:
        jev_server.fail(429, headers={"retry-after": "9"})
        await client.system_one("x", {"q": Noul("q?")})
    assert sleeps.delays == [0.5]


async def test_a_wait_that_would_cross_the_budget_is_not_made(jev_server, sleeps) -> None:
    async with JudgeClient(
        API_KEY, base_url=jev_server.base_url, total_timeout=2.0, retry=RetryPolicy(sleep=sleeps)
    ) as client:
        jev_server.fail(429, headers={"retry-after": "5"})
        with pytest.raises(JudgeRateLimitError):
            await client.system_one("x", {"q": Noul("q?")})
    assert sleeps.delays == []
    assert len(jev_server.requests) == 1


async def test_the_budget_bounds_a_slow_attempt(jev_server, sleeps) -> None:
    jev_server.delay(3.0)
    async with JudgeClient(
        API_KEY, base_url=jev_server.base_url, total_timeout=0.3, retry=RetryPolicy(sleep=sleeps)
    ) as client:
        started = time.perf_counter()
        with pytest.raises(JudgeTimeoutError, match="total_timeout"):
            await client.system_one("x", {"q": Noul("q?")})
    assert time.perf_counter() - started < 1.5


async def test_read_timeouts_are_retried(jev_server, sleeps) -> None:
    jev_server.delay(2.0)
    async with JudgeClient(
        API_KEY, base_url=jev_server.base_url, timeout=0.2, retry=RetryPolicy(sleep=sleeps)
    ) as client:
        response = await client.system_one("x", {"q": Noul("q?")})
    assert response.noul("q")
    assert len(sleeps.delays) == 1


async def test_timeouts_exhausting_retries_raise_a_timeout_error(jev_server, sleeps) -> None:
    jev_server.delay(2.0, times=2)
    async with JudgeClient(
        API_KEY,
        base_url=jev_server.base_url,
        timeout=0.1,
        retry=RetryPolicy(max_retries=1, sleep=sleeps),
    ) as client:
        with pytest.raises(JudgeTimeoutError) as info:
            await client.system_one("x", {"q": Noul("q?")})
    assert info.value.is_transient
    assert isinstance(info.value, JudgeConnectionError)


async def test_dropped_connections_are_retried(jev, jev_server, sleeps) -> None:
    jev_server.drop_connections(times=2)
    response = await jev.system_one("x", {"q": Noul("q?")})
    assert response.noul("q")
    assert len(sleeps.delays) == 2


async def test_connection_refused(sleeps) -> None:
    with anyio.fail_after(10):
        async with JudgeClient(
            API_KEY, base_url="http://127.0.0.1:9", retry=RetryPolicy(sleep=sleeps)
        ) as client:
            with pytest.raises(JudgeConnectionError) as info:
                await client.system_one("x", {"q": Noul("q?")})
    assert info.value.is_transient
    assert len(sleeps.delays) == 2
    assert API_KEY not in str(info.value)
    assert info.value.__cause__ is None  # httpx's error (holding the request headers) is dropped


@pytest.mark.parametrize(
    ("headers", "expected"),
    [({"retry-after": "-1"}, 0.5), ({"retry-after": "soon"}, 0.5), ({"retry-after-ms": "x"}, 0.5)],
)
async def test_unparseable_retry_after_falls_back_to_backoff(
    jev, jev_server, sleeps, headers, expected
) -> None:
    jev_server.fail(503, headers=headers)
    await jev.system_one("x", {"q": Noul("q?")})
    assert sleeps.delays == [expected]


def test_retry_policy_validation() -> None:
    with pytest.raises(JudgeUsageError):
        RetryPolicy(max_retries=-1)
    with pytest.raises(JudgeUsageError):
        RetryPolicy(jitter=2)
    with pytest.raises(JudgeUsageError):
        RetryPolicy(max_backoff=float("inf"))
    assert RetryPolicy(retry_statuses={500}).retry_statuses == frozenset({500})  # type: ignore[arg-type]
    assert 529 in RetryPolicy().retry_statuses
    assert 408 in RetryPolicy().retry_statuses


# -- concurrency and pooling ---------------------------------------------------------------


async def test_max_concurrency_bounds_requests_in_flight(sleeps) -> None:
    in_flight = 0
    peak = 0

    async def answer(state, questions):
        nonlocal in_flight, peak
        in_flight += 1
        peak = max(peak, in_flight)
        import asyncio

        await asyncio.sleep(0.05)
        in_flight -= 1
        return {}

    async with (
        FakeJevServer(answer) as server,
        JudgeClient(
            API_KEY, base_url=server.base_url, max_concurrency=3, retry=RetryPolicy(sleep=sleeps)
        ) as client,
        anyio.create_task_group() as group,
    ):
        for i in range(12):
            group.start_soon(client.system_one, f"s{i}", {"q": Noul("q?")})
    assert peak == 3
    assert len(server.requests) == 12


async def test_a_given_http_client_is_used_and_not_closed(jev_server) -> None:
    http = httpx2.AsyncClient()
    async with JudgeClient(API_KEY, base_url=jev_server.base_url, http_client=http) as client:
        await client.system_one("x", {"q": Noul("q?")})
    assert not http.is_closed
    await http.aclose()


async def test_one_connection_serves_sequential_calls(jev, jev_server) -> None:
    for _ in range(5):
        await jev.system_one("x", {"q": Noul("q?")})
    # keep-alive: the fake server saw no "connection: close"
    assert all(r.headers.get("connection") != "close" for r in jev_server.requests)
    assert json.dumps(jev_server.requests[0].json) == json.dumps(jev_server.requests[-1].json)


@pytest.mark.local_model
async def test_llama_cpp_system_one_endpoint_without_a_key(local_server) -> None:
    # llama.cpp serves /v1/systemone for decision models only; SmolLM2 is not one, so the
    # endpoint answers 501 with an OpenAI-style error body. This checks the keyless local path.
    async with JudgeClient("", base_url=local_server.url, retry=RetryPolicy(max_retries=0)) as c:
        with pytest.raises(JudgeServerError) as info:
            await c.system_one("Paris is in France.", {"q": Noul("Is it true?")}, model="smollm2")
        models = await c.models()
    assert info.value.status_code == 501
    assert "not a decision model" in info.value.message
    assert info.value.error_type == "not_supported_error"
    assert "smollm2" in [m.name for m in models]
