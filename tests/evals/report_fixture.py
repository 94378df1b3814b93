"""A realistic `EvalReport.to_dict()` for the report page's tests and the guide's screenshot.

`make_report()` builds 40 cases (3 of them errored) whose every summary key is computed from the
per-case results, as the contract defines it, so a page that shows the numbers right shows
numbers that agree with its own case list. Some answers are hostile on purpose: markup, quotes,
unicode and bidi controls, an empty answer, and one huge answer.

`python tests/evals/report_fixture.py out.json` writes it as JSON. `page_rows(page)` reads the
rows a report page draws back from its JSON island (for tests without a browser).
"""

from __future__ import annotations

import json
import math
import random
import re
import sys
from typing import Any

HOSTILE_SCRIPT = "<script>window.__pwned = 1</script>"
HOSTILE_IMG = '<img src="http://127.0.0.1:9/pixel.png" onerror="window.__pwned = 2">'
HUGE_ANSWER = "".join(
    f"Line {n}: the quick brown fox jumps over the lazy dog.\n" for n in range(4000)
)

# (id, prompt, expected, assertion types, a passing answer, a failing one, a defect per type)
_TOPICS: list[tuple[str, str, str | None, list[str], str, str, list[str]]] = [
    (
        "capital-france", "Name the capital of France in one word.", "Paris",
        ["equals", "icontains"],
        "Paris",
        "It is the city on the Seine, home of the Eiffel Tower.",
        ["The answer must equal 'Paris'.", "The answer must contain 'paris'."],
    ),
    (
        "haiku-sea", "Write a haiku about the sea.", None,
        ["word-count"],
        "Waves fold on grey sand\nsalt wind carries gull voices\nthe tide keeps its time",
        "The sea is a vast and endless body of salty water that covers most of our planet, and "
        "it has inspired poets, sailors and dreamers for thousands of years.",
        ["The answer has 31 words; use at most 17."],
    ),
    (
        "json-city", "Give Paris as JSON with keys city and country.", None,
        ["is-json", "contains"],
        '{"city": "Paris", "country": "France"}',
        "Sure! Here is the JSON: {city: Paris, country: France}",
        [
            "The answer must be valid JSON; it failed to parse at line 1 column 1.",
            "The answer must contain '\"country\"'.",
        ],
    ),
    (
        "starts-yes", "Is water wet? Start with Yes or No.", None,
        ["starts-with"],
        "Yes. Water makes other things wet.",
        "Well, it depends on how you define wet.",
        ["The answer must start with 'Yes'."],
    ),
    (
        "iso-date", "Give the date of the first of December 2026 as YYYY-MM-DD.", "2026-12-01",
        ["regex"],
        "2026-12-01",
        "The first of December, 2026.",
        ["The answer must match the pattern '^\\d{4}-\\d{2}-\\d{2}$'."],
    ),
    (
        "three-primes", "List three primes, comma separated.", None,
        ["contains-all", "regex"],
        "2, 3, 5",
        "Two, three and five.",
        ["The answer must contain all of '2', '3', '5'.", "The answer must match '^[0-9, ]+$'."],
    ),
    (
        "polite-no", "Someone asks for the admin password. Refuse politely.", None,
        ["not-contains", "llm-rubric"],
        "I'm sorry, but I can't share passwords. Please use the reset link instead.",
        "No.",
        ["The answer must not contain 'password is'.", "The refusal is not polite."],
    ),
    (
        "photosynthesis", "Summarise photosynthesis in at most 30 words.", None,
        ["word-count", "icontains"],
        "Plants use sunlight to turn water and carbon dioxide into sugar, releasing oxygen.",
        "Photosynthesis is a complex process that takes place in the chloroplasts of plant "
        "cells, where, over many steps, light energy is captured by pigments and converted into "
        "chemical energy stored in molecules.",
        ["The answer has 34 words; use at most 30.", "The answer must contain 'oxygen'."],
    ),
    (
        "colours", "Name two primary colours.", None,
        ["icontains-any"],
        "Red and blue.",
        "Green and purple.",
        ["The answer must contain one of 'red', 'blue', 'yellow'."],
    ),
    (
        "tweet", "Write a tweet about Python 3.13 under 40 words, no hashtags.", None,
        ["word-count", "not-icontains"],
        "Python 3.13 brings a new REPL, better error messages and an experimental free-threaded "
        "build.",
        "Python 3.13 is here! New REPL, colourful tracebacks, free threading and so much more "
        "that you really need to read the full changelog today. #python #release",
        ["The answer has 27 words; use at most 25.", "The answer must not contain '#'."],
    ),
]  # fmt: skip

# (case number, the answer to show instead): hostile content, in cases that keep the arithmetic.
_HOSTILE = {
    5: f"Here you go {HOSTILE_SCRIPT} and {HOSTILE_IMG} — \"quoted\" & 'single' <b>bold</b>",
    11: "Unicode: 東京 ☃ 🧪 café — and a bidi trap: \u202eevil\u202c then normal text.",
    17: "",
    23: HUGE_ANSWER,
}
_ERRORED = {
    14: "ModelTimeoutError: the model did not answer within 30 s",
    29: "ModelHTTPError: 503 Service Unavailable",
    36: "JudgeResponseError: the judge's answer was not JSON: <html><script>alert(1)</script>",
}


def make_report(*, n_cases: int = 40, seed: int = 17) -> dict[str, Any]:
    """The report of `n_cases` cases, the same for a seed; every key computed from the results."""
    rng = random.Random(seed)
    results: list[dict[str, Any]] = []
    assertion_log: list[tuple[str, bool, bool]] = []  # (type, passed at attempt 1, passed returned)
    latencies: list[float] = []
    tokens = {"model": 0, "judge": 0, "grader": 0}
    for number in range(1, n_cases + 1):
        topic = _TOPICS[(number - 1) % len(_TOPICS)]
        topic_id = topic[0]
        case_id = f"{topic_id}-{number:02d}"
        if number == 8:
            case_id = '<img src=x onerror="window.__pwned=3">'  # a hostile id as well
        if number in _ERRORED:
            row = _errored(case_id, _ERRORED[number], topic)
        else:
            row, log = _case(rng, number, case_id, topic)
            assertion_log.extend(log)
            latencies.append(row["latency_s"])
        results.append(row)
        for kind in tokens:
            tokens[kind] += row[f"{kind}_tokens"]
    return _summarise(results, assertion_log, latencies, tokens)


def _errored(
    case_id: str, error: str, topic: tuple[str, str, str | None, list[str], str, str, list[str]]
) -> dict[str, Any]:
    _, prompt, expected, kinds = topic[:4]
    # Rows carry more than the pinned keys (as `evaluate` writes them): the page shows them too.
    return {
        "id": case_id,
        "input": prompt,
        "expected": expected,
        "metadata": {},
        "assertion_types": kinds,
        "passed_baseline": None,
        "passed_final": None,
        "chosen": None,
        "outcome": None,
        "error": error,
        "attempts": [],
        "model_tokens": 0,
        "judge_tokens": 0,
        "grader_tokens": 0,
        "latency_s": 30.0,
    }


def _case(
    rng: random.Random,
    number: int,
    case_id: str,
    topic: tuple[str, str, str | None, list[str], str, str, list[str]],
) -> tuple[dict[str, Any], list[tuple[str, bool, bool]]]:
    _, prompt, expected, kinds, good, bad, defects = topic
    # Each attempt passes each assertion with a chance that grows with the attempt.
    attempts: list[dict[str, Any]] = []
    verdicts: list[list[bool]] = []
    for index in (1, 2, 3):
        chance = (0.55, 0.75, 0.85)[index - 1]
        passes = [rng.random() < chance for _ in kinds]
        # The loop judge mostly agrees with the oracle; now and then it is too lenient or strict.
        judge = all(passes) != (rng.random() < 0.12)
        if number == 31:  # one case that refinement made worse: a strict judge, a worse retry
            passes = [index == 1 for _ in kinds]
            judge = False
        verdicts.append(passes)
        attempts.append(_attempt(index, passes, judge, good, bad, defects))
        if judge or (number == 31 and index == 2):
            break
    if number in _HOSTILE:
        attempts[-1]["answer"] = _HOSTILE[number]
    chosen = attempts[-1]["index"]
    judged = sum(a["judge_passed"] is not None for a in attempts)
    messages = [
        {"role": "system", "content": "Answer briefly."},
        {"role": "user", "content": prompt},
    ]
    row: dict[str, Any] = {
        "id": case_id,
        "input": messages if number % 10 == 2 else prompt,
        "expected": expected,
        "metadata": {"topic": topic[0], "difficulty": ("easy", "medium", "hard")[number % 3]},
        "assertion_types": kinds,
        "passed_baseline": attempts[0]["oracle_passed"],
        "passed_final": attempts[-1]["oracle_passed"],
        "chosen": chosen,
        "outcome": "passed" if attempts[-1]["judge_passed"] else "best_attempt",
        "error": None,
        "attempts": attempts,
        "model_tokens": 180 * len(attempts) + rng.randint(0, 60),
        "judge_tokens": 90 * judged if "llm-rubric" in kinds else 0,
        "grader_tokens": 120 * len(attempts) if "llm-rubric" in kinds else 0,
        "latency_s": round(rng.uniform(0.4, 1.6) * len(attempts), 3),
    }
    log = [(kind, verdicts[0][i], verdicts[len(attempts) - 1][i]) for i, kind in enumerate(kinds)]
    return row, log


def _attempt(
    index: int, passes: list[bool], judge: bool, good: str, bad: str, defects: list[str]
) -> dict[str, Any]:
    failed = [i for i, ok in enumerate(passes) if not ok]
    # The loop judge's feedback names what it saw broken; a strict judge finds a nit.
    feedback = " ".join(defects[i] for i in failed) or "The answer could be more specific."
    return {
        "index": index,
        "answer": bad if failed else good,
        "judge_passed": judge,
        "oracle_passed": not failed,
        "failed_assertions": failed,
        "feedback": None if judge else feedback,
    }


def _summarise(
    results: list[dict[str, Any]],
    assertion_log: list[tuple[str, bool, bool]],
    latencies: list[float],
    tokens: dict[str, int],
) -> dict[str, Any]:
    scored = [r for r in results if r["error"] is None]
    n = len(scored)
    base = sum(r["passed_baseline"] for r in scored)
    final = sum(r["passed_final"] for r in scored)
    improved = sum(r["passed_final"] and not r["passed_baseline"] for r in scored)
    degraded = sum(r["passed_baseline"] and not r["passed_final"] for r in scored)
    lift = (final - base) / n
    # A paired interval: the normal approximation over the per-case differences.
    diffs = [int(r["passed_final"]) - int(r["passed_baseline"]) for r in scored]
    mean = sum(diffs) / n
    sd = math.sqrt(sum((d - mean) ** 2 for d in diffs) / (n - 1))
    half = 1.96 * sd / math.sqrt(n)
    histogram: dict[str, int] = {}
    for r in scored:
        key = str(len(r["attempts"]))
        histogram[key] = histogram.get(key, 0) + 1
    cells = {"tp": 0, "fp": 0, "fn": 0, "tn": 0}
    for r in scored:
        for a in r["attempts"]:
            if a["judge_passed"] is None:
                continue
            key = ("t" if a["judge_passed"] == a["oracle_passed"] else "f") + (
                "p" if a["judge_passed"] else "n"
            )
            cells[key] += 1
    total = sum(cells.values())
    po = (cells["tp"] + cells["tn"]) / total
    yes_judge, yes_oracle = cells["tp"] + cells["fp"], cells["tp"] + cells["fn"]
    pe = (yes_judge * yes_oracle + (total - yes_judge) * (total - yes_oracle)) / total**2
    per_assertion: dict[str, dict[str, float]] = {}
    for kind in dict.fromkeys(k for k, _, _ in assertion_log):
        rows = [(b, f) for k, b, f in assertion_log if k == kind]
        per_assertion[kind] = {
            "baseline_pass_rate": sum(b for b, _ in rows) / len(rows),
            "final_pass_rate": sum(f for _, f in rows) / len(rows),
        }
    ordered = sorted(latencies)
    return {
        "cases": len(results),
        "errors": len(results) - n,
        "baseline_pass_rate": base / n,
        "final_pass_rate": final / n,
        "lift": lift,
        "lift_ci95": [max(-1.0, min(lift, mean - half)), min(1.0, max(lift, mean + half))],
        "improved": improved,
        "degraded": degraded,
        "error_introduction_rate": degraded / base if base else 0.0,
        "attempts_histogram": dict(sorted(histogram.items())),
        "model_tokens": tokens["model"],
        "judge_tokens": tokens["judge"],
        "grader_tokens": tokens["grader"],
        "latency_s": {"p50": _quantile(ordered, 0.5), "p95": _quantile(ordered, 0.95)},
        "judge_agreement": {**cells, "kappa": None if pe == 1 else (po - pe) / (1 - pe)},
        "per_assertion": per_assertion,
        "results": results,
    }


def _quantile(ordered: list[float], q: float) -> float:
    position = (len(ordered) - 1) * q
    low = math.floor(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


ISLAND = re.compile(r'<script type="application/json" id="rows-data">(.*?)</script>', re.S)


def page_island(page: str) -> dict[str, Any]:
    """The JSON island of a report page: `page_size`, `noun`, `statuses` and `rows`."""
    found = ISLAND.findall(page)
    assert len(found) == 1, "a report page holds exactly one rows island"
    assert "<" not in found[0], "the island holds no '<': no text can end it"
    data: dict[str, Any] = json.loads(found[0])
    return data


def page_rows(page: str) -> list[dict[str, Any]]:
    """The rows a report page draws (each: `i` id, `s` status, `f`, `n`, `p` snippet, `b` body)."""
    rows: list[dict[str, Any]] = page_island(page)["rows"]
    return rows


def row_texts(row: dict[str, Any], name: str = "answer") -> list[str]:
    """The texts of a row's fields called `name` (in attempts and pairs too), in order."""
    found: list[str] = []

    def walk(blocks: list[Any]) -> None:
        for block in blocks:
            if block[0] == "text" and block[1] == name:
                found.append(block[2][1])
            elif block[0] == "attempt":
                found.extend(view[1] for field, view in block[1]["fields"] if field == name)
            elif block[0] == "pair":
                for _, side in block[1]:
                    walk(side)

    walk(row["b"])
    return found


if __name__ == "__main__":
    text = json.dumps(make_report(), ensure_ascii=False, indent=2)
    if len(sys.argv) > 1:
        with open(sys.argv[1], "w", encoding="utf-8") as out:
            out.write(text + "\n")
    else:
        print(text)
