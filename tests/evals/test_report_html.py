"""The HTML report pages, in a real headless Chromium (Debian's package) loaded from disk.

Each page is opened as `file://` with every request and every Content-Security-Policy violation
recorded: the tests check that the summary numbers in the DOM equal the JSON, that a case opens to
its attempts, that hostile strings stay text, and that nothing is fetched; and, for a page of
10,000 cases, that the DOM holds one page of rows, the pager and the search reach every case, and a
long answer is cut with a note. (How fast such a page opens is measured, not asserted:
benchmarks/bench_report_page.py.) The screenshot is kept
in the test's tmp dir and, when `JEVREFINE_ARTIFACTS` names a folder, copied there.

Chromium: `JEVREFINE_CHROMIUM`, else `chromium` on the PATH (`.ci/run` installs Debian's package).
Without it the browser tests skip, except under `CI=true`, where they fail.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import struct
from collections.abc import Iterator
from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from evals.report_fixture import (
    HOSTILE_IMG,
    HOSTILE_SCRIPT,
    HUGE_ANSWER,
    make_report,
    page_island,
    page_rows,
    row_texts,
)
from jevrefine.evals import EvalReport, _html, _page
from jevrefine.evals._compare import compare_reports, load_report
from jevrefine.evals._compare_html import render_compare_html
from jevrefine.evals._html import render_eval_html, render_run_html
from jevrefine.evals._page import CUT_CHARS, PAGE_SIZE
from jevrefine.evals._setup import report_setup

CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
# Collects what the page tried to load or run against its policy, from the first script on.
RECORD_VIOLATIONS = (
    "window.__violations = [];"
    "document.addEventListener('securitypolicyviolation', e =>"
    " window.__violations.push(e.violatedDirective + ' ' + e.blockedURI));"
)


# A real browser: a second or two per page on a shared machine.
browser_test = pytest.mark.slow


def _in_ci() -> bool:
    return os.environ.get("CI", "").lower() in ("1", "true", "yes")


def _unavailable(reason: str) -> None:
    if _in_ci():
        pytest.fail(f"CI must run the browser tests: {reason}")
    pytest.skip(reason)


def _chromium() -> str | None:
    found = os.environ.get("JEVREFINE_CHROMIUM") or shutil.which("chromium")
    return found if found and os.access(found, os.X_OK) else None


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        _unavailable("the playwright package is not installed (pip install 'jevrefine[dev]')")
    executable = _chromium()
    if executable is None:
        _unavailable("no chromium (apt-get install chromium, or set JEVREFINE_CHROMIUM)")
    driver = sync_playwright().start()
    try:
        # Playwright gives each launch a new, empty profile directory (the --user-data-dir).
        chromium = driver.chromium.launch(executable_path=executable, args=CHROMIUM_ARGS)
        try:
            yield chromium
        finally:
            chromium.close()
    finally:
        driver.stop()


@dataclass
class Opened:
    page: Any
    url: str
    requests: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    def violations(self) -> list[str]:
        return list(self.page.evaluate("window.__violations"))

    def assert_offline(self) -> None:
        """Only the page itself was requested, no policy was broken, and no script failed."""
        assert self.requests == [self.url.split("#")[0]]
        assert self.violations() == []
        assert self.errors == []


@pytest.fixture
def open_page(browser: Any, tmp_path: Path) -> Iterator[Any]:
    contexts: list[Any] = []

    def opener(
        page_html: str, *, name: str = "report.html", dark: bool = False, fragment: str = ""
    ) -> Opened:
        path = tmp_path / name
        path.write_text(page_html, encoding="utf-8")
        context = browser.new_context(
            viewport={"width": 1280, "height": 900}, color_scheme="dark" if dark else "light"
        )
        contexts.append(context)
        context.add_init_script(RECORD_VIOLATIONS)
        page = context.new_page()
        opened = Opened(page, path.as_uri() + fragment)
        # Every request is recorded; any that would leave the file is refused, not sent.
        page.on("request", lambda request: opened.requests.append(request.url.split("#")[0]))
        page.on("pageerror", lambda error: opened.errors.append(str(error)))
        context.route(
            "**/*",
            lambda route: (
                route.continue_() if route.request.url.startswith("file://") else route.abort()
            ),
        )
        page.goto(opened.url)
        return opened

    yield opener
    for context in contexts:
        context.close()


def _lookup(data: Any, key: str) -> Any:
    """`data` at a dotted key: `lift_ci95.0`, `per_assertion.not-contains.final_pass_rate`."""
    if key in data:
        return data[key]
    head, _, rest = key.partition(".")
    value = data[int(head)] if isinstance(data, list) else data[head]
    return _lookup(value, rest) if rest else value


def _numbers(page: Any) -> dict[str, Any]:
    pairs = page.eval_on_selector_all(
        "[data-key]", "els => els.map(e => [e.dataset.key, e.dataset.value])"
    )
    return {key: json.loads(value) for key, value in pairs}


def _percent(rate: float) -> str:
    return f"{rate * 100:.1f}".rstrip("0").rstrip(".") + "%"


def _png_size(path: Path) -> tuple[int, int]:
    header = path.read_bytes()[:24]
    assert header[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = struct.unpack(">II", header[16:24])
    return width, height


def _keep(path: Path) -> None:
    folder = os.environ.get("JEVREFINE_ARTIFACTS")
    if folder:
        Path(folder).mkdir(parents=True, exist_ok=True)
        shutil.copy(path, Path(folder) / path.name)


SUMMARY_KEYS = {
    "cases", "errors", "baseline_pass_rate", "final_pass_rate", "lift", "lift_ci95.0",
    "lift_ci95.1", "improved", "degraded", "error_introduction_rate", "model_tokens",
    "judge_tokens", "grader_tokens", "latency_s.p50", "latency_s.p95", "judge_agreement.tp",
    "judge_agreement.fp", "judge_agreement.fn", "judge_agreement.tn", "judge_agreement.kappa",
}  # fmt: skip


SETUP = report_setup(
    model="local qwen2.5-coder-0.5b on llama.cpp", cases_file="examples/evals/cases.jsonl",
    judge="asserts", max_attempts=3, temperature=None, max_tokens=160, concurrency=1,
)  # fmt: skip


def _ids_shown(page: Any) -> list[str]:
    return list(page.eval_on_selector_all("details.case", "els => els.map(e => e.dataset.caseId)"))


def _wait_shown(page: Any, count: int) -> None:
    # The search waits for a pause in the typing: wait for its result, not for a time.
    page.wait_for_function(
        "n => document.getElementById('case-shown').textContent === n.toLocaleString('en-US')",
        arg=count,
        timeout=20_000,
    )


# --- the eval page ------------------------------------------------------------------------------


@browser_test
def test_summary_numbers_in_the_dom_equal_the_json(open_page: Any) -> None:
    data = make_report()
    opened = open_page(render_eval_html(data))
    page = opened.page
    numbers = _numbers(page)
    expected_keys = SUMMARY_KEYS | {f"attempts_histogram.{k}" for k in data["attempts_histogram"]}
    expected_keys |= {
        f"per_assertion.{kind}.{rate}"
        for kind in data["per_assertion"]
        for rate in ("baseline_pass_rate", "final_pass_rate")
    }
    assert set(numbers) == expected_keys
    for key, value in numbers.items():
        assert value == _lookup(data, key), key
    # What a person reads agrees too: the rates as shown, with their denominators.
    scored = [r for r in data["results"] if r["error"] is None]
    base = sum(r["passed_baseline"] for r in scored)
    final = sum(r["passed_final"] for r in scored)
    shown = page.inner_text('[data-key="final_pass_rate"]')
    assert shown == _percent(data["final_pass_rate"])
    summary = page.inner_text("#summary")
    assert f"{base} of {len(scored)} cases pass at attempt 1" in summary
    assert f"{final} of {len(scored)} cases pass as returned" in summary
    assert f"of {base} cases that passed at attempt 1" in summary
    assert f"of {len(scored) - base} cases that failed at attempt 1" in summary
    for kind, rates in data["per_assertion"].items():
        total = sum(r["assertion_types"].count(kind) for r in scored)
        for rate in ("baseline_pass_rate", "final_pass_rate"):
            cell = page.locator(f'[data-key="per_assertion.{kind}.{rate}"]').locator("..")
            assert f"{round(rates[rate] * total)} of {total}" in cell.inner_text()
    judged = sum(data["judge_agreement"][k] for k in ("tp", "fp", "fn", "tn"))
    assert f"of {judged} judged attempts" in page.inner_text("#agreement")
    headline = page.inner_text("#headline")
    assert f"{_percent(data['baseline_pass_rate'])}→{_percent(data['final_pass_rate'])}" in (
        headline.replace(" ", "").replace("\n", "")
    )
    assert "3 errored cases are left out" in headline
    # A report without its setup says so where the header would be.
    assert "No setup recorded" in page.inner_text("#setup")
    opened.assert_offline()


@browser_test
def test_the_header_says_what_made_the_report(open_page: Any) -> None:
    data = {**make_report(), "setup": SETUP}
    opened = open_page(render_eval_html(data))
    page = opened.page
    setup = {k.partition(".")[2]: v for k, v in _numbers(page).items() if k.startswith("setup.")}
    assert setup == SETUP
    header = page.locator("#setup")
    for label, text in [
        ("model", "local qwen2.5-coder-0.5b on llama.cpp"),
        ("case file", "examples/evals/cases.jsonl"),
        ("loop judge", "asserts"),
        ("max attempts", "3"),
        ("temperature", "default"),
        ("max tokens", "160"),
        ("concurrency", "1"),
        ("jevrefine", SETUP["jevrefine"]),
        ("Python", SETUP["python"]),
    ]:
        item = header.locator("dl > div").filter(has=page.locator("dt", has_text=label)).first
        assert item.locator("dd").inner_text() == text, label
    written = SETUP["date"].replace("T", " ")[:-1] + " UTC"
    assert written in header.inner_text()
    assert page.title() == "jevrefine eval: cases.jsonl"  # two saved pages tell apart by name
    opened.assert_offline()


@browser_test
def test_expanding_a_case_shows_its_attempts(open_page: Any) -> None:
    data = make_report()
    position, result = next(
        (i, r) for i, r in enumerate(data["results"]) if len(r["attempts"]) == 3
    )
    opened = open_page(render_eval_html(data))
    page = opened.page
    case = page.locator(f"#case-{position}")
    attempts = case.locator(".attempt")
    assert attempts.count() == 3
    assert not attempts.first.is_visible()
    case.locator(":scope > summary").click()
    assert case.evaluate("e => e.open")
    for index, attempt in enumerate(result["attempts"]):
        shown = attempts.nth(index)
        assert shown.is_visible()
        assert shown.locator("pre.answer").text_content() == attempt["answer"]
        head = shown.locator(".head").inner_text()
        assert f"Attempt {attempt['index']}" in head
        assert ("judge: pass" if attempt["judge_passed"] else "judge: fail") in head
        assert ("oracle: pass" if attempt["oracle_passed"] else "oracle: fail") in head
        for failed in attempt["failed_assertions"]:
            assert f"#{failed} {result['assertion_types'][failed]}" in head
        feedback = shown.locator("pre.feedback")
        if attempt["feedback"] is None:
            assert feedback.count() == 0
        else:
            assert feedback.text_content() == attempt["feedback"]
    assert case.locator(".field", has_text="input").first.inner_text().endswith(result["input"])
    assert "returned" in attempts.nth(2).locator(".head").inner_text()
    assert "returned" not in attempts.nth(0).locator(".head").inner_text()
    opened.assert_offline()


@browser_test
def test_hostile_strings_stay_text(open_page: Any) -> None:
    data = make_report()
    opened = open_page(render_eval_html(data, title='<script>window.__pwned = 4</script>"'))
    page = opened.page
    page.click("#expand-all")
    assert page.evaluate("typeof window.__pwned") == "undefined"
    scripts = page.eval_on_selector_all("script", "els => els.map(e => e.type)")
    assert sorted(scripts) == ["", "application/json"]  # the page's own, and its data
    assert page.eval_on_selector_all("img", "els => els.length") == 0
    answers = page.eval_on_selector_all("pre.answer", "els => els.map(e => e.textContent)")
    hostile = next(a for a in answers if HOSTILE_SCRIPT in a)
    assert HOSTILE_IMG in hostile
    assert "\"quoted\" & 'single' <b>bold</b>" in hostile
    assert any("東京 ☃ 🧪 café" in a and "\u202e" in a for a in answers)
    assert _ids_shown(page) == [r["id"] for r in data["results"]]
    errors = page.eval_on_selector_all("pre.error", "els => els.map(e => e.textContent)")
    assert any("<html><script>alert(1)</script>" in e for e in errors)
    assert page.title() == '<script>window.__pwned = 4</script>"'
    opened.assert_offline()


@browser_test
def test_a_huge_answer_is_cut_with_a_note(open_page: Any) -> None:
    data = make_report()
    position = next(
        i
        for i, r in enumerate(data["results"])
        if any(a["answer"] == HUGE_ANSWER for a in r["attempts"])
    )
    opened = open_page(render_eval_html(data))
    page = opened.page
    case = page.locator(f"#case-{position}")
    case.locator(":scope > summary").click()
    answer = case.locator("pre.answer").filter(has_text="Line 3:").last
    shown = answer.text_content()
    assert shown == HUGE_ANSWER[:CUT_CHARS]  # the page holds the start of it, not all 4,000 lines
    note = case.locator("p.cut").inner_text()
    assert note == (
        f"Cut: the page shows the first {CUT_CHARS:,} of {len(HUGE_ANSWER):,} characters, "
        "4,001 lines. The whole text is in the report's JSON file (--json) and the rows file "
        "(--out)."
    )
    # What the page holds opens clipped, with a toggle.
    height = "e => [e.clientHeight, e.scrollHeight]"
    visible, whole = answer.evaluate(height)
    assert visible < 600 < whole
    toggle = case.locator(".clip > details.more > summary").last
    before = "e => getComputedStyle(e, '::before').content + e.textContent"
    lines = shown.count("\n") + 1
    assert toggle.evaluate(before) == f'"show all "{CUT_CHARS:,} characters, {lines:,} lines'
    toggle.click()
    visible, whole = answer.evaluate(height)
    assert visible == whole
    assert toggle.evaluate(before).startswith('"show less of "')
    opened.assert_offline()


@browser_test
def test_filters_and_search_pick_cases(open_page: Any) -> None:
    data = make_report()
    opened = open_page(render_eval_html(data))
    page = opened.page
    page.click('[data-filter="degraded"]')
    degraded = [r["id"] for r in data["results"] if r["passed_baseline"] and not r["passed_final"]]
    assert len(degraded) == data["degraded"]
    assert _ids_shown(page) == degraded
    assert page.inner_text("#case-shown") == str(len(degraded))
    page.click('[data-filter="error"]')
    assert len(_ids_shown(page)) == data["errors"]
    page.click('[data-filter="all"]')
    cities = [r["id"] for r in data["results"] if r["id"].startswith("json-city")]
    page.fill("#case-search", "JSON-CITY")
    _wait_shown(page, len(cities))
    assert _ids_shown(page) == cities
    page.fill("#case-search", "no case says this")
    _wait_shown(page, 0)
    assert _ids_shown(page) == []
    assert "No cases match" in page.inner_text("#cases")
    opened.assert_offline()


@browser_test
def test_ten_thousand_cases_one_page_in_the_dom(open_page: Any, tmp_path: Path) -> None:
    data = make_report(n_cases=10_000)
    results = data["results"]
    results[2]["attempts"][-1]["answer"] = HUGE_ANSWER  # near the top, for the picture
    opened = open_page(render_eval_html(data), name="big.html")
    page = opened.page
    # The DOM holds one page of rows, not 10,000.
    assert _ids_shown(page) == [r["id"] for r in results[:PAGE_SIZE]]
    pages = -(-len(results) // PAGE_SIZE)
    assert page.inner_text("#page-info") == f"cases 1–{PAGE_SIZE} of 10,000 · page 1 of {pages}"
    # The guide's picture of the case list: the pager, and the case with the huge answer open.
    page.locator("#case-2 > summary").click()
    top_of_list = page.locator("#case-list").evaluate(
        "e => e.getBoundingClientRect().top + window.scrollY"
    )
    cases = tmp_path / "eval-report-cases.png"
    page.screenshot(
        path=str(cases),
        full_page=True,
        clip={"x": 0, "y": top_of_list - 12, "width": 1280, "height": 1480},
    )
    _keep(cases)
    assert "Cut: the page shows the first" in page.inner_text("#case-2")
    page.locator("#case-2 > summary").click()
    page.click("#page-next")
    assert _ids_shown(page) == [r["id"] for r in results[PAGE_SIZE : 2 * PAGE_SIZE]]
    page.click("#page-last")
    assert _ids_shown(page) == [r["id"] for r in results[(pages - 1) * PAGE_SIZE :]]
    assert page.is_disabled("#page-next")
    # The search reaches a case on page 40 of the full list, and it opens to its attempts.
    position = 39 * PAGE_SIZE + 7
    wanted = results[position]
    page.fill("#case-search", wanted["id"].upper())
    _wait_shown(page, 1)
    assert _ids_shown(page) == [wanted["id"]]
    case = page.locator(f"#case-{position}")
    case.locator(":scope > summary").click()
    assert case.locator(".attempt").count() == len(wanted["attempts"])
    assert page.eval_on_selector_all("details.case", "els => els.length") == 1
    opened.assert_offline()


@browser_test
def test_a_link_to_a_case_opens_it_on_its_page(open_page: Any) -> None:
    data = make_report(n_cases=2_000)
    position = 1_234
    opened = open_page(render_eval_html(data), name="link.html", fragment=f"#case-{position}")
    page = opened.page
    case = page.locator(f"#case-{position}")
    assert case.evaluate("e => e.open")
    page_of = position // PAGE_SIZE
    shown = [r["id"] for r in data["results"][page_of * PAGE_SIZE : (page_of + 1) * PAGE_SIZE]]
    assert _ids_shown(page) == shown
    opened.assert_offline()


@browser_test
def test_without_a_loop_judge_the_page_says_so(open_page: Any) -> None:
    data = make_report()
    data["judge_agreement"] = None
    for result in data["results"]:
        for attempt in result["attempts"]:
            attempt["judge_passed"] = None
    opened = open_page(render_eval_html(data))
    page = opened.page
    assert page.is_visible("#no-loop-judge")
    assert "No loop judge" in page.inner_text("#agreement")
    assert not any(key.startswith("judge_agreement") for key in _numbers(page))
    page.click("#expand-all")
    assert "not judged" in page.inner_text("#case-list")
    opened.assert_offline()


@browser_test
def test_an_undefined_kappa_and_an_empty_report_render(open_page: Any) -> None:
    data = make_report()
    data["judge_agreement"] = {"tp": 5, "fp": 0, "fn": 0, "tn": 0, "kappa": None}
    opened = open_page(render_eval_html(data))
    assert opened.page.inner_text('[data-key="judge_agreement.kappa"]') == "undefined"
    opened.assert_offline()
    empty = {
        "cases": 0, "errors": 0, "baseline_pass_rate": 0.0, "final_pass_rate": 0.0, "lift": 0.0,
        "lift_ci95": [0.0, 0.0], "improved": 0, "degraded": 0, "error_introduction_rate": 0.0,
        "attempts_histogram": {}, "model_tokens": 0, "judge_tokens": 0, "grader_tokens": 0,
        "latency_s": {"p50": 0.0, "p95": 0.0}, "judge_agreement": None, "per_assertion": {},
        "results": [],
    }  # fmt: skip
    opened = open_page(render_eval_html(empty), name="empty.html")
    assert _numbers(opened.page)["cases"] == 0
    assert "No scored cases" in opened.page.inner_text("#attempts")
    assert opened.page.inner_text("#page-info") == "page 1 of 1"
    opened.assert_offline()


@browser_test
def test_screenshot_of_the_page(open_page: Any, tmp_path: Path) -> None:
    data = {**make_report(), "setup": SETUP}
    page_html = render_eval_html(data)
    opened = open_page(page_html)
    page = opened.page
    # Nothing is wider than the window: no sideways scrolling on a laptop screen.
    assert page.evaluate("document.documentElement.scrollWidth") <= 1280
    page.locator("details.case").nth(0).locator(":scope > summary").click()
    # The top of the page (the guide's picture) and the whole page.
    top = tmp_path / "eval-report.png"
    page.screenshot(
        path=str(top), full_page=True, clip={"x": 0, "y": 0, "width": 1280, "height": 1560}
    )
    full = tmp_path / "eval-report-full.png"
    page.screenshot(path=str(full), full_page=True)
    assert _png_size(top) == (1280, 1560)
    width, height = _png_size(full)
    assert width == 1280
    assert height > 2000
    opened.assert_offline()
    dark = open_page(page_html, name="dark.html", dark=True)
    assert dark.page.evaluate("getComputedStyle(document.body).backgroundColor") != (
        page.evaluate("getComputedStyle(document.body).backgroundColor")
    )
    night = tmp_path / "eval-report-dark.png"
    dark.page.screenshot(path=str(night))
    dark.assert_offline()
    for shot in (top, full, night):
        _keep(shot)


# --- the guards themselves can fail ---------------------------------------------------------------


@browser_test
def test_the_guards_catch_a_request_and_a_broken_escape(
    open_page: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    plain = open_page('<img src="http://127.0.0.1:9/pixel.png">', name="plain.html")
    plain.page.wait_for_load_state()
    assert "http://127.0.0.1:9/pixel.png" in plain.requests
    with pytest.raises(AssertionError):
        plain.assert_offline()
    # With escaping broken (the markup's, and the island's `<`), the policy still stops the
    # injected scripts, and the guards see it.
    monkeypatch.setattr(_page, "esc", lambda value: str(value))
    monkeypatch.setattr(_html, "esc", lambda value: str(value))
    monkeypatch.setattr(_page, "island_json", lambda value: json.dumps(value, ensure_ascii=False))
    broken = open_page(render_eval_html(make_report(), title=HOSTILE_IMG), name="broken.html")
    assert broken.page.evaluate("typeof window.__pwned") == "undefined"
    violations = broken.violations()
    assert "script-src-elem inline" in violations
    assert "img-src http://127.0.0.1:9/pixel.png" in violations
    with pytest.raises(AssertionError):
        broken.assert_offline()


# --- the run page -------------------------------------------------------------------------------


def _run_rows() -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for n in range(12):
        attempts = 1 + n % 3
        rows.append(
            {
                "id": f"q{n}", "line": n + 1, "answer": f"Answer {n} {HOSTILE_SCRIPT}",
                "passed": n % 4 != 3, "outcome": "passed" if n % 4 != 3 else "best_attempt",
                "attempts": attempts, "tokens": 100 * attempts + 40, "model_tokens": 100 * attempts,
                "judge_tokens": 40, "error": None,
            }
        )  # fmt: skip
    rows.append(
        {
            "id": "q-err", "line": 13, "answer": None, "passed": None, "outcome": None,
            "attempts": 0, "tokens": 0, "model_tokens": 0, "judge_tokens": 0,
            "error": "ModelHTTPError: 500 <b>boom</b>",
        }
    )  # fmt: skip
    rows.append(
        {
            "id": "q-plain", "line": 14, "answer": "", "passed": None, "outcome": None,
            "attempts": 1, "tokens": 9, "model_tokens": 9, "judge_tokens": 0, "error": None,
        }
    )  # fmt: skip
    return rows


@browser_test
def test_run_page_numbers_and_rows(open_page: Any, tmp_path: Path) -> None:
    rows = _run_rows()
    summary = report_setup(
        model="fake-model at <127.0.0.1>", resumed=2, bad_lines=1, wall_time_s=3.5
    )
    opened = open_page(render_run_html(rows, summary), name="run.html")
    page = opened.page
    numbers = _numbers(page)
    judged = [r for r in rows if r["passed"] is not None]
    passed = sum(r["passed"] for r in judged)
    assert numbers["items"] == len(rows)
    assert numbers["passed"] == passed
    assert math.isclose(numbers["pass_rate"], passed / len(judged))
    assert numbers["errors"] == 1
    assert numbers["model_tokens"] == sum(r["model_tokens"] for r in rows)
    assert numbers["judge_tokens"] == sum(r["judge_tokens"] for r in rows)
    assert {k: numbers[f"summary.{k}"] for k in summary} == summary
    assert f"{passed} of {len(judged)} judged items" in page.inner_text("#summary")
    outcomes = {k.partition(".")[2]: v for k, v in numbers.items() if k.startswith("outcomes.")}
    assert outcomes == {"passed": 9, "best_attempt": 3, "error": 1, "no judge": 1}
    facts = page.locator("#facts dl > div")
    resumed = facts.filter(has=page.locator("dt", has_text="already done (resumed)"))
    assert resumed.locator("dd").inner_text() == "2"
    assert facts.filter(has=page.locator("dt", has_text="Python")).count() == 1
    histogram = {
        key.rpartition(".")[2]: value
        for key, value in numbers.items()
        if key.startswith("attempts_histogram.")
    }
    assert histogram == {"1": 5, "2": 4, "3": 4}  # the errored row is left out
    assert _ids_shown(page) == [r["id"] for r in rows]
    row = page.locator("#case-0")
    assert not row.locator("pre.answer").is_visible()
    row.locator(":scope > summary").click()
    assert row.locator("pre.answer").text_content() == rows[0]["answer"]
    assert page.locator("#case-12 pre.error").text_content() == rows[12]["error"]
    assert page.evaluate("typeof window.__pwned") == "undefined"
    assert page.inner_text("#page-info") == f"items 1–{len(rows)} of {len(rows)} · page 1 of 1"
    shot = tmp_path / "run-report.png"
    page.screenshot(path=str(shot), full_page=True)
    _keep(shot)
    opened.assert_offline()


@browser_test
def test_a_run_page_of_many_items_is_paged(open_page: Any) -> None:
    rows = [dict(_run_rows()[n % 12], id=f"item-{n}") for n in range(3_000)]
    opened = open_page(render_run_html(rows, {}), name="many.html")
    page = opened.page
    assert _ids_shown(page) == [f"item-{n}" for n in range(PAGE_SIZE)]
    page.fill("#case-search", "item-2999")
    _wait_shown(page, 1)
    assert _ids_shown(page) == ["item-2999"]
    opened.assert_offline()


# --- the compare page ---------------------------------------------------------------------------


def _two_reports(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> tuple[Any, dict[str, Any], dict[str, Any]]:
    a = {**make_report(seed=17), "setup": SETUP}
    b = {
        **make_report(seed=21),
        "setup": {**SETUP, "model": "local qwen2.5-coder-1.5b", "temperature": 0.2},
    }
    b["results"] = [*b["results"][:38], dict(b["results"][5], id="only-in-b")]
    monkeypatch.chdir(tmp_path)  # the page names the files as given: short names
    paths = []
    for name, data in (("qwen-0.5b.json", a), ("qwen-1.5b.json", b)):
        Path(name).write_text(json.dumps(data), encoding="utf-8")
        paths.append(Path(name))
    return compare_reports(load_report(paths[0]), load_report(paths[1])), a, b


@browser_test
def test_compare_page_numbers_flips_and_answers_side_by_side(
    open_page: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    comparison, a, b = _two_reports(tmp_path, monkeypatch)
    opened = open_page(render_compare_html(comparison), name="compare.html")
    page = opened.page
    numbers = _numbers(page)
    paired = comparison.paired()
    assert {k.partition(".")[2]: v for k, v in numbers.items() if k.startswith("paired.")} == {
        **{k: v for k, v in paired.items() if k not in ("cases", "a_final_pass_rate",
                                                         "b_final_pass_rate", "difference_ci95")},
        "difference_ci95.0": paired["difference_ci95"][0],
        "difference_ci95.1": paired["difference_ci95"][1],
    }  # fmt: skip
    assert numbers["a.setup.model"] == SETUP["model"]
    assert numbers["b.setup.temperature"] == 0.2
    differs = page.eval_on_selector_all(
        "#setups tr",
        "rows => rows.filter(r => r.querySelector('td.differs'))"
        ".map(r => r.querySelector('th').textContent)",
    )
    assert differs == ["model", "temperature"]
    for side, data in (("a", a), ("b", b)):
        ran = [r for r in data["results"] if r["error"] is None]
        passed = sum(r["passed_final"] for r in ran)
        assert numbers[f"{side}.final_pass_rate"] == pytest.approx(passed / len(ran))
    page.click('[data-filter="regressed"]')
    assert _ids_shown(page) == comparison.regressed
    first = page.locator("details.case").nth(1)
    first.locator(":scope > summary").click()
    wanted = comparison.regressed[1]
    answers = first.locator("pre.answer").all_text_contents()
    expected = [
        next(c for c in r.cases if c.id == wanted).answer for r in (comparison.a, comparison.b)
    ]
    assert answers == expected
    shot = tmp_path / "eval-compare.png"
    page.screenshot(path=str(shot), full_page=True)
    _keep(shot)
    page.click('[data-filter="only_b"]')
    assert _ids_shown(page) == ["only-in-b"]
    assert "Not in this report." in page.text_content("#cases")
    page.click('[data-filter="all"]')
    page.click("#expand-all")
    assert page.evaluate("typeof window.__pwned") == "undefined"
    assert page.eval_on_selector_all("img", "els => els.length") == 0
    opened.assert_offline()


# --- without a browser --------------------------------------------------------------------------


class _Tags(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[str] = []
        self.scripts: list[dict[str, str | None]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)
        if tag == "script":
            self.scripts.append(dict(attrs))


def test_the_page_is_one_file_with_a_policy_that_forbids_loads() -> None:
    page = render_eval_html(make_report())
    parser = _Tags()
    parser.feed(page)
    # The page's own script, and the rows' data (a type no browser runs).
    assert parser.scripts == [{"type": "application/json", "id": "rows-data"}, {}]
    assert "img" not in parser.tags
    assert "default-src 'none'" in page
    assert "'unsafe-inline'" not in page
    island = page_island(page)  # it holds no "<" at all
    markup = _html_without_island(page)
    assert "http://" not in markup
    assert "https://" not in markup
    assert island["page_size"] == PAGE_SIZE


def _html_without_island(page: str) -> str:
    start = page.index('<script type="application/json"')
    return page[:start] + page[page.index("</script>", start) :]


def test_text_that_is_no_valid_unicode_still_renders() -> None:
    data = make_report()
    data["results"][0]["attempts"][0]["answer"] = "half a pair: \ud83d and NUL \x00 end"
    data["results"][1]["id"] = "id \udfff"
    page = render_eval_html(data)
    page.encode("utf-8")  # lone surrogates became U+FFFD, so the page can be written
    rows = page_rows(page)
    assert row_texts(rows[0])[0] == "half a pair: \ufffd and NUL \x00 end"
    assert rows[1]["i"] == "id \ufffd"


@settings(max_examples=25, deadline=None)
@given(answer=st.text(), case_id=st.text(min_size=1, max_size=40))
def test_any_text_comes_back_as_the_same_text(answer: str, case_id: str) -> None:
    data = make_report(n_cases=2)
    data["results"][0]["id"] = case_id
    data["results"][0]["attempts"][0]["answer"] = answer
    page = render_eval_html(data)
    parser = _Tags()
    parser.feed(page)
    plain = make_report(n_cases=2)
    plain_parser = _Tags()
    plain_parser.feed(render_eval_html(plain))
    assert parser.tags == plain_parser.tags  # the text added no element
    row = page_rows(page)[0]
    assert row["i"] == case_id
    assert row_texts(row)[0] == (answer or "(empty)")


# Any JSON value in any field of a row: the pages render, and the island stays one JSON value.
_JSON = st.recursive(
    st.none() | st.booleans() | st.integers(min_value=-(10**400), max_value=10**400)
    | st.floats() | st.text(max_size=30),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)  # fmt: skip
_ROW_KEYS = [
    "id", "input", "expected", "metadata", "assertion_types", "passed_baseline", "passed_final",
    "chosen", "outcome", "error", "attempts", "model_tokens", "judge_tokens", "grader_tokens",
    "latency_s", "line", "answer", "passed", "tokens",
]  # fmt: skip
_ATTEMPT = st.dictionaries(
    st.sampled_from(
        ["index", "answer", "judge_passed", "oracle_passed", "failed_assertions", "feedback",
         "escalated"]
    ),
    _JSON,
)  # fmt: skip
_ROW = st.dictionaries(st.sampled_from(_ROW_KEYS), _JSON) | st.builds(
    lambda row, attempts: {**row, "attempts": attempts},
    st.dictionaries(st.sampled_from(_ROW_KEYS), _JSON),
    st.lists(_ATTEMPT | _JSON, max_size=3),
)


@settings(max_examples=60, deadline=None)
@given(rows=st.lists(_ROW, max_size=4), summary=st.dictionaries(st.text(max_size=8), _JSON))
def test_hostile_rows_render_and_the_island_stays_data(
    rows: list[dict[str, Any]], summary: dict[str, Any]
) -> None:
    data = {**EvalReport(results=[]).to_dict(), "results": rows, "setup": summary}
    for page in (render_eval_html(data), render_run_html(rows, summary)):
        assert len(page_rows(page)) == len(rows)  # no "<" in the island, and it parses
        page.encode("utf-8")


def test_rows_with_only_the_pinned_keys_render() -> None:
    data = make_report()
    pinned = {"id", "passed_baseline", "passed_final", "chosen", "error", "attempts"}
    data["results"] = [{k: v for k, v in r.items() if k in pinned} for r in data["results"]]
    page = render_eval_html(data)
    assert ">assertions</th>" not in page  # no denominator column without the types
    assert "failed assertions: #0" in page
    assert len(page_rows(page)) == 40


def test_the_page_is_bounded_however_long_the_answers() -> None:
    # 60 MB of answers (40 cases, 3 attempts of 500,000 characters): the page cuts each one.
    data = make_report()
    for result in data["results"]:
        for attempt in result["attempts"]:
            attempt["answer"] = "word " * 100_000
    answers = sum(len(a["answer"]) for r in data["results"] for a in r["attempts"])
    assert answers > 30_000_000
    page = render_eval_html(data)
    assert len(page) < 2_000_000
    texts = [t for row in page_rows(page) for t in row_texts(row)]
    assert texts
    assert all(len(t) <= CUT_CHARS for t in texts)


def test_writing_the_page_and_the_json_holds_no_copy_of_the_answers(tmp_path: Path) -> None:
    import tracemalloc

    rows = make_report(n_cases=80)["results"]
    for n, row in enumerate(rows):
        for attempt in row["attempts"]:
            attempt["answer"] = f"{n} " + "x" * 400_000
    report = EvalReport(results=rows)
    answers = sum(len(a["answer"]) for r in rows for a in r["attempts"])
    assert answers > 20_000_000
    for write in (report.write_html, report.write_json):
        tracemalloc.start()
        try:
            write(tmp_path / "out")
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        # Streamed: what writing allocates is far below the answers' size (no page-sized string).
        assert peak < answers / 4, write.__name__
    assert json.loads((tmp_path / "out").read_text()) == report.to_dict()
