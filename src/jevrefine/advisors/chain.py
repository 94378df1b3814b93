"""The advisor chain: Spring AI's `CallAdvisor`/`CallAdvisorChain`, ported to async Python.

An advisor wraps the rest of the chain:

```python
class Shout:
    name = "shout"
    order = 0

    async def advise_call(self, request, chain):
        response = await chain.next_call(request)
        return response.copy(chat_response=ChatResponse.of_text(response.content.upper()))
```

Advisors run in ascending `order` (lower is further out); ties keep registration order. The chain
is immutable and re-enterable: `chain.next_call(request)` always calls the advisors after the
current one, so a recursive advisor (self-refine, the tool loop) may call it once per round;
`chain.copy(advisor)` gives the chain of the advisors after `advisor`. The chain's last link calls
the model and records its `chat` span.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Final, Protocol, TypeVar, cast, runtime_checkable

from opentelemetry.trace import SpanKind

from .. import _validate
from .._request import ChatClientRequest, ChatClientResponse
from ..exceptions import StreamingNotSupportedError, UserError
from ..messages import Prompt
from ..models.instrumented import InstrumentedModel
from ..models.wrapper import check_response
from ..telemetry import Telemetry, mark_failed
from ..tools import tool_definitions

if TYPE_CHECKING:
    from collections.abc import Coroutine, Sequence

    from opentelemetry.context import Context

    from ..messages import Prompt
    from ..models.base import ChatModel

__all__ = [
    "HIGHEST_PRECEDENCE",
    "LOWEST_PRECEDENCE",
    "BaseAdvisor",
    "CallAdvisor",
    "CallAdvisorChain",
    "StreamAdvisor",
    "check_advisor",
    "sort_advisors",
]

T = TypeVar("T")

HIGHEST_PRECEDENCE: Final = _validate.HIGHEST_PRECEDENCE
"""The lowest possible order: runs first, outermost."""
LOWEST_PRECEDENCE: Final = _validate.LOWEST_PRECEDENCE
"""The highest possible order: runs last, nearest the model."""


@runtime_checkable
class CallAdvisor(Protocol):
    """Wraps the rest of the chain for a `call()`. Plain classes with these members work."""

    @property
    def name(self) -> str:
        """A short name for logs, spans and error messages."""
        ...

    @property
    def order(self) -> int:
        """Position in the chain: lower runs earlier (further out)."""
        ...

    async def advise_call(
        self, request: ChatClientRequest, chain: CallAdvisorChain
    ) -> ChatClientResponse:
        """Handle the request, usually by calling `chain.next_call(...)` once or more."""
        ...


@runtime_checkable
class StreamAdvisor(Protocol):
    """Wraps the rest of the chain for a `stream()`."""

    @property
    def name(self) -> str:
        """A short name for logs, spans and error messages."""
        ...

    @property
    def order(self) -> int:
        """Position in the chain: lower runs earlier (further out)."""
        ...

    def advise_stream(
        self, request: ChatClientRequest, chain: CallAdvisorChain
    ) -> AsyncIterator[ChatClientResponse]:
        """Handle a streaming request, usually by iterating `chain.next_stream(...)`."""
        ...


class BaseAdvisor:
    """An advisor that changes the request before, and the response after, the rest of the chain.

    Override `before` and/or `after`; both calls and streams go through them (for a stream,
    `after` sees each chunk).
    """

    name: str = "base"
    order: int = 0

    def before(self, request: ChatClientRequest) -> ChatClientRequest:
        """Return the request to send on (the same one by default)."""
        return request

    def after(self, response: ChatClientResponse) -> ChatClientResponse:
        """Return the response to hand back (the same one by default)."""
        return response

    async def advise_call(
        self, request: ChatClientRequest, chain: CallAdvisorChain
    ) -> ChatClientResponse:
        """Apply `before`, call the rest of the chain, apply `after`."""
        return self.after(await chain.next_call(self.before(request)))

    async def advise_stream(
        self, request: ChatClientRequest, chain: CallAdvisorChain
    ) -> AsyncIterator[ChatClientResponse]:
        """Apply `before`, stream the rest of the chain, apply `after` to each chunk."""
        async for chunk in chain.next_stream(self.before(request)):
            yield self.after(chunk)


def check_advisor(advisor: object) -> CallAdvisor:
    """Check that `advisor` has `name`, an integer `order` and `advise_call`."""
    missing = [a for a in ("name", "order", "advise_call") if not hasattr(advisor, a)]
    if missing:
        raise UserError(
            f"{advisor!r} is not an advisor: it lacks {', '.join(missing)}. An advisor needs "
            "`name: str`, `order: int` and `async def advise_call(self, request, chain)`."
        )
    order: object = getattr(advisor, "order")  # noqa: B009 - checked above
    if not isinstance(order, int) or isinstance(order, bool):
        name: object = getattr(advisor, "name")  # noqa: B009 - checked above
        raise UserError(f"advisor {name!r} has order {order!r}; pass an int")
    return cast("CallAdvisor", advisor)


def sort_advisors(advisors: Sequence[CallAdvisor]) -> tuple[CallAdvisor, ...]:
    """Sort by ascending order; ties keep their registration order (the sort is stable)."""
    return tuple(sorted(advisors, key=_order_of))


def _order_of(advisor: CallAdvisor) -> int:
    return advisor.order


class ModelLink:
    """The chain's terminal link: sends the request's prompt to the instrumented model.

    The `chat` span is recorded by the model's `InstrumentedModel` (the one telemetry seam).
    """

    __slots__ = ("instrumented", "parent")

    def __init__(self, model: InstrumentedModel, *, parent: Context | None = None) -> None:
        self.instrumented = model
        self.parent = parent

    @property
    def model(self) -> ChatModel:
        """The model at the end of the chain (the one the client was given)."""
        return self.instrumented.wrapped

    @property
    def telemetry(self) -> Telemetry:
        """The client's telemetry."""
        return self.instrumented.telemetry

    def prepare(self, request: ChatClientRequest) -> Prompt:
        """The prompt to send: the request's tools' definitions and output spec rendered into it.

        For a model with `supports_tools = False` the request's tools are dropped.
        """
        prompt = request.prompt
        if request.output_spec is not None:
            # Rendered here and nowhere earlier: every advisor saw the caller's own text, and
            # prompt-based instructions land after whatever an advisor appended (retry feedback).
            prompt = request.output_spec.render(prompt)
        # A model that cannot call tools (JevChatModel) is sent none: the client's tools are
        # dropped, as no tool loop runs for it. Tool definitions put on the prompt's options
        # directly reach the model, which refuses them.
        if request.tools and self.model.supports_tools and prompt.options.tools is None:
            options = replace(prompt.options, tools=tool_definitions(request.tools))
            prompt = prompt.with_options(options)
        return prompt

    async def call(self, request: ChatClientRequest) -> ChatClientResponse:
        """Call the model once."""
        prompt = self.prepare(request)
        response = await self.instrumented.call(prompt, parent=self.parent, context=request.context)
        return ChatClientResponse(check_response(self.model, response), request.context)

    async def stream(self, request: ChatClientRequest) -> AsyncIterator[ChatClientResponse]:
        """Stream the model's answer, chunk by chunk."""
        iterator = self.instrumented.stream(
            self.prepare(request), parent=self.parent, context=request.context
        )
        # Closed with this generator: the adapter closes its HTTP stream at once.
        async with closing_stream(iterator) as model_stream:
            async for chunk in model_stream:
                yield ChatClientResponse(chunk, request.context)


# Where `next_stream` notes the streams it opened for a request (in `request.scope`, which
# every copy shares): a consumer that stops early must close each of them, not just the outer.
_OPEN_STREAMS: Final = "jevrefine.chain.open_streams"


async def close_streams(request: ChatClientRequest) -> None:
    """Close every stream the chain opened for `request` (and its copies), innermost first.

    Leaving an `async for` early (or an exception) closes only the outermost generator; the
    ones it was iterating stay suspended until the garbage collector finds them, each holding
    its model connection meanwhile. Closing them here releases the connection at once. Streams
    that already ended are skipped by `aclose()` itself.
    """
    streams: list[AsyncIterator[ChatClientResponse]] = request.scope.pop(_OPEN_STREAMS, [])
    for stream in reversed(streams):
        await _aclose(stream)


@contextlib.asynccontextmanager
async def closing_stream(stream: AsyncIterator[T]) -> AsyncIterator[AsyncIterator[T]]:
    """Close the async iterator `stream` (if it can be closed) when the block is left.

    `contextlib.aclosing` for any async iterator: a generator that leaves its `async for`
    early does not close the iterator it was reading, only drops it.
    """
    try:
        yield stream
    finally:
        await _aclose(stream)


async def _aclose(stream: AsyncIterator[Any]) -> None:
    aclose = getattr(stream, "aclose", None)
    if aclose is not None:
        await aclose()


class CallAdvisorChain:
    """The advisors after the current one, then the model. Immutable and re-enterable."""

    __slots__ = ("_advisors", "_index", "_rest", "_terminal", "_trace_advisors")

    def __init__(
        self,
        advisors: tuple[CallAdvisor, ...],
        terminal: ModelLink,
        *,
        index: int = 0,
        trace_advisors: bool = False,
    ) -> None:
        self._advisors = advisors
        self._terminal = terminal
        self._index = index
        self._rest: CallAdvisorChain | None = None
        self._trace_advisors = trace_advisors

    @property
    def advisors(self) -> tuple[CallAdvisor, ...]:
        """The advisors this chain will still run, in order."""
        return self._advisors[self._index :]

    @property
    def model(self) -> ChatModel:
        """The model at the end of the chain."""
        return self._terminal.model

    @property
    def telemetry(self) -> Telemetry:
        """The client's telemetry, for advisors that record spans or metrics of their own."""
        return self._terminal.telemetry

    @property
    def trace_parent(self) -> Context | None:
        """The parent context for spans an advisor opens; `None` means the current context.

        Set for streams, whose spans get their parent explicitly rather than from the current
        context (see `ChatClient.stream`).
        """
        return self._terminal.parent

    def _next_chain(self) -> CallAdvisorChain:
        rest = self._rest
        if rest is None:
            rest = CallAdvisorChain(
                self._advisors,
                self._terminal,
                index=self._index + 1,
                trace_advisors=self._trace_advisors,
            )
            self._rest = rest  # a cache: the chain stays observably immutable
        return rest

    def next_call(self, request: ChatClientRequest) -> Coroutine[Any, Any, ChatClientResponse]:
        """Call the next advisor, or the model when no advisor is left: `await` the result.

        A plain method that hands back the next link's coroutine rather than a coroutine of its
        own: every coroutine between the caller and the model is resumed again each time the
        call's I/O wakes it, so the chain adds no layer of its own (a fast path measured by
        `benchmarks/bench_chain_overhead.py`; pinned by `tests/perf/test_fast_paths.py`).
        """
        if self._index >= len(self._advisors):
            return self._terminal.call(request)
        advisor = self._advisors[self._index]
        if self._trace_advisors:
            return self._traced_call(advisor, request)
        return advisor.advise_call(request, self._next_chain())

    async def _traced_call(
        self, advisor: CallAdvisor, request: ChatClientRequest
    ) -> ChatClientResponse:
        tracer = self._terminal.telemetry.tracer
        with tracer.start_as_current_span(
            f"advisor {advisor.name}",
            kind=SpanKind.INTERNAL,
            attributes={
                "jevrefine.advisor.name": advisor.name,
                "jevrefine.advisor.order": advisor.order,
            },
            record_exception=False,
            set_status_on_exception=False,
        ) as span:
            try:
                return await advisor.advise_call(request, self._next_chain())
            except BaseException as exc:
                mark_failed(span, exc, describe=False)
                raise

    def next_stream(self, request: ChatClientRequest) -> AsyncIterator[ChatClientResponse]:
        """Stream through the next advisor, or from the model when no advisor is left.

        The stream is noted in `request.scope`, so that `close_streams(request)` can close it
        when the consumer leaves early.
        """
        if self._index >= len(self._advisors):
            stream = self._terminal.stream(request)
        else:
            stream = self._stream_through(self._advisors[self._index], request)
        request.scope.setdefault(_OPEN_STREAMS, []).append(stream)
        return stream

    async def _stream_through(
        self, advisor: CallAdvisor, request: ChatClientRequest
    ) -> AsyncIterator[ChatClientResponse]:
        advise_stream = getattr(advisor, "advise_stream", None)
        if advise_stream is None:
            raise StreamingNotSupportedError(f"advisor {advisor.name!r}", "it has no advise_stream")
        try:
            # Closed with this generator: the advisor's own clean-up runs now, in this task.
            async with closing_stream(advise_stream(request, self._next_chain())) as stream:
                async for chunk in stream:
                    yield chunk
        except StreamingNotSupportedError:
            raise
        except NotImplementedError as exc:
            raise StreamingNotSupportedError(f"advisor {advisor.name!r}", str(exc) or None) from exc

    def first_non_streaming(self) -> CallAdvisor | None:
        """The first advisor still to run that has no `advise_stream`, if any."""
        for advisor in self.advisors:
            if getattr(advisor, "advise_stream", None) is None:
                return advisor
        return None

    def with_trace_parent(self, parent: Context | None) -> CallAdvisorChain:
        """This chain with `parent` as the parent of the spans opened below it.

        A streaming advisor that opens a span cannot make it current across its `yield`s (the
        context would leak into the consumer), so it hands the span's context down this way.
        """
        terminal = self._terminal
        return CallAdvisorChain(
            self._advisors,
            ModelLink(terminal.instrumented, parent=parent),
            index=self._index,
            trace_advisors=self._trace_advisors,
        )

    def copy(self, advisor: CallAdvisor) -> CallAdvisorChain:
        """The chain of the advisors after `advisor` (and the model).

        Raises:
            UserError: `advisor` is not in this chain.
        """
        for index, candidate in enumerate(self._advisors):
            if candidate is advisor:
                return CallAdvisorChain(
                    self._advisors,
                    self._terminal,
                    index=index + 1,
                    trace_advisors=self._trace_advisors,
                )
        raise UserError(f"advisor {getattr(advisor, 'name', advisor)!r} is not in this chain")

    def __repr__(self) -> str:
        names = ", ".join(a.name for a in self.advisors)
        return f"CallAdvisorChain([{names}] -> {self._terminal.model!r})"
