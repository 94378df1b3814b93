"""The IFBench case file: every retained prompt's assertions import and run on a dummy answer
(the verifiers' set-up: tests/verifier_support.py)."""

from __future__ import annotations

import json

import pytest
from benchmarks.ifbench import convert, verify

from verifier_support import DUMMY, evaluate_answers, resolve, skip_without

needs_verifiers = skip_without(verify.VERIFIERS)


def test_case_file_is_the_conversion_of_the_source() -> None:
    cases, left_out = convert.convert(convert.read_source())
    assert convert.load_cases() == json.loads(json.dumps(cases))
    assert (len(cases), left_out) == (269, 25)
    assert sum(len(c["assert"]) for c in cases) == 304


def test_left_out_prompts_are_exactly_those_needing_nltk_data() -> None:
    rows = list(convert.read_source())
    assert len(rows) == 294
    kept = {c["metadata"]["key"] for c in convert.load_cases()}
    for row in rows:
        needs_data = bool(verify.NLTK_DATA_TYPES.intersection(row["instruction_id_list"]))
        assert (str(row["key"]) not in kept) == needs_data


def test_cases_follow_the_case_format() -> None:
    for case in convert.load_cases():
        assert isinstance(case["id"], str)
        assert isinstance(case["input"], str)
        ids = case["metadata"]["instruction_id_list"]
        assert [a["value"] for a in case["assert"]] == [
            f"benchmarks.ifbench.verify:check_{i}" for i in range(len(ids))
        ]
        assert all(a["type"] == "python" for a in case["assert"])
        assert len(case["metadata"]["kwargs"]) == len(ids)


@needs_verifiers
def test_every_assertion_imports_and_runs_on_a_dummy_answer() -> None:
    ran = 0
    for case in convert.load_cases():
        context = {"metadata": case["metadata"], "vars": {}}
        for assertion in case["assert"]:
            result = resolve(assertion["value"])(DUMMY, context)
            assert isinstance(result, bool)
            ran += 1
        # The whole-case check agrees with its parts.
        parts = [resolve(a["value"])(DUMMY, context) for a in case["assert"]]
        assert verify.check(DUMMY, context) == all(parts)
    assert ran == 304


@needs_verifiers
def test_verifiers_discriminate() -> None:
    # IFBench's first prompt: keywords a given number of times each.
    case = convert.load_cases()[0]
    assert case["metadata"]["instruction_id_list"] == ["count:keywords_multiple"]
    context = {"metadata": case["metadata"]}
    good = "kaleidoscope nebula nebula " + "whisper " * 3 + "labyrinth " * 5 + "paradox " * 7
    assert verify.check_0(good, context) is True
    assert verify.check_0(DUMMY, context) is False
    assert verify.check_0("   ", context) is False  # strict: an empty answer follows nothing
    [result] = verify.verify(DUMMY, ["count:keywords_multiple"], case["metadata"]["kwargs"])
    assert "kaleidoscope" in result.description


@needs_verifiers
def test_metadata_is_found_in_promptfoo_shapes_too() -> None:
    case = convert.load_cases()[0]
    assert verify.check_0(DUMMY, {"test": {"metadata": case["metadata"]}}) is False
    assert verify.check_0(DUMMY, {"vars": case["metadata"]}) is False
    with pytest.raises(KeyError, match="metadata"):
        verify.check_0(DUMMY, {"vars": {}})
    with pytest.raises(IndexError, match="only 1 instruction"):
        verify.check_1(DUMMY, {"metadata": case["metadata"]})


@needs_verifiers
async def test_jevrefine_evaluates_the_case_file() -> None:
    good = "kaleidoscope nebula nebula " + "whisper " * 3 + "labyrinth " * 5 + "paradox " * 7
    answers = {"ifbench-0": good, "ifbench-1": "Courtesy."}
    passed = await evaluate_answers(convert.CASES, answers)
    assert passed == {"ifbench-0": True, "ifbench-1": False}
