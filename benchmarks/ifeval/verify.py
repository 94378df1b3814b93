"""IFEval's own verifiers, from `if-verifiable` 0.1.2, as jevrefine `python` assertions.

A case of `benchmarks/ifeval/cases.jsonl` has one assertion per instruction:
`{"type": "python", "value": "benchmarks.ifeval.verify:check_0"}` for the first, `check_1` for
the second, and so on (see `benchmarks/verifiable/verifiers.py` for how they run: IFEval's
strict prompt-level accuracy, `test_instruction_following_strict`). IFEval's verifiers import
`nltk`, `langdetect` and `immutabledict` (the `bench` extra). Left out of the case file:

- the two instruction types that need NLTK's punkt data (`NLTK_DATA_TYPES`): sentence counting,
  and counting capitalised words (`nltk.word_tokenize`);
- `keywords:letter_frequency` asked of a character that is not a letter (IFEval's verifier then
  counts a random letter instead: `draws_random_letter`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..verifiable.verifiers import Verifiers

__all__ = ["MAX_INSTRUCTIONS", "NLTK_DATA_TYPES", "VERIFIERS", "check", "draws_random_letter"]

NLTK_DATA_TYPES = frozenset(
    {"length_constraints:number_sentences", "change_case:capital_word_frequency"}
)
"""Instruction types whose verifier needs NLTK's punkt tokenizer data, which cannot be
downloaded offline; prompts using them are not converted."""

MAX_INSTRUCTIONS = 3
"""`check_0` ... `check_2` exist; IFEval's prompts have one to three instructions."""


def draws_random_letter(instruction_id: str, kwargs: Mapping[str, Any]) -> bool:
    """IFEval's letter-frequency verifier would count a random letter, not the one asked for.

    Its `build_description` keeps `letter` only when it is one character whose lower case is
    `a` to `z`, and draws a random ASCII letter otherwise: two of IFEval's prompts ask for `#`
    and `!`, which it never counts.
    """
    if instruction_id != "keywords:letter_frequency":
        return False
    letter = kwargs.get("letter")
    return not (isinstance(letter, str) and len(letter) == 1 and "a" <= letter.lower() <= "z")


VERIFIERS = Verifiers(
    benchmark="IFEval",
    package="if_verifiable.ifeval",
    imports=("nltk", "langdetect", "immutabledict"),
    nltk_data_types=NLTK_DATA_TYPES,
    draws_random_argument=draws_random_letter,
)
"""IFEval's verifiers; `check` and `check_<i>` are its methods."""

check = VERIFIERS.check(__name__)
check_0 = VERIFIERS.check_nth(0, __name__)
check_1 = VERIFIERS.check_nth(1, __name__)
check_2 = VERIFIERS.check_nth(2, __name__)
