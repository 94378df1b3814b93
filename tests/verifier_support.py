"""What the tests of the benchmarks' case files (IFBench, IFEval) share.

A benchmark's verifiers come from `if-verifiable` (installed with `--no-deps`) and the small
libraries they import; without them a test that runs them skips with the install command, except
under CI, where a missing verifier is a failure (CI installs them).
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from benchmarks.verifiable.verifiers import Verifiers, VerifierUnavailableError

from jevrefine import ChatClient
from jevrefine.evals import evaluate, load_cases
from jevrefine.messages import Prompt
from jevrefine.testing import FunctionModel

DUMMY = "Hello. This is a short answer, with one sentence more.\n\nA second paragraph."
"""An answer every assertion can be run on."""


def skip_without(verifiers: Verifiers) -> pytest.MarkDecorator:
    """Skip (outside CI) when `verifiers` cannot be imported, with what to install."""
    try:
        verifiers.registry()
        missing = None
    except VerifierUnavailableError as exc:
        missing = str(exc)
    return pytest.mark.skipif(
        missing is not None and not os.environ.get("CI"), reason=missing or ""
    )


def resolve(reference: str) -> Any:
    """The function a `python` assertion's `module:function` names."""
    module, _, name = reference.partition(":")
    return getattr(importlib.import_module(module), name)


async def evaluate_answers(case_file: Path, answers: Mapping[str, str]) -> dict[str, bool | None]:
    """Each named case of `case_file` run by `jevrefine.evals.evaluate`, its model answering
    `answers[case id]`, one attempt: whether it passed, by case id.

    This is the path `jevrefine eval CASES.jsonl` takes: the references are checked and imported
    by jevrefine itself. A row with an error fails the test, saying which.
    """
    cases = [c for c in load_cases(case_file) if c.id in answers]
    assert sorted(c.id for c in cases) == sorted(answers)

    def answer(prompt: Prompt) -> str:
        last = prompt.last_user_message()
        assert last is not None
        return next(answers[c.id] for c in cases if c.input == last.text)

    report = await evaluate(cases, ChatClient(FunctionModel(answer)), judge="none")
    rows = report.to_dict()["results"]
    assert [(r["id"], r["error"]) for r in rows if r["error"]] == []
    return {r["id"]: r["passed_final"] for r in rows}
