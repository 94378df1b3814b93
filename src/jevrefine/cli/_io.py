r"""JSONL in and out for the batch commands: line-numbered records, bad lines, resume ids.

Hostile input is a bad line, never the end of a run: a line that is not UTF-8, not JSON (a
number of more than 4,300 digits included), nested too deeply, or whose text fields hold a lone
surrogate is reported with its number and skipped. Output is always valid UTF-8: a row whose
strings hold lone surrogates (an id, a model's answer) is written with them escaped
(`\uXXXX`), which reads back as the same string, so resuming recognises that id.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import AsyncGenerator, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import anyio

__all__ = [
    "BadLine",
    "Record",
    "compact_output",
    "count_lines",
    "done_ids",
    "json_line",
    "open_output",
    "output_rows",
    "parse_line",
    "read_records",
    "retried_ids",
]

_BOM = "\ufeff"


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
    number: int,
    text: str | bytes,
    *,
    required: tuple[str, ...],
    id_field: str,
    optional: tuple[str, ...] = (),
) -> Record | BadLine:
    """Parse one JSONL line into a record with the `required` string fields, or say why not.

    `text` is the line as read (bytes are decoded as strict UTF-8; a UTF-8 byte-order mark is
    ignored). `optional` fields, when present, must be strings too. Never raises on any input.
    """
    decoded = _decoded(number, text)
    if isinstance(decoded, BadLine):
        return decoded
    value = _json_value(number, decoded)
    if isinstance(value, BadLine):
        return value
    if isinstance(value, str) and len(required) == 1:
        value = {required[0]: value}
    if not isinstance(value, dict):
        return BadLine(number, f"expected a JSON object, got {type(value).__name__}")
    problem = _field_problem(value, required, optional)
    if problem is not None:
        return BadLine(number, problem)
    raw_id = value.get(id_field, number)
    if isinstance(raw_id, bool) or not isinstance(raw_id, str | int):
        return BadLine(number, f"field {id_field!r} must be a string or an integer")
    return Record(number, str(raw_id), value)


def _decoded(number: int, text: str | bytes) -> str | BadLine:
    if isinstance(text, str):
        return text.removeprefix(_BOM)
    try:
        return text.decode("utf-8").removeprefix(_BOM)
    except UnicodeDecodeError as exc:
        return BadLine(
            number,
            f"not valid UTF-8 (byte 0x{text[exc.start]:02x} at column {exc.start + 1}); "
            "save the file as UTF-8",
        )


def _json_value(number: int, text: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        return BadLine(number, f"not valid JSON ({exc.msg} at column {exc.colno})")
    except RecursionError:  # a hostile line must be a bad line, not the end of the run
        return BadLine(number, "not valid JSON (nested too deeply)")
    except ValueError as exc:  # Python's int conversion limit: a number of over 4,300 digits
        reason = "a number of more than 4,300 digits" if "digits" in str(exc) else str(exc)[:80]
        return BadLine(number, f"not usable JSON ({reason})")


def _field_problem(
    value: dict[str, Any], required: tuple[str, ...], optional: tuple[str, ...]
) -> str | None:
    for name in required:
        field = value.get(name)
        if not isinstance(field, str) or not field.strip():
            return f"field {name!r} is missing or not a non-empty string"
    for name in (*required, *optional):
        field = value.get(name)
        if name in value and field is not None and not isinstance(field, str):
            return f"field {name!r} must be a string"
        if isinstance(field, str) and _has_surrogate(field):
            # No model API can be sent one: a JSON escape such as \ud800 with no pair.
            return f"field {name!r} holds a lone surrogate (an unpaired \\ud800-\\udfff escape)"
    return None


def _has_surrogate(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def json_line(row: dict[str, Any]) -> str:
    """`row` as one JSON line (no newline), always encodable as UTF-8.

    Text is written as is where it can be; a row holding a lone surrogate anywhere is written
    with every non-ASCII character escaped, which reads back as the same strings.
    """
    line = json.dumps(row, ensure_ascii=False)
    return json.dumps(row) if _has_surrogate(line) else line


async def read_records(
    source: str | None,
    *,
    required: tuple[str, ...],
    id_field: str,
    skip_ids: set[str],
    on_bad: Callable[[BadLine], None],
    on_skip: Callable[[Record], None],
    optional: tuple[str, ...] = (),
) -> AsyncGenerator[Record, None]:
    """Yield the usable records of a JSONL file (`None` or `-`: stdin), one line at a time.

    Blank lines are ignored; bad lines and duplicate ids go to `on_bad`; records whose id is in
    `skip_ids` (already in the output) go to `on_skip`. The file is never read whole. Lines are
    read as bytes and decoded one by one, so one line that is not UTF-8 is one bad line.
    """
    seen: set[str] = set()
    stream: anyio.AsyncFile[Any]
    if source is None or source == "-":
        # The raw bytes of stdin when there are any (a replaced sys.stdin may be text only).
        stream = anyio.wrap_file(getattr(sys.stdin, "buffer", sys.stdin))
    else:
        stream = await anyio.open_file(source, "rb")
    number = 0
    try:
        async for text in stream:
            number += 1
            if not text.strip():
                continue
            parsed = parse_line(
                number, text, required=required, id_field=id_field, optional=optional
            )
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
            # Shielded: on Ctrl-C or a cancelled run the file is still closed, not leaked.
            with anyio.CancelScope(shield=True):
                await stream.aclose()


def done_ids(path: str | None) -> set[str]:
    """The ids already written to the output file without an error (for resuming).

    Empty when there is no output. A row whose `error` is set is not counted, so a resumed run
    tries that item again (`compact_output` then removes the old row). A last line cut short by
    an interruption is not counted either, nor a line that is not UTF-8 or not JSON (a hand
    edit): the output is read, never trusted.
    """
    rows = output_rows(path)
    return {str(value["id"]) for value in rows if "id" in value and value.get("error") is None}


def retried_ids(path: str | None) -> set[str]:
    """The ids of the output rows that record an error: the items a resumed run tries again."""
    rows = output_rows(path)
    retry = {str(v["id"]) for v in rows if "id" in v and v.get("error") is not None}
    # An id with both an error row and a complete one (a hand edit) is done.
    return retry - done_ids(path)


def output_rows(path: str | None) -> list[dict[str, Any]]:
    """The JSON-object rows of an output file (none for stdout or a missing file).

    A line cut short by an interruption, or anything else that is not a JSON object, is left
    out: its item runs again.
    """
    if path is None or path == "-" or not Path(path).exists():
        return []
    rows: list[dict[str, Any]] = []
    with open(path, "rb") as file:
        for text in file:
            try:
                value = json.loads(text.decode("utf-8"))
            except (ValueError, RecursionError):  # UnicodeDecodeError is a ValueError too
                continue
            if isinstance(value, dict):
                rows.append(value)
    return rows


def compact_output(path: str | None, drop_ids: set[str]) -> int:
    """Remove the rows of `drop_ids` (earlier errors, about to be retried) from the output file.

    Every other line is kept byte for byte. The file is rewritten beside itself and renamed over
    the original, so an interruption leaves either the old file or the new one, never half of
    one: the output keeps one row per id. Returns how many rows were removed.
    """
    if not drop_ids or path is None or path == "-" or not Path(path).exists():
        return 0
    target = Path(path)
    temporary = target.with_name(f".{target.name}.resume-tmp")
    removed = 0
    with open(target, "rb") as source, open(temporary, "wb") as kept:
        for text in source:
            if _row_id(text) in drop_ids:
                removed += 1
                continue
            kept.write(text)
    os.replace(temporary, target)
    return removed


def _row_id(text: bytes) -> str | None:
    try:
        value = json.loads(text.decode("utf-8"))
    except (ValueError, RecursionError):
        return None
    if isinstance(value, dict) and "id" in value and value.get("error") is not None:
        return str(value["id"])
    return None


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
