"""JSON bodies in and out: pydantic-core's Rust codec, keeping the standard library's answers.

A model call decodes one response body and encodes one request body; `json.loads` and
`json.dumps` cost several times pydantic-core's `from_json` / `to_json` for a small chat
completion (`python -m benchmarks.bench_adapter_cpu`: the `OpenAIChatModel.call` row; the
figures in docs/benchmarks.md). pydantic-core is already installed with pydantic; the codec is used
only with the series it was measured with (`PYDANTIC_CORE_JSON`), the standard library's
`json` otherwise.

The results are the standard library's: whatever the Rust parser refuses (a byte-order mark, a
UTF-16 body, broken JSON) is handed to `json.loads`, which decides (and raises its own
`ValueError`); a body holding NaN or an infinity, or a value the Rust encoder cannot write, is
encoded by `json.dumps(allow_nan=False)`, which raises what it always raised.
"""

from __future__ import annotations

import json
from typing import Any, Final

import pydantic_core

from .._measured import FastPath, takes_fast_path

__all__ = ["PYDANTIC_CORE_JSON", "dumps", "loads"]

PYDANTIC_CORE_JSON: Final = FastPath(
    name="pydantic-core's JSON codec for model bodies",
    distribution="pydantic-core",
    measured=((2, 50), (2, 51)),
    benchmark="python -m benchmarks --only bench_adapter_cpu",
)
"""The pydantic-core series the codec was measured with."""

_NOT_JSON: Final = (b"NaN", b"Infinity")
"""What pydantic-core writes for a non-finite float, and JSON has no word for."""


def _fast_loads(content: bytes | str) -> Any:
    """The JSON value of `content`, as `json.loads` reads it.

    Raises:
        ValueError: `content` is not JSON (`json.JSONDecodeError`, as ever).
    """
    try:
        # Keys only: values (answers, ids) are rarely repeated, and the cache is process-wide.
        return pydantic_core.from_json(content, cache_strings="keys")
    except ValueError:
        return json.loads(content)


def _fast_dumps(value: Any) -> bytes:
    """`value` as compact UTF-8 JSON (`json.dumps(separators=(",", ":"), ensure_ascii=False)`).

    Raises:
        ValueError: a NaN or an infinity in `value` (JSON cannot carry them).
        TypeError: a value JSON has no form for.
    """
    try:
        encoded = pydantic_core.to_json(value)
    except ValueError:  # PydanticSerializationError: let the standard library say what is wrong
        encoded = None
    if encoded is None or any(word in encoded for word in _NOT_JSON):
        # Maybe only inside a string; the standard library knows, and refuses a bare one.
        text = json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
        return text.encode()
    return encoded


def _plain_loads(content: bytes | str) -> Any:
    """`_fast_loads`'s answer, from the standard library alone."""
    return json.loads(content)


def _plain_dumps(value: Any) -> bytes:
    """`_fast_dumps`'s answer, from the standard library alone."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode()


# Chosen once, at import: the codec's answers are the standard library's either way.
if takes_fast_path(PYDANTIC_CORE_JSON):
    loads, dumps = _fast_loads, _fast_dumps
else:
    loads, dumps = _plain_loads, _plain_dumps
