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
from typing import Any, ClassVar, Final

import httpx2

try:
    import openai
    from openai import AsyncOpenAI
    from openai.types.chat import ChatCompletion
except ImportError as _import_error:  # pragma: no cover - exercised only without the extra
    raise ImportError(
        'OpenAIChatModel needs the `openai` package: pip install "jevrefine[openai]"'
    ) from _import_error

from .._headers import parse_retry_after, redact_error, safe_headers
from ..exceptions import (
    EmptyResponseError,
    ModelConnectionError,
    ModelError,
    ModelHTTPError,
    ModelTimeoutError,
    UserError,
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
from ._bounded_transport import (
    DEFAULT_MAX_RESPONSE_BYTES,
    bounded_http_client,
    check_max_response_bytes,
)
from ._stream_items import unreadable_items_raise
from .base import ChatModel

__all__ = ["OpenAIChatModel"]

_PLACEHOLDER_KEY: Final = "not-needed"
"""Sent to a server given by `base_url` when no key is set: local servers ignore the key, but
the SDK refuses to build a client without one."""

_SDK_ERRORS: Final = (openai.OpenAIError, json.JSONDecodeError, httpx2.TransportError)
"""What the SDK and, while a stream is read, the transport raise: translated by the adapter."""

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
        max_retries: transport retries of the `openai` SDK (connection errors, timeouts, 408,
            409, 429, 5xx), with its exponential backoff. `0` turns them off.
        timeout: seconds to wait for a response (per attempt); the SDK's default when `None`.
            A read timeout is retried like a connection error: a request the server received
            may be sent again (and billed again); `max_retries=0` prevents that.
        max_response_bytes: the most bytes of a response body read (32 MiB by default; `None`
            for no cap). A body past it raises `ResponseTooLargeError` (a `ModelError`) and its
            connection is closed. Not with `client=`: the caller's client reads as it is set up.

    Raises:
        UserError: no API key for OpenAI's own API, or `client` given with `base_url`/`api_key`
            (or a `max_response_bytes` of its own).

    Errors of a call are `jevrefine.exceptions`: `ModelHTTPError` (with `status_code`, the
    decoded `body` and `retry_after`), `ModelTimeoutError`, `ModelConnectionError` and
    `EmptyResponseError`, each raised `from` the SDK's exception.
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
        max_response_bytes: int | None = DEFAULT_MAX_RESPONSE_BYTES,
    ) -> None:
        if not isinstance(model, str) or not model:
            raise UserError(
                "OpenAIChatModel needs a model name, e.g. OpenAIChatModel('gpt-4o-mini')"
            )
        max_response_bytes = check_max_response_bytes(max_response_bytes)
        if options is not None and not isinstance(options, ChatOptions):
            raise UserError(f"options must be a ChatOptions, got {type(options).__name__}")
        if isinstance(max_retries, bool) or not isinstance(max_retries, int) or max_retries < 0:
            raise UserError(
                f"max_retries must be an int >= 0 (0 turns retries off), got {max_retries!r}"
            )
        if timeout is not None and timeout <= 0:
            raise UserError(f"timeout must be a positive number of seconds, got {timeout!r}")
        self._model = model
        self._options = options or ChatOptions()
        self._no_options = self._options == ChatOptions()  # nothing to merge on each call
        if client is not None:
            if base_url is not None or api_key is not None:
                raise UserError(
                    "pass either client= or base_url=/api_key=, not both: the client already "
                    "holds its base URL and key"
                )
            if max_response_bytes not in (None, DEFAULT_MAX_RESPONSE_BYTES):
                raise UserError(
                    "max_response_bytes applies to the client the model builds; with client= "
                    "give that client's http_client the limits you want instead"
                )
            self._client = client
            self._owns_client = False
        else:
            base_url = base_url or os.environ.get("OPENAI_BASE_URL") or None
            key = api_key or os.environ.get("OPENAI_API_KEY") or None
            if key is None:
                if base_url is None:
                    raise UserError(
                        "no OpenAI API key: set the OPENAI_API_KEY environment variable, pass "
                        "api_key=..., or pass base_url= of an OpenAI-compatible server"
                    )
                key = _PLACEHOLDER_KEY
            extra: dict[str, Any] = {} if timeout is None else {"timeout": timeout}
            if max_response_bytes is not None:
                # The SDK's own default client (pool limits, timeouts, proxies), bodies capped.
                extra["http_client"] = bounded_http_client(
                    openai.DefaultAsyncHttpxClient, max_response_bytes
                )
            self._client = AsyncOpenAI(
                api_key=key, base_url=base_url, max_retries=max_retries, **extra
            )
            self._owns_client = True
        # Kept only to scrub it out of provider error texts; never printed.
        self._secret = _key_of(self._client)
        # Read once: telemetry needs them on every call, and the SDK's `base_url` property is
        # not free. A client whose base URL is reassigned later needs a new adapter.
        url = self._client.base_url
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
        return f"OpenAIChatModel(model_name={self.model_name!r}, base_url={self.base_url!r})"

    # -- calls -----------------------------------------------------------------------------

    async def call(self, prompt: Prompt) -> ChatResponse:
        """Ask the model once (`POST /chat/completions`) and return its whole response.

        Raises:
            ModelHTTPError: the server answered with an error status (after the SDK's retries).
            ModelTimeoutError: no answer within `timeout`.
            ModelConnectionError: the server could not be reached.
            EmptyResponseError: the response held no choices.
        """
        params, extra_body = self._request(prompt)
        model = params["model"]
        try:
            completion = await self._client.chat.completions.create(**params, extra_body=extra_body)
        except ModelError as error:  # raised by the capped HTTP client
            self._redact(error)
            raise
        except _SDK_ERRORS as exc:
            raise self._model_error(exc, model) from exc
        if not isinstance(completion, ChatCompletion):
            # The SDK hands back a 200 body it could not read as an object (text without a JSON
            # content type, a JSON list) unchanged: say so, instead of an AttributeError later.
            raise ModelError(
                f"{model} at {self.base_url} sent a response that could not be read: "
                f"expected a chat completion object, got {type(completion).__name__}",
                model_name=model,
            )
        return _response_of(completion, model)

    async def stream(self, prompt: Prompt) -> AsyncIterator[ChatResponse]:
        """Ask the model and yield one `ChatResponse` per text delta.

        Tool calls arrive in pieces on the wire; they are put together here and delivered whole
        in the last chunk, which also carries the usage, the finish reason, the response id and
        the model (and the logprobs, when requested).

        Raises:
            ModelHTTPError: the server answered with an error status (after the SDK's retries).
            ModelTimeoutError: no answer within `timeout`.
            ModelConnectionError: the server could not be reached, or the stream broke.
            EmptyResponseError: the stream ended without any choice.
        """
        params, extra_body = self._request(prompt)
        model = params["model"]
        state = _StreamState()
        try:
            chunks = await self._client.chat.completions.create(
                **params,
                extra_body=extra_body,
                stream=True,
                stream_options={"include_usage": True},
            )
            try:
                async for chunk in chunks:
                    with unreadable_items_raise(model, self.base_url, "stream chunk", self._scrub):
                        text = state.add(chunk)
                    if text:
                        yield ChatResponse(
                            (Generation(AssistantMessage(text)),),
                            ChatResponseMetadata(id=state.id, model=state.model),
                        )
            except openai.APITimeoutError as exc:
                # Once the stream has begun the SDK retries nothing: say what happened.
                raise ModelTimeoutError(
                    f"{model} at {self.base_url} stopped sending the stream for longer than the "
                    "timeout; the answer is incomplete",
                    model_name=model,
                ) from exc
            except openai.APIConnectionError as exc:
                cause = exc.__cause__
                detail = f": {type(cause).__name__} {self._scrub(str(cause))}" if cause else ""
                raise ModelConnectionError(
                    f"the stream from {model} at {self.base_url} broke off; the answer is "
                    f"incomplete{detail}".rstrip(),
                    model_name=model,
                ) from exc
            finally:
                # Closing releases the connection when the consumer stops early.
                await chunks.close()
        except ModelError as error:
            self._redact(error)
            raise
        except _SDK_ERRORS as exc:
            raise self._model_error(exc, model) from exc
        yield state.final_chunk(model)

    async def aclose(self) -> None:
        """Close the HTTP client, if this model created it (a client passed in stays open)."""
        if self._owns_client:
            await self._client.close()

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
        extra_body = _plain(options.extra_body) if options.extra_body else None
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
        if isinstance(exc, openai.APITimeoutError):
            return ModelTimeoutError(
                f"{model} at {self.base_url} did not answer in time "
                "(raise timeout=, or check the server's load)",
                model_name=model,
            )
        if isinstance(exc, openai.APIConnectionError):
            cause = exc.__cause__
            detail = f": {self._scrub(str(cause))}" if cause is not None and str(cause) else ""
            return ModelConnectionError(
                f"could not reach {model} at {self.base_url}{detail}", model_name=model
            )
        if isinstance(exc, openai.APIStatusError):
            response = exc.response
            return ModelHTTPError(
                exc.status_code,
                self._scrub(_decoded_body(exc)),
                parse_retry_after(response.headers),
                model_name=model,
                headers=safe_headers(response.headers),
            )
        if isinstance(exc, (openai.OpenAIError, json.JSONDecodeError)):
            # Anything else the SDK raises: an error event in a stream, or a body that is not
            # JSON (the SDK lets the decoder's error through).
            return ModelError(
                f"{model} at {self.base_url} sent a response that could not be read: "
                f"{self._scrub(str(exc))}",
                model_name=model,
            )
        if isinstance(exc, httpx2.TimeoutException):
            # While a stream is read, the SDK no longer wraps transport errors.
            return ModelTimeoutError(
                f"{model} at {self.base_url} stopped sending the stream in time", model_name=model
            )
        return ModelConnectionError(
            f"the connection to {model} at {self.base_url} broke: {self._scrub(str(exc))}",
            model_name=model,
        )

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
            "parameters": _plain(tool.parameters),
        },
    }


def _response_format_param(response_format: ResponseFormat) -> dict[str, Any]:
    if response_format.type != "json_schema":
        return {"type": response_format.type}
    json_schema: dict[str, Any] = {
        "name": response_format.name,
        "schema": _plain(response_format.schema),
    }
    if response_format.strict is not None:
        json_schema["strict"] = response_format.strict
    return {"type": "json_schema", "json_schema": json_schema}


def _plain(value: Any) -> Any:
    """A deep copy with read-only mappings and tuples turned into dicts and lists (for JSON)."""
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


# -- response mapping ----------------------------------------------------------------------


def _finish_reason(reason: str | None) -> str | None:
    if reason is None:
        return None
    lowered = reason.lower()
    return _FINISH_REASONS.get(lowered, lowered)


def _usage_of(usage: Any) -> Usage:
    if usage is None:
        return Usage()
    return Usage(usage.prompt_tokens or 0, usage.completion_tokens or 0)


def _logprobs_of(content: Sequence[Any] | None) -> list[TokenLogprob]:
    return [
        TokenLogprob(
            item.token,
            item.logprob,
            tuple((top.token, top.logprob) for top in item.top_logprobs or ()),
        )
        for item in content or ()
    ]


def _tool_calls_of(calls: Sequence[Any] | None) -> tuple[ToolCall, ...]:
    result: list[ToolCall] = []
    for call in calls or ():
        function = getattr(call, "function", None)
        if function is None:  # a custom (non-function) tool call: jevrefine offers none
            continue
        result.append(ToolCall(call.id or "", function.name or "", function.arguments or ""))
    return tuple(result)


def _index_of(choice: Any) -> int:
    return int(choice.index)


def _response_of(completion: Any, model: str) -> ChatResponse:
    if not completion.choices:
        raise EmptyResponseError(
            f"{model} returned no choices; check the provider's content filter and that "
            "max_tokens leaves room for an answer",
            model_name=model,
        )
    choices = completion.choices
    if len(choices) > 1:
        choices = sorted(choices, key=_index_of)
    generations: list[Generation] = []
    reasons: list[str] = []
    for choice in choices:
        message = choice.message
        metadata: dict[str, Any] = {}
        reason = _finish_reason(choice.finish_reason)
        if reason is not None:
            metadata["finish_reason"] = reason
            reasons.append(reason)
        if choice.logprobs is not None and choice.logprobs.content is not None:
            metadata["logprobs"] = _logprobs_of(choice.logprobs.content)
        calls = _tool_calls_of(message.tool_calls) if message.tool_calls else ()
        generations.append(Generation(AssistantMessage(message.content or "", calls), metadata))
    extra = (
        {"system_fingerprint": completion.system_fingerprint}
        if completion.system_fingerprint
        else {}
    )
    return ChatResponse(
        tuple(generations),
        ChatResponseMetadata(
            id=completion.id or None,
            model=completion.model or None,
            usage=_usage_of(completion.usage),
            finish_reasons=tuple(reasons),
            extra=extra,
        ),
    )


@dataclass
class _PartialToolCall:
    id: str = ""
    name: str = ""
    arguments: list[str] = field(default_factory=list)


@dataclass
class _StreamState:
    """What a stream has said so far, beyond the text already yielded."""

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
        self.id = chunk.id or self.id
        self.model = chunk.model or self.model
        self.system_fingerprint = chunk.system_fingerprint or self.system_fingerprint
        if chunk.usage is not None:
            self.usage = _usage_of(chunk.usage)
        text = ""
        for choice in chunk.choices:
            # ChatOptions has no `n`, so a stream carries one choice; others would be ignored.
            if choice.index != 0:
                continue
            self.saw_choice = True
            delta = choice.delta
            if delta.content:
                text = delta.content
            for piece in delta.tool_calls or ():
                partial = self.tool_calls.setdefault(piece.index, _PartialToolCall())
                if piece.id:
                    partial.id = piece.id
                if piece.function is not None:
                    if piece.function.name:
                        # Servers send the name once; some repeat it, so never concatenate.
                        partial.name = piece.function.name
                    if piece.function.arguments:
                        partial.arguments.append(piece.function.arguments)
            if choice.logprobs is not None and choice.logprobs.content is not None:
                self.logprobs_requested = True
                self.logprobs.extend(_logprobs_of(choice.logprobs.content))
            if choice.finish_reason is not None:
                self.finish_reason = _finish_reason(choice.finish_reason)
        return text

    def final_chunk(self, model: str) -> ChatResponse:
        """The last chunk: whole tool calls, usage, finish reason, id and model."""
        if not self.saw_choice:
            raise EmptyResponseError(
                f"the stream of {model} ended without any choice", model_name=model
            )
        calls = tuple(
            ToolCall(p.id, p.name, "".join(p.arguments)) for _, p in sorted(self.tool_calls.items())
        )
        metadata: dict[str, Any] = {}
        if self.finish_reason is not None:
            metadata["finish_reason"] = self.finish_reason
        if self.logprobs_requested:
            metadata["logprobs"] = self.logprobs
        extra = {"system_fingerprint": self.system_fingerprint} if self.system_fingerprint else {}
        return ChatResponse(
            (Generation(AssistantMessage("", calls), metadata),),
            ChatResponseMetadata(
                id=self.id,
                model=self.model,
                usage=self.usage,
                finish_reasons=(self.finish_reason,) if self.finish_reason else (),
                extra=extra,
            ),
        )


# -- error mapping -------------------------------------------------------------------------


def _decoded_body(exc: openai.APIStatusError) -> Any:
    """The whole error body as the server sent it: JSON when it parses, else text."""
    response = exc.response
    try:
        content = response.content
    except Exception:  # the body was never read (a streamed response): use the SDK's view
        return exc.body
    if not content:
        return exc.body
    try:
        return json.loads(content)
    except (ValueError, RecursionError):  # RecursionError: nested past the decoder
        return content.decode("utf-8", errors="replace")
