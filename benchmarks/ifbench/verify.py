"""IFBench's own verifiers, from `if-verifiable` 0.1.2, as jevrefine `python` assertions.

A case of `benchmarks/ifbench/cases.jsonl` has one assertion per instruction:
`{"type": "python", "value": "benchmarks.ifbench.verify:check_0"}` for the first, `check_1` for
the second, and so on (see `benchmarks/verifiable/verifiers.py` for how they run: IFBench's
strict prompt-level accuracy). IFBench's verifiers import `nltk`, `emoji` and `syllapy` (the
`bench` extra); the four instruction types that need NLTK data files (`NLTK_DATA_TYPES`) are
left out of the case file.
"""

from __future__ import annotations

from ..verifiable.verifiers import (
    PIN,
    InstructionResult,
    Verifiers,
    VerifierUnavailableError,
    instructions_of,
)

__all__ = [
    "MAX_INSTRUCTIONS",
    "NLTK_DATA_TYPES",
    "PIN",
    "VERIFIERS",
    "InstructionResult",
    "VerifierUnavailableError",
    "check",
    "instructions_of",
    "registry",
    "verify",
    "verify_instruction",
]

NLTK_DATA_TYPES = frozenset(
    {"words:words_position", "ratio:stop_words", "words:start_verb", "format:title_case"}
)
"""Instruction types whose verifier needs NLTK data files (punkt, the POS tagger, stop words)
that cannot be downloaded offline; prompts using them are not converted."""

MAX_INSTRUCTIONS = 4
"""`check_0` ... `check_3` exist; IFBench's test prompts have one or two instructions."""

VERIFIERS = Verifiers(
    benchmark="IFBench",
    package="if_verifiable.ifbench",
    imports=("nltk", "emoji", "syllapy"),
    nltk_data_types=NLTK_DATA_TYPES,
)
"""IFBench's verifiers; the functions below are its methods."""

registry = VERIFIERS.registry
verify_instruction = VERIFIERS.verify_instruction
verify = VERIFIERS.verify
check = VERIFIERS.check(__name__)
check_0 = VERIFIERS.check_nth(0, __name__)
check_1 = VERIFIERS.check_nth(1, __name__)
check_2 = VERIFIERS.check_nth(2, __name__)
check_3 = VERIFIERS.check_nth(3, __name__)
