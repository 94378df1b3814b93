"""The shared parameter validators: every refusal names the parameter, the value and a fix."""

from __future__ import annotations

import math

import pytest

from jevrefine import UserError
from jevrefine._validate import (
    HTTPRoot,
    boolean,
    choice,
    http_root,
    instance,
    integer,
    number,
    order,
    secret,
    text,
)
from jevrefine.jev.errors import JudgeUsageError


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        ("5", "is not a number"),
        (True, "is not a number"),
        (None, "is not a number"),
        (math.nan, "is not a finite number"),
        (math.inf, "is not a finite number"),
        (10**400, "is too large"),
        (-5, "must be greater than 0"),
        (0, "must be greater than 0"),
    ],
)
def test_number_refuses_with_name_value_and_fix(value: object, problem: str) -> None:
    with pytest.raises(UserError) as caught:
        number("timeout", value, above=0, unit="seconds", example=5.0)
    message = str(caught.value)
    assert message.startswith("timeout=")
    assert problem in message
    assert "pass a number of seconds, e.g. timeout=5.0" in message


def test_number_returns_a_float_and_allows_none_when_optional() -> None:
    assert number("t", 3) == 3.0
    assert isinstance(number("t", 3), float)
    assert number("t", None, optional=True) is None
    assert number("p", 1.0, minimum=0, maximum=1) == 1.0
    with pytest.raises(UserError, match="must be at most 1"):
        number("p", 1.5, minimum=0, maximum=1)
    with pytest.raises(UserError, match="must be at least 0"):
        number("p", -0.1, minimum=0, maximum=1)


def test_integer_refuses_floats_strings_and_bools() -> None:
    for bad in ("256", 2.0, True, None):
        with pytest.raises(UserError, match=r"max_tokens=.* is not a whole number: pass a whole"):
            integer("max_tokens", bad, minimum=1, example=256)
    with pytest.raises(UserError, match="out of range: pass a whole number from 1 to 100"):
        integer("max_repeat_attempts", 101, minimum=1, maximum=100)
    assert integer("n", 5, minimum=1) == 5
    assert integer("n", None, optional=True) is None


def test_text_and_choice_and_boolean() -> None:
    assert text("model", "gpt") == "gpt"
    with pytest.raises(UserError, match="model=5 is not a string"):
        text("model", 5)
    with pytest.raises(UserError, match="is blank"):
        text("model", "  ", nonblank=True)
    assert choice("tool_choice", "auto", ("auto", "none", "required")) == "auto"
    with pytest.raises(UserError, match=r"tool_choice='always'.*pass one of 'auto', 'none'"):
        choice("tool_choice", "always", ("auto", "none", "required"))
    with pytest.raises(UserError, match="pass one of"):
        choice("mode", ["unhashable"], frozenset({"a"}))
    with pytest.raises(UserError, match="is not a bool"):
        boolean("strict", "yes")


def test_secret_never_shows_the_value() -> None:
    assert secret("api_key", "sk-123") == "sk-123"
    assert secret("api_key", None) is None
    with pytest.raises(JudgeUsageError) as caught:
        secret("api_key", 1234567890123, error=JudgeUsageError)
    assert "1234567890123" not in str(caught.value)
    assert "api_key must be a string, got int" in str(caught.value)


def test_long_values_are_cut_in_messages() -> None:
    with pytest.raises(UserError) as caught:
        number("timeout", "x" * 10_000)
    assert len(str(caught.value)) < 200


def test_order_is_strictly_inside_the_precedence_bounds() -> None:
    from jevrefine import HIGHEST_PRECEDENCE, LOWEST_PRECEDENCE

    assert order(HIGHEST_PRECEDENCE + 1, example=0) == HIGHEST_PRECEDENCE + 1
    assert order(LOWEST_PRECEDENCE - 1, example=0) == LOWEST_PRECEDENCE - 1
    for bad in (HIGHEST_PRECEDENCE, LOWEST_PRECEDENCE):
        with pytest.raises(UserError, match=r"out of range: pass a whole number strictly between"):
            order(bad, example=7)
    with pytest.raises(JudgeUsageError, match=r"order='1' is not a whole number.*e\.g\. order=7"):
        order("1", example=7, error=JudgeUsageError)


def test_instance_passes_the_type_and_names_what_to_pass_instead() -> None:
    assert instance("when", 3, int, example="3") == 3
    with pytest.raises(JudgeUsageError) as caught:
        instance("retry", {"max_retries": 2}, float, example="RetryPolicy()", error=JudgeUsageError)
    assert str(caught.value) == (
        "retry={'max_retries': 2} is not a float: pass e.g. retry=RetryPolicy()"
    )
    with pytest.raises(UserError, match=r"is not an httpx2\.AsyncClient"):
        instance("http_client", object(), int, example="...", kind_name="an httpx2.AsyncClient")


@pytest.mark.parametrize(
    ("url", "root"),
    [
        ("http://127.0.0.1:8080/", HTTPRoot("http://127.0.0.1:8080", "http", "127.0.0.1", 8080)),
        ("https://a.example", HTTPRoot("https://a.example", "https", "a.example", 443)),
        ("http://[::1]/v1//", HTTPRoot("http://[::1]/v1", "http", "::1", 80)),
    ],
)  # fmt: skip
def test_http_root_strips_the_slash_and_fills_the_port(url: str, root: HTTPRoot) -> None:
    assert http_root("base_url", url, example="https://x") == root


@pytest.mark.parametrize("url", ["http://h:99999", "http://[::1", "ftp://h", "h:80", "http://"])
def test_http_root_refuses_what_no_client_can_reach(url: str) -> None:
    with pytest.raises(UserError) as caught:
        http_root("base_url", url, example="https://api.typesafe.ai")
    assert "is not an http(s) URL: pass e.g. base_url='https://api.typesafe.ai'" in str(
        caught.value
    )
