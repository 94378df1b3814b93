r"""JSONL in and out for the batch commands: line-numbered records, bad lines, resume ids.

Hostile input is a bad line, never the end of a run: a line that is not UTF-8, not JSON (a
number of more than 4,300 digits included), nested too deeply, or whose text fields hold a lone
surrogate is reported with its number and skipped. Output is always valid UTF-8: a row whose
strings hold lone surrogates (an id, a model's answer) is written with them escaped
(`\uXXXX`), which reads back as the same string, so resuming recognises that id.
"""

from __future__ import annotations

import contextlib
import json
import os
import stat
import sys
import tempfile
from collections.abc import AsyncGenerator, Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Annotated, Any, Final

import anyio
import pydantic

from ..structured import strict_json_loads
from ._config import ConfigError

__all__ = [
    "BadLine",
    "Record",
    "check_paths",
    "compact_output",
    "count_lines",
    "done_ids",
    "json_line",
    "open_output",
    "output_rows",
    "parse_line",
    "read_records",
    "retried_ids",
    "row_problem",
]

_BOM = "\ufeff"
_MAX_COUNT: Final = 10**15
_Count = Annotated[int, pydantic.Field(ge=0, le=_MAX_COUNT)]


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


def done_ids(path: str | None, on_bad: Callable[[BadLine], None] | None = None) -> set[str]:
    """The ids already written to the output file without an error (for resuming).

    Empty when there is no output. A row whose `error` is set is not counted, so a resumed run
    tries that item again (`compact_output` then removes the old row). A last line cut short by
    an interruption is not counted either, nor a line that is not a valid row (a hand edit, a
    tampered file): the output is read, never trusted; `on_bad` hears of each such line.
    """
    rows = output_rows(path, on_bad)
    return {str(value["id"]) for value in rows if value.get("error") is None}


def retried_ids(path: str | None) -> set[str]:
    """The ids a resumed run tries again: rows that record an error, or are no valid row.

    An id with both such a row and a complete one (a hand edit) is done.
    """
    retry: set[str] = set()
    if path is not None and path != "-" and Path(path).exists():
        with open(path, "rb") as file:
            retry = {found for text in file if (found := _row_id(text)) is not None}
    return retry - done_ids(path)


class _RunRow(pydantic.BaseModel):
    """What `run` and `judge` write (checked when read back); other keys are kept as they are."""

    model_config = pydantic.ConfigDict(strict=True, extra="allow")
    id: str | int  # written as text; an integer id from a hand-made file means the same
    line: Annotated[int, pydantic.Field(ge=1, le=_MAX_COUNT)] | None = None
    answer: str | None = None
    passed: bool | None = None
    outcome: str | None = None
    attempts: _Count | None = None
    tokens: _Count | None = None
    model_tokens: _Count | None = None
    judge_tokens: _Count | None = None
    error: str | None = None
    failed_criteria: list[str] | None = None
    feedback: str | None = None
    summary: str | None = None
    findings: dict[str, str] | None = None


def row_problem(value: Any) -> str | None:
    """Why `value` is no row `run` or `judge` writes (one clause), or `None` when it is one."""
    if not isinstance(value, dict):
        return f"a row is a JSON object, got {type(value).__name__}"
    try:
        _RunRow.model_validate(value)
    except pydantic.ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "the row"
        return f"{where}: {first['msg']}"[:200]
    return None


def _read_row(text: bytes) -> Any:
    """The JSON value of one output line (strict: no NaN; no 4,301-digit number), else `None`."""
    try:
        return strict_json_loads(text.decode("utf-8"))
    except (ValueError, RecursionError):  # UnicodeDecodeError is a ValueError too
        return None


def output_rows(
    path: str | None, on_bad: Callable[[BadLine], None] | None = None
) -> list[dict[str, Any]]:
    """The valid rows of an output file (none for stdout or a missing file).

    Every row is checked (`row_problem`: types, and every number bounded), so a hand edit or a
    tampered file is a row left out, never a crash later on. A line cut short by an
    interruption, or anything else that is no row, goes to `on_bad` (with its line number),
    and its item runs again.
    """
    if path is None or path == "-" or not Path(path).exists():
        return []
    rows: list[dict[str, Any]] = []
    with open(path, "rb") as file:
        for number, text in enumerate(file, start=1):
            if not text.strip():
                continue
            value = _read_row(text)
            problem = "not a JSON row" if value is None else row_problem(value)
            if problem is None:
                rows.append(value)
            elif on_bad is not None:
                on_bad(BadLine(number, problem))
    return rows


def compact_output(path: str | None, drop_ids: set[str]) -> int:
    """Remove the rows of `drop_ids` (earlier errors, about to be retried) from the output file.

    Every other line is kept byte for byte. The file is rewritten into a temporary file made
    securely beside it (`tempfile.mkstemp`: a fresh name, created exclusively, so a planted
    file or symlink is never followed) and renamed over the original: an interruption leaves
    either the old file or the new one, never half of one, and the output keeps one row per id.
    Returns how many rows were removed.
    """
    if not drop_ids or path is None or path == "-" or not Path(path).exists():
        return 0
    target = Path(path)
    mode = stat.S_IMODE(os.stat(target).st_mode)
    handle, temporary = tempfile.mkstemp(
        dir=target.parent, prefix=f".{target.name}.", suffix=".resume-tmp"
    )
    removed = 0
    try:
        with open(target, "rb") as source, os.fdopen(handle, "wb") as kept:
            for text in source:
                if _row_id(text) in drop_ids:
                    removed += 1
                    continue
                kept.write(text)
        os.chmod(temporary, mode)  # mkstemp makes it private; the output keeps its own mode
        os.replace(temporary, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise
    return removed


def _row_id(text: bytes) -> str | None:
    """The id of a line to retry: a row that records an error, or that is no valid row."""
    value = _read_row(text)
    if not isinstance(value, dict):
        return None
    found = value.get("id")
    if isinstance(found, bool) or not isinstance(found, str | int):
        return None
    if value.get("error") is not None or row_problem(value) is not None:
        return str(value["id"])
    return None


def check_paths(inputs: Mapping[str, str | None], outputs: Mapping[str, str | None]) -> None:
    """Refuse, before anything runs, outputs that would overwrite an input or each other.

    `inputs` and `outputs` map a flag's name (for the message) to its path (`None` or `-`:
    not a file). Each output must not be any input (`os.path.samefile`: a symlink or a hard
    link to the input is the input), nor another output, nor a folder, and its folder must
    exist.

    Raises:
        ConfigError: naming the flag, the path and what to do instead.
    """
    files_in = {name: path for name, path in inputs.items() if path not in (None, "-")}
    files_out = {name: path for name, path in outputs.items() if path not in (None, "-")}
    for name, path in files_out.items():
        assert path is not None
        folder = os.path.dirname(os.path.abspath(path))
        if not os.path.isdir(folder):
            raise ConfigError(f"{name} {path}: its folder {folder} does not exist; create it first")
        if os.path.isdir(path):
            raise ConfigError(f"{name} {path} is a folder; give a file name")
        for other, source in files_in.items():
            assert source is not None
            if _same_file(path, source):
                raise ConfigError(
                    f"{name} {path} is the same file as {other} {source}: writing it would "
                    "destroy the input; write to another file"
                )
    names = list(files_out)
    for i, name in enumerate(names):
        for other in names[i + 1 :]:
            if _same_file(files_out[name] or "", files_out[other] or ""):
                raise ConfigError(
                    f"{name} and {other} are the same file ({files_out[name]}); give each its own"
                )


def _same_file(a: str, b: str) -> bool:
    """Whether two paths name one file: `samefile` when both exist, else by their real path."""
    try:
        if os.path.exists(a) and os.path.exists(b):
            return os.path.samefile(a, b)
    except OSError:
        return False
    return os.path.realpath(a) == os.path.realpath(b)


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
