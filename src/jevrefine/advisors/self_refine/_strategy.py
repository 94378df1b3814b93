"""`RetryStrategy`: how the attempts after the first are asked for, and what counts as an answer.

The options, each measured on IFBench prompts outside the published ones (docs/guide/
refinement-value.md says which measured better, and the defaults follow the measurement):

- `temperature` and `fresh_seeds`: retries sampled at their own temperature, each with its own
  seed (the request's seed plus the attempt's number less one), so that a sampled retry is a
  new sample (at one seed a server returns the same sample every time).
- `identical`: what happens when a retry would be sent exactly as an earlier attempt was (the
  same feedback, so the same prompt) at temperature 0, where the answer would be the same too:
  `"resample"` samples it at `resample_temperature` with a fresh seed, `"stop"` ends the loop
  (the report says so), `"send"` sends it anyway.
- `repeats`: what a retry whose answer repeats an earlier attempt's word for word, or quotes the
  feedback instead of answering, gets: `"judge"` (judged like any answer), `"guard"` (a repeat
  keeps the earlier attempt's verdict, asked of no judge; an echo never passes and is never
  returned while a real answer is).
- `feedback`: where the judge's defects go: `"appended"` to the original request's last user
  message (the feedback template), `"with_answer"` the same with the rejected answer quoted
  above its defects, or `"none"`: the original request again, a control that shows whether a
  model uses the feedback at all.
- `samples`: best-of-N, N independent samples per attempt asked for concurrently, the judge
  picks the best (`call()` only).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Final, Literal

from ... import _validate
from ...exceptions import UserError
from ...messages import ChatOptions

if TYPE_CHECKING:
    from ._report import Attempt

__all__ = [
    "DEFAULT_FEEDBACK_TEMPLATE",
    "WITH_ANSWER_FEEDBACK_TEMPLATE",
    "RetryStrategy",
    "quotes_feedback",
    "repeated_attempt",
]

# Worded so that a small model answers the request instead of continuing the feedback: on 10
# IFBench prompts (Qwen2.5-Coder-0.5B) the earlier "A reviewer rejected an earlier answer ...
# Write a new answer" wording was echoed back far more often, at the same pass rate
# (docs/benchmarks.md, "Does refinement help?").
DEFAULT_FEEDBACK_TEMPLATE: Final = (
    "\n\n(An earlier answer to this request broke these rules:\n{feedback}\n"
    "Answer the request above again, following every rule. Reply with the answer only.)"
)
"""Appended to the original last user message on a retry; `{feedback}` is the verdict's feedback
and `{answer}` (optional) the rejected answer."""

WITH_ANSWER_FEEDBACK_TEMPLATE: Final = (
    "\n\n(An earlier answer to this request was:\n<<<\n{answer}\n>>>\nIt broke these rules:\n"
    "{feedback}\nAnswer the request above again, following every rule. Reply with the answer "
    "only.)"
)
"""The template of `feedback="with_answer"`: the rejected answer quoted above its defects."""

Identical = Literal["resample", "stop", "send"]
Repeats = Literal["judge", "guard"]
Feedback = Literal["appended", "with_answer", "none"]

_ECHO_MIN: Final = 24
"""A feedback line shorter than this is not looked for in an answer (a short defect such as
"Too long." may be said by an honest answer too)."""
_ECHO_MARKERS: Final = ("broke these rules", "earlier answer to this request")
"""The feedback templates' own words, which an answer only holds when it echoes them."""
_SPACES: Final = re.compile(r"\s+")


@dataclass(frozen=True, slots=True, kw_only=True)
class RetryStrategy:
    """How retries are asked for and judged (see the module docstring for each option).

    Frozen; share one across advisors. `SelfRefineAdvisor(strategy=RetryStrategy(...))`.
    """

    # The defaults are the options that measured best on the dev slices (IFBench's dev prompts
    # on two models, IFEval's on one): sampled retries with their own seeds, repeats and echoes
    # guarded. docs/guide/refinement-value.md has the table and the command.
    temperature: float | None = 0.7
    """The temperature of the attempts after the first; `None` keeps the request's."""
    fresh_seeds: bool = True
    """Give each retry its own seed (the request's seed + the attempt's number - 1)."""
    identical: Identical = "resample"
    """A retry that would be sent exactly as an earlier attempt at temperature 0."""
    resample_temperature: float = 0.7
    """The temperature an identical retry is sampled at (`identical="resample"`)."""
    repeats: Repeats = "guard"
    """What a retry that repeats an earlier answer or quotes the feedback gets."""
    feedback: Feedback = "appended"
    """Where the judge's defects go."""
    samples: int = 1
    """Independent samples per attempt, the judge picking the best (best-of-N)."""

    def __post_init__(self) -> None:
        checked = {
            "temperature": _validate.number(
                "temperature", self.temperature, minimum=0, maximum=2, optional=True, example=0.7
            ),
            "fresh_seeds": _validate.boolean("fresh_seeds", self.fresh_seeds),
            "resample_temperature": _validate.number(
                "resample_temperature",
                self.resample_temperature,
                above=0,
                maximum=2,
                example=0.7,
            ),
            "samples": _validate.integer("samples", self.samples, minimum=1, maximum=16, example=3),
        }
        for name, allowed in (
            ("identical", ("resample", "stop", "send")),
            ("repeats", ("judge", "guard")),
            ("feedback", ("appended", "with_answer", "none")),
        ):
            value = getattr(self, name)
            if value not in allowed:
                raise UserError(
                    f"RetryStrategy({name}={_validate.shown(value)}) is not one of "
                    f"{', '.join(map(repr, allowed))}"
                )
        for name, value in checked.items():
            object.__setattr__(self, name, value)

    def options_for(self, number: int, options: ChatOptions, *, resample: bool) -> ChatOptions:
        """The options of attempt `number` (2 for the first retry) made from the request's.

        `resample`: the attempt is an identical request sampled afresh (`identical`).
        """
        temperature = options.temperature if self.temperature is None else self.temperature
        if resample:
            temperature = self.resample_temperature
        seed = options.seed
        if (self.fresh_seeds or resample) and (seed is not None or resample):
            seed = (seed or 0) + number - 1
        if temperature == options.temperature and seed == options.seed:
            return options
        return replace(options, temperature=temperature, seed=seed)

    def sample_options(self, k: int, options: ChatOptions) -> ChatOptions:
        """The options of best-of-N's sample `k` (1 for the second) of one attempt's request.

        Sampled (at the attempt's temperature, or `resample_temperature` where that is 0 or
        unset) with a seed of its own, so that no two samples are the same draw.
        """
        temperature = options.temperature
        if not temperature:
            temperature = self.resample_temperature
        return replace(options, temperature=temperature, seed=(options.seed or 0) + 1000 * k)

    def section(self, template: str, feedback: str, answer: str) -> str | None:
        """The retry section for the original request, or `None` to ask it again unchanged."""
        if self.feedback == "none":
            return None
        if self.feedback == "with_answer" and "{answer}" not in template:
            template = WITH_ANSWER_FEEDBACK_TEMPLATE
        return template.replace("{answer}", answer).replace("{feedback}", feedback)


def _plain(text: str) -> str:
    return _SPACES.sub(" ", text).strip().casefold()


def repeated_attempt(answer: str, earlier: Sequence[Attempt]) -> Attempt | None:
    """The first judged attempt whose answer `answer` repeats (whitespace and case aside)."""
    plain = _plain(answer)
    for attempt in earlier:
        if attempt.verdict is not None and _plain(attempt.answer) == plain:
            return attempt
    return None


def quotes_feedback(answer: str, feedback: str, request: str) -> bool:
    """Whether `answer` echoes the feedback it was given instead of answering (`echo`).

    An echo holds the feedback templates' own words, or one of the feedback's lines (at least
    `_ECHO_MIN` characters) that the original `request` did not hold: a sentence of the request
    quoted back may be part of an honest answer.
    """
    plain = _plain(answer)
    if any(marker in plain for marker in _ECHO_MARKERS):
        return True
    asked = _plain(request)
    for line in feedback.splitlines():
        line = line.lstrip("-*• ")
        name, colon, detail = line.partition(": ")
        if colon and " " not in name:  # "- criterion: detail", as the judge renders a defect
            line = detail
        quoted = _plain(line)
        if len(quoted) >= _ECHO_MIN and quoted in plain and quoted not in asked:
            return True
    return False
