"""`jevrefine compare A.json B.json` (`jevrefine.evals._compare`): pairs, figures, hostile files.

The paired figures are held against hand-worked counts; every file that is no report (and every
way a report can be malformed, huge or hostile) is a `ReportFileError` naming the file, and exit
2 from the command line, with nothing written. The page is tested in a browser in
test_report_html.py.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from evals.report_fixture import make_report, page_rows, row_texts
from jevrefine import cli
from jevrefine.evals import EvalReport
from jevrefine.evals._compare import (
    KEEP_CHARS,
    DifferentCasesError,
    ReportFileError,
    compare_reports,
    load_report,
)
from jevrefine.evals._compare_html import render_compare_html
from jevrefine.evals._stats import mcnemar_exact_p, newcombe_paired_ci


def _row(case_id: str, base: bool | None, final: bool | None, **extra: Any) -> dict[str, Any]:
    attempts = [] if final is None else [
        {"index": 1, "answer": f"answer {case_id}", "judge_passed": None, "oracle_passed": final,
         "failed_assertions": [] if final else [0], "feedback": None}
    ]  # fmt: skip
    return {
        "id": case_id, "passed_baseline": base, "passed_final": final, "chosen": 1,
        "error": None, "attempts": attempts, "input": f"question {case_id}",
        "assertion_types": ["contains"], **extra,
    }  # fmt: skip


def _write(path: Path, rows: list[dict[str, Any]], setup: dict[str, Any] | None = None) -> Path:
    EvalReport(results=rows, setup=setup).write_json(path)
    return path


def _pair(tmp_path: Path) -> tuple[Path, Path]:
    """Two reports of cases c0..c9, with known flips, one case on each side alone, one error."""
    finals_a = [True, True, True, True, False, False, True, False, True, True]
    finals_b = [True, False, True, True, True, True, True, False, False, True]
    a = [_row(f"c{i}", False, f) for i, f in enumerate(finals_a)] + [_row("a-only", True, True)]
    b = [_row(f"c{i}", False, f) for i, f in enumerate(finals_b)] + [_row("b-only", True, False)]
    b[9] = {**_row("c9", None, None), "error": "ModelTimeoutError: slow", "attempts": []}
    return (
        _write(tmp_path / "a.json", a, {"model": "small", "temperature": None}),
        _write(tmp_path / "b.json", b, {"model": "big", "temperature": 0.2}),
    )


def test_pairs_flips_and_the_paired_figures(tmp_path: Path) -> None:
    a_path, b_path = _pair(tmp_path)
    comparison = compare_reports(load_report(a_path), load_report(b_path))
    # c9 errored in B: not compared, listed. c0..c8 compared.
    assert [a.id for a, _ in comparison.pairs] == [f"c{i}" for i in range(9)]
    assert comparison.regressed == ["c1", "c8"]
    assert comparison.fixed == ["c4", "c5"]
    assert [c.id for c in comparison.only_a] == ["a-only"]
    assert [c.id for c in comparison.only_b] == ["b-only"]
    assert [(a.id, b.error) for a, b in comparison.errored] == [("c9", "ModelTimeoutError: slow")]
    paired = comparison.paired()
    # c0, c2, c3, c6 pass in both; c7 in neither.
    assert (paired["both_passed"], paired["only_a_passed"]) == (4, 2)
    assert (paired["only_b_passed"], paired["neither_passed"]) == (2, 1)
    assert paired["a_final_pass_rate"] == pytest.approx(6 / 9)
    assert paired["b_final_pass_rate"] == pytest.approx(6 / 9)
    assert paired["difference"] == pytest.approx(0.0)
    assert paired["difference_ci95"] == pytest.approx(list(newcombe_paired_ci(4, 2, 2, 1)))
    assert paired["mcnemar_p"] == pytest.approx(1.0)
    data = comparison.to_dict()
    assert data["a"]["setup"] == {"model": "small", "temperature": None}
    assert data["a"]["cases"] == 11
    assert data["b"]["errors"] == 1
    assert data["a"]["final_pass_rate"] == pytest.approx(8 / 11)  # A on its own, all it ran
    json.dumps(data)


def test_mcnemar_exact_p_against_hand_worked_values() -> None:
    # Binomial(7, 1/2): P(X <= 1) = 8/128, two-sided 0.125.
    assert mcnemar_exact_p(1, 6) == pytest.approx(0.125)
    assert mcnemar_exact_p(6, 1) == pytest.approx(0.125)
    assert mcnemar_exact_p(0, 10) == pytest.approx(2 / 1024)
    assert mcnemar_exact_p(0, 0) == 1.0
    assert mcnemar_exact_p(5, 5) == 1.0
    assert 0 < mcnemar_exact_p(300_000, 301_500) < 0.2  # a million cases: log space, no overflow


def test_a_case_with_another_input_is_listed_not_compared(tmp_path: Path) -> None:
    a = _write(tmp_path / "a.json", [_row("x", True, True), _row("y", True, True)])
    b = _write(
        tmp_path / "b.json", [_row("x", True, False), _row("y", True, False, input="changed")]
    )
    comparison = compare_reports(load_report(a), load_report(b))
    assert [a.id for a, _ in comparison.changed] == ["y"]
    assert comparison.regressed == ["x"]
    # Every shared case changed: two different case files under the same ids.
    c = _write(tmp_path / "c.json", [_row("x", True, True, input="other")])
    with pytest.raises(DifferentCasesError, match="another input"):
        compare_reports(load_report(a), load_report(c))


def test_reports_of_different_case_files_are_refused(tmp_path: Path) -> None:
    a = _write(tmp_path / "a.json", [_row("x", True, True)])
    b = _write(tmp_path / "b.json", [_row("z", True, True)])
    with pytest.raises(DifferentCasesError, match="share no case id") as caught:
        compare_reports(load_report(a), load_report(b))
    assert '"x"' in str(caught.value)
    assert '"z"' in str(caught.value)


def test_answers_are_cut_as_the_file_is_read(tmp_path: Path) -> None:
    rows = [_row("x", True, True)]
    rows[0]["attempts"][0]["answer"] = "y" * 1_000_000
    report = load_report(_write(tmp_path / "a.json", rows))
    case = report.cases[0]
    assert case.answer == "y" * KEEP_CHARS
    assert case.answer_chars == 1_000_000


_VALID = EvalReport(results=[_row("x", True, True)]).to_dict()


def _hostile(tmp_path: Path) -> list[tuple[str, bytes, str]]:
    """(name, file bytes, what the error must say)."""

    def report(**changes: Any) -> bytes:
        return json.dumps({**_VALID, **changes}).encode()

    def row(**changes: Any) -> bytes:
        return report(results=[{**_VALID["results"][0], **changes}])

    return [
        ("not-json", b"<html>not a report</html>", "not valid JSON"),
        ("empty", b"", "not valid JSON"),
        ("latin-1", '{"results": []} é'.encode("latin-1"), "not UTF-8"),
        ("a-list", b"[1, 2, 3]", "is no eval report (its JSON is a list"),
        ("no-results", b'{"cases": 3}', "an object without a results list"),
        ("rows-file", b'{"id": "x", "passed_final": true}\n{"id": "y"}', "not valid JSON"),
        ("nan", report(lift=float("nan")), "not valid JSON (NaN is not JSON"),
        ("big-int", b'{"results": [], "cases": ' + b"9" * 5000 + b"}", "not valid JSON"),
        ("deep", b"[" * 200_000 + b"]" * 200_000, "nested too deeply"),
        ("setup-list", report(setup=[1]), "setup is a list"),
        ("row-no-final", report(results=[{"id": "x"}]), "results[0] is no result row"),
        ("row-string", report(results=["x"]), "results[0] is no result row"),
        ("final-yes", row(passed_final="yes"), 'passed_final is a string ("yes")'),
        ("final-null", row(passed_final=None), "only an errored case may have null"),
        ("no-baseline", report(results=[{"id": "x", "passed_final": True}]), "is missing"),
        ("id-int", row(id=7), "id is a number (7), not a string"),
        ("error-int", row(error=3), "error is a number (3)"),
        ("twice", report(results=[_VALID["results"][0]] * 2), 'id "x" appears twice'),
    ]


def test_every_hostile_file_is_a_typed_error_naming_it(tmp_path: Path) -> None:
    for name, content, message in _hostile(tmp_path):
        path = tmp_path / f"{name}.json"
        path.write_bytes(content)
        with pytest.raises(ReportFileError) as caught:
            load_report(path)
        assert caught.value.path == str(path), name
        assert message in str(caught.value), (name, str(caught.value))
        assert str(path) in str(caught.value)


def test_files_that_are_not_regular_or_too_big_are_refused_unread(tmp_path: Path) -> None:
    # A FIFO would block an open() for reading, /dev/zero never end: neither is read.
    fifo = tmp_path / "fifo.json"
    os.mkfifo(fifo)
    for path in (fifo, Path("/dev/zero"), tmp_path):
        with pytest.raises(ReportFileError, match="not a regular file"):
            load_report(path)
    sparse = tmp_path / "huge.json"
    with sparse.open("wb") as file:
        file.truncate(600 * 2**20)  # 600 MiB that take no disk
    with pytest.raises(ReportFileError, match="more than the 536,870,912 read at most"):
        load_report(sparse)
    with pytest.raises(ReportFileError, match="cannot be read"):
        load_report(tmp_path / "missing.json")
    small = _write(tmp_path / "small.json", [_row("x", True, True)])
    with pytest.raises(ReportFileError, match="--max-mb"):
        load_report(small, max_bytes=10)


# --- the command line ---------------------------------------------------------------------------


def test_the_command_prints_both_setups_rates_and_flips(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    a_path, b_path = _pair(tmp_path)
    page, data = tmp_path / "cmp.html", tmp_path / "cmp.json"
    code = cli.main(
        ["compare", str(a_path), str(b_path), "--report", str(page), "--json", str(data)]
    )
    out = capsys.readouterr().out
    assert code == 0
    assert "temperature         default" in out
    assert "0.2 *" in out  # what differs is marked
    assert "paired, over the 9 cases both ran: final pass rate 66.7% (A) vs 66.7% (B)" in out
    assert "both pass 4 · A only 2 · B only 2 · neither 1; McNemar exact p = 1.000" in out
    regressed = out.split("passing in A, failing in B (2):")[1].split("failing in A")[0]
    assert "c1" in regressed
    assert "c8" in regressed
    assert "A: answer c1" in regressed
    assert "only in A (1):\n  a-only" in out
    assert "only in B (1):\n  b-only" in out
    assert "c9  (B: ModelTimeoutError: slow)" in out
    written = json.loads(data.read_text())
    assert written["regressed"] == ["c1", "c8"]
    assert written["fixed"] == ["c4", "c5"]
    rows = {row["i"]: row for row in page_rows(page.read_text())}
    assert set(rows) == {f"c{i}" for i in range(10)} | {"a-only", "b-only"}
    assert rows["c1"]["s"] == "regressed"
    assert row_texts(rows["c1"], "returned answer") == ["answer c1", "answer c1"]


def test_json_on_stdout_moves_the_text_to_stderr(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    a_path, b_path = _pair(tmp_path)
    assert cli.main(["compare", str(a_path), str(b_path), "--json", "-"]) == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out)["paired"]["cases"] == 9
    assert "jevrefine compare: A =" in captured.err


def test_hostile_ids_cannot_drive_the_terminal(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    evil = "\x1b]0;pwned\x07\x1b[2J\u202eevil\ud800"
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    # As a hostile file holds them: JSON escapes, a lone surrogate among them.
    a.write_text(
        json.dumps(EvalReport(results=[_row(evil, True, True), _row("ok", True, True)]).to_dict())
    )
    b.write_text(
        json.dumps(EvalReport(results=[_row(evil, True, False), _row("ok", True, True)]).to_dict())
    )
    assert cli.main(["compare", str(a), str(b)]) == 0
    out = capsys.readouterr().out
    assert "\x1b" not in out
    assert "\u202e" not in out
    assert "\\x1b]0;pwned\\x07\\x1b[2J\\u202eevil\ufffd" in out


def test_bad_inputs_exit_2_and_write_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    a_path, b_path = _pair(tmp_path)
    (tmp_path / "not.json").write_text("[]")
    other = _write(tmp_path / "other.json", [_row("zzz", True, True)])
    before = a_path.read_bytes()
    page = tmp_path / "page.html"
    for argv, message in [
        ([str(tmp_path / "not.json"), str(b_path)], "is no eval report"),
        ([str(a_path), str(other)], "share no case id"),
        ([str(a_path), str(tmp_path / "none.json")], "none.json: cannot be read"),
        ([str(a_path), str(b_path), "--report", str(a_path)], "is one of the reports compared"),
        ([str(a_path), str(b_path), "--json", str(b_path)], "is one of the reports compared"),
        ([str(a_path), str(b_path), "--report", str(tmp_path / "no/dir/x.html")], "folder"),
        ([str(a_path), str(b_path), "--max-mb", "0"], "--max-mb must be at least 1"),
    ]:
        # Where no --report is tested, one is asked for: it must not be written either.
        extra = [] if "--report" in argv else ["--report", str(page)]
        code = cli.main(["compare", *argv, *extra])
        err = capsys.readouterr().err
        assert code == 2, argv
        assert message in err, (argv, err)
        assert "Traceback" not in err
        assert not page.exists(), argv
    assert a_path.read_bytes() == before
    link = tmp_path / "link.json"
    link.symlink_to(a_path)  # another name for an input is still that input
    assert cli.main(["compare", str(a_path), str(b_path), "--json", str(link)]) == 2
    assert a_path.read_bytes() == before


def test_reports_that_eval_writes_compare(tmp_path: Path) -> None:
    data = make_report()
    a = tmp_path / "a.json"
    a.write_text(json.dumps(data))
    comparison = compare_reports(load_report(a), load_report(a))
    assert comparison.regressed == comparison.fixed == []
    assert comparison.paired()["cases"] == data["cases"] - data["errors"]
    page = render_compare_html(comparison)
    assert len(page_rows(page)) == data["cases"]  # a report without a setup still compares
