"""What the CLI tests share: fake keys, JSONL in and out, `main()` off the loop, a Jev config.

The commands run in-process on the fake OpenAI and Jev servers (`jevrefine.testing`); `run_cli`
puts `main()`, which starts its own event loop, on a worker thread beside the fakes' loop.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import anyio
import pytest

from jevrefine import cli

SECRET = "sk-test-do-not-print-0123456789"
"""The fake API key: a test that prints output asserts it is not there."""


def use_keys(monkeypatch: pytest.MonkeyPatch, *, jev: bool = True) -> None:
    """OpenAI's key (and the Jev one, when `jev`) set to `SECRET`; no Anthropic key, so
    `--provider auto` picks OpenAI; no `OPENAI_BASE_URL` from the developer's shell."""
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    if jev:
        monkeypatch.setenv("TYPESAFE_API_KEY", SECRET)
    else:
        monkeypatch.delenv("TYPESAFE_API_KEY", raising=False)
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)


def write_jsonl(path: Path, rows: list[Any], *, extra_lines: tuple[str, ...] = ()) -> Path:
    """`rows` as JSON lines, then `extra_lines` as they are (bad input, duplicates)."""
    lines = [json.dumps(row) for row in rows] + list(extra_lines)
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return path


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    """The rows of a JSONL output file."""
    # "\n" only: a U+2028 inside a JSON string is text, not a line break.
    return [json.loads(line) for line in path.read_text(encoding="utf-8").split("\n") if line]


async def run_cli(*argv: str) -> int:
    """`jevrefine *argv` in-process; its exit status."""
    return await anyio.to_thread.run_sync(cli.main, list(argv))


def good_unless_bad(state: dict[str, Any], questions: dict[str, Any]) -> dict[str, float]:
    """A fake Jev answer: P(yes) = 0.9, except for answers that mention 'bad'."""
    low = "bad" in state["assistant_answer"]
    return {question: 0.1 if low else 0.9 for question in questions}


def jev_config(
    tmp_path: Path,
    jev_url: str,
    *,
    model: str = "",
    criteria: str = "",
    refine: Mapping[str, Any] | None = None,
    run: str = "",
) -> Path:
    """`jevrefine.toml` in `tmp_path`: the fake model `fake-model` on OpenAI, judged on the Jev
    server at `jev_url` by one question (`is_good`, minimum 0.7), one retry.

    `model` and `criteria` are TOML lines added to `[model]` and after the criterion, `refine`
    more `[refine]` keys, `run` a `[run]` section's lines.
    """
    more_refine = "".join(f"{k} = {json.dumps(v)}\n" for k, v in (refine or {}).items())
    config = tmp_path / "jevrefine.toml"
    config.write_text(
        f"""
[model]
provider = "openai"
name = "fake-model"
{model}
[judge]
kind = "jev"
base_url = "{jev_url}"

[[judge.criteria]]
name = "is_good"
question = "Is `assistant_answer` good?"
when_false = "The answer is not good"
minimum = 0.7
{criteria}
[refine]
max_repeat_attempts = 1
{more_refine}
{"[run]" if run else ""}
{run}
""",
        encoding="utf-8",
    )
    return config
