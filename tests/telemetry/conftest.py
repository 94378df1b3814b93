"""Fixtures of the telemetry conformance tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from jevrefine import telemetry
from otel_support import Otel


@pytest.fixture
def rec() -> Otel:
    return Otel()


@pytest.fixture(autouse=True)
def _restore_telemetry_defaults() -> Iterator[None]:
    saved = telemetry.defaults()
    yield
    telemetry.restore(saved)
