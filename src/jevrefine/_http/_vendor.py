"""The lean request both vendor-SDK adapters share: an SDK's semantics on the raw core.

An SDK's low-level `post` builds, per call, its request options (twice: copied for retries), an
`httpx2.Request` with its URL, headers and timeouts, runs httpx's `send` (auth, redirects, event
hooks) and wraps the answer in an `httpx2.Response`: more CPU than the call's own work
(`python -m benchmarks.bench_adapter_cpu`). `LeanPost` sends the same bytes with
`KeepAliveTransport.exchange` and keeps what the SDK does around them, taken from the SDK client
itself so that it stays the SDK's. Both SDKs (`openai`, `anthropic`) come from one generator and
share these helpers, their names and meanings:

- headers: `client._build_headers(options, retries_taken=n)` (its auth and default headers,
  `x-stainless-retry-count`, `x-stainless-timeout`, `x-stainless-read-timeout`), built once per
  retry count; the body encoded as the SDK's `openapi_dumps` does;
- timeouts: the request's (`timeout=`) or else `client.timeout`, per phase, per read as httpx
  applies them;
- retries: up to `client.max_retries`, on a timeout, a connection error or a status for which
  `client._should_retry(response)` says so (408, 409, 429, 5xx, `x-should-retry`), each after
  `client._calculate_retry_timeout(...)` (Retry-After, retry-after-ms, exponential backoff with
  jitter);
- errors: the SDK's `APITimeoutError` / `APIConnectionError` with the cause chained, and for a
  status `client._make_status_error_from_response(response)`: the `httpx2.Response` is built on
  that path only. A batch's 429 is not retried here while `rate_limit.active()` (as the capped
  client's hook marks it for the SDK).

A redirect (3xx) goes back to the SDK's own `post`, which follows it. Each adapter's module
(`_lean_openai`, `_lean_anthropic`) says when its client is eligible and pins the SDK series
whose private helpers this calls (`tests/test_fast_paths.py`).

`JSONObject` and `sdk_body` read a 200's body the way both SDKs' lenient models hand it over,
without building them.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import anyio
import httpx2

from .. import rate_limit
from . import _json
from ._clock import loop_time
from ._pool import ConnectionPool, HeaderLines, RawResponse

__all__ = ["DeadlineExpired", "JSONObject", "LeanPost", "Vendor", "sdk_body", "unwrapped"]

_NO_DEADLINE = float("inf")
T = TypeVar("T")


class DeadlineExpired(Exception):
    """The caller's `deadline` passed before an answer: the adapter's total-timeout error."""


_REQUEST_ERRORS = (httpx2.RequestError,)
"""What the raw core raises for a request that got no answer (httpx's types, as the SDK sees)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Vendor:
    """What differs between the SDKs around the shared helpers: their own types and logger."""

    timeout_error: Callable[..., Exception]
    """The SDK's `APITimeoutError` (built with `request=`)."""
    connection_error: Callable[..., Exception]
    """The SDK's `APIConnectionError` (built with `request=`)."""
    options: Callable[..., Any]
    """The SDK's `FinalRequestOptions.construct`, for the helpers that take options."""
    get_platform: Callable[[], Any]
    """The SDK's `get_platform`, which it runs (in a thread) before its first request."""
    log: logging.Logger
    """Where the retry notes go (the adapter's logger)."""


class LeanPost:
    """POSTs of JSON to one path of an SDK client's base URL, on the raw core.

    Args:
        client: the SDK client (`AsyncOpenAI`, `AsyncAnthropic`) whose semantics are kept.
        transport: the lean transport mounted in that client's HTTP client for the base URL.
        path: the path, relative to the base URL (`"/chat/completions"`).
        vendor: the SDK's own types.
        timeout: the request's timeout as the SDK's resource method passes it (Anthropic's
            non-streaming default); `None`: the client's.
    """

    __slots__ = (
        "_client",
        "_fields",
        "_options",
        "_path",
        "_timeout",
        "_timeouts",
        "_transport",
        "_url",
        "_vendor",
    )

    def __init__(
        self,
        client: Any,
        transport: ConnectionPool,
        path: str,
        *,
        vendor: Vendor,
        timeout: httpx2.Timeout | None = None,
    ) -> None:
        self._client = client
        self._transport = transport
        self._path = path
        self._vendor = vendor
        self._timeout = timeout
        self._url = httpx2.URL(str(client._prepare_url(path)))
        applied = client.timeout if timeout is None else timeout
        if isinstance(applied, httpx2.Timeout):
            phases = (applied.connect, applied.write, applied.read, applied.pool)
        else:
            phases = (applied, applied, applied, applied)
        self._timeouts = tuple(float("inf") if t is None else float(t) for t in phases)
        # The options `post` would build, for the SDK helpers that take them (headers, backoff).
        extra = {} if timeout is None else {"timeout": timeout}
        self._options = vendor.options(method="post", url=path, json_data=None, **extra)
        self._fields: dict[int, HeaderLines] = {}

    async def post(
        self, body: dict[str, Any], *, deadline: float = _NO_DEADLINE
    ) -> RawResponse | httpx2.Response:
        """The 2xx answer to `body`, after the SDK's retries; else the SDK's error.

        `deadline` (an `anyio.current_time()`) bounds the whole of it, retries and their
        back-off included, without a cancel scope of the caller's around it (one fewer per call,
        `bench_adapter_cpu`): each exchange is given it, and no wait here goes past it.

        Raises:
            DeadlineExpired: `deadline` passed first.
            APIStatusError: (the SDK's, its subclasses) an error status, once retrying is over.
            APITimeoutError: (the SDK's) no answer in time, once retrying is over.
            APIConnectionError: (the SDK's) no answer, once retrying is over.
            ValueError: `body` is not JSON (as the SDK's encoder raises).
        """
        # The SDK's encoding (its `openapi_dumps`; the adapter's body is plain JSON already):
        # compact UTF-8 with no NaN, as `openapi_dumps`, on the fast codec (`jevrefine._json`).
        payload = _json.dumps(body)
        sdk = self._client
        vendor = self._vendor
        max_retries = sdk.max_retries
        url = self._url
        connect, write, read, pool = self._timeouts
        for retries_taken in range(max_retries + 1):
            remaining = max_retries - retries_taken
            fields = self._fields.get(retries_taken) or await _by(
                deadline, self._fields_for(retries_taken)
            )
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
                    deadline=deadline,
                )
                if raw.header(b"content-encoding") is not None:
                    # Sent although not asked for: decoded as httpx would (a failure to decode
                    # is a request error there too).
                    raw = await raw.decoded(self._request(payload))
            except httpx2.TimeoutException as exc:
                if loop_time() >= deadline:
                    raise DeadlineExpired from None  # the caller's bound, not a phase's timeout
                if remaining > 0:
                    await self._sleep(remaining, None, deadline)
                    continue
                raise vendor.timeout_error(request=self._request(payload)) from exc
            except _REQUEST_ERRORS as exc:
                if remaining > 0:
                    await self._sleep(remaining, None, deadline)
                    continue
                raise vendor.connection_error(request=self._request(payload)) from exc
            status = raw.status_code
            if 200 <= status < 300:
                return raw
            if 300 <= status < 400:
                return await _by(deadline, self._redirected(body))
            response = self._response(raw, payload)
            if remaining > 0 and sdk._should_retry(response):
                await self._sleep(remaining, response.headers, deadline)
                continue
            raise sdk._make_status_error_from_response(response) from None
        raise AssertionError("unreachable: the last attempt returns or raises")  # pragma: no cover

    async def _redirected(self, body: dict[str, Any]) -> httpx2.Response:
        # httpx follows redirects for the SDK; the raw core does not: let the SDK, whole.
        extra: dict[str, Any] = {}
        if self._timeout is not None:
            extra["options"] = {"timeout": self._timeout}
        result: httpx2.Response = await self._client.post(
            self._path, body=body, cast_to=httpx2.Response, **extra
        )
        return result

    async def _fields_for(self, retries_taken: int) -> HeaderLines:
        """The header lines of attempt `retries_taken`, as the SDK builds them, plus `Host`."""
        sdk = self._client
        if sdk._platform is None:
            # As the SDK does before its first request: reading the platform may block.
            sdk._platform = await anyio.to_thread.run_sync(self._vendor.get_platform)
        headers = sdk._build_headers(self._options, retries_taken=retries_taken)
        # httpx would add `Host` (and `accept-encoding`, left out: answers come back as sent).
        host = httpx2.Request("POST", self._url).headers["host"].encode("ascii")
        fields = HeaderLines([(b"Host", host), *headers.raw])
        self._fields[retries_taken] = fields
        return fields

    async def _sleep(self, remaining: int, headers: httpx2.Headers | None, deadline: float) -> None:
        delay = self._client._calculate_retry_timeout(remaining, self._options, headers)
        self._vendor.log.info("Retrying request in %f seconds", delay)
        wake = loop_time() + delay
        if wake >= deadline:
            # The retry would start past the bound: wait until it, as the caller's scope did.
            await anyio.sleep_until(deadline)
            raise DeadlineExpired
        await anyio.sleep_until(wake)

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


async def _by(deadline: float, step: Awaitable[T]) -> T:
    """`step`'s result, unless `deadline` passes first (`DeadlineExpired`; rare steps only)."""
    if deadline == _NO_DEADLINE:
        return await step
    with anyio.move_on_at(deadline) as scope:
        return await step
    assert scope.cancelled_caught
    raise DeadlineExpired


class JSONObject:
    """A decoded JSON object, read like the SDKs' lenient models (built with `construct`).

    Keys are attributes, an absent key is `None`, nested objects and arrays are wrapped alike;
    the adapters check every value as they read it (`_stream_items.Reader`), exactly as they
    check the SDKs' objects.

    Wrapped once, when built, into the instance's `__dict__`: a whole response is read through
    a dozen attribute lookups, and wrapping on each lookup (a `__getattr__` per attribute, a new
    wrapper per nested object) cost more than the reading (`bench_adapter_cpu`). Only an absent
    key reaches `__getattr__`. The decoded object itself stays in a slot (`unwrapped`), which
    a key of the same name cannot shadow.
    """

    __slots__ = ("__dict__", "_data")

    def __init__(self, data: dict[str, Any]) -> None:
        self._data = data
        attributes = self.__dict__
        attributes.update(data)
        for key, value in data.items():
            kind = type(value)  # a decoder's own dict and list: no subclass to allow for
            if kind is dict or kind is list:
                attributes[key] = _wrapped(value)

    def __getattr__(self, name: str) -> Any:
        return None


def unwrapped(value: JSONObject) -> dict[str, Any]:
    """The decoded JSON object behind `value` (where the API has a free-form object)."""
    return value._data


def _wrapped(value: object) -> Any:
    kind = type(value)
    if kind is dict:
        return JSONObject(value)  # type: ignore[arg-type]
    if kind is list:
        return [_wrapped(item) for item in value]  # type: ignore[attr-defined]
    return value


def sdk_body(response: RawResponse | httpx2.Response) -> object:
    """The body of a 2xx as the SDKs' `create` hands it over, without their models.

    A JSON object (wrapped), another JSON value, or the text when the body is not JSON and does
    not claim to be; `ValueError` (the caller translates it) when it claims JSON and is not.
    """
    if isinstance(response, RawResponse):
        content_type = (response.header(b"content-type") or "*").split(";", 1)[0]
    else:
        content_type = response.headers.get("content-type", "*").split(";", 1)[0]
    if content_type.lower().endswith("json"):
        data = _json.loads(response.content)
    else:
        try:
            data = _json.loads(response.content)
        except ValueError:
            if isinstance(response, RawResponse):  # decoded by its charset, as httpx does
                response = httpx2.Response(
                    200, headers=response.raw_headers, content=response.content
                )
            return response.text
    return JSONObject(data) if isinstance(data, dict) else data
