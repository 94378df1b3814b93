"""One benchmark's prompts as a jevrefine case file (the conversion behind each `convert.py`).

A benchmark's folder `benchmarks/<name>/` holds its prompts, unchanged, in `data/`, its
`verify.py` (the assertions' `check_<i>`) and `convert.py`, which writes `cases.jsonl` there. The
rows (`key`, `prompt`, `instruction_id_list`, `kwargs`) become one case each, in the source's
order, when every instruction's verifier runs as written (`Verifiers.runs_as_written`; the
others are left out and counted). A case `<name>-<key>` has one `python` assertion per
instruction (`benchmarks.<name>.verify:check_<i>`) and, in `metadata`, the source file's name,
the row's key, the instruction ids and their non-null arguments.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .verifiers import Verifiers

__all__ = ["CaseFile"]


@dataclass(frozen=True, kw_only=True)
class CaseFile:
    """Where one benchmark's prompts come from, where its cases go, and how they are named."""

    verifiers: Verifiers
    """The benchmark's verifiers (which instructions are kept)."""
    source: Path
    """The benchmark's prompts, unchanged (JSONL)."""
    path: Path
    """The case file written from them (`cases.jsonl`)."""
    id_prefix: str
    """A case's id is `<id_prefix>-<key>`."""
    assertions: str
    """The module whose `check_<i>` the assertions call: `benchmarks.ifbench.verify`."""
    max_instructions: int
    """How many `check_<i>` that module defines."""
    needs_prompt: tuple[str, ...] = ()
    """Instruction id prefixes whose verifier compares the answer with the request (IFBench's
    `repeat:`): their case carries the prompt in its metadata too."""

    @classmethod
    def beside(
        cls, module: str, verifiers: Verifiers, source: str, max_instructions: int, **options: Any
    ) -> CaseFile:
        """The case file of the benchmark whose folder holds `module` (a `convert.py`).

        `source` is the prompts' file name in its `data/`; `max_instructions` how many
        `check_<i>` its `verify.py` defines; `options`, `needs_prompt`.
        """
        folder = Path(module).parent
        return cls(
            verifiers=verifiers,
            source=folder / "data" / source,
            path=folder / "cases.jsonl",
            id_prefix=folder.name,
            assertions=f"benchmarks.{folder.name}.verify",
            max_instructions=max_instructions,
            **options,
        )

    def read_source(self, path: Path | None = None) -> Iterator[dict[str, Any]]:
        """The benchmark's rows (from `source` unless `path` is given)."""
        with (path or self.source).open(encoding="utf-8") as lines:
            for line in lines:
                if line.strip():
                    yield json.loads(line)

    def to_case(self, row: Mapping[str, Any]) -> dict[str, Any] | None:
        """The jevrefine case of one row; `None` when a verifier cannot check it as written."""
        ids = list(row["instruction_id_list"])
        kwargs = [{k: v for k, v in args.items() if v is not None} for args in row["kwargs"]]
        if not all(self.verifiers.runs_as_written(i, k) for i, k in zip(ids, kwargs, strict=True)):
            return None
        if len(ids) > self.max_instructions:
            raise ValueError(
                f"{self.verifiers.benchmark} row {row['key']} has {len(ids)} instructions; add "
                f"check_<i> up to check_{len(ids) - 1} to {self.assertions}"
            )
        metadata: dict[str, Any] = {
            "source": self.source.stem,
            "key": str(row["key"]),
            "instruction_id_list": ids,
            "kwargs": kwargs,
        }
        if self.needs_prompt and any(iid.startswith(self.needs_prompt) for iid in ids):
            metadata["prompt"] = row["prompt"]
        return {
            "id": f"{self.id_prefix}-{row['key']}",
            "input": row["prompt"],
            "assert": [
                {"type": "python", "value": f"{self.assertions}:check_{index}"}
                for index in range(len(ids))
            ],
            "metadata": metadata,
        }

    def convert(self, rows: Iterable[Mapping[str, Any]]) -> tuple[list[dict[str, Any]], int]:
        """(the cases, how many rows were left out)."""
        cases: list[dict[str, Any]] = []
        left_out = 0
        for row in rows:
            case = self.to_case(row)
            if case is None:
                left_out += 1
            else:
                cases.append(case)
        return cases, left_out

    def load(self) -> list[dict[str, Any]]:
        """The converted cases (from `path`)."""
        with self.path.open(encoding="utf-8") as lines:
            return [json.loads(line) for line in lines if line.strip()]

    def main(self, argv: list[str] | None = None) -> int:
        """`python -m benchmarks.<benchmark>.convert [--source FILE] [--out FILE]`."""
        parser = argparse.ArgumentParser(
            description=f"Convert {self.verifiers.benchmark}'s prompts to a jevrefine case file."
        )
        parser.add_argument("--source", type=Path, default=self.source)
        parser.add_argument("--out", type=Path, default=self.path)
        args = parser.parse_args(argv)
        cases, left_out = self.convert(self.read_source(args.source))
        with args.out.open("w", encoding="utf-8") as out:
            for case in cases:
                out.write(json.dumps(case, ensure_ascii=False) + "\n")
        checks = sum(len(c["assert"]) for c in cases)
        print(
            f"wrote {len(cases)} cases ({checks} instructions) to {args.out}; left out {left_out} "
            "prompts whose verifiers need NLTK data or check a random argument",
            file=sys.stderr,
        )
        return 0
