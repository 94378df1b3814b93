"""The benchmark harness still runs: a short run of the cheap benchmarks writes its JSON.

Runs `python -m benchmarks --quick --only bench_http_overhead bench_judge_loop` in a subprocess
(as `nox -s bench` does, the fake servers in their own processes), into a temporary directory so
the published results are untouched. Only the dev extra is needed: the peers (pydantic-ai,
LangChain, DSPy) are in the `bench` extra, and each benchmark skips a missing one with a reason.
`bench_quality` is not run here: it generates with real local models (minutes of CPU per model);
tests/test_bench_quality.py covers its arithmetic and judges.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
BENCHMARKS = ("bench_http_overhead", "bench_judge_loop")
# The peer contenders of each benchmark, by the module they need.
PEERS = {
    "bench_http_overhead": {
        "pydantic_ai": "pydantic-ai Agent.run",
        "langchain_openai": "LangChain ChatOpenAI.ainvoke",
    },
    "bench_judge_loop": {
        "pydantic_ai": "pydantic-ai output_validator + ModelRetry",
        "dspy": "DSPy Refine (threads)",
    },
}


def _installed(module: str) -> bool:
    return importlib.util.find_spec(module) is not None


@pytest.mark.slow
@pytest.mark.timeout(110)
def test_quick_run_writes_results(tmp_path: Path) -> None:
    command = [sys.executable, "-m", "benchmarks", "--quick", "--no-plots"]
    result = subprocess.run(
        [*command, "--out", str(tmp_path), "--only", *BENCHMARKS],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=100,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    results = json.loads((tmp_path / "results.json").read_text())
    assert results["cpu_count"] >= 1
    assert results["packages"]["jevrefine"]
    assert results["python"]
    assert sorted(results["benchmarks"]) == sorted(BENCHMARKS)
    for name, bench in results["benchmarks"].items():
        assert not bench.get("failed"), bench.get("stderr")
        assert bench["markdown"].startswith("## ")
        assert bench["figures"], name
        skipped = bench["data"]["skipped"]
        for module, contender in PEERS[name].items():
            # A missing peer is skipped with its reason; an installed one is measured.
            assert (contender in skipped) == (not _installed(module)), (contender, skipped)
            if contender in skipped:
                assert "not installed" in skipped[contender]
    report = (tmp_path / "RESULTS.md").read_text()
    assert "## Framework overhead per model call over HTTP" in report
    assert "## The judge-and-retry loop" in report
