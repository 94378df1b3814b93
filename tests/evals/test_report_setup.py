"""The setup a report records (`EvalReport.setup`, the JSON's `setup`, the page's header).

`jevrefine eval` fills it from its flags and config, on the fake OpenAI server; a resumed run
that opens no model names the configured one; `EvalReport` carries it through `to_dict`.
"""

from __future__ import annotations

import datetime
import json
import platform
from pathlib import Path

import pytest
from evals_support import write_cases

from cli_support import run_cli, use_keys
from evals.report_fixture import page_rows
from jevrefine import __version__
from jevrefine.evals import EvalReport
from jevrefine.testing import FakeOpenAIServer

SETUP_KEYS = {
    "model", "cases_file", "judge", "max_attempts", "temperature", "max_tokens", "concurrency",
    "date", "jevrefine", "python",
}  # fmt: skip


@pytest.fixture(autouse=True)
def keys(monkeypatch: pytest.MonkeyPatch) -> None:
    use_keys(monkeypatch, jev=False)


async def test_eval_records_its_setup_in_the_json_and_the_page(tmp_path: Path) -> None:
    cases = write_cases(
        tmp_path / "cases.jsonl",
        [{"id": "a", "input": "hi", "assert": [{"type": "word-count", "value": {"max": 4}}]}],
    )
    report, page, rows = tmp_path / "r.json", tmp_path / "r.html", tmp_path / "rows.jsonl"
    started = datetime.datetime.now(datetime.UTC).replace(microsecond=0)
    async with FakeOpenAIServer() as model:
        argv = [
            *("eval", str(cases), "--provider", "openai", "--base-url", model.base_url),
            *("--max-repeat-attempts", "1", "--temperature", "0.3", "--concurrency", "2"),
            *("--json", str(report), "--report", str(page), "--out", str(rows), "--no-progress"),
        ]
        assert await run_cli(*argv) == 0
    setup = json.loads(report.read_text())["setup"]
    assert set(setup) == SETUP_KEYS
    assert setup["cases_file"] == str(cases)
    assert setup["judge"] == "asserts"
    assert (setup["max_attempts"], setup["temperature"], setup["max_tokens"]) == (2, 0.3, None)
    assert setup["concurrency"] == 2
    assert "openai" in setup["model"]
    assert (setup["jevrefine"], setup["python"]) == (__version__, platform.python_version())
    written = datetime.datetime.fromisoformat(setup["date"].replace("Z", "+00:00"))
    assert started <= written <= datetime.datetime.now(datetime.UTC)
    text = page.read_text(encoding="utf-8")
    assert f'data-key="setup.cases_file" data-value="&quot;{cases}&quot;"' in text
    assert "<title>jevrefine eval: cases.jsonl</title>" in text
    assert [row["i"] for row in page_rows(text)] == ["a"]
    # Resumed with every case done: no model opens, and the setup names the configured one.
    async with FakeOpenAIServer() as model:
        argv[argv.index("--base-url") + 1] = model.base_url
        assert await run_cli(*argv, "--limit", "1") == 0
        assert model.chat_requests == []
    again = json.loads(report.read_text())["setup"]
    assert again["model"] == "openai (its default model)"
    assert again["limit"] == 1


def test_the_setup_travels_through_to_dict_and_defaults_to_null() -> None:
    assert EvalReport(results=[]).to_dict()["setup"] is None
    setup = {"model": "m", "temperature": None}
    data = EvalReport(results=[], setup=setup).to_dict()
    assert data["setup"] == setup
    assert data["setup"] is not setup  # a copy: the report stays frozen
