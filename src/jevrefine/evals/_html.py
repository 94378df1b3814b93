"""The report pages of `jevrefine eval --report` and `jevrefine run --report`.

Built from the kit in `_page.py` (the shell, the escaping, the case list drawn a page at a time
from a JSON island; see there for why the pages stay safe and quick with hostile, huge data).
This module says what each page shows: the eval page's setup header, pass rates, lift, attempts,
judge agreement, assertions and one row per case that opens to its attempts; the run page's
facts, outcomes and one row per item.

`write_eval_html` and `write_run_html` write a page to an open file as a stream;
`render_eval_html` and `render_run_html` return it as one string (for tests and small pages).
"""

from __future__ import annotations

import io
import os
from collections.abc import Mapping, Sequence
from typing import Any, TextIO

from ._page import (
    as_list,
    before_after_svg,
    card,
    case_id_text,
    esc,
    facts_panel,
    histogram_items,
    histogram_svg,
    int_text,
    interval,
    is_real,
    lift_svg,
    list_panel,
    mappings,
    mini_bar,
    number,
    of,
    panel,
    pct,
    plural,
    pts,
    rate_count,
    seconds,
    snippet_view,
    stat_card,
    status_toolbar,
    text_view,
    write_page,
)
from ._setup import SETUP_LABELS

__all__ = ["render_eval_html", "render_run_html", "write_eval_html", "write_run_html"]

EVAL_WHOLE_TEXT = "The whole text is in the report's JSON file (--json) and the rows file (--out)."
RUN_WHOLE_TEXT = "The whole text is in the run's output file."
NO_SETUP = (
    "No setup recorded with this report: which model, case file and settings made it is not "
    "known. `jevrefine eval` records them; in Python, pass EvalReport(setup=...)."
)


def _count(value: object) -> int:
    """A count from the data: an int, else 0 (a hostile file's "x" or 10**400 counts nothing)."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value < 10**15 else 0


def attempts_card(histogram: Mapping[Any, Any], noun: str) -> str:
    """Answers per `noun` (case, item), from an attempts histogram (attempts -> how many)."""
    counts = histogram_items(histogram)
    answers = sum(attempts * n for attempts, n in counts)
    counted = sum(n for _, n in counts)
    return card(
        "Attempts",
        esc(f"{answers / counted:.2f}" if counted else "–"),
        esc(f"answers per {noun}: {answers:,} for {counted:,} {noun}s"),
    )


def tokens_card(data: Mapping[str, Any], kinds: Sequence[str]) -> str:
    """Tokens in all, then per kind (`data["model_tokens"]`, ...), each with its data-key."""
    values = [data.get(f"{kind}_tokens") for kind in kinds]
    total = sum(_count(v) for v in values)
    parts = (
        f"{kind} " + number(f"{kind}_tokens", value, int_text(value))
        for kind, value in zip(kinds, values, strict=True)
    )
    return card("Tokens", esc(f"{total:,}"), " · ".join(parts))


def _mark_of(value: object) -> bool | None:
    return value if isinstance(value, bool) else None


# --- the eval page ------------------------------------------------------------------------------

_EVAL_STATUS = {
    "improved": ("improved", "info"),
    "degraded": ("degraded", "warn"),
    "passed": ("passed", "pass"),
    "failed": ("failed", "fail"),
    "error": ("error", "fail"),
}


def render_eval_html(data: Mapping[str, Any], *, title: str | None = None) -> str:
    """The report page of an evaluation as one string (see `write_eval_html`)."""
    out = io.StringIO()
    write_eval_html(data, out, title=title)
    return out.getvalue()


def write_eval_html(data: Mapping[str, Any], out: TextIO, *, title: str | None = None) -> None:
    """Write the report page of an evaluation (`EvalReport.to_dict()`'s output) to `out`.

    Args:
        data: the report as `EvalReport.to_dict()` returns it (the keys pinned for the JSON file,
            and `setup` for the header).
        out: a text file opened for writing (UTF-8), or a `StringIO`; the page is written in
            pieces, never built whole.
        title: the page's title and heading; by default "jevrefine eval", with the case file's
            name when the setup says it.
    """
    results = mappings(data.get("results"))
    setup = data.get("setup") if isinstance(data.get("setup"), Mapping) else None
    if title is None:
        cases_file = setup.get("cases_file") if setup is not None else None
        name = os.path.basename(cases_file) if isinstance(cases_file, str) else ""
        title = f"jevrefine eval: {name}" if name else "jevrefine eval"
    cases = _count(data.get("cases"))
    errors = _count(data.get("errors"))
    scored = max(cases - errors, 0)
    statuses = [_eval_status(r) for r in results]
    counts = {s: statuses.count(s) for s in _EVAL_STATUS}
    labels = {s: label for s, (label, _) in _EVAL_STATUS.items()}
    histogram = data.get("attempts_histogram")
    histogram = histogram if isinstance(histogram, Mapping) else {}
    per_assertion = data.get("per_assertion")
    body = [
        facts_panel(
            setup, labels=SETUP_LABELS, key_prefix="setup", section_id="setup", missing=NO_SETUP
        ),
        _eval_headline(data, scored, errors),
        _eval_cards(data, cases, errors, scored),
        '<div class="two">',
        panel(
            "Attempts per case",
            f"How many answers the model gave, over the {scored:,} scored cases.",
            histogram_svg(histogram, "attempts_histogram"),
            section_id="attempts",
        ),
        _agreement_panel(data.get("judge_agreement")),
        "</div>",
        _assertion_panel(
            per_assertion if isinstance(per_assertion, Mapping) else {}, results, scored
        ),
        list_panel("Cases", status_toolbar(counts, labels, len(results))),
    ]
    rows = (_eval_row(r, s) for r, s in zip(results, statuses, strict=True))
    write_page(out, title=title, kind="eval", body=body, rows=rows, statuses=_EVAL_STATUS)


def _eval_headline(data: Mapping[str, Any], scored: int, errors: int) -> str:
    base, final, lift = (
        data.get("baseline_pass_rate"),
        data.get("final_pass_rate"),
        data.get("lift"),
    )
    lo, hi = interval(data.get("lift_ci95"))
    base_n, final_n = rate_count(base, scored), rate_count(final, scored)
    hero = (
        f'<div class="hero"><span class="from">{esc(pct(base))}</span>'
        f'<span class="arrow">→</span><span>{esc(pct(final))}</span></div>'
        f'<div class="muted">baseline (attempt 1) → final (the returned answers)</div>'
    )
    if scored and is_real(lift):
        direction = "raised" if lift > 0 else "lowered" if lift < 0 else "did not change"
        ci = f" (paired 95% interval {pts(lo)} to {pts(hi)})" if lo is not None else ""
        moved = f" by {pts(lift)}" if lift else ""
        sentence = (
            f"Refinement <strong>{direction}</strong> the pass rate{esc(moved)}{esc(ci)}: "
            f"{esc(of(base_n, scored, 'cases'))} passed at the first attempt, "
            f"{esc(of(final_n, scored, 'cases'))} as returned."
        )
        if lo is not None and hi is not None and lo <= 0 <= hi and (lo, hi) != (0, 0):
            sentence += " The interval includes zero: the data do not show a clear effect."
    else:
        sentence = "No case was scored."
    if errors:
        sentence += f" {errors:,} errored {'case is' if errors == 1 else 'cases are'} left out."
    charts = before_after_svg(base, final) + lift_svg(lift, lo, hi)
    return (
        '<section class="panel" id="headline"><div class="headline"><div>'
        f'{hero}<p class="verdict">{sentence}</p></div><div>{charts}</div></div></section>'
    )


def _eval_cards(data: Mapping[str, Any], cases: int, errors: int, scored: int) -> str:
    base, final, lift = (
        data.get("baseline_pass_rate"),
        data.get("final_pass_rate"),
        data.get("lift"),
    )
    base_n, final_n = rate_count(base, scored), rate_count(final, scored)
    improved, degraded = _count(data.get("improved")), _count(data.get("degraded"))
    lo, hi = interval(data.get("lift_ci95"))
    eir = data.get("error_introduction_rate")
    latency = data.get("latency_s") or {}
    lift_tone = "pass" if lo is not None and lo > 0 else "fail" if hi is not None and hi < 0 else ""
    cards = [
        # Quality: the two pass rates, the lift, and the cases that moved either way.
        stat_card(
            "Baseline",
            "baseline_pass_rate",
            base,
            pct(base),
            f"{of(base_n, scored, 'cases')} pass at attempt 1",
        ),
        stat_card(
            "Final",
            "final_pass_rate",
            final,
            pct(final),
            f"{of(final_n, scored, 'cases')} pass as returned",
            "accent",
        ),
        card(
            "Lift",
            number("lift", lift, pts(lift)),
            "paired 95% interval "
            + number("lift_ci95.0", lo, pts(lo))
            + " to "
            + number("lift_ci95.1", hi, pts(hi)),
            lift_tone,
        ),
        stat_card(
            "Improved",
            "improved",
            data.get("improved"),
            int_text(improved),
            f"of {scored - base_n:,} cases that failed at attempt 1",
            "pass" if improved else "",
        ),
        stat_card(
            "Degraded",
            "degraded",
            data.get("degraded"),
            int_text(degraded),
            f"of {base_n:,} cases that passed at attempt 1",
            "warn" if degraded else "",
        ),
        # Risk and cost.
        stat_card(
            "Error introduction",
            "error_introduction_rate",
            eir,
            pct(eir),
            f"degraded ÷ passed at attempt 1: {degraded:,} of {base_n:,}",
            "warn" if degraded else "",
        ),
        card(
            "Cases",
            number("cases", data.get("cases"), int_text(cases)),
            number("errors", data.get("errors"), int_text(errors))
            + (" errored, left out of every rate" if errors else " errored"),
            "fail" if errors else "",
        ),
        attempts_card(data.get("attempts_histogram") or {}, "case"),
        tokens_card(data, ("model", "judge", "grader")),
        card(
            "Latency per case",
            number("latency_s.p50", latency.get("p50"), seconds(latency.get("p50"))),
            "median · p95 "
            + number("latency_s.p95", latency.get("p95"), seconds(latency.get("p95"))),
        ),
    ]
    return '<section class="cards five" id="summary">' + "".join(cards) + "</section>"


_KAPPA_WORDS = ((0.8, "almost perfect"), (0.6, "substantial"), (0.4, "moderate"), (0.2, "fair"))


def _agreement_panel(agreement: object) -> str:
    title = "Loop judge vs oracle"
    if not isinstance(agreement, Mapping):
        return panel(
            title,
            "",
            '<p class="empty" id="no-loop-judge">No loop judge: every case had one attempt '
            '(judge "none"), so there is nothing to compare with the oracle.</p>',
            section_id="agreement",
        )
    cells = {k: _count(agreement.get(k)) for k in ("tp", "fp", "fn", "tn")}
    total = sum(cells.values())

    def cell(key: str, cls: str, what: str) -> str:
        return (
            f'<td class="cell {cls}"><span class="cnt">'
            f"{number(f'judge_agreement.{key}', agreement.get(key), int_text(cells[key]))}</span>"
            f'<span class="what">{esc(what)}</span></td>'
        )

    matrix = (
        '<table class="matrix"><tr><th></th><th>oracle: pass</th><th>oracle: fail</th></tr>'
        f'<tr><th class="row">judge: pass</th>{cell("tp", "agree", "agree")}'
        f"{cell('fp', 'lenient', 'judge too lenient')}</tr>"
        f'<tr><th class="row">judge: fail</th>{cell("fn", "strict", "judge too strict")}'
        f"{cell('tn', 'agree', 'agree')}</tr></table>"
    )
    kappa = agreement.get("kappa")
    if is_real(kappa):
        word = next(
            (w for bar, w in _KAPPA_WORDS if kappa > bar), "slight" if kappa > 0 else "poor"
        )
        kappa_text = f"{kappa:.2f}"
        kappa_note = f" ({word} agreement beyond chance, after Landis and Koch)"
    else:
        kappa_text = "undefined"
        kappa_note = " (the judge and the oracle each gave one verdict throughout)"
    agree = cells["tp"] + cells["tn"]
    agreed = pct(agree / total) if total else "–"
    summary = (
        f"<p>Cohen's κ = <strong>{number('judge_agreement.kappa', kappa, kappa_text)}</strong>"
        f"{esc(kappa_note)}. They agree on {esc(agreed)}: "
        f"{esc(of(agree, total, 'judged attempts'))}.</p>"
    )
    note = (
        f"Over every judged attempt ({total:,}): the refine loop's judge verdict against the "
        "oracle's (the case's assertions); positive = passed."
    )
    return panel(title, esc(note), matrix + summary, section_id="agreement")


def _assertion_counts(results: Sequence[Mapping[str, Any]]) -> dict[str, int] | None:
    """How many assertions of each type the scored cases hold, when the rows say so."""
    counts: dict[str, int] = {}
    for result in results:
        if result.get("error"):
            continue
        types = result.get("assertion_types")
        if not isinstance(types, list):
            return None  # a row without its types: no denominator is certain
        for kind in types:
            counts[str(kind)] = counts.get(str(kind), 0) + 1
    return counts


def _assertion_panel(
    per_assertion: Mapping[str, Any], results: Sequence[Mapping[str, Any]], scored: int
) -> str:
    if not per_assertion:
        return panel("Assertions", "", '<p class="empty">No assertions.</p>', section_id="asserts")
    counts = _assertion_counts(results)
    rows = []
    for kind, rates in per_assertion.items():
        rates = rates if isinstance(rates, Mapping) else {}
        base, final = rates.get("baseline_pass_rate"), rates.get("final_pass_rate")
        change = final - base if is_real(base) and is_real(final) else None
        tone = "pass" if change and change > 0 else "fail" if change and change < 0 else ""
        total = counts.get(kind) if counts is not None else None
        rows.append(
            f"<tr><td><code>{esc(kind)}</code></td>"
            + (f'<td class="n">{int_text(total)}</td>' if counts is not None else "")
            + _rate_cell(f"per_assertion.{kind}.baseline_pass_rate", base, total, "bar-base")
            + _rate_cell(f"per_assertion.{kind}.final_pass_rate", final, total, "bar-final")
            + f'<td class="n"><span class="chip {tone}">{esc(pts(change))}</span></td></tr>'
        )
    head = (
        "<tr><th>type</th>"
        + ('<th class="n">assertions</th>' if counts is not None else "")
        + '<th class="n">at attempt 1</th><th class="n">returned</th><th class="n">change</th></tr>'
    )
    note = (
        f"Each rate is over the assertions of that type in the {scored:,} scored cases "
        "(passed ÷ assertions of the type), at attempt 1 and for the returned answer."
    )
    return panel(
        "Assertions",
        esc(note),
        f'<table class="asserts">{head}{"".join(rows)}</table>',
        section_id="asserts",
    )


def _rate_cell(key: str, rate: object, total: int | None, bar: str) -> str:
    of_total = f'<span class="of">{rate_count(rate, total):,} of {total:,}</span>' if total else ""
    return (
        f'<td class="n"><div class="rate">{mini_bar(rate, bar)}{of_total}'
        f"{number(key, rate, pct(rate))}</div></td>"
    )


def _eval_status(result: Mapping[str, Any]) -> str:
    if result.get("error"):
        return "error"
    base, final = bool(result.get("passed_baseline")), bool(result.get("passed_final"))
    if final and not base:
        return "improved"
    if base and not final:
        return "degraded"
    return "passed" if final else "failed"


def _eval_row(result: Mapping[str, Any], status: str) -> dict[str, Any]:
    """One case as the page's script draws it: its summary line and the blocks of its body."""
    attempts = mappings(result.get("attempts"))
    chosen = result.get("chosen")
    returned = next((a for a in attempts if a.get("index") == chosen), None)
    blocks: list[list[Any]] = []
    if result.get("error"):
        blocks.append(["text", "error", _text(result.get("error"), "error")])
    if result.get("input") is not None:
        blocks.append(_input_block(result.get("input")))
    if result.get("expected") is not None:
        blocks.append(["text", "expected", _text(result.get("expected"), "data")])
    names = [str(t) for t in as_list(result.get("assertion_types"))]
    for attempt in attempts:
        blocks.append(_eval_attempt(attempt, names, chosen=attempt.get("index") == chosen))
    if not attempts and not result.get("error"):
        blocks.append(["empty", "No attempts recorded."])
    if result.get("metadata"):
        blocks.append(["text", "metadata", _text(result.get("metadata"), "data")])
    facts = _case_facts(result)
    if facts:
        blocks.append(["note", facts])
    return {
        "i": case_id_text(result.get("id", "")),
        "s": status,
        "f": [_mark_of(result.get("passed_baseline")), _mark_of(result.get("passed_final"))],
        "n": plural(len(attempts), "attempt"),
        "p": snippet_view(result.get("error"), returned.get("answer") if returned else None),
        "b": blocks,
    }


def _text(value: object, cls: str = "answer") -> list[str]:
    return text_view(value, cls, whole_in=EVAL_WHOLE_TEXT)


def _input_block(value: object) -> list[Any]:
    """The case's input: a prompt, or a list of role/content messages."""
    if isinstance(value, list) and value and all(isinstance(m, Mapping) for m in value):
        messages = [[str(m.get("role", "?"))[:40], _text(m.get("content"), "data")] for m in value]
        return ["msgs", "input", messages]
    return ["text", "input", _text(value, "data")]


def _case_facts(result: Mapping[str, Any]) -> str:
    facts = []
    if result.get("outcome"):
        facts.append(f"outcome {str(result['outcome'])[:60]}")
    if is_real(result.get("latency_s")):
        facts.append(f"latency {seconds(result['latency_s'])}")
    tokens = [
        f"{name} {int_text(result[key])}"
        for key, name in (("model_tokens", "model"), ("judge_tokens", "judge"))
        if isinstance(result.get(key), int)
    ]
    if isinstance(result.get("grader_tokens"), int) and result["grader_tokens"]:
        tokens.append(f"grader {int_text(result['grader_tokens'])}")
    if tokens:
        facts.append("tokens: " + ", ".join(tokens))
    return " · ".join(facts)


def _assertion_name(index: object, types: list[str]) -> str:
    # "#1 word-count": the 0-based index in the case's `assert` list, and its type when known.
    if isinstance(index, int) and not isinstance(index, bool) and 0 <= index < len(types):
        return f"#{index} {types[index]}"
    return f"#{str(index)[:20]}"


def _eval_attempt(attempt: Mapping[str, Any], types: list[str], *, chosen: bool) -> list[Any]:
    judge = attempt.get("judge_passed")
    chips = [["returned", "info"]] if chosen else []
    chips.append(
        ["judge: pass", "pass"]
        if judge is True
        else ["judge: fail", "fail"]
        if judge is False
        else ["not judged", ""]
    )
    escalated = attempt.get("escalated")
    if isinstance(escalated, list) and escalated:
        # Criteria the first judge was unsure of and a stronger one decided (`Judge(escalate_to=)`).
        chips.append(["escalated: " + ", ".join(str(name) for name in escalated[:20]), "info"])
    word = "pass" if attempt.get("oracle_passed") else "fail"
    chips.append([f"oracle: {word}", word])
    failed = as_list(attempt.get("failed_assertions"))
    note = (
        "failed assertions: " + ", ".join(_assertion_name(i, types) for i in failed[:50])
        if failed
        else "no assertion failed"
    )
    fields = [["answer", _text(attempt.get("answer"))]]
    if attempt.get("feedback"):
        fields.append(["feedback to the next attempt", _text(attempt.get("feedback"), "feedback")])
    index = attempt.get("index", "?")
    return [
        "attempt",
        {
            "title": f"Attempt {str(index)[:20]}",
            "returned": chosen,
            "chips": chips,
            "note": note,
            "fields": fields,
        },
    ]


# --- the run page -------------------------------------------------------------------------------

_RUN_STATUS = {
    "passed": ("passed", "pass"),
    "failed": ("failed", "fail"),
    "unjudged": ("unjudged", ""),
    "error": ("error", "fail"),
}
_RUN_FIELDS = {
    "id", "line", "answer", "passed", "outcome", "attempts", "tokens", "model_tokens",
    "judge_tokens", "error",
}  # fmt: skip
RUN_SUMMARY_LABELS = {
    "model": "model",
    "input": "input",
    "resumed": "already done (resumed)",
    "bad_lines": "bad input lines",
    "wall_time_s": "wall time",
    **SETUP_LABELS,
}
"""The labels of the run page's facts: the run's own, then the setup keys every page shares."""


def render_run_html(
    rows: Sequence[Mapping[str, Any]],
    summary: Mapping[str, Any],
    *,
    title: str = "jevrefine run",
) -> str:
    """The report page of `jevrefine run --report` as one string (see `write_run_html`)."""
    out = io.StringIO()
    write_run_html(rows, summary, out, title=title)
    return out.getvalue()


def write_run_html(
    rows: Sequence[Mapping[str, Any]],
    summary: Mapping[str, Any],
    out: TextIO,
    *,
    title: str = "jevrefine run",
) -> None:
    """Write the report page of `jevrefine run --report` to `out`: one row per item, no oracle.

    Args:
        rows: the run's output rows (`id`, `line`, `answer`, `passed`, `outcome`, `attempts`,
            `tokens`, `model_tokens`, `judge_tokens`, `error`; other keys are shown as they are).
        summary: facts about the run that the rows do not hold (`model`, `resumed`, `bad_lines`,
            `wall_time_s`, and the setup facts of `report_setup`: date and versions; other keys
            are listed as they are).
        out: a text file opened for writing (UTF-8), or a `StringIO`.
        title: the page's title and heading.
    """
    statuses = [_run_status(row) for row in rows]
    histogram: dict[str, int] = {}
    for row, status in zip(rows, statuses, strict=True):
        attempts = row.get("attempts")
        if status != "error" and isinstance(attempts, int) and 0 < attempts < 10**6:
            histogram[str(attempts)] = histogram.get(str(attempts), 0) + 1
    counts = {s: statuses.count(s) for s in _RUN_STATUS}
    labels = {s: label for s, (label, _) in _RUN_STATUS.items()}
    body = [
        facts_panel(summary, labels=RUN_SUMMARY_LABELS, key_prefix="summary", section_id="facts"),
        _run_cards(rows, statuses, histogram),
        '<div class="two">',
        panel(
            "Attempts per item",
            esc(
                "How many answers the model gave, over the "
                f"{sum(histogram.values()):,} items without an error."
            ),
            histogram_svg(histogram, "attempts_histogram"),
            section_id="attempts",
        ),
        _outcomes_panel(rows, statuses),
        "</div>",
        list_panel("Items", status_toolbar(counts, labels, len(rows), noun="items")),
    ]
    views = (_run_row(row, s) for row, s in zip(rows, statuses, strict=True))
    write_page(
        out, title=title, kind="run", body=body, rows=views, statuses=_RUN_STATUS, noun="items"
    )


def _run_cards(
    rows: Sequence[Mapping[str, Any]], statuses: list[str], histogram: Mapping[str, int]
) -> str:
    errors = statuses.count("error")
    judged = [row for row, s in zip(rows, statuses, strict=True) if s in ("passed", "failed")]
    passed = statuses.count("passed")
    rate = passed / len(judged) if judged else None
    totals = {k: sum(_count(row.get(k)) for row in rows) for k in ("model_tokens", "judge_tokens")}
    cards = [
        stat_card("Items", "items", len(rows), int_text(len(rows)), "rows in the output", "accent"),
        card(
            "Passed",
            number("pass_rate", rate, pct(rate)),
            number("passed", passed, int_text(passed)) + esc(f" of {len(judged):,} judged items"),
            "pass" if judged else "",
        ),
        stat_card(
            "Errors",
            "errors",
            errors,
            int_text(errors),
            f"of {len(rows):,} items",
            "fail" if errors else "",
        ),
        attempts_card(histogram, "item"),
        tokens_card(totals, ("model", "judge")),
    ]
    return '<section class="cards five" id="summary">' + "".join(cards) + "</section>"


_OUTCOME_WORDS = {
    "passed": "passed the judge",
    "best_attempt": "failed every attempt; the best one returned",
    "failed": "failed every attempt",
    "unjudged": "not judged",
    "skipped": "judging skipped",
}


def _outcomes_panel(rows: Sequence[Mapping[str, Any]], statuses: Sequence[str]) -> str:
    outcomes: dict[str, int] = {}
    for row, status in zip(rows, statuses, strict=True):
        outcome = "error" if status == "error" else str(row.get("outcome") or "no judge")[:60]
        outcomes[outcome] = outcomes.get(outcome, 0) + 1
    total = len(rows)
    lines = []
    # The most frequent first; a hostile file's thousand made-up outcomes end in "others".
    ranked = sorted(outcomes.items(), key=lambda kv: -kv[1])
    if len(ranked) > 20:
        ranked = [*ranked[:19], ("others", sum(n for _, n in ranked[19:]))]
    for outcome, count in ranked:
        share = count / total if total else 0.0
        lines.append(
            f"<tr><td><code>{esc(outcome)}</code></td>"
            f'<td class="muted">{esc(_OUTCOME_WORDS.get(outcome, ""))}</td>'
            f'<td class="n"><div class="rate">{mini_bar(share, "bar-final")}'
            f"{number(f'outcomes.{outcome}', count, int_text(count))}</div></td></tr>"
        )
    table = (
        '<table><tr><th>outcome</th><th></th><th class="n">items</th></tr>'
        + "".join(lines)
        + "</table>"
    )
    note = esc(f"The refine outcome of each of the {total:,} items.")
    return panel("Outcomes", note, table, section_id="outcomes")


def _run_status(row: Mapping[str, Any]) -> str:
    if row.get("error"):
        return "error"
    passed = row.get("passed")
    return "passed" if passed is True else "failed" if passed is False else "unjudged"


def _run_row(row: Mapping[str, Any], status: str) -> dict[str, Any]:
    attempts = row.get("attempts")
    count = attempts if isinstance(attempts, int) and 0 <= attempts < 10**15 else 0
    line = row.get("line")
    flow = f"line {int_text(line)}" if isinstance(line, int) else ""
    if row.get("outcome"):
        flow += f" · {str(row.get('outcome'))[:60]}" if flow else str(row.get("outcome"))[:60]
    blocks: list[list[Any]] = []
    if row.get("error"):
        blocks.append(["text", "error", _run_text(row.get("error"), "error")])
    extra = [key for key in row if key not in _RUN_FIELDS]
    for key in extra[:50]:
        blocks.append(["text", str(key)[:80], _run_text(row[key], "data")])
    if not row.get("error") or row.get("answer") is not None:
        blocks.append(["text", "answer", _run_text(row.get("answer"))])
    facts = (
        f"outcome {str(row.get('outcome') or '–')[:60]} · {plural(count, 'attempt')} · "
        f"tokens {int_text(row.get('tokens'))} (model {int_text(row.get('model_tokens'))}, "
        f"judge {int_text(row.get('judge_tokens'))})"
    )
    blocks.append(["note", facts])
    return {
        "i": case_id_text(row.get("id", "")),
        "s": status,
        "f": flow,
        "n": plural(count, "attempt"),
        "p": snippet_view(row.get("error"), row.get("answer")),
        "b": blocks,
    }


def _run_text(value: object, cls: str = "answer") -> list[str]:
    return text_view(value, cls, whole_in=RUN_WHOLE_TEXT)
