"""What both web integrations share: the bodies, the OTel context, one refinement."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping

import pydantic
from opentelemetry import context as otel_context
from opentelemetry import propagate

from .._fanout import BatchResult
from .._request import ChatClientResponse
from ..advisors.self_refine import RefineReport
from ..batch import RefineSummary
from ..client import ChatClient
from ..exceptions import JevrefineError, UserError

__all__ = [
    "ClientDisconnectedError",
    "RefineRequest",
    "RefineResponse",
    "error_reply",
    "incoming_context",
    "refine_one",
    "response_body",
]


class ClientDisconnectedError(JevrefineError):
    """The HTTP client went away before the refinement finished; the refinement was cancelled."""


class RefineRequest(pydantic.BaseModel):
    """The body of a refine request."""

    model_config = pydantic.ConfigDict(extra="forbid")

    prompt: str = pydantic.Field(min_length=1)
    """What to ask."""
    system: str | None = None
    """A system message replacing the client's default."""


class RefineResponse(pydantic.BaseModel):
    """The body of a refine response."""

    answer: str
    """The returned answer (the best attempt when none passed)."""
    passed: bool | None
    """Whether the judge passed it; `None` when unjudged."""
    outcome: str | None
    """The refine outcome (`passed`, `best_attempt`, ...), when the client refines."""
    attempts: int
    """How many answers the model gave."""
    tokens: int
    """Model plus judge tokens."""
    chosen: int | None = None
    """Which attempt `answer` is (1 for the first); `None` without refinement."""
    verdict: str | None = None
    """The returned attempt's verdict in one line (`passed=false [...]`); `None` when unjudged.
    With `passed` false it says why even the best attempt fell short."""


@contextlib.contextmanager
def incoming_context(headers: Mapping[str, str]) -> Iterator[None]:
    """Make the request's trace context (W3C `traceparent`, baggage) current inside the block.

    Uses the globally configured propagator, so the refinement's spans join the caller's trace.
    """
    token = otel_context.attach(propagate.extract(dict(headers)))
    try:
        yield
    finally:
        otel_context.detach(token)


async def refine_one(
    client: ChatClient, body: RefineRequest, headers: Mapping[str, str]
) -> RefineResponse:
    """Refine one request's prompt in the request's trace context; errors propagate."""
    spec = client.prompt()
    if body.system is not None:
        spec = spec.system(body.system)
    spec = spec.user(body.prompt)
    with incoming_context(headers):
        response = await spec.call()
    return response_body(response)


def response_body(response: ChatClientResponse) -> RefineResponse:
    """The `RefineResponse` of a refined response (its answer and its report's numbers)."""
    summary = RefineSummary.of(BatchResult(0, response))
    report = RefineReport.of(response)
    verdict = summary.verdict
    return RefineResponse(
        answer=response.content,
        passed=summary.passed,
        outcome=summary.outcome,
        attempts=summary.attempts,
        tokens=summary.tokens,
        chosen=report.chosen if report is not None else None,
        verdict=verdict.summary() if verdict is not None else None,
    )


def error_reply(error: JevrefineError) -> tuple[int, str]:
    """The HTTP status and `"Type: message"` text that answer a failed refinement.

    A `UserError` is the caller's (400); any other jevrefine error is the model's or the judge's
    (502). The text holds the error's type and message, which never hold secrets.
    """
    status = 400 if isinstance(error, UserError) else 502
    return status, f"{type(error).__name__}: {error}"
