"""`python` assertions for cases.jsonl: each gets the answer and a context dict.

A function returns a bool, or a score from 0 to 1 held against the assertion's `threshold`
(0.5 when none is given).
"""

from __future__ import annotations

from typing import Any


def no_long_lines(output: str, context: dict[str, Any]) -> bool:
    """Every line is at most 80 characters."""
    return all(len(line) <= 80 for line in output.splitlines())


def share_of_listed_colours(output: str, context: dict[str, Any]) -> float:
    """The share of the colours in the case's metadata that the answer names."""
    colours: list[str] = context["metadata"]["colours"]
    text = output.casefold()
    return sum(colour in text for colour in colours) / len(colours)
