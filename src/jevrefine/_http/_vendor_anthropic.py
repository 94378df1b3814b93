"""`AnthropicChatModel.call`'s requests: the Anthropic SDK's types, and when the lean path runs.

`VendorWire` (`_vendor`) carries them; `anthropic_wire` builds it for an adapter. Its `post`
takes `messages.create`'s keyword arguments (the adapter's params, `extra_body` among them).

- The lean path (`LeanMessages`, on `_vendor.LeanPost`: the SDK's own headers on the raw core)
  keeps what `create` adds around its request: the timeout `create` passes when the client has
  the SDK's default one (`client._calculate_nonstreaming_timeout`), including its `ValueError`
  "Streaming is required" for a `max_tokens` that may run past 10 minutes (the adapter then
  streams); the `DeprecationWarning` for a model in the SDK's list of deprecated ones; and the
  body in the SDK's key order with `extra_body` merged over it. It calls `anthropic` private
  helpers and constants, so it runs only when the installed `anthropic` is in the series it was
  measured with (`ANTHROPIC_LEAN`), the httpx2 one too, and the client is `eligible`.
- Otherwise the SDK's public `messages.with_raw_response.create(**params)` sends.

Either way the SDK client retries nothing itself: the wire's policy does.
"""

from __future__ import annotations

import logging
import warnings
from collections.abc import Mapping
from typing import Any, Final

import anthropic
import httpx2
from anthropic import AsyncAnthropic

from .._measured import FastPath
from ._pool import ConnectionPool, RawResponse
from ._vendor import (
    LeanPost,
    PublicPost,
    Vendor,
    VendorPost,
    VendorWire,
    lean_pool,
    vendor_policy,
)

__all__ = ["ANTHROPIC_LEAN", "MESSAGES_PATH", "LeanMessages", "anthropic_wire", "eligible"]

ANTHROPIC_LEAN: Final = FastPath(
    name="the lean Anthropic request (anthropic's private helpers on the keep-alive core)",
    distribution="anthropic",
    measured=((2, 14), (2, 16)),
    benchmark="python -m benchmarks --only bench_adapter_cpu",
)
"""The `anthropic` series whose private helpers the lean request calls: 2.14.0 measured, and
2.15.0 read against it before widening (`_base_client.py` unchanged; `_client.py` changed only
`_should_retry`'s 401 retry for a token cache, a client this path never takes)."""

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

_ANTHROPIC: Final = Vendor(
    status_error=anthropic.APIStatusError,
    timeout_error=anthropic.APITimeoutError,
    connection_error=anthropic.APIConnectionError,
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


class LeanMessages(VendorPost):
    """`messages.create` (not streamed) of one `AsyncAnthropic`, on the keep-alive core.

    Args:
        client: an `eligible` client.
        pool: the keep-alive core mounted in its HTTP client for the base URL.
        redirected: the SDK's public request, for a redirect it should follow.
    """

    path = "lean"

    __slots__ = ("_client", "_default_timeout", "_post")

    def __init__(
        self, client: AsyncAnthropic, pool: ConnectionPool, redirected: PublicPost
    ) -> None:
        from anthropic._base_client import get_platform
        from anthropic._constants import DEFAULT_TIMEOUT
        from anthropic._models import FinalRequestOptions

        sdk: Any = client
        self._client = client
        # As `create`: with the SDK's default timeout it passes one of its own per request
        # (the same for every `max_tokens` it lets through), else none (the client's applies).
        self._default_timeout = client.timeout == DEFAULT_TIMEOUT
        timeout = sdk._calculate_nonstreaming_timeout(1, None) if self._default_timeout else None
        vendor = Vendor(
            status_error=_ANTHROPIC.status_error,
            timeout_error=_ANTHROPIC.timeout_error,
            connection_error=_ANTHROPIC.connection_error,
            log=_ANTHROPIC.log,
            options=FinalRequestOptions.construct,
            get_platform=get_platform,
        )
        self._post = LeanPost(
            client, pool, MESSAGES_PATH, vendor=vendor, redirected=redirected, timeout=timeout
        )

    async def send(
        self, body: dict[str, Any], *, retries_taken: int, deadline: float
    ) -> RawResponse:
        """Send `messages.create(**body)`'s request once (`body`: the adapter's params).

        Raises:
            ValueError: "Streaming is required" (the SDK's own check), before anything is sent.
            StatusError: an error status.
        """
        from anthropic._constants import MODEL_NONSTREAMING_TOKENS
        from anthropic._data import DEPRECATED_MODELS

        model = body["model"]
        if self._default_timeout:
            sdk: Any = self._client
            # Raises "Streaming is required" exactly where `create` does.
            sdk._calculate_nonstreaming_timeout(
                body["max_tokens"], MODEL_NONSTREAMING_TOKENS.get(model, None)
            )
        if retries_taken == 0 and model in DEPRECATED_MODELS:
            warnings.warn(
                f"the model {model!r} is deprecated (end of life {DEPRECATED_MODELS[model]}); "
                "see https://docs.anthropic.com/en/docs/resources/model-deprecations",
                DeprecationWarning,
                stacklevel=4,
            )
        return await self._post.send(_body(body), retries_taken=retries_taken, deadline=deadline)


def anthropic_wire(
    client: AsyncAnthropic, pool: ConnectionPool | None, max_retries: int
) -> VendorWire:
    """The wire of an adapter's `call()`s, retried `max_retries` times by the wire's policy.

    `client` itself must retry nothing (`max_retries=0`); `pool` is the keep-alive core mounted
    in its HTTP client (`None`: none is).
    """

    async def request(params: dict[str, Any], headers: Any) -> httpx2.Response:
        extra: Any = {"extra_headers": headers} if headers else {}
        raw = await client.messages.with_raw_response.create(**params, **extra)
        response: httpx2.Response = raw.http_response
        return response

    public = PublicPost(request, _ANTHROPIC)
    policy = vendor_policy(max_retries)
    lean = lean_pool(pool, ANTHROPIC_LEAN, lambda: eligible(client))
    if lean is None:
        return VendorWire(public, policy, _ANTHROPIC)
    return VendorWire(LeanMessages(client, lean, public), policy, _ANTHROPIC)


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
