"""The page of `jevrefine compare --report`: two eval reports side by side.

Built from the same kit as the report pages (`_page.py`: one self-contained file, nothing loads,
every string escaped or drawn as text, the case list a page at a time): the two setups (what
differs is marked), the final pass rates over the cases both ran with the paired difference and
its interval, each report's own figures, McNemar's counts, and one row per case, filtered by how
it moved (regressed, fixed, both pass, both fail, errored, changed, only in A, only in B), that
opens to the two returned answers side by side.
"""

from __future__ import annotations

import io
import os
from collections.abc import Iterator, Mapping
from typing import Any, TextIO

from ._compare import CaseOutcome, Comparison
from ._page import (
    before_after_svg,
    case_id_text,
    esc,
    fact_text,
    int_text,
    lift_svg,
    list_panel,
    number,
    panel,
    pct,
    plural,
    pts,
    snippet_view,
    status_toolbar,
    text_view,
    write_page,
)
from ._setup import SETUP_LABELS

__all__ = ["render_compare_html", "write_compare_html"]

COMPARE_STATUS = {
    "regressed": ("regressed", "fail"),
    "fixed": ("fixed", "pass"),
    "both_passed": ("both pass", ""),
    "both_failed": ("both fail", ""),
    "errored": ("errored", "warn"),
    "changed": ("changed", "warn"),
    "only_a": ("only in A", "info"),
    "only_b": ("only in B", "info"),
}
"""Each row's status: its label and chip tone."""

_ABSENT: Any = object()
_FIGURES = (
    ("baseline_pass_rate", "baseline (attempt 1)", "rate"),
    ("final_pass_rate", "final (returned)", "rate"),
    ("lift", "lift", "pts"),
    ("lift_ci95", "lift, paired 95% interval", "interval"),
    ("improved", "improved", "count"),
    ("degraded", "degraded", "count"),
    ("cases", "cases", "count"),
    ("errors", "errored (left out of the rates)", "count"),
)


def render_compare_html(comparison: Comparison, *, title: str | None = None) -> str:
    """The comparison page as one string (see `write_compare_html`)."""
    out = io.StringIO()
    write_compare_html(comparison, out, title=title)
    return out.getvalue()


def write_compare_html(comparison: Comparison, out: TextIO, *, title: str | None = None) -> None:
    """Write the page of two reports compared to `out`, as a stream.

    Args:
        comparison: what `compare_reports` found.
        out: a text file opened for writing (UTF-8), or a `StringIO`.
        title: the page's title and heading; by default the two files' names.
    """
    a_name, b_name = (os.path.basename(r.path) for r in (comparison.a, comparison.b))
    if title is None:
        title = f"jevrefine compare: {a_name} vs {b_name}"
    statuses = list(_statuses(comparison))
    counts = {status: 0 for status in COMPARE_STATUS}
    for status, _, _ in statuses:
        counts[status] += 1
    labels = {s: label for s, (label, _) in COMPARE_STATUS.items()}
    body = [
        _setups_panel(comparison, a_name, b_name),
        _headline(comparison),
        '<div class="two">',
        _figures_panel(comparison),
        _flips_panel(comparison, counts),
        "</div>",
        list_panel("Cases", status_toolbar(counts, labels, len(statuses))),
    ]
    rows = (_row(comparison, s, a, b) for s, a, b in statuses)
    write_page(out, title=title, kind="compare", body=body, rows=rows, statuses=COMPARE_STATUS)


def _statuses(
    comparison: Comparison,
) -> Iterator[tuple[str, CaseOutcome | None, CaseOutcome | None]]:
    """Every case of both reports with its status: A's order, then the cases B alone has."""
    in_b = {case.id: case for case in comparison.b.cases}
    errored = {a.id for a, _ in comparison.errored}
    changed = {a.id for a, _ in comparison.changed}
    for case in comparison.a.cases:
        other = in_b.get(case.id)
        if other is None:
            yield "only_a", case, None
        elif case.id in changed:
            yield "changed", case, other
        elif case.id in errored:
            yield "errored", case, other
        elif case.passed_final and other.passed_final:
            yield "both_passed", case, other
        elif case.passed_final:
            yield "regressed", case, other
        elif other.passed_final:
            yield "fixed", case, other
        else:
            yield "both_failed", case, other
    for case in comparison.only_b:
        yield "only_b", None, case


def _setups_panel(comparison: Comparison, a_name: str, b_name: str) -> str:
    setups = [comparison.a.setup or {}, comparison.b.setup or {}]
    keys = [k for k in SETUP_LABELS if any(k in s for s in setups)]
    keys += [k for s in setups for k in s if k not in SETUP_LABELS and k not in keys]
    rows = [_setup_row("report file", "path", [comparison.a.path, comparison.b.path])]
    for key in dict.fromkeys(keys):
        values = [s.get(key, _ABSENT) for s in setups]
        rows.append(_setup_row(SETUP_LABELS.get(key, key), f"setup.{key}", values))
    missing = [
        name for name, r in ((a_name, comparison.a), (b_name, comparison.b)) if r.setup is None
    ]
    note = (
        esc(f"No setup recorded in {' and '.join(missing)} (written by an older jevrefine).")
        if missing
        else "What made each report; a value that differs is marked."
    )
    table = (
        '<table class="setups"><tr><th></th>'
        f'<th class="side">A · {esc(a_name)}</th><th class="side">B · {esc(b_name)}</th></tr>'
        f"{''.join(rows)}</table>"
    )
    return panel("Setups", note, table, section_id="setups")


def _setup_row(label: str, key: str, values: list[Any]) -> str:
    differs = values[0] != values[1] and key not in ("path", "setup.date")
    cells = []
    for side, value in zip("ab", values, strict=True):
        text = "–" if value is _ABSENT else fact_text(key.rpartition(".")[2], value)
        shown = None if value is _ABSENT else value
        cls = "differs" if differs else ""
        cells.append(f'<td class="{cls}">{number(f"{side}.{key}", shown, text)}</td>')
    return f"<tr><th>{esc(label)}</th>{''.join(cells)}</tr>"


def _headline(comparison: Comparison) -> str:
    paired = comparison.paired()
    n = paired["cases"]
    rate_a, rate_b = paired["a_final_pass_rate"], paired["b_final_pass_rate"]
    difference = paired["difference"]
    lo, hi = paired["difference_ci95"]
    hero = (
        f'<div class="hero"><span class="from">{esc(pct(rate_a))}</span>'
        f'<span class="arrow">→</span><span>{esc(pct(rate_b))}</span></div>'
        '<div class="muted">final pass rate: A → B, over the cases both ran</div>'
    )
    if n:
        direction = "more" if difference > 0 else "fewer" if difference < 0 else "as many"
        sentence = (
            f"Over the {n:,} cases both ran, B passed <strong>{direction}</strong> than A: "
            f"{number('paired.difference', difference, pts(difference))} (paired 95% interval "
            f"{number('paired.difference_ci95.0', lo, pts(lo))} to "
            f"{number('paired.difference_ci95.1', hi, pts(hi))}); McNemar's exact p = "
            f"{number('paired.mcnemar_p', paired['mcnemar_p'], _p_text(paired['mcnemar_p']))}."
        )
        if lo <= 0 <= hi and (lo, hi) != (0, 0):
            sentence += " The interval includes zero: the data do not show a clear difference."
    else:
        sentence = "No case ran in both reports: there is nothing to compare pairwise."
    charts = before_after_svg(rate_a, rate_b, ("A final", "B final")) + lift_svg(
        difference, lo, hi, "B − A (95% CI)"
    )
    return (
        '<section class="panel" id="headline"><div class="headline"><div>'
        f'{hero}<p class="verdict">{sentence}</p></div><div>{charts}</div></div></section>'
    )


def _p_text(p: float) -> str:
    return "< 0.001" if p < 0.001 else f"{p:.3f}"


def _figures_panel(comparison: Comparison) -> str:
    figures = [comparison.a.figures(), comparison.b.figures()]
    rows = []
    for key, label, kind in _FIGURES:
        cells = "".join(
            f'<td class="n">{_figure(f"{side}.{key}", data, key, kind)}</td>'
            for side, data in zip("ab", figures, strict=True)
        )
        rows.append(f"<tr><th>{esc(label)}</th>{cells}</tr>")
    table = (
        '<table><tr><th></th><th class="n">A</th><th class="n">B</th></tr>'
        + "".join(rows)
        + "</table>"
    )
    note = "Each report on its own, over the cases that ran in it (its own denominators)."
    return panel("Each report", esc(note), table, section_id="figures")


def _figure(key: str, data: Mapping[str, Any], name: str, kind: str) -> str:
    value = data[name]
    if kind == "interval":
        lo, hi = value
        return number(f"{key}.0", lo, pts(lo)) + " to " + number(f"{key}.1", hi, pts(hi))
    text = pct(value) if kind == "rate" else pts(value) if kind == "pts" else int_text(value)
    return number(key, value, text)


def _flips_panel(comparison: Comparison, counts: Mapping[str, int]) -> str:
    paired = comparison.paired()

    def cell(key: str, cls: str, what: str) -> str:
        return (
            f'<td class="cell {cls}"><span class="cnt">'
            f"{number(f'paired.{key}', paired[key], int_text(paired[key]))}</span>"
            f'<span class="what">{esc(what)}</span></td>'
        )

    matrix = (
        '<table class="matrix"><tr><th></th><th>B: pass</th><th>B: fail</th></tr>'
        f'<tr><th class="row">A: pass</th>{cell("both_passed", "agree", "both pass")}'
        f"{cell('only_a_passed', 'lenient', 'regressed in B')}</tr>"
        f'<tr><th class="row">A: fail</th>{cell("only_b_passed", "strict", "fixed in B")}'
        f"{cell('neither_passed', 'agree', 'both fail')}</tr></table>"
    )
    left_out = [
        f"{label} {number(f'left_out.{status}', counts[status], int_text(counts[status]))}"
        for status, label in (
            ("only_a", "only in A"),
            ("only_b", "only in B"),
            ("errored", "errored in A or B"),
            ("changed", "changed (another input or assertions)"),
        )
    ]
    summary = (
        f"<p>Not compared, and listed below: {' · '.join(left_out)}.</p>"
        '<p class="muted">McNemar\'s test looks at the flips alone: with no difference between '
        "the setups, a case is as likely to regress as to be fixed.</p>"
    )
    note = esc(f"The final answers of the {paired['cases']:,} cases both ran, case by case.")
    return panel("Flips", note, matrix + summary, section_id="flips")


def _row(
    comparison: Comparison, status: str, a: CaseOutcome | None, b: CaseOutcome | None
) -> dict[str, Any]:
    either = a if a is not None else b
    assert either is not None
    newest = b if b is not None else a
    assert newest is not None
    attempts = " · ".join(str(c.attempts) if c is not None else "–" for c in (a, b))
    sides = [
        [f"A · {os.path.basename(comparison.a.path)}", _side(a, comparison.a.path)],
        [f"B · {os.path.basename(comparison.b.path)}", _side(b, comparison.b.path)],
    ]
    return {
        "i": case_id_text(either.id),
        "s": status,
        "f": [_final(a), _final(b)],
        "n": f"{attempts} attempts",
        "p": snippet_view(newest.error, newest.answer),
        "b": [["pair", sides]],
    }


def _final(case: CaseOutcome | None) -> bool | None:
    return None if case is None or case.error is not None else case.passed_final


def _side(case: CaseOutcome | None, path: str) -> list[list[Any]]:
    if case is None:
        return [["empty", "Not in this report."]]
    blocks: list[list[Any]] = []
    if case.error is not None:
        blocks.append(["text", "error", text_view(case.error, "error")])
    else:
        view = text_view(case.answer, whole_in=f"The whole answer is in {path}.")
        if case.answer is not None and case.answer_chars > len(case.answer) and not view[3]:
            view[3] = (
                f"Cut: the page shows the first {len(case.answer):,} of {case.answer_chars:,} "
                f"characters. The whole answer is in {path}."
            )
        blocks.append(["text", "returned answer", view])
    flow = f"attempt 1 {_word(case.passed_baseline)} → returned {_word(case.passed_final)}"
    blocks.append(["note", f"{flow} · {plural(case.attempts, 'attempt')}"])
    return blocks


def _word(passed: bool | None) -> str:
    return "pass" if passed is True else "fail" if passed is False else "–"
