"""The report page benchmark runs (a small size) and says what it measured."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
@pytest.mark.timeout(170)
def test_a_small_run_measures_the_page_and_the_writers(tmp_path: Path) -> None:
    out = tmp_path / "result.json"
    command = ["-m", "benchmarks.bench_report_page", "--quick", "--cases", "300"]
    result = subprocess.run(
        [sys.executable, *command, "--answers-mb", "3"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=160,
        check=False,
        env={**os.environ, "JEVREFINE_BENCH_JSON": str(out)},
    )
    assert result.returncode == 0, result.stderr[-3000:]
    data = json.loads(out.read_text())["data"]
    assert data["open"]["cases"] == 300
    assert data["open"]["bytes"] > 0
    browser = data["open"]["browser"]
    assert "skipped" in browser or len(browser["load_s"]) == data["rounds"]
    kinds = [row["kind"] for row in data["memory"]]
    assert kinds == ["html", "json"]
    html_row = data["memory"][0]
    # The page of 3 MB of answers is a fraction of them: each answer is cut in it.
    assert html_row["bytes"] < html_row["answer_chars"]
    assert "## The eval report page at scale" in result.stdout
