"""`LoggingAdvisor`: log each request and response through `logging` (seed 003's logging advisor).

```python
logging.basicConfig(level=logging.INFO)
client = ChatClient(model, advisors=[LoggingAdvisor()])
```

By default the message *content* is redacted: the log shows each message's role and length,
the model, the finish reason and the token usage, never what the user or the model wrote. Pass
`log_content=True` where the logs may hold conversation text.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Final

from .. import _validate
from ..exceptions import UserError
from ..messages import AssistantMessage, Message, ToolResponseMessage

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Sequence

    from .._request import ChatClientRequest, ChatClientResponse
    from .chain import CallAdvisorChain

__all__ = ["LOGGING_ORDER", "LoggingAdvisor"]

LOGGING_ORDER: Final = 2
"""Seed 003's place for its logging advisor: just inside an order-0 advisor."""

_LOGGER: Final = "jevrefine.advisors.logging"


def _message_text(message: Message) -> str:
    if isinstance(message, ToolResponseMessage):
        return " ".join(f"{r.name}={r.data}" for r in message.responses)
    text = getattr(message, "text", "")
    if isinstance(message, AssistantMessage) and message.tool_calls:
        calls = " ".join(f"{c.name}({c.arguments})" for c in message.tool_calls)
        return f"{text} [tool calls: {calls}]".strip()
    return text if isinstance(text, str) else ""


def _describe(messages: Sequence[Message], content: bool) -> str:
    parts = []
    for message in messages:
        text = _message_text(message)
        if content:
            parts.append(f"{message.role}: {text!r}")
        else:
            parts.append(f"{message.role}: <{len(text)} chars>")
    return "[" + ", ".join(parts) + "]"


class LoggingAdvisor:
    """Logs each request before, and each response after, the rest of the chain.

    Args:
        order: The position in the chain; where it sits decides what it sees (placed inside
            self-refine it logs every attempt, outside it only the final answer).
        level: The `logging` level of the records.
        log_content: Log the messages' text (default: redacted to roles and lengths).
        logger: The logger to use (default `jevrefine.advisors.logging`).
    """

    name: str = "logging"

    def __init__(
        self,
        *,
        order: int = LOGGING_ORDER,
        level: int = logging.INFO,
        log_content: bool = False,
        logger: logging.Logger | None = None,
    ) -> None:
        order = _validate.order(order, example=LOGGING_ORDER)
        if isinstance(level, bool) or not isinstance(level, int):
            raise UserError(f"level must be a logging level (an int), got {level!r}")
        self.order = order
        """Position in the chain."""
        self.level = level
        """The level of the records."""
        self.log_content = log_content
        """Whether message text is logged."""
        self.logger = logger or logging.getLogger(_LOGGER)
        """Where the records go."""

    def log_request(self, request: ChatClientRequest) -> None:
        """Log one request: its messages (redacted unless asked), tools and model."""
        if not self.logger.isEnabledFor(self.level):
            return
        prompt = request.prompt
        self.logger.log(
            self.level,
            "REQUEST model=%s tools=%s messages=%s",
            prompt.options.model or "<default>",
            [t.name for t in request.tools],
            _describe(prompt.messages, self.log_content),
        )

    def log_response(self, response: ChatClientResponse) -> None:
        """Log one response: its text (redacted unless asked), finish reason and usage."""
        if not self.logger.isEnabledFor(self.level):
            return
        chat = response.chat_response
        outputs = [g.output for g in chat.results]
        reasons = [g.finish_reason for g in chat.results]
        usage = chat.metadata.usage
        self.logger.log(
            self.level,
            "RESPONSE model=%s finish=%s usage=in:%d/out:%d output=%s",
            chat.metadata.model or "<unknown>",
            reasons,
            usage.input_tokens,
            usage.output_tokens,
            _describe(outputs, self.log_content),
        )

    async def advise_call(
        self, request: ChatClientRequest, chain: CallAdvisorChain
    ) -> ChatClientResponse:
        """Log the request, call the rest of the chain, log the response."""
        self.log_request(request)
        response = await chain.next_call(request)
        self.log_response(response)
        return response

    async def advise_stream(
        self, request: ChatClientRequest, chain: CallAdvisorChain
    ) -> AsyncIterator[ChatClientResponse]:
        """Log the request, stream the rest of the chain, log the streamed text once at the end."""
        self.log_request(request)
        chunks = 0
        total = 0
        text: list[str] = []
        async for chunk in chain.next_stream(request):
            chunks += 1
            piece = chunk.content
            total += len(piece)
            if self.log_content:
                text.append(piece)
            yield chunk
        if self.logger.isEnabledFor(self.level):
            shown = repr("".join(text)) if self.log_content else f"<{total} chars>"
            self.logger.log(self.level, "RESPONSE (stream, %d chunks) output=%s", chunks, shown)

    def __repr__(self) -> str:
        return f"LoggingAdvisor(order={self.order}, level={logging.getLevelName(self.level)})"
