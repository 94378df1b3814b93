"""Constructors of the Jev side validate every parameter once, through `jevrefine._validate`.

Promise (issue 16, item 8): a number passed as a string, a bool where a count goes, a non-finite
or out-of-range value, a key that is no string: a `JudgeUsageError` (a `UserError`) naming the
parameter, the value and what to pass instead, raised at construction. A key is never echoed.
"""

from __future__ import annotations

import math
from typing import Any

import pytest

from jevrefine.exceptions import UserError
from jevrefine.jev import (
    JudgeClient,
    JudgeUsageError,
    Noul,
    RetryPolicy,
    SystemOneRequest,
    system_one_all,
)
from jevrefine.judge import ModelJudgeClient
from jevrefine.models.jev import JevChatModel
from jevrefine.testing import FunctionModel

Q = {"g": Noul("Grounded?")}


def _judge_client(**kwargs: Any) -> JudgeClient:
    return JudgeClient("k", base_url="http://127.0.0.1:9", **kwargs)


@pytest.mark.parametrize(
    ("kwargs", "shown"),
    [
        ({"timeout": "5"}, "timeout='5' is not a number"),
        ({"timeout": math.nan}, "timeout=nan is not a finite number"),
        ({"timeout": -5}, "timeout=-5 must be greater than 0"),
        ({"timeout": True}, "timeout=True is not a number"),
        ({"total_timeout": "30"}, "total_timeout='30' is not a number"),
        ({"max_concurrency": "8"}, "max_concurrency='8' is not a whole number"),
        ({"max_concurrency": 0}, "max_concurrency=0 is out of range"),
        ({"model": 5}, "model=5 is not a string"),
        ({"retry": {"max_retries": 2}}, "is not a RetryPolicy"),
        ({"http_client": object()}, "is not an httpx2.AsyncClient"),
    ],
)
def test_judge_client_names_the_bad_parameter(kwargs: dict[str, Any], shown: str) -> None:
    with pytest.raises(JudgeUsageError) as caught:
        _judge_client(**kwargs)
    assert shown in str(caught.value)
    assert isinstance(caught.value, UserError)


@pytest.mark.parametrize("base_url", ["http://h:99999", "http://[::1", "ftp://h", 5])
def test_judge_client_refuses_a_bad_base_url(base_url: Any) -> None:
    with pytest.raises(JudgeUsageError, match="base_url"):
        JudgeClient("k", base_url=base_url)


@pytest.mark.parametrize("api_key", [123, b"sk-bytes-key-123456", ["sk"]])
def test_a_key_that_is_no_string_is_typed_and_never_echoed(api_key: Any) -> None:
    with pytest.raises(JudgeUsageError, match="api_key must be a string") as caught:
        JudgeClient(api_key, base_url="http://127.0.0.1:9")
    assert "123" not in str(caught.value)
    assert "sk" not in str(caught.value).replace("str", "")


@pytest.mark.parametrize(
    ("kwargs", "shown"),
    [
        ({"max_retries": "2"}, "max_retries='2' is not a whole number"),
        ({"max_retries": -1}, "max_retries=-1 is out of range"),
        ({"initial_backoff": math.inf}, "initial_backoff=inf is not a finite number"),
        ({"max_backoff": "5"}, "max_backoff='5' is not a number"),
        ({"jitter": 2}, "jitter=2 must be at most 1"),
        ({"max_retry_after": -1}, "max_retry_after=-1 must be at least 0"),
        ({"respect_retry_after": "yes"}, "respect_retry_after='yes' is not a bool"),
        ({"retry_statuses": "429"}, "retry_statuses='429' is not a set"),
        ({"retry_statuses": {429, "503"}}, "retry_statuses='503' is not a whole number"),
        ({"sleep": 5}, "sleep=5 is not callable"),
    ],
)
def test_retry_policy_names_the_bad_parameter(kwargs: dict[str, Any], shown: str) -> None:
    with pytest.raises(JudgeUsageError) as caught:
        RetryPolicy(**kwargs)
    assert shown in str(caught.value)


def test_retry_policy_stores_canonical_values() -> None:
    policy = RetryPolicy(max_retries=1, initial_backoff=1, retry_statuses=[503])
    assert policy.initial_backoff == 1.0
    assert isinstance(policy.initial_backoff, float)
    assert policy.retry_statuses == frozenset({503})


def test_jev_chat_model_names_the_bad_model() -> None:
    client = ModelJudgeClient(FunctionModel(lambda p: "yes"))
    with pytest.raises(UserError, match="model=5 is not a string"):
        JevChatModel(client, questions=Q, model=5)  # type: ignore[arg-type]
    with pytest.raises(UserError, match="model=' ' is blank"):
        JevChatModel(client, questions=Q, model=" ")


async def test_the_batch_validates_its_counts() -> None:
    client = ModelJudgeClient(FunctionModel(lambda p: "yes"))
    with pytest.raises(UserError, match="concurrency='3' is not a whole number"):
        await system_one_all(client, [SystemOneRequest("s", Q)], concurrency="3")  # type: ignore[arg-type]
    with pytest.raises(UserError, match="requests='abc' is not a list"):
        await system_one_all(client, "abc")  # type: ignore[arg-type]
    with pytest.raises(UserError, match="fail_fast='yes' is not a bool"):
        await system_one_all(client, [], fail_fast="yes")  # type: ignore[arg-type]
