"""`GuardrailAdvisor`: screens what the user sends and what the model answers, with Jev.

```python
from jevrefine import ChatClient, GuardrailAdvisor
from jevrefine.jev import JudgeClient

async with JudgeClient() as jev:  # TYPESAFE_API_KEY
    client = ChatClient(model, advisors=[GuardrailAdvisor(jev)])
    answer = await client.prompt("How do I pick a lock?").content()  # maybe the refusal
```

The input (the user's message) is screened before the model is called: a block returns the
refusal and the model is never called. The output (the answer) is screened after: a block
replaces the answer with the refusal. Each screening is one `system_one` call with the state
`{"text": ...}`: one noul per hazard and the reserved `severity` score. A refused response carries
the context key `jev.guardrail.outcome`, so the self-refine advisor returns it unjudged.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Iterable, Mapping
from dataclasses import replace
from typing import TYPE_CHECKING, Any, ClassVar, Final, Literal, cast

from opentelemetry._logs import Logger, LoggerProvider, get_logger
from opentelemetry.trace import SpanKind, Status, StatusCode

from .. import _validate, context_keys
from .._request import ChatClientRequest, ChatClientResponse, context_entry
from .._version import __version__
from ..exceptions import JevrefineError, UserError
from ..jev.errors import AnswerNotFoundError, JudgeResponseError
from ..jev.protocol import SystemOneClient
from ..messages import (
    AssistantMessage,
    ChatResponse,
    ChatResponseMetadata,
    Generation,
    concat_chunks,
)
from ..streaming import FLUSH, sink_of
from ..telemetry import ERROR_TYPE, GEN_AI_OPERATION_NAME, GEN_AI_PROVIDER_NAME, error_type_of
from ._guardrail_policy import (
    DEFAULT_INPUT_HAZARDS,
    DEFAULT_OUTPUT_HAZARDS,
    SEVERITY,
    SEVERITY_QUESTION,
    TEXT_FIELD,
    GuardrailOutcome,
    GuardrailVerdict,
    Hazard,
    evaluate,
    hazards_of,
)
from ._guardrail_telemetry import COMPONENT, SOURCE, record_verdict
from .chain import HIGHEST_PRECEDENCE, LOWEST_PRECEDENCE

if TYPE_CHECKING:
    from ..jev.questions import Question
    from .chain import CallAdvisorChain

__all__ = [
    "DEFAULT_INPUT_HAZARDS",
    "DEFAULT_OUTPUT_HAZARDS",
    "DEFAULT_REFUSAL",
    "DEFAULT_SUPPORT_MESSAGE",
    "GuardrailAdvisor",
    "GuardrailOutcome",
    "GuardrailVerdict",
    "Hazard",
]

_log = logging.getLogger("jevrefine.guardrail")

DEFAULT_REFUSAL: Final = "I can't help with that."
"""What a blocked turn says unless `refusal=` says otherwise."""
DEFAULT_SUPPORT_MESSAGE: Final = (
    "It sounds like you may be going through something difficult. I can't help with this here, "
    "but you don't have to face it alone: please consider reaching out to someone you trust or "
    "to a local support line."
)
"""What a turn routed to support says unless `support_message=` says otherwise."""

# Where the input screenings of one request are remembered (in `ChatClientRequest.scope`, which
# every copy of the request shares), so attempts and tool rounds do not screen again.
_SCREENED_INPUT: Final = "jevrefine.guardrail.screened_input"


class GuardrailAdvisor:
    """Screens the user's message and the model's answer for hazards, and refuses when needed.

    Args:
        client: What answers the hazard questions: a `JudgeClient` (Jev) or a `ModelJudgeClient`.
            It is not closed here.
        input_hazards: What the user's message is screened for (`Hazard`s or `(name, question,
            action)` tuples); `()` screens no input.
        output_hazards: What the answer is screened for; `()` screens no output.
        action_threshold: A hazard's noul above this applies its action (BLOCK or SUPPORT).
        review_threshold: A noul above this (and not above `action_threshold`) gives REVIEW.
        severity_block_threshold: REVIEW becomes BLOCK when the severity (0-3) is at least this.
        block_on_review: Refuse every REVIEW.
        refusal: The answer of a blocked turn.
        support_message: The answer of a turn routed to support.
        order: The position in the chain. The default (`DEFAULT_ORDER`, inside self-refine and the
            tool loop) screens every attempt's answer; `PER_TURN_ORDER` screens once per turn.
        logger_provider: Where the `gen_ai.guardrail.result` log events go (default: the
            `ChatClient`'s logger provider, which falls back to `configure(...)`'s and then the
            global one, a no-op unless set).

    Screening failures: the input fails closed (the error is raised); the output fails open on a
    transient failure or an unusable answer (the answer passes, with the context key
    `jev.guardrail.screening_failure` = `"output"`); any other error (401, 403, 400, 422, a bug)
    is always raised. Streaming: the input is screened before the stream starts; with output
    hazards the answer is held until it has been screened, then streamed (or the refusal).
    """

    name: str = "jev_guardrail"

    DEFAULT_ORDER: ClassVar[int] = LOWEST_PRECEDENCE - 1000
    """Inside self-refine and the tool loop: every attempt's final answer is screened."""
    PER_TURN_ORDER: ClassVar[int] = HIGHEST_PRECEDENCE + 210
    """Once per turn, inside chat memory (+200): memory keeps the refusal, not a blocked answer."""

    def __init__(
        self,
        client: SystemOneClient,
        *,
        input_hazards: Iterable[Hazard | tuple[Any, ...]] = DEFAULT_INPUT_HAZARDS,
        output_hazards: Iterable[Hazard | tuple[Any, ...]] = DEFAULT_OUTPUT_HAZARDS,
        action_threshold: float = 0.70,
        review_threshold: float = 0.35,
        severity_block_threshold: float = 2.0,
        block_on_review: bool = False,
        refusal: str = DEFAULT_REFUSAL,
        support_message: str = DEFAULT_SUPPORT_MESSAGE,
        order: int = DEFAULT_ORDER,
        logger_provider: LoggerProvider | None = None,
    ) -> None:
        if not isinstance(client, SystemOneClient):
            raise UserError(
                f"GuardrailAdvisor needs a SystemOneClient, got {type(client).__name__}; pass a "
                "jevrefine.jev.JudgeClient or a ModelJudgeClient"
            )
        self.input_hazards = hazards_of(input_hazards, "input")
        """What the user's message is screened for."""
        self.output_hazards = hazards_of(output_hazards, "output")
        """What the answer is screened for."""
        if not self.input_hazards and not self.output_hazards:
            raise UserError("a guardrail that screens neither direction does nothing")
        action_threshold = _validate.number(
            "action_threshold", action_threshold, minimum=0.0, maximum=1.0, example=0.7
        )
        review_threshold = _validate.number(
            "review_threshold", review_threshold, minimum=0.0, maximum=1.0, example=0.35
        )
        if review_threshold > action_threshold:
            raise UserError(
                f"review_threshold ({review_threshold}) must not exceed action_threshold "
                f"({action_threshold}), or nothing is ever only flagged"
            )
        severity_block_threshold = _validate.number(
            "severity_block_threshold", severity_block_threshold, minimum=0.0, example=2.0
        )
        block_on_review = _validate.boolean("block_on_review", block_on_review)
        for label, text in (("refusal", refusal), ("support_message", support_message)):
            _validate.text(label, text, nonblank=True, example="I can't help with that.")
        order = _validate.order(order, example=self.DEFAULT_ORDER)
        self.client = client
        """What answers the hazard questions."""
        self.action_threshold = action_threshold
        """A noul above this applies its hazard's action."""
        self.review_threshold = review_threshold
        """A noul above this gives REVIEW."""
        self.severity_block_threshold = severity_block_threshold
        """REVIEW becomes BLOCK at this severity."""
        self.block_on_review = block_on_review
        """Whether every REVIEW is refused."""
        self.refusal = refusal
        """The answer of a blocked turn."""
        self.support_message = support_message
        """The answer of a turn routed to support."""
        self.order = order
        """Position in the chain."""
        # Only an explicit provider gets a logger of its own; otherwise the client's is used.
        self._events: Logger | None = (
            None
            if logger_provider is None
            else get_logger("jevrefine", __version__, logger_provider)
        )

    async def advise_call(
        self, request: ChatClientRequest, chain: CallAdvisorChain
    ) -> ChatClientResponse:
        """Screen the input (once per request), call the rest of the chain, screen the output."""
        if self.input_hazards:
            verdict = await self._input_verdict(request, chain)
            if verdict is not None and verdict.refuses:
                # Refused before the rest of the chain runs: the model is never called.
                return self._refuse(verdict, ChatResponseMetadata(), request.context)
        response = await chain.next_call(request)
        return await self._screen_output(response, chain)

    async def advise_stream(
        self, request: ChatClientRequest, chain: CallAdvisorChain
    ) -> AsyncIterator[ChatClientResponse]:
        """Screen the input, then stream; with output hazards the stream is buffered.

        Screening the answer needs the whole of it, and nothing of it may be shown before: the
        rest of the chain's chunks are held, the whole answer is screened, then either those
        chunks or the refusal are streamed (a live self-refine inside streams buffered).
        """
        if self.input_hazards:
            verdict = await self._input_verdict(request, chain)
            if verdict is not None and verdict.refuses:
                yield self._refuse(verdict, ChatResponseMetadata(), request.context)
                return
        if not self.output_hazards:
            async for chunk in chain.next_stream(request):
                yield chunk
            return
        sink = sink_of(request)
        held: list[ChatClientResponse] = []
        if sink is not None:
            sink.hold()
        try:
            async for chunk in chain.next_stream(request):
                if chunk.chat_response is FLUSH:
                    yield chunk  # an inner advisor's events (no text of the answer)
                else:
                    held.append(chunk)
        finally:
            if sink is not None:
                sink.release()
        whole = ChatClientResponse(
            concat_chunks([c.chat_response for c in held]),
            held[-1].context if held else request.context,
        )
        screened = await self._screen_output(whole, chain)
        if screened is whole:
            for chunk in held:
                yield chunk
        else:
            yield screened

    async def _screen_output(
        self, response: ChatClientResponse, chain: CallAdvisorChain
    ) -> ChatClientResponse:
        """`response` itself when it passes (or has nothing to screen), else what replaces it."""
        if not self.output_hazards:
            return response
        output = (
            response.chat_response.results[0].output if response.chat_response.results else None
        )
        if output is None or output.has_tool_calls or not output.text.strip():
            return response
        if GuardrailOutcome.of(response) is not None:
            return response  # already a refusal (another guardrail): nothing to screen
        try:
            verdict = await self._screen("output", output.text, self.output_hazards, chain)
        except JevrefineError as exc:
            if not _fails_open(exc):
                raise
            _log.warning(
                "guardrail: screening the output failed (%s: %s); the answer passes unscreened",
                type(exc).__name__,
                exc,
            )
            context = {**response.context, context_keys.GUARDRAIL_SCREENING_FAILURE: "output"}
            return response.copy(context=context)
        if verdict.refuses:
            _log.warning("guardrail: blocked the answer: %s", verdict.summary())
            return self._refuse(verdict, response.chat_response.metadata, response.context)
        return response

    @staticmethod
    def screening_failure_of(
        source: ChatClientResponse | ChatClientRequest | Mapping[str, Any],
    ) -> Literal["input", "output"] | None:
        """Which screening failed open for `source` (`"output"`), or `None` when none did.

        `source` is a `ChatClientResponse`, a request or a context dict; reads
        `context_keys.GUARDRAIL_SCREENING_FAILURE`. The outcome of a refusal is
        `GuardrailOutcome.of(response)`.

        Raises:
            UserError: the key holds something other than `"input"` or `"output"`.
        """
        key = context_keys.GUARDRAIL_SCREENING_FAILURE
        value = context_entry(source, key, str)
        if value is None or value in ("input", "output"):
            return cast('Literal["input", "output"] | None', value)
        raise UserError(
            f"the context key {key!r} holds {value!r}, not 'input' or 'output': something "
            "other than the guardrail wrote it"
        )

    async def _input_verdict(
        self, request: ChatClientRequest, chain: CallAdvisorChain
    ) -> GuardrailVerdict | None:
        """The input screening of this request, done on its first pass through this advisor."""
        screened: dict[GuardrailAdvisor, GuardrailVerdict | None] = request.scope.setdefault(
            _SCREENED_INPUT, {}
        )
        if self in screened:
            return screened[self]
        user = request.prompt.last_user_message()
        # What the user wrote: entity()'s output spec travels on the request and is rendered
        # only at the terminal link, so no format instructions are in this text.
        text = user.text if user is not None else ""
        verdict = None
        if text.strip():
            # Fails closed: a screening error propagates, and nothing is remembered, so a later
            # attempt that gets here screens again rather than passing unscreened.
            verdict = await self._screen("input", text, self.input_hazards, chain)
            if verdict.refuses:
                _log.warning("guardrail: blocked the request: %s", verdict.summary())
            elif verdict.outcome is GuardrailOutcome.REVIEW:
                _log.info("guardrail: request flagged for review: %s", verdict.summary())
        screened[self] = verdict
        return verdict

    async def _screen(
        self,
        direction: str,
        text: str,
        hazards: tuple[Hazard, ...],
        chain: CallAdvisorChain,
    ) -> GuardrailVerdict:
        """One `system_one` call under an `apply_guardrail` span, and its verdict."""
        questions: dict[str, Question] = {h.name: h.noul for h in hazards}
        questions[SEVERITY_QUESTION] = SEVERITY
        component = f"{self.name}.{direction}"
        with chain.telemetry.tracer.start_as_current_span(
            f"apply_guardrail {component}",
            context=chain.trace_parent,
            kind=SpanKind.INTERNAL,
            attributes={
                GEN_AI_OPERATION_NAME: "apply_guardrail",
                GEN_AI_PROVIDER_NAME: "typesafe",
                COMPONENT: component,
                SOURCE: direction,
            },
            record_exception=False,
            set_status_on_exception=False,
        ) as span:
            try:
                response = await self.client.system_one({TEXT_FIELD: text}, questions)
                verdict = evaluate(
                    direction,
                    response,
                    hazards,
                    action_threshold=self.action_threshold,
                    review_threshold=self.review_threshold,
                    severity_block_threshold=self.severity_block_threshold,
                    block_on_review=self.block_on_review,
                )
            except BaseException as exc:
                span.set_attribute(ERROR_TYPE, error_type_of(exc))
                span.set_status(Status(StatusCode.ERROR, type(exc).__qualname__))
                raise
            events = self._events or chain.telemetry.events
            record_verdict(span, events, component, verdict, hazards)
        return verdict

    def _refuse(
        self,
        verdict: GuardrailVerdict,
        metadata: ChatResponseMetadata,
        context: dict[str, Any],
    ) -> ChatClientResponse:
        text = self.support_message if verdict.outcome is GuardrailOutcome.SUPPORT else self.refusal
        generation = Generation(AssistantMessage(text), {"finish_reason": "content_filter"})
        # Keep what the model call cost (an output block), but say why the answer changed.
        chat_response = ChatResponse(
            (generation,), replace(metadata, finish_reasons=("content_filter",))
        )
        return ChatClientResponse(
            chat_response, {**context, context_keys.GUARDRAIL_OUTCOME: verdict.outcome.name}
        )

    def __repr__(self) -> str:
        inputs = ", ".join(h.name for h in self.input_hazards)
        outputs = ", ".join(h.name for h in self.output_hazards)
        return (
            f"GuardrailAdvisor({self.client!r}, input=[{inputs}], output=[{outputs}], "
            f"order={self.order})"
        )


def _fails_open(error: JevrefineError) -> bool:
    """Whether an output screening failure lets the answer pass: an outage or an unusable answer.

    A misconfiguration (401, 403, 400, 422, a usage error) must never turn screening off silently.
    """
    return error.is_transient or isinstance(error, JudgeResponseError | AnswerNotFoundError)
