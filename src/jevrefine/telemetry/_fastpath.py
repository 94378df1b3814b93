"""The inactive-telemetry fast path: is anything listening at all?

Measured by `benchmarks/bench_telemetry.py` ("inactive" rows) and
`benchmarks/bench_chain_overhead.py`: with no SDK installed, a model call through the chain costs
the same as calling the model directly only because `Telemetry.active()` answers from module
globals instead of the public getters. This module is the only place that reads OpenTelemetry's
private globals, and only with the opentelemetry-api series it was checked against
(`OTEL_GLOBALS`); with another, or should the names move, the public getters are used.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Final

from opentelemetry import _logs, metrics, trace

from .._measured import FastPath, takes_fast_path

if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = [
    "OTEL_GLOBALS",
    "PROXY_METER_PROVIDERS",
    "follows_global_logger",
    "follows_global_meter",
    "follows_global_tracer",
    "global_logger_set",
    "global_meter_set",
    "global_provider_set",
    "global_tracer_set",
    "is_no_op_logger",
    "is_no_op_meter",
    "is_no_op_tracer",
]

OTEL_GLOBALS: Final = FastPath(
    name="the inactive-telemetry check (OpenTelemetry's module globals)",
    distribution="opentelemetry-api",
    measured=((1, 45), (1, 46)),
    benchmark="python -m benchmarks --only bench_telemetry bench_chain_overhead",
)
"""The opentelemetry-api series whose private globals this module was checked against."""

_READS_GLOBALS: Final = takes_fast_path(OTEL_GLOBALS)


def global_provider_set(
    module: object, name: str, getter: Callable[[], object], no_ops: tuple[type, ...]
) -> bool:
    """Whether a global provider other than the API's no-ops is set.

    `get_tracer_provider()` and `get_meter_provider()` look the environment up on every call
    while no provider is set (an exception raised and caught inside `os.environ`), twice per
    model call (`bench_telemetry`'s "inactive" rows; the figures in docs/benchmarks.md). The
    module globals they return say the same for nothing; they are the names OpenTelemetry's own
    test utilities reset. Should they move, the public getters are used.
    (The environment's provider, `OTEL_PYTHON_*_PROVIDER`, is loaded when `Telemetry` is built.)
    """
    provider = getattr(module, name, _MISSING)
    if provider is _MISSING:
        provider = getter()
    return provider is not None and not isinstance(provider, no_ops)


_MISSING: Final = object()
_NO_OP_TRACER_PROVIDERS: Final = (trace.ProxyTracerProvider, trace.NoOpTracerProvider)
# The meter API's module globals and its stand-in for an unset global provider have no public
# names. Should they move, the public getter is used and only `NoOpMeterProvider` counts as off:
# metrics are recorded when in doubt, never lost.
_metrics_api: object = (
    sys.modules.get("opentelemetry.metrics._internal") if _READS_GLOBALS else None
)
PROXY_METER_PROVIDERS: Final[tuple[type[metrics.MeterProvider], ...]] = tuple(
    kind
    for kind in (getattr(_metrics_api, "_ProxyMeterProvider", None),)
    if isinstance(kind, type) and issubclass(kind, metrics.MeterProvider)
)
_NO_OP_METER_PROVIDERS: tuple[type[metrics.MeterProvider], ...] = (
    *PROXY_METER_PROVIDERS,
    metrics.NoOpMeterProvider,
)


# The logs API's module globals have no public names either; its unset global is `None` there and
# the public getter hands out a `ProxyLoggerProvider`. Should they move, the public getter is used.
_logs_api: object = sys.modules.get("opentelemetry._logs._internal") if _READS_GLOBALS else None
_trace_api: object = trace if _READS_GLOBALS else None
_PROXY_LOGGER_PROVIDERS: Final[tuple[type[_logs.LoggerProvider], ...]] = tuple(
    kind
    for kind in (getattr(_logs_api, "ProxyLoggerProvider", None),)
    if isinstance(kind, type) and issubclass(kind, _logs.LoggerProvider)
)
_NO_OP_LOGGER_PROVIDERS: tuple[type[_logs.LoggerProvider], ...] = (
    *_PROXY_LOGGER_PROVIDERS,
    _logs.NoOpLoggerProvider,
)


def follows_global_tracer(provider: trace.TracerProvider | None) -> bool:
    """Whether `provider` stands for the global one (unset, or the API's proxy for it)."""
    return provider is None or isinstance(provider, trace.ProxyTracerProvider)


def follows_global_meter(provider: metrics.MeterProvider | None) -> bool:
    """Whether `provider` stands for the global one (unset, or the API's proxy for it)."""
    return provider is None or isinstance(provider, PROXY_METER_PROVIDERS)


def is_no_op_tracer(provider: trace.TracerProvider | None) -> bool:
    """Whether `provider` is the API's no-op."""
    return isinstance(provider, trace.NoOpTracerProvider)


def is_no_op_meter(provider: metrics.MeterProvider | None) -> bool:
    """Whether `provider` is the API's no-op."""
    return isinstance(provider, metrics.NoOpMeterProvider)


def global_tracer_set() -> bool:
    """Whether a recording global tracer provider is installed (checked on every call)."""
    # `global_provider_set` inlined: this runs on every model call with nothing listening.
    provider = getattr(_trace_api, "_TRACER_PROVIDER", _MISSING)
    if provider is _MISSING:
        provider = trace.get_tracer_provider()
    return provider is not None and not isinstance(provider, _NO_OP_TRACER_PROVIDERS)


def global_meter_set() -> bool:
    """Whether a recording global meter provider is installed (checked on every call)."""
    provider = getattr(_metrics_api, "_METER_PROVIDER", _MISSING)
    if provider is _MISSING:
        provider = metrics.get_meter_provider()
    return provider is not None and not isinstance(provider, _NO_OP_METER_PROVIDERS)


def follows_global_logger(provider: _logs.LoggerProvider | None) -> bool:
    """Whether `provider` stands for the global one (unset, or the API's proxy for it)."""
    return provider is None or isinstance(provider, _PROXY_LOGGER_PROVIDERS)


def is_no_op_logger(provider: _logs.LoggerProvider | None) -> bool:
    """Whether `provider` is the API's no-op."""
    return isinstance(provider, _logs.NoOpLoggerProvider)


def global_logger_set() -> bool:
    """Whether a recording global logger provider is installed (checked once per refinement)."""
    return global_provider_set(
        _logs_api, "_LOGGER_PROVIDER", _logs.get_logger_provider, _NO_OP_LOGGER_PROVIDERS
    )
