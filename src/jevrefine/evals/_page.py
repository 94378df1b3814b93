"""The kit of the report pages: the shell, its style and script, escaping, the case list.

Every page (`jevrefine eval --report`, `jevrefine run --report`, `jevrefine compare --report`) is
one self-contained HTML file: its CSS, script and charts (SVG) are inline and a
Content-Security-Policy forbids every load, so it opens offline, and an answer that slipped past
the escaping could still fetch nothing nor run a script (only the page's own script, pinned by its
hash, may run). Every string from the data is hostile (answers are model output):

- in the summary it is HTML-escaped (`esc`);
- the case list is data, not markup: one JSON island (`<script type="application/json">`, which
  no browser runs) with every `<` written as a JSON escape, so no text can end it. The page's script
  parses it once and draws one page of rows at a time with `textContent`, never as HTML.

So the page stays small and quick however many cases it holds: the browser lays out one page of
rows (`PAGE_SIZE`), the search runs over a lowercase index built on the first search (and waits
for a pause in the typing), and each long text is cut (`CUT_CHARS`, `CUT_LINES`) with a note that
says where the whole text is. The page is written as a stream (`write_page`): no string of the
whole page, or of all its rows, is ever built.

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
from collections.abc import Iterable, Mapping
from typing import Any, TextIO, TypeGuard

from .._version import __version__

__all__ = [
    "CLIP_CHARS",
    "CLIP_LINES",
    "CUT_CHARS",
    "CUT_LINES",
    "ID_CHARS",
    "PAGE_SIZE",
    "SNIPPET_CHARS",
    "VALUE_CHARS",
    "as_list",
    "before_after_svg",
    "card",
    "case_id_text",
    "clean",
    "esc",
    "fact_text",
    "facts_panel",
    "histogram_items",
    "histogram_svg",
    "int_text",
    "interval",
    "is_real",
    "island_json",
    "lift_svg",
    "list_panel",
    "mappings",
    "mini_bar",
    "number",
    "of",
    "panel",
    "pct",
    "plural",
    "pts",
    "rate_count",
    "seconds",
    "short",
    "snippet_view",
    "stat_card",
    "status_toolbar",
    "text_view",
    "write_page",
]

PAGE_SIZE = 50
"""Rows drawn at once; the pager moves through the rest."""
CUT_CHARS = 5000
"""A text longer than this (or than `CUT_LINES` lines) is cut in the page, with a note saying
where the whole text is (the report's JSON file, the rows file): the page's size stays bounded."""
CUT_LINES = 200
CLIP_CHARS = 1500
"""Texts longer than this (or than `CLIP_LINES` lines) open clipped, with a "show all" toggle."""
CLIP_LINES = 16
SNIPPET_CHARS = 140
"""How much of the returned answer a case's one-line summary shows."""
ID_CHARS = 200
"""A case id longer than this is cut in the page (ids are data too)."""
VALUE_CHARS = 300
"""A setup value longer than this is cut in the page's header."""

_SURROGATE = re.compile("[\ud800-\udfff]")
_SPACES = re.compile(r"\s+")
_ISO_UTC = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ")

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
header.top h1{font-size:26px;margin:0;letter-spacing:-.01em;overflow-wrap:anywhere}
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
.setup{padding:14px 20px}
.setup dl{display:grid;grid-template-columns:repeat(auto-fill,minmax(170px,1fr));gap:8px 20px;
margin:0}
.setup dl>div{min-width:0}
.setup dt{font-size:11.5px;font-weight:600;text-transform:uppercase;letter-spacing:.06em;
color:var(--muted)}
.setup dd{margin:0;font-weight:600;overflow-wrap:anywhere;unicode-bidi:isolate}
.setup dl>div.wide{grid-column:span 2}
.setup .note{margin:8px 0 0;font-size:13px}
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
td.differs{background:var(--warn-bg)}
th.side{text-transform:none;letter-spacing:0;font-size:13px;color:var(--ink)}
.setups th:first-child{width:150px;white-space:nowrap}
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
.toolbar,.pager{display:flex;gap:8px;flex-wrap:wrap;align-items:center;margin:6px 0 12px}
.toolbar button,.pager button{font:inherit;font-size:13px;border:1px solid var(--line);
background:var(--panel);color:var(--ink);border-radius:999px;padding:3px 12px;cursor:pointer}
.toolbar button[aria-pressed=true]{background:var(--accent);border-color:var(--accent);color:#fff}
.pager button:disabled{opacity:.4;cursor:default}
.pager #page-info{font-size:13px;color:var(--muted);font-variant-numeric:tabular-nums}
.toolbar input{font:inherit;font-size:13px;padding:4px 10px;border:1px solid var(--line);
border-radius:8px;background:var(--panel);color:var(--ink);min-width:220px;margin-left:auto}
details.case{border:1px solid var(--line);border-radius:10px;margin-bottom:8px;
background:var(--panel)}
details.case>summary{display:grid;gap:12px;
grid-template-columns:96px minmax(70px,150px) 150px 110px minmax(0,1fr);align-items:center;
padding:8px 12px;cursor:pointer;list-style:none}
details.case>summary::-webkit-details-marker{display:none}
details.case>summary>.chip{justify-self:start}
details.case>summary:hover{background:var(--soft);border-radius:10px}
details.case[open]>summary{border-bottom:1px solid var(--line);border-radius:10px 10px 0 0}
.cid{font-weight:600;overflow:hidden;text-overflow:ellipsis;white-space:nowrap;unicode-bidi:isolate}
.flow{font-size:13px;white-space:nowrap;overflow:hidden;text-overflow:ellipsis}
.snippet{color:var(--muted);font-size:13.5px;overflow:hidden;text-overflow:ellipsis;white-space:nowrap;
unicode-bidi:isolate}
.snippet.err{color:var(--fail)}.snippet.empty{font-style:italic}
.body{padding:12px 14px 14px}
.attempt{border-left:3px solid var(--line);padding:4px 0 6px 12px;margin:10px 0}
.attempt.chosen{border-left-color:var(--accent)}
.attempt .head{display:flex;gap:8px;align-items:center;flex-wrap:wrap;margin-bottom:6px}
.pair{display:grid;grid-template-columns:minmax(0,1fr) minmax(0,1fr);gap:16px}
.pair h3{font-size:13.5px;margin:4px 0;color:var(--muted)}
.msg .role{font-size:12px;font-weight:600;color:var(--muted)}
.facts-case{font-size:13px;margin:8px 0 0}
.field{margin:6px 0}.field>.name{font-size:12px;font-weight:600;color:var(--muted);
text-transform:uppercase;letter-spacing:.05em}
pre{margin:4px 0 0;white-space:pre-wrap;overflow-wrap:anywhere;background:var(--soft);
border-radius:8px;padding:9px 11px;unicode-bidi:isolate;max-width:100%}
pre.feedback{background:var(--warn-bg)}pre.error{background:var(--fail-bg);color:var(--fail)}
.empty{font-style:italic;color:var(--muted)}
p.cut{margin:4px 0 0;font-size:12.5px;color:var(--warn);background:var(--warn-bg);border-radius:6px;
padding:3px 9px}
.clip pre{max-height:22em;overflow:hidden;
mask-image:linear-gradient(to bottom,#000 75%,transparent)}
.clip:has(>details[open]) pre{max-height:none;mask-image:none}
.clip>details>summary{cursor:pointer;color:var(--accent);font-size:13px;font-weight:600;
margin-top:4px}
.clip>details>summary::before{content:"show all "}
.clip>details[open]>summary::before{content:"show less of "}
footer{color:var(--muted);font-size:12.5px;margin-top:24px}
a{color:var(--accent)}
@media (max-width:820px){.headline,.two,.pair{grid-template-columns:1fr}
details.case>summary{grid-template-columns:80px 1fr;}.snippet,.flow.att{display:none}}
"""

# The rows' data is the JSON island; this script draws one page of it with textContent only.
_JS = """
(function () {
  "use strict";
  var island = document.getElementById("rows-data");
  var list = document.getElementById("cases");
  if (!island || !list) { return; }
  var data = JSON.parse(island.textContent);
  var rows = data.rows, statuses = data.statuses, size = data.page_size;
  var search = document.getElementById("case-search");
  var shown = document.getElementById("case-shown");
  var info = document.getElementById("page-info");
  var buttons = Array.prototype.slice.call(document.querySelectorAll("[data-filter]"));
  var filter = "all", matches = [], page = 0, index = null, timer = null;

  function el(tag, cls, text) {
    var node = document.createElement(tag);
    if (cls) { node.className = cls; }
    if (text !== undefined && text !== null) { node.textContent = String(text); }
    return node;
  }
  function count(n) { return n.toLocaleString("en-US"); }
  function chip(text, tone) { return el("span", tone ? "chip " + tone : "chip", text); }
  function mark(value) {
    return value === true ? chip("pass", "pass") : value === false ? chip("fail", "fail") :
      chip("\\u2013", "");
  }
  function textView(view) {
    // [class, text, clip label, cut note]: see text_view() in jevrefine/evals/_page.py.
    if (view[0] === "empty") { return el("div", "empty", view[1]); }
    var box = el("pre", view[0], view[1]);
    if (view[2]) {
      var clip = el("div", "clip");
      var more = el("details", "more");
      more.appendChild(el("summary", "", view[2]));
      clip.appendChild(box);
      clip.appendChild(more);
      box = clip;
    }
    if (!view[3]) { return box; }
    var whole = el("div", "text");
    whole.appendChild(box);
    whole.appendChild(el("p", "cut", view[3]));
    return whole;
  }
  function field(name, content) {
    var node = el("div", "field");
    node.appendChild(el("div", "name", name));
    node.appendChild(content);
    return node;
  }
  function block(item) {
    var kind = item[0], node, i;
    if (kind === "text") { return field(item[1], textView(item[2])); }
    if (kind === "msgs") {
      node = el("div", "msgs");
      for (i = 0; i < item[2].length; i++) {
        var msg = el("div", "msg");
        msg.appendChild(el("span", "role", item[2][i][0]));
        msg.appendChild(textView(item[2][i][1]));
        node.appendChild(msg);
      }
      return field(item[1], node);
    }
    if (kind === "attempt") {
      var a = item[1];
      node = el("div", a.returned ? "attempt chosen" : "attempt");
      var head = el("div", "head");
      head.appendChild(el("strong", "", a.title));
      for (i = 0; i < a.chips.length; i++) { head.appendChild(chip(a.chips[i][0], a.chips[i][1])); }
      head.appendChild(el("span", "muted", a.note));
      node.appendChild(head);
      for (i = 0; i < a.fields.length; i++) {
        node.appendChild(field(a.fields[i][0], textView(a.fields[i][1])));
      }
      return node;
    }
    if (kind === "pair") {
      node = el("div", "pair");
      for (i = 0; i < item[1].length; i++) {
        var side = el("div", "side");
        side.appendChild(el("h3", "", item[1][i][0]));
        var inner = item[1][i][1];
        for (var j = 0; j < inner.length; j++) { side.appendChild(block(inner[j])); }
        node.appendChild(side);
      }
      return node;
    }
    if (kind === "note") { return el("p", "muted facts-case", item[1]); }
    return el("p", "empty", item[1]);
  }
  function row(position) {
    var r = rows[position], status = statuses[r.s] || [r.s, ""];
    var node = el("details", "case");
    node.id = "case-" + position;
    node.dataset.status = r.s;
    node.dataset.caseId = r.i;
    var head = el("summary");
    head.appendChild(chip(status[0], status[1]));
    var cid = el("span", "cid", r.i);
    cid.title = r.i;
    head.appendChild(cid);
    var flow = el("span", "flow");
    if (Array.isArray(r.f)) {
      flow.appendChild(mark(r.f[0]));
      flow.appendChild(document.createTextNode(" \\u2192 "));
      flow.appendChild(mark(r.f[1]));
    } else {
      flow.className = "flow muted";
      flow.textContent = r.f;
    }
    head.appendChild(flow);
    head.appendChild(el("span", "flow att muted", r.n));
    head.appendChild(el("span", r.p[0], r.p[1]));
    node.appendChild(head);
    var body = el("div", "body");
    for (var i = 0; i < r.b.length; i++) { body.appendChild(block(r.b[i])); }
    node.appendChild(body);
    return node;
  }
  function collect(value, into) {
    if (typeof value === "string") { into.push(value); return; }
    if (Array.isArray(value)) {
      for (var i = 0; i < value.length; i++) { collect(value[i], into); }
    } else if (value && typeof value === "object") {
      for (var key in value) { collect(value[key], into); }
    }
  }
  function searchIndex() {
    // Built on the first search, not at load: opening the page costs no more than it must.
    if (index === null) {
      index = rows.map(function (r) {
        var parts = [r.i, r.p[1]];
        collect(r.b, parts);
        return parts.join("\\n").toLowerCase();
      });
    }
    return index;
  }
  function draw() {
    var pages = Math.max(1, Math.ceil(matches.length / size));
    page = Math.min(Math.max(page, 0), pages - 1);
    var start = page * size, end = Math.min(start + size, matches.length);
    var fragment = document.createDocumentFragment();
    for (var k = start; k < end; k++) { fragment.appendChild(row(matches[k])); }
    if (!matches.length) { fragment.appendChild(el("p", "empty", "No " + data.noun + " match.")); }
    list.replaceChildren(fragment);
    shown.textContent = count(matches.length);
    info.textContent = matches.length ?
      data.noun + " " + count(start + 1) + "\\u2013" + count(end) + " of " +
        count(matches.length) + " \\u00b7 page " + count(page + 1) + " of " + count(pages) :
      "page 1 of 1";
    document.getElementById("page-first").disabled = page === 0;
    document.getElementById("page-prev").disabled = page === 0;
    document.getElementById("page-next").disabled = page >= pages - 1;
    document.getElementById("page-last").disabled = page >= pages - 1;
  }
  function apply() {
    var text = search ? search.value.toLowerCase() : "";
    var haystack = text ? searchIndex() : null;
    matches = [];
    for (var i = 0; i < rows.length; i++) {
      if ((filter === "all" || rows[i].s === filter) &&
          (!text || haystack[i].indexOf(text) >= 0)) { matches.push(i); }
    }
    page = 0;
    draw();
  }
  function openAll(open) {
    var items = list.querySelectorAll("details.case");
    for (var i = 0; i < items.length; i++) { items[i].open = open; }
  }
  function jump(to) { page = to; draw(); list.scrollIntoView({block: "nearest"}); }
  buttons.forEach(function (button) {
    button.addEventListener("click", function () {
      filter = button.dataset.filter;
      buttons.forEach(function (other) {
        other.setAttribute("aria-pressed", String(other === button));
      });
      apply();
    });
  });
  if (search) {
    search.addEventListener("input", function () {
      // One filtering per pause in the typing, not one per keystroke.
      clearTimeout(timer);
      timer = setTimeout(apply, 150);
    });
  }
  document.getElementById("expand-all").onclick = function () { openAll(true); };
  document.getElementById("collapse-all").onclick = function () { openAll(false); };
  document.getElementById("page-first").onclick = function () { jump(0); };
  document.getElementById("page-prev").onclick = function () { jump(page - 1); };
  document.getElementById("page-next").onclick = function () { jump(page + 1); };
  document.getElementById("page-last").onclick = function () { jump(Infinity); };
  for (var i = 0; i < rows.length; i++) { matches.push(i); }
  // A link to one case (report.html#case-4123) opens it, on its page.
  var wanted = /^#case-(\\d+)$/.exec(location.hash);
  if (wanted && Number(wanted[1]) < rows.length) {
    page = Math.floor(Number(wanted[1]) / size);
    draw();
    var target = document.getElementById("case-" + wanted[1]);
    target.open = true;
    target.scrollIntoView();
  } else {
    draw();
  }
})();
"""


def _csp_hash(source: str) -> str:
    digest = hashlib.sha256(source.encode("utf-8")).digest()
    return "'sha256-" + base64.b64encode(digest).decode("ascii") + "'"


# Nothing may load (default-src 'none'); only this module's own style and script, by hash, apply.
# The JSON island is no script to the browser (its type is not JavaScript): it needs no hash.
_CSP = (
    f"default-src 'none'; style-src {_csp_hash(_CSS)}; script-src {_csp_hash(_JS)}; "
    "img-src data:; base-uri 'none'; form-action 'none'"
)


# --- escaping and number formatting -------------------------------------------------------------


def clean(text: str) -> str:
    """`text` with lone surrogates (no valid Unicode, unwritable as UTF-8) replaced by U+FFFD."""
    return _SURROGATE.sub("\ufffd", text)


def esc(value: object) -> str:
    """Text made safe for HTML text and attribute values (lone surrogates become U+FFFD)."""
    text = value if isinstance(value, str) else str(value)
    return html.escape(clean(text), quote=True)


def island_json(value: object) -> str:
    """`value` as JSON that is safe inside a `<script type="application/json">` element.

    Every `<` is written as the JSON escape of U+003C, so no string can hold `</script` (which would
    end the island) or `<!--` (which changes how the browser reads the rest); lone surrogates
    become U+FFFD, so the page is valid UTF-8.
    """
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)
    return clean(text).replace("<", "\\u003c")


def is_real(value: object) -> TypeGuard[int | float]:
    """Whether `value` is a finite number (not a bool) that a float can hold."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return False
    if isinstance(value, int):
        return abs(value) < 2**1000  # 10**400 (a hostile row's) has no float: no rate of it
    return math.isfinite(value)


def pct(rate: object) -> str:
    """0.775 -> '77.5%'; missing -> '–'."""
    if not is_real(rate):
        return "–"
    return f"{float(rate) * 100:.1f}".rstrip("0").rstrip(".") + "%"


def pts(diff: object) -> str:
    """A signed difference of two rates in percentage points: 0.325 -> '+32.5 pts'."""
    if not is_real(diff):
        return "–"
    value = float(diff)
    text = f"{abs(value) * 100:.1f}".rstrip("0").rstrip(".")
    sign = "±" if text == "0" else ("+" if value > 0 else "\u2212")
    return f"{sign}{text} pts"


def int_text(value: object) -> str:
    """An integer with thousands separators; '–' for anything else."""
    return f"{value:,}" if isinstance(value, int) and not isinstance(value, bool) else "–"


def seconds(value: object) -> str:
    """A duration: '1.25 s', '12.5 s'; '–' for anything that is no finite number."""
    if not is_real(value):
        return "–"
    number_ = float(value)
    return f"{number_:.2f} s" if number_ < 10 else f"{number_:,.1f} s"


def number(key: str, value: object, text: str) -> str:
    """A summary number: its display text, with the report key and JSON value for machines."""
    try:
        encoded = json.dumps(value, default=str)
    except (ValueError, RecursionError):  # a circular value: no JSON can say it
        encoded = "null"
    return f'<span class="num" data-key="{esc(key)}" data-value="{esc(encoded)}">{esc(text)}</span>'


def of(count: int, total: int, noun: str) -> str:
    """'3 of 40 cases'."""
    return f"{count:,} of {total:,} {noun}"


def rate_count(rate: object, total: int) -> int:
    """The numerator behind a rate: exact for rates that are count / total, as the reports' are."""
    if not is_real(rate) or total > 10**15:
        return 0
    return round(float(rate) * total)


def short(text: str, limit: int) -> str:
    """`text` cut to `limit` characters, with an ellipsis when cut."""
    return text if len(text) <= limit else text[:limit].rstrip() + "…"


# --- texts of the case list -----------------------------------------------------------------------


def _json_text(value: object) -> str:
    try:
        return json.dumps(value, ensure_ascii=False, indent=2, default=str)
    except (ValueError, RecursionError):
        return "(a value too deeply nested, or circular, to show)"


def _cut_at(text: str) -> int:
    """Where `text` is cut in the page: at `CUT_CHARS`, or at its `CUT_LINES`-th line break."""
    end = min(len(text), CUT_CHARS)
    position = -1
    for _ in range(CUT_LINES):
        position = text.find("\n", position + 1, end)
        if position < 0:
            return end
    return position


def text_view(text: object, cls: str = "answer", *, whole_in: str = "") -> list[str]:
    """A hostile text as the page's script draws it: `[class, text, clip label, cut note]`.

    A text of more than `CLIP_CHARS` characters or `CLIP_LINES` lines opens clipped, with a "show
    all" toggle (the label says how long it is); one of more than `CUT_CHARS` characters or
    `CUT_LINES` lines is cut, and its note says how much the page shows and where the whole text
    is (`whole_in`). `None` and `""` are drawn as "(none)" and "(empty)".
    """
    if text is None:
        return ["empty", "(none)"]
    value = text if isinstance(text, str) else _json_text(text)
    if value == "":
        return ["empty", "(empty)"]
    end = _cut_at(value)
    shown = value[:end]
    lines = shown.count("\n") + 1
    clip = ""
    if len(shown) > CLIP_CHARS or lines > CLIP_LINES:
        clip = f"{len(shown):,} characters" + (f", {lines:,} lines" if lines > 1 else "")
    note = ""
    if end < len(value):
        total_lines = value.count("\n") + 1
        in_all = f"{len(value):,} characters" + (
            f", {total_lines:,} lines" if total_lines > 1 else ""
        )
        note = f"Cut: the page shows the first {end:,} of {in_all}. {whole_in}".rstrip()
    return [cls, clean(shown), clip, note]


def snippet_view(error: object, answer: object) -> list[str]:
    """The one-line summary of a row: `[class, text]` (the error, else the answer, shortened)."""
    if error:
        return ["snippet err", _flat(str(error))]
    if answer == "":
        return ["snippet empty", "(empty answer)"]
    if not isinstance(answer, str):
        return ["snippet", ""]
    return ["snippet", _flat(answer)]


def _flat(text: str) -> str:
    # Only the start is shown: flatten a bounded prefix, not a text of many megabytes.
    head = _SPACES.sub(" ", text[: SNIPPET_CHARS * 4]).strip()
    return clean(short(head, SNIPPET_CHARS))


def case_id_text(value: object) -> str:
    """A case id as the page shows it (ids are data: cut at `ID_CHARS`)."""
    return clean(short(value if isinstance(value, str) else str(value), ID_CHARS))


# --- the page shell and shared pieces -----------------------------------------------------------


def write_page(
    out: TextIO,
    *,
    title: str,
    kind: str,
    body: Iterable[str],
    rows: Iterable[Mapping[str, Any]] = (),
    statuses: Mapping[str, tuple[str, str]] | None = None,
    noun: str = "cases",
) -> None:
    """Write one page to `out` as a stream: the shell, `body`'s pieces, the rows' JSON island.

    Args:
        out: where the page goes (a text file opened for UTF-8, or a `StringIO`).
        title: the page's title and heading.
        kind: the small label beside the heading ("eval", "run", "compare").
        body: the summary's HTML pieces, in order (already escaped).
        rows: the case list's rows, in the shape the page's script draws (see `_eval_row` in
            `_html.py`); consumed one at a time.
        statuses: each row status's label and tone (chip colour); `None` for a page without rows.
        noun: what a row is, plural ("cases", "items"), for the pager.
    """
    out.write(
        "<!DOCTYPE html>\n"
        '<html lang="en"><head><meta charset="utf-8">'
        f'<meta http-equiv="Content-Security-Policy" content="{_CSP}">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        '<meta name="referrer" content="no-referrer">'
        f"<title>{esc(title)}</title><style>{_CSS}</style></head>\n"
        f'<body><main><header class="top"><h1 id="title">{esc(title)}</h1>'
        f'<span class="kind">{esc(kind)}</span></header>\n'
    )
    for piece in body:
        out.write(piece)
        out.write("\n")
    if statuses is not None:
        _write_island(out, rows, statuses, noun)
    out.write(
        f"<footer>Written by jevrefine {esc(__version__)}. This page is self-contained: it loads "
        "nothing from the network.</footer></main>"
        f"<script>{_JS}</script></body></html>\n"
    )


def _write_island(
    out: TextIO,
    rows: Iterable[Mapping[str, Any]],
    statuses: Mapping[str, tuple[str, str]],
    noun: str,
) -> None:
    head = {"page_size": PAGE_SIZE, "noun": noun, "statuses": dict(statuses)}
    out.write('<script type="application/json" id="rows-data">')
    out.write(island_json(head)[:-1] + ',"rows":[')
    for position, row in enumerate(rows):
        if position:
            out.write(",")
        out.write(island_json(row))
    out.write("]}</script>\n")


def card(label: str, big: str, sub: str = "", tone: str = "") -> str:
    """A summary card; `big` and `sub` are HTML (escape what they hold)."""
    return (
        f'<div class="card {tone}"><div class="label">{esc(label)}</div>'
        f'<div class="big">{big}</div><div class="sub">{sub}</div></div>'
    )


def stat_card(label: str, key: str, value: object, text: str, note: str, tone: str = "") -> str:
    """A card whose big number is one report value (`text` shown, `key`/`value` for machines).

    `note` is plain text and escaped here, so no card's note can carry markup by mistake.
    """
    return card(label, number(key, value, text), esc(note), tone)


def panel(title: str, note: str, content: str, *, section_id: str) -> str:
    """A titled section; `note` and `content` are HTML."""
    note_html = f'<p class="note">{note}</p>' if note else ""
    return (
        f'<section class="panel" id="{section_id}"><h2>{esc(title)}</h2>{note_html}'
        f"{content}</section>"
    )


def facts_panel(
    facts: Mapping[str, Any] | None,
    *,
    labels: Mapping[str, str],
    key_prefix: str,
    section_id: str,
    missing: str = "",
) -> str:
    """What a page is about: one labelled value per fact, each with its `data-key`.

    The facts: the model, the case file, the settings, the date and the versions (`data-key` is
    `key_prefix` + the fact's key).

    The facts come in `labels`' order, then any others; `None` reads "default" (a setting left
    to the provider). Without facts, `missing` says so.
    """
    if not facts:
        if not missing:
            return ""
        return (
            f'<section class="panel setup" id="{section_id}">'
            f'<p class="note">{esc(missing)}</p></section>'
        )
    order = [key for key in labels if key in facts] + [key for key in facts if key not in labels]
    items = []
    for key in order:
        value = facts[key]
        label = labels.get(key, str(key))
        text = fact_text(key, value)
        # A long value (a model's description, a path) takes two columns rather than wrapping.
        wide = ' class="wide"' if len(text) > 18 else ""
        items.append(
            f"<div{wide}><dt>{esc(short(str(label), 60))}</dt>"
            f"<dd>{number(f'{key_prefix}.{key}', _fact_value(value), text)}</dd></div>"
        )
    return f'<section class="panel setup" id="{section_id}"><dl>{"".join(items)}</dl></section>'


def _fact_value(value: object) -> object:
    # What data-value holds: the value itself, unless it is long (then its shown, cut form).
    if isinstance(value, str):
        return short(value, VALUE_CHARS)
    if value is None or isinstance(value, bool | int | float):
        return value
    return short(_json_text(value), VALUE_CHARS)


def fact_text(key: str, value: object) -> str:
    """A setup value as a header shows it: None reads "default", dates read as UTC."""
    if value is None:
        return "default"
    if key == "date" and isinstance(value, str) and _ISO_UTC.fullmatch(value):
        return value.replace("T", " ")[:-1] + " UTC"  # `YYYY-MM-DDTHH:MM:SSZ`, as people read it
    if isinstance(value, bool):
        return "yes" if value else "no"
    if key.endswith("_s") and is_real(value):
        return seconds(value)
    if isinstance(value, int):
        return int_text(value)
    if isinstance(value, str):
        return short(value, VALUE_CHARS)
    return short(_json_text(value) if not isinstance(value, float) else str(value), VALUE_CHARS)


def mini_bar(rate: object, cls: str) -> str:
    """A small horizontal bar of a rate in [0, 1]."""
    value = float(rate) if is_real(rate) else 0.0
    w = 80 * min(max(value, 0.0), 1.0)
    return (
        '<svg width="80" height="10" viewBox="0 0 80 10" aria-hidden="true" class="mini">'
        f'<rect class="grid" x="0" y="2" width="80" height="6" rx="3" fill="none"/>'
        f'<rect class="{cls}" x="0" y="2" width="{w:.1f}" height="6" rx="3"/></svg>'
    )


def interval(value: object) -> tuple[float | None, float | None]:
    """A `[lo, hi]` pair of finite numbers from the data, else `(None, None)`."""
    if isinstance(value, list | tuple) and len(value) == 2:
        lo, hi = value
        if all(is_real(v) for v in (lo, hi)):
            return float(lo), float(hi)
    return None, None


def before_after_svg(
    base: object, final: object, labels: tuple[str, str] = ("attempt 1", "returned")
) -> str:
    """Two horizontal bars of rates in [0, 1]: before (grey) and after (the accent colour)."""
    width, left, right = 560, 120, 60
    span = width - left - right
    rows = [(labels[0], base, "bar-base"), (labels[1], final, "bar-final")]
    parts = [f'<svg viewBox="0 0 {width} 104" role="img" aria-label="pass rate before and after">']
    for tick in (0, 25, 50, 75, 100):
        x = left + span * tick / 100
        parts.append(f'<line class="grid" x1="{x:.1f}" x2="{x:.1f}" y1="4" y2="80"/>')
        parts.append(f'<text x="{x:.1f}" y="96" text-anchor="middle">{tick}%</text>')
    for row, (label, rate, cls) in enumerate(rows):
        y = 10 + row * 36
        value = float(rate) if is_real(rate) else 0.0
        w = max(span * min(max(value, 0.0), 1.0), 1.5)
        parts.append(f'<text x="{left - 10}" y="{y + 17}" text-anchor="end">{esc(label)}</text>')
        parts.append(f'<rect class="{cls}" x="{left}" y="{y}" width="{w:.1f}" height="26" rx="4"/>')
        parts.append(
            f'<text class="val" x="{left + w + 6:.1f}" y="{y + 17}">{esc(pct(rate))}</text>'
        )
    parts.append("</svg>")
    return "".join(parts)


def lift_svg(lift: object, lo: float | None, hi: float | None, label: str = "lift (95% CI)") -> str:
    """The lift as a point on a scale around zero, with its paired 95 % interval as a line."""
    if not is_real(lift):
        return ""
    # Rates differ by at most 1: a value beyond is a hostile file's, drawn at the edge.
    lift, lo, hi = (None if v is None else max(-1.0, min(1.0, float(v))) for v in (lift, lo, hi))
    assert lift is not None
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
        parts.append(f'<text x="{x:.1f}" y="64" text-anchor="middle">{esc(pts(tick))}</text>')
    parts.append(f'<text x="{left - 10}" y="31" text-anchor="end">{esc(label)}</text>')
    if lo is not None and hi is not None:
        x1, x2 = x_of(lo), x_of(hi)
        parts.append(f'<line class="ci" x1="{x1:.1f}" x2="{x2:.1f}" y1="26" y2="26"/>')
        for x in (x1, x2):
            parts.append(f'<line class="ci" x1="{x:.1f}" x2="{x:.1f}" y1="19" y2="33"/>')
    parts.append(f'<circle class="dot" cx="{x_of(lift):.1f}" cy="26" r="6"/>')
    parts.append("</svg>")
    return "".join(parts)


def histogram_items(histogram: Mapping[Any, Any]) -> list[tuple[int, int]]:
    """(attempts, count) pairs of a histogram, in order.

    Keys or counts that are no sane non-negative integers (a hostile file's) are left out.
    """
    items = []
    for key, value in histogram.items():
        text = str(key)
        if text.isdigit() and len(text) <= 6 and isinstance(value, int) and 0 <= value < 10**15:
            items.append((int(text), value))
    return sorted(items)


def histogram_svg(histogram: Mapping[Any, Any], key_prefix: str) -> str:
    """Vertical bars, one per attempt count, with each bar's count and share."""
    items = histogram_items(histogram)[:100]
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
            f'rx="4" data-key="{esc(key_prefix)}.{attempts}" data-value="{count}"/>'
        )
        middle = x + bar / 2
        parts.append(
            f'<text class="val" x="{middle:.1f}" y="{y - 6:.1f}" text-anchor="middle">{count}'
            f" · {pct(count / total)}</text>"
        )
        label = "1 attempt" if attempts == 1 else f"{attempts} attempts"
        parts.append(
            f'<text x="{middle:.1f}" y="{height - bottom + 18}" text-anchor="middle">{label}</text>'
        )
    parts.append("</svg>")
    return "".join(parts)


def status_toolbar(
    counts: Mapping[str, int], labels: Mapping[str, str], total: int, *, noun: str = "cases"
) -> str:
    """The case list's controls: a filter per status present, expand/collapse, search, pager."""
    buttons = [
        f'<button type="button" data-filter="all" aria-pressed="true">All {total:,}</button>'
    ]
    for status, label in labels.items():
        if counts.get(status):
            buttons.append(
                f'<button type="button" data-filter="{esc(status)}" aria-pressed="false">'
                f"{esc(label)} {counts[status]:,}</button>"
            )
    buttons.append('<button type="button" id="expand-all">Expand all</button>')
    buttons.append('<button type="button" id="collapse-all">Collapse all</button>')
    pager = (
        '<nav class="pager" aria-label="pages">'
        '<button type="button" id="page-first" aria-label="first page">«</button>'
        '<button type="button" id="page-prev" aria-label="previous page">‹ previous</button>'
        '<span id="page-info"></span>'
        '<button type="button" id="page-next" aria-label="next page">next ›</button>'
        '<button type="button" id="page-last" aria-label="last page">»</button></nav>'
    )
    return (
        '<div class="toolbar">'
        + "".join(buttons)
        + f'<input id="case-search" type="search" placeholder="Search ids, answers, feedback"'
        f' aria-label="search the {esc(noun)}"></div>'
        f'<p class="note">Showing <span id="case-shown">{total:,}</span> of {total:,} {esc(noun)}, '
        f"{PAGE_SIZE} a page. Click a row to open it.</p>{pager}"
    )


def list_panel(title: str, toolbar: str, note: str = "") -> str:
    """The case list's section: its controls and the (empty) list the script fills."""
    return panel(title, note, f'{toolbar}<div id="cases"></div>', section_id="case-list")


def as_list(value: object) -> list[Any]:
    """`value` when it is a list, else `[]` (rows are data: a field can hold anything)."""
    return value if isinstance(value, list) else []


def mappings(value: object) -> list[Mapping[str, Any]]:
    """The mappings of a list (attempts, messages), anything else left out."""
    return [item for item in as_list(value) if isinstance(item, Mapping)]


def plural(count: int, noun: str) -> str:
    """'1 attempt', '3 attempts'."""
    return f"{count:,} {noun}" + ("" if count == 1 else "s")
