"""The report pages of `jevrefine eval --report` and `jevrefine run --report`.

Each page is one self-contained HTML file: its CSS, script and charts (SVG) are inline and a
Content-Security-Policy forbids every load, so it opens offline and an answer that slipped past
the escaping could still fetch nothing nor run a script (only the page's own script, pinned by its
hash, may run). Every string from the data is escaped: answers are model output, and hostile.

The summary numbers carry `data-key` (the report key, dotted for nested ones) and `data-value` (the
JSON value), so a test or a scraper reads the page's numbers without parsing the display text.
"""

from __future__ import annotations

import base64
import hashlib
import html
import json
import math
import re
from collections.abc import Mapping, Sequence
from typing import Any

from .._version import __version__

__all__ = ["render_eval_html", "render_run_html"]

CLIP_CHARS = 1500
"""Answers longer than this (or than `CLIP_LINES` lines) open clipped, with a "show all" toggle."""
CLIP_LINES = 16
SNIPPET_CHARS = 140
"""How much of the returned answer a case's one-line summary shows."""

_SURROGATE = re.compile("[\ud800-\udfff]")
_SPACES = re.compile(r"\s+")

_CSS = """
:root{--bg:#f6f7f9;--panel:#fff;--ink:#1d2330;--muted:#5f6b7a;--line:#dde1e7;--soft:#eef1f5;
--accent:#4f46e5;--base:#9aa3b2;--pass:#1a7f37;--pass-bg:#e6f4ea;--fail:#c62828;--fail-bg:#fdecec;
--warn:#a15c00;--warn-bg:#fff4e0;--info:#1f5fbf;--info-bg:#e8f0fc;color-scheme:light dark}
@media (prefers-color-scheme:dark){:root{--bg:#0f1218;--panel:#171b23;--ink:#e6e9ef;
--muted:#9aa4b2;--line:#2a303b;--soft:#1f2430;--accent:#8b85ff;--base:#5d6675;--pass:#4cc76b;
--pass-bg:#15301d;--fail:#ff6b6b;--fail-bg:#3a1717;--warn:#f0a640;--warn-bg:#3a2a10;
--info:#7fb0ff;--info-bg:#16243d}}
*{box-sizing:border-box}
body{margin:0;background:var(--bg);color:var(--ink);
font:15px/1.5 system-ui,-apple-system,"Segoe UI",Roboto,"Noto Sans","DejaVu Sans",sans-serif}
main{max-width:1160px;margin:0 auto;padding:28px 24px 60px}
header.top{display:flex;align-items:baseline;gap:14px;flex-wrap:wrap;margin-bottom:18px}
header.top h1{font-size:26px;margin:0;letter-spacing:-.01em}
.kind{font-size:12px;font-weight:600;text-transform:uppercase;letter-spacing:.08em;color:var(--accent);
border:1px solid var(--accent);border-radius:999px;padding:1px 9px}
.muted{color:var(--muted)}
h2{font-size:17px;margin:0 0 4px}
.panel{background:var(--panel);border:1px solid var(--line);border-radius:12px;padding:18px 20px;
margin-bottom:18px}
.panel>.note{margin:0 0 12px;color:var(--muted);font-size:13.5px}
.headline{display:grid;grid-template-columns:minmax(260px,1fr) minmax(320px,1.45fr);gap:22px;
align-items:center}
.hero{font-size:40px;font-weight:700;letter-spacing:-.02em;line-height:1.1;white-space:nowrap}
.hero .arrow{color:var(--muted);font-weight:400;padding:0 6px}
.hero .from{color:var(--muted)}
.verdict{font-size:15.5px;margin:10px 0 0}
.chip{display:inline-block;font-size:12.5px;font-weight:600;border-radius:999px;padding:1px 9px;
background:var(--soft);color:var(--muted);white-space:nowrap}
.chip.pass{background:var(--pass-bg);color:var(--pass)}
.chip.fail{background:var(--fail-bg);color:var(--fail)}
.chip.warn{background:var(--warn-bg);color:var(--warn)}
.chip.info{background:var(--info-bg);color:var(--info)}
.cards{display:grid;grid-template-columns:repeat(auto-fill,minmax(200px,1fr));gap:12px;
margin-bottom:18px}
@media (min-width:1000px){.cards.five{grid-template-columns:repeat(5,1fr)}}
.card{background:var(--panel);border:1px solid var(--line);border-radius:12px;padding:12px 14px;
border-top:3px solid var(--line)}
.card.pass{border-top-color:var(--pass)}.card.fail{border-top-color:var(--fail)}
.card.accent{border-top-color:var(--accent)}.card.warn{border-top-color:var(--warn)}
.card .label{font-size:12px;font-weight:600;text-transform:uppercase;letter-spacing:.06em;
color:var(--muted)}
.card .big{font-size:26px;font-weight:700;letter-spacing:-.01em;margin:2px 0}
.card .sub{font-size:13px;color:var(--muted)}
.two{display:grid;grid-template-columns:1fr 1fr;gap:18px}
.two>.panel{margin-bottom:18px}
svg{display:block;max-width:100%;height:auto}
.facts{margin:-8px 0 16px;color:var(--muted);overflow-wrap:anywhere}
.facts strong{color:var(--ink);font-weight:600}
svg text{fill:var(--muted);font-size:12px;font-family:inherit}
svg .val{fill:var(--ink);font-weight:600}
svg .grid{stroke:var(--line)}
svg .zero{stroke:var(--muted);stroke-dasharray:3 3}
svg .bar-base{fill:var(--base)}svg .bar-final{fill:var(--accent)}svg .bar-hist{fill:var(--accent)}
svg .ci{stroke:var(--ink);stroke-width:2}svg .dot{fill:var(--ink)}
table{border-collapse:collapse;width:100%}
th,td{text-align:left;padding:7px 10px;border-bottom:1px solid var(--line);vertical-align:middle}
th{font-size:12px;text-transform:uppercase;letter-spacing:.05em;color:var(--muted);font-weight:600}
td.n,th.n{text-align:right;font-variant-numeric:tabular-nums}
code,pre{font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,"DejaVu Sans Mono",monospace;
font-size:13px}
.rate{display:flex;gap:8px;align-items:center;justify-content:flex-end}
.rate>span{min-width:52px;text-align:right}
.rate>span.of{min-width:64px;color:var(--muted);font-size:12.5px}
.asserts{max-width:820px}
.matrix{width:auto;margin:6px 0 10px}
.matrix td.cell{width:130px;text-align:center;border:1px solid var(--line);padding:10px}
.matrix .cnt{font-size:24px;font-weight:700;display:block}
.matrix .what{font-size:12px;color:var(--muted)}
.matrix td.agree{background:var(--pass-bg)}.matrix td.lenient{background:var(--fail-bg)}
.matrix td.strict{background:var(--warn-bg)}
.matrix th{border:none;text-align:center}.matrix th.row{text-align:right}
.toolbar{display:flex;gap:8px;flex-wrap:wrap;align-items:center;margin:6px 0 12px}
.toolbar button{font:inherit;font-size:13px;border:1px solid var(--line);background:var(--panel);
color:var(--ink);border-radius:999px;padding:3px 12px;cursor:pointer}
.toolbar button[aria-pressed=true]{background:var(--accent);border-color:var(--accent);color:#fff}
.toolbar input{font:inherit;font-size:13px;padding:4px 10px;border:1px solid var(--line);
border-radius:8px;background:var(--panel);color:var(--ink);min-width:220px;margin-left:auto}
details.case{border:1px solid var(--line);border-radius:10px;margin-bottom:8px;
background:var(--panel)}
details.case>summary{display:grid;gap:12px;
grid-template-columns:96px minmax(70px,150px) 150px 92px 1fr;align-items:center;
padding:8px 12px;cursor:pointer;list-style:none}
details.case>summary::-webkit-details-marker{display:none}
details.case>summary:hover{background:var(--soft);border-radius:10px}
details.case[open]>summary{border-bottom:1px solid var(--line);border-radius:10px 10px 0 0}
.cid{font-weight:600;overflow:hidden;text-overflow:ellipsis;white-space:nowrap;unicode-bidi:isolate}
.flow{font-size:13px;white-space:nowrap}
.snippet{color:var(--muted);font-size:13.5px;overflow:hidden;text-overflow:ellipsis;white-space:nowrap;
unicode-bidi:isolate}
.snippet.err{color:var(--fail)}
.body{padding:12px 14px 14px}
.attempt{border-left:3px solid var(--line);padding:4px 0 6px 12px;margin:10px 0}
.attempt.chosen{border-left-color:var(--accent)}
.attempt .head{display:flex;gap:8px;align-items:center;flex-wrap:wrap;margin-bottom:6px}
.msg .role{font-size:12px;font-weight:600;color:var(--muted)}
.facts-case{font-size:13px;margin:8px 0 0}
.field{margin:6px 0}.field>.name{font-size:12px;font-weight:600;color:var(--muted);
text-transform:uppercase;letter-spacing:.05em}
pre{margin:4px 0 0;white-space:pre-wrap;overflow-wrap:anywhere;background:var(--soft);
border-radius:8px;padding:9px 11px;unicode-bidi:isolate;max-width:100%}
pre.feedback{background:var(--warn-bg)}pre.error{background:var(--fail-bg);color:var(--fail)}
.empty{font-style:italic;color:var(--muted)}
.clip pre{max-height:22em;overflow:hidden;
mask-image:linear-gradient(to bottom,#000 75%,transparent)}
.clip:has(>details[open]) pre{max-height:none;mask-image:none}
.clip>details>summary{cursor:pointer;color:var(--accent);font-size:13px;font-weight:600;
margin-top:4px}
.clip>details>summary::before{content:"show all "}
.clip>details[open]>summary::before{content:"show less of "}
footer{color:var(--muted);font-size:12.5px;margin-top:24px}
a{color:var(--accent)}
@media (max-width:820px){.headline,.two{grid-template-columns:1fr}
details.case>summary{grid-template-columns:80px 1fr;}.snippet,.flow.att{display:none}}
"""

_JS = """
(function () {
  var cases = Array.prototype.slice.call(document.querySelectorAll("details.case"));
  var search = document.getElementById("case-search");
  var shown = document.getElementById("case-shown");
  var buttons = Array.prototype.slice.call(document.querySelectorAll("[data-filter]"));
  if (!search) { return; }
  var filter = "all";
  function apply() {
    var text = search.value.toLowerCase();
    var count = 0;
    cases.forEach(function (item) {
      var ok = (filter === "all" || item.dataset.status === filter) &&
        (!text || item.textContent.toLowerCase().indexOf(text) >= 0);
      item.hidden = !ok;
      if (ok) { count += 1; }
    });
    shown.textContent = String(count);
  }
  buttons.forEach(function (button) {
    button.addEventListener("click", function () {
      filter = button.dataset.filter;
      buttons.forEach(function (other) {
        other.setAttribute("aria-pressed", String(other === button));
      });
      apply();
    });
  });
  search.addEventListener("input", apply);
  function openAll(open) {
    cases.forEach(function (item) { if (!item.hidden) { item.open = open; } });
  }
  document.getElementById("expand-all").onclick = function () { openAll(true); };
  document.getElementById("collapse-all").onclick = function () { openAll(false); };
})();
"""


def _csp_hash(source: str) -> str:
    digest = hashlib.sha256(source.encode("utf-8")).digest()
    return "'sha256-" + base64.b64encode(digest).decode("ascii") + "'"


# Nothing may load (default-src 'none'); only this module's own style and script, by hash, apply.
_CSP = (
    f"default-src 'none'; style-src {_csp_hash(_CSS)}; script-src {_csp_hash(_JS)}; "
    "img-src data:; base-uri 'none'; form-action 'none'"
)


# --- escaping and number formatting -------------------------------------------------------------


def _esc(value: object) -> str:
    """Text made safe for HTML text and attribute values (lone surrogates become U+FFFD)."""
    text = value if isinstance(value, str) else str(value)
    return html.escape(_SURROGATE.sub("\ufffd", text), quote=True)


def _pct(rate: object) -> str:
    """0.775 -> '77.5%'; missing -> '–'."""
    if not isinstance(rate, int | float) or isinstance(rate, bool) or math.isnan(rate):
        return "–"
    return f"{rate * 100:.1f}".rstrip("0").rstrip(".") + "%"


def _pts(diff: object) -> str:
    """A signed difference of two rates in percentage points: 0.325 -> '+32.5 pts'."""
    if not isinstance(diff, int | float) or isinstance(diff, bool) or math.isnan(diff):
        return "–"
    text = f"{abs(diff) * 100:.1f}".rstrip("0").rstrip(".")
    sign = "±" if text == "0" else ("+" if diff > 0 else "\u2212")
    return f"{sign}{text} pts"


def _int(value: object) -> str:
    return f"{value:,}" if isinstance(value, int) and not isinstance(value, bool) else "–"


def _seconds(value: object) -> str:
    if not isinstance(value, int | float) or isinstance(value, bool):
        return "–"
    return f"{value:.2f} s" if value < 10 else f"{value:,.1f} s"


def _number(key: str, value: object, text: str) -> str:
    """A summary number: its display text, with the report key and JSON value for machines."""
    return (
        f'<span class="num" data-key="{_esc(key)}" data-value="{_esc(json.dumps(value))}">'
        f"{_esc(text)}</span>"
    )


def _of(count: int, total: int, noun: str) -> str:
    return f"{count:,} of {total:,} {noun}"


def _rate_count(rate: object, total: int) -> int:
    # The numerator behind a rate: exact for rates that are count / total, as the report's are.
    if not isinstance(rate, int | float) or isinstance(rate, bool) or math.isnan(rate):
        return 0
    return round(rate * total)


# --- page shell and shared pieces ---------------------------------------------------------------


def _page(title: str, kind: str, body: str) -> str:
    return (
        "<!DOCTYPE html>\n"
        '<html lang="en"><head><meta charset="utf-8">'
        f'<meta http-equiv="Content-Security-Policy" content="{_CSP}">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        '<meta name="referrer" content="no-referrer">'
        f"<title>{_esc(title)}</title><style>{_CSS}</style></head>\n"
        f'<body><main><header class="top"><h1 id="title">{_esc(title)}</h1>'
        f'<span class="kind">{_esc(kind)}</span></header>\n{body}\n'
        f"<footer>Written by jevrefine {_esc(__version__)}. This page is self-contained: it loads "
        "nothing from the network.</footer></main>"
        f"<script>{_JS}</script></body></html>\n"
    )


def _card(label: str, big: str, sub: str = "", tone: str = "") -> str:
    return (
        f'<div class="card {tone}"><div class="label">{_esc(label)}</div>'
        f'<div class="big">{big}</div><div class="sub">{sub}</div></div>'
    )


def _stat_card(label: str, key: str, value: object, text: str, note: str, tone: str = "") -> str:
    """A card whose big number is one report value (`text` shown, `key`/`value` for machines).

    `note` is plain text and escaped here, so no card's note can carry markup by mistake.
    """
    return _card(label, _number(key, value, text), _esc(note), tone)


def _attempts_card(histogram: Mapping[Any, Any], noun: str) -> str:
    """Answers per `noun` (case, item), from an attempts histogram (attempts -> how many)."""
    counts = [(int(k), int(v)) for k, v in histogram.items() if str(k).isdigit()]
    answers = sum(attempts * n for attempts, n in counts)
    counted = sum(n for _, n in counts)
    return _card(
        "Attempts",
        _esc(f"{answers / counted:.2f}" if counted else "–"),
        _esc(f"answers per {noun}: {answers:,} for {counted:,} {noun}s"),
    )


def _tokens_card(data: Mapping[str, Any], kinds: Sequence[str]) -> str:
    """Tokens in all, then per kind (`data["model_tokens"]`, ...), each with its data-key."""
    values = [data.get(f"{kind}_tokens") for kind in kinds]
    total = sum(v for v in values if isinstance(v, int) and not isinstance(v, bool))
    parts = (
        f"{kind} " + _number(f"{kind}_tokens", value, _int(value))
        for kind, value in zip(kinds, values, strict=True)
    )
    return _card("Tokens", _esc(f"{total:,}"), " · ".join(parts))


def _panel(title: str, note: str, content: str, *, section_id: str) -> str:
    note_html = f'<p class="note">{note}</p>' if note else ""
    return (
        f'<section class="panel" id="{section_id}"><h2>{_esc(title)}</h2>{note_html}'
        f"{content}</section>"
    )


def _text_block(text: object, *, cls: str = "answer") -> str:
    """A `<pre>` of hostile text, clipped with a "show all" toggle when long; never shortened."""
    if text is None:
        return '<div class="empty">(none)</div>'
    value = text if isinstance(text, str) else json.dumps(text, ensure_ascii=False, indent=2)
    if value == "":
        return '<div class="empty">(empty)</div>'
    block = f'<pre class="{cls}">{_esc(value)}</pre>'
    if len(value) <= CLIP_CHARS and value.count("\n") < CLIP_LINES:
        return block
    # The whole text is in the page; CSS only limits its height until the toggle opens.
    lines = value.count("\n") + 1
    size = f"{len(value):,} characters" + (f", {lines:,} lines" if lines > 1 else "")
    return (
        f'<div class="clip">{block}<details class="more"><summary>{size}</summary></details></div>'
    )


def _field(name: str, content: str) -> str:
    return f'<div class="field"><div class="name">{_esc(name)}</div>{content}</div>'


def _snippet(text: object) -> str:
    if not isinstance(text, str) or not text.strip():
        return '<span class="empty">(empty answer)</span>' if text == "" else ""
    flat = _SPACES.sub(" ", text).strip()
    if len(flat) > SNIPPET_CHARS:
        flat = flat[:SNIPPET_CHARS].rstrip() + "…"
    return _esc(flat)


def _summary_snippet(error: object, answer: object) -> str:
    if error:
        return f'<span class="snippet err">{_snippet(str(error))}</span>'
    return f'<span class="snippet">{_snippet(answer)}</span>'


def _mark(value: object) -> str:
    if value is True:
        return '<span class="chip pass">pass</span>'
    if value is False:
        return '<span class="chip fail">fail</span>'
    return '<span class="chip">–</span>'


def _histogram_svg(histogram: Mapping[str, Any], key_prefix: str) -> str:
    """Vertical bars, one per attempt count, with each bar's count and share."""
    items = sorted(
        ((int(k), int(v)) for k, v in histogram.items() if str(k).isdigit()), key=lambda kv: kv[0]
    )
    total = sum(v for _, v in items)
    if not items or total == 0:
        return '<p class="empty">No scored cases.</p>'
    width, height, left, bottom, top = 460, 200, 26, 30, 24
    slot = (width - left - 10) / len(items)
    bar = min(64.0, slot * 0.62)
    peak = max(v for _, v in items) or 1
    parts = [f'<svg viewBox="0 0 {width} {height}" role="img" aria-label="attempts histogram">']
    floor = height - bottom
    parts.append(
        f'<line class="grid" x1="{left - 20}" x2="{width - 6}" y1="{floor}" y2="{floor}"/>'
    )
    for position, (attempts, count) in enumerate(items):
        x = left + slot * position + (slot - bar) / 2
        h = count / peak * (height - bottom - top)
        y = height - bottom - h
        parts.append(
            f'<rect class="bar-hist" x="{x:.1f}" y="{y:.1f}" width="{bar:.1f}" height="{h:.1f}" '
            f'rx="4" data-key="{_esc(key_prefix)}.{attempts}" data-value="{count}"/>'
        )
        middle = x + bar / 2
        parts.append(
            f'<text class="val" x="{middle:.1f}" y="{y - 6:.1f}" text-anchor="middle">{count}'
            f" · {_pct(count / total)}</text>"
        )
        label = "1 attempt" if attempts == 1 else f"{attempts} attempts"
        parts.append(
            f'<text x="{middle:.1f}" y="{height - bottom + 18}" text-anchor="middle">{label}</text>'
        )
    parts.append("</svg>")
    return "".join(parts)


def _status_toolbar(counts: Mapping[str, int], labels: Mapping[str, str], total: int) -> str:
    buttons = [f'<button type="button" data-filter="all" aria-pressed="true">All {total}</button>']
    for status, label in labels.items():
        if counts.get(status):
            buttons.append(
                f'<button type="button" data-filter="{status}" aria-pressed="false">'
                f"{_esc(label)} {counts[status]}</button>"
            )
    buttons.append('<button type="button" id="expand-all">Expand all</button>')
    buttons.append('<button type="button" id="collapse-all">Collapse all</button>')
    return (
        '<div class="toolbar">'
        + "".join(buttons)
        + '<input id="case-search" type="search" placeholder="Search ids, answers, feedback"'
        ' aria-label="search the cases"></div>'
        f'<p class="note">Showing <span id="case-shown">{total}</span> of {total}. '
        "Click a row to open it.</p>"
    )


# --- the eval page ------------------------------------------------------------------------------

_EVAL_STATUS = {
    "improved": ("improved", "info"),
    "degraded": ("degraded", "warn"),
    "passed": ("passed", "pass"),
    "failed": ("failed", "fail"),
    "error": ("error", "fail"),
}


def render_eval_html(data: Mapping[str, Any], *, title: str = "jevrefine eval") -> str:
    """The report page of an evaluation: `EvalReport.to_dict()`'s output as one HTML file.

    Args:
        data: the report as `EvalReport.to_dict()` returns it (the keys pinned for the JSON file).
        title: the page's title and heading.

    Returns:
        The page, self-contained (inline CSS, script and SVG; it loads nothing from the network).
    """
    cases = int(data.get("cases") or 0)
    errors = int(data.get("errors") or 0)
    scored = max(cases - errors, 0)
    body = "\n".join(
        [
            _eval_headline(data, scored, errors),
            _eval_cards(data, cases, errors, scored),
            '<div class="two">',
            _panel(
                "Attempts per case",
                f"How many answers the model gave, over the {scored:,} scored cases.",
                _histogram_svg(data.get("attempts_histogram") or {}, "attempts_histogram"),
                section_id="attempts",
            ),
            _agreement_panel(data.get("judge_agreement")),
            "</div>",
            _assertion_panel(data.get("per_assertion") or {}, data.get("results") or [], scored),
            _eval_cases(data.get("results") or []),
        ]
    )
    return _page(title, "eval", body)


def _eval_headline(data: Mapping[str, Any], scored: int, errors: int) -> str:
    base, final, lift = (
        data.get("baseline_pass_rate"),
        data.get("final_pass_rate"),
        data.get("lift"),
    )
    lo, hi = _interval(data.get("lift_ci95"))
    base_n, final_n = _rate_count(base, scored), _rate_count(final, scored)
    hero = (
        f'<div class="hero"><span class="from">{_esc(_pct(base))}</span>'
        f'<span class="arrow">→</span><span>{_esc(_pct(final))}</span></div>'
        f'<div class="muted">baseline (attempt 1) → final (the returned answers)</div>'
    )
    if scored and isinstance(lift, int | float) and not isinstance(lift, bool):
        direction = "raised" if lift > 0 else "lowered" if lift < 0 else "did not change"
        ci = f" (paired 95% interval {_pts(lo)} to {_pts(hi)})" if lo is not None else ""
        moved = f" by {_pts(lift)}" if lift else ""
        sentence = (
            f"Refinement <strong>{direction}</strong> the pass rate{_esc(moved)}{_esc(ci)}: "
            f"{_esc(_of(base_n, scored, 'cases'))} passed at the first attempt, "
            f"{_esc(_of(final_n, scored, 'cases'))} as returned."
        )
        if lo is not None and hi is not None and lo <= 0 <= hi and (lo, hi) != (0, 0):
            sentence += " The interval includes zero: the data do not show a clear effect."
    else:
        sentence = "No case was scored."
    if errors:
        sentence += f" {errors:,} errored {'case is' if errors == 1 else 'cases are'} left out."
    charts = _before_after_svg(base, final) + _lift_svg(lift, lo, hi)
    return (
        '<section class="panel" id="headline"><div class="headline"><div>'
        f'{hero}<p class="verdict">{sentence}</p></div><div>{charts}</div></div></section>'
    )


def _interval(value: object) -> tuple[float | None, float | None]:
    if isinstance(value, list | tuple) and len(value) == 2:
        lo, hi = value
        if all(isinstance(v, int | float) and not isinstance(v, bool) for v in (lo, hi)):
            return float(lo), float(hi)
    return None, None


def _before_after_svg(base: object, final: object) -> str:
    width, left, right = 560, 120, 60
    span = width - left - right
    rows = [("attempt 1", base, "bar-base"), ("returned", final, "bar-final")]
    parts = [f'<svg viewBox="0 0 {width} 104" role="img" aria-label="pass rate before and after">']
    for tick in (0, 25, 50, 75, 100):
        x = left + span * tick / 100
        parts.append(f'<line class="grid" x1="{x:.1f}" x2="{x:.1f}" y1="4" y2="80"/>')
        parts.append(f'<text x="{x:.1f}" y="96" text-anchor="middle">{tick}%</text>')
    for row, (label, rate, cls) in enumerate(rows):
        y = 10 + row * 36
        value = rate if isinstance(rate, int | float) and not isinstance(rate, bool) else 0.0
        w = max(span * min(max(value, 0.0), 1.0), 1.5)
        parts.append(f'<text x="{left - 10}" y="{y + 17}" text-anchor="end">{label}</text>')
        parts.append(f'<rect class="{cls}" x="{left}" y="{y}" width="{w:.1f}" height="26" rx="4"/>')
        parts.append(
            f'<text class="val" x="{left + w + 6:.1f}" y="{y + 17}">{_esc(_pct(rate))}</text>'
        )
    parts.append("</svg>")
    return "".join(parts)


def _lift_svg(lift: object, lo: float | None, hi: float | None) -> str:
    """The lift as a point on a scale around zero, with its paired 95 % interval as a line."""
    if not isinstance(lift, int | float) or isinstance(lift, bool):
        return ""
    reach = max(abs(lift), abs(lo or 0.0), abs(hi or 0.0), 0.05)
    reach = math.ceil(reach * 10) / 10
    width, left, right = 560, 120, 60
    span = width - left - right

    def x_of(value: float) -> float:
        return left + span * (value + reach) / (2 * reach)

    parts = [f'<svg viewBox="0 0 {width} 74" role="img" aria-label="lift and its interval">']
    for tick in (-reach, -reach / 2, 0.0, reach / 2, reach):
        x = x_of(tick)
        cls = "zero" if tick == 0 else "grid"
        parts.append(f'<line class="{cls}" x1="{x:.1f}" x2="{x:.1f}" y1="6" y2="46"/>')
        parts.append(f'<text x="{x:.1f}" y="64" text-anchor="middle">{_esc(_pts(tick))}</text>')
    parts.append(f'<text x="{left - 10}" y="31" text-anchor="end">lift (95% CI)</text>')
    if lo is not None and hi is not None:
        x1, x2 = x_of(lo), x_of(hi)
        parts.append(f'<line class="ci" x1="{x1:.1f}" x2="{x2:.1f}" y1="26" y2="26"/>')
        for x in (x1, x2):
            parts.append(f'<line class="ci" x1="{x:.1f}" x2="{x:.1f}" y1="19" y2="33"/>')
    parts.append(f'<circle class="dot" cx="{x_of(lift):.1f}" cy="26" r="6"/>')
    parts.append("</svg>")
    return "".join(parts)


def _eval_cards(data: Mapping[str, Any], cases: int, errors: int, scored: int) -> str:
    base, final, lift = (
        data.get("baseline_pass_rate"),
        data.get("final_pass_rate"),
        data.get("lift"),
    )
    base_n, final_n = _rate_count(base, scored), _rate_count(final, scored)
    improved, degraded = int(data.get("improved") or 0), int(data.get("degraded") or 0)
    lo, hi = _interval(data.get("lift_ci95"))
    eir = data.get("error_introduction_rate")
    latency = data.get("latency_s") or {}
    lift_tone = "pass" if lo is not None and lo > 0 else "fail" if hi is not None and hi < 0 else ""
    cards = [
        # Quality: the two pass rates, the lift, and the cases that moved either way.
        _stat_card(
            "Baseline",
            "baseline_pass_rate",
            base,
            _pct(base),
            f"{_of(base_n, scored, 'cases')} pass at attempt 1",
        ),
        _stat_card(
            "Final",
            "final_pass_rate",
            final,
            _pct(final),
            f"{_of(final_n, scored, 'cases')} pass as returned",
            "accent",
        ),
        _card(
            "Lift",
            _number("lift", lift, _pts(lift)),
            "paired 95% interval "
            + _number("lift_ci95.0", lo, _pts(lo))
            + " to "
            + _number("lift_ci95.1", hi, _pts(hi)),
            lift_tone,
        ),
        _stat_card(
            "Improved",
            "improved",
            data.get("improved"),
            _int(improved),
            f"of {scored - base_n:,} cases that failed at attempt 1",
            "pass" if improved else "",
        ),
        _stat_card(
            "Degraded",
            "degraded",
            data.get("degraded"),
            _int(degraded),
            f"of {base_n:,} cases that passed at attempt 1",
            "warn" if degraded else "",
        ),
        # Risk and cost.
        _stat_card(
            "Error introduction",
            "error_introduction_rate",
            eir,
            _pct(eir),
            f"degraded ÷ passed at attempt 1: {degraded:,} of {base_n:,}",
            "warn" if degraded else "",
        ),
        _card(
            "Cases",
            _number("cases", data.get("cases"), _int(cases)),
            _number("errors", data.get("errors"), _int(errors))
            + (" errored, left out of every rate" if errors else " errored"),
            "fail" if errors else "",
        ),
        _attempts_card(data.get("attempts_histogram") or {}, "case"),
        _tokens_card(data, ("model", "judge", "grader")),
        _card(
            "Latency per case",
            _number("latency_s.p50", latency.get("p50"), _seconds(latency.get("p50"))),
            "median · p95 "
            + _number("latency_s.p95", latency.get("p95"), _seconds(latency.get("p95"))),
        ),
    ]
    return '<section class="cards five" id="summary">' + "".join(cards) + "</section>"


_KAPPA_WORDS = ((0.8, "almost perfect"), (0.6, "substantial"), (0.4, "moderate"), (0.2, "fair"))


def _agreement_panel(agreement: object) -> str:
    title = "Loop judge vs oracle"
    if not isinstance(agreement, Mapping):
        return _panel(
            title,
            "",
            '<p class="empty" id="no-loop-judge">No loop judge: every case had one attempt '
            '(judge "none"), so there is nothing to compare with the oracle.</p>',
            section_id="agreement",
        )
    cells = {k: int(agreement.get(k) or 0) for k in ("tp", "fp", "fn", "tn")}
    total = sum(cells.values())

    def cell(key: str, cls: str, what: str) -> str:
        return (
            f'<td class="cell {cls}"><span class="cnt">'
            f"{_number(f'judge_agreement.{key}', agreement.get(key), _int(cells[key]))}</span>"
            f'<span class="what">{_esc(what)}</span></td>'
        )

    matrix = (
        '<table class="matrix"><tr><th></th><th>oracle: pass</th><th>oracle: fail</th></tr>'
        f'<tr><th class="row">judge: pass</th>{cell("tp", "agree", "agree")}'
        f"{cell('fp', 'lenient', 'judge too lenient')}</tr>"
        f'<tr><th class="row">judge: fail</th>{cell("fn", "strict", "judge too strict")}'
        f"{cell('tn', 'agree', 'agree')}</tr></table>"
    )
    kappa = agreement.get("kappa")
    if isinstance(kappa, int | float) and not isinstance(kappa, bool):
        word = next(
            (w for bar, w in _KAPPA_WORDS if kappa > bar), "slight" if kappa > 0 else "poor"
        )
        kappa_text = f"{kappa:.2f}"
        kappa_note = f" ({word} agreement beyond chance, after Landis and Koch)"
    else:
        kappa_text = "undefined"
        kappa_note = " (the judge and the oracle each gave one verdict throughout)"
    agree = cells["tp"] + cells["tn"]
    agreed = _pct(agree / total) if total else "–"
    summary = (
        f"<p>Cohen's κ = <strong>{_number('judge_agreement.kappa', kappa, kappa_text)}</strong>"
        f"{_esc(kappa_note)}. They agree on {_esc(agreed)}: "
        f"{_esc(_of(agree, total, 'judged attempts'))}.</p>"
    )
    note = (
        f"Over every judged attempt ({total:,}): the refine loop's judge verdict against the "
        "oracle's (the case's assertions); positive = passed."
    )
    return _panel(title, _esc(note), matrix + summary, section_id="agreement")


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
        return _panel("Assertions", "", '<p class="empty">No assertions.</p>', section_id="asserts")
    counts = _assertion_counts(results)
    rows = []
    for kind, rates in per_assertion.items():
        rates = rates if isinstance(rates, Mapping) else {}
        base, final = rates.get("baseline_pass_rate"), rates.get("final_pass_rate")
        change = (
            final - base
            if isinstance(base, int | float) and isinstance(final, int | float)
            else None
        )
        tone = "pass" if change and change > 0 else "fail" if change and change < 0 else ""
        total = counts.get(kind) if counts is not None else None
        rows.append(
            f"<tr><td><code>{_esc(kind)}</code></td>"
            + (f'<td class="n">{_int(total)}</td>' if counts is not None else "")
            + _rate_cell(f"per_assertion.{kind}.baseline_pass_rate", base, total, "bar-base")
            + _rate_cell(f"per_assertion.{kind}.final_pass_rate", final, total, "bar-final")
            + f'<td class="n"><span class="chip {tone}">{_esc(_pts(change))}</span></td></tr>'
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
    return _panel(
        "Assertions",
        _esc(note),
        f'<table class="asserts">{head}{"".join(rows)}</table>',
        section_id="asserts",
    )


def _rate_cell(key: str, rate: object, total: int | None, bar: str) -> str:
    of = f'<span class="of">{_rate_count(rate, total):,} of {total:,}</span>' if total else ""
    return (
        f'<td class="n"><div class="rate">{_mini_bar(rate, bar)}{of}'
        f"{_number(key, rate, _pct(rate))}</div></td>"
    )


def _mini_bar(rate: object, cls: str) -> str:
    value = rate if isinstance(rate, int | float) and not isinstance(rate, bool) else 0.0
    w = 80 * min(max(value, 0.0), 1.0)
    return (
        '<svg width="80" height="10" viewBox="0 0 80 10" aria-hidden="true" class="mini">'
        f'<rect class="grid" x="0" y="2" width="80" height="6" rx="3" fill="none"/>'
        f'<rect class="{cls}" x="0" y="2" width="{w:.1f}" height="6" rx="3"/></svg>'
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


def _eval_cases(results: Sequence[Mapping[str, Any]]) -> str:
    statuses = [_eval_status(r) for r in results]
    counts = {s: statuses.count(s) for s in _EVAL_STATUS}
    toolbar = _status_toolbar(
        counts, {s: label for s, (label, _) in _EVAL_STATUS.items()}, len(results)
    )
    rows = [_eval_case(i, r, s) for i, (r, s) in enumerate(zip(results, statuses, strict=True))]
    return _panel(
        "Cases",
        "",
        toolbar + '<div id="cases">' + "".join(rows) + "</div>",
        section_id="case-list",
    )


def _eval_case(position: int, result: Mapping[str, Any], status: str) -> str:
    label, tone = _EVAL_STATUS[status]
    case_id = _esc(result.get("id", ""))
    attempts = [a for a in result.get("attempts") or [] if isinstance(a, Mapping)]
    chosen = result.get("chosen")
    returned = next((a for a in attempts if a.get("index") == chosen), None)
    flow = (
        f'<span class="flow">{_mark(result.get("passed_baseline"))} → '
        f"{_mark(result.get('passed_final'))}</span>"
    )
    count = len(attempts)
    summary = (
        f'<summary><span class="chip {tone}">{_esc(label)}</span>'
        f'<span class="cid" title="{case_id}">{case_id}</span>'
        f"{flow}"
        f'<span class="flow att muted">{count} attempt{"" if count == 1 else "s"}</span>'
        f"{_summary_snippet(result.get('error'), returned.get('answer') if returned else None)}"
        "</summary>"
    )
    parts = []
    if result.get("error"):
        parts.append(_field("error", _text_block(result.get("error"), cls="error")))
    if result.get("input") is not None:
        parts.append(_field("input", _input_block(result.get("input"))))
    if result.get("expected") is not None:
        parts.append(_field("expected", _text_block(result.get("expected"), cls="data")))
    types = result.get("assertion_types")
    names = [str(t) for t in types] if isinstance(types, list) else []
    for attempt in attempts:
        parts.append(_eval_attempt(attempt, names, chosen=attempt.get("index") == chosen))
    if not attempts and not result.get("error"):
        parts.append('<p class="empty">No attempts recorded.</p>')
    if result.get("metadata"):
        parts.append(_field("metadata", _text_block(result.get("metadata"), cls="data")))
    parts.append(_case_facts(result))
    return (
        f'<details class="case" id="case-{position}" data-status="{status}" '
        f'data-case-id="{_esc(result.get("id", ""))}">{summary}'
        f'<div class="body">{"".join(parts)}</div></details>'
    )


def _input_block(value: object) -> str:
    """The case's input: a prompt, or a list of role/content messages."""
    if isinstance(value, list) and all(isinstance(m, Mapping) for m in value):
        return "".join(
            f'<div class="msg"><span class="role">{_esc(m.get("role", "?"))}</span>'
            f"{_text_block(m.get('content'), cls='data')}</div>"
            for m in value
        )
    return _text_block(value, cls="data")


def _case_facts(result: Mapping[str, Any]) -> str:
    facts = []
    if result.get("outcome"):
        facts.append(f"outcome {result['outcome']}")
    if isinstance(result.get("latency_s"), int | float):
        facts.append(f"latency {_seconds(result['latency_s'])}")
    tokens = [
        f"{name} {_int(result[key])}"
        for key, name in (("model_tokens", "model"), ("judge_tokens", "judge"))
        if isinstance(result.get(key), int)
    ]
    if isinstance(result.get("grader_tokens"), int) and result["grader_tokens"]:
        tokens.append(f"grader {_int(result['grader_tokens'])}")
    if tokens:
        facts.append("tokens: " + ", ".join(tokens))
    return f'<p class="muted facts-case">{_esc(" · ".join(facts))}</p>' if facts else ""


def _assertion_name(index: object, types: list[str]) -> str:
    # "#1 word-count": the 0-based index in the case's `assert` list, and its type when known.
    if isinstance(index, int) and not isinstance(index, bool) and 0 <= index < len(types):
        return _esc(f"#{index} {types[index]}")
    return _esc(f"#{index}")


def _eval_attempt(attempt: Mapping[str, Any], types: list[str], *, chosen: bool) -> str:
    judge = attempt.get("judge_passed")
    judge_chip = (
        '<span class="chip pass">judge: pass</span>'
        if judge is True
        else '<span class="chip fail">judge: fail</span>'
        if judge is False
        else '<span class="chip">not judged</span>'
    )
    oracle = attempt.get("oracle_passed")
    word = "pass" if oracle else "fail"
    oracle_chip = f'<span class="chip {word}">oracle: {word}</span>'
    failed = attempt.get("failed_assertions") or []
    failed_text = (
        "failed assertions: " + ", ".join(_assertion_name(i, types) for i in failed)
        if failed
        else "no assertion failed"
    )
    escalated = attempt.get("escalated")
    # Criteria the first judge was unsure of and a stronger one decided (`Judge(escalate_to=)`).
    escalated_chip = (
        '<span class="chip info">escalated: '
        + _esc(", ".join(str(name) for name in escalated))
        + "</span>"
        if isinstance(escalated, list) and escalated
        else ""
    )
    head = (
        f'<div class="head"><strong>Attempt {_esc(attempt.get("index", "?"))}</strong>'
        + ('<span class="chip info">returned</span>' if chosen else "")
        + f"{judge_chip}{escalated_chip}{oracle_chip}"
        + f'<span class="muted">{failed_text}</span></div>'
    )
    body = _field("answer", _text_block(attempt.get("answer")))
    if attempt.get("feedback"):
        body += _field(
            "feedback to the next attempt", _text_block(attempt.get("feedback"), cls="feedback")
        )
    return f'<div class="attempt{" chosen" if chosen else ""}">{head}{body}</div>'


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
_RUN_SUMMARY_LABELS = {
    "model": "model",
    "resumed": "already done (resumed)",
    "bad_lines": "bad input lines",
    "wall_time_s": "wall time",
}


def render_run_html(
    rows: Sequence[Mapping[str, Any]],
    summary: Mapping[str, Any],
    *,
    title: str = "jevrefine run",
) -> str:
    """The report page of `jevrefine run --report`: one row per item, with no oracle columns.

    Args:
        rows: the run's output rows (`id`, `line`, `answer`, `passed`, `outcome`, `attempts`,
            `tokens`, `model_tokens`, `judge_tokens`, `error`; other keys are shown as they are).
        summary: facts about the run that the rows do not hold (`model`, `resumed`, `bad_lines`,
            `wall_time_s`; other keys are listed as they are).
        title: the page's title and heading.

    Returns:
        The page, self-contained (inline CSS, script and SVG; it loads nothing from the network).
    """
    statuses = [_run_status(row) for row in rows]
    histogram: dict[str, int] = {}
    for row in rows:
        attempts = row.get("attempts")
        if not row.get("error") and isinstance(attempts, int) and attempts > 0:
            histogram[str(attempts)] = histogram.get(str(attempts), 0) + 1
    counts = {s: statuses.count(s) for s in _RUN_STATUS}
    toolbar = _status_toolbar(
        counts, {s: label for s, (label, _) in _RUN_STATUS.items()}, len(rows)
    )
    items = "".join(
        _run_row(i, row, s) for i, (row, s) in enumerate(zip(rows, statuses, strict=True))
    )
    body = "\n".join(
        [
            _run_facts(summary),
            _run_cards(rows, statuses, histogram),
            '<div class="two">',
            _panel(
                "Attempts per item",
                _esc(
                    "How many answers the model gave, over the "
                    f"{sum(histogram.values()):,} items without an error."
                ),
                _histogram_svg(histogram, "attempts_histogram"),
                section_id="attempts",
            ),
            _outcomes_panel(rows),
            "</div>",
            _panel("Items", "", f'{toolbar}<div id="cases">{items}</div>', section_id="case-list"),
        ]
    )
    return _page(title, "run", body)


def _run_facts(summary: Mapping[str, Any]) -> str:
    """One line of what the rows do not say: where it ran, how long, what was skipped."""
    facts = []
    for key, value in summary.items():
        label = _RUN_SUMMARY_LABELS.get(key, str(key))
        if key == "wall_time_s":
            text = _seconds(value)
        elif isinstance(value, int) and not isinstance(value, bool):
            text = _int(value)
        else:
            text = str(value)
        facts.append(f"{_esc(label)}: <strong>{_number(f'summary.{key}', value, text)}</strong>")
    return f'<p class="facts" id="facts">{" · ".join(facts)}</p>' if facts else ""


def _run_cards(
    rows: Sequence[Mapping[str, Any]], statuses: list[str], histogram: Mapping[str, int]
) -> str:
    errors = statuses.count("error")
    judged = [row for row in rows if row.get("passed") is not None and not row.get("error")]
    passed = sum(1 for row in judged if row.get("passed") is True)
    rate = passed / len(judged) if judged else None
    totals = {k: sum(_tokens(row, k) for row in rows) for k in ("model_tokens", "judge_tokens")}
    cards = [
        _stat_card("Items", "items", len(rows), _int(len(rows)), "rows in the output", "accent"),
        _card(
            "Passed",
            _number("pass_rate", rate, _pct(rate)),
            _number("passed", passed, _int(passed)) + _esc(f" of {len(judged):,} judged items"),
            "pass" if judged else "",
        ),
        _stat_card(
            "Errors",
            "errors",
            errors,
            _int(errors),
            f"of {len(rows):,} items",
            "fail" if errors else "",
        ),
        _attempts_card(histogram, "item"),
        _tokens_card(totals, ("model", "judge")),
    ]
    return '<section class="cards five" id="summary">' + "".join(cards) + "</section>"


_OUTCOME_WORDS = {
    "passed": "passed the judge",
    "best_attempt": "failed every attempt; the best one returned",
    "failed": "failed every attempt",
    "unjudged": "not judged",
    "skipped": "judging skipped",
}


def _outcomes_panel(rows: Sequence[Mapping[str, Any]]) -> str:
    outcomes: dict[str, int] = {}
    for row in rows:
        outcome = "error" if row.get("error") else str(row.get("outcome") or "no judge")
        outcomes[outcome] = outcomes.get(outcome, 0) + 1
    total = len(rows)
    lines = []
    for outcome, count in sorted(outcomes.items(), key=lambda kv: -kv[1]):
        share = count / total if total else 0.0
        lines.append(
            f"<tr><td><code>{_esc(outcome)}</code></td>"
            f'<td class="muted">{_esc(_OUTCOME_WORDS.get(outcome, ""))}</td>'
            f'<td class="n"><div class="rate">{_mini_bar(share, "bar-final")}'
            f"{_number(f'outcomes.{outcome}', count, _int(count))}</div></td></tr>"
        )
    table = (
        '<table><tr><th>outcome</th><th></th><th class="n">items</th></tr>'
        + "".join(lines)
        + "</table>"
    )
    note = _esc(f"The refine outcome of each of the {total:,} items.")
    return _panel("Outcomes", note, table, section_id="outcomes")


def _tokens(row: Mapping[str, Any], key: str) -> int:
    value = row.get(key)
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _run_status(row: Mapping[str, Any]) -> str:
    if row.get("error"):
        return "error"
    passed = row.get("passed")
    return "passed" if passed is True else "failed" if passed is False else "unjudged"


def _run_row(position: int, row: Mapping[str, Any], status: str) -> str:
    label, tone = _RUN_STATUS[status]
    attempts = row.get("attempts")
    count = attempts if isinstance(attempts, int) else 0
    line = row.get("line")
    summary = (
        f'<summary><span class="chip {tone}">{_esc(label)}</span>'
        f'<span class="cid" title="{_esc(row.get("id", ""))}">{_esc(row.get("id", ""))}</span>'
        f'<span class="flow muted">{_esc(f"line {line}" if line is not None else "")}'
        f"{_esc(' · ' + str(row.get('outcome')) if row.get('outcome') else '')}</span>"
        f'<span class="flow att muted">{count} attempt{"" if count == 1 else "s"}</span>'
        f"{_summary_snippet(row.get('error'), row.get('answer'))}</summary>"
    )
    parts = []
    if row.get("error"):
        parts.append(_field("error", _text_block(row.get("error"), cls="error")))
    for key, value in row.items():
        if key not in _RUN_FIELDS:
            parts.append(_field(str(key), _text_block(value, cls="data")))
    if not row.get("error") or row.get("answer") is not None:
        parts.append(_field("answer", _text_block(row.get("answer"))))
    facts = (
        f"outcome {row.get('outcome') or '–'} · {count} attempt{'' if count == 1 else 's'} · "
        f"tokens {_int(row.get('tokens'))} (model {_int(row.get('model_tokens'))}, "
        f"judge {_int(row.get('judge_tokens'))})"
    )
    parts.append(f'<p class="muted">{_esc(facts)}</p>')
    return (
        f'<details class="case" id="case-{position}" data-status="{status}" '
        f'data-case-id="{_esc(row.get("id", ""))}">{summary}'
        f'<div class="body">{"".join(parts)}</div></details>'
    )
