"""Fuzz (hypothesis) of the CLI's JSONL and TOML readers and of Retry-After (issue 16 item 12).

Each reader either returns or raises its documented typed error: a JSONL line is a `Record` or a
`BadLine`; a config file is a `CliConfig` or a `ConfigError`; Retry-After is a finite number of
seconds >= 0, or `None`. A short run by default; `JEVREFINE_FUZZ_EXAMPLES=5000` for a long one.
"""

from __future__ import annotations

import json
import math
import os
from email.utils import format_datetime
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("hypothesis", reason="the fuzz tests need hypothesis (a dev dependency)")

from datetime import UTC, datetime, timedelta, timezone

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from jevrefine._http._headers import parse_retry_after
from jevrefine.cli._config import CliConfig, ConfigError, load_config
from jevrefine.cli._io import BadLine, Record, json_line, parse_line

EXAMPLES = int(os.environ.get("JEVREFINE_FUZZ_EXAMPLES", "100"))
# A long run gets time in proportion; the short one keeps the suite's 120 s per test.
pytestmark = pytest.mark.timeout(max(120, EXAMPLES // 4))
FUZZ = settings(
    max_examples=EXAMPLES,
    deadline=None,
    derandomize=True,  # the same examples on every run: deterministic CI
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)

# Text with what st.text() leaves out: lone surrogates, NUL, a byte-order mark, huge digit runs.
odd_text = st.one_of(
    st.text(max_size=30),
    st.sampled_from(["\ud800", "\udfff", "a\udc80b", "\x00", "\ufeff", "\u2028", "9" * 300]),
)
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | odd_text,
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(odd_text, children, max_size=4)
    ),
    max_leaves=20,
)
near_records = st.fixed_dictionaries(
    {},
    optional={
        "id": json_values | st.integers(min_value=-(10**4000), max_value=10**4000),
        "prompt": json_values,
        "question": json_values,
        "answer": json_values,
        "expected_output": json_values,
    },
)


def _lines() -> st.SearchStrategy[bytes]:
    as_json = (near_records | json_values).map(
        lambda v: json.dumps(v).encode("utf-8", "surrogatepass")
    )
    # Whole lines of junk, and valid lines with a few bytes changed (a Latin-1 é, a cut-off tail).
    mangled = st.tuples(as_json, st.integers(0, 200), st.binary(min_size=1, max_size=3)).map(
        lambda t: t[0][: t[1]] + t[2] + t[0][t[1] :]
    )
    return st.one_of(st.binary(max_size=200), as_json, mangled)


@FUZZ
@given(_lines(), st.sampled_from([("prompt",), ("question", "answer")]))
def test_jsonl_lines_are_records_or_bad_lines(line: bytes, required: tuple[str, ...]) -> None:
    """Promise: any bytes on a line give a record with usable text fields, or a bad line."""
    optional = ("expected_output",) if len(required) == 2 else ()
    result = parse_line(7, line, required=required, id_field="id", optional=optional)
    if isinstance(result, BadLine):
        assert result.line == 7
        assert result.reason
        return
    assert isinstance(result, Record)
    assert isinstance(result.id, str)
    for name in (*required, *optional):
        value = result.fields.get(name)
        if name in required or value is not None:
            assert isinstance(value, str)
            value.encode("utf-8")  # no lone surrogate reaches a model


@FUZZ
@given(st.dictionaries(odd_text, json_values, max_size=6))
def test_output_lines_are_utf8_and_read_back_the_same(row: dict[str, Any]) -> None:
    """Promise: every output row is valid UTF-8 JSON and reads back equal (NaN aside)."""
    line = json_line(row)
    data = line.encode("utf-8")  # raises on a lone surrogate
    assert b"\n" not in data
    back = json.loads(data.decode("utf-8"))
    assert json.dumps(back, sort_keys=True) == json.dumps(
        json.loads(json.dumps(row)), sort_keys=True
    )


# TOML: documents shaped like jevrefine.toml (real sections and keys, hostile values), and junk.
SECTION_KEYS = {
    "model": ["provider", "name", "base_url", "system", "temperature", "max_tokens", "zzz"],
    "judge": [
        "kind", "provider", "name", "base_url", "success_rating", "min_confidence",
        "fail_fast", "fail_on_inconclusive", "fail_on_error", "criteria",
    ],
    "refine": ["max_repeat_attempts", "fail_on_exhausted_attempts", "token_budget"],
    "run": ["concurrency", "prompt_field", "id_field"],
}  # fmt: skip
CRITERION_KEYS = [
    "kind", "name", "question", "when_true", "when_false", "minimum", "options", "accept",
    "levels", "when_chosen", "when_passed", "max_length", "min_length", "pattern",
    "must_contain", "must_not_contain", "ignore_case", "defect",
]  # fmt: skip
KNOWN_WORDS = ["rating", "jev", "model", "none", "noul", "choice", "score", "check", "openai",
               "local", "auto", "anthropic", "[", "(?P<", "a", ""]  # fmt: skip


def _toml_string(text: str) -> str:
    # A TOML basic string; a lone surrogate becomes an escape TOML refuses: a parse error.
    return json.dumps(text)


toml_scalars = st.one_of(
    st.integers().map(str),
    st.just("9" * 5000),
    st.floats().map(lambda f: "nan" if math.isnan(f) else ("inf" if f > 0 else "-inf")
                    if math.isinf(f) else repr(f)),
    st.booleans().map(lambda b: "true" if b else "false"),
    (odd_text | st.sampled_from(KNOWN_WORDS)).map(_toml_string),
)  # fmt: skip
toml_values = st.recursive(
    toml_scalars,
    lambda children: st.one_of(
        st.lists(children, max_size=3).map(lambda items: "[" + ", ".join(items) + "]"),
        st.dictionaries(st.sampled_from(CRITERION_KEYS), children, max_size=4).map(
            lambda table: "{" + ", ".join(f"{k} = {v}" for k, v in table.items()) + "}"
        ),
    ),
    max_leaves=12,
)


@st.composite
def toml_documents(draw: st.DrawFn) -> bytes:
    parts: list[str] = []
    for section in draw(st.lists(st.sampled_from(list(SECTION_KEYS)), max_size=4, unique=True)):
        keys = draw(st.lists(st.sampled_from(SECTION_KEYS[section]), max_size=5, unique=True))
        parts.append(f"[{section}]")
        parts += [f"{key} = {draw(toml_values)}" for key in keys]
    return "\n".join(parts).encode("utf-8", "surrogatepass")


flag_values = st.none() | st.integers() | st.floats() | odd_text


@FUZZ
@given(
    st.one_of(toml_documents(), st.binary(max_size=120)),
    st.fixed_dictionaries({"concurrency": flag_values, "temperature": flag_values}),
)
def test_config_files_are_settings_or_a_config_error(
    tmp_path: Path, document: bytes, flags: dict[str, Any]
) -> None:
    """Promise: any config file and flag values give settings or a ConfigError naming the key."""
    path = tmp_path / "jevrefine.toml"
    path.write_bytes(document)
    overrides = {
        "model": {"temperature": flags["temperature"]},
        "run": {"concurrency": flags["concurrency"]},
    }
    try:
        config = load_config(str(path), overrides)
    except ConfigError as exc:
        message = str(exc)
    else:
        assert isinstance(config, CliConfig)
        json.dumps(config.describe())  # what check-config prints is printable
        return
    assert message


NOW = 1_700_000_000.0
header_names = st.sampled_from(["retry-after", "Retry-After", "RETRY-AFTER-MS", "retry-after-ms"])
dates = st.datetimes(
    min_value=datetime(1, 1, 2), max_value=datetime(9999, 12, 30), timezones=st.just(UTC)
).map(lambda d: format_datetime(d, usegmt=True))
odd_dates = st.tuples(
    st.datetimes(min_value=datetime(1, 1, 2), max_value=datetime(9999, 12, 30)),
    st.integers(-23 * 60, 23 * 60),
).map(lambda t: format_datetime(t[0].replace(tzinfo=timezone(timedelta(minutes=t[1])))))
header_values = st.one_of(
    odd_text,
    st.floats().map(repr),
    st.integers().map(str),
    st.sampled_from(["1e999", "-1", "nan", " 5 ", "0x10", "1_000", "Wed, 21 Oct 2015 07:28:00 GMT",
                     "Mon, 01 Jan 0001 00:00:00 -2359", "Fri, 31 Dec 9999 23:59:59 +2359"]),
    dates,
    odd_dates,
)  # fmt: skip


@FUZZ
@given(st.dictionaries(header_names | st.text(max_size=12), header_values, max_size=4))
def test_retry_after_is_seconds_or_none(headers: dict[str, str]) -> None:
    """Promise: any Retry-After header gives a finite delay >= 0 or `None`, never an error."""
    delay = parse_retry_after(headers, now=NOW)
    assert delay is None or (isinstance(delay, float) and math.isfinite(delay) and delay >= 0)


@pytest.mark.parametrize(
    "value", ["Mon, 01 Jan 0001 00:00:00 -2359", "Fri, 31 Dec 9999 23:59:59 +2359", "9" * 5000]
)
def test_retry_after_at_the_edges_of_time(value: str) -> None:
    delay = parse_retry_after({"retry-after": value}, now=NOW)
    assert delay is None or (math.isfinite(delay) and delay >= 0)
