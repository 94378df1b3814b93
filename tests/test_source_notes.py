"""The source's docstrings and comments carry no measured figure and no date.

They go stale where nobody re-measures them: a docstring or comment may name the benchmark that
measures a thing (`bench_adapter_cpu`), never its figure (µs, ms, ns) or the day it was measured;
those belong in docs/benchmarks.md, beside the run that produced them.
"""

from __future__ import annotations

import ast
import io
import re
import tokenize
from pathlib import Path

import pytest

import jevrefine

PACKAGE = Path(jevrefine.__file__).parent
FIGURE = re.compile(r"\d\s*(?:µs|μs|us|ns|ms)\b|\b20\d\d-[01]\d(?:-[0-3]\d)?\b")
"""A duration in micro-, nano- or milliseconds, or a date."""


def notes(source: str) -> list[tuple[int, str]]:
    """The comments and docstrings (every bare string statement) of a module, with their lines."""
    found = [
        (token.start[0], token.string)
        for token in tokenize.generate_tokens(io.StringIO(source).readline)
        if token.type == tokenize.COMMENT
    ]
    for node in ast.walk(ast.parse(source)):
        value = node.value if isinstance(node, ast.Expr) else None
        if isinstance(value, ast.Constant) and isinstance(value.value, str):
            found.append((node.lineno, value.value))
    return found


def test_no_note_in_the_source_carries_a_figure_or_a_date() -> None:
    stale = []
    for path in sorted(PACKAGE.rglob("*.py")):
        name = str(path.relative_to(PACKAGE))
        for line, text in notes(path.read_text(encoding="utf-8")):
            for match in FIGURE.finditer(text):
                stale.append(f"{name}:{line}: {match.group(0)!r}")
    assert stale == []


@pytest.mark.parametrize(
    "note",
    ['"""Costs 2.5 µs each."""', "# 16 us against 4", '"""Measured 2026-12-01."""', "# 3 ms"],
)
def test_the_check_sees_a_figure_in_a_docstring_and_in_a_comment(note: str) -> None:
    # It must be able to fail: each of these is found.
    ((_, text),) = notes(f"x = 1\n{note}\n")
    assert FIGURE.search(text)
