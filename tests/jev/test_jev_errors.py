import pickle

import pytest

from jevrefine.jev import (
    JudgeAPIError,
    JudgeBadRequestError,
    JudgeOverloadedError,
    JudgeRateLimitError,
    JudgeResponseError,
    JudgeServerError,
)
from jevrefine.jev.errors import api_error, message_of


@pytest.mark.parametrize(
    ("status", "cls"),
    [
        (400, JudgeBadRequestError),
        (529, JudgeOverloadedError),
        (502, JudgeServerError),
        (409, JudgeAPIError),
    ],
)
def test_api_error_picks_the_class(status, cls) -> None:
    assert type(api_error(status, None)) is cls


def test_errors_survive_pickling_for_process_pools() -> None:
    error = api_error(429, {"detail": "slow"}, request_id="r1", endpoint="POST u", retry_after=2.0)
    copy = pickle.loads(pickle.dumps(error))
    assert type(copy) is JudgeRateLimitError
    assert (copy.status_code, copy.request_id, copy.retry_after, str(copy)) == (
        429,
        "r1",
        2.0,
        str(error),
    )
    response_error = JudgeResponseError("bad", field_path="answers.q", body={"x": 1})
    assert pickle.loads(pickle.dumps(response_error)).field_path == "answers.q"


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        (None, "no error body"),
        ("", "no error body"),
        ({"detail": ""}, "no error message"),
        ({"message": "top-level"}, "top-level"),
        ({"error": "flat"}, "flat"),
        ({"detail": [{"loc": ["body"], "msg": "bad"}]}, "bad"),
        ({"detail": []}, "invalid request body"),
        ("x" * 2000, "x" * 499 + "…"),
    ],
)
def test_message_of(body, expected) -> None:
    assert message_of(body) == expected
