"""The eval report page at scale: its size, the writer's memory, and how fast Chromium opens it.

Two measurements (issue 29, RT-16):

- **10,000 ordinary cases** (`--quick`: 1,000): each with a prompt, one to three attempts of a few
  hundred characters, the judge's feedback and a little metadata. `EvalReport.write_html` writes
  the page; headless Chromium (Debian's, through playwright) opens it from disk: the time until
  the load event (the rows of the first page are drawn by then), and the time from typing a
  search to the list showing the one case that matches, a case far down the list.
- **300 MB of answers** (`--quick`: 30 MB): 1,000 cases whose three attempts answer 100 KB each
  (`--quick`: 10 KB), written in a child process: its peak RSS beside the RSS of the report alone,
  for the page (`write_html`) and the JSON file (`write_json`).

The same file measures an older jevrefine when its `src` comes first on the path (the "before"
column of docs/benchmarks.md): `PYTHONPATH=/path/to/old/src python -m benchmarks.bench_report_page`.

    python -m benchmarks.bench_report_page [--quick]

Chromium: `JEVREFINE_CHROMIUM`, else `chromium` on the PATH; without it the browser figures are
reported as skipped.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import jevrefine as jr
from jevrefine.evals import EvalReport

from ._harness import emit, load_average, skipped

_TEXT = (
    "the answer model judge case word limit city river capital paris rome france italy sea "
    "wave tide haiku prime number list json key value date year month refine attempt feedback "
    "short long brief polite refusal password reset sugar oxygen light plant cell energy"
)
WORDS = _TEXT.split(" ")
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run"]


def prose(rng: random.Random, chars: int) -> str:
    """Sentences of common words, about `chars` long."""
    words: list[str] = []
    size = 0
    while size < chars:
        word = rng.choice(WORDS)
        words.append(word)
        size += len(word) + 1
        if rng.random() < 0.08:
            words[-1] += "."
    return " ".join(words).capitalize() + "."


def ordinary_rows(count: int, *, answer_chars: int = 500, seed: int = 3) -> list[dict[str, Any]]:
    """`count` result rows as `evaluate` writes them, with answers of about `answer_chars`."""
    rng = random.Random(seed)
    rows = []
    for n in range(count):
        attempts = []
        for index in range(1, rng.randint(1, 3) + 1):
            failed = [i for i in range(2) if rng.random() < 0.4 / index]
            attempts.append(
                {
                    "index": index,
                    "answer": prose(rng, rng.randint(answer_chars // 2, answer_chars * 3 // 2)),
                    "judge_passed": not failed,
                    "oracle_passed": not failed,
                    "failed_assertions": failed,
                    "feedback": prose(rng, 120) if failed else None,
                }
            )
        last = attempts[-1]
        rows.append(
            {
                "id": f"case-{n:05d}",
                "input": prose(rng, 90) + "?",
                "expected": None,
                "metadata": {"topic": rng.choice(WORDS), "n": n},
                "assertion_types": ["word-count", "icontains"],
                "passed_baseline": attempts[0]["oracle_passed"],
                "passed_final": last["oracle_passed"],
                "chosen": last["index"],
                "outcome": "passed" if last["judge_passed"] else "best_attempt",
                "error": None,
                "attempts": attempts,
                "model_tokens": 180 * len(attempts),
                "judge_tokens": 0,
                "grader_tokens": 0,
                "latency_s": round(rng.uniform(0.4, 3.0), 3),
            }
        )
    return rows


def _chromium() -> str | None:
    found = os.environ.get("JEVREFINE_CHROMIUM") or shutil.which("chromium")
    return found if found and os.access(found, os.X_OK) else None


def open_in_chromium(path: Path, needle: str, rounds: int) -> dict[str, Any]:
    """Per round: seconds to the load event, and from a typed search to its one match shown."""
    executable = _chromium()
    if executable is None:
        return skipped("no chromium (apt-get install chromium, or set JEVREFINE_CHROMIUM)")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        return skipped("the playwright package is not installed")
    loads: list[float] = []
    searches: list[float] = []
    heaps: list[int] = []
    with sync_playwright() as driver:
        browser = driver.chromium.launch(executable_path=executable, args=CHROMIUM_ARGS)
        try:
            for _ in range(rounds):
                context = browser.new_context(viewport={"width": 1280, "height": 900})
                page = context.new_page()
                page.goto(path.as_uri(), wait_until="load", timeout=600_000)
                loads.append(
                    page.evaluate("performance.getEntriesByType('navigation')[0].loadEventEnd")
                    / 1000
                )
                started = time.perf_counter()
                page.fill("#case-search", needle)
                page.wait_for_function(
                    "() => document.getElementById('case-shown').textContent.trim() === '1'",
                    timeout=600_000,
                )
                searches.append(time.perf_counter() - started)
                heaps.append(int(page.evaluate("performance.memory.usedJSHeapSize")))
                context.close()
        finally:
            browser.close()
    return {"load_s": loads, "search_s": searches, "js_heap_bytes": heaps}


def measure_open(count: int, rounds: int) -> dict[str, Any]:
    """Write the page of `count` ordinary cases; its size, the write time, Chromium's figures."""
    report = EvalReport(results=ordinary_rows(count), judge="asserts")
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "report.html"
        started = time.perf_counter()
        report.write_html(path)
        write_s = time.perf_counter() - started
        size = path.stat().st_size
        # A case near the end: on page 40 of 50 rows and beyond, wherever the list is paged.
        needle = f"case-{count * 4 // 5:05d}"
        browser = open_in_chromium(path, needle, rounds)
    return {"cases": count, "bytes": size, "write_s": write_s, "browser": browser}


def _rss_now() -> int:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def child_memory(kind: str, answers_mb: int) -> dict[str, Any]:
    """In this (child) process: the report's RSS, then the peak RSS while writing it as `kind`."""
    per_answer = 100_000 if answers_mb >= 100 else 10_000
    count = answers_mb * 1_000_000 // (3 * per_answer)
    rng = random.Random(5)
    chunk = prose(rng, 2_000)
    rows = ordinary_rows(count, answer_chars=40)
    for n, row in enumerate(rows):
        long = chunk * (per_answer // 2_000)
        row["attempts"] = [
            {**row["attempts"][0], "index": i, "answer": f"{n}.{i} {long}"} for i in (1, 2, 3)
        ]
        row["chosen"] = 3
    report = EvalReport(results=rows, judge="asserts")
    held = _rss_now()
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / ("report.html" if kind == "html" else "report.json")
        started = time.perf_counter()
        report.write_html(path) if kind == "html" else report.write_json(path)
        seconds = time.perf_counter() - started
        size = path.stat().st_size
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    answers = sum(len(a["answer"]) for row in rows for a in row["attempts"])
    return {
        "kind": kind,
        "cases": count,
        "answer_chars": answers,
        "rss_report_bytes": held,
        "peak_rss_bytes": peak,
        "bytes": size,
        "write_s": seconds,
    }


def measure_memory(kind: str, answers_mb: int) -> dict[str, Any]:
    command = [sys.executable, "-m", "benchmarks.bench_report_page", "--child", kind]
    command += ["--answers-mb", str(answers_mb)]
    done = subprocess.run(
        command, capture_output=True, text=True, check=True, cwd=Path(__file__).parents[1]
    )
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def _mb(value: float) -> str:
    return f"{value / 1e6:,.1f} MB"


def _seconds(values: list[float]) -> str:
    return f"{statistics.median(values):.2f} s" if values else "–"


def report(opened: dict[str, Any], memory: list[dict[str, Any]], *, rounds: int) -> str:
    browser = opened["browser"]
    lines = [
        "## The eval report page at scale",
        "",
        f"Python {platform.python_version()}, jevrefine {jr.__version__}, Chromium headless; "
        f"load average {load_average()}; medians of {rounds} openings.",
        "",
        "| measure | value |",
        "|---|---|",
        f"| cases | {opened['cases']:,} ordinary cases |",
        f"| page size | {_mb(opened['bytes'])} |",
        f"| `write_html` | {opened['write_s']:.2f} s |",
    ]
    if "skipped" in browser:
        lines.append(f"| Chromium | skipped: {browser['skipped']} |")
    else:
        lines += [
            f"| Chromium: to the load event | {_seconds(browser['load_s'])} |",
            f"| Chromium: a search to its one match | {_seconds(browser['search_s'])} |",
            f"| Chromium: JS heap after the search | "
            f"{_mb(statistics.median(browser['js_heap_bytes']))} |",
        ]
    lines += [
        "",
        "| writing | answers | report alone (RSS) | peak RSS while writing | file | time |",
        "|---|---|---|---|---|---|",
    ]
    for row in memory:
        lines.append(
            f"| `write_{row['kind']}` | {_mb(row['answer_chars'])} in {row['cases']:,} cases | "
            f"{_mb(row['rss_report_bytes'])} | {_mb(row['peak_rss_bytes'])} | "
            f"{_mb(row['bytes'])} | {row['write_s']:.1f} s |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes, for a smoke run")
    parser.add_argument("--cases", type=int, help="ordinary cases on the page (default 10,000)")
    parser.add_argument("--child", choices=["html", "json"], help=argparse.SUPPRESS)
    parser.add_argument("--answers-mb", type=int, help="MB of answers in the memory measurement")
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(child_memory(args.child, args.answers_mb)))
        return
    count = args.cases or (1_000 if args.quick else 10_000)
    answers_mb = args.answers_mb or (30 if args.quick else 300)
    rounds = 1 if args.quick else 3
    opened = measure_open(count, rounds)
    memory = [measure_memory(kind, answers_mb) for kind in ("html", "json")]
    emit(
        report(opened, memory, rounds=rounds),
        {"open": opened, "memory": memory, "rounds": rounds},
    )


if __name__ == "__main__":
    main()
