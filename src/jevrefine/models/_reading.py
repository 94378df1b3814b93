"""Reading what a vendor SDK hands back: one check of every value, one error for all of them.

The SDKs build their response objects without validating them (`construct`): whatever JSON the
server sent comes through as it is, so `choices` may hold an int, `content` a number, a token
count a string, NaN or `1e999`, and reading it fails far from the cause (an `AttributeError`,
a `TypeError`), or worse, does not fail (`.content()` returning `5`). The adapters therefore read
every value they keep through a `Reader`, which checks its type and range and blanks the
configured API key out of every server-provided string before anything stores it (a server may
echo the key in an id or a model name, and from there it would reach spans, metrics and logs).

All of the reading of one response, or of one stream item, runs inside `unreadable_items_raise`:
a value the reader refuses, and any slip the checks did not foresee, become one `ModelError`
naming the server and what could not be read. That is the one depth at which hostile bodies are
handled; there is no try/except per field.
"""

from __future__ import annotations

import contextlib
import math
import re
from collections.abc import Callable, Iterator, Sequence
from typing import Any, Final

from .._http._headers import REDACTED
from ..exceptions import ModelError, ModelResponseError

__all__ = [
    "MAX_TOKEN_COUNT",
    "UNREADABLE",
    "Reader",
    "UnreadableValueError",
    "unreadable_error",
    "unreadable_items_raise",
]

MAX_TOKEN_COUNT: Final = 10**12
"""The largest token count believed: beyond it a count is a broken or hostile server's."""

_MIN_SECRET: Final = 8
"""Shorter keys are placeholders ("local"); blanking them would mangle ordinary words."""

_UNFORESEEN: Final = (
    AttributeError,
    TypeError,
    KeyError,
    IndexError,
    ValueError,  # also UnicodeDecodeError and the int-digits limit of `json.loads`
    OverflowError,
    RecursionError,
)
"""What reading a malformed item raises when no check caught it first."""


class UnreadableValueError(Exception):
    """A value of a response that is not what the API defines (private to the adapters)."""

    def __init__(self, where: str, value: object, expected: str) -> None:
        shown = repr(value)
        shown = shown if len(shown) <= 60 else shown[:57] + "..."
        super().__init__(f"{where} is {shown} ({type(value).__name__}), expected {expected}")


_SURROGATE: Final = re.compile("[\ud800-\udfff]")


def _encodable(text: str) -> str:
    """`text` with each lone surrogate replaced by U+FFFD (itself when it has none)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return _SURROGATE.sub("\ufffd", text)
    return text


class Reader:
    """Checks the values an adapter keeps, and blanks the API key out of every string."""

    __slots__ = ("_secret",)

    def __init__(self, secret: str | None) -> None:
        self._secret = secret if secret and len(secret) >= _MIN_SECRET else None

    def scrub(self, value: str) -> str:
        """`value` with the API key replaced by `***`."""
        secret = self._secret
        if secret is not None and secret in value:
            return value.replace(secret, REDACTED)
        return value

    def text(self, value: object, where: str) -> str:
        """A string the server sent (`None` reads as `""`), scrubbed, always valid Unicode.

        A lone surrogate (a JSON escape for U+D800 to U+DFFF with no pair) is replaced by U+FFFD
        here, once: no string jevrefine keeps can then fail to encode downstream (memory,
        retrieval, the judge, the next request).
        """
        if type(value) is str:  # the common case first: one check, no call
            if not value.isascii():
                value = _encodable(value)
            secret = self._secret
            if secret is not None and secret in value:
                return value.replace(secret, REDACTED)
            return value
        if value is None:
            return ""
        if not isinstance(value, str):
            raise UnreadableValueError(where, value, "a string")
        return self.scrub(_encodable(str(value)))  # a str subclass: kept as a plain str

    def optional_text(self, value: object, where: str) -> str | None:
        """A string the server sent, or `None` when it sent none (or an empty one), scrubbed."""
        if value is None:
            return None
        return self.text(value, where) or None

    @staticmethod
    def count(value: object, where: str) -> int:
        """A token count: a whole number from 0 to `MAX_TOKEN_COUNT`; `None` reads as 0."""
        if value is None:
            return 0
        if type(value) is int:  # the common case, first and cheapest
            if 0 <= value <= MAX_TOKEN_COUNT:
                return value
        elif (
            isinstance(value, float)
            and math.isfinite(value)
            and value.is_integer()
            and 0 <= value <= MAX_TOKEN_COUNT
        ):
            return int(value)  # a server that writes `12.0` still means 12
        raise UnreadableValueError(
            where, value, f"a whole number of tokens from 0 to {MAX_TOKEN_COUNT:,}"
        )

    @staticmethod
    def number(value: object, where: str) -> float:
        """A finite number (a log probability; `-inf` is allowed: probability 0)."""
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            result = float(value)
            if not math.isnan(result) and result != math.inf:
                return result
        raise UnreadableValueError(where, value, "a finite number")

    @staticmethod
    def items(value: object, where: str) -> Sequence[Any]:
        """A JSON list (`None` reads as empty)."""
        if value is None:
            return ()
        if not isinstance(value, (list, tuple)):
            raise UnreadableValueError(where, value, "a list")
        return value

    @staticmethod
    def index(value: object, where: str) -> int:
        """A choice's or a tool call's index: a whole number from 0 (`None` reads as 0)."""
        if value is None:
            return 0
        if type(value) is int and 0 <= value < 2**31:
            return value
        raise UnreadableValueError(where, value, "an index of 0 or more")

    @staticmethod
    def of_type(
        value: object, kind: type[Any] | tuple[type[Any], ...], where: str, expected: str
    ) -> Any:
        """`value` if it is a `kind` (the SDK's type for an object of the API), else an error."""
        if not isinstance(value, kind):
            raise UnreadableValueError(where, value, expected)
        return value


UNREADABLE: Final = (UnreadableValueError, *_UNFORESEEN)
"""What reading a response can raise; `unreadable_error` turns each into the `ModelError`."""


def unreadable_error(model: str, origin: str, item: str, exc: BaseException) -> ModelError:
    """The `ModelResponseError` for `exc`, raised while reading a `item` from `model` at `origin`.

    The caller blanks secrets out of it (the text of `exc` may quote the server).
    """
    detail = str(exc) if isinstance(exc, UnreadableValueError) else f"{type(exc).__name__}: {exc}"
    error = ModelResponseError(
        f"{model} at {origin} sent a {item} that could not be read: {detail}", model_name=model
    )
    if not isinstance(exc, UnreadableValueError):
        error.__cause__ = exc  # an unforeseen slip: keep its traceback
    return error


@contextlib.contextmanager
def unreadable_items_raise(
    model: str, origin: str, item: str, scrub: Callable[[str], str] = str
) -> Iterator[None]:
    """Turn a malformed response or stream item into a `ModelError` naming the server.

    `item` says what was being read ("response", "stream chunk"); `scrub` blanks secrets out of
    the exception text.
    """
    try:
        yield
    except UNREADABLE as exc:
        error = unreadable_error(model, origin, item, exc)
        error.args = (scrub(str(error)),)
        raise error from error.__cause__
