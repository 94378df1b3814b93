"""`ConfidenceGate`: confidence as a second decision axis — execute, confirm or escalate.

```python
gate = ConfidenceGate(floor=0.6, require={"transfer_funds": 0.85})
match gate.decide(response.choice("intent")):
    case GateDecision.EXECUTE:
        handle(intent)
    case GateDecision.CONFIRM:
        ask_the_user_to_confirm(intent)
    case GateDecision.ESCALATE:
        hand_over_to_a_person()
```

The answer says *what*; its confidence says whether to act on it unattended. Confidence is a
statistic of the answer's own distribution: low means the options did not separate for this
input, not that the answer is wrong. So it suits deciding how much autonomy to grant, not
deciding correctness (that is the `Judge`'s). A floor applies to every action; above it, an
action may demand more, in proportion to what it costs to get wrong: reading a balance is not
transferring one.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Final

from .. import _validate
from ..exceptions import UserError
from ..jev.responses import ChoiceAnswer

__all__ = ["DEFAULT_FLOOR", "ConfidenceGate", "GateDecision"]

DEFAULT_FLOOR: Final = 0.6
"""The confidence below which nothing is done unattended."""


class GateDecision(enum.Enum):
    """What to do with an answer, given how confident it is."""

    EXECUTE = "execute"
    """Confident enough for this action: act on it."""
    CONFIRM = "confirm"
    """Above the floor, short of what this action demands: ask the user first."""
    ESCALATE = "escalate"
    """Below the floor: nobody should act on it automatically."""


def _confidence(name: str, value: object) -> float:
    return _validate.number(name, value, minimum=0, maximum=1, example=0.85)


@dataclass(frozen=True, slots=True, kw_only=True)
class ConfidenceGate:
    """Decides EXECUTE, CONFIRM or ESCALATE from an answer's confidence.

    Args:
        floor: Below it, every action escalates (0 to 1; default 0.6).
        require: Action -> the confidence it demands (for a choice, the action is the label
            chosen). Each must be at least `floor`: a demand below the floor could never
            apply, as anything under the floor escalates first. Others need the floor.

    Raises:
        UserError: a value outside 0..1, a blank action, or a demand below the floor.
    """

    floor: float = DEFAULT_FLOOR
    """The confidence below which every action escalates."""
    require: Mapping[str, float] = field(default_factory=lambda: MappingProxyType({}))
    """Action -> the confidence that action demands (at least `floor`)."""

    def __post_init__(self) -> None:
        floor = _confidence("floor", self.floor)
        if not isinstance(self.require, Mapping):
            raise UserError(
                f"require={_validate.shown(self.require)} is not a mapping: pass action -> "
                'confidence, e.g. {"transfer_funds": 0.85}'
            )
        required: dict[str, float] = {}
        for action, value in self.require.items():
            action = _validate.text("an action of require", action, nonblank=True, example="refund")
            needed = _confidence(f"require[{action!r}]", value)
            if needed < floor:
                raise UserError(
                    f"action {action!r} demands less confidence ({needed}) than the floor "
                    f"({floor}), which it can never apply: give it at least {floor}, or lower "
                    "the floor"
                )
            required[action] = needed
        object.__setattr__(self, "floor", floor)
        object.__setattr__(self, "require", MappingProxyType(required))

    def required_for(self, action: str) -> float:
        """The confidence `action` demands: its own when declared, else the floor."""
        return self.require.get(action, self.floor)

    def decide_action(self, action: str, confidence: float) -> GateDecision:
        """The decision for `action` at `confidence`.

        ESCALATE below the floor; EXECUTE at or above what the action demands; CONFIRM between.
        """
        action = _validate.text("action", action, nonblank=True, example="refund")
        value = _confidence("confidence", confidence)
        if value < self.floor:
            return GateDecision.ESCALATE
        return GateDecision.EXECUTE if value >= self.required_for(action) else GateDecision.CONFIRM

    def decide(self, answer: ChoiceAnswer) -> GateDecision:
        """The decision for a choice: its label is the action, its confidence the value.

        The confidence is the one the service reported, else the chosen label's probability.
        """
        if not isinstance(answer, ChoiceAnswer):
            raise UserError(
                f"ConfidenceGate.decide takes a ChoiceAnswer (response.choice(name)), got "
                f"{type(answer).__name__}; use decide_action(action, confidence) for others"
            )
        confidence = answer.confidence
        if confidence is None:
            confidence = answer.probability_of(answer.choice)
        return self.decide_action(answer.choice, confidence)
