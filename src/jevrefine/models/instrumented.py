"""`InstrumentedModel`: any `ChatModel`, each call recorded as one `chat {model}` span.

The one place model calls are instrumented: `ChatClient` (the chain's terminal link) and
`ModelJudgeClient` both send their prompts through `instrument_model(model, telemetry)`, which
wraps a model once; wrapping an `InstrumentedModel` again hands it back unchanged, so a model
call is never recorded twice. The wrapper lives beside the models it wraps; what it records, and
how, is `jevrefine.telemetry`'s (`ModelCallRecorder`), which knows no model type.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..context_keys import CONVERSATION_ID
from ..exceptions import StreamingNotSupportedError
from ..messages import concat_chunks
from ..telemetry import ModelCallRecorder
from .base import ChatModel
from .wrapper import WrapperModel, check_response, unwrapped

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Coroutine, Mapping

    from opentelemetry.context import Context

    from ..messages import ChatResponse, Prompt
    from ..telemetry import Telemetry

__all__ = ["InstrumentedModel", "instrument_model"]


def instrument_model(model: ChatModel, telemetry: Telemetry) -> InstrumentedModel:
    """`model` wrapped so that each call is recorded with `telemetry`.

    An `InstrumentedModel` is returned as it is (it keeps its own telemetry), so a call is
    never recorded twice.
    """
    if isinstance(model, InstrumentedModel):
        return model
    return InstrumentedModel(model, telemetry)


class InstrumentedModel(WrapperModel):
    """A `ChatModel` whose calls and streams are recorded, one CLIENT `chat {model}` span each.

    With the duration, token and (streaming) chunk-timing metrics.

    ```python
    from jevrefine.models import instrument_model
    from jevrefine.telemetry import InstrumentationSettings, Telemetry

    model = instrument_model(OpenAIChatModel("gpt-4o-mini"), Telemetry(settings))
    ```

    It answers exactly as the wrapped model does (same provider, name, server, capabilities);
    closing it does not close the wrapped model.
    """

    __slots__ = ("telemetry",)

    def __init__(self, wrapped: ChatModel, telemetry: Telemetry) -> None:
        super().__init__(wrapped)
        self.telemetry = telemetry
        """Where the calls are recorded."""

    def call(
        self,
        prompt: Prompt,
        *,
        conversation_id: str | None = None,
        parent: Context | None = None,
        context: Mapping[str, Any] | None = None,
    ) -> Coroutine[Any, Any, ChatResponse]:
        """Call the wrapped model once, inside its `chat` span: `await` the result.

        `context` is the request context: its `conversation_id` labels the span (read only when
        something records, so the inactive path does no lookup).

        A plain method handing back a coroutine: with nothing listening (`Telemetry.active()`
        false, see `_fastpath`) it is the wrapped model's own, so the wrapper adds no coroutine
        layer to the call (measured by `benchmarks/bench_chain_overhead.py`).
        """
        if not self.telemetry.active():
            return self.wrapped.call(prompt)
        if conversation_id is None and context is not None:
            conversation_id = _conversation_of(context)
        return self._recorded_call(prompt, conversation_id, parent)

    async def _recorded_call(
        self, prompt: Prompt, conversation_id: str | None, parent: Context | None
    ) -> ChatResponse:
        recorder = ModelCallRecorder(
            self.telemetry, self.wrapped, prompt, conversation_id=conversation_id, parent=parent
        )
        with recorder:
            response = check_response(self.wrapped, await self.wrapped.call(prompt))
        recorder.finish(response)
        return response

    async def stream(
        self,
        prompt: Prompt,
        *,
        conversation_id: str | None = None,
        parent: Context | None = None,
        context: Mapping[str, Any] | None = None,
    ) -> AsyncIterator[ChatResponse]:
        """Stream the wrapped model's answer; the span ends with the last chunk.

        Raises:
            StreamingNotSupportedError: the wrapped model does not stream.
        """
        if conversation_id is None and context is not None:
            conversation_id = _conversation_of(context)
        recorder = ModelCallRecorder(
            self.telemetry,
            self.wrapped,
            prompt,
            stream=True,
            conversation_id=conversation_id,
            parent=parent,
        )
        chunks: list[ChatResponse] = []
        # The joined response is for the span alone: with nothing recording, keep no chunks.
        keep = self.telemetry.active()
        try:
            try:
                iterator = self.wrapped.stream(prompt)
            except NotImplementedError as exc:
                name = type(unwrapped(self.wrapped)).__name__
                raise StreamingNotSupportedError(name, str(exc)) from exc
            try:
                async for chunk in iterator:
                    recorder.chunk()
                    if keep:
                        chunks.append(chunk)
                    yield chunk
            finally:
                # Leaving early closes the adapter's stream (and its connection) at once.
                aclose = getattr(iterator, "aclose", None)
                if aclose is not None:
                    await aclose()
        except BaseException as exc:
            recorder.fail(exc)
            raise
        recorder.finish(concat_chunks(chunks))


def _conversation_of(context: Mapping[str, Any]) -> str | None:
    conversation = context.get(CONVERSATION_ID)
    return conversation if isinstance(conversation, str) else None
