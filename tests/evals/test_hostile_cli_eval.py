"""`jevrefine eval` (and `run`) against hostile paths, rows and case files (issue 29, issue 32 #5).

Before: `--report cases.jsonl` replaced the case file; `run --report` compared `abspath` only,
so a symlink or hard link to the input was overwritten; a missing report folder failed after
every case ran; a tampered resume row crashed every resume with a traceback; a row was reused
whatever its case had become; a `python` check ran at load even on a resume with nothing left;
`compact_output` followed a symlink planted at its predictable temporary name; and with no flag
an eval kept nothing. Every test runs the real CLI on the fake OpenAI server (or on no server at
all, where nothing must be called).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from evals_support import write_cases

from cli_support import SECRET, read_jsonl, run_cli, use_keys, write_jsonl
from jevrefine import cli
from jevrefine.cli._eval import _Progress
from jevrefine.cli._io import compact_output
from jevrefine.testing import FakeOpenAIServer

SHORT = {"type": "word-count", "value": {"max": 4}}
NOWHERE = "http://127.0.0.1:9/v1"
"""No server listens here: a model call would fail (exit 1), so exit 2 proves none was made."""


@pytest.fixture(autouse=True)
def keys(monkeypatch: pytest.MonkeyPatch) -> None:
    use_keys(monkeypatch, jev=False)


def case_file(tmp_path: Path) -> Path:
    return write_cases(
        tmp_path / "cases.jsonl",
        [
            {"id": "short", "input": "hi", "assert": [SHORT]},
            {"id": "long", "input": "one two three four five", "assert": [SHORT]},
        ],
    )


def eval_args(cases: Path, base_url: str, *extra: str) -> list[str]:
    return [
        *("eval", str(cases), "--provider", "openai", "--base-url", base_url),
        *("--no-progress", "--max-repeat-attempts", "1", *extra),
    ]


# -- RT-5: no output overwrites an input; a missing folder is refused up front --------------------


@pytest.mark.parametrize(
    "flags",
    [
        ["--report", "CASES"],
        ["--json", "CASES"],
        ["--out", "CASES"],
        ["--report", "LINK"],  # a symlink to the case file
        ["--json", "HARD"],  # a hard link to the case file
        ["--out", "ROWS", "--report", "ROWS"],  # the rows file is read to resume
        ["--out", "ROWS", "--json", "ROWS_LINK"],
        ["--json", "J", "--report", "J"],
        ["--config", "CONFIG", "--report", "CONFIG"],
        ["--report", "MISSING/r.html"],
        ["--json", "MISSING/r.json"],
        ["--out", "MISSING/rows.jsonl"],
        ["--report", "FOLDER"],
    ],
)
def test_an_output_over_an_input_or_in_no_folder_exits_2_before_any_call(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], flags: list[str]
) -> None:
    cases = case_file(tmp_path)
    rows = write_jsonl(tmp_path / "rows.jsonl", [])
    config = tmp_path / "jevrefine.toml"
    config.write_text('[model]\nprovider = "openai"\n')
    (tmp_path / "link.jsonl").symlink_to(cases)
    os.link(cases, tmp_path / "hard.jsonl")
    (tmp_path / "rows-link.jsonl").symlink_to(rows)
    (tmp_path / "folder").mkdir()
    names = {
        "CASES": cases, "LINK": tmp_path / "link.jsonl", "HARD": tmp_path / "hard.jsonl",
        "ROWS": rows, "ROWS_LINK": tmp_path / "rows-link.jsonl", "J": tmp_path / "r.json",
        "CONFIG": config, "FOLDER": tmp_path / "folder",
    }  # fmt: skip
    argv = [
        str(names[f]) if f in names else f.replace("MISSING", str(tmp_path / "no" / "such"))
        for f in flags
    ]
    before = cases.read_bytes(), config.read_bytes()
    assert cli.main(eval_args(cases, NOWHERE, *argv)) == 2
    err = capsys.readouterr().err
    assert any(
        phrase in err
        for phrase in ("is the same file as", "are the same file", "does not exist", "is a folder")
    ), err
    assert (cases.read_bytes(), config.read_bytes()) == before
    assert rows.read_text() == ""
    assert not (tmp_path / "no").exists()


@pytest.mark.parametrize("link", ["symlink", "hard link"])
def test_run_refuses_a_report_or_output_linked_to_its_input(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], link: str
) -> None:
    source = write_jsonl(tmp_path / "in.jsonl", [{"id": "a", "prompt": "hi"}])
    alias = tmp_path / "alias.html"
    if link == "symlink":
        alias.symlink_to(source)
    else:
        os.link(source, alias)
    before = source.read_bytes()
    base = ["run", str(source), "--provider", "openai", "--base-url", NOWHERE, "--no-progress"]
    # Before: abspath differed, so the page replaced the input after every item had run.
    assert cli.main([*base, "-o", str(tmp_path / "out.jsonl"), "--report", str(alias)]) == 2
    assert cli.main([*base, "-o", str(alias)]) == 2
    assert "is the same file as the input" in capsys.readouterr().err
    assert source.read_bytes() == before


# -- issue 32 #5: results are kept by default, and the bar moves per attempt ----------------------


async def test_eval_keeps_its_results_by_default_and_says_where(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    cases = case_file(tmp_path)
    async with FakeOpenAIServer() as model:
        assert await run_cli(*eval_args(cases, model.base_url)) == 0
        (folder,) = (tmp_path / "eval-results").iterdir()
        assert folder.name.startswith("cases-")
        assert folder.name.endswith("Z")
        assert sorted(p.name for p in folder.iterdir()) == [
            "report.html", "report.json", "rows.jsonl",
        ]  # fmt: skip
        assert json.loads((folder / "report.json").read_text())["cases"] == 2
        assert len(read_jsonl(folder / "rows.jsonl")) == 2
        err = capsys.readouterr().err
        assert f"results: {Path('eval-results') / folder.name}" in err  # at the start
        assert f"results kept: {Path('eval-results') / folder.name}" in err  # and at the end
        assert f"--out {Path('eval-results') / folder.name / 'rows.jsonl'}" in err
        # The opt-out keeps nothing; explicit flags keep what they name.
        assert await run_cli(*eval_args(cases, model.base_url, "--no-save")) == 0
        assert len(list((tmp_path / "eval-results").iterdir())) == 1
        assert "results: none (--no-save)" in capsys.readouterr().err
        assert await run_cli(*eval_args(cases, model.base_url, "--json", "only.json")) == 0
    assert len(list((tmp_path / "eval-results").iterdir())) == 1
    assert (tmp_path / "only.json").exists()
    assert cli.main(eval_args(cases, NOWHERE, "--no-save", "--json", "x.json")) == 2


def test_the_bar_moves_per_attempt_and_never_reaches_a_case_early() -> None:
    progress = _Progress(attempts_per_case=3)
    positions = []
    for _ in range(3):  # one slow case, on its first, second and third answer
        progress.asked += 1
        positions.append(progress.position(in_flight=1))
    assert 0 < positions[0] < positions[1] < positions[2] < 1  # before: 0, 0, 0
    progress.add({"attempts": [{}, {}, {}], "error": None, "passed_final": True})
    assert progress.position(in_flight=0) == 1


async def test_eval_reports_each_attempt_to_the_bar(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from jevrefine.cli import _progress

    seen: list[float | None] = []
    shown = _progress.Bar.show

    def record(self: Any, fields: dict[str, str], *, completed: float | None = None) -> None:
        seen.append(completed)
        shown(self, fields, completed=completed)

    # Observed, not replaced: the real bar still draws (here off, with --no-progress).
    monkeypatch.setattr(_progress.Bar, "show", record)
    cases = write_cases(
        tmp_path / "c.jsonl",
        [{"id": "long", "input": "one two three four five", "assert": [SHORT]}],
    )
    async with FakeOpenAIServer() as model:
        argv = eval_args(cases, model.base_url, "--no-save", "--max-repeat-attempts", "2")
        assert await run_cli(*argv) == 0
    # Three answers (each too long), then the case: the bar moved before the case was done.
    assert [round(x or 0, 2) for x in seen] == [0.25, 0.5, 0.75, 1.0]


# -- RT-8: tampered rows are reported by line and run again, never a traceback -------------------

TAMPERED: list[tuple[str, Any]] = [
    ("latency_s", "slow"), ("latency_s", -1), ("latency_s", 1e300), ("attempts", [1]),
    ("attempts", "many"), ("attempts", 10**400), ("model_tokens", [1]), ("model_tokens", 10**400),
    ("model_tokens", -5), ("model_tokens", "7"), ("judge_tokens", 1.5), ("grader_tokens", None),
    ("chosen", 99), ("chosen", True), ("chosen", "1"), ("passed_final", "yes"),
    ("passed_baseline", 1), ("id", 7), ("input", 3), ("assertion_types", "word-count"),
    ("error", 5), ("metadata", []),
]  # fmt: skip


async def test_every_tampered_row_is_reported_by_line_and_runs_again(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cases = case_file(tmp_path)
    out = tmp_path / "rows.jsonl"
    async with FakeOpenAIServer() as model:
        argv = eval_args(cases, model.base_url, "--out", str(out), "--json", str(tmp_path / "r.j"))
        assert await run_cli(*argv) == 0
        good = out.read_text(encoding="utf-8").split("\n")[0]
        for key, value in TAMPERED:
            row = json.loads(good)
            row[key] = value
            text = json.dumps(row)
            if key == "attempts" and value == 10**400:
                text = text.replace(str(10**400), "1e400")  # a float past the range
            out.write_text(text + "\n", encoding="utf-8")
            before = len(model.chat_requests)
            capsys.readouterr()
            code = await run_cli(*argv)
            err = capsys.readouterr().err
            assert code == 0, (key, value, err)  # before: a traceback and exit 1, every time
            assert "Traceback" not in err
            assert f"{out}:1: not a result row (" in err, (key, value, err)
            assert len(model.chat_requests) > before  # that case ran again
            # The next resume is clean: the fresh rows are used.
            out.write_text(out.read_text(encoding="utf-8").split("\n", 1)[1], encoding="utf-8")


async def test_run_report_survives_a_tampered_output_row(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = write_jsonl(tmp_path / "in.jsonl", [{"id": "a", "prompt": "hi"}])
    output = tmp_path / "out.jsonl"
    output.write_text(
        '{"id": "a", "line": 1, "answer": "x", "passed": true, "attempts": '
        + "9" * 401
        + ', "error": null}\n',
        encoding="utf-8",
    )
    async with FakeOpenAIServer() as model:
        code = await run_cli(
            "run", str(source), "-o", str(output), "--provider", "openai", "--base-url",
            model.base_url, "--judge", "none", "--no-progress", "--report",
            str(tmp_path / "run.html"),
        )  # fmt: skip
    err = capsys.readouterr().err
    assert code == 0, err  # before: exit 3 at the very end, after every item had run
    assert "Traceback" not in err
    assert f"{output}:1: not a result row (attempts: " in err  # said, and run again
    assert (tmp_path / "run.html").exists()
    assert [r["id"] for r in read_jsonl(output)] == ["a"]  # the bad row was run again, replaced


# -- RT-9: a row is reused only for the same case in the same setup ------------------------------


async def test_a_changed_case_or_setup_runs_again(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cases = case_file(tmp_path)
    out, report = tmp_path / "rows.jsonl", tmp_path / "r.json"
    async with FakeOpenAIServer() as model:
        argv = eval_args(cases, model.base_url, "--out", str(out), "--json", str(report))
        assert await run_cli(*argv) == 0
        assert json.loads(report.read_text())["final_pass_rate"] == 0.5
        # Every stored answer now fails: before, the old verdicts came back (100 % passed).
        write_cases(
            cases,
            [
                {"id": "short", "input": "hi", "assert": [SHORT]},  # unchanged
                {"id": "long", "input": "one two three four five",
                 "assert": [{"type": "equals", "value": "never"}]},
            ],
        )  # fmt: skip
        before = len(model.chat_requests)
        assert await run_cli(*argv) == 0
        asked = [r["messages"][-1]["content"] for r in model.chat_requests[before:]]
        assert asked
        assert all(a.startswith("one two three four five") for a in asked)
        assert "case 'long' changed (or the setup did)" in capsys.readouterr().err
        data = json.loads(report.read_text())
        assert [r["passed_final"] for r in data["results"]] == [True, False]
        # Another setup (more attempts) reuses nothing.
        before = len(model.chat_requests)
        assert await run_cli(*argv, "--max-repeat-attempts", "2") == 0
        assert {r["messages"][0]["content"] for r in model.chat_requests[before:]} >= {"hi"}


# -- RT-14: case files are code: confined, lazy ---------------------------------------------------

MARKING = """
import pathlib
pathlib.Path(__file__).with_name("imported.marker").write_text("ran")

def short(output, context):
    return len(output.split()) <= 4
"""


async def test_a_resume_with_nothing_to_run_runs_no_case_file_code(tmp_path: Path) -> None:
    (tmp_path / "checks.py").write_text(MARKING)
    cases = write_cases(
        tmp_path / "cases.jsonl",
        [{"id": "p", "input": "hi", "assert": [{"type": "python", "value": "checks.py:short"}]}],
    )
    marker = tmp_path / "imported.marker"
    out = tmp_path / "rows.jsonl"
    async with FakeOpenAIServer() as model:
        argv = eval_args(cases, model.base_url, "--out", str(out), "--json", str(tmp_path / "j"))
        assert await run_cli(*argv) == 0
        assert marker.exists()  # the check ran when an answer needed it
        marker.unlink()
        assert await run_cli(*argv) == 0  # every case is done
    assert not marker.exists()  # before: imported (run) by load_cases on every invocation


def test_python_outside_the_case_folder_needs_the_flag(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "checks.py").write_text("def ok(output, context):\n    return True\n")
    inner = tmp_path / "cases"
    inner.mkdir()
    (inner / "linked.py").symlink_to(tmp_path / "checks.py")
    for reference in ("../checks.py:ok", f"{tmp_path / 'checks.py'}:ok", "linked.py:ok"):
        cases = write_cases(
            inner / "c.jsonl",
            [{"input": "hi", "assert": [{"type": "python", "value": reference}]}],
        )
        assert cli.main(eval_args(cases, NOWHERE, "--no-save")) == 2
        assert "is outside the case file's folder" in capsys.readouterr().err
        # With the flag it loads: the run then reaches the (absent) model server, exit 1.
        assert cli.main(eval_args(cases, NOWHERE, "--no-save", "--allow-python-outside")) == 1


def test_the_help_says_a_case_file_is_code(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        cli.main(["eval", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "A case file is code" in text
    assert "Run only case files you trust" in text
    assert "--allow-python-outside" in text


# -- RT-12 through the CLI ------------------------------------------------------------------------


def test_a_huge_number_in_a_case_file_exits_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cases = tmp_path / "c.jsonl"
    cases.write_text(
        '{"input": "q", "assert": [{"type": "equals", "value": ' + "7" * 4301 + "}]}\n"
    )
    assert cli.main(eval_args(cases, NOWHERE, "--no-save")) == 2  # before: ValueError, exit 1
    assert "a number of more than 4,300 digits" in capsys.readouterr().err


# -- RT-18: the compaction's temporary file is made securely --------------------------------------


def test_compaction_never_follows_a_planted_symlink(tmp_path: Path) -> None:
    output = write_jsonl(
        tmp_path / "out.jsonl", [{"id": "a", "error": "boom"}, {"id": "b", "error": None}]
    )
    output.chmod(0o640)
    victim = tmp_path / "victim.txt"
    victim.write_text("precious")
    # The name the old code always used, planted as a symlink to another file.
    (tmp_path / ".out.jsonl.resume-tmp").symlink_to(victim)
    assert compact_output(str(output), {"a"}) == 1
    assert victim.read_text() == "precious"  # before: overwritten with the kept rows
    assert [r["id"] for r in read_jsonl(output)] == ["b"]
    assert output.stat().st_mode & 0o777 == 0o640  # the output keeps its own mode
    leftovers = sorted(p.name for p in tmp_path.iterdir())
    assert leftovers == [".out.jsonl.resume-tmp", "out.jsonl", "victim.txt"]


def test_no_secret_in_any_message(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cases = case_file(tmp_path)
    assert cli.main(eval_args(cases, NOWHERE, "--report", str(cases))) == 2
    assert SECRET not in capsys.readouterr().err
