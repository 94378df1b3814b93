"""Test doubles that users can use in their own tests, too.

- `FunctionModel` — a `ChatModel` answering with a function of the prompt.
- `FakeOpenAIServer`, `FakeAnthropicServer`, `FakeJevServer` — real HTTP servers on 127.0.0.1
  speaking the OpenAI, Anthropic and Jev APIs, scripted, with fault injection.
- `LoopbackHTTPServer` — the base of the fake servers: a real HTTP server on 127.0.0.1 with fault
  injection (`fail`, `drop_connections`, `malformed`, `delay`) and recorded requests.

Everything here uses the standard library and jevrefine's own dependencies only.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ._function_model import FunctionModel as FunctionModel
from ._http import HTTPRequest as HTTPRequest
from ._http import HTTPResponse as HTTPResponse
from ._http import LoopbackHTTPServer as LoopbackHTTPServer
from ._http import RecordedRequest as RecordedRequest
from ._http import StreamingHTTPResponse as StreamingHTTPResponse

if TYPE_CHECKING:
    from ._anthropic_server import FakeAnthropicServer as FakeAnthropicServer
    from ._jev_server import FakeJevServer as FakeJevServer
    from ._openai_server import FakeOpenAIServer as FakeOpenAIServer

# The fake servers load on first use: most tests need one of them, none needs all.
_LAZY = {
    "FakeOpenAIServer": "._openai_server",
    "FakeAnthropicServer": "._anthropic_server",
    "FakeJevServer": "._jev_server",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(module, __name__), name)


__all__ = [
    "FakeAnthropicServer",
    "FakeJevServer",
    "FakeOpenAIServer",
    "FunctionModel",
    "HTTPRequest",
    "HTTPResponse",
    "LoopbackHTTPServer",
    "RecordedRequest",
    "StreamingHTTPResponse",
]
