"""`JudgeClient`: the Jev System One API over `httpx2`, with retries, a time budget and spans.

```python
async with JudgeClient() as jev:  # TYPESAFE_API_KEY, TYPESAFE_BASE_URL, TYPESAFE_DEFAULT_MODEL
    response = await jev.system_one(
        {"user_question": "...", "assistant_answer": "..."},
        {"is_grounded": Noul("Is every claim in `assistant_answer` supported?")},
    )
    print(response.noul("is_grounded").noul)
```

One connection pool serves every call of a client; `max_concurrency` bounds the requests in
flight. Failures are retried by the `RetryPolicy`; `total_timeout` bounds a whole call, waits
included. Each call is a `system_one {model}` CLIENT span (`gen_ai.provider.name=typesafe`, the
response id from the `x-typesafe-request-id` header, usage), with one `jevrefine.retry` event per
retry.
"""

from __future__ import annotations

import logging
import math
import os
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final

import anyio
import httpx2
from pydantic_core import from_json, to_json

from .. import _validate
from .._closing import AsyncClosing
from .._http import (
    DeadlineExpired,
    MalformedResponseError,
    RawResponse,
    Wire,
    acquire_by,
    loop_time,
    open_wire,
)
from .._http._headers import redact, redact_error, redact_url
from .._http._retry import retrying
from .._version import __version__
from ..exceptions import ResponseTooLargeError
from ..telemetry import InstrumentationSettings, Telemetry, joined_span
from ._telemetry import JudgeCallRecorder, record_retry
from .batch import BatchResult, SystemOneRequest, system_one_all
from .errors import (
    JudgeConnectionError,
    JudgeError,
    JudgeResponseError,
    JudgeResponseTooLargeError,
    JudgeTimeoutError,
    JudgeUsageError,
    api_error,
)
from .questions import Question, State, check_system_one_args
from .responses import (
    ModelInfo,
    SystemOneResponse,
    check_answers,
    parse_models,
    parse_system_one,
)
from .retry import RetryPolicy, parse_retry_after

if TYPE_CHECKING:
    from opentelemetry._logs import LoggerProvider
    from opentelemetry.metrics import MeterProvider
    from opentelemetry.trace import Span, TracerProvider

    from ..telemetry import CaptureMode

__all__ = [
    "API_KEY_ENV",
    "BASE_URL_ENV",
    "DEFAULT_BASE_URL",
    "DEFAULT_MODEL",
    "DEFAULT_MODEL_ENV",
    "JudgeClient",
    "RetryPolicy",
]

_log = logging.getLogger("jevrefine.jev")

API_KEY_ENV: Final = "TYPESAFE_API_KEY"
"""Environment variable holding the API key."""
BASE_URL_ENV: Final = "TYPESAFE_BASE_URL"
"""Environment variable holding the API root."""
DEFAULT_MODEL_ENV: Final = "TYPESAFE_DEFAULT_MODEL"
"""Environment variable holding the model asked when a call names none."""
DEFAULT_BASE_URL: Final = "https://api.typesafe.ai"
"""The public API root."""
DEFAULT_MODEL: Final = "jev-latest"
"""The stable alias; pin a versioned id (`jev-1.13.0`) once thresholds are tuned."""

SYSTEM_ONE_PATH: Final = "/v1/systemone"
MODELS_PATH: Final = "/v1/models"
REQUEST_ID_HEADER: Final = "x-typesafe-request-id"
RETRY_COUNT_HEADER: Final = "x-typesafe-retry-count"
_REQUEST_ID_LINE: Final = REQUEST_ID_HEADER.encode("ascii")
_RETRY_COUNT_LINE: Final = RETRY_COUNT_HEADER.encode("ascii")

_DEFAULT_RETRY = RetryPolicy()
# Keep every pooled connection warm: bursts beyond httpx's default 20 idle connections would
# otherwise reopen connections (and redo TLS handshakes) on every wave of a batch.
_POOL_SIZE = 100
_KEEPALIVE_EXPIRY = 30.0


def _json_fallback(value: Any) -> Any:
    # Read-only mappings and tuples are natural in Python code; JSON wants dicts and lists.
    if isinstance(value, Mapping):
        return dict(value)
    if isinstance(value, Sequence) and not isinstance(value, (str, bytes, bytearray)):
        return list(value)
    raise TypeError(f"{type(value).__name__} cannot be sent as JSON")


def _resolve_key(api_key: object) -> str:
    api_key = _validate.secret("api_key", api_key, error=JudgeUsageError)
    key = api_key if api_key is not None else os.environ.get(API_KEY_ENV, "").strip()
    if api_key is None and not key:
        raise JudgeUsageError(
            f"no API key: pass api_key=... or set {API_KEY_ENV}. For a local server that needs "
            'none (Laya, Ollama, FakeJevServer), pass api_key=""'
        )
    key = key.strip()
    if key and (not key.isascii() or not key.isprintable() or " " in key):
        # Never echo the key: say what is wrong with it, not what it is.
        raise JudgeUsageError("the API key must be printable ASCII without whitespace")
    return key


def _request_headers(key: str) -> dict[str, str]:
    headers = {
        "accept": "application/json",
        "content-type": "application/json",
        "user-agent": f"jevrefine/{__version__}",
    }
    if key:  # an explicit "" sends none (local servers)
        headers["authorization"] = f"Bearer {key}"
    return headers


class JudgeClient(AsyncClosing):
    """An async client of the Jev System One API; a `SystemOneClient`.

    Args:
        api_key: The API key; else `TYPESAFE_API_KEY`. A missing key is an error here, at
            construction; an explicit `""` sends no `Authorization` header (local servers).
        base_url: The API root (without `/v1`); else `TYPESAFE_BASE_URL`, else
            `https://api.typesafe.ai`.
        model: The model asked when a call names none; else `TYPESAFE_DEFAULT_MODEL`, else
            `jev-latest`.
        retry: Which failures are retried and how long to wait (`RetryPolicy`).
        timeout: Seconds allowed for each HTTP operation (connect, write, read).
        total_timeout: Seconds allowed for a whole call, retries and waits included; a retry
            whose wait would cross it is not made. `None` for no bound.
        max_concurrency: At most this many requests in flight at once (`None`: the pool's 100).
        http_client: An `httpx2.AsyncClient` to send with (proxies, transports, custom TLS). It
            is not closed by this client: whoever creates one closes it.
        tracer_provider: Where spans go (default: `jevrefine.telemetry.configure(...)`'s, else
            the global provider).
        meter_provider: Where metrics go (same defaults).
        logger_provider: Where the opt-in content events go (same defaults).
        capture_content: Record the state, questions and answers (`True`: on the span; or a
            `CaptureMode`); off unless this, `configure(...)` or
            `OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT` says so. Never the API key.
        legacy_attributes: Also emit `gen_ai.system` (seed 004's older attributes).
        instrumentation: The telemetry settings above as one `InstrumentationSettings`
            (shareable with the `ChatClient`); not together with them.
    """

    def __init__(
        self,
        api_key: str | None = None,
        *,
        base_url: str | None = None,
        model: str | None = None,
        retry: RetryPolicy = _DEFAULT_RETRY,
        timeout: float = 10.0,
        total_timeout: float | None = 30.0,
        max_concurrency: int | None = None,
        http_client: httpx2.AsyncClient | None = None,
        tracer_provider: TracerProvider | None = None,
        meter_provider: MeterProvider | None = None,
        logger_provider: LoggerProvider | None = None,
        capture_content: bool | CaptureMode | None = None,
        legacy_attributes: bool | None = None,
        instrumentation: InstrumentationSettings | None = None,
    ) -> None:
        key = _resolve_key(api_key)
        error = JudgeUsageError
        self._retry = _validate.instance(
            "retry", retry, RetryPolicy, example="RetryPolicy(max_retries=2)", error=error
        )
        self._timeout = _validate.number(
            "timeout", timeout, above=0, unit="seconds", example=10.0, error=error
        )
        self._total_timeout = _validate.number(
            "total_timeout",
            total_timeout,
            above=0,
            optional=True,
            unit="seconds",
            example=30.0,
            error=error,
        )
        self._max_concurrency = _validate.integer(
            "max_concurrency", max_concurrency, minimum=1, optional=True, example=16, error=error
        )
        base_url = _validate.text("base_url", base_url, optional=True, error=error)
        model = _validate.text("model", model, optional=True, example="jev-latest", error=error)
        root = _validate.http_root(
            "base_url",
            base_url or os.environ.get(BASE_URL_ENV, "").strip() or DEFAULT_BASE_URL,
            example=DEFAULT_BASE_URL,
            error=error,
        )
        self._base_url = root.url
        # Shown in every message and repr, its user-info (a credential) blanked out.
        self._shown_url = redact_url(root.url)
        self._model = model or os.environ.get(DEFAULT_MODEL_ENV, "").strip() or DEFAULT_MODEL
        self._limiter: anyio.CapacityLimiter | None = None
        self._address = root.host
        self._port = root.port
        self._system_one_url = root.url + SYSTEM_ONE_PATH
        self._models_url = root.url + MODELS_PATH
        self._headers = _request_headers(key)
        # Kept only to blank it out of what a server echoes back; never printed.
        self._secret = key or None
        self._secret_bytes = self._secret.encode("ascii") if self._secret else None
        if http_client is not None:
            _validate.instance(
                "http_client",
                http_client,
                httpx2.AsyncClient,
                example="httpx2.AsyncClient(...), or None for the built-in pool",
                kind_name="an httpx2.AsyncClient",
                error=error,
            )
        self._root_path = httpx2.URL(self._base_url).raw_path.decode("ascii").rstrip("/")
        self._system_one_target = httpx2.URL(self._system_one_url).raw_path.decode("ascii")
        self._models_target = httpx2.URL(self._models_url).raw_path.decode("ascii")
        # Every pooled connection kept warm: bursts beyond httpx's default 20 idle connections
        # would otherwise reopen connections (and redo TLS handshakes) on every wave of a batch.
        self._wire: Wire = open_wire(
            self._base_url,
            headers=self._headers,
            timeout=self._timeout,
            http_client=http_client,
            max_connections=max(_POOL_SIZE, self._max_concurrency or 0),
            keepalive_expiry=_KEEPALIVE_EXPIRY,
        )
        self._telemetry = Telemetry(
            instrumentation,
            tracer_provider=tracer_provider,
            meter_provider=meter_provider,
            logger_provider=logger_provider,
            capture_content=capture_content,
            legacy_attributes=legacy_attributes,
        )

    # -- public API ----------------------------------------------------------------------

    @property
    def base_url(self) -> str:
        """The API root requests go to."""
        return self._base_url

    @property
    def model(self) -> str:
        """The model asked when a call names none."""
        return self._model

    @property
    def server_address(self) -> str | None:
        """The host requests go to, for telemetry (`server.address`)."""
        return self._address

    @property
    def server_port(self) -> int | None:
        """The port requests go to, for telemetry (`server.port`)."""
        return self._port

    @property
    def retry(self) -> RetryPolicy:
        """The retry policy."""
        return self._retry

    async def system_one(
        self,
        state: State,
        questions: Mapping[str, Question | Mapping[str, Any]],
        *,
        model: str | None = None,
        timeout: float | None = None,  # noqa: ASYNC109 - a per-HTTP-operation setting
    ) -> SystemOneResponse:
        """Ask the questions about `state` in one request; answers come back under the same ids.

        Args:
            state: What the judge reads: text, or a JSON object / array (key order is kept: the
                model reads fields in the order sent).
            questions: Question id -> `Noul`, `Choice` or `Score` (or a question's wire dict).
            model: The model for this call (default: the client's).
            timeout: Seconds per HTTP operation for this call (default: the client's).

        Raises:
            JudgeUsageError: bad questions or state, found before any request is sent.
            JudgeAPIError: the API answered with an error status (after retries).
            JudgeConnectionError: no answer (after retries); `JudgeTimeoutError` when in time.
            JudgeResponseError: the answer is not a valid System One response.
        """
        content, model_name, wire = self._encode(state, questions, model)
        joined = joined_span()
        if joined is not None:
            # This call is the current model call (`JevChatModel`): record the retries on its
            # span rather than open a second span for the same call.
            return await self._send_system_one(content, wire, timeout, joined)
        if not self._telemetry.active():  # nothing would record the span or the metrics
            return await self._send_system_one(content, wire, timeout, None)
        recorder = JudgeCallRecorder(
            self._telemetry, model_name, self._address, self._port, content
        )
        with recorder:
            response = await self._send_system_one(content, wire, timeout, recorder.span)
        recorder.finish(response)
        return response

    async def system_one_all(
        self,
        requests: Sequence[SystemOneRequest],
        *,
        concurrency: int = 4,
        fail_fast: bool = False,
    ) -> list[BatchResult[SystemOneResponse]]:
        """Run many `system_one` calls; see `jevrefine.jev.system_one_all`."""
        return await system_one_all(self, requests, concurrency=concurrency, fail_fast=fail_fast)

    async def models(self, *, timeout: float | None = None) -> list[ModelInfo]:  # noqa: ASYNC109
        """The models the API lists (`GET /v1/models`; aliases only, versioned ids work too)."""
        response = await self._send("GET", self._models_target, None, timeout, None)
        return parse_models(self._decode_ok(response))

    async def aclose(self) -> None:
        """Close the connection pool (unless the `http_client` was given to us)."""
        await self._wire.aclose()

    def __repr__(self) -> str:
        # The key is deliberately absent.
        return f"JudgeClient(base_url={self._shown_url!r}, model={self._model!r})"

    # -- the wire --------------------------------------------------------------------------

    def _encode(
        self,
        state: State,
        questions: Mapping[str, Question | Mapping[str, Any]],
        model: str | None,
    ) -> tuple[bytes, str, dict[str, Any]]:
        wire_questions = check_system_one_args(state, questions)
        model_name = model or self._model
        # Same field order as the official SDK, so the two send identical bodies.
        body = {"state": state, "model": model_name, "questions": wire_questions}
        try:
            content = to_json(body, fallback=_json_fallback)
        except (TypeError, ValueError) as exc:
            raise JudgeUsageError(f"the state cannot be sent as JSON: {exc}") from None
        return content, model_name, wire_questions

    async def _send_system_one(
        self,
        content: bytes,
        questions: Mapping[str, Any],
        timeout: float | None,  # noqa: ASYNC109 - a per-HTTP-operation setting
        span: Span | None,
    ) -> SystemOneResponse:
        response = await self._send("POST", self._system_one_target, content, timeout, span)
        data = self._decode_ok(response)
        request_id = self._request_id(response)
        parsed = parse_system_one(data, request_id)
        # Strict unless the caller is inside `missing_answers_allowed()` (JevChatModel only).
        check_answers(parsed, questions, body=data)
        return parsed

    def _excerpt(self, content: bytes, limit: int) -> str:
        """The start of what a server sent, scrubbed of the key *before* it is cut.

        A cut through the key would leave a prefix of it that no later scrubbing recognises.
        """
        margin = len(self._secret or "")
        text = content[: limit + margin].decode("utf-8", "replace")
        return str(redact(text, self._secret))[:limit]

    def _request_id(self, response: RawResponse) -> str | None:
        """The request id header, scrubbed: it lands in errors, spans and metrics."""
        value = response.header(_REQUEST_ID_LINE)
        return None if value is None else str(redact(value, self._secret))

    def _decode_ok(self, response: RawResponse) -> Any:
        """The 2xx body, decoded, with the API key scrubbed out of every string in it.

        Scrubbed once, here, before anything is kept: a server that echoes the key (in `model`,
        a label, an id) would otherwise carry it into the response, spans, metrics and errors.
        """
        content = response.content
        try:
            data = from_json(content)
        except ValueError as exc:
            # pydantic_core's reason names the position ("number out of range at line 1 ...").
            reason = str(exc)[:200]
            raise JudgeResponseError(
                f"the API answered {response.status_code} with a body that is not JSON ({reason})",
                body=self._excerpt(response.content, 1000),
                request_id=self._request_id(response),
            ) from None
        secret = self._secret_bytes
        if secret is None or (secret not in content and b"\\" not in content):
            # Without an escape every decoded string is a slice of the raw bytes: no key in
            # them, none in the data, and the walk over it is skipped.
            return data
        return redact(data, self._secret)

    async def _send(
        self,
        method: str,
        target: str,
        content: bytes | None,
        timeout: float | None,  # noqa: ASYNC109 - a per-HTTP-operation setting
        span: Span | None,
    ) -> RawResponse:
        """Send with retries (the wire's one loop); a 2xx answer, or the last error.

        The first attempt is made here and the loop entered only when it fails: an answer
        that comes at once then holds none of the loop's frames while it is awaited.
        """
        per_operation = self._timeout if timeout is None else timeout
        deadline = math.inf if self._total_timeout is None else loop_time() + self._total_timeout
        try:
            return await self._exchange(method, target, content, 0, per_operation, deadline)
        except JudgeError as error:
            failed = error  # retried below, outside this handler
        policy = self._retry

        def attempt(retry: int) -> Any:
            return self._exchange(method, target, content, retry, per_operation, deadline)

        def note(error: BaseException, retry: int, delay: float) -> None:
            if span is not None:
                record_retry(span, retry, delay, error)
            # Our error messages carry the status, the server's text and the request id;
            # never the key, which lives only in the headers.
            _log.info(
                "Jev call failed (%s: %s); retry %d of %d in %.2f s",
                type(error).__name__,
                error,
                retry,
                policy.max_retries,
                delay,
            )

        response: RawResponse = await retrying(
            policy,
            attempt,
            deadline=deadline,
            on_retry=note,
            retries=policy.should_retry,
            failed=failed,
        )
        return response

    async def _exchange(
        self,
        method: str,
        target: str,
        content: bytes | None,
        retry: int,
        per_operation: float,
        deadline: float,
    ) -> RawResponse:
        """One request within the call's budget: a 2xx answer, else its `JudgeError`.

        Every error is scrubbed of the key before it is logged, put on a span or raised:
        transport errors quote the server's bytes, and a hostile server may send the key back.
        """
        try:
            remaining = deadline - loop_time()
            if remaining <= 0:
                raise JudgeTimeoutError(self._budget_message())
            limiter = self._limiter
            if limiter is None and self._max_concurrency is not None:
                limiter = self._limiter = anyio.CapacityLimiter(self._max_concurrency)
            if limiter is not None:  # a `max_concurrency` slot, within the budget
                try:
                    await acquire_by(limiter, deadline)
                except TimeoutError:
                    raise JudgeTimeoutError(self._budget_message()) from None
            try:
                response = await self._request(
                    method, target, content, retry, min(per_operation, remaining), deadline
                )
            finally:
                if limiter is not None:
                    limiter.release()
            status = response.status_code
            if 200 <= status < 300:
                return response
            raise api_error(
                status,
                self._error_body(response),
                request_id=self._request_id(response),
                endpoint=f"{method} {self._shown_url}{target.removeprefix(self._root_path)}",
                retry_after=parse_retry_after(response.headers),
            )
        except JudgeError as error:
            redact_error(error, self._secret)
            raise

    async def _request(
        self,
        method: str,
        target: str,
        content: bytes | None,
        retry: int,
        timeout: float,  # noqa: ASYNC109 - a per-HTTP-operation setting
        deadline: float,
    ) -> RawResponse:
        where = f"{method} {self._shown_url}{target.removeprefix(self._root_path)}"
        headers = [(_RETRY_COUNT_LINE, b"%d" % retry)] if retry else ()
        try:
            return await self._wire.send(
                method, target, content, headers=headers, timeout=timeout, deadline=deadline
            )
        except DeadlineExpired:
            raise JudgeTimeoutError(self._budget_message()) from None
        # Neither is a connection failure: the server answered, with something no answer can
        # be. Retrying would read the same flood (or the same broken framing) again.
        except ResponseTooLargeError as exc:
            raise JudgeResponseTooLargeError(f"{where}: {exc}", limit=exc.limit or 0) from None
        except MalformedResponseError as exc:
            shown = f" {self._excerpt(exc.excerpt, 80)!r}" if exc.excerpt else ""
            raise JudgeResponseError(f"{where}: {exc}{shown}") from None
        except httpx2.DecodingError as exc:
            # A `content-encoding` whose bytes do not decode: an answer no retry would mend.
            raise JudgeResponseError(
                f"{where}: the body does not decode ({type(exc).__name__})"
            ) from None
        except httpx2.TimeoutException as exc:
            # `from None`: httpx's exception holds the request, and the request holds the key.
            raise JudgeTimeoutError(
                f"{where}: no answer within {timeout:g} s ({type(exc).__name__})"
            ) from None
        except httpx2.TransportError as exc:
            raise JudgeConnectionError(
                f"{where}: connection failed ({type(exc).__name__}: {exc})"
            ) from None

    def _error_body(self, response: RawResponse) -> Any:
        """An error response's body, decoded when it is JSON, scrubbed of the key either way."""
        content = response.content
        if not content:
            return None
        try:
            return redact(from_json(content), self._secret)
        except ValueError:
            return self._excerpt(content, 2000)

    def _budget_message(self) -> str:
        return f"the call did not finish within total_timeout={self._total_timeout:g} s"
