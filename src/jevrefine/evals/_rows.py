"""A stored result row of `evaluate`: read back only when it is well formed and still current.

A rows file (`jevrefine eval --out`) is read again to resume, and it is a file anyone can edit:
every row is validated when read (`read_row`), with every number bounded, so a hand edit or a
tampered file is a row that runs again, never a traceback. And a row is reused only for the case
it was made from, in the setup it was made in: each row stores `fingerprint`, the SHA-256 of the
canonical JSON of the case (input, system, expected, assertions) and of the setup (model, judge,
attempts, sampling options...). Change any of them and the case runs again.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Mapping
from typing import Annotated, Any, Final, Literal

import pydantic

from ..structured import strict_json_loads
from ._cases import Assertion, Case

__all__ = ["case_fingerprint", "read_row", "row_problem"]

_MAX_COUNT: Final = 10**15
"""Tokens, indexes, counts: far above any real run, far below anything that overflows a float."""
_MAX_SECONDS: Final = 10.0**9

_Count = Annotated[int, pydantic.Field(ge=0, le=_MAX_COUNT)]
_Index = Annotated[int, pydantic.Field(ge=1, le=_MAX_COUNT)]


class _Row(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(strict=True, extra="allow", frozen=True)


class _AttemptRow(_Row):
    index: _Index
    answer: str
    judge_passed: bool | None
    oracle_passed: bool
    failed_assertions: list[Annotated[int, pydantic.Field(ge=0, le=_MAX_COUNT)]]
    feedback: str | None = None
    escalated: list[str] = []
    echo: bool = False


class _Message(_Row):
    model_config = pydantic.ConfigDict(strict=True, extra="forbid", frozen=True)
    role: Literal["system", "user", "assistant"]
    content: str


class _EvalRow(_Row):
    id: str
    input: str | list[_Message]
    expected: str | None = None
    metadata: dict[str, Any] = {}
    assertion_types: list[str]
    passed_baseline: bool | None
    passed_final: bool | None
    passed_final_answered: bool | None = None
    chosen: _Index | None
    outcome: str | None = None
    error: str | None
    attempts: list[_AttemptRow]
    model_tokens: _Count = 0
    judge_tokens: _Count = 0
    grader_tokens: _Count = 0
    latency_s: Annotated[float, pydantic.Field(ge=0, le=_MAX_SECONDS, allow_inf_nan=False)]
    fingerprint: str | None = None


def row_problem(row: Any) -> str | None:
    """Why `row` is no result row `evaluate` could have written (one clause), or `None`."""
    if not isinstance(row, dict):
        return f"a row is a JSON object, got {type(row).__name__}"
    try:
        parsed = _EvalRow.model_validate(row)
    except pydantic.ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "the row"
        return f"{where}: {first['msg']}"[:200]
    count = len(parsed.assertion_types)
    for attempt in parsed.attempts:
        if any(index >= count for index in attempt.failed_assertions):
            return f"attempt {attempt.index} names an assertion past the case's {count}"
    indexes = [a.index for a in parsed.attempts]
    if indexes != list(range(1, len(indexes) + 1)):
        return "the attempts are not numbered 1, 2, ... in order"
    if parsed.error is None:
        if not parsed.attempts or parsed.chosen is None or parsed.chosen > len(indexes):
            return "a row without an error needs its attempts and the chosen one"
        if parsed.passed_baseline is None or parsed.passed_final is None:
            return "a row without an error needs passed_baseline and passed_final"
    return None


def read_row(line: bytes) -> dict[str, Any] | str:
    """One line of a rows file: the row, or why it is none (never raises).

    The JSON is read strictly (no NaN or Infinity; a number of more than 4,300 digits is a bad
    row, not a `ValueError`).
    """
    try:
        value = strict_json_loads(line.decode("utf-8"))
    except UnicodeDecodeError:
        return "not valid UTF-8"
    except RecursionError:
        return "not valid JSON (nested too deeply)"
    except ValueError as exc:
        reason = "a number of more than 4,300 digits" if "digits" in str(exc) else "not valid JSON"
        return reason if reason != "not valid JSON" else f"not valid JSON ({str(exc)[:80]})"
    problem = row_problem(value)
    return problem if problem is not None else value


def case_fingerprint(case: Case, setup: Mapping[str, Any]) -> str:
    """The SHA-256 (hex) of the canonical JSON of `case`'s content and of `setup`.

    The case's content is what decides its verdict: input, system message, expected answer and
    every assertion (type, value, threshold, weight, fence). Its id, line and metadata are not.
    `setup` is whatever else does (the model, the judge, the attempts, the sampling options): a
    JSON-ready mapping chosen by the caller.
    """
    content = {
        "input": case.input if isinstance(case.input, str) else [dict(m) for m in case.input],
        "system": case.system,
        "expected": case.expected,
        "assert": [_assertion(a) for a in case.assertions],
        "setup": setup,
    }
    canonical = json.dumps(
        content, sort_keys=True, separators=(",", ":"), ensure_ascii=True, default=_plain
    )
    return hashlib.sha256(canonical.encode("ascii")).hexdigest()


def _assertion(assertion: Assertion) -> dict[str, Any]:
    return {
        "type": assertion.type,
        "value": assertion.value,
        "threshold": assertion.threshold,
        "weight": assertion.weight,
        "fence": assertion.fence,
    }


def _plain(value: Any) -> Any:
    """What `json.dumps` cannot write as is: read-only mappings, tuples, other numbers."""
    if isinstance(value, Mapping):
        return dict(value)
    if isinstance(value, tuple | set | frozenset):
        return list(value)
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    return repr(value)
