"""The setup facts the CLI records with what it writes: the header of every report page.

`eval_setup` is the `setup` of a `jevrefine eval` report (its JSON file and page; what
`jevrefine compare` shows side by side); `run_setup` the facts of a `jevrefine run --report` page.
Both go through `jevrefine.evals._setup.report_setup`, which adds the date and the versions.
"""

from __future__ import annotations

import argparse
from typing import Any

from ..evals._setup import report_setup
from ._config import CliConfig
from ._providers import resolve_provider

__all__ = ["configured_model", "eval_setup", "run_setup"]


def configured_model(config: CliConfig) -> str:
    """The answering model as configured: its provider and name.

    What a report says when no model was opened (every case was already done). Never the base
    URL, which may hold a password.
    """
    section = config.model
    return f"{resolve_provider(section.provider)} {section.name or '(its default model)'}"


def eval_setup(
    args: argparse.Namespace, config: CliConfig, *, model: str | None, concurrency: int
) -> dict[str, Any]:
    """The setup of a `jevrefine eval` report.

    Args:
        args: the parsed `eval` flags (`cases`, `eval_judge`, `limit`).
        config: the settings the run used.
        model: where the model ran (the opened models' description); `None` when none was
            opened, and the configured one is named instead.
        concurrency: cases in flight at once.
    """
    judge = str(args.eval_judge)
    if judge == "config":
        judge = f"config ({config.judge.kind})"
    return report_setup(
        model=model or configured_model(config),
        cases_file=str(args.cases),
        judge=judge,
        max_attempts=1 if args.eval_judge == "none" else config.refine.max_repeat_attempts + 1,
        temperature=config.model.temperature,
        max_tokens=config.max_tokens(),
        concurrency=concurrency,
        **({"limit": args.limit} if getattr(args, "limit", None) is not None else {}),
    )


def run_setup(config: CliConfig, **facts: Any) -> dict[str, Any]:
    """The facts of a `jevrefine run --report` page.

    The run's own `facts` (model, resumed, bad lines, wall time), then the loop's settings, the
    date and the versions.
    """
    judged = config.judge.kind != "none"
    return report_setup(
        **facts,
        judge=config.judge.kind,
        max_attempts=config.refine.max_repeat_attempts + 1 if judged else 1,
        temperature=config.model.temperature,
        max_tokens=config.max_tokens(),
        concurrency=config.concurrency(),
    )
