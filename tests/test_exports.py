"""The public facade: sorted __all__, every public name documented."""

from __future__ import annotations

import importlib
import inspect

import pytest

import jevrefine

PUBLIC_MODULES = [
    "jevrefine",
    "jevrefine.messages",
    "jevrefine.exceptions",
    "jevrefine.client",
    "jevrefine.advisors",
    "jevrefine.models",
    "jevrefine.structured",
    "jevrefine.telemetry",
    "jevrefine.testing",
    "jevrefine.tools",
    "jevrefine.local",
    "jevrefine.context_keys",
    "jevrefine.jev",
    "jevrefine.judge",
    "jevrefine.memory",
    "jevrefine.models.openai",
    "jevrefine.models.anthropic",
    "jevrefine.models.jev",
    "jevrefine.advisors.guardrail",
    "jevrefine.advisors.retrieval",
    "jevrefine.advisors.logging_advisor",
    "jevrefine.retrieval",
    "jevrefine.judge.patterns",
    "jevrefine.cli",
    "jevrefine.batch",
    "jevrefine.rate_limit",
    "jevrefine.jev.batch",
    "jevrefine.ray",
    "jevrefine.integrations",
    "jevrefine.integrations.fastapi",
    "jevrefine.integrations.aiohttp",
    "jevrefine.streaming",
]


def test_all_is_complete_and_unique() -> None:
    # Sorting is ruff's RUF022 (constants, then classes, then functions).
    public = [n for n in vars(jevrefine) if not n.startswith("_") and n[0].isupper()]
    assert len(jevrefine.__all__) == len(set(jevrefine.__all__))
    assert [n for n in public if n not in jevrefine.__all__] == []
    assert [n for n in jevrefine.__all__ if not hasattr(jevrefine, n)] == []


@pytest.mark.parametrize("module_name", PUBLIC_MODULES)
def test_every_public_name_has_a_docstring(module_name: str) -> None:
    module = importlib.import_module(module_name)
    assert module.__doc__, f"{module_name} has no module docstring"
    undocumented = []
    for name in getattr(module, "__all__", []):
        value = getattr(module, name)
        if (inspect.isclass(value) or inspect.isfunction(value)) and not inspect.getdoc(value):
            undocumented.append(name)
        if inspect.isclass(value):
            for attr, member in vars(value).items():
                if attr.startswith("_") or not (
                    inspect.isfunction(member) or isinstance(member, property)
                ):
                    continue
                if not inspect.getdoc(member):
                    undocumented.append(f"{name}.{attr}")
    assert undocumented == []


def test_version_is_exported() -> None:
    assert jevrefine.__version__.count(".") == 2
