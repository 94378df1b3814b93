"""The retrieval, judge-patterns and logging guides' examples run as written, offline."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

import pytest

GUIDES = Path(__file__).parents[1] / "docs" / "guide"
# A runnable example, then its "prints"/"logs" block.
EXAMPLE = re.compile(
    r"```python\n((?:(?!```).)*)```\n\n(?:prints|logs)\n\n```\n((?:(?!```).)*)```", re.DOTALL
)


def examples(guide: str) -> list[tuple[str, str]]:
    found = EXAMPLE.findall((GUIDES / guide).read_text())
    assert found, f"{guide} has no runnable example"
    return found


def run(code: str, name: str) -> str:
    output = io.StringIO()
    with contextlib.redirect_stdout(output):
        exec(compile(code, name, "exec"), {"__name__": "guide"})
    return output.getvalue()


@pytest.mark.parametrize(
    ("guide", "count"), [("retrieval.md", 3), ("judge-patterns.md", 3), ("logging.md", 1)]
)
def test_every_example_prints_what_the_guide_says(guide: str, count: int) -> None:
    cases = examples(guide)
    assert len(cases) == count
    for code, expected in cases:
        assert run(code, guide) == expected
