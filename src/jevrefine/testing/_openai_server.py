"""`FakeOpenAIServer`: OpenAI's chat completions API on loopback, scripted, for tests.

The wire format (JSON responses, server-sent-event chunks, error bodies) is checked against
responses recorded from a real llama.cpp server, so the official `openai` client, and any other
OpenAI-compatible client, reads it as it reads the real thing.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from http import HTTPStatus
from typing import Any, ClassVar, TypeAlias

from ._http import (
    HTTPRequest,
    HTTPResponse,
    StreamingHTTPResponse,
    serve_until_stdin_closes,
)
from ._script import ScriptedServer

__all__ = ["FakeOpenAIServer", "FakeToolCall", "OpenAIReply", "ReplyFunction"]


@dataclass(frozen=True, slots=True)
class FakeToolCall:
    """A tool call the fake model makes."""

    name: str
    """The tool's name."""
    arguments: str | Mapping[str, Any] = "{}"
    """The arguments: a JSON string as is, or a mapping that is JSON-encoded."""
    id: str | None = None
    """The call's id; `call_<n>` (numbered per server) when `None`."""


@dataclass(frozen=True, slots=True, kw_only=True)
class OpenAIReply:
    """One scripted answer: text, tool calls, and what the server says about them.

    Every field is optional; a plain `str` reply is `OpenAIReply(content=...)`. A `dict` with the
    same keys works too (`tool_calls` items may be dicts with `name`, `arguments`, `id`).
    """

    content: str | None = None
    """The answer's text; `None` with tool calls only."""
    tool_calls: Sequence[FakeToolCall] = ()
    """Tool calls, in order."""
    finish_reason: str | None = None
    """`stop` by default, `tool_calls` when there are tool calls."""
    usage: Mapping[str, int] | None = None
    """`prompt_tokens` / `completion_tokens`; counted from the words when `None`."""
    logprobs: Sequence[tuple[str, float]] | None = None
    """Token log probabilities to return (when the request asks for them); made up when `None`."""
    model: str | None = None
    """The model the response names; the requested one when `None`."""


_Reply: TypeAlias = str | Mapping[str, Any] | OpenAIReply
ReplyFunction: TypeAlias = Callable[[dict[str, Any]], _Reply | Awaitable[_Reply]]
"""Answers a request: gets the request's JSON body, returns a reply (sync or async)."""

_ERROR_TYPES: Mapping[int, tuple[str, str | None]] = {
    400: ("invalid_request_error", None),
    401: ("invalid_request_error", "invalid_api_key"),
    403: ("invalid_request_error", "unsupported_country_region_territory"),
    404: ("invalid_request_error", "model_not_found"),
    408: ("timeout", None),
    429: ("requests", "rate_limit_exceeded"),
}


class FakeOpenAIServer(ScriptedServer["_Reply"]):
    """A real HTTP server on 127.0.0.1 that speaks OpenAI's chat completions API.

    Point any OpenAI client at `base_url` (`http://127.0.0.1:PORT/v1`); it serves
    `POST /v1/chat/completions` (JSON, and server-sent events with `"stream": true`, including
    the usage chunk of `stream_options.include_usage` and tool-call deltas split across chunks as
    OpenAI sends them) and `GET /v1/models`.

    ```python
    from jevrefine import ChatClient
    from jevrefine.models.openai import OpenAIChatModel
    from jevrefine.testing import FakeOpenAIServer

    async def test_weather() -> None:
        async with FakeOpenAIServer() as server:
            server.script(
                {"tool_calls": [{"name": "weather", "arguments": {"city": "Paris"}}]},
                "It is sunny in Paris.",
            )
            async with OpenAIChatModel("gpt-4o", base_url=server.base_url) as model:
                answer = await ChatClient(model, tools=[weather]).prompt("Paris?").content()
            assert answer == "It is sunny in Paris."
            assert server.chat_requests[1]["messages"][-1]["role"] == "tool"
    ```

    Answers come, in this order, from the queue filled by `script(...)`, from the `reply`
    function, or by default from a deterministic echo: `"Echo: <last user message>"` (cut to
    `max_tokens` words, with finish reason `length`), or, when the request asks for a JSON
    schema, a minimal JSON value that fits it. A reply is a `str`, a `dict` with the keys of
    `FakeOpenAIServer.Reply` (`content`, `tool_calls`, `finish_reason`, `usage`, `logprobs`,
    `model`), a `FakeOpenAIServer.Reply`, or a dict with `choices`, sent as the whole response
    body as is (e.g. `{"choices": []}`).

    Usage counts whitespace-separated words. With `"logprobs": true` every token of the answer
    gets a log probability and `top_logprobs` alternatives. Faults (`fail`, `drop_connections`,
    `malformed`, `delay`) come from `LoopbackHTTPServer`; an injected failure without a body gets
    an OpenAI-shaped one (`{"error": {"message", "type", "param", "code"}}`). `requests` records
    every request; `chat_requests` the JSON bodies of the chat completion requests.

    The `reply` function, sync or async, runs on the server's own thread and event loop. Run one
    alone with `python -m jevrefine.testing._openai_server [--latency S]` (prints its base URL,
    serves until stdin closes).

    Args:
        reply: answers requests the script does not.
        latency: seconds every response waits before it is sent.
        model: the model `/v1/models` lists (answers name the model the request asked for).
    """

    Reply: ClassVar[type[OpenAIReply]] = OpenAIReply
    """A scripted answer (`OpenAIReply`), reachable from the public class."""
    ToolCall: ClassVar[type[FakeToolCall]] = FakeToolCall
    """A scripted tool call (`FakeToolCall`): name, arguments (JSON text or a dict), id."""

    reply_types: ClassVar[tuple[type, ...]] = (str, Mapping, OpenAIReply)
    """What `script(...)` accepts: a str, a dict or an `OpenAIReply`."""

    def __init__(
        self,
        reply: ReplyFunction | None = None,
        *,
        latency: float = 0.0,
        model: str = "fake-model",
    ) -> None:
        super().__init__(reply, latency=latency)
        self.model = model
        """The model `/v1/models` lists."""
        self._ids = itertools.count(1)
        self._call_ids = itertools.count(1)

    @property
    def base_url(self) -> str:
        """The base URL to give an OpenAI client: `http://127.0.0.1:PORT/v1`."""
        return self.url + "/v1"

    @property
    def chat_requests(self) -> list[dict[str, Any]]:
        """The JSON bodies of the chat completion requests received, oldest first."""
        return [
            r.json
            for r in self.requests
            if r.path == "/v1/chat/completions" and isinstance(r.json, dict)
        ]

    def default_reply(self, body: dict[str, Any]) -> _Reply:
        """The deterministic echo (or a minimal JSON value when a schema is asked for)."""
        return _default_reply(body)

    # -- the API ---------------------------------------------------------------------------

    async def handle(self, request: HTTPRequest) -> HTTPResponse | StreamingHTTPResponse:
        """Serve `/v1/chat/completions` and `/v1/models`; anything else is a 404."""
        if request.path == "/v1/chat/completions":
            if request.method != "POST":
                return _error(405, f"{request.method} is not allowed here; use POST")
            return await self._chat(request)
        if request.path == "/v1/models" and request.method == "GET":
            return HTTPResponse.json({"object": "list", "data": [self._model_entry(self.model)]})
        if request.path.startswith("/v1/models/") and request.method == "GET":
            name = request.path.removeprefix("/v1/models/")
            if name != self.model:
                return _error(404, f"The model '{name}' does not exist", code="model_not_found")
            return HTTPResponse.json(self._model_entry(name))
        return _error(404, f"Invalid URL ({request.method} {request.path})")

    def error_body(self, status: int, body: Any) -> Any:
        """An OpenAI-shaped error body for an injected failure."""
        return _error_body(status, _phrase(status))

    async def _chat(self, request: HTTPRequest) -> HTTPResponse | StreamingHTTPResponse:
        try:
            body = request.json()
        except ValueError:
            return _error(400, "We could not parse the JSON body of your request.")
        if not isinstance(body, dict):
            return _error(400, "The request body must be a JSON object.")
        messages = body.get("messages")
        if not isinstance(messages, list) or not messages:
            return _error(400, "'messages' must be a non-empty array", param="messages")
        if not isinstance(body.get("model"), str):
            return _error(400, "you must provide a model parameter", param="model")
        reply = await self.next_reply(body)
        if isinstance(reply, Mapping) and "choices" in reply:
            return HTTPResponse.json(dict(reply))
        answer = self._answer_of(reply, body)
        if body.get("stream"):
            return StreamingHTTPResponse(self._sse(answer, body))
        return HTTPResponse.json(answer.completion())

    def _answer_of(self, reply: _Reply, body: dict[str, Any]) -> _Answer:
        if isinstance(reply, str):
            reply = OpenAIReply(content=reply)
        elif isinstance(reply, Mapping):
            reply = _reply_of_dict(reply)
        calls: list[dict[str, Any]] = [
            {
                "id": call.id or f"call_{next(self._call_ids)}",
                "type": "function",
                "function": {
                    "name": call.name,
                    "arguments": call.arguments
                    if isinstance(call.arguments, str)
                    else json.dumps(dict(call.arguments)),
                },
            }
            for call in reply.tool_calls
        ]
        content = reply.content
        finish = reply.finish_reason or ("tool_calls" if calls else "stop")
        completion_words = _count_words(content or "") + sum(
            _count_words(c["function"]["arguments"]) for c in calls
        )
        usage = dict(reply.usage or {})
        prompt_tokens = int(usage.get("prompt_tokens", _prompt_words(body)))
        completion_tokens = int(usage.get("completion_tokens", completion_words))
        logprobs: list[dict[str, Any]] | None = None
        if body.get("logprobs"):
            top = int(body.get("top_logprobs") or 0)
            if reply.logprobs is not None:
                pairs = [(str(t), float(lp)) for t, lp in reply.logprobs]
            else:
                pairs = _made_up_logprobs(content or "")
            logprobs = [_logprob_entry(token, lp, top) for token, lp in pairs]
        return _Answer(
            id=f"chatcmpl-fake{next(self._ids)}",
            model=reply.model or body.get("model") or self.model,
            created=int(time.time()),
            content=content,
            tool_calls=calls,
            finish_reason=finish,
            prompt_tokens=prompt_tokens,
            completion_tokens=completion_tokens,
            logprobs=logprobs,
        )

    async def _sse(self, answer: _Answer, body: dict[str, Any]) -> AsyncIterator[bytes]:
        include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
        for chunk in answer.chunks(include_usage=include_usage):
            yield b"data: " + json.dumps(chunk, separators=(",", ":")).encode() + b"\n\n"
            # Let each event leave as its own HTTP chunk, as a generating server's would.
            await asyncio.sleep(0)
        yield b"data: [DONE]\n\n"

    @staticmethod
    def _model_entry(name: str) -> dict[str, Any]:
        return {"id": name, "object": "model", "created": 0, "owned_by": "jevrefine-fake"}


@dataclass(slots=True, kw_only=True)
class _Answer:
    """One answer, ready to be sent whole or as chunks."""

    id: str
    model: str
    created: int
    content: str | None
    tool_calls: list[dict[str, Any]]
    finish_reason: str
    prompt_tokens: int
    completion_tokens: int
    logprobs: list[dict[str, Any]] | None = field(default=None)

    def _envelope(self, kind: str) -> dict[str, Any]:
        return {
            "id": self.id,
            "object": kind,
            "created": self.created,
            "model": self.model,
            "system_fingerprint": "fp_jevrefine_fake",
        }

    def _usage(self) -> dict[str, Any]:
        return {
            "completion_tokens": self.completion_tokens,
            "prompt_tokens": self.prompt_tokens,
            "total_tokens": self.prompt_tokens + self.completion_tokens,
            "prompt_tokens_details": {"cached_tokens": 0},
        }

    def completion(self) -> dict[str, Any]:
        """The whole `chat.completion` body."""
        message: dict[str, Any] = {"role": "assistant", "content": self.content}
        if self.tool_calls:
            message["tool_calls"] = self.tool_calls
        choice: dict[str, Any] = {
            "finish_reason": self.finish_reason,
            "index": 0,
            "message": message,
        }
        if self.logprobs is not None:
            choice["logprobs"] = {"content": self.logprobs}
        return {**self._envelope("chat.completion"), "choices": [choice], "usage": self._usage()}

    def chunks(self, *, include_usage: bool) -> list[dict[str, Any]]:
        """The `chat.completion.chunk` objects of a stream, in order."""

        def chunk(delta: dict[str, Any], finish: str | None = None, **extra: Any) -> dict[str, Any]:
            choice: dict[str, Any] = {"finish_reason": finish, "index": 0, "delta": delta, **extra}
            return {**self._envelope("chat.completion.chunk"), "choices": [choice]}

        result = [chunk({"role": "assistant", "content": None})]
        pieces = _pieces(self.content or "")
        logprobs = list(self.logprobs or ())
        for i, piece in enumerate(pieces):
            extra: dict[str, Any] = {}
            if self.logprobs is not None:
                # One made-up token per piece; leftovers go with the last piece.
                mine = logprobs[i : i + 1] if i < len(pieces) - 1 else logprobs[i:]
                extra["logprobs"] = {"content": mine}
            result.append(chunk({"content": piece}, **extra))
        for index, call in enumerate(self.tool_calls):
            # As OpenAI does: the first delta names the call, the arguments follow in pieces.
            head = {
                "index": index,
                "id": call["id"],
                "type": "function",
                "function": {"name": call["function"]["name"], "arguments": ""},
            }
            result.append(chunk({"tool_calls": [head]}))
            for part in _split(call["function"]["arguments"], 3):
                result.append(
                    chunk({"tool_calls": [{"index": index, "function": {"arguments": part}}]})
                )
        result.append(chunk({}, self.finish_reason))
        if include_usage:
            result.append(
                {**self._envelope("chat.completion.chunk"), "choices": [], "usage": self._usage()}
            )
        return result


# -- replies -------------------------------------------------------------------------------


def _reply_of_dict(reply: Mapping[str, Any]) -> OpenAIReply:
    known = {"content", "tool_calls", "finish_reason", "usage", "logprobs", "model"}
    unknown = sorted(set(reply) - known)
    if unknown:
        raise ValueError(
            f"unknown reply key(s) {unknown}; a reply dict has {sorted(known)}, "
            "or 'choices' for a whole response body"
        )
    calls = []
    for call in reply.get("tool_calls") or ():
        if isinstance(call, FakeToolCall):
            calls.append(call)
        else:
            calls.append(FakeToolCall(call["name"], call.get("arguments", "{}"), call.get("id")))
    return OpenAIReply(
        content=reply.get("content"),
        tool_calls=tuple(calls),
        finish_reason=reply.get("finish_reason"),
        usage=reply.get("usage"),
        logprobs=reply.get("logprobs"),
        model=reply.get("model"),
    )


def _default_reply(body: dict[str, Any]) -> OpenAIReply:
    response_format = body.get("response_format") or {}
    if response_format.get("type") == "json_schema":
        schema = (response_format.get("json_schema") or {}).get("schema") or {}
        return OpenAIReply(content=json.dumps(_example_of(schema)))
    if response_format.get("type") == "json_object":
        return OpenAIReply(content="{}")
    text = "Echo: " + _last_user_text(body.get("messages") or [])
    limit = body.get("max_tokens") or body.get("max_completion_tokens")
    words = text.split(" ")
    if isinstance(limit, int) and 0 < limit < len(words):
        return OpenAIReply(content=" ".join(words[:limit]), finish_reason="length")
    return OpenAIReply(content=text)


def _last_user_text(messages: list[Any]) -> str:
    for message in reversed(messages):
        if isinstance(message, dict) and message.get("role") == "user":
            return _text_of(message.get("content"))
    return ""


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # content parts: [{"type": "text", "text": ...}, ...]
        return " ".join(
            str(part.get("text", "")) for part in content if isinstance(part, dict)
        ).strip()
    return ""


def _example_of(schema: Any, defs: Mapping[str, Any] | None = None) -> Any:
    """A small value that fits a JSON schema (the common keywords; `{}` when unsure)."""
    if not isinstance(schema, Mapping):
        return {}
    defs = (
        defs if defs is not None else {**schema.get("$defs", {}), **schema.get("definitions", {})}
    )
    ref = schema.get("$ref")
    if isinstance(ref, str):
        return _example_of(defs.get(ref.rsplit("/", 1)[-1], {}), defs)
    if "const" in schema:
        return schema["const"]
    if schema.get("enum"):
        return schema["enum"][0]
    if "default" in schema:
        return schema["default"]
    for key in ("anyOf", "oneOf", "allOf"):
        options = schema.get(key)
        if options:
            return _example_of(options[0], defs)
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "null")
    if kind == "object" or "properties" in schema:
        properties = schema.get("properties") or {}
        return {name: _example_of(sub, defs) for name, sub in properties.items()}
    if kind == "array":
        count = int(schema.get("minItems") or 0)
        return [_example_of(schema.get("items") or {}, defs) for _ in range(count)]
    if kind == "string":
        return "x" * int(schema.get("minLength") or 1) if schema.get("minLength") else "example"
    if kind == "integer":
        return int(schema.get("minimum") or 0)
    if kind == "number":
        return float(schema.get("minimum") or 0)
    if kind == "boolean":
        return True
    if kind == "null":
        return None
    return {}


# -- tokens and usage ----------------------------------------------------------------------


def _count_words(text: str) -> int:
    return len(text.split())


def _prompt_words(body: dict[str, Any]) -> int:
    total = 0
    for message in body.get("messages") or ():
        if isinstance(message, dict):
            total += _count_words(_text_of(message.get("content"))) + 1  # +1: the role
    return max(total, 1)


def _pieces(text: str) -> list[str]:
    """`text` in word-sized pieces, each word with the space before it (as tokenizers cut)."""
    if not text:
        return []
    pieces: list[str] = []
    for i, word in enumerate(text.split(" ")):
        pieces.append(word if i == 0 else " " + word)
    return [p for p in pieces if p]


def _split(text: str, parts: int) -> list[str]:
    if not text:
        return []
    size = max(1, -(-len(text) // parts))
    return [text[i : i + size] for i in range(0, len(text), size)]


def _made_up_logprobs(content: str) -> list[tuple[str, float]]:
    # Deterministic, and different per position, so tests can tell the tokens apart.
    return [(piece, -0.1 * (i % 5 + 1)) for i, piece in enumerate(_pieces(content))]


def _logprob_entry(token: str, logprob: float, top: int) -> dict[str, Any]:
    alternatives = [{"token": token, "bytes": list(token.encode()), "logprob": logprob}]
    for rank in range(1, top):
        alt = f"{token.strip() or token}~{rank}"
        alternatives.append({"token": alt, "bytes": list(alt.encode()), "logprob": logprob - rank})
    return {
        "token": token,
        "bytes": list(token.encode()),
        "logprob": logprob,
        "top_logprobs": alternatives[:top],
    }


# -- errors --------------------------------------------------------------------------------


def _phrase(status: int) -> str:
    try:
        return HTTPStatus(status).phrase
    except ValueError:
        return "Error"


def _error_body(
    status: int, message: str, *, param: str | None = None, code: str | None = None
) -> dict[str, Any]:
    kind, default_code = _ERROR_TYPES.get(
        status, ("server_error" if status >= 500 else "invalid_request_error", None)
    )
    return {
        "error": {"message": message, "type": kind, "param": param, "code": code or default_code}
    }


def _error(
    status: int, message: str, *, param: str | None = None, code: str | None = None
) -> HTTPResponse:
    return HTTPResponse.json(_error_body(status, message, param=param, code=code), status=status)


def main(argv: list[str] | None = None) -> None:
    """Serve until stdin closes, printing the base URL first (used by the benchmarks)."""
    import argparse

    parser = argparse.ArgumentParser(description="Serve a FakeOpenAIServer on 127.0.0.1.")
    parser.add_argument("--latency", type=float, default=0.0, help="seconds per response")
    args = parser.parse_args(argv)
    serve_until_stdin_closes(FakeOpenAIServer(latency=args.latency))


if __name__ == "__main__":  # pragma: no cover
    main()
