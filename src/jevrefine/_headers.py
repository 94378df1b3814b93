"""HTTP header helpers shared by every client boundary: Retry-After, and headers safe to keep."""

from __future__ import annotations

import math
import time
from collections.abc import Mapping
from email.utils import parsedate_to_datetime
from typing import Final

__all__ = ["parse_retry_after", "safe_headers"]

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
    return value if math.isfinite(value) and value >= 0 else None


def safe_headers(headers: Mapping[str, str]) -> dict[str, str]:
    """The headers with names lower-cased and every credential-bearing one left out.

    Kept on errors for debugging (request ids, rate-limit counters); keys and cookies never.
    """
    return {
        name.lower(): value
        for name, value in headers.items()
        if not any(part in name.lower() for part in _SECRET_HEADER_PARTS)
    }
