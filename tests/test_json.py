"""`jevrefine._json`: the fast codec gives the standard library's answers, hostile bodies too."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from jevrefine._http import _json

_JSON_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(10**30), max_value=10**30)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=20,
)


def _same(a: Any, b: Any) -> bool:
    # Equal as JSON values: a float that reads back as the same float, the same keys in order.
    if isinstance(a, float) and isinstance(b, float):
        return a == b or (math.isnan(a) and math.isnan(b))
    if isinstance(a, dict) and isinstance(b, dict):
        return list(a) == list(b) and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(map(_same, a, b))
    return type(a) is type(b) and a == b


@settings(max_examples=300, deadline=None)
@given(_JSON_VALUES)
def test_what_it_writes_reads_back_as_the_standard_library_reads_it(value: Any) -> None:
    encoded = _json.dumps(value)
    assert _same(json.loads(encoded), value)
    assert _same(_json.loads(encoded), json.loads(encoded))


@pytest.mark.parametrize(
    "body",
    [
        b'\xef\xbb\xbf{"a": 1}',  # a byte-order mark: json reads it, Rust does not
        '{"a": 1}'.encode("utf-16"),  # UTF-16, which json detects
        b'{"a": NaN, "b": Infinity, "c": -Infinity}',  # what json (and the SDK) let through
        b'{"a": 1e400}',  # past a float: infinity, for the reader to refuse
        b'{"a": 123456789012345678901234567890}',
        b'{"a": 1, "a": 2}',  # the last one wins in both
        b'"\\ud800"',  # a lone surrogate escape
    ],
)
def test_odd_bodies_read_as_the_standard_library_reads_them(body: bytes) -> None:
    assert _same(_json.loads(body), json.loads(body))


@pytest.mark.parametrize(
    "body", [b"", b"{", b'{"a": }', b"\xff\xfe\xfd", b"[1, 2", b"nul", b'{"a": 1} x']
)
def test_what_is_not_json_raises_the_standard_librarys_error(body: bytes) -> None:
    with pytest.raises(ValueError) as theirs:  # noqa: PT011 - whichever the library raises
        json.loads(body)
    with pytest.raises(ValueError) as ours:  # noqa: PT011 - the same, compared below
        _json.loads(body)
    assert type(ours.value) is type(theirs.value)  # JSONDecodeError, or UnicodeDecodeError
    assert str(ours.value) == str(theirs.value)


def test_nesting_past_the_decoders_depth_raises_as_before() -> None:
    deep = b"[" * 100_000 + b"]" * 100_000
    with pytest.raises(RecursionError):
        json.loads(deep)
    with pytest.raises(RecursionError):
        _json.loads(deep)


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
def test_a_non_finite_number_is_refused_as_json_refuses_it(bad: float) -> None:
    with pytest.raises(ValueError, match="JSON compliant"):
        _json.dumps({"temperature": bad})


def test_the_words_inside_a_string_are_text_not_numbers() -> None:
    value = {"content": "NaN and Infinity are words here"}
    assert _json.dumps(value) == b'{"content":"NaN and Infinity are words here"}'


def test_a_value_json_has_no_form_for_raises_type_error() -> None:
    with pytest.raises(TypeError):
        _json.dumps({"a": object()})


def test_non_ascii_is_sent_as_utf8_compactly() -> None:
    assert _json.dumps({"q": "café ✓", "n": [1, 2]}) == '{"q":"café ✓","n":[1,2]}'.encode()
