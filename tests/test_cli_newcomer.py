"""The CLI as a new user meets it (issue 20): local defaults, resume, Ctrl-C, why items failed.

Each test here reproduces one thing a newcomer ran into, against the fake OpenAI and Jev servers
(and, for Ctrl-C, a real subprocess and a real SIGINT).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import re
import signal
import subprocess
import sys
import threading
import types
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any, ClassVar

import anyio
import pytest

from cli_support import (
    SECRET,
    good_unless_bad,
    jev_config,
    read_jsonl,
    run_cli,
    use_keys,
    write_jsonl,
)
from jevrefine import cli
from jevrefine.cli._config import LOCAL_MAX_TOKENS, LOCAL_SLOT_CONTEXT, load_config
from jevrefine.exceptions import ContextOverflowError, ModelHTTPError
from jevrefine.models.openai import OpenAIChatModel
from jevrefine.testing import FakeJevServer, FakeOpenAIServer

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src"

LLAMA_OVERFLOW = {
    "error": {
        "code": 400,
        "message": "request (4316 tokens) exceeds the available context size (4096 tokens), "
        "try increasing it",
        "type": "exceed_context_size_error",
        "n_prompt_tokens": 4316,
        "n_ctx": 4096,
    }
}
"""The 400 body llama.cpp's server sends for a request past its context (what the user saw)."""

CHECK = '\n[[judge.criteria]]\nkind = "check"\nname = "short"\nmax_length = 200\n'


@pytest.fixture(autouse=True)
def keys(monkeypatch: pytest.MonkeyPatch) -> None:
    use_keys(monkeypatch)


def remote(model: FakeOpenAIServer, *extra: str) -> tuple[str, ...]:
    return ("--provider", "openai", "--base-url", model.base_url, "--no-progress", *extra)


# --- defaults on the local model --------------------------------------------------------------


class _FakeLocalServer:
    """Stands in for `LocalModelServer`: records how the CLI starts it, serves a fake model."""

    started: ClassVar[list[dict[str, Any]]] = []
    base_url: ClassVar[str] = ""
    alias: ClassVar[str] = "smollm2"

    @property
    def url(self) -> str:
        return type(self).base_url

    def __init__(self, model: Any = None, *, ctx: int = 4096, parallel: int = 1) -> None:
        type(self).started.append({"model": model, "ctx": ctx, "parallel": parallel})

    async def __aenter__(self) -> _FakeLocalServer:
        return self

    async def __aexit__(self, *exc: object) -> None:
        return None

    def openai_model(self) -> OpenAIChatModel:
        return OpenAIChatModel("smollm2", base_url=type(self).base_url)


class _InFlight:
    """A reply function that counts the requests answered at once."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.now = 0
        self.most = 0
        self.lock = threading.Lock()

    async def __call__(self, body: dict[str, Any]) -> str:
        with self.lock:
            self.now += 1
            self.most = max(self.most, self.now)
        try:
            await anyio.sleep(self.seconds)
        finally:
            with self.lock:
                self.now -= 1
        return "Paris."


async def test_local_model_gets_a_max_tokens_and_one_slot_per_item_in_flight(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import jevrefine.local

    source = write_jsonl(tmp_path / "in.jsonl", [f"question {i}" for i in range(6)])
    output = tmp_path / "out.jsonl"
    replies = _InFlight(0.2)
    _FakeLocalServer.started = []
    monkeypatch.setattr(jevrefine.local, "LocalModelServer", _FakeLocalServer)
    async with FakeOpenAIServer(replies) as model:
        _FakeLocalServer.base_url = model.base_url
        code = await run_cli(
            "run", str(source), "-o", str(output), "--provider", "local", "--judge", "none",
            "--no-progress",
        )  # fmt: skip
        bodies = model.chat_requests
    assert code == 0
    assert len(read_jsonl(output)) == 6
    # No rambling into the context limit: every request carries the local default.
    assert {body.get("max_tokens") for body in bodies} == {LOCAL_MAX_TOKENS}
    # The server has as many slots as items in flight, each with a full context window.
    (started,) = _FakeLocalServer.started
    assert started["parallel"] == 2
    assert started["ctx"] == 2 * LOCAL_SLOT_CONTEXT
    assert replies.most == 2  # no request waits for a slot inside the server


def test_local_defaults_are_resolved_and_shown(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY")
    local = load_config(None, {"model": {"provider": "local"}})
    assert (local.max_tokens(), local.concurrency()) == (LOCAL_MAX_TOKENS, 2)
    described = local.describe()
    assert described["model"]["max_tokens"] == LOCAL_MAX_TOKENS
    assert described["run"]["concurrency"] == 2
    given = load_config(None, {"model": {"provider": "local", "max_tokens": 40}})
    assert given.max_tokens() == 40
    hosted = load_config(None, {"model": {"provider": "openai"}})
    assert (hosted.max_tokens(), hosted.concurrency()) == (None, 16)
    busy = load_config(None, {"model": {"provider": "local"}, "run": {"concurrency": 500}})
    assert busy.concurrency() == 8  # the most slots the CLI starts


def test_the_local_server_the_cli_starts_takes_its_default_alias() -> None:
    from jevrefine.local import LocalModelServer

    # What `run --provider local` builds; alias=None (the default) was refused as "not a string".
    server = LocalModelServer(None, ctx=2 * LOCAL_SLOT_CONTEXT, parallel=2)
    assert server.alias == "smollm2"


async def test_context_overflow_is_a_typed_error_saying_what_to_lower(tmp_path: Path) -> None:
    source = write_jsonl(tmp_path / "in.jsonl", ["What is the capital of France?"])
    output = tmp_path / "out.jsonl"
    async with FakeOpenAIServer() as model:
        model.fail(400, LLAMA_OVERFLOW)
        async with OpenAIChatModel("smollm2", base_url=model.base_url) as chat:
            from jevrefine import Prompt, UserMessage

            with pytest.raises(ContextOverflowError) as info:
                await chat.call(Prompt([UserMessage("hi")]))
        model.fail(400, LLAMA_OVERFLOW)
        code = await run_cli(
            "run", str(source), "-o", str(output), *remote(model), "--judge", "none"
        )
        model.fail(400, {"error": {"message": "bad value for temperature"}})
        async with OpenAIChatModel("smollm2", base_url=model.base_url) as chat:
            with pytest.raises(ModelHTTPError) as other:
                await chat.call(Prompt([UserMessage("hi")]))
    error = info.value
    assert isinstance(error, ModelHTTPError)
    assert error.status_code == 400
    assert not error.is_transient
    assert "exceeds the available context size" in str(error)
    assert "lower max_tokens (--max-tokens)" in str(error)
    assert type(other.value) is ModelHTTPError  # other 400s keep their type
    assert code == 1
    (row,) = read_jsonl(output)
    assert row["error"].startswith("ContextOverflowError: HTTP 400")
    assert "--max-tokens" in row["error"]


def test_the_bar_moves_as_attempts_start(tmp_path: Path) -> None:
    import io

    from rich.console import Console

    from jevrefine.cli._run import _Batch

    args = cli.build_parser().parse_args(["run", "in.jsonl", "--provider", "openai"])
    config = load_config(None, {"model": {"provider": "openai"}})
    batch = _Batch(args, config)
    batch.console = Console(file=io.StringIO(), force_terminal=False)
    bar = batch.bar(4)
    assert bar._progress is not None
    batch.stats.in_flight = 4
    batch._answer_asked()
    batch._answer_asked()
    (task,) = bar._progress.tasks
    # No item has finished, but the bar says what is under way.
    assert task.completed == 0
    assert task.fields["activity"] == "4 in flight, 2 answers asked"


async def test_the_progress_line_counts_every_attempt(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = write_jsonl(tmp_path / "in.jsonl", [{"id": "a", "prompt": "a bad one"}, "good"])
    output = tmp_path / "out.jsonl"
    async with FakeOpenAIServer() as model, FakeJevServer(good_unless_bad) as jev:
        config = _jev_config(tmp_path, jev.base_url)
        code = await run_cli(
            "run", str(source), "-o", str(output), "--config", str(config),
            "--base-url", model.base_url,
        )  # fmt: skip
    assert code == 0
    # Two attempts for the bad one, one for the good one: three answers, shown on the bar.
    err = capsys.readouterr().err
    assert "0 in flight, 3 answers asked" in err
    assert re.search(r"run again \(errored before\)\s*│\s*0", err)


# --- resume --------------------------------------------------------------------------------


async def test_resume_reruns_errored_items_and_keeps_one_row_per_id(tmp_path: Path) -> None:
    source = write_jsonl(tmp_path / "in.jsonl", ["first", "second", "third"])
    output = tmp_path / "out.jsonl"
    args = ("run", str(source), "-o", str(output), "--judge", "none", "--concurrency", "1")
    async with FakeOpenAIServer() as model:
        model.fail(400, times=1)  # not retried: the first item fails
        first = await run_cli(*args, *remote(model))
        assert first == 1
        assert [row["error"] is None for row in read_jsonl(output)] == [False, True, True]
        asked_before = len(model.chat_requests)
        second = await run_cli(*args, *remote(model))
        asked = [r["messages"][-1]["content"] for r in model.chat_requests[asked_before:]]
        third = await run_cli(*args, *remote(model))
        asked_again = len(model.chat_requests) - asked_before - len(asked)
    assert asked == ["first"]  # only the failed item runs again
    assert second == 0  # and now nothing failed: the exit status says so
    rows = read_jsonl(output)
    assert sorted(row["id"] for row in rows) == ["1", "2", "3"]  # its old row is gone
    assert all(row["error"] is None for row in rows)
    assert {row["id"]: row["answer"] for row in rows}["1"] == "Echo: first"
    assert (third, asked_again) == (0, 0)  # a finished output is left alone
    assert not [p for p in os.listdir(tmp_path) if p.endswith("resume-tmp")]


async def test_resume_still_fails_when_the_retry_fails_again(tmp_path: Path) -> None:
    source = write_jsonl(tmp_path / "in.jsonl", ["first", "second"])
    output = tmp_path / "out.jsonl"
    args = ("run", str(source), "-o", str(output), "--judge", "none", "--concurrency", "1")
    async with FakeOpenAIServer() as model:
        model.fail(400, times=1)
        assert await run_cli(*args, *remote(model)) == 1
        model.fail(400, times=1)
        assert await run_cli(*args, *remote(model)) == 1  # never hidden behind exit 0
    rows = read_jsonl(output)
    assert len(rows) == 2
    assert [row["id"] for row in rows if row["error"]] == ["1"]


async def test_judge_resume_reruns_errored_verdicts(tmp_path: Path) -> None:
    pairs = [{"id": i, "question": f"q{i}", "answer": f"a{i}"} for i in range(2)]
    source = write_jsonl(tmp_path / "in.jsonl", pairs)
    output = tmp_path / "out.jsonl"
    async with FakeOpenAIServer() as model, FakeJevServer(good_unless_bad) as jev:
        config = _jev_config(tmp_path, jev.base_url)
        args: tuple[str, ...] = ("judge", str(source), "-o", str(output), "--config", str(config))
        args += ("--base-url", model.base_url, "--no-progress", "--concurrency", "1")
        jev.fail(400, times=1)
        assert await run_cli(*args) == 1
        assert await run_cli(*args) == 0
    rows = read_jsonl(output)
    assert sorted(row["id"] for row in rows) == ["0", "1"]
    assert all(row["error"] is None and row["passed"] for row in rows)


# --- Ctrl-C ----------------------------------------------------------------------------------


def _start_run(source: Path, output: Path, base_url: str, *extra: str) -> subprocess.Popen[str]:
    env = {**os.environ, "OPENAI_API_KEY": SECRET, "PYTHONPATH": str(SRC)}
    return subprocess.Popen(
        [
            sys.executable, "-m", "jevrefine", "run", str(source), "-o", str(output),
            "--provider", "openai", "--base-url", base_url, "--judge", "rating",
            "--concurrency", "4", *extra,
        ],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip


def _count_lines(output: Path) -> int:
    return output.read_text(encoding="utf-8").count("\n") if output.exists() else 0


async def _lines_written(output: Path, at_least: int, process: subprocess.Popen[str]) -> None:
    with anyio.fail_after(60):
        while await anyio.to_thread.run_sync(_count_lines, output) < at_least:
            assert process.poll() is None, process.communicate()
            await anyio.sleep(0.05)


@pytest.mark.slow
@pytest.mark.parametrize("progress", [(), ("--no-progress",), ("--ordered",)])
async def test_ctrl_c_stops_cleanly_and_the_same_command_resumes(
    tmp_path: Path, progress: tuple[str, ...]
) -> None:
    prompts = [{"id": f"p{i}", "prompt": f"question {i}"} for i in range(40)]
    source = write_jsonl(tmp_path / "in.jsonl", prompts)
    output = tmp_path / "out.jsonl"
    async with FakeOpenAIServer(latency=0.3) as model:
        process = _start_run(source, output, model.base_url, *progress)
        await _lines_written(output, 2, process)
        process.send_signal(signal.SIGINT)  # what Ctrl-C sends
        _, err = await anyio.to_thread.run_sync(process.communicate)
        assert process.returncode == 130, err
        assert "Traceback" not in err
        assert "asynchronous generator" not in err
        assert "interrupted; run it again to resume" in err
        lines = output.read_text(encoding="utf-8").splitlines()
        written = [json.loads(line) for line in lines]  # every line is whole
        assert 2 <= len(written) < len(prompts)
        if "--ordered" in progress:
            assert [row["id"] for row in written] == [f"p{i}" for i in range(len(written))]
        model.latency = 0.0
        resumed = _start_run(source, output, model.base_url, "--no-progress")
        _, err = await anyio.to_thread.run_sync(resumed.communicate)
    assert resumed.returncode == 0, err
    rows = read_jsonl(output)
    assert sorted(row["id"] for row in rows) == sorted(p["id"] for p in prompts)


# --- why an item failed, and input order ----------------------------------------------------


def _jev_config(tmp_path: Path, jev_url: str) -> Path:
    """The shared Jev config plus a code check, so a row can name two failed criteria."""
    return jev_config(tmp_path, jev_url, criteria=CHECK)


async def test_rows_say_which_criteria_failed_and_the_feedback(tmp_path: Path) -> None:
    source = write_jsonl(
        tmp_path / "in.jsonl", [{"id": "bad", "prompt": "a bad one"}, {"id": "ok", "prompt": "hi"}]
    )
    output = tmp_path / "out.jsonl"
    judged = tmp_path / "judged.jsonl"
    pairs = write_jsonl(tmp_path / "pairs.jsonl", [{"question": "q", "answer": "bad"}])
    async with FakeOpenAIServer() as model, FakeJevServer(good_unless_bad) as jev:
        config = _jev_config(tmp_path, jev.base_url)
        common = ("--config", str(config), "--base-url", model.base_url, "--no-progress")
        assert await run_cli("run", str(source), "-o", str(output), *common) == 0
        assert await run_cli("judge", str(pairs), "-o", str(judged), *common) == 0
    rows = {row["id"]: row for row in read_jsonl(output)}
    bad = rows["bad"]
    assert (bad["passed"], bad["outcome"]) == (False, "best_attempt")
    assert bad["failed_criteria"] == ["is_good"]
    assert "The answer is not good" in bad["feedback"]
    assert (rows["ok"]["failed_criteria"], rows["ok"]["feedback"]) == ([], None)
    (verdict,) = read_jsonl(judged)
    assert verdict["failed_criteria"] == ["is_good"]
    assert "The answer is not good" in verdict["feedback"]


async def test_ordered_writes_results_in_input_order(tmp_path: Path) -> None:
    async def slow_first(body: dict[str, Any]) -> str:
        text = body["messages"][-1]["content"]
        await anyio.sleep(0.4 if text == "p0" else 0.0)
        return f"answer to {text}"

    inputs = [{"id": f"p{i}", "prompt": f"p{i}"} for i in range(5)]
    source = write_jsonl(tmp_path / "in.jsonl", inputs)
    unordered, ordered = tmp_path / "any.jsonl", tmp_path / "ordered.jsonl"
    async with FakeOpenAIServer(slow_first) as model:
        common = (*remote(model), "--judge", "none", "--concurrency", "5")
        assert await run_cli("run", str(source), "-o", str(unordered), *common) == 0
        assert await run_cli("run", str(source), "-o", str(ordered), *common, "--ordered") == 0
    ids = [f"p{i}" for i in range(5)]
    assert [row["id"] for row in read_jsonl(unordered)] != ids  # p0 comes last otherwise
    assert [row["id"] for row in read_jsonl(ordered)] == ids


# --- keys, help, the demo ------------------------------------------------------------------


def test_check_config_exits_2_without_the_key_run_needs(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY")
    source = write_jsonl(tmp_path / "in.jsonl", ["hi"])
    assert cli.main(["check-config", "--provider", "openai"]) == 2
    captured = capsys.readouterr()
    assert json.loads(captured.out)["api_keys"]["openai"] == "not set"
    assert "OPENAI_API_KEY" in captured.err
    assert "--base-url" in captured.err
    assert cli.main(["run", str(source), "--provider", "openai", "--judge", "none"]) == 2
    err = capsys.readouterr().err
    assert "OPENAI_API_KEY" in err
    assert "api_key=" not in err  # a flag to pass, not a Python argument
    # A compatible server of your own needs no key; the local model neither.
    assert cli.main(["check-config", "--provider", "openai", "--base-url", "http://h/v1"]) == 0
    assert cli.main(["check-config", "--provider", "local"]) == 0
    monkeypatch.delenv("TYPESAFE_API_KEY")
    config = _jev_config(tmp_path, "http://127.0.0.1:9/v1")
    assert cli.main(["check-config", "--config", str(config), "--base-url", "http://h/v1"]) == 2
    assert "TYPESAFE_API_KEY" in capsys.readouterr().err


def _every_action(parser: argparse.ArgumentParser, path: str) -> list[tuple[str, Any]]:
    found: list[tuple[str, Any]] = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                found += _every_action(sub, f"{path} {name}")
        else:
            found.append((f"{path} {'/'.join(action.option_strings) or action.dest}", action))
    return found


def test_every_flag_has_help() -> None:
    actions = _every_action(cli.build_parser(), "jevrefine")
    assert len(actions) > 60
    missing = [name for name, action in actions if not action.help]
    assert missing == []


def test_nox_demo_installs_what_trace_needs(monkeypatch: pytest.MonkeyPatch) -> None:
    installed: list[str] = []
    fake_nox = types.ModuleType("nox")
    fake_nox.options = types.SimpleNamespace()  # type: ignore[attr-defined]
    fake_nox.Session = object  # type: ignore[attr-defined]
    fake_nox.session = lambda function=None, **_: function or (lambda f: f)  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "nox", fake_nox)
    spec = importlib.util.spec_from_file_location("_noxfile_under_test", ROOT / "noxfile.py")
    assert spec is not None
    assert spec.loader is not None
    noxfile = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(noxfile)
    session = types.SimpleNamespace(
        install=lambda *args: installed.extend(args), run=lambda *args, **_: None, posargs=[]
    )
    noxfile.demo(session)
    requirements = " ".join(installed)
    extras = re.findall(r"\.\[([^\]]*)\]", requirements)
    pyproject = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    import tomllib

    optional = tomllib.loads(pyproject)["project"]["optional-dependencies"]
    via_extras = [dep for extra in extras for name in extra.split(",") for dep in optional[name]]
    assert any(req.startswith("opentelemetry-sdk") for req in [*installed, *via_extras]), installed


async def test_the_getting_started_page_says_what_the_demo_does() -> None:
    """The page says the demo streams each attempt, then its verdict, the answer (or that none
    passed) and the typed step; the demo does stream (issue 32, 7: it used to refuse to)."""
    import io

    from jevrefine import Prompt
    from jevrefine.cli._demo import DemoJudging, refine_demo
    from jevrefine.judge import ModelJudgeClient, noul
    from jevrefine.judge._judge import REFERENCE_QUESTION
    from jevrefine.testing import FunctionModel

    page = (ROOT / "docs" / "guide" / "getting-started.md").read_text(encoding="utf-8")
    paragraph = " ".join(page.split("The demo ", 1)[1].split("\n\n", 1)[0].split())
    for shown in ("streaming each attempt", "verdict", "no attempt passed", "entity(CityFacts)"):
        assert shown in paragraph

    streamed: list[Prompt] = []

    async def stream(prompt: Prompt) -> AsyncIterator[str]:
        streamed.append(prompt)
        yield "Short."

    judge = ModelJudgeClient(FunctionModel(lambda prompt: '{"answer": "yes"}'))
    judging = DemoJudging(judge, (noul("agrees_with_reference", REFERENCE_QUESTION),), "test")
    out = io.StringIO()
    model = FunctionModel(lambda prompt: "Short.", stream_function=stream)
    await refine_demo(out, model, "Why?", "Be brief.", judging)
    assert "attempt 1: Short." in out.getvalue()
    assert len(streamed) == 1
