"""`SelfRefineAdvisor`: judge every answer; when it falls short, say why and ask again.

```python
judge = Judge(JudgeClient(), criteria=[noul("is_grounded", Noul("...", when_false="..."), 0.7)])
client = ChatClient(model, tools=[weather],
                    advisors=[SelfRefineAdvisor(judge, max_repeat_attempts=3)])
response = await client.prompt("What is the weather in Paris?").call()
report = RefineReport.of(response)      # attempts, outcome, usage
```

Each attempt calls the rest of the chain once and judges the answer. A failed verdict's feedback
is appended to the **original** request's last user message for the next attempt, so feedback
never compounds. When attempts run out the best attempt is returned (most criteria passed net of
failed, the later one on a tie), or `SelfRefineFailedError` is raised. Under `entity(T)` an answer
that is not a valid `T` fails too, with the validation error as its feedback. Where it sits
decides what
the judge sees and what a retry re-runs: see `SelfRefineAdvisor.DEFAULT_ORDER` and
`SelfRefineAdvisor.BEFORE_TOOLS_ORDER`.
"""

from __future__ import annotations

import enum
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Final, TypeAlias

from .. import _validate, context_keys
from .._request import ChatClientRequest, ChatClientResponse, context_entry, with_usage
from ..exceptions import JevrefineError, ModelError, UserError
from ..jev.errors import JudgeError
from ..judge._judge import Judge, JudgeInput
from ..messages import AssistantMessage, Message, Prompt, Usage
from ..telemetry import clear_last_call, last_call
from ..tools import record_tool_calls
from ._guardrail_policy import GuardrailOutcome
from ._refine_input import (
    retry_prompt,
    tool_calls_from_prompt,
    tool_calls_from_records,
    user_question,
)
from ._refine_output import with_output_check
from ._refine_stream import check_stream_mode, refine_stream
from ._refine_telemetry import (
    CurrentSpan,
    end_loop,
    record_evaluator_error,
    record_verdict,
    start_attempt,
    start_loop,
)
from .chain import HIGHEST_PRECEDENCE, LOWEST_PRECEDENCE
from .tool_calling import ToolCallingAdvisor

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Mapping, Sequence

    from opentelemetry.trace import Span

    from ..judge.verdict import Verdict
    from ..telemetry import Telemetry
    from ..tools import ToolCallRecord
    from .chain import CallAdvisorChain

__all__ = [
    "DEFAULT_FEEDBACK_TEMPLATE",
    "Attempt",
    "JudgeErrorPolicy",
    "RefineReport",
    "SelfRefineAdvisor",
    "SelfRefineFailedError",
    "SkipPredicate",
    "default_skip_evaluation",
]

_log = logging.getLogger("jevrefine.self_refine")

SkipPredicate: TypeAlias = Callable[[ChatClientRequest, ChatClientResponse], bool]
"""`(attempt request, response) -> True` to return the response unjudged."""

# Worded so that a small model answers the request instead of continuing the feedback: on 10
# IFBench prompts (Qwen2.5-Coder-0.5B) the earlier "A reviewer rejected an earlier answer ...
# Write a new answer" wording was echoed back in 13 of 19 retries, this one in 2 of 19, at the
# same pass rate (docs/benchmarks.md, "Does refinement help?").
DEFAULT_FEEDBACK_TEMPLATE: Final = (
    "\n\n(An earlier answer to this request broke these rules:\n{feedback}\n"
    "Answer the request above again, following every rule. Reply with the answer only.)"
)
"""Appended to the original last user message on a retry; `{feedback}` is the verdict's feedback
and `{answer}` (optional) the rejected answer."""


class JudgeErrorPolicy(enum.Enum):
    """What to do when the judging call itself fails."""

    FAIL_OPEN = "fail_open"
    """On a transient failure (connection error, timeout, 408, 429, 5xx) log a warning and return
    the response unjudged. Client errors (400, 401, 403, 404, 422, ...) are still raised."""
    FAIL_CLOSED = "fail_closed"
    """Raise every judging error: an unjudged answer never ships."""


@dataclass(frozen=True, slots=True)
class Attempt:
    """One attempt: the answer, its verdict (`None` when unjudged) and the model's usage."""

    index: int
    """1 for the first attempt."""
    answer: str
    """The attempt's answer text."""
    verdict: Verdict | None
    """The judge's verdict; `None` when the answer was skipped or could not be judged."""
    usage: Usage = field(default_factory=Usage)
    """The model's tokens for this attempt (tool rounds included)."""

    @property
    def judge_usage(self) -> Usage:
        """The judging call's tokens (zero when nothing was sent)."""
        response = self.verdict.response if self.verdict is not None else None
        return response.usage if response is not None else Usage()


@dataclass(frozen=True, slots=True)
class RefineReport:
    """What one refinement did; stored under `context_keys.REFINE_REPORT` for every outcome."""

    attempts: list[Attempt]
    """Every attempt, in order."""
    outcome: str
    """`passed`, `best_attempt`, `failed`, `unjudged` or `skipped`."""
    model_usage: Usage = field(default_factory=Usage)
    """The model's tokens, summed over the attempts."""
    judge_usage: Usage = field(default_factory=Usage)
    """The judge's tokens, summed over the judging calls."""
    chosen: int | None = field(default=None, kw_only=True)
    """The `index` of the attempt returned (`None` when none was: `failed`)."""

    @classmethod
    def of(
        cls, source: ChatClientResponse | ChatClientRequest | Mapping[str, Any]
    ) -> RefineReport | None:
        """The report self-refine left in a response's context (`None`: no self-refine ran).

        `source` is the `ChatClientResponse` from `spec.call()`, a request, or a context dict;
        reads `context_keys.REFINE_REPORT`.

        Raises:
            UserError: something other than a `RefineReport` is stored under the key.
        """
        return context_entry(source, context_keys.REFINE_REPORT, cls)

    @property
    def total_usage(self) -> Usage:
        """Model and judge tokens together (what a `token_budget` counts)."""
        return self.model_usage + self.judge_usage

    @property
    def passed(self) -> bool:
        """Whether an attempt passed the judge."""
        return self.outcome == "passed"


class SelfRefineFailedError(JevrefineError):
    """Attempts ran out without a passing verdict and `fail_on_exhausted_attempts` was set.

    `verdict` is the best attempt's verdict (`.summary()`, `.failures()` with each `.detail`): the
    attempt that would have been returned without the flag (most passed net of failed, the later
    one on a tie), which is `best`. `attempts` holds every attempt's answer, verdict and usage;
    `report` the whole report.
    """

    def __init__(
        self,
        verdict: Verdict,
        attempts: Sequence[Attempt],
        report: RefineReport,
        *,
        best: Attempt | None = None,
    ):
        self.verdict = verdict
        """The best attempt's verdict (the one `best_attempt` would have returned)."""
        self.best = best
        """The best attempt: what would have been returned without `fail_on_exhausted_attempts`."""
        self.attempts = list(attempts)
        """Every attempt, in order."""
        self.report = report
        """The refinement's report (outcome `failed`)."""
        super().__init__(
            f"self-refine gave up after {len(self.attempts)} attempt(s): {verdict.summary()}"
        )


def default_skip_evaluation(request: ChatClientRequest, response: ChatClientResponse) -> bool:
    """Skip what is not the model's answer: tool calls, return-direct results, guardrail refusals.

    A guardrail refusal (context `jev.guardrail.outcome`) is not judged: retrying does not make an
    unsafe request safe. Seed 000 describes the older behaviour, where the refusal is judged and
    retried; pass `skip_evaluation=` without the guardrail test to get it back.
    """
    if ToolCallingAdvisor.returned_direct(response) or GuardrailOutcome.of(response) is not None:
        return True
    return any(g.output.tool_calls for g in response.chat_response.results)


class SelfRefineAdvisor:
    """Judges every answer and retries with the judge's feedback, a bounded number of times.

    Args:
        judge: What each answer is evaluated against.
        max_repeat_attempts: Retries after the first attempt, 1 to `MAX_REPEAT_ATTEMPTS_LIMIT`.
        fail_on_exhausted_attempts: Raise `SelfRefineFailedError` instead of returning the best
            attempt when attempts run out.
        skip_evaluation: `(request, response) -> bool`; true returns the response unjudged
            (default: `default_skip_evaluation`).
        judge_error_policy: What to do when the judging call fails (`JudgeErrorPolicy`).
        order: The position in the chain: `DEFAULT_ORDER` or `BEFORE_TOOLS_ORDER`.
        feedback_template: Appended to the original last user message on a retry; must contain
            `{feedback}`; may contain `{answer}` (the rejected answer).
        token_budget: Stop retrying once model and judge tokens together reach this.
        stream_mode: What streaming through the advisor does. `None` refuses it (a verdict needs
            the whole answer; `StreamingNotSupportedError` names the advisor). `"buffered"`:
            each attempt is streamed from the model and held until judged; only the returned
            answer's text is streamed (`stream()` works). `"live"`: every attempt's text is
            shown as generated and a rejected one is followed by `AttemptRejected`; only
            `spec.stream_events()` can show that, so `stream()` raises `UserError`. See
            `jevrefine.streaming` and docs/guide/streaming.md.
    """

    name: str = "self_refine"
    DEFAULT_ORDER: ClassVar[int] = LOWEST_PRECEDENCE - 2000
    """Inside everything else: the judge sees retrieval and the tool calls in the prompt; a retry
    re-asks the model without re-running retrieval or tools."""
    BEFORE_TOOLS_ORDER: ClassVar[int] = HIGHEST_PRECEDENCE + 250
    """Between memory and the tool loop: tool calls are recorded per attempt and a retry re-runs
    the tools (and retrieval at order 0, with the feedback in its query)."""
    MAX_REPEAT_ATTEMPTS_LIMIT: ClassVar[int] = 100
    """The cap on `max_repeat_attempts`: a criterion the model cannot meet must not loop forever."""

    def __init__(
        self,
        judge: Judge,
        *,
        max_repeat_attempts: int = 3,
        fail_on_exhausted_attempts: bool = False,
        skip_evaluation: SkipPredicate = default_skip_evaluation,
        judge_error_policy: JudgeErrorPolicy = JudgeErrorPolicy.FAIL_OPEN,
        order: int = DEFAULT_ORDER,
        feedback_template: str = DEFAULT_FEEDBACK_TEMPLATE,
        token_budget: int | None = None,
        stream_mode: str | None = None,
    ) -> None:
        if not isinstance(judge, Judge):
            raise UserError(f"SelfRefineAdvisor needs a Judge, got {type(judge).__name__}")
        limit = self.MAX_REPEAT_ATTEMPTS_LIMIT
        # Bounded above: retrying until an answer passes is not supported.
        max_repeat_attempts = _validate.integer(
            "max_repeat_attempts", max_repeat_attempts, minimum=1, maximum=limit, example=3
        )
        fail_on_exhausted_attempts = _validate.boolean(
            "fail_on_exhausted_attempts", fail_on_exhausted_attempts
        )
        if not callable(skip_evaluation):
            raise UserError(
                f"skip_evaluation={_validate.shown(skip_evaluation)} is not callable: pass a "
                "function (request, response) -> bool"
            )
        if not isinstance(judge_error_policy, JudgeErrorPolicy):
            raise UserError(
                f"judge_error_policy={_validate.shown(judge_error_policy)} is not a "
                "JudgeErrorPolicy: pass e.g. JudgeErrorPolicy.FAIL_OPEN"
            )
        order = _validate.order(order, example=self.DEFAULT_ORDER)
        _validate.text("feedback_template", feedback_template, example="Fix this: {feedback}")
        if "{feedback}" not in feedback_template:
            raise UserError(
                f"feedback_template={_validate.shown(feedback_template)} has no {{feedback}}: "
                "pass a template with {feedback} where the judge's feedback goes, e.g. "
                "'Fix this: {feedback}'"
            )
        token_budget = _validate.integer(
            "token_budget", token_budget, minimum=1, optional=True, example=4000
        )
        stream_mode = check_stream_mode(stream_mode)
        self.judge = judge
        """What each answer is evaluated against."""
        self.max_repeat_attempts = max_repeat_attempts
        """Retries after the first attempt."""
        self.fail_on_exhausted_attempts = fail_on_exhausted_attempts
        """Raise instead of returning the best attempt."""
        self.skip_evaluation = skip_evaluation
        """Which responses are returned unjudged."""
        self.judge_error_policy = judge_error_policy
        """What a failing judging call does."""
        self.order = order
        """Position in the chain."""
        self.feedback_template = feedback_template
        """The retry section appended to the original last user message."""
        self.token_budget = token_budget
        """Model + judge tokens after which no further attempt is made."""
        self.stream_mode = stream_mode
        """`None` (streaming refused), `"buffered"` or `"live"`."""

    async def advise_call(
        self, request: ChatClientRequest, chain: CallAdvisorChain
    ) -> ChatClientResponse:
        """Run attempts until one passes, attempts run out, or the answer is not to be judged."""
        rest = chain.copy(self)
        telemetry = chain.telemetry
        loop = _Loop(request, rest, telemetry)
        span = start_loop(telemetry, self.max_repeat_attempts, chain.trace_parent)
        started = time.perf_counter()
        try:
            with CurrentSpan(span):
                response = await self._refine(loop, span)
        except BaseException as exc:
            elapsed = time.perf_counter() - started
            end_loop(telemetry, span, len(loop.attempts), loop.outcome, exc, elapsed=elapsed)
            raise
        elapsed = time.perf_counter() - started
        end_loop(telemetry, span, len(loop.attempts), loop.outcome, elapsed=elapsed)
        return response

    def advise_stream(
        self, request: ChatClientRequest, chain: CallAdvisorChain
    ) -> AsyncIterator[ChatClientResponse]:
        """Stream as `stream_mode` says; with `None`, refused when iterated (use `call()`)."""
        return refine_stream(self, request, chain)

    async def _refine(self, loop: _Loop, loop_span: Span) -> ChatClientResponse:
        # The per-attempt steps are `_Loop`'s, shared with the streamed loop (_refine_stream).
        first, previous = loop.begin(self)
        for number in range(first, self.max_repeat_attempts + 2):
            attempt_request, records = loop.attempt_request(self, previous)
            span = start_attempt(loop.telemetry, number, loop=loop_span)
            # Exception texts may quote model output: the span gets the error type, not the text.
            with CurrentSpan(span, end_on_exit=True, mark_failure=True):
                clear_last_call()
                response = await loop.rest.next_call(attempt_request)
                evaluated = last_call()  # the `chat` span of the answer about to be judged
                verdict, outcome = await loop.judge(
                    self, number, span, attempt_request, response, records, evaluated
                )
            if outcome is not None:
                return loop.conclude(self, response, outcome, number, previous)
            assert verdict is not None
            if not loop.goes_on(self, number, verdict):
                break
            previous = (verdict, response.content)
        return self._exhausted(loop)

    def _pause(
        self, loop: _Loop, response: ChatClientResponse, position: _Position
    ) -> ChatClientResponse:
        """Hand a tool-calling answer to the tool loop; its next round resumes this attempt."""
        loop.request.scope[self._paused_key] = loop.pause(response, position)
        returned = loop.finish(response, "skipped", position[0])
        # Not an outcome yet: the resumed refinement counts the one outcome of this call.
        loop.outcome = None
        return returned

    @property
    def _paused_key(self) -> str:
        # Per advisor instance: two self-refine advisors in one chain keep their own state.
        return f"self_refine.paused.{id(self)}"

    def _section(self, verdict: Verdict, answer: str) -> str:
        return self.feedback_template.replace("{answer}", answer).replace(
            "{feedback}", verdict.feedback
        )

    def _fails_open(self, error: JevrefineError) -> bool:
        # Only an outage fails open; a client error is a misconfiguration and must be seen.
        return self.judge_error_policy is JudgeErrorPolicy.FAIL_OPEN and error.is_transient

    def _exhausted(self, loop: _Loop) -> ChatClientResponse:
        judged = [a for a in loop.attempts if a.verdict is not None]
        # Most passed net of failed; on a tie the later attempt (max keeps the first maximum,
        # so compare (score, index)).
        best = max(judged, key=lambda a: (a.verdict.net_score if a.verdict else 0, a.index))
        assert best.verdict is not None
        if self.fail_on_exhausted_attempts:
            # The caller gets the exception; this log line is for operators tracking loops.
            _log.info(
                "self-refine: no attempt passed after %d attempt(s); raising", len(loop.attempts)
            )
            report = loop.report("failed", None)
            raise SelfRefineFailedError(best.verdict, loop.attempts, report, best=best)
        # A warning: an answer that did not pass the judge is being shipped.
        _log.warning(
            "self-refine: no attempt passed after %d attempt(s); returning attempt %d (%s)",
            len(loop.attempts),
            best.index,
            best.verdict.summary() if best.verdict else "unjudged",
        )
        return loop.finish(loop.responses[best.index], "best_attempt", best.index)

    def __repr__(self) -> str:
        return (
            f"SelfRefineAdvisor({self.judge!r}, max_repeat_attempts={self.max_repeat_attempts}, "
            f"order={self.order})"
        )


def _asks_for_tools(response: ChatClientResponse) -> bool:
    # The first generation, as the tool loop reads it.
    results = response.chat_response.results
    return bool(results) and bool(results[0].output.tool_calls)


_NO_USAGE: Final = Usage()
"""Where a loop's totals start (a frozen value: one for every loop)."""

_Position: TypeAlias = "tuple[int, tuple[Verdict, str] | None, Usage]"
"""Where a paused refinement resumes: the attempt's number, the verdict and answer its feedback
came from (`None` on the first attempt), and the model tokens the attempt has used so far."""


@dataclass(frozen=True, slots=True)
class _Paused:
    """A refinement inside the tool loop whose attempt answered with tool calls.

    Kept in the request's `scope` until the loop's next round calls the advisor again with
    `prompt` followed by `call` (and the tool results).
    """

    position: _Position
    prompt: tuple[Message, ...]
    call: AssistantMessage
    attempts: tuple[Attempt, ...]
    responses: dict[int, ChatClientResponse]
    model_usage: Usage
    judge_usage: Usage

    def continued_by(self, prompt: Prompt) -> bool:
        """Whether `prompt` is the tool loop's next round after this pause."""
        size = len(self.prompt)
        messages = prompt.messages
        return (
            len(messages) > size
            and messages[size] == self.call
            and tuple(messages[:size]) == self.prompt
        )


class _Loop:
    """The state of one refinement: attempts, usage, and how it ended."""

    __slots__ = (
        "attempts",
        "carried",
        "documents",
        "earlier_calls",
        "judge_usage",
        "model_usage",
        "outcome",
        "passed_up",
        "question",
        "record",
        "request",
        "responses",
        "rest",
        "telemetry",
    )

    def __init__(
        self, request: ChatClientRequest, rest: CallAdvisorChain, telemetry: Telemetry
    ) -> None:
        self.request = request
        self.rest = rest
        self.telemetry = telemetry
        self.attempts: list[Attempt] = []
        self.responses: dict[int, ChatClientResponse] = {}
        self.model_usage = _NO_USAGE
        self.judge_usage = _NO_USAGE
        # The model tokens of this call only: an earlier round of the tool loop already passed
        # its own up, and the tool loop sums what each round returns.
        self.passed_up = _NO_USAGE
        self.outcome: str | None = None
        self.record = False
        self.question = ""
        self.earlier_calls: list[dict[str, Any]] = []
        self.documents: tuple[Any, ...] = ()
        # The model tokens a paused attempt used before its tool round (added to its usage).
        self.carried = _NO_USAGE

    @property
    def spent(self) -> int:
        return (self.model_usage + self.judge_usage).total_tokens

    def add_model_usage(self, usage: Usage) -> Usage:
        """Count one model response's tokens; returns them."""
        self.model_usage = self.model_usage + usage
        self.passed_up = self.passed_up + usage
        return usage

    def begin(self, advisor: SelfRefineAdvisor) -> tuple[int, tuple[Verdict, str] | None]:
        """Read what every attempt is judged against; where to start: number and feedback.

        A paused refinement resumes where it stopped.
        """
        request = self.request
        # Only an advisor outside the tool loop has to record: inside it, the calls are in the
        # prompt it receives.
        self.record = bool(request.tools) and any(
            isinstance(a, ToolCallingAdvisor) for a in self.rest.advisors
        )
        self.question = user_question(request.prompt)
        self.earlier_calls = tool_calls_from_prompt(request.prompt.messages)
        # Read as is, not through `RetrievalAdvisor.documents_of`: an application advisor may
        # put its own supporting texts (plain strings) under the key for the judge.
        self.documents = tuple(request.context.get(context_keys.RETRIEVAL_DOCUMENTS) or ())
        # Inside the tool loop, an answer that calls tools leaves this advisor; the loop's next
        # round comes back here and continues that attempt rather than starting a new budget.
        paused = self.resume(request.scope.pop(advisor._paused_key, None))
        if paused is None:
            return 1, None
        first, previous, self.carried = paused.position
        return first, previous

    def attempt_request(
        self, advisor: SelfRefineAdvisor, previous: tuple[Verdict, str] | None
    ) -> tuple[ChatClientRequest, list[ToolCallRecord]]:
        """The request of the next attempt (feedback appended) and where its tool calls go."""
        request = self.request
        prompt = request.prompt
        if previous is not None:
            prompt = retry_prompt(prompt, advisor._section(*previous))
        if not self.record:
            return request.copy(prompt=prompt), []
        tools, records = record_tool_calls(request.tools)
        return request.copy(prompt=prompt, tools=tools), records

    async def judge(
        self,
        advisor: SelfRefineAdvisor,
        number: int,
        span: Span,
        request: ChatClientRequest,
        response: ChatClientResponse,
        records: Sequence[ToolCallRecord],
        evaluated: Span | None = None,
    ) -> tuple[Verdict | None, str | None]:
        """Count and judge attempt `number`'s whole answer and record it in `attempts`.

        `(verdict, None)`: it failed and the loop may go on; otherwise the outcome to
        `conclude` with: `passed`, `skipped`, `unjudged` or `paused` (a tool call to hand to
        the tool loop around this advisor).
        """
        usage = self.add_model_usage(response.chat_response.metadata.usage)
        usage, self.carried = self.carried + usage, _NO_USAGE
        answer = response.content
        if advisor.skip_evaluation(request, response):
            self.attempts.append(Attempt(number, answer, None, usage))
            paused = not self.record and _asks_for_tools(response)
            return None, "paused" if paused else "skipped"
        calls = self.earlier_calls + tool_calls_from_records(records)
        judge_input = JudgeInput(
            self.question, answer, supporting_context=self.documents, tool_calls=calls
        )
        # Checks and conditions run here, outside the policy: their exceptions are bugs.
        plan = await advisor.judge.prepare(judge_input)
        response_id = response.chat_response.metadata.id
        try:
            verdict = await advisor.judge.ask(plan)
        except (JudgeError, ModelError) as exc:
            names = [c.name for c in plan.send]
            record_evaluator_error(self.telemetry, span, names, exc, response_id)
            if not advisor._fails_open(exc):
                raise
            _log.warning(
                "self-refine: judging attempt %d failed (%s: %s); returning it unjudged",
                number,
                type(exc).__name__,
                exc,
            )
            self.attempts.append(Attempt(number, answer, None, usage))
            return None, "unjudged"
        # An answer `entity(T)` could not read as T fails, saying why (see _refine_output).
        verdict = with_output_check(advisor.judge, verdict, request.output_spec, answer)
        record_verdict(self.telemetry, span, verdict, response_id, evaluated)
        attempt = Attempt(number, answer, verdict, usage)
        self.attempts.append(attempt)
        self.judge_usage = self.judge_usage + attempt.judge_usage
        self.responses[number] = response
        return verdict, "passed" if verdict.passed else None

    def conclude(
        self,
        advisor: SelfRefineAdvisor,
        response: ChatClientResponse,
        outcome: str,
        number: int,
        previous: tuple[Verdict, str] | None,
    ) -> ChatClientResponse:
        """The response to return for attempt `number`, which ended the loop with `outcome`."""
        if outcome == "paused":
            return advisor._pause(self, response, (number, previous, self.attempts[-1].usage))
        return self.finish(response, outcome, number)

    def goes_on(self, advisor: SelfRefineAdvisor, number: int, verdict: Verdict) -> bool:
        """Whether another attempt may follow failed attempt `number` (the token budget)."""
        budget = advisor.token_budget
        if budget is not None and self.spent >= budget:
            _log.info(
                "self-refine: token budget spent (%d of %d) after attempt %d; no retry",
                self.spent,
                budget,
                number,
            )
            return False
        _log.debug("self-refine: attempt %d failed the judge: %s", number, verdict.summary())
        return True

    def pause(self, response: ChatClientResponse, position: _Position) -> _Paused:
        """The state to resume from when the tool loop comes back after running the tools.

        The last attempt recorded is the one paused: it is left out, and the resumed call
        records it again with its answer.
        """
        return _Paused(
            position,
            tuple(self.request.prompt.messages),
            response.chat_response.results[0].output,
            tuple(self.attempts[:-1]),
            dict(self.responses),
            self.model_usage,
            self.judge_usage,
        )

    def resume(self, paused: object) -> _Paused | None:
        """Take up `paused` when this request continues it; otherwise start afresh."""
        # A pause left behind (a return-direct tool ended the loop, or an outer retry re-ran
        # the chain) does not match the prompt, so it cannot leak into a later refinement.
        if not isinstance(paused, _Paused) or not paused.continued_by(self.request.prompt):
            return None
        self.attempts = list(paused.attempts)
        self.responses = dict(paused.responses)
        self.model_usage = paused.model_usage
        self.judge_usage = paused.judge_usage
        return paused

    def report(
        self, outcome: str, chosen: int | None, response: ChatClientResponse | None = None
    ) -> RefineReport:
        """Build the report, note the outcome, and store it: the one writer of the report.

        It goes into the context of the request self-refine received (what an outer advisor
        holds, even when an exception carries the report out) and into the returned response's
        context, which is the attempt's copy of it.
        """
        self.outcome = outcome
        report = RefineReport(
            list(self.attempts), outcome, self.model_usage, self.judge_usage, chosen=chosen
        )
        self.request.context[context_keys.REFINE_REPORT] = report
        if response is not None and response.context is not self.request.context:
            response.context[context_keys.REFINE_REPORT] = report
        return report

    def finish(self, response: ChatClientResponse, outcome: str, chosen: int) -> ChatClientResponse:
        """The response to return: the report in its context, this call's model usage summed."""
        self.report(outcome, chosen, response)
        return with_usage(response, self.passed_up)
