"""Shared validators for public parameters: one place that turns bad input into a `UserError`.

Every public constructor and function checks its arguments through these, so a wrong value
always gets the same kind of message: the parameter, the value it got, and what to pass instead
(`JudgeClient(timeout='5')` → "timeout='5' is not a number: pass a number of seconds, e.g.
timeout=5.0"). Numbers given as strings are refused rather than converted: `'5'` is almost always
a value read from the environment or a config file without conversion, and guessing hides that.
`bool` is refused where a number is wanted (`True` is an `int` to Python, never a count here).

The validators return the value in its canonical type (`float` for numbers, `int` for integers),
so a caller stores what they return.
"""

from __future__ import annotations

import math
from collections.abc import Collection
from dataclasses import dataclass
from typing import Final, Literal, TypedDict, TypeVar, Unpack, overload
from urllib.parse import urlsplit

from .exceptions import UserError

__all__ = [
    "HIGHEST_PRECEDENCE",
    "LOWEST_PRECEDENCE",
    "HTTPRoot",
    "boolean",
    "choice",
    "http_root",
    "instance",
    "integer",
    "number",
    "order",
    "secret",
    "shown",
    "text",
    "wrong_type",
]

HIGHEST_PRECEDENCE: Final = -(2**31)
"""The lowest possible advisor order (Java's `Integer.MIN_VALUE`); `advisors.chain` exports it."""
LOWEST_PRECEDENCE: Final = 2**31 - 1
"""The highest possible advisor order (Java's `Integer.MAX_VALUE`); `advisors.chain` exports it."""

_MAX_SHOWN: Final = 60
"""A value is shown in a message cut to this many characters: enough to recognise it."""


def shown(value: object) -> str:
    """`repr(value)`, cut to a readable length for an error message."""
    text_ = repr(value)
    return text_ if len(text_) <= _MAX_SHOWN else text_[: _MAX_SHOWN - 3] + "..."


def _fail(
    name: str, value: object, problem: str, instead: str, error: type[UserError]
) -> UserError:
    return error(f"{name}={shown(value)} {problem}: {instead}")


# `optional=True` adds `None` to what `number`, `integer` and `text` return, which takes two
# overloads each. The other keyword arguments are the same in both overloads, so each
# validator's are listed once for them, in a TypedDict (the implementation's signature gives
# their defaults, its docstring what they mean).


class _NumberRule(TypedDict, total=False):
    minimum: float | None
    maximum: float | None
    above: float | None
    unit: str
    example: float
    error: type[UserError]


@overload
def number(
    name: str, value: object, *, optional: Literal[False] = ..., **rule: Unpack[_NumberRule]
) -> float: ...
@overload
def number(
    name: str, value: object, *, optional: Literal[True], **rule: Unpack[_NumberRule]
) -> float | None: ...
def number(
    name: str,
    value: object,
    *,
    minimum: float | None = None,
    maximum: float | None = None,
    above: float | None = None,
    optional: bool = False,
    unit: str = "",
    example: float = 1.0,
    error: type[UserError] = UserError,
) -> float | None:
    """`value` as a finite `float` within the bounds, else a `UserError` naming `name`.

    Args:
        name: The parameter's name, as the caller wrote it.
        value: What was passed.
        minimum: The smallest allowed value (inclusive).
        maximum: The largest allowed value (inclusive).
        above: A bound the value must be strictly greater than (e.g. 0 for a timeout).
        optional: Whether `None` is allowed (it is then returned as is).
        unit: What the number counts, for the message ("seconds").
        example: A valid value shown in the message.
        error: The `UserError` subclass to raise.
    """
    if value is None and optional:
        return None
    what = f"a number of {unit}" if unit else "a number"
    hint = f"pass {what}, e.g. {name}={example!r}" + (", or None" if optional else "")
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise _fail(name, value, "is not a number", hint, error)
    try:
        result = float(value)
    except OverflowError:
        raise _fail(name, value, "is too large", hint, error) from None
    if not math.isfinite(result):
        raise _fail(name, value, "is not a finite number", hint, error)
    if above is not None and not result > above:
        raise _fail(name, value, f"must be greater than {above:g}", hint, error)
    if minimum is not None and result < minimum:
        raise _fail(name, value, f"must be at least {minimum:g}", hint, error)
    if maximum is not None and result > maximum:
        raise _fail(name, value, f"must be at most {maximum:g}", hint, error)
    return result


class _IntegerRule(TypedDict, total=False):
    minimum: int | None
    maximum: int | None
    example: int
    error: type[UserError]


@overload
def integer(
    name: str, value: object, *, optional: Literal[False] = ..., **rule: Unpack[_IntegerRule]
) -> int: ...
@overload
def integer(
    name: str, value: object, *, optional: Literal[True], **rule: Unpack[_IntegerRule]
) -> int | None: ...
def integer(
    name: str,
    value: object,
    *,
    minimum: int | None = None,
    maximum: int | None = None,
    optional: bool = False,
    example: int = 1,
    error: type[UserError] = UserError,
) -> int | None:
    """`value` as an `int` within the bounds (inclusive), else a `UserError` naming `name`."""
    if value is None and optional:
        return None
    bounds = _bounds_text(minimum, maximum)
    hint = f"pass a whole number{bounds}, e.g. {name}={example}" + (", or None" if optional else "")
    if isinstance(value, bool) or not isinstance(value, int):
        raise _fail(name, value, "is not a whole number", hint, error)
    if (minimum is not None and value < minimum) or (maximum is not None and value > maximum):
        raise _fail(name, value, "is out of range", hint, error)
    return int(value)


def order(value: object, *, example: int, error: type[UserError] = UserError) -> int:
    """`value` as an advisor's `order=`: a whole number strictly between the precedence bounds.

    The bounds themselves are refused, as the Java library's advisor builders refuse them
    (`order > HIGHEST_PRECEDENCE && order < LOWEST_PRECEDENCE`): an advisor at an extreme ties
    with anything else that claims to run first or last, so its place depends on registration
    order, and a value past them is no 32-bit order at all. Place an advisor relative to the
    bounds instead (`HIGHEST_PRECEDENCE + 100`, `LOWEST_PRECEDENCE - 100`).
    """
    hint = (
        "pass a whole number strictly between HIGHEST_PRECEDENCE and LOWEST_PRECEDENCE "
        f"(from {HIGHEST_PRECEDENCE + 1} to {LOWEST_PRECEDENCE - 1}), e.g. order={example}"
    )
    if isinstance(value, bool) or not isinstance(value, int):
        raise _fail("order", value, "is not a whole number", hint, error)
    if not HIGHEST_PRECEDENCE < value < LOWEST_PRECEDENCE:
        raise _fail("order", value, "is out of range", hint, error)
    return int(value)


def _bounds_text(minimum: int | None, maximum: int | None) -> str:
    if minimum is not None and maximum is not None:
        return f" from {minimum} to {maximum}"
    if minimum is not None:
        return f" of at least {minimum}"
    if maximum is not None:
        return f" of at most {maximum}"
    return ""


class _TextRule(TypedDict, total=False):
    nonblank: bool
    example: str
    error: type[UserError]


@overload
def text(
    name: str, value: object, *, optional: Literal[False] = ..., **rule: Unpack[_TextRule]
) -> str: ...
@overload
def text(
    name: str, value: object, *, optional: Literal[True], **rule: Unpack[_TextRule]
) -> str | None: ...
def text(
    name: str,
    value: object,
    *,
    optional: bool = False,
    nonblank: bool = False,
    example: str = "...",
    error: type[UserError] = UserError,
) -> str | None:
    """`value` if it is a `str` (non-blank when `nonblank`), else a `UserError` naming `name`."""
    if value is None and optional:
        return None
    hint = f"pass a string, e.g. {name}={example!r}" + (", or None" if optional else "")
    if not isinstance(value, str):
        raise _fail(name, value, "is not a string", hint, error)
    if nonblank and not value.strip():
        raise _fail(name, value, "is blank", hint, error)
    return value


def secret(name: str, value: object, *, error: type[UserError] = UserError) -> str | None:
    """`value` if it is a `str` or `None`; the message never shows the value (it may be a key)."""
    if value is None or isinstance(value, str):
        return value
    raise error(f"{name} must be a string, got {type(value).__name__}: pass the key as a str")


_T = TypeVar("_T")


def choice(
    name: str,
    value: _T,
    options: Collection[_T],
    *,
    optional: bool = False,
    error: type[UserError] = UserError,
) -> _T:
    """`value` if it is one of `options` (or `None` when `optional`), else a `UserError`."""
    if value is None and optional:
        return value
    try:
        known = value in options
    except TypeError:  # an unhashable value tested against a set
        known = False
    if not known:
        listed = ", ".join(repr(o) for o in options)
        raise _fail(
            name, value, "is not one of the accepted values", f"pass one of {listed}", error
        )
    return value


def boolean(name: str, value: object, *, error: type[UserError] = UserError) -> bool:
    """`value` if it is a `bool`, else a `UserError` (a truthy string is not `True`)."""
    if not isinstance(value, bool):
        raise _fail(name, value, "is not a bool", f"pass {name}=True or {name}=False", error)
    return value


def instance(
    name: str,
    value: object,
    kind: type[_T],
    *,
    example: str,
    kind_name: str | None = None,
    error: type[UserError] = UserError,
) -> _T:
    """`value` if it is a `kind`, else `wrong_type(...)`'s error.

    A concrete `kind` only (mypy refuses an abstract class here): for one, test `isinstance`
    and raise `wrong_type` yourself.
    """
    if isinstance(value, kind):
        return value
    raise wrong_type(name, value, kind_name or f"a {kind.__name__}", example=example, error=error)


def wrong_type(
    name: str, value: object, kind_name: str, *, example: str, error: type[UserError] = UserError
) -> UserError:
    """The error for a value of the wrong type, naming `name`, the value and `example`.

    "retry={...} is not a RetryPolicy: pass e.g. retry=RetryPolicy(max_retries=2)";
    `kind_name` is the type with its article ("an httpx2.AsyncClient").
    """
    return _fail(name, value, f"is not {kind_name}", f"pass e.g. {name}={example}", error)


@dataclass(frozen=True, slots=True)
class HTTPRoot:
    """An http(s) URL checked once: what a client connects to and prefixes its paths with."""

    url: str
    """The URL without a trailing slash."""
    scheme: Literal["http", "https"]
    """`http` or `https`."""
    host: str
    """The host name or address (IPv6 without brackets)."""
    port: int
    """The port: the URL's, else 80 or 443 by the scheme."""


def http_root(
    name: str, value: str, *, example: str, error: type[UserError] = UserError
) -> HTTPRoot:
    """`value` as an http(s) URL with a host and a valid port, else a `UserError` naming `name`."""
    url = value.rstrip("/")
    try:
        split = urlsplit(url)
        port = split.port  # raises for a port that is not a number from 0 to 65535
    except ValueError:
        split, port = None, None
    if split is None or split.scheme not in ("http", "https") or not split.hostname:
        raise _fail(name, url, "is not an http(s) URL", f"pass e.g. {name}={example!r}", error)
    scheme: Literal["http", "https"] = "https" if split.scheme == "https" else "http"
    return HTTPRoot(url, scheme, split.hostname, port or (443 if scheme == "https" else 80))
