"""The judge-and-retry loop: jevrefine vs pydantic-ai vs DSPy Refine vs a hand-written loop.

Every contender refines the same questions against the same model and the same judge, with the
same failure pattern: the judge fails the first two answers to each question and passes the third
(a code check keyed on the question, so the pattern does not depend on any framework's prompt
format), and asks Jev one question on every attempt. The model is the fake OpenAI server and the
judge's service `FakeJevServer`, each in its own process, each answering after `LATENCY`.

- `floor`: `benchmarks._floor.FloorClient` (asyncio streams, hand-parsed HTTP/1.1 keep-alive),
  the same two calls per attempt and the same fail-fail-pass decision, no framework: the CPU floor;
- `vendor-SDK loop`: `AsyncOpenAI` + `Judge.evaluate`, retrying with the latest feedback only
  (an earlier round called it "the hand-written loop" and took its CPU as the floor; it pays the
  SDK's layers and httpx's pool, so it is what a user writes without jevrefine, not a floor);
- `jevrefine`: `ChatClient` + `SelfRefineAdvisor(judge, max_repeat_attempts=2)`;
- `pydantic-ai`: `Agent(retries=2)` whose `output_validator` calls the same judge and raises
  `ModelRetry(feedback)`: each retry resends the whole conversation so far (feedback compounds);
- `DSPy Refine(N=3)`: sync, in worker threads; its reward function calls the same judge (on the
  event loop, via `anyio.from_thread`); after a failure Refine asks the LM for advice, one more
  model call with a long prompt. LM cache off; `LITELLM_LOCAL_MODEL_COST_MAP=True`, since
  litellm otherwise fetches its cost map from the internet at import.

Measured per contender, rounds alternating: wall time, CPU per attempt (this process's: the
client's), model calls and prompt tokens (counted by the fake server, in words) and judge calls.
Ideal wall = max(latency bound, the floor's CPU): the latency bound is
ceil(N / concurrency) × 3 attempts × 2 calls × latency. This setting is latency-bound, so wall
ratios say little about the framework: the headline states CPU per attempt beside wall. Target:
jevrefine within 1.1× of the vendor-SDK loop.

    python -m benchmarks.bench_judge_loop [--quick]
"""

from __future__ import annotations

import argparse
import functools
import math
import os
import re
import statistics
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from typing import Any

# Before litellm is imported (by dspy): otherwise it downloads its model cost map.
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

import anyio
import anyio.from_thread
import anyio.to_thread
import httpx2
from openai import AsyncOpenAI

from jevrefine import ChatClient, SelfRefineAdvisor, context_keys
from jevrefine.advisors.self_refine import DEFAULT_FEEDBACK_TEMPLATE
from jevrefine.jev import JudgeClient, Noul
from jevrefine.judge import Judge, JudgeInput, check, noul
from jevrefine.models.openai import OpenAIChatModel

from ._floor import FloorClient
from ._harness import bar, emit, figure, load_average
from ._loop import SHIPPED_LOOP
from ._servers import serving

LATENCY = 0.02
MODEL = "fake-model"
FAILS = 2  # the judge fails this many answers per question, then passes
ATTEMPTS = FAILS + 1
DEFECT = "The answer does not acknowledge the review"
QUESTION = Noul("Does `assistant_answer` respond to `user_question`?", when_false="Off topic")
QUESTION_ID = re.compile(r"Question number (\d+)")


class CountingJudgeClient:
    """Jev's client, counting the judging calls (one per attempt)."""

    def __init__(self, inner: JudgeClient) -> None:
        self.inner = inner
        self.calls = 0

    async def system_one(self, *args: Any, **kwargs: Any) -> Any:
        self.calls += 1
        return await self.inner.system_one(*args, **kwargs)


class Failures:
    """The failure pattern: each question's first `FAILS` answers fail, the next passes."""

    def __init__(self) -> None:
        self.seen: Counter[str] = Counter()

    def ok(self, judge_input: JudgeInput) -> bool:
        match = QUESTION_ID.search(judge_input.user_question)
        assert match, judge_input.user_question
        self.seen[match.group(1)] += 1
        return self.seen[match.group(1)] > FAILS


def make_judge(jev: CountingJudgeClient) -> Judge:
    failures = Failures()
    return Judge(jev, [check("reviewed", failures.ok, DEFECT), noul("on_topic", QUESTION, 0.0)])


def openai_client(url: str) -> AsyncOpenAI:
    return AsyncOpenAI(api_key="bench", base_url=url, max_retries=0)


class Floor:
    name = "floor (FloorClient, no framework)"

    def __init__(self, url: str, jev_url: str, counter: CountingJudgeClient) -> None:
        headers = {"authorization": "Bearer bench"}
        self.model = FloorClient(url, headers=headers)
        self.jev = FloorClient(jev_url, headers=headers)
        self.counter = counter
        self.questions = {"on_topic": QUESTION.to_wire()}
        self.seen: Counter[str] = Counter()

    async def one(self, question: str) -> None:
        user = question
        for _ in range(ATTEMPTS):
            body = {"model": MODEL, "messages": [{"role": "user", "content": user}]}
            completion = await self.model.post("/chat/completions", body)
            answer = completion["choices"][0]["message"]["content"] or ""
            state = {"user_question": f"user: {question}", "assistant_answer": answer}
            self.counter.calls += 1
            judged = await self.jev.post(
                "/v1/systemone",
                {"state": state, "model": "jev-latest", "questions": self.questions},
            )
            self.seen[question] += 1
            on_topic = judged["answers"]["on_topic"]["noul"] >= 0.0
            if self.seen[question] > FAILS and on_topic:
                return
            user = question + DEFAULT_FEEDBACK_TEMPLATE.replace("{feedback}", f"- {DEFECT}")
        raise AssertionError("the floor loop should pass on its last attempt")


class HandWritten:
    name = "vendor-SDK loop (AsyncOpenAI + Judge)"

    def __init__(self, url: str, judge: Judge) -> None:
        self.openai, self.judge = openai_client(url), judge

    async def one(self, question: str) -> None:
        user = question
        for _ in range(ATTEMPTS):
            completion = await self.openai.chat.completions.create(
                model=MODEL, messages=[{"role": "user", "content": user}]
            )
            answer = completion.choices[0].message.content or ""
            verdict = await self.judge.evaluate(JudgeInput(f"user: {question}", answer))
            if verdict.passed:
                return
            user = question + DEFAULT_FEEDBACK_TEMPLATE.replace("{feedback}", verdict.feedback)
        raise AssertionError("the vendor-SDK loop should pass on its last attempt")


class Ours:
    name = "jevrefine SelfRefineAdvisor"

    def __init__(self, url: str, judge: Judge) -> None:
        advisor = SelfRefineAdvisor(
            judge,
            max_repeat_attempts=FAILS,
            fail_on_exhausted_attempts=True,
            strategy=SHIPPED_LOOP,
        )
        model = OpenAIChatModel(MODEL, client=openai_client(url))
        self.client = ChatClient(model, advisors=[advisor])

    async def one(self, question: str) -> None:
        response = await self.client.prompt(question).call()
        report = response.context[context_keys.REFINE_REPORT]
        assert report.outcome == "passed", report.outcome
        assert len(report.attempts) == ATTEMPTS, len(report.attempts)


class PydanticAI:
    name = "pydantic-ai output_validator + ModelRetry"

    def __init__(self, url: str, judge: Judge) -> None:
        from pydantic_ai import Agent, ModelRetry, RunContext
        from pydantic_ai.models.openai import OpenAIChatModel as PaiModel
        from pydantic_ai.providers.openai import OpenAIProvider

        model = PaiModel(MODEL, provider=OpenAIProvider(openai_client=openai_client(url)))
        self.agent: Any = Agent(model, retries=FAILS)

        @self.agent.output_validator
        async def judged(ctx: RunContext[None], output: str) -> str:
            verdict = await judge.evaluate(JudgeInput(f"user: {ctx.prompt}", output))
            if not verdict.passed:
                raise ModelRetry(verdict.feedback)
            return output

    async def one(self, question: str) -> None:
        await self.agent.run(question)


class DSPyRefine:
    name = "DSPy Refine (threads)"

    def __init__(self, url: str, judge: Judge) -> None:
        import logging

        import dspy

        # Refine passes JSON strings where its signature says list/float; DSPy warns on every
        # call, which would bury the report (the values still reach the prompt).
        logging.getLogger("dspy").setLevel(logging.ERROR)
        lm = dspy.LM(f"openai/{MODEL}", api_base=url, api_key="bench", cache=False, num_retries=0)
        dspy.configure(lm=lm)

        def reward(args: dict[str, Any], prediction: Any) -> float:
            # DSPy's reward is sync and runs in this worker thread: ask the same (async) judge
            # on the event loop.
            judge_input = JudgeInput(f"user: {args['question']}", prediction.answer)
            verdict = anyio.from_thread.run(judge.evaluate, judge_input)
            return 1.0 if verdict.passed else 0.0

        self.refine = dspy.Refine(
            module=dspy.Predict("question -> answer"), N=ATTEMPTS, reward_fn=reward, threshold=1.0
        )

    async def one(self, question: str) -> None:
        await anyio.to_thread.run_sync(functools.partial(self.refine, question=question))


async def run_many(
    one: Callable[[str], Awaitable[None]], first: int, n: int, concurrency: int
) -> None:
    """Questions `first` … `first + n - 1`, at most `concurrency` at once."""
    indexes = iter(range(first, first + n))

    async def worker() -> None:
        for index in indexes:  # the workers share one iterator
            await one(f"Question number {index}?")

    async with anyio.create_task_group() as group:
        for _ in range(min(concurrency, n)):
            group.start_soon(worker)


async def stats(http: httpx2.AsyncClient, url: str) -> dict[str, int]:
    return (await http.get(url + "/stats")).json()


async def run(args: argparse.Namespace) -> None:
    samples: dict[str, list[dict[str, float]]] = {}
    missing: dict[str, str] = {}
    latency = str(LATENCY)
    with (
        serving("benchmarks._servers", "--latency", latency) as model_url,
        serving("jevrefine.testing._jev_server", "--latency", latency) as jev_url,
    ):
        jev = CountingJudgeClient(JudgeClient("bench", base_url=jev_url, max_concurrency=1000))
        judge = make_judge(jev)
        contenders: list[Any] = [Floor(model_url, jev_url, jev)]
        for kind, package in (
            (HandWritten, None),
            (Ours, None),
            (PydanticAI, "pydantic-ai-slim[openai]"),
            (DSPyRefine, "dspy"),
        ):
            try:
                contenders.append(kind(model_url, judge))
            except ImportError as error:
                missing[kind.name] = f"not installed ({error.name}); pip install {package}"
        async with httpx2.AsyncClient() as http:
            next_question = 0
            for contender in contenders:  # warm-up: connections, imports, caches
                await run_many(contender.one, next_question, args.warmup, args.concurrency)
                next_question += args.warmup
            for round_ in range(args.rounds):
                order = contenders if round_ % 2 == 0 else list(reversed(contenders))
                for contender in order:
                    before, judged = await stats(http, model_url), jev.calls
                    cpu0, wall0 = time.process_time(), time.perf_counter()
                    await run_many(contender.one, next_question, args.n, args.concurrency)
                    wall, cpu = time.perf_counter() - wall0, time.process_time() - cpu0
                    after = await stats(http, model_url)
                    next_question += args.n
                    judge_calls = jev.calls - judged
                    samples.setdefault(contender.name, []).append(
                        {
                            "wall": wall,
                            "cpu": cpu,
                            "cpu_per_attempt": cpu / judge_calls,
                            "model_calls": (after["calls"] - before["calls"]) / args.n,
                            "judge_calls": judge_calls / args.n,
                            "prompt_tokens": (after["prompt_words"] - before["prompt_words"])
                            / args.n,
                        }
                    )
        await jev.inner.aclose()
    report(args, samples, missing)


def _median(rows: list[dict[str, float]], key: str) -> float:
    return statistics.median(r[key] for r in rows)


def report(
    args: argparse.Namespace, samples: dict[str, list[dict[str, float]]], missing: dict[str, str]
) -> None:
    floor, hand = samples[Floor.name], samples[HandWritten.name]
    latency_bound = math.ceil(args.n / args.concurrency) * ATTEMPTS * 2 * LATENCY
    cpu_floor = _median(floor, "cpu")
    ideal = max(latency_bound, cpu_floor)
    decided_by = "the latency" if latency_bound >= cpu_floor else "the CPU floor"
    hand_wall = _median(hand, "wall")
    floor_cpu_attempt = _median(floor, "cpu_per_attempt")
    lines = [
        "## The judge-and-retry loop: fail, fail, pass",
        "",
        f"{args.n} questions per round at concurrency {args.concurrency}, each failing the judge "
        f"twice then passing; fake OpenAI and Jev servers in their own processes, "
        f"{LATENCY * 1000:.0f} ms latency each; {args.rounds} alternating round(s), medians; "
        f"load average {load_average()} at the end. "
        f"Tokens are the prompt words the model server received. Ideal = max(latency bound "
        f"{latency_bound:.2f} s, floor CPU {cpu_floor:.2f} s) = **{ideal:.2f} s**, "
        f"decided by {decided_by}. Command: `python -m benchmarks.bench_judge_loop"
        f"{' --quick' if args.quick else ''}`.",
        "",
        "| contender | wall (s) | wall / ideal | wall / vendor-SDK | CPU per attempt | "
        "CPU / floor | model calls / question | judge calls / question | "
        "prompt tokens / question |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for name, rows in samples.items():
        wall = _median(rows, "wall")
        cpu_attempt = _median(rows, "cpu_per_attempt")
        lines.append(
            f"| {name} | {wall:.2f} | {wall / ideal:.2f}× | {wall / hand_wall:.2f}× "
            f"| {cpu_attempt * 1e6:,.0f} µs | {cpu_attempt / floor_cpu_attempt:.2f}× "
            f"| {_median(rows, 'model_calls'):.1f} | {_median(rows, 'judge_calls'):.1f} "
            f"| {_median(rows, 'prompt_tokens'):,.0f} |"
        )
    for name, reason in missing.items():
        lines.append(f"| {name} | skipped: {reason} | | | | | | | |")
    ours = samples[Ours.name]
    ours_cpu = _median(ours, "cpu_per_attempt")
    lines += [
        "",
        f"- jevrefine / vendor-SDK loop: wall **{_median(ours, 'wall') / hand_wall:.2f}×**, "
        f"CPU per attempt **{ours_cpu / _median(hand, 'cpu_per_attempt'):.2f}×** (target ≤ "
        f"1.10×; the wall ratio is latency-bound here, the CPU ratio is the framework's cost).",
        f"- jevrefine / ideal: wall {_median(ours, 'wall') / ideal:.2f}×; CPU per attempt "
        f"{ours_cpu / floor_cpu_attempt:.2f}× the floor's ({floor_cpu_attempt * 1e6:,.0f} µs).",
    ]
    figures = [
        figure(
            "judge_loop_wall",
            f"Judge-and-retry loop: wall time for {args.n} questions (fail, fail, pass)",
            "seconds",
            [bar(name, [r["wall"] for r in rows]) for name, rows in samples.items()],
            ideal=ideal,
            ideal_label=f"ideal ({decided_by})",
        ),
        figure(
            "judge_loop_cpu",
            "Judge-and-retry loop: client CPU per attempt",
            "µs per attempt",
            [
                bar(name, [r["cpu_per_attempt"] for r in rows], scale=1e6)
                for name, rows in samples.items()
            ],
        ),
        figure(
            "judge_loop_tokens",
            "Judge-and-retry loop: prompt tokens sent per question (3 attempts)",
            "prompt tokens (words) per question",
            [bar(name, [r["prompt_tokens"] for r in rows]) for name, rows in samples.items()],
        ),
    ]
    data = {
        "n": args.n,
        "concurrency": args.concurrency,
        "rounds": args.rounds,
        "latency": LATENCY,
        "latency_bound": latency_bound,
        "cpu_floor": cpu_floor,
        "load_average": load_average(),
        "ideal": ideal,
        "samples": samples,
        "skipped": missing,
    }
    emit("\n".join(lines), data, figures)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a few questions, one round")
    args = parser.parse_args(argv)
    args.concurrency = 10
    if args.quick:
        args.n, args.rounds, args.warmup = 10, 1, 2
    else:
        args.n, args.rounds, args.warmup = 100, 5, 10
    args.quick = bool(args.quick)
    anyio.run(run, args)


if __name__ == "__main__":
    main()
