"""`jevrefine run --report FILE.html` end to end on the fake OpenAI and Jev servers.

The page is read back with the standard library's HTML parser: its `data-key`/`data-value` numbers,
and its one row per item from the page's JSON island. The browser test of the same page kind is in
tests/evals/test_report_html.py.
"""

from __future__ import annotations

import json
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

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
from evals.report_fixture import page_rows
from jevrefine.testing import FakeJevServer, FakeOpenAIServer


@pytest.fixture(autouse=True)
def keys(monkeypatch: pytest.MonkeyPatch) -> None:
    use_keys(monkeypatch)


class _Page(HTMLParser):
    """The numbers and the item ids of a report page."""

    def __init__(self, text: str) -> None:
        super().__init__()
        self.numbers: dict[str, Any] = {}
        self.feed(text)
        self.rows = page_rows(text)
        self.ids: list[str] = [row["i"] for row in self.rows]

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = dict(attrs)
        if found.get("data-key") is not None:
            self.numbers[str(found["data-key"])] = json.loads(str(found["data-value"]))


async def test_the_report_shows_every_row_with_the_summary_numbers(tmp_path: Path) -> None:
    prompts = [{"id": f"q{i}", "prompt": f"question {i}"} for i in range(5)]
    prompts.append({"id": "<q-bad>", "prompt": 'a bad one <script>alert("x")</script>'})
    source = write_jsonl(tmp_path / "in.jsonl", prompts)
    output, report = tmp_path / "out.jsonl", tmp_path / "report.html"
    async with FakeOpenAIServer() as model, FakeJevServer(good_unless_bad) as jev:
        config = jev_config(tmp_path, jev.base_url)
        code = await run_cli(
            "run", str(source), "-o", str(output), "--config", str(config),
            "--base-url", model.base_url, "--report", str(report), "--no-progress",
        )  # fmt: skip
    assert code == 0
    rows = read_jsonl(output)
    text = report.read_text(encoding="utf-8")
    page = _Page(text)
    assert page.ids == [row["id"] for row in rows]
    assert page.numbers["items"] == len(rows) == 6
    assert page.numbers["passed"] == sum(row["passed"] is True for row in rows) == 5
    assert page.numbers["errors"] == 0
    assert page.numbers["model_tokens"] == sum(row["model_tokens"] for row in rows)
    assert page.numbers["judge_tokens"] == sum(row["judge_tokens"] for row in rows) > 0
    assert page.numbers["attempts_histogram.1"] == 5
    assert page.numbers["attempts_histogram.2"] == 1
    assert page.numbers["summary.resumed"] == 0
    assert page.numbers["summary.bad_lines"] == 0
    assert "<script>alert" not in text  # the echoed prompt is data, not markup
    answers = {row["i"]: row["b"][-2][2][1] for row in page.rows}  # the answer, before the facts
    assert 'a bad one <script>alert("x")</script>' in answers["<q-bad>"]
    assert SECRET not in text
    # The header says what made the page: the model, the settings, when, with what.
    assert page.numbers["summary.input"] == str(source)
    assert {"summary.max_attempts", "summary.date", "summary.jevrefine", "summary.python"} <= set(
        page.numbers
    )


async def test_a_resumed_run_reports_every_row_of_its_output(tmp_path: Path) -> None:
    prompts = [{"id": f"q{i}", "prompt": f"question {i}"} for i in range(6)]
    output, report = tmp_path / "out.jsonl", tmp_path / "report.html"
    flags = ("--provider", "openai", "--judge", "none", "--no-progress")
    async with FakeOpenAIServer() as model:
        first = write_jsonl(tmp_path / "first.jsonl", prompts[:3])
        assert (
            await run_cli(
                "run", str(first), "-o", str(output), "--base-url", model.base_url, *flags
            )
            == 0
        )
        every = write_jsonl(tmp_path / "every.jsonl", prompts)
        code = await run_cli(
            "run", str(every), "-o", str(output), "--base-url", model.base_url,
            "--report", str(report), *flags,
        )  # fmt: skip
    assert code == 0
    page = _Page(report.read_text(encoding="utf-8"))
    # Every row of the output file, in its order: the resumed ones first, then this run's in the
    # order they finished (concurrent items may finish in any order).
    in_file = [json.loads(line)["id"] for line in output.read_text("utf-8").splitlines()]
    assert page.ids == in_file
    assert sorted(in_file[:3]) == ["q0", "q1", "q2"]  # the first run's, in the order they finished
    assert sorted(in_file) == [f"q{i}" for i in range(6)]
    assert page.numbers["summary.resumed"] == 3
    assert page.numbers["pass_rate"] is None  # unjudged: no pass rate to show


async def test_with_stdout_output_the_report_holds_this_runs_rows(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = write_jsonl(tmp_path / "in.jsonl", [{"prompt": "one"}, {"prompt": "two"}])
    report = tmp_path / "report.html"
    async with FakeOpenAIServer() as model:
        code = await run_cli(
            "run", str(source), "--provider", "openai", "--base-url", model.base_url,
            "--judge", "none", "--no-progress", "--report", str(report),
        )  # fmt: skip
    assert code == 0
    printed = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert _Page(report.read_text(encoding="utf-8")).ids == [row["id"] for row in printed]
    assert [row["id"] for row in printed] == ["1", "2"]


@pytest.mark.parametrize("where", ["missing/report.html", "out.jsonl", "in.jsonl"])
async def test_a_report_path_that_cannot_work_stops_before_any_model_call(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], where: str
) -> None:
    source = write_jsonl(tmp_path / "in.jsonl", [{"prompt": "one"}])
    output = tmp_path / "out.jsonl"
    output.write_text("", encoding="utf-8")
    async with FakeOpenAIServer() as model:
        code = await run_cli(
            "run", str(source), "-o", str(output), "--provider", "openai",
            "--base-url", model.base_url, "--judge", "none", "--no-progress",
            "--report", str(tmp_path / where),
        )  # fmt: skip
        asked = len(model.chat_requests)
    assert (code, asked) == (2, 0)
    err = capsys.readouterr().err
    assert "--report" in err
    assert "does not exist" in err or "is the same file as" in err
    assert source.read_text(encoding="utf-8") == '{"prompt": "one"}\n'
