"""Self-refine at scale: refinements that fail once then pass, against the ideal.

Each refinement is two attempts; each attempt is one chat completion on `FakeOpenAIServer` and
one System One call on `FakeJevServer`, both with 50 ms injected latency, both servers in
separate processes so the CPU measured here is the client's alone. The judge's code check fails
the first draft (it lacks the retry's feedback) and passes the second; its one Jev question is
asked on every attempt.

The ideal is max(latency bound, CPU floor): the latency bound is batches x critical path
(ceil(N / concurrency) x 2 attempts x 2 calls x 50 ms); the CPU floor is the CPU time of the
same calls made by `benchmarks._floor.FloorClient` (asyncio streams, hand-parsed HTTP/1.1
keep-alive, no framework), measured in the same run. The hand-written `openai` + `httpx2` loop
that an earlier round called the floor is the "vendor-SDK loop" here: it pays the SDK's layers
and httpx's pool probing, so it is what a user writes without jevrefine, not a floor. The
contenders alternate round by round; the headline states jevrefine's wall against the ideal
and its CPU against the floor's.

    python -m benchmarks.bench_refine            # 1,000 refinements, 3 rounds
    python -m benchmarks.bench_refine --quick    # 300 refinements, 1 round
"""

from __future__ import annotations

import argparse
import math
import statistics
import time
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import httpx2
from openai import AsyncOpenAI, DefaultAsyncHttpxClient

from jevrefine import ChatClient, SelfRefineAdvisor, context_keys
from jevrefine.advisors.self_refine import DEFAULT_FEEDBACK_TEMPLATE
from jevrefine.jev import JudgeClient, Noul
from jevrefine.judge import Judge, JudgeInput, check, noul
from jevrefine.models.openai import OpenAIChatModel

from ._floor import FloorClient
from ._harness import bar, emit, figure, load_average
from ._loop import SHIPPED_LOOP
from ._servers import serving

LATENCY = 0.05
MODEL = "fake-model"
MARK = "broke"  # a word of the feedback section: the retry's echo carries it, the first not
QUESTION = Noul("Does `assistant_answer` respond to `user_question`?", when_false="Off topic")
DEFECT = "The answer does not acknowledge the review"


def _revised(judge_input: JudgeInput) -> bool:
    return MARK in judge_input.assistant_answer


async def run_many(one: Callable[[int], Awaitable[None]], n: int, concurrency: int) -> None:
    """`n` refinements, at most `concurrency` at once (workers pulling from a counter)."""
    next_index = 0

    async def worker() -> None:
        nonlocal next_index
        while next_index < n:
            index = next_index
            next_index += 1
            await one(index)

    async with anyio.create_task_group() as group:
        for _ in range(min(concurrency, n)):
            group.start_soon(worker)


async def measure(
    one: Callable[[int], Awaitable[None]], n: int, concurrency: int
) -> tuple[float, float]:
    """(wall seconds, CPU seconds) of `n` refinements."""
    cpu0, wall0 = time.process_time(), time.perf_counter()
    await run_many(one, n, concurrency)
    return time.perf_counter() - wall0, time.process_time() - cpu0


def openai_client(url: str, timeout: float = 30.0) -> AsyncOpenAI:
    """The official client, its pool sized for the concurrency (the same for every contender).

    With the default 100 keep-alive connections, 200 concurrent callers would reconnect on every
    wave: that measures TCP handshakes, not the clients.
    """
    limits = httpx2.Limits(max_connections=1000, max_keepalive_connections=1000)
    http = DefaultAsyncHttpxClient(limits=limits, timeout=timeout)
    return AsyncOpenAI(api_key="bench", base_url=url, max_retries=0, http_client=http)


class Floor:
    """The CPU floor: the same calls and the same logic on `FloorClient`, no framework."""

    def __init__(self, openai_url: str, jev_url: str) -> None:
        headers = {"authorization": "Bearer bench"}
        self.model = FloorClient(openai_url, headers=headers)
        self.jev = FloorClient(jev_url, headers=headers)
        self.questions = {"on_topic": QUESTION.to_wire()}
        self.passed = 0

    async def one(self, index: int) -> None:
        question = f"Question number {index}?"
        user = question
        for _ in range(2):
            body = {
                "model": MODEL,
                "messages": [{"role": "user", "content": user}],
                "max_tokens": 64,
            }
            completion = await self.model.post("/chat/completions", body)
            answer = completion["choices"][0]["message"]["content"] or ""
            state = {"user_question": f"user: {question}", "assistant_answer": answer}
            judged = await self.jev.post(
                "/v1/systemone",
                {"state": state, "model": "jev-latest", "questions": self.questions},
            )
            if MARK in answer and judged["answers"]["on_topic"]["noul"] >= 0.0:
                self.passed += 1
                return
            feedback = f"- not_revised: {DEFECT}"
            user = question + DEFAULT_FEEDBACK_TEMPLATE.replace("{feedback}", feedback)
        raise AssertionError("the floor loop should pass on its second attempt")

    async def aclose(self) -> None:
        await self.model.aclose()
        await self.jev.aclose()


class Raw:
    """The vendor-SDK loop: the same calls with `openai` and `httpx2`, no framework.

    `timeout`: seconds per HTTP operation for both clients (default: 30 s for the model, 10 s
    for the judge, as `Ours` has them).
    """

    def __init__(self, openai_url: str, jev_url: str, *, timeout: float | None = None) -> None:
        self.openai = openai_client(openai_url, timeout or 30.0)
        limits = httpx2.Limits(max_connections=1000, max_keepalive_connections=1000)
        self.http = httpx2.AsyncClient(limits=limits, timeout=timeout or 10.0)
        self.jev_url = jev_url + "/v1/systemone"
        self.questions = {"on_topic": QUESTION.to_wire()}
        self.passed = 0

    async def judge(self, question: str, answer: str) -> bool:
        body = {
            "state": {"user_question": f"user: {question}", "assistant_answer": answer},
            "model": "jev-latest",
            "questions": self.questions,
        }
        response = await self.http.post(
            self.jev_url, json=body, headers={"authorization": "Bearer bench"}
        )
        response.raise_for_status()
        answers = response.json()["answers"]
        return MARK in answer and answers["on_topic"]["noul"] >= 0.0

    async def one(self, index: int) -> None:
        question = f"Question number {index}?"
        user = question
        for _ in range(2):
            completion = await self.openai.chat.completions.create(
                model=MODEL, messages=[{"role": "user", "content": user}], max_tokens=64
            )
            answer = completion.choices[0].message.content or ""
            if await self.judge(question, answer):
                self.passed += 1
                return
            feedback = f"- not_revised: {DEFECT}"
            user = question + DEFAULT_FEEDBACK_TEMPLATE.replace("{feedback}", feedback)
        raise AssertionError("the vendor-SDK loop should pass on its second attempt")

    async def aclose(self) -> None:
        await self.openai.close()
        await self.http.aclose()


class Bare(Raw):
    """The vendor-SDK loop, with the Jev call made by jevrefine's `JudgeClient`.

    No ChatClient, advisor or Judge: the difference to `Ours` is the framework's own CPU.
    """

    def __init__(self, openai_url: str, jev_url: str, *, timeout: float | None = None) -> None:
        super().__init__(openai_url, jev_url, timeout=timeout)
        self.jev = JudgeClient("bench", base_url=jev_url, max_concurrency=1000)

    async def judge(self, question: str, answer: str) -> bool:
        state = {"user_question": f"user: {question}", "assistant_answer": answer}
        response = await self.jev.system_one(state, {"on_topic": QUESTION})
        return MARK in answer and response.noul("on_topic").noul >= 0.0

    async def aclose(self) -> None:
        await super().aclose()
        await self.jev.aclose()


class Ours:
    """jevrefine: ChatClient + SelfRefineAdvisor(Judge(JudgeClient)) on OpenAIChatModel.

    The adapter builds its own client from `base_url=` and `api_key=`, as the docs show and a
    batch would: that is the client on the lean keep-alive transport. (Until issue 23's third
    pass it was handed the vendor-SDK loop's `AsyncOpenAI`, whose httpx pool scans every idle
    connection per request: at 1,000 in flight that measured the pool, not jevrefine.)

    `timeout`: as for `Raw`.
    """

    def __init__(self, openai_url: str, jev_url: str, *, timeout: float | None = None) -> None:
        judge_timeout = timeout or 10.0
        self.model = OpenAIChatModel(
            MODEL, base_url=openai_url, api_key="bench", max_retries=0, timeout=timeout or 30.0
        )
        self.jev = JudgeClient(
            "bench",
            base_url=jev_url,
            max_concurrency=1000,
            timeout=judge_timeout,
            total_timeout=max(30.0, 3 * judge_timeout),
        )
        judge = Judge(
            self.jev,
            [
                check("not_revised", _revised, defect=DEFECT),
                noul("on_topic", QUESTION, minimum=0.0),
            ],
        )
        advisor = SelfRefineAdvisor(
            judge,
            max_repeat_attempts=1,
            fail_on_exhausted_attempts=True,
            strategy=SHIPPED_LOOP,
        )
        self.client = ChatClient(self.model, advisors=[advisor])
        self.passed = 0

    async def one(self, index: int) -> None:
        response = (
            await self.client.prompt(f"Question number {index}?").options(max_tokens=64).call()
        )
        report = response.context[context_keys.REFINE_REPORT]
        assert report.outcome == "passed", report.outcome
        assert len(report.attempts) == 2
        self.passed += 1

    async def aclose(self) -> None:
        await self.model.aclose()
        await self.jev.aclose()


async def run(args: argparse.Namespace) -> None:
    latency = str(LATENCY)
    with (
        serving("jevrefine.testing._openai_server", "--latency", latency) as openai_url,
        serving("jevrefine.testing._jev_server", "--latency", latency) as jev_url,
    ):
        contenders: dict[str, Any] = {
            "floor": Floor(openai_url, jev_url),
            "vendor-SDK loop": Raw(openai_url, jev_url),
            "bare": Bare(openai_url, jev_url),
            "jevrefine": Ours(openai_url, jev_url),
        }
        for contender in contenders.values():  # warm-up: connections, imports, caches
            await measure(contender.one, args.warmup, args.concurrency)
        results: dict[str, list[tuple[float, float]]] = {name: [] for name in contenders}
        for round_ in range(args.rounds):
            order = list(contenders) if round_ % 2 == 0 else list(reversed(contenders))
            for name in order:
                results[name].append(await measure(contenders[name].one, args.n, args.concurrency))
        for contender in contenders.values():
            await contender.aclose()

    n, concurrency = args.n, args.concurrency
    attempts = 2 * n
    latency_bound = math.ceil(n / concurrency) * 2 * 2 * LATENCY

    def wall(name: str) -> float:
        return statistics.median(w for w, _ in results[name])

    def cpu(name: str) -> float:
        return statistics.median(c for _, c in results[name])

    floor_cpu = cpu("floor")
    ideal = max(latency_bound, floor_cpu)
    decided_by = "the latency" if latency_bound >= floor_cpu else "the CPU floor"
    framework_cpu = (cpu("jevrefine") - cpu("bare")) / attempts
    lines: list[str] = []
    lines.append("## bench_refine: self-refine at scale")
    lines.append("")
    lines.append(
        f"{n:,} refinements failing once then passing (2 attempts, 4 HTTP calls each) on "
        f"FakeOpenAIServer + FakeJevServer, {LATENCY * 1000:.0f} ms latency each, servers in "
        f"separate processes; concurrency {concurrency}; {args.rounds} alternating round(s), "
        f"medians; load average {load_average()} at the start. Command: "
        f"`python -m benchmarks.bench_refine{' --quick' if args.quick else ''}`."
    )
    lines.append("")
    lines.append("| | wall (s) | CPU (s) | wall / ideal | CPU / floor |")
    lines.append("|---|---:|---:|---:|---:|")
    lines.append(f"| latency bound (batches x critical path) | {latency_bound:.2f} | | | |")
    lines.append(
        f"| CPU floor (FloorClient: asyncio streams, hand-parsed HTTP/1.1) | | "
        f"{floor_cpu:.2f} | | 1.00x |"
    )
    lines.append(f"| **ideal** = max of the two ({decided_by}) | {ideal:.2f} | | 1.00x | |")
    labels = {
        "floor": "floor loop (its wall)",
        "vendor-SDK loop": "vendor-SDK loop (openai + httpx2)",
        "bare": "bare loop (openai + jevrefine JudgeClient)",
        "jevrefine": "**jevrefine**",
    }
    for name, label in labels.items():
        lines.append(
            f"| {label} | {wall(name):.2f} | {cpu(name):.2f} | {wall(name) / ideal:.2f}x | "
            f"{cpu(name) / floor_cpu:.2f}x |"
        )
    lines.append("")
    lines.append(
        f"Headline: jevrefine wall **{wall('jevrefine') / ideal:.2f}x** the ideal, CPU "
        f"**{cpu('jevrefine') / floor_cpu:.2f}x** the floor's "
        f"({cpu('jevrefine') / attempts * 1e6:,.0f} µs against {floor_cpu / attempts * 1e6:,.0f}"
        f" µs per attempt). Against the vendor-SDK loop: wall "
        f"{wall('jevrefine') / wall('vendor-SDK loop'):.2f}x, CPU "
        f"{cpu('jevrefine') / cpu('vendor-SDK loop'):.2f}x. Framework CPU per attempt "
        f"(ChatClient + SelfRefineAdvisor + Judge: jevrefine CPU - bare loop CPU, per attempt): "
        f"{framework_cpu * 1e6:,.0f} µs. Target: jevrefine wall <= 1.1x the ideal."
    )
    figures = [
        figure(
            "refine_wall",
            f"Self-refine at scale: {n:,} refinements, concurrency {concurrency} (wall time)",
            "seconds",
            [bar(name, [w for w, _ in values]) for name, values in results.items()],
            ideal=ideal,
            ideal_label="ideal = max(latency bound, CPU floor)",
        )
    ]
    data = {
        "n": n,
        "concurrency": concurrency,
        "rounds": args.rounds,
        "latency_bound": latency_bound,
        "cpu_floor": floor_cpu,
        "load_average": load_average(),
        "ideal": ideal,
        "framework_cpu_per_attempt": framework_cpu,
        "samples": {name: [{"wall": w, "cpu": c} for w, c in v] for name, v in results.items()},
    }
    emit("\n".join(lines), data, figures)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="300 refinements, one round")
    args = parser.parse_args()
    args.concurrency = 200
    if args.quick:
        args.n, args.rounds, args.warmup = 300, 1, 100
    else:
        args.n, args.rounds, args.warmup = 1000, 3, 200
    anyio.run(run, args)


if __name__ == "__main__":
    main()
