"""The criteria a `Judge` evaluates: questions for the judge, and code checks run locally.

```python
criteria = [
    check("called_weather", lambda i: any(c["name"] == "weather" for c in i.tool_calls),
          defect="Did not call the weather tool"),
    noul("is_grounded", Noul("Is every value in `assistant_answer` supported by `tool_calls`?",
                             when_false="States a value no tool returned"), minimum=0.7),
    score("helpfulness", Score("How helpful is the answer?", levels=["poor", "fair", "good"]),
          minimum=1),
    choice("tone", Choice("What is the tone?", options=["polite", "rude"]), accept=["polite"]),
]
```

A question criterion passes on the judge's probabilities: a noul when P(yes) >= `minimum`; a score
when at least half of the mass sits on levels >= ceil(`minimum`) (on the score itself when the
answer carries no probabilities), or with `decide_by="level"` when the most likely level reaches
it (a rating, seed 003's rule); a choice when at least half of the mass sits on accepted labels.
A score on a scale whose levels name their own numbers ("1 - Unhelpful", ...) is explained in
those numbers.
"""

from __future__ import annotations

import math
import re
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal, TypeAlias

from .. import _validate
from ..jev.errors import JudgeUsageError
from ..jev.questions import Choice, Content, Noul, Question, Score
from ..jev.responses import Answer, ChoiceAnswer, NoulAnswer, ScoreAnswer
from .verdict import Finding, Outcome

if TYPE_CHECKING:
    from ._input import JudgeInput

__all__ = [
    "CheckCriterion",
    "Criterion",
    "Predicate",
    "QuestionCriterion",
    "check",
    "choice",
    "noul",
    "score",
]

Predicate: TypeAlias = Callable[["JudgeInput"], bool | Awaitable[bool]]
"""A function of the `JudgeInput`, sync or async, returning a `bool`."""


def _numbered_from(levels: Sequence[str]) -> int | None:
    """The first level's number when each level opens with its own, in order, else `None`.

    E.g. "1 - Unhelpful", "2 - Weak", ...: 1.
    """
    if not levels:
        return None
    lead = re.match(r"\d+", levels[0])
    if lead is None:
        return None
    first = int(lead.group())
    for index, text in enumerate(levels):
        number = re.match(r"(\d+)(?!\d)", text)
        if number is None or int(number.group(1)) != first + index:
            return None
    return first


def _text(content: Content) -> str:
    return content if isinstance(content, str) else repr(content)


def _check_name(name: object) -> str:
    return _validate.text("name", name, nonblank=True, example="is_grounded", error=JudgeUsageError)


@dataclass(frozen=True, slots=True)
class QuestionCriterion:
    """A question the judge answers, and the rule that turns its answer into an outcome.

    Build one with `noul`, `score` or `choice`.
    """

    name: str
    """Unique within a judge; also the question id on the wire."""
    question: Question
    """What the judge is asked."""
    minimum: float | None = None
    """A noul's least P(yes), or a score's least level; `None` for a choice."""
    accept: tuple[str, ...] = ()
    """A choice's accepted labels."""
    applies_when: Predicate | None = None
    """When given and false for the input, the question is not sent (NOT_APPLICABLE)."""
    when_passed: str | None = None
    """An earlier criterion that must have PASSED for this one to count."""
    when_chosen: tuple[str, tuple[str, ...]] | None = None
    """An earlier choice criterion and the labels it must have chosen for this one to count."""
    decide_by: str = "mass"
    """A score's rule: `"mass"` (half the probability at or above the least passing level) or
    `"level"` (the most likely level reaches it: the judge's rating, as seed 003 compares it)."""

    def decide(self, answer: Answer, min_confidence: float | None) -> Finding:
        """The finding for the judge's `answer` (of the right type: checked by the caller)."""
        if isinstance(answer, NoulAnswer):
            return self._noul(answer)
        if isinstance(answer, ScoreAnswer):
            return self._score(answer, min_confidence)
        assert isinstance(answer, ChoiceAnswer)
        return self._choice(answer, min_confidence)

    def _noul(self, answer: NoulAnswer) -> Finding:
        assert isinstance(self.question, Noul)
        assert self.minimum is not None
        value = answer.noul
        if value >= self.minimum:
            return Finding(self.name, answer, Outcome.PASSED, "", value)
        what = self.question.when_false
        text = _text(what if what is not None else self.question.instructions)
        detail = f"{self.name}: {text} (P(yes) {value:.2f}, needed at least {self.minimum:.2f})"
        return Finding(self.name, answer, Outcome.FAILED, detail, value)

    def _score(self, answer: ScoreAnswer, min_confidence: float | None) -> Finding:
        assert isinstance(self.question, Score)
        share = self._score_share(answer)
        passed = self._score_passes(answer, share)
        support = None if share is None else (share if passed else 1.0 - share)
        explanation = self._score_explanation(answer, share)
        return self._outcome(answer, passed, support, min_confidence, explanation, answer.score)

    def _score_passes(self, answer: ScoreAnswer, share: float | None) -> bool:
        assert self.minimum is not None
        if self.decide_by == "level":
            # The rating the judge gives: the most likely level (probabilities pick it).
            return answer.level >= math.ceil(self.minimum)
        if share is not None:
            return share >= 0.5
        return answer.score >= self.minimum

    def _score_explanation(self, answer: ScoreAnswer, share: float | None) -> str:
        """Why a score fell short, in the scale's own numbers; never "reached X, needed X"."""
        assert isinstance(self.question, Score)
        assert self.minimum is not None
        levels = [_text(level) for level in self.question.levels]
        first = _numbered_from(levels)
        offset = 0 if first is None else first
        needed = math.ceil(self.minimum)
        reached = answer.level

        def name(level: int, *, answered: bool = False) -> str:
            # The level reached is named as the judge's answer labels it; the one needed as
            # the question does.
            legend = answer.legend.get(level) if answered else None
            if legend is not None:
                text = _text(legend)
            else:
                text = levels[min(max(level, 0), len(levels) - 1)] if levels else ""
            return repr(text) if first is not None else f"level {level} {text!r}"

        what = "rating" if first is not None else "score"
        head = f"reached {name(reached, answered=True)} ({what} {answer.score + offset:.2f})"
        least = f"minimum {self.minimum + offset:.2f}"
        if reached < needed or self.decide_by == "level":
            mass = "" if share is None else f"; {share:.2f} of the probability at or above it"
            return f"{head}, needed {name(needed)} ({least}{mass})"
        if share is not None:
            return (
                f"{head}, but only {share:.2f} of the probability is at or above "
                f"{name(needed)} and half is needed ({least})"
            )
        return f"{head}, below the {least}"

    def _choice(self, answer: ChoiceAnswer, min_confidence: float | None) -> Finding:
        share = self._choice_share(answer)
        passed = share >= 0.5
        support = share if passed else 1.0 - share
        accepted = ", ".join(self.accept)
        explanation = (
            f"{1.0 - share:.2f} of the probability is outside the accepted labels [{accepted}]; "
            f"the most likely label is {answer.choice!r}"
        )
        return self._outcome(answer, passed, support, min_confidence, explanation, share)

    def _score_share(self, answer: ScoreAnswer) -> float | None:
        # The mass at or above the least passing level; None without probabilities.
        assert self.minimum is not None
        if not answer.probabilities:
            return None
        needed = math.ceil(self.minimum)
        return sum(p for level, p in answer.probabilities.items() if level >= needed)

    def _choice_share(self, answer: ChoiceAnswer) -> float:
        if answer.probabilities:
            return sum(answer.probability_of(label) for label in self.accept)
        return 1.0 if answer.choice in self.accept else 0.0

    def support(self, answer: Answer) -> float | None:
        """How much of the answer's probability supports the label it lands on, 0.5 to 1.

        A noul: P(yes) or P(no), whichever is larger: how sure the judge is of yes-or-no, not
        how far P(yes) is from `minimum`. A choice or a score: the share on the side of its
        verdict (the accepted labels, the levels at or above the minimum) when it passes, the
        rest when it fails. `None` for a score answered without probabilities.
        """
        if isinstance(answer, NoulAnswer):
            return max(answer.noul, 1.0 - answer.noul)
        if isinstance(answer, ScoreAnswer):
            share = self._score_share(answer)
            if share is None:
                return None
            # The share on the side of the verdict, whichever rule decided it.
            return share if self._score_passes(answer, share) else 1.0 - share
        assert isinstance(answer, ChoiceAnswer)
        share = self._choice_share(answer)
        return share if share >= 0.5 else 1.0 - share

    def _outcome(
        self,
        answer: Answer,
        passed: bool,
        support: float | None,
        min_confidence: float | None,
        explanation: str,
        value: float,
    ) -> Finding:
        if min_confidence is not None and support is not None and support < min_confidence:
            detail = (
                f"{self.name}: inconclusive, only {support:.2f} of the probability supports the "
                f"verdict (min_confidence {min_confidence:.2f}); {explanation}"
            )
            return Finding(self.name, answer, Outcome.INCONCLUSIVE, detail, value)
        if passed:
            return Finding(self.name, answer, Outcome.PASSED, "", value)
        return Finding(self.name, answer, Outcome.FAILED, f"{self.name}: {explanation}", value)


@dataclass(frozen=True, slots=True)
class CheckCriterion:
    """A code check: a predicate over the `JudgeInput`, run locally and never sent.

    Build one with `check`.
    """

    name: str
    """Unique within a judge."""
    predicate: Predicate
    """True when the answer is fine; sync or async. An exception is a bug and propagates."""
    defect: str
    """What is wrong when the predicate is false (the finding's detail, the model's feedback)."""


Criterion: TypeAlias = QuestionCriterion | CheckCriterion
"""Any criterion a `Judge` holds."""


def _checked_name(builder: str, name: object, question: object, kind: type) -> str:
    """`name` checked, once `question` is a `kind`: each question builder's first two checks."""
    checked = _check_name(name)
    if not isinstance(question, kind):
        raise JudgeUsageError(
            f"{builder}({checked!r}) needs a {kind.__name__}, got {type(question).__name__}"
        )
    return checked


def _minimum(builder: str, value: object, maximum: float, example: float) -> float:
    try:
        return _validate.number(
            "minimum", value, minimum=0, maximum=maximum, example=example, error=JudgeUsageError
        )
    except JudgeUsageError as exc:
        raise JudgeUsageError(f"{builder}: {exc}") from None


def _conditions(
    applies_when: Predicate | None,
    when_passed: str | None,
    when_chosen: tuple[str, Sequence[str]] | None,
) -> tuple[Predicate | None, str | None, tuple[str, tuple[str, ...]] | None]:
    if applies_when is not None and not callable(applies_when):
        raise JudgeUsageError("applies_when must be a function of the JudgeInput")
    if when_passed is not None and not isinstance(when_passed, str):
        raise JudgeUsageError(f"when_passed must be a criterion name, got {when_passed!r}")
    chosen: tuple[str, tuple[str, ...]] | None = None
    if when_chosen is not None:
        if (
            not isinstance(when_chosen, tuple | list)
            or len(when_chosen) != 2
            or not isinstance(when_chosen[0], str)
            or isinstance(when_chosen[1], str)
        ):
            raise JudgeUsageError(
                'when_chosen must be (choice criterion name, [labels]), e.g. ("tone", ["rude"])'
            )
        chosen = (when_chosen[0], tuple(when_chosen[1]))
        if not chosen[1]:
            raise JudgeUsageError("when_chosen needs at least one label")
    return applies_when, when_passed, chosen


def noul(
    name: str,
    question: Noul,
    minimum: float = 0.5,
    *,
    applies_when: Predicate | None = None,
    when_passed: str | None = None,
    when_chosen: tuple[str, Sequence[str]] | None = None,
) -> QuestionCriterion:
    """A yes/no criterion: passes when the judge's P(yes) is at least `minimum` (0 to 1).

    Args:
        name: Unique within the judge; also the question id.
        question: The `Noul` to ask; its `when_false` is the defect's wording.
        minimum: The least P(yes) that passes.
        applies_when: Only ask when this predicate of the input is true.
        when_passed: Only count when this earlier criterion passed.
        when_chosen: Only count when this earlier choice criterion chose one of these labels.
    """
    name = _checked_name("noul", name, question, Noul)
    least = _minimum(f"noul({name!r})", minimum, 1, 0.7)
    conditions = _conditions(applies_when, when_passed, when_chosen)
    return QuestionCriterion(name, question, least, (), *conditions)


def score(
    name: str,
    question: Score,
    minimum: float,
    *,
    applies_when: Predicate | None = None,
    when_passed: str | None = None,
    when_chosen: tuple[str, Sequence[str]] | None = None,
    decide_by: Literal["mass", "level"] = "mass",
) -> QuestionCriterion:
    """A rubric criterion: passes when at least half of the mass is on levels >= ceil(`minimum`).

    Args:
        name: Unique within the judge; also the question id.
        question: The `Score` to ask (levels lowest first).
        minimum: The least level, 0 to `question.max_level` (may fall between levels).
        applies_when: Only ask when this predicate of the input is true.
        when_passed: Only count when this earlier criterion passed.
        when_chosen: Only count when this earlier choice criterion chose one of these labels.
        decide_by: `"mass"` (the default, above), or `"level"`: passes when the most likely
            level, the rating the judge gives, is >= ceil(`minimum`) (seed 003's
            `rating >= successRating`; `rating_judge` uses it). Either way the finding's text
            agrees with its outcome.
    """
    name = _checked_name("score", name, question, Score)
    # The upper bound is the highest level: a minimum above it could never pass.
    least = _minimum(f"score({name!r})", minimum, question.max_level, 1.0)
    decide_by = _validate.choice("decide_by", decide_by, ("mass", "level"), error=JudgeUsageError)
    conditions = _conditions(applies_when, when_passed, when_chosen)
    return QuestionCriterion(name, question, least, (), *conditions, decide_by=decide_by)


def choice(
    name: str,
    question: Choice,
    accept: Sequence[str],
    *,
    applies_when: Predicate | None = None,
    when_passed: str | None = None,
    when_chosen: tuple[str, Sequence[str]] | None = None,
) -> QuestionCriterion:
    """A choice criterion: passes when at least half of the mass is on the `accept`ed labels.

    Args:
        name: Unique within the judge; also the question id.
        question: The `Choice` to ask.
        accept: The labels that pass; each must be one of the choice's labels.
        applies_when: Only ask when this predicate of the input is true.
        when_passed: Only count when this earlier criterion passed.
        when_chosen: Only count when this earlier choice criterion chose one of these labels.
    """
    name = _checked_name("choice", name, question, Choice)
    if isinstance(accept, str) or not isinstance(accept, Sequence) or not accept:
        raise JudgeUsageError(f"choice({name!r}): accept must be a non-empty list of labels")
    unknown = [
        label for label in accept if not isinstance(label, str) or label not in question.options
    ]
    if unknown:
        raise JudgeUsageError(
            f"choice({name!r}): accepted label(s) {unknown} are not options of the choice; "
            f"its labels are {list(question.labels)}"
        )
    conditions = _conditions(applies_when, when_passed, when_chosen)
    return QuestionCriterion(name, question, None, tuple(accept), *conditions)


def check(name: str, predicate: Predicate, defect: str) -> CheckCriterion:
    """A code check over the `JudgeInput`, run locally before the judging call, never sent.

    Args:
        name: Unique within the judge.
        predicate: True when the answer is fine (sync or async). An exception it raises is a bug
            in the check and propagates.
        defect: The finding's detail, and the model's feedback, when the predicate is false.
    """
    name = _check_name(name)
    if not callable(predicate):
        raise JudgeUsageError(f"check({name!r}) needs a function of the JudgeInput")
    if not isinstance(defect, str) or not defect.strip():
        raise JudgeUsageError(f"check({name!r}) needs a defect: what is wrong when it fails")
    return CheckCriterion(name, predicate, defect)


def check_criteria(
    criteria: Sequence[Criterion], *, require_question: bool = True
) -> tuple[Criterion, ...]:
    """Validate criteria: unique names, dependencies pointing backwards, a question.

    With `require_question=False` a list of code checks alone (or none) is valid too.
    """
    found = tuple(criteria)
    seen: dict[str, Criterion] = {}
    for criterion in found:
        if not isinstance(criterion, QuestionCriterion | CheckCriterion):
            raise JudgeUsageError(
                f"a criterion is built with noul(), score(), choice() or check(), got "
                f"{type(criterion).__name__}"
            )
        if criterion.name in seen:
            raise JudgeUsageError(f"two criteria are named {criterion.name!r}; names are unique")
        if isinstance(criterion, QuestionCriterion):
            _check_dependencies(criterion, seen)
        seen[criterion.name] = criterion
    if require_question and not any(isinstance(c, QuestionCriterion) for c in found):
        raise JudgeUsageError(
            "a Judge needs at least one question criterion (noul, score or choice); a judge of "
            "code checks alone needs no judge"
        )
    return found


def _check_dependencies(criterion: QuestionCriterion, earlier: Mapping[str, Criterion]) -> None:
    if criterion.when_passed is not None and criterion.when_passed not in earlier:
        raise JudgeUsageError(
            f"{criterion.name!r} depends on {criterion.when_passed!r}, which is not an earlier "
            "criterion; dependencies must point backwards"
        )
    if criterion.when_chosen is not None:
        target_name, labels = criterion.when_chosen
        target = earlier.get(target_name)
        if not isinstance(target, QuestionCriterion) or not isinstance(target.question, Choice):
            raise JudgeUsageError(
                f"{criterion.name!r} depends on the choice {target_name!r}, which is not an "
                "earlier choice criterion; dependencies must point backwards"
            )
        unknown = [label for label in labels if label not in target.question.options]
        if unknown:
            raise JudgeUsageError(
                f"{criterion.name!r}: when_chosen label(s) {unknown} are not options of "
                f"{target_name!r}"
            )


def unmet_dependency(criterion: QuestionCriterion, found: Mapping[str, Finding]) -> str | None:
    """Why `criterion`'s dependency is unmet, or `None` when it is met (or it has none)."""
    if criterion.when_passed is not None:
        other = found[criterion.when_passed]
        if other.outcome is not Outcome.PASSED:
            return (
                f"{criterion.name}: not applicable, {criterion.when_passed} did not pass "
                f"({other.outcome.name})"
            )
    if criterion.when_chosen is not None:
        target, labels = criterion.when_chosen
        other = found[target]
        chosen = other.answer.choice if isinstance(other.answer, ChoiceAnswer) else None
        if chosen not in labels:
            return (
                f"{criterion.name}: not applicable, {target} chose {chosen!r}, not one of "
                f"[{', '.join(labels)}]"
            )
    return None
