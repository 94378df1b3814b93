"""`JevChatModel`: a Jev classifier behind the `ChatModel` interface (experimental).

```python
from pydantic import BaseModel

from jevrefine import ChatClient
from jevrefine.jev import Choice, JudgeClient, Noul, Score
from jevrefine.models.jev import JevChatModel


class Triage(BaseModel):
    team: str
    urgent: float
    severity: float


async with JudgeClient() as jev:  # TYPESAFE_API_KEY
    triage = JevChatModel(
        jev,
        questions={
            "team": Choice(
                "Which team should handle the user's ticket?",
                options={"infra": "Deploys, outages, servers", "billing": "Invoices, refunds"},
            ),
            "urgent": Noul("Does the user's ticket need attention right now?"),
            "severity": Score("How severe is the impact?", levels=["Cosmetic", "Degraded", "Down"]),
        },
    )
    t = await ChatClient(triage).prompt(ticket).entity(Triage)
```

A classifier, not a generator: the questions are fixed when the model is built, the prompt only
supplies the state they are answered against, and the reply is the answers as a JSON object, one
field per question. What Jev cannot do is refused, not faked: it does not stream, never calls
tools and classifies text only.
"""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator, Callable, Mapping
from types import MappingProxyType
from typing import Any, ClassVar, Final

from .. import _validate
from ..exceptions import UserError
from ..jev._telemetry import PROVIDER  # a JevChatModel's call is its JudgeClient's: one name
from ..jev.client import DEFAULT_MODEL
from ..jev.protocol import SystemOneClient
from ..jev.questions import Choice, Noul, Question, Score, State, questions_to_wire
from ..jev.responses import (
    Answer,
    ChoiceAnswer,
    NoulAnswer,
    ScoreAnswer,
    SystemOneResponse,
    check_answers,
    missing_answers_allowed,
)
from ..messages import (
    AssistantMessage,
    ChatResponse,
    ChatResponseMetadata,
    Generation,
    Prompt,
    RenderedOutput,
    SystemMessage,
    UserMessage,
)
from ..structured import WRAPPER_KEY, strip_format_instructions
from ..telemetry import same_call
from ._jev_schema import check_scalar, check_schema, is_list_target
from .base import ChatModel

__all__ = [
    "MESSAGES_FIELD",
    "PROVIDER",
    "RESPONSE_METADATA_KEY",
    "SYSTEM_FIELD",
    "AnswerRenderer",
    "JevChatModel",
    "StateConverter",
]

RESPONSE_METADATA_KEY: Final = "jev_response"
"""The `Generation.metadata` key holding the whole `SystemOneResponse`."""
SYSTEM_FIELD: Final = "system"
"""The state field holding the system messages (left out when there are none)."""
MESSAGES_FIELD: Final = "messages"
"""The state field holding the user and assistant turns, as `{"role", "content"}` entries."""

StateConverter = Callable[[Prompt], State]
"""Turns the prompt, as sent, into the state the questions are answered against."""
AnswerRenderer = Callable[[SystemOneResponse], str]
"""Turns the answers into the reply's text."""

_FINISH_REASON: Final = "stop"

_log = logging.getLogger("jevrefine.jev")


class JevChatModel(ChatModel):
    """A Jev classifier as a `ChatModel`: typed classifications through `ChatClient`.

    Args:
        client: What answers the questions: a `JudgeClient` (Jev), or a `ModelJudgeClient` so
            that the same typed classifier runs on any chat model. It is not closed here:
            whoever creates the client closes it.
        questions: Question name -> `Noul`, `Choice` or `Score`, at least one, asked on every
            call. A name is the reply's field, so name each after the field it should fill.
        state_converter: How a prompt becomes the state (default: `default_state`). It receives
            the prompt as sent: on the prompt-based path that includes the appended format
            instructions, which `without_format_instructions` removes (the spec they were
            rendered from is on `prompt.output_spec`).
        answer_renderer: How the answers become the reply's text (default: `answers_as_json`). A
            custom renderer owns the reply's shape, so the native schema check is skipped.
        model: The model asked when the prompt's options name none (default: the client's).

    The reply is a JSON object, one field per question in declaration order: a noul's truth
    value, a choice's label, a score's value. With `entity(T)` (native or prompt-based: the
    model reads the output spec from the prompt, not its text) `T`'s JSON schema is checked
    against the questions before any call, and the reply holds only `T`'s fields. A single-value
    target (`entity(float)`, `entity(str)`) takes the answer of a model with one question. The whole
    `SystemOneResponse` is in `Generation.metadata[RESPONSE_METADATA_KEY]`; the response metadata
    carries the answering model, the usage and the request id.

    Refused: `stream()`; tool definitions on the prompt's options; a message carrying media
    (any message with a non-empty `media` attribute); a list output target. Tools given to a
    `ChatClient` are dropped (`supports_tools = False`: no tool loop starts). Temperature, top-p
    and max tokens are ignored (the `chat` span records them when set).

    Like every `ChatModel`, it opens no span of its own: the `ChatClient`'s terminal link records
    the one `chat {model}` span, and a `JudgeClient`'s retries are recorded on it.
    """

    provider: ClassVar[str] = PROVIDER
    supports_tools: ClassVar[bool] = False
    supports_native_structured_output: ClassVar[bool] = True

    RESPONSE_METADATA_KEY: ClassVar[str] = RESPONSE_METADATA_KEY
    """The `Generation.metadata` key holding the whole `SystemOneResponse`."""
    SYSTEM_FIELD: ClassVar[str] = SYSTEM_FIELD
    """The state field holding the system messages."""
    MESSAGES_FIELD: ClassVar[str] = MESSAGES_FIELD
    """The state field holding the user and assistant turns."""

    def __init__(
        self,
        client: SystemOneClient,
        *,
        questions: Mapping[str, Noul | Choice | Score],
        state_converter: StateConverter | None = None,
        answer_renderer: AnswerRenderer | None = None,
        model: str | None = None,
    ) -> None:
        if not isinstance(client, SystemOneClient):
            raise UserError(
                f"JevChatModel needs a SystemOneClient, got {type(client).__name__}; pass a "
                "jevrefine.jev.JudgeClient, or a ModelJudgeClient over any chat model"
            )
        if not isinstance(questions, Mapping) or not questions:
            raise UserError(
                "JevChatModel needs at least one question: questions={'name': Noul(...), ...}"
            )
        for name, question in questions.items():
            if not isinstance(question, Noul | Choice | Score):
                raise UserError(
                    f"question {name!r} is a {type(question).__name__}; use Noul, Choice or Score"
                )
        questions_to_wire(questions)  # the API's limits, checked now rather than on each call
        for what, hook in (
            ("state_converter", state_converter),
            ("answer_renderer", answer_renderer),
        ):
            if hook is not None and not callable(hook):
                raise UserError(f"{what} must be callable, got {type(hook).__name__}")
        model = _validate.text("model", model, optional=True, nonblank=True, example="jev-latest")
        self._client = client
        self._questions: Mapping[str, Question] = MappingProxyType(dict(questions))
        self._state_converter = state_converter
        self._answer_renderer = answer_renderer
        self._model = model or _default_model_of(client)

    @property
    def client(self) -> SystemOneClient:
        """What answers the questions."""
        return self._client

    @property
    def questions(self) -> Mapping[str, Question]:
        """The questions every call answers, in declaration order."""
        return self._questions

    @property
    def model_name(self) -> str:
        """The model asked when the prompt names none: the given one, else the client's."""
        return self._model or DEFAULT_MODEL

    @property
    def server_address(self) -> str | None:
        """The host the client sends to (`JudgeClient`, `ModelJudgeClient`), for telemetry."""
        address = getattr(self._client, "server_address", None)
        return address if isinstance(address, str) else None

    @property
    def server_port(self) -> int | None:
        """The port the client sends to, for telemetry."""
        port = getattr(self._client, "server_port", None)
        return port if isinstance(port, int) and not isinstance(port, bool) else None

    async def call(self, prompt: Prompt) -> ChatResponse:
        """Answer the questions against the prompt's state; the reply is the answers as JSON.

        Raises:
            UserError: tools on the prompt, media in a message, a list target, or (native
                structured output) a schema the questions cannot fill; before any call.
            JudgeError: the Jev call failed (`ModelError` when a `ModelJudgeClient`'s model did).
        """
        fields, single = self._check(prompt)
        state = (self._state_converter or self.default_state)(prompt)
        model = prompt.options.model or self._model
        # One call of this model is one call of its client: a client that records its own span
        # (JudgeClient) records into the chain's `chat` span instead of opening a second one.
        # An unanswered question becomes `null` (seed 004's library), so the client's own check
        # lets it through; whatever is answered is still checked.
        with same_call(), missing_answers_allowed():
            response = await self._client.system_one(state, self._questions, model=model)
        check_answers(response, self._questions, allow_missing=True)
        if self._answer_renderer is not None:
            text = self._answer_renderer(response)
        elif single is not None:
            value = json.loads(self.answers_as_json(response, fields=(single,)))[single]
            text = json.dumps({WRAPPER_KEY: value}, ensure_ascii=False)
        else:
            names = fields or tuple(self._questions)
            _warn_missing(response, names)
            text = self.answers_as_json(response, fields=names)
        generation = Generation(
            AssistantMessage(text),
            {"finish_reason": _FINISH_REASON, RESPONSE_METADATA_KEY: response},
        )
        return ChatResponse(
            (generation,),
            ChatResponseMetadata(
                id=response.request_id,
                model=response.model,
                usage=response.usage,
                finish_reasons=(_FINISH_REASON,),
            ),
        )

    def stream(self, prompt: Prompt) -> AsyncIterator[ChatResponse]:
        """Refused: Jev answers every question at once, as numbers, not as generated text.

        Raises:
            NotImplementedError: always.
        """
        raise NotImplementedError(
            "JevChatModel does not stream: Jev answers every question at once, as numbers, not "
            "as generated text; use call(), content() or entity()"
        )

    def _check(self, prompt: Prompt) -> tuple[tuple[str, ...], str | None]:
        """Refuse what Jev cannot do; say what the reply holds.

        Returns the fields the reply must hold (empty: every question) and the one question
        answering a single-value target (`None`: the reply is an object).
        """
        options = prompt.options
        if options.tools:
            names = ", ".join(t.name for t in options.tools)
            raise UserError(
                f"JevChatModel cannot call tools, but the prompt carries tool definitions "
                f"({names}); it classifies, it does not generate. Remove them from the prompt's "
                "options."
            )
        for message in prompt.messages:
            if getattr(message, "media", None):
                raise UserError(
                    f"a {message.role} message carries media; JevChatModel classifies text only. "
                    "Remove the media or describe it in text."
                )
        spec = prompt.output_spec
        if spec is not None:
            return self._check_spec(spec)
        # A response format set by hand (no entity()): only its schema says what is wanted.
        response_format = options.response_format
        if response_format is None or response_format.schema is None:
            return (), None
        if self._answer_renderer is not None:
            if is_list_target(response_format.schema):
                check_schema(response_format.schema, self._questions)  # the list-target error
            return (), None
        return self._selected(check_schema(response_format.schema, self._questions)), None

    def _check_spec(self, spec: RenderedOutput) -> tuple[tuple[str, ...], str | None]:
        """The reply `entity()`'s spec asks for, native or prompt-based alike."""
        schema = spec.schema
        is_list = spec.wrapped and is_list_target(schema)
        if self._answer_renderer is not None:
            # A custom renderer owns the reply's shape; only a list target stays impossible.
            if is_list:
                check_schema(schema, self._questions)  # raises the list-target error
            return (), None
        if spec.wrapped and not is_list:
            return (), check_scalar(schema, self._questions, target=spec.name)
        return self._selected(check_schema(schema, self._questions)), None

    def _selected(self, wanted: tuple[str, ...]) -> tuple[str, ...]:
        # Declaration order, like the full reply; the schema only selects the fields.
        return tuple(name for name in self._questions if name in wanted)

    @staticmethod
    def default_state(prompt: Prompt) -> dict[str, Any]:
        """The default state: `{"system": ..., "messages": [{"role", "content"}, ...]}`.

        System messages are joined with a blank line (no `system` key without one); user and
        assistant messages with text follow in order; tool calls and tool results are left out.
        The format instructions `entity(..., native=False)` appended to the last user message
        are removed, from that message only: the ones rendered from `prompt.output_spec`.
        """
        last_user = prompt.last_user_message()
        spec = prompt.output_spec
        system: list[str] = []
        messages: list[dict[str, str]] = []
        for message in prompt.messages:
            if isinstance(message, SystemMessage):
                if message.text.strip():
                    system.append(message.text)
            elif isinstance(message, UserMessage):
                text = message.text
                if message is last_user and spec is not None:
                    text = spec.without_instructions(text)
                if text.strip():
                    messages.append({"role": "user", "content": text})
            elif isinstance(message, AssistantMessage) and message.text.strip():
                messages.append({"role": "assistant", "content": message.text})
        state: dict[str, Any] = {}
        if system:
            state[SYSTEM_FIELD] = "\n\n".join(system)
        state[MESSAGES_FIELD] = messages
        return state

    @staticmethod
    def without_format_instructions(text: str) -> str:
        """`text` without the format instructions `entity(..., native=False)` appended to it.

        For custom state converters, which receive the prompt as sent.
        """
        return strip_format_instructions(text)

    @staticmethod
    def answers_as_json(response: SystemOneResponse, *, fields: tuple[str, ...] = ()) -> str:
        """The answers as a JSON object: a noul's value, a choice's label, a score's value.

        With `fields`, exactly those fields in that order; else every answer of the response. A
        field the response has no answer for (or only one of a type this version does not model)
        is `null`, as in seed 004's library: one missing answer does not lose the others, and the
        whole response stays in the generation's metadata.
        """
        names = fields or tuple(response.answers)
        answers = response.answers
        return json.dumps(
            {name: _value_of(answers[name]) if name in answers else None for name in names},
            ensure_ascii=False,
        )

    def __repr__(self) -> str:
        return f"JevChatModel({self._client!r}, questions=[{', '.join(self._questions)}])"


def _warn_missing(response: SystemOneResponse, names: tuple[str, ...]) -> None:
    missing = [name for name in names if name not in response.answers]
    if missing:
        # The reply says `null`; operators should still learn that Jev left questions out.
        _log.warning(
            "JevChatModel: the Jev response (request id %s) has no usable answer for %s; the "
            "reply holds null for it",
            response.request_id,
            ", ".join(map(repr, missing)),
        )


def _value_of(answer: Answer) -> float | str:
    if isinstance(answer, NoulAnswer):
        return answer.noul
    if isinstance(answer, ChoiceAnswer):
        return answer.choice
    if isinstance(answer, ScoreAnswer):
        return answer.score
    raise TypeError(f"unknown answer type {type(answer).__name__}")  # pragma: no cover


def _default_model_of(client: SystemOneClient) -> str | None:
    """The client's default model: `JudgeClient.model`, or a `ModelJudgeClient`'s model's."""
    model = getattr(client, "model", None)
    if isinstance(model, str) and model:
        return model
    chat_model = getattr(client, "chat_model", None)
    if isinstance(chat_model, ChatModel):
        return chat_model.model_name
    return None
