"""`OpenAIChatModel.call`'s lean request: the SDK's semantics on the transport's raw core.

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

import anyio
import httpx2
import openai
from openai import AsyncOpenAI
from openai._base_client import get_platform
from openai._models import FinalRequestOptions

from .. import _json, rate_limit
from .._transport import HeaderLines, KeepAliveTransport, RawResponse

__all__ = ["MEASURED_WITH_OPENAI", "LeanPost", "eligible"]

_log = logging.getLogger("jevrefine.models.openai")

MEASURED_WITH_OPENAI: Final = ((3, 57), (3, 58))
"""The `openai` versions (from, up to but not including) whose private helpers this module
calls, as `bench_adapter_cpu` measured it (openai 3.57.0, 2026-12-01)."""

_REQUEST_ERRORS: Final = (httpx2.RequestError,)
"""What the raw core raises for a request that got no answer (httpx's types, as the SDK sees)."""


def eligible(client: AsyncOpenAI) -> bool:
    """Whether `client` authenticates with a plain API key and nothing else the SDK would run.

    A provider runtime, an API key provider, workload identity, a custom `httpx2.Auth`, an
    idempotency header or default query parameters each need the SDK's own request path.
    """
    sdk: Any = client
    return (
        getattr(sdk, "_provider_runtime", None) is None
        and getattr(sdk, "_api_key_provider", None) is None
        and getattr(sdk, "workload_identity", None) is None
        and sdk.custom_auth is None
        and sdk._idempotency_header is None
        and not sdk.default_query
    )


class LeanPost:
    """POSTs of JSON to one path of an `AsyncOpenAI` client's base URL, on the raw core."""

    __slots__ = ("_client", "_fields", "_options", "_path", "_timeouts", "_transport", "_url")

    def __init__(self, client: AsyncOpenAI, transport: KeepAliveTransport, path: str) -> None:
        self._client = client
        self._transport = transport
        self._path = path
        sdk: Any = client
        self._url = httpx2.URL(str(sdk._prepare_url(path)))
        timeout = client.timeout
        if isinstance(timeout, httpx2.Timeout):
            phases = (timeout.connect, timeout.write, timeout.read, timeout.pool)
        else:
            phases = (timeout, timeout, timeout, timeout)
        self._timeouts = tuple(float("inf") if t is None else float(t) for t in phases)
        # The options `post` would build, for the SDK helpers that take them (headers, backoff).
        self._options = FinalRequestOptions.construct(method="post", url=path, json_data=None)
        self._fields: dict[int, HeaderLines] = {}

    async def post(self, body: dict[str, Any]) -> RawResponse | httpx2.Response:
        """The 2xx answer to `body`, after the SDK's retries; else the SDK's error.

        Raises:
            openai.APIStatusError: (its subclasses) an error status, once retrying is over.
            openai.APITimeoutError: no answer in time, once retrying is over.
            openai.APIConnectionError: no answer, once retrying is over.
            ValueError: `body` is not JSON (as the SDK's encoder raises).
        """
        # The SDK's encoding (its `openapi_dumps`: compact, UTF-8, no NaN), on the fast codec.
        payload = _json.dumps(body)
        sdk: Any = self._client
        max_retries = self._client.max_retries
        url = self._url
        connect, write, read, pool = self._timeouts
        for retries_taken in range(max_retries + 1):
            remaining = max_retries - retries_taken
            fields = self._fields.get(retries_taken) or await self._fields_for(retries_taken)
            try:
                raw = await self._transport.exchange(
                    "POST",
                    url.scheme,
                    url.host,
                    url.port,
                    url.raw_path,
                    [(b"content-length", b"%d" % len(payload))],
                    payload,
                    connect=connect,
                    write=write,
                    read=read,
                    pool=pool,
                    fixed=fields,
                )
                if raw.header(b"content-encoding") is not None:
                    # Sent although not asked for: decoded as httpx would (a failure to decode
                    # is a request error there too).
                    raw = await raw.decoded(self._request(payload))
            except httpx2.TimeoutException as exc:
                if remaining > 0:
                    await self._sleep(remaining, None)
                    continue
                raise openai.APITimeoutError(request=self._request(payload)) from exc
            except _REQUEST_ERRORS as exc:
                if remaining > 0:
                    await self._sleep(remaining, None)
                    continue
                raise openai.APIConnectionError(request=self._request(payload)) from exc
            status = raw.status_code
            if 200 <= status < 300:
                return raw
            if 300 <= status < 400:
                # httpx follows redirects for the SDK; the raw core does not: let the SDK.
                result: httpx2.Response = await self._client.post(
                    self._path, body=body, cast_to=httpx2.Response
                )
                return result
            response = self._response(raw, payload)
            if remaining > 0 and sdk._should_retry(response):
                await self._sleep(remaining, response.headers)
                continue
            raise sdk._make_status_error_from_response(response) from None
        raise AssertionError("unreachable: the last attempt returns or raises")  # pragma: no cover

    async def _fields_for(self, retries_taken: int) -> HeaderLines:
        """The header lines of attempt `retries_taken`, as the SDK builds them, plus `Host`."""
        sdk: Any = self._client
        if sdk._platform is None:
            # As the SDK does before its first request: reading the platform may block.
            sdk._platform = await anyio.to_thread.run_sync(get_platform)
        headers = sdk._build_headers(self._options, retries_taken=retries_taken)
        # httpx would add `Host` (and `accept-encoding`, left out: answers come back as sent).
        host = httpx2.Request("POST", self._url).headers["host"].encode("ascii")
        fields = HeaderLines([(b"Host", host), *headers.raw])
        self._fields[retries_taken] = fields
        return fields

    async def _sleep(self, remaining: int, headers: httpx2.Headers | None) -> None:
        sdk: Any = self._client
        delay = sdk._calculate_retry_timeout(remaining, self._options, headers)
        _log.info("Retrying request in %f seconds", delay)
        await anyio.sleep(delay)

    def _request(self, payload: bytes) -> httpx2.Request:
        # The SDK's errors name their request; built only when one is raised.
        return httpx2.Request("POST", self._url, content=payload)

    def _response(self, raw: RawResponse, payload: bytes) -> httpx2.Response:
        """The `httpx2.Response` the SDK's error helpers read (error paths only)."""
        response = httpx2.Response(
            raw.status_code,
            headers=raw.raw_headers,
            content=raw.content,
            request=self._request(payload),
            extensions={"http_version": b"HTTP/1.1", "reason_phrase": raw.reason},
        )
        if raw.status_code == 429 and rate_limit.active():
            # A batch's limiter pauses every call and retries this one: not the SDK, at its
            # own pace (the capped client's response hook marks it alike).
            response.headers["x-should-retry"] = "false"
        return response
