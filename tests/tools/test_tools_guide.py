"""The tools guide's first example runs as written (it is the README/docs' runnable example)."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

GUIDE = Path(__file__).parents[2] / "docs" / "guide" / "tools.md"


def test_the_guide_example_runs() -> None:
    code = re.search(r"```python\n(.*?)```", GUIDE.read_text(), re.DOTALL)
    assert code is not None
    output = io.StringIO()
    with contextlib.redirect_stdout(output):
        exec(compile(code.group(1), str(GUIDE), "exec"), {"__name__": "guide"})
    assert output.getvalue() == "sunny in Paris; sunny in Rome\n"
