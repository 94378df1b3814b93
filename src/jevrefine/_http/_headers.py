"""Helpers shared by every client boundary: Retry-After, headers safe to keep, secrets redacted."""

from __future__ import annotations

import contextlib
import math
import time
from collections.abc import Mapping
from email.utils import parsedate_to_datetime
from typing import Any, Final
from urllib.parse import urlsplit, urlunsplit

__all__ = [
    "parse_retry_after",
    "redact",
    "redact_error",
    "redact_url",
    "safe_headers",
    "url_password",
    "usable_wait",
]

REDACTED: Final = "***"
_MIN_SECRET: Final = 8
"""Shorter "keys" (a local server's `"k"`) are not searched for: every word holding that letter
would be mangled, and no real key is that short."""

_SECRET_HEADER_PARTS: Final = ("authorization", "api-key", "cookie", "x-goog-api-key")


def parse_retry_after(headers: Mapping[str, str], *, now: float | None = None) -> float | None:
    """Seconds to wait from `retry-after-ms`, else `retry-after` (seconds or an HTTP date).

    Header names match case-insensitively. Unparseable, infinite or negative values are ignored;
    a date in the past means "now" (0). `None` when neither header says anything usable.
    """
    lowered = {name.lower(): value for name, value in headers.items()}
    raw_ms = lowered.get("retry-after-ms")
    if raw_ms is not None:
        ms = _number(raw_ms)
        if ms is not None:
            return ms / 1000.0
    raw = lowered.get("retry-after")
    if raw is None:
        return None
    seconds = _number(raw)
    if seconds is not None:
        return seconds
    try:
        when = parsedate_to_datetime(raw.strip())
    except (TypeError, ValueError, IndexError, OverflowError):
        return None
    return max(0.0, when.timestamp() - (time.time() if now is None else now))


def _number(raw: str) -> float | None:
    try:
        value = float(raw.strip())
    except ValueError:
        return None
    return usable_wait(value)


def usable_wait(value: object) -> float | None:
    """`value` as a wait in seconds, when it is one the wire honours; `None` otherwise.

    A finite, non-negative number (not a bool). The one rule for a server-given wait, whether it
    comes from a header (`parse_retry_after`) or from an error's `retry_after`.
    """
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    try:
        seconds = float(value)
    except OverflowError:  # an int past the range of a float: no wait anyone meant
        return None
    return seconds if math.isfinite(seconds) and seconds >= 0 else None


def safe_headers(headers: Mapping[str, str]) -> dict[str, str]:
    """The headers with names lower-cased and every credential-bearing one left out.

    Kept on errors for debugging (request ids, rate-limit counters); keys and cookies never.
    """
    return {
        name.lower(): value
        for name, value in headers.items()
        if not any(part in name.lower() for part in _SECRET_HEADER_PARTS)
    }


def redact(value: Any, secret: str | None) -> Any:
    """`value` (a string, or JSON made of mappings and lists) with `secret` replaced by `***`.

    Servers echo keys back in error bodies ("Incorrect API key provided: sk-..."); whatever we
    keep of a body must not carry it into messages, logs or spans.
    """
    if not secret or len(secret) < _MIN_SECRET:
        return value
    if isinstance(value, str):
        return value.replace(secret, REDACTED)
    if isinstance(value, Mapping):
        return {k: redact(v, secret) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [redact(v, secret) for v in value]
    return value


def redact_error(error: BaseException | None, secret: str | None) -> None:
    """Blank `secret` out of `error` and its causes, in place: args and text/JSON attributes.

    A vendor SDK's exception kept as `__cause__` is printed in every traceback; its message and
    body hold whatever the server sent, the key included when the server echoed it.
    """
    seen: set[int] = set()
    while secret and error is not None and id(error) not in seen:
        seen.add(id(error))
        error.args = tuple(redact(arg, secret) for arg in error.args)
        for name, value in list(getattr(error, "__dict__", {}).items()):
            if isinstance(value, (str, Mapping, list)):
                with contextlib.suppress(AttributeError, TypeError):
                    setattr(error, name, redact(value, secret))
        error = error.__cause__ or error.__context__


def redact_url(url: str) -> str:
    """`url` as it may be shown: its user-info (`alice:S3CRET@`) replaced by `***@`.

    A base URL's user-info is a credential, like an API key: every repr, message, log line,
    report and config listing shows URLs through this. A URL that does not parse is shown as
    `<a URL that does not parse>` rather than quoted (it may hold anything).
    """
    try:
        parts = urlsplit(url)
        _ = parts.port  # raises for a port that is not a number
    except ValueError:
        return "<a URL that does not parse>"
    if "@" not in parts.netloc:
        return url
    host = parts.netloc.rpartition("@")[2]
    return urlunsplit(parts._replace(netloc=f"{REDACTED}@{host}"))


def url_password(url: str | None) -> str | None:
    """The password of `url`'s user-info (a secret to scrub), or `None`."""
    if not url:
        return None
    try:
        return urlsplit(url).password or None
    except ValueError:
        return None
