"""The one refine-attempt engine: `call()` runs it to the end, `stream()` forwards its steps.

`Refinement.steps()` runs attempts until one passes, they run out, or one is not to be judged,
and yields what happened as it happens: `Started`, the chunks the stream shows now (streaming
only: what the caller's `on_chunk` returned for a chunk of the attempt last started), `Judged`,
`Rejected` (an attempt another one follows or beats) and, last, `Finished` with the response to
return. Both ways in share every rule: the retry prompt (feedback appended to the *original*
request, or as the strategy says), the retry options (`RetryStrategy`), the judge input, the
token budget, the judge error policy, the best attempt when they run out (most passed net of
failed, the later one on a tie; an echo only when nothing else was judged), pausing inside the
tool loop, usage, spans and the `RefineReport`.

In `call()` an attempt's span is current while the model answers and the judge judges (no step
is yielded meanwhile); in a stream its context is passed down explicitly and made current only
while the judge is awaited, so the consumer never runs inside it.
"""

from __future__ import annotations

import contextlib
import logging
import math
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, TypeAlias

import anyio
from opentelemetry import context as otel_context
from opentelemetry import trace

from ... import context_keys
from ..._request import ChatClientRequest, ChatClientResponse, with_usage
from ...exceptions import JevrefineError, ModelError
from ...jev.errors import JudgeError
from ...judge._judge import Judge, JudgeInput
from ...messages import AssistantMessage, Message, Prompt, Usage, concat_chunks
from ...streaming import FLUSH
from ...telemetry import clear_last_call, last_call, record_time_to_first_chunk
from ...tools import record_tool_calls
from ..tool_calling import ToolCallingAdvisor
from ._input import retry_prompt, tool_calls_from_prompt, tool_calls_from_records, user_question
from ._output import with_output_check
from ._report import Attempt, Outcome, RefineReport, SelfRefineFailedError
from ._strategy import RetryStrategy, quotes_feedback, repeated_attempt
from ._telemetry import CurrentSpan, mark_failed, record_evaluator_error, record_verdict
from ._telemetry import start_attempt as _start_attempt

if TYPE_CHECKING:
    from collections.abc import Callable

    from opentelemetry.context import Context
    from opentelemetry.trace import Span

    from ...judge.verdict import Verdict
    from ...telemetry import Telemetry
    from ...tools import ToolCallRecord
    from ..chain import CallAdvisorChain

__all__ = [
    "Finished",
    "JudgeErrorPolicyName",
    "Judged",
    "Pauses",
    "Refinement",
    "Rejected",
    "Settings",
    "Started",
    "Step",
]

_log = logging.getLogger("jevrefine.self_refine")

_NO_USAGE: Final = Usage()
"""Where a loop's totals start (a frozen value: one for every loop)."""

JudgeErrorPolicyName: TypeAlias = str
"""`JudgeErrorPolicy`'s value: `"fail_open"` or `"fail_closed"`."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Settings:
    """What a `SelfRefineAdvisor` was configured with: everything the engine reads of it."""

    judge: Judge
    max_repeat_attempts: int
    fail_on_exhausted_attempts: bool
    skip_evaluation: Callable[[ChatClientRequest, ChatClientResponse], bool]
    fails_open: bool
    """Whether a transient judging failure returns the answer unjudged (`FAIL_OPEN`)."""
    feedback_template: str
    token_budget: int | None
    strategy: RetryStrategy


# -- the steps a refinement yields -------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Started:
    """Attempt `number` is being asked for."""

    number: int


@dataclass(frozen=True, slots=True)
class Judged:
    """Attempt `number` was judged (`verdict` is `None` when it went unjudged)."""

    number: int
    verdict: Verdict | None

    @property
    def passed(self) -> bool:
        """Whether the verdict passed."""
        return self.verdict is not None and self.verdict.passed


@dataclass(frozen=True, slots=True)
class Rejected:
    """Attempt `number` will not be returned (another follows it, or a better one won)."""

    number: int
    feedback: str


@dataclass(frozen=True, slots=True)
class Finished:
    """The refinement is over: `response` is what the advisor returns (attempt `number`'s)."""

    number: int
    response: ChatClientResponse


Step: TypeAlias = Started | ChatClientResponse | Judged | Rejected | Finished
"""A chunk is yielded as it is, not wrapped with its attempt's number: it belongs to the attempt
last `Started`, and a wrapper per chunk costs every streamed chunk an allocation
(`bench_streaming`)."""


@dataclass(frozen=True, slots=True)
class Streamed:
    """A streamed attempt: the answer's chunks as the rest of the chain sent them, and them joined.

    An inner advisor's `FLUSH` chunks are no part of the answer and are not among `chunks`.
    """

    chunks: Sequence[ChatClientResponse]
    joined: ChatClientResponse


OnChunk: TypeAlias = Callable[[ChatClientResponse], "ChatClientResponse | None"]
"""What a stream does with each chunk of an attempt as it comes: the chunk to show now, or
`None`. Called in the engine's loop rather than yielded to the caller, so a chunk that shows
nothing (every chunk of a buffered stream) costs no step of the generator (`bench_streaming`)."""


# -- pausing inside the tool loop --------------------------------------------------------------

_Position: TypeAlias = "tuple[int, tuple[Verdict, str] | None, Usage]"
"""Where a paused refinement resumes: the attempt's number, the verdict and answer its feedback
came from (`None` on the first attempt), and the model tokens the attempt has used so far."""


@dataclass(frozen=True, slots=True)
class Paused:
    """A refinement inside the tool loop whose attempt answered with tool calls.

    Kept in the request's `Pauses` until the loop's next round calls the advisor again with
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


class Pauses:
    """The refinements paused in one request's tool loop, by the advisor that paused each.

    One per request (in its `scope`, shared by every copy): two self-refine advisors in one
    chain keep their own state, keyed by the advisor object itself.
    """

    KEY: Final = "jevrefine.self_refine.pauses"
    """The one scope key it is kept under."""

    __slots__ = ("_paused",)

    def __init__(self) -> None:
        self._paused: dict[int, tuple[object, Paused]] = {}

    @classmethod
    def of(cls, request: ChatClientRequest) -> Pauses:
        """The request's pauses (made on first use)."""
        found = request.scope.get(cls.KEY)
        if not isinstance(found, Pauses):
            found = request.scope[cls.KEY] = Pauses()
        return found

    @classmethod
    def take_from(cls, request: ChatClientRequest, owner: object) -> Paused | None:
        """`owner`'s paused refinement in `request`, removed; `None` (and nothing made) if none.

        Every refinement asks at its start and almost none was paused: the common answer
        allocates nothing.
        """
        found = request.scope.get(cls.KEY)
        return found.take(owner) if isinstance(found, Pauses) else None

    def put(self, owner: object, paused: Paused) -> None:
        """Keep `owner`'s paused refinement until its next round takes it."""
        self._paused[id(owner)] = (owner, paused)  # the owner is kept: its id stays its own

    def take(self, owner: object) -> Paused | None:
        """`owner`'s paused refinement, removed (`None` when it has none)."""
        entry = self._paused.pop(id(owner), None)
        return None if entry is None or entry[0] is not owner else entry[1]


# -- one refinement ----------------------------------------------------------------------------


class Refinement:
    """The state of one refinement (attempts, usage, how it ended) and its steps.

    Args:
        settings: the advisor's configuration.
        owner: the advisor (the key of its paused state in the tool loop).
        request: the request the advisor received.
        rest: the chain after the advisor.
        telemetry: where spans and events go.
    """

    __slots__ = (
        "attempts",
        "carried",
        "documents",
        "earlier_calls",
        "judge_usage",
        "model_usage",
        "outcome",
        "owner",
        "passed_up",
        "question",
        "record",
        "request",
        "responses",
        "rest",
        "sent",
        "settings",
        "stopped_early",
        "streamed",
        "telemetry",
    )

    def __init__(
        self,
        settings: Settings,
        owner: object,
        request: ChatClientRequest,
        rest: CallAdvisorChain,
        telemetry: Telemetry,
    ) -> None:
        self.settings = settings
        self.owner = owner
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
        self.outcome: Outcome | None = None
        self.stopped_early: str | None = None
        self.record = False
        self.question = ""
        self.earlier_calls: list[dict[str, Any]] = []
        self.documents: tuple[Any, ...] = ()
        # The model tokens a paused attempt used before its tool round (added to its usage).
        self.carried = _NO_USAGE
        self.sent: list[tuple[int, Prompt]] = []
        """Each attempt's prompt as sent (a retry identical to one of them is not sent again)."""
        self.streamed: dict[int, Streamed] = {}
        """Each streamed attempt's chunks and their join, once its stream has ended."""

    @property
    def spent(self) -> int:
        """Model and judge tokens so far (what `token_budget` counts)."""
        return (self.model_usage + self.judge_usage).total_tokens

    # -- the loop ------------------------------------------------------------------------------

    async def steps(
        self, *, loop: Span, on_chunk: OnChunk | None = None, parent: Context | None = None
    ) -> AsyncIterator[Step]:
        """Run the attempts; yield each step, `Finished` last (or raise).

        `loop` is the loop's span (`QUIET_SPAN` when nothing listens: the attempts are quiet
        too). With `on_chunk`, each attempt is streamed from the rest of the chain: every chunk
        is handed to `on_chunk` as it comes (and kept in `streamed`), and what that returns is
        yielded; `parent` is the loop span's context. Otherwise each attempt is one call, under
        the current context.

        Raises:
            SelfRefineFailedError: attempts ran out and `fail_on_exhausted_attempts` is set.
        """
        settings = self.settings
        first, previous = self._begin()
        last = settings.max_repeat_attempts + 1
        for number in range(first, last + 1):
            prepared = self._attempt_request(number, previous)
            if prepared is None:
                break  # the retry would repeat an earlier request word for word: stop here
            attempt_request, records = prepared
            yield Started(number)
            if on_chunk is not None:
                span = _start_attempt(self.telemetry, number, parent, loop=loop)
                chunks: list[ChatClientResponse] = []
                try:
                    # The chunks come straight from the rest of the chain, not through a helper
                    # generator: each layer costs every chunk a resumption (`bench_streaming`).
                    rest = self.rest.with_trace_parent(trace.set_span_in_context(span, parent))
                    started = anyio.current_time()
                    untimed = True
                    async for chunk in rest.next_stream(attempt_request):
                        # An inner advisor's flush is no part of the answer: not kept, not timed.
                        if chunk.chat_response is not FLUSH:
                            if untimed and chunk.chat_response.results:
                                record_time_to_first_chunk(span, anyio.current_time() - started)
                                untimed = False
                            chunks.append(chunk)
                        shown = on_chunk(chunk)
                        if shown is not None:
                            yield shown
                    response = _joined(chunks, attempt_request)
                    self.streamed[number] = Streamed(chunks, response)
                    token = otel_context.attach(trace.set_span_in_context(span, parent))
                    try:
                        verdict, outcome = await self._judge(
                            number, span, attempt_request, response, records, None, previous
                        )
                    finally:
                        otel_context.detach(token)
                except BaseException as exc:
                    mark_failed(span, exc)
                    raise
                finally:
                    span.end()
            else:
                span = _start_attempt(self.telemetry, number, loop=loop)
                # Exception texts may quote model output: the span gets the error type only.
                with CurrentSpan(span, end_on_exit=True, mark_failure=True):
                    clear_last_call()
                    decided: tuple[Verdict | None] | None = None
                    if settings.strategy.samples > 1 and not self.record:
                        response, chosen = await self._best_of(number, span, attempt_request)
                        decided = (chosen,)
                    else:
                        response = await self.rest.next_call(attempt_request)
                    evaluated = last_call()  # the `chat` span of the answer about to be judged
                    verdict, outcome = await self._judge(
                        number,
                        span,
                        attempt_request,
                        response,
                        records,
                        evaluated,
                        previous,
                        decided,
                    )
            yield Judged(number, verdict)
            if outcome is not None:  # passed, skipped, paused or unjudged: this one returns
                yield Finished(number, self._conclude(response, outcome, number, previous))
                return
            assert verdict is not None
            if not self._goes_on(number, verdict):
                break
            previous = (verdict, response.content)
            if number < last:
                yield Rejected(number, verdict.feedback)  # another attempt follows
        finished = self._exhausted()
        for attempt in self.attempts:
            if attempt.index != finished.number and attempt.verdict is not None:
                yield Rejected(attempt.index, attempt.verdict.feedback)
        yield finished

    def _begin(self) -> tuple[int, tuple[Verdict, str] | None]:
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
        # Inside the tool loop, an answer that calls tools leaves the advisor; the loop's next
        # round comes back and continues that attempt rather than starting a new budget.
        paused = self._resume(Pauses.take_from(request, self.owner))
        if paused is None:
            return 1, None
        first, previous, self.carried = paused.position
        return first, previous

    def _attempt_request(
        self, number: int, previous: tuple[Verdict, str] | None
    ) -> tuple[ChatClientRequest, list[ToolCallRecord]] | None:
        """The request of attempt `number` and where its tool calls go; `None`: do not send it.

        A retry carries the feedback (as the strategy says) and the strategy's options; one that
        would go out exactly as an earlier attempt did, at temperature 0, is sampled afresh, or
        not sent (`RetryStrategy.identical`).
        """
        request = self.request
        prompt = request.prompt
        if previous is not None:
            strategy = self.settings.strategy
            section = strategy.section(
                self.settings.feedback_template, previous[0].feedback, previous[1]
            )
            if section is not None:
                prompt = retry_prompt(prompt, section)
            options = strategy.options_for(number, prompt.options, resample=False)
            if self._repeats_a_request(prompt.with_options(options)):
                if strategy.identical == "stop":
                    self._stop_early(number, "the retry would repeat an earlier request")
                    return None
                if strategy.identical == "resample":
                    options = strategy.options_for(number, prompt.options, resample=True)
            prompt = prompt.with_options(options) if options is not prompt.options else prompt
        self.sent.append((number, prompt))
        if not self.record:
            return request.copy(prompt=prompt), []
        tools, records = record_tool_calls(request.tools)
        return request.copy(prompt=prompt, tools=tools), records

    def _repeats_a_request(self, prompt: Prompt) -> bool:
        """Whether `prompt` would be sent as an earlier attempt was, where it answers the same."""
        if prompt.options.temperature != 0:
            return False  # a sampled request is a new sample each time (with its own seed)
        return any(earlier == prompt for _, earlier in self.sent)

    async def _judge(
        self,
        number: int,
        span: Span,
        request: ChatClientRequest,
        response: ChatClientResponse,
        records: Sequence[ToolCallRecord],
        evaluated: Span | None,
        previous: tuple[Verdict, str] | None,
        decided: tuple[Verdict | None] | None = None,
    ) -> tuple[Verdict | None, str | None]:
        """Count and judge attempt `number`'s whole answer and record it in `attempts`.

        `decided`: the answer was judged already (best-of-N: its verdict, `None` if unjudged).

        `(verdict, None)`: it failed (or echoed the feedback) and the loop may go on; otherwise
        the outcome to `_conclude` with: `passed`, `skipped`, `unjudged` or `paused` (a tool call
        to hand to the tool loop around the advisor).
        """
        settings = self.settings
        usage = self._add_model_usage(response.chat_response.metadata.usage)
        usage, self.carried = self.carried + usage, _NO_USAGE
        answer = response.content
        if settings.skip_evaluation(request, response):
            self.attempts.append(Attempt(number, answer, None, usage))
            paused = not self.record and _asks_for_tools(response)
            return None, "paused" if paused else "skipped"
        if decided is None and previous is not None and settings.strategy.repeats == "guard":
            earlier = repeated_attempt(answer, self.attempts)
            if earlier is not None and earlier.verdict is not None:
                # The same answer gets the same verdict: no judging call for it.
                repeat = Attempt(
                    number,
                    answer,
                    earlier.verdict,
                    usage,
                    repeat_of=earlier.index,
                    echo=earlier.echo,
                )
                self.attempts.append(repeat)
                self.responses[number] = response
                passed = earlier.verdict.passed and not earlier.echo
                if not passed:
                    # Seed 003 warns on every failed attempt; a repeat is one, judged or not.
                    _log.warning(
                        "self-refine: attempt %d failed the judge (a repeat of attempt %d, "
                        "word for word): %s",
                        number,
                        earlier.index,
                        earlier.verdict.feedback or earlier.verdict.summary(),
                    )
                return earlier.verdict, "passed" if passed else None
        response_id = response.chat_response.metadata.id
        try:
            if decided is None:
                verdict = await self._ask(number, span, answer, records, response_id)
            elif decided[0] is None:
                raise _Unjudged
            else:
                verdict = decided[0]
        except _Unjudged:
            self.attempts.append(Attempt(number, answer, None, usage))
            return None, "unjudged"
        # An answer `entity(T)` could not read as T fails, saying why (see `_output`).
        verdict = with_output_check(settings.judge, verdict, request.output_spec, answer)
        record_verdict(self.telemetry, span, verdict, response_id, evaluated)
        echo = (
            previous is not None
            and settings.strategy.repeats == "guard"
            and quotes_feedback(answer, previous[0].feedback, self.question)
        )
        attempt = Attempt(number, answer, verdict, usage, echo=echo)
        self.attempts.append(attempt)
        self.judge_usage = self.judge_usage + attempt.judge_usage
        self.responses[number] = response
        if verdict.passed and echo:
            _log.warning(
                "self-refine: attempt %d passed the judge by quoting its feedback; not an answer",
                number,
            )
            return verdict, None
        if verdict.passed:
            _log.info("self-refine: attempt %d passed the judge", number)
            return verdict, "passed"
        # Seed 003: a warning per failed attempt, with what the judge said.
        _log.warning(
            "self-refine: attempt %d failed the judge: %s",
            number,
            verdict.feedback or verdict.summary(),
        )
        return verdict, None

    async def _ask(
        self,
        number: int,
        span: Span,
        answer: str,
        records: Sequence[ToolCallRecord],
        response_id: str | None,
    ) -> Verdict:
        """The judge's verdict on `answer`, under the judge error policy.

        Raises:
            _Unjudged: the judging call failed and the policy returns the answer unjudged.
            JudgeError, ModelError: it failed and the policy raises.
        """
        settings = self.settings
        calls = self.earlier_calls + tool_calls_from_records(records)
        judge_input = JudgeInput(
            self.question, answer, supporting_context=self.documents, tool_calls=calls
        )
        # Checks and conditions run here, outside the policy: their exceptions are bugs.
        plan = await settings.judge.prepare(judge_input)
        try:
            return await settings.judge.ask(plan)
        except (JudgeError, ModelError) as exc:
            names = [c.name for c in plan.send]
            record_evaluator_error(self.telemetry, span, names, exc, response_id)
            if not self._fails_open(exc):
                raise
            _log.warning(
                "self-refine: judging attempt %d failed (%s: %s); returning it unjudged",
                number,
                type(exc).__name__,
                exc,
            )
            raise _Unjudged from exc

    async def _best_of(
        self, number: int, span: Span, request: ChatClientRequest
    ) -> tuple[ChatClientResponse, Verdict | None]:
        """`samples` answers to `request` asked for at once; the one the judge rates best.

        The others' model and judge tokens are counted here (the winner's are counted as the
        attempt's, when `_judge` records it with its verdict, asked again of no judge).
        """
        strategy = self.settings.strategy
        options = request.prompt.options
        requests = [request] + [
            request.copy(prompt=request.prompt.with_options(strategy.sample_options(k, options)))
            for k in range(1, strategy.samples)
        ]
        responses: list[ChatClientResponse | None] = [None] * len(requests)
        verdicts: list[Verdict | None] = [None] * len(requests)

        async def sample(k: int) -> None:
            response = responses[k] = await self.rest.next_call(requests[k])
            answer_id = response.chat_response.metadata.id
            with contextlib.suppress(_Unjudged):  # that sample stays unjudged (None)
                verdicts[k] = await self._ask(number, span, response.content, (), answer_id)

        async with anyio.create_task_group() as group:
            for k in range(len(requests)):
                group.start_soon(sample, k)
        judged = [(v, r, k) for k, (v, r) in enumerate(zip(verdicts, responses, strict=True))]
        # Passed first, then most passed net of failed, then the first asked (the request's
        # own options) on a tie.
        verdict, chosen, k = max(
            judged, key=lambda t: (t[0] is not None and t[0].passed, _net(t[0]), -t[2])
        )
        assert chosen is not None
        for other, response, j in judged:
            if j != k and response is not None:
                self._add_model_usage(response.chat_response.metadata.usage)
                if other is not None and other.response is not None:
                    self.judge_usage = self.judge_usage + other.response.usage
        return chosen, verdict

    def _fails_open(self, error: JevrefineError) -> bool:
        # Only an outage fails open; a client error is a misconfiguration and must be seen.
        return self.settings.fails_open and error.is_transient

    def _goes_on(self, number: int, verdict: Verdict) -> bool:
        """Whether another attempt may follow failed attempt `number` (the token budget)."""
        budget = self.settings.token_budget
        if budget is not None and self.spent >= budget:
            self._stop_early(number, f"the token budget is spent ({self.spent} of {budget})")
            return False
        return True

    def _stop_early(self, number: int, why: str) -> None:
        self.stopped_early = why
        _log.info("self-refine: %s after attempt %d; no retry", why, number - 1)

    def _add_model_usage(self, usage: Usage) -> Usage:
        """Count one model response's tokens; returns them."""
        self.model_usage = self.model_usage + usage
        self.passed_up = self.passed_up + usage
        return usage

    # -- endings -------------------------------------------------------------------------------

    def _conclude(
        self,
        response: ChatClientResponse,
        outcome: str,
        number: int,
        previous: tuple[Verdict, str] | None,
    ) -> ChatClientResponse:
        """The response to return for attempt `number`, which ended the loop with `outcome`."""
        if outcome == "paused":
            return self._pause(response, (number, previous, self.attempts[-1].usage))
        assert outcome in ("passed", "skipped", "unjudged")
        return self._finish(response, outcome, number)  # type: ignore[arg-type]

    def _exhausted(self) -> Finished:
        """The best attempt once attempts ran out, or `SelfRefineFailedError`."""
        judged = [a for a in self.attempts if a.verdict is not None]
        # An echo is the feedback quoted back, not an answer: returned only when nothing else was.
        answers = [a for a in judged if not a.echo] or judged
        # Most passed net of failed; on a tie the later attempt (max keeps the first maximum,
        # so compare (score, index)).
        best = max(
            answers, key=lambda a: (a.verdict.net_score if a.verdict else -math.inf, a.index)
        )
        assert best.verdict is not None
        if self.settings.fail_on_exhausted_attempts:
            _log.warning(
                "self-refine: no attempt passed after %d attempt(s); raising", len(self.attempts)
            )
            report = self._report("failed", None)
            raise SelfRefineFailedError(best.verdict, self.attempts, report, best=best)
        # A warning: an answer that did not pass the judge is being shipped.
        _log.warning(
            "self-refine: no attempt passed after %d attempt(s); returning attempt %d (%s)",
            len(self.attempts),
            best.index,
            best.verdict.summary(),
        )
        response = self._finish(self.responses[best.index], "best_attempt", best.index)
        return Finished(best.index, response)

    def _pause(self, response: ChatClientResponse, position: _Position) -> ChatClientResponse:
        """Hand a tool-calling answer to the tool loop; its next round resumes this attempt.

        The last attempt recorded is the one paused: it is left out, and the resumed call
        records it again with its answer.
        """
        paused = Paused(
            position,
            tuple(self.request.prompt.messages),
            response.chat_response.results[0].output,
            tuple(self.attempts[:-1]),
            dict(self.responses),
            self.model_usage,
            self.judge_usage,
        )
        Pauses.of(self.request).put(self.owner, paused)
        returned = self._finish(response, "skipped", position[0])
        # Not an outcome yet: the resumed refinement counts the one outcome of this call.
        self.outcome = None
        return returned

    def _resume(self, paused: Paused | None) -> Paused | None:
        """Take up `paused` when this request continues it; otherwise start afresh."""
        # A pause left behind (a return-direct tool ended the loop, or an outer retry re-ran
        # the chain) does not match the prompt, so it cannot leak into a later refinement.
        if paused is None or not paused.continued_by(self.request.prompt):
            return None
        self.attempts = list(paused.attempts)
        self.responses = dict(paused.responses)
        self.model_usage = paused.model_usage
        self.judge_usage = paused.judge_usage
        return paused

    def _report(
        self, outcome: Outcome, chosen: int | None, response: ChatClientResponse | None = None
    ) -> RefineReport:
        """Build the report, note the outcome, and store it: the one writer of the report.

        It goes into the context of the request self-refine received (what an outer advisor
        holds, even when an exception carries the report out) and into the returned response's
        context, which is the attempt's copy of it.
        """
        self.outcome = outcome
        report = RefineReport(
            list(self.attempts),
            outcome,
            self.model_usage,
            self.judge_usage,
            chosen=chosen,
            stopped_early=self.stopped_early,
        )
        self.request.context[context_keys.REFINE_REPORT] = report
        if response is not None and response.context is not self.request.context:
            response.context[context_keys.REFINE_REPORT] = report
        return report

    def _finish(
        self, response: ChatClientResponse, outcome: Outcome, chosen: int
    ) -> ChatClientResponse:
        """The response to return: the report in its context, this call's model usage summed."""
        self._report(outcome, chosen, response)
        return with_usage(response, self.passed_up)


class _Unjudged(Exception):
    """The judging call failed and the judge error policy returns the answer unjudged."""


def _net(verdict: Verdict | None) -> float:
    return verdict.net_score if verdict is not None else -math.inf


def _net_score_then_index(attempt: Attempt) -> tuple[float, int]:
    return (attempt.verdict.net_score if attempt.verdict else -math.inf, attempt.index)


def _asks_for_tools(response: ChatClientResponse) -> bool:
    # The first generation, as the tool loop reads it.
    results = response.chat_response.results
    return bool(results) and bool(results[0].output.tool_calls)


def _joined(chunks: Sequence[ChatClientResponse], request: ChatClientRequest) -> ChatClientResponse:
    """An attempt's chunks joined into one response (what `call()` would have returned)."""
    joined = concat_chunks([c.chat_response for c in chunks])
    return ChatClientResponse(joined, chunks[-1].context if chunks else request.context)
