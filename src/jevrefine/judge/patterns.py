"""Judge patterns beyond one verdict: pairwise comparison and consistency sampling.

```python
result = await pairwise(client, "What is the capital of France?", "Paris.", "Lyon, I think.")
result.winner, result.agreement          # "a", True
report = await consistency(client, state, {"is_grounded": Noul("...")}, samples=15)
report.stats["is_grounded"].stdev, report.unstable_at(0.7)
```

`pairwise` is seed 003's second LLM-as-a-judge mode: which of two answers is better. A judge
tends to favour whichever answer it reads first (position bias), so the question is asked twice
with the answers swapped and the two readings combined; `agreement` says whether both picked the
same answer. `consistency` asks the same questions many times and reports how much the answers
move, to tell a stable criterion from one whose verdict is a coin toss near its threshold.
"""

from __future__ import annotations

import statistics
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, Literal

import anyio

from .. import _validate
from .._fanout import BatchResult
from ..exceptions import UserError
from ..jev.batch import SystemOneRequest, system_one_all
from ..jev.questions import Choice, Question
from ..jev.responses import Answer, ChoiceAnswer, NoulAnswer, ScoreAnswer

if TYPE_CHECKING:
    from ..jev.protocol import SystemOneClient
    from ..jev.questions import State
    from ..jev.responses import SystemOneResponse

__all__ = [
    "DEFAULT_PAIRWISE_CRITERIA",
    "PAIRWISE_QUESTION_ID",
    "SAMPLE_ID_KEY",
    "ConsistencyReport",
    "PairwiseResult",
    "QuestionStats",
    "consistency",
    "pairwise",
]

PAIRWISE_QUESTION_ID: Final = "better_answer"
"""The id of the pairwise question."""
DEFAULT_PAIRWISE_CRITERIA: Final = (
    "relevant, correct, and addresses every concern raised in `user_question`, directly and "
    "clearly; length and tone do not count"
)
"""What "better" means unless `criteria=` says otherwise."""
SAMPLE_ID_KEY: Final = "sample_id"
"""The state key of `consistency`'s throwaway per-sample id."""


@dataclass(frozen=True, slots=True)
class PairwiseResult:
    """Which of two answers the judge prefers, from two readings with the positions swapped."""

    winner: Literal["a", "b", "tie"]
    """`a` or `b` when the mean preference leans that way; `tie` when it is exactly even."""
    probability_a: float
    """P(a is better), the mean of the two readings (0 to 1)."""
    agreement: bool
    """Whether both readings picked the same answer; `False` means position bias decided."""
    a_first: ChoiceAnswer
    """The reading with `answer_a` shown first (`answer_1`)."""
    b_first: ChoiceAnswer
    """The reading with `answer_b` shown first (`answer_1`)."""


def _pairwise_question(criteria: str) -> Choice:
    return Choice(
        "Two answers to `user_question` follow, `answer_1` and `answer_2`. Which one is better? "
        f"A better answer is {criteria}.",
        options={"answer_1": "answer_1 is better", "answer_2": "answer_2 is better"},
    )


async def pairwise(
    client: SystemOneClient,
    question: str,
    answer_a: str,
    answer_b: str,
    *,
    criteria: str = DEFAULT_PAIRWISE_CRITERIA,
    model: str | None = None,
) -> PairwiseResult:
    """Ask which answer is better, twice, with the positions swapped to cancel position bias.

    Both readings go out concurrently. `probability_a` averages P(a) over the two readings, so a
    judge that always prefers the first position ends at an even 0.5 rather than a false win.

    Args:
        client: Whatever answers (`JudgeClient`, `ModelJudgeClient`).
        question: The question both answers reply to.
        answer_a: The first candidate.
        answer_b: The second candidate.
        criteria: What "better" means, completing "A better answer is ...".
        model: The judge model (default: the client's).

    Raises:
        JudgeError: a judging call failed.
    """
    for name, value in (
        ("question", question),
        ("answer_a", answer_a),
        ("answer_b", answer_b),
        ("criteria", criteria),
    ):
        _validate.text(name, value)
    model = _validate.text("model", model, optional=True, example="jev-latest")
    questions: dict[str, Question] = {PAIRWISE_QUESTION_ID: _pairwise_question(criteria)}
    states = (
        {"user_question": question, "answer_1": answer_a, "answer_2": answer_b},
        {"user_question": question, "answer_1": answer_b, "answer_2": answer_a},
    )
    readings: list[ChoiceAnswer | None] = [None, None]
    errors: list[Exception] = []

    async def read(index: int) -> None:
        try:
            response = await client.system_one(states[index], questions, model=model)
            readings[index] = response.choice(PAIRWISE_QUESTION_ID)
        except Exception as exc:  # kept, so the caller sees the error itself, not a group
            errors.append(exc)
            group.cancel_scope.cancel()

    async with anyio.create_task_group() as group:
        for index in (0, 1):
            group.start_soon(read, index)
    if errors:
        raise errors[0]
    a_first, b_first = readings
    assert a_first is not None
    assert b_first is not None
    p_a = (a_first.probability_of("answer_1") + b_first.probability_of("answer_2")) / 2
    winner: Literal["a", "b", "tie"] = "a" if p_a > 0.5 else "b" if p_a < 0.5 else "tie"
    agreement = (a_first.choice == "answer_1") == (b_first.choice == "answer_2")
    return PairwiseResult(winner, p_a, agreement, a_first, b_first)


@dataclass(frozen=True, slots=True)
class QuestionStats:
    """One question's answers over the samples that succeeded."""

    values: tuple[float, ...]
    """One number per sample: a noul's P(yes), a score's value, a choice's P(modal label)."""
    mean: float
    """The mean of `values`."""
    stdev: float
    """The population standard deviation of `values` (0 for one sample)."""
    min: float
    """The smallest value."""
    max: float
    """The largest value."""
    label: str | None = None
    """For a choice: the label chosen most often (whose probability `values` holds)."""

    def straddles(self, threshold: float) -> bool:
        """Whether some samples fall below `threshold` and others reach it."""
        return self.min < threshold <= self.max


@dataclass(frozen=True, slots=True)
class ConsistencyReport:
    """How stable a judge's answers are over repeated, independent samples."""

    samples: int
    """How many samples were asked for."""
    stats: dict[str, QuestionStats]
    """Per question id (absent when every sample failed)."""
    failures: tuple[BatchResult[SystemOneResponse], ...]
    """The samples whose call failed, each with its error."""

    def unstable_at(self, threshold: float) -> list[str]:
        """The questions whose samples straddle `threshold`: the verdict there is a coin toss."""
        return [qid for qid, s in self.stats.items() if s.straddles(threshold)]


def _value(answer: Answer) -> float | str:
    if isinstance(answer, NoulAnswer):
        return answer.noul
    if isinstance(answer, ScoreAnswer):
        return answer.score
    assert isinstance(answer, ChoiceAnswer)
    return answer.choice


def _stats(answers: Sequence[Answer]) -> QuestionStats:
    label = None
    if all(isinstance(a, ChoiceAnswer) for a in answers):
        choices = [a for a in answers if isinstance(a, ChoiceAnswer)]
        counts: dict[str, int] = {}
        for a in choices:
            counts[a.choice] = counts.get(a.choice, 0) + 1
        # The modal label; ties go to the label seen first, deterministically.
        label = max(counts, key=lambda c: (counts[c], -list(counts).index(c)))
        values = tuple(a.probability_of(label) for a in choices)
    else:
        values = tuple(float(v) for a in answers if not isinstance(v := _value(a), str))
    return QuestionStats(
        values,
        statistics.fmean(values),
        statistics.pstdev(values),
        min(values),
        max(values),
        label,
    )


def _sample_state(state: State) -> dict[str, Any]:
    sample_id = uuid.uuid4().hex
    if isinstance(state, Mapping):
        if SAMPLE_ID_KEY in state:
            raise UserError(f"consistency() adds {SAMPLE_ID_KEY!r} to the state; rename that key")
        return {**state, SAMPLE_ID_KEY: sample_id}
    # Text or a JSON array cannot take a key: it is wrapped.
    return {"state": state, SAMPLE_ID_KEY: sample_id}


async def consistency(
    client: SystemOneClient,
    state: State,
    questions: Mapping[str, Question | Mapping[str, Any]],
    samples: int = 15,
    *,
    concurrency: int = 4,
    model: str | None = None,
) -> ConsistencyReport:
    """Ask the same questions `samples` times and report the spread of the answers.

    Each sample's state gets a fresh throwaway id (`sample_id`; a text or array state is wrapped
    as `{"state": ..., "sample_id": ...}`), so a service or cache that would answer a repeated
    state identically draws each sample independently. Calls run through `system_one_all`; a
    failed sample is collected in `failures`, never raised.

    Args:
        client: Whatever answers (`JudgeClient`, `ModelJudgeClient`).
        state: What the judge reads.
        questions: Question id -> question.
        samples: How many times to ask (1 to 1000).
        concurrency: At most this many calls in flight.
        model: The judge model (default: the client's).
    """
    samples = _validate.integer("samples", samples, minimum=1, maximum=1000, example=15)
    model = _validate.text("model", model, optional=True, example="jev-latest")
    requests = [SystemOneRequest(_sample_state(state), questions, model) for _ in range(samples)]
    results = await system_one_all(client, requests, concurrency=concurrency)
    failures = tuple(r for r in results if not r.ok)
    answers: dict[str, list[Answer]] = {qid: [] for qid in questions}
    for result in results:
        if result.value is None:
            continue
        for qid in questions:
            answer = result.value.answers.get(qid)
            if answer is not None:
                answers[qid].append(answer)
    stats = {qid: _stats(found) for qid, found in answers.items() if found}
    return ConsistencyReport(samples, stats, failures)
