import pytest

from jevrefine.exceptions import UserError
from jevrefine.jev import Choice, JudgeError, JudgeUsageError, Noul, Score
from jevrefine.jev.questions import check_state, questions_to_wire


def test_noul_wire_form_sends_criteria_only_when_a_side_is_given() -> None:
    assert Noul("Grounded?").to_wire() == {"type": "noul", "instructions": "Grounded?"}
    assert Noul("Grounded?", when_false="Unsupported claim").to_wire() == {
        "type": "noul",
        "instructions": "Grounded?",
        "criteria": {"false": "Unsupported claim"},
    }
    assert Noul("G?", when_true={"a": 1}, when_false=["x"]).to_wire()["criteria"] == {
        "true": {"a": 1},
        "false": ["x"],
    }


def test_choice_and_score_wire_forms_keep_order() -> None:
    choice = Choice("Team?", options={"sales": None, "billing": "Payments", "tech": "Bugs"})
    assert list(choice.to_wire()["criteria"].items()) == [
        ("sales", None),
        ("billing", "Payments"),
        ("tech", "Bugs"),
    ]
    score = Score("Angry?", levels=("Calm", "Frustrated", "Very angry"))
    assert score.to_wire() == {
        "type": "score",
        "instructions": "Angry?",
        "criteria": ["Calm", "Frustrated", "Very angry"],
    }
    assert score.max_level == 2


def test_choice_accepts_a_list_of_labels() -> None:
    assert Choice("Tone?", options=["calm", "angry"]).options == {"calm": None, "angry": None}


@pytest.mark.parametrize(
    ("build", "fragment"),
    [
        (lambda: Noul("  "), "empty"),
        (lambda: Noul(3), "must be a str, a dict or a list"),  # type: ignore[arg-type]
        (lambda: Choice("Team?", options={}), "no options"),
        (lambda: Choice("Team?", options={f"l{i}": None for i in range(256)}), "at most 255"),
        (lambda: Choice("Team?", options={"": None}), "non-empty str"),
        (lambda: Score("How?", levels=["only"]), "1 level(s)"),
        (lambda: Score("How?", levels=[str(i) for i in range(11)]), "11 level(s)"),
        (lambda: Score("How?", levels="abc"), "must be a list"),
    ],
)
def test_limits_are_checked_at_construction(build, fragment) -> None:
    with pytest.raises(JudgeUsageError, match=fragment.replace("(", r"\(").replace(")", r"\)")):
        build()


def test_limits_at_the_boundaries_are_accepted() -> None:
    Choice("Team?", options={f"l{i}": None for i in range(255)})
    Choice("Team?", options={"only": None})
    Score("How?", levels=["a", "b"])
    Score("How?", levels=[str(i) for i in range(10)])


def test_usage_errors_are_judge_errors_and_user_errors() -> None:
    with pytest.raises(JudgeUsageError) as info:
        Score("How?", levels=["a"])
    assert isinstance(info.value, JudgeError)
    assert isinstance(info.value, UserError)
    assert isinstance(info.value, ValueError)


def test_questions_to_wire_names_the_bad_question() -> None:
    with pytest.raises(JudgeUsageError, match="at least one question"):
        questions_to_wire({})
    with pytest.raises(JudgeUsageError, match="'tone'"):
        questions_to_wire({"tone": {"type": "score", "instructions": "x", "criteria": ["a"]}})
    with pytest.raises(JudgeUsageError, match=r"'q'.*instructions"):
        questions_to_wire({"q": {"type": "noul"}})
    with pytest.raises(JudgeUsageError, match="'q' is a int"):
        questions_to_wire({"q": 3})  # type: ignore[dict-item]
    with pytest.raises(JudgeUsageError, match="ids must be non-empty"):
        questions_to_wire({"": Noul("x")})


def test_wire_dicts_pass_through_including_newer_types() -> None:
    wire = questions_to_wire({"a": Noul("x"), "b": {"type": "box", "instructions": "The dog"}})
    assert list(wire) == ["a", "b"]
    assert wire["b"] == {"type": "box", "instructions": "The dog"}


@pytest.mark.parametrize("state", ["text", {"a": 1}, [1, 2], ("x",)])
def test_state_accepts_text_objects_and_arrays(state) -> None:
    check_state(state)


@pytest.mark.parametrize("state", [1, 1.5, True, None, b"bytes"])
def test_state_rejects_what_the_api_rejects(state) -> None:
    with pytest.raises(JudgeUsageError, match="state must be a str, a dict or a list"):
        check_state(state)
