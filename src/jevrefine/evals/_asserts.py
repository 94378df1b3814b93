"""The oracle: each assertion's verdict on an answer, with one sentence saying what is wrong.

Every sentence names the broken constraint and, where it helps the model fix it, the answer's
current value ("The answer has 31 words; use at most 15."). The same sentences are the loop
judge's defects under `judge="asserts"`.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final

from ..exceptions import UserError
from ..messages import Usage
from ..structured import fenced_body, strict_json_decoder, strict_json_loads
from ._bounded import DEFAULT_CHECK_TIMEOUT, CheckTimeout, CheckWorker, call_bounded
from ._cases import Assertion, Case, word_count

if TYPE_CHECKING:
    from ..jev.protocol import SystemOneClient

__all__ = [
    "AssertionResult",
    "Memo",
    "Scored",
    "check_code",
    "check_one",
    "json_equal",
    "rubric_question",
    "score_answer",
]

_MAX_JSON_STARTS: Final = 256
"""contains-json tries this many `{` / `[` positions at most: a huge answer stays linear-ish."""
_QUOTE_LIMIT: Final = 60


@dataclass(frozen=True, slots=True)
class AssertionResult:
    """One assertion's verdict on one answer."""

    index: int
    """The assertion's 0-based index in its case."""
    passed: bool
    """Whether it held (after the `not-` prefix)."""
    defect: str = ""
    """One sentence naming the broken constraint; empty when it passed."""


@dataclass(frozen=True, slots=True)
class Scored:
    """The oracle's verdict on one answer: every assertion's result, and the grader's tokens."""

    results: tuple[AssertionResult, ...]
    """One per assertion, in the case's order."""
    passed: bool
    """Every assertion with a weight above 0 held."""
    failed: list[int]
    """The indexes of the assertions that failed (informational ones included)."""
    grader_usage: Usage = field(default_factory=Usage)
    """The tokens the `llm-rubric` grading took."""


def _quote(text: str) -> str:
    """A short, one-line quotation of `text`."""
    cut = text if len(text) <= _QUOTE_LIMIT else text[:_QUOTE_LIMIT] + "…"
    return repr(cut)


def _listed(values: Sequence[str]) -> str:
    return ", ".join(_quote(v) for v in values)


def _result(assertion: Assertion, held: bool, defect: str, negated_defect: str) -> AssertionResult:
    """Apply the `not-` prefix: the assertion passes when `held` differs from `negated`."""
    passed = held != assertion.negated
    if passed:
        return AssertionResult(assertion.index, True)
    return AssertionResult(assertion.index, False, negated_defect if assertion.negated else defect)


async def check_code(
    assertion: Assertion, answer: str, worker: CheckWorker | None = None
) -> AssertionResult:
    """The verdict of an assertion that code decides (every type but python and llm-rubric).

    A `regex`, or a JSON schema, is checked in `worker` (bounded in time; a check past the
    bound is a failed assertion saying so). Without one, a worker is started for this check.

    Raises:
        CheckWorkerError: the check worker failed.
    """
    if assertion.base in ("regex", "is-json", "contains-json") and worker is None:
        async with CheckWorker() as own:
            return await check_code(assertion, answer, own)
    base = assertion.base
    value = assertion.value
    if base == "equals":
        return _equals(assertion, answer)
    if base in ("contains", "icontains"):
        fold = base == "icontains"
        held = _norm(value, fold) in _norm(answer, fold)
        case = " (in any letter case)" if fold else ""
        return _result(
            assertion,
            held,
            f"The answer must contain {_quote(value)}{case}.",
            f"The answer must not contain {_quote(value)}{case}.",
        )
    if base in ("contains-any", "contains-all", "icontains-any", "icontains-all"):
        return _contains_many(assertion, answer)
    if base == "starts-with":
        start = answer.lstrip()
        return _result(
            assertion,
            start.startswith(value),
            f"The answer must start with {_quote(value)}; it starts with "
            f"{_quote(start[: max(len(value), 12)])}.",
            f"The answer must not start with {_quote(value)}.",
        )
    assert worker is not None or base not in ("regex", "is-json", "contains-json")
    if base == "regex":
        assert worker is not None
        return await _regex(assertion, answer, worker)
    if base == "is-json":
        assert worker is not None
        return await _is_json(assertion, answer, worker)
    if base == "contains-json":
        assert worker is not None
        return await _contains_json(assertion, answer, worker)
    if base == "word-count":
        return _word_count(assertion, answer)
    raise AssertionError(f"not a code assertion: {assertion.type}")  # pragma: no cover


def _norm(text: str, fold: bool) -> str:
    return text.casefold() if fold else text


def _timed_out(assertion: Assertion, what: str, seconds: float) -> AssertionResult:
    """A check past its bound: failed, `not-` or not (no verdict is no pass)."""
    return AssertionResult(
        assertion.index, False, f"{what} took longer than {seconds:g} s on this answer."
    )


async def _regex(assertion: Assertion, answer: str, worker: CheckWorker) -> AssertionResult:
    value = assertion.value
    try:
        match = await worker.search(value, answer)
    except CheckTimeout as exc:
        return _timed_out(assertion, "The regular expression", exc.seconds)
    found = _quote(match) if match is not None else "''"
    return _result(
        assertion,
        match is not None,
        f"The answer must match the regular expression {_quote(value)}.",
        f"The answer must not match the regular expression {_quote(value)}; it contains {found}.",
    )


def json_equal(left: Any, right: Any) -> bool:
    """Equality of two JSON values as JSON means it (Python's `==` says `True == 1`).

    A boolean is no number (`true` is not `1`, `false` is not `0`), `null` is only `null`; numbers
    compare by value, so `1` equals `1.0` (JSON has one number type: `JSON.parse` reads both as
    the same number); objects by their keys and values, arrays item by item in order.
    """
    # Iterative: an answer nested a thousand deep never overflows the stack.
    pending = [(left, right)]
    while pending:
        a, b = pending.pop()
        if isinstance(a, bool) or isinstance(b, bool) or a is None or b is None:
            if a is not b:
                return False
        elif (isinstance(a, int | float) and isinstance(b, int | float)) or (
            isinstance(a, str) and isinstance(b, str)
        ):
            if a != b:
                return False
        elif isinstance(a, list | tuple) and isinstance(b, list | tuple):
            if len(a) != len(b):
                return False
            pending.extend(zip(a, b, strict=True))
        elif isinstance(a, Mapping) and isinstance(b, Mapping):
            if a.keys() != b.keys():
                return False
            pending.extend((a[key], b[key]) for key in a)
        else:
            return False
    return True


def _equals(assertion: Assertion, answer: str) -> AssertionResult:
    expected = assertion.value
    if isinstance(expected, str):
        # Surrounding whitespace is not part of an answer (models end with a newline).
        held = answer.strip() == expected.strip()
        shown = _quote(expected)
    else:
        try:
            held = json_equal(strict_json_loads(answer), expected)
        except (ValueError, RecursionError):
            held = False
        shown = f"the JSON {_quote(json.dumps(expected, ensure_ascii=False))}"
    return _result(
        assertion,
        held,
        f"The answer must be exactly {shown}; it is {_quote(answer.strip())}.",
        f"The answer must not be exactly {shown}.",
    )


def _contains_many(assertion: Assertion, answer: str) -> AssertionResult:
    fold = assertion.base.startswith("i")
    text = _norm(answer, fold)
    values: tuple[str, ...] = assertion.value
    present = [v for v in values if _norm(v, fold) in text]
    absent = [v for v in values if _norm(v, fold) not in text]
    case = " (in any letter case)" if fold else ""
    if assertion.base.endswith("-any"):
        return _result(
            assertion,
            bool(present),
            f"The answer must contain at least one of {_listed(values)}{case}.",
            f"The answer must contain none of {_listed(values)}{case}; it contains "
            f"{_listed(present)}.",
        )
    return _result(
        assertion,
        not absent,
        f"The answer must contain all of {_listed(values)}{case}; it lacks {_listed(absent)}.",
        f"The answer must not contain all of {_listed(values)}{case} together.",
    )


async def _schema_match(
    assertion: Assertion, values: list[Any], worker: CheckWorker
) -> tuple[int | None, str] | AssertionResult:
    """The first of `values` the schema accepts (or why none), or a timed-out result."""
    if assertion.schema is None:
        return (0, "") if values else (None, "")
    try:
        return await worker.schema_match(_plain(assertion.schema), values)
    except CheckTimeout as exc:
        return _timed_out(assertion, "Checking the JSON schema", exc.seconds)


def _plain(value: Any) -> Any:
    """A schema as plain JSON types (`load_cases` keeps it read-only)."""
    return json.loads(json.dumps(value, default=dict))


def _parse_problem(exc: BaseException) -> str:
    if isinstance(exc, json.JSONDecodeError):
        return f"it failed to parse at line {exc.lineno} column {exc.colno} ({exc.msg})"
    if isinstance(exc, RecursionError):
        return "it nests too deeply"
    if "digits" in str(exc):
        return "it has a number of more than 4,300 digits"
    # NaN, Infinity, -Infinity, 1e999: Python reads them, JSON has no such number.
    return f"{exc} (JSON has no NaN or Infinity)"


def _json_text(assertion: Assertion, answer: str) -> str:
    """The text that must be JSON: the answer, or the body of its one surrounding code fence."""
    if not assertion.fence:
        return answer
    stripped = answer.strip()
    if stripped.startswith("```") and stripped.endswith("```") and stripped.count("```") == 2:
        body = fenced_body(stripped)
        if body is not None:
            return body
    return answer


async def _is_json(assertion: Assertion, answer: str, worker: CheckWorker) -> AssertionResult:
    try:
        value = strict_json_loads(_json_text(assertion, answer))
    except (ValueError, RecursionError) as exc:
        fence = " (or one ```json code fence holding it)" if assertion.fence else ""
        defect = f"The answer must be valid JSON{fence}; {_parse_problem(exc)}."
        return _result(assertion, False, defect, "")
    matched = await _schema_match(assertion, [value], worker)
    if isinstance(matched, AssertionResult):
        return matched
    index, problem = matched
    return _result(
        assertion,
        index is not None,
        f"The answer's JSON must match the schema; {problem}.",
        "The answer must not be valid JSON"
        + (" matching the schema." if assertion.schema is not None else "."),
    )


def _json_candidates(answer: str) -> list[Any]:
    """The JSON objects and arrays found at the first `_MAX_JSON_STARTS` `{` / `[` positions."""
    decoder = strict_json_decoder()
    found: list[Any] = []
    tried = 0
    for position, char in enumerate(answer):
        if char not in "{[":
            continue
        tried += 1
        if tried > _MAX_JSON_STARTS:
            break
        try:
            value, _ = decoder.raw_decode(answer, position)
        except (ValueError, RecursionError):
            continue
        found.append(value)
    return found


async def _contains_json(assertion: Assertion, answer: str, worker: CheckWorker) -> AssertionResult:
    candidates = _json_candidates(answer)
    matched = await _schema_match(assertion, candidates, worker)
    if isinstance(matched, AssertionResult):
        return matched
    index, problem = matched
    if index is not None:
        return _result(assertion, True, "", _contains_json_negated(assertion))
    if candidates:
        defect = f"The answer's JSON must match the schema; {problem}."
    else:
        defect = "The answer must contain a JSON object or array; none parses."
    return _result(assertion, False, defect, _contains_json_negated(assertion))


def _contains_json_negated(assertion: Assertion) -> str:
    if assertion.schema is not None:
        return "The answer must not contain JSON matching the schema."
    return "The answer must not contain a JSON object or array."


def _word_count(assertion: Assertion, answer: str) -> AssertionResult:
    bounds: Mapping[str, int] = assertion.value
    low, high = bounds.get("min"), bounds.get("max")
    count = word_count(answer)
    held = (low is None or count >= low) and (high is None or count <= high)
    if low is not None and high is not None:
        wanted = f"{low} to {high}"
        fix = f"use {wanted}"
    elif high is not None:
        wanted, fix = f"at most {high}", f"use at most {high}"
    else:
        wanted, fix = f"at least {low}", f"use at least {low}"
    noun = "word" if count == 1 else "words"
    return _result(
        assertion,
        held,
        f"The answer has {count} {noun}; {fix}.",
        f"The answer has {count} {noun}; it must not have {wanted}.",
    )


def python_context(case: Case, assertion: Assertion) -> dict[str, Any]:
    """The context dict a `python` assertion's function gets (its second argument)."""
    return {
        "case_id": case.id,
        "input": case.input if isinstance(case.input, str) else [dict(m) for m in case.input],
        "system": case.system,
        "expected": case.expected,
        "metadata": dict(case.metadata),
        "assertion_index": assertion.index,
        "threshold": assertion.pass_bar,
    }


async def check_python(
    assertion: Assertion, answer: str, case: Case, seconds: float = DEFAULT_CHECK_TIMEOUT
) -> AssertionResult:
    """Call a `python` assertion's function: a bool, or a score in [0, 1] held to the threshold.

    The function is imported at its first call; it is trusted code (the case file's). A sync
    one runs in a daemon thread, an async one on the loop, each bounded by `seconds`: past it,
    the assertion fails saying so.

    Raises:
        UserError: the reference does not import as a function, or it returned something else.
        Exception: whatever the function raised (a bug in it: the case errors).
    """
    function = assertion.python_function()
    try:
        returned = await call_bounded(function, seconds, answer, python_context(case, assertion))
    except CheckTimeout:
        return _timed_out(assertion, f"The python check {assertion.value}", seconds)
    bar = assertion.pass_bar
    reference = assertion.value
    if isinstance(returned, bool):
        held, detail = returned, ""
    elif isinstance(returned, int | float) and math.isfinite(returned) and 0 <= returned <= 1:
        held, detail = returned >= bar, f" (score {returned:.2f}, needed {bar:.2f})"
    else:
        raise UserError(
            f"python assertion {assertion.index} ({reference}) returned {returned!r:.80}; "
            "return a bool or a number from 0 to 1"
        )
    return _result(
        assertion,
        held,
        f"The answer fails the check {reference}{detail}.",
        f"The answer must not pass the check {reference}{detail}.",
    )


def rubric_question(rubric: str) -> str:
    """The noul asked of the grader for an `llm-rubric`."""
    return f"Does `assistant_answer` meet this rubric: {rubric}"


def rubric_state(case: Case, answer: str) -> dict[str, Any]:
    """The state the grader reads: the conversation, the answer, the reference when given."""
    state: dict[str, Any] = {"user_question": case.question, "assistant_answer": answer}
    if case.expected is not None:
        state["expected_output"] = case.expected
    return state


async def grade_rubrics(
    case: Case, answer: str, grader: SystemOneClient
) -> tuple[list[AssertionResult], Usage]:
    """Ask every `llm-rubric` of the case in one grader call; their results and its tokens."""
    from ..jev.questions import Noul
    from ..jev.responses import NoulAnswer

    rubrics = [a for a in case.assertions if a.base == "llm-rubric"]
    questions = {f"rubric_{a.index}": Noul(rubric_question(a.value)) for a in rubrics}
    response = await grader.system_one(rubric_state(case, answer), questions)
    results = []
    for assertion in rubrics:
        got = response.answers.get(f"rubric_{assertion.index}")
        if not isinstance(got, NoulAnswer):
            raise UserError(
                f"the grader gave no yes/no answer for llm-rubric assertion {assertion.index} "
                f"(got {type(got).__name__})"
            )
        bar = assertion.pass_bar
        detail = f" (P(yes) {got.noul:.2f}, needed {bar:.2f})"
        results.append(
            _result(
                assertion,
                got.noul >= bar,
                f"The answer does not meet the rubric {_quote(assertion.value)}{detail}.",
                f"The answer must not meet the rubric {_quote(assertion.value)}{detail}.",
            )
        )
    return results, response.usage


class Memo:
    """One case's assertion results by (assertion index, answer).

    The loop judge (`judge="asserts"`) and the oracle check the same answers against the same
    assertions: each is checked once, and a `python` function is called once per distinct answer.
    """

    __slots__ = ("results", "worker")

    def __init__(self, worker: CheckWorker | None = None) -> None:
        self.results: dict[tuple[int, str], AssertionResult] = {}
        self.worker = worker
        """Runs the regex and schema checks, bounded (`evaluate`'s; `None`: one per check)."""

    def failures(self, case: Case, answer: str) -> list[int] | None:
        """The failed assertions' indexes when every one is known for `answer`, else `None`.

        The fast path of the oracle: under `judge="asserts"` the loop judge has already
        checked each attempt's answer against every assertion but the `llm-rubric` ones.
        """
        if case.needs_grader:
            return None
        failed = []
        results = self.results
        for assertion in case.assertions:
            found = results.get((assertion.index, answer))
            if found is None:
                return None
            if not found.passed:
                failed.append(assertion.index)
        return failed


def case_passes(case: Case, failed: Sequence[int]) -> bool:
    """Whether a case passes with these assertions failed: none of them has a weight above 0."""
    return not any(case.assertions[index].counts for index in failed)


async def check_one(
    assertion: Assertion, answer: str, case: Case, memo: Memo | None = None
) -> AssertionResult:
    """The verdict of one code or `python` assertion, from `memo` when it has it."""
    key = (assertion.index, answer)
    found = memo.results.get(key) if memo is not None else None
    if found is None:
        worker = memo.worker if memo is not None else None
        if assertion.base == "python":
            seconds = worker.timeout if worker is not None else DEFAULT_CHECK_TIMEOUT
            found = await check_python(assertion, answer, case, seconds)
        else:
            found = await check_code(assertion, answer, worker)
        if memo is not None:
            memo.results[key] = found
    return found


async def score_answer(
    case: Case, answer: str, grader: SystemOneClient | None, memo: Memo | None = None
) -> Scored:
    """The oracle's verdict on `answer`: every assertion of `case` (`memo`: see `Memo`).

    Raises:
        UserError: an `llm-rubric` with no grader, or a `python` function's bad return value.
        Exception: whatever a `python` function or the grader raised.
    """
    found: dict[int, AssertionResult] = {}
    usage = Usage()
    known = memo.results if memo is not None else {}
    for assertion in case.assertions:
        if assertion.base != "llm-rubric":
            # Most are already known from the loop judge: no coroutine for a memo hit.
            hit = known.get((assertion.index, answer))
            found[assertion.index] = hit or await check_one(assertion, answer, case, memo)
    if case.needs_grader:
        if grader is None:
            raise UserError(f"case {case.id!r} has an llm-rubric assertion: pass grader=")
        graded, usage = await grade_rubrics(case, answer, grader)
        found.update((r.index, r) for r in graded)
    results = tuple(found[a.index] for a in case.assertions)
    failed = [r.index for r in results if not r.passed]
    return Scored(results, case_passes(case, failed), failed, usage)
