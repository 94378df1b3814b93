"""Rate limits as typed wrappers: `RateLimitedModel`, `RateLimitedJudgeClient`, and the batch.

`refine_many(..., model_limit=, judge_limit=)` sends its prompts through a copy of the client
whose model and judges' clients are wrapped; nothing is installed behind the caller's back, so
their own objects stay as they were. A 429's wait is read and bounded by the wire's rules
(`PAUSE_POLICY`, a `RetryPolicy`): one longer than the policy waits fails that call at once.
"""

from __future__ import annotations

import json
from typing import Any

import anyio
import pytest

import jevrefine as jr
from jevrefine.exceptions import ModelHTTPError, StreamingNotSupportedError, UserError
from jevrefine.jev import JudgeClient, Noul, RetryPolicy
from jevrefine.judge import (
    Judge,
    JudgeInput,
    ModelJudgeClient,
    RateLimitedJudgeClient,
    check,
    noul,
)
from jevrefine.models import ChatModel, RateLimitedModel
from jevrefine.rate_limit import PAUSE_POLICY, RateLimit, RateLimiter, RateLimitTimeoutError
from jevrefine.testing import FakeJevServer, FunctionModel

GOOD = Noul("Is `assistant_answer` good?", when_false="Not good")


def _ok(prompt: jr.Prompt) -> str:
    return "fine"


async def test_a_batch_limits_a_copy_and_leaves_the_callers_objects_as_they_are(
    jev_server: FakeJevServer,
) -> None:
    model = FunctionModel(_ok)
    async with JudgeClient("k", base_url=jev_server.base_url) as judge_client:
        judge = Judge(judge_client, [noul("good", GOOD, 0.0)])
        advisor = jr.SelfRefineAdvisor(judge)
        client = jr.ChatClient(model, advisors=[advisor])
        limiter = RateLimiter(RateLimit(requests_per_minute=60))  # one call a second
        results = await jr.refine_many(
            client, ["a"], model_limit=limiter, judge_limit=RateLimiter(RateLimit())
        )
        assert results[0].ok
        assert client.model is model
        assert client.advisors == (advisor,)
        assert advisor.judge is judge
        assert judge.client is judge_client
        # The client itself is not under the batch's limiter: its next turn is a second away.
        with anyio.fail_after(0.5):
            assert await client.prompt("b").content() == "fine"


async def test_the_judge_limit_reaches_a_prompts_own_self_refine_advisor(
    jev_server: FakeJevServer,
) -> None:
    """A 429 that the judge client does not retry itself is paused and retried by the limiter:
    so the call went through it, though the advisor was the prompt's, not the client's."""
    jev_server.fail(429, times=1)
    no_retries = RetryPolicy(max_retries=0)
    async with JudgeClient("k", base_url=jev_server.base_url, retry=no_retries) as judge_client:
        advisor = jr.SelfRefineAdvisor(Judge(judge_client, [noul("good", GOOD, 0.0)]))
        client = jr.ChatClient(FunctionModel(_ok))
        limiter = RateLimiter(RateLimit(), name="judge")
        spec = client.prompt("a").advisors(advisor)
        with anyio.fail_after(10):
            (result,) = await jr.refine_many(client, [spec], judge_limit=limiter)
    assert result.ok
    assert jr.RefineSummary.of(result).outcome == "passed"
    assert limiter.rate_limited == 1


async def test_a_retry_after_longer_than_the_policy_waits_fails_that_call_at_once() -> None:
    """Before: the pause was cut to 60 s and the call parked for it (here: past its deadline)."""
    asked = PAUSE_POLICY.max_retry_after * 60

    def refuse(prompt: jr.Prompt) -> str:
        raise ModelHTTPError(429, {"error": {"message": "quota"}}, retry_after=asked)

    limiter = RateLimiter(RateLimit())
    with anyio.fail_after(5):
        (result,) = await jr.refine_many(
            jr.ChatClient(FunctionModel(refuse)), ["a"], model_limit=limiter
        )
    assert isinstance(result.error, ModelHTTPError)
    assert result.error.status_code == 429
    assert limiter.rate_limited == 1  # the batch still backs off, by the policy's backoff


@pytest.mark.parametrize("retry_after", [-5.0, float("nan"), float("inf"), 10**400, True])
async def test_a_retry_after_that_is_no_wait_pauses_by_the_backoff(retry_after: Any) -> None:
    """Before: a negative or NaN wait paused the batch for 0 s, the next 429 at once."""
    limiter = RateLimiter(RateLimit())
    await limiter.acquire()
    limiter.throttled(retry_after)  # the first 429 of a run: the backoff is 1 s
    with anyio.fail_after(0.5), pytest.raises(RateLimitTimeoutError, match="paused after a 429"):
        await limiter.acquire()


async def test_a_rate_limited_model_works_in_any_client_and_names_what_it_wraps() -> None:
    limiter = RateLimiter(RateLimit(requests_per_minute=60))
    model = RateLimitedModel(FunctionModel(_ok, model_name="m"), limiter)
    assert (model.provider, model.model_name, repr(model)) == (
        "function",
        "m",
        "RateLimitedModel(FunctionModel(model_name='m'))",
    )
    client = jr.ChatClient(model)
    assert await client.prompt("a").content() == "fine"
    with anyio.fail_after(0.5), pytest.raises(RateLimitTimeoutError, match="requests_per_minute"):
        await client.prompt("b").content()  # the second call of the minute's first second
    with pytest.raises(
        UserError, match=r"limiter=RateLimit\(.*\) is not a RateLimiter: pass e\.g\."
    ):
        RateLimitedModel(FunctionModel(_ok), RateLimit())  # type: ignore[arg-type]


class _Silent(ChatModel):
    """A model that cannot stream and answers with what is no `ChatResponse`."""

    @property
    def model_name(self) -> str:
        return "silent"

    async def call(self, prompt: jr.Prompt) -> jr.ChatResponse:
        return "text"  # type: ignore[return-value]


async def test_errors_name_the_wrapped_model_not_the_wrapper() -> None:
    client = jr.ChatClient(RateLimitedModel(_Silent(), RateLimiter(RateLimit())))
    with pytest.raises(UserError, match=r"_Silent\.call\(\) returned str"):
        await client.prompt("a").content()
    with pytest.raises(StreamingNotSupportedError, match="_Silent cannot stream"):
        async for _ in client.prompt("a").stream():
            pass


async def test_a_rate_limited_model_paces_its_streams() -> None:
    limiter = RateLimiter(RateLimit(requests_per_minute=60))
    client = jr.ChatClient(RateLimitedModel(FunctionModel(_ok), limiter))
    assert "".join([chunk async for chunk in client.prompt("a").stream()]) == "fine"
    with anyio.fail_after(0.5), pytest.raises(RateLimitTimeoutError):
        async for _ in client.prompt("b").stream():
            pass


async def test_a_rate_limited_judge_client_keeps_the_judges_written_feedback() -> None:
    """`ModelJudgeClient(explain_failures=True)`: its feedback still reaches the verdict."""

    def answer(prompt: jr.Prompt) -> str:
        if prompt.options.response_format is None:  # the feedback request
            return "Say why it is good."
        return json.dumps({"answer": "no"})

    judge_model = ModelJudgeClient(FunctionModel(answer), logprobs=False, explain_failures=True)
    limited = RateLimitedJudgeClient(judge_model, RateLimiter(RateLimit(), name="judge"))
    verdict = await Judge(limited, [noul("good", GOOD, 0.5)]).evaluate(
        JudgeInput("user: Is it good?", "It is.")
    )
    (failure,) = verdict.failures()
    assert failure.detail.endswith("Feedback: Say why it is good.")
    assert repr(limited) == f"RateLimitedJudgeClient({judge_model!r})"
    with pytest.raises(UserError, match="wraps a SystemOneClient"):
        RateLimitedJudgeClient(object(), RateLimiter(RateLimit()))  # type: ignore[arg-type]


async def test_with_judge_changes_the_judge_the_engine_asks_and_nothing_else() -> None:
    """The engine reads its settings once: a copy that only set `.judge` would still judge with
    the old one. `with_judge` is what the batch uses."""
    passes = Judge(criteria=[check("any", lambda i: True, defect="never")])
    fails = Judge(criteria=[check("none", lambda i: False, defect="Always wrong")])
    advisor = jr.SelfRefineAdvisor(passes, max_repeat_attempts=2, order=5)
    other = advisor.with_judge(fails)
    assert (other.judge, other.max_repeat_attempts, other.order) == (fails, 2, 5)
    assert advisor.judge is passes
    model = FunctionModel(_ok)
    judged = await jr.ChatClient(model, advisors=[other]).prompt("a").call()
    report = judged.context[jr.context_keys.REFINE_REPORT]
    assert (report.outcome, len(report.attempts)) == ("best_attempt", 3)
    kept = await jr.ChatClient(model, advisors=[advisor]).prompt("a").call()
    assert kept.context[jr.context_keys.REFINE_REPORT].outcome == "passed"
    with pytest.raises(UserError, match="needs a Judge"):
        advisor.with_judge("strict")  # type: ignore[arg-type]
