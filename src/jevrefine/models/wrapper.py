"""`WrapperModel`: a `ChatModel` that answers through another one, adding one concern to it.

```python
class Shouting(WrapperModel):
    async def call(self, prompt: Prompt) -> ChatResponse:
        response = await self.wrapped.call(prompt)
        return ChatResponse.of_text(response.result.output.text.upper())
```

The base of the models that add something to every call without being a provider of their own:
`InstrumentedModel` (a `chat` span per call) and `RateLimitedModel` (a batch's limits). It answers
as the wrapped model does: the same provider, name, server and capabilities; `call` and `stream`
are the wrapped model's until a subclass says otherwise. Closing a wrapper does not close the
wrapped model: whoever created that model closes it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..exceptions import UserError
from ..messages import ChatResponse
from .base import ChatModel

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

    from ..messages import Prompt

__all__ = ["WrapperModel", "check_response", "unwrapped"]


class WrapperModel(ChatModel):
    """A `ChatModel` whose identity and answers are another model's (`wrapped`).

    Raises:
        UserError: `wrapped` is not a `ChatModel`.
    """

    __slots__ = ("wrapped",)

    def __init__(self, wrapped: ChatModel) -> None:
        if not isinstance(wrapped, ChatModel):
            raise UserError(
                f"{type(self).__name__} wraps a ChatModel, got {type(wrapped).__name__}"
            )
        self.wrapped = wrapped
        """The model that answers."""

    @property
    def provider(self) -> str:  # type: ignore[override]
        """The wrapped model's `gen_ai.provider.name`."""
        return self.wrapped.provider

    @property
    def supports_tools(self) -> bool:  # type: ignore[override]
        """Whether the wrapped model can be offered tools."""
        return self.wrapped.supports_tools

    @property
    def supports_native_structured_output(self) -> bool:  # type: ignore[override]
        """Whether the wrapped model enforces a JSON schema."""
        return self.wrapped.supports_native_structured_output

    @property
    def model_name(self) -> str:
        """The wrapped model's name."""
        return self.wrapped.model_name

    @property
    def server_address(self) -> str | None:
        """The wrapped model's host."""
        return self.wrapped.server_address

    @property
    def server_port(self) -> int | None:
        """The wrapped model's port."""
        return self.wrapped.server_port

    async def call(self, prompt: Prompt) -> ChatResponse:
        """The wrapped model's answer."""
        return await self.wrapped.call(prompt)

    def stream(self, prompt: Prompt) -> AsyncIterator[ChatResponse]:
        """The wrapped model's stream."""
        return self.wrapped.stream(prompt)

    async def aclose(self) -> None:
        """Nothing: the wrapped model is closed by whoever created it."""

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.wrapped!r})"


def unwrapped(model: ChatModel) -> ChatModel:
    """The model at the bottom of `model`'s wrappers (`model` itself when it wraps none).

    Messages about what a model did name this one: `FunctionModel.call() returned ...`, not the
    wrapper that passed the answer on.
    """
    while isinstance(model, WrapperModel):
        model = model.wrapped
    return model


def check_response(model: ChatModel, response: object) -> ChatResponse:
    """`response` if it is a non-empty `ChatResponse`, else the error naming the model.

    The model named is the one under any wrappers (`unwrapped`): the one that answered.

    Raises:
        UserError: the model returned something else.
        EmptyResponseError: the response has no generation.
    """
    if not isinstance(response, ChatResponse):
        raise UserError(
            f"{type(unwrapped(model)).__name__}.call() returned {type(response).__name__}; "
            "a ChatModel must return a ChatResponse"
        )
    if not response.results:
        response.result  # noqa: B018 - raises EmptyResponseError with the explanation
    return response
