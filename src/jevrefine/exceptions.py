"""One exception tree, rooted at `JevrefineError`.

```
JevrefineError
├── UserError (also a ValueError)       a usage mistake: bad option, bad input, wrong type
│   ├── ConfigError                      a bad CLI config file or flag (`jevrefine.cli`)
│   ├── CaseFileError                    a bad eval case file (`jevrefine.evals.load_cases`)
│   ├── ReportFileError                  a file `jevrefine compare` cannot read as a report
│   ├── DifferentCasesError              two reports of different case files, compared
│   ├── DatabaseFileError                a path that cannot hold a SQLite database
│   └── JudgeUsageError                  the Jev side's (also a JudgeError)
├── StreamingNotSupportedError           an advisor or model in the chain cannot stream
│   (also a NotImplementedError)
├── ModelError                           the model side failed
│   ├── ModelHTTPError                   the provider answered with an error status
│   │   └── ContextOverflowError         the prompt plus max_tokens exceed the context window
│   ├── ModelConnectionError             no answer: refused, reset, DNS, TLS
│   │   ├── ModelTimeoutError            no answer in time
│   │   └── IncompleteResponseError      a stream that broke off or ended mid-answer
│   ├── ModelResponseError               an answer that does not read: not HTTP/1.1, not JSON,
│   │                                    a value of the wrong type (never retried)
│   ├── ResponseTooLargeError            a body past max_response_bytes (the Jev side's
│   │                                    JudgeResponseTooLargeError is one too)
│   ├── EmptyResponseError               the model answered with nothing usable
│   └── StructuredOutputError            the answer does not fit the requested type
├── RateLimitTimeoutError                a call's turn under a rate limit would come after its
│   (also a TimeoutError)                deadline (`jevrefine.rate_limit`)
├── ToolError                            a tool call gave no result (the loop reports it)
│   ├── ToolArgumentsError               arguments that are not JSON or do not fit the tool
│   ├── ToolTimeoutError                 the tool did not finish in time
│   ├── TooManyToolCallsError            more calls in one turn than a turn may run
│   └── UnknownToolError                 a tool the request does not carry
├── ToolRoundsExceededError              tools still asked for after `max_rounds` rounds
├── SelfRefineFailedError                attempts ran out (`fail_on_exhausted_attempts`)
├── LocalModelUnavailableError           the local model or its server cannot be had
│   └── ModelChecksumError               a model file that is not the pinned one
├── ClientDisconnectedError              a web client left before the answer (integrations)
├── CheckWorkerError                     an eval check's worker process failed
└── JudgeError                           the Jev side: its own tree, in jevrefine/jev/errors.py
```

Every error class of the package is drawn, whichever module defines it (a test holds the drawing
to the classes); the Jev side's, below `jevrefine.jev.JudgeError`, in `jevrefine/jev/errors.py`.

Vendor errors are translated once, at the adapter boundary (`raise ModelHTTPError(...) from exc`),
so callers never import a vendor's exception types. `is_transient` says whether trying again later
may help: true for connection errors, timeouts, 408, 429 and 5xx, on the judge side and the model
side alike. Messages never contain API keys.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = [
    "ContextOverflowError",
    "EmptyResponseError",
    "IncompleteResponseError",
    "JevrefineError",
    "ModelConnectionError",
    "ModelError",
    "ModelHTTPError",
    "ModelResponseError",
    "ModelTimeoutError",
    "ResponseTooLargeError",
    "StreamingNotSupportedError",
    "StructuredOutputError",
    "UserError",
    "http_error",
    "is_transient_status",
]


def is_transient_status(status_code: int) -> bool:
    """Whether an HTTP status is worth retrying later: 408, 429 and every 5xx."""
    return status_code in (408, 429) or 500 <= status_code <= 599


class JevrefineError(Exception):
    """The root of every error jevrefine raises."""

    @property
    def is_transient(self) -> bool:
        """Whether the same call may succeed later (an outage, not a mistake)."""
        return False


class UserError(JevrefineError, ValueError):
    """A usage mistake by the application: the message says what to pass instead."""


class StreamingNotSupportedError(JevrefineError, NotImplementedError):
    """Something in the chain needs the whole answer, so the call cannot stream.

    Raised when the stream is first iterated; `component` names the advisor or model.
    """

    def __init__(self, component: str, reason: str | None = None) -> None:
        self.component = component
        """The name of the advisor or model that cannot stream."""
        detail = f": {reason}" if reason else ""
        super().__init__(
            f"{component} cannot stream{detail}. Use call()/content() instead of stream(), "
            f"or leave {component} out of streaming requests."
        )


class ModelError(JevrefineError):
    """The model side failed."""

    def __init__(self, message: str, *, model_name: str | None = None) -> None:
        super().__init__(message)
        self.model_name = model_name
        """The model that was asked, when known."""


class ModelResponseError(ModelError):
    """The provider's answer does not read.

    Bytes that are no HTTP/1.1, a body that is not the JSON it claims to be, or values of the
    wrong type or range. Not transient: asking again brings the same answer back (and is billed
    again), so it is never retried.
    """


class ResponseTooLargeError(ModelError):
    """A response body was larger than `max_response_bytes`; the read stopped there.

    The one error for the one cap (`jevrefine._http._limits.DEFAULT_MAX_RESPONSE_BYTES`, 32 MiB
    unless the model is given another), on the model side and the Jev side alike: the Jev client
    raises `JudgeResponseTooLargeError`, which is both this and a `JudgeResponseError`. Not
    transient: asking again brings the same body back.
    """

    def __init__(
        self, message: str, *, limit: int | None = None, model_name: str | None = None
    ) -> None:
        super().__init__(message, model_name=model_name)
        self.limit = limit
        """The cap, in bytes, that the body went past."""


class ModelHTTPError(ModelError):
    """The provider answered with an error status."""

    # What to do about it, when a subclass knows; else the message gets a hint picked by status.
    _hint: str | None = None

    def __init__(
        self,
        status_code: int,
        body: Any = None,
        retry_after: float | None = None,
        *,
        model_name: str | None = None,
        message: str | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        self.status_code = status_code
        """The HTTP status code."""
        self.body = body
        """The decoded error body (JSON object or text), as the provider sent it."""
        self.retry_after = retry_after
        """Seconds the provider asked us to wait before retrying, when it said."""
        self.headers = dict(headers or {})
        """The response headers (authorization headers are never kept here)."""
        text = message or _summarise_body(body)
        where = f" from {model_name}" if model_name else ""
        hint = self._hint if self._hint is not None else _STATUS_HINTS.get(status_code, "")
        super().__init__(f"HTTP {status_code}{where}: {text}{hint}".rstrip(), model_name=model_name)

    @property
    def is_transient(self) -> bool:
        """True for 408, 429 and 5xx."""
        return is_transient_status(self.status_code)


_STATUS_HINTS = {
    401: " (check the API key: the provider rejected it)",
    403: " (the API key lacks permission for this model or endpoint)",
    404: " (check the model name and the base_url)",
    429: " (rate limited: retry later, or lower the concurrency)",
}


def _summarise_body(body: Any) -> str:
    if isinstance(body, Mapping):
        error = body.get("error", body)
        if isinstance(error, Mapping):
            message = error.get("message") or error.get("detail")
            if message:
                return str(message)[:500]
        elif isinstance(error, str):
            return error[:500]
    if body is None or body == "":
        return "no error body"
    return str(body)[:500]


class ContextOverflowError(ModelHTTPError):
    """The request does not fit the model's context window: the prompt plus `max_tokens`.

    Raised for the 400 answers that say so (llama.cpp's "exceeds the available context size",
    OpenAI's `context_length_exceeded`). The message says what to lower. Not transient: the
    same request fails the same way.
    """

    _hint = (
        " (the prompt and the answer do not fit the model's context window: lower max_tokens "
        "(--max-tokens), shorten the prompt or the system message, or use a model with a larger "
        "context)"
    )


# Lower-cased phrases of the servers' context-overflow answers (llama.cpp, OpenAI, vLLM).
_OVERFLOW_MARKERS = (
    "exceeds the available context size",
    "context_length_exceeded",
    "maximum context length",
)


def http_error(
    status_code: int,
    body: Any = None,
    retry_after: float | None = None,
    *,
    model_name: str | None = None,
    headers: Mapping[str, str] | None = None,
) -> ModelHTTPError:
    """The typed error of an error status (adapters call this rather than a constructor).

    `ContextOverflowError` when a 400 says the request exceeds the context window, else
    `ModelHTTPError`.
    """
    if status_code == 400 and any(m in str(body).lower() for m in _OVERFLOW_MARKERS):
        return ContextOverflowError(
            status_code, body, retry_after, model_name=model_name, headers=headers
        )
    return ModelHTTPError(status_code, body, retry_after, model_name=model_name, headers=headers)


class ModelConnectionError(ModelError):
    """The provider could not be reached, or the connection broke before an answer."""

    @property
    def is_transient(self) -> bool:
        """Always true: the network may come back."""
        return True


class ModelTimeoutError(ModelConnectionError):
    """The provider did not answer in time."""


class IncompleteResponseError(ModelConnectionError):
    """A stream ended before the answer did: it broke off, or closed without saying it was done.

    The text already streamed is not the whole answer and must not pass for it. Transient (a
    `ModelConnectionError`): the usual cause is a connection cut on the way, and asking again
    may get the whole answer.
    """


class EmptyResponseError(ModelError):
    """The model answered with nothing usable (no generation at all)."""


class StructuredOutputError(ModelError):
    """The answer could not be read as the requested type.

    `raw_text` holds the model's text untouched, so nothing is lost.
    """

    def __init__(self, message: str, *, raw_text: str, target: str, model_name: str | None = None):
        self.raw_text = raw_text
        """The model's answer, exactly as it came back."""
        self.target = target
        """The name of the type the answer was meant to fit."""
        super().__init__(message, model_name=model_name)
