"""`AnthropicChatModel.call`'s lean request: `messages.create`'s semantics on the raw core.

`AsyncAnthropic.messages.create` transforms its params, runs the SDK's low-level `post` (request
options copied for retries, an `httpx2.Request`, httpx's `send`, an `httpx2.Response`) and builds
a `Message` model of the answer: more CPU than the call's own work
(`python -m benchmarks.bench_adapter_cpu`). `LeanMessages.create` posts the same body with the
shared `_lean.LeanPost` (the SDK's own headers, timeouts, retries and errors, taken from the
client) and keeps what `create` itself adds:

- the timeout `create` passes when the client has the SDK's default one
  (`client._calculate_nonstreaming_timeout`), including its `ValueError` "Streaming is
  required" for a `max_tokens` that may run past 10 minutes (the adapter then streams);
- the `DeprecationWarning` for a model in the SDK's list of deprecated ones;
- the body: the SDK's key order (`max_tokens`, `messages`, `model`, ...), `extra_body` merged
  over it as the SDK merges it, encoded as its `openapi_dumps` does.

The answer is handed back as the SDK's lenient parsing would (`_lean.sdk_body`: a JSON object as
a `JSONObject`, whatever else as it is); the adapter reads both alike.

Only for a client the adapter built itself with no proxy for the base URL (the lean transport
exists only then) and a plain API key, nothing else the SDK would run (`eligible`).
`tests/test_fast_paths.py` pins the SDK private helpers used here to the `anthropic` series this
was measured with (`MEASURED_WITH_ANTHROPIC`).
"""

from __future__ import annotations

import logging
import warnings
from collections.abc import Mapping
from typing import Any, Final

import anthropic
from anthropic import AsyncAnthropic
from anthropic._base_client import get_platform
from anthropic._constants import DEFAULT_TIMEOUT, MODEL_NONSTREAMING_TOKENS
from anthropic._data import DEPRECATED_MODELS
from anthropic._models import FinalRequestOptions

from . import _vendor as _lean
from ._pool import ConnectionPool

__all__ = ["MEASURED_WITH_ANTHROPIC", "MESSAGES_PATH", "LeanMessages", "eligible"]

MEASURED_WITH_ANTHROPIC: Final = ((2, 14), (2, 16))
"""The `anthropic` versions (from, up to but not including) whose private helpers this module
calls, as `bench_adapter_cpu` measured it (anthropic 2.14.0 and 2.15.0, 2026-12-01). 2.15.0,
released that day, was read against 2.14.0 before widening: `_base_client.py` is unchanged, and
`_client.py` changed only `_should_retry`'s 401 retry for a token cache, a client this path
never takes (`eligible`)."""

MESSAGES_PATH: Final = "/v1/messages"

_BODY_ORDER: Final = (
    "max_tokens",
    "messages",
    "model",
    "cache_control",
    "container",
    "diagnostics",
    "inference_geo",
    "metadata",
    "output_config",
    "service_tier",
    "speed",
    "stop_sequences",
    "stream",
    "system",
    "thinking",
    "tool_choice",
    "tools",
)
"""The order in which `messages.create` lays out its body (the bytes stay the SDK's)."""

_ABSENT: Final = object()
"""A keyword `create` knows that the params leave out (the SDK's `omit`)."""

_ANTHROPIC: Final = _lean.Vendor(
    timeout_error=anthropic.APITimeoutError,
    connection_error=anthropic.APIConnectionError,
    options=FinalRequestOptions.construct,
    get_platform=get_platform,
    log=logging.getLogger("jevrefine.models.anthropic"),
)


def eligible(client: AsyncAnthropic) -> bool:
    """Whether `client` authenticates with a plain API key and nothing else the SDK would run.

    A subclass (Bedrock, Vertex: request signing, other URLs), an `auth_token`, credentials (a
    profile, a config, workload identity: their token cache and `httpx2.Auth`), middleware,
    OpenTelemetry spans, an idempotency header, default query parameters, or a host with `_`
    (the SDK sends another SNI name then) each need the SDK's own request path.
    """
    sdk: Any = client
    return (
        type(client) is AsyncAnthropic
        and sdk.api_key is not None
        and sdk.auth_token is None
        and sdk.credentials is None
        and sdk._token_cache is None
        and sdk.custom_auth is None
        and not sdk._credential_headers
        and not sdk.middleware
        and sdk._tracer is None
        and sdk._idempotency_header is None
        and not sdk.default_query
        and "_" not in client.base_url.host
    )


class LeanMessages:
    """`messages.create` (not streamed) of one `AsyncAnthropic`, on the lean transport's core.

    Args:
        client: an `eligible` client.
        transport: the lean transport mounted in its HTTP client for the base URL.
    """

    __slots__ = ("_client", "_default_timeout", "_post")

    def __init__(self, client: AsyncAnthropic, transport: ConnectionPool) -> None:
        sdk: Any = client
        self._client = client
        # As `create`: with the SDK's default timeout it passes one of its own per request
        # (the same for every `max_tokens` it lets through), else none (the client's applies).
        self._default_timeout = client.timeout == DEFAULT_TIMEOUT
        timeout = sdk._calculate_nonstreaming_timeout(1, None) if self._default_timeout else None
        self._post = _lean.LeanPost(
            client, transport, MESSAGES_PATH, vendor=_ANTHROPIC, timeout=timeout
        )

    async def create(self, params: Mapping[str, Any], *, deadline: float = float("inf")) -> object:
        """The answer to `messages.create(**params)`, as the SDK's lenient parsing hands it.

        `params` are the adapter's: the keywords `create` takes, `extra_body` among them.

        Raises:
            ValueError: "Streaming is required" (the SDK's own check), or a body that claims to
                be JSON and is not.
            anthropic.APIStatusError: (its subclasses) an error status, once retrying is over.
            anthropic.APITimeoutError: no answer in time, once retrying is over.
            anthropic.APIConnectionError: no answer, once retrying is over.
            DeadlineExpired: `deadline` (an `anyio.current_time()`) passed first.
        """
        model = params["model"]
        if self._default_timeout:
            sdk: Any = self._client
            # Raises "Streaming is required" exactly where `create` does.
            sdk._calculate_nonstreaming_timeout(
                params["max_tokens"], MODEL_NONSTREAMING_TOKENS.get(model, None)
            )
        if model in DEPRECATED_MODELS:
            warnings.warn(
                f"the model {model!r} is deprecated (end of life {DEPRECATED_MODELS[model]}); "
                "see https://docs.anthropic.com/en/docs/resources/model-deprecations",
                DeprecationWarning,
                stacklevel=3,
            )
        raw = await self._post.post(_body(params), deadline=deadline)
        return _lean.sdk_body(raw)


def _body(params: Mapping[str, Any]) -> dict[str, Any]:
    """The JSON body `create` builds of `params`: its key order, then `extra_body` over it.

    As the SDK's merge: a key of `extra_body` that `create` also knows takes that key's place.
    """
    body = {key: params.get(key, _ABSENT) for key in _BODY_ORDER}
    body.update((k, v) for k, v in params.items() if k not in body and k != "extra_body")
    extra = params.get("extra_body")
    if extra:
        body.update(extra)
    return {key: value for key, value in body.items() if value is not _ABSENT}
