"""Anthropic's Messages API behind `ChatModel`, on the official `anthropic` SDK (`AsyncAnthropic`).

```python
from jevrefine import ChatClient
from jevrefine.models.anthropic import AnthropicChatModel

async with AnthropicChatModel("claude-haiku-4-5") as model:      # ANTHROPIC_API_KEY
    client = ChatClient(model)
    print(await client.prompt("Say hello in one sentence.").content())
```

Install with `pip install "jevrefine[anthropic]"`. Any server that speaks `/v1/messages` works
through `base_url=` (llama.cpp's server does; see `jevrefine.local`), and
`jevrefine.testing.FakeAnthropicServer` is a scripted one for tests.

How jevrefine's values map onto the API:

- system messages become the `system` parameter (joined by a blank line);
- assistant tool calls become `tool_use` blocks, and a `ToolResponseMessage` a user turn of
  `tool_result` blocks; consecutive turns of one role are merged, as the API requires;
- `ChatOptions`: `temperature` and `top_p` (in the body: the SDK dropped their keywords, the API
  still takes them on models that sample), `max_tokens` (the API requires one: the
  constructor's default applies), `stop` → `stop_sequences`, `tools`, `tool_choice` (`auto`,
  `required` → `any`, `none`), a `json_schema` response format → `output_config.format`,
  `extra_body` as is. `seed` and log probabilities have no Anthropic equivalent and are not sent;
- stop reasons become the lowercase conventions: `end_turn`/`stop_sequence` → `stop`,
  `max_tokens` → `length`, `tool_use` → `tool_calls`, `refusal` → `content_filter`;
- input tokens count the cache reads and writes too (the OpenTelemetry conventions' meaning).

Errors are translated once, here: an error status becomes `ModelHTTPError` (529 "overloaded" is
transient, like 429 and 5xx), a timeout `ModelTimeoutError`, anything else on the network
`ModelConnectionError`. The SDK's own retries (`max_retries`) stay on; the adapter adds none.

With a client it built itself, `call()` sends `messages.create`'s request on the lean
transport's raw core, with the SDK's headers, retries and errors taken from the SDK client
(`_lean_anthropic`), and reads the answer without the SDK's models; streams, and a `client=`,
go through the SDK.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
from collections.abc import AsyncIterator, Iterator, Mapping
from typing import Any, ClassVar, Final, Literal, Self

import httpx2

try:
    import anthropic
    from anthropic import AsyncAnthropic
except ImportError as _import_error:
    raise ImportError(
        'AnthropicChatModel needs the anthropic package: pip install "jevrefine[anthropic]"'
    ) from _import_error

from .. import _validate
from .._http import DeadlineExpired, MalformedResponseError, RawResponse, loop_time
from .._http._bounded import (
    DEFAULT_MAX_RESPONSE_BYTES,
    bounded_http_client,
    lean_parts,
)
from .._http._headers import parse_retry_after, redact_error, safe_headers
from .._http._retry import StatusError
from .._http._vendor import JSONObject, VendorWire, sdk_body, unwrapped
from .._http._vendor_anthropic import anthropic_wire
from ..exceptions import (
    IncompleteResponseError,
    ModelConnectionError,
    ModelError,
    ModelHTTPError,
    ModelResponseError,
    ModelTimeoutError,
    ResponseTooLargeError,
    UserError,
)
from ..messages import (
    AssistantMessage,
    ChatOptions,
    ChatResponse,
    ChatResponseMetadata,
    Generation,
    Prompt,
    SystemMessage,
    ToolCall,
    ToolResponseMessage,
    Usage,
    UserMessage,
    concat_chunks,
)
from ._deadlines import END, Pace, call_expired
from ._reading import Reader, UnreadableValueError, unreadable_items_raise
from ._sdk import Holdings, close_stream, leaving_429, plain, text_chunk
from ._settings import AdapterSettings
from .base import ChatModel

__all__ = ["AnthropicChatModel"]

DEFAULT_MAX_TOKENS: Final = 1024
"""The `max_tokens` sent when neither the prompt nor the model's options set one."""

_DEFAULT_HOST: Final = "api.anthropic.com"
_PLACEHOLDER_KEY: Final = "not-needed"

FINISH_REASONS: Final[Mapping[str, str]] = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "pause_turn": "stop",
    "max_tokens": "length",
    "model_context_window_exceeded": "length",
    "tool_use": "tool_calls",
    "refusal": "content_filter",
}
"""Anthropic's `stop_reason` → the lowercase finish reason of the conventions."""

_TOOL_CHOICES: Final[Mapping[str, dict[str, str]]] = {
    "auto": {"type": "auto"},
    "required": {"type": "any"},
    "none": {"type": "none"},
}

# An error event inside a 200 stream has no status of its own: the status its type stands for.
_ERROR_TYPE_STATUS: Final[Mapping[str, int]] = {
    "invalid_request_error": 400,
    "authentication_error": 401,
    "billing_error": 402,
    "permission_error": 403,
    "not_found_error": 404,
    "request_too_large": 413,
    "rate_limit_error": 429,
    "api_error": 500,
    "timeout_error": 504,
    "overloaded_error": 529,
}


class AnthropicChatModel(ChatModel):
    """A Claude model (or any server speaking Anthropic's Messages API) as a `ChatModel`.

    Args:
        model: the model to ask, e.g. `"claude-haiku-4-5"`; a prompt's `options.model` wins.
        client: an `anthropic.AsyncAnthropic` to use; the adapter then neither configures nor
            closes it (`base_url`, `api_key` and `timeout` must not be given with it).
        base_url: the server, without `/v1` (the SDK adds it); Anthropic's API by default.
        api_key: the API key; `ANTHROPIC_API_KEY` when `None`. With a `base_url` and no key at
            all, a placeholder is sent (local servers need none).
        options: default `ChatOptions`; a prompt's options override them field by field.
        max_tokens: the `max_tokens` sent when the options set none (the API requires one).
        max_retries: transport retries for connection errors, timeouts, 408, 409, 429 and 5xx
            (529 too), by the wire's one policy (the SDK client retries nothing itself; a
            `client=` is retried its own `max_retries` times).
        timeout: seconds the SDK waits for each network operation (connect, write, each read);
            the SDK's default (600 s) when `None`. In a stream it is also the longest gap
            between two events. A read timeout is retried like a connection error: a request
            the server received may be sent again (and billed again); `max_retries=0`
            prevents that.
        total_timeout: seconds for a whole `call()`, the SDK's retries and backoff included,
            and for a stream to deliver its first event. When `None`: `timeout` (or 600 s)
            per attempt, times `1 + max_retries`, plus the SDK's backoff. Past it the call
            raises `ModelTimeoutError` and its connection is closed. Kept by the adapter, so
            it applies with `client=` too.
        stream_timeout: seconds for a whole stream, from the request to its last event;
            `None` (the default) for no bound beyond the gaps between events.
        max_response_bytes: the most bytes of a response body read (32 MiB by default; `None`
            for no cap). A body past it raises `ResponseTooLargeError` (a `ModelError`, never
            retried) and its connection is closed. Not with `client=`.

    Raises:
        UserError: no API key could be found, or an argument is invalid (the message names
            it, the value, and what to pass instead).

    Errors of a call name the model and the server: `ModelHTTPError`, `ModelTimeoutError`,
    `ModelConnectionError`, `IncompleteResponseError` (a stream cut off before
    `message_stop`), and `ModelError` for a response that does not read as the API defines it.
    Strings the server sends have the API key blanked out before they are kept.

    `supports_native_structured_output` is false: not every Claude model (nor llama.cpp's
    server) enforces `output_config.format`, so `ChatClient.entity` asks in the prompt unless
    called with `native=True`, which sends the schema as `output_config.format`.
    """

    provider: ClassVar[str] = "anthropic"
    supports_tools: ClassVar[bool] = True
    supports_native_structured_output: ClassVar[bool] = False

    __slots__ = (
        "_client",
        "_deadlines",
        "_holdings",
        "_max_tokens",
        "_model",
        "_options",
        "_read",
        "_secret",
        "_stream_client",
        "_wire",
    )

    def __init__(
        self,
        model: str,
        *,
        client: AsyncAnthropic | None = None,
        base_url: str | None = None,
        api_key: str | None = None,
        options: ChatOptions | None = None,
        max_tokens: int = DEFAULT_MAX_TOKENS,
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
            model_example="claude-haiku-4-5",
            base_url=base_url,
            base_url_example="http://127.0.0.1:8080",
            api_key=api_key,
            options=options,
            max_retries=max_retries,
            timeout=timeout,
            total_timeout=total_timeout,
            stream_timeout=stream_timeout,
            max_response_bytes=max_response_bytes,
        )
        max_tokens = _validate.integer(
            "max_tokens", max_tokens, minimum=1, example=DEFAULT_MAX_TOKENS
        )
        self._deadlines = settings.deadlines
        self._model = settings.model
        self._max_tokens = max_tokens
        self._options = settings.options
        if client is not None:
            if not isinstance(client, AsyncAnthropic):
                raise UserError(
                    f"client must be an anthropic.AsyncAnthropic, got {type(client).__name__}"
                )
            if (
                settings.base_url is not None
                or settings.api_key is not None
                or settings.deadlines.timeout is not None
                or settings.max_response_bytes not in (None, DEFAULT_MAX_RESPONSE_BYTES)
            ):
                raise UserError(
                    "pass either client= or base_url=/api_key=/timeout=/max_response_bytes=, "
                    "not both; configure the AsyncAnthropic you pass instead"
                )
            # A copy sharing the caller's connection pool, with the SDK's own spans off: the
            # chain's terminal link records the one `chat` span of each call.
            # The wire's policy retries (the client's max_retries times); the copy retries nothing.
            self._client = self._stream_client = client.with_options(
                open_telemetry=False, max_retries=0
            )
            owned = None
            self._wire: VendorWire = anthropic_wire(self._client, None, client.max_retries)
        else:
            self._client, self._stream_client, self._wire = _own_clients(settings)
            owned = (self._client, self._stream_client)
        key_in_use = self._client.api_key
        # Kept only to blank it out of what the server sends; never printed.
        self._secret = key_in_use if key_in_use != _PLACEHOLDER_KEY else None
        self._read = Reader(self._secret)
        self._holdings = Holdings(self._secret, owned=owned, url=str(self._client.base_url))

    @property
    def model_name(self) -> str:
        """The model asked when the prompt's options name none."""
        return self._model

    @property
    def client(self) -> AsyncAnthropic:
        """The SDK client the requests go through."""
        return self._client

    @property
    def server_address(self) -> str | None:
        """The API host (`api.anthropic.com` by default)."""
        return self._client.base_url.host or _DEFAULT_HOST

    @property
    def server_port(self) -> int | None:
        """The API port (443 by default)."""
        url = self._client.base_url
        if url.port is not None:
            return url.port
        return 80 if url.scheme == "http" else 443

    def without_rate_limit_retries(self) -> Self:
        """This model, on the same connections, giving a 429 back at once (not retried).

        What a rate limiter above it asks for (`RateLimitedModel`): the limiter pauses every
        call sharing it and retries the call itself. Everything else, other retries included,
        is this model's; closing either closes both.
        """
        return leaving_429(self)

    async def aclose(self) -> None:
        """Close the SDK client, when this adapter created it."""
        await self._holdings.release()

    def __repr__(self) -> str:
        # Scheme, host and port only: a URL's user-info could hold a credential.
        url = self._client.base_url
        where = f"{url.scheme}://{self.server_address}:{self.server_port}"
        return f"AnthropicChatModel(model={self._model!r}, base_url={where!r})"

    # -- calls -------------------------------------------------------------------------------

    async def call(self, prompt: Prompt) -> ChatResponse:
        """Ask the model once and return its whole response.

        Raises:
            ModelHTTPError: the API answered with an error status.
            ModelTimeoutError: no answer within `total_timeout` (or a read past `timeout`).
            ModelConnectionError: the API could not be reached.
            ModelError: the response does not read as a message.
            UserError: the prompt cannot be expressed in the Messages API.
        """
        params = self.request_params(prompt)
        model = params["model"]
        where = str(self.server_address)
        message: Any = None
        try:
            with self._map_errors(model):
                # The whole call, retries included: the SDK's timeout is per read. The lean
                # path or the SDK's public request, retried by the wire (see `_http._vendor`).
                deadline = loop_time() + self._deadlines.total
                message = sdk_body(await self._wire.post(params, deadline=deadline))
        except DeadlineExpired:
            raise call_expired(self._deadlines, model, where) from None
        except ValueError as exc:
            # The SDK refuses a non-streaming request it expects to run past 10 minutes (a large
            # max_tokens); the same answer is had by streaming it and joining the chunks.
            if "Streaming is required" not in str(exc):
                raise
            return concat_chunks([chunk async for chunk in self._stream(prompt)])
        if not isinstance(message, _OBJECT) or not isinstance(
            getattr(message, "content", None), list
        ):
            # The SDK hands back a 200 body it could not read as a message (text, a JSON list,
            # an object without `content`) as it is: say so, instead of a TypeError later.
            raise ModelResponseError(
                f"{model} at {where} answered with a response that could not be read: "
                "expected a message object with content",
                model_name=model,
            )
        with self._map_errors(model), unreadable_items_raise(model, where, "response"):
            return _chat_response(self._read, message)

    def stream(self, prompt: Prompt) -> AsyncIterator[ChatResponse]:
        """Ask the model and yield one chunk per text delta.

        The last chunk carries the tool calls (their input JSON assembled whole), the usage,
        the finish reason, and the response's id and model. Errors are mapped as in `call`;
        a stream that breaks off or ends before `message_stop` raises
        `IncompleteResponseError`. No first event within `total_timeout`, a gap between events
        longer than `timeout`, or the whole stream past `stream_timeout` raise
        `ModelTimeoutError`.
        """
        return self._stream(prompt)

    async def _stream(self, prompt: Prompt) -> AsyncIterator[ChatResponse]:
        params = self.request_params(prompt)
        model = params["model"]
        where = str(self.server_address)
        state = _StreamState(self._read)
        pace = Pace(self._deadlines)
        with self._map_errors(model):
            try:
                # Opened by the SDK, retried by the wire's policy, within `total_timeout`.
                events = await self._wire.open(
                    lambda: self._stream_client.messages.create(**params, stream=True),
                    deadline=pace.opening_deadline(),
                )
            except DeadlineExpired:
                raise pace.expired(model, where) from None
            try:
                while True:
                    # Each wait for an event has its own deadline.
                    with _broken_stream_is_incomplete(model, where):
                        event = await pace.next(events, model, where)
                    if event is END:
                        break
                    with unreadable_items_raise(model, where, "stream event", self._read.scrub):
                        delta = state.feed(event)
                    if delta:
                        yield text_chunk(delta, state.id, state.model)
            finally:
                # Closes the HTTP response when the consumer stops early, and the SDK's
                # generators with it, in order (`close_stream`).
                await close_stream(events)
            if not state.stopped:
                raise IncompleteResponseError(
                    f"the stream from {model} at {where} ended before message_stop; the answer "
                    "is incomplete",
                    model_name=model,
                )
        yield state.final_chunk()

    def request_params(self, prompt: Prompt) -> dict[str, Any]:
        """The keyword arguments of `messages.create` for a prompt (handy for debugging).

        Raises:
            UserError: an option or message the Messages API cannot take.
        """
        options = self._options.merge(prompt.options)
        params: dict[str, Any] = {
            "model": options.model or self._model,
            "max_tokens": options.max_tokens or self._max_tokens,
            "messages": _messages(prompt),
        }
        system = prompt.system_text
        if system:
            params["system"] = system
        # The SDK (since 1.0) has no sampling keywords; the API still takes them, on models that
        # sample, so they travel in the body, and only when set.
        body: dict[str, Any] = {}
        if options.temperature is not None:
            if options.temperature > 1.0:
                raise UserError(
                    f"Anthropic accepts a temperature between 0 and 1, got {options.temperature}"
                )
            body["temperature"] = options.temperature
        if options.top_p is not None:
            body["top_p"] = options.top_p
        if options.stop:
            params["stop_sequences"] = list(options.stop)
        if options.tools:
            params["tools"] = [
                {
                    "name": tool.name,
                    "description": tool.description,
                    "input_schema": plain(tool.parameters),
                }
                for tool in options.tools
            ]
            # A tool choice without tools is an error for the API, so it travels only with them.
            if options.tool_choice is not None:
                params["tool_choice"] = dict(_TOOL_CHOICES[options.tool_choice])
        response_format = options.response_format
        if response_format is not None and response_format.type == "json_schema":
            params["output_config"] = {
                "format": {"type": "json_schema", "schema": plain(response_format.schema)}
            }
        if options.extra_body:
            body.update(plain(options.extra_body))
        if body:
            params["extra_body"] = body
        return params

    @contextlib.contextmanager
    def _map_errors(self, model: str) -> Iterator[None]:
        """Translate the SDK's (and, mid-stream, the transport's) errors into jevrefine's.

        The key is blanked out of the error and its causes, should the server echo it back.
        """
        try:
            with self._translate_errors(model):
                yield
        except ModelError as error:
            redact_error(error, self._secret)
            raise

    @contextlib.contextmanager
    def _translate_errors(self, model: str) -> Iterator[None]:
        where = self.server_address
        try:
            yield
        except _SDKResponseTooLargeError as exc:
            raise ResponseTooLargeError(str(exc), limit=exc.limit) from None
        except StatusError as failure:
            response = failure.response
            raise _http_error(
                response.status_code, _decoded_body(response), response.headers, model
            ) from None
        except anthropic.APIStatusError as exc:  # an `error` event of a stream under way
            raise _http_error(exc.status_code, exc.body, exc.response.headers, model) from exc
        except (MalformedResponseError, httpx2.DecodingError) as exc:
            # Bytes that are no HTTP/1.1 (or a body that does not decode): never retried.
            raise ModelResponseError(
                f"{model} at {where} sent a response that is not valid HTTP: {exc}",
                model_name=model,
            ) from None
        except anthropic.APITimeoutError as exc:
            raise ModelTimeoutError(
                f"{model} at {where} did not answer in time; raise timeout= or retry later",
                model_name=model,
            ) from exc
        except anthropic.APIConnectionError as exc:
            raise ModelConnectionError(
                f"could not reach {model} at {where}: {_cause(exc)}", model_name=model
            ) from exc
        except anthropic.APIResponseValidationError as exc:
            raise ModelResponseError(
                f"{model} at {where} answered with a response that could not be read: {exc}",
                model_name=model,
            ) from exc
        except (ValueError, RecursionError, OverflowError) as exc:
            # What the decoders let through: a 200 whose body is not JSON (a broken proxy), a
            # number past Python's 4,300-digit limit, bytes that are not UTF-8 inside an event.
            # Not the SDK's own "Streaming is required": `call` streams instead.
            if "Streaming is required" in str(exc):
                raise
            raise ModelResponseError(
                f"{model} at {where} answered with a body that could not be read: "
                f"{type(exc).__name__}: {exc}",
                model_name=model,
            ) from exc
        except httpx2.TimeoutException as exc:  # the SDK does not wrap errors while streaming
            raise ModelTimeoutError(
                f"{model} at {where} stopped sending the stream in time", model_name=model
            ) from exc
        except httpx2.TransportError as exc:
            raise ModelConnectionError(
                f"the connection to {model} at {where} broke: {type(exc).__name__}: {exc}",
                model_name=model,
            ) from exc


_ANTHROPIC_URL: Final = "https://api.anthropic.com"
"""The SDK's base URL when neither `base_url` nor `ANTHROPIC_BASE_URL` gives one."""


def _keepalive_probes() -> tuple[tuple[int, int, int], ...]:
    """The TCP keep-alive options the SDK's default client sets, for the lean transport too.

    A long answer can be silent for minutes; the probes keep NAT and load-balancer state alive.
    """
    options = [(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)]
    for name, value in (("TCP_KEEPINTVL", 60), ("TCP_KEEPCNT", 5), ("TCP_KEEPIDLE", 60)):
        option = getattr(socket, name, None)
        if option is not None:
            options.append((socket.IPPROTO_TCP, option, value))
    return tuple(options)


def _own_clients(
    settings: AdapterSettings,
) -> tuple[AsyncAnthropic, AsyncAnthropic, VendorWire]:
    """The SDK clients an adapter builds itself (whole responses; streams), and the wire.

    Both use the SDK's default HTTP client (its limits, timeouts, redirects, proxies, trust
    store, keep-alive socket options) with bodies capped, and retry nothing themselves (the
    wire's policy does); whole responses additionally go through the keep-alive core when no
    proxy applies to the base URL, and `call()` calls that core with `create`'s headers when the
    lean path is taken (`_http._vendor_anthropic`).
    """
    key = settings.api_key if settings.api_key is not None else os.environ.get("ANTHROPIC_API_KEY")
    if not key:
        if settings.base_url is None:
            raise UserError(
                "AnthropicChatModel needs an API key: set ANTHROPIC_API_KEY, or pass "
                "api_key=... (or base_url=... for a server that needs none)"
            )
        key = _PLACEHOLDER_KEY
    extra: dict[str, Any] = {}
    if settings.deadlines.timeout is not None:
        extra["timeout"] = settings.deadlines.timeout
    cap = settings.max_response_bytes
    base_url = settings.base_url
    pool = None
    if cap is not None:
        url = base_url or os.environ.get("ANTHROPIC_BASE_URL") or _ANTHROPIC_URL
        extra["http_client"], pool = lean_parts(
            anthropic.DefaultAsyncHttpxClient,
            httpx2.URL(url),
            cap,
            error=_SDKResponseTooLargeError,
            socket_options=_keepalive_probes(),
        )
    # The key goes to the SDK client only: the adapter keeps no copy of it.
    client = AsyncAnthropic(
        api_key=key, base_url=base_url, max_retries=0, open_telemetry=False, **extra
    )
    wire = anthropic_wire(client, pool, settings.max_retries)
    if cap is None:
        return client, client, wire
    streams = bounded_http_client(
        anthropic.DefaultAsyncHttpxClient, cap, error=_SDKResponseTooLargeError
    )
    return client, client.with_options(http_client=streams), wire


class _SDKResponseTooLargeError(ResponseTooLargeError, anthropic.AnthropicError):
    """What the capped HTTP client raises under Anthropic's SDK.

    An `AnthropicError` too, so that the SDK neither wraps it as a connection error nor retries
    it (the same body would come back). The adapter hands the caller a plain
    `ResponseTooLargeError` instead.
    """


def _cause(exc: BaseException) -> str:
    cause = exc.__cause__ or exc.__context__
    if cause is None:
        return str(exc)
    return f"{type(cause).__name__}: {cause}"


def _decoded_body(response: RawResponse) -> Any:
    """An error body as the server sent it: JSON when it parses, else text, `None` if empty."""
    if not response.content:
        return None
    try:
        return json.loads(response.content)
    except (ValueError, RecursionError):  # RecursionError: nested past the decoder
        return response.content.decode("utf-8", errors="replace")


def _http_error(
    status: int, body: Any, raw_headers: Mapping[str, str], model: str
) -> ModelHTTPError:
    headers = safe_headers(raw_headers)
    message: str | None = None
    if isinstance(body, Mapping):
        error = body.get("error")
        if isinstance(error, Mapping):
            kind = error.get("type")
            if error.get("message"):
                message = f"{kind}: {error['message']}" if kind else str(error["message"])
            if status < 400:  # an `error` event in a stream that had started with 200
                status = _ERROR_TYPE_STATUS.get(str(kind), 500)
    if status < 400:
        # An error event whose body could not be read names no type: a server error, never
        # an "HTTP 200" error.
        status = 500
    return ModelHTTPError(
        status,
        body,
        parse_retry_after(headers),
        model_name=model,
        message=message,
        headers=headers,
    )


def _tool_input(call: ToolCall) -> dict[str, Any]:
    arguments = call.parsed_arguments()
    if not isinstance(arguments, dict):
        raise UserError(
            f"tool call {call.id!r} ({call.name}) has arguments that are not a JSON object "
            f"({call.arguments[:100]!r}); Anthropic's tool_use input must be one"
        )
    return arguments


def _messages(prompt: Prompt) -> list[dict[str, Any]]:
    """The prompt's turns as Messages API messages: one role at a time, alternating."""
    turns: list[tuple[Literal["user", "assistant"], list[dict[str, Any]]]] = []
    for message in prompt.messages:
        role: Literal["user", "assistant"]
        blocks: list[dict[str, Any]]
        if isinstance(message, SystemMessage):
            continue  # sent as the `system` parameter
        if isinstance(message, UserMessage):
            role, blocks = "user", _text_blocks(message.text)
        elif isinstance(message, AssistantMessage):
            role = "assistant"
            blocks = _text_blocks(message.text)
            blocks.extend(
                {"type": "tool_use", "id": c.id, "name": c.name, "input": _tool_input(c)}
                for c in message.tool_calls
            )
        elif isinstance(message, ToolResponseMessage):
            role = "user"
            blocks = [
                {"type": "tool_result", "tool_use_id": r.id, "content": r.data}
                for r in message.responses
            ]
        else:  # pragma: no cover - Prompt only holds the four message types
            raise UserError(f"cannot send a {type(message).__name__} to Anthropic")
        if not blocks:
            continue  # the API rejects empty text blocks and empty messages
        if turns and turns[-1][0] == role:
            turns[-1][1].extend(blocks)
        else:
            turns.append((role, blocks))
    messages: list[dict[str, Any]] = []
    for role, blocks in turns:
        if role == "user":
            # The API wants a turn's tool_result blocks before any text in it.
            blocks.sort(key=lambda b: b["type"] != "tool_result")
        if len(blocks) == 1 and blocks[0]["type"] == "text":
            messages.append({"role": role, "content": blocks[0]["text"]})
        else:
            messages.append({"role": role, "content": blocks})
    return messages


def _text_blocks(text: str) -> list[dict[str, Any]]:
    return [{"type": "text", "text": text}] if text else []


@contextlib.contextmanager
def _broken_stream_is_incomplete(model: str, where: str) -> Iterator[None]:
    """A connection that breaks once the stream has begun: the answer so far is not whole."""
    try:
        yield
    except (anthropic.APIConnectionError, httpx2.TransportError) as exc:
        if isinstance(exc, (anthropic.APITimeoutError, httpx2.TimeoutException)):
            raise  # a timeout keeps its own type
        raise IncompleteResponseError(
            f"the stream from {model} at {where} broke off; the answer is incomplete: "
            f"{_cause(exc)}",
            model_name=model,
        ) from exc


# -- reading responses ----------------------------------------------------------------------
#
# Every value kept from the SDK's objects goes through the `Reader` (type, range, the key blanked
# out), inside one `unreadable_items_raise` per response or event: see `_reading`.
# `anthropic.BaseModel` is what the SDK builds for a JSON object, `JSONObject` what the lean
# request hands over for one; both are read alike.

_OBJECT: Final = (anthropic.BaseModel, JSONObject)
"""What the SDK builds for a JSON object, and what the lean request hands over for one."""


def _finish_reason(stop_reason: str | None) -> str | None:
    if stop_reason is None:
        return None
    return FINISH_REASONS.get(stop_reason, stop_reason.lower())


def _usage(read: Reader, usage: object) -> tuple[Usage, dict[str, int]]:
    """Total input (cache reads and writes included), output, and the cache counts for `extra`."""
    read.of_type(usage, _OBJECT, "usage", "a usage object")
    cache_read = read.count(getattr(usage, "cache_read_input_tokens", None), "usage.cache_read")
    cache_creation = read.count(
        getattr(usage, "cache_creation_input_tokens", None), "usage.cache_creation"
    )
    given = read.count(getattr(usage, "input_tokens", None), "usage.input_tokens")
    extra = {
        "cache_read_input_tokens": cache_read,
        "cache_creation_input_tokens": cache_creation,
    }
    output = read.count(getattr(usage, "output_tokens", None), "usage.output_tokens")
    total = Usage(given + cache_read + cache_creation, output, cache_read, cache_creation)
    return total, extra


def _tool_arguments(read: Reader, value: object, where: str) -> str:
    """A tool_use block's `input` (an object) as JSON text, the key blanked out."""
    if value is None:
        return "{}"
    if isinstance(value, JSONObject):  # the lean request's: the decoded object behind it
        value = unwrapped(value)
    if not isinstance(value, Mapping):
        raise UnreadableValueError(where, value, "a JSON object")
    return read.scrub(json.dumps(value))


def _response_of(
    *,
    text: str,
    tool_calls: tuple[ToolCall, ...],
    message_id: str | None,
    model: str | None,
    stop_reason: str | None,
    stop_sequence: str | None,
    usage: Usage,
    cache: Mapping[str, int],
) -> ChatResponse:
    finish = _finish_reason(stop_reason)
    extra: dict[str, Any] = {**cache}
    if stop_reason is not None:
        extra["stop_reason"] = stop_reason
    if stop_sequence is not None:
        extra["stop_sequence"] = stop_sequence
    generation = Generation(
        AssistantMessage(text, tool_calls), {"finish_reason": finish} if finish else {}
    )
    return ChatResponse(
        (generation,),
        ChatResponseMetadata(
            id=message_id,
            model=model,
            usage=usage,
            finish_reasons=(finish,) if finish else (),
            extra=extra,
        ),
    )


def _chat_response(read: Reader, message: Any) -> ChatResponse:
    texts: list[str] = []
    calls: list[ToolCall] = []
    for block in message.content:
        read.of_type(block, _OBJECT, "content[]", "a content block object")
        kind = getattr(block, "type", None)
        if kind == "text":
            texts.append(read.text(block.text, "content[].text"))
        elif kind == "tool_use":
            calls.append(
                ToolCall(
                    read.text(block.id, "content[].id"),
                    read.text(block.name, "content[].name"),
                    _tool_arguments(read, block.input, "content[].input"),
                )
            )
        # Thinking and server-tool blocks carry no answer text: left out.
    usage, cache = _usage(read, message.usage)
    return _response_of(
        text="".join(texts),
        tool_calls=tuple(calls),
        message_id=read.optional_text(message.id, "id"),
        model=read.optional_text(message.model, "model"),
        stop_reason=read.optional_text(message.stop_reason, "stop_reason"),
        stop_sequence=read.optional_text(message.stop_sequence, "stop_sequence"),
        usage=usage,
        cache=cache,
    )


class _StreamState:
    """What a raw event stream has told so far."""

    __slots__ = (
        "cache",
        "id",
        "input_tokens",
        "model",
        "output_tokens",
        "read",
        "stop_reason",
        "stop_sequence",
        "stopped",
        "tools",
    )

    def __init__(self, read: Reader) -> None:
        self.read = read
        self.id: str | None = None
        self.model: str | None = None
        self.input_tokens = 0
        self.output_tokens = 0
        self.cache: dict[str, int] = {}
        self.stop_reason: str | None = None
        self.stop_sequence: str | None = None
        self.stopped = False
        # content block index -> (id, name, input JSON pieces, input given at block start)
        self.tools: dict[int, tuple[str, str, list[str], str]] = {}

    def feed(self, event: Any) -> str:
        """Take one event in; return its text delta ("" for every other event)."""
        read = self.read
        read.of_type(event, _OBJECT, "the event", "an event object")
        kind = getattr(event, "type", None)
        if kind == "content_block_delta":
            delta = read.of_type(event.delta, _OBJECT, "delta", "a delta object")
            if delta.type == "text_delta":
                return read.text(delta.text, "delta.text")
            index = read.index(event.index, "index")
            if delta.type == "input_json_delta" and index in self.tools:
                self.tools[index][2].append(read.text(delta.partial_json, "delta.partial_json"))
        elif kind == "message_start":
            message = read.of_type(event.message, _OBJECT, "message", "a message object")
            self.id = read.optional_text(message.id, "message.id")
            self.model = read.optional_text(message.model, "message.model")
            usage, self.cache = _usage(read, message.usage)
            self.input_tokens, self.output_tokens = usage.input_tokens, usage.output_tokens
        elif kind == "content_block_start":
            block = read.of_type(event.content_block, _OBJECT, "content_block", "a block object")
            if block.type == "tool_use":
                self.tools[read.index(event.index, "index")] = (
                    read.text(block.id, "content_block.id"),
                    read.text(block.name, "content_block.name"),
                    [],
                    _tool_arguments(read, block.input, "content_block.input"),
                )
            elif block.type == "text":
                return read.text(block.text, "content_block.text")
        elif kind == "message_delta":
            self._message_delta(event)
        elif kind == "message_stop":
            self.stopped = True
        return ""

    def _message_delta(self, event: Any) -> None:
        read = self.read
        delta = read.of_type(event.delta, _OBJECT, "delta", "a delta object")
        self.stop_reason = read.optional_text(delta.stop_reason, "delta.stop_reason")
        self.stop_sequence = read.optional_text(delta.stop_sequence, "delta.stop_sequence")
        usage = read.of_type(event.usage, _OBJECT, "usage", "a usage object")
        self.output_tokens = read.count(usage.output_tokens, "usage.output_tokens")
        # Newer servers repeat the input counts here; they are final, so they win.
        if getattr(usage, "input_tokens", None) is not None:
            total, self.cache = _usage(read, usage)
            self.input_tokens = total.input_tokens

    def final_chunk(self) -> ChatResponse:
        """The last chunk: tool calls, usage, finish reason, id and model."""
        calls = []
        for index in sorted(self.tools):
            tool_id, name, pieces, initial = self.tools[index]
            arguments = "".join(pieces) or initial
            calls.append(ToolCall(tool_id, name, arguments))
        return _response_of(
            text="",
            tool_calls=tuple(calls),
            message_id=self.id,
            model=self.model,
            stop_reason=self.stop_reason,
            stop_sequence=self.stop_sequence,
            usage=Usage(
                self.input_tokens,
                self.output_tokens,
                self.cache.get("cache_read_input_tokens", 0),
                self.cache.get("cache_creation_input_tokens", 0),
            ),
            cache=self.cache,
        )
