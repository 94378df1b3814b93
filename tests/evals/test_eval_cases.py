"""`load_cases`: the case file's fields, default ids, and every bad input named before any call."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from evals_support import write_cases

from jevrefine.evals import ASSERTION_TYPES, CaseFileError, load_cases
from jevrefine.exceptions import UserError


def test_fields_defaults_and_line_number_ids(tmp_path: Path) -> None:
    path = write_cases(
        tmp_path / "cases.jsonl",
        [
            {"input": "Hi", "assert": [{"type": "contains", "value": "x"}]},
            "",
            {
                "id": 7,
                "input": [
                    {"role": "system", "content": "Be brief."},
                    {"role": "user", "content": "Capital of France?"},
                ],
                "system": "Answer in French.",
                "expected": "Paris",
                "metadata": {"topic": "geo", "nested": [1, 2]},
                "assert": [
                    {"type": "not-icontains", "value": "london", "weight": 0},
                    {"type": "llm-rubric", "value": "Names Paris", "threshold": 0.7},
                ],
            },
        ],
        blank_lines=1,
    )
    first, second = load_cases(path)
    assert first.id == "2"  # the blank first line is counted
    assert (first.line, second.line, second.id) == (2, 4, "7")
    assert first.input == "Hi"
    assert second.expected == "Paris"
    assert second.metadata["topic"] == "geo"
    rubric = second.assertions[1]
    assert (rubric.index, rubric.base, rubric.threshold, rubric.pass_bar) == (
        1, "llm-rubric", 0.7, 0.7)  # fmt: skip
    negated = second.assertions[0]
    assert negated.negated
    assert negated.base == "icontains"
    assert not negated.counts
    assert second.needs_grader
    assert not first.needs_grader
    assert second.question == (
        "system: Answer in French.\nsystem: Be brief.\nuser: Capital of France?"
    )
    with pytest.raises(AttributeError):
        first.id = "other"  # type: ignore[misc]


def test_every_type_loads(tmp_path: Path) -> None:
    (tmp_path / "checks.py").write_text("def ok(output, context):\n    return True\n")
    values: dict[str, Any] = {
        "equals": "x", "contains": "x", "icontains": "x", "starts-with": "x",
        "contains-any": ["a", "b"], "contains-all": "a, b", "icontains-any": ["a"],
        "icontains-all": ["a"], "regex": "(?i)^a", "is-json": {"type": "object"},
        "contains-json": None, "python": "checks.py:ok", "llm-rubric": "polite",
        "word-count": {"min": 1},
    }  # fmt: skip
    assert set(values) == set(ASSERTION_TYPES)
    asserts = []
    for kind, value in values.items():
        for prefix in ("", "not-"):
            entry = {"type": prefix + kind}
            if value is not None:
                entry["value"] = value
            asserts.append(entry)
    (case,) = load_cases(write_cases(tmp_path / "c.jsonl", [{"input": "q", "assert": asserts}]))
    assert len(case.assertions) == 2 * len(values)
    assert case.assertions[10].value == ("a", "b")  # "a, b" is split, as promptfoo does


BAD: list[tuple[Any, str, int | None]] = [
    ({"type": "contains", "value": "x"}, "", None),  # placeholder: replaced in the test
    ({"type": "containz", "value": "x"}, "unknown assertion type 'containz'", 1),
    ({"type": "regex", "value": "("}, "bad regex '('", 1),
    ({"type": "contains"}, "contains needs a value", 1),
    ({"type": "contains-any", "value": []}, "a non-empty list", 1),
    ({"type": "python", "value": "no_such_module_xyz:f"}, "no module 'no_such_module_xyz'", 1),
    ({"type": "python", "value": "json:loads"}, "not one of the standard library's (json)", 1),
    ({"type": "python", "value": "builtins:eval"}, "not one of the standard library's", 1),
    ({"type": "python", "value": "x.py:not a name"}, "is not a function name", 1),
    ({"type": "python", "value": "../outside.py:f"}, "is outside the case file's folder", 1),
    ({"type": "python", "value": "nocolon"}, "module:function", 1),
    (
        {"type": "llm-rubric", "value": "x", "threshold": 1.5},
        "threshold must be a number from 0",
        1,
    ),
    ({"type": "contains", "value": "x", "threshold": 0.5}, "threshold applies to python", 1),
    ({"type": "contains", "value": "x", "weight": -1}, "weight must be a number >= 0", 1),
    ({"type": "contains", "value": "x", "weight": True}, "weight must be a number >= 0", 1),
    ({"type": "word-count", "value": {"min": 5, "max": 2}}, "min 5 is above max 2", 1),
    ({"type": "word-count", "value": {"most": 2}}, 'word-count needs a value {"min"', 1),
    ({"type": "is-json", "value": {"type": "nonsense"}}, "the JSON schema is invalid", 1),
    ({"type": "contains", "value": "x", "metric": "m"}, "unknown key(s) ['metric']", 1),
    ("just a string", "an assertion is an object", 1),
]


@pytest.mark.parametrize(("assertion", "message", "index"), BAD[1:])
def test_a_bad_assertion_names_the_case_and_its_index(
    tmp_path: Path, assertion: Any, message: str, index: int
) -> None:
    good = {"type": "contains", "value": "ok"}
    path = write_cases(
        tmp_path / "bad.jsonl",
        [
            {"id": "fine", "input": "q", "assert": [good]},
            {"id": "broken", "input": "q", "assert": [good, assertion]},
        ],
    )
    with pytest.raises(CaseFileError) as caught:
        load_cases(path)
    error = caught.value
    assert isinstance(error, UserError)
    assert (error.case_id, error.assertion, error.line) == ("broken", index, 2)
    assert f"bad.jsonl:2: case 'broken', assertion {index}: " in str(error)
    assert message in str(error)


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("{not json", "not valid JSON"),
        ("[1, 2]", "a case is a JSON object, got list"),
        ('{"input": "q"}', 'a case needs "assert"'),
        ('{"input": "q", "assert": []}', 'a case needs "assert"'),
        ('{"input": "", "assert": [{"type": "equals", "value": 1}]}', "input is empty"),
        ('{"input": [{"role": "user"}], "assert": [{"type": "equals", "value": 1}]}', "input[0]"),
        (
            '{"input": [{"role": "assistant", "content": "hi"}], '
            '"assert": [{"type": "equals", "value": 1}]}',
            "the last message of input must be the user's",
        ),
        (
            '{"inputs": "q", "assert": [{"type": "equals", "value": 1}]}',
            "unknown key(s) ['inputs']",
        ),
        ('{"id": true, "input": "q", "assert": []}', "id must be a non-empty string"),
        ('{"input": "q", "metadata": 3, "assert": [{"type": "equals", "value": 1}]}', "metadata"),
        ("[" * 100_000, "not valid JSON"),
    ],
)
def test_a_bad_line_is_named(tmp_path: Path, line: str, message: str) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text('{"input": "q", "assert": [{"type": "equals", "value": 1}]}\n' + line + "\n")
    with pytest.raises(CaseFileError, match=r"bad\.jsonl:2") as caught:
        load_cases(path)
    assert message in str(caught.value)
    assert caught.value.line == 2


def test_duplicate_ids_empty_and_missing_files(tmp_path: Path) -> None:
    case = {"id": "x", "input": "q", "assert": [{"type": "equals", "value": "a"}]}
    with pytest.raises(CaseFileError, match="already used on line 1"):
        load_cases(write_cases(tmp_path / "dup.jsonl", [case, case]))
    with pytest.raises(CaseFileError, match="holds no case"):
        load_cases(write_cases(tmp_path / "empty.jsonl", ["", "  "]))
    with pytest.raises(CaseFileError, match="cannot read the case file"):
        load_cases(tmp_path / "missing.jsonl")


def test_python_references_are_checked_at_load_and_imported_at_first_use(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "my_eval_checks.py").write_text("def short(output, context):\n    return 1\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    path = write_cases(
        tmp_path / "c.jsonl",
        [{"input": "q", "assert": [{"type": "python", "value": "my_eval_checks:short"}]}],
    )
    (case,) = load_cases(path)
    assert case.assertions[0].python_function()("x", {}) == 1
    (tmp_path / "raises.py").write_text(
        "raise RuntimeError('boom at import')\n\ndef f(output, context):\n    return True\n"
    )
    bad = write_cases(
        tmp_path / "d.jsonl",
        [{"input": "q", "assert": [{"type": "python", "value": "raises.py:f"}]}],
    )
    (loaded,) = load_cases(bad)  # read with ast: nothing of raises.py ran
    with pytest.raises(CaseFileError, match=r"raises\.py defines no function 'g'"):
        load_cases(
            write_cases(
                tmp_path / "e.jsonl",
                [{"input": "q", "assert": [{"type": "python", "value": "raises.py:g"}]}],
            )
        )
    with pytest.raises(UserError, match="RuntimeError: boom at import"):
        loaded.assertions[0].python_function()


def test_the_evals_door_is_documented() -> None:
    from test_exports import test_every_public_name_has_a_docstring

    test_every_public_name_has_a_docstring("jevrefine.evals")
