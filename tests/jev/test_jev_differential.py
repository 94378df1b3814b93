"""The official `typesafe-sdk` and `JudgeClient`: same body on the wire, same values parsed."""

import json

import pytest

ts = pytest.importorskip("typesafe_sdk", reason="the differential test needs typesafe-sdk")

from jevrefine.jev import (  # noqa: E402
    Choice,
    JudgeAPIError,
    JudgeClient,
    Noul,
    RetryPolicy,
    Score,
)
from jevrefine.testing import FakeJevServer  # noqa: E402

OURS = {
    "is_grounded": Noul(
        "Is every claim supported by `context`?",
        when_true="Every claim is supported",
        when_false={"text": "States an unsupported claim"},
    ),
    "plain": Noul("Is it polite?"),
    "department": Choice(
        "Which team should handle this?",
        options={
            "billing": "Payments, invoicing, refunds",
            "technical": ["Bugs", "outages"],
            "sales": None,
        },
    ),
    "frustration": Score(
        "How frustrated is the customer?", levels=["Calm", "Frustrated", "Very angry"]
    ),
}
THEIRS = {
    "is_grounded": ts.Noul(
        instructions="Is every claim supported by `context`?",
        criteria={
            "true": "Every claim is supported",
            "false": {"text": "States an unsupported claim"},
        },
    ),
    "plain": ts.Noul(instructions="Is it polite?"),
    "department": ts.Choice(
        instructions="Which team should handle this?",
        criteria={
            "billing": "Payments, invoicing, refunds",
            "technical": ["Bugs", "outages"],
            "sales": None,
        },
    ),
    "frustration": ts.Score(
        instructions="How frustrated is the customer?",
        criteria=["Calm", "Frustrated", "Very angry"],
    ),
}
STATES = [
    "I was charged twice. Please help!",
    {
        "user_question": "Refund?",
        "assistant_answer": "Yes, in 3 days.",
        "tool_calls": [{"name": "x"}],
    },
    [{"role": "user", "content": "hi"}, "ü €"],
]


def _answer(state, questions):
    # Non-trivial values: fractional noul, a non-first label, a score between levels.
    return {"is_grounded": 0.8125, "plain": 0.03, "department": "technical", "frustration": 1.25}


@pytest.mark.parametrize("state", STATES)
async def test_same_body_and_same_parsed_values(state) -> None:
    async with FakeJevServer(_answer) as server:
        async with ts.AsyncTypeSafeClient(
            api_key="k", base_url=server.base_url, compression=False
        ) as official:
            theirs = await official.system_one(state, THEIRS)
        async with JudgeClient("k", base_url=server.base_url) as client:
            ours = await client.system_one(state, OURS)
        sent_theirs, sent_ours = server.requests[0], server.requests[1]
    # Same JSON, key order included (the model reads fields in the order sent).
    assert json.dumps(sent_ours.json) == json.dumps(sent_theirs.json)
    assert sent_ours.headers["authorization"] == sent_theirs.headers["authorization"]
    assert sent_ours.headers["content-type"] == sent_theirs.headers["content-type"]
    assert sent_ours.headers["accept"] == sent_theirs.headers["accept"]

    assert ours.model == theirs.model
    assert (ours.usage.input_tokens, ours.usage.output_tokens) == (
        theirs.usage.input_tokens,
        theirs.usage.output_tokens,
    )
    assert ours.request_id is not None
    assert theirs.request_id is not None
    assert ours.noul("is_grounded").noul == theirs.nouls["is_grounded"].noul
    assert ours.noul("plain").noul == theirs.nouls["plain"].noul
    ours_choice, their_choice = ours.choice("department"), theirs.choices["department"]
    assert ours_choice.choice == their_choice.choice == "technical"
    assert dict(ours_choice.probabilities) == their_choice.probabilities
    assert ours_choice.confidence == their_choice.confidence
    ours_score, their_score = ours.score("frustration"), theirs.scores["frustration"]
    assert ours_score.score == their_score.score == 1.25
    assert dict(ours_score.legend) == their_score.legend
    assert dict(ours_score.probabilities) == their_score.probabilities
    assert ours_score.confidence == their_score.confidence


@pytest.mark.parametrize(
    ("status", "body"),
    [
        (400, {"detail": {"error_type": "api_usage_error", "message": "Unknown model: jev-9"}}),
        (400, {"detail": "Invalid request."}),
        (422, {"detail": [{"type": "missing", "loc": ["body", "state"], "msg": "Field required"}]}),
        (401, {"detail": {"error_type": "authentication_error", "message": "Invalid API key."}}),
        (404, {"detail": "Not Found"}),
    ],
)
async def test_same_error_messages(status, body) -> None:
    async with FakeJevServer() as server:
        server.fail(status, body=body, times=2)  # one fault, one request id, for both clients
        async with ts.AsyncTypeSafeClient(
            api_key="k", base_url=server.base_url, compression=False
        ) as official:
            with pytest.raises(ts.TypeSafeAPIError) as theirs:
                await official.system_one("x", THEIRS)
        async with JudgeClient("k", base_url=server.base_url) as client:
            with pytest.raises(JudgeAPIError) as ours:
                await client.system_one("x", OURS)
    assert ours.value.status_code == theirs.value.status
    assert ours.value.message == theirs.value._message
    assert ours.value.request_id == theirs.value.request_id is not None


async def test_same_retry_counter_header() -> None:
    async def no_wait(seconds: float) -> None:
        return None

    async with FakeJevServer() as server:
        async with ts.AsyncTypeSafeClient(
            api_key="k",
            base_url=server.base_url,
            compression=False,
            retry=ts.RetryPolicy(backoff_initial=0),
        ) as official:
            server.fail(503, times=2)
            await official.system_one("x", THEIRS)
        theirs = [r.headers.get("x-typesafe-retry-count") for r in server.requests]
        server.requests.clear()
        async with JudgeClient(
            "k", base_url=server.base_url, retry=RetryPolicy(sleep=no_wait)
        ) as c:
            server.fail(503, times=2)
            await c.system_one("x", OURS)
        ours = [r.headers.get("x-typesafe-retry-count") for r in server.requests]
    assert ours == theirs == [None, "1", "2"]
