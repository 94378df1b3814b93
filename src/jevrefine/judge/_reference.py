"""Reference-guided judging: the judge model answers the question itself, then compares.

A small model asked "is this answer correct?" mostly reads whether the answer is on topic: on
the built-in calibration pairs Qwen2.5-Coder-1.5B gave "12 times 12 is 120" the same P(yes) as
"144" (docs/guide/judge.md, "Can the offline judge tell right from wrong?"). Asked instead
whether the answer agrees with an answer it wrote itself first, it tells them apart: solving is
the part it can do, comparing two short texts the part it does well (MT-Bench's
"reference-guided grading"). `ModelJudgeClient(reference_answers=True)` does that: before the
questions are asked about a state holding a `user_question` and no `expected_output`, the model
answers the question (once per question text: the retries of one prompt share it), and the
state carries that answer as `expected_output`. Both read the conversation without its system
message (`without_system`): the comparison is about what the answer says, not its format.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Mapping
from typing import Any, Final

from ..messages import ChatOptions, Prompt, SystemMessage, UserMessage

__all__ = [
    "REFERENCE_SYSTEM_PROMPT",
    "ReferenceCache",
    "needs_reference",
    "reference_prompt",
    "with_reference",
    "without_system",
]

REFERENCE_SYSTEM_PROMPT: Final = "You answer questions correctly and briefly."
"""The system message of the request that writes the reference answer."""

REFERENCE_MAX_TOKENS: Final = 96
"""The longest reference answer, in tokens: a short answer is all the comparison needs."""

_CACHE_SIZE: Final = 256


def reference_prompt(user_question: str, temperature: float) -> Prompt:
    """The request for a reference answer to the conversation in `user_question`."""
    user = (
        f"{user_question}\n\n"
        "Write a correct answer to the last user message above, in one or two sentences. Reply "
        "with the answer only."
    )
    options = ChatOptions(temperature=temperature, max_tokens=REFERENCE_MAX_TOKENS)
    return Prompt((SystemMessage(REFERENCE_SYSTEM_PROMPT), UserMessage(user)), options)


_ROLES: Final = ("system: ", "user: ", "assistant: ")


def without_system(user_question: str) -> str:
    """The conversation of a `JudgeInput.user_question` without its system message.

    A small judge reads a system message's instructions as part of the question: under
    "system: Answer in two sentences." Qwen2.5-Coder-1.5B gave the right answer "12 times 12 is
    144." P(yes) 0.45 instead of 0.55, and a right explanation less than an answer that only
    restates the question (docs/guide/judge.md). How an answer must look is for code checks to
    hold; the reference and its comparison are about what it says. A line belongs to the message
    whose `role: ` prefix came last (a message may span lines).
    """
    kept: list[str] = []
    dropping = False
    for line in user_question.splitlines():
        if line.startswith(_ROLES):
            dropping = line.startswith("system: ")
        if not dropping:
            kept.append(line)
    return "\n".join(kept) if kept else user_question


def needs_reference(state: object) -> str | None:
    """The `user_question` to answer when `state` is a judge state without a reference."""
    if not isinstance(state, Mapping) or "expected_output" in state:
        return None
    question = state.get("user_question")
    return question if isinstance(question, str) and question.strip() else None


def with_reference(state: Mapping[str, Any], reference: str) -> dict[str, Any]:
    """`state` with `expected_output` right after `assistant_answer` (`JudgeInput`'s order)."""
    result: dict[str, Any] = {}
    for key, value in state.items():
        result[key] = value
        if key == "assistant_answer":
            result["expected_output"] = reference
    result.setdefault("expected_output", reference)
    return result


class ReferenceCache:
    """The reference answers written so far, by question text; the oldest go first."""

    def __init__(self, size: int = _CACHE_SIZE) -> None:
        self._size = size
        self._answers: OrderedDict[str, str] = OrderedDict()

    def get(self, question: str) -> str | None:
        """The reference written for `question`, if it is still kept."""
        answer = self._answers.get(question)
        if answer is not None:
            self._answers.move_to_end(question)
        return answer

    def put(self, question: str, answer: str) -> None:
        """Keep `answer` for `question`, dropping the oldest beyond the size."""
        self._answers[question] = answer
        self._answers.move_to_end(question)
        while len(self._answers) > self._size:
            self._answers.popitem(last=False)
