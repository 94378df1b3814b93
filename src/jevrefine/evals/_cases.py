"""The case file: JSONL cases, their assertions, and the `CaseFileError` a bad file raises."""

from __future__ import annotations

import json
import math
import os
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any, Final

from ..exceptions import UserError
from ..structured import strict_json_loads
from ._python_refs import PythonReference, parse_reference
from ._schemas import schema_problem

__all__ = ["ASSERTION_TYPES", "Assertion", "Case", "CaseFileError", "load_cases"]

_TEXT_TYPES: Final = ("contains", "icontains", "starts-with", "llm-rubric")
_LIST_TYPES: Final = ("contains-any", "contains-all", "icontains-any", "icontains-all")
_SCHEMA_TYPES: Final = ("is-json", "contains-json")
_SCORED_TYPES: Final = ("python", "llm-rubric")

ASSERTION_TYPES: Final = (
    "equals",
    *_TEXT_TYPES[:3],
    *_LIST_TYPES,
    "regex",
    *_SCHEMA_TYPES,
    "python",
    "llm-rubric",
    "word-count",
)
"""Every assertion type (each may also be written with a `not-` prefix)."""

_CASE_KEYS: Final = ("id", "input", "system", "expected", "assert", "metadata")
_ASSERTION_KEYS: Final = ("type", "value", "threshold", "weight", "fence")
_FENCE_VALUES: Final = ("allow", "forbid")
_ROLES: Final = ("system", "user", "assistant")


class CaseFileError(UserError):
    """The case file is invalid; raised by `load_cases` before any model call.

    The message names the file, the line, the case id and (when one is at fault) the assertion's
    index, says what is wrong and what to write instead.
    """

    def __init__(
        self,
        message: str,
        *,
        line: int | None = None,
        case_id: str | None = None,
        assertion: int | None = None,
    ) -> None:
        super().__init__(message)
        self.line = line
        """The 1-based line number of the bad case (`None` for a file-level problem)."""
        self.case_id = case_id
        """The case's id, when it could be read."""
        self.assertion = assertion
        """The 0-based index of the bad assertion in the case's `assert` list, or `None`."""


@dataclass(frozen=True, slots=True)
class Assertion:
    """One check of a case's answer, with promptfoo's meaning of its `type`.

    Build cases with `load_cases`; the parsed helpers (`pattern`, `function`, `schema`) are set
    there, so a bad regex, schema or `python` reference fails before any model call.
    """

    index: int
    """The 0-based position in the case's `assert` list."""
    type: str
    """The type as written, e.g. `not-contains`."""
    value: Any = None
    """The assertion's value (text, list, schema, bounds, rubric or `module:function`)."""
    threshold: float | None = None
    """The pass bar of a `python` score or an `llm-rubric` P(yes) (default 0.5)."""
    weight: float = 1.0
    """How much it counts; 0 makes it informational (reported, never failing the case)."""
    pattern: re.Pattern[str] | None = field(default=None, compare=False, repr=False)
    """The compiled `regex`."""
    function: Callable[..., Any] | None = field(default=None, compare=False, repr=False)
    """The `python` function, when given as such; `load_cases` sets `reference` instead, which
    imports it at its first use (see `python_function`)."""
    schema: Mapping[str, Any] | None = field(default=None, compare=False, repr=False)
    """The JSON schema of `is-json` / `contains-json`, when given."""
    fence: bool = False
    """`is-json` only: the answer may be wrapped in one Markdown code fence (`"fence":
    "allow"`); its body is what must be JSON."""
    reference: PythonReference | None = field(default=None, compare=False, repr=False)
    """The checked `python` reference of a loaded case file, imported at its first use."""
    negated: bool = field(init=False, compare=False, repr=False)
    """Whether the type has the `not-` prefix."""
    base: str = field(init=False, compare=False, repr=False)
    """The type without its `not-` prefix."""

    def __post_init__(self) -> None:
        # Read on every check of every attempt: computed once.
        object.__setattr__(self, "negated", self.type.startswith("not-"))
        object.__setattr__(self, "base", self.type.removeprefix("not-"))

    @property
    def pass_bar(self) -> float:
        """The threshold a score is held against (0.5 when none was given)."""
        return 0.5 if self.threshold is None else self.threshold

    @property
    def counts(self) -> bool:
        """Whether it decides the case's pass (a weight above 0)."""
        return self.weight > 0

    def python_function(self) -> Callable[..., Any]:
        """The `python` assertion's function: `function`, else `reference` imported (once).

        Raises:
            UserError: no function, or the reference does not import as a function.
        """
        if self.function is not None:
            return self.function
        if self.reference is None:
            raise UserError(f"assertion {self.index} ({self.type}) has no python function")
        return self.reference.load()


@dataclass(frozen=True, slots=True)
class Case:
    """One evaluation case: the prompt, and the assertions that score its answer."""

    id: str
    """Unique in the file; the 1-based line number when the line gives none."""
    input: str | tuple[Mapping[str, str], ...]
    """The user's text, or the conversation (`{"role", "content"}` messages, last one a user's)."""
    assertions: tuple[Assertion, ...]
    """The oracle: every one must pass (weight above 0) for the answer to pass."""
    system: str | None = None
    """The system message, replacing the client's."""
    expected: str | None = None
    """A reference answer, given to graders and carried into the result row."""
    metadata: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))
    """Kept as is and carried into the result row."""
    line: int = 0
    """The 1-based line of the case file."""
    needs_grader: bool = field(init=False, compare=False, repr=False)
    """Whether an assertion is an `llm-rubric` (asked of a grader)."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "assertions", tuple(self.assertions))
        grader = any(a.base == "llm-rubric" for a in self.assertions)
        object.__setattr__(self, "needs_grader", grader)

    @property
    def question(self) -> str:
        """The conversation as the judge reads it, one `role: text` line per message."""
        lines = [f"system: {self.system}"] if self.system is not None else []
        if isinstance(self.input, str):
            lines.append(f"user: {self.input}")
        else:
            lines.extend(f"{m['role']}: {m['content']}" for m in self.input)
        return "\n".join(lines)


def load_cases(path: str | os.PathLike[str], *, allow_python_outside: bool = False) -> list[Case]:
    r"""Read a JSONL case file; every case and assertion is checked before anything runs.

    One JSON object a line (lines end at `\n` alone: a U+2028 or U+0085 inside a string is
    text): `id` (default: the 1-based line number; blank lines are skipped but counted),
    `input`, `system`, `expected`, `assert` (a non-empty list), `metadata`.

    A case file with `python` assertions is code: load only case files you trust. Their
    references are checked here without running anything, and imported at their first use.

    Args:
        path: the case file.
        allow_python_outside: let a `file.py:function` reference name a file outside the case
            file's folder (by default it must be inside it, symlinks resolved).

    Raises:
        CaseFileError: the file cannot be read, a line is not a case (a NaN or Infinity, or a
            number of more than 4,300 digits, included), an id repeats, or an assertion is
            invalid (unknown type, bad regex, a schema that is invalid, refers outside itself or
            to itself without end, a missing value, a bad `python` reference, a bad
            `threshold`, `weight` or `fence`).
    """
    source = Path(path)
    try:
        text = source.read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError) as exc:
        raise CaseFileError(f"cannot read the case file {str(source)!r}: {exc}") from None
    cases: list[Case] = []
    seen: dict[str, int] = {}
    for number, raw in enumerate(text.split("\n"), start=1):
        if not raw.strip():
            continue
        case = _parse_case(source, number, raw, allow_python_outside)
        if case.id in seen:
            raise CaseFileError(
                f"{source}:{number}: case {case.id!r}: the id is already used on line "
                f"{seen[case.id]}; give every case its own id",
                line=number,
                case_id=case.id,
            )
        seen[case.id] = number
        cases.append(case)
    if not cases:
        raise CaseFileError(f"{source}: the case file holds no case (one JSON object a line)")
    return cases


class _Where:
    """Builds the error messages of one line, naming the file, line, case and assertion."""

    def __init__(self, source: Path, line: int) -> None:
        self.source = source
        self.line = line
        self.case_id: str | None = None

    def error(self, problem: str, assertion: int | None = None) -> CaseFileError:
        where = f"{self.source}:{self.line}"
        if self.case_id is not None:
            where += f": case {self.case_id!r}"
        if assertion is not None:
            where += f", assertion {assertion}"
        return CaseFileError(
            f"{where}: {problem}", line=self.line, case_id=self.case_id, assertion=assertion
        )


def _parse_case(source: Path, number: int, raw: str, allow_outside: bool) -> Case:
    where = _Where(source, number)
    try:
        data = strict_json_loads(raw)
    except json.JSONDecodeError as exc:
        raise where.error(f"not valid JSON ({exc.msg} at column {exc.colno})") from None
    except RecursionError:
        raise where.error("not valid JSON (nested too deeply)") from None
    except ValueError as exc:  # NaN / Infinity, or past Python's 4,300-digit int limit
        reason = "a number of more than 4,300 digits" if "digits" in str(exc) else str(exc)
        raise where.error(f"not valid JSON ({reason[:120]})") from None
    if not isinstance(data, dict):
        raise where.error(f"a case is a JSON object, got {type(data).__name__}")
    raw_id = data.get("id", number)
    if isinstance(raw_id, bool) or not isinstance(raw_id, str | int) or str(raw_id) == "":
        raise where.error(f"id must be a non-empty string or an integer, got {raw_id!r}")
    where.case_id = str(raw_id)
    unknown = sorted(set(data) - set(_CASE_KEYS))
    if unknown:
        raise where.error(f"unknown key(s) {unknown}; a case takes {', '.join(_CASE_KEYS)}")
    system = _optional_text(where, data, "system")
    expected = _optional_text(where, data, "expected")
    metadata = data.get("metadata", {})
    if not isinstance(metadata, dict):
        raise where.error(f"metadata must be a JSON object, got {type(metadata).__name__}")
    asserts = data.get("assert")
    if not isinstance(asserts, list) or not asserts:
        raise where.error(
            'a case needs "assert": a non-empty list of assertions, e.g. '
            '[{"type": "icontains", "value": "Paris"}]'
        )
    assertions = tuple(
        _parse_assertion(where, i, a, source, allow_outside) for i, a in enumerate(asserts)
    )
    return Case(
        id=where.case_id,
        input=_parse_input(where, data.get("input")),
        assertions=assertions,
        system=system,
        expected=expected,
        metadata=MappingProxyType(metadata),
        line=number,
    )


def _optional_text(where: _Where, data: Mapping[str, Any], key: str) -> str | None:
    value = data.get(key)
    if value is not None and not isinstance(value, str):
        raise where.error(f"{key} must be a string, got {type(value).__name__}")
    return value


def _parse_input(where: _Where, value: Any) -> str | tuple[Mapping[str, str], ...]:
    if isinstance(value, str):
        if not value.strip():
            raise where.error("input is empty; write the prompt")
        return value
    if not isinstance(value, list) or not value:
        raise where.error(
            'input must be a string or a non-empty list of {"role", "content"} messages'
        )
    messages: list[Mapping[str, str]] = []
    for position, message in enumerate(value):
        if (
            not isinstance(message, dict)
            or set(message) != {"role", "content"}
            or message["role"] not in _ROLES
            or not isinstance(message["content"], str)
        ):
            raise where.error(
                f'input[{position}] must be {{"role": one of {list(_ROLES)}, "content": '
                f"text}}, got {message!r}"[:300]
            )
        messages.append(MappingProxyType(dict(message)))
    if messages[-1]["role"] != "user":
        raise where.error("the last message of input must be the user's (role: user)")
    return tuple(messages)


def _parse_assertion(
    where: _Where, index: int, data: Any, source: Path, allow_outside: bool
) -> Assertion:
    if not isinstance(data, dict):
        raise where.error(f'an assertion is an object {{"type", "value"}}, got {data!r}', index)
    unknown = sorted(set(data) - set(_ASSERTION_KEYS))
    if unknown:
        raise where.error(
            f"unknown key(s) {unknown}; an assertion takes {', '.join(_ASSERTION_KEYS)}", index
        )
    kind = data.get("type")
    base = kind.removeprefix("not-") if isinstance(kind, str) else None
    if base not in ASSERTION_TYPES:
        raise where.error(
            f"unknown assertion type {kind!r}; use one of {', '.join(ASSERTION_TYPES)} "
            "(each may be prefixed not-)",
            index,
        )
    assert isinstance(kind, str)
    assert base is not None
    threshold = _threshold(where, index, base, data)
    weight = data.get("weight", 1)
    if (
        isinstance(weight, bool)
        or not isinstance(weight, int | float)
        or not math.isfinite(weight)
        or weight < 0
    ):
        raise where.error(f"weight must be a number >= 0, got {weight!r}", index)
    if base == "equals" and "value" in data and data["value"] is None:
        parsed: dict[str, Any] = {"value": None}  # the JSON null, written out
    else:
        parsed = _parse_value(where, index, base, data.get("value"), source, allow_outside)
    fence = _fence(where, index, base, data)
    return Assertion(index, kind, threshold=threshold, weight=float(weight), fence=fence, **parsed)


def _fence(where: _Where, index: int, base: str, data: Mapping[str, Any]) -> bool:
    if "fence" not in data:
        return False
    if base != "is-json":
        extra = (
            " (contains-json finds the JSON inside a code fence already)"
            if base == "contains-json"
            else ""
        )
        raise where.error(f"fence applies to is-json only, not {base}{extra}; remove it", index)
    value = data["fence"]
    if value not in _FENCE_VALUES:
        raise where.error(
            f'fence must be "allow" (one surrounding ``` code fence is accepted) or "forbid" '
            f"(the default), got {value!r}"[:300],
            index,
        )
    return bool(value == "allow")


def _threshold(where: _Where, index: int, base: str, data: Mapping[str, Any]) -> float | None:
    if "threshold" not in data:
        return None
    value = data["threshold"]
    if base not in _SCORED_TYPES:
        raise where.error(
            f"threshold applies to python and llm-rubric scores only, not {base}; remove it",
            index,
        )
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= 1:
        raise where.error(f"threshold must be a number from 0 to 1, got {value!r}", index)
    return float(value)


def _parse_value(
    where: _Where, index: int, base: str, value: Any, source: Path, allow_outside: bool
) -> dict[str, Any]:
    def missing(what: str) -> CaseFileError:
        return where.error(f"{base} needs a value: {what}, got {value!r}"[:300], index)

    if base == "equals":
        if value is None:
            raise missing("the exact answer")
        return {"value": value}
    if base in _TEXT_TYPES:
        if isinstance(value, int | float) and not isinstance(value, bool):
            value = str(value)
        if not isinstance(value, str) or not value:
            raise missing("a non-empty string")
        return {"value": value}
    if base in _LIST_TYPES:
        if isinstance(value, str):  # promptfoo also takes "a, b, c"
            value = [part.strip() for part in value.split(",") if part.strip()]
        if (
            not isinstance(value, list)
            or not value
            or not all(isinstance(v, str) and v for v in value)
        ):
            raise missing("a non-empty list of non-empty strings")
        return {"value": tuple(value)}
    if base == "regex":
        if not isinstance(value, str) or not value:
            raise missing("a regular expression (Python re, flags inline, e.g. (?i))")
        try:
            return {"value": value, "pattern": re.compile(value)}
        except re.error as exc:
            raise where.error(f"bad regex {value!r}: {exc}", index) from None
    if base in _SCHEMA_TYPES:
        if value is None:
            return {}
        return {"value": value, "schema": _schema(where, index, value)}
    if base == "word-count":
        return {"value": _word_bounds(where, index, value)}
    if not isinstance(value, str) or ":" not in value:
        raise missing('"module:function" (or "file.py:function", beside the case file)')
    reference = _python_reference(where, index, value, source, allow_outside)
    return {"value": value, "reference": reference}


def _word_bounds(where: _Where, index: int, value: Any) -> Mapping[str, int]:
    if not isinstance(value, dict) or not value or set(value) - {"min", "max"}:
        raise where.error(
            f'word-count needs a value {{"min": n, "max": n}} (either optional), got {value!r}',
            index,
        )
    for key, bound in value.items():
        if isinstance(bound, bool) or not isinstance(bound, int) or bound < 0:
            raise where.error(f"word-count {key} must be an integer >= 0, got {bound!r}", index)
    if "min" in value and "max" in value and value["min"] > value["max"]:
        raise where.error(
            f"word-count min {value['min']} is above max {value['max']}; swap them", index
        )
    return MappingProxyType(dict(value))


def _schema(where: _Where, index: int, value: Any) -> Mapping[str, Any]:
    if not isinstance(value, dict):
        raise where.error(
            f"the value of a JSON assertion is a JSON schema object, got {value!r}"[:300], index
        )
    try:
        import jsonschema  # type: ignore[import-untyped,unused-ignore]  # noqa: F401
    except ImportError:
        raise where.error(
            "checking JSON against a schema needs jsonschema: pip install jsonschema", index
        ) from None
    problem = schema_problem(value)
    if problem is not None:
        raise where.error(problem, index)
    return MappingProxyType(value)


def _python_reference(
    where: _Where, index: int, reference: str, source: Path, allow_outside: bool
) -> PythonReference:
    try:
        return parse_reference(reference, source.parent, allow_outside=allow_outside)
    except ValueError as exc:
        raise where.error(f"python reference {reference!r}: {exc}", index) from None


def word_count(text: str) -> int:
    """Words as `word-count` counts them: runs of non-whitespace."""
    return len(text.split())


def as_messages(case: Case) -> Sequence[Mapping[str, str]]:
    """The case's input as messages (a string input is one user message)."""
    if isinstance(case.input, str):
        return ({"role": "user", "content": case.input},)
    return case.input
