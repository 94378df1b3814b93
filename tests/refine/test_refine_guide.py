"""The self-refine guide's examples run as written and print what the guide says."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

import pytest

GUIDE = Path(__file__).parents[2] / "docs" / "guide" / "self-refine.md"
BLOCKS = re.findall(r"```python\n(.*?)```", GUIDE.read_text(), re.DOTALL)


def run_block(code: str) -> str:
    output = io.StringIO()
    with contextlib.redirect_stdout(output):
        exec(compile(code, str(GUIDE), "exec"), {"__name__": "guide"})
    return output.getvalue()


def test_the_guide_has_examples() -> None:
    assert len(BLOCKS) >= 5


@pytest.mark.parametrize("index", range(len(BLOCKS)))
def test_every_example_runs(index: int) -> None:
    run_block(BLOCKS[index])


def test_the_printed_outputs_match_the_guide() -> None:
    quick_start, _, weather, failing = (run_block(b) for b in BLOCKS[:4])
    assert quick_start == (
        "Paris. passed 2\n- is_correct: The answer is wrong (P(yes) 0.05, needed at least 0.70)\n"
    )
    assert weather == (
        "The weather in Paris is sunny, 15 °C. (the judge last saw: The weather in Paris is "
        "sunny, 15 °C.)\n"
    )
    assert failing == (
        "gave up: passed=false [ok=FAILED]\n"
        "   ok: It is wrong (P(yes) 0.10, needed at least 0.50)\n"
        "3 attempts\n"
    )


def test_the_judge_guide_example_prints_what_it_says() -> None:
    guide = GUIDE.with_name("judge.md")
    (code,) = re.findall(r"```python\n(.*?)```", guide.read_text(), re.DOTALL)
    output = io.StringIO()
    with contextlib.redirect_stdout(output):
        exec(compile(code, str(guide), "exec"), {"__name__": "guide"})
    assert output.getvalue() == (
        "passed=false [called_weather=PASSED, is_grounded=FAILED, helpfulness=PASSED, "
        "tone=PASSED]\n"
        "- is_grounded: States a value no tool returned (P(yes) 0.20, needed at least 0.70)\n"
    )


def test_the_retry_strategy_example_prints_what_the_guide_says() -> None:
    """The default guards a word-for-word repeat and samples retries; the shipped loop does not."""
    (example,) = [block for block in BLOCKS if "RetryStrategy(" in block]
    assert run_block(example) == (
        "default Paris. [None, 1, None] 0.7 None\nshipped Paris. [None, None, None] None None\n"
    )
    printed = re.search(r"prints\n\n```\n(default .*?)```", GUIDE.read_text(), re.DOTALL)
    assert printed is not None
    assert run_block(example) == printed.group(1)
