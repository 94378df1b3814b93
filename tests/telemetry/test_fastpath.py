"""The inactive-telemetry shortcut (`jevrefine.telemetry._fastpath`) against the OpenTelemetry
versions it reads private names of: a new release fails here, so the shortcut is looked at again
(bench_telemetry / bench_chain_overhead say whether it still pays)."""

from __future__ import annotations

from importlib.metadata import version

from opentelemetry import _logs, metrics, trace

from jevrefine.telemetry import _fastpath


def _minor(package: str) -> str:
    return ".".join(version(package).split(".")[:2])


def test_the_pinned_opentelemetry_versions() -> None:
    assert _minor("opentelemetry-api") in _fastpath.CHECKED_API_VERSIONS
    assert _minor("opentelemetry-sdk") in _fastpath.CHECKED_API_VERSIONS


def test_the_private_names_it_reads_exist_in_them() -> None:
    # The module globals the public getters return, and the meter API's stand-in class.
    assert hasattr(trace, "_TRACER_PROVIDER")
    assert _fastpath._metrics_api is not None
    assert hasattr(_fastpath._metrics_api, "_METER_PROVIDER")
    assert _fastpath.PROXY_METER_PROVIDERS
    assert isinstance(metrics.get_meter_provider(), _fastpath.PROXY_METER_PROVIDERS)
    # The logs API's, for the self-refine loop's `Telemetry.listening()`.
    assert _fastpath._logs_api is not None
    assert hasattr(_fastpath._logs_api, "_LOGGER_PROVIDER")
    assert isinstance(_logs.get_logger_provider(), _fastpath._PROXY_LOGGER_PROVIDERS)


def test_unset_globals_read_as_unset() -> None:
    # This test process never sets global providers (the suite passes its own).
    assert not _fastpath.global_tracer_set()
    assert not _fastpath.global_meter_set()
    assert not _fastpath.global_logger_set()
