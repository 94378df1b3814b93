"""Test doubles that users can use in their own tests, too.

- `FunctionModel` — a `ChatModel` answering with a function of the prompt.
- `LoopbackHTTPServer` — the base of the fake servers: a real HTTP server on 127.0.0.1 with fault
  injection (`fail`, `drop_connections`, `malformed`, `delay`) and recorded requests.

Everything here uses the standard library and jevrefine's own dependencies only.
"""

from __future__ import annotations

from ._function_model import FunctionModel as FunctionModel
from ._http import HTTPRequest as HTTPRequest
from ._http import HTTPResponse as HTTPResponse
from ._http import LoopbackHTTPServer as LoopbackHTTPServer
from ._http import RecordedRequest as RecordedRequest
from ._http import StreamingHTTPResponse as StreamingHTTPResponse

__all__ = [
    "FunctionModel",
    "HTTPRequest",
    "HTTPResponse",
    "LoopbackHTTPServer",
    "RecordedRequest",
    "StreamingHTTPResponse",
]
