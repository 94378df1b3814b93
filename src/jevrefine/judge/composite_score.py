"""`CompositeScore`: several score answers combined into one number, with weights you set.

```python
engineering = CompositeScore({"python_depth": 0.4, "system_design": 0.4,
                              "team_leadership": 0.1, "generalist": 0.1})
candidates.sort(key=lambda c: engineering.of(c.response), reverse=True)
```

For **ordering** candidates that have all passed already, never for gating: a pass/fail decision
needs each criterion thresholded on its own (a `Judge`), as an average hides the one dimension
that should fail. Each dimension is divided by its rubric's highest level before weighting, so
rubrics with different numbers of levels compare; with weights summing to 1 the composite is in
[0, 1]. One set of answers can serve several weightings (profiles).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Final

from .. import _validate
from ..exceptions import UserError
from ..jev.responses import ScoreAnswer, SystemOneResponse

__all__ = ["WEIGHT_SUM_TOLERANCE", "CompositeScore"]

WEIGHT_SUM_TOLERANCE: Final = 1e-9
"""How far from 1 the weights' sum may be (floating-point rounding, not a typo)."""


@dataclass(frozen=True, slots=True, init=False)
class CompositeScore:
    """A weighted sum of normalised score answers.

    Args:
        weights: Score question id -> its share of the composite (finite, at least 0, one at
            least above 0). They must sum to 1.
        allow_unnormalised_weights: Accept weights that do not sum to 1 (the composite's range is
            then not [0, 1]).

    Raises:
        UserError: no weights, a weight that is not a finite number >= 0, or a sum other than 1
            without `allow_unnormalised_weights`.
    """

    weights: Mapping[str, float]
    """Score question id -> its weight, in the order given."""
    allow_unnormalised_weights: bool
    """Whether weights may sum to something other than 1."""

    def __init__(
        self, weights: Mapping[str, float], *, allow_unnormalised_weights: bool = False
    ) -> None:
        if not isinstance(weights, Mapping) or not weights:
            raise UserError(
                f"weights={_validate.shown(weights)}: pass score question id -> weight, e.g. "
                '{"python_depth": 0.6, "system_design": 0.4}'
            )
        checked: dict[str, float] = {}
        for name, weight in weights.items():
            name = _validate.text("a weight's name", name, nonblank=True, example="python_depth")
            checked[name] = _validate.number(f"weights[{name!r}]", weight, minimum=0, example=0.4)
        allow = _validate.boolean("allow_unnormalised_weights", allow_unnormalised_weights)
        total = math.fsum(checked.values())
        if total <= 0:
            raise UserError("every weight is 0: give at least one dimension a positive weight")
        if not allow and abs(total - 1.0) > WEIGHT_SUM_TOLERANCE:
            raise UserError(
                f"the weights sum to {total:g}, not 1 ({_listed(checked)}): fix the weights, or "
                "pass allow_unnormalised_weights=True if a composite outside [0, 1] is meant"
            )
        object.__setattr__(self, "weights", MappingProxyType(checked))
        object.__setattr__(self, "allow_unnormalised_weights", allow)

    @staticmethod
    def normalise(answer: ScoreAnswer) -> float:
        """`answer.score` divided by its rubric's highest level (read from its legend): 0 to 1.

        Raises:
            UserError: the answer carries no legend, or one with a single level.
        """
        if not isinstance(answer, ScoreAnswer):
            raise UserError(f"normalise takes a ScoreAnswer, got {type(answer).__name__}")
        if not answer.legend:
            raise UserError(
                "this score answer carries no legend, so its rubric's height is unknown: "
                "normalise answers as the service returns them (with their legend)"
            )
        highest = max(answer.legend)
        if highest <= 0:
            raise UserError("a rubric with a single level cannot be normalised: nothing to rank")
        return answer.score / highest

    def of(self, response: SystemOneResponse) -> float:
        """The composite of `response`'s score answers: sum of weight x normalised score.

        Raises:
            AnswerNotFoundError: a weighted dimension has no score answer in `response`.
            UserError: a dimension's answer cannot be normalised.
        """
        return math.fsum(
            weight * self.normalise(response.score(name)) for name, weight in self.weights.items()
        )

    def __repr__(self) -> str:
        return f"CompositeScore({_listed(self.weights)})"


def _listed(weights: Mapping[str, float]) -> str:
    return ", ".join(f"{name}={weight:g}" for name, weight in weights.items())
