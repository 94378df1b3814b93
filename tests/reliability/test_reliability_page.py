"""The reliability page names real tests: a renamed or deleted test must not leave a promise
in the docs without its proof.

Every test the page names is a node id, `tests/<path>.py::test_name`, optionally with a class
(`::TestX::test_y`), a parametrize id (`[huge body]`) or a trailing `_*` for a family of tests
sharing a prefix. The files are parsed, not imported, so the check is quick and needs none of
the tests' dependencies.
"""

from __future__ import annotations

import ast
import re
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "guide" / "reliability.md"

_NODE = re.compile(
    r"`(?P<file>tests/[\w/]+\.py)(?P<names>(?:::\w+)+?)(?P<star>_\*)?(?:\[(?P<param>[^\]`]*)\])?`"
)
# Any test name in inline code must be part of a full node id (a file name such as
# `test_soak.py` is not a test name).
_ANY_TEST = re.compile(r"`[^`\n]*(?<![/\w])test_\w+(?![\w.])[^`\n]*`")
_FENCE = re.compile(r"^```.*?^```", re.MULTILINE | re.DOTALL)


@cache
def _defined(file: Path) -> tuple[frozenset[str], str]:
    """The test names a file defines (`test_x`, `TestY::test_z`), and its source."""
    source = file.read_text(encoding="utf-8")
    names: set[str] = set()
    for node in ast.parse(source).body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            names.add(node.name)
        elif isinstance(node, ast.ClassDef):
            for item in node.body:
                if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef):
                    names.add(f"{node.name}::{item.name}")
    return frozenset(n for n in names if n.split("::")[-1].startswith("test")), source


def _problem(match: re.Match[str], root: Path) -> str | None:
    """Why the test a node id names does not exist, or `None` when it does."""
    node = match.group(0).strip("`")
    file = root / match.group("file")
    if not file.is_file():
        return f"{node}: no such file"
    defined, source = _defined(file)
    name = match.group("names").removeprefix("::")
    if match.group("star"):
        found = any(d.startswith(name + "_") for d in defined)
    else:
        found = name in defined
    param = match.group("param")
    if found and param is not None:
        # A parametrize id is written in the file, as an `id=` or an `ids=` entry.
        found = f'"{param}"' in source or f"'{param}'" in source
    return None if found else f"{node}: not defined there"


def _nodes(page: str) -> list[re.Match[str]]:
    return list(_NODE.finditer(_FENCE.sub("", page)))  # code blocks name files, not tests


def missing_tests(page: str, root: Path = ROOT) -> list[str]:
    """What the page names that does not exist (empty when every named test is real)."""
    missing = [problem for match in _nodes(page) if (problem := _problem(match, root))]
    for match in _ANY_TEST.finditer(_FENCE.sub("", page)):
        if not _NODE.fullmatch(match.group(0)):
            missing.append(f"{match.group(0)}: name it as tests/<path>.py::test_name")
    return missing


def test_every_test_the_page_names_exists() -> None:
    page = PAGE.read_text(encoding="utf-8")
    assert len(_nodes(page)) >= 30, "the page names too few tests"
    assert missing_tests(page) == []


def test_the_check_catches_a_missing_or_vague_name() -> None:
    """The check itself can fail: a deleted test, a wrong file, a bare name, a wrong id."""
    page = (
        "| a | `tests/reliability/test_soak.py::test_1000_refinements_under_5_percent_faults` |\n"
        "| b | `tests/reliability/test_soak.py::test_that_was_deleted` |\n"
        "| c | `tests/reliability/test_gone.py::test_x` |\n"
        "| d | `test_permanent_fault_is_never_retried` |\n"
        "| e | `tests/reliability/test_judge_faults.py::test_permanent_fault_is_never_retried"
        "[no such id]` |\n"
        "| f | `tests/reliability/test_judge_faults.py::test_transient_fault_*` |\n"
    )
    problems = missing_tests(page)
    assert [p.split(":")[0] for p in problems] == [
        "tests/reliability/test_soak.py",
        "tests/reliability/test_gone.py",
        "tests/reliability/test_judge_faults.py",
        "`test_permanent_fault_is_never_retried`",
    ], problems
    assert "test_that_was_deleted" in problems[0]
    assert "no such id" in problems[2]
