"""Provider limits in batches: pacing to requests per minute, one shared back-off on 429.

Against the fake OpenAI server with a rate limit injected (a token bucket of N requests per
second, answering 429 with `retry-after-ms` past it), through the real adapter and its SDK.
"""

from __future__ import annotations

import logging
import math
import time
from typing import Any

import anyio
import pytest
from anyio import wait_all_tasks_blocked

import jevrefine as jr
from jevrefine.exceptions import ModelHTTPError, UserError
from jevrefine.jev import JudgeClient, Noul
from jevrefine.judge import Judge, noul
from jevrefine.models.openai import OpenAIChatModel
from jevrefine.rate_limit import (
    RateLimit,
    RateLimiter,
    RateLimitTimeoutError,
    rate_limited,
)
from jevrefine.testing import (
    FakeJevServer,
    FakeOpenAIServer,
    FunctionModel,
    HTTPRequest,
    HTTPResponse,
)


class _Bucket:
    """The server side of a limit: `per_second` requests, at most one second's worth at once."""

    def __init__(self, per_second: float) -> None:
        self.rate = per_second
        self.level = per_second
        self.stamp = time.monotonic()
        self.started = self.stamp
        self.answered: list[tuple[float, int]] = []  # (seconds since start, status)

    def take(self) -> float:
        """0 when the request is allowed, else the seconds until it would be."""
        now = time.monotonic()
        self.level = min(self.rate, self.level + (now - self.stamp) * self.rate)
        self.stamp = now
        if self.level >= 1:
            self.level -= 1
            self.answered.append((now - self.started, 200))
            return 0.0
        self.answered.append((now - self.started, 429))
        return (1 - self.level) / self.rate

    def late_429s(self, after: float = 1.0) -> int:
        return sum(1 for t, status in self.answered if status == 429 and t > after)


def _too_many(wait: float) -> HTTPResponse:
    return HTTPResponse.json(
        {"error": {"message": "Rate limit reached", "type": "requests", "code": "rate_limit"}},
        status=429,
        headers={"retry-after-ms": str(math.ceil(wait * 1000))},
    )


class RateLimitedOpenAIServer(FakeOpenAIServer):
    """The fake OpenAI server, refusing chat calls past `per_second`."""

    def __init__(self, per_second: float) -> None:
        super().__init__()
        self.bucket = _Bucket(per_second)

    async def handle(self, request: HTTPRequest) -> Any:
        if request.path.endswith("/chat/completions"):
            wait = self.bucket.take()
            if wait:
                return _too_many(wait)
        return await super().handle(request)


class RateLimitedJevServer(FakeJevServer):
    """The fake Jev server, refusing System One calls past `per_second`."""

    def __init__(self, per_second: float) -> None:
        super().__init__()
        self.bucket = _Bucket(per_second)

    async def handle(self, request: HTTPRequest) -> Any:
        if request.path.endswith("/systemone"):
            wait = self.bucket.take()
            if wait:
                return HTTPResponse.json(
                    {"error": {"message": "slow down"}},
                    status=429,
                    headers={"retry-after-ms": str(math.ceil(wait * 1000))},
                )
        return await super().handle(request)


async def _batch(
    n: int, concurrency: int, per_second: float, limit: RateLimit
) -> tuple[list[Any], _Bucket]:
    server = RateLimitedOpenAIServer(per_second)
    async with server, OpenAIChatModel("m", base_url=server.url + "/v1", api_key="sk-k") as model:
        prompts = [f"question {i}" for i in range(n)]
        results = await jr.refine_many(
            jr.ChatClient(model), prompts, concurrency=concurrency, model_limit=limit
        )
    return results, server.bucket


async def test_a_batch_paced_to_the_servers_limit_fails_nothing() -> None:
    """150 at concurrency 50 against 60 requests/s, limited to 3,600 per minute: no failure,
    and (almost) no 429 once the first second is over."""
    results, bucket = await _batch(150, 50, 60, RateLimit(requests_per_minute=3600))
    assert [r.error for r in results if not r.ok] == []
    assert len(results) == 150
    assert bucket.late_429s() <= 0.05 * len(bucket.answered)


@pytest.mark.slow
async def test_2000_at_concurrency_500_against_100_per_second() -> None:
    """The issue's size: 2,000 at concurrency 500 against a server allowing 100 requests/s."""
    results, bucket = await _batch(2000, 500, 100, RateLimit(requests_per_minute=6000))
    assert [r.error for r in results if not r.ok] == []
    assert bucket.late_429s() <= 0.05 * len(bucket.answered)


async def test_a_limit_above_the_servers_backs_off_together_and_fails_nothing() -> None:
    """Told 6,000 per minute against a server allowing 20/s: the 429s pause the whole batch,
    the rate is cut and ramps back, and every request is answered in the end."""
    results, bucket = await _batch(60, 30, 20, RateLimit(requests_per_minute=6000))
    assert [r.error for r in results if not r.ok] == []
    statuses = [status for _, status in bucket.answered]
    assert statuses.count(200) == 60
    assert 429 in statuses  # the limit given was too high: the server did refuse some


async def test_without_limits_a_429_storm_fails_calls_that_the_limiter_would_save() -> None:
    """The control: the same batch without model_limit and no SDK retries fails calls."""
    async with RateLimitedOpenAIServer(20) as server:
        model = OpenAIChatModel("m", base_url=server.url + "/v1", api_key="sk-test", max_retries=0)
        async with model:
            results = await jr.refine_many(
                jr.ChatClient(model), [f"q{i}" for i in range(60)], concurrency=30
            )
    failed = [r.error for r in results if not r.ok]
    assert failed
    assert all(isinstance(e, ModelHTTPError) and e.status_code == 429 for e in failed)


async def test_the_sdk_leaves_429s_to_the_limiter_under_a_batch_limit() -> None:
    """Under a limit, a 429 is retried by the limiter (after the shared pause), not the SDK."""
    async with FakeOpenAIServer() as server:
        server.fail(429, {"error": {"message": "slow down"}}, times=1)
        async with OpenAIChatModel("m", base_url=server.url + "/v1", api_key="sk-test") as model:
            limiter = RateLimiter(RateLimit())
            results = await jr.refine_many(
                jr.ChatClient(model), ["one"], concurrency=1, model_limit=limiter
            )
    assert results[0].ok
    assert limiter.rate_limited == 1
    assert len(server.requests) == 2  # the refused one and the limiter's retry


async def test_the_judge_limit_paces_and_retries_judge_calls() -> None:
    async with (
        RateLimitedJevServer(30) as jev,
        FakeOpenAIServer() as server,
        OpenAIChatModel("m", base_url=server.url + "/v1", api_key="sk-test") as model,
        JudgeClient("jev-key", base_url=jev.base_url) as judge_client,
    ):
        judge = Judge(judge_client, [noul("good", Noul("Is it good?"), 0.0)])
        client = jr.ChatClient(model, advisors=[jr.SelfRefineAdvisor(judge)])
        limiter = RateLimiter(RateLimit(requests_per_minute=1800), name="judge")
        results = await jr.refine_many(
            client, [f"q{i}" for i in range(40)], concurrency=20, judge_limit=limiter
        )
    assert [r.error for r in results if not r.ok] == []
    summaries = [jr.RefineSummary.of(r) for r in results]
    assert all(s.outcome != "unjudged" for s in summaries)
    assert jev.bucket.late_429s() <= 0.05 * len(jev.bucket.answered)


async def test_a_shared_pause_holds_every_caller_until_retry_after() -> None:
    limiter = RateLimiter(RateLimit(requests_per_minute=60_000))
    await limiter.acquire()
    limiter.throttled(0.3)
    limiter.throttled(5.0)  # a second 429 of the same pause does not extend it
    started = anyio.current_time()
    async with anyio.create_task_group() as group:
        for _ in range(5):
            group.start_soon(limiter.acquire)
    assert anyio.current_time() - started >= 0.29
    assert limiter.rate_limited == 2


async def test_after_a_429_the_rate_is_cut_then_ramps_back() -> None:
    limiter = RateLimiter(RateLimit(requests_per_minute=600))
    await limiter.acquire()
    now = anyio.current_time()
    assert limiter._factor(now) == 1.0
    limiter.throttled(0.0)
    cut = limiter._factor(anyio.current_time())
    assert cut == pytest.approx(0.5, abs=0.01)
    limiter._paused_until -= 15.0  # as if the pause ended 15 s ago: half way up the ramp
    assert limiter._factor(anyio.current_time()) == pytest.approx(0.75, abs=0.01)
    limiter._paused_until -= 20.0
    assert limiter._factor(anyio.current_time()) == 1.0


def test_rate_limited_reads_model_and_judge_errors() -> None:
    error = ModelHTTPError(429, "slow down", retry_after=1.5)
    assert rate_limited(error)
    assert rate_limited(ModelHTTPError(429, "slow down"))
    assert not rate_limited(ModelHTTPError(500, "boom"))
    assert not rate_limited(ValueError("x"))


@pytest.mark.parametrize(
    ("value", "name"),
    [(0, "requests_per_minute"), (-5, "tokens_per_minute"), ("fast", "requests_per_minute")],
)
def test_a_limit_must_be_a_positive_number(value: object, name: str) -> None:
    with pytest.raises(UserError, match=name):
        RateLimit(**{name: value})  # type: ignore[arg-type]


async def test_refine_many_refuses_a_limit_of_the_wrong_type() -> None:
    client = jr.ChatClient(FunctionModel(lambda prompt: "ok"))
    with pytest.raises(UserError, match="model_limit"):
        await jr.refine_many(client, ["a"], model_limit=6000)  # type: ignore[arg-type]


# -- bounded waits (issue 29, RT-1) -----------------------------------------------------------


def _answer(total: object) -> Any:
    """A result whose usage reports `total` tokens, whatever it is."""

    class Reported:
        total_tokens = total

    class Result:
        usage = Reported()

    return Result()


def usage_tokens(result: Any) -> object:
    """What the wrappers give the limiter: the total the result's usage reports."""
    return result.usage.total_tokens


async def _answered() -> Any:
    return _answer(10**12)


async def test_one_usage_figure_of_a_trillion_tokens_costs_at_most_one_bucket() -> None:
    """The issue's repro: before the fix the second `run` slept ~10^9 s."""
    limiter = RateLimiter(RateLimit(tokens_per_minute=60_000))  # a bucket: 1,000 tokens
    await limiter.run(_answered, tokens=1000, used=usage_tokens)  # the bucket was full
    # The debt is one bucket (a second): a call that may wait 0.5 s is refused at once...
    with anyio.fail_after(0.5), pytest.raises(RateLimitTimeoutError):
        await limiter.acquire(10)
    # ...and one that may wait for a few seconds is admitted.
    with anyio.fail_after(5):
        await limiter.run(_answered, tokens=10, used=usage_tokens)


async def test_a_turn_past_the_callers_deadline_is_refused_at_once_naming_the_limit() -> None:
    limiter = RateLimiter(RateLimit(requests_per_minute=60))  # one call a second
    await limiter.acquire()
    with anyio.fail_after(0.2), pytest.raises(RateLimitTimeoutError) as refused:
        await limiter.acquire()  # its turn is a second away
    # Raised by the limiter before sleeping, not by fail_after's cancellation at 0.2 s.
    error = refused.value
    assert "the model rate limit (requests_per_minute=60)" in str(error)
    assert "past its deadline" in str(error)
    assert error.wait > error.remaining
    assert isinstance(error, TimeoutError)  # what the caller's fail_after would have raised
    assert error.is_transient
    # The refused caller took nothing: the next one gets the same turn.
    with anyio.fail_after(0.2), pytest.raises(RateLimitTimeoutError) as again:
        await limiter.acquire()
    assert again.value.wait <= error.wait


async def test_a_429_pause_longer_than_the_deadline_is_refused_at_once() -> None:
    limiter = RateLimiter(RateLimit(), name="judge")
    await limiter.acquire()
    limiter.throttled(30.0)
    with anyio.fail_after(1), pytest.raises(RateLimitTimeoutError, match="paused after a 429"):
        await limiter.acquire()


async def test_a_long_wait_holds_no_lock_over_the_callers_behind_it() -> None:
    """A caller booked far ahead does not keep the next one from being refused at once (the
    old limiter slept holding its lock: the next caller could only time out behind it)."""
    limiter = RateLimiter(RateLimit(tokens_per_minute=60_000))
    await limiter.acquire(1000)  # the bucket is empty
    refused: list[BaseException] = []

    async def impatient() -> None:
        try:
            with anyio.fail_after(0.5):
                await limiter.acquire(10)
        except TimeoutError as exc:
            refused.append(exc)

    async with anyio.create_task_group() as group:
        group.start_soon(limiter.acquire, 50_000)  # its turn: ~50 s away
        await wait_all_tasks_blocked()
        group.start_soon(impatient)
        await wait_all_tasks_blocked()
        group.cancel_scope.cancel()
    assert [type(e) for e in refused] == [RateLimitTimeoutError]


async def test_callers_cancelled_while_waiting_give_their_turns_back() -> None:
    limiter = RateLimiter(RateLimit(requests_per_minute=60))
    await limiter.acquire()
    async with anyio.create_task_group() as group:
        for _ in range(5):  # booked 1, 2, 3, 4 and 5 s ahead
            group.start_soon(limiter.acquire)
        await wait_all_tasks_blocked()
        group.cancel_scope.cancel()
    # Nothing of the five turns is left: the next caller's turn is the first one, a second
    # away (were they kept, it would be six seconds away, and refused here at once).
    with anyio.fail_after(3):
        await limiter.acquire()


HOSTILE_FIGURES = [-(10**12), -1, 1.5, math.nan, math.inf, "1000", True, 10**400, [1]]


@pytest.mark.parametrize("figure", HOSTILE_FIGURES, ids=lambda figure: repr(figure)[:12])
async def test_a_figure_that_is_no_count_is_ignored_and_logged_once(
    figure: object, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="jevrefine.rate_limit")  # whatever ran before
    limiter = RateLimiter(RateLimit(tokens_per_minute=60_000))
    for _ in range(3):
        with anyio.fail_after(5):  # whatever the figure, the debt stays within one bucket
            await limiter.run(
                lambda: _async(_answer(figure)),
                tokens=10,
                used=usage_tokens,
                server=lambda: "the test server",
            )
    assert limiter.implausible_usage == 3
    warnings = [r for r in caplog.records if r.name == "jevrefine.rate_limit"]
    assert len(warnings) == 1
    assert warnings[0].levelno == logging.WARNING
    assert warnings[0].getMessage().startswith("the test server reported usage of ")


async def test_a_negative_figure_refunds_nothing() -> None:
    """-10^12 would otherwise fill the bucket for good (a credit as unbounded as the debt)."""
    limiter = RateLimiter(RateLimit(tokens_per_minute=60_000))
    await limiter.run(lambda: _async(_answer(-(10**12))), tokens=1000, used=usage_tokens)
    with anyio.fail_after(0.3), pytest.raises(RateLimitTimeoutError):
        await limiter.acquire(1000)  # still waits for the 1,000 the first call was charged


async def test_a_function_model_reporting_hostile_usage_in_a_batch(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The same through `refine_many`: a model whose `Usage` says -5 input tokens."""

    def answer(prompt: jr.Prompt) -> jr.ChatResponse:
        return jr.ChatResponse(
            (jr.Generation(jr.AssistantMessage("ok")),),
            jr.ChatResponseMetadata(usage=jr.Usage(input_tokens=-(10**12), output_tokens=3)),
        )

    caplog.set_level(logging.WARNING, logger="jevrefine.rate_limit")
    client = jr.ChatClient(FunctionModel(answer, model_name="negative"))
    limiter = RateLimiter(RateLimit(tokens_per_minute=60_000))
    with anyio.fail_after(10):
        results = await jr.refine_many(client, ["a", "b", "c"], model_limit=limiter)
    assert all(r.ok for r in results)
    (warning,) = [r.getMessage() for r in caplog.records if r.name == "jevrefine.rate_limit"]
    assert "the function model 'negative' at an in-process server" in warning
    assert "a negative count" in warning


async def _async(value: Any) -> Any:
    return value
