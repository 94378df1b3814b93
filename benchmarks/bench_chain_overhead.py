"""Framework overhead of one call through an advisor chain, against pydantic-ai's Agent.run.

Contenders, in one process, interleaved round by round, all on in-process function models (no
network, no telemetry SDK):

- `jevrefine direct`: `await FunctionModel.call(prompt)` — jevrefine's model, no framework;
- `jevrefine ChatClient`: `await client.prompt(text).call()` through three no-op advisors;
- `pydantic-ai direct`: `await FunctionModel.request(...)` — pydantic-ai's model, no agent;
- `pydantic-ai Agent.run`: `await agent.run(text)`.

Overhead = framework time − its own direct model time. Target: jevrefine's overhead at most
1/40 of pydantic-ai's.
"""

from __future__ import annotations

import argparse
import platform
from typing import Any

import anyio

import jevrefine as jr
from jevrefine.testing import FunctionModel

from ._harness import bar, emit, figure, interleaved, micros


class NoOp:
    """An advisor that only passes the request on."""

    order = 0

    def __init__(self, name: str) -> None:
        self.name = name

    async def advise_call(
        self, request: jr.ChatClientRequest, chain: jr.CallAdvisorChain
    ) -> jr.ChatClientResponse:
        return await chain.next_call(request)


async def measure(*, rounds: int, ops: int) -> dict[str, Any]:
    from pydantic_ai import Agent
    from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, TextPart
    from pydantic_ai.models import ModelRequestParameters
    from pydantic_ai.models.function import AgentInfo
    from pydantic_ai.models.function import FunctionModel as PaiFunctionModel

    text = "What is the weather in Paris?"

    model = FunctionModel(lambda prompt: "Sunny.")
    client = jr.ChatClient(model, advisors=[NoOp("a"), NoOp("b"), NoOp("c")])
    prompt = jr.Prompt((jr.UserMessage(text),))
    spec = client.prompt(text)

    def pai_answer(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        return ModelResponse(parts=[TextPart("Sunny.")])

    pai_model = PaiFunctionModel(pai_answer)
    agent = Agent(pai_model)
    pai_messages: list[ModelMessage] = [ModelRequest.user_text_prompt(text)]
    pai_params = ModelRequestParameters()

    async def jr_direct() -> object:
        return await model.call(prompt)

    async def jr_client() -> object:
        return await spec.call()

    async def pai_direct() -> object:
        return await pai_model.request(pai_messages, None, pai_params)

    async def pai_agent() -> object:
        return await agent.run(text)

    result = await interleaved(
        {
            "jevrefine direct": jr_direct,
            "jevrefine ChatClient (3 advisors)": jr_client,
            "pydantic-ai direct": pai_direct,
            "pydantic-ai Agent.run": pai_agent,
        },
        rounds=rounds,
        ops_per_round=ops,
    )
    model.prompts.clear()
    jr_overhead = [
        c - d
        for c, d in zip(
            result["jevrefine ChatClient (3 advisors)"].per_op,
            result["jevrefine direct"].per_op,
            strict=True,
        )
    ]
    pai_overhead = [
        a - d
        for a, d in zip(
            result["pydantic-ai Agent.run"].per_op, result["pydantic-ai direct"].per_op, strict=True
        )
    ]
    import statistics

    ratios = sorted(p / j for p, j in zip(pai_overhead, jr_overhead, strict=True) if j > 0)
    return {
        "measurements": result,
        "jevrefine_overhead": statistics.median(jr_overhead),
        "pydantic_ai_overhead": statistics.median(pai_overhead),
        "ratio_median": statistics.median(ratios),
        "ratio_min": ratios[0],
        "ratio_max": ratios[-1],
    }


def report(data: dict[str, Any], *, rounds: int, ops: int) -> str:
    import pydantic_ai

    lines = [
        "## Framework overhead per call (FunctionModel, no network, no telemetry SDK)",
        "",
        f"Python {platform.python_version()}, jevrefine {jr.__version__}, pydantic-ai "
        f"{pydantic_ai.__version__}; {rounds} interleaved rounds of {ops} calls; median "
        "(interquartile range).",
        "",
        "| contender | time per call |",
        "|---|---|",
    ]
    for m in data["measurements"].values():
        low, high = m.spread
        lines.append(f"| {m.name} | {micros(m.median)} ({micros(low)} – {micros(high)}) |")
    lines += [
        "",
        f"- jevrefine overhead (ChatClient − direct): **{micros(data['jevrefine_overhead'])}**",
        f"- pydantic-ai overhead (Agent.run − direct): **{micros(data['pydantic_ai_overhead'])}**",
        f"- pydantic-ai overhead / jevrefine overhead: **{data['ratio_median']:.1f}×** "
        f"(per-round range {data['ratio_min']:.1f}× – {data['ratio_max']:.1f}×; target ≥ 40×)",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer rounds, for a smoke run")
    args = parser.parse_args(argv)
    rounds, ops = (5, 200) if args.quick else (21, 1000)
    data = anyio.run(lambda: measure(rounds=rounds, ops=ops))
    times = {m.name: m.per_op for m in data["measurements"].values()}
    overheads = {
        "jevrefine ChatClient (3 advisors)": _minus(
            times["jevrefine ChatClient (3 advisors)"], times["jevrefine direct"]
        ),
        "pydantic-ai Agent.run": _minus(
            times["pydantic-ai Agent.run"], times["pydantic-ai direct"]
        ),
    }
    emit(
        report(data, rounds=rounds, ops=ops),
        {
            "rounds": rounds,
            "ops": ops,
            "time_per_call": times,
            "overhead": overheads,
            "ratio_median": data["ratio_median"],
        },
        [
            figure(
                "chain_overhead",
                "Framework overhead per call, in process (FunctionModel): framework − direct",
                "µs per call",
                [bar(name, values, scale=1e6) for name, values in overheads.items()],
                ideal=0.0,
                ideal_label="physical limit (0)",
            )
        ],
    )


def _minus(a: list[float], b: list[float]) -> list[float]:
    return [x - y for x, y in zip(a, b, strict=True)]


if __name__ == "__main__":
    main()
