"""`ConfidenceGate`: execute, confirm or escalate from an answer's confidence.

Behaviour and defaults follow the seed library's `JevConfidenceGate`
(spring-ai-community/spring-ai-typesafe, docs/patterns/JevConfidenceGate; the class's own
documentation in typesafe-spring-ai/.../judge/JevConfidenceGate.java).
"""

from __future__ import annotations

import pytest

from jevrefine.exceptions import UserError
from jevrefine.jev import Choice, JudgeClient
from jevrefine.jev.responses import ChoiceAnswer
from jevrefine.judge import ConfidenceGate, GateDecision
from jevrefine.judge.confidence_gate import DEFAULT_FLOOR
from jevrefine.testing import FakeJevServer


def test_floor_then_per_action_demands() -> None:
    """JevConfidenceGate: below the floor every action escalates; at or above what an action
    demands it executes; between the two it asks for confirmation."""
    gate = ConfidenceGate(floor=0.6, require={"transfer_funds": 0.85})
    assert gate.decide_action("transfer_funds", 0.59) is GateDecision.ESCALATE
    assert gate.decide_action("transfer_funds", 0.6) is GateDecision.CONFIRM
    assert gate.decide_action("transfer_funds", 0.84) is GateDecision.CONFIRM
    assert gate.decide_action("transfer_funds", 0.85) is GateDecision.EXECUTE
    assert gate.decide_action("check_balance", 0.6) is GateDecision.EXECUTE
    assert gate.decide_action("check_balance", 0.5999) is GateDecision.ESCALATE
    assert (gate.required_for("transfer_funds"), gate.required_for("other")) == (0.85, 0.6)


def test_the_default_floor_is_0_6() -> None:
    """JevConfidenceGate.DEFAULT_FLOOR = 0.6: the confidence below which nothing is done
    unattended."""
    gate = ConfidenceGate()
    assert gate.floor == DEFAULT_FLOOR == 0.6
    assert dict(gate.require) == {}


def test_a_choice_is_decided_on_its_label_and_confidence() -> None:
    """JevConfidenceGate.decide(ChoiceAnswer): the selected label is the action name."""
    gate = ConfidenceGate(require={"refund": 0.9})
    refund = ChoiceAnswer("refund", {"refund": 0.8, "question": 0.2}, confidence=0.8)
    assert gate.decide(refund) is GateDecision.CONFIRM
    question = ChoiceAnswer("question", {"refund": 0.2, "question": 0.8})
    assert gate.decide(question) is GateDecision.EXECUTE  # no confidence: its probability


async def test_deciding_on_a_real_answer_from_jev() -> None:
    def answer(state, questions):
        probabilities = {"transfer_funds": 0.7, "check_balance": 0.3}
        return {"intent": {"type": "choice", "choice": "transfer_funds", "confidence": 0.7,
                           "probabilities": probabilities}}  # fmt: skip

    gate = ConfidenceGate(floor=0.6, require={"transfer_funds": 0.85})
    async with FakeJevServer(answer) as server, JudgeClient("k", base_url=server.base_url) as jev:
        response = await jev.system_one(
            "Send 500 EUR to Bob",
            {"intent": Choice("Intent?", ["transfer_funds", "check_balance"])},
        )
    assert gate.decide(response.choice("intent")) is GateDecision.CONFIRM


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"floor": 1.2}, "floor=1.2"),
        ({"floor": -0.1}, "floor=-0.1"),
        ({"require": {"x": 2}}, r"require\['x'\]=2"),
        ({"require": {"": 0.9}}, "an action of require"),
        ({"require": [("x", 0.9)]}, "is not a mapping"),
        (
            {"floor": 0.7, "require": {"read": 0.5}},
            r"action 'read' demands less confidence \(0.5\) than the floor \(0.7\)",
        ),
    ],
)
def test_bad_settings_are_refused_with_what_to_pass(kwargs, message) -> None:
    """JevConfidenceGate.Builder: values between 0 and 1; a demand below the floor is refused
    as one it can never reach."""
    with pytest.raises(UserError, match=message):
        ConfidenceGate(**kwargs)


def test_bad_inputs_are_refused() -> None:
    gate = ConfidenceGate()
    with pytest.raises(UserError, match=r"confidence=1\.5"):
        gate.decide_action("x", 1.5)
    with pytest.raises(UserError, match="action="):
        gate.decide_action("", 0.9)
    with pytest.raises(UserError, match="takes a ChoiceAnswer"):
        gate.decide(0.9)  # type: ignore[arg-type]
    with pytest.raises(AttributeError):
        gate.floor = 0.1  # type: ignore[misc]
