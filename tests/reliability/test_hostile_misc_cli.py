"""Hostile JSONL through `jevrefine run` and `judge`, end to end on the fake servers (issue 16 #10).

Before: a 4,301-digit id, a Latin-1 byte or a lone-surrogate id each ended the run with a
traceback (0 of 2 good lines written in two cases), and a resumed run tripped on the same line
forever. Now each is a bad line, reported and skipped; the output is valid UTF-8; exit codes
tell items that failed (1) from bad settings (2) from a run that stopped (3).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest

from jevrefine import cli
from jevrefine.testing import FakeJevServer, FakeOpenAIServer

SECRET = "sk-test-hostile-cli-0123456789"

GOOD_1 = b'{"id": "g1", "prompt": "good one"}'
GOOD_2 = b'{"id": "g2", "prompt": "good two"}'
HOSTILE: dict[str, tuple[bytes, str]] = {
    "4301-digit id": (
        b'{"id": ' + b"7" * 4301 + b', "prompt": "x"}',
        "not usable JSON (a number of more than 4,300 digits)",
    ),
    "latin-1 byte": (
        b'{"id": "caf\xe9", "prompt": "x"}',
        "not valid UTF-8 (byte 0xe9 at column 12)",
    ),
    "lone surrogate prompt": (
        b'{"id": "s", "prompt": "hi \\udc00"}',
        "field 'prompt' holds a lone surrogate",
    ),
    "deep nesting": (b"[" * 100_000 + b"]" * 100_000, "not valid JSON (nested too deeply)"),
    "huge float": (b'{"id": "f", "prompt": 1e999}', "field 'prompt' is missing"),
    "nul bytes": (b"\x00\x00\x00", "not valid JSON"),
}


@pytest.fixture(autouse=True)
def keys(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    monkeypatch.setenv("TYPESAFE_API_KEY", SECRET)
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)


async def run_cli(*argv: str) -> int:
    # main() starts its own event loop: run it on a worker thread, beside the fake servers'.
    return await anyio.to_thread.run_sync(cli.main, list(argv))


def run_args(source: Path, output: Path, model: FakeOpenAIServer) -> list[str]:
    return [
        "run", str(source), "-o", str(output), "--provider", "openai",
        "--base-url", model.base_url, "--judge", "none", "--no-progress", "--concurrency", "2",
    ]  # fmt: skip


def rows_of(output: Path) -> list[dict[str, Any]]:
    data = output.read_bytes()
    # Strict UTF-8: the file must decode whatever the strings held.
    return [json.loads(line) for line in data.decode("utf-8").splitlines()]


@pytest.mark.parametrize("case", list(HOSTILE), ids=list(HOSTILE))
async def test_a_hostile_line_is_reported_and_skipped_and_resume_is_clean(
    tmp_path: Path, case: str, capsys: pytest.CaptureFixture[str]
) -> None:
    line, reason = HOSTILE[case]
    source = tmp_path / "in.jsonl"
    source.write_bytes(b"\n".join([GOOD_1, line, GOOD_2]) + b"\n")
    output = tmp_path / "out.jsonl"
    async with FakeOpenAIServer() as model:
        first = await run_cli(*run_args(source, output, model))
        err = capsys.readouterr().err
        asked_first = len(model.chat_requests)
        # The same command again: nothing new runs, the bad line is reported again, no crash.
        second = await run_cli(*run_args(source, output, model))
        err_again = capsys.readouterr().err
        asked_second = len(model.chat_requests) - asked_first
    assert (first, second) == (1, 1)
    assert f"line 2: {reason}" in err
    assert "skipped" in err
    assert "Traceback" not in err + err_again
    assert f"line 2: {reason}" in err_again
    assert sorted(r["id"] for r in rows_of(output)) == ["g1", "g2"]
    assert (asked_first, asked_second) == (2, 0)


async def test_lone_surrogates_in_ids_are_written_escaped_and_in_answers_replaced(
    tmp_path: Path,
) -> None:
    source = tmp_path / "in.jsonl"
    source.write_bytes(b'{"id": "\\ud800", "prompt": "odd"}\n' + GOOD_1 + b"\n")
    output = tmp_path / "out.jsonl"
    # The model answers with a lone surrogate (JSON allows the escape; UTF-8 cannot hold it).
    async with FakeOpenAIServer(reply=lambda body: "broken \udfff text") as model:
        assert await run_cli(*run_args(source, output, model)) == 0
        rows = {r["id"]: r for r in rows_of(output)}
        assert set(rows) == {"\ud800", "g1"}
        # The adapter replaced the answer's surrogate with U+FFFD (RT-10, decided once there);
        # the case id is the user's own text and is kept, escaped, so it reads back as is.
        assert rows["\ud800"]["answer"] == "broken \ufffd text"
        assert b"\\ud800" in output.read_bytes()
        # Resuming recognises the escaped id: nothing runs again.
        asked = len(model.chat_requests)
        assert await run_cli(*run_args(source, output, model)) == 0
        assert len(model.chat_requests) == asked


async def test_a_hand_edited_output_never_stops_a_resume(tmp_path: Path) -> None:
    source = tmp_path / "in.jsonl"
    source.write_bytes(GOOD_1 + b"\n" + GOOD_2 + b"\n")
    output = tmp_path / "out.jsonl"
    output.write_bytes(
        b'{"id": "g1", "answer": "old"}\n{"id": "caf\xe9"}\n{"id": ' + b"9" * 4301 + b"}\n"
    )
    async with FakeOpenAIServer() as model:
        assert await run_cli(*run_args(source, output, model)) == 0
        asked = [r["messages"][-1]["content"] for r in model.chat_requests]
    assert asked == ["good two"]


async def test_judge_skips_hostile_pairs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = tmp_path / "pairs.jsonl"
    source.write_bytes(
        b'{"id": "a", "question": "q", "answer": "fine"}\n'
        b'{"id": "b", "question": "q", "answer": "\\udc80"}\n'
        b'{"id": "c", "question": "q", "answer": "ok", "expected_output": 5}\n'
        b'{"id": "d", "question": "q\xff", "answer": "x"}\n'
    )
    config = tmp_path / "jevrefine.toml"
    output = tmp_path / "verdicts.jsonl"
    async with FakeJevServer(lambda state, questions: dict.fromkeys(questions, 0.9)) as jev:
        config.write_text(
            f'[model]\nprovider = "openai"\nbase_url = "http://127.0.0.1:9/v1"\n'
            f'[judge]\nkind = "jev"\nbase_url = "{jev.base_url}"\n'
            '[[judge.criteria]]\nname = "ok"\nquestion = "Is `assistant_answer` ok?"\n',
            encoding="utf-8",
        )
        code = await run_cli(
            "judge", str(source), "-o", str(output), "--config", str(config), "--no-progress"
        )
    err = capsys.readouterr().err
    assert code == 1
    assert [r["id"] for r in rows_of(output)] == ["a"]
    assert "line 2: field 'answer' holds a lone surrogate" in err
    assert "line 3: field 'expected_output' must be a string" in err
    assert "line 4: not valid UTF-8" in err


async def test_exit_codes_tell_failed_items_from_a_stopped_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    source = tmp_path / "in.jsonl"
    source.write_bytes(GOOD_1 + b"\n" + GOOD_2 + b"\n")
    output = tmp_path / "out.jsonl"
    async with FakeOpenAIServer() as model:
        model.fail(400, times=1)  # one item fails: 1
        assert await run_cli(*run_args(source, output, model), "--concurrency", "1") == 1
        capsys.readouterr()

        # A bug outside any item stops the run: 3, with the traceback kept for the report.
        from jevrefine.cli import _run as _cli_run

        def broken(result: Any) -> Any:
            raise RuntimeError("a bug in the summary")

        monkeypatch.setattr(_cli_run.RefineSummary, "of", broken)
        code = await run_cli(*run_args(source, tmp_path / "o3.jsonl", model))
    err = capsys.readouterr().err
    assert code == 3
    assert "crashed (RuntimeError)" in err
    assert "run the same command again to resume" in err
    assert "Traceback" in err


async def test_a_missing_api_key_exits_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY")
    source = tmp_path / "in.jsonl"
    source.write_bytes(GOOD_1 + b"\n")
    output = tmp_path / "out.jsonl"
    code = await run_cli("run", str(source), "-o", str(output), "--provider", "openai",
                         "--judge", "none", "--no-progress")  # fmt: skip
    assert code == 2  # a setting, like a bad config: nothing ran
    assert "OPENAI_API_KEY" in capsys.readouterr().err
    assert not output.exists() or output.read_bytes() == b""


@pytest.mark.slow  # a fresh interpreter imports the package: several seconds on a busy machine
async def test_hostile_bytes_on_stdin_in_a_subprocess(tmp_path: Path) -> None:
    async with FakeOpenAIServer() as model:
        result = await anyio.run_process(
            [
                sys.executable, "-m", "jevrefine", "run", "--provider", "openai",
                "--base-url", model.base_url, "--judge", "none",
            ],
            input=b"\xef\xbb\xbf" + GOOD_1 + b'\n{"prompt": "caf\xe9"}\n' + GOOD_2 + b"\n",
            env={**os.environ, "OPENAI_API_KEY": SECRET},
            check=False,
        )  # fmt: skip
    stderr = result.stderr.decode()
    assert result.returncode == 1, stderr
    assert "line 2: not valid UTF-8" in stderr
    assert "Traceback" not in stderr
    ids = sorted(json.loads(line)["id"] for line in result.stdout.decode("utf-8").splitlines())
    assert ids == ["g1", "g2"]  # the byte-order mark on line 1 is ignored
