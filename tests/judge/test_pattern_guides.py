"""Each judge-pattern page's example runs as written and prints what the page says it prints."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

import pytest

GUIDE = Path(__file__).parents[2] / "docs" / "guide"
PAGES = ["judge-escalation", "confidence-gate", "composite-score", "evaluator", "tool-index"]
_EXAMPLE = re.compile(
    r"```python\n(?P<code>(?:(?!```).)*?)```\n\nprints\n\n```text\n(?P<out>.*?)```", re.S
)


@pytest.mark.parametrize("page", PAGES)
def test_the_pages_example_prints_what_it_shows(page: str) -> None:
    text = (GUIDE / f"{page}.md").read_text(encoding="utf-8")
    examples = list(_EXAMPLE.finditer(text))
    assert examples, f"{page}.md has no example followed by what it prints"
    for example in examples:
        printed = io.StringIO()
        with contextlib.redirect_stdout(printed):
            exec(compile(example["code"], f"{page}.md", "exec"), {"__name__": "docs_example"})
        assert printed.getvalue() == example["out"]
