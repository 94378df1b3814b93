"""Constructors of the judge validate every parameter once, through `jevrefine._validate`.

Promise (issue 16, item 8): a number passed as a string, a bool where a count goes, a non-finite
or out-of-range value: a `JudgeUsageError` (a `UserError`) naming the parameter, the value and
what to pass instead, raised at construction (the Jev side's own: `tests/jev/test_jev_parameters`).
"""

from __future__ import annotations

import math
from typing import Any

import pytest

from jevrefine.exceptions import UserError
from jevrefine.jev import JudgeUsageError, Noul, Score
from jevrefine.judge import Judge, ModelJudgeClient, consistency, noul, score
from jevrefine.testing import FunctionModel

Q = {"g": Noul("Grounded?")}


@pytest.mark.parametrize(
    ("kwargs", "shown"),
    [
        ({"fail_fast": "no"}, "fail_fast='no' is not a bool"),
        ({"fail_on_error": 0}, "fail_on_error=0 is not a bool"),
        ({"fail_on_inconclusive": None}, "fail_on_inconclusive=None is not a bool"),
        ({"min_confidence": "0.6"}, "min_confidence='0.6' is not a number"),
        ({"min_confidence": 1.5}, "min_confidence=1.5 must be at most 1"),
        ({"model": 3}, "model=3 is not a string"),
        ({"feedback_renderer": "text"}, "feedback_renderer='text' is not callable"),
    ],
)
def test_judge_names_the_bad_parameter(kwargs: dict[str, Any], shown: str) -> None:
    client = ModelJudgeClient(FunctionModel(lambda p: "yes"))
    with pytest.raises(JudgeUsageError) as caught:
        Judge(client, [noul("g", Noul("q?"))], **kwargs)
    assert shown in str(caught.value)


def test_criteria_builders_use_the_shared_validators() -> None:
    with pytest.raises(JudgeUsageError, match=r"noul\('g'\): minimum=True is not a number"):
        noul("g", Noul("q?"), minimum=True)  # type: ignore[arg-type]
    with pytest.raises(JudgeUsageError, match=r"score\('h'\): minimum=nan is not a finite"):
        score("h", Score("q?", levels=["a", "b"]), minimum=math.nan)
    with pytest.raises(JudgeUsageError, match="name=5 is not a string"):
        noul(5, Noul("q?"))  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("kwargs", "shown"),
    [
        ({"concurrency": "4"}, "concurrency='4' is not a whole number"),
        ({"constraint": "regex"}, "constraint='regex' is not one of the accepted values"),
        ({"logprobs": "true"}, "logprobs='true' is not a bool"),
        ({"top_logprobs": 50}, "top_logprobs=50 is out of range"),
        ({"temperature": "0.2"}, "temperature='0.2' is not a number"),
        ({"temperature": math.nan}, "temperature=nan is not a finite number"),
        ({"system_prompt": ""}, "system_prompt='' is blank"),
        ({"examples": ["x"]}, "examples=['x'] is not a dict"),
        ({"explain_failures": 1}, "explain_failures=1 is not a bool"),
    ],
)
def test_model_judge_client_names_the_bad_parameter(kwargs: dict[str, Any], shown: str) -> None:
    with pytest.raises(JudgeUsageError) as caught:
        ModelJudgeClient(FunctionModel(lambda p: "yes"), **kwargs)
    assert shown in str(caught.value)


async def test_patterns_validate_their_counts() -> None:
    client = ModelJudgeClient(FunctionModel(lambda p: "yes"))
    with pytest.raises(UserError, match="samples='5' is not a whole number"):
        await consistency(client, "s", Q, samples="5")  # type: ignore[arg-type]
