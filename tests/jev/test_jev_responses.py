import pytest

from jevrefine.jev import (
    AnswerNotFoundError,
    ChoiceAnswer,
    JudgeResponseError,
    NoulAnswer,
    ScoreAnswer,
    UnknownAnswerWarning,
)
from jevrefine.jev.responses import distribution_confidence, parse_models, parse_system_one
from jevrefine.messages import Usage

# The example response of spec/jev-api.md §1.3, verbatim.
SPEC_EXAMPLE = {
    "model": "jev-1.13.0",
    "answers": {
        "is_grounded": {"type": "noul", "noul": 0.95},
        "department": {
            "type": "choice",
            "choice": "billing",
            "confidence": 0.81,
            "probabilities": {"billing": 0.88, "technical": 0.12, "sales": 0.0},
        },
        "frustration": {
            "type": "score",
            "score": 1.05,
            "confidence": 0.92,
            "legend": {"0": "Calm", "1": "Frustrated", "2": "Very angry"},
            "probabilities": {"0": 0.0, "1": 0.95, "2": 0.05},
        },
    },
    "usage": {"input_tokens": 304, "output_tokens": 18},
}


def test_the_spec_example_parses_to_typed_answers() -> None:
    response = parse_system_one(SPEC_EXAMPLE, "req_1")
    assert response.model == "jev-1.13.0"
    assert response.request_id == "req_1"
    assert response.usage == Usage(304, 18)
    assert response.noul("is_grounded") == NoulAnswer(0.95)
    department = response.choice("department")
    assert department.choice == "billing"
    assert department.probability_of("technical") == 0.12
    assert department.probability_of("nope") == 0.0
    assert department.confidence == 0.81
    frustration = response.score("frustration")
    assert frustration.score == 1.05
    assert frustration.legend == {0: "Calm", 1: "Frustrated", 2: "Very angry"}
    assert frustration.probabilities == {0: 0.0, 1: 0.95, 2: 0.05}
    assert frustration.level == 1
    assert list(response.answers) == ["is_grounded", "department", "frustration"]
    assert set(response.nouls) == {"is_grounded"}
    assert set(response.choices) == {"department"}
    assert set(response.scores) == {"frustration"}
    assert response.calibrated


def test_lookup_errors_name_what_is_there() -> None:
    response = parse_system_one(SPEC_EXAMPLE)
    with pytest.raises(AnswerNotFoundError, match=r"no answer named 'x'.*is_grounded \(noul\)"):
        response.noul("x")
    with pytest.raises(AnswerNotFoundError, match="is a choice, not a noul"):
        response.noul("department")
    with pytest.raises(LookupError):
        response.score("is_grounded")


def test_unknown_answer_types_are_set_aside_with_a_warning() -> None:
    body = {
        "model": "jev-1.14.0",
        "answers": {
            "dog": {"type": "box", "box": {"top": 0.1}, "confidence": None},
            "ok": {"type": "noul", "noul": 0.5},
        },
        "usage": {"input_tokens": 1, "output_tokens": 0},
    }
    with pytest.warns(UnknownAnswerWarning, match="dog \\(box\\)"):
        response = parse_system_one(body)
    assert list(response.answers) == ["ok"]
    assert response.unknown_answers["dog"]["box"] == {"top": 0.1}


@pytest.mark.parametrize(
    ("mutate", "path"),
    [
        (lambda b: b.pop("model"), "model"),
        (lambda b: b.__setitem__("answers", []), "answers"),
        (
            lambda b: b["answers"]["is_grounded"].__setitem__("noul", "high"),
            "answers.is_grounded.noul",
        ),
        (
            lambda b: b["answers"]["is_grounded"].__setitem__("noul", True),
            "answers.is_grounded.noul",
        ),
        (lambda b: b["answers"]["is_grounded"].pop("type"), "answers.is_grounded.type"),
        (
            lambda b: b["answers"]["department"].pop("probabilities"),
            "answers.department.probabilities",
        ),
        (
            lambda b: b["answers"]["department"].__setitem__("choice", 3),
            "answers.department.choice",
        ),
        (
            lambda b: b["answers"]["frustration"]["legend"].__setitem__("x", "?"),
            "answers.frustration.legend.x",
        ),
        (lambda b: b["usage"].__setitem__("input_tokens", 1.5), "usage.input_tokens"),
    ],
)
def test_malformed_bodies_name_the_field(mutate, path) -> None:
    import copy

    body = copy.deepcopy(SPEC_EXAMPLE)
    mutate(body)
    with pytest.raises(JudgeResponseError) as info:
        parse_system_one(body, "req_9")
    assert info.value.field_path == path
    assert "req_9" in str(info.value)
    assert not info.value.is_transient


def test_not_an_object_at_all() -> None:
    with pytest.raises(JudgeResponseError, match="as a whole"):
        parse_system_one(["x"])


def test_missing_usage_is_zero_and_confidence_may_be_null() -> None:
    body = {
        "model": "m",
        "answers": {"c": {"type": "choice", "choice": "a", "probabilities": {"a": 1}}},
    }
    response = parse_system_one(body)
    assert response.usage == Usage()
    assert response.choice("c").confidence is None


def test_answers_are_read_only() -> None:
    response = parse_system_one(SPEC_EXAMPLE)
    with pytest.raises(TypeError):
        response.answers["x"] = NoulAnswer(1.0)  # type: ignore[index]
    choice = ChoiceAnswer("a", {"a": 1.0})
    with pytest.raises(TypeError):
        choice.probabilities["b"] = 0.0  # type: ignore[index]
    assert ScoreAnswer(0.5, {0: "a", 1: "b"}, {0: 0.5, 1: 0.5}).level == 0


def test_distribution_confidence() -> None:
    assert distribution_confidence({"a": 1.0, "b": 0.0}) == 1.0
    assert distribution_confidence({"a": 0.5, "b": 0.5}) == pytest.approx(0.0)
    assert 0 < distribution_confidence({"a": 0.8, "b": 0.2}) < 1
    assert distribution_confidence({"a": 1.0}) == 1.0


def test_parse_models() -> None:
    models = parse_models(
        {"models": [{"name": "jev-latest", "description": "d", "release_date": "x"}]}
    )
    assert models[0].name == "jev-latest"
    with pytest.raises(JudgeResponseError, match=r"models\[0\]\.name"):
        parse_models({"models": [{}]})
    with pytest.raises(JudgeResponseError):
        parse_models([])
