"""Typed output in the refine loop: an answer that does not fit `entity(T)`'s type fails.

`spec.entity(T)` puts an `OutputSpec` on the request; the answer is read as `T` only after the
chain returns. Without this step an answer the judge passed but that is not a valid `T` (a
population of 6000000 where the type allows less than 100) ended the loop and then failed in
`entity()`, although a retry told what was wrong is exactly what the loop is for. So each judged
attempt of a request that carries an output spec is also read as the type; when it does not fit,
the verdict fails with one more finding, `fits_output_type`, whose detail says what is wrong
("population_millions: input should be less than 100; you wrote 6000000", with the field's
`description` when the type gives one) and so reaches the next attempt's prompt like any other
defect. An answer that fits adds nothing to the verdict.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Final

import pydantic

from ...exceptions import StructuredOutputError
from ...judge.verdict import Finding, Outcome, Verdict

if TYPE_CHECKING:
    from ...judge._judge import Judge
    from ...structured import OutputSpec

__all__ = ["OUTPUT_CRITERION", "output_defect", "with_output_check"]

OUTPUT_CRITERION: Final = "fits_output_type"
"""The finding's criterion name when an answer does not fit the requested type."""

_MOST_PROBLEMS: Final = 5
_MOST_SHOWN: Final = 80


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= _MOST_SHOWN else text[: _MOST_SHOWN - 1] + "…"


def output_defect(spec: OutputSpec[Any], answer: str) -> str | None:
    """What keeps `answer` from being read as `spec`'s type, in words; `None` when it fits."""
    try:
        spec.parse(answer)
    except StructuredOutputError as exc:
        cause = exc.__cause__
        if not isinstance(cause, pydantic.ValidationError):
            return (
                f"The answer is not a JSON value, so it cannot be read as {spec.name}; reply "
                "with the JSON value only"
            )
        problems = []
        for error in cause.errors()[:_MOST_PROBLEMS]:
            where = ".".join(map(str, error["loc"])) or "the value"
            meaning = _description(spec, error["loc"])
            if meaning:
                where += f" ({meaning})"
            message = str(error["msg"])
            message = message[:1].lower() + message[1:]
            wrote = f"; you wrote {_shown(error['input'])}" if "input" in error else ""
            problems.append(f"{where}: {message}{wrote}")
        return f"The answer is not a valid {spec.name}: " + "; ".join(problems)
    return None


def _description(spec: OutputSpec[Any], loc: Sequence[Any]) -> str | None:
    """The schema's `description` of a top-level field, if the type gives one.

    What a field means helps a model more than its name does.
    """
    if len(loc) != 1 or not isinstance(loc[0], str):
        return None
    fields = spec.schema.get("properties")
    field = fields.get(loc[0]) if isinstance(fields, dict) else None
    described = field.get("description") if isinstance(field, dict) else None
    return described.strip() if isinstance(described, str) and described.strip() else None


def with_output_check(
    judge: Judge, verdict: Verdict, spec: OutputSpec[Any] | None, answer: str
) -> Verdict:
    """`verdict`, failed with a `fits_output_type` finding when `answer` does not fit `spec`."""
    if spec is None:
        return verdict
    defect = output_defect(spec, answer)
    if defect is None:
        return verdict
    finding = Finding(OUTPUT_CRITERION, False, Outcome.FAILED, f"{OUTPUT_CRITERION}: {defect}", 0.0)
    findings = (*verdict.findings, finding)
    counted = (*verdict.counted_failures, finding)
    failed = Verdict(False, findings, verdict.response, "", counted)
    feedback = judge.feedback_renderer(failed) or failed.summary()
    return Verdict(False, findings, verdict.response, feedback, counted)
