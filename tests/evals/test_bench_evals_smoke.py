"""The evaluation overhead benchmark runs under the harness (`nox -s bench`) and writes its JSON."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
@pytest.mark.timeout(110)
def test_quick_run_writes_the_overhead(tmp_path: Path) -> None:
    command = [sys.executable, "-m", "benchmarks", "--quick", "--no-plots", "--out", str(tmp_path)]
    result = subprocess.run(
        [*command, "--only", "bench_evals_overhead"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=100,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    bench = json.loads((tmp_path / "results.json").read_text())["benchmarks"]
    data = bench["bench_evals_overhead"]
    assert not data.get("failed"), data.get("stderr")
    assert data["markdown"].startswith("## Evaluation harness overhead per case")
    numbers = data["data"]
    assert len(numbers["overhead_per_case"]) == numbers["rounds"]
    assert all(t > 0 for t in numbers["cpu_per_case"]["refine loop alone"])
    assert data["figures"][0]["name"] == "evals_overhead"
