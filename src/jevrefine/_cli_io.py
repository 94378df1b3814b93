"""JSONL in and out for the batch commands: line-numbered records, bad lines, resume ids."""

from __future__ import annotations

import json
import sys
from collections.abc import AsyncGenerator, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import anyio

__all__ = ["BadLine", "Record", "count_lines", "done_ids", "read_records"]


@dataclass(frozen=True, slots=True)
class Record:
    """One usable input line."""

    line: int
    """The 1-based line number."""
    id: str
    """The item's id: its id field, else the line number."""
    fields: dict[str, Any]
    """The line's JSON object (a bare JSON string becomes `{prompt_field: text}`)."""


@dataclass(frozen=True, slots=True)
class BadLine:
    """An input line that was skipped, and why."""

    line: int
    """The 1-based line number."""
    reason: str
    """What was wrong, for the report."""


def parse_line(
    number: int, text: str, *, required: tuple[str, ...], id_field: str
) -> Record | BadLine:
    """Parse one JSONL line into a record with the `required` string fields, or say why not."""
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        return BadLine(number, f"not valid JSON ({exc.msg} at column {exc.colno})")
    except RecursionError:  # a hostile line must be a bad line, not the end of the run
        return BadLine(number, "not valid JSON (nested too deeply)")
    if isinstance(value, str) and len(required) == 1:
        value = {required[0]: value}
    if not isinstance(value, dict):
        return BadLine(number, f"expected a JSON object, got {type(value).__name__}")
    for name in required:
        if not isinstance(value.get(name), str) or not value[name].strip():
            return BadLine(number, f"field {name!r} is missing or not a non-empty string")
    raw_id = value.get(id_field, number)
    if isinstance(raw_id, bool) or not isinstance(raw_id, str | int):
        return BadLine(number, f"field {id_field!r} must be a string or an integer")
    return Record(number, str(raw_id), value)


async def read_records(
    source: str | None,
    *,
    required: tuple[str, ...],
    id_field: str,
    skip_ids: set[str],
    on_bad: Callable[[BadLine], None],
    on_skip: Callable[[Record], None],
) -> AsyncGenerator[Record, None]:
    """Yield the usable records of a JSONL file (`None` or `-`: stdin), one line at a time.

    Blank lines are ignored; bad lines and duplicate ids go to `on_bad`; records whose id is in
    `skip_ids` (already in the output) go to `on_skip`. The file is never read whole.
    """
    seen: set[str] = set()
    stream: anyio.AsyncFile[str]
    if source is None or source == "-":
        stream = anyio.wrap_file(sys.stdin)
    else:
        stream = await anyio.open_file(source, encoding="utf-8")
    number = 0
    try:
        async for text in stream:
            number += 1
            if not text.strip():
                continue
            parsed = parse_line(number, text, required=required, id_field=id_field)
            if isinstance(parsed, BadLine):
                on_bad(parsed)
            elif parsed.id in seen:
                on_bad(BadLine(number, f"duplicate id {parsed.id!r}"))
            elif parsed.id in skip_ids:
                seen.add(parsed.id)
                on_skip(parsed)
            else:
                # Ids are kept to catch duplicates: a few bytes per item, not the inputs.
                seen.add(parsed.id)
                yield parsed
    finally:
        if source is not None and source != "-":
            await stream.aclose()


def done_ids(path: str | None) -> set[str]:
    """The ids already written to the output file (for resuming); empty when there is none.

    A last line cut short by an interruption is not counted, so that item runs again.
    """
    if path is None or path == "-" or not Path(path).exists():
        return set()
    ids: set[str] = set()
    with open(path, encoding="utf-8") as file:
        for text in file:
            try:
                value = json.loads(text)
            except (json.JSONDecodeError, RecursionError):
                continue
            if isinstance(value, dict) and "id" in value:
                ids.add(str(value["id"]))
    return ids


def count_lines(path: str | None) -> int | None:
    """The non-blank lines of the input, for the progress bar; `None` for stdin."""
    if path is None or path == "-":
        return None
    with open(path, "rb") as file:
        return sum(1 for line in file if line.strip())


def open_output(path: str | None, *, append: bool) -> IO[str]:
    """The output stream: stdout for `None`/`-`, else the file (appended to when resuming)."""
    if path is None or path == "-":
        return sys.stdout
    out = open(path, "a" if append else "w", encoding="utf-8")  # noqa: SIM115 - closed by caller
    # A resumed file whose last line was cut short gets a fresh line, so records stay one a line.
    if append and out.tell() > 0:
        with open(path, "rb") as check:
            check.seek(-1, 2)
            if check.read(1) != b"\n":
                out.write("\n")
    return out
