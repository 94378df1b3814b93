"""`FunctionModel`: a `ChatModel` whose answers come from a function you write."""

from __future__ import annotations

import inspect
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import ClassVar, TypeAlias

from ..exceptions import UserError
from ..messages import (
    AssistantMessage,
    ChatResponse,
    ChatResponseMetadata,
    Generation,
    Prompt,
    SystemMessage,
    ToolResponseMessage,
    Usage,
    UserMessage,
)
from ..models.base import ChatModel

__all__ = ["FunctionModel", "ModelFunction", "StreamFunction"]

_Reply: TypeAlias = str | AssistantMessage | ChatResponse
ModelFunction: TypeAlias = Callable[[Prompt], _Reply | Awaitable[_Reply]]
"""A function that answers a prompt: sync or async, returning text, a message or a response."""
StreamFunction: TypeAlias = Callable[[Prompt], AsyncIterator[str | ChatResponse]]
"""An async generator that answers a prompt in chunks (text or partial responses)."""


class FunctionModel(ChatModel):
    """A model that answers with a function of the prompt; for tests, demos and benchmarks.

    ```python
    model = FunctionModel(lambda prompt: "Paris is sunny.")
    model = FunctionModel(answer, stream_function=answer_in_chunks)
    ```

    The function gets the `Prompt` and returns a `str`, an `AssistantMessage` or a whole
    `ChatResponse`, sync or async. Its exceptions pass through unchanged. `prompts` lists every
    prompt the model saw, in order. Usage is estimated as one token per whitespace-separated word.
    Without `stream_function`, a stream yields the function's text in a few chunks.
    """

    provider: ClassVar[str] = "function"
    supports_tools: ClassVar[bool] = True
    supports_native_structured_output: ClassVar[bool] = True

    def __init__(
        self,
        function: ModelFunction,
        *,
        stream_function: StreamFunction | None = None,
        model_name: str = "function",
    ) -> None:
        if not callable(function):
            raise UserError(f"FunctionModel needs a callable, got {type(function).__name__}")
        self._function = function
        self._stream_function = stream_function
        self._model_name = model_name
        self.prompts: list[Prompt] = []
        """Every prompt this model was called or streamed with, oldest first."""

    @property
    def model_name(self) -> str:
        """The name given at construction (`"function"` by default)."""
        return self._model_name

    async def call(self, prompt: Prompt) -> ChatResponse:
        """Answer with the function."""
        self.prompts.append(prompt)
        reply = self._function(prompt)
        if inspect.isawaitable(reply):
            reply = await reply
        return self._to_response(prompt, reply)

    async def stream(self, prompt: Prompt) -> AsyncIterator[ChatResponse]:
        """Answer in chunks: from `stream_function`, or the function's text split in a few parts."""
        if self._stream_function is not None:
            self.prompts.append(prompt)
            text: list[str] = []
            async for item in self._stream_function(prompt):
                if isinstance(item, ChatResponse):
                    yield item
                else:
                    text.append(item)
                    yield ChatResponse((Generation(AssistantMessage(item)),))
            yield self._final_chunk(prompt, "".join(text))
            return
        response = await self.call(prompt)
        output = response.result.output
        for piece in _split(output.text):
            yield ChatResponse((Generation(AssistantMessage(piece)),))
        yield ChatResponse(
            (Generation(AssistantMessage("", output.tool_calls), response.result.metadata),),
            response.metadata,
        )

    def _final_chunk(self, prompt: Prompt, text: str) -> ChatResponse:
        return ChatResponse(
            (Generation(AssistantMessage(""), {"finish_reason": "stop"}),),
            ChatResponseMetadata(
                model=self._model_name, usage=_estimate(prompt, text), finish_reasons=("stop",)
            ),
        )

    def _to_response(self, prompt: Prompt, reply: object) -> ChatResponse:
        if isinstance(reply, ChatResponse):
            return reply
        if isinstance(reply, str):
            reply = AssistantMessage(reply)
        if not isinstance(reply, AssistantMessage):
            raise UserError(
                f"the FunctionModel function returned {type(reply).__name__}; "
                "return a str, an AssistantMessage or a ChatResponse"
            )
        reason = "tool_calls" if reply.tool_calls else "stop"
        return ChatResponse(
            (Generation(reply, {"finish_reason": reason}),),
            ChatResponseMetadata(
                model=self._model_name,
                usage=_estimate(prompt, reply.text),
                finish_reasons=(reason,),
            ),
        )


def _estimate(prompt: Prompt, answer: str) -> Usage:
    words = 0
    for message in prompt.messages:
        if isinstance(message, (SystemMessage, UserMessage, AssistantMessage)):
            words += len(message.text.split())
        elif isinstance(message, ToolResponseMessage):
            words += sum(len(r.data.split()) for r in message.responses)
    return Usage(words, len(answer.split()))


def _split(text: str, parts: int = 3) -> list[str]:
    if not text:
        return []
    size = max(1, -(-len(text) // parts))
    return [text[i : i + size] for i in range(0, len(text), size)]
