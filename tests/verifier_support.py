"""What the tests of the benchmarks' case files (IFBench, IFEval) share.

A benchmark's verifiers come from `if-verifiable` (installed with `--no-deps`) and the small
libraries they import; without them a test that runs them skips with the install command, except
under CI, where a missing verifier is a failure (CI installs them).
"""

from __future__ import annotations

import importlib
import os
from typing import Any

import pytest
from benchmarks.verifiable.verifiers import Verifiers, VerifierUnavailableError

DUMMY = "Hello. This is a short answer, with one sentence more.\n\nA second paragraph."
"""An answer every assertion can be run on."""


def skip_without(verifiers: Verifiers) -> pytest.MarkDecorator:
    """Skip (outside CI) when `verifiers` cannot be imported, with what to install."""
    try:
        verifiers.registry()
        missing = None
    except VerifierUnavailableError as exc:
        missing = str(exc)
    return pytest.mark.skipif(
        missing is not None and not os.environ.get("CI"), reason=missing or ""
    )


def resolve(reference: str) -> Any:
    """The function a `python` assertion's `module:function` names."""
    module, _, name = reference.partition(":")
    return getattr(importlib.import_module(module), name)
