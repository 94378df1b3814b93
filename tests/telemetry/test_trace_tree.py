"""`jevrefine demo --trace`: the span tree printed after the run, and the printer itself."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

import pytest

import jevrefine as jr
from jevrefine import cli, telemetry
from jevrefine.cli import _main as cli_main
from jevrefine.cli._trace_tree import format_span_tree
from jevrefine.jev import Noul
from jevrefine.judge import Judge, ModelJudgeClient
from jevrefine.judge.criteria import noul
from jevrefine.messages import Prompt
from jevrefine.models.base import ChatModel
from jevrefine.testing import FunctionModel
from otel_support import Otel


def demo_model(prompt: Prompt) -> str:
    options = prompt.options
    if options.response_format is not None:
        if options.response_format.name == "answer":  # a judging request
            return '{"answer": "yes"}'
        return '{"city": "Paris", "country": "France", "population_millions": 2.1}'
    text = prompt.messages[-1].text  # type: ignore[union-attr]
    return "Short answer." if "fewer words" in text else " ".join(["word"] * 40)


async def test_demo_trace_prints_one_tree_per_call(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    @contextlib.asynccontextmanager
    async def fake_open(provider: str, model: str | None) -> AsyncIterator[tuple[ChatModel, str]]:
        yield FunctionModel(demo_model), "a function model"

    monkeypatch.setattr(cli_main, "open_model", fake_open)
    before = telemetry.defaults()
    await cli.run_demo("Why?", "local", None, True)
    assert telemetry.defaults() is before  # the demo puts the defaults back
    out = capsys.readouterr().out
    tree = out.split("The trace of the run (one tree per ChatClient call):\n\n", 1)[1]
    roots = [line for line in tree.splitlines() if line.startswith("invoke_workflow")]
    assert len(roots) == 2  # the refined answer, then the typed one
    assert "├─ invoke_workflow self_refine  (internal)" not in tree  # it is the only child
    assert "└─ invoke_workflow self_refine  (internal)" in tree
    assert "attempts=2 outcome=passed" in tree
    assert "   ├─ self_refine.attempt  (internal)" in tree
    assert "· evaluation agrees_with_reference=pass (1.00)" in tree
    assert "chat function  (client)" in tree
    assert " ms  [provider=function" in tree


async def test_the_printer_shows_errors_and_events() -> None:
    otel = Otel()
    judge = Judge(
        ModelJudgeClient(FunctionModel(lambda p: '{"answer": "no"}'), logprobs=False),
        [noul("good", Noul("Good?"), 0.5)],
    )

    def tool_fails(city: str) -> str:
        """Fails."""
        raise RuntimeError("no")

    calls = iter(range(100))

    def model(prompt: Prompt) -> jr.AssistantMessage:
        if next(calls) == 0:
            return jr.AssistantMessage("", (jr.ToolCall("c1", "tool_fails", '{"city": "x"}'),))
        return jr.AssistantMessage("answer")

    client = jr.ChatClient(
        FunctionModel(model),
        tools=[jr.tool(tool_fails)],
        advisors=[jr.SelfRefineAdvisor(judge, max_repeat_attempts=1)],
        tracer_provider=otel.tracer_provider,
    )
    await client.prompt("q").call()
    text = format_span_tree(otel.spans())
    assert "execute_tool tool_fails  (internal)" in text
    assert "ERROR  [call=c1 error=RuntimeError]" in text
    assert "· evaluation good=fail (0.00)" in text
    assert "outcome=best_attempt" in text
    assert format_span_tree([]) == ""


def test_demo_trace_without_the_sdk_says_what_to_install(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import importlib.util

    real = importlib.util.find_spec

    def no_sdk(name: str, *args: object) -> object:
        return None if name == "opentelemetry.sdk" else real(name, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(importlib.util, "find_spec", no_sdk)
    assert cli.main(["demo", "--trace"]) == 2
    assert "pip install opentelemetry-sdk" in capsys.readouterr().err
