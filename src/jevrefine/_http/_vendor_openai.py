"""`OpenAIChatModel.call`'s requests: the OpenAI SDK's types, and when the lean path is taken.

`VendorWire` (`_vendor`) carries them; this module builds it for an adapter. The lean path
(`_vendor.LeanPost`: the SDK's own headers on the raw core) calls `openai` private helpers
(`_build_headers`, `_prepare_url`, `_platform`, `FinalRequestOptions`), so it is taken only when
the installed `openai` is in the series it was measured with (`OPENAI_LEAN`), the httpx2 one too
(the core is mounted under the SDK's client), and the client is `eligible`; otherwise the SDK's
public `client.post(..., cast_to=httpx2.Response)` sends. Either way the SDK client retries
nothing itself: the wire's policy does.
"""

from __future__ import annotations

import logging
from typing import Any, Final

import httpx2
import openai
from openai import AsyncOpenAI

from .._measured import FastPath
from ._pool import ConnectionPool
from ._vendor import LeanPost, PublicPost, Vendor, VendorWire, lean_pool, vendor_policy

__all__ = ["OPENAI_LEAN", "eligible", "openai_wire"]

OPENAI_LEAN: Final = FastPath(
    name="the lean OpenAI request (openai's private helpers on the keep-alive core)",
    distribution="openai",
    measured=((3, 57), (3, 58)),
    benchmark="python -m benchmarks --only bench_adapter_cpu",
)
"""The `openai` series whose private helpers the lean request calls, as measured."""

_OPENAI: Final = Vendor(
    status_error=openai.APIStatusError,
    timeout_error=openai.APITimeoutError,
    connection_error=openai.APIConnectionError,
    log=logging.getLogger("jevrefine.models.openai"),
)


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


def openai_wire(
    client: AsyncOpenAI, pool: ConnectionPool | None, path: str, max_retries: int
) -> VendorWire:
    """The wire of an adapter's calls to `path` of `client`'s base URL.

    Retried `max_retries` times by the wire's policy (`client` itself must retry nothing:
    `max_retries=0`).

    `pool` is the keep-alive core mounted in `client`'s HTTP client (`None`: none is).
    """

    async def request(body: dict[str, Any], headers: Any) -> httpx2.Response:
        options: Any = {"headers": headers} if headers else {}
        response: httpx2.Response = await client.post(
            path, body=body, cast_to=httpx2.Response, options=options
        )
        return response

    public = PublicPost(request, _OPENAI)
    policy = vendor_policy(max_retries)
    lean = lean_pool(pool, OPENAI_LEAN, lambda: eligible(client))
    if lean is None:
        return VendorWire(public, policy, _OPENAI)
    from openai._base_client import get_platform
    from openai._models import FinalRequestOptions

    vendor = Vendor(
        status_error=_OPENAI.status_error,
        timeout_error=_OPENAI.timeout_error,
        connection_error=_OPENAI.connection_error,
        log=_OPENAI.log,
        options=FinalRequestOptions.construct,
        get_platform=get_platform,
    )
    return VendorWire(
        LeanPost(client, lean, path, vendor=vendor, redirected=public), policy, vendor
    )
