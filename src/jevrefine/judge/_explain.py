"""Few-shot examples and written failure feedback for `ModelJudgeClient` (seed 003's advice).

Seed 003 asks for deterministic judging with few-shot examples, and feeds the judge's own written
`feedback` into the retry. Jev's typed answers carry no text, so for a criterion that failed the
judge model is asked once more, for one sentence of specific, constructive feedback; the sentence
joins the finding's detail and so reaches the retry prompt.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Final, Protocol

import anyio

from ..exceptions import JevrefineError
from ..jev.errors import JudgeUsageError
from ..messages import ChatOptions, ChatResponse, Prompt, SystemMessage, Usage, UserMessage
from .verdict import Finding, Outcome

if TYPE_CHECKING:
    from ..jev.questions import Question, State
    from ..jev.responses import SystemOneResponse

__all__ = [
    "EXPLAIN_SYSTEM_PROMPT",
    "MAX_EXPLANATION_CHARS",
    "FailureExplainer",
    "JudgeExample",
    "bound_sentence",
    "explain_failed",
    "render_examples",
]

_log = logging.getLogger("jevrefine.judge")

MAX_EXPLANATION_CHARS: Final = 300
"""The longest written feedback kept; longer text is cut at a word boundary."""

EXPLAIN_SYSTEM_PROMPT: Final = (
    "You are a careful, impartial reviewer. You explain why an answer falls short of one "
    "criterion, in one sentence of specific, constructive feedback addressed to its author."
)
"""The system message of a feedback request."""


@dataclass(frozen=True, slots=True)
class JudgeExample:
    """A worked example for one question: a state and the answer it deserves (few-shot)."""

    state: State
    """What the judge reads in the example."""
    answer: str | int | bool
    """The right answer: `"yes"`/`"no"` (or a bool) for a noul, a label for a choice, a level
    number for a score."""

    def rendered_answer(self) -> str:
        """The answer as the model must write it."""
        if isinstance(self.answer, bool):
            return "yes" if self.answer else "no"
        return str(self.answer)


def _text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=list)


def render_examples(qid: str, examples: Sequence[JudgeExample], allowed: Sequence[str]) -> str:
    """The examples as prompt text, each answer checked against the question's allowed answers."""
    lines = ["Examples:"]
    for number, example in enumerate(examples, start=1):
        if not isinstance(example, JudgeExample):
            raise JudgeUsageError(f"examples[{qid!r}] holds a {type(example).__name__}")
        answer = example.rendered_answer()
        if answer not in allowed:
            raise JudgeUsageError(
                f"examples[{qid!r}][{number - 1}]: {answer!r} is not one of {list(allowed)}"
            )
        lines.append(f"Example {number} state:\n{_text(example.state)}\nAnswer: {answer}")
    return "\n".join(lines)


_SPACE: Final = re.compile(r"\s+")


def bound_sentence(text: str, limit: int = MAX_EXPLANATION_CHARS) -> str:
    """`text` on one line, at most `limit` characters, cut at a word boundary with an ellipsis."""
    flat = _SPACE.sub(" ", text).strip().strip('"').strip()
    if len(flat) <= limit:
        return flat
    cut = flat[: limit - 1]
    space = cut.rfind(" ")
    return (cut[:space] if space > limit // 2 else cut).rstrip(" ,;:") + "…"


def explain_prompt(
    state_text: str, question: Mapping[str, Any], detail: str, temperature: float
) -> Prompt:
    """The request asking the judge model for one sentence of feedback on a failed criterion."""
    user = (
        f"State:\n{state_text}\n\n"
        f"Criterion: {_text(question.get('instructions'))}\n"
        f"The answer failed it: {detail}\n\n"
        "In one sentence, tell the author of `assistant_answer` specifically what to change so "
        "that it meets the criterion. Reply with the sentence only."
    )
    options = ChatOptions(temperature=temperature, max_tokens=96)
    return Prompt((SystemMessage(EXPLAIN_SYSTEM_PROMPT), UserMessage(user)), options)


def explanation_of(response: ChatResponse) -> tuple[str, Usage]:
    """A feedback request's answer: the bounded sentence and the tokens it cost."""
    return bound_sentence(response.text), response.metadata.usage


class FailureExplainer(Protocol):
    """A judge client that can write feedback for a failed criterion (`ModelJudgeClient`)."""

    explain_failures: bool
    """Whether `Judge` should ask it for feedback."""

    async def explain(
        self, state: State, question: Question | Mapping[str, Any], detail: str
    ) -> tuple[str, Usage]:
        """One sentence of feedback for an answer that failed `question`, and its usage."""
        ...


async def explain_failed(
    client: FailureExplainer,
    state: State,
    questions: Mapping[str, Question],
    findings: Mapping[str, Finding],
    response: SystemOneResponse | None,
) -> tuple[dict[str, Finding], SystemOneResponse | None]:
    """Findings with written feedback in the FAILED questions' details; the usage folded in.

    The requests run concurrently. A request that fails leaves its finding as it was (a warning
    is logged with the error type only): a transport error is no reason about the answer.
    """
    targets = [
        name for name, f in findings.items() if f.outcome is Outcome.FAILED and name in questions
    ]
    if not targets:
        return dict(findings), response
    written: dict[str, tuple[str, Usage]] = {}
    errors: list[str] = []

    async def one(name: str) -> None:
        try:
            written[name] = await client.explain(state, questions[name], findings[name].detail)
        except JevrefineError as exc:
            errors.append(type(exc).__name__)

    async with anyio.create_task_group() as group:
        for name in targets:
            group.start_soon(one, name)
    if errors:
        _log.warning(
            "judge: %d of %d feedback request(s) failed (%s); those findings keep their plain "
            "detail",
            len(errors),
            len(targets),
            ", ".join(sorted(set(errors))),
        )
    updated = dict(findings)
    usage = Usage()
    for name, (sentence, used) in written.items():
        usage = usage + used
        if sentence:
            finding = findings[name]
            updated[name] = replace(finding, detail=f"{finding.detail}. Feedback: {sentence}")
    if response is not None:
        response = replace(response, usage=response.usage + usage)
    return updated, response
