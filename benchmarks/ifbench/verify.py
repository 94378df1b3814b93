"""IFBench's own verifiers, from `if-verifiable` 0.1.2, as jevrefine `python` assertions.

A case of `benchmarks/ifbench/cases.jsonl` has one assertion per instruction:
`{"type": "python", "value": "benchmarks.ifbench.verify:check_0"}` for the first,
`check_1` for the second, and so on. Each is called as `check_i(output, context)` and reads the
instruction's id and arguments from the case's metadata (`context["metadata"]`; promptfoo's
`context["test"]["metadata"]` and `context["vars"]` are accepted too), so a failed assertion
names one instruction.

Scoring follows IFBench's *strict* prompt-level accuracy: the answer as written (no loose
variants), an empty answer fails, and a case passes when every instruction is followed.

Why the package is not simply imported: `if_verifiable/__init__.py` imports `datasets` (and
through it pyarrow, pandas, ...) for its data loaders, which the verifiers never use. So
`if-verifiable` is installed with `--no-deps` (`pip install --no-deps if-verifiable==0.1.2`),
next to the three small libraries its IFBench verifiers import (`nltk`, `emoji`, `syllapy`, in
the `bench` extra), and `if_verifiable.ifbench` is imported under an empty parent package, so the
top-level `__init__` never runs. Its utility module calls `nltk.download` at import time; that is
turned into a no-op while importing (no network here, and none wanted in a benchmark): the four
instruction types that need NLTK data files (`NLTK_DATA_TYPES`) are therefore left out of the
case file.
"""

from __future__ import annotations

import functools
import importlib
import importlib.util
import sys
import types
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = [
    "NLTK_DATA_TYPES",
    "PIN",
    "InstructionResult",
    "VerifierUnavailableError",
    "check",
    "instructions_of",
    "registry",
    "verify",
    "verify_instruction",
]

PIN = "if-verifiable==0.1.2"
"""The verifiers' distribution, installed with `pip install --no-deps`."""

NLTK_DATA_TYPES = frozenset(
    {"words:words_position", "ratio:stop_words", "words:start_verb", "format:title_case"}
)
"""Instruction types whose verifier needs NLTK data files (punkt, the POS tagger, stop words)
that cannot be downloaded offline; prompts using them are not converted."""

MAX_INSTRUCTIONS = 4
"""`check_0` ... `check_3` exist; IFBench's test prompts have one or two instructions."""


class VerifierUnavailableError(RuntimeError):
    """The IFBench verifiers cannot be imported; the message says what to install."""


@dataclass(frozen=True, slots=True)
class InstructionResult:
    """One instruction's verdict on one answer."""

    instruction_id: str
    """IFBench's id, e.g. `count:numbers`."""
    passed: bool
    """Strict: the answer as written follows the instruction."""
    description: str
    """The verifier's own statement of the constraint (what the feedback should name)."""
    error: str | None = None
    """The verifier raised on this answer (counted as not followed), e.g. `IndexError`."""


def _install_hint() -> str:
    return (
        f"the IFBench verifiers need {PIN} (installed without its dependencies) and nltk, "
        f"emoji and syllapy; run: {sys.executable} -m pip install --no-deps {PIN} && "
        f'{sys.executable} -m pip install -e ".[bench]"'
    )


@functools.cache
def registry() -> Mapping[str, Callable[[str], Any]]:
    """IFBench's instruction registry: instruction id -> checker class.

    Raises:
        VerifierUnavailableError: `if-verifiable` or one of its verifiers' imports is missing.
    """
    if "if_verifiable.ifbench.instructions_registry" not in sys.modules:
        _import_verifiers()
    module = sys.modules["if_verifiable.ifbench.instructions_registry"]
    return types.MappingProxyType(dict(module.INSTRUCTION_DICT))


def _import_verifiers() -> None:
    spec = importlib.util.find_spec("if_verifiable")  # finds the package without running it
    if spec is None or not spec.submodule_search_locations:
        raise VerifierUnavailableError(_install_hint())
    if "if_verifiable" not in sys.modules:
        # An empty parent package: the real __init__ would import `datasets`.
        parent = types.ModuleType("if_verifiable")
        parent.__path__ = list(spec.submodule_search_locations)
        sys.modules["if_verifiable"] = parent
    try:
        import nltk
    except ImportError as exc:
        raise VerifierUnavailableError(_install_hint()) from exc
    download = nltk.download
    nltk.download = _no_download
    try:
        importlib.import_module("if_verifiable.ifbench.instructions_registry")
    except ImportError as exc:
        raise VerifierUnavailableError(f"{_install_hint()} ({exc})") from exc
    finally:
        nltk.download = download


def _no_download(*_args: object, **_kwargs: object) -> bool:
    # nltk.download's own "could not download" answer, without trying the network.
    return False


def verify_instruction(
    answer: str, instruction_id: str, kwargs: Mapping[str, Any], prompt: str = ""
) -> InstructionResult:
    """Check one instruction on `answer` with IFBench's verifier (strict)."""
    checker = registry()[instruction_id](instruction_id)
    given = {k: v for k, v in kwargs.items() if v is not None}
    description = str(checker.build_description(**given))
    args = checker.get_instruction_args()
    if args and "prompt" in args:
        # The repeat:* checkers compare the answer with the request itself.
        description = str(checker.build_description(prompt=prompt))
    if not answer.strip():
        return InstructionResult(instruction_id, False, description)
    try:
        passed = bool(checker.check_following(answer))
    except (IndexError, ValueError, KeyError, ZeroDivisionError) as exc:
        # Some verifiers index into lines or sentences that an odd answer lacks; IFBench's own
        # evaluation would crash there, a benchmark counts the instruction as not followed.
        return InstructionResult(instruction_id, False, description, type(exc).__name__)
    return InstructionResult(instruction_id, passed, description)


def verify(
    answer: str,
    instruction_ids: Sequence[str],
    kwargs_list: Sequence[Mapping[str, Any]],
    prompt: str = "",
) -> list[InstructionResult]:
    """Every instruction's result, in order."""
    return [
        verify_instruction(answer, iid, kwargs, prompt)
        for iid, kwargs in zip(instruction_ids, kwargs_list, strict=True)
    ]


def instructions_of(context: Mapping[str, Any]) -> tuple[list[str], list[dict[str, Any]], str]:
    """(instruction ids, their kwargs, the prompt) from an assertion's context.

    The case's metadata is looked for in `context["metadata"]`, then `context["test"]["metadata"]`
    (promptfoo's shape), then `context["vars"]`.
    """
    metadata: Any = context.get("metadata")
    if not isinstance(metadata, Mapping) or "instruction_id_list" not in metadata:
        test = context.get("test")
        metadata = test.get("metadata") if isinstance(test, Mapping) else None
    if not isinstance(metadata, Mapping) or "instruction_id_list" not in metadata:
        metadata = context.get("vars")
    if not isinstance(metadata, Mapping) or "instruction_id_list" not in metadata:
        raise KeyError(
            "the assertion's context carries no IFBench metadata: expected "
            "context['metadata'] with 'instruction_id_list' and 'kwargs' (the case's metadata)"
        )
    ids = list(metadata["instruction_id_list"])
    kwargs = [dict(k) for k in metadata["kwargs"]]
    return ids, kwargs, str(metadata.get("prompt", ""))


def check(output: str, context: Mapping[str, Any]) -> bool:
    """Every instruction of the case is followed (the prompt-level strict score)."""
    ids, kwargs, prompt = instructions_of(context)
    return all(r.passed for r in verify(output, ids, kwargs, prompt))


def _check_nth(index: int) -> Callable[[str, Mapping[str, Any]], bool]:
    def check_nth(output: str, context: Mapping[str, Any]) -> bool:
        ids, kwargs, prompt = instructions_of(context)
        if index >= len(ids):
            raise IndexError(f"check_{index}: the case has only {len(ids)} instruction(s)")
        return verify_instruction(output, ids[index], kwargs[index], prompt).passed

    check_nth.__name__ = check_nth.__qualname__ = f"check_{index}"
    check_nth.__doc__ = f"Instruction {index} of the case is followed (strict)."
    return check_nth


check_0 = _check_nth(0)
check_1 = _check_nth(1)
check_2 = _check_nth(2)
check_3 = _check_nth(3)
