"""`FakeJevServer`: a real HTTP server on 127.0.0.1 speaking the Jev System One API.

```python
from jevrefine.jev import JudgeClient, Noul
from jevrefine.testing import FakeJevServer

async with FakeJevServer(lambda state, questions: {"is_grounded": 0.9}) as server:
    async with JudgeClient("test-key", base_url=server.base_url) as client:
        response = await client.system_one("text", {"is_grounded": Noul("Grounded?")})
    assert response.noul("is_grounded").noul == 0.9
    server.fail(529, times=2)          # the next two requests answer 529 "Overloaded"
    server.drop_connections()          # the next request's connection is reset
    server.malformed()                 # the next request gets 200 with a body that is not JSON
    server.delay(2.0)                  # the next response waits 2 s
    server.requests[-1].json           # what the client sent
```

It implements `POST /v1/systemone` and `GET /v1/models` with the shapes, status codes and error
bodies of the API: 422 with FastAPI's validation list for a malformed body (a number as state, a
one-level score, a missing field, an unknown top-level field), 400 for an unknown model, an unknown
question type, more than 255 options, more than 10 levels, an empty choice or a request over the
context (`max_tokens_exceeded`), 404 for other paths. zstd request bodies are read when Python has
a zstd codec (3.14, or `backports.zstd`).
With `api_key=` set, a request without a key gets 403 and a wrong key 401.

Answers come from `answer(state, questions)` (sync or async), which returns, per question id, a
simple value (noul: P(yes); choice: a label; score: the expected level as a float) or a whole wire
answer dict, sent as it is. Questions it leaves out get the default: a deterministic value derived
from a hash of the state and the question. Run it alone with
`python -m jevrefine.testing._jev_server` (prints its URL, serves until interrupted).
"""

from __future__ import annotations

import hashlib
import importlib
import inspect
import itertools
import json
import math
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Final, TypeAlias

from ._http import (
    HTTPRequest,
    HTTPResponse,
    LoopbackHTTPServer,
    StreamingHTTPResponse,
    serve_until_stdin_closes,
)

__all__ = ["DEFAULT_MODELS", "MAX_CONTEXT_TOKENS", "AnswerFunction", "FakeJevServer"]

AnswerFunction: TypeAlias = Callable[
    [Any, dict[str, Any]], Mapping[str, Any] | Awaitable[Mapping[str, Any]]
]
"""`(state, questions) -> {question id: value or wire answer}`, sync or async; `questions` are
the wire dicts the client sent."""

DEFAULT_MODELS: Final[Mapping[str, str]] = {
    "jev-latest": "jev-1.13.0",
    "jev-preview": "jev-1.13.0",
    "jev-1.13.0": "jev-1.13.0",
    "jev-1.14.0": "jev-1.14.0",
}
"""Model names the fake accepts -> the versioned id it answers with."""

_LISTED: Final = (
    {
        "name": "jev-latest",
        "description": "The latest stable Jev model.",
        "release_date": "2026-09-15",
    },
    {"name": "jev-preview", "description": "The newest Jev model.", "release_date": "2026-09-15"},
)
MAX_CONTEXT_TOKENS: Final = 64_000
"""Requests estimated (4 characters a token) above this get 400 `max_tokens_exceeded`."""
_BOX_MODELS: Final = frozenset({"jev-1.14.0"})
_TOP_LEVEL: Final = frozenset({"model", "state", "questions", "assets"})


def _usage_error(message: str) -> dict[str, Any]:
    return {"detail": {"error_type": "api_usage_error", "message": message}}


def _missing(*loc: str | int) -> dict[str, Any]:
    return {"type": "missing", "loc": ["body", *loc], "msg": "Field required"}


class _Reject(Exception):
    def __init__(self, status: int, body: Any) -> None:
        self.status = status
        self.body = body


class FakeJevServer(LoopbackHTTPServer):
    """A scripted Jev API on a free loopback port, with fault injection; for tests.

    Args:
        answer: `(state, questions) -> {id: value or wire answer}`, sync or async; `None` for
            the deterministic default everywhere.
        latency: Seconds every response waits.
        api_key: When set, requests must carry `Authorization: Bearer <api_key>` (403 without a
            key, 401 with another one). When `None`, any key or none is accepted.
        models: Accepted model names -> the versioned id answered (default `DEFAULT_MODELS`).
    """

    def __init__(
        self,
        answer: AnswerFunction | None = None,
        *,
        latency: float = 0.0,
        api_key: str | None = None,
        models: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(latency=latency)
        self.answer = answer
        """The answer function (may be replaced between calls)."""
        self.api_key = api_key
        """The key requests must carry, or `None` to accept any."""
        self.models = dict(DEFAULT_MODELS if models is None else models)
        """Accepted model names -> the versioned id answered."""
        self._ids = itertools.count(1)

    @property
    def base_url(self) -> str:
        """The API root to give `JudgeClient(base_url=...)`: `http://127.0.0.1:PORT`."""
        return self.url

    def _request_id(self) -> str:
        return f"req_fake_{next(self._ids):08d}"

    def error_headers(self, status: int) -> dict[str, str]:
        """A request id per `fail` call (shared by its `times` answers), as the API sends one."""
        return {"x-typesafe-request-id": self._request_id()}

    def error_body(self, status: int, body: Any) -> Any:
        """The API's error body for an injected status."""
        if status == 400:
            return _usage_error("Invalid request.")
        if status == 401:
            return {"detail": {"error_type": "authentication_error", "message": "Invalid API key."}}
        if status == 403:
            return {"detail": {"error_type": "permission_error", "message": "Not authenticated"}}
        if status == 404:
            return {"detail": "Not Found"}
        if status == 413:
            return {"detail": "Request Entity Too Large"}
        if status == 422:
            return {"detail": [_missing("state")]}
        if status == 429:
            return {"detail": "Rate limit exceeded. Please retry later."}
        if status == 529:
            return {"detail": "Overloaded"}
        return {"detail": "Internal Server Error"}

    async def handle(self, request: HTTPRequest) -> HTTPResponse | StreamingHTTPResponse:
        """Route a request: `POST /v1/systemone`, `GET /v1/models`, else 404/405."""
        headers = {"x-typesafe-request-id": self._request_id()}
        try:
            if request.path == "/v1/systemone":
                if request.method != "POST":
                    raise _Reject(405, {"detail": "Method Not Allowed"})
                self._check_key(request)
                return HTTPResponse.json(await self._system_one(request), headers=headers)
            if request.path == "/v1/models":
                if request.method != "GET":
                    raise _Reject(405, {"detail": "Method Not Allowed"})
                self._check_key(request)
                return HTTPResponse.json({"models": list(_LISTED)}, headers=headers)
            raise _Reject(404, {"detail": "Not Found"})
        except _Reject as reject:
            return HTTPResponse.json(reject.body, status=reject.status, headers=headers)

    def _check_key(self, request: HTTPRequest) -> None:
        if self.api_key is None:
            return
        auth = request.headers.get("authorization", "")
        if not auth:
            raise _Reject(
                403, {"detail": {"error_type": "permission_error", "message": "Not authenticated"}}
            )
        if auth != f"Bearer {self.api_key}":
            raise _Reject(
                401,
                {"detail": {"error_type": "authentication_error", "message": "Invalid API key."}},
            )

    async def _system_one(self, request: HTTPRequest) -> dict[str, Any]:
        raw = request.body
        encoding = request.headers.get("content-encoding", "").strip().lower()
        if encoding == "zstd":  # the official SDK compresses large bodies when it can
            decompress = _zstd_decompress()
            if decompress is None:
                raise _Reject(415, {"detail": "zstd bodies need Python 3.14 or backports.zstd"})
            raw = decompress(raw)
        elif encoding not in ("", "identity"):
            raise _Reject(415, {"detail": f"Unsupported content encoding: {encoding}"})
        try:
            body = json.loads(raw)
        except ValueError:
            raise _Reject(
                422,
                {
                    "detail": [
                        {"type": "json_invalid", "loc": ["body", 0], "msg": "JSON decode error"}
                    ]
                },
            ) from None
        if not isinstance(body, dict):
            raise _Reject(
                422,
                {
                    "detail": [
                        {
                            "type": "model_attributes_type",
                            "loc": ["body"],
                            "msg": "Input should be a valid dictionary or object",
                            "input": body,
                        }
                    ]
                },
            )
        errors: list[dict[str, Any]] = []
        for name in ("model", "state", "questions"):
            if name not in body:
                errors.append(_missing(name))
        for name in body:
            if name not in _TOP_LEVEL:
                errors.append(
                    {
                        "type": "extra_forbidden",
                        "loc": ["body", name],
                        "msg": "Extra inputs are not permitted",
                        "input": body[name],
                    }
                )
        state = body.get("state")
        if "state" in body and not isinstance(state, str | dict | list):
            errors.append(
                {
                    "type": "string_type",
                    "loc": ["body", "state"],
                    "msg": "Input should be a valid string",
                    "input": state,
                }
            )
        questions = body.get("questions")
        if "questions" in body:
            if not isinstance(questions, dict):
                errors.append(
                    {
                        "type": "dict_type",
                        "loc": ["body", "questions"],
                        "msg": "Input should be a valid dictionary",
                        "input": questions,
                    }
                )
            elif not questions:
                errors.append(
                    {
                        "type": "too_short",
                        "loc": ["body", "questions"],
                        "msg": "Dictionary should have at least 1 item after validation, not 0",
                        "input": questions,
                        "ctx": {"field_type": "Dictionary", "min_length": 1, "actual_length": 0},
                    }
                )
            else:
                for qid, question in questions.items():
                    errors.extend(_question_errors(qid, question))
        if errors:
            raise _Reject(422, {"detail": errors})
        model = body["model"]
        if not isinstance(model, str) or model not in self.models:
            raise _Reject(400, _usage_error(f"Unknown model: {model}"))
        answered_by = self.models[model]
        if len(raw) // 4 > MAX_CONTEXT_TOKENS:
            # The API's oversize answer carries only the error type, no message.
            raise _Reject(400, {"detail": {"error_type": "max_tokens_exceeded"}})
        assert isinstance(questions, dict)  # checked above: errors would have been raised
        for qid, question in questions.items():
            _check_limits(qid, question, model)
        scripted: Mapping[str, Any] = {}
        if self.answer is not None:
            result = self.answer(state, questions)
            scripted = await result if inspect.isawaitable(result) else result
        answers = {
            qid: _wire_answer(qid, q, scripted[qid] if qid in scripted else _default(state, qid, q))
            for qid, q in questions.items()
        }
        tokens = len(raw) // 4 + 8 * len(questions)
        return {
            "model": answered_by,
            "answers": answers,
            "usage": {"input_tokens": tokens, "output_tokens": 6 * len(questions)},
        }


def _question_errors(qid: str, question: Any) -> list[dict[str, Any]]:
    loc = ("questions", qid)
    if not isinstance(question, dict):
        return [
            {
                "type": "model_attributes_type",
                "loc": ["body", *loc],
                "msg": "Input should be a valid dictionary or object",
                "input": question,
            }
        ]
    kind = question.get("type")
    errors: list[dict[str, Any]] = []
    if kind is None:
        errors.append(_missing(*loc, "type"))
    if kind in ("choice", "score") and "criteria" not in question:
        errors.append(_missing(*loc, kind, "criteria"))
    if (
        kind == "score"
        and isinstance(question.get("criteria"), list)
        and len(question["criteria"]) < 2
    ):
        errors.append(
            {
                "type": "too_short",
                "loc": ["body", *loc, "score", "criteria"],
                "msg": "Score question must have at least 2 levels",
                "input": question["criteria"],
            }
        )
    if kind == "noul" and question.get("instructions") is None:
        sides = question.get("criteria") or {}
        if not (isinstance(sides, dict) and any(v is not None for v in sides.values())):
            errors.append(_missing(*loc, "noul", "instructions"))
    return errors


def _check_limits(qid: str, question: dict[str, Any], model: str) -> None:
    kind = question.get("type")
    if kind == "choice":
        criteria = question.get("criteria")
        if not isinstance(criteria, dict) or not criteria:
            raise _Reject(
                400, _usage_error(f"Choice question must have at least one choice: {qid}")
            )
        if len(criteria) > 255:
            raise _Reject(400, _usage_error("Too many choices. Must have at most 255 choices."))
    elif kind == "score":
        if len(question["criteria"]) > 10:
            raise _Reject(400, _usage_error("Too many score levels. Must have at most 10 levels."))
    elif kind == "box":
        if model not in _BOX_MODELS:
            raise _Reject(400, _usage_error(f"Box questions are not supported by {model}."))
    elif kind != "noul":
        raise _Reject(400, {"detail": "Invalid request."})


def _zstd_decompress() -> Callable[[bytes], bytes] | None:
    for name in ("compression.zstd", "backports.zstd"):
        try:
            module = importlib.import_module(name)
        except ImportError:
            continue
        function: Callable[[bytes], bytes] = module.decompress
        return function
    return None


def _hash01(state: Any, qid: str, question: Any) -> float:
    # Deterministic across runs and processes (unlike hash()), so tests can rely on it.
    text = json.dumps([state, qid, question], sort_keys=True, ensure_ascii=False)
    digest = hashlib.blake2b(text.encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") / 2**64


def _default(state: Any, qid: str, question: dict[str, Any]) -> Any:
    h = _hash01(state, qid, question)
    kind = question.get("type")
    if kind == "choice":
        labels = list(question["criteria"])
        return labels[int(h * len(labels)) % len(labels)]
    if kind == "score":
        return round(h * (len(question["criteria"]) - 1), 2)
    if kind == "box":
        return {
            "type": "box",
            "box": {"top": 0.1, "bottom": 0.9, "left": 0.2, "right": 0.8},
            "confidence": None,
        }
    return round(h, 4)


def _confidence(probabilities: list[float]) -> float:
    n = len(probabilities)
    if n < 2:
        return 1.0
    entropy = -sum(p * math.log(p) for p in probabilities if p > 0)
    return round(max(0.0, 1.0 - entropy / math.log(n)), 4)


def _wire_answer(qid: str, question: dict[str, Any], value: Any) -> Any:
    if isinstance(value, Mapping):
        return dict(value)  # a whole wire answer, sent as it is
    kind = question["type"]
    if kind == "noul":
        return {"type": "noul", "noul": float(value)}
    if kind == "choice":
        labels = list(question["criteria"])
        if value not in labels:
            raise ValueError(f"answer for {qid!r}: {value!r} is not one of {labels}")
        # The chosen label takes most of the mass; the rest is shared, so they sum to 1.
        rest = 0.2 / (len(labels) - 1) if len(labels) > 1 else 0.0
        probs = {
            label: (0.8 if len(labels) > 1 else 1.0) if label == value else rest for label in labels
        }
        return {
            "type": "choice",
            "choice": value,
            "confidence": _confidence(list(probs.values())),
            "probabilities": probs,
        }
    if kind == "score":
        levels = question["criteria"]
        top = len(levels) - 1
        score = min(max(float(value), 0.0), float(top))
        low = math.floor(score)
        frac = score - low
        # Two neighbouring levels carry the mass, so Σ level·p is exactly the score.
        mass = [0.0] * len(levels)
        mass[low] = 1.0 - frac
        if frac:
            mass[low + 1] = frac
        return {
            "type": "score",
            "score": score,
            "confidence": _confidence(mass),
            "legend": {str(i): level for i, level in enumerate(levels)},
            "probabilities": {str(i): p for i, p in enumerate(mass)},
        }
    raise ValueError(f"answer for {qid!r}: give a whole wire answer dict for a {kind!r} question")


def main(argv: list[str] | None = None) -> None:
    """Serve until interrupted, printing the URL first (used by the benchmark)."""
    import argparse

    parser = argparse.ArgumentParser(description="Serve a FakeJevServer on 127.0.0.1.")
    parser.add_argument("--latency", type=float, default=0.0, help="seconds per response")
    parser.add_argument("--api-key", default=None, help="require this key")
    args = parser.parse_args(argv)
    serve_until_stdin_closes(FakeJevServer(latency=args.latency, api_key=args.api_key))


if __name__ == "__main__":  # pragma: no cover
    main()
