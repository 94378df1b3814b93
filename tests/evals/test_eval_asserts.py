"""Every assertion type on real answers: its verdict, its `not-` twin and its defect sentence."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from evals_support import Grader, one_case

from jevrefine.evals._asserts import check_code, score_answer
from jevrefine.evals._bounded import CheckWorker
from jevrefine.exceptions import UserError

HUGE = "word " * 200_000  # a 1 MB answer

# (type, value, answer, passes, the defect's text when it fails)
CASES: list[tuple[str, Any, str, bool, str]] = [
    ("equals", "Paris", " Paris\n", True, ""),
    ("equals", "Paris", "paris", False, "The answer must be exactly 'Paris'; it is 'paris'."),
    ("equals", {"a": 1}, '{"a": 1}', True, ""),
    ("equals", [1, 2], "not json", False, "The answer must be exactly the JSON '[1, 2]'"),
    ("contains", "Paris", "It is Paris.", True, ""),
    ("contains", "Paris", "It is paris.", False, "The answer must contain 'Paris'."),
    ("contains", "Zürich", "Zürich ist schön", True, ""),
    ("contains", "x", "", False, "The answer must contain 'x'."),
    ("icontains", "straße", "STRASSE", True, ""),  # casefold: ß is ss
    ("icontains", "東京", "東京です", True, ""),
    ("contains-any", ["cat", "dog"], "a dog", True, ""),
    ("contains-any", ["cat", "dog"], "a cow", False,
     "The answer must contain at least one of 'cat', 'dog'."),
    ("contains-all", ["cat", "dog"], "a cat", False,
     "The answer must contain all of 'cat', 'dog'; it lacks 'dog'."),
    ("icontains-all", ["CAT", "dog"], "a Cat and a DOG", True, ""),
    ("icontains-any", ["émile"], "ÉMILE", True, ""),
    ("starts-with", "Yes", "  Yes, it is.", True, ""),
    ("starts-with", "Yes", "No, it is not.", False,
     "The answer must start with 'Yes'; it starts with 'No, it is no'."),
    ("regex", r"\b\d{4}\b", "In 1969.", True, ""),
    ("regex", r"(?i)^hello", "HELLO there", True, ""),
    ("regex", r"\d", "none", False, "The answer must match the regular expression '\\\\d'."),
    ("is-json", None, '{"a": [1, 2]}', True, ""),
    ("is-json", None, '{"a": 1,}', False,
     "The answer must be valid JSON; it failed to parse at line 1 column 9"),
    ("is-json", None, "", False, "it failed to parse at line 1 column 1"),
    ("is-json", {"type": "object", "required": ["name"]}, '{"age": 3}', False,
     "The answer's JSON must match the schema; 'name' is a required property."),
    ("is-json", {"type": "object", "properties": {"n": {"type": "integer"}}}, '{"n": "x"}',
     False, "The answer's JSON must match the schema; 'x' is not of type 'integer' at n."),
    ("contains-json", None, 'Here: {"a": 1} done', True, ""),
    ("contains-json", None, "no json {here", False,
     "The answer must contain a JSON object or array; none parses."),
    ("contains-json", {"type": "array"}, 'x {"a": 1} y [1]', True, ""),
    ("contains-json", {"type": "array"}, 'x {"a": 1} y', False,
     "The answer's JSON must match the schema; {'a': 1} is not of type 'array'."),
    ("word-count", {"max": 15}, " ".join(["w"] * 31), False,
     "The answer has 31 words; use at most 15."),
    ("word-count", {"min": 2}, "one", False, "The answer has 1 word; use at least 2."),
    ("word-count", {"min": 2, "max": 3}, "one two three", True, ""),  # inclusive
    ("word-count", {"min": 2, "max": 3}, "", False, "The answer has 0 words; use 2 to 3."),
    ("word-count", {"min": 1, "max": 3}, "tab\tnew\nline", True, ""),  # any whitespace
    ("word-count", {"max": 10}, HUGE, False, "The answer has 200000 words; use at most 10."),
    ("contains", "needle", HUGE + "needle", True, ""),
    ("contains-json", None, "{" * 5000, False, "none parses"),
    ("contains-json", None, "[" * 100_000 + "1" + "]" * 100_000, False, "none parses"),
]  # fmt: skip


@pytest.mark.parametrize(("kind", "value", "answer", "passes", "defect"), CASES)
async def test_code_assertions(
    tmp_path: Path, kind: str, value: Any, answer: str, passes: bool, defect: str
) -> None:
    entry: dict[str, Any] = {"type": kind}
    if value is not None:
        entry["value"] = value
    case = one_case(tmp_path, entry, {**entry, "type": "not-" + kind})
    async with CheckWorker() as worker:
        plain, negated = [await check_code(a, answer, worker) for a in case.assertions]
    assert plain.passed is passes
    assert negated.passed is not passes  # not- is the exact complement
    failed = negated if passes else plain
    assert failed.defect.endswith(".")
    assert "\n" not in failed.defect  # one sentence, one line
    if not passes:
        assert defect in plain.defect
    else:
        assert "must not" in negated.defect or "must contain none" in negated.defect


async def test_defects_quote_long_values_briefly(tmp_path: Path) -> None:
    case = one_case(tmp_path, {"type": "equals", "value": "short"})
    result = await check_code(case.assertions[0], "x" * 10_000)
    assert len(result.defect) < 200
    assert "…" in result.defect


CHECKS = """
def score(output, context):
    return min(1.0, len(output) / 10)

def contextual(output, context):
    return context["expected"] in output and context["metadata"]["k"] == 1

async def later(output, context):
    return output.startswith("ok")

def bad(output, context):
    return "yes"

def broken(output, context):
    raise ValueError("bug in the check")
"""


async def test_python_assertions(tmp_path: Path) -> None:
    (tmp_path / "checks.py").write_text(CHECKS)
    case = one_case(
        tmp_path,
        {"type": "python", "value": "checks.py:score"},  # 0.5 by default
        {"type": "python", "value": "checks.py:score", "threshold": 0.9},
        {"type": "python", "value": "checks.py:contextual"},
        {"type": "python", "value": "checks.py:later"},
        {"type": "not-python", "value": "checks.py:later"},
        expected="Paris",
        metadata={"k": 1},
    )
    scored = await score_answer(case, "ok Paris", None)  # 8 characters: score 0.8
    assert [r.passed for r in scored.results] == [True, False, True, True, False]
    assert scored.results[1].defect == (
        "The answer fails the check checks.py:score (score 0.80, needed 0.90)."
    )
    assert scored.failed == [1, 4]
    assert not scored.passed
    bad = one_case(tmp_path, {"type": "python", "value": "checks.py:bad"})
    with pytest.raises(UserError, match="returned 'yes'; return a bool or a number from 0 to 1"):
        await score_answer(bad, "x", None)
    broken = one_case(tmp_path, {"type": "python", "value": "checks.py:broken"})
    with pytest.raises(ValueError, match="bug in the check"):
        await score_answer(broken, "x", None)


async def test_llm_rubric_asks_the_grader_once_per_answer(tmp_path: Path) -> None:
    case = one_case(
        tmp_path,
        {"type": "llm-rubric", "value": "The answer is polite."},
        {"type": "not-llm-rubric", "value": "The answer is rude.", "threshold": 0.8},
        {"type": "contains", "value": "please"},
        expected="Please sit.",
    )
    grader = Grader(0.85)
    polite = await score_answer(case, "please sit", grader)
    assert [r.passed for r in polite.results] == [True, False, True]  # 0.85 >= 0.8: not- fails
    assert polite.grader_usage.total_tokens == 7
    ((state, questions),) = grader.calls
    assert state == {
        "user_question": "user: question?",
        "assistant_answer": "please sit",
        "expected_output": "Please sit.",
    }
    assert sorted(questions) == ["rubric_0", "rubric_1"]
    rude = await score_answer(case, "rude, please", grader)
    assert rude.results[0].defect == (
        "The answer does not meet the rubric 'The answer is polite.' (P(yes) 0.15, needed 0.50)."
    )
    with pytest.raises(UserError, match="pass grader="):
        await score_answer(case, "x", None)


async def test_weight_zero_is_reported_but_never_fails_the_case(tmp_path: Path) -> None:
    case = one_case(
        tmp_path,
        {"type": "contains", "value": "a"},
        {"type": "contains", "value": "zzz", "weight": 0},
        {"type": "contains", "value": "b", "weight": 2.5},
    )
    scored = await score_answer(case, "a b", None)
    assert scored.passed
    assert scored.failed == [1]


async def test_json_defect_for_a_fenced_answer(tmp_path: Path) -> None:
    case = one_case(tmp_path, {"type": "is-json"})
    fenced = "```json\n" + json.dumps({"a": 1}) + "\n```"
    result = await check_code(case.assertions[0], fenced)
    assert result.defect.startswith("The answer must be valid JSON; it failed to parse at line 1 ")
