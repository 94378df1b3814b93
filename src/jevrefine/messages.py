"""Messages, prompts, options and responses: the values that travel through a `ChatClient`.

Every type here is an immutable, slotted dataclass (cheap to build on the hot path, positional
construction like `UserMessage("hi")`), and each round-trips through JSON with pydantic:

```python
data = PROMPT_ADAPTER.dump_json(prompt)
assert PROMPT_ADAPTER.validate_json(data) == prompt
```

Sequences are stored as tuples and metadata as read-only mappings, so a value handed to an advisor
cannot be changed behind the back of the code that made it.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from typing import TYPE_CHECKING, Annotated, Any, Literal, Protocol, TypeAlias

import pydantic

from . import _validate
from .exceptions import EmptyResponseError, UserError


class RenderedOutput(Protocol):
    """What a prompt says about the structured output it was rendered for (`Prompt.output_spec`).

    The part of `jevrefine.structured.OutputSpec` (the one implementation) that a model reads:
    `structured` builds on these messages, so they name it by this shape, not by its module.
    """

    @property
    def name(self) -> str:
        """The schema's name, derived from the target type."""
        ...

    @property
    def schema(self) -> dict[str, Any]:
        """The JSON schema the answer must fit (an object schema)."""
        ...

    @property
    def wrapped(self) -> bool:
        """Whether the value sits under `{"result": ...}` because the type is not an object."""
        ...

    @property
    def native(self) -> bool:
        """`True`: sent as the response format; `False`: as prompt instructions."""
        ...

    def without_instructions(self, text: str) -> str:
        """`text` without the format instructions rendered into it (unchanged if it has none)."""
        ...


if TYPE_CHECKING:
    _RenderedSpec: TypeAlias = RenderedOutput | None
else:
    # pydantic reads this annotation at run time (`PROMPT_ADAPTER`): to pydantic the field is an
    # opaque value it never serializes (`exclude=True`), not a protocol to build a schema for.
    _RenderedSpec = Any

__all__ = [
    "CHAT_RESPONSE_ADAPTER",
    "MESSAGES_ADAPTER",
    "PROMPT_ADAPTER",
    "AssistantMessage",
    "ChatOptions",
    "ChatResponse",
    "ChatResponseMetadata",
    "Generation",
    "Message",
    "Prompt",
    "RenderedOutput",
    "ResponseFormat",
    "SystemMessage",
    "TokenLogprob",
    "ToolCall",
    "ToolDefinition",
    "ToolResponse",
    "ToolResponseMessage",
    "Usage",
    "UserMessage",
    "concat_chunks",
]


class FrozenDict(dict[str, Any]):
    """A dict that refuses changes: metadata and schemas inside frozen values.

    A `dict` subclass rather than a `MappingProxyType` so that JSON serialisers take it as is.
    """

    __slots__ = ()

    def _refuse(self, *args: Any, **kwargs: Any) -> Any:
        raise TypeError(f"{type(self).__name__} is read-only; build a new value instead")

    __setitem__ = __delitem__ = __ior__ = _refuse
    clear = pop = popitem = setdefault = update = _refuse

    def __reduce__(self) -> tuple[Any, ...]:
        # Unpickling a dict subclass sets items one by one, which this class refuses.
        return (FrozenDict, (dict(self),))


_EMPTY: Mapping[str, Any] = FrozenDict()


def _frozen_mapping(value: Mapping[str, Any] | None) -> Mapping[str, Any]:
    if not value:
        return _EMPTY
    if isinstance(value, FrozenDict):
        return value
    return FrozenDict(value)


@dataclass(frozen=True, slots=True)
class Usage:
    """Token counts of one or more model or judge calls.

    One type serves model and judge usage alike; add two with `+` to total them.
    """

    input_tokens: int = 0
    """Tokens sent to the model (prompt tokens), cached ones included."""
    output_tokens: int = 0
    """Tokens the model produced (completion tokens)."""
    cache_read_input_tokens: int = 0
    """Of `input_tokens`, those read from the provider's prompt cache (Anthropic reports them)."""
    cache_creation_input_tokens: int = 0
    """Of `input_tokens`, those written to the provider's prompt cache."""

    @property
    def total_tokens(self) -> int:
        """Input plus output tokens."""
        return self.input_tokens + self.output_tokens

    def __add__(self, other: Usage) -> Usage:
        if not isinstance(other, Usage):
            return NotImplemented
        # A running total usually starts at zero: the sum is then the other side itself (both
        # are frozen), with no new value built (a refinement adds four per attempt).
        if not (
            other.input_tokens
            or other.output_tokens
            or other.cache_read_input_tokens
            or other.cache_creation_input_tokens
        ):
            return self
        if not (
            self.input_tokens
            or self.output_tokens
            or self.cache_read_input_tokens
            or self.cache_creation_input_tokens
        ):
            return other
        return Usage(
            self.input_tokens + other.input_tokens,
            self.output_tokens + other.output_tokens,
            self.cache_read_input_tokens + other.cache_read_input_tokens,
            self.cache_creation_input_tokens + other.cache_creation_input_tokens,
        )


@dataclass(frozen=True, slots=True)
class ToolCall:
    """A model's request to call a tool."""

    id: str
    """The provider's id for this call (may be blank for providers that send none)."""
    name: str
    """The tool's name."""
    arguments: str
    """The arguments as the JSON string the model sent, unparsed."""

    def parsed_arguments(self) -> Any:
        """The arguments decoded from JSON, or the raw string when they are not valid JSON."""
        try:
            return json.loads(self.arguments) if self.arguments else {}
        except (ValueError, RecursionError):  # nesting too deep for the decoder: not usable JSON
            return self.arguments


@dataclass(frozen=True, slots=True)
class ToolResponse:
    """A tool's result, sent back to the model."""

    id: str
    """The id of the `ToolCall` this answers."""
    name: str
    """The tool's name."""
    data: str
    """The result as text: a `str` result as is, anything else JSON-encoded."""


@dataclass(frozen=True, slots=True)
class SystemMessage:
    """Instructions for the model."""

    text: str
    """The instructions."""
    role: Literal["system"] = "system"
    """Discriminator for JSON; always `"system"`."""


@dataclass(frozen=True, slots=True)
class UserMessage:
    """A message from the user."""

    text: str
    """What the user wrote."""
    role: Literal["user"] = "user"
    """Discriminator for JSON; always `"user"`."""


@dataclass(frozen=True, slots=True)
class AssistantMessage:
    """A message from the model: text, tool calls, or both."""

    text: str = ""
    """The answer's text (empty when the model only called tools)."""
    tool_calls: tuple[ToolCall, ...] = ()
    """The tools the model asked to call, in the order it asked."""
    role: Literal["assistant"] = "assistant"
    """Discriminator for JSON; always `"assistant"`."""

    def __post_init__(self) -> None:
        if not isinstance(self.tool_calls, tuple):
            object.__setattr__(self, "tool_calls", tuple(self.tool_calls))

    @property
    def has_tool_calls(self) -> bool:
        """Whether the model asked for at least one tool call."""
        return bool(self.tool_calls)


@dataclass(frozen=True, slots=True)
class ToolResponseMessage:
    """The results of one model turn's tool calls, in call order."""

    responses: tuple[ToolResponse, ...] = ()
    """One response per tool call."""
    role: Literal["tool"] = "tool"
    """Discriminator for JSON; always `"tool"`."""

    def __post_init__(self) -> None:
        if not isinstance(self.responses, tuple):
            object.__setattr__(self, "responses", tuple(self.responses))


Message: TypeAlias = Annotated[
    SystemMessage | UserMessage | AssistantMessage | ToolResponseMessage,
    pydantic.Discriminator("role"),
]
"""Any message of a conversation, discriminated by its `role` in JSON."""


@dataclass(frozen=True, slots=True)
class ToolDefinition:
    """What a model is told about a tool it may call."""

    name: str
    """The tool's name, unique within a request."""
    description: str
    """What the tool does, for the model."""
    parameters: Mapping[str, Any] = field(
        default_factory=lambda: {"type": "object", "properties": {}}
    )
    """The JSON schema of the tool's arguments (an object schema)."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "parameters", _frozen_mapping(self.parameters))


@dataclass(frozen=True, slots=True, kw_only=True)
class ResponseFormat:
    """The shape the model must answer in (structured output)."""

    type: Literal["text", "json_object", "json_schema"] = "json_schema"
    """`json_schema` enforces `schema`; `json_object` any JSON object; `text` free text."""
    name: str = "response"
    """A name for the schema (OpenAI requires one; letters, digits, `_` and `-`)."""
    schema: Mapping[str, Any] | None = None
    """The JSON schema the answer must validate against (for `json_schema`)."""
    strict: bool | None = None
    """Ask the provider for strict schema adherence, where it supports it."""

    def __post_init__(self) -> None:
        if self.type == "json_schema" and self.schema is None:
            raise UserError(
                "ResponseFormat(type='json_schema') needs a schema=; pass a JSON schema dict"
            )
        if self.schema is not None:
            object.__setattr__(self, "schema", _frozen_mapping(self.schema))


@dataclass(frozen=True, slots=True, kw_only=True)
class ChatOptions:
    """Options of one model call. `None` everywhere means "the model's own default".

    Options merge field by field: `base.merge(override)` keeps every field that `override` leaves
    unset. Build them with keywords; an unknown keyword raises a `UserError` listing the valid ones.
    """

    model: str | None = None
    """The model to ask; the adapter's model when unset."""
    temperature: float | None = None
    """Sampling temperature."""
    top_p: float | None = None
    """Nucleus sampling mass."""
    max_tokens: int | None = None
    """Upper bound on the tokens generated."""
    stop: tuple[str, ...] | None = None
    """Sequences that end the generation."""
    seed: int | None = None
    """Seed for reproducible sampling, where the provider supports it."""
    response_format: ResponseFormat | None = None
    """Structured output: the shape the answer must take."""
    logprobs: bool | None = None
    """Return the log probability of each generated token."""
    top_logprobs: int | None = None
    """With `logprobs`, how many alternatives to return per token."""
    tools: tuple[ToolDefinition, ...] | None = None
    """Tools the model may call (filled from the request's tool callbacks by the chain)."""
    tool_choice: Literal["auto", "none", "required"] | None = None
    """Whether the model may, must not, or must call a tool."""
    extra_body: Mapping[str, Any] | None = None
    """Extra JSON fields sent to OpenAI-compatible servers as is (e.g. a llama.cpp grammar)."""

    def __post_init__(self) -> None:
        # Only the fields that are set are looked at: options are built on every call.
        for name in _OPTION_NAME_LIST:
            value = getattr(self, name)
            if value is not None:
                checked = _OPTION_CHECKS[name](value)
                if checked is not value:
                    object.__setattr__(self, name, checked)

    @classmethod
    def of(cls, **kwargs: Any) -> ChatOptions:
        """Build options from keywords, with a clear error for a keyword that is not an option."""
        unknown = sorted(set(kwargs) - _OPTION_NAMES)
        if unknown:
            raise UserError(
                f"unknown chat option(s) {', '.join(map(repr, unknown))}; "
                f"valid options are: {', '.join(sorted(_OPTION_NAMES))}. "
                "Pass provider-specific fields through extra_body={...}."
            )
        try:
            return cls(**kwargs)
        except TypeError as exc:  # pragma: no cover - guarded by the name check above
            raise UserError(str(exc)) from exc

    def merge(self, override: ChatOptions | None) -> ChatOptions:
        """A copy of these options with every field that `override` sets taken from it."""
        if override is None or override is self:
            return self
        changes = {
            name: value
            for name in _OPTION_NAME_LIST
            if (value := getattr(override, name)) is not None
        }
        return replace(self, **changes) if changes else self

    def set_fields(self) -> dict[str, Any]:
        """The fields that are set (not `None`), by name."""
        return {n: v for n in _OPTION_NAME_LIST if (v := getattr(self, n)) is not None}


def _stop(value: Any) -> tuple[str, ...]:
    if type(value) is tuple and all(type(item) is str for item in value):
        return value
    stops = (value,) if isinstance(value, str) else value
    if isinstance(stops, bytes) or not isinstance(stops, Iterable):
        raise UserError(
            f"stop={_validate.shown(value)} is not text: pass a string or a list of strings, "
            "e.g. stop=['\\n\\n']"
        )
    stops = tuple(stops)
    if not all(isinstance(item, str) for item in stops):
        raise UserError(
            f"stop={_validate.shown(value)} holds a value that is not a string: pass strings "
            "only, e.g. stop=['\\n\\n']"
        )
    return stops


def _tools(value: Any) -> tuple[ToolDefinition, ...]:
    if type(value) is tuple and all(type(t) is ToolDefinition for t in value):
        return value
    tools = tuple(value) if isinstance(value, Iterable) and not isinstance(value, str) else None
    if tools is None or not all(isinstance(t, ToolDefinition) for t in tools):
        raise UserError(
            f"tools={_validate.shown(value)} is not a list of ToolDefinitions: pass the tools to "
            "ChatClient(tools=[...]) and the chain fills this in"
        )
    return tools


def _instance_of(name: str, kind: type, hint: str) -> Any:
    def check(value: Any) -> Any:
        if not isinstance(value, kind):
            raise UserError(f"{name}={_validate.shown(value)} is not a {kind.__name__}: {hint}")
        return value

    return check


def _extra_body(value: Any) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise UserError(
            f"extra_body={_validate.shown(value)} is not a mapping: pass a dict of the JSON "
            "fields to send, e.g. extra_body={'grammar': '...'}"
        )
    return _frozen_mapping(value)


_TOOL_CHOICES: tuple[str, ...] = ("auto", "none", "required")


def _ranged(name: str, low: float, high: float, example: float) -> Callable[[Any], Any]:
    def check(value: Any) -> Any:
        # The common case returns at once (options are built on every call); NaN fails the
        # comparison and goes to the validator, which names it.
        if type(value) is float and low <= value <= high:
            return value
        return _validate.number(name, value, minimum=low, maximum=high, example=example)

    return check


def _whole(name: str, low: int | None, high: int | None, example: int) -> Callable[[Any], Any]:
    def check(value: Any) -> Any:
        if type(value) is int and (low is None or value >= low) and (high is None or value <= high):
            return value
        return _validate.integer(name, value, minimum=low, maximum=high, example=example)

    return check


_OPTION_CHECKS: dict[str, Callable[[Any], Any]] = {
    "model": lambda v: _validate.text("model", v, nonblank=True, example="gpt-4o-mini"),
    "temperature": _ranged("temperature", 0.0, 2.0, 0.2),
    "top_p": _ranged("top_p", 0.0, 1.0, 0.9),
    "max_tokens": _whole("max_tokens", 1, None, 256),
    "stop": _stop,
    "seed": _whole("seed", None, None, 42),
    "response_format": _instance_of(
        "response_format", ResponseFormat, "pass ResponseFormat(schema={...}), or use .entity()"
    ),
    "logprobs": lambda v: _validate.boolean("logprobs", v),
    "top_logprobs": _whole("top_logprobs", 0, 20, 5),
    "tools": _tools,
    "tool_choice": lambda v: _validate.choice("tool_choice", v, _TOOL_CHOICES),
    "extra_body": _extra_body,
}
"""One check per option, each returning the value to store (e.g. `stop='x'` → `('x',)`)."""


_OPTION_NAME_LIST = tuple(f.name for f in fields(ChatOptions))
_OPTION_NAMES = frozenset(_OPTION_NAME_LIST)
_DEFAULT_OPTIONS = ChatOptions()


@dataclass(frozen=True, slots=True)
class Prompt:
    """The messages and options of one model call."""

    messages: tuple[Message, ...]
    """The conversation, oldest first."""
    options: ChatOptions = _DEFAULT_OPTIONS
    """Options of this call."""
    output_spec: Annotated[_RenderedSpec, pydantic.Field(exclude=True)] = field(
        default=None, compare=False, repr=False
    )
    """The structured output this prompt was rendered for, set by the chain's terminal link.

    The rendering is already in the messages or options (`OutputSpec.render`); this tells a
    model what was asked without parsing text. Adapters send what is rendered and ignore it.
    """

    def __post_init__(self) -> None:
        if not isinstance(self.messages, tuple):
            object.__setattr__(self, "messages", tuple(self.messages))

    @property
    def system_text(self) -> str | None:
        """The system messages joined by a blank line, or `None` without any."""
        parts = [m.text for m in self.messages if isinstance(m, SystemMessage)]
        return "\n\n".join(parts) if parts else None

    def last_user_message(self) -> UserMessage | None:
        """The last user message, if any."""
        for message in reversed(self.messages):
            if isinstance(message, UserMessage):
                return message
        return None

    def with_messages(self, messages: Iterable[Message]) -> Prompt:
        """A copy with other messages and the same options."""
        return Prompt(tuple(messages), self.options, self.output_spec)

    def with_options(self, options: ChatOptions) -> Prompt:
        """A copy with other options and the same messages."""
        return Prompt(self.messages, options, self.output_spec)

    def with_output_spec(self, output_spec: RenderedOutput | None) -> Prompt:
        """A copy that says it was rendered for `output_spec` (see `OutputSpec.render`)."""
        return Prompt(self.messages, self.options, output_spec)


@dataclass(frozen=True, slots=True)
class TokenLogprob:
    """The log probability of one generated token, with the most likely alternatives."""

    token: str
    """The token's text."""
    logprob: float
    """Its natural-log probability."""
    top: tuple[tuple[str, float], ...] = ()
    """The most likely tokens at this position and their log probabilities, best first."""

    def __post_init__(self) -> None:
        if not isinstance(self.top, tuple):
            object.__setattr__(self, "top", tuple(tuple(t) for t in self.top))


@dataclass(frozen=True, slots=True)
class Generation:
    """One answer of the model and what the provider said about it.

    Well-known metadata keys: `finish_reason` (lowercase: `stop`, `length`, `tool_calls`,
    `content_filter`) and `logprobs` (a list of `TokenLogprob`, when requested and returned).
    """

    output: AssistantMessage
    """The answer."""
    metadata: Mapping[str, Any] = field(default_factory=lambda: _EMPTY)
    """Provider facts about this answer (read-only)."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "metadata", _frozen_mapping(self.metadata))

    @property
    def text(self) -> str:
        """The answer's text."""
        return self.output.text

    @property
    def finish_reason(self) -> str | None:
        """Why the model stopped, lowercase, or `None` when the provider did not say."""
        reason = self.metadata.get("finish_reason")
        return reason if isinstance(reason, str) else None

    @property
    def logprobs(self) -> tuple[TokenLogprob, ...] | None:
        """The answer's token log probabilities, when requested and returned."""
        value = self.metadata.get("logprobs")
        if value is None:
            return None
        return tuple(
            item if isinstance(item, TokenLogprob) else _TOKEN_LOGPROB_ADAPTER.validate_python(item)
            for item in value
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class ChatResponseMetadata:
    """What the provider said about a whole response."""

    id: str | None = None
    """The provider's id of the response."""
    model: str | None = None
    """The model that actually answered (may differ from the requested one)."""
    usage: Usage = Usage()
    """Tokens used by this call."""
    finish_reasons: tuple[str, ...] = ()
    """One finish reason per generation, lowercase."""
    extra: Mapping[str, Any] = field(default_factory=lambda: _EMPTY)
    """Anything else the adapter records (read-only)."""

    def __post_init__(self) -> None:
        if not isinstance(self.finish_reasons, tuple):
            object.__setattr__(self, "finish_reasons", tuple(self.finish_reasons))
        object.__setattr__(self, "extra", _frozen_mapping(self.extra))


@dataclass(frozen=True, slots=True)
class ChatResponse:
    """A model's response: one or more generations and the response metadata."""

    results: tuple[Generation, ...]
    """The generations; usually exactly one."""
    metadata: ChatResponseMetadata = ChatResponseMetadata()
    """Id, model, usage and finish reasons."""

    def __post_init__(self) -> None:
        if not isinstance(self.results, tuple):
            object.__setattr__(self, "results", tuple(self.results))

    @property
    def result(self) -> Generation:
        """The first generation.

        Raises:
            EmptyResponseError: the response holds no generation.
        """
        if not self.results:
            raise EmptyResponseError(
                "the model returned no generations; check the provider's content filter and "
                "that max_tokens leaves room for an answer"
            )
        return self.results[0]

    @property
    def text(self) -> str:
        """The first generation's text."""
        return self.result.output.text

    @classmethod
    def of_text(
        cls,
        text: str,
        *,
        model: str | None = None,
        usage: Usage | None = None,
        finish_reason: str = "stop",
    ) -> ChatResponse:
        """A one-generation response holding `text` (handy in tests and in advisors)."""
        return cls(
            (Generation(AssistantMessage(text), {"finish_reason": finish_reason}),),
            ChatResponseMetadata(
                model=model, usage=usage or Usage(), finish_reasons=(finish_reason,)
            ),
        )


def concat_chunks(chunks: Sequence[ChatResponse]) -> ChatResponse:
    """Join the chunks of a streamed response into one response.

    Texts are concatenated; tool calls (which adapters deliver whole) are collected in order;
    the id, model, usage and finish reasons are the last ones reported.
    """
    text: list[str] = []
    tool_calls: list[ToolCall] = []
    generation_meta: dict[str, Any] = {}
    # The metadata is built once at the end: one object per chunk cost more than the rest.
    response_id: str | None = None
    model: str | None = None
    usage = Usage()
    finish_reasons: tuple[str, ...] = ()
    extra: dict[str, Any] = {}
    for chunk in chunks:
        for generation in chunk.results[:1]:
            text.append(generation.output.text)
            tool_calls.extend(generation.output.tool_calls)
            generation_meta.update(generation.metadata)
        m = chunk.metadata
        response_id = m.id or response_id
        model = m.model or model
        if m.usage.total_tokens:
            usage = m.usage
        finish_reasons = m.finish_reasons or finish_reasons
        extra.update(m.extra)
    meta = ChatResponseMetadata(
        id=response_id, model=model, usage=usage, finish_reasons=finish_reasons, extra=extra
    )
    output = AssistantMessage("".join(text), tuple(tool_calls))
    return ChatResponse((Generation(output, generation_meta),), meta)


def user_options_from_kwargs(options: ChatOptions | None, kwargs: Mapping[str, Any]) -> ChatOptions:
    """Options from either a `ChatOptions` or keywords (not both), checked."""
    if options is not None and kwargs:
        raise UserError("pass either a ChatOptions or keyword options, not both")
    if options is not None:
        if not isinstance(options, ChatOptions):
            raise UserError(
                f"options={_validate.shown(options)} is not a ChatOptions: pass "
                "ChatOptions(temperature=0.2), or the options as keywords"
            )
        return options
    return ChatOptions.of(**kwargs)


def messages_of(values: Sequence[Message]) -> tuple[Message, ...]:
    """Check that every value is a message and return them as a tuple."""
    allowed = (SystemMessage, UserMessage, AssistantMessage, ToolResponseMessage)
    for value in values:
        if not isinstance(value, allowed):
            raise UserError(
                f"expected a message (SystemMessage, UserMessage, AssistantMessage or "
                f"ToolResponseMessage), got {type(value).__name__}"
            )
    return tuple(values)


_TOKEN_LOGPROB_ADAPTER: pydantic.TypeAdapter[TokenLogprob] = pydantic.TypeAdapter(TokenLogprob)

MESSAGES_ADAPTER: pydantic.TypeAdapter[list[Message]] = pydantic.TypeAdapter(list[Message])
"""Validates and serialises a list of messages (JSON round-trip)."""

PROMPT_ADAPTER: pydantic.TypeAdapter[Prompt] = pydantic.TypeAdapter(Prompt)
"""Validates and serialises a `Prompt` (JSON round-trip)."""

CHAT_RESPONSE_ADAPTER: pydantic.TypeAdapter[ChatResponse] = pydantic.TypeAdapter(ChatResponse)
"""Validates and serialises a `ChatResponse` (JSON round-trip)."""
