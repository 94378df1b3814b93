"""Hostile case files (issue 29: RT-12, RT-13, RT-14) and the fuzz target of case files and rows.

Before: a 4,301-digit number was a raw `ValueError`; a raw U+2028 inside a string (what
`json.dumps(ensure_ascii=False)` writes) split the line in two; `builtins:eval` took the model's
answer and evaluated it. The fuzz targets feed near-valid case files and resume rows through
`load_cases` and the row reader: a case or a `CaseFileError`, a row or the reason it is none,
never another exception; and every row the reader accepts makes a report without an error.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from evals_support import one_case, write_cases

from jevrefine.evals import CaseFileError, EvalReport, load_cases
from jevrefine.evals._asserts import score_answer
from jevrefine.evals._rows import read_row
from jevrefine.exceptions import UserError

pytest.importorskip("hypothesis", reason="the fuzz tests need hypothesis (a dev dependency)")

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st


@pytest.mark.parametrize("separator", ["\u2028", "\u2029", "\u0085", "\x0b", "\x0c", "\x1c"])
def test_line_separators_inside_strings_are_text(tmp_path: Path, separator: str) -> None:
    case = {
        "id": f"sep{separator}",
        "input": f"first{separator}second",
        "assert": [{"type": "contains", "value": f"a{separator}b"}],
    }
    path = tmp_path / "c.jsonl"
    path.write_text(json.dumps(case, ensure_ascii=False) + "\n", encoding="utf-8")
    (loaded,) = load_cases(path)  # before: "Unterminated string" on line 1
    assert loaded.input == f"first{separator}second"
    assert loaded.assertions[0].value == f"a{separator}b"


def test_crlf_and_a_byte_order_mark_still_read(tmp_path: Path) -> None:
    path = tmp_path / "c.jsonl"
    one = json.dumps({"id": "a", "input": "q", "assert": [{"type": "contains", "value": "x"}]})
    path.write_bytes(
        b"\xef\xbb\xbf" + one.encode() + b"\r\n\r\n" + one.replace('"a"', '"b"').encode()
    )
    assert [c.id for c in load_cases(path)] == ["a", "b"]


@pytest.mark.parametrize(
    "number", ["7" * 4301, "-" + "7" * 5000, "1" + "0" * 4400 + ".5e3"], ids=["int", "neg", "float"]
)
def test_a_huge_number_is_a_case_file_error(tmp_path: Path, number: str) -> None:
    path = tmp_path / "c.jsonl"
    path.write_text('{"input": "q", "assert": [{"type": "equals", "value": ' + number + "}]}\n")
    # Before: ValueError (exit 1 from the CLI); a float past the range is refused the same way.
    with pytest.raises(CaseFileError, match=r"c\.jsonl:1: not valid JSON"):
        load_cases(path)


CHECKS = """
import functools
from os.path import join as imported


class Check:
    def __call__(self, output, context):
        return True


partial = functools.partial(lambda output, context: True)
instance = Check()


def defined_here(output, context):
    return True
"""


@pytest.mark.parametrize(
    ("name", "at_load"),
    [
        ("imported", "is imported into checks.py from elsewhere"),
        ("Check", "is a class in checks.py"),
        ("missing", "checks.py defines no function 'missing'"),
        ("partial", None),  # an assignment: only importing tells what it is
        ("instance", None),
    ],
)
async def test_a_python_check_must_be_a_function_defined_in_its_module(
    tmp_path: Path, name: str, at_load: str | None
) -> None:
    (tmp_path / "checks.py").write_text(CHECKS)
    assertion = {"type": "python", "value": f"checks.py:{name}"}
    if at_load is not None:
        # Read from the source with ast: refused before anything of checks.py runs.
        with pytest.raises(CaseFileError, match=at_load):
            one_case(tmp_path, assertion)
    else:
        case = one_case(tmp_path, assertion)
        with pytest.raises(UserError, match="must be a function defined in that module"):
            await score_answer(case, "answer", None)
    good = one_case(tmp_path, {"type": "python", "value": "checks.py:defined_here"})
    assert (await score_answer(good, "answer", None)).passed


def test_a_module_check_is_read_without_importing_its_package(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    package = tmp_path / "my_checks_pkg"
    package.mkdir()
    (package / "__init__.py").write_text("raise RuntimeError('the package ran')\n")
    (package / "rules.py").write_text("def ok(output, context):\n    return True\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    one_case(tmp_path, {"type": "python", "value": "my_checks_pkg.rules:ok"})  # nothing ran
    with pytest.raises(CaseFileError, match=r"rules\.py defines no function 'nope'"):
        one_case(tmp_path, {"type": "python", "value": "my_checks_pkg.rules:nope"})
    (package / "broken.py").write_text("def f(:\n")
    with pytest.raises(CaseFileError, match=r"broken\.py does not parse \(line 1\)"):
        one_case(tmp_path, {"type": "python", "value": "my_checks_pkg.broken:f"})


@pytest.mark.parametrize(
    "reference",
    [
        "builtins:eval",
        "os:system",
        "subprocess:run",
        "shutil:rmtree",
        "pickle:loads",
        "os.path:join",
    ],
)
def test_standard_library_callables_are_refused_at_load(tmp_path: Path, reference: str) -> None:
    # Before: builtins:eval evaluated the model's answer as Python.
    with pytest.raises(CaseFileError, match="a check is a function of your own"):
        one_case(tmp_path, {"type": "python", "value": reference})


def test_a_file_reference_outside_the_folder_is_allowed_only_on_request(tmp_path: Path) -> None:
    (tmp_path / "checks.py").write_text("def ok(output, context):\n    return True\n")
    inner = tmp_path / "cases"
    inner.mkdir()
    path = write_cases(
        inner / "c.jsonl",
        [{"input": "q", "assert": [{"type": "python", "value": "../checks.py:ok"}]}],
    )
    with pytest.raises(CaseFileError, match="outside the case file's folder"):
        load_cases(path)
    (case,) = load_cases(path, allow_python_outside=True)
    assert case.assertions[0].python_function()("x", {}) is True


# -- the fuzz target: case files and resume rows --------------------------------------------------

EXAMPLES = int(os.environ.get("JEVREFINE_FUZZ_EXAMPLES", "60"))
pytestmark = pytest.mark.timeout(max(120, EXAMPLES // 2))
FUZZ = settings(
    max_examples=EXAMPLES,
    deadline=None,
    derandomize=True,  # the same examples on every run: deterministic CI
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)

odd_text = st.one_of(
    st.text(max_size=12),
    st.sampled_from(["\ud800", "\u2028", "\x00", "(", "^(a+)+$", "checks.py:f", "x.py:f", "#"]),
)
odd_numbers = st.one_of(
    st.integers(min_value=-(10**30), max_value=10**30),
    st.floats(allow_nan=False, allow_infinity=False),
    st.sampled_from([10**400, -1, 0, 1, 1.5, 1e308]),
)
json_values = st.recursive(
    st.none() | st.booleans() | odd_numbers | odd_text,
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(odd_text, children, max_size=3)
    ),
    max_leaves=12,
)
types = st.sampled_from(
    ["equals", "contains", "regex", "is-json", "contains-json", "python", "word-count",
     "llm-rubric", "not-regex", "icontains-any", "nope"]
)  # fmt: skip
assertions = st.fixed_dictionaries(
    {"type": types | json_values},
    optional={
        "value": json_values
        | st.sampled_from([{"$ref": "#"}, {"pattern": "("}, {"min": 3, "max": 1}, {"max": 2}]),
        "threshold": json_values,
        "weight": json_values,
        "fence": st.sampled_from(["allow", "forbid", True, None]),
        "metric": json_values,
    },
)
cases = st.fixed_dictionaries(
    {},
    optional={
        "id": json_values,
        "input": json_values | st.just("q"),
        "system": json_values,
        "expected": json_values,
        "assert": st.lists(assertions, max_size=3) | json_values,
        "metadata": json_values,
    },
)
raw_lines = st.one_of(
    cases.map(lambda c: json.dumps(c, ensure_ascii=False)),
    st.binary(max_size=40).map(lambda b: b.decode("latin-1")),
    st.sampled_from(
        ["NaN", "{" * 3000, '{"input": "q", "assert": [{"type": "equals", "value": 1e999}]}']
    ),
)


@FUZZ
@given(lines=st.lists(raw_lines, min_size=1, max_size=4))
def test_fuzz_case_files_load_or_raise_a_case_file_error(tmp_path: Path, lines: list[str]) -> None:
    path = tmp_path / "fuzz.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8", errors="surrogatepass")
    (tmp_path / "checks.py").write_text("def f(output, context):\n    return True\n")
    try:
        loaded = load_cases(path)
    except CaseFileError:
        return
    assert loaded


GOOD_ROW: dict[str, Any] = {
    "id": "a", "input": "q", "expected": None, "metadata": {}, "assertion_types": ["contains"],
    "passed_baseline": False, "passed_final": True, "chosen": 2, "outcome": "passed",
    "error": None, "model_tokens": 5, "judge_tokens": 0, "grader_tokens": 0, "latency_s": 0.5,
    "attempts": [
        {"index": 1, "answer": "x", "judge_passed": False, "oracle_passed": False,
         "failed_assertions": [0], "feedback": "- fix it", "escalated": []},
        {"index": 2, "answer": "y", "judge_passed": True, "oracle_passed": True,
         "failed_assertions": [], "feedback": None, "escalated": []},
    ],
    "fingerprint": "0" * 64,
}  # fmt: skip


def _tamper(row: dict[str, Any], path: list[str | int], value: Any) -> dict[str, Any]:
    copy = json.loads(json.dumps(row))
    target: Any = copy
    for step in path[:-1]:
        target = target[step]
    target[path[-1]] = value
    return copy


paths = st.sampled_from(
    [[key] for key in GOOD_ROW]
    + [["attempts", 0, key] for key in GOOD_ROW["attempts"][0]]
    + [["attempts", 1, "index"], ["attempts", 0], ["input"]]
)


@FUZZ
@given(path=paths, value=json_values)
def test_fuzz_rows_read_as_a_row_or_a_reason_and_a_read_row_always_reports(
    path: list[str | int], value: Any
) -> None:
    text = json.dumps(_tamper(GOOD_ROW, path, value), ensure_ascii=False)
    read = read_row(text.encode("utf-8", "surrogatepass"))
    if isinstance(read, str):
        return
    data = EvalReport(results=[read], judge="asserts").to_dict()  # never raises on a valid row
    assert data["cases"] == 1


@FUZZ
@given(line=st.binary(max_size=60) | raw_lines.map(lambda s: s.encode("utf-8", "surrogatepass")))
def test_fuzz_any_bytes_are_a_row_or_a_reason(line: bytes) -> None:
    assert isinstance(read_row(line), dict | str)
