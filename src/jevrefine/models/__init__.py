"""Model adapters behind one interface, `ChatModel`.

Vendor adapters live in their own modules, each behind an extra:
`jevrefine.models.openai` (`pip install "jevrefine[openai]"`) and
`jevrefine.models.anthropic` (`pip install "jevrefine[anthropic]"`).
`jevrefine.models.jev.JevChatModel` puts a Jev classifier behind the same interface.

Wrappers add one concern to any model (`WrapperModel`): `InstrumentedModel` records each call
as a `chat {model}` span (`instrument_model(model, telemetry)`, what `ChatClient` does), and
`RateLimitedModel` holds a model's calls to a batch's provider limits (what `refine_many` does).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .base import ChatModel as ChatModel
from .instrumented import InstrumentedModel as InstrumentedModel
from .instrumented import instrument_model as instrument_model
from .rate_limited import RateLimitedModel as RateLimitedModel
from .wrapper import WrapperModel as WrapperModel

if TYPE_CHECKING:
    from .jev import JevChatModel as JevChatModel

# Loaded on first use: it pulls in the Jev client, which most apps of a plain model never need.
_LAZY = {"JevChatModel": ".jev"}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(module, __name__), name)


__all__ = [
    "ChatModel",
    "InstrumentedModel",
    "JevChatModel",
    "RateLimitedModel",
    "WrapperModel",
    "instrument_model",
]
