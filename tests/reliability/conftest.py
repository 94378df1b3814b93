"""Markers of the reliability suite, until pyproject.toml registers them."""

from __future__ import annotations

import pytest


def pytest_configure(config: pytest.Config) -> None:
    # `--strict-markers` is on: a marker must be registered before a test may carry it.
    config.addinivalue_line(
        "markers", "load: the full-size load test (10,000 refinements); run by hand"
    )
