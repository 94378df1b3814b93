"""`EvalReport`: the per-case result rows, and every summary figure computed from them.

The figures are computed from the rows alone (`to_dict()`), so a report rebuilt from the rows of
a resumed `jevrefine eval --out` file equals the one an uninterrupted run would have made.
"""

from __future__ import annotations

import json
import os
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from ._stats import cohen_kappa, newcombe_paired_ci, percentile

__all__ = ["EvalReport", "JudgeMode", "pass_rates"]

JudgeMode = Literal["asserts", "config", "judge", "none"]
"""What judged the refine loop: the case's assertions, the client's own advisor, a `Judge`
object given to `evaluate`, or nothing (one attempt)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class EvalReport:
    """The result of `evaluate`: one row per case, in the case file's order.

    Args:
        results: the result rows (as `to_dict()["results"]`); an errored case has `error` set.
        judge: what judged the loop; `"none"` makes `judge_agreement` null.
        setup: what made the report (model, case file, settings, date, versions), shown in the
            page's header and compared by `jevrefine compare`; `None` when unknown.
    """

    results: Sequence[Mapping[str, Any]]
    """One row per case: `id`, `passed_baseline`, `passed_final`, `chosen`, `error`,
    `attempts`, and the tokens, latency and assertion types the summary is computed from (kept
    as a tuple)."""
    judge: JudgeMode = "asserts"
    """What judged the refine loop."""
    setup: Mapping[str, Any] | None = None
    """What made the report: `model`, `cases_file`, `judge`, `max_attempts`, `temperature`,
    `max_tokens`, `concurrency`, `date`, `jevrefine`, `python` (as `jevrefine eval` records them,
    through `jevrefine.evals._setup.report_setup`); any JSON-able facts; `None` when unknown."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "results", tuple(self.results))

    @property
    def errors(self) -> int:
        """How many cases errored."""
        return sum(1 for row in self.results if row.get("error") is not None)

    def to_dict(self) -> dict[str, Any]:
        """Every figure of the report (keys pinned in the docs), and the rows under `results`.

        Errored cases count in `errors` only: every rate, the histogram, `per_assertion` and
        `judge_agreement` are over the cases that ran (`cases - errors`).
        """
        ok = [row for row in self.results if row.get("error") is None]
        n = len(ok)
        latencies = [float(row.get("latency_s", 0.0)) for row in ok]
        return {
            "cases": len(self.results),
            "errors": len(self.results) - n,
            **pass_rates(ok),
            "attempts_histogram": _histogram(ok),
            "model_tokens": _total(self.results, "model_tokens"),
            "judge_tokens": _total(self.results, "judge_tokens"),
            "grader_tokens": _total(self.results, "grader_tokens"),
            "latency_s": {"p50": percentile(latencies, 50), "p95": percentile(latencies, 95)},
            "judge_agreement": None if self.judge == "none" else _agreement(ok),
            # With `asserts` the loop's judge is built from the oracle's own assertions: their
            # agreement (a kappa of 1) holds by construction and measures nothing.
            "judge_is_oracle": self.judge == "asserts",
            "per_assertion": _per_assertion(ok),
            "escalated": sum(len(a.get("escalated") or ()) for row in ok for a in row["attempts"]),
            **_echoes(ok),
            "setup": dict(self.setup) if self.setup is not None else None,
            "results": [dict(row) for row in self.results],
        }

    def write_json(self, path: str | os.PathLike[str]) -> None:
        """Write `to_dict()` as JSON (UTF-8, indented).

        The file is written as a stream: no string of the whole file is built, so writing costs
        little memory beyond the report's own.
        """
        with Path(path).open("w", encoding="utf-8") as file:
            json.dump(self.to_dict(), file, ensure_ascii=False, indent=2)
            file.write("\n")

    def write_html(self, path: str | os.PathLike[str]) -> None:
        """Write the report page: one self-contained HTML file (nothing loads from the network).

        The page is written as a stream, with each long text cut (the whole texts stay in the
        JSON file and the rows): its size, and the memory writing it takes, stay bounded.

        Raises:
            NotImplementedError: this build has no page renderer (`jevrefine.evals._html`).
        """
        try:
            from ._html import write_eval_html  # type: ignore[import-not-found,unused-ignore]
        except ImportError:
            raise NotImplementedError(
                "this jevrefine build has no HTML report renderer; use write_json"
            ) from None
        with Path(path).open("w", encoding="utf-8") as file:
            write_eval_html(self.to_dict(), file)


def _echoes(rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The passes made by echoing the feedback, and the rates with those counted as failed.

    `echo_passes`, `final_pass_rate_answered` and `lift_answered`.
    """
    n = len(rows)
    echo_passes = sum(
        1 for row in rows if row.get("passed_final") and not row.get("passed_final_answered", True)
    )
    answered = sum(
        1 for row in rows if row.get("passed_final") and row.get("passed_final_answered", True)
    )
    baseline = sum(1 for row in rows if row.get("passed_baseline"))
    return {
        "echo_passes": echo_passes,
        "final_pass_rate_answered": answered / n if n else 0.0,
        "lift_answered": (answered - baseline) / n if n else 0.0,
    }


def pass_rates(rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The pass-rate keys of a report over `rows` (the cases that ran, none errored).

    `baseline_pass_rate`, `final_pass_rate`, `lift`, `lift_ci95` (Newcombe's paired interval),
    `improved`, `degraded` and `error_introduction_rate`, as `to_dict()` and `jevrefine
    compare` report them.
    """
    counts = _pairs(rows)
    n = len(rows)
    baseline = (counts["both"] + counts["degraded"]) / n if n else 0.0
    final = (counts["both"] + counts["improved"]) / n if n else 0.0
    lift = final - baseline
    lo, hi = newcombe_paired_ci(
        counts["both"], counts["degraded"], counts["improved"], counts["neither"]
    )
    passed_first = counts["both"] + counts["degraded"]
    return {
        "baseline_pass_rate": baseline,
        "final_pass_rate": final,
        "lift": lift,
        "lift_ci95": [min(lo, lift), max(hi, lift)],
        "improved": counts["improved"],
        "degraded": counts["degraded"],
        "error_introduction_rate": counts["degraded"] / passed_first if passed_first else 0.0,
    }


def _pairs(rows: Sequence[Mapping[str, Any]]) -> Counter[str]:
    counts: Counter[str] = Counter(both=0, degraded=0, improved=0, neither=0)
    for row in rows:
        before, after = bool(row.get("passed_baseline")), bool(row.get("passed_final"))
        if before and after:
            counts["both"] += 1
        elif before:
            counts["degraded"] += 1
        elif after:
            counts["improved"] += 1
        else:
            counts["neither"] += 1
    return counts


def _histogram(rows: Sequence[Mapping[str, Any]]) -> dict[str, int]:
    """Cases by the number of attempts they took, every count from 1 to the most present."""
    taken = Counter(len(row.get("attempts") or ()) for row in rows)
    most = max(taken, default=0)
    return {str(k): taken.get(k, 0) for k in range(1, most + 1)}


def _total(rows: Sequence[Mapping[str, Any]], key: str) -> int:
    # Tokens are spent whether or not the case errored afterwards: all rows count.
    return sum(int(row.get(key) or 0) for row in rows)


def _agreement(rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Loop judge vs oracle over every judged attempt ("positive" = passed)."""
    tp = fp = fn = tn = 0
    for row in rows:
        for attempt in row.get("attempts") or ():
            judged = attempt.get("judge_passed")
            if judged is None:
                continue
            if attempt.get("oracle_passed"):
                tp, fn = (tp + 1, fn) if judged else (tp, fn + 1)
            else:
                fp, tn = (fp + 1, tn) if judged else (fp, tn + 1)
    return {"tp": tp, "fp": fp, "fn": fn, "tn": tn, "kappa": cohen_kappa(tp, fp, fn, tn)}


def _per_assertion(rows: Sequence[Mapping[str, Any]]) -> dict[str, dict[str, float]]:
    """Pass rates by assertion type (as written), over the assertions of that type."""
    # [assertions, passed at attempt 1, passed in the answer returned] by type.
    counts: dict[str, list[int]] = {}
    for row in rows:
        types: Sequence[str] = row.get("assertion_types") or ()
        attempts = row.get("attempts") or ()
        everything = range(len(types))  # no attempt to read: every assertion counts as failed
        failed_first = attempts[0]["failed_assertions"] if attempts else everything
        chosen = _attempt(attempts, row.get("chosen"))
        failed_last = chosen["failed_assertions"] if chosen is not None else everything
        for index, kind in enumerate(types):
            tally = counts.get(kind)
            if tally is None:
                tally = counts[kind] = [0, 0, 0]
            tally[0] += 1
            if index not in failed_first:
                tally[1] += 1
            if index not in failed_last:
                tally[2] += 1
    return {
        kind: {"baseline_pass_rate": first / total, "final_pass_rate": last / total}
        for kind, (total, first, last) in counts.items()
    }


def _attempt(attempts: Sequence[Mapping[str, Any]], index: Any) -> Mapping[str, Any] | None:
    """The attempt with this `index` (attempts are in order, index 1 first), or `None`."""
    if isinstance(index, int) and 1 <= index <= len(attempts):
        found = attempts[index - 1]
        if found.get("index") == index:
            return found
    return next((a for a in attempts if a.get("index") == index), None)
