"""The code examples of the batch guide run, in order, as written (on `FunctionModel`)."""

from __future__ import annotations

import ast
import inspect
import re
from pathlib import Path
from typing import Any

import pytest

GUIDE = Path(__file__).resolve().parents[1] / "docs" / "guide" / "batch.md"
BLOCKS = re.findall(r"```python\n(.*?)```", GUIDE.read_text(encoding="utf-8"), re.DOTALL)


def test_the_guide_has_examples() -> None:
    assert len(BLOCKS) >= 5


async def test_batch_guide_examples_run() -> None:
    namespace: dict[str, Any] = {"__name__": "docs_batch"}
    for number, block in enumerate(BLOCKS, 1):
        code = compile(block, f"{GUIDE.name}[{number}]", "exec", ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
        result = eval(code, namespace)
        if inspect.iscoroutine(result):
            await result
    assert namespace["done"] == 1_000  # the last example ran to the end


@pytest.mark.parametrize("page", ["ray.md", "cli.md", "web.md"])
def test_other_guides_python_blocks_parse(page: str) -> None:
    # These need a cluster, a provider or a server: they are exercised by the ray, CLI and
    # integration tests; here they must at least be valid Python.
    text = (GUIDE.parent / page).read_text(encoding="utf-8")
    for block in re.findall(r"```python\n(.*?)```", text, re.DOTALL):
        ast.parse(block, feature_version=(3, 11))
