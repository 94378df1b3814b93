"""`refine_many` / `refine_iter`: alignment, failure isolation, bounds, cancellation, memory."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import random
import resource
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import anyio
import anyio.lowlevel
import pytest

import jevrefine as jr
from jevrefine.context_keys import REFINE_REPORT
from jevrefine.jev import BatchResult
from jevrefine.testing import FunctionModel


class Tracker:
    """A model function that records concurrency, cancellations and fails on request."""

    def __init__(self, *, fail_on: frozenset[str] = frozenset(), delay: float = 0.005) -> None:
        self.fail_on = fail_on
        self.delay = delay
        self.in_flight = 0
        self.peak = 0
        self.started = 0
        self.finished = 0
        self.cancelled = 0

    async def __call__(self, prompt: jr.Prompt) -> str:
        text = prompt.messages[-1].text
        self.started += 1
        self.in_flight += 1
        self.peak = max(self.peak, self.in_flight)
        try:
            await anyio.sleep(self.delay if self.delay >= 0 else random.uniform(0, 0.01))
            if text in self.fail_on:
                raise ValueError(f"bad {text}")
            self.finished += 1
            return f"answer to {text}"
        except anyio.get_cancelled_exc_class():
            self.cancelled += 1
            raise
        finally:
            self.in_flight -= 1


def client_of(function: Any) -> jr.ChatClient:
    return jr.ChatClient(FunctionModel(function))


async def test_results_are_aligned_and_failures_isolated() -> None:
    tracker = Tracker(fail_on={"p3", "p7"}, delay=-1)  # random latencies: completion order varies
    prompts = [f"p{i}" for i in range(20)]
    results = await jr.refine_many(client_of(tracker), prompts, concurrency=4)
    assert [r.index for r in results] == list(range(20))
    assert [r.ok for r in results] == [i not in (3, 7) for i in range(20)]
    assert results[0].unwrap().content == "answer to p0"
    assert results[19].unwrap().content == "answer to p19"
    assert isinstance(results[3].error, ValueError)
    with pytest.raises(ValueError, match="bad p7"):
        results[7].unwrap()
    assert tracker.peak == 4
    assert tracker.finished == 18


async def test_concurrency_is_bounded_and_used() -> None:
    tracker = Tracker(delay=0.01)
    await jr.refine_many(client_of(tracker), [f"p{i}" for i in range(30)], concurrency=7)
    assert tracker.peak == 7
    tracker = Tracker(delay=0.01)
    await jr.refine_many(client_of(tracker), [f"p{i}" for i in range(5)], concurrency=1)
    assert tracker.peak == 1


async def test_refine_iter_yields_in_completion_order_with_indexes() -> None:
    async def answer(prompt: jr.Prompt) -> str:
        # Later inputs finish first.
        n = int(prompt.messages[-1].text)
        await anyio.sleep(0.02 * (3 - n))
        return str(n)

    seen = [r.index async for r in jr.refine_iter(client_of(answer), ["0", "1", "2"])]
    assert seen == [2, 1, 0]


async def test_async_iterable_inputs_and_prompt_specs() -> None:
    model = FunctionModel(lambda p: f"{p.options.temperature}:{p.messages[-1].text}")
    client = jr.ChatClient(model)

    async def source() -> AsyncIterator[jr.PromptSpec | str]:
        yield "plain"
        yield client.prompt("hot").options(temperature=0.9)
        yield client.prompt().system("Be brief.").user("cold").options(temperature=0.0)

    results = await jr.refine_many(client, source(), concurrency=2)
    assert [r.unwrap().content for r in results] == ["None:plain", "0.9:hot", "0.0:cold"]
    assert [type(m).__name__ for m in model.prompts[2].messages] == [
        "SystemMessage",
        "UserMessage",
    ]


async def test_a_bad_input_fails_in_its_own_slot() -> None:
    results = await jr.refine_many(client_of(lambda p: "ok"), ["a", 42, "b"])  # type: ignore[list-item]
    assert [r.ok for r in results] == [True, False, True]
    assert isinstance(results[1].error, jr.UserError)
    assert "PromptSpec" in str(results[1].error)


async def test_a_broken_input_source_raises_its_own_error() -> None:
    async def source() -> AsyncIterator[str]:
        yield "a"
        raise OSError("disk gone")

    with pytest.raises(OSError, match="disk gone"):
        await jr.refine_many(client_of(lambda p: "ok"), source())


async def test_fail_fast_raises_the_first_error_and_cancels_the_rest() -> None:
    tracker = Tracker(fail_on={"p2"}, delay=0.05)
    baseline = len(asyncio.all_tasks())
    with pytest.raises(ValueError, match="bad p2"):
        await jr.refine_many(
            client_of(tracker), [f"p{i}" for i in range(100)], concurrency=5, fail_fast=True
        )
    # Everything sleeps 50 ms, so p2 fails in the first wave: few more inputs may have started.
    assert tracker.started < 100
    assert tracker.in_flight == 0
    assert len(asyncio.all_tasks()) == baseline


async def test_fail_fast_cancels_in_flight_refinements() -> None:
    async def answer(prompt: jr.Prompt) -> str:
        if prompt.messages[-1].text == "boom":
            await anyio.sleep(0.05)  # let the others start their 10 s refinements first
            raise RuntimeError("boom")
        return await tracker(prompt)

    tracker = Tracker(delay=10)
    with anyio.fail_after(5), pytest.raises(RuntimeError, match="boom"):
        await jr.refine_many(
            client_of(answer), ["a", "b", "c", "boom", "d"], concurrency=5, fail_fast=True
        )
    assert tracker.cancelled == tracker.started > 0
    assert tracker.in_flight == 0


async def test_on_result_sync_and_async() -> None:
    seen: list[int] = []

    async def record(result: BatchResult[jr.ChatClientResponse]) -> None:
        await anyio.lowlevel.checkpoint()
        seen.append(result.index)

    results = await jr.refine_many(client_of(lambda p: "x"), ["a", "b", "c"], on_result=record)
    assert sorted(seen) == [0, 1, 2] == [r.index for r in results]
    sync_seen: list[bool] = []
    await jr.refine_many(
        client_of(Tracker(fail_on={"b"})), ["a", "b"], on_result=lambda r: sync_seen.append(r.ok)
    )
    assert sorted(sync_seen) == [False, True]


async def test_an_on_result_error_stops_the_batch() -> None:
    tracker = Tracker(delay=0.01)

    def explode(result: BatchResult[jr.ChatClientResponse]) -> None:
        raise KeyError("callback")

    with pytest.raises(KeyError, match="callback"):
        await jr.refine_many(
            client_of(tracker), [f"p{i}" for i in range(50)], concurrency=2, on_result=explode
        )
    assert tracker.started < 50
    assert tracker.in_flight == 0


async def test_cancellation_leaves_nothing_running() -> None:
    tracker = Tracker(delay=60)
    baseline = len(asyncio.all_tasks())
    with anyio.move_on_after(0.1) as scope:
        await jr.refine_many(client_of(tracker), [f"p{i}" for i in range(1000)], concurrency=8)
    assert scope.cancelled_caught
    assert tracker.started == 8
    assert tracker.cancelled == 8
    assert tracker.in_flight == 0
    assert len(asyncio.all_tasks()) == baseline


async def test_breaking_out_of_refine_iter_cancels_in_flight() -> None:
    tracker = Tracker(delay=-1)
    baseline = len(asyncio.all_tasks())
    stream = jr.refine_iter(client_of(tracker), [f"p{i}" for i in range(1000)], concurrency=6)
    async with contextlib.aclosing(stream):
        async for result in stream:
            if result.index >= 0:
                break
    assert tracker.in_flight == 0
    assert tracker.started < 50
    assert len(asyncio.all_tasks()) == baseline


async def test_invalid_arguments() -> None:
    with pytest.raises(jr.UserError, match="concurrency"):
        await jr.refine_many(client_of(lambda p: "x"), ["a"], concurrency=0)
    with pytest.raises(jr.UserError, match="ChatClient"):
        await jr.refine_many(FunctionModel(lambda p: "x"), ["a"])  # type: ignore[arg-type]
    assert await jr.refine_many(client_of(lambda p: "x"), []) == []


# --- per-item figures ------------------------------------------------------------------------


@dataclass
class FakeAttempt:
    index: int
    answer: str
    verdict: Any
    usage: jr.Usage


@dataclass
class FakeReport:
    attempts: list[FakeAttempt]
    outcome: str
    model_usage: jr.Usage
    judge_usage: jr.Usage = field(default_factory=jr.Usage)


class ReportingAdvisor(jr.BaseAdvisor):
    """Stores a report shaped like the pinned `RefineReport` (attempts, outcome, usage)."""

    name = "reporting"

    def after(self, response: jr.ChatClientResponse) -> jr.ChatClientResponse:
        answer = response.content
        first = FakeAttempt(0, "draft", "verdict-draft", jr.Usage(3, 1))
        best = FakeAttempt(1, answer, "verdict-best", jr.Usage(3, 2))
        outcome = "failed" if "fail" in answer else "best_attempt"
        outcome = "passed" if "pass" in answer else outcome
        response.context[REFINE_REPORT] = FakeReport(
            [best, first] if outcome == "best_attempt" else [first, best],
            outcome,
            jr.Usage(6, 3),
            jr.Usage(10, 1),
        )
        return response


async def test_summary_reads_the_refine_report() -> None:
    client = jr.ChatClient(
        FunctionModel(lambda p: p.messages[-1].text), advisors=[ReportingAdvisor()]
    )
    results = await jr.refine_many(client, ["pass", "fail", "meh"])
    passed, failed, best = (jr.RefineSummary.of(r) for r in results)
    assert (passed.passed, passed.outcome, passed.attempts, passed.tokens) == (
        True,
        "passed",
        2,
        20,
    )
    assert (failed.passed, failed.outcome) == (False, "failed")
    assert best.passed is False
    assert best.verdict == "verdict-best"  # the returned answer's verdict, not the last attempt's
    assert passed.as_dict()["judge_tokens"] == 11


async def test_summary_without_a_report_and_of_a_failure() -> None:
    results = await jr.refine_many(client_of(Tracker(fail_on={"b c"})), ["a", "b c"])
    plain, failure = (jr.RefineSummary.of(r) for r in results)
    assert plain.answer == "answer to a"
    assert (plain.passed, plain.attempts, plain.outcome) == (None, 1, None)
    assert plain.tokens == 1 + 3  # FunctionModel counts words: "a" in, "answer to a" out
    assert failure.answer is None
    assert failure.error == "ValueError: bad b c"
    assert failure.attempts == 0


# --- bounded memory --------------------------------------------------------------------------


class LeanModel(jr.ChatModel):
    """A model that keeps nothing (FunctionModel records every prompt, which would grow)."""

    provider = "lean"

    @property
    def model_name(self) -> str:
        return "lean"

    async def call(self, prompt: jr.Prompt) -> jr.ChatResponse:
        await anyio.lowlevel.checkpoint()
        return jr.ChatResponse((jr.Generation(jr.AssistantMessage("ok " * 20)),))


def peak_rss_kib() -> int:
    # ru_maxrss is KiB on Linux (bytes on macOS, where these tests don't run in CI).
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


@pytest.mark.slow
@pytest.mark.timeout(120)
@pytest.mark.skipif(sys.platform != "linux", reason="ru_maxrss is in KiB on Linux only")
async def test_memory_stays_flat_over_100k_inputs_from_an_async_generator() -> None:
    client = jr.ChatClient(LeanModel())
    produced = 0
    done = 0
    max_outstanding = 0
    concurrency = 32

    async def source(n: int) -> AsyncIterator[str]:
        nonlocal produced
        for i in range(n):
            produced += 1
            # A fresh ~1 KB prompt each time, so materialising 100k of them would cost ~100 MB.
            yield f"question {i} " + "x" * 1000

    async def drain(n: int) -> None:
        nonlocal done, max_outstanding
        async for result in jr.refine_iter(client, source(n), concurrency=concurrency):
            assert result.ok
            done += 1
            max_outstanding = max(max_outstanding, produced - done)

    await drain(5_000)  # warm up: allocator arenas, caches, the chain
    gc.collect()
    before = peak_rss_kib()
    produced = done = max_outstanding = 0
    await drain(100_000)
    growth_mib = (peak_rss_kib() - before) / 1024
    assert done == 100_000
    # The source is pulled only as slots free up: never more than the workers plus the buffer.
    assert max_outstanding <= 2 * concurrency + 2
    assert growth_mib < 20, f"peak RSS grew by {growth_mib:.1f} MiB over 100,000 inputs"


# --- end to end through a real SelfRefineAdvisor ---------------------------------------------


async def test_refine_many_through_a_real_self_refine_advisor() -> None:
    from jevrefine.advisors.self_refine import SelfRefineAdvisor, SelfRefineFailedError
    from jevrefine.jev import JudgeClient, Noul
    from jevrefine.judge._judge import Judge
    from jevrefine.judge.criteria import noul
    from jevrefine.testing import FakeJevServer

    def answer(prompt: jr.Prompt) -> str:
        text = prompt.messages[-1].text
        # "fix" prompts get a good answer once the judge's feedback is in the prompt.
        if text.startswith("fix") and "Not good" in text:
            return "good answer"
        return "good answer" if text.startswith("good") else "bad answer"

    def verdict(state: dict[str, Any], questions: dict[str, Any]) -> dict[str, float]:
        return {q: 0.9 if state["assistant_answer"] == "good answer" else 0.1 for q in questions}

    async with FakeJevServer(verdict) as server, JudgeClient("k", base_url=server.base_url) as jev:
        judge = Judge(jev, [noul("is_good", Noul("Is it good?", when_false="Not good"), 0.7)])
        strict = SelfRefineAdvisor(judge, max_repeat_attempts=2, fail_on_exhausted_attempts=True)
        client = jr.ChatClient(FunctionModel(answer), advisors=[strict])
        results = await jr.refine_many(client, ["good one", "fix me", "hopeless"], concurrency=3)
    good, fixed, hopeless = (jr.RefineSummary.of(r) for r in results)
    assert (good.passed, good.attempts, good.outcome) == (True, 1, "passed")
    assert (fixed.passed, fixed.attempts, fixed.answer) == (True, 2, "good answer")
    assert fixed.verdict is not None
    assert fixed.verdict.passed
    assert fixed.judge_usage.total_tokens >= 0
    assert isinstance(results[2].error, SelfRefineFailedError)
    assert (hopeless.passed, hopeless.attempts, hopeless.outcome) == (False, 3, "failed")
    assert hopeless.model_usage.total_tokens > 0
