"""The judge's calibration, as the CLI shows it: measured once per judge and model, then cached.

Before `run` or `judge` uses a judge answered by a local model, the judge is run on the built-in
known pairs (`jevrefine.judge.CALIBRATION_PAIRS`) and one line says how it did, on stderr:

    judge: qwen2.5-coder-1.5b (a separate local server) told 12 of 12 known pairs apart ...

or a `WARNING:` when its agreement is near chance (`Calibration.near_chance`). The result is kept
in `judge-calibration.json` in the model cache directory (`jevrefine.local.cache_dir()`), keyed
by the judge model's file (its sha256 for a known model; path, size and time for a GGUF file),
the judge's questions and thresholds, the pairs and the jevrefine version: a change to any of
them measures again, nothing else does. `jevrefine judge --calibrate` measures afresh, for any
judge (a hosted model's or Jev's too), and exits 1 when the judge is near chance.
"""

from __future__ import annotations

import contextlib
import datetime
import hashlib
import json
import os
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from .._version import __version__
from ..judge.calibration import CALIBRATION_PAIRS, Calibration, calibrate
from ..judge.criteria import CheckCriterion, QuestionCriterion
from ._providers import model_identity

if TYPE_CHECKING:
    from ..judge._judge import Judge
    from ..models.base import ChatModel
    from ._config import Models

__all__ = [
    "CACHE_FILE",
    "cached_calibration",
    "calibration_key",
    "calibration_line",
    "is_cached",
    "measure",
    "wants_calibration",
]

CACHE_FILE: Final = "judge-calibration.json"
"""The cache's file name, in `jevrefine.local.cache_dir()`."""

_ADVICE: Final = (
    "Judge with a stronger model (--judge-model), with Jev (--judge jev, TYPESAFE_API_KEY), "
    'or with code checks ([[judge.criteria]] kind = "check", --judge model)'
)


def wants_calibration(models: Models) -> bool:
    """Whether `run` / `judge` calibrate by themselves: a judge answered by a local model."""
    judge_model = models.judge_model
    # A model the CLI started on this machine (an OpenAI-compatible server given by URL is not).
    return (
        models.judge is not None
        and judge_model is not None
        and model_identity(judge_model).startswith("local ")
    )


def calibration_key(judge: Judge, identity: str) -> str:
    """The cache key: the model's identity, the judge's questions and rules, pairs, version."""
    criteria: list[Any] = []
    for criterion in judge.criteria:
        if isinstance(criterion, QuestionCriterion):
            from ..jev.questions import questions_to_wire

            wire = questions_to_wire({criterion.name: criterion.question})
            criteria.append(
                [criterion.name, wire, criterion.minimum, criterion.accept, criterion.decide_by]
            )
        elif isinstance(criterion, CheckCriterion):
            criteria.append([criterion.name, criterion.defect])
    client = judge.client
    settings = {
        name: getattr(client, attribute, None)
        for name, attribute in (
            ("client", "__class__"),
            ("system", "_system_prompt"),
            ("constraint", "_constraint"),
            ("score_starts_at", "_score_starts_at"),
            ("temperature", "_temperature"),
            ("reference", "reference_answers"),
        )
    }
    settings["client"] = type(client).__name__
    pairs = [[p.question, p.answer, p.good] for p in CALIBRATION_PAIRS]
    text = json.dumps(
        [identity, criteria, settings, pairs, __version__], sort_keys=True, default=str
    )
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _cache_path() -> Path:
    from ..local import cache_dir

    return cache_dir() / CACHE_FILE


def _read_cache(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}  # no cache yet, or one that cannot be read: measure again
    return data if isinstance(data, dict) else {}


def _cached(entry: object) -> Calibration | None:
    """A cached calibration, if `entry` is a well-formed one (the file may have been edited)."""
    if not isinstance(entry, dict):
        return None
    fields = [entry.get(k) for k in ("agreed", "total", "passed_bad", "failed_good")]
    if not all(isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in fields):
        return None
    agreed, total, passed_bad, failed_good = fields
    assert isinstance(total, int)
    assert isinstance(agreed, int)
    if total == 0 or agreed + (passed_bad or 0) + (failed_good or 0) != total:
        return None
    return Calibration(agreed, total, passed_bad or 0, failed_good or 0)


def _store(path: Path, key: str, calibration: Calibration, who: str) -> None:
    data = _read_cache(path)
    data[key] = {
        "judge": who,
        "agreed": calibration.agreed,
        "total": calibration.total,
        "passed_bad": calibration.passed_bad,
        "failed_good": calibration.failed_good,
        "measured": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
    }
    # A cache that cannot be written only means measuring again next time.
    with contextlib.suppress(OSError):
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, temporary = tempfile.mkstemp(dir=path.parent, prefix=".calibration-")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as file:
                json.dump(data, file, indent=1, sort_keys=True)
            os.replace(temporary, path)  # readers see the old file or the new one, whole
        finally:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(temporary)


def cached_calibration(judge: Judge, judge_model: ChatModel) -> Calibration | None:
    """The calibration measured earlier for `judge` on `judge_model`, if the cache holds it."""
    key = calibration_key(judge, model_identity(judge_model))
    return _cached(_read_cache(_cache_path()).get(key))


def is_cached(judge: Judge, models: Models) -> bool:
    """Whether `measure` will read the judge's calibration from the cache."""
    judge_model = models.judge_model
    identity = model_identity(judge_model) if judge_model is not None else "jev"
    return _cached(_read_cache(_cache_path()).get(calibration_key(judge, identity))) is not None


async def measure(
    judge: Judge, models: Models, *, refresh: bool = False
) -> tuple[Calibration, bool]:
    """The judge's calibration and whether it came from the cache (`refresh`: measure anyway)."""
    judge_model = models.judge_model
    identity = model_identity(judge_model) if judge_model is not None else "jev"
    key = calibration_key(judge, identity)
    path = _cache_path()
    if not refresh:
        found = _cached(_read_cache(path).get(key))
        if found is not None:
            return found, True
    calibration = await calibrate(judge)
    _store(path, key, calibration, models.judge_description)
    return calibration, False


def calibration_line(calibration: Calibration, models: Models, *, cached: bool) -> str:
    """The line shown before the run: how the judge did, or a WARNING when near chance."""
    who = models.judge_description.split(":", 1)[0] or "the judge"
    where = " (cached; jevrefine judge --calibrate measures again)" if cached else ""
    if calibration.near_chance:
        return (
            f"WARNING: the judge, {who}, {calibration.summary()}: near chance (the interval "
            f"reaches 50 %), so its verdicts say little about the answers. {_ADVICE}.{where}"
        )
    return f"judge: {who} {calibration.summary()}{where}"
