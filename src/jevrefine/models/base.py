"""The `ChatModel` interface every model adapter implements."""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import TYPE_CHECKING, ClassVar

from .._closing import AsyncClosing

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

    from ..messages import ChatResponse, Prompt

__all__ = ["ChatModel"]


class ChatModel(AsyncClosing, ABC):
    """A language model behind one async method.

    Subclasses implement `call`; streaming (`stream`) is optional. Adapters translate vendor
    errors into `jevrefine.exceptions` at their boundary and emit no spans of their own: the
    chain's terminal link records the `chat {model}` span for every model.

    A model that holds connections closes them in `aclose()`; whoever creates a model closes it
    (`async with model:`), and `ChatClient` never closes a model it was given.
    """

    provider: ClassVar[str] = "unknown"
    """The `gen_ai.provider.name` of this model's provider (`openai`, `anthropic`, ...)."""
    supports_tools: ClassVar[bool] = True
    """Whether the model can be offered tools. When false, the client sends none."""
    supports_native_structured_output: ClassVar[bool] = False
    """Whether the model enforces a JSON schema given as the response format."""

    @property
    @abstractmethod
    def model_name(self) -> str:
        """The model asked when the prompt's options name none."""

    @property
    def server_address(self) -> str | None:
        """The host the model is served from, for telemetry; `None` when in-process."""
        return None

    @property
    def server_port(self) -> int | None:
        """The port the model is served from, for telemetry."""
        return None

    @abstractmethod
    async def call(self, prompt: Prompt) -> ChatResponse:
        """Ask the model once and return its whole response."""

    def stream(self, prompt: Prompt) -> AsyncIterator[ChatResponse]:
        """Ask the model and yield its response in chunks (each chunk a partial `ChatResponse`).

        The last chunk carries the usage and finish reason when the provider reports them.

        Raises:
            NotImplementedError: this model does not stream.
        """
        raise NotImplementedError(f"{type(self).__name__} does not support streaming")

    async def aclose(self) -> None:  # an optional hook with a do-nothing default
        """Release the model's connections. The default holds none."""

    def __repr__(self) -> str:
        return f"{type(self).__name__}(model_name={self.model_name!r})"
