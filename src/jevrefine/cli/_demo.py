"""The refine loop of `jevrefine demo`: a judged answer streamed live, then a typed one.

**The judge.** Code checks, whose defects say what is wrong and never what to write: a word
limit that a first draft plausibly breaks (small models write 40-80 words for a "why"
question), and a check that the answer is not an echo of the feedback (a small model sometimes
answers a retry with "The answer is longer than 25 words."). Then one model-judged question:
whether the answer agrees with a correct one (an earlier version checked for the word
"scatter" and told the model to write it: the retry then only copied the feedback). Offline
that question is asked of `OFFLINE_JUDGE_MODEL` on a server of its own, never the answering
model (seed 003: judge with a separate client), through `reference_judge` (it answers the
question itself first, then compares: the way a small model can tell right from wrong); with
`TYPESAFE_API_KEY` set, Jev answers it; on a hosted model without Jev, that model does. The
code checks run first and a failed one skips the judging call (`fail_fast`). Attempt 1 runs at
temperature 0; each retry is sampled fresh (`RETRY_TEMPERATURE`, a seed per attempt), or a
small model repeats itself.

**What is shown.** Each attempt streams as the model writes it (`stream_mode="live"`), then its
verdict and, when it is rejected, that it goes back with its feedback. At the end the outcome:
the returned answer when an attempt passed, or "no attempt passed; best attempt shown" with its
verdict when none did (seed 003 returns the best attempt; it is never dressed as a pass).

**The typed step.** `entity(CityFacts)` through a `SelfRefineAdvisor`: an answer that is not a
valid `CityFacts` is sent back with the validation error (`fits_output_type`: "population_millions
(...): input should be less than 100; you wrote 6000000"), to be corrected by the model rather
than reported as a failure; whether a small model manages is its own affair, and the demo
says which happened. Everything printed is computed by the run; nothing is canned.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, TextIO

from ..advisors.chain import BaseAdvisor
from ..advisors.self_refine import OUTPUT_CRITERION, RefineReport, SelfRefineAdvisor, output_defect
from ..client import ChatClient
from ..exceptions import JevrefineError
from ..jev import JudgeClient, Noul
from ..judge import Judge, JudgeInput, check, noul
from ..judge._judge import reference_judge
from ..messages import ChatOptions
from ..streaming import AttemptJudged, AttemptRejected, AttemptStarted, Completed, TextDelta
from ._providers import JEV_KEY_ENV, is_local_model, offline_judge_model, open_local_model

if TYPE_CHECKING:
    from .._request import ChatClientRequest, ChatClientResponse
    from ..advisors.chain import CallAdvisorChain
    from ..jev import SystemOneClient
    from ..judge import Criterion, Verdict
    from ..models.base import ChatModel

__all__ = [
    "RETRY_TEMPERATURE",
    "WORD_LIMIT",
    "DemoJudging",
    "demo_criteria",
    "open_judge_client",
    "print_outcome",
    "refine_demo",
    "typed_demo",
]

WORD_LIMIT: Final = 25
"""The demo's code check: answers of more words fail."""

SHORT_DEFECT: Final = f"The answer is longer than {WORD_LIMIT} words; say it in fewer words"

ECHO_DEFECT: Final = (
    "The answer talks about these rules instead of answering; answer the question itself"
)

# What only an echo of the feedback contains: the defect's own wording and the retry section's.
_ECHO_MARKS: Final = (f"longer than {WORD_LIMIT} words", "fewer words", "broke these rules")

RETRY_TEMPERATURE: Final = 0.7
"""Retries are sampled (a fresh seed each): at temperature 0 a small model answers a retry with
the first draft again, word for word, whatever the feedback (issue 31 measured 9 of 11 third
attempts on Qwen2.5-Coder-0.5B repeating the second)."""

ASKED_OF_JEV: Final = Noul(
    "Does assistant_answer correctly answer user_question?",
    when_true="It answers what was asked, and what it says is right",
    when_false="The answer does not answer the question, or says something wrong",
)
"""The model-judged question when Jev judges (Jev reads the answer against its own knowledge)."""


def _short_enough(judge_input: JudgeInput) -> bool:
    return len(judge_input.assistant_answer.split()) <= WORD_LIMIT


def _not_an_echo(judge_input: JudgeInput) -> bool:
    text = " ".join(judge_input.assistant_answer.lower().split())
    return not any(mark in text for mark in _ECHO_MARKS)


def demo_criteria(question: Sequence[Criterion]) -> list[Criterion]:
    """The demo's code checks, then the model-judged `question` criteria."""
    criteria: list[Criterion] = [
        check("short", _short_enough, defect=SHORT_DEFECT),
        check("not_an_echo", _not_an_echo, defect=ECHO_DEFECT),
    ]
    return criteria + list(question)


class _FreshRetries(BaseAdvisor):
    """Inside self-refine: attempt 1 at the caller's settings, each retry sampled fresh.

    A retry goes at `RETRY_TEMPERATURE` with a seed of its own, so the same run still prints
    the same attempts.
    """

    name = "demo-fresh-retries"
    order = SelfRefineAdvisor.DEFAULT_ORDER + 1

    def __init__(self) -> None:
        self._attempt = 0

    def before(self, request: ChatClientRequest) -> ChatClientRequest:
        """Leave attempt 1 alone; sample the others."""
        self._attempt += 1
        if self._attempt == 1:
            return request
        options = request.prompt.options.merge(
            ChatOptions(temperature=RETRY_TEMPERATURE, seed=7 + self._attempt)
        )
        return request.copy(prompt=request.prompt.with_options(options))


@dataclass(frozen=True, slots=True)
class DemoJudging:
    """What answers the demo's model-judged question, and how it is described."""

    client: SystemOneClient
    """Answers the question."""
    question: tuple[Criterion, ...]
    """The model-judged criteria (one noul)."""
    description: str
    """Who judges, in one line."""
    calibration_note: str = ""
    """A line on how this judge did on the known pairs (cached), or how to measure it."""


@contextlib.asynccontextmanager
async def open_judge_client(chat_model: ChatModel) -> AsyncIterator[DemoJudging]:
    """The demo's judging client: Jev, the local judge model, or the hosted model itself.

    Jev when `TYPESAFE_API_KEY` is set; offline the local judge model on its own server; else
    the hosted model itself, reference-guided.
    """
    if os.environ.get(JEV_KEY_ENV, "").strip():
        async with JudgeClient() as jev:
            criterion = noul("answers_correctly", ASKED_OF_JEV)
            yield DemoJudging(jev, (criterion,), f"Jev ({jev.model})")
        return
    async with contextlib.AsyncExitStack() as stack:
        judge_model = chat_model
        constraint: Any = "json_schema"
        where = "the answering model itself"
        if _is_local(chat_model):
            constraint = "grammar"
            wanted = offline_judge_model()
            if not is_local_model(chat_model, wanted):
                judge_model, _ = await open_local_model(stack, wanted)
                where = "a separate local server"
        judge = reference_judge(judge_model, constraint=constraint)
        assert judge.client is not None
        described = (
            f"{judge_model.model_name} ({where}): it answers the question itself, then says "
            "whether the answer agrees"
        )
        note = _calibration_note(judge, judge_model)
        yield DemoJudging(judge.client, judge.criteria, described, note)


def _calibration_note(judge: Judge, judge_model: ChatModel) -> str:
    from ._calibration import cached_calibration

    calibration = cached_calibration(judge, judge_model)
    if calibration is None:
        return (
            "  (`jevrefine judge --calibrate` measures this judge on 12 known right and wrong "
            "answers; `run` does it before its first run)\n"
        )
    flag = "WARNING, near chance: " if calibration.near_chance else ""
    return f"  calibration: {flag}it {calibration.summary()} (measured earlier)\n"


def _is_local(chat_model: ChatModel) -> bool:
    return chat_model.server_address in ("127.0.0.1", "localhost")


def _words(text: str) -> int:
    return len(text.split())


def _one_line(text: str, limit: int = 160) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def _write_verdict(out: TextIO, verdict: Verdict | None) -> None:
    if verdict is None:
        out.write("    not judged\n")
        return
    out.write(f"    verdict: {verdict.summary()}\n")
    for finding in verdict.counted_failures:
        out.write(f"    - {finding.detail}\n")


def print_outcome(out: TextIO, report: RefineReport, answer: str) -> None:
    """The outcome, the usage and the answer, labelled by whether it passed."""
    model, judge = report.model_usage, report.judge_usage
    chosen = f", returned attempt {report.chosen}" if report.chosen is not None else ""
    out.write(
        f"  outcome: {report.outcome} after {len(report.attempts)} attempt(s){chosen}; model "
        f"{model.input_tokens} input + {model.output_tokens} output tokens, judge "
        f"{judge.total_tokens} tokens\n"
    )
    first = report.attempts[0].verdict if report.attempts else None
    if report.passed:
        if first is not None and not first.passed and report.chosen not in (None, 1):
            failed = ", ".join(f.criterion for f in first.counted_failures)
            out.write(
                f"  the first draft failed {failed}; the returned answer passes every criterion\n"
            )
        out.write(f"\n{answer.strip()}\n\n")
        return
    if report.outcome == "best_attempt":
        best = next(a for a in report.attempts if a.index == report.chosen)
        summary = best.verdict.summary() if best.verdict is not None else "not judged"
        out.write(
            f"  no attempt passed; best attempt shown (attempt {best.index}: {summary})\n"
            f"\n[did not pass the judge] {answer.strip()}\n\n"
        )
        return
    out.write(f"  not judged ({report.outcome}); the answer is shown as it came\n\n{answer}\n\n")


async def refine_demo(
    out: TextIO, chat_model: ChatModel, prompt: str, system: str, judging: DemoJudging
) -> None:
    """Ask `prompt` through a live-streaming `SelfRefineAdvisor`.

    Prints each attempt as it is written, its verdict, and the outcome.
    """
    criteria = demo_criteria(judging.question)
    rules = ", ".join(c.name for c in criteria)
    out.write(f"  criteria: {rules} (code checks first; a failed one skips the judging call)\n")
    out.flush()
    judge = Judge(judging.client, criteria, fail_fast=True)
    advisor = SelfRefineAdvisor(judge, max_repeat_attempts=2, stream_mode="live")
    client = ChatClient(chat_model, system=system, advisors=[advisor, _FreshRetries()])
    # Temperature 0 and a seed: the same run on the same model prints the same attempts.
    spec = client.prompt(prompt).options(max_tokens=96, temperature=0.0, seed=7)
    started = time.perf_counter()
    text: dict[int, str] = {}
    async for event in spec.stream_events():
        match event:
            case AttemptStarted(attempt=number):
                text[number] = ""
                out.write(f"  attempt {number}: ")
            case TextDelta(attempt=number, text=piece):
                text[number] += piece
                out.write(" ".join(piece.splitlines()) if "\n" in piece else piece)
            case AttemptJudged(attempt=number, verdict=verdict):
                out.write(f"  ({_words(text[number])} words)\n")
                _write_verdict(out, verdict)
            case AttemptRejected():
                out.write("    rejected: sent back with that feedback\n")
            case Completed(response=response):
                report = RefineReport.of(response)
                assert report is not None
                print_outcome(out, report, response.content)
        out.flush()
    out.write(f"  in {time.perf_counter() - started:.1f} s\n\n")


class _ShowTypedAttempts:
    """Innermost advisor of the typed step: prints each attempt's answer and whether it fits.

    Whether it fits is what the refine loop's `fits_output_type` finding says (the same test).
    """

    name = "demo-typed-attempts"
    order = SelfRefineAdvisor.DEFAULT_ORDER + 2  # inside self-refine: once per attempt

    def __init__(self, out: TextIO) -> None:
        self._out = out
        self._number = 0

    async def advise_call(
        self, request: ChatClientRequest, chain: CallAdvisorChain
    ) -> ChatClientResponse:
        """Pass the request on; print the answer and its fit."""
        response = await chain.next_call(request)
        self._number += 1
        answer = response.content
        self._out.write(f"  attempt {self._number}: {_one_line(answer)}\n")
        spec = request.output_spec
        defect = output_defect(spec, answer) if spec is not None else None
        if defect is None:
            self._out.write(f"    fits {spec.name if spec is not None else 'the type'}\n")
        else:
            self._out.write(f"    - {OUTPUT_CRITERION}: {defect}\n")
        self._out.flush()
        return response


async def typed_demo(
    out: TextIO, chat_model: ChatModel, system: str, question: str, target: type[Any]
) -> None:
    """`entity(target)` refined: a retry carries the validation error of an unfitting answer.

    Prints each attempt, then the typed value or what went wrong.
    """
    # No criteria of its own: the type is the criterion (the loop reads every answer as it).
    advisor = SelfRefineAdvisor(Judge(criteria=[]), max_repeat_attempts=2)
    shown = _ShowTypedAttempts(out)
    refined = ChatClient(chat_model, system=system, advisors=[advisor, _FreshRetries(), shown])
    started = time.perf_counter()
    try:
        value = (
            await refined.prompt(question)
            .options(max_tokens=80, temperature=0, seed=7)
            .entity(target)
        )
    except JevrefineError as exc:
        # No attempt fitted: say so, with what the last one got wrong.
        out.write(f"  no attempt fitted {target.__name__}: {exc}\n")
    else:
        out.write(f"  {value!r}\n")
    out.write(f"  in {time.perf_counter() - started:.1f} s\n")
