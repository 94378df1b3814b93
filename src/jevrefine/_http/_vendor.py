"""What both vendor-SDK adapters send through: one request of an SDK's semantics, retried once.

Both SDKs (`openai`, `anthropic`) come from one generator and share their request helpers'
names and meanings, so one module serves both. A `VendorWire` sends a whole-response request by
one of two paths and retries it by the wire's one `RetryPolicy` (the SDK clients the adapters
build retry nothing themselves: `max_retries=0`), so an answer gets one treatment whichever path
carried it:

- `LeanPost`, the fast path: the same bytes on the raw keep-alive core, with the SDK's own
  headers (`client._build_headers(options, retries_taken=n)`: auth, default headers,
  `x-stainless-*`), built once per retry count, and the body encoded as the SDK's
  `openapi_dumps` does. An SDK's low-level `post` builds, per call, its request options, an
  `httpx2.Request`, runs httpx's `send` (auth, redirects, event hooks) and wraps the answer in
  an `httpx2.Response`: more CPU than the call's own work (`python -m
  benchmarks.bench_adapter_cpu`). It calls SDK private helpers, so it is taken only inside the
  SDK series it was measured with (each adapter's `FastPath`, `jevrefine._measured`), for a
  client the adapter built itself with a plain API key (`_vendor_openai.eligible`,
  `_vendor_anthropic.eligible`). A redirect (3xx) goes to the SDK's own `post`, which follows it.
- `PublicPost`: the SDK's public request (`client.post(..., cast_to=httpx2.Response)`, or an
  adapter's `with_raw_response.create`), everywhere else.

Either way the answer is a `RawResponse`; an error status is a `StatusError` (retried or not by
the policy, then the adapter's `ModelHTTPError`), no answer is httpx2's transport error, and the
SDKs' own error types never leave this module (`sdk_failure`). A wire made by
`without_rate_limit_retries()` gives a 429 back at once: a rate limiter above it (a batch's
`RateLimitedModel`) pauses every call and retries that one, at its own pace.

`JSONObject` and `sdk_body` read a 200's body the way both SDKs' lenient models hand it over,
without building them.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, Final, TypeVar

import anyio
import httpx2

from .._measured import FastPath, takes_fast_path
from . import _json
from ._clock import NO_LIMIT
from ._httpx import HTTPX2_CORE
from ._pool import ConnectionPool, HeaderLines, RawResponse
from ._retry import SDK_RETRY_STATUSES, RetryPolicy, StatusError, retrying
from ._wire import DeadlineExpired

__all__ = [
    "JSONObject",
    "LeanPost",
    "PublicPost",
    "Vendor",
    "VendorPost",
    "VendorWire",
    "lean_pool",
    "raw_of",
    "sdk_body",
    "sdk_failure",
    "unwrapped",
    "vendor_policy",
]

T = TypeVar("T")

_SDK_MAX_BACKOFF: Final = 8.0
"""The SDKs' longest backoff (0.5 s doubling to 8 s, minus up to 25 % jitter)."""


def lean_pool(
    pool: ConnectionPool | None, fast_path: FastPath, eligible: Callable[[], bool]
) -> ConnectionPool | None:
    """`pool` when a request may take the lean path through it, else `None` (the public path).

    Lean needs a keep-alive core mounted (`pool`), httpx2 and the SDK inside their measured
    series (`fast_path`, checked before anything of the SDK's is read) and a client the adapter
    built itself (`eligible`, called last: it reads the SDK client's private attributes).
    """
    if pool is None or not takes_fast_path(HTTPX2_CORE) or not takes_fast_path(fast_path):
        return None
    return pool if eligible() else None


def vendor_policy(max_retries: int) -> RetryPolicy:
    """The retry policy of a model adapter: the vendor SDKs' rules, run by the wire.

    408, 409, 429 and 5xx, timeouts and connection errors; a server's `x-should-retry`
    decides over the status; `retry-after-ms` / `retry-after` up to 60 s, else the SDKs'
    backoff. (Unlike the SDKs, a longer Retry-After is not waited out with a backoff: the error
    is given at once, as on the Jev side.)
    """
    return RetryPolicy(
        max_retries=max_retries,
        max_backoff=_SDK_MAX_BACKOFF,
        retry_statuses=SDK_RETRY_STATUSES,
        should_retry_header=True,
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class Vendor:
    """What differs between the SDKs: their error types, options builder and logger."""

    status_error: type[Exception]
    """The SDK's `APIStatusError` (has `.response`, an `httpx2.Response`)."""
    timeout_error: type[Exception]
    """The SDK's `APITimeoutError`."""
    connection_error: type[Exception]
    """The SDK's `APIConnectionError` (its cause: the transport's error)."""
    log: logging.Logger
    """Where the retry notes go (the adapter's logger)."""
    options: Callable[..., Any] | None = None
    """The SDK's `FinalRequestOptions.construct`, for the lean path's headers."""
    get_platform: Callable[[], Any] | None = None
    """The SDK's `get_platform`, which it runs (in a thread) before its first request."""


def raw_of(response: httpx2.Response) -> RawResponse:
    """An `httpx2.Response` that has been read, as the wire's one response type."""
    reason = response.extensions.get("reason_phrase", b"")
    lines = [(k, v) for k, v in response.headers.raw if k.lower() != b"content-encoding"]
    return RawResponse(response.status_code, bytes(reason), lines, response.content)


def sdk_failure(exc: Exception, vendor: Vendor) -> Exception:
    """What the wire says for one of the SDK's errors; anything else as it is.

    An error status is a `StatusError`; a timeout or a connection error is the transport's
    error the SDK wrapped (its cause), so that the policy and the adapter see one vocabulary.
    """
    if isinstance(exc, vendor.status_error):
        response: httpx2.Response = exc.response  # type: ignore[attr-defined]
        try:
            return StatusError(raw_of(response))
        except httpx2.ResponseNotRead:  # a streamed response's error body, not read
            return StatusError(
                RawResponse(response.status_code, b"", list(response.headers.raw), b"")
            )
    cause = exc.__cause__
    if isinstance(exc, vendor.timeout_error):
        return cause if isinstance(cause, httpx2.TimeoutException) else httpx2.ReadTimeout(str(exc))
    if isinstance(exc, vendor.connection_error):
        return cause if isinstance(cause, httpx2.TransportError) else httpx2.ConnectError(str(exc))
    return exc


class VendorPost:
    """One attempt of a whole-response POST of JSON: a 2xx `RawResponse`, else a failure."""

    path: ClassVar[str] = "public"
    """`"lean"` for the raw core with the SDK's headers, `"public"` for the SDK's request."""

    async def send(
        self, body: dict[str, Any], *, retries_taken: int, deadline: float
    ) -> RawResponse:
        """Send `body` once (`retries_taken`: the attempts before this one).

        Raises:
            StatusError: an error status.
            DeadlineExpired: `deadline` (an `anyio.current_time()`) passed first.
            httpx2.TransportError: no answer (the transport's own types).
        """
        raise NotImplementedError


class PublicPost(VendorPost):
    """The SDK's public request: `request(body, headers)` returns the `httpx2.Response` read.

    `request` is the adapter's call of the SDK's public API (`client.post(path, body=...,
    cast_to=httpx2.Response, options=...)`, or `messages.with_raw_response.create(...)`), on a
    client that retries nothing itself.
    """

    __slots__ = ("_request", "_vendor")

    def __init__(
        self,
        request: Callable[[dict[str, Any], Mapping[str, str]], Awaitable[httpx2.Response]],
        vendor: Vendor,
    ) -> None:
        self._request = request
        self._vendor = vendor

    async def send(
        self, body: dict[str, Any], *, retries_taken: int, deadline: float
    ) -> RawResponse:
        # The retry count the SDK would have sent, had it retried itself.
        headers = {"x-stainless-retry-count": str(retries_taken)} if retries_taken else {}
        with anyio.CancelScope(deadline=deadline) as scope:
            try:
                response = await self._request(body, headers)
            except Exception as exc:
                failure = sdk_failure(exc, self._vendor)
                if failure is exc:
                    raise
                # Not chained: the SDK's exception holds its request (the URL, credentials
                # and all); what the wire needs is in `failure`.
                raise failure from None
        if scope.cancelled_caught:
            raise DeadlineExpired
        return raw_of(response)


class LeanPost(VendorPost):
    """POSTs of JSON to one path of an SDK client's base URL, on the raw core (the fast path).

    Args:
        client: the SDK client (`AsyncOpenAI`, `AsyncAnthropic`) whose headers are kept.
        pool: the keep-alive core mounted in that client's HTTP client for the base URL.
        path: the path, relative to the base URL (`"/chat/completions"`).
        vendor: the SDK's own types.
        redirected: the SDK's public request, for a redirect (3xx) it should follow.
        timeout: the request's timeout as the SDK's resource method passes it (Anthropic's
            non-streaming default); `None`: the client's.
    """

    path = "lean"

    __slots__ = (
        "_client",
        "_fields",
        "_options",
        "_pool",
        "_redirected",
        "_timeouts",
        "_url",
        "_vendor",
    )

    def __init__(
        self,
        client: Any,
        pool: ConnectionPool,
        path: str,
        *,
        vendor: Vendor,
        redirected: PublicPost,
        timeout: httpx2.Timeout | None = None,
    ) -> None:
        assert vendor.options is not None
        assert vendor.get_platform is not None
        self._client = client
        self._pool = pool
        self._vendor = vendor
        self._redirected = redirected
        self._url = httpx2.URL(str(client._prepare_url(path)))
        applied = client.timeout if timeout is None else timeout
        if isinstance(applied, httpx2.Timeout):
            phases = (applied.connect, applied.write, applied.read, applied.pool)
        else:
            phases = (applied, applied, applied, applied)
        self._timeouts = tuple(NO_LIMIT if t is None else float(t) for t in phases)
        # The options `post` would build, for the SDK helper that takes them (headers).
        extra = {} if timeout is None else {"timeout": timeout}
        self._options = vendor.options(method="post", url=path, json_data=None, **extra)
        self._fields: dict[int, HeaderLines] = {}

    async def send(
        self, body: dict[str, Any], *, retries_taken: int, deadline: float
    ) -> RawResponse:
        # The SDK's encoding (its `openapi_dumps`; the adapter's body is plain JSON already):
        # compact UTF-8 with no NaN, on the fast codec (`_json`).
        payload = _json.dumps(body)
        url = self._url
        connect, write, read, pool = self._timeouts
        fields = self._fields.get(retries_taken) or await _by(
            deadline, self._fields_for(retries_taken)
        )
        try:
            raw = await self._pool.exchange(
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
        except httpx2.TimeoutException:
            if anyio.current_time() >= deadline:
                raise DeadlineExpired from None  # the caller's bound, not a phase's timeout
            raise
        if raw.header(b"content-encoding") is not None:
            # Sent although not asked for: decoded as httpx would (a failure to decode is a
            # `DecodingError`, never retried).
            raw = await raw.decoded()
        status = raw.status_code
        if 200 <= status < 300:
            return raw
        if 300 <= status < 400:
            # httpx follows redirects for the SDK; the raw core does not: let the SDK, whole.
            return await self._redirected.send(body, retries_taken=retries_taken, deadline=deadline)
        raise StatusError(raw)

    async def _fields_for(self, retries_taken: int) -> HeaderLines:
        """The header lines of attempt `retries_taken`, as the SDK builds them, plus `Host`."""
        sdk = self._client
        if sdk._platform is None:
            # As the SDK does before its first request: reading the platform may block.
            assert self._vendor.get_platform is not None
            sdk._platform = await anyio.to_thread.run_sync(self._vendor.get_platform)
        headers = sdk._build_headers(self._options, retries_taken=retries_taken)
        # httpx would add `Host` (and `accept-encoding`, left out: answers come back as sent).
        host = httpx2.Request("POST", self._url).headers["host"].encode("ascii")
        fields = HeaderLines([(b"Host", host), *headers.raw])
        self._fields[retries_taken] = fields
        return fields


class VendorWire:
    """A model adapter's requests, retried by one policy.

    Whole responses go by one `VendorPost`; streams are opened by the SDK (`open`).

    Args:
        post: the path whole responses take (`LeanPost` or `PublicPost`).
        policy: the retries (`vendor_policy(max_retries)`).
        vendor: the SDK's types (for stream openings).
    """

    __slots__ = ("_policy", "_post", "_vendor", "leaves_429", "path")

    def __init__(
        self, post: VendorPost, policy: RetryPolicy, vendor: Vendor, *, leaves_429: bool = False
    ) -> None:
        self._post = post
        self._policy = policy
        self._vendor = vendor
        self.path = post.path
        """Which path whole responses take: `"lean"` (the raw core) or `"public"` (the SDK's)."""
        self.leaves_429 = leaves_429
        """Whether a 429 is given back at once, to a rate limiter above (never retried here)."""

    def without_rate_limit_retries(self) -> VendorWire:
        """This wire, on the same path and connections, giving a 429 back at once."""
        return VendorWire(self._post, self._policy, self._vendor, leaves_429=True)

    async def post(self, body: dict[str, Any], *, deadline: float = NO_LIMIT) -> RawResponse:
        """The 2xx answer to `body`, once retrying is over; `deadline` bounds all of it.

        Raises:
            StatusError: an error status, not retried or retried out.
            DeadlineExpired: `deadline` passed first.
            httpx2.TransportError: no answer, once retrying is over (`MalformedResponseError`,
                `httpx2.DecodingError`: an answer that does not read, never retried).
            ResponseTooLargeError: the body is over the cap (never retried).
        """
        post = self._post
        try:
            return await post.send(body, retries_taken=0, deadline=deadline)
        except Exception as exc:
            failed = exc  # retried below, outside this handler (no implicit exception context)

        def attempt(retries_taken: int) -> Awaitable[RawResponse]:
            return post.send(body, retries_taken=retries_taken, deadline=deadline)

        return await retrying(
            self._policy,
            attempt,
            deadline=deadline,
            on_retry=self._note,
            retries=self._retries,
            failed=failed,
        )

    async def open(self, opening: Callable[[], Awaitable[T]], *, deadline: float = NO_LIMIT) -> T:
        """`opening()` (an SDK call that starts a stream), retried by the policy.

        Raises what `post` raises; the SDK's own errors are translated (`sdk_failure`).
        """
        vendor = self._vendor

        async def attempt(_retries_taken: int) -> T:
            with anyio.CancelScope(deadline=deadline) as scope:
                try:
                    return await opening()
                except Exception as exc:
                    failure = sdk_failure(exc, vendor)
                    if failure is exc:
                        raise
                    raise failure from None  # the SDK's exception holds its request
            assert scope.cancelled_caught
            raise DeadlineExpired

        return await retrying(
            self._policy, attempt, deadline=deadline, on_retry=self._note, retries=self._retries
        )

    def _retries(self, failure: BaseException) -> bool:
        if (
            self.leaves_429
            and isinstance(failure, StatusError)
            and failure.response.status_code == 429
        ):
            return False  # the limiter above pauses every call and retries this one
        return self._policy.retries(failure)

    def _note(self, failure: BaseException, retry: int, delay: float) -> None:
        self._vendor.log.info(
            "Retrying request in %f seconds (retry %d of %d: %s)",
            delay,
            retry,
            self._policy.max_retries,
            type(failure).__name__,
        )


async def _by(deadline: float, step: Awaitable[T]) -> T:
    """`step`'s result, unless `deadline` passes first (`DeadlineExpired`; rare steps only)."""
    if deadline == NO_LIMIT:
        return await step
    with anyio.move_on_at(deadline) as scope:
        return await step
    assert scope.cancelled_caught
    raise DeadlineExpired


class JSONObject:
    """A decoded JSON object, read like the SDKs' lenient models (built with `construct`).

    Keys are attributes, an absent key is `None`, nested objects and arrays are wrapped alike;
    the adapters check every value as they read it (`_reading.Reader`), exactly as they
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
