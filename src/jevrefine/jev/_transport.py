"""The Jev client's transport: the shared lean keep-alive transport of `jevrefine._transport`.

Kept under this name so the Jev side imports it from its own package; the code lives on the low
floor, where the model adapters use it too.
"""

from __future__ import annotations

from .._transport import (
    DEFAULT_MAX_RESPONSE_BYTES,
    MEASURED_WITH_HTTPX2,
    HeaderLines,
    KeepAliveTransport,
    MalformedResponseError,
    RawResponse,
    ResponseTooLargeError,
    acquire_by,
)

__all__ = [
    "DEFAULT_MAX_RESPONSE_BYTES",
    "MEASURED_WITH_HTTPX2",
    "HeaderLines",
    "KeepAliveTransport",
    "MalformedResponseError",
    "RawResponse",
    "ResponseTooLargeError",
    "acquire_by",
]
