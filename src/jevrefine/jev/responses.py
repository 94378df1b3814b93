"""What System One answers: `SystemOneResponse` with typed answers per question.

```python
response = await client.system_one(state, questions)
response.noul("is_grounded").noul                        # P(yes)
response.choice("department").probability_of("billing")
response.score("frustration").score                      # Σ level·p, may fall between levels
```

Score levels are `int` keys (the wire sends them as strings). An answer of a type this version
does not know (e.g. a newer API's `box`) is kept aside in `unknown_answers` with a warning instead
of failing the whole response.
"""

from __future__ import annotations

import contextlib
import math
import sys
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextvars import ContextVar
from dataclasses import dataclass, field, fields
from types import MappingProxyType
from typing import Any, Final, Literal, TypeAlias, TypeGuard, TypeVar

from ..messages import Usage
from .errors import AnswerNotFoundError, JudgeResponseError
from .questions import Choice, Content, Noul, Question, Score

__all__ = [
    "MAX_TOKEN_COUNT",
    "PROBABILITY_TOLERANCE",
    "Answer",
    "ChoiceAnswer",
    "ModelInfo",
    "NoulAnswer",
    "ScoreAnswer",
    "SystemOneResponse",
    "UnknownAnswerWarning",
    "check_answers",
    "distribution_confidence",
    "missing_answers_allowed",
    "parse_models",
    "parse_system_one",
]

_EMPTY: Mapping[str, Any] = MappingProxyType({})

PROBABILITY_TOLERANCE: Final = 1e-3
"""How far from 1 the probabilities of one choice or score answer may sum (absolute).

Jev rounds each probability; a sum further off than this is not a distribution but a broken or
hostile server, and is a `JudgeResponseError`."""
MAX_TOKEN_COUNT: Final = 2**53 - 1
"""The largest token count accepted in `usage` (exact as a float, fits an OTel int64)."""
_MAX_LEVEL_DIGITS: Final = 2
_MAX_PATH: Final = 200
_LARGEST_FLOAT: Final = sys.float_info.max


class UnknownAnswerWarning(UserWarning):
    """An answer of a type this version does not model was set aside (see `unknown_answers`)."""


def distribution_confidence(probabilities: Mapping[Any, float]) -> float:
    """How concentrated a distribution is: 1 - normalised entropy (1 = certain, 0 = uniform).

    Like Jev's `confidence`, a statistic of the distribution, not P(correct). Jev does not publish
    its formula; `ModelJudgeClient` and `FakeJevServer` use this one.
    """
    values = [p for p in probabilities.values() if p > 0]
    n = len(probabilities)
    if n < 2:
        return 1.0
    total = sum(values)
    if total <= 0:
        return 0.0
    entropy = -sum((p / total) * math.log(p / total) for p in values)
    return max(0.0, min(1.0, 1.0 - entropy / math.log(n)))


def _reduce(value: Any) -> tuple[Any, ...]:
    """Pickle support for the frozen answers, whose read-only mappings cannot be pickled."""
    values = {
        f.name: dict(v) if isinstance(v := getattr(value, f.name), MappingProxyType) else v
        for f in fields(value)
        if f.init
    }
    return (_rebuild, (type(value), values))


def _rebuild(cls: type[Any], values: dict[str, Any]) -> Any:
    return cls(**values)


@dataclass(frozen=True, slots=True)
class NoulAnswer:
    """The answer to a `Noul`: the probability of "yes"."""

    noul: float
    """P(yes), from 0 to 1."""
    calibrated: bool = field(default=True, kw_only=True)
    """False when the value is a plain yes/no (1.0 / 0.0), not a probability (a chat model
    without logprobs answered)."""
    type: Literal["noul"] = field(default="noul", init=False)
    """The wire type."""


@dataclass(frozen=True, slots=True)
class ChoiceAnswer:
    """The answer to a `Choice`: the most likely label and every label's probability."""

    choice: str
    """The most likely label."""
    probabilities: Mapping[str, float]
    """Label -> probability; they sum to about 1."""
    confidence: float | None = None
    """How concentrated the distribution is (0 to 1), not P(correct); `None` when uncalibrated."""
    calibrated: bool = field(default=True, kw_only=True)
    """False when the probabilities are only the chosen label at 1.0 (no logprobs)."""
    type: Literal["choice"] = field(default="choice", init=False)
    """The wire type."""

    def __reduce__(self) -> tuple[Any, ...]:
        return _reduce(self)

    def __post_init__(self) -> None:
        object.__setattr__(self, "probabilities", MappingProxyType(dict(self.probabilities)))

    def probability_of(self, label: str) -> float:
        """The probability of `label` (0.0 for a label the answer does not list)."""
        return self.probabilities.get(label, 0.0)


@dataclass(frozen=True, slots=True)
class ScoreAnswer:
    """The answer to a `Score`: the expected level and the distribution over levels."""

    score: float
    """Σ level·p: the expected level, between 0 and `max_level` (may fall between levels)."""
    legend: Mapping[int, Content]
    """Level -> the rubric text of that level."""
    probabilities: Mapping[int, float]
    """Level -> probability."""
    confidence: float | None = None
    """How concentrated the distribution is (0 to 1), not P(correct); `None` when uncalibrated."""
    calibrated: bool = field(default=True, kw_only=True)
    """False when the probabilities are only the chosen level at 1.0 (no logprobs)."""
    type: Literal["score"] = field(default="score", init=False)
    """The wire type."""

    def __reduce__(self) -> tuple[Any, ...]:
        return _reduce(self)

    def __post_init__(self) -> None:
        object.__setattr__(self, "legend", MappingProxyType(dict(self.legend)))
        object.__setattr__(self, "probabilities", MappingProxyType(dict(self.probabilities)))

    def probability_of(self, level: int) -> float:
        """The probability of `level` (0.0 for a level the answer does not list)."""
        return self.probabilities.get(level, 0.0)

    @property
    def level(self) -> int:
        """The most likely level."""
        if not self.probabilities:
            return round(self.score)
        return max(self.probabilities, key=lambda k: (self.probabilities[k], -k))


Answer: TypeAlias = NoulAnswer | ChoiceAnswer | ScoreAnswer
"""The answer to any question."""

_A = TypeVar("_A", NoulAnswer, ChoiceAnswer, ScoreAnswer)


@dataclass(frozen=True, slots=True)
class SystemOneResponse:
    """One System One answer: the model that answered, an answer per question, usage, request id."""

    model: str
    """The versioned model id that answered (may differ from the alias sent)."""
    answers: Mapping[str, Answer]
    """Question id -> answer, in the order the API sent them."""
    usage: Usage = field(default_factory=Usage)
    """Tokens: `input_tokens` are billable, `output_tokens` currently free."""
    request_id: str | None = None
    """The `x-typesafe-request-id` response header (`None` when the server sent none)."""
    unknown_answers: Mapping[str, Mapping[str, Any]] = field(default_factory=lambda: _EMPTY)
    """Answers of types this version does not model, as the API sent them."""

    def __reduce__(self) -> tuple[Any, ...]:
        return _reduce(self)

    def __post_init__(self) -> None:
        object.__setattr__(self, "answers", MappingProxyType(dict(self.answers)))
        if self.unknown_answers is not _EMPTY:
            object.__setattr__(
                self, "unknown_answers", MappingProxyType(dict(self.unknown_answers))
            )

    def _get(self, name: str, cls: type[_A]) -> _A:
        answer = self.answers.get(name)
        if isinstance(answer, cls):
            return answer
        have = ", ".join(f"{k} ({v.type})" for k, v in self.answers.items()) or "none"
        if answer is None:
            raise AnswerNotFoundError(f"no answer named {name!r}; the response has: {have}")
        wanted = cls.__name__.removesuffix("Answer").lower()
        raise AnswerNotFoundError(f"answer {name!r} is a {answer.type}, not a {wanted}")

    def noul(self, name: str) -> NoulAnswer:
        """The answer to the `Noul` named `name` (`AnswerNotFoundError` when there is none)."""
        return self._get(name, NoulAnswer)

    def choice(self, name: str) -> ChoiceAnswer:
        """The answer to the `Choice` named `name` (`AnswerNotFoundError` when there is none)."""
        return self._get(name, ChoiceAnswer)

    def score(self, name: str) -> ScoreAnswer:
        """The answer to the `Score` named `name` (`AnswerNotFoundError` when there is none)."""
        return self._get(name, ScoreAnswer)

    @property
    def nouls(self) -> dict[str, NoulAnswer]:
        """The noul answers by question id."""
        return {k: v for k, v in self.answers.items() if isinstance(v, NoulAnswer)}

    @property
    def choices(self) -> dict[str, ChoiceAnswer]:
        """The choice answers by question id."""
        return {k: v for k, v in self.answers.items() if isinstance(v, ChoiceAnswer)}

    @property
    def scores(self) -> dict[str, ScoreAnswer]:
        """The score answers by question id."""
        return {k: v for k, v in self.answers.items() if isinstance(v, ScoreAnswer)}

    @property
    def calibrated(self) -> bool:
        """Whether every answer carries real probabilities (always true for Jev itself)."""
        return all(a.calibrated for a in self.answers.values())


@dataclass(frozen=True, slots=True)
class ModelInfo:
    """One entry of `GET /v1/models`."""

    name: str
    """The model id or alias to send as `model`."""
    description: str = ""
    """What the model is."""
    release_date: str = ""
    """`YYYY-MM-DD`."""


# -- parsing -------------------------------------------------------------------------------


class _Bad(Exception):
    def __init__(self, path: str, expected: str) -> None:
        self.path = path
        self.expected = expected


def _number(value: Any, path: str) -> float:
    # bool is an int subclass, but true/false is never a valid probability.
    if type(value) is float or type(value) is int:
        try:
            result = float(value)
        except OverflowError:  # a 310-digit integer: no float holds it
            raise _Bad(path, "a finite number (got an integer too large for a float)") from None
        if math.isfinite(result):
            return result
        raise _Bad(path, "a finite number (got Infinity, NaN or an overflowing literal)")
    raise _Bad(path, f"a number (got {_kind(value)})")


def _probability(value: Any, path: str) -> float:
    result = _number(value, path)
    if 0.0 <= result <= 1.0:
        return result
    raise _Bad(path, f"a probability from 0 to 1 (got {result!r})")


def _optional_probability(value: Any, path: str) -> float | None:
    return None if value is None else _probability(value, path)


def _distribution(probabilities: Mapping[Any, float], path: str) -> None:
    total = math.fsum(probabilities.values())
    if abs(total - 1.0) > PROBABILITY_TOLERANCE:
        raise _Bad(
            path,
            f"probabilities that sum to 1 (within {PROBABILITY_TOLERANCE:g}; got {total:.6g})",
        )


def _kind(value: Any) -> str:
    return "null" if value is None else type(value).__name__


def _mapping(value: Any, path: str) -> Mapping[str, Any]:
    if isinstance(value, dict):
        return value
    raise _Bad(path, f"an object (got {_kind(value)})")


def _noul(raw: Mapping[str, Any], path: str) -> NoulAnswer:
    return NoulAnswer(_probability(raw.get("noul"), f"{path}.noul"))


def _choice(raw: Mapping[str, Any], path: str) -> ChoiceAnswer:
    label = raw.get("choice")
    if not isinstance(label, str):
        raise _Bad(f"{path}.choice", f"a string (got {_kind(label)})")
    probs = _mapping(raw.get("probabilities"), f"{path}.probabilities")
    probabilities = {k: _probability(v, f"{path}.probabilities.{k}") for k, v in probs.items()}
    _distribution(probabilities, f"{path}.probabilities")
    confidence = _optional_probability(raw.get("confidence"), f"{path}.confidence")
    return ChoiceAnswer(label, probabilities, confidence)


def _level(key: str, path: str) -> int:
    # Not int(key): it takes ' 3', '+3', '3_0' and other scripts' digits; levels are 0 to 9.
    if key.isascii() and key.isdigit() and len(key) <= _MAX_LEVEL_DIGITS:
        return int(key)
    raise _Bad(path, 'level keys that are whole numbers ("0" to "9")')


def _score(raw: Mapping[str, Any], path: str) -> ScoreAnswer:
    score = _number(raw.get("score"), f"{path}.score")
    if score < 0:
        raise _Bad(f"{path}.score", f"a level from 0 up (got {score!r})")
    legend_raw = _mapping(raw.get("legend"), f"{path}.legend")
    legend = {_level(k, f"{path}.legend.{k}"): v for k, v in legend_raw.items()}
    probs = _mapping(raw.get("probabilities"), f"{path}.probabilities")
    probabilities = {
        _level(k, f"{path}.probabilities.{k}"): _probability(v, f"{path}.probabilities.{k}")
        for k, v in probs.items()
    }
    _distribution(probabilities, f"{path}.probabilities")
    confidence = _optional_probability(raw.get("confidence"), f"{path}.confidence")
    return ScoreAnswer(score, legend, probabilities, confidence)


_PARSERS: dict[str, Callable[[Mapping[str, Any], str], Answer]] = {
    "noul": _noul,
    "choice": _choice,
    "score": _score,
}


def parse_system_one(data: Any, request_id: str | None = None) -> SystemOneResponse:
    """Read a decoded System One body; `JudgeResponseError` names the first bad field.

    Answers of unknown types are set aside in `unknown_answers` with an `UnknownAnswerWarning`.
    """
    quick = _parse_common(data, request_id)
    if quick is not None:
        return quick
    # Anything out of the ordinary (an int where a float is usual, an unknown answer type, a
    # bad value): the field-by-field reading, which names what is wrong.
    return _parse_careful(data, request_id)


def _parse_careful(data: Any, request_id: str | None) -> SystemOneResponse:
    """`parse_system_one`, field by field: a path for every value, for the error to name."""
    try:
        body = _mapping(data, "")
        model = body.get("model")
        if not isinstance(model, str):
            raise _Bad("model", "a string")
        if "answers" not in body:
            # Required by the API's schema: a body without it is not an answer at all, and
            # reading it as "no answers" would turn a broken server into silent judge misses.
            raise _Bad("answers", "an object of answers (the field is missing)")
        raw_answers = _mapping(body["answers"], "answers")
        answers: dict[str, Answer] = {}
        unknown: dict[str, Mapping[str, Any]] = {}
        for name, raw in raw_answers.items():
            path = f"answers.{name}"
            answer = _mapping(raw, path)
            kind = answer.get("type")
            if not isinstance(kind, str):
                raise _Bad(f"{path}.type", "a string")
            parser = _PARSERS.get(kind)
            if parser is None:
                unknown[name] = answer
                continue
            answers[name] = parser(answer, path)
        usage_raw = body.get("usage")
        usage = Usage()
        if usage_raw is not None:
            usage_map = _mapping(usage_raw, "usage")
            usage = Usage(
                _int_or_zero(usage_map.get("input_tokens"), "usage.input_tokens"),
                _int_or_zero(usage_map.get("output_tokens"), "usage.output_tokens"),
            )
    except _Bad as bad:
        raise _response_error("is invalid", bad, data, request_id) from None
    if unknown:
        warnings.warn(
            "set aside answer(s) of a type this jevrefine version does not know: "
            + ", ".join(f"{k} ({v.get('type')})" for k, v in unknown.items())
            + "; they are in response.unknown_answers",
            UnknownAnswerWarning,
            stacklevel=4,  # two frames above `parse_system_one`, as before it delegated here
        )
        return SystemOneResponse(model, answers, usage, request_id, unknown)
    return SystemOneResponse(model, answers, usage, request_id)


# -- the common case, read in one pass ---------------------------------------------------------
#
# `parse_system_one` spent more CPU than the rest of a `JudgeClient.system_one` call's client
# side (`python -m benchmarks.bench_judge_client`): a path string per value, a helper call per
# number. What Jev sends every time (floats, level keys "0" to "9", known answer types) is read
# here with exact type tests and no paths; the first thing that is not so hands the whole body to
# the field-by-field reading above, which accepts or refuses it and names the field. So this
# accepts a subset of what that accepts, never more, and reads it alike:
# `tests/reliability/test_hostile_jev_fast_paths.py` feeds both the same generated bodies.

_LEVEL_OF: Final[Mapping[str, int]] = MappingProxyType(
    {str(n): n for n in range(10**_MAX_LEVEL_DIGITS)}
    | {f"{n:0{_MAX_LEVEL_DIGITS}d}": n for n in range(10 ** (_MAX_LEVEL_DIGITS - 1))}
)
"""Every key `_level` accepts ("0" to "99", and "00" to "09"), to its level."""


def _is_probability(value: object) -> TypeGuard[float]:
    # NaN fails both comparisons; ints (and bools) go to the careful path.
    return type(value) is float and 0.0 <= value <= 1.0


def _is_distribution(probabilities: Mapping[Any, Any]) -> bool:
    for value in probabilities.values():
        if not _is_probability(value):
            return False
    return abs(math.fsum(probabilities.values()) - 1.0) <= PROBABILITY_TOLERANCE


# Built field by field, past the frozen dataclasses' `__init__` (and `__post_init__`'s copies of
# dicts made here): constructing the answers cost more than reading them. Every field is set, as
# `__init__` would; `tests/reliability/test_hostile_jev_fast_paths.py` compares the two.
_new = object.__new__


def _noul_answer(noul: float) -> NoulAnswer:
    answer = _new(NoulAnswer)
    _NOUL_FIELDS[0](answer, noul)
    _NOUL_FIELDS[1](answer, True)
    _NOUL_FIELDS[2](answer, "noul")
    return answer


def _choice_answer(
    label: str, probabilities: dict[str, float], confidence: float | None
) -> ChoiceAnswer:
    answer = _new(ChoiceAnswer)
    set_choice, set_probabilities, set_confidence, set_calibrated, set_type = _CHOICE_FIELDS
    set_choice(answer, label)
    set_probabilities(answer, MappingProxyType(dict(probabilities)))  # not the body's own dict
    set_confidence(answer, confidence)
    set_calibrated(answer, True)
    set_type(answer, "choice")
    return answer


def _score_answer(
    score: float,
    legend: dict[int, Content],
    probabilities: dict[int, float],
    confidence: float | None,
) -> ScoreAnswer:
    answer = _new(ScoreAnswer)
    set_score, set_legend, set_probabilities, set_confidence, set_calibrated, set_type = (
        _SCORE_FIELDS
    )
    set_score(answer, score)
    set_legend(answer, MappingProxyType(legend))  # built by the caller, for this answer only
    set_probabilities(answer, MappingProxyType(probabilities))
    set_confidence(answer, confidence)
    set_calibrated(answer, True)
    set_type(answer, "score")
    return answer


def _response(
    model: str, answers: dict[str, Answer], usage: Usage, request_id: str | None
) -> SystemOneResponse:
    response = _new(SystemOneResponse)
    set_model, set_answers, set_usage, set_request_id, set_unknown = _RESPONSE_FIELDS
    set_model(response, model)
    set_answers(response, MappingProxyType(answers))
    set_usage(response, usage)
    set_request_id(response, request_id)
    set_unknown(response, _EMPTY)
    return response


def _setters(cls: type[Any]) -> tuple[Callable[[Any, Any], None], ...]:
    """Each field's slot setter, in field order (bypassing the frozen `__setattr__`)."""
    return tuple(getattr(cls, f.name).__set__ for f in fields(cls))


_NOUL_FIELDS: Final = _setters(NoulAnswer)
_CHOICE_FIELDS: Final = _setters(ChoiceAnswer)
_SCORE_FIELDS: Final = _setters(ScoreAnswer)
_RESPONSE_FIELDS: Final = _setters(SystemOneResponse)


def _common_answer(raw: object) -> Answer | None:
    if type(raw) is not dict:
        return None
    kind = raw.get("type")
    confidence = raw.get("confidence")
    if confidence is not None and not _is_probability(confidence):
        return None
    if kind == "noul":
        noul = raw.get("noul")
        return _noul_answer(noul) if _is_probability(noul) else None
    probabilities = raw.get("probabilities")
    if type(probabilities) is not dict:
        return None
    if kind == "choice":
        label = raw.get("choice")
        if type(label) is not str or not _is_distribution(probabilities):
            return None
        return _choice_answer(label, probabilities, confidence)
    if kind != "score":
        return None  # an unknown type: set aside (with its warning) by the careful path
    score, legend = raw.get("score"), raw.get("legend")
    if type(score) is not float or not 0.0 <= score <= _LARGEST_FLOAT or type(legend) is not dict:
        return None
    levels = _LEVEL_OF
    for key in (*legend, *probabilities):
        if key not in levels:
            return None
    if not _is_distribution(probabilities):
        return None
    return _score_answer(
        score,
        {levels[k]: v for k, v in legend.items()},
        {levels[k]: v for k, v in probabilities.items()},
        confidence,
    )


def _common_usage(raw: object) -> Usage | None:
    if raw is None:
        return Usage()
    if type(raw) is not dict:
        return None
    counts = []
    for name in ("input_tokens", "output_tokens"):
        value = raw.get(name, 0)
        if value is None:
            value = 0
        if type(value) is not int or not 0 <= value <= MAX_TOKEN_COUNT:
            return None
        counts.append(value)
    return Usage(*counts)


def _parse_common(data: object, request_id: str | None) -> SystemOneResponse | None:
    """The response, if it is of the common shape and valid; else `None` (nothing raised)."""
    if type(data) is not dict:
        return None
    model, raw_answers = data.get("model"), data.get("answers")
    if type(model) is not str or type(raw_answers) is not dict:
        return None
    answers: dict[str, Answer] = {}
    for name, raw in raw_answers.items():
        answer = _common_answer(raw)
        if answer is None:
            return None
        answers[name] = answer
    usage = _common_usage(data.get("usage"))
    if usage is None:
        return None
    return _response(model, answers, usage, request_id)


def _int_or_zero(value: Any, path: str) -> int:
    if value is None:
        return 0
    if type(value) is int and 0 <= value <= MAX_TOKEN_COUNT:
        return value
    raise _Bad(path, f"a token count from 0 to {MAX_TOKEN_COUNT} (got {_shown(value)})")


def _shown(value: Any) -> str:
    # A huge integer is described, never printed: str() of 4,301 digits raises ValueError.
    if type(value) is int and abs(value) > MAX_TOKEN_COUNT:
        return "an integer that large" if value > 0 else "a negative integer"
    return repr(value) if isinstance(value, int | float) else _kind(value)


def _response_error(
    problem: str, bad: _Bad, body: Any, request_id: str | None
) -> JudgeResponseError:
    # Paths hold the server's own keys: cut, so a hostile key cannot flood the message.
    path = bad.path if len(bad.path) <= _MAX_PATH else bad.path[: _MAX_PATH - 1] + "…"
    where = f"at {path!r}" if bad.path else "as a whole"
    return JudgeResponseError(
        f"the System One response {problem} {where}: expected {bad.expected}",
        field_path=bad.path,
        body=body,
        request_id=request_id,
    )


_MISSING_ALLOWED: ContextVar[bool] = ContextVar("jevrefine_missing_answers_allowed", default=False)


@contextlib.contextmanager
def missing_answers_allowed() -> Iterator[None]:
    """Within the block, a client's own `check_answers` accepts unanswered questions.

    For `JevChatModel`, which writes `null` for them: it calls its client's public
    `system_one` (any `SystemOneClient`), whose built-in check would otherwise refuse the
    response before the model could read the answers that are there. Judges never use it.
    """
    token = _MISSING_ALLOWED.set(True)
    try:
        yield
    finally:
        _MISSING_ALLOWED.reset(token)


def check_answers(
    response: SystemOneResponse,
    questions: Mapping[str, Question | Mapping[str, Any]],
    *,
    body: Any = None,
    allow_missing: bool | None = None,
) -> None:
    """Raise `JudgeResponseError` unless `response` is a valid answer to exactly `questions`.

    Every question asked has one answer of its own type, and nothing else is answered: a choice's
    label and probabilities name only the question's labels, a score and its levels lie within
    0 to `max_level` (the score within `PROBABILITY_TOLERANCE` of that range). Answers to
    questions of a type this version does not model are not checked. `parse_system_one` has
    already checked that every number is finite and every distribution sums to 1.

    A `SystemOneClient` that answers anything else is broken (or hostile), and what it said must
    never be read as a verdict: `JudgeClient`, `ModelJudgeClient` and `Judge` all call this.

    `allow_missing=True` accepts a question left unanswered, or answered with a type this version
    does not model (`JevChatModel` writes `null` for it, as seed 004's library does). What is
    answered is still checked, and a response that answers nothing is still rejected. Judges
    never pass it: a missing answer must not read as a verdict. `None` (the default) means
    `False` unless the call runs inside `missing_answers_allowed()`.
    """
    if allow_missing is None:
        allow_missing = _MISSING_ALLOWED.get()
    try:
        _check_answers(response, questions, allow_missing)
    except _Bad as bad:
        raise _response_error(
            "does not answer the questions asked", bad, body, response.request_id
        ) from None


def _check_answers(
    response: SystemOneResponse,
    questions: Mapping[str, Question | Mapping[str, Any]],
    allow_missing: bool = False,
) -> None:
    answers, unknown = response.answers, response.unknown_answers
    if not answers and not unknown:
        raise _Bad("answers", "an answer to each question asked (got none)")
    for qid in (*answers, *unknown) if unknown else answers:
        if qid not in questions:
            raise _Bad(f"answers.{qid}", "answers to the questions asked only (not asked)")
    for qid, question in questions.items():
        kind, labels, max_level = _expectation(question)
        answer = answers.get(qid)
        if kind not in _PARSERS:  # a newer question type: its answer is the caller's to read
            if answer is None and qid not in unknown and not allow_missing:
                raise _Bad(f"answers.{qid}", f"an answer to the {kind} question (it is missing)")
            continue
        if answer is None and allow_missing:
            continue
        if answer is None:
            got = unknown.get(qid, {}).get("type")
            missing = "it is missing" if got is None else f"got a {_kind_name(got)} answer"
            raise _Bad(f"answers.{qid}", f"a {kind} answer ({missing})")
        if answer.type != kind:
            raise _Bad(f"answers.{qid}.type", f"a {kind} answer (got a {answer.type} answer)")
        if isinstance(answer, ChoiceAnswer):
            _check_choice(answer, labels, qid)
        elif isinstance(answer, ScoreAnswer):
            _check_score(answer, max_level, qid)


def _expectation(question: Question | Mapping[str, Any]) -> tuple[str, tuple[str, ...], int]:
    """(type, choice labels, score max level) of a question, typed or in wire form."""
    if isinstance(question, Choice):
        return "choice", question.labels, 0
    if isinstance(question, Score):
        return "score", (), question.max_level
    if isinstance(question, Noul):
        return "noul", (), 0
    kind = question.get("type")
    if type(kind) is not str:
        kind = str(kind)
    criteria = question.get("criteria")
    # `type(...) is` first: the wire forms are plain dicts and lists, and an ABC check is slow.
    if kind == "choice" and (type(criteria) is dict or isinstance(criteria, Mapping)):
        return kind, tuple(criteria), 0
    if kind == "score" and (type(criteria) is list or isinstance(criteria, Sequence)):
        return kind, (), len(criteria) - 1
    return kind, (), 0


def _kind_name(value: Any) -> str:
    text = str(value) if isinstance(value, str) else _kind(value)
    return text if len(text) <= 40 else text[:39] + "…"


def _label(value: str) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:79] + "…"


def _check_choice(answer: ChoiceAnswer, labels: tuple[str, ...], qid: str) -> None:
    known = set(labels)
    if answer.choice not in known:
        raise _Bad(
            f"answers.{qid}.choice", f"one of the question's labels (got {_label(answer.choice)})"
        )
    for label in answer.probabilities:
        if label not in known:
            raise _Bad(
                f"answers.{qid}.probabilities", f"the question's labels only (got {_label(label)})"
            )


def _check_score(answer: ScoreAnswer, max_level: int, qid: str) -> None:
    if answer.score > max_level + PROBABILITY_TOLERANCE * max_level:
        raise _Bad(f"answers.{qid}.score", f"a level from 0 to {max_level} (got {answer.score!r})")
    for what, levels in (("probabilities", answer.probabilities), ("legend", answer.legend)):
        for level in levels:
            if level > max_level:
                raise _Bad(f"answers.{qid}.{what}", f"levels from 0 to {max_level} (got {level})")


def parse_models(data: Any) -> list[ModelInfo]:
    """Read a decoded `GET /v1/models` body."""
    models = data.get("models") if isinstance(data, dict) else None
    if not isinstance(models, list):
        raise JudgeResponseError(
            "the models response is invalid at 'models': expected a list",
            field_path="models",
            body=data,
        )
    found: list[ModelInfo] = []
    for i, entry in enumerate(models):
        if not isinstance(entry, dict) or not isinstance(entry.get("name"), str):
            raise JudgeResponseError(
                f"the models response is invalid at 'models[{i}].name': expected a string",
                field_path=f"models[{i}].name",
                body=data,
            )
        found.append(
            ModelInfo(
                entry["name"],
                str(entry.get("description") or ""),
                str(entry.get("release_date") or ""),
            )
        )
    return found
