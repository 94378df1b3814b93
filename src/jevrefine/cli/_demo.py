"""The refine loop of `jevrefine demo`: a judged answer, every attempt and verdict shown live.

The judge pairs two code checks with one model-judged question. The checks are deterministic, so
whether the first draft failed and the returned answer passes is never a matter of opinion: a
word limit that a first draft plausibly breaks (small models write 40-70 words for a "why"
question), and a check that the answer is not an echo of the feedback (a small model sometimes
answers a retry with "The answer is longer than 25 words.", which is short and would otherwise
pass). The question (asked of Jev when `TYPESAFE_API_KEY` is set, else of the demo's own model
through `ModelJudgeClient`) asks whether the answer responds to what was asked.

Each attempt's answer is printed as soon as the model returns it and its verdict as soon as the
judge returns (`_LiveJudge`), not in a summary at the end. Everything printed is computed by the
run; nothing is canned.
"""

from __future__ import annotations

import contextlib
import os
import time
from typing import TYPE_CHECKING, Final, TextIO

from .. import context_keys
from ..advisors.self_refine import RefineReport, SelfRefineAdvisor, SelfRefineFailedError
from ..client import ChatClient
from ..jev import JudgeClient, Noul
from ..judge import Judge, JudgeInput, ModelJudgeClient, check, noul

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Sequence

    from ..jev import SystemOneClient
    from ..judge import Criterion, JudgePlan, Verdict
    from ..models.base import ChatModel

__all__ = ["WORD_LIMIT", "demo_judge", "open_judge_client", "print_report", "refine_demo"]

WORD_LIMIT: Final = 25
"""The demo's code check: answers of more words fail."""

SHORT_DEFECT: Final = f"The answer is longer than {WORD_LIMIT} words; say it in fewer words"

ECHO_DEFECT: Final = (
    "The answer talks about these rules instead of answering; answer the question itself"
)

# What only an echo of the feedback contains: the defect's own wording and the retry section's.
_ECHO_MARKS: Final = (f"longer than {WORD_LIMIT} words", "fewer words", "broke these rules")

ANSWERS_QUESTION: Final = Noul(
    "Does assistant_answer answer user_question?",
    when_true="It answers what was asked",
    when_false="Does not answer what was asked",
)

LOCAL_JUDGE_SYSTEM: Final = "You judge answers. Reply yes or no."
"""The local judge's system message: on Qwen2.5-Coder-0.5B, 9 hand-made question/answer pairs
(4 real answers, 5 non-answers such as an echo or "I like turtles."), this and the question
above gave P(yes) 0.40-0.56 to the answers and 0.13-0.33 to the non-answers; the SDK's default
evaluator prompt with the longer question gave 0.27-0.43 and 0.10-0.24 (docs/guide/
refinement-value.md)."""

ANSWERS_MINIMUM: Final = 0.35
"""The P(yes) a small local judge must give: between the two groups measured above. Its "yes"
is biased low, so 0.5 would reject two of the four real answers."""


def _short_enough(judge_input: JudgeInput) -> bool:
    return len(judge_input.assistant_answer.split()) <= WORD_LIMIT


def _not_an_echo(judge_input: JudgeInput) -> bool:
    text = " ".join(judge_input.assistant_answer.lower().split())
    return not any(mark in text for mark in _ECHO_MARKS)


SKY_PROMPT: Final = "Why is the sky blue?"
"""The demo's default question, which has a cause a code check can hold the answer to."""

CAUSE_DEFECT: Final = (
    "The answer does not name the cause; say that the air scatters blue sunlight more than red"
)


def _names_the_cause(judge_input: JudgeInput) -> bool:
    # Rayleigh scattering is the physics; a small model's first draft rarely names it.
    return "scatter" in judge_input.assistant_answer.lower()


def _criteria(minimum: float = 0.5, *, prompt: str = "") -> list[Criterion]:
    criteria: list[Criterion] = [
        check("short", _short_enough, defect=SHORT_DEFECT),
        check("not_an_echo", _not_an_echo, defect=ECHO_DEFECT),
    ]
    if prompt.strip() == SKY_PROMPT:
        criteria.append(check("names_the_cause", _names_the_cause, defect=CAUSE_DEFECT))
    criteria.append(noul("answers_question", ANSWERS_QUESTION, minimum=minimum))
    return criteria


def demo_judge(client: SystemOneClient) -> Judge:
    """The demo's judge: a word-limit check, an echo check and one model-judged question."""
    return Judge(client, _criteria())


class _LiveJudge(Judge):
    """The demo's judge, printing each answer when it is judged and each verdict when it is in.

    The answer reaches the judge as soon as the model returns it, so this prints the loop as it
    runs (`SelfRefineAdvisor` calls `prepare` then `ask` once per attempt).
    """

    def __init__(self, client: SystemOneClient, criteria: Sequence[Criterion], out: TextIO):
        super().__init__(client, criteria)
        self._out = out
        self._attempt = 0

    async def prepare(self, judge_input: JudgeInput) -> JudgePlan:
        """Print the attempt's answer, then run the checks."""
        self._attempt += 1
        answer = judge_input.assistant_answer
        self._out.write(
            f"  attempt {self._attempt}: {_one_line(answer)!r} ({_words(answer)} words)\n"
        )
        self._out.flush()
        return await super().prepare(judge_input)

    async def ask(self, plan: JudgePlan) -> Verdict:
        """Ask the question, then print the verdict and what failed."""
        verdict = await super().ask(plan)
        _write_verdict(self._out, verdict)
        return verdict


@contextlib.asynccontextmanager
async def open_judge_client(chat_model: ChatModel) -> AsyncIterator[tuple[SystemOneClient, str]]:
    """Jev when `TYPESAFE_API_KEY` is set, else the demo's model as the judge."""
    if os.environ.get("TYPESAFE_API_KEY", "").strip():
        async with JudgeClient() as jev:
            yield jev, f"Jev ({jev.model})"
        return
    judged_by = f"{chat_model.model_name} as the judge (ModelJudgeClient)"
    if _is_local(chat_model):
        # A llama.cpp grammar makes the answer the first token: the cheapest on a small CPU.
        client = ModelJudgeClient(
            chat_model, constraint="grammar", system_prompt=LOCAL_JUDGE_SYSTEM
        )
        yield client, judged_by
    else:
        yield ModelJudgeClient(chat_model), judged_by


def _is_local(chat_model: ChatModel) -> bool:
    return chat_model.server_address in ("127.0.0.1", "localhost")


def _words(text: str) -> int:
    return len(text.split())


def _one_line(text: str, limit: int = 160) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def _write_verdict(out: TextIO, verdict: Verdict) -> None:
    out.write(f"    verdict: {verdict.summary()}\n")
    for finding in verdict.counted_failures:
        out.write(f"    - {finding.detail}\n")
    out.flush()


def print_report(out: TextIO, report: RefineReport) -> None:
    """The outcome and the usage (the attempts were printed as they ran)."""
    for attempt in report.attempts:
        if attempt.verdict is None:  # never reached the judge: not printed live
            out.write(f"  attempt {attempt.index}: {_one_line(attempt.answer)!r}, not judged\n")
    model, judge = report.model_usage, report.judge_usage
    chosen = f", returned attempt {report.chosen}" if report.chosen is not None else ""
    out.write(
        f"  outcome: {report.outcome} after {len(report.attempts)} attempt(s){chosen}; model "
        f"{model.input_tokens} input + {model.output_tokens} output tokens, judge "
        f"{judge.total_tokens} tokens\n"
    )


def _comparison(report: RefineReport) -> str:
    """One line saying whether the returned answer passes what the first draft failed."""
    first = report.attempts[0].verdict
    if first is None or first.passed or report.chosen in (None, 1):
        return ""
    failed = ", ".join(f.criterion for f in first.counted_failures)
    if report.passed:
        return f"  the first draft failed {failed}; the returned answer passes every criterion\n"
    return f"  the first draft failed {failed}; no attempt passed every criterion\n"


async def refine_demo(out: TextIO, chat_model: ChatModel, prompt: str, system: str) -> None:
    """Ask `prompt` through a `SelfRefineAdvisor`; print each attempt and verdict as it happens."""
    async with open_judge_client(chat_model) as (judge_client, judged_by):
        cause = ", name the cause" if prompt.strip() == SKY_PROMPT else ""
        out.write(
            f"  judged by {judged_by}: at most {WORD_LIMIT} words, not an echo of the "
            f"feedback{cause}, and it must answer the question\n"
        )
        out.flush()
        local = isinstance(judge_client, ModelJudgeClient) and _is_local(chat_model)
        criteria = _criteria(ANSWERS_MINIMUM if local else 0.5, prompt=prompt)
        advisor = SelfRefineAdvisor(_LiveJudge(judge_client, criteria, out), max_repeat_attempts=2)
        client = ChatClient(chat_model, system=system, advisors=[advisor])
        # Temperature 0 and a seed: the same run on the same model prints the same attempts.
        spec = client.prompt(prompt).options(max_tokens=96, temperature=0.0, seed=7)
        started = time.perf_counter()
        try:
            response = await spec.call()
        except SelfRefineFailedError as exc:  # not raised with these settings; kept for edits
            print_report(out, exc.report)
            return
        report = response.context[context_keys.REFINE_REPORT]
        print_report(out, report)
        out.write(_comparison(report))
        out.write(f"  in {time.perf_counter() - started:.2f} s\n\n{response.content.strip()}\n\n")
