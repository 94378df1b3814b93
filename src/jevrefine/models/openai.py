"""`OpenAIChatModel`: OpenAI's chat completions API, and any server that speaks it.

```python
from jevrefine import ChatClient
from jevrefine.models.openai import OpenAIChatModel

async with OpenAIChatModel("gpt-4o-mini") as model:              # OPENAI_API_KEY
    print(await ChatClient(model).prompt("Say hello.").content())

# Any OpenAI-compatible server (llama.cpp, vLLM, Ollama, ...): point base_url at it.
model = OpenAIChatModel("smollm2", base_url="http://127.0.0.1:8080/v1")
```

Built on the official `openai` package (`pip install "jevrefine[openai]"`), whose own transport
retries (connection errors, 408, 409, 429, 5xx; `max_retries`, default 2) stay on. Vendor
errors are translated once, here, into `jevrefine.exceptions`; callers never see `openai`
exception types. The adapter emits no spans: the chain's terminal link records `chat {model}`.
"""

from __future__ import annotations

import json
import os
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Final, Self

import httpx2

try:
    import openai
    from openai import AsyncOpenAI
except ImportError as _import_error:  # pragma: no cover - exercised only without the extra
    raise ImportError(
        'OpenAIChatModel needs the `openai` package: pip install "jevrefine[openai]"'
    ) from _import_error

from .._http import DeadlineExpired, MalformedResponseError, RawResponse, loop_time
from .._http._bounded import (
    DEFAULT_MAX_RESPONSE_BYTES,
    bounded_http_client,
    lean_parts,
)
from .._http._headers import parse_retry_after, redact_error, redact_url, safe_headers
from .._http._retry import StatusError
from .._http._vendor import JSONObject as _JSONObject
from .._http._vendor import VendorWire, sdk_body
from .._http._vendor_openai import openai_wire
from ..exceptions import (
    EmptyResponseError,
    IncompleteResponseError,
    ModelConnectionError,
    ModelError,
    ModelResponseError,
    ModelTimeoutError,
    UserError,
    http_error,
)
from ..messages import (
    AssistantMessage,
    ChatOptions,
    ChatResponse,
    ChatResponseMetadata,
    Generation,
    Message,
    Prompt,
    ResponseFormat,
    SystemMessage,
    TokenLogprob,
    ToolCall,
    ToolDefinition,
    ToolResponseMessage,
    Usage,
    UserMessage,
)
from ._deadlines import END, Pace, call_expired
from ._reading import UNREADABLE, Reader, unreadable_error, unreadable_items_raise
from ._sdk import Holdings, close_stream, leaving_429, plain, text_chunk
from ._settings import AdapterSettings
from .base import ChatModel

__all__ = ["OpenAIChatModel"]

_PLACEHOLDER_KEY: Final = "not-needed"
"""Sent to a server given by `base_url` when no key is set: local servers ignore the key, but
the SDK refuses to build a client without one."""

_COMPLETIONS_PATH: Final = "/chat/completions"

_OPENAI_URL: Final = "https://api.openai.com/v1"
"""The SDK's base URL when neither `base_url` nor `OPENAI_BASE_URL` gives one."""


_SDK_ERRORS: Final = (
    openai.OpenAIError,
    ValueError,  # a body the decoder refuses: bad JSON, a 4,301-digit number, bad UTF-8 in SSE
    RecursionError,  # JSON nested past the decoder
    OverflowError,
    httpx2.TransportError,
    httpx2.DecodingError,  # a content-encoding whose bytes do not decode (never retried)
)
"""What the wire, the SDK (while a stream is read) and the decoders raise: translated by the
adapter. The adapter builds every request argument itself, so a `ValueError` out of a call comes
from reading the server's answer."""

_FINISH_REASONS: Final = {"function_call": "tool_calls"}
"""Provider finish reasons that the conventions spell differently (the legacy function-call
reason is a tool call)."""


class OpenAIChatModel(ChatModel):
    """A chat model behind OpenAI's chat completions API (`openai.AsyncOpenAI`).

    Args:
        model: the model to ask (e.g. `"gpt-4o-mini"`, or a local server's alias).
        client: an `openai.AsyncOpenAI` to use. The caller owns it: `aclose()` leaves it open.
            `base_url` and `api_key` must not be given with it.
        base_url: an OpenAI-compatible server's base URL, e.g. `http://127.0.0.1:8080/v1`;
            `OPENAI_BASE_URL`, else OpenAI's own, when unset.
        api_key: the API key; `OPENAI_API_KEY` when unset. Without either, a server given by
            `base_url` is sent a placeholder (local servers need none); OpenAI's own raises.
        options: default options for every call; each prompt's options win field by field, and
            `options.model` replaces `model`.
        max_retries: transport retries (connection errors, timeouts, 408, 409, 429, 5xx, a
            server's `x-should-retry`), by the wire's one policy with the SDK's backoff and
            `Retry-After`; the SDK client itself retries nothing. `0` turns them off.
        timeout: seconds the SDK waits for each network operation (connect, write, each read);
            the SDK's default (600 s) when `None`. In a stream it is also the longest gap
            between two chunks. A read timeout is retried like a connection error: a request
            the server received may be sent again (and billed again); `max_retries=0` prevents
            that.
        total_timeout: seconds for a whole `call()`, the SDK's retries and backoff included,
            and for a stream to deliver its first chunk. When `None`: `timeout` (or 600 s)
            per attempt, times `1 + max_retries`, plus the SDK's backoff. Past it the call
            raises `ModelTimeoutError` and its connection is closed.
        stream_timeout: seconds for a whole stream, from the request to its last chunk;
            `None` (the default) for no bound beyond the gaps between chunks.
        max_response_bytes: the most bytes of a response body read (32 MiB by default; `None`
            for no cap). A body past it raises `ResponseTooLargeError` (a `ModelError`) and its
            connection is closed. Not with `client=`: the caller's client reads as it is set up.

    Raises:
        UserError: an argument of the wrong type or out of range (naming it and what to pass),
            no API key for OpenAI's own API, or `client` given with `base_url`/`api_key` (or a
            `max_response_bytes` of its own).

    Errors of a call are `jevrefine.exceptions`: `ModelHTTPError` (with `status_code`, the
    decoded `body` and `retry_after`), `ModelTimeoutError`, `ModelConnectionError`,
    `IncompleteResponseError` (a stream cut off mid-answer), `EmptyResponseError`, and
    `ModelError` for a response that does not read as the API defines it (a value of the wrong
    type, a count out of range, a body the JSON decoder refuses). Every one names the model
    and the server. Strings the server sends (id, model, answer text, error bodies) have the
    API key blanked out before they are kept.
    """

    provider: ClassVar[str] = "openai"
    supports_tools: ClassVar[bool] = True
    supports_native_structured_output: ClassVar[bool] = True

    def __init__(
        self,
        model: str,
        *,
        client: AsyncOpenAI | None = None,
        base_url: str | None = None,
        api_key: str | None = None,
        options: ChatOptions | None = None,
        max_retries: int = 2,
        timeout: float | None = None,
        total_timeout: float | None = None,
        stream_timeout: float | None = None,
        max_response_bytes: int | None = DEFAULT_MAX_RESPONSE_BYTES,
    ) -> None:
        # Checked once, through the shared validators: each message names the parameter, the
        # value and what to pass instead.
        settings = AdapterSettings.of(
            model=model,
            model_example="gpt-4o-mini",
            base_url=base_url,
            base_url_example="http://127.0.0.1:8080/v1",
            api_key=api_key,
            options=options,
            max_retries=max_retries,
            timeout=timeout,
            total_timeout=total_timeout,
            stream_timeout=stream_timeout,
            max_response_bytes=max_response_bytes,
        )
        self._deadlines = settings.deadlines
        self._model = settings.model
        self._options = settings.options
        self._no_options = self._options == ChatOptions()  # nothing to merge on each call
        if client is not None:
            if settings.base_url is not None or settings.api_key is not None:
                raise UserError(
                    "pass either client= or base_url=/api_key=, not both: the client already "
                    "holds its base URL and key"
                )
            if settings.max_response_bytes not in (None, DEFAULT_MAX_RESPONSE_BYTES):
                raise UserError(
                    "max_response_bytes applies to the client the model builds; with client= "
                    "give that client's http_client the limits you want instead"
                )
            self._client = client
            # The wire's policy retries (the client's max_retries times); the SDK retries nothing.
            quiet = client.with_options(max_retries=0)
            self._stream_client = quiet
            self._wire: VendorWire = openai_wire(quiet, None, _COMPLETIONS_PATH, client.max_retries)
            owned = None
        else:
            self._client, self._stream_client, self._wire = _own_clients(settings)
            owned = (self._client, self._stream_client)
        # Kept only to scrub it out of what the server sends; never printed.
        self._secret = _key_of(self._client)
        self._read = Reader(None if self._secret == _PLACEHOLDER_KEY else self._secret)
        self._holdings = Holdings(self._secret, owned=owned, url=str(self._client.base_url))
        # Read once: telemetry needs them on every call, and the SDK's `base_url` property is
        # not free. A client whose base URL is reassigned later needs a new adapter.
        url = self._client.base_url
        # Shown in every message and repr, its user-info (a credential) blanked out.
        self._shown_url = redact_url(str(url))
        self._server_address = url.host or None
        self._server_port = (
            url.port if url.port is not None else {"https": 443, "http": 80}.get(url.scheme)
        )

    # -- identity --------------------------------------------------------------------------

    @property
    def model_name(self) -> str:
        """The model asked when the prompt names none: `options.model`, else `model`."""
        return self._options.model or self._model

    @property
    def client(self) -> AsyncOpenAI:
        """The underlying `openai.AsyncOpenAI` client."""
        return self._client

    @property
    def base_url(self) -> str:
        """The base URL requests go to."""
        return str(self._client.base_url)

    @property
    def server_address(self) -> str | None:
        """The host of the base URL, for telemetry."""
        return self._server_address

    @property
    def server_port(self) -> int | None:
        """The port of the base URL (the scheme's default when the URL gives none)."""
        return self._server_port

    def __repr__(self) -> str:
        return f"OpenAIChatModel(model_name={self.model_name!r}, base_url={self._shown_url!r})"

    # -- calls -----------------------------------------------------------------------------

    async def call(self, prompt: Prompt) -> ChatResponse:
        """Ask the model once (`POST /chat/completions`) and return its whole response.

        Raises:
            ModelHTTPError: the server answered with an error status (after the SDK's retries).
            ModelTimeoutError: no answer within `total_timeout` (or a read past `timeout`).
            ModelConnectionError: the server could not be reached.
            EmptyResponseError: the response held no choices.
            ModelError: the response does not read as a chat completion.
        """
        params, extra_body = self._request(prompt)
        model = params["model"]
        body = params if extra_body is None else {**params, **extra_body}
        # The whole call, retries included: the SDK's timeout is per read only.
        deadline = loop_time() + self._deadlines.total
        try:
            # The lean path or the SDK's public post, retried by the wire (see `_vendor`).
            raw = await self._wire.post(body, deadline=deadline)
            completion: Any = sdk_body(raw)
        except DeadlineExpired:
            raise call_expired(self._deadlines, model, self._shown_url) from None
        except StatusError as failure:
            raise self._status_error(failure.response, model) from None
        except ModelError as error:  # raised by the capped HTTP client
            self._redact(error)
            raise
        except _SDK_ERRORS as exc:
            raise self._model_error(exc, model) from exc
        if not isinstance(completion, _JSONObject):
            # The SDK hands back a 200 body it could not read as an object (text without a JSON
            # content type, a JSON list) unchanged: say so, instead of an AttributeError later.
            raise ModelResponseError(
                f"{model} at {self._shown_url} sent a response that could not be read: "
                f"expected a chat completion object, got {type(completion).__name__}",
                model_name=model,
            )
        try:
            return _response_of(self._read, completion, model)
        except UNREADABLE as exc:
            # One place for every value that does not read (see `_reading`); the server's
            # address is only worked out here, off the fast path.
            unreadable = unreadable_error(model, self._shown_url, "response", exc)
            self._redact(unreadable)
            raise unreadable from unreadable.__cause__
        except ModelError as error:
            self._redact(error)
            raise

    async def stream(self, prompt: Prompt) -> AsyncIterator[ChatResponse]:
        """Ask the model and yield one `ChatResponse` per text delta.

        Tool calls arrive in pieces on the wire; they are put together here and delivered whole
        in the last chunk, which also carries the usage, the finish reason, the response id and
        the model (and the logprobs, when requested).

        Raises:
            ModelHTTPError: the server answered with an error status (after the SDK's retries).
            ModelTimeoutError: no first chunk within `total_timeout`, a gap between chunks
                longer than `timeout`, or the whole stream past `stream_timeout`.
            ModelConnectionError: the server could not be reached.
            IncompleteResponseError: the stream broke off, or ended without a finish reason.
            EmptyResponseError: the stream ended without any choice.
            ModelError: a chunk does not read as the API defines it.
        """
        params, extra_body = self._request(prompt)
        model = params["model"]
        where = self._shown_url
        state = _StreamState(self._read)
        pace = Pace(self._deadlines)
        try:
            try:
                # Opened by the SDK, retried by the wire's policy, within `total_timeout`.
                chunks = await self._wire.open(
                    lambda: self._stream_client.chat.completions.create(
                        **params,
                        extra_body=extra_body,
                        stream=True,
                        stream_options={"include_usage": True},
                    ),
                    deadline=pace.opening_deadline(),
                )
            except DeadlineExpired:
                raise pace.expired(model, where) from None
            except StatusError as failure:
                raise self._status_error(failure.response, model) from None
            try:
                # Each wait for a chunk has its own deadline (the first one's is
                # `total_timeout`, then `timeout`).
                while (chunk := await pace.next(chunks, model, where)) is not END:
                    with unreadable_items_raise(model, where, "stream chunk", self._read.scrub):
                        delta = state.add(chunk)
                    if delta:
                        yield text_chunk(delta, state.id, state.model)
            except openai.APITimeoutError as exc:
                # Once the stream has begun the SDK retries nothing: say what happened.
                raise ModelTimeoutError(
                    f"{model} at {where} stopped sending the stream for longer than the "
                    "timeout; the answer is incomplete",
                    model_name=model,
                ) from exc
            except openai.APIConnectionError as exc:
                cause = exc.__cause__
                detail = f": {type(cause).__name__} {self._scrub(str(cause))}" if cause else ""
                raise IncompleteResponseError(
                    f"the stream from {model} at {where} broke off; the answer is "
                    f"incomplete{detail}".rstrip(),
                    model_name=model,
                ) from exc
            finally:
                # Closing releases the connection when the consumer stops early, and closes
                # one a deadline cut off mid-read; the SDK's generators with it (`close_stream`).
                await close_stream(chunks)
            yield state.final_chunk(model, where)
        except ModelError as error:
            self._redact(error)
            raise
        except _SDK_ERRORS as exc:
            raise self._model_error(exc, model) from exc

    def without_rate_limit_retries(self) -> Self:
        """This model, on the same connections, giving a 429 back at once (not retried).

        What a rate limiter above it asks for (`RateLimitedModel`): the limiter pauses every
        call sharing it and retries the call itself. Everything else, other retries included,
        is this model's; closing either closes both.
        """
        return leaving_429(self)

    async def aclose(self) -> None:
        """Close the HTTP client, if this model created it (a client passed in stays open)."""
        await self._holdings.release()

    # -- request building ------------------------------------------------------------------

    def _request(self, prompt: Prompt) -> tuple[dict[str, Any], dict[str, Any] | None]:
        """The keyword arguments of `chat.completions.create`, and the `extra_body`."""
        options = prompt.options if self._no_options else self._options.merge(prompt.options)
        params: dict[str, Any] = {
            "model": options.model or self._model,
            "messages": _messages_param(prompt.messages),
        }
        if options.temperature is not None:
            params["temperature"] = options.temperature
        if options.top_p is not None:
            params["top_p"] = options.top_p
        if options.max_tokens is not None:
            # `max_tokens`, not `max_completion_tokens`: every OpenAI-compatible server
            # (llama.cpp, vLLM, ...) knows it, and OpenAI still accepts it for chat models.
            params["max_tokens"] = options.max_tokens
        if options.stop:
            params["stop"] = list(options.stop)
        if options.seed is not None:
            params["seed"] = options.seed
        if options.response_format is not None:
            params["response_format"] = _response_format_param(options.response_format)
        if options.logprobs is not None:
            params["logprobs"] = options.logprobs
        if options.top_logprobs is not None:
            params["top_logprobs"] = options.top_logprobs
            # OpenAI rejects top_logprobs without logprobs; asking for one implies the other.
            params.setdefault("logprobs", True)
        if options.tools:
            params["tools"] = [_tool_param(tool) for tool in options.tools]
        if options.tool_choice is not None:
            params["tool_choice"] = options.tool_choice
        extra_body = plain(options.extra_body) if options.extra_body else None
        return params, extra_body

    # -- errors ----------------------------------------------------------------------------

    def _redact(self, error: ModelError) -> None:
        """Blank an echoed key out of `error` and its causes (the SDK's exception among them)."""
        if self._secret != _PLACEHOLDER_KEY:
            redact_error(error, self._secret)

    def _model_error(self, exc: Exception, model: str) -> ModelError:
        """The `ModelError` for one of `_SDK_ERRORS`, chained to it, the key blanked out.

        Translated once, here, at the boundary; the caller raises it `from exc`.
        """
        error = self._translated(exc, model)
        error.__cause__ = exc  # before redacting, which follows the causes
        self._redact(error)
        return error

    def _translated(self, exc: Exception, model: str) -> ModelError:
        if isinstance(exc, (MalformedResponseError, httpx2.DecodingError)):
            # The server answered with bytes that are no HTTP/1.1 (or a body that does not
            # decode): never retried, the same answer would come back.
            return ModelResponseError(
                f"{model} at {self._shown_url} sent a response that is not valid HTTP: "
                f"{self._scrub(str(exc))}",
                model_name=model,
            )
        if isinstance(exc, (openai.APITimeoutError, httpx2.TimeoutException)):
            return ModelTimeoutError(
                f"{model} at {self._shown_url} did not answer in time "
                "(raise timeout=, or check the server's load)",
                model_name=model,
            )
        if isinstance(exc, (openai.APIConnectionError, httpx2.TransportError)):
            cause = exc.__cause__ if isinstance(exc, openai.APIConnectionError) else exc
            detail = f": {self._scrub(str(cause))}" if cause is not None and str(cause) else ""
            return ModelConnectionError(
                f"could not reach {model} at {self._shown_url}{detail}", model_name=model
            )
        # Anything else the SDK raises (an error event in a stream), and what the decoders let
        # through: a body that is not JSON, a number past Python's 4,300-digit limit, bytes
        # that are not UTF-8 inside an event.
        if isinstance(exc, openai.OpenAIError):
            return ModelError(
                f"{model} at {self._shown_url} sent a response that could not be read: "
                f"{self._scrub(str(exc))}",
                model_name=model,
            )
        return ModelResponseError(
            f"{model} at {self._shown_url} sent a response that could not be read: "
            f"{type(exc).__name__}: {self._scrub(str(exc))}",
            model_name=model,
        )

    def _status_error(self, response: RawResponse, model: str) -> ModelError:
        """The `ModelHTTPError` of an error status (a context overflow: its own type)."""
        error = http_error(
            response.status_code,
            self._scrub(_decoded_body(response)),
            parse_retry_after(response.headers),
            model_name=model,
            headers=safe_headers(response.headers),
        )
        self._redact(error)
        return error

    def _scrub(self, value: Any) -> Any:
        """`value` with the API key blanked out, should a server echo it back."""
        secret = self._secret
        if not secret or secret == _PLACEHOLDER_KEY:
            return value
        if isinstance(value, str):
            return value.replace(secret, "***")
        if isinstance(value, Mapping):
            return {k: self._scrub(v) for k, v in value.items()}
        if isinstance(value, list):
            return [self._scrub(v) for v in value]
        return value


def _own_clients(settings: AdapterSettings) -> tuple[AsyncOpenAI, AsyncOpenAI, VendorWire]:
    """The SDK clients an adapter builds itself (whole responses; streams), and the wire.

    Both use the SDK's default HTTP client (its limits, timeouts, redirects, proxies, trust
    store) with bodies capped, and retry nothing themselves (the wire's policy does); whole
    responses additionally go through the keep-alive core when no proxy applies to the base
    URL (see `_http._bounded`), and `call()` calls that core with the SDK's headers when the
    lean path is taken (`_http._vendor_openai`).
    """
    base_url = settings.base_url or os.environ.get("OPENAI_BASE_URL") or None
    key = settings.api_key or os.environ.get("OPENAI_API_KEY") or None
    if key is None:
        if base_url is None:
            raise UserError(
                "no OpenAI API key: set the OPENAI_API_KEY environment variable, pass "
                "api_key=..., or pass base_url= of an OpenAI-compatible server"
            )
        key = _PLACEHOLDER_KEY
    timeout = settings.deadlines.timeout
    extra: dict[str, Any] = {} if timeout is None else {"timeout": timeout}
    cap = settings.max_response_bytes
    retries = settings.max_retries
    if cap is None:
        client = AsyncOpenAI(api_key=key, base_url=base_url, max_retries=0, **extra)
        return client, client, openai_wire(client, None, _COMPLETIONS_PATH, retries)
    factory = openai.DefaultAsyncHttpxClient
    calls, pool = lean_parts(
        factory,
        httpx2.URL(base_url or _OPENAI_URL),
        cap,
    )
    client = AsyncOpenAI(api_key=key, base_url=base_url, max_retries=0, http_client=calls, **extra)
    streams = client.with_options(http_client=bounded_http_client(factory, cap))
    return client, streams, openai_wire(client, pool, _COMPLETIONS_PATH, retries)


def _key_of(client: AsyncOpenAI) -> str | None:
    key = getattr(client, "api_key", None)
    # Short keys ("local", "x") are placeholders; replacing them would mangle ordinary words.
    return key if isinstance(key, str) and len(key) >= 8 else None


# -- request mapping -----------------------------------------------------------------------


def _messages_param(messages: Sequence[Message]) -> list[dict[str, Any]]:
    result: list[dict[str, Any]] = []
    for message in messages:
        if isinstance(message, SystemMessage):
            result.append({"role": "system", "content": message.text})
        elif isinstance(message, UserMessage):
            result.append({"role": "user", "content": message.text})
        elif isinstance(message, AssistantMessage):
            item: dict[str, Any] = {"role": "assistant"}
            if message.tool_calls:
                # An assistant turn that only calls tools has no content; OpenAI wants null.
                item["content"] = message.text or None
                item["tool_calls"] = [
                    {
                        "id": call.id,
                        "type": "function",
                        # OpenAI wants JSON text here; a call with no arguments is "{}".
                        "function": {"name": call.name, "arguments": call.arguments or "{}"},
                    }
                    for call in message.tool_calls
                ]
            else:
                item["content"] = message.text
            result.append(item)
        elif isinstance(message, ToolResponseMessage):
            result.extend(
                {"role": "tool", "tool_call_id": response.id, "content": response.data}
                for response in message.responses
            )
        else:  # pragma: no cover - the Message union is closed
            raise UserError(f"cannot send a {type(message).__name__} to OpenAI")
    return result


def _tool_param(tool: ToolDefinition) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {
            "name": tool.name,
            "description": tool.description,
            "parameters": plain(tool.parameters),
        },
    }


def _response_format_param(response_format: ResponseFormat) -> dict[str, Any]:
    if response_format.type != "json_schema":
        return {"type": response_format.type}
    json_schema: dict[str, Any] = {
        "name": response_format.name,
        "schema": plain(response_format.schema),
    }
    if response_format.strict is not None:
        json_schema["strict"] = response_format.strict
    return {"type": "json_schema", "json_schema": json_schema}


# -- response mapping ----------------------------------------------------------------------
#
# Every value kept from the SDK's objects goes through the `Reader` (type, range, the key blanked
# out), and all of it runs inside one `unreadable_items_raise` per response or chunk: see
# `_reading`. `openai.BaseModel` is what the SDK builds for a JSON object; anything else
# where the API has an object (an int among the choices, `null` for a message) is refused.


_OBJECT: Final = (openai.BaseModel, _JSONObject)


def _finish_reason(read: Reader, reason: object, where: str) -> str | None:
    text = read.optional_text(reason, where)
    if text is None:
        return None
    lowered = text.lower()
    return _FINISH_REASONS.get(lowered, lowered)


def _usage_of(read: Reader, usage: object) -> Usage:
    if usage is None:
        return Usage()
    read.of_type(usage, _OBJECT, "usage", "a usage object")
    return Usage(
        read.count(getattr(usage, "prompt_tokens", None), "usage.prompt_tokens"),
        read.count(getattr(usage, "completion_tokens", None), "usage.completion_tokens"),
    )


def _logprobs_of(read: Reader, content: object, where: str) -> list[TokenLogprob]:
    result: list[TokenLogprob] = []
    for item in read.items(content, where):
        read.of_type(item, _OBJECT, where, "a token log probability object")
        top = tuple(
            (read.text(t.token, f"{where}.top_logprobs.token"), read.number(t.logprob, where))
            for t in read.items(item.top_logprobs, f"{where}.top_logprobs")
        )
        result.append(
            TokenLogprob(
                read.text(item.token, f"{where}.token"), read.number(item.logprob, where), top
            )
        )
    return result


def _tool_calls_of(read: Reader, calls: object, where: str) -> tuple[ToolCall, ...]:
    result: list[ToolCall] = []
    for call in read.items(calls, where):
        read.of_type(call, _OBJECT, where, "a tool call object")
        function = getattr(call, "function", None)
        if function is None:  # a custom (non-function) tool call: jevrefine offers none
            continue
        read.of_type(function, _OBJECT, f"{where}.function", "a function object")
        result.append(
            ToolCall(
                read.text(call.id, f"{where}.id"),
                read.text(function.name, f"{where}.function.name"),
                read.text(function.arguments, f"{where}.function.arguments"),
            )
        )
    return tuple(result)


def _generation_of(read: Reader, item: object) -> tuple[int, Generation, str | None]:
    """One choice as (its index, the generation, its finish reason)."""
    choice = read.of_type(item, _OBJECT, "choices[]", "a choice object")
    message = read.of_type(
        getattr(choice, "message", None), _OBJECT, "choices[].message", "a message object"
    )
    metadata: dict[str, Any] = {}
    reason = _finish_reason(read, choice.finish_reason, "choices[].finish_reason")
    if reason is not None:
        metadata["finish_reason"] = reason
    logprobs = getattr(choice, "logprobs", None)
    if logprobs is not None:
        read.of_type(logprobs, _OBJECT, "choices[].logprobs", "a logprobs object")
        if logprobs.content is not None:
            metadata["logprobs"] = _logprobs_of(read, logprobs.content, "logprobs.content")
    calls = _tool_calls_of(read, message.tool_calls, "message.tool_calls")
    text = read.text(message.content, "choices[].message.content")
    index = read.index(getattr(choice, "index", 0), "choices[].index")
    return index, Generation(AssistantMessage(text, calls), metadata), reason


def _response_of(read: Reader, completion: Any, model: str) -> ChatResponse:
    choices = read.items(completion.choices, "choices")
    if not choices:
        raise EmptyResponseError(
            f"{model} returned no choices; check the provider's content filter and "
            "max_tokens leaves room for an answer",
            model_name=model,
        )
    read_choices = [_generation_of(read, choice) for choice in choices]
    if len(read_choices) > 1:
        read_choices.sort(key=_first)
    generations: list[Generation] = []
    reasons: list[str] = []
    for _, generation, reason in read_choices:
        generations.append(generation)
        if reason is not None:
            reasons.append(reason)
    fingerprint = read.optional_text(
        getattr(completion, "system_fingerprint", None), "system_fingerprint"
    )
    return ChatResponse(
        tuple(generations),
        ChatResponseMetadata(
            id=read.optional_text(completion.id, "id"),
            model=read.optional_text(completion.model, "model"),
            usage=_usage_of(read, completion.usage),
            finish_reasons=tuple(reasons),
            extra={"system_fingerprint": fingerprint} if fingerprint else {},
        ),
    )


def _first(item: tuple[int, Generation, str | None]) -> int:
    return item[0]


@dataclass
class _PartialToolCall:
    id: str = ""
    name: str = ""
    arguments: list[str] = field(default_factory=list)


@dataclass
class _StreamState:
    """What a stream has said so far, beyond the text already yielded."""

    read: Reader
    id: str | None = None
    model: str | None = None
    usage: Usage = field(default_factory=Usage)
    finish_reason: str | None = None
    saw_choice: bool = False
    tool_calls: dict[int, _PartialToolCall] = field(default_factory=dict)
    logprobs: list[TokenLogprob] = field(default_factory=list)
    logprobs_requested: bool = False
    system_fingerprint: str | None = None

    def add(self, chunk: Any) -> str:
        """Take in one chunk; return its text delta (of the first choice)."""
        read = self.read
        read.of_type(chunk, _OBJECT, "the chunk", "a chat completion chunk object")
        self.id = read.optional_text(getattr(chunk, "id", None), "id") or self.id
        self.model = read.optional_text(getattr(chunk, "model", None), "model") or self.model
        fingerprint = getattr(chunk, "system_fingerprint", None)
        if fingerprint is not None:
            self.system_fingerprint = read.optional_text(fingerprint, "system_fingerprint")
        usage = getattr(chunk, "usage", None)
        if usage is not None:
            self.usage = _usage_of(read, usage)
        text = ""
        for choice in read.items(getattr(chunk, "choices", None), "choices"):
            read.of_type(choice, _OBJECT, "choices[]", "a choice object")
            # ChatOptions has no `n`, so a stream carries one choice; others would be ignored.
            if read.index(getattr(choice, "index", 0), "choices[].index") != 0:
                continue
            self.saw_choice = True
            delta = read.of_type(
                getattr(choice, "delta", None), _OBJECT, "choices[].delta", "a delta object"
            )
            text = read.text(delta.content, "choices[].delta.content")
            for piece in read.items(delta.tool_calls, "delta.tool_calls"):
                self._add_tool_call(piece)
            logprobs = getattr(choice, "logprobs", None)
            if logprobs is not None:
                read.of_type(logprobs, _OBJECT, "choices[].logprobs", "a logprobs object")
                if logprobs.content is not None:
                    self.logprobs_requested = True
                    self.logprobs.extend(_logprobs_of(read, logprobs.content, "logprobs.content"))
            reason = _finish_reason(read, choice.finish_reason, "choices[].finish_reason")
            if reason is not None:
                self.finish_reason = reason
        return text

    def _add_tool_call(self, piece: object) -> None:
        read = self.read
        read.of_type(piece, _OBJECT, "delta.tool_calls[]", "a tool call object")
        index = read.index(getattr(piece, "index", 0), "delta.tool_calls[].index")
        partial = self.tool_calls.setdefault(index, _PartialToolCall())
        call_id = read.text(getattr(piece, "id", None), "delta.tool_calls[].id")
        if call_id:
            partial.id = call_id
        function = getattr(piece, "function", None)
        if function is not None:
            read.of_type(function, _OBJECT, "delta.tool_calls[].function", "a function object")
            name = read.text(function.name, "delta.tool_calls[].function.name")
            if name:
                # Servers send the name once; some repeat it, so never concatenate.
                partial.name = name
            arguments = read.text(function.arguments, "delta.tool_calls[].function.arguments")
            if arguments:
                partial.arguments.append(arguments)

    def final_chunk(self, model: str, where: str) -> ChatResponse:
        """The last chunk: whole tool calls, usage, finish reason, id and model.

        Raises:
            EmptyResponseError: the stream held no choice at all.
            IncompleteResponseError: it ended without a finish reason: cut off mid-answer.
        """
        if not self.saw_choice:
            raise EmptyResponseError(
                f"the stream of {model} ended without any choice", model_name=model
            )
        if self.finish_reason is None:
            # Every OpenAI-compatible server ends an answer with a finish reason; a stream
            # that closes without one was cut off (a proxy's idle limit, a crashed worker),
            # and the text so far must not pass for the whole answer.
            raise IncompleteResponseError(
                f"the stream from {model} at {where} ended without a finish reason; the "
                "answer is incomplete",
                model_name=model,
            )
        calls = tuple(
            ToolCall(p.id, p.name, "".join(p.arguments)) for _, p in sorted(self.tool_calls.items())
        )
        metadata: dict[str, Any] = {"finish_reason": self.finish_reason}
        if self.logprobs_requested:
            metadata["logprobs"] = self.logprobs
        extra = {"system_fingerprint": self.system_fingerprint} if self.system_fingerprint else {}
        return ChatResponse(
            (Generation(AssistantMessage("", calls), metadata),),
            ChatResponseMetadata(
                id=self.id,
                model=self.model,
                usage=self.usage,
                finish_reasons=(self.finish_reason,),
                extra=extra,
            ),
        )


# -- error mapping -------------------------------------------------------------------------


def _decoded_body(response: RawResponse) -> Any:
    """The whole error body as the server sent it: JSON when it parses, else text."""
    content = response.content
    if not content:
        return None
    try:
        return json.loads(content)
    except (ValueError, RecursionError):  # RecursionError: nested past the decoder
        return content.decode("utf-8", errors="replace")
