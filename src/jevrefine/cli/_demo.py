"""The refine loop of `jevrefine demo`: a judged answer, every attempt and verdict shown.

The judge pairs a model criterion (asked of Jev when `TYPESAFE_API_KEY` is set, else of the demo's
own model through `ModelJudgeClient`) with a deterministic word-limit check that a first draft
plausibly fails, so the loop has something to do even on a small local model. Everything printed
is computed by the run; nothing is canned.
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
    from collections.abc import AsyncIterator

    from ..jev import SystemOneClient
    from ..models.base import ChatModel

__all__ = ["WORD_LIMIT", "demo_judge", "open_judge_client", "refine_demo"]

WORD_LIMIT: Final = 25
"""The demo's code check: answers of more words fail."""

ANSWERS_QUESTION: Final = Noul(
    "Does `assistant_answer` respond to the last user message in `user_question`?",
    when_true="It responds to what was asked",
    when_false="Does not answer what was asked",
)


def _short_enough(judge_input: JudgeInput) -> bool:
    return len(judge_input.assistant_answer.split()) <= WORD_LIMIT


def demo_judge(client: SystemOneClient) -> Judge:
    """The demo's judge: a word-limit code check and one model-judged question."""
    return Judge(
        client,
        [
            check(
                "short",
                _short_enough,
                defect=f"The answer is longer than {WORD_LIMIT} words; say it in fewer words",
            ),
            noul("answers_question", ANSWERS_QUESTION, minimum=0.5),
        ],
    )


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
        yield ModelJudgeClient(chat_model, constraint="grammar"), judged_by
    else:
        yield ModelJudgeClient(chat_model), judged_by


def _is_local(chat_model: ChatModel) -> bool:
    return chat_model.server_address in ("127.0.0.1", "localhost")


def _words(text: str) -> int:
    return len(text.split())


def _one_line(text: str, limit: int = 160) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def print_report(out: TextIO, report: RefineReport) -> None:
    """Each attempt's answer and verdict, then the outcome and the usage."""
    for attempt in report.attempts:
        out.write(f"  attempt {attempt.index}: {_one_line(attempt.answer)!r}")
        out.write(f" ({_words(attempt.answer)} words)\n")
        if attempt.verdict is None:
            out.write("    not judged\n")
            continue
        out.write(f"    verdict: {attempt.verdict.summary()}\n")
        for finding in attempt.verdict.counted_failures:
            out.write(f"    - {finding.detail}\n")
    model, judge = report.model_usage, report.judge_usage
    out.write(
        f"  outcome: {report.outcome} after {len(report.attempts)} attempt(s); model "
        f"{model.input_tokens} input + {model.output_tokens} output tokens, judge "
        f"{judge.total_tokens} tokens\n"
    )


async def refine_demo(out: TextIO, chat_model: ChatModel, prompt: str, system: str) -> None:
    """Ask `prompt` through a `SelfRefineAdvisor`; print the attempts, verdicts and answer."""
    async with open_judge_client(chat_model) as (judge_client, judged_by):
        out.write(
            f"  judged by {judged_by}: at most {WORD_LIMIT} words, and it must answer the "
            "question\n"
        )
        advisor = SelfRefineAdvisor(demo_judge(judge_client), max_repeat_attempts=2)
        client = ChatClient(chat_model, system=system, advisors=[advisor])
        spec = client.prompt(prompt).options(max_tokens=80, temperature=0.2)
        started = time.perf_counter()
        try:
            response = await spec.call()
        except SelfRefineFailedError as exc:  # not raised with these settings; kept for edits
            print_report(out, exc.report)
            return
        report = response.context[context_keys.REFINE_REPORT]
        print_report(out, report)
        out.write(f"  in {time.perf_counter() - started:.2f} s\n\n{response.content.strip()}\n\n")
