"""Evaluate a refine setup: how often its answers pass, before and after refinement.

```python
from jevrefine import evals

cases = evals.load_cases("cases.jsonl")
report = await evals.evaluate(cases, ChatClient(model), judge="asserts")
print(report.to_dict()["lift"], report.to_dict()["lift_ci95"])
report.write_json("report.json")
report.write_html("report.html")
```

Each case's assertions are the oracle: they score every attempt's answer. The baseline is the
oracle's verdict on attempt 1's answer, the final one on the answer returned, so the lift of
refinement costs no extra model call. What judges the refine loop is a separate choice
(`judge=`). `jevrefine eval CASES.jsonl` does the same from the command line. Guide:
`docs/guide/evals.md`.
"""

from __future__ import annotations

from ._asserts import AssertionResult as AssertionResult
from ._cases import ASSERTION_TYPES as ASSERTION_TYPES
from ._cases import Assertion as Assertion
from ._cases import Case as Case
from ._cases import CaseFileError as CaseFileError
from ._cases import load_cases as load_cases
from ._report import EvalReport as EvalReport
from ._report import JudgeMode as JudgeMode
from ._run import evaluate as evaluate

__all__ = [
    "ASSERTION_TYPES",
    "Assertion",
    "AssertionResult",
    "Case",
    "CaseFileError",
    "EvalReport",
    "JudgeMode",
    "evaluate",
    "load_cases",
]
