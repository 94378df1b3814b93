"""`jevrefine compare A.json B.json`: two eval reports of the same cases, side by side.

Prints each report's setup and pass rates (baseline, final, lift with its paired interval), the
paired comparison of the final pass rates over the cases both ran (the difference B − A with its
paired 95 % interval, McNemar's counts and exact p-value), then the cases that flipped, with
both answers side by side, and every case that was not compared (only in one report, errored,
changed). `--report FILE.html` writes the comparison page, `--json FILE` the figures as JSON.
The logic is `jevrefine.evals._compare`; this module reads the flags and prints.

Exit codes: 0 when the reports were compared (whichever is better); 2 for bad input (a file that
is no report, too big or malformed, two reports of different case files, an output path that is
one of the inputs, a missing folder). Nothing is written before the inputs are read and checked.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import unicodedata
from typing import IO, Any

from ..evals._compare import (
    DEFAULT_MAX_BYTES,
    CaseOutcome,
    Comparison,
    compare_reports,
    load_report,
)
from ..evals._page import fact_text
from ..evals._setup import SETUP_LABELS
from ..exceptions import UserError
from ._config import ConfigError

__all__ = ["add_compare_command", "compare_command"]

EXIT_OK = 0
EXIT_USAGE = 2
SHOWN = 25
"""Cases listed per group on the terminal (all of them with --all; every one is in --json and
--report)."""


def add_compare_command(commands: Any) -> None:
    """Add `compare` to the `jevrefine` sub-command parsers."""
    parser = commands.add_parser(
        "compare",
        help="compare two eval reports (--json files) of the same cases: pass rates and flips",
        description="Compare two eval reports (written by jevrefine eval --json) of the same "
        "cases: both setups, their pass rates, the paired difference of the final pass rates "
        "and the cases that flipped. Runs no model.",
        epilog="exit status: 0 when the reports were compared (whichever is better); 2 for bad "
        "input (a file that is no report, reports that share no case, an output that is an "
        "input), with nothing written",
    )
    parser.add_argument("a", metavar="A.json", help="the reference report (jevrefine eval --json)")
    parser.add_argument("b", metavar="B.json", help="the report compared with it")
    parser.add_argument(
        "--report", dest="html_path", metavar="FILE.html", help="write the comparison page"
    )
    parser.add_argument(
        "--json",
        dest="json_path",
        metavar="FILE",
        help="write the comparison as JSON ('-': stdout)",
    )
    parser.add_argument(
        "--all", dest="show_all", action="store_true", help=f"list every case, not {SHOWN} a group"
    )
    parser.add_argument(
        "--max-mb",
        type=int,
        metavar="N",
        default=DEFAULT_MAX_BYTES // 2**20,
        help="the largest report file read, in MiB (default %(default)s)",
    )


def compare_command(args: argparse.Namespace) -> int:
    """Run `jevrefine compare`; returns the exit status."""
    try:
        if args.max_mb < 1:
            raise ConfigError(f"--max-mb must be at least 1, got {args.max_mb}")
        _check_outputs(args)
        max_bytes = args.max_mb * 2**20
        comparison = compare_reports(
            load_report(args.a, max_bytes=max_bytes), load_report(args.b, max_bytes=max_bytes)
        )
        # The text goes to stderr when the JSON goes to stdout, so that stays parseable.
        text: IO[str] = sys.stderr if args.json_path == "-" else sys.stdout
        text.write(format_comparison(comparison, show_all=args.show_all))
        _write(args, comparison)
    except UserError as exc:
        print(f"jevrefine compare: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except OSError as exc:
        print(f"jevrefine compare: {exc.strerror or exc}: {exc.filename}", file=sys.stderr)
        return EXIT_USAGE
    return EXIT_OK


def _check_outputs(args: argparse.Namespace) -> None:
    """Refuse, before reading anything, an output that would replace an input or has no folder."""
    inputs = [path for path in (args.a, args.b) if os.path.exists(path)]
    for flag, path in (("--report", args.html_path), ("--json", args.json_path)):
        if not path or path == "-":
            continue
        folder = os.path.dirname(os.path.abspath(path))
        if not os.path.isdir(folder):
            raise ConfigError(f"{flag} {path}: its folder does not exist; create it first")
        if os.path.exists(path) and any(os.path.samefile(path, i) for i in inputs):
            raise ConfigError(
                f"{flag} {path} is one of the reports compared: write to another file"
            )
    if args.html_path and args.json_path and args.html_path == args.json_path != "-":
        raise ConfigError("--report and --json name the same file: give each its own")


def _write(args: argparse.Namespace, comparison: Comparison) -> None:
    if args.json_path == "-":
        sys.stdout.write(json.dumps(comparison.to_dict(), ensure_ascii=False, indent=2) + "\n")
    elif args.json_path:
        with open(args.json_path, "w", encoding="utf-8") as file:
            json.dump(comparison.to_dict(), file, ensure_ascii=False, indent=2)
            file.write("\n")
    if args.html_path:
        from ..evals._compare_html import write_compare_html

        with open(args.html_path, "w", encoding="utf-8") as file:
            write_compare_html(comparison, file)


# --- the text ----------------------------------------------------------------------------------


def plain(text: str, limit: int) -> str:
    """`text` safe for a terminal, on one line, at most `limit` characters.

    Control and format characters (escape sequences, bidi overrides, line breaks) are shown as
    escapes, never sent: a report is data, and a hostile one must not drive the terminal.
    """
    out = []
    for char in text[: limit + 1]:
        if "\ud800" <= char <= "\udfff":
            out.append("\ufffd")
        elif unicodedata.category(char) in ("Cc", "Cf", "Zl", "Zp"):
            out.append(" " if char == "\n" else char.encode("unicode_escape").decode("ascii"))
        else:
            out.append(char)
    flat = "".join(out)
    return flat if len(text) <= limit and len(flat) <= limit else flat[: limit - 1] + "…"


def _pct(rate: float) -> str:
    return f"{rate:.1%}"


def _pts(diff: float) -> str:
    return f"{diff * 100:+.1f} pts"


def format_comparison(comparison: Comparison, *, show_all: bool = False) -> str:
    """The comparison as the terminal shows it (every string from the reports made plain)."""
    a, b = comparison.a, comparison.b
    width = max(60, min(shutil.get_terminal_size((100, 24)).columns, 160))
    column = (width - 22) // 2
    lines = [f"jevrefine compare: A = {plain(a.path, 70)}, B = {plain(b.path, 70)}", ""]
    lines.append(f"  {'':<18}  {'A':<{column}}{'B'}")
    for key, label in _setup_rows(comparison):
        values = [_setup_text(r.setup, key) for r in (a, b)]
        mark = " *" if values[0] != values[1] and key != "date" else ""
        lines.append(f"  {label:<18}  {values[0]:<{column}}{values[1]}{mark}")
    cells = [_figure_texts(a.figures()), _figure_texts(b.figures())]
    for label in cells[0]:
        lines.append(f"  {label:<18}  {cells[0][label]:<{column}}{cells[1][label]}")
    lines += ["", *_paired_lines(comparison)]
    regressed, fixed = set(comparison.regressed), set(comparison.fixed)
    groups = [
        ("passing in A, failing in B", [p for p in comparison.pairs if p[0].id in regressed]),
        ("failing in A, passing in B", [p for p in comparison.pairs if p[0].id in fixed]),
    ]
    for title, pairs in groups:
        lines += ["", f"{title} ({len(pairs):,}):"]
        shown = pairs if show_all else pairs[:SHOWN]
        for case_a, case_b in shown:
            lines.append(f"  {plain(case_a.id, width - 4)}")
            lines.append(
                f"    A: {_answer(case_a, column - 6):<{column - 3}}"
                f"B: {_answer(case_b, column - 6)}"
            )
        lines += _more(len(pairs), len(shown))
    for title, cases in (
        ("only in A", list(comparison.only_a)),
        ("only in B", list(comparison.only_b)),
        ("errored in A or B (not compared)", [x for pair in comparison.errored for x in pair[:1]]),
        ("changed: another input or assertions (not compared)", [p[0] for p in comparison.changed]),
    ):
        if cases:
            lines += ["", f"{title} ({len(cases):,}):"]
            shown_cases = cases if show_all else cases[:SHOWN]
            lines += [f"  {_listed(comparison, c)}" for c in shown_cases]
            lines += _more(len(cases), len(shown_cases))
    return "\n".join(lines) + "\n"


def _figure_texts(figures: dict[str, Any]) -> dict[str, str]:
    lo, hi = figures["lift_ci95"]
    return {
        "cases": f"{figures['cases']:,} ({figures['errors']:,} errored)",
        "baseline": _pct(figures["baseline_pass_rate"]),
        "final": _pct(figures["final_pass_rate"]),
        "lift (95% CI)": f"{_pts(figures['lift'])} [{_pts(lo)}, {_pts(hi)}]",
    }


def _setup_rows(comparison: Comparison) -> list[tuple[str, str]]:
    setups = [r.setup or {} for r in (comparison.a, comparison.b)]
    keys = [k for k in SETUP_LABELS if any(k in s for s in setups)]
    keys += [k for s in setups for k in s if k not in SETUP_LABELS and k not in keys]
    if not keys:
        return [("setup", "setup")]
    return [(k, plain(SETUP_LABELS.get(k, k), 18)) for k in dict.fromkeys(keys)]


def _setup_text(setup: dict[str, Any] | None, key: str) -> str:
    if setup is None:
        return "(not recorded)"
    if key not in setup:
        return "–"
    return plain(fact_text(key, setup[key]), 60)


def _paired_lines(comparison: Comparison) -> list[str]:
    paired = comparison.paired()
    n = paired["cases"]
    if not n:
        return ["paired: no case ran in both reports; nothing to compare case by case"]
    lo, hi = paired["difference_ci95"]
    p = paired["mcnemar_p"]
    lines = [
        f"paired, over the {n:,} cases both ran: final pass rate "
        f"{_pct(paired['a_final_pass_rate'])} (A) vs {_pct(paired['b_final_pass_rate'])} (B)",
        f"  B - A: {_pts(paired['difference'])} (paired 95% interval {_pts(lo)} to {_pts(hi)})",
        f"  both pass {paired['both_passed']:,} · A only {paired['only_a_passed']:,} · "
        f"B only {paired['only_b_passed']:,} · neither {paired['neither_passed']:,}; "
        f"McNemar exact p = {'< 0.001' if p < 0.001 else f'{p:.3f}'}",
    ]
    if lo <= 0 <= hi and (lo, hi) != (0, 0):
        lines.append("  the interval includes zero: the data do not show a clear difference")
    return lines


def _answer(case: CaseOutcome, limit: int) -> str:
    if case.error is not None:
        return plain(f"error: {case.error}", limit)
    if case.answer is None:
        return "(no answer)"
    return plain(case.answer, limit) if case.answer else "(empty)"


def _listed(comparison: Comparison, case: CaseOutcome) -> str:
    errors = {a.id: (a.error, b.error) for a, b in comparison.errored}
    if case.id in errors:
        a_error, b_error = errors[case.id]
        why = "; ".join(
            f"{side}: {plain(error, 60)}"
            for side, error in (("A", a_error), ("B", b_error))
            if error is not None
        )
        return f"{plain(case.id, 60)}  ({why})"
    return plain(case.id, 100)


def _more(total: int, shown: int) -> list[str]:
    if total <= shown:
        return []
    return [f"  … and {total - shown:,} more (--all lists them; --json and --report hold all)"]
