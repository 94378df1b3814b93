"""The benchmark harness still runs: a short run of the cheap benchmarks writes its JSON.

Runs `python -m benchmarks --quick --only bench_http_overhead bench_judge_loop` in a subprocess
(as `nox -s bench` does, the fake servers in their own processes), into a temporary directory so
the published results are untouched. Only the dev extra is needed: the peers (pydantic-ai,
LangChain, DSPy) are in the `bench` extra, and each benchmark skips a missing one with a reason.
`bench_quality` is not run here: it generates with real local models (minutes of CPU per model);
tests/test_bench_quality.py covers its arithmetic and judges. `bench_ray --quick` gets a test of
its own (marked `ray`): it needs the ray extra and a local Ray instance.
"""

from __future__ import annotations

import importlib.util
import json
import os
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


@pytest.mark.slow
@pytest.mark.ray
@pytest.mark.timeout(600)
def test_bench_ray_quick_run_reports_every_contender(tmp_path: Path) -> None:
    """`bench_ray --quick`: Ray at 1 and 2 processes beside the in-process run and the floor.

    No timing is checked: that every contender ran, that every refinement reached both servers,
    and that each Ray actor reported its CPU at teardown (the benchmark's CPU column needs it).
    """
    if not _installed("ray"):
        message = 'bench_ray needs Ray: pip install "jevrefine[ray]"'
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    out = tmp_path / "ray.json"
    result = subprocess.run(
        [sys.executable, "-m", "benchmarks.bench_ray", "--quick"],
        cwd=ROOT,
        env={**os.environ, "JEVREFINE_BENCH_JSON": str(out)},
        capture_output=True,
        text=True,
        timeout=580,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    payload = json.loads(out.read_text())
    assert payload["markdown"].startswith("## Ray: ")
    data = payload["data"]
    contenders = {"in process", "floor", "Ray, 1 process", "Ray, 2 processes"}
    assert set(data["samples"]) == contenders
    for name, samples in data["samples"].items():
        # A model call and a judge call per input (the floor first records one refinement).
        calls = 2 * data["n"] + (2 if name == "floor" else 0)
        assert [s["requests"] for s in samples] == [calls] * data["rounds"], name
        if name.startswith("Ray"):
            # Every actor that refined reported (a quick run may hand all its batches to one).
            assert all(s["workers_cpu"] is not None for s in samples), name
            assert all(s["processes"] >= 1 for s in samples), name
