"""Compare two eval reports of the same cases: which setup passes more, and which cases flipped.

`load_report(path)` reads a report JSON file (`jevrefine eval --json`, `EvalReport.write_json`)
as hostile input: a size cap, strict UTF-8 and JSON (no `NaN`), every field it uses checked, and
each answer cut as the file is parsed, so a file of huge answers costs little more memory than
its own bytes. `compare_reports(a, b)` pairs the two reports' cases by id:

- per report: the baseline and final pass rates and the lift with its paired interval, over the
  cases that ran (the report's own figures, recomputed from its rows);
- paired, over the cases that ran in both with the same input: the final pass rate of each, the
  difference B − A with Newcombe's paired 95 % interval, McNemar's counts (passed in both, in A
  only, in B only, in neither) and its exact p-value;
- the flips (`regressed`: passing in A, failing in B; `fixed`: the reverse), and every case that
  was not compared and why: only in A, only in B, errored in either, or changed (the same id
  with another input, reference answer or assertions). Nothing is dropped silently.

Two reports that share no case are a `DifferentCasesError`; a file that is no report, too big or
malformed a `ReportFileError`. Both are `UserError`s: `jevrefine compare` exits 2 on them.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..exceptions import UserError
from ._report import pass_rates
from ._stats import mcnemar_exact_p, newcombe_paired_ci

__all__ = [
    "DEFAULT_MAX_BYTES",
    "KEEP_CHARS",
    "CaseOutcome",
    "Comparison",
    "DifferentCasesError",
    "LoadedReport",
    "ReportFileError",
    "compare_reports",
    "load_report",
]

DEFAULT_MAX_BYTES = 512 * 2**20
"""The largest report file read (512 MiB): a report of 10,000 ordinary cases is about 30 MB."""
KEEP_CHARS = 2000
"""How much of each returned answer (and error) is kept for the side-by-side view."""
_SETUP_CHARS = 300
_FINGERPRINTED = ("input", "expected", "assertion_types")
"""What makes a case the same case in both reports, besides its id (when the rows hold it)."""
_MISSING: Any = object()


class ReportFileError(UserError):
    """A file given to compare is not a readable eval report.

    The message names the file, what is wrong, and what to pass instead.
    """

    def __init__(self, path: str, problem: str) -> None:
        super().__init__(f"{path}: {problem}")
        self.path = path
        """The file at fault."""
        self.problem = problem
        """What is wrong with it."""


class DifferentCasesError(UserError):
    """The two reports share no case to compare: they were made from different case files."""


@dataclass(frozen=True, slots=True, kw_only=True)
class CaseOutcome:
    """One case of a report, as far as a comparison needs it."""

    id: str
    """The case id."""
    passed_baseline: bool | None
    """Whether attempt 1 passed the oracle (`None` when the case errored)."""
    passed_final: bool | None
    """Whether the returned answer passed the oracle (`None` when the case errored)."""
    error: str | None
    """Why the case errored (cut at `KEEP_CHARS`), or `None`."""
    answer: str | None
    """The returned answer, cut at `KEEP_CHARS`; `None` when the row holds none."""
    answer_chars: int
    """The returned answer's full length, in characters."""
    attempts: int
    """How many attempts the case took."""
    fingerprint: str | None
    """A digest of the case's input, reference answer and assertion types; `None` when the row
    holds none of them (a row of the pinned keys only)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class LoadedReport:
    """A report file as read by `load_report`: its setup and one outcome per case, in order."""

    path: str
    """The file it was read from."""
    setup: dict[str, Any] | None
    """The report's `setup` (values longer than 300 characters cut), or `None`."""
    cases: tuple[CaseOutcome, ...]
    """One outcome per case, in the file's order."""

    def figures(self) -> dict[str, Any]:
        """`cases`, `errors` and the pass-rate keys of `EvalReport.to_dict()`, from the rows."""
        ran = [
            {"passed_baseline": c.passed_baseline, "passed_final": c.passed_final}
            for c in self.cases
            if c.error is None
        ]
        return {"cases": len(self.cases), "errors": len(self.cases) - len(ran), **pass_rates(ran)}


@dataclass(frozen=True, slots=True, kw_only=True)
class Comparison:
    """What `compare_reports` found; `to_dict()` is the `jevrefine compare --json` file."""

    a: LoadedReport
    """The first report (the reference)."""
    b: LoadedReport
    """The second report (the one compared with it)."""
    pairs: tuple[tuple[CaseOutcome, CaseOutcome], ...]
    """The compared cases: in both, the same case, and run (not errored) in both; A's order."""
    only_a: tuple[CaseOutcome, ...]
    """Cases in A alone."""
    only_b: tuple[CaseOutcome, ...]
    """Cases in B alone."""
    errored: tuple[tuple[CaseOutcome, CaseOutcome], ...]
    """Cases in both that errored in one or both (so not compared)."""
    changed: tuple[tuple[CaseOutcome, CaseOutcome], ...]
    """Cases in both under the same id whose input, reference or assertions differ."""

    @property
    def regressed(self) -> list[str]:
        """Ids of the cases passing in A and failing in B (final answers)."""
        return [a.id for a, b in self.pairs if a.passed_final and not b.passed_final]

    @property
    def fixed(self) -> list[str]:
        """Ids of the cases failing in A and passing in B (final answers)."""
        return [a.id for a, b in self.pairs if not a.passed_final and b.passed_final]

    def paired(self) -> dict[str, Any]:
        """The paired comparison of the final pass rates over `pairs`.

        McNemar's counts (`both_passed`, `only_a_passed`, `only_b_passed`, `neither_passed`),
        the two rates, `difference` (B − A) with `difference_ci95` (Newcombe's paired 95 %
        interval) and `mcnemar_p` (exact, two-sided).
        """
        both = sum(1 for a, b in self.pairs if a.passed_final and b.passed_final)
        only_a = len(self.regressed)
        only_b = len(self.fixed)
        n = len(self.pairs)
        neither = n - both - only_a - only_b
        rate_a = (both + only_a) / n if n else 0.0
        rate_b = (both + only_b) / n if n else 0.0
        difference = rate_b - rate_a
        lo, hi = newcombe_paired_ci(both, only_a, only_b, neither)
        return {
            "cases": n,
            "both_passed": both,
            "only_a_passed": only_a,
            "only_b_passed": only_b,
            "neither_passed": neither,
            "a_final_pass_rate": rate_a,
            "b_final_pass_rate": rate_b,
            "difference": difference,
            "difference_ci95": [min(lo, difference), max(hi, difference)],
            "mcnemar_p": mcnemar_exact_p(only_a, only_b),
        }

    def to_dict(self) -> dict[str, Any]:
        """Everything compared, as JSON-able data (the `--json` file)."""
        return {
            "a": {"path": self.a.path, "setup": self.a.setup, **self.a.figures()},
            "b": {"path": self.b.path, "setup": self.b.setup, **self.b.figures()},
            "paired": self.paired(),
            "regressed": self.regressed,
            "fixed": self.fixed,
            "only_in_a": [c.id for c in self.only_a],
            "only_in_b": [c.id for c in self.only_b],
            "errored": [{"id": a.id, "a": a.error, "b": b.error} for a, b in self.errored],
            "changed": [a.id for a, _ in self.changed],
        }


def compare_reports(a: LoadedReport, b: LoadedReport) -> Comparison:
    """Pair the two reports' cases by id (see the module's docstring).

    Raises:
        DifferentCasesError: no case id is in both, or every shared one is another case in B.
    """
    in_b = {case.id: case for case in b.cases}
    in_a = {case.id for case in a.cases}
    pairs, errored, changed = [], [], []
    for case in a.cases:
        other = in_b.get(case.id)
        if other is None:
            continue
        if case.fingerprint and other.fingerprint and case.fingerprint != other.fingerprint:
            changed.append((case, other))
        elif case.error is not None or other.error is not None:
            errored.append((case, other))
        else:
            pairs.append((case, other))
    if not pairs and not errored:
        raise DifferentCasesError(_no_shared_cases(a, b, bool(changed)))
    return Comparison(
        a=a,
        b=b,
        pairs=tuple(pairs),
        only_a=tuple(c for c in a.cases if c.id not in in_b),
        only_b=tuple(c for c in b.cases if c.id not in in_a),
        errored=tuple(errored),
        changed=tuple(changed),
    )


def _no_shared_cases(a: LoadedReport, b: LoadedReport, changed: bool) -> str:
    if changed:
        return (
            f"{a.path} and {b.path} share case ids, but every shared case has another input, "
            "reference answer or assertions in each: compare reports of the same case file"
        )

    def example(report: LoadedReport) -> str:
        first = f", e.g. {_quote(report.cases[0].id)}" if report.cases else ""
        return f"{report.path} has {len(report.cases):,} cases{first}"

    return (
        f"the reports share no case id ({example(a)}; {example(b)}): compare two reports of the "
        "same case file"
    )


# --- reading a report file ------------------------------------------------------------------------


def load_report(
    path: str | os.PathLike[str], *, max_bytes: int = DEFAULT_MAX_BYTES
) -> LoadedReport:
    """Read a report JSON file as hostile input (see the module's docstring).

    Raises:
        ReportFileError: the file is missing, not a regular file, bigger than `max_bytes`, not
            UTF-8, not JSON, or no eval report (its message says which field is wrong).
    """
    name = os.fspath(path)
    data = _read(name, max_bytes)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ReportFileError(
            name, f"is not UTF-8 text (a bad byte at offset {exc.start:,}): pass a report JSON file"
        ) from None
    del data
    try:
        parsed = json.loads(text, object_pairs_hook=_slim, parse_constant=_no_constant)
    except RecursionError:
        raise ReportFileError(name, "is nested too deeply to be a report") from None
    except ValueError as exc:  # JSONDecodeError, an integer of over 4,300 digits, NaN
        raise ReportFileError(
            name, f"is not valid JSON ({_short(str(exc), 160)}): pass a report JSON file"
        ) from None
    del text
    return _report(name, parsed)


def _read(name: str, max_bytes: int) -> bytes:
    try:
        info = os.stat(name)
    except OSError as exc:
        raise ReportFileError(name, f"cannot be read ({exc.strerror or exc})") from None
    if not stat.S_ISREG(info.st_mode):
        # A FIFO would block the read, /dev/zero never end: only regular files are reports.
        raise ReportFileError(name, "is not a regular file: pass a report JSON file")
    if info.st_size > max_bytes:
        raise ReportFileError(name, _too_big(info.st_size, max_bytes))
    try:
        with open(name, "rb") as file:
            data = file.read(max_bytes + 1)  # bounded even if the file grows meanwhile
    except OSError as exc:
        raise ReportFileError(name, f"cannot be read ({exc.strerror or exc})") from None
    if len(data) > max_bytes:
        raise ReportFileError(name, _too_big(len(data), max_bytes))
    return data


def _too_big(size: int, max_bytes: int) -> str:
    return (
        f"is {size:,} bytes, more than the {max_bytes:,} read at most: pass a bigger --max-mb "
        "if it really is a report"
    )


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON (JSON has no NaN or Infinity)")


def _slim(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """Each JSON object as it is parsed, innermost first, slimmed when it is a row or an attempt.

    An attempt or a result row keeps only what a comparison uses, so the long texts are freed at
    once rather than held to the end.
    """
    obj = dict(pairs)
    if "index" in obj and "answer" in obj and "passed_final" not in obj:
        answer = obj["answer"]
        return {
            "index": obj["index"],
            "answer": answer[:KEEP_CHARS] if isinstance(answer, str) else answer,
            "answer_chars": len(answer) if isinstance(answer, str) else 0,
        }
    if "id" in obj and "passed_final" in obj:
        error = obj.get("error")
        return {
            "id": obj["id"],
            "passed_baseline": obj.get("passed_baseline", _MISSING),
            "passed_final": obj["passed_final"],
            "error": error[:KEEP_CHARS] if isinstance(error, str) else error,
            "chosen": obj.get("chosen"),
            "attempts": obj.get("attempts", []),
            "fingerprint": _fingerprint(obj),
        }
    return obj


def _fingerprint(row: Mapping[str, Any]) -> str | None:
    present = {key: row[key] for key in _FINGERPRINTED if key in row}
    if not present:
        return None
    encoded = json.dumps(present, sort_keys=True, ensure_ascii=True, default=str)
    return hashlib.sha256(encoded.encode("ascii")).hexdigest()


def _report(name: str, parsed: Any) -> LoadedReport:
    if not isinstance(parsed, dict) or not isinstance(parsed.get("results"), list):
        found = "an object without a results list" if isinstance(parsed, dict) else _kind(parsed)
        raise ReportFileError(
            name,
            f"is no eval report (its JSON is {found}; a report is an object with a results "
            "list): pass the file `jevrefine eval --json FILE` wrote",
        )
    setup = parsed.get("setup")
    if setup is not None and not isinstance(setup, dict):
        raise ReportFileError(name, f"setup is {_kind(setup)}, not an object (or null)")
    cases: list[CaseOutcome] = []
    seen: set[str] = set()
    for position, row in enumerate(parsed["results"]):
        case = _case(name, position, row)
        if case.id in seen:
            raise ReportFileError(
                name, f"results[{position}]: the case id {_quote(case.id)} appears twice"
            )
        seen.add(case.id)
        cases.append(case)
    return LoadedReport(
        path=name,
        setup=None if setup is None else {str(k)[:80]: _setup_value(v) for k, v in setup.items()},
        cases=tuple(cases),
    )


def _case(name: str, position: int, row: Any) -> CaseOutcome:
    where = f"results[{position}]"
    # Every object with an id and passed_final was slimmed as it was parsed (`_slim`).
    if not isinstance(row, dict) or "id" not in row or "passed_final" not in row:
        raise ReportFileError(
            name, f"{where} is no result row (a row has id, passed_baseline, passed_final, error)"
        )
    case_id = row["id"]
    if not isinstance(case_id, str):
        raise ReportFileError(name, f"{where}: id is {_kind(case_id)}, not a string")
    where = f"{where} (id {_quote(case_id)})"
    error = row["error"]
    if error is not None and not isinstance(error, str):
        raise ReportFileError(name, f"{where}: error is {_kind(error)}, not a string or null")
    outcome: dict[str, bool | None] = {}
    for key in ("passed_baseline", "passed_final"):
        value = row[key]
        if value is _MISSING:
            raise ReportFileError(name, f"{where}: {key} is missing")
        allowed = value is None if error is not None else False
        if not isinstance(value, bool) and not allowed:
            raise ReportFileError(
                name,
                f"{where}: {key} is {_kind(value)}, not true or false"
                + ("" if error is not None else " (only an errored case may have null)"),
            )
        outcome[key] = value
    attempts = row["attempts"] if isinstance(row["attempts"], list) else []
    chosen = next(
        (a for a in attempts if isinstance(a, dict) and a.get("index") == row["chosen"]), None
    )
    answer = chosen.get("answer") if chosen is not None else None
    return CaseOutcome(
        id=case_id,
        passed_baseline=outcome["passed_baseline"],
        passed_final=outcome["passed_final"],
        error=error,
        answer=answer if isinstance(answer, str) else None,
        answer_chars=_length(chosen),
        attempts=len(attempts),
        fingerprint=row["fingerprint"],
    )


def _length(attempt: dict[str, Any] | None) -> int:
    chars = attempt.get("answer_chars") if attempt is not None else None
    return chars if isinstance(chars, int) and not isinstance(chars, bool) else 0


def _setup_value(value: Any) -> Any:
    if value is None or isinstance(value, bool | int | float):
        return value if not isinstance(value, int) or abs(value) < 10**18 else str(value)[:40]
    if isinstance(value, str):
        return _short(value, _SETUP_CHARS)
    return _short(json.dumps(value, ensure_ascii=False, default=str), _SETUP_CHARS)


def _kind(value: Any) -> str:
    """What a value is, for a message: its JSON type and a short, safe rendering of it."""
    names = {dict: "an object", list: "a list", str: "a string", bool: "a boolean"}
    kind = names.get(type(value), "null" if value is None else "a number")
    if isinstance(value, dict | list):
        return kind
    return f"{kind} ({_short(json.dumps(value, ensure_ascii=True, default=str), 40)})"


def _quote(text: str) -> str:
    # ASCII-escaped and short: an id can be anything, a terminal must not run it.
    return _short(json.dumps(text, ensure_ascii=True), 60)


def _short(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"
