"""Everything that judges an answer: criteria, the `Judge`, its `Verdict`, and judge clients.

```python
from jevrefine.jev import JudgeClient, Noul
from jevrefine.judge import Judge, JudgeInput, check, noul

judge = Judge(JudgeClient(), criteria=[
    check("short", lambda i: len(i.assistant_answer.split()) <= 50, defect="Longer than 50 words"),
    noul("is_grounded", Noul("Is every value supported by `tool_calls`?"), minimum=0.7),
])
verdict = await judge.evaluate(JudgeInput("user: Weather in Paris?", "It is 15 °C."))
```

A `Judge` turns criteria (`noul`, `score`, `choice` questions with thresholds, and `check` code
checks) into a `Verdict` on one answer, asking any `jevrefine.jev.SystemOneClient`: the Jev
service (`JudgeClient`) or a chat model (`ModelJudgeClient`). `rating_judge` is seed 003's
helpfulness judge, `reference_judge` a correctness judge a small local model can run (it
answers first, then compares); `calibrate` measures a judge on known right and wrong answers;
`pairwise` and `consistency` compare answers and judges.

Patterns on top (after the seed library's): `Judge(..., escalate_to=stronger_client)` re-asks
the criteria the first client was unsure about; `ConfidenceGate` decides to execute, confirm or
escalate from an answer's confidence; `CompositeScore` ranks by weighted scores; `Evaluator`
puts a judge behind a pass/score/feedback interface; `select_tools` decides which of a request's
tools Jev finds applicable (the advisor that offers the model only those is the chain's:
`jevrefine.advisors.ToolIndex`; `jevrefine.judge.ToolIndex` still works, with a
`DeprecationWarning`). `RateLimitedJudgeClient` holds any client to a provider's limits.
"""

from __future__ import annotations

from typing import Any

from ._escalation import DEFAULT_ESCALATE_BELOW as DEFAULT_ESCALATE_BELOW
from ._explain import JudgeExample as JudgeExample
from ._input import JudgeInput as JudgeInput
from ._judge import Judge as Judge
from ._judge import JudgePlan as JudgePlan
from ._judge import rating_judge as rating_judge
from ._judge import reference_judge as reference_judge
from .calibration import CALIBRATION_PAIRS as CALIBRATION_PAIRS
from .calibration import Calibration as Calibration
from .calibration import KnownPair as KnownPair
from .calibration import calibrate as calibrate
from .composite_score import CompositeScore as CompositeScore
from .confidence_gate import ConfidenceGate as ConfidenceGate
from .confidence_gate import GateDecision as GateDecision
from .criteria import CheckCriterion as CheckCriterion
from .criteria import Criterion as Criterion
from .criteria import QuestionCriterion as QuestionCriterion
from .criteria import check as check
from .criteria import choice as choice
from .criteria import noul as noul
from .criteria import score as score
from .evaluator import EvaluationResult as EvaluationResult
from .evaluator import Evaluator as Evaluator
from .model_judge import ModelJudgeClient as ModelJudgeClient
from .patterns import ConsistencyReport as ConsistencyReport
from .patterns import PairwiseResult as PairwiseResult
from .patterns import QuestionStats as QuestionStats
from .patterns import consistency as consistency
from .patterns import pairwise as pairwise
from .rate_limited import RateLimitedJudgeClient as RateLimitedJudgeClient
from .tool_index import moved_to_advisors
from .tool_selection import ToolMatch as ToolMatch
from .tool_selection import ToolSelection as ToolSelection
from .tool_selection import select_tools as select_tools
from .verdict import Finding as Finding
from .verdict import Outcome as Outcome
from .verdict import Verdict as Verdict

__all__ = [
    "CALIBRATION_PAIRS",
    "DEFAULT_ESCALATE_BELOW",
    "Calibration",
    "CheckCriterion",
    "CompositeScore",
    "ConfidenceGate",
    "ConsistencyReport",
    "Criterion",
    "EvaluationResult",
    "Evaluator",
    "Finding",
    "GateDecision",
    "Judge",
    "JudgeExample",
    "JudgeInput",
    "JudgePlan",
    "KnownPair",
    "ModelJudgeClient",
    "Outcome",
    "PairwiseResult",
    "QuestionCriterion",
    "QuestionStats",
    "RateLimitedJudgeClient",
    "ToolMatch",
    "ToolSelection",
    "Verdict",
    "calibrate",
    "check",
    "choice",
    "consistency",
    "noul",
    "pairwise",
    "rating_judge",
    "reference_judge",
    "score",
    "select_tools",
]


def __getattr__(name: str) -> Any:
    # `ToolIndex` (deprecated here): the advisor, from `jevrefine.advisors`, with a warning.
    return moved_to_advisors(__name__, name)
