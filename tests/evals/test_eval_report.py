"""The report's arithmetic: every key recomputed from the per-case rows, and the statistics."""

from __future__ import annotations

import json
import random
import statistics
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from jevrefine.evals import EvalReport
from jevrefine.evals._stats import cohen_kappa, newcombe_paired_ci, percentile, wilson

TYPES = ["contains", "not-contains", "word-count", "llm-rubric", "is-json"]


def random_rows(seed: int, n: int = 60) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    rows = []
    for i in range(n):
        types = rng.sample(TYPES, rng.randint(1, 4))
        row: dict[str, Any] = {
            "id": f"c{i}", "assertion_types": types, "model_tokens": rng.randint(0, 500),
            "judge_tokens": rng.randint(0, 100), "grader_tokens": rng.randint(0, 50),
            "latency_s": rng.uniform(0.01, 3.0),
        }  # fmt: skip
        if rng.random() < 0.1:
            row.update(error="ModelHTTPError: 500", attempts=[], chosen=None,
                       passed_baseline=None, passed_final=None)  # fmt: skip
            rows.append(row)
            continue
        attempts = []
        for index in range(1, rng.randint(1, 4) + 1):
            failed = sorted(rng.sample(range(len(types)), rng.randint(0, len(types))))
            judged = rng.choice([None, True, False])
            attempts.append({"index": index, "answer": "a", "judge_passed": judged,
                             "oracle_passed": not failed, "failed_assertions": failed,
                             "feedback": None})  # fmt: skip
        chosen = rng.choice([a["index"] for a in attempts])
        row.update(error=None, attempts=attempts, chosen=chosen,
                   passed_baseline=attempts[0]["oracle_passed"],
                   passed_final=attempts[chosen - 1]["oracle_passed"])  # fmt: skip
        rows.append(row)
    return rows


@pytest.mark.parametrize("seed", [1, 2, 3, 4, 5])
def test_every_key_recomputed_from_the_rows(seed: int) -> None:
    rows = random_rows(seed)
    data = EvalReport(results=rows, judge="asserts").to_dict()
    ran = [r for r in rows if r["error"] is None]
    n = len(ran)
    assert data["cases"] == len(rows)
    assert data["errors"] == len(rows) - n
    base = [r["passed_baseline"] for r in ran]
    final = [r["passed_final"] for r in ran]
    assert data["baseline_pass_rate"] == pytest.approx(sum(base) / n)
    assert data["final_pass_rate"] == pytest.approx(sum(final) / n)
    assert data["lift"] == pytest.approx(sum(final) / n - sum(base) / n)
    improved = sum(1 for b, f in zip(base, final, strict=True) if not b and f)
    degraded = sum(1 for b, f in zip(base, final, strict=True) if b and not f)
    assert (data["improved"], data["degraded"]) == (improved, degraded)
    assert data["error_introduction_rate"] == pytest.approx(degraded / sum(base))
    lo, hi = data["lift_ci95"]
    assert lo <= data["lift"] <= hi
    both = sum(1 for b, f in zip(base, final, strict=True) if b and f)
    assert (lo, hi) == pytest.approx(
        newcombe_paired_ci(both, degraded, improved, n - both - degraded - improved)
    )
    lengths = [len(r["attempts"]) for r in ran]
    assert data["attempts_histogram"] == {
        str(k): lengths.count(k) for k in range(1, max(lengths) + 1)
    }
    assert sum(data["attempts_histogram"].values()) == n
    for key in ("model_tokens", "judge_tokens", "grader_tokens"):
        assert data[key] == sum(r[key] for r in rows)
    latencies = [r["latency_s"] for r in ran]
    quantiles = statistics.quantiles(latencies, n=20, method="inclusive")
    assert data["latency_s"]["p50"] == pytest.approx(statistics.median(latencies))
    assert data["latency_s"]["p95"] == pytest.approx(quantiles[18])
    judged = [a for r in ran for a in r["attempts"] if a["judge_passed"] is not None]
    agreement = data["judge_agreement"]
    expected_cells = {
        "tp": sum(a["judge_passed"] and a["oracle_passed"] for a in judged),
        "fp": sum(a["judge_passed"] and not a["oracle_passed"] for a in judged),
        "fn": sum(not a["judge_passed"] and a["oracle_passed"] for a in judged),
        "tn": sum(not a["judge_passed"] and not a["oracle_passed"] for a in judged),
    }
    assert {k: agreement[k] for k in expected_cells} == expected_cells
    po = (expected_cells["tp"] + expected_cells["tn"]) / len(judged)
    judge_yes = (expected_cells["tp"] + expected_cells["fp"]) / len(judged)
    oracle_yes = (expected_cells["tp"] + expected_cells["fn"]) / len(judged)
    pe = judge_yes * oracle_yes + (1 - judge_yes) * (1 - oracle_yes)
    assert agreement["kappa"] == pytest.approx((po - pe) / (1 - pe))
    for kind, rates in data["per_assertion"].items():
        total = first = last = 0
        for r in ran:
            for i, t in enumerate(r["assertion_types"]):
                if t != kind:
                    continue
                total += 1
                first += i not in r["attempts"][0]["failed_assertions"]
                last += i not in r["attempts"][r["chosen"] - 1]["failed_assertions"]
        assert rates == pytest.approx({"baseline_pass_rate": first / total,
                                       "final_pass_rate": last / total})  # fmt: skip
    assert set(data["per_assertion"]) == {t for r in ran for t in r["assertion_types"]}
    assert data["results"] == rows
    json.dumps(data)  # JSON all the way down


def test_degenerate_reports() -> None:
    empty = EvalReport(results=[], judge="none").to_dict()
    assert (empty["cases"], empty["baseline_pass_rate"], empty["lift_ci95"]) == (0, 0.0, [0.0, 0.0])
    assert empty["judge_agreement"] is None
    assert empty["attempts_histogram"] == {}
    assert empty["latency_s"] == {"p50": 0.0, "p95": 0.0}
    errored = {"id": "x", "error": "E: x", "attempts": [], "model_tokens": 5}
    only_errors = EvalReport(results=[errored]).to_dict()
    assert (only_errors["cases"], only_errors["errors"], only_errors["model_tokens"]) == (1, 1, 5)
    assert only_errors["error_introduction_rate"] == 0.0
    assert only_errors["judge_agreement"] == {"tp": 0, "fp": 0, "fn": 0, "tn": 0, "kappa": None}


def test_newcombe_matches_published_values() -> None:
    # Fagerland, Lydersen & Laake, "Statistical Analysis of Contingency Tables", ch. 8 (Cavo et
    # al. 2012): 59 / 6 / 16 / 80 pairs, estimate -0.0621, Newcombe 95 % CI -0.1186 to -0.0046.
    lo, hi = newcombe_paired_ci(both=59, only_before=16, only_after=6, neither=80)
    assert (round(lo, 4), round(hi, 4)) == (-0.1186, -0.0046)
    assert newcombe_paired_ci(0, 0, 0, 0) == (0.0, 0.0)
    lo, hi = newcombe_paired_ci(0, 0, 10, 0)  # every case improved
    assert hi == 1.0
    assert 0.5 < lo < 1.0


def test_wilson_and_kappa_known_values() -> None:
    # Wilson: 8 of 10 at 95 % is 0.4902 to 0.9433 (Newcombe 1998a, Table I style check).
    assert tuple(round(x, 4) for x in wilson(8, 10)) == (0.4902, 0.9433)
    assert wilson(0, 0) == (0.0, 1.0)
    assert cohen_kappa(20, 5, 10, 15) == pytest.approx(0.4)  # po 0.7, pe 0.5
    assert cohen_kappa(4, 0, 0, 0) is None  # both always say passed: chance agreement is 1
    assert cohen_kappa(0, 0, 0, 0) is None
    assert cohen_kappa(0, 3, 3, 0) == pytest.approx(-1.0)


def test_percentile_edges() -> None:
    assert percentile([], 50) == 0.0
    assert percentile([3.0], 95) == 3.0
    assert percentile([1.0, 2.0], 50) == 1.5
    assert percentile([5.0, 1.0, 3.0], 100) == 5.0


@given(st.integers(0, 40), st.integers(0, 40), st.integers(0, 40), st.integers(0, 40))
def test_the_interval_always_holds_the_lift(
    both: int, before: int, after: int, neither: int
) -> None:
    n = both + before + after + neither
    lo, hi = newcombe_paired_ci(both, before, after, neither)
    lift = (after - before) / n if n else 0.0
    assert -1.0 <= lo <= lift + 1e-12
    assert lift - 1e-12 <= hi <= 1.0


def test_write_json_round_trips(tmp_path: Path) -> None:
    report = EvalReport(results=random_rows(9, 10))
    report.write_json(tmp_path / "r.json")
    assert json.loads((tmp_path / "r.json").read_text()) == report.to_dict()


def test_the_report_says_when_the_loop_judge_is_the_oracle() -> None:
    """Promise (issue 32, 3): under `judge="asserts"` the loop's judge is built from the
    oracle's assertions, so its agreement holds by construction: the report says so."""
    assert EvalReport(results=[], judge="asserts").to_dict()["judge_is_oracle"] is True
    for judge in ("config", "judge", "none"):
        assert EvalReport(results=[], judge=judge).to_dict()["judge_is_oracle"] is False  # type: ignore[arg-type]
