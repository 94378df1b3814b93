"""`InstrumentationSettings`: where telemetry goes and what it records, one frozen value.

Every client (`ChatClient`, `JudgeClient`, `ModelJudgeClient`) takes one, as `instrumentation=`;
`configure(...)` sets the one used when none is given. The older keyword arguments
(`tracer_provider=` and the others) still work: they build the same value.
"""

from __future__ import annotations

import enum
import os
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Final

from .. import _validate
from ..exceptions import UserError
from ._names import MetricNames, metric_names_from_env

if TYPE_CHECKING:
    from opentelemetry import _logs, metrics, trace

__all__ = [
    "CaptureMode",
    "InstrumentationSettings",
    "TelemetryDefaults",
    "capture_mode_from_env",
    "configure",
    "defaults",
    "restore",
    "settings_of",
]

CAPTURE_CONTENT_ENV: Final = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"


class CaptureMode(enum.Enum):
    """Where message content is recorded (never by default)."""

    NO_CONTENT = "no_content"
    SPAN_ONLY = "span_only"
    EVENT_ONLY = "event_only"
    SPAN_AND_EVENT = "span_and_event"

    @property
    def on_spans(self) -> bool:
        """Whether content goes on span attributes."""
        return self in (CaptureMode.SPAN_ONLY, CaptureMode.SPAN_AND_EVENT)

    @property
    def on_events(self) -> bool:
        """Whether content goes on `gen_ai.client.inference.operation.details` log events."""
        return self in (CaptureMode.EVENT_ONLY, CaptureMode.SPAN_AND_EVENT)


def capture_mode_from_env() -> CaptureMode:
    """The content-capture mode the environment asks for; `NO_CONTENT` when unset or unknown."""
    raw = os.environ.get(CAPTURE_CONTENT_ENV, "").strip().lower()
    if raw == "true":  # the older instrumentations' boolean form
        return CaptureMode.SPAN_ONLY
    try:
        return CaptureMode(raw)
    except ValueError:
        return CaptureMode.NO_CONTENT


@dataclass(frozen=True, slots=True, kw_only=True)
class InstrumentationSettings:
    """Where a client's spans, metrics and log events go, and what they carry.

    ```python
    settings = InstrumentationSettings(tracer_provider=provider, capture_content=True)
    client = ChatClient(model, instrumentation=settings)
    judge_client = ModelJudgeClient(judge_model, instrumentation=settings)
    ```

    Build it once and share it; each client builds its tracer and instruments from it once.
    """

    tracer_provider: trace.TracerProvider | None = None
    """Where spans go; `None`: the global provider."""
    meter_provider: metrics.MeterProvider | None = None
    """Where metrics go; `None`: the global provider."""
    logger_provider: _logs.LoggerProvider | None = None
    """Where log events go; `None`: the global provider (a no-op unless one is set)."""
    capture_content: bool | CaptureMode | None = None
    """Content capture (`True`: on spans; or a `CaptureMode`); `None`: the environment's
    `OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT`."""
    legacy_attributes: bool = False
    """Also emit seed 004's older attributes (`gen_ai.system`, upper-case finish reasons, a
    `total` token type)."""
    metric_names: MetricNames | None = None
    """Metric names; `None`: as `OTEL_SEMCONV_STABILITY_OPT_IN` says (the released names unless
    it holds `gen_ai_latest_experimental`)."""

    def __post_init__(self) -> None:
        capture = self.capture_content
        if capture is not None and not isinstance(capture, bool | CaptureMode):
            raise UserError(
                f"capture_content={_validate.shown(capture)} is not a bool or a CaptureMode: "
                "pass True, False, a CaptureMode, or None (the environment decides)"
            )
        _validate.boolean("legacy_attributes", self.legacy_attributes)

    @property
    def capture(self) -> CaptureMode:
        """The content-capture mode these settings resolve to now."""
        capture = self.capture_content
        if capture is None:
            return capture_mode_from_env()
        if isinstance(capture, CaptureMode):
            return capture
        return CaptureMode.SPAN_ONLY if capture else CaptureMode.NO_CONTENT

    @property
    def names(self) -> MetricNames:
        """The metric names these settings resolve to now."""
        return self.metric_names or metric_names_from_env()


TelemetryDefaults = InstrumentationSettings
"""The older name of the value `configure(...)` returns."""

_defaults = InstrumentationSettings()


def configure(
    settings: InstrumentationSettings | None = None,
    /,
    *,
    tracer_provider: trace.TracerProvider | None = None,
    meter_provider: metrics.MeterProvider | None = None,
    logger_provider: _logs.LoggerProvider | None = None,
    capture_content: bool | CaptureMode | None = None,
    legacy_attributes: bool = False,
) -> InstrumentationSettings:
    """Set the instrumentation of every `ChatClient`, `JudgeClient` and `ModelJudgeClient`.

    Applies to clients built after the call; settings given to a client's constructor win.
    Each call replaces all defaults (`configure()` restores the global providers and the
    environment's content setting). Pass an `InstrumentationSettings`, or its fields.

    ```python
    jevrefine.telemetry.configure(tracer_provider=provider, meter_provider=meters)
    ```

    Returns:
        The previous defaults, for `restore(...)`.
    """
    global _defaults
    previous = _defaults
    _defaults = settings or InstrumentationSettings(
        tracer_provider=tracer_provider,
        meter_provider=meter_provider,
        logger_provider=logger_provider,
        capture_content=capture_content,
        legacy_attributes=legacy_attributes,
    )
    return previous


def restore(saved: InstrumentationSettings) -> None:
    """Put back defaults that `configure(...)` returned."""
    global _defaults
    _defaults = saved


def defaults() -> InstrumentationSettings:
    """The defaults `configure(...)` set last."""
    return _defaults


def settings_of(
    instrumentation: InstrumentationSettings | None,
    *,
    tracer_provider: trace.TracerProvider | None = None,
    meter_provider: metrics.MeterProvider | None = None,
    logger_provider: _logs.LoggerProvider | None = None,
    capture_content: bool | CaptureMode | None = None,
    legacy_attributes: bool | None = None,
) -> InstrumentationSettings:
    """The one settings value of a client.

    `instrumentation`, or else the defaults with the older keyword arguments laid over them
    field by field (an argument given wins).

    Raises:
        UserError: `instrumentation` is not an `InstrumentationSettings`, or it is given
            together with the older keyword arguments (which would silently lose one of them).
    """
    loose = {
        "tracer_provider": tracer_provider,
        "meter_provider": meter_provider,
        "logger_provider": logger_provider,
        "capture_content": capture_content,
        "legacy_attributes": legacy_attributes,
    }
    given = {name: value for name, value in loose.items() if value is not None}
    if instrumentation is not None:
        if not isinstance(instrumentation, InstrumentationSettings):
            raise UserError(
                f"instrumentation={_validate.shown(instrumentation)} is not an "
                "InstrumentationSettings: pass e.g. "
                "instrumentation=InstrumentationSettings(tracer_provider=provider)"
            )
        if given:
            raise UserError(
                f"pass either instrumentation= or {', '.join(sorted(given))}=, not both: put "
                "them in the InstrumentationSettings"
            )
        return instrumentation
    return replace(_defaults, **given) if given else _defaults  # type: ignore[arg-type]
