"""Blank the adapters' API keys out of what the SDKs and their HTTP stack log.

At DEBUG, the vendor SDKs log each response's request id and httpcore logs every response header
as it came off the wire. A server that echoes the key (in `x-request-id`, say) would get it into
those logs, where the adapter's own scrubbing never sees it. So each adapter registers its key
here, and one filter on those loggers rewrites a record whose text holds a registered key. A
filter runs only for records that pass the logger's level: with DEBUG off it costs nothing.
"""

from __future__ import annotations

import logging
import threading
from typing import Final

from .._http._headers import REDACTED

__all__ = ["register_key", "unregister_key"]

_MIN_SECRET: Final = 8
_LOGGERS: Final = (
    "openai",
    "openai._base_client",
    "anthropic",
    "anthropic._base_client",
    "httpx2",
    "httpcore2.connection",
    "httpcore2.http11",
    "httpcore2.http2",
    "httpcore2.proxy",
    "httpcore2.socks",
)
"""Where server-provided text is logged. A logger's filters do not see its children's records,
so each logger that writes one is named."""


class _KeyFilter(logging.Filter):
    """Rewrites a record whose message holds a registered key; never drops a record."""

    def __init__(self) -> None:
        super().__init__()
        self._counts: dict[str, int] = {}
        self._lock = threading.Lock()

    def add(self, key: str) -> None:
        with self._lock:
            self._counts[key] = self._counts.get(key, 0) + 1

    def discard(self, key: str) -> None:
        with self._lock:
            left = self._counts.get(key, 0) - 1
            if left > 0:
                self._counts[key] = left
            else:
                self._counts.pop(key, None)

    def filter(self, record: logging.LogRecord) -> bool:
        keys = tuple(self._counts)
        if not keys:
            return True
        try:
            message = record.getMessage()
        except Exception:  # a record whose arguments do not format: the handler reports it
            return True
        scrubbed = message
        for key in keys:
            if key in scrubbed:
                scrubbed = scrubbed.replace(key, REDACTED)
        if scrubbed is not message:
            record.msg, record.args = scrubbed, None
        return True


_FILTER: Final = _KeyFilter()
_installed = False
_install_lock = threading.Lock()


def register_key(key: str | None) -> None:
    """Blank `key` out of the SDKs' logs from now on (a short or missing key is ignored)."""
    global _installed
    if not key or len(key) < _MIN_SECRET:
        return
    with _install_lock:
        if not _installed:
            for name in _LOGGERS:
                logging.getLogger(name).addFilter(_FILTER)
            _installed = True
    _FILTER.add(key)


def unregister_key(key: str | None) -> None:
    """Undo one `register_key(key)` (the key stays blanked while another adapter holds it)."""
    if key and len(key) >= _MIN_SECRET:
        _FILTER.discard(key)
