"""`ToolCallingAdvisor`: the tool loop.

Call the rest of the chain; while the answer asks for tools, run the calls of that turn
concurrently, append the assistant message and a `ToolResponseMessage`, and call again — at most
`max_rounds` tool rounds. `ChatClient` adds one automatically (at `TOOL_CALLING_ORDER`) when a
request carries tools and the model supports them; add your own instance to change its settings.

The tools of each round are read from the request the advisor receives, so an outer advisor can
hand it wrapped tools for one attempt (`request.copy(tools=...)`, see
`jevrefine.tools.record_tool_calls`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from .. import _validate, context_keys
from .._request import ChatClientRequest, ChatClientResponse, context_entry, with_usage
from ..messages import (
    AssistantMessage,
    ChatResponse,
    ChatResponseMetadata,
    Generation,
    Message,
    ToolResponseMessage,
    Usage,
    concat_chunks,
)
from ..tools._errors import ToolRoundsExceededError
from ..tools._executor import ToolOutcome, execute_tool_calls
from .chain import HIGHEST_PRECEDENCE

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Sequence

    from .chain import CallAdvisorChain

__all__ = ["DEFAULT_MAX_TOOL_CALLS", "TOOL_CALLING_ORDER", "ToolCallingAdvisor"]

TOOL_CALLING_ORDER: Final = HIGHEST_PRECEDENCE + 300
"""Where the tool loop sits: inside chat memory (+200) and self-refine's `BEFORE_TOOLS_ORDER`."""

DEFAULT_MAX_TOOL_CALLS: Final = 128
"""The most tool calls one model turn may ask for by default: well above what a task needs
(providers cap parallel calls in the tens), well below what stalls a process."""


class ToolCallingAdvisor:
    """Runs the tool loop around the rest of the chain.

    Args:
        max_rounds: the most tool rounds one call may take; when the model still asks for tools
            after that, `ToolRoundsExceededError` is raised with the conversation so far.
        max_parallel_tools: the most tool calls of one turn that run at once.
        max_tool_calls: the most tool calls one model turn may ask for (default 128). The calls
            beyond it are not run: each is answered with a `TooManyToolCallsError` result, so
            the model reads why and none is dropped. A bound on what one answer can make the
            process do (a hostile or looping model can ask for thousands of calls at once).
        tool_timeout: seconds each tool call may run (`None`: no limit; a tool's own
            `@tool(timeout=...)` applies as well). A call that times out becomes an error result.
        order: the position in the chain.

    The calls of one turn run concurrently; a failing call (exception, timeout, invalid
    arguments, unknown tool) becomes that call's error result and never cancels the others;
    results go back in call order. When every call of a turn is to a `return_direct` tool, the
    loop ends and their results become the response, with `context_keys.TOOL_RETURN_DIRECT` set.
    The returned response's usage is the sum over the rounds.
    """

    name: str = "tool_calling"

    def __init__(
        self,
        *,
        max_rounds: int = 10,
        max_parallel_tools: int = 16,
        max_tool_calls: int = DEFAULT_MAX_TOOL_CALLS,
        tool_timeout: float | None = 60.0,
        order: int = TOOL_CALLING_ORDER,
    ) -> None:
        self.max_rounds = _validate.integer("max_rounds", max_rounds, minimum=1, example=10)
        """The most tool rounds per call."""
        self.max_parallel_tools = _validate.integer(
            "max_parallel_tools", max_parallel_tools, minimum=1, example=16
        )
        """The most concurrent tool calls per turn."""
        self.max_tool_calls = _validate.integer(
            "max_tool_calls", max_tool_calls, minimum=1, example=DEFAULT_MAX_TOOL_CALLS
        )
        """The most tool calls one turn may ask for; the rest get an error result."""
        self.tool_timeout = _validate.number(
            "tool_timeout", tool_timeout, above=0, optional=True, unit="seconds", example=60.0
        )
        """Seconds each tool call may run."""
        self.order = _validate.order(order, example=TOOL_CALLING_ORDER)
        """Position in the chain."""

    async def advise_call(
        self, request: ChatClientRequest, chain: CallAdvisorChain
    ) -> ChatClientResponse:
        """Call the rest of the chain, running tool rounds until the model answers."""
        current = request
        usage = Usage()
        for round_index in range(self.max_rounds + 1):
            response = await chain.next_call(current)
            usage = usage + response.chat_response.metadata.usage
            output = _first_output(response.chat_response)
            if output is None or not output.tool_calls:
                return with_usage(response, usage)
            if round_index == self.max_rounds:
                raise ToolRoundsExceededError(
                    self.max_rounds, (*current.prompt.messages, output), response.chat_response
                )
            outcomes = await self._run_tools(current, output, chain)
            if outcomes and all(o.returns_direct for o in outcomes):
                return _direct_response(current, response.chat_response, outcomes, usage)
            current = _next_request(current, output, outcomes)
        raise AssertionError("unreachable: the last round returns or raises")  # pragma: no cover

    async def advise_stream(
        self, request: ChatClientRequest, chain: CallAdvisorChain
    ) -> AsyncIterator[ChatClientResponse]:
        """Stream the rest of the chain; tool rounds are resolved inside.

        Text is passed on as it arrives (the final round's answer, and any text the model
        writes beside its tool calls); chunks carrying tool calls are kept back and acted on.
        """
        current = request
        usage = Usage()
        for round_index in range(self.max_rounds + 1):
            chunks: list[ChatResponse] = []
            async for chunk in chain.next_stream(current):
                chunks.append(chunk.chat_response)
                if not _has_tool_calls(chunk.chat_response):
                    yield chunk
            whole = concat_chunks(chunks)
            usage = usage + whole.metadata.usage
            output = _first_output(whole)
            if output is None or not output.tool_calls:
                if usage != whole.metadata.usage:
                    # Joined chunks report the last usage: one empty chunk carries every
                    # round's tokens, so the stream costs what call() reports.
                    yield ChatClientResponse(_usage_only(usage), current.context)
                return
            if round_index == self.max_rounds:
                raise ToolRoundsExceededError(
                    self.max_rounds, (*current.prompt.messages, output), whole
                )
            outcomes = await self._run_tools(current, output, chain)
            if outcomes and all(o.returns_direct for o in outcomes):
                yield _direct_response(current, whole, outcomes, usage)
                return
            current = _next_request(current, output, outcomes)

    async def _run_tools(
        self, request: ChatClientRequest, output: AssistantMessage, chain: CallAdvisorChain
    ) -> list[ToolOutcome]:
        return await execute_tool_calls(
            output.tool_calls,
            request.tools,
            max_parallel=self.max_parallel_tools,
            call_timeout=self.tool_timeout,
            telemetry=chain.telemetry,
            parent=chain.trace_parent,
            max_calls=self.max_tool_calls,
        )

    @staticmethod
    def returned_direct(response: ChatClientResponse) -> bool:
        """Whether `response` is a return-direct tool result rather than the model's answer.

        Reads `context_keys.TOOL_RETURN_DIRECT`.
        """
        return bool(context_entry(response, context_keys.TOOL_RETURN_DIRECT, bool))

    def __repr__(self) -> str:
        return (
            f"ToolCallingAdvisor(max_rounds={self.max_rounds}, "
            f"max_parallel_tools={self.max_parallel_tools}, "
            f"max_tool_calls={self.max_tool_calls}, order={self.order})"
        )


def _first_output(response: ChatResponse) -> AssistantMessage | None:
    return response.results[0].output if response.results else None


def _has_tool_calls(response: ChatResponse) -> bool:
    return any(g.output.tool_calls for g in response.results)


def _next_request(
    request: ChatClientRequest, output: AssistantMessage, outcomes: Sequence[ToolOutcome]
) -> ChatClientRequest:
    messages: list[Message] = [
        *request.prompt.messages,
        output,
        ToolResponseMessage(tuple(o.response for o in outcomes)),
    ]
    # The same context dict on every round: what inner advisors note there reaches the caller.
    return request.copy(prompt=request.prompt.with_messages(messages), context=request.context)


def _usage_only(usage: Usage) -> ChatResponse:
    return ChatResponse((Generation(AssistantMessage("")),), ChatResponseMetadata(usage=usage))


def _direct_response(
    request: ChatClientRequest,
    last: ChatResponse,
    outcomes: Sequence[ToolOutcome],
    usage: Usage,
) -> ChatClientResponse:
    generations = tuple(
        Generation(
            AssistantMessage(o.data),
            {"finish_reason": "stop", "tool_name": o.call.name, "tool_call_id": o.call.id},
        )
        for o in outcomes
    )
    metadata = ChatResponseMetadata(
        id=last.metadata.id, model=last.metadata.model, usage=usage, finish_reasons=("stop",)
    )
    request.context[context_keys.TOOL_RETURN_DIRECT] = True
    return ChatClientResponse(ChatResponse(generations, metadata), request.context)
