"""`ModelJudgeClient`: Jev's typed questions answered by any `ChatModel` (LLM-as-a-judge).

Each question is one constrained request: the model may only answer one of the allowed values
(`yes`/`no` for a `Noul`, a label for a `Choice`, a level number for a `Score`), enforced by a JSON
schema with an enum (`ChatOptions.response_format`, the default) or by a llama.cpp grammar
(`ChatOptions.extra_body`, `constraint="grammar"`). The questions of one call run concurrently.

Probabilities come from the answer token's log probabilities where the provider returns them
(OpenAI-compatible servers, the local llama.cpp model): the alternatives at the position where the
answer starts are matched to the allowed answers (case and surrounding blanks ignored) and
renormalised. A server may report the *unconstrained* distribution there (llama.cpp does), so the
answer is always decided from these probabilities — the argmax — never from the sampled text, and
the two cannot disagree. Where no logprobs come back (or none of the alternatives is an allowed
answer), the chosen answer gets probability 1 and the answer is marked `calibrated=False`.
As Jev does, a noul is P(yes) and a score is Σ level·p.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final, Literal, cast

import anyio

from .. import _validate
from ..jev.errors import JudgeResponseError, JudgeTimeoutError, JudgeUsageError
from ..jev.questions import Content, Question, State, check_system_one_args, questions_to_wire
from ..jev.responses import (
    Answer,
    ChoiceAnswer,
    NoulAnswer,
    ScoreAnswer,
    SystemOneResponse,
    check_answers,
    distribution_confidence,
)
from ..messages import (
    ChatOptions,
    Prompt,
    ResponseFormat,
    SystemMessage,
    TokenLogprob,
    Usage,
    UserMessage,
)
from ..models.base import ChatModel
from ..models.instrumented import instrument_model
from ..telemetry import InstrumentationSettings, Telemetry
from ._explain import JudgeExample, explain_prompt, explanation_of, render_examples
from ._reference import (
    ReferenceCache,
    needs_reference,
    reference_prompt,
    with_reference,
    without_system,
)

if TYPE_CHECKING:
    from opentelemetry._logs import LoggerProvider
    from opentelemetry.metrics import MeterProvider
    from opentelemetry.trace import TracerProvider

    from ..telemetry import CaptureMode

__all__ = ["DEFAULT_SYSTEM_PROMPT", "ModelJudgeClient"]

DEFAULT_SYSTEM_PROMPT: Final = (
    "You are a careful, impartial evaluator. Read the state, then answer the question about it "
    "with exactly one of the allowed answers and nothing else."
)
"""The system message of every judging request."""

_YES_NO: Final = ("yes", "no")


class _Spec:
    """One question reduced to what the model sees and how its answer maps back."""

    __slots__ = ("allowed", "first", "kind", "legend", "prompt_text")

    def __init__(
        self, kind: str, allowed: tuple[str, ...], prompt_text: str, legend: Any, first: int = 0
    ) -> None:
        self.kind = kind
        self.allowed = allowed
        self.prompt_text = prompt_text
        self.legend = legend
        self.first = first
        """The number the model writes for a score's lowest level (Jev's index is 0)."""


def _render(content: Content | None) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    return json.dumps(content, ensure_ascii=False, default=list)


def _level_line(number: int, level: str) -> str:
    # A level that already opens with its own number ("1 - Unhelpful: ...") is shown as written:
    # "1: 1 - Unhelpful" would offer the model two numbers for one level.
    return (
        level if _NUMBERED.match(level) and level.startswith(str(number)) else f"{number}: {level}"
    )


_NUMBERED: Final = re.compile(r"\d+\s*[-:.)]")


def _spec_of(wire: Mapping[str, Any], score_starts_at: int = 0) -> _Spec:
    kind = wire["type"]
    instructions = _render(wire.get("instructions"))
    lines = [f"Question: {instructions}"]
    if kind == "noul":
        criteria = wire.get("criteria") or {}
        if criteria.get("true") is not None:
            lines.append(f'Answer "yes" when: {_render(criteria["true"])}')
        if criteria.get("false") is not None:
            lines.append(f'Answer "no" when: {_render(criteria["false"])}')
        allowed: tuple[str, ...] = _YES_NO
        legend: Any = None
    elif kind == "choice":
        allowed = tuple(wire["criteria"])
        lines.append("Options:")
        for label, description in wire["criteria"].items():
            lines.append(
                f"- {label}" + (f": {_render(description)}" if description is not None else "")
            )
        legend = None
    elif kind == "score":
        levels = list(wire["criteria"])
        numbers = range(score_starts_at, score_starts_at + len(levels))
        allowed = tuple(str(n) for n in numbers)
        lines.append(f"Levels (the number is the answer, {score_starts_at} is the lowest):")
        lines.extend(
            _level_line(n, _render(level)) for n, level in zip(numbers, levels, strict=True)
        )
        legend = {i: level for i, level in enumerate(levels)}
    else:
        raise JudgeUsageError(
            f"ModelJudgeClient answers noul, choice and score questions, not {kind!r}"
        )
    quoted = ", ".join(json.dumps(a, ensure_ascii=False) for a in allowed)
    lines.append(f"Allowed answers: {quoted}")
    return _Spec(kind, allowed, "\n".join(lines), legend, score_starts_at)


def _grammar(allowed: Sequence[str]) -> str:
    # GBNF string literals are JSON-like; json.dumps escapes quotes and backslashes the same way.
    return "root ::= " + " | ".join(json.dumps(a, ensure_ascii=False) for a in allowed)


def _schema(allowed: Sequence[str]) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {"answer": {"type": "string", "enum": list(allowed)}},
        "required": ["answer"],
        "additionalProperties": False,
    }


def _norm(text: str) -> str:
    return text.strip().strip('"').strip().casefold()


def _answer_offset(text: str, constraint: str) -> int | None:
    """Where the answer value starts in the generated text."""
    if constraint == "grammar":
        return len(text) - len(text.lstrip())
    key = text.find('"answer"')
    if key < 0:
        return None
    colon = text.find(":", key + 8)
    if colon < 0:
        return None
    quote = text.find('"', colon + 1)
    return None if quote < 0 else quote + 1


def _distribution(
    logprobs: Sequence[TokenLogprob], text: str, allowed: Sequence[str], constraint: str
) -> dict[str, float] | None:
    """P(answer) from the alternatives at the token where the answer starts, or `None`."""
    start = _answer_offset(text, constraint)
    if start is None:
        return None
    offset = 0
    for item in logprobs:
        end = offset + len(item.token)
        if end > start:
            break
        offset = end
    else:
        return None
    # The token may carry text before the answer (a quote, a blank): alternatives must share it.
    prefix = text[offset:start] if start > offset else ""
    alternatives = list(item.top) or [(item.token, item.logprob)]
    # Case-insensitive matching only while it keeps the answers apart.
    fold = len({_norm(a) for a in allowed}) == len(allowed)

    def key_of(value: str) -> str:
        return _norm(value) if fold else value.strip()

    keys = {a: key_of(a) for a in allowed}
    mass: dict[str, float] = dict.fromkeys(allowed, 0.0)
    seen: set[str] = set()
    for token, logprob in alternatives:
        if token in seen or (prefix and not token.startswith(prefix)):
            continue
        seen.add(token)
        piece = token[len(prefix) :]
        if constraint == "json_schema":
            piece = piece.split('"', 1)[0]  # the closing quote may share the token
        key = key_of(piece)
        if not key:
            continue
        targets = [a for a, k in keys.items() if k == key] or [
            a for a, k in keys.items() if k.startswith(key)
        ]
        if not targets:
            continue
        if not math.isfinite(logprob):
            continue  # NaN or infinite: no probability at all, so it carries none
        # A log probability above 0 is impossible (p > 1): read it as certainty, never overflow.
        share = math.exp(min(logprob, 0.0)) / len(targets)  # a shared prefix is split
        for a in targets:
            mass[a] += share
    total = sum(mass.values())
    if not total > 0:
        return None
    return {a: p / total for a, p in mass.items()}


def _parse_text(text: str, allowed: Sequence[str], constraint: str) -> str | None:
    value: Any = text.strip()
    if constraint == "json_schema":
        try:
            decoded = json.loads(text)
        except (ValueError, RecursionError):  # RecursionError: nested past the decoder
            decoded = None
        if isinstance(decoded, dict):
            value = decoded.get("answer")
    if not isinstance(value, str):
        return None
    if value in allowed:
        return value
    folded = {_norm(a): a for a in allowed}
    return folded.get(_norm(value))


class ModelJudgeClient:
    """A `SystemOneClient` answered by a chat model: LLM-as-a-judge with Jev's typed questions.

    ```python
    judge_client = ModelJudgeClient(OpenAIChatModel("gpt-4o-mini"))
    response = await judge_client.system_one(state, {"is_grounded": Noul("...")})
    ```

    Args:
        chat_model: The model that answers. It is not closed by this client.
        concurrency: At most this many model requests in flight (shared by all calls).
        constraint: `"json_schema"` (an enum in a JSON schema, portable) or `"grammar"` (a
            llama.cpp GBNF grammar through `extra_body`; the answer is the first token).
        logprobs: Ask for log probabilities (`top_logprobs` alternatives per token). Turn off for
            providers that reject the option; answers are then marked not calibrated.
        top_logprobs: How many alternatives to ask for (at most 20).
        system_prompt: The system message of each request.
        tracer_provider: Where the `chat {model}` span of each request goes (default:
            `jevrefine.telemetry.configure(...)`'s, else the global provider).
        meter_provider: Where the duration and token metrics go (same defaults).
        logger_provider: Where the opt-in content events go (same defaults).
        capture_content: Record the judging prompts and answers (`True`: on the spans; or a
            `CaptureMode`); off unless this, `configure(...)` or
            `OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT` says so.
        legacy_attributes: Also emit seed 004's older attributes.
        temperature: The sampling temperature of every request (0: deterministic judging).
        examples: Few-shot examples per question id (`JudgeExample(state, answer)`), shown
            after the question; each answer is checked against the allowed answers.
        explain_failures: When a `Judge` finds a criterion FAILED, ask this model for one
            sentence of specific, constructive feedback, which joins the finding's detail (and
            so the retry prompt); at most `MAX_EXPLANATION_CHARS` characters.
        score_starts_at: The number the model is shown, and answers, for a score's lowest
            level: 0 (Jev's level index) or 1 (a rating scale such as seed 003's 1-4). The
            answer maps back to the level index either way (rating 4 of 4 is level 3).
        reference_answers: Reference-guided judging: when the state holds a `user_question`
            and no `expected_output`, the model first answers the question itself (one request
            per distinct question, kept for the retries of the same prompt), and the questions
            are asked of the state with that answer as `expected_output`; both read the
            conversation without its system message (the comparison is about content, not
            format). Its tokens count in the response's usage. A small model judges
            correctness far better this way (`reference_judge`; docs/guide/judge.md).
        instrumentation: The telemetry settings above as one `InstrumentationSettings`
            (shareable with the `ChatClient`); not together with them.

    Each question's request is one CLIENT `chat {model}` span, a child of the current span
    (the refine attempt, the guardrail screening), like any model call through a `ChatClient`.
    """

    def __init__(
        self,
        chat_model: ChatModel,
        *,
        concurrency: int = 4,
        constraint: Literal["json_schema", "grammar"] = "json_schema",
        logprobs: bool = True,
        top_logprobs: int = 20,
        system_prompt: str = DEFAULT_SYSTEM_PROMPT,
        tracer_provider: TracerProvider | None = None,
        meter_provider: MeterProvider | None = None,
        logger_provider: LoggerProvider | None = None,
        capture_content: bool | CaptureMode | None = None,
        legacy_attributes: bool | None = None,
        temperature: float = 0.0,
        examples: Mapping[str, Sequence[JudgeExample]] | None = None,
        explain_failures: bool = False,
        score_starts_at: Literal[0, 1] = 0,
        reference_answers: bool = False,
        instrumentation: InstrumentationSettings | None = None,
    ) -> None:
        if not isinstance(chat_model, ChatModel):
            raise _validate.wrong_type(
                "chat_model",
                chat_model,
                "a ChatModel",
                example="OpenAIChatModel('gpt-4o-mini')",
                error=JudgeUsageError,
            )
        self._concurrency = _validate.integer(
            "concurrency", concurrency, minimum=1, example=4, error=JudgeUsageError
        )
        self._limiter: anyio.CapacityLimiter | None = None
        self._constraint = _validate.choice(
            "constraint", constraint, ("json_schema", "grammar"), error=JudgeUsageError
        )
        self._logprobs = _validate.boolean("logprobs", logprobs, error=JudgeUsageError)
        self._top_logprobs = _validate.integer(
            "top_logprobs", top_logprobs, minimum=1, maximum=20, example=20, error=JudgeUsageError
        )
        self._system_prompt = _validate.text(
            "system_prompt", system_prompt, nonblank=True, error=JudgeUsageError
        )
        self._temperature = _validate.number(
            "temperature", temperature, minimum=0, maximum=2, example=0.0, error=JudgeUsageError
        )
        self._examples = _checked_examples(examples)
        self.explain_failures = _validate.boolean(
            "explain_failures", explain_failures, error=JudgeUsageError
        )
        """Whether a `Judge` asks this client for written feedback on failed criteria."""
        self._score_starts_at = _validate.integer(
            "score_starts_at",
            score_starts_at,
            minimum=0,
            maximum=1,
            example=1,
            error=JudgeUsageError,
        )
        self.reference_answers = _validate.boolean(
            "reference_answers", reference_answers, error=JudgeUsageError
        )
        """Whether the model writes a reference answer first (reference-guided judging)."""
        self._references = ReferenceCache()
        self._writing: dict[str, anyio.Lock] = {}
        self._telemetry = Telemetry(
            instrumentation,
            tracer_provider=tracer_provider,
            meter_provider=meter_provider,
            logger_provider=logger_provider,
            capture_content=capture_content,
            legacy_attributes=legacy_attributes,
        )
        # Every question's request goes through the one telemetry seam: one `chat` span each.
        self._model = instrument_model(chat_model, self._telemetry)

    @property
    def chat_model(self) -> ChatModel:
        """The model that answers."""
        return self._model.wrapped

    @property
    def server_address(self) -> str | None:
        """The judging model's host, for telemetry."""
        return self._model.server_address

    @property
    def server_port(self) -> int | None:
        """The judging model's port, for telemetry."""
        return self._model.server_port

    def __repr__(self) -> str:
        return f"ModelJudgeClient({self._model.wrapped!r}, constraint={self._constraint!r})"

    async def system_one(
        self,
        state: State,
        questions: Mapping[str, Question | Mapping[str, Any]],
        *,
        model: str | None = None,
        timeout: float | None = None,  # noqa: ASYNC109 - pinned by the protocol
    ) -> SystemOneResponse:
        """Answer every question with one constrained model request each, concurrently.

        Args:
            state: What the judge reads (text, or a JSON object / array).
            questions: Question id -> `Noul`, `Choice` or `Score`.
            model: The model name for these requests (default: the chat model's own).
            timeout: Seconds for the whole call.

        Raises:
            JudgeUsageError: bad questions or state (before any request).
            JudgeTimeoutError: the call took longer than `timeout`.
            JudgeResponseError: the model's answer is none of the allowed ones.
            ModelError: the model call failed (passed through unchanged).
        """
        wire = check_system_one_args(state, questions)
        specs = {qid: _spec_of(q, self._score_starts_at) for qid, q in wire.items()}
        usage = Usage()
        question = needs_reference(state) if self.reference_answers else None
        if question is not None:
            question = without_system(question)
            reference, usage = await self._reference(question)
            asked = {**cast("Mapping[str, Any]", state), "user_question": question}
            state = with_reference(asked, reference)
        for qid, spec in specs.items():
            if self._examples.get(qid):
                shots = render_examples(qid, self._examples[qid], spec.allowed)
                spec.prompt_text = f"{spec.prompt_text}\n{shots}"
        state_text = _render(state)
        if self._limiter is None:
            self._limiter = anyio.CapacityLimiter(self._concurrency)
        limiter = self._limiter
        results: dict[str, tuple[Answer, Usage, str | None]] = {}
        errors: list[BaseException] = []

        async def ask(qid: str, spec: _Spec) -> None:
            try:
                async with limiter:
                    results[qid] = await self._ask(qid, spec, state_text, model)
            except Exception as exc:  # kept, so the caller sees the error itself, not a group
                errors.append(exc)
                group.cancel_scope.cancel()

        with anyio.move_on_after(timeout if timeout is not None else math.inf) as scope:
            async with anyio.create_task_group() as group:
                for qid, spec in specs.items():
                    group.start_soon(ask, qid, spec)
        if errors:
            raise errors[0]
        if scope.cancelled_caught:
            raise JudgeTimeoutError(f"the model did not answer every question within {timeout:g} s")
        answered_by: str | None = None
        for _, used, name in results.values():
            usage = usage + used
            answered_by = answered_by or name
        response = SystemOneResponse(
            answered_by or model or self._model.model_name,
            {qid: results[qid][0] for qid in specs},
            usage,
        )
        # The same bar as Jev's own answers: the model's numbers are hostile input too.
        check_answers(response, wire)
        return response

    async def explain(
        self, state: State, question: Question | Mapping[str, Any], detail: str
    ) -> tuple[str, Usage]:
        """One sentence of feedback for an answer that failed `question`, and its usage.

        `Judge` calls it for each FAILED criterion when `explain_failures` is set.
        """
        wire = questions_to_wire({"criterion": question})["criterion"]
        prompt = explain_prompt(_render(state), wire, detail, self._temperature)
        response = await self._model.call(prompt)
        return explanation_of(response)

    async def _reference(self, question: str) -> tuple[str, Usage]:
        """The model's own answer to `question`, and what writing it cost (0 when kept).

        One request per question even when several judgements of it run at once (the pairs of
        a calibration, the items of a batch that share a prompt): the others wait for it.
        """
        lock = self._writing.setdefault(question, anyio.Lock())
        try:
            async with lock:
                kept = self._references.get(question)
                if kept is not None:
                    return kept, Usage()
                response = await self._model.call(reference_prompt(question, self._temperature))
                answer = response.text.strip()
                self._references.put(question, answer)
                return answer, response.metadata.usage
        finally:
            if not lock.statistics().tasks_waiting and self._writing.get(question) is lock:
                del self._writing[question]  # the last one out: nothing kept per question

    def _prompt(self, spec: _Spec, state_text: str, model: str | None) -> Prompt:
        user = f"State:\n{state_text}\n\n{spec.prompt_text}"
        if self._constraint == "grammar":
            user += "\nReply with the answer only."
            options = ChatOptions(
                model=model,
                temperature=self._temperature,
                max_tokens=max(4, max(len(a) for a in spec.allowed) + 2),
                extra_body={"grammar": _grammar(spec.allowed)},
            )
        else:
            user += '\nReply with a JSON object: {"answer": <one of the allowed answers>}.'
            options = ChatOptions(
                model=model,
                temperature=self._temperature,
                max_tokens=32 + 2 * max(len(a) for a in spec.allowed),
                response_format=ResponseFormat(
                    name="answer", schema=_schema(spec.allowed), strict=True
                ),
            )
        if self._logprobs:
            options = options.merge(ChatOptions(logprobs=True, top_logprobs=self._top_logprobs))
        return Prompt((SystemMessage(self._system_prompt), UserMessage(user)), options)

    async def _ask(
        self, qid: str, spec: _Spec, state_text: str, model: str | None
    ) -> tuple[Answer, Usage, str | None]:
        response = await self._model.call(self._prompt(spec, state_text, model))
        generation = response.result
        text = generation.text
        probabilities: dict[str, float] | None = None
        logprobs = generation.logprobs
        if logprobs:
            probabilities = _distribution(logprobs, text, spec.allowed, self._constraint)
        calibrated = probabilities is not None
        if probabilities is None:
            chosen = _parse_text(text, spec.allowed, self._constraint)
            if chosen is None:
                raise JudgeResponseError(
                    f"question {qid!r}: the model answered {text[:200]!r}, which is none of "
                    f"{list(spec.allowed)}",
                    field_path=f"answers.{qid}",
                    body=text,
                )
            probabilities = {a: 1.0 if a == chosen else 0.0 for a in spec.allowed}
        answer = _answer(spec, probabilities, calibrated)
        meta = response.metadata
        return answer, meta.usage, meta.model


def _checked_examples(
    examples: Mapping[str, Sequence[JudgeExample]] | None,
) -> dict[str, tuple[JudgeExample, ...]]:
    if examples is None:
        return {}
    if not isinstance(examples, Mapping):
        raise JudgeUsageError(
            f"examples={_validate.shown(examples)} is not a dict: pass question id -> "
            "[JudgeExample(state, answer), ...], or None"
        )
    found: dict[str, tuple[JudgeExample, ...]] = {}
    for qid, shots in examples.items():
        if isinstance(shots, str | bytes) or not isinstance(shots, Sequence):
            raise JudgeUsageError(
                f"examples[{qid!r}]={_validate.shown(shots)} is not a list: pass "
                "[JudgeExample(state, answer), ...]"
            )
        found[qid] = tuple(shots)
    return found


def _answer(spec: _Spec, probabilities: dict[str, float], calibrated: bool) -> Answer:
    if spec.kind == "noul":
        return NoulAnswer(probabilities["yes"], calibrated=calibrated)
    # Ties go to the earlier option, deterministically.
    best = max(spec.allowed, key=lambda a: (probabilities[a], -spec.allowed.index(a)))
    confidence = distribution_confidence(probabilities) if calibrated else None
    if spec.kind == "choice":
        return ChoiceAnswer(best, probabilities, confidence, calibrated=calibrated)
    # Back to Jev's level index, whichever number the model was shown for the lowest level.
    levels = {int(a) - spec.first: p for a, p in probabilities.items()}
    score = sum(level * p for level, p in levels.items())
    return ScoreAnswer(score, spec.legend, levels, confidence, calibrated=calibrated)
