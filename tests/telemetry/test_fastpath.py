"""The inactive-telemetry shortcut (`jevrefine.telemetry._fastpath`): what it answers.

Whether the OpenTelemetry release installed is the one it was checked against (and its private
names still there) is a perf check: `tests/perf/test_fast_paths.py`."""

from __future__ import annotations

from jevrefine.telemetry import _fastpath


def test_unset_globals_read_as_unset() -> None:
    # This test process never sets global providers (the suite passes its own).
    assert not _fastpath.global_tracer_set()
    assert not _fastpath.global_meter_set()
    assert not _fastpath.global_logger_set()
