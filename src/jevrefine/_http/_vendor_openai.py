"""`OpenAIChatModel.call`'s lean request: the SDK's semantics on the transport's raw core.

The request itself is `_lean.LeanPost`, shared with the Anthropic adapter; this module says
when an `AsyncOpenAI` is eligible and pins the `openai` series it was measured with.

The SDK's low-level `post` builds, per call, its request options (twice: copied for retries),
an `httpx2.Request` with its URL, headers and timeouts, runs httpx's `send` (auth, redirects,
event hooks) and wraps the answer in an `httpx2.Response`: more CPU than the call's own work
(`python -m benchmarks.bench_adapter_cpu`). `LeanPost` sends the same bytes with
`KeepAliveTransport.exchange` and keeps what the SDK does around them, taken from the SDK
client itself so that it stays the SDK's:

- headers: `client._build_headers(...)` (its auth and default headers, `x-stainless-retry-count`,
  `x-stainless-read-timeout`), built once per retry count; the body as the SDK encodes it;
- timeouts: `client.timeout`, per phase, per read as httpx applies them;
- retries: up to `client.max_retries`, on a timeout, a connection error or a status for which
  `client._should_retry(response)` says so (408, 409, 429, 5xx, `x-should-retry`, a Retry-After
  over the SDK's cap), each after `client._calculate_retry_timeout(...)` (Retry-After,
  retry-after-ms, exponential backoff with jitter);
- errors: `openai.APITimeoutError` / `APIConnectionError` with the cause chained, and for a
  status `client._make_status_error_from_response(response)`: the `httpx2.Response` is built on
  that path only. A batch's 429 is not retried here while `rate_limit.active()` (as the
  capped client's hook marks it for the SDK).

It is only used for a client the adapter built itself, with no proxy for the base URL (the lean
transport exists only then) and none of the SDK's other authentication modes (`eligible`). A
redirect (3xx) goes back to the SDK's `post`, which follows it. `tests/test_fast_paths.py` pins
the SDK private helpers used here to the `openai` series this was measured with
(`MEASURED_WITH_OPENAI`).
"""

from __future__ import annotations

import logging
from typing import Any, Final

import openai
from openai import AsyncOpenAI
from openai._base_client import get_platform
from openai._models import FinalRequestOptions

from . import _vendor as _lean
from ._pool import ConnectionPool

__all__ = ["MEASURED_WITH_OPENAI", "LeanPost", "eligible"]

_OPENAI: Final = _lean.Vendor(
    timeout_error=openai.APITimeoutError,
    connection_error=openai.APIConnectionError,
    options=FinalRequestOptions.construct,
    get_platform=get_platform,
    log=logging.getLogger("jevrefine.models.openai"),
)

MEASURED_WITH_OPENAI: Final = ((3, 57), (3, 58))
"""The `openai` versions (from, up to but not including) whose private helpers this module
calls, as `bench_adapter_cpu` measured it (openai 3.57.0, 2026-12-01)."""


def eligible(client: AsyncOpenAI) -> bool:
    """Whether `client` authenticates with a plain API key and nothing else the SDK would run.

    A provider runtime, an API key provider, workload identity, a custom `httpx2.Auth`, an
    idempotency header, default query parameters, or a host with `_` (httpx sends another SNI
    name for it than the raw core would) each need the SDK's own request path.
    """
    sdk: Any = client
    return (
        getattr(sdk, "_provider_runtime", None) is None
        and getattr(sdk, "_api_key_provider", None) is None
        and getattr(sdk, "workload_identity", None) is None
        and sdk.custom_auth is None
        and sdk._idempotency_header is None
        and not sdk.default_query
        and "_" not in client.base_url.host
    )


class LeanPost(_lean.LeanPost):
    """POSTs of JSON to one path of an `AsyncOpenAI` client's base URL, on the raw core."""

    __slots__ = ()

    def __init__(self, client: AsyncOpenAI, transport: ConnectionPool, path: str) -> None:
        super().__init__(client, transport, path, vendor=_OPENAI)
