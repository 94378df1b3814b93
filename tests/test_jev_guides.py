"""The JevChatModel and guardrail guides' first examples run as written, offline."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

import pytest

GUIDES = Path(__file__).parents[1] / "docs" / "guide"


@pytest.mark.parametrize(
    ("guide", "expected"),
    [
        ("jev-chat-model.md", "team='infra' urgent=0.97 severity=1.8\n"),
        ("guardrail.md", "Paris is the capital of France.\nI can't help with that. BLOCK\n1\n"),
    ],
)
def test_the_guide_example_runs(guide: str, expected: str) -> None:
    path = GUIDES / guide
    code = re.search(r"```python\n(.*?)```", path.read_text(), re.DOTALL)
    assert code is not None
    output = io.StringIO()
    with contextlib.redirect_stdout(output):
        exec(compile(code.group(1), str(path), "exec"), {"__name__": "guide"})
    assert output.getvalue() == expected
