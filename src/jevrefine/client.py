"""`ChatClient` and its fluent, immutable prompt spec.

```python
client = ChatClient(model, system="Answer in one sentence.", advisors=[...])
answer = await client.prompt("What is the weather in Paris?").content()
reply = await client.prompt().system("...").user("...").options(temperature=0).call()
triage = await client.prompt(ticket).entity(Triage)
async for chunk in client.prompt("Tell me a story").stream():
    print(chunk, end="")
async for event in client.prompt("Tell me a story").stream_events():
    ...  # AttemptStarted, TextDelta, AttemptJudged, AttemptRejected, Completed
```

A spec is a value: every builder method returns a new spec, so one spec can be kept and awaited
many times, concurrently. Defaults set on the client apply to every prompt; the spec overrides them.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Final, TypeVar, overload

from opentelemetry import context as otel_context
from opentelemetry import trace

from . import _validate
from ._request import ChatClientRequest, ChatClientResponse
from .advisors.chain import (
    CallAdvisor,
    CallAdvisorChain,
    ModelLink,
    check_advisor,
    close_streams,
    closing_stream,
    sort_advisors,
)
from .advisors.tool_calling import ToolCallingAdvisor
from .exceptions import StreamingNotSupportedError, UserError
from .messages import (
    ChatOptions,
    ChatResponse,
    Message,
    Prompt,
    SystemMessage,
    UserMessage,
    concat_chunks,
    messages_of,
    user_options_from_kwargs,
)
from .models.base import ChatModel
from .models.instrumented import instrument_model
from .streaming import (
    FLUSH,
    AttemptStarted,
    Completed,
    EventSink,
    StreamEvent,
    TextDelta,
    attach_sink,
)
from .structured import output_spec
from .telemetry import (
    CaptureMode,
    InstrumentationSettings,
    Telemetry,
    mark_failed,
)

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Coroutine, Mapping, Sequence

    from opentelemetry._logs import LoggerProvider
    from opentelemetry.metrics import MeterProvider
    from opentelemetry.trace import TracerProvider

    from .tools import ToolCallback

__all__ = ["ChatClient", "ChatClientRequest", "ChatClientResponse", "PromptSpec"]

T = TypeVar("T")

_NO_PARAMS: Mapping[str, Any] = MappingProxyType({})
_WORKFLOW: Final = "jevrefine.chat_client"


class ChatClient:
    """The entry point: a model, default settings, and the advisor chain around every call.

    Args:
        model: the model every prompt goes to.
        system: default system message (a prompt's `.system(...)` replaces it).
        advisors: default advisors, run in ascending `order` around each call.
        tools: default tools the model may call.
        options: default `ChatOptions` (a prompt's `.options(...)` overrides them field by field).
        tracer_provider: OpenTelemetry tracer provider; when `None`, the one
            `jevrefine.telemetry.configure(...)` set, else the global one.
        meter_provider: OpenTelemetry meter provider; the same fallbacks.
        logger_provider: OpenTelemetry logger provider for the evaluation, guardrail and
            (opt-in) content events; the same fallbacks (the global one is a no-op unless set).
        capture_content: record message content (`True`: on spans; or a `CaptureMode`). Off
            unless this, `configure(...)` or `OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT`
            says so.
        trace_advisors: one `advisor {name}` span per advisor per call.
        legacy_attributes: also emit seed 004's older attributes (`gen_ai.system`, upper-case
            finish reasons, a `total` token type); `None`: as `configure(...)` set (off).
        instrumentation: all of the above telemetry settings as one `InstrumentationSettings`
            (shareable with a `JudgeClient` or `ModelJudgeClient`); not together with them.

    The client never closes the model it was given: whoever created the model closes it.
    """

    __slots__ = (
        "_advisors",
        "_default_chain",
        "_instrumented",
        "_model",
        "_options",
        "_system",
        "_telemetry",
        "_tool_chain",
        "_tools",
        "_trace_advisors",
    )

    def __init__(
        self,
        model: ChatModel,
        *,
        system: str | None = None,
        advisors: Iterable[CallAdvisor] = (),
        tools: Iterable[ToolCallback] = (),
        options: ChatOptions | None = None,
        tracer_provider: TracerProvider | None = None,
        meter_provider: MeterProvider | None = None,
        capture_content: bool | CaptureMode | None = None,
        trace_advisors: bool = False,
        legacy_attributes: bool | None = None,
        logger_provider: LoggerProvider | None = None,
        instrumentation: InstrumentationSettings | None = None,
    ) -> None:
        if not isinstance(model, ChatModel):
            raise UserError(
                f"ChatClient needs a ChatModel, got {type(model).__name__}; pass e.g. "
                "OpenAIChatModel('gpt-4o-mini') or jevrefine.testing.FunctionModel(...)"
            )
        _validate.text("system", system, optional=True, example="Answer in one sentence.")
        if options is not None and not isinstance(options, ChatOptions):
            raise UserError(
                f"options={_validate.shown(options)} is not a ChatOptions: pass e.g. "
                "options=ChatOptions(temperature=0.2)"
            )
        trace_advisors = _validate.boolean("trace_advisors", trace_advisors)
        self._model = model
        self._system = system
        self._advisors = tuple(check_advisor(a) for a in _listed("advisors", advisors))
        self._tools = _check_tools(_listed("tools", tools))
        self._options = options or ChatOptions()
        self._telemetry = Telemetry(
            instrumentation,
            tracer_provider=tracer_provider,
            meter_provider=meter_provider,
            logger_provider=logger_provider,
            capture_content=capture_content,
            legacy_attributes=legacy_attributes,
        )
        self._instrumented = instrument_model(model, self._telemetry)
        self._trace_advisors = trace_advisors
        self._build_shared_chains()

    def _build_shared_chains(self) -> None:
        # Chains are immutable and re-enterable (and the tool loop keeps no state between
        # requests), so prompts that add no advisors share one of these two.
        self._default_chain = self._build_chain(self._advisors)
        self._tool_chain = self._build_chain(self._advisors, tool_loop=True)

    @property
    def model(self) -> ChatModel:
        """The model prompts go to."""
        return self._model

    @property
    def advisors(self) -> tuple[CallAdvisor, ...]:
        """The default advisors, in registration order."""
        return self._advisors

    @property
    def telemetry(self) -> Telemetry:
        """The client's tracer, instruments and content-capture mode."""
        return self._telemetry

    def copy(
        self, *, model: ChatModel | None = None, advisors: Iterable[CallAdvisor] | None = None
    ) -> ChatClient:
        """A client like this one, with `model` and/or `advisors` in place of its own.

        The system message, tools, options and telemetry (the same `Telemetry`: one set of
        instruments) are this client's. `refine_many` sends a batch with limits through such a
        copy: its model and its judges' clients wrapped in the batch's limiters.

        Raises:
            UserError: `model` is not a `ChatModel`, or an advisor is not one.
        """
        clone = copy.copy(self)
        if model is not None:
            if not isinstance(model, ChatModel):
                raise UserError(f"model={_validate.shown(model)} is not a ChatModel")
            clone._model = model
            clone._instrumented = instrument_model(model, self._telemetry)
        if advisors is not None:
            clone._advisors = tuple(check_advisor(a) for a in _listed("advisors", advisors))
        clone._build_shared_chains()
        return clone

    def prompt(self, text: str | None = None) -> PromptSpec:
        """Start a prompt; `prompt(t)` is the same as `prompt().user(t)`."""
        spec = PromptSpec(self)
        return spec if text is None else spec.user(text)

    def _chain(
        self,
        spec: PromptSpec,
        *,
        parent: otel_context.Context | None,
        request: ChatClientRequest | None = None,
    ) -> CallAdvisorChain:
        needs_tool_loop = request is not None and bool(request.tools) and self._model.supports_tools
        if not spec._advisors and parent is None:
            return self._tool_chain if needs_tool_loop else self._default_chain
        return self._build_chain(
            self._advisors + spec._advisors, parent=parent, tool_loop=needs_tool_loop
        )

    def _build_chain(
        self,
        advisors: tuple[CallAdvisor, ...],
        *,
        parent: otel_context.Context | None = None,
        tool_loop: bool = False,
    ) -> CallAdvisorChain:
        if tool_loop and not any(isinstance(a, ToolCallingAdvisor) for a in advisors):
            # Added last, so it keeps registration order on ties: client, prompt, automatic.
            advisors = (*advisors, ToolCallingAdvisor())
        return CallAdvisorChain(
            sort_advisors(advisors),
            ModelLink(self._instrumented, parent=parent),
            trace_advisors=self._trace_advisors,
        )

    def _call(
        self, spec: PromptSpec, request: ChatClientRequest
    ) -> Coroutine[Any, Any, ChatClientResponse]:
        # A plain method, like `CallAdvisorChain.next_call`: without telemetry to record, the
        # chain's coroutine is awaited directly, one coroutine layer fewer on every I/O wake-up.
        chain = self._chain(spec, parent=None, request=request)
        if self._telemetry.active():
            return self._traced_call(chain, request)
        return chain.next_call(request)

    async def _traced_call(
        self, chain: CallAdvisorChain, request: ChatClientRequest
    ) -> ChatClientResponse:
        telemetry = self._telemetry
        span = telemetry.start_workflow_span()
        started = time.perf_counter()
        error_type: str | None = None
        token = otel_context.attach(trace.set_span_in_context(span))
        try:
            return await chain.next_call(request)
        except BaseException as exc:
            error_type = mark_failed(span, exc, describe=False)
            raise
        finally:
            otel_context.detach(token)
            span.end()
            telemetry.record_workflow(time.perf_counter() - started, _WORKFLOW, error_type)

    async def _stream(
        self, spec: PromptSpec, request: ChatClientRequest | None = None
    ) -> AsyncIterator[ChatClientResponse]:
        if request is None:
            request = spec.request()
        telemetry = self._telemetry
        span = telemetry.start_workflow_span()
        started = time.perf_counter()
        error_type: str | None = None
        # The stream's spans get their parent explicitly: attaching a context inside an async
        # generator would leak it into the consumer between chunks.
        chain = self._chain(spec, parent=trace.set_span_in_context(span), request=request)
        try:
            blocker = chain.first_non_streaming()
            if blocker is not None:
                raise StreamingNotSupportedError(
                    f"advisor {blocker.name!r}", "it needs the whole answer"
                )
            async for chunk in chain.next_stream(request):
                yield chunk
        except BaseException as exc:
            error_type = mark_failed(span, exc, describe=False)
            raise
        finally:
            # A consumer that left early: the model's stream (and its connection) closes now.
            await close_streams(request)
            span.end()
            telemetry.record_workflow(time.perf_counter() - started, _WORKFLOW, error_type)

    async def _stream_events(self, spec: PromptSpec) -> AsyncIterator[StreamEvent]:
        request = spec.request()
        sink = attach_sink(request)
        started = False
        chunks: list[ChatResponse] = []
        context = request.context
        async with closing_stream(self._stream(spec, request)) as stream:
            async for chunk in stream:
                # The sink's events happened before this chunk was yielded: they go first.
                for event in sink.drain():
                    started = started or isinstance(event, AttemptStarted)
                    yield event
                response = chunk.chat_response
                if response is FLUSH:
                    continue
                chunks.append(response)
                context = chunk.context
                text = _shown_text(response, sink)
                if text:
                    if not started:  # no self-refine: one attempt
                        started = True
                        yield AttemptStarted(1)
                    yield TextDelta(sink.attempt, text)
        for event in sink.drain():
            started = started or isinstance(event, AttemptStarted)
            yield event
        if not started:
            yield AttemptStarted(1)
        yield Completed(ChatClientResponse(concat_chunks(chunks), context))

    def __repr__(self) -> str:
        names = ", ".join(a.name for a in self._advisors)
        return f"ChatClient({self._model!r}, advisors=[{names}])"


def _shown_text(response: ChatResponse, sink: EventSink) -> str:
    """The text of a chunk that a `stream_events()` consumer has not seen yet."""
    if sink.live or not response.results:
        return ""  # a live self-refine has shown its text as events already
    return response.results[0].output.text


def _listed(name: str, values: object) -> tuple[Any, ...]:
    """`values` as a tuple; a single advisor or tool (or a string) is a mistake, named."""
    if isinstance(values, str | bytes) or not isinstance(values, Iterable):
        raise UserError(
            f"{name}={_validate.shown(values)} is not a list: pass a list, e.g. {name}=[...] "
            "(one item goes in a list too)"
        )
    return tuple(values)


def _check_tools(tools: Iterable[ToolCallback]) -> tuple[ToolCallback, ...]:
    checked = tuple(tools)
    for tool in checked:
        if not callable(getattr(tool, "call", None)) or not isinstance(
            getattr(tool, "name", None), str
        ):
            raise UserError(
                f"{tool!r} is not a tool; decorate a function with @jevrefine.tool or implement "
                "the ToolCallback protocol (name, description, parameters_schema, return_direct, "
                "async call(arguments))"
            )
    return checked


@dataclass(frozen=True, slots=True)
class PromptSpec:
    """An immutable, reusable description of one prompt. Builder methods return a new spec."""

    _client: ChatClient
    _system: str | None = None
    _user: str | None = None
    _messages: tuple[Message, ...] = ()
    _options: ChatOptions | None = None
    _advisors: tuple[CallAdvisor, ...] = ()
    _params: Mapping[str, Any] = field(default_factory=lambda: _NO_PARAMS)
    _tools: tuple[ToolCallback, ...] = ()
    _built: tuple[Prompt, tuple[ToolCallback, ...]] | None = field(default=None, compare=False)

    @property
    def client(self) -> ChatClient:
        """The client this prompt is sent through."""
        return self._client

    @property
    def prompt_advisors(self) -> tuple[CallAdvisor, ...]:
        """The advisors this prompt adds to its client's (`.advisors(...)`), in that order."""
        return self._advisors

    def copy(
        self, *, client: ChatClient | None = None, advisors: Iterable[CallAdvisor] | None = None
    ) -> PromptSpec:
        """This prompt sent through `client`, and/or with `advisors` in place of the ones it adds.

        Raises:
            UserError: `client` is not a `ChatClient`, or an advisor is not one.
        """
        changes: dict[str, Any] = {}
        if client is not None:
            if not isinstance(client, ChatClient):
                raise UserError(f"client={_validate.shown(client)} is not a ChatClient")
            changes["_client"] = client
        if advisors is not None:
            changes["_advisors"] = tuple(check_advisor(a) for a in _listed("advisors", advisors))
        return replace(self, **changes, _built=None)

    def system(self, text: str) -> PromptSpec:
        """Set the system message (replaces the client's default)."""
        if not isinstance(text, str):
            raise UserError(f"system text must be a str, got {type(text).__name__}")
        return replace(self, _system=text, _built=None)

    def user(self, text: str) -> PromptSpec:
        """Set the user message, sent after any `.messages(...)`."""
        if not isinstance(text, str):
            raise UserError(
                f"user text must be a str, got {type(text).__name__}; "
                "pass earlier turns with .messages(...)"
            )
        return replace(self, _user=text, _built=None)

    def messages(self, *messages: Message | Sequence[Message]) -> PromptSpec:
        """Add messages (a conversation history), sent before the user message."""
        flat: list[Any] = []
        for item in messages:
            if isinstance(item, (list, tuple)):
                flat.extend(item)
            else:
                flat.append(item)
        return replace(self, _messages=self._messages + messages_of(flat), _built=None)

    def options(self, options: ChatOptions | None = None, /, **kwargs: Any) -> PromptSpec:
        """Override options for this prompt: `.options(temperature=0)` or `.options(ChatOptions)`.

        Raises:
            UserError: a keyword that is not a `ChatOptions` field, or an invalid value.
        """
        new = user_options_from_kwargs(options, kwargs)
        merged = new if self._options is None else self._options.merge(new)
        return replace(self, _options=merged, _built=None)

    def advisors(self, *advisors: CallAdvisor, **params: Any) -> PromptSpec:
        """Add advisors for this prompt, and/or parameters for them (`conversation_id=...`).

        The parameters land in the request context under their names.
        """
        checked = tuple(check_advisor(a) for a in advisors)
        merged = {**self._params, **params} if params else self._params
        return replace(self, _advisors=self._advisors + checked, _params=merged)

    def tools(self, *tools: ToolCallback) -> PromptSpec:
        """Add tools the model may call on this prompt."""
        return replace(self, _tools=self._tools + _check_tools(tools), _built=None)

    def request(self) -> ChatClientRequest:
        """The request this spec sends into the advisor chain (a fresh context each time)."""
        built = self._built
        if built is None:
            built = self._build()
            # The spec is a value, so what it builds can be kept: a cache, not a state change.
            object.__setattr__(self, "_built", built)
        return ChatClientRequest(built[0], built[1], dict(self._params))

    def _build(self) -> tuple[Prompt, tuple[ToolCallback, ...]]:
        client = self._client
        system = self._system if self._system is not None else client._system
        messages: list[Message] = []
        if system is not None:
            messages.append(SystemMessage(system))
        messages.extend(self._messages)
        if self._user is not None:
            messages.append(UserMessage(self._user))
        if not any(not isinstance(m, SystemMessage) for m in messages):
            raise UserError(
                "the prompt has no user message; pass text to prompt(...), or call .user(...) "
                "or .messages(...)"
            )
        options = client._options.merge(self._options)
        tools = client._tools + self._tools if self._tools else client._tools
        return Prompt(tuple(messages), options), tools

    async def call(self) -> ChatClientResponse:
        """Send the prompt through the chain; the whole response and the shared context."""
        return await self._client._call(self, self.request())

    async def content(self) -> str:
        """Send the prompt; the answer's text."""
        return (await self._client._call(self, self.request())).content

    @overload
    async def entity(self, target: type[T], *, native: bool | None = None) -> T: ...

    @overload
    async def entity(self, target: Any, *, native: bool | None = None) -> Any: ...

    async def entity(self, target: Any, *, native: bool | None = None) -> Any:
        """Send the prompt and read the answer as `target`.

        `target` may be a pydantic model, a dataclass, a TypedDict, `dict`, `list[X]` or a
        scalar (`int`, `str`, ...). `native=True` sends its JSON schema as the response format;
        `native=False` appends format instructions to the last user message; `None` picks native
        where the model declares support (`ChatModel.supports_native_structured_output`).

        The request carries the spec (`ChatClientRequest.output_spec`); it is rendered into the
        prompt only at the chain's terminal link, so advisors (the judge, memory, retrieval, the
        guardrail) see the text the caller wrote.

        Raises:
            StructuredOutputError: the answer does not fit `target`; `raw_text` keeps the answer.
        """
        client = self._client
        if native is not None:
            native = _validate.boolean("native", native)
        use_native = client._model.supports_native_structured_output if native is None else native
        spec = output_spec(target, native=bool(use_native))
        request = self.request()
        response = await client._call(self, request.copy(output_spec=spec, context=request.context))
        return spec.parse(response.content, model_name=response.chat_response.metadata.model)

    def stream(self) -> AsyncIterator[str]:
        """Stream the answer's text chunk by chunk.

        Tool rounds (when a tool loop is in the chain) are resolved inside; the final round's
        text is streamed. Iterating raises `StreamingNotSupportedError` at the first item when an
        advisor in the chain needs the whole answer.
        """
        return self._stream_text()

    def stream_events(self) -> AsyncIterator[StreamEvent]:
        """Stream typed events, `Completed` (what `call()` returns) last.

        The events (`jevrefine.streaming`): `AttemptStarted`, `TextDelta`, `AttemptJudged`,
        `AttemptRejected`, `Completed`.
        Without self-refine: `AttemptStarted(1)`, the deltas, `Completed`. With it, what shows
        depends on its `stream_mode` (see `jevrefine.streaming`). Leaving the iteration early
        (or cancelling it) closes the model's stream and cancels any judging call in flight.
        """
        return self._client._stream_events(self)

    def stream_responses(self) -> AsyncIterator[ChatClientResponse]:
        """Stream the chunks as `ChatClientResponse`s (metadata and context included)."""
        return self._client._stream(self)

    async def _stream_text(self) -> AsyncIterator[str]:
        async with closing_stream(self._client._stream(self)) as stream:
            async for chunk in stream:
                results = chunk.chat_response.results
                if results and results[0].output.text:
                    yield results[0].output.text
