"""The errors of the Jev side: one tree under `JudgeError`.

```
JudgeError (a JevrefineError)
├── JudgeUsageError (also a UserError)     bad questions, bad state, no API key: fix the call
├── JudgeAPIError                          the API answered with an error status
│   ├── JudgeBadRequestError               400: unknown model, too many choices or levels, ...
│   ├── JudgeAuthenticationError           401: the API key was rejected
│   ├── JudgePermissionDeniedError         403: no API key, or not allowed
│   ├── JudgeNotFoundError                 404: a path that is not routed (check base_url)
│   ├── JudgeRequestTimeoutError           408: the server gave up waiting (retried)
│   ├── JudgeRequestTooLargeError          413: the request is over a size limit
│   ├── JudgeValidationError               422: the body failed validation; `.errors` lists why
│   ├── JudgeRateLimitError                429: rate limited; `.retry_after` in seconds (retried)
│   └── JudgeServerError                   5xx: the service failed (retried)
│       └── JudgeOverloadedError           529: the service is overloaded (retried)
├── JudgeConnectionError                   no answer: refused, reset, DNS, TLS (retried)
│   └── JudgeTimeoutError                  no answer in time (retried within the budget)
├── JudgeResponseError                     a 2xx answer whose body is not what the API promises
│   └── JudgeResponseTooLargeError         the body is over the cap (also a ResponseTooLargeError)
└── AnswerNotFoundError (also a LookupError)  a response has no answer of that name and type
```

`is_transient` is true for connection errors, timeouts, 408, 429 and 5xx, the failures the client
itself retries. Messages and reprs never contain the API key: they are built from the status, the
server's error body and the request id only, never from request headers.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ..exceptions import JevrefineError, ResponseTooLargeError, UserError, is_transient_status

__all__ = [
    "AnswerNotFoundError",
    "JudgeAPIError",
    "JudgeAuthenticationError",
    "JudgeBadRequestError",
    "JudgeConnectionError",
    "JudgeError",
    "JudgeNotFoundError",
    "JudgeOverloadedError",
    "JudgePermissionDeniedError",
    "JudgeRateLimitError",
    "JudgeRequestTimeoutError",
    "JudgeRequestTooLargeError",
    "JudgeResponseError",
    "JudgeResponseTooLargeError",
    "JudgeServerError",
    "JudgeTimeoutError",
    "JudgeUsageError",
    "JudgeValidationError",
    "api_error",
]

_MAX_MESSAGE = 500


class JudgeError(JevrefineError):
    """The root of every error of the Jev side (client, questions, responses)."""


class JudgeUsageError(JudgeError, UserError):
    """A mistake in the call itself (questions, state, configuration); the message names it."""


class JudgeAPIError(JudgeError):
    """The Jev API answered with an error status.

    The subclass says which status; `message` is the server's explanation, taken from whichever
    of the API's three `detail` shapes it sent (an object, a string or a validation list).
    """

    def __init__(
        self,
        status_code: int,
        body: Any = None,
        request_id: str | None = None,
        error_type: str | None = None,
        message: str | None = None,
        *,
        endpoint: str | None = None,
        retry_after: float | None = None,
    ) -> None:
        self.status_code = status_code
        """The HTTP status code."""
        self.body = body
        """The decoded error body (a JSON value, or the text when it is not JSON)."""
        self.request_id = request_id
        """The `x-typesafe-request-id` response header, when the server sent one."""
        self.error_type = error_type if error_type is not None else _error_type_of(body)
        """The API's `error_type` (`api_usage_error`, `max_tokens_exceeded`, ...), if any."""
        self.message = message if message is not None else message_of(body)
        """The server's explanation, or a short description of the status when it gave none."""
        self.endpoint = endpoint
        """`METHOD url` of the failed request (never with credentials)."""
        self.retry_after = retry_after
        """Seconds the server asked us to wait before trying again, when it said."""
        super().__init__(self._render())

    def _render(self) -> str:
        where = f"{self.endpoint}: " if self.endpoint else ""
        kind = f" [{self.error_type}]" if self.error_type else ""
        rid = f" (request_id={self.request_id})" if self.request_id else ""
        hint = _HINTS.get(self.status_code, "")
        return f"{where}HTTP {self.status_code}{kind} {self.message}{rid}{hint}"

    def __reduce__(self) -> tuple[Any, ...]:
        return (
            _rebuild_api_error,
            (
                type(self),
                self.status_code,
                self.body,
                self.request_id,
                self.error_type,
                self.message,
                self.endpoint,
                self.retry_after,
            ),
        )

    @property
    def is_transient(self) -> bool:
        """True for 408, 429 and 5xx."""
        return is_transient_status(self.status_code)


def _rebuild_api_error(
    cls: type[JudgeAPIError],
    status_code: int,
    body: Any,
    request_id: str | None,
    error_type: str | None,
    message: str | None,
    endpoint: str | None,
    retry_after: float | None,
) -> JudgeAPIError:
    return cls(
        status_code,
        body,
        request_id,
        error_type,
        message,
        endpoint=endpoint,
        retry_after=retry_after,
    )


_HINTS = {
    401: " (the API key was rejected: check TYPESAFE_API_KEY)",
    403: " (send an API key: pass api_key= or set TYPESAFE_API_KEY)",
    404: " (check base_url: it is the API root, without /v1)",
    413: " (make the state or the questions smaller, or split them over several calls)",
    429: " (rate limited: lower the concurrency or retry later)",
}


class JudgeBadRequestError(JudgeAPIError):
    """400: the API refused the request (unknown model, too many choices or levels, ...)."""


class JudgeAuthenticationError(JudgeAPIError):
    """401: the API key was rejected."""


class JudgePermissionDeniedError(JudgeAPIError):
    """403: no API key was sent, or the key may not do this."""


class JudgeNotFoundError(JudgeAPIError):
    """404: the path is not routed; usually a wrong `base_url`."""


class JudgeRequestTimeoutError(JudgeAPIError):
    """408: the server gave up waiting for the request (retried)."""


class JudgeRequestTooLargeError(JudgeAPIError):
    """413: the request is over a size limit."""


class JudgeValidationError(JudgeAPIError):
    """422: the request body failed validation; `errors` holds the API's list of problems."""

    @property
    def errors(self) -> list[dict[str, Any]]:
        """The validation errors (`type`, `loc`, `msg`, ...) as the API listed them."""
        detail = self.body.get("detail") if isinstance(self.body, Mapping) else None
        if isinstance(detail, list):
            return [dict(e) for e in detail if isinstance(e, Mapping)]
        return []


class JudgeRateLimitError(JudgeAPIError):
    """429: rate limited; `retry_after` says how long the server asked us to wait."""


class JudgeServerError(JudgeAPIError):
    """5xx: the service failed (retried)."""


class JudgeOverloadedError(JudgeServerError):
    """529: the service is overloaded; back off (retried)."""


class JudgeConnectionError(JudgeError):
    """The API could not be reached, or the connection broke before an answer."""

    @property
    def is_transient(self) -> bool:
        """Always true: the network may come back."""
        return True


class JudgeTimeoutError(JudgeConnectionError):
    """No answer in time.

    One HTTP operation took longer than `timeout`, or the whole call (retries and waits included)
    would have taken longer than `total_timeout`.
    """


class JudgeResponseError(JudgeError):
    """A successful status whose body is not a valid System One answer.

    `field_path` names the first offending field (`answers.tone.probabilities`), `body` holds what
    came back.
    """

    def __init__(
        self,
        message: str,
        *,
        field_path: str = "",
        body: Any = None,
        request_id: str | None = None,
    ) -> None:
        self.field_path = field_path
        """Dotted path of the first offending field; empty for the body as a whole."""
        self.body = body
        """The decoded body (or its text when it is not JSON)."""
        self.request_id = request_id
        """The `x-typesafe-request-id` response header, when sent."""
        rid = f" (request_id={request_id})" if request_id else ""
        super().__init__(f"{message}{rid}")

    def __reduce__(self) -> tuple[Any, ...]:
        return (_rebuild_response_error, (str(self), self.field_path, self.body))


def _rebuild_response_error(message: str, field_path: str, body: Any) -> JudgeResponseError:
    return JudgeResponseError(message, field_path=field_path, body=body)


class JudgeResponseTooLargeError(JudgeResponseError, ResponseTooLargeError):
    """The answer's body is longer than the response-size cap; the read stopped there.

    Both a `JudgeResponseError` (code that handles unreadable Jev answers sees it) and the
    package's one `ResponseTooLargeError` (code that handles the cap on either side sees it);
    `limit` is the cap in bytes. Not transient and never retried: the server would send the
    same body again.
    """

    def __init__(self, message: str, *, limit: int, request_id: str | None = None) -> None:
        super().__init__(message, request_id=request_id)
        self.limit = limit

    def __reduce__(self) -> tuple[Any, ...]:
        return (_rebuild_too_large, (str(self), self.limit))


def _rebuild_too_large(message: str, limit: int) -> JudgeResponseTooLargeError:
    return JudgeResponseTooLargeError(message, limit=limit)


class AnswerNotFoundError(JudgeError, LookupError):
    """A response holds no answer of that name and type; the message lists the ones it has."""


_STATUS_ERRORS: dict[int, type[JudgeAPIError]] = {
    400: JudgeBadRequestError,
    401: JudgeAuthenticationError,
    403: JudgePermissionDeniedError,
    404: JudgeNotFoundError,
    408: JudgeRequestTimeoutError,
    413: JudgeRequestTooLargeError,
    422: JudgeValidationError,
    429: JudgeRateLimitError,
    529: JudgeOverloadedError,
}


def api_error(
    status_code: int,
    body: Any,
    *,
    request_id: str | None = None,
    endpoint: str | None = None,
    retry_after: float | None = None,
) -> JudgeAPIError:
    """The `JudgeAPIError` subclass for a status, built from the error body the API sent."""
    cls = _STATUS_ERRORS.get(status_code)
    if cls is None:
        cls = JudgeServerError if status_code >= 500 else JudgeAPIError
    return cls(status_code, body, request_id, endpoint=endpoint, retry_after=retry_after)


def _error_type_of(body: Any) -> str | None:
    if not isinstance(body, Mapping):
        return None
    for container in (body.get("detail"), body.get("error"), body):
        if isinstance(container, Mapping):
            value = container.get("error_type")
            if isinstance(value, str) and value:
                return value
    # OpenAI-style servers (llama.cpp's System One endpoint among them) say {"error": {"type"}}.
    error = body.get("error")
    if isinstance(error, Mapping) and isinstance(error.get("type"), str) and error["type"]:
        return str(error["type"])
    return None


def message_of(body: Any) -> str:
    """The server's explanation in an error body, for every shape the API and its peers send.

    Tried in order: `error` (a string or an object with `message`), `message`, `detail` as a string,
    as an object with `message` (or only an `error_type`, as `max_tokens_exceeded` comes), and as
    FastAPI's validation list, rendered `questions.q.criteria: Field required; ...`.
    """
    if isinstance(body, str):
        return _clip(body) if body.strip() else "no error body"
    if not isinstance(body, Mapping):
        return "no error body" if body is None else _clip(str(body))
    error, message, detail = body.get("error"), body.get("message"), body.get("detail")
    if isinstance(error, str) and error:
        return _clip(error)
    if isinstance(error, Mapping) and isinstance(error.get("message"), str):
        return _clip(error["message"])
    if isinstance(message, str) and message:
        return _clip(message)
    if isinstance(detail, str):
        return _clip(detail) if detail else "no error message"
    if isinstance(detail, Mapping):
        text = detail.get("message")
        if isinstance(text, str) and text:
            return _clip(text)
        error_type = detail.get("error_type")
        if error_type == "max_tokens_exceeded":
            return (
                "the request is longer than the model's context (64k tokens for the state and "
                "all questions, 32k for the state and the longest question)"
            )
        return _clip(str(dict(detail)))
    if isinstance(detail, Sequence):
        rendered = [_render_validation_entry(e) for e in detail]
        return _clip("; ".join(r for r in rendered if r)) or "invalid request body"
    return _clip(str(dict(body)))


def _render_validation_entry(entry: Any) -> str:
    if not isinstance(entry, Mapping):
        return str(entry)
    msg = entry.get("msg")
    loc = entry.get("loc")
    path = ""
    if isinstance(loc, Sequence) and not isinstance(loc, str):
        path = ".".join(str(part) for part in loc if part != "body")
    text = msg if isinstance(msg, str) else str(dict(entry))
    return f"{path}: {text}" if path else text


def _clip(text: str) -> str:
    return text if len(text) <= _MAX_MESSAGE else text[: _MAX_MESSAGE - 1] + "…"
