"""One benchmark's own verifiers, from `if-verifiable` 0.1.2, as jevrefine `python` assertions.

A case of a converted benchmark has one assertion per instruction, e.g.
`{"type": "python", "value": "benchmarks.ifeval.verify:check_0"}` for the first, `check_1` for
the second, and so on. Each is called as `check_i(output, context)` and reads the instruction's
id and arguments from the case's metadata (`context["metadata"]`; promptfoo's
`context["test"]["metadata"]` and `context["vars"]` are accepted too), so a failed assertion
names one instruction.

Scoring is the benchmarks' *strict* prompt-level accuracy: the answer as written (no loose
variants), an empty answer fails, and a case passes when every instruction is followed.

Why the package is not simply imported: `if_verifiable/__init__.py` imports `datasets` (and
through it pyarrow, pandas, ...) for its data loaders, which the verifiers never use. So
`if-verifiable` is installed with `--no-deps` (`pip install --no-deps if-verifiable==0.1.2`),
next to the small libraries its verifiers import (in the `bench` and `dev` extras), and a
benchmark's registry is imported under an empty parent package, so the top-level `__init__`
never runs. IFBench's utility module calls `nltk.download` at import time; that is turned into a
no-op while importing (no network here, and none wanted in a benchmark), so the instruction
types whose verifier needs NLTK data files (`Verifiers.nltk_data_types`) are left out of the case
files. `langdetect` (IFEval's language and case checks) draws random numbers seeded from the
operating system unless told otherwise; it is seeded, so one answer always gets one verdict.
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
    "PIN",
    "InstructionResult",
    "VerifierUnavailableError",
    "Verifiers",
    "instructions_of",
]

PIN = "if-verifiable==0.1.2"
"""The verifiers' distribution, installed with `pip install --no-deps`."""

_PARENT = "if_verifiable"
LANGDETECT_SEED = 0
"""The seed `langdetect` is given (any fixed one makes its verdicts repeatable)."""


class VerifierUnavailableError(RuntimeError):
    """A benchmark's verifiers cannot run here; the message says what to install or why not."""


@dataclass(frozen=True, slots=True)
class InstructionResult:
    """One instruction's verdict on one answer."""

    instruction_id: str
    """The benchmark's id, e.g. `count:numbers` (IFBench) or `punctuation:no_comma` (IFEval)."""
    passed: bool
    """Strict: the answer as written follows the instruction."""
    description: str
    """The verifier's own statement of the constraint (what the feedback should name)."""
    error: str | None = None
    """The verifier raised on this answer (counted as not followed), e.g. `IndexError`."""


def _takes_arguments_as_given(_instruction_id: str, _kwargs: Mapping[str, Any]) -> bool:
    return False


@dataclass(frozen=True, kw_only=True, slots=True)
class Verifiers:
    """One benchmark's instruction registry in `if-verifiable`, run as its strict evaluation."""

    benchmark: str
    """The benchmark's name, for messages: `IFBench`."""
    package: str
    """Its subpackage of `if_verifiable`: `if_verifiable.ifbench`."""
    imports: tuple[str, ...]
    """The libraries its verifiers import (installed by the `bench` and `dev` extras)."""
    nltk_data_types: frozenset[str] = frozenset()
    """Instruction types whose verifier needs NLTK data files (punkt, the POS tagger, stop
    words) that cannot be downloaded offline; prompts using them are not converted."""
    draws_random_argument: Callable[[str, Mapping[str, Any]], bool] = _takes_arguments_as_given
    """True for an instruction (id, arguments) whose verifier replaces an argument it does not
    accept with a random one, so it checks something other than the prompt asks; such prompts
    are not converted."""

    def runs_as_written(self, instruction_id: str, kwargs: Mapping[str, Any]) -> bool:
        """The verifier runs offline and checks the instruction as the prompt states it."""
        return instruction_id not in self.nltk_data_types and not self.draws_random_argument(
            instruction_id, kwargs
        )

    def registry(self) -> Mapping[str, Callable[[str], Any]]:
        """The benchmark's instruction registry: instruction id -> checker class.

        Raises:
            VerifierUnavailableError: `if-verifiable` or one of its verifiers' imports is missing.
        """
        return _registry(self.package, self._install_hint())

    def verify_instruction(
        self, answer: str, instruction_id: str, kwargs: Mapping[str, Any], prompt: str = ""
    ) -> InstructionResult:
        """Check one instruction on `answer` with the benchmark's verifier (strict).

        Raises:
            KeyError: the benchmark has no such instruction.
            VerifierUnavailableError: the verifier needs NLTK data files that are not here.
        """
        known = self.registry()
        if instruction_id not in known:
            raise KeyError(
                f"{self.benchmark} has no instruction {instruction_id!r}; pass one of its "
                f"instruction ids, e.g. {sorted(known)[:3]}"
            )
        checker = known[instruction_id](instruction_id)
        given = {k: v for k, v in kwargs.items() if v is not None}
        description = str(checker.build_description(**given))
        args = checker.get_instruction_args()
        if args and "prompt" in args:
            # IFBench's repeat:* checkers compare the answer with the request itself.
            description = str(checker.build_description(prompt=prompt))
        if not answer.strip():
            return InstructionResult(instruction_id, False, description)
        try:
            passed = bool(checker.check_following(answer))
        except (IndexError, ValueError, KeyError, ZeroDivisionError) as exc:
            # Some verifiers index into lines or sentences that an odd answer lacks; the
            # benchmark's own evaluation would crash there, we count it as not followed.
            return InstructionResult(instruction_id, False, description, type(exc).__name__)
        except LookupError as exc:  # nltk's "Resource punkt not found"
            raise VerifierUnavailableError(
                f"{self.benchmark}'s verifier of {instruction_id} needs NLTK data files, which "
                "are not downloaded here (its prompts are left out of the case file)"
            ) from exc
        return InstructionResult(instruction_id, passed, description)

    def verify(
        self,
        answer: str,
        instruction_ids: Sequence[str],
        kwargs_list: Sequence[Mapping[str, Any]],
        prompt: str = "",
    ) -> list[InstructionResult]:
        """Every instruction's result, in order."""
        return [
            self.verify_instruction(answer, iid, kwargs, prompt)
            for iid, kwargs in zip(instruction_ids, kwargs_list, strict=True)
        ]

    def passes(self, output: str, context: Mapping[str, Any]) -> bool:
        """Every instruction of the case is followed (the prompt-level strict score)."""
        ids, kwargs, prompt = instructions_of(context)
        return all(r.passed for r in self.verify(output, ids, kwargs, prompt))

    def follows(self, index: int, output: str, context: Mapping[str, Any]) -> bool:
        """Instruction `index` of the case is followed (strict)."""
        ids, kwargs, prompt = instructions_of(context)
        if index >= len(ids):
            raise IndexError(f"check_{index}: the case has only {len(ids)} instruction(s)")
        return self.verify_instruction(output, ids[index], kwargs[index], prompt).passed

    def check(self, module: str) -> Callable[[str, Mapping[str, Any]], bool]:
        """The assertion `module:check`: every instruction of the case is followed.

        `module` is the benchmark's verify module (its `__name__`): a jevrefine `python`
        reference takes only a function whose `__module__` is the module it names.
        """

        def check(output: str, context: Mapping[str, Any]) -> bool:
            return self.passes(output, context)

        return _defined_in(module, check, "check", "Every instruction of the case is followed.")

    def check_nth(self, index: int, module: str) -> Callable[[str, Mapping[str, Any]], bool]:
        """The assertion `module:check_<index>`: instruction `index` of the case is followed."""

        def check_nth(output: str, context: Mapping[str, Any]) -> bool:
            return self.follows(index, output, context)

        doc = f"Instruction {index} of the case is followed (strict)."
        return _defined_in(module, check_nth, f"check_{index}", doc)

    def _install_hint(self) -> str:
        libraries = ", ".join(self.imports)
        return (
            f"the {self.benchmark} verifiers need {PIN} (installed without its dependencies) "
            f"and {libraries}; run: {sys.executable} -m pip install --no-deps {PIN} && "
            f'{sys.executable} -m pip install -e ".[bench]"'
        )


def _defined_in(
    module: str, function: Callable[[str, Mapping[str, Any]], bool], name: str, doc: str
) -> Callable[[str, Mapping[str, Any]], bool]:
    function.__module__ = module
    function.__name__ = function.__qualname__ = name
    function.__doc__ = doc
    return function


@functools.cache
def _registry(package: str, install_hint: str) -> Mapping[str, Callable[[str], Any]]:
    name = f"{package}.instructions_registry"
    if name not in sys.modules:
        _import_without_the_parent_init(name, install_hint)
    _seed_langdetect()
    return types.MappingProxyType(dict(sys.modules[name].INSTRUCTION_DICT))


def _import_without_the_parent_init(name: str, install_hint: str) -> None:
    if _PARENT not in sys.modules:  # a second benchmark finds the parent of the first in place
        spec = importlib.util.find_spec(_PARENT)  # finds the package without running it
        if spec is None or not spec.submodule_search_locations:
            raise VerifierUnavailableError(install_hint)
        # An empty parent package: the real __init__ would import `datasets`.
        parent = types.ModuleType(_PARENT)
        parent.__path__ = list(spec.submodule_search_locations)
        parent.__spec__ = spec  # so that importlib.util.find_spec still answers for it
        sys.modules[_PARENT] = parent
    try:
        import nltk
    except ImportError as exc:
        raise VerifierUnavailableError(install_hint) from exc
    download = nltk.download
    nltk.download = _no_download
    try:
        importlib.import_module(name)
    except ImportError as exc:
        raise VerifierUnavailableError(f"{install_hint} ({exc})") from exc
    finally:
        nltk.download = download


def _no_download(*_args: object, **_kwargs: object) -> bool:
    # nltk.download's own "could not download" answer, without trying the network.
    return False


def _seed_langdetect() -> None:
    langdetect = sys.modules.get("langdetect")
    if langdetect is not None:
        # Unseeded, detect() may name two languages for one short text in turn ("si si": fi or
        # it), and a benchmark would score one answer both ways.
        langdetect.DetectorFactory.seed = LANGDETECT_SEED


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
            "the assertion's context carries no instruction metadata: expected "
            "context['metadata'] with 'instruction_id_list' and 'kwargs' (the case's metadata)"
        )
    ids = list(metadata["instruction_id_list"])
    kwargs = [dict(k) for k in metadata["kwargs"]]
    return ids, kwargs, str(metadata.get("prompt", ""))
