"""Client CPU per model call: the OpenAI SDK's request paths, the lean transport, and the floor.

One chat completion at a time (and then 200 in flight) on `FakeOpenAIServer`, zero latency, in
its own process, so the CPU measured here is the client's alone. Contenders, alternating round
by round (`_harness.interleaved`):

- `floor`: `FloorClient` (asyncio streams, hand-parsed HTTP/1.1): the least a client can spend;
- `AsyncOpenAI, httpx pool`: `chat.completions.create` on the SDK's default HTTP client, whose
  pool `poll()`s every idle connection on each request;
- `AsyncOpenAI, lean transport`: the same call with jevrefine's `KeepAliveTransport` mounted
  under the SDK's default client (what the adapters build since issue 23);
- `AsyncOpenAI raw response, lean`: `chat.completions.with_raw_response.create`, the body decoded
  with `json.loads` (skips the SDK's response models, keeps its params transform);
- `AsyncOpenAI.post, lean`: the SDK's low-level `post("/chat/completions", cast_to=httpx2.Response)`
  (skips the params transform and the models; keeps auth headers, retries, error types);
- `httpx2 + lean transport`: `httpx2.AsyncClient.post(json=...)` on the lean transport, no SDK;
- `OpenAIChatModel` (jevrefine): the adapter's `call()`, as shipped;
- `JudgeClient.system_one` against `FloorClient` posting the same body, on `FakeJevServer`.

The same for Anthropic's Messages API on `FakeAnthropicServer` (one `POST /v1/messages`):

- `floor (Anthropic)`: `FloorClient` posting the same body with the same key header;
- `AsyncAnthropic, httpx pool`: `messages.create` on the SDK's default HTTP client;
- `AsyncAnthropic, lean transport`: the same call with `KeepAliveTransport` mounted under it;
- `AnthropicChatModel.call, SDK create`: the adapter on `messages.create` (its path before the
  lean request, and still its path with `client=`, a proxy or another auth mode);
- `AnthropicChatModel.call (jevrefine)`: the adapter's `call()`, as shipped: the lean request.

At 200 in flight every contender has its pool filled with 200 connections first, so the pool's
scan shows. Then `refine_many` at zero latency (model + Jev judge per item): pairs per second and
client CPU per pair, beside `FloorClient` making the same two calls per item at the same
concurrency (its pairs per second is what the fake servers answer on this machine: the ceiling).
Every number is CPU time (`time.process_time`), the load average beside it.

    python -m benchmarks.bench_adapter_cpu [--quick]
"""

from __future__ import annotations

import argparse
import itertools
import json
import statistics
import time
from collections.abc import Awaitable, Callable
from typing import Any

import anthropic
import anyio
import httpx2
from openai import AsyncOpenAI, DefaultAsyncHttpxClient

import jevrefine as jr
from jevrefine._http import KeepAliveTransport
from jevrefine._http._vendor_anthropic import anthropic_wire
from jevrefine.jev import JudgeClient, Noul
from jevrefine.jev.client import DEFAULT_MODEL
from jevrefine.judge import Judge, noul
from jevrefine.models.anthropic import AnthropicChatModel
from jevrefine.models.openai import OpenAIChatModel
from jevrefine.testing import FakeAnthropicServer
from jevrefine.testing._http import serve_until_stdin_closes

from ._floor import FloorClient
from ._harness import bar, emit, figure, interleaved, load_average
from ._loop import SHIPPED_LOOP
from ._servers import serving

MODEL = "fake-model"
MESSAGES = [{"role": "user", "content": "What is the weather in Paris?"}]
BODY = {"model": MODEL, "messages": MESSAGES}
STATE = {"user_question": "user: What is the weather?", "assistant_answer": "Sunny, 21 C."}
QUESTIONS = {"on_topic": Noul("Does `assistant_answer` respond to `user_question`?")}

Call = Callable[[], Awaitable[Any]]


def _lean(pool: int) -> KeepAliveTransport:
    return KeepAliveTransport(max_connections=pool, keepalive_expiry=60.0, per_read_timeout=True)


def contenders(url: str, pool: int) -> tuple[dict[str, Call], list[Any]]:
    """The model-call contenders on the server at `url`, and what to close afterwards."""
    limits = httpx2.Limits(max_connections=pool, max_keepalive_connections=pool)
    origin = url.rsplit("/v1", 1)[0]
    default = AsyncOpenAI(
        api_key="sk-bench", base_url=url, max_retries=0,
        http_client=DefaultAsyncHttpxClient(limits=limits),
    )  # fmt: skip
    lean = AsyncOpenAI(
        api_key="sk-bench", base_url=url, max_retries=0,
        http_client=DefaultAsyncHttpxClient(limits=limits, mounts={origin: _lean(pool)}),
    )  # fmt: skip
    plain = httpx2.AsyncClient(transport=_lean(pool), headers={"authorization": "Bearer sk-b"})
    floor = FloorClient(url, headers={"authorization": "Bearer sk-bench"})
    adapter = OpenAIChatModel(MODEL, base_url=url, api_key="sk-bench", max_retries=0)
    client = jr.ChatClient(adapter)
    prompt = jr.Prompt((jr.UserMessage(MESSAGES[0]["content"]),))

    async def floor_call() -> Any:
        return await floor.post("/chat/completions", BODY)

    async def sdk_default() -> Any:
        return await default.chat.completions.create(model=MODEL, messages=MESSAGES)  # type: ignore[arg-type]

    async def sdk_lean() -> Any:
        return await lean.chat.completions.create(model=MODEL, messages=MESSAGES)  # type: ignore[arg-type]

    async def sdk_raw() -> Any:
        raw = await lean.chat.completions.with_raw_response.create(
            model=MODEL,
            messages=MESSAGES,  # type: ignore[arg-type]
        )
        return json.loads(raw.http_response.content)

    async def sdk_post() -> Any:
        response = await lean.post("/chat/completions", body=BODY, cast_to=httpx2.Response)
        return json.loads(response.content)

    async def httpx_lean() -> Any:
        response = await plain.post(url + "/chat/completions", json=BODY)
        return response.json()

    async def ours() -> Any:
        return await adapter.call(prompt)

    async def ours_client() -> Any:
        return await client.prompt(MESSAGES[0]["content"]).call()

    calls: dict[str, Call] = {
        "floor": floor_call,
        "AsyncOpenAI, httpx pool": sdk_default,
        "AsyncOpenAI, lean transport": sdk_lean,
        "AsyncOpenAI raw response, lean": sdk_raw,
        "AsyncOpenAI.post, lean": sdk_post,
        "httpx2 + lean transport": httpx_lean,
        "OpenAIChatModel.call (jevrefine)": ours,
        "ChatClient + OpenAIChatModel (jevrefine)": ours_client,
    }
    return calls, [default, lean, plain, floor, adapter]


ANTHROPIC_MODEL = "fake-claude"
ANTHROPIC_BODY = {"max_tokens": 1024, "messages": MESSAGES, "model": ANTHROPIC_MODEL}
"""What `AnthropicChatModel` sends for the prompt (the SDK's key order)."""


def anthropic_contenders(url: str, pool: int) -> tuple[dict[str, Call], list[Any]]:
    """The Messages API contenders on the `FakeAnthropicServer` at `url`; what to close after."""
    limits = httpx2.Limits(max_connections=pool, max_keepalive_connections=pool)
    key = "sk-ant-bench-0123456789"
    default = anthropic.AsyncAnthropic(
        api_key=key, base_url=url, max_retries=0, open_telemetry=False,
        http_client=anthropic.DefaultAsyncHttpxClient(limits=limits),
    )  # fmt: skip
    lean = anthropic.AsyncAnthropic(
        api_key=key, base_url=url, max_retries=0, open_telemetry=False,
        http_client=anthropic.DefaultAsyncHttpxClient(limits=limits, mounts={url: _lean(pool)}),
    )  # fmt: skip
    floor = FloorClient(url, headers={"authorization": f"Bearer {key}"})
    adapter = AnthropicChatModel(ANTHROPIC_MODEL, base_url=url, api_key=key, max_retries=0)
    assert adapter._wire.path == "lean", "the adapter did not take its lean request"
    on_sdk = AnthropicChatModel(ANTHROPIC_MODEL, base_url=url, api_key=key, max_retries=0)
    # The SDK's public `create`, on the adapter's own client: the wire an adapter gets when the
    # lean path is not taken (no keep-alive core to send through).
    on_sdk._wire = anthropic_wire(on_sdk._client, None, max_retries=0)
    prompt = jr.Prompt((jr.UserMessage(MESSAGES[0]["content"]),))

    async def floor_call() -> Any:
        return await floor.post("/v1/messages", ANTHROPIC_BODY)

    async def sdk_default() -> Any:
        return await default.messages.create(**ANTHROPIC_BODY)  # type: ignore[arg-type]

    async def sdk_lean() -> Any:
        return await lean.messages.create(**ANTHROPIC_BODY)  # type: ignore[arg-type]

    async def ours_on_sdk() -> Any:
        return await on_sdk.call(prompt)

    async def ours() -> Any:
        return await adapter.call(prompt)

    calls: dict[str, Call] = {
        "floor (Anthropic)": floor_call,
        "AsyncAnthropic, httpx pool": sdk_default,
        "AsyncAnthropic, lean transport": sdk_lean,
        "AnthropicChatModel.call, SDK create": ours_on_sdk,
        "AnthropicChatModel.call (jevrefine)": ours,
    }
    return calls, [default, lean, floor, adapter, on_sdk]


async def per_call(
    calls: dict[str, Call], args: argparse.Namespace
) -> tuple[dict[str, Any], dict[str, list[float]]]:
    """CPU per call of each contender: one at a time (interleaved rounds), then in flight."""
    sequential = await interleaved(
        calls, rounds=args.rounds, ops_per_round=args.ops, warmup=args.warmup
    )
    concurrent: dict[str, list[float]] = {name: [] for name in calls}
    for call in calls.values():  # fill every pool to the concurrency first
        await in_flight(call, args.concurrency * 2, args.concurrency)
    for round_ in range(args.rounds):
        order = list(calls) if round_ % 2 == 0 else list(reversed(calls))
        for name in order:
            _, cpu = await in_flight(calls[name], args.concurrency * 4, args.concurrency)
            concurrent[name].append(cpu)
    return sequential, concurrent


async def _close(things: list[Any]) -> None:
    for thing in things:
        for name in ("aclose", "close"):
            method = getattr(thing, name, None)
            if method is not None:
                await method()
                break


async def in_flight(call: Call, n: int, concurrency: int) -> tuple[float, float]:
    """(wall, CPU) seconds per call for `n` calls, `concurrency` at once."""
    remaining = n

    async def worker() -> None:
        nonlocal remaining
        while remaining > 0:
            remaining -= 1
            await call()

    cpu0, wall0 = time.process_time(), time.perf_counter()
    async with anyio.create_task_group() as group:
        for _ in range(concurrency):
            group.start_soon(worker)
    return (time.perf_counter() - wall0) / n, (time.process_time() - cpu0) / n


async def refine_pairs(model_url: str, jev_url: str, n: int, concurrency: int) -> dict[str, float]:
    """`refine_many` at zero latency, one model call and one judge call per item."""
    async with (
        OpenAIChatModel(MODEL, base_url=model_url, api_key="sk-bench", max_retries=0) as model,
        JudgeClient("jev-bench", base_url=jev_url, max_concurrency=concurrency) as jev,
    ):
        judge = Judge(jev, [noul("on_topic", QUESTIONS["on_topic"], 0.0)])
        client = jr.ChatClient(
            model,
            advisors=[jr.SelfRefineAdvisor(judge, max_repeat_attempts=1, strategy=SHIPPED_LOOP)],
        )
        prompts = [f"question {i}" for i in range(n)]
        await jr.refine_many(client, prompts[: min(n, concurrency * 2)], concurrency=concurrency)
        cpu0, wall0 = time.process_time(), time.perf_counter()
        results = await jr.refine_many(client, prompts, concurrency=concurrency)
        wall, cpu = time.perf_counter() - wall0, time.process_time() - cpu0
    assert all(r.ok for r in results), [r.error for r in results if not r.ok][:3]
    return {"pairs_per_s": n / wall, "cpu_per_pair": cpu / n, "wall": wall, "cpu": cpu}


async def floor_pairs(model_url: str, jev_url: str, n: int, concurrency: int) -> dict[str, float]:
    """The same pairs by `FloorClient`: the model's POST, then the judge's, per item.

    Its pairs per second is what the two fake servers (in their processes, on the cores this
    client leaves them) can answer: the throughput ceiling `refine_many` is read against.
    """
    model = FloorClient(model_url, headers={"authorization": "Bearer sk-bench"})
    jev = FloorClient(jev_url, headers={"authorization": "Bearer jev-bench"})
    questions = {k: q.to_wire() for k, q in QUESTIONS.items()}
    model_name = DEFAULT_MODEL  # what JudgeClient sends when none is given
    numbers = itertools.count()  # each pair its own question, as in `refine_pairs`

    async def pair() -> None:
        i = next(numbers)
        body = {"model": MODEL, "messages": [{"role": "user", "content": f"question {i}"}]}
        answer = await model.post("/chat/completions", body)
        text = answer["choices"][0]["message"]["content"]
        state = {"user_question": f"question {i}", "assistant_answer": text}
        wire = {"state": state, "model": model_name, "questions": questions}
        await jev.post("/v1/systemone", wire)

    await in_flight(pair, min(n, concurrency * 2), concurrency)
    wall, cpu = await in_flight(pair, n, concurrency)  # seconds per pair
    await model.aclose()
    await jev.aclose()
    return {"pairs_per_s": 1 / wall, "cpu_per_pair": cpu, "wall": wall * n, "cpu": cpu * n}


async def run(args: argparse.Namespace) -> None:
    data: dict[str, Any] = {"load_average_start": load_average()}
    with (
        serving("jevrefine.testing._openai_server") as url,
        serving("jevrefine.testing._jev_server") as jev_url,
    ):
        calls, closing = contenders(url, pool=args.concurrency)
        sequential, concurrent = await per_call(calls, args)
        await _close(closing)
        with serving("benchmarks.bench_adapter_cpu", "--serve-anthropic") as anthropic_url:
            calls, closing = anthropic_contenders(anthropic_url, pool=args.concurrency)
            anthropic_calls = await per_call(calls, args)
            await _close(closing)

        jev = JudgeClient("jev-bench", base_url=jev_url, max_concurrency=args.concurrency)
        floor = FloorClient(jev_url, headers={"authorization": "Bearer jev-bench"})
        wire = {
            "state": STATE,
            "model": jev.model,
            "questions": {k: q.to_wire() for k, q in QUESTIONS.items()},
        }

        async def judge_call() -> Any:
            return await jev.system_one(STATE, QUESTIONS)

        async def judge_floor() -> Any:
            return await floor.post("/v1/systemone", wire)

        judges = await interleaved(
            {"floor (Jev)": judge_floor, "JudgeClient.system_one": judge_call},
            rounds=args.rounds,
            ops_per_round=args.ops,
            warmup=args.warmup,
        )
        await jev.aclose()
        await floor.aclose()
        pairs = await refine_pairs(url, jev_url, args.pairs, args.pair_concurrency)
        pairs_floor = await floor_pairs(url, jev_url, args.pairs, args.pair_concurrency)
    data["load_average_end"] = load_average()
    report(args, sequential, concurrent, judges, (pairs, pairs_floor), data, anthropic_calls)


def _rows(sequential: dict[str, Any], concurrent: dict[str, list[float]], floor: str) -> list[str]:
    floor_cpu = statistics.median(sequential[floor].cpu_per_op)
    floor_conc = statistics.median(concurrent[floor])
    lines = []
    for name, measurement in sequential.items():
        cpu = statistics.median(measurement.cpu_per_op)
        conc = statistics.median(concurrent[name])
        lines.append(
            f"| {name} | {cpu * 1e6:,.0f} µs | {cpu / floor_cpu:.1f}× | {conc * 1e6:,.0f} µs | "
            f"{conc / floor_conc:.1f}× |"
        )
    return lines


def report(
    args: argparse.Namespace,
    sequential: dict[str, Any],
    concurrent: dict[str, list[float]],
    judges: dict[str, Any],
    both_pairs: tuple[dict[str, float], dict[str, float]],
    data: dict[str, Any],
    anthropic_calls: tuple[dict[str, Any], dict[str, list[float]]],
) -> None:
    pairs, pairs_floor = both_pairs
    lines = [
        "## Client CPU per model call: the SDK's request paths, the lean transport, the floor",
        "",
        f"One chat completion on `FakeOpenAIServer` (zero latency, its own process); "
        f"{args.rounds} alternating rounds of {args.ops} calls at concurrency 1, and of "
        f"{args.concurrency * 4} calls at concurrency {args.concurrency} (pools filled to "
        f"{args.concurrency} connections first); medians of this process's CPU time. Load "
        f"average {data['load_average_start']} at the start, {data['load_average_end']} at the "
        f"end. Command: `python -m benchmarks.bench_adapter_cpu"
        f"{' --quick' if args.quick else ''}`.",
        "",
    ]
    table_head = [
        f"| contender | CPU per call, 1 in flight | / floor | CPU per call, "
        f"{args.concurrency} in flight | / floor |",
        "|---|---:|---:|---:|---:|",
    ]
    a_sequential, a_concurrent = anthropic_calls
    lines += [
        *table_head,
        *_rows(sequential, concurrent, "floor"),
        "",
        "The same on `FakeAnthropicServer` (`POST /v1/messages`, the same prompt):",
        "",
        *table_head,
        *_rows(a_sequential, a_concurrent, "floor (Anthropic)"),
    ]
    judge_floor = statistics.median(judges["floor (Jev)"].cpu_per_op)
    judge_cpu = statistics.median(judges["JudgeClient.system_one"].cpu_per_op)
    adapter = statistics.median(sequential["OpenAIChatModel.call (jevrefine)"].cpu_per_op)
    a_adapter = statistics.median(a_sequential["AnthropicChatModel.call (jevrefine)"].cpu_per_op)
    a_before = statistics.median(a_sequential["AnthropicChatModel.call, SDK create"].cpu_per_op)
    lines += [
        "",
        f"- JudgeClient.system_one: **{judge_cpu * 1e6:,.0f} µs** CPU per call (floor "
        f"{judge_floor * 1e6:,.0f} µs, {judge_cpu / judge_floor:.1f}×; target ≤ 150 µs).",
        f"- OpenAIChatModel.call: **{adapter * 1e6:,.0f} µs** CPU per call (target ≤ 400 µs).",
        f"- AnthropicChatModel.call: **{a_adapter * 1e6:,.0f} µs** CPU per call on the lean "
        f"request, {a_before * 1e6:,.0f} µs on `messages.create`.",
        f"- `refine_many`, {args.pairs:,} items at concurrency {args.pair_concurrency}, zero "
        f"latency, one model and one Jev call each: **{pairs['pairs_per_s']:,.0f} pairs/s**, "
        f"{pairs['cpu_per_pair'] * 1e6:,.0f} µs client CPU per pair (target ≥ 2,000 pairs/s); "
        f"the floor client, same pairs: {pairs_floor['pairs_per_s']:,.0f} pairs/s, "
        f"{pairs_floor['cpu_per_pair'] * 1e6:,.0f} µs per pair (what the fake servers answer "
        f"here: `refine_many` at {pairs['pairs_per_s'] / pairs_floor['pairs_per_s']:.2f}× its "
        f"throughput, {pairs['cpu_per_pair'] / pairs_floor['cpu_per_pair']:.1f}× its CPU).",
    ]
    figures = [
        figure(
            "adapter_cpu",
            "Client CPU per model call, one at a time (zero latency)",
            "µs per call",
            [bar(name, m.cpu_per_op, scale=1e6) for name, m in sequential.items()],
        )
    ]
    data.update(
        {
            "sequential_cpu": {k: v.cpu_per_op for k, v in sequential.items()},
            "concurrent_cpu": concurrent,
            "judge_cpu": {k: v.cpu_per_op for k, v in judges.items()},
            "refine_many": pairs,
            "refine_many_floor": pairs_floor,
            "anthropic_sequential_cpu": {k: v.cpu_per_op for k, v in a_sequential.items()},
            "anthropic_concurrent_cpu": a_concurrent,
        }
    )
    emit("\n".join(lines), data, figures)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer calls, one round")
    parser.add_argument("--serve-anthropic", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.serve_anthropic:  # the Anthropic contenders' server, in its own process
        serve_until_stdin_closes(FakeAnthropicServer(model=ANTHROPIC_MODEL))
        return
    args.quick = bool(args.quick)
    if args.quick:
        args.rounds, args.ops, args.warmup, args.concurrency = 3, 100, 50, 50
        args.pairs, args.pair_concurrency = 500, 100
    else:
        args.rounds, args.ops, args.warmup, args.concurrency = 7, 300, 200, 200
        args.pairs, args.pair_concurrency = 2000, 200
    anyio.run(run, args)


if __name__ == "__main__":
    main()
