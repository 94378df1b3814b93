"""Jev's typed questions: `Noul` (yes/no), `Choice` (one label of many), `Score` (a rubric level).

```python
questions = {
    "is_grounded": Noul(
        "Is every claim supported by `context`?",
        when_true="Every claim is supported",
        when_false="States an unsupported claim",
    ),
    "department": Choice(
        "Which team should handle this?",
        options={"billing": "Payments, invoicing, refunds", "sales": None},
    ),
    "frustration": Score("How frustrated is the customer?", levels=["Calm", "Angry", "Furious"]),
}
```

Each question serialises to the wire's `{type, instructions, criteria}`. The API's limits are
checked locally, before any HTTP call, so a mistake costs no request: 1-255 options, 2-10 levels,
non-empty instructions, at least one question, a state that is a string, object or array. Errors
name the question. Insertion order is kept everywhere, because the model reads fields in the order
they are sent.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, ClassVar, Final, Literal, TypeAlias

from .errors import JudgeUsageError

__all__ = [
    "MAX_CHOICE_OPTIONS",
    "MAX_SCORE_LEVELS",
    "MIN_SCORE_LEVELS",
    "Choice",
    "Content",
    "Noul",
    "Question",
    "Score",
    "State",
    "check_state",
    "questions_to_wire",
]

Content: TypeAlias = str | Mapping[str, Any] | Sequence[Any]
"""Text, a JSON object or a JSON array: what instructions, descriptions and the state may be."""
State: TypeAlias = str | Mapping[str, Any] | Sequence[Any]
"""What the judge reads: text, a JSON object (keys in the order the model should read them) or
a JSON array."""

MAX_CHOICE_OPTIONS: Final = 255
"""The API accepts at most 255 options per `Choice`."""
MIN_SCORE_LEVELS: Final = 2
"""A `Score` needs at least two levels (the API answers 422 to one)."""
MAX_SCORE_LEVELS: Final = 10
"""The API accepts at most 10 levels per `Score`."""


def _check_content(value: object, what: str) -> None:
    if isinstance(value, str):
        if not value.strip():
            raise JudgeUsageError(f"{what} is empty; write what the judge should look at")
    elif not isinstance(value, (Mapping, Sequence)) or isinstance(value, (bytes, bytearray)):
        raise JudgeUsageError(f"{what} must be a str, a dict or a list, got {type(value).__name__}")


def _wire_content(value: Any) -> Any:
    # Tuples and read-only mappings are fine in Python but the JSON encoder wants lists and dicts.
    if isinstance(value, str):
        return value
    if isinstance(value, Mapping):
        return {k: _wire_content(v) for k, v in value.items()}
    if isinstance(value, Sequence) and not isinstance(value, (bytes, bytearray)):
        return [_wire_content(v) for v in value]
    return value


def _text_only(*contents: object) -> bool:
    """Whether every piece is a str (or absent): a wire form that nothing can change later."""
    return all(c is None or type(c) is str for c in contents)


def _short(content: Content) -> str:
    text = content if isinstance(content, str) else repr(content)
    return text if len(text) <= 60 else text[:57] + "..."


@dataclass(frozen=True, slots=True)
class Noul:
    """A yes/no question; its answer is P(yes), from 0 to 1.

    `when_true` / `when_false` describe what each side means (sent as the wire's `criteria`, only
    when at least one is given).
    """

    instructions: Content
    """The question, e.g. "Is every value in `assistant_answer` supported by `tool_calls`?"."""
    when_true: Content | None = None
    """What a "yes" looks like."""
    when_false: Content | None = None
    """What a "no" looks like (also the wording of the defect when the judge says no)."""
    type: ClassVar[Literal["noul"]] = "noul"
    """The wire type."""
    _wire: dict[str, Any] | None = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        _check_content(self.instructions, "Noul instructions")
        for side in ("when_true", "when_false"):
            value = getattr(self, side)
            if value is not None:
                _check_content(value, f"Noul {side} (of {_short(self.instructions)!r})")
        if _text_only(self.instructions, self.when_true, self.when_false):
            object.__setattr__(self, "_wire", self.to_wire())

    def to_wire(self) -> dict[str, Any]:
        """The question as the API expects it."""
        wire: dict[str, Any] = {"type": "noul", "instructions": _wire_content(self.instructions)}
        if self.when_true is not None or self.when_false is not None:
            criteria: dict[str, Any] = {}
            if self.when_true is not None:
                criteria["true"] = _wire_content(self.when_true)
            if self.when_false is not None:
                criteria["false"] = _wire_content(self.when_false)
            wire["criteria"] = criteria
        return wire


@dataclass(frozen=True, slots=True)
class Choice:
    """Pick one label of several; the answer is the most likely label and every label's probability.

    `options` maps each label to a description, or to `None` when the label speaks for itself.
    """

    instructions: Content
    """The question, e.g. "Which team should handle this?"."""
    options: Mapping[str, Content | None]
    """Label -> description (or `None`), 1 to 255 labels, in the order given."""
    type: ClassVar[Literal["choice"]] = "choice"
    """The wire type."""
    _wire: dict[str, Any] | None = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        _check_content(self.instructions, "Choice instructions")
        if isinstance(self.options, Mapping):
            options = dict(self.options)
        elif isinstance(self.options, Sequence) and not isinstance(self.options, str):
            # A plain list of labels is a common shorthand: labels without descriptions.
            options = {label: None for label in self.options}
        else:
            raise JudgeUsageError(
                f"Choice options must be a dict of label -> description (or None), got "
                f"{type(self.options).__name__}"
            )
        what = f"Choice {_short(self.instructions)!r}"
        if not options:
            raise JudgeUsageError(f"{what} has no options; give at least one label")
        if len(options) > MAX_CHOICE_OPTIONS:
            raise JudgeUsageError(
                f"{what} has {len(options)} options; the API accepts at most {MAX_CHOICE_OPTIONS}"
            )
        for label, description in options.items():
            if not isinstance(label, str) or not label:
                raise JudgeUsageError(f"{what}: every label must be a non-empty str, got {label!r}")
            if description is not None:
                _check_content(description, f"{what}, the description of {label!r}")
        object.__setattr__(self, "options", MappingProxyType(options))
        if _text_only(self.instructions, *options.values()):
            object.__setattr__(self, "_wire", self.to_wire())

    @property
    def labels(self) -> tuple[str, ...]:
        """The labels, in order."""
        return tuple(self.options)

    def to_wire(self) -> dict[str, Any]:
        """The question as the API expects it."""
        return {
            "type": "choice",
            "instructions": _wire_content(self.instructions),
            "criteria": {k: _wire_content(v) for k, v in self.options.items()},
        }


@dataclass(frozen=True, slots=True)
class Score:
    """Place the answer on an ordered rubric; the answer is the expected level, Σ level·p.

    `levels[0]` is the lowest score; there are 2 to 10 levels, so `max_level` is 1 to 9.
    """

    instructions: Content
    """The question, e.g. "How frustrated is the customer?"."""
    levels: Sequence[Content]
    """The rubric, lowest first (level index = position)."""
    type: ClassVar[Literal["score"]] = "score"
    """The wire type."""
    _wire: dict[str, Any] | None = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        _check_content(self.instructions, "Score instructions")
        what = f"Score {_short(self.instructions)!r}"
        if isinstance(self.levels, str) or not isinstance(self.levels, Sequence):
            raise JudgeUsageError(f"{what}: levels must be a list, lowest first")
        levels = tuple(self.levels)
        if not MIN_SCORE_LEVELS <= len(levels) <= MAX_SCORE_LEVELS:
            raise JudgeUsageError(
                f"{what} has {len(levels)} level(s); give {MIN_SCORE_LEVELS} to "
                f"{MAX_SCORE_LEVELS}, lowest first"
            )
        for i, level in enumerate(levels):
            _check_content(level, f"{what}, level {i}")
        object.__setattr__(self, "levels", levels)
        if _text_only(self.instructions, *levels):
            object.__setattr__(self, "_wire", self.to_wire())

    @property
    def max_level(self) -> int:
        """The highest level index (`len(levels) - 1`)."""
        return len(self.levels) - 1

    def to_wire(self) -> dict[str, Any]:
        """The question as the API expects it."""
        return {
            "type": "score",
            "instructions": _wire_content(self.instructions),
            "criteria": [_wire_content(level) for level in self.levels],
        }


Question: TypeAlias = Noul | Choice | Score
"""Any of the typed questions."""
_TYPED: Final = frozenset({Noul, Choice, Score})


def check_state(state: object) -> None:
    """Raise `JudgeUsageError` unless `state` is a str, a JSON object or a JSON array."""
    if isinstance(state, str | Mapping):
        return
    if isinstance(state, Sequence) and not isinstance(state, (bytes, bytearray)):
        return
    raise JudgeUsageError(
        f"state must be a str, a dict or a list, got {type(state).__name__}; the API rejects "
        'numbers, booleans and null (wrap them: {"value": ...})'
    )


def questions_to_wire(questions: Mapping[str, Question | Mapping[str, Any]]) -> dict[str, Any]:
    """The `questions` object of a request, checked against the API's limits.

    Besides `Noul`, `Choice` and `Score`, a question may be given in its wire form (a dict with a
    `type`), which is checked the same way and sent as it is.

    Raises:
        JudgeUsageError: no questions, a bad question id, or a question the API would refuse; the
            message names the question.
    """
    return _to_wire(questions, shared=False)


def _to_wire(
    questions: Mapping[str, Question | Mapping[str, Any]], *, shared: bool
) -> dict[str, Any]:
    """`questions_to_wire`, or with `shared` the kept wire forms (read-only, see `_wire`)."""
    if not isinstance(questions, Mapping):
        raise JudgeUsageError(
            f"questions must be a dict of id -> Noul/Choice/Score, got {type(questions).__name__}"
        )
    if not questions:
        raise JudgeUsageError("at least one question is needed; pass {id: Noul(...), ...}")
    wire: dict[str, Any] = {}
    for qid, question in questions.items():
        if not isinstance(qid, str) or not qid:
            raise JudgeUsageError(f"question ids must be non-empty str, got {qid!r}")
        kept = getattr(question, "_wire", None) if shared else None
        if kept is not None and type(question) in _TYPED:
            wire[qid] = kept
        elif isinstance(question, Noul | Choice | Score):
            wire[qid] = question.to_wire()
        elif isinstance(question, Mapping):
            wire[qid] = _checked_wire_question(qid, question)
        else:
            raise JudgeUsageError(
                f"question {qid!r} is a {type(question).__name__}; use Noul, Choice or Score"
            )
    return wire


def check_system_one_args(
    state: State, questions: Mapping[str, Question | Mapping[str, Any]]
) -> dict[str, Any]:
    """The checks of a `system_one` call, made before any request: the questions in wire form.

    The wire forms are to be read, never changed: a typed question's may be the one it keeps for
    every call (built once: `JudgeClient.system_one` spent more on rebuilding it than on
    encoding the body, `python -m benchmarks.bench_judge_client`). `questions_to_wire` gives
    fresh ones.

    Raises:
        JudgeUsageError: a state the API rejects (`check_state`), or bad questions
            (`questions_to_wire`).
    """
    if type(state) not in (str, dict):  # the common cases, without the ABC checks
        check_state(state)
    return _to_wire(questions, shared=True)


def _checked_wire_question(qid: str, question: Mapping[str, Any]) -> dict[str, Any]:
    """Check a question given in wire form by building the typed question from it."""
    kind = question.get("type")
    instructions = question.get("instructions")
    criteria = question.get("criteria")
    try:
        if kind == "noul":
            sides = criteria if isinstance(criteria, Mapping) else {}
            if instructions is None:
                raise JudgeUsageError("instructions are missing (always send them)")
            Noul(instructions, sides.get("true"), sides.get("false"))
        elif kind == "choice":
            Choice(_required(instructions), criteria if criteria is not None else {})
        elif kind == "score":
            Score(_required(instructions), criteria if criteria is not None else [])
        elif not isinstance(kind, str) or not kind:
            raise JudgeUsageError("a question dict needs a non-empty str 'type'")
        # Other types (box, ...) are newer than this client: sent as they are, the API decides.
    except JudgeUsageError as exc:
        raise JudgeUsageError(f"question {qid!r}: {exc}") from None
    return _wire_content(question)  # type: ignore[no-any-return]


def _required(instructions: Any) -> Content:
    if instructions is None:
        raise JudgeUsageError("instructions are missing (always send them)")
    return instructions  # type: ignore[no-any-return]
