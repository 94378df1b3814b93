"""`jevrefine eval` end to end on the fake OpenAI and Jev servers: report, resume, exit codes."""

from __future__ import annotations

import json
import os
import signal
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from evals_support import write_cases

from cli_support import SECRET, read_jsonl, run_cli, use_keys
from jevrefine import cli
from jevrefine.cli._eval import LOCAL_MAX_TOKENS, _config
from jevrefine.testing import FakeJevServer, FakeOpenAIServer

SHORT = {"type": "word-count", "value": {"max": 4}}


@pytest.fixture(autouse=True)
def keys(monkeypatch: pytest.MonkeyPatch) -> None:
    use_keys(monkeypatch, jev=False)


def case_file(tmp_path: Path) -> Path:
    return write_cases(
        tmp_path / "cases.jsonl",
        [
            {"id": "short", "input": "hi", "assert": [SHORT]},
            {"id": "long", "input": "one two three four five", "assert": [SHORT]},
            {"id": "echo", "input": "Paris", "assert": [{"type": "icontains", "value": "paris"}]},
        ],
    )


async def test_eval_writes_the_report_rows_and_progress(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out, report = tmp_path / "rows.jsonl", tmp_path / "report.json"
    async with FakeOpenAIServer() as model:
        code = await run_cli(
            "eval", str(case_file(tmp_path)), "--provider", "openai", "--base-url",
            model.base_url, "--out", str(out), "--json", str(report), "--max-repeat-attempts", "1",
        )  # fmt: skip
        asked = len(model.chat_requests)
    assert code == 0
    data = json.loads(report.read_text())
    assert [r["id"] for r in data["results"]] == ["short", "long", "echo"]
    assert sorted(r["id"] for r in read_jsonl(out)) == ["echo", "long", "short"]
    long = data["results"][1]
    # "Echo: one two three four five" has 6 words: both attempts fail, the retry quotes it.
    assert [a["oracle_passed"] for a in long["attempts"]] == [False, False]
    assert long["attempts"][0]["feedback"] == "- The answer has 6 words; use at most 4."
    assert asked == 4
    assert (data["cases"], data["errors"], data["final_pass_rate"]) == (3, 0, 2 / 3)
    captured = capsys.readouterr()
    assert "pass rate: 66.7% at attempt 1 -> 66.7% returned" in captured.out
    assert "pass 67%" in captured.err  # the live progress bar's last state
    assert SECRET not in captured.out + captured.err


async def test_resume_keeps_done_rows_and_reruns_errors(tmp_path: Path) -> None:
    out, report = tmp_path / "rows.jsonl", tmp_path / "report.json"
    cases = case_file(tmp_path)
    async with FakeOpenAIServer() as model:
        model.fail(400, times=1)  # not retried: the first case errors
        argv = [
            *("eval", str(cases), "--provider", "openai", "--base-url", model.base_url),
            *("--out", str(out), "--json", str(report), "--concurrency", "1", "--no-progress"),
        ]
        assert await run_cli(*argv) == 1
        first = json.loads(report.read_text())
        assert first["errors"] == 1
        assert first["results"][0]["error"].startswith("ModelHTTPError")
        with out.open("a", encoding="utf-8") as file:
            file.write('{"id": "echo", "cut sho')  # an interrupted last line
        before = len(model.chat_requests)
        assert await run_cli(*argv) == 0
        rerun = [r["messages"][-1]["content"] for r in model.chat_requests[before:]]
    assert rerun == ["hi"]  # only the errored case ran again
    second = json.loads(report.read_text())
    assert second["errors"] == 0
    assert second["results"][1:] == first["results"][1:]  # kept as they were
    lines = out.read_text(encoding="utf-8").splitlines()
    assert lines[3] == '{"id": "echo", "cut sho'
    assert json.loads(lines[4])["id"] == "short"
    async with FakeOpenAIServer() as idle:
        argv[argv.index("--base-url") + 1] = idle.base_url
        assert await run_cli(*argv) == 0  # everything is done: nothing runs
        assert idle.chat_requests == []
    third = json.loads(report.read_text())
    # The same report; only its setup is this invocation's (its date, no model opened).
    assert {**third, "setup": None} == {**second, "setup": None}


async def test_limit_none_judge_and_json_on_stdout(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    async with FakeOpenAIServer() as model:
        code = await run_cli(
            "eval", str(case_file(tmp_path)), "--provider", "openai", "--base-url",
            model.base_url, "--limit", "2", "--judge", "none", "--json", "-", "--no-progress",
        )  # fmt: skip
        asked = len(model.chat_requests)
    assert code == 0
    captured = capsys.readouterr()
    data = json.loads(captured.out)
    assert [r["id"] for r in data["results"]] == ["short", "long"]
    assert data["judge_agreement"] is None
    assert asked == 2
    assert "pass rate: 50.0%" in captured.err  # the summary moves to stderr


async def test_config_judge_and_llm_rubric_on_jev(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def answer(state: dict[str, Any], questions: dict[str, Any]) -> dict[str, float]:
        return {q: 0.2 if "Echo: bad" in state["assistant_answer"] else 0.9 for q in questions}

    cases = write_cases(
        tmp_path / "cases.jsonl",
        [
            {"id": "good", "input": "good", "assert": [{"type": "llm-rubric", "value": "Fine."}]},
            {"id": "bad", "input": "bad", "assert": [{"type": "llm-rubric", "value": "Fine."}]},
        ],
    )
    report = tmp_path / "report.json"
    async with FakeOpenAIServer() as model, FakeJevServer(answer) as jev:
        monkeypatch.setenv("TYPESAFE_API_KEY", SECRET)
        monkeypatch.setenv("TYPESAFE_BASE_URL", jev.base_url)
        config = tmp_path / "jevrefine.toml"
        config.write_text(
            f'[model]\nprovider = "openai"\nbase_url = "{model.base_url}"\n'
            f'[judge]\nkind = "jev"\nbase_url = "{jev.base_url}"\n'
            '[[judge.criteria]]\nname = "ok"\nquestion = "Is `assistant_answer` fine?"\n'
            "[refine]\nmax_repeat_attempts = 1\n",
            encoding="utf-8",
        )
        code = await run_cli(
            "eval", str(cases), "--config", str(config), "--judge", "config",
            "--json", str(report), "--no-progress",
        )  # fmt: skip
    assert code == 0
    data = json.loads(report.read_text())
    good, bad = data["results"]
    assert (good["passed_final"], len(good["attempts"])) == (True, 1)
    assert (bad["passed_final"], len(bad["attempts"])) == (False, 2)
    assert data["judge_agreement"]["tn"] == 2
    assert data["grader_tokens"] > 0
    assert data["judge_tokens"] > 0


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--limit", "0"], "--limit must be at least 1"),
        (["--judge", "config", "--config", "CONFIG_NONE"], "--judge config needs a judge"),
        (["--temperature", "9"], "temperature"),
    ],
)
def test_bad_flags_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    none = tmp_path / "none.toml"
    none.write_text('[judge]\nkind = "none"\n')
    argv = [str(none) if a == "CONFIG_NONE" else a for a in argv]
    assert cli.main(["eval", str(case_file(tmp_path)), "--provider", "openai", *argv]) == 2
    assert message in capsys.readouterr().err


def test_a_bad_case_file_exits_2_before_any_model(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = write_cases(
        tmp_path / "bad.jsonl", [{"id": "x", "input": "q", "assert": [{"type": "nope"}]}]
    )
    # No server is listening: a model call would fail with exit 1, not 2.
    argv = ["eval", str(bad), "--provider", "openai", "--base-url", "http://127.0.0.1:9/v1"]
    assert cli.main(argv) == 2
    err = capsys.readouterr().err
    assert "case 'x', assertion 0: unknown assertion type 'nope'" in err
    assert cli.main(["eval", str(tmp_path / "missing.jsonl")]) == 2
    good = write_cases(tmp_path / "good.jsonl", [{"input": "q", "assert": [SHORT]}])
    assert cli.main(["eval", str(good), "--out", str(good), "--provider", "openai"]) == 2
    assert "is the same file as the case file" in capsys.readouterr().err


def test_the_local_model_gets_a_max_tokens_default() -> None:
    args = cli.build_parser().parse_args(["eval", "c.jsonl", "--provider", "local"])
    assert _config(args).model.max_tokens == LOCAL_MAX_TOKENS
    args = cli.build_parser().parse_args(
        ["eval", "c.jsonl", "--provider", "local", "--max-tokens", "9"]
    )
    assert _config(args).model.max_tokens == 9
    args = cli.build_parser().parse_args(["eval", "c.jsonl", "--provider", "openai"])
    assert _config(args).model.max_tokens is None


@pytest.mark.slow
async def test_ctrl_c_leaves_valid_rows_and_no_traceback(tmp_path: Path) -> None:
    cases = write_cases(
        tmp_path / "cases.jsonl",
        [{"id": f"c{i}", "input": f"q{i}", "assert": [SHORT]} for i in range(30)],
    )
    out = tmp_path / "rows.jsonl"
    async with FakeOpenAIServer(latency=0.1) as model:
        command = [
            *(sys.executable, "-m", "jevrefine", "eval", str(cases), "--provider", "openai"),
            *("--base-url", model.base_url, "--out", str(out), "--concurrency", "2"),
        ]
        env = {**os.environ, "OPENAI_API_KEY": SECRET}
        with (tmp_path / "stderr.txt").open("wb") as err:
            process = await anyio.open_process(command, env=env, stdout=err, stderr=err)
            with anyio.fail_after(60):
                # Another process writes the file: polling is the only way to see it grow.
                while not out.exists() or len(out.read_text().splitlines()) < 3:  # noqa: ASYNC110
                    await anyio.sleep(0.05)
            process.send_signal(signal.SIGINT)
            with anyio.fail_after(30):
                await process.wait()
        stderr = (tmp_path / "stderr.txt").read_text()
        assert process.returncode == 130, stderr
        assert "Traceback" not in stderr
        assert "interrupted; run it again to resume" in stderr
        rows = read_jsonl(out)  # every line is a whole JSON row
        assert 3 <= len(rows) < 30
        done = {r["id"] for r in rows}
        before = len(model.chat_requests)
        result = await anyio.run_process(
            [*command, "--json", str(tmp_path / "r.json"), "--no-progress"], env=env, check=False
        )
        assert result.returncode == 0, result.stderr.decode()
        asked = {r["messages"][-1]["content"] for r in model.chat_requests[before:]}
    assert not asked & {f"q{i}" for i in range(30) if f"c{i}" in done}
    assert json.loads((tmp_path / "r.json").read_text())["cases"] == 30
