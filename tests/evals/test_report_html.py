"""The HTML report pages, in a real headless Chromium (Debian's package) loaded from disk.

Each page is opened as `file://` with every request and every Content-Security-Policy violation
recorded: the tests check that the summary numbers in the DOM equal the JSON, that a case opens to
its attempts, that hostile strings stay text, and that nothing is fetched. The screenshot is kept
in the test's tmp dir and, when `JEVREFINE_ARTIFACTS` names a folder, copied there.

Chromium: `JEVREFINE_CHROMIUM`, else `chromium` on the PATH (`.ci/run` installs Debian's package).
Without it the browser tests skip, except under `CI=true`, where they fail.
"""

from __future__ import annotations

import html
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

from evals.report_fixture import HOSTILE_IMG, HOSTILE_SCRIPT, HUGE_ANSWER, make_report
from jevrefine.evals import _html
from jevrefine.evals._html import render_eval_html, render_run_html

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
        assert self.requests == [self.url]
        assert self.violations() == []
        assert self.errors == []


@pytest.fixture
def open_page(browser: Any, tmp_path: Path) -> Iterator[Any]:
    contexts: list[Any] = []

    def opener(page_html: str, *, name: str = "report.html", dark: bool = False) -> Opened:
        path = tmp_path / name
        path.write_text(page_html, encoding="utf-8")
        context = browser.new_context(
            viewport={"width": 1280, "height": 900}, color_scheme="dark" if dark else "light"
        )
        contexts.append(context)
        context.add_init_script(RECORD_VIOLATIONS)
        page = context.new_page()
        opened = Opened(page, path.as_uri())
        # Every request is recorded; any that would leave the file is refused, not sent.
        page.on("request", lambda request: opened.requests.append(request.url))
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
    assert page.eval_on_selector_all("script", "els => els.length") == 1  # the page's own
    assert page.eval_on_selector_all("img", "els => els.length") == 0
    answers = page.eval_on_selector_all("pre.answer", "els => els.map(e => e.textContent)")
    hostile = next(a for a in answers if HOSTILE_SCRIPT in a)
    assert HOSTILE_IMG in hostile
    assert "\"quoted\" & 'single' <b>bold</b>" in hostile
    assert any("東京 ☃ 🧪 café" in a and "\u202e" in a for a in answers)
    ids = page.eval_on_selector_all("details.case", "els => els.map(e => e.dataset.caseId)")
    assert ids == [r["id"] for r in data["results"]]
    errors = page.eval_on_selector_all("pre.error", "els => els.map(e => e.textContent)")
    assert any("<html><script>alert(1)</script>" in e for e in errors)
    assert page.title() == '<script>window.__pwned = 4</script>"'
    opened.assert_offline()


@browser_test
def test_a_huge_answer_is_clipped_and_kept_whole(open_page: Any) -> None:
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
    clip = case.locator(".clip").filter(has_text="Line 3999:")
    answer = clip.locator("pre.answer")
    assert answer.text_content() == HUGE_ANSWER  # clipped on screen, never shortened
    height = "e => [e.clientHeight, e.scrollHeight]"
    shown, whole = answer.evaluate(height)
    assert shown < 600 < whole
    toggle = clip.locator("details.more > summary")
    before = "e => getComputedStyle(e, '::before').content + e.textContent"
    lines = HUGE_ANSWER.count("\n") + 1
    assert toggle.evaluate(before) == f'"show all "{len(HUGE_ANSWER):,} characters, {lines:,} lines'
    toggle.click()
    shown, whole = answer.evaluate(height)
    assert shown == whole
    assert toggle.evaluate(before).startswith('"show less of "')
    opened.assert_offline()


@browser_test
def test_filters_and_search_pick_cases(open_page: Any) -> None:
    data = make_report()
    opened = open_page(render_eval_html(data))
    page = opened.page

    def visible() -> list[str]:
        return list(
            page.eval_on_selector_all(
                "details.case", "els => els.filter(e => !e.hidden).map(e => e.dataset.caseId)"
            )
        )

    page.click('[data-filter="degraded"]')
    degraded = [r["id"] for r in data["results"] if r["passed_baseline"] and not r["passed_final"]]
    assert len(degraded) == data["degraded"]
    assert visible() == degraded
    assert page.inner_text("#case-shown") == str(len(degraded))
    page.click('[data-filter="error"]')
    assert len(visible()) == data["errors"]
    page.click('[data-filter="all"]')
    page.fill("#case-search", "JSON-CITY")
    assert visible()
    assert all(case_id.startswith("json-city") for case_id in visible())
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
    opened.assert_offline()


@browser_test
def test_screenshot_of_the_page(open_page: Any, tmp_path: Path) -> None:
    data = make_report()
    page_html = render_eval_html(data, title="jevrefine eval: cases.jsonl")
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
    # With escaping broken, the policy still stops the injected scripts, and the guards see it.
    monkeypatch.setattr(_html, "_esc", lambda value: str(value))
    broken = open_page(render_eval_html(make_report()), name="broken.html")
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
    summary = {
        "model": "fake-model at <127.0.0.1>",
        "resumed": 2,
        "bad_lines": 1,
        "wall_time_s": 3.5,
    }
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
    assert "already done (resumed): 2" in page.inner_text("#facts")
    histogram = {
        key.rpartition(".")[2]: value
        for key, value in numbers.items()
        if key.startswith("attempts_histogram.")
    }
    assert histogram == {"1": 5, "2": 4, "3": 4}  # the errored row is left out
    ids = page.eval_on_selector_all("details.case", "els => els.map(e => e.dataset.caseId)")
    assert ids == [r["id"] for r in rows]
    row = page.locator("#case-0")
    assert not row.locator("pre.answer").is_visible()
    row.locator(":scope > summary").click()
    assert row.locator("pre.answer").text_content() == rows[0]["answer"]
    assert page.locator("#case-12 pre.error").text_content() == rows[12]["error"]
    assert page.evaluate("typeof window.__pwned") == "undefined"
    shot = tmp_path / "run-report.png"
    page.screenshot(path=str(shot), full_page=True)
    _keep(shot)
    opened.assert_offline()


# --- without a browser --------------------------------------------------------------------------


class _Tags(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)


def test_the_page_is_one_file_with_a_policy_that_forbids_loads() -> None:
    page = render_eval_html(make_report())
    parser = _Tags()
    parser.feed(page)
    assert parser.tags.count("script") == 1
    assert "img" not in parser.tags
    assert "default-src 'none'" in page
    assert "'unsafe-inline'" not in page
    assert "http://" not in page.replace(html.escape(HOSTILE_IMG), "")
    assert "https://" not in page


def test_text_that_is_no_valid_unicode_still_renders() -> None:
    data = make_report()
    data["results"][0]["attempts"][0]["answer"] = "half a pair: \ud83d and NUL \x00 end"
    page = render_eval_html(data)
    page.encode("utf-8")  # lone surrogates became U+FFFD, so the page can be written
    assert "half a pair: \ufffd and NUL" in page


@settings(max_examples=25, deadline=None)
@given(answer=st.text(), case_id=st.text(min_size=1, max_size=40))
def test_any_text_comes_back_as_the_same_text(answer: str, case_id: str) -> None:
    def parsed(answer: str, case_id: str) -> _Texts:
        data = make_report(n_cases=2)
        data["results"][0]["id"] = case_id
        data["results"][0]["attempts"][0]["answer"] = answer
        parser = _Texts()
        parser.feed(render_eval_html(data))
        return parser

    page = parsed(answer, case_id)
    # Plain text of the same length and lines gives the page its shape (clipped or not).
    plain = parsed("".join(c if c == "\n" else "a" for c in answer), "plain")
    assert page.tags == plain.tags  # the text added no element
    assert page.case_ids[0] == case_id
    if answer:
        assert page.answers[0] == answer


class _Texts(HTMLParser):
    """The tags of a page, its case ids, and the text of each answer's `<pre>`."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[str] = []
        self.case_ids: list[str] = []
        self.answers: list[str] = []
        self._in_answer = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)
        found = dict(attrs)
        if tag == "details" and found.get("data-case-id") is not None:
            self.case_ids.append(str(found["data-case-id"]))
        if tag == "pre" and found.get("class") == "answer":
            self._in_answer = True
            self.answers.append("")

    def handle_endtag(self, tag: str) -> None:
        if tag == "pre":
            self._in_answer = False

    def handle_data(self, data: str) -> None:
        if self._in_answer:
            self.answers[-1] += data


def test_rows_with_only_the_pinned_keys_render() -> None:
    data = make_report()
    pinned = {"id", "passed_baseline", "passed_final", "chosen", "error", "attempts"}
    data["results"] = [{k: v for k, v in r.items() if k in pinned} for r in data["results"]]
    page = render_eval_html(data)
    assert ">assertions</th>" not in page  # no denominator column without the types
    assert "failed assertions: #0" in page
    assert page.count('<details class="case"') == 40
