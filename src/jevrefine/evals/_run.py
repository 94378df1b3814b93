"""`evaluate`: run every case through a refine setup and score each attempt with the oracle."""

from __future__ import annotations

import inspect
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any

import anyio

from .. import context_keys
from ..advisors.self_refine import (
    Attempt,
    RefineReport,
    RetryStrategy,
    SelfRefineAdvisor,
    SelfRefineFailedError,
    quotes_feedback,
)
from ..client import ChatClient
from ..exceptions import UserError
from ..judge._judge import Judge
from ..messages import AssistantMessage, Message, SystemMessage, UserMessage
from ._asserts import Memo, case_passes, score_answer
from ._bounded import DEFAULT_CHECK_TIMEOUT, CheckWorker, check_timeout_of
from ._cases import Case
from ._judge import asserts_judge
from ._report import EvalReport, JudgeMode

if TYPE_CHECKING:
    from ..client import PromptSpec
    from ..jev.protocol import SystemOneClient

__all__ = ["evaluate"]

ResultCallback = Callable[[dict[str, Any]], Awaitable[None] | None]
"""Gets each case's result row as it is done; sync or async."""

_JUDGES = ("asserts", "config", "none")


async def evaluate(
    cases: Sequence[Case],
    client: ChatClient,
    *,
    judge: str | Judge = "asserts",
    grader: SystemOneClient | None = None,
    max_repeat_attempts: int = 2,
    concurrency: int = 8,
    on_result: ResultCallback | None = None,
    check_timeout: float = DEFAULT_CHECK_TIMEOUT,
    strategy: RetryStrategy | None = None,
) -> EvalReport:
    """Run every case through `client`'s refine loop; score every attempt with the assertions.

    The assertions are the oracle; what judges the loop is `judge`: `"asserts"` (a `Judge` built
    from each case's assertions), a `Judge`, `"config"` (the client's own `SelfRefineAdvisor`)
    or `"none"` (one attempt: the baseline only). The baseline is the oracle's verdict on
    attempt 1's answer, the final one on the answer returned: no extra model call.

    Args:
        cases: from `load_cases`.
        client: the setup under test. Unless `judge="config"`, it must not hold a
            `SelfRefineAdvisor`: `evaluate` adds one per case.
        judge: what judges the refine loop (above).
        grader: the `SystemOneClient` that answers `llm-rubric` assertions (oracle and loop).
        max_repeat_attempts: retries after the first attempt (not for `"config"` or `"none"`).
        concurrency: cases in flight at once.
        on_result: gets each case's result row as it is done (completion order).
        check_timeout: the seconds one check of one answer may take: a `regex` or a JSON
            schema (run in a worker process that is killed past the bound), or a `python`
            function. Past it the assertion fails, saying so, and the other cases go on.
        strategy: the `RetryStrategy` of the advisors `evaluate` adds (not for `"config"`,
            whose advisor has its own); `RetryStrategy(feedback="none")` is the no-feedback
            control: retries that never see the judge's defects.

    A case whose model call, grader or `python` assertion fails is a row with its `error` set;
    it counts in `errors` only. Nothing else is caught.

    Raises:
        UserError: a bad argument, found before any model call (e.g. an `llm-rubric` with no
            grader, `"config"` on a client with no `SelfRefineAdvisor`).
    """
    if isinstance(concurrency, bool) or not isinstance(concurrency, int) or concurrency < 1:
        raise UserError(f"concurrency must be an int >= 1, got {concurrency!r}")
    seconds = check_timeout_of(check_timeout)
    refine = _Refine(max_repeat_attempts, strategy)
    mode, advisor = _loop_setup(cases, client, judge, grader, refine)
    rows: list[dict[str, Any] | None] = [None] * len(cases)
    # One shared iterator, pulled by a fixed set of workers: no task or stream per case. Each
    # `next()` runs without an await in between, so no two workers get the same case.
    todo = iter(enumerate(cases))

    async def worker() -> None:
        for position, case in todo:
            memo = Memo(checks)
            row = await _run_case(case, client, mode, advisor, grader, refine, memo)
            rows[position] = row
            if on_result is not None:
                returned = on_result(row)
                if inspect.isawaitable(returned):
                    await returned

    try:
        # One worker process for the run's regex and schema checks (started at the first one).
        async with CheckWorker(timeout=seconds) as checks, anyio.create_task_group() as group:
            for _ in range(min(concurrency, len(cases))):
                group.start_soon(worker)
    except BaseExceptionGroup as failed:
        # A case's own failures are rows; this is on_result's error (or a bug): raise it as is.
        raise failed.exceptions[0] from None
    return EvalReport(results=tuple(r for r in rows if r is not None), judge=mode)


def _loop_setup(
    cases: Sequence[Case],
    client: ChatClient,
    judge: str | Judge,
    grader: SystemOneClient | None,
    refine: _Refine,
) -> tuple[JudgeMode, SelfRefineAdvisor | None]:
    """Check the arguments; the mode, and the shared advisor of a `Judge` object."""
    if not isinstance(client, ChatClient):
        raise UserError(f"evaluate() needs a ChatClient, got {type(client).__name__}")
    if isinstance(cases, str | bytes) or not all(isinstance(c, Case) for c in cases):
        raise UserError("evaluate() needs a list of Case: cases = evals.load_cases(path)")
    if grader is not None and not callable(getattr(grader, "system_one", None)):
        raise UserError(f"grader must be a SystemOneClient, got {type(grader).__name__}")
    if grader is None:
        needing = [c.id for c in cases if c.needs_grader]
        if needing:
            raise UserError(
                f"case(s) {needing[:5]} have llm-rubric assertions: pass grader= (a "
                "SystemOneClient, e.g. JudgeClient() or ModelJudgeClient(model))"
            )
    own = [a for a in client.advisors if isinstance(a, SelfRefineAdvisor)]
    if judge == "config":
        if not own:
            raise UserError(
                'judge="config" uses the client\'s own SelfRefineAdvisor, and this client has '
                'none: add one, or pass judge="asserts", a Judge or "none"'
            )
        return "config", None
    if own:
        raise UserError(
            'the client already has a SelfRefineAdvisor: pass judge="config" to evaluate it, '
            "or a client without one (evaluate adds its own)"
        )
    if isinstance(judge, Judge):
        return "judge", refine.advisor(judge)
    if judge not in _JUDGES:
        raise UserError(f'judge must be "asserts", "config", "none" or a Judge, got {judge!r}')
    if judge == "asserts":
        if cases:
            # Built now only to check max_repeat_attempts before any call; each case gets its own.
            refine.advisor(asserts_judge(cases[0], grader))
        return "asserts", None
    return "none", None


class _Refine:
    """How `evaluate` builds the advisors it adds: the retries and their strategy."""

    __slots__ = ("max_repeat_attempts", "strategy")

    def __init__(self, max_repeat_attempts: int, strategy: RetryStrategy | None) -> None:
        self.max_repeat_attempts = max_repeat_attempts
        self.strategy = strategy

    def advisor(self, judge: Judge) -> SelfRefineAdvisor:
        """A `SelfRefineAdvisor` judged by `judge` (its arguments checked as it is built)."""
        return SelfRefineAdvisor(
            judge, max_repeat_attempts=self.max_repeat_attempts, strategy=self.strategy
        )


def _spec(client: ChatClient, case: Case) -> PromptSpec:
    spec = client.prompt()
    if case.system is not None:
        spec = spec.system(case.system)
    if isinstance(case.input, str):
        return spec.user(case.input)
    return spec.messages(*(_message(m["role"], m["content"]) for m in case.input))


def _message(role: str, text: str) -> Message:
    if role == "system":
        return SystemMessage(text)
    if role == "assistant":
        return AssistantMessage(text)
    return UserMessage(text)


async def _run_case(
    case: Case,
    client: ChatClient,
    mode: JudgeMode,
    advisor: SelfRefineAdvisor | None,
    grader: SystemOneClient | None,
    refine: _Refine,
    memo: Memo,
) -> dict[str, Any]:
    row = _row(case)
    spec = _spec(client, case)
    if mode == "asserts":
        advisor = refine.advisor(asserts_judge(case, grader, memo))
    if advisor is not None:
        spec = spec.advisors(advisor)
    started = time.perf_counter()
    report: RefineReport | None
    try:
        try:
            response = await spec.call()
        except SelfRefineFailedError as exc:
            # Attempts ran out with fail_on_exhausted_attempts: nothing was returned.
            report = exc.report
        else:
            report = response.context.get(context_keys.REFINE_REPORT)
            usage = response.chat_response.metadata.usage
            if report is None:
                report = RefineReport(
                    [Attempt(1, response.content, None, usage)], "unjudged", usage, chosen=1
                )
        row["latency_s"] = time.perf_counter() - started
        row["model_tokens"] = report.model_usage.total_tokens
        row["judge_tokens"] = report.judge_usage.total_tokens
        await _score(row, case, report, grader, memo)
    except Exception as exc:
        row["latency_s"] = time.perf_counter() - started
        row["error"] = f"{type(exc).__name__}: {exc}"
        row["attempts"] = []
        row["passed_baseline"] = row["passed_final"] = row["chosen"] = None
    return row


def _row(case: Case) -> dict[str, Any]:
    return {
        "id": case.id,
        "input": case.input if isinstance(case.input, str) else [dict(m) for m in case.input],
        "expected": case.expected,
        "metadata": dict(case.metadata),
        "assertion_types": [a.type for a in case.assertions],
        "passed_baseline": None,
        "passed_final": None,
        "passed_final_answered": None,
        "chosen": None,
        "outcome": None,
        "error": None,
        "attempts": [],
        "model_tokens": 0,
        "judge_tokens": 0,
        "grader_tokens": 0,
        "latency_s": 0.0,
    }


async def _score(
    row: dict[str, Any],
    case: Case,
    report: RefineReport,
    grader: SystemOneClient | None,
    memo: Memo,
) -> None:
    """Fill the row's verdicts: the oracle on every attempt, baseline and final."""
    passed: dict[int, bool] = {}
    grader_tokens = 0
    attempts = []
    previous_feedback: str | None = None
    for attempt in report.attempts:
        failed = memo.failures(case, attempt.answer)
        if failed is None:
            oracle = await score_answer(case, attempt.answer, grader, memo)
            failed = oracle.failed
            grader_tokens += oracle.grader_usage.total_tokens
            passed[attempt.index] = oracle.passed
        else:
            passed[attempt.index] = case_passes(case, failed)
        verdict = attempt.verdict
        echo = previous_feedback is not None and quotes_feedback(
            attempt.answer, previous_feedback, case.question
        )
        previous_feedback = verdict.feedback if verdict is not None else None
        attempts.append(
            {
                "index": attempt.index,
                "answer": attempt.answer,
                "judge_passed": None if verdict is None else verdict.passed,
                "oracle_passed": passed[attempt.index],
                "failed_assertions": failed,
                "feedback": verdict.feedback
                if verdict is not None and not verdict.passed
                else None,
                # Criteria the loop judge's stronger client decided (Judge(escalate_to=...)).
                "escalated": [] if verdict is None else [f.criterion for f in verdict.escalated()],
                # The answer quotes the feedback it was given instead of answering it.
                "echo": echo,
            }
        )
    chosen = report.chosen
    row["attempts"] = attempts
    row["chosen"] = chosen
    row["outcome"] = report.outcome
    row["passed_baseline"] = passed[1]
    row["passed_final"] = chosen is not None and passed[chosen]
    # A pass by quoting the feedback back (which a check on the form may let through) is not
    # an answer: counted as failed here.
    row["passed_final_answered"] = row["passed_final"] and not (
        chosen is not None and attempts[chosen - 1]["echo"]
    )
    row["grader_tokens"] = grader_tokens
