"""Refine many prompts at once: `refine_many` (input order) and `refine_iter` (completion order).

```python
results = await jr.refine_many(client, prompts, concurrency=64)
for result in results:
    print(result.index, result.unwrap().content if result.ok else result.error)

async with contextlib.aclosing(jr.refine_iter(client, huge_async_source())) as stream:
    async for result in stream:  # as each finishes, with its input index
        summary = jr.RefineSummary.of(result)
        print(summary.index, summary.passed, summary.attempts, summary.tokens)
```

An input is a prompt text (`client.prompt(text)`) or a `PromptSpec` (called as it is, so it may
carry its own system message, options and advisors). Each input gets one `BatchResult`; a failure
stays in its own slot with its typed error. The refinement itself is whatever the client's advisor
chain does: with a `SelfRefineAdvisor` in it, each response carries a `RefineReport` in its
context, which `RefineSummary` reads (attempts, outcome, verdict, model and judge usage).
"""

from __future__ import annotations

import inspect
from collections.abc import AsyncGenerator, AsyncIterable, Awaitable, Callable, Iterable
from contextlib import aclosing
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeAlias

from . import _validate
from ._fanout import BatchResult, iter_all
from ._request import ChatClientResponse
from .advisors.self_refine import SelfRefineAdvisor
from .client import ChatClient, PromptSpec
from .context_keys import REFINE_REPORT
from .exceptions import UserError
from .judge.rate_limited import RateLimitedJudgeClient, limited_judge
from .messages import Usage
from .models.rate_limited import RateLimitedModel
from .rate_limit import RateLimit, RateLimiter

if TYPE_CHECKING:
    from .advisors.chain import CallAdvisor
    from .jev.protocol import SystemOneClient
    from .judge._judge import Judge
    from .models.base import ChatModel

__all__ = ["DEFAULT_CONCURRENCY", "RefineInput", "RefineSummary", "refine_iter", "refine_many"]

DEFAULT_CONCURRENCY = 16
"""How many refinements run at once when `concurrency` is not given."""

RefineInput: TypeAlias = str | PromptSpec
"""One batch input: a prompt text, or a prompt spec built with `client.prompt()`."""

OnResult: TypeAlias = Callable[[BatchResult[ChatClientResponse]], Awaitable[object] | object]
"""A callback run (and awaited, when it returns an awaitable) on each result as it finishes."""

Limit: TypeAlias = RateLimit | RateLimiter
"""A provider's limits: a `RateLimit` (a limiter for this batch), or a `RateLimiter` to share
its pacing and back-off with other batches."""


async def refine_iter(
    client: ChatClient,
    inputs: Iterable[RefineInput] | AsyncIterable[RefineInput],
    *,
    concurrency: int = DEFAULT_CONCURRENCY,
    fail_fast: bool = False,
    on_result: OnResult | None = None,
    model_limit: Limit | None = None,
    judge_limit: Limit | None = None,
) -> AsyncGenerator[BatchResult[ChatClientResponse], None]:
    """Refine every input, at most `concurrency` at a time; yield results in completion order.

    Each `BatchResult` carries its input's `index`. Memory stays bounded for any number of
    inputs: `inputs` (a list, a generator or an async iterable) is read one item at a time, only
    when a refinement slot is free, and at most about 2 × `concurrency` inputs and results are
    held at once.

    Args:
        client: the client every input goes through (its advisors do the refining).
        inputs: prompt texts or `PromptSpec`s.
        concurrency: the most refinements in flight at once.
        fail_fast: stop at the first failure: cancel what is in flight and raise it. Otherwise
            every failure is yielded in its own slot and the batch goes on.
        on_result: called on each result before it is yielded; an exception it raises stops the
            batch (cancelling what is in flight) and propagates.
        model_limit: the model provider's requests and tokens per minute, shared by every
            model call of the batch; on a 429 the whole batch pauses (honouring `Retry-After`)
            and ramps back (see `jevrefine.rate_limit`).
        judge_limit: the same for the judge's calls (Jev, or a model judge's).

    Leaving the loop early, or cancelling the task iterating it, cancels every refinement in
    flight. Wrap the generator in `contextlib.aclosing(...)` so that an early `break` does this at
    once rather than when the generator is garbage-collected.

    Raises:
        UserError: `client` is not a `ChatClient`, `concurrency` is below 1, or a limit is not
            a `RateLimit` / `RateLimiter`.
    """
    if not isinstance(client, ChatClient):
        raise UserError(
            f"refine_iter needs a ChatClient, got {type(client).__name__}; "
            "pass ChatClient(model, advisors=[SelfRefineAdvisor(judge)])"
        )
    _check_batch_arguments(inputs, concurrency, fail_fast, on_result)
    limits = BatchLimits(
        model=_limiter("model_limit", model_limit, "model"),
        judge=_limiter("judge_limit", judge_limit, "judge"),
    )

    async def refine(item: RefineInput) -> ChatClientResponse:
        return await limits.on_spec(_spec_of(client, item)).call()

    results = iter_all(refine, inputs, concurrency=concurrency, fail_fast=fail_fast)
    async with aclosing(results):
        async for result in results:
            if on_result is not None:
                outcome = on_result(result)
                if inspect.isawaitable(outcome):
                    await outcome
            yield result


async def refine_many(
    client: ChatClient,
    inputs: Iterable[RefineInput] | AsyncIterable[RefineInput],
    *,
    concurrency: int = DEFAULT_CONCURRENCY,
    fail_fast: bool = False,
    on_result: OnResult | None = None,
    model_limit: Limit | None = None,
    judge_limit: Limit | None = None,
) -> list[BatchResult[ChatClientResponse]]:
    """Refine every input, at most `concurrency` at a time; one result per input, in input order.

    Takes the same arguments as `refine_iter` (which see). The inputs are never materialised,
    but the returned list holds every result: for millions of inputs, stream with
    `refine_iter` and write each result out instead.

    Raises:
        UserError: `client` is not a `ChatClient` or `concurrency` is below 1.
        Exception: with `fail_fast=True`, the first failure.
    """
    results: list[BatchResult[ChatClientResponse]] = []
    stream = refine_iter(
        client,
        inputs,
        concurrency=concurrency,
        fail_fast=fail_fast,
        on_result=on_result,
        model_limit=model_limit,
        judge_limit=judge_limit,
    )
    async with aclosing(stream):
        async for result in stream:
            results.append(result)
    # Indexes are 0..n-1 without gaps, so sorting realigns them with the inputs.
    results.sort(key=lambda result: result.index)
    return results


def _check_batch_arguments(
    inputs: object, concurrency: object, fail_fast: object, on_result: object
) -> None:
    # A str is an iterable of characters: refine_many(client, "abc") would make 3 refinements.
    if isinstance(inputs, str | bytes | PromptSpec):
        raise UserError(
            f"inputs={_validate.shown(inputs)} is one {type(inputs).__name__}, not a collection "
            "of inputs: pass a list, e.g. refine_many(client, [text])"
        )
    if not isinstance(inputs, Iterable | AsyncIterable):
        raise UserError(
            f"inputs={_validate.shown(inputs)} is not iterable: pass a list, a generator or an "
            "async iterable of prompt texts or PromptSpecs"
        )
    _validate.integer("concurrency", concurrency, minimum=1, example=DEFAULT_CONCURRENCY)
    _validate.boolean("fail_fast", fail_fast)
    if on_result is not None and not callable(on_result):
        raise UserError(
            f"on_result={_validate.shown(on_result)} is not callable: pass a function that "
            "takes a BatchResult, or None"
        )


@dataclass(slots=True)
class BatchLimits:
    """A batch's limiters, and what they are put around: the model and the judges' clients.

    Through typed wrappers, not ambient state: each client a batch sends prompts through is
    copied with its model in a `RateLimitedModel` and the judge of each `SelfRefineAdvisor` (the
    client's and the prompt's own) on a `RateLimitedJudgeClient`. The user's objects are left as
    they are, so a client used outside the batch is not slowed. With no limiter, everything is
    sent as it is.
    """

    model: RateLimiter | None = None
    """The model provider's limiter, or `None`."""
    judge: RateLimiter | None = None
    """The judge provider's limiter, or `None`."""
    _clients: dict[int, tuple[ChatClient, ChatClient]] = field(default_factory=dict, repr=False)

    def on_model(self, model: ChatModel) -> ChatModel:
        """`model` under the model limiter."""
        return model if self.model is None else RateLimitedModel(model, self.model)

    def on_judge(self, judge: Judge) -> Judge:
        """A copy of `judge` whose judging calls are under the judge limiter."""
        return judge if self.judge is None else limited_judge(judge, self.judge)

    def on_judge_client(self, client: SystemOneClient) -> SystemOneClient:
        """`client` under the judge limiter."""
        return client if self.judge is None else RateLimitedJudgeClient(client, self.judge)

    def on_advisor(self, advisor: CallAdvisor) -> CallAdvisor:
        """A `SelfRefineAdvisor` judging under the judge limiter (a copy); any other as it is."""
        if self.judge is None or not isinstance(advisor, SelfRefineAdvisor):
            return advisor
        return advisor.with_judge(self.on_judge(advisor.judge))

    def on_client(self, client: ChatClient) -> ChatClient:
        """A copy of `client` under the limits, made once per client and batch."""
        if self.model is None and self.judge is None:
            return client
        made = self._clients.get(id(client))
        if made is None or made[0] is not client:
            # The original is kept beside its copy, so its id cannot be reused meanwhile.
            advisors = [self.on_advisor(a) for a in client.advisors]
            made = (client, client.copy(model=self.on_model(client.model), advisors=advisors))
            self._clients[id(client)] = made
        return made[1]

    def on_spec(self, spec: PromptSpec) -> PromptSpec:
        """`spec` sent through its client's copy under the limits, its own advisors too."""
        if self.model is None and self.judge is None:
            return spec
        advisors = [self.on_advisor(a) for a in spec.prompt_advisors]
        return spec.copy(client=self.on_client(spec.client), advisors=advisors)


def _limiter(name: str, limit: object, what: str) -> RateLimiter | None:
    if limit is None or isinstance(limit, RateLimiter):
        return limit
    if isinstance(limit, RateLimit):
        return RateLimiter(limit, name=what)
    raise UserError(
        f"{name}={_validate.shown(limit)} is not a RateLimit: pass e.g. "
        f"{name}=RateLimit(requests_per_minute=6000), a shared RateLimiter, or None"
    )


def _spec_of(client: ChatClient, item: object) -> PromptSpec:
    if isinstance(item, str):
        return client.prompt(item)
    if isinstance(item, PromptSpec):
        return item
    raise UserError(
        f"a batch input must be a str or a PromptSpec, got {type(item).__name__}; "
        "pass client.prompt(...) for anything richer than a text"
    )


@dataclass(frozen=True, slots=True)
class RefineSummary:
    """The per-item figures of one batch result: answer, pass/fail, attempts, usage, error.

    Built with `RefineSummary.of(result)`. When the response carries a `RefineReport` (the client
    has a `SelfRefineAdvisor`), `passed`, `outcome`, `attempts` and `verdict` come from it and the
    usage counts model and judge tokens; otherwise `attempts` is 1, `passed`/`outcome` are `None`
    and the usage is the model's.
    """

    index: int
    """The input's position."""
    answer: str | None
    """The answer's text; `None` when the item failed."""
    passed: bool | None
    """Whether the judge passed the answer; `None` when unjudged or failed."""
    outcome: str | None
    """The refine outcome (`passed`, `best_attempt`, `failed`, `unjudged`, `skipped`), if any."""
    attempts: int
    """How many answers the model gave (0 when the item failed before a report existed)."""
    model_usage: Usage
    """The model's tokens over every attempt."""
    judge_usage: Usage
    """The judge's tokens over every attempt."""
    verdict: Any
    """The judge's verdict on the returned answer, when there is one."""
    error: str | None
    """`"ErrorType: message"` when the item failed."""

    @property
    def tokens(self) -> int:
        """Model plus judge tokens."""
        return self.model_usage.total_tokens + self.judge_usage.total_tokens

    @classmethod
    def of(cls, result: BatchResult[ChatClientResponse]) -> RefineSummary:
        """Summarise one result of `refine_many` / `refine_iter`.

        A failure that carries a report (`SelfRefineFailedError.report`) still counts its
        attempts and tokens.
        """
        response = result.value
        if result.error is not None or response is None:
            error = result.error
            report = getattr(error, "report", None)
            attempts = list(getattr(report, "attempts", ()))
            return cls(
                index=result.index,
                answer=None,
                passed=False if report is not None else None,
                outcome=getattr(report, "outcome", None),
                attempts=len(attempts),
                model_usage=getattr(report, "model_usage", Usage()),
                judge_usage=getattr(report, "judge_usage", Usage()),
                verdict=getattr(error, "verdict", None),
                error=f"{type(error).__name__}: {error}" if error is not None else "no value",
            )
        report = response.context.get(REFINE_REPORT)
        if report is None:
            return cls(
                index=result.index,
                answer=response.content,
                passed=None,
                outcome=None,
                attempts=1,
                model_usage=response.chat_response.metadata.usage,
                judge_usage=Usage(),
                verdict=None,
                error=None,
            )
        # Read the report by its pinned attribute names, so this module does not import the
        # self-refine advisor (and works with any advisor storing a compatible report).
        attempts = list(getattr(report, "attempts", ()))
        outcome = getattr(report, "outcome", None)
        return cls(
            index=result.index,
            answer=response.content,
            passed=None if outcome in (None, "unjudged", "skipped") else outcome == "passed",
            outcome=outcome,
            attempts=len(attempts),
            model_usage=getattr(report, "model_usage", Usage()),
            judge_usage=getattr(report, "judge_usage", Usage()),
            verdict=_verdict_of(attempts, getattr(report, "chosen", None), response.content),
            error=None,
        )

    def as_dict(self) -> dict[str, Any]:
        """The summary as plain JSON-ready values (the verdict as its `passed`/`score` if any)."""
        return {
            "index": self.index,
            "answer": self.answer,
            "passed": self.passed,
            "outcome": self.outcome,
            "attempts": self.attempts,
            "tokens": self.tokens,
            "model_tokens": self.model_usage.total_tokens,
            "judge_tokens": self.judge_usage.total_tokens,
            "error": self.error,
        }


def _verdict_of(attempts: list[Any], chosen: object, answer: str) -> Any:
    # The returned answer may be the best attempt rather than the last: take its verdict.
    if isinstance(chosen, int):
        for attempt in attempts:
            if getattr(attempt, "index", None) == chosen:
                return getattr(attempt, "verdict", None)
    for attempt in reversed(attempts):
        if getattr(attempt, "answer", None) == answer:
            return getattr(attempt, "verdict", None)
    return getattr(attempts[-1], "verdict", None) if attempts else None
