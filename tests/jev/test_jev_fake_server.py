"""FakeJevServer answers the shapes of spec/jev-api.md, checked with a plain HTTP client."""

import httpx2
import pytest

from jevrefine.testing import FakeJevServer

QUESTIONS = {
    "is_grounded": {
        "type": "noul",
        "instructions": "Is every claim supported by `context`?",
        "criteria": {"true": "Every claim is supported", "false": "States an unsupported claim"},
    },
    "department": {
        "type": "choice",
        "instructions": "Which team should handle this?",
        "criteria": {"billing": "Payments", "technical": "Bugs, outages", "sales": None},
    },
    "frustration": {
        "type": "score",
        "instructions": "How frustrated is the customer?",
        "criteria": ["Calm", "Frustrated", "Very angry"],
    },
}


async def _post(server, body, **kwargs):
    async with httpx2.AsyncClient() as http:
        return await http.post(server.base_url + "/v1/systemone", json=body, **kwargs)


async def test_answers_have_the_spec_shapes() -> None:
    async with FakeJevServer() as server:
        response = await _post(
            server, {"model": "jev-latest", "state": "hi", "questions": QUESTIONS}
        )
    assert response.status_code == 200
    assert response.headers["x-typesafe-request-id"].startswith("req_fake_")
    body = response.json()
    assert set(body) == {"model", "answers", "usage"}
    assert body["model"] == "jev-1.13.0"
    assert set(body["usage"]) == {"input_tokens", "output_tokens"}
    answers = body["answers"]
    assert list(answers) == list(QUESTIONS)
    assert set(answers["is_grounded"]) == {"type", "noul"}
    assert 0 <= answers["is_grounded"]["noul"] <= 1
    choice = answers["department"]
    assert set(choice) == {"type", "choice", "confidence", "probabilities"}
    assert choice["choice"] == max(choice["probabilities"], key=choice["probabilities"].get)
    assert sum(choice["probabilities"].values()) == pytest.approx(1.0)
    score = answers["frustration"]
    assert set(score) == {"type", "score", "confidence", "legend", "probabilities"}
    assert score["legend"] == {"0": "Calm", "1": "Frustrated", "2": "Very angry"}
    assert sum(int(k) * p for k, p in score["probabilities"].items()) == pytest.approx(
        score["score"]
    )


async def test_default_answers_are_deterministic_across_servers() -> None:
    body = {"model": "jev-latest", "state": {"a": 1}, "questions": QUESTIONS}
    async with FakeJevServer() as one:
        first = (await _post(one, body)).json()["answers"]
    async with FakeJevServer() as two:
        second = (await _post(two, body)).json()["answers"]
        other = (await _post(two, {**body, "state": {"a": 2}})).json()["answers"]
    assert first == second
    assert first != other


async def test_async_answer_function_and_full_wire_answers() -> None:
    async def answer(state, questions):
        return {"is_grounded": {"type": "noul", "noul": 0.123}, "department": "technical"}

    async with FakeJevServer(answer) as server:
        body = (
            await _post(server, {"model": "jev-latest", "state": "x", "questions": QUESTIONS})
        ).json()
    assert body["answers"]["is_grounded"] == {"type": "noul", "noul": 0.123}
    assert body["answers"]["department"]["choice"] == "technical"


@pytest.mark.parametrize(
    ("body", "loc"),
    [
        ({"model": "jev-latest", "questions": QUESTIONS}, ["body", "state"]),
        ({"model": "jev-latest", "state": 3, "questions": QUESTIONS}, ["body", "state"]),
        ({"model": "jev-latest", "state": None, "questions": QUESTIONS}, ["body", "state"]),
        ({"model": "jev-latest", "state": "x", "questions": {}}, ["body", "questions"]),
        (
            {"model": "jev-latest", "state": "x", "questions": QUESTIONS, "extra": 1},
            ["body", "extra"],
        ),
        (
            {
                "model": "jev-latest",
                "state": "x",
                "questions": {"s": {"type": "score", "instructions": "?", "criteria": ["one"]}},
            },
            ["body", "questions", "s", "score", "criteria"],
        ),
    ],
)
async def test_validation_failures_are_422_lists(body, loc) -> None:
    async with FakeJevServer() as server:
        response = await _post(server, body)
    assert response.status_code == 422
    detail = response.json()["detail"]
    assert isinstance(detail, list)
    assert detail[0]["loc"] == loc
    assert isinstance(detail[0]["msg"], str)


@pytest.mark.parametrize(
    ("questions", "model", "message"),
    [
        (QUESTIONS, "jev-9", "Unknown model: jev-9"),
        (
            {"c": {"type": "choice", "instructions": "?", "criteria": {}}},
            "jev-latest",
            "Choice question must have at least one choice: c",
        ),
        (
            {
                "c": {
                    "type": "choice",
                    "instructions": "?",
                    "criteria": {str(i): None for i in range(256)},
                }
            },
            "jev-latest",
            "Too many choices. Must have at most 255 choices.",
        ),
        (
            {"s": {"type": "score", "instructions": "?", "criteria": [str(i) for i in range(11)]}},
            "jev-latest",
            "Too many score levels. Must have at most 10 levels.",
        ),
    ],
)
async def test_limits_are_400_with_object_detail(questions, model, message) -> None:
    async with FakeJevServer() as server:
        response = await _post(server, {"model": model, "state": "x", "questions": questions})
    assert response.status_code == 400
    assert response.json() == {"detail": {"error_type": "api_usage_error", "message": message}}


async def test_unknown_question_type_is_400_with_string_detail_and_routes() -> None:
    async with FakeJevServer() as server:
        bad = await _post(
            server,
            {
                "model": "jev-latest",
                "state": "x",
                "questions": {"q": {"type": "nope", "instructions": "?"}},
            },
        )
        async with httpx2.AsyncClient() as http:
            missing = await http.get(server.base_url + "/v2/other")
            models = await http.get(server.base_url + "/v1/models")
            wrong_method = await http.get(server.base_url + "/v1/systemone")
    assert (bad.status_code, bad.json()) == (400, {"detail": "Invalid request."})
    assert (missing.status_code, missing.json()) == (404, {"detail": "Not Found"})
    assert models.json()["models"][0] == {
        "name": "jev-latest",
        "description": "The latest stable Jev model.",
        "release_date": "2026-09-15",
    }
    assert wrong_method.status_code == 405


async def test_injected_failures_use_the_api_bodies_and_record_requests() -> None:
    async with FakeJevServer() as server:
        server.fail(529)
        server.fail(401, times=1)
        server.fail(429, body="slow down", headers={"retry-after": "1"})
        body = {"model": "jev-latest", "state": "x", "questions": QUESTIONS}
        first, second, third, fourth = [await _post(server, body) for _ in range(4)]
    assert (first.status_code, first.json()) == (529, {"detail": "Overloaded"})
    assert second.json()["detail"]["error_type"] == "authentication_error"
    assert (third.status_code, third.text, third.headers["retry-after"]) == (429, "slow down", "1")
    assert fourth.status_code == 200
    assert len(server.requests) == 4
    assert server.requests[0].json == body
    assert all(r.headers.get("x-typesafe-request-id") is None for r in server.requests)
    assert first.headers["x-typesafe-request-id"] != fourth.headers["x-typesafe-request-id"]


async def test_each_fail_call_carries_its_own_request_id_unless_the_test_gives_one() -> None:
    async with FakeJevServer() as server:
        server.fail(503, times=2)  # one fault, one id: the differential test sends it to two SDKs
        server.fail(503)
        server.fail(503, headers={"x-typesafe-request-id": "req_given"})
        body = {"model": "jev-latest", "state": "x", "questions": QUESTIONS}
        answers = [await _post(server, body) for _ in range(4)]
    ids = [r.headers["x-typesafe-request-id"] for r in answers]
    assert all(rid.startswith("req_fake_") for rid in ids[:3])
    assert ids[0] == ids[1] != ids[2]
    assert ids[3] == "req_given"


async def test_a_broken_answer_function_is_a_500() -> None:
    async with FakeJevServer(lambda s, q: {"department": "not-a-label"}) as server:
        response = await _post(
            server, {"model": "jev-latest", "state": "x", "questions": QUESTIONS}
        )
    assert response.status_code == 500
    assert "not-a-label" in response.text


async def test_oversize_requests_get_max_tokens_exceeded() -> None:
    from jevrefine.jev import JudgeBadRequestError, JudgeClient, Noul

    async with FakeJevServer() as server, JudgeClient("k", base_url=server.base_url) as client:
        with pytest.raises(JudgeBadRequestError) as info:
            await client.system_one("word " * 60_000, {"q": Noul("q?")})
    assert info.value.error_type == "max_tokens_exceeded"
    assert "context" in info.value.message


async def test_unknown_content_encoding_is_415() -> None:
    async with FakeJevServer() as server:
        response = await _post(
            server,
            {"model": "jev-latest", "state": "x", "questions": QUESTIONS},
            headers={"content-encoding": "br"},
        )
    assert response.status_code == 415
