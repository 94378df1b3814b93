"""The reliability page names real tests: a renamed or deleted test must not leave a promise
in the docs without its proof."""

from __future__ import annotations

import re
from pathlib import Path

HERE = Path(__file__).parent
PAGE = HERE.parents[1] / "docs" / "guide" / "reliability.md"


def test_every_test_the_page_names_exists() -> None:
    page = PAGE.read_text(encoding="utf-8")
    sources = "\n".join(p.read_text(encoding="utf-8") for p in HERE.glob("test_*.py"))
    defined = set(re.findall(r"^(?:async )?def (test_\w+)", sources, re.MULTILINE))
    named = set(re.findall(r"`(?:[\w.]+::)?(test_\w+?)(_\*)?(?:\[[^\]]*\])?`", page))
    assert named, "the page names no tests"
    for name, star in named:
        if star:  # a prefix (`test_transient_fault_*`)
            assert any(d.startswith(name + "_") for d in defined), name
        else:
            assert name in defined, name
    files = set(re.findall(r"`(test_\w+\.py)", page))
    assert files
    for file in files:
        assert (HERE / file).exists(), file
