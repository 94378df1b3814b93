"""`RateLimitedModel`: any `ChatModel`, its calls held to a provider's limits by a `RateLimiter`.

```python
limiter = RateLimiter(RateLimit(requests_per_minute=6_000, tokens_per_minute=2_000_000))
model = RateLimitedModel(OpenAIChatModel("gpt-4o-mini"), limiter)
```

Each call waits for its turn (a request slot and its estimated tokens: the prompt's characters
/ 4 plus `max_tokens`), and once answered its reported usage corrects the estimate. A 429 pauses
every call sharing the limiter and the call is tried again once the pause is over (see
`jevrefine.rate_limit`): so that this happens once, at the limiter's pace, the wrapped model is
told to give its 429s back at once instead of retrying them itself (`RetriesRateLimits`; a model
without that switch keeps its own retries). A stream waits for its turn, and is not retried.

`refine_many(..., model_limit=...)` and `jevrefine run --model-rpm` put this around the batch's
model; one limiter may be shared by several models of one provider account.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Protocol, Self, runtime_checkable

from .. import _validate
from ..messages import ToolResponseMessage
from ..rate_limit import RateLimiter, reported_total, served_at
from .wrapper import WrapperModel, check_response

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

    from ..messages import ChatResponse, Prompt
    from .base import ChatModel

__all__ = ["RateLimitedModel", "RetriesRateLimits", "prompt_tokens", "usage_ceiling"]

_CHARS_PER_TOKEN = 4
_MAX_TOKENS_PER_CHAR = 4
"""No tokenizer makes more tokens than UTF-8 bytes, and a character is at most 4 of them."""
_TEMPLATE_ALLOWANCE = 1024
"""Tokens a server may add to what it was sent (chat template, its own system prompt)."""


@runtime_checkable
class RetriesRateLimits(Protocol):
    """A model that retries a 429 itself, and can be told to leave it to its caller.

    The vendor adapters (`OpenAIChatModel`, `AnthropicChatModel`) are such models.
    """

    def without_rate_limit_retries(self) -> Self:
        """This model, on the same connections, giving a 429 back at once (not retried)."""
        ...


class RateLimitedModel(WrapperModel):
    """A `ChatModel` whose calls wait their turn under `limiter`, and pause with it on 429.

    Args:
        wrapped: the model that answers.
        limiter: the provider's limits, shared by every call made through it.

    It answers as the wrapped model does; closing it does not close the wrapped model.

    Raises:
        UserError: `wrapped` is not a `ChatModel`, or `limiter` is not a `RateLimiter`.
    """

    __slots__ = ("_calls", "limiter")

    def __init__(self, wrapped: ChatModel, limiter: RateLimiter) -> None:
        super().__init__(wrapped)
        self.limiter = _validate.instance(
            "limiter",
            limiter,
            RateLimiter,
            example="RateLimiter(RateLimit(requests_per_minute=6000))",
        )
        """The limits the calls are held to."""
        # The limiter retries a 429 after the batch's pause: the model must not retry it too.
        self._calls: ChatModel = (
            wrapped.without_rate_limit_retries()
            if isinstance(wrapped, RetriesRateLimits)
            else wrapped
        )

    async def call(self, prompt: Prompt) -> ChatResponse:
        """Ask the wrapped model once its turn comes; retried after the shared pause on 429.

        Raises:
            RateLimitTimeoutError: the turn would come after the caller's deadline.
        """
        return await self.limiter.run(
            functools.partial(self._checked_call, prompt),
            tokens=prompt_tokens(prompt),
            used=_reported,
            ceiling=functools.partial(usage_ceiling, prompt),
            server=functools.partial(self._server, prompt),
        )

    async def _checked_call(self, prompt: Prompt) -> ChatResponse:
        # Checked before the limiter reads its usage: a model's wrong answer is named as such.
        return check_response(self._calls, await self._calls.call(prompt))

    def stream(self, prompt: Prompt) -> AsyncIterator[ChatResponse]:
        """The wrapped model's stream, opened once its turn comes (not retried on 429).

        Raises:
            NotImplementedError: the wrapped model does not stream (at once, as it does).
        """
        # Asked here, not in the generator: a model that cannot stream says so at once.
        return self._paced(self.wrapped.stream(prompt), prompt_tokens(prompt))

    async def _paced(
        self, chunks: AsyncIterator[ChatResponse], tokens: int
    ) -> AsyncIterator[ChatResponse]:
        try:
            await self.limiter.acquire(tokens)
            async for chunk in chunks:
                yield chunk
        finally:
            # Leaving early closes the adapter's stream (and its connection) at once.
            aclose = getattr(chunks, "aclose", None)
            if aclose is not None:
                await aclose()

    def _server(self, prompt: Prompt) -> str:
        name = prompt.options.model or self.wrapped.model_name
        return f"the {self.wrapped.provider} model {name!r} at {served_at(self.wrapped)}"


def _reported(response: ChatResponse) -> object:
    return reported_total(response.metadata.usage)


def prompt_tokens(prompt: Prompt) -> int:
    """A model call's estimated tokens: its messages' characters / 4, plus `max_tokens`."""
    chars = sum(
        len(message.text)
        for message in prompt.messages
        if not isinstance(message, ToolResponseMessage)
    )
    return chars // _CHARS_PER_TOKEN + (prompt.options.max_tokens or 0)


def usage_ceiling(prompt: Prompt) -> int | None:
    """The most tokens an honest server can report for a model call; `None` when unbounded.

    Known only when the prompt sets `max_tokens`: every character sent (the messages, the
    tools, the response format, in their `repr`, which only overcounts) as up to 4 tokens,
    plus a chat template's worth, plus `max_tokens`.
    """
    options = prompt.options
    if options.max_tokens is None:
        return None
    sent = (
        len(repr(prompt.messages)) + len(repr(options.tools)) + len(repr(options.response_format))
    )
    return sent * _MAX_TOKENS_PER_CHAR + _TEMPLATE_ALLOWANCE + options.max_tokens
