"""Helpers for the evals tests: case files, a scripted grader."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from jevrefine.evals import Case, load_cases
from jevrefine.jev.responses import NoulAnswer, SystemOneResponse
from jevrefine.messages import Usage


def write_cases(path: Path, cases: list[Any], *, blank_lines: int = 0) -> Path:
    lines = ["" for _ in range(blank_lines)]
    lines += [c if isinstance(c, str) else json.dumps(c) for c in cases]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def one_case(tmp_path: Path, *assertions: dict[str, Any], **fields: Any) -> Case:
    case = {"id": "c", "input": "question?", "assert": list(assertions), **fields}
    return load_cases(write_cases(tmp_path / "one.jsonl", [case]))[0]


class Grader:
    """A SystemOneClient: P(yes) = `yes` unless the answer contains `no_word`; records calls."""

    def __init__(self, yes: float = 0.9, *, no_word: str = "rude", tokens: int = 7) -> None:
        self.yes = yes
        self.no_word = no_word
        self.tokens = tokens
        self.calls: list[tuple[dict[str, Any], dict[str, Any]]] = []

    async def system_one(
        self,
        state: Any,
        questions: Any,
        *,
        model: str | None = None,
        timeout: float | None = None,  # noqa: ASYNC109 - the protocol's signature
    ) -> SystemOneResponse:
        self.calls.append((dict(state), dict(questions)))
        low = self.no_word in state["assistant_answer"]
        value = 1.0 - self.yes if low else self.yes
        answers = {name: NoulAnswer(value) for name in questions}
        return SystemOneResponse("grader", answers, Usage(self.tokens, 0))
