"""The progress the batch commands (`run`, `judge`) and `eval` show: counts, and a live bar.

`Tally` counts what is done (items, passes among the judged ones, errors, tokens) and says it as
the bar's figures; each command adds its own counts on top. `Bar` draws them on stderr with
`rich` (`jevrefine[cli]`), and does nothing when the bar is off or `rich` is missing.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..advisors.chain import LOWEST_PRECEDENCE, BaseAdvisor

if TYPE_CHECKING:
    from rich.console import Console
    from rich.progress import Progress

    from ..client import ChatClientRequest

__all__ = ["AttemptCounter", "Bar", "Tally", "console"]


class AttemptCounter(BaseAdvisor):
    """Innermost advisor: calls `on_attempt` as each attempt's request goes to the model.

    It sits nearest the model, inside self-refine, so it is called once per attempt: the bar
    moves while a slow item is still on its second or third answer.
    """

    name = "cli-progress"
    order = LOWEST_PRECEDENCE

    def __init__(self, on_attempt: Callable[[], None]) -> None:
        self._on_attempt = on_attempt

    def before(self, request: ChatClientRequest) -> ChatClientRequest:
        """Count the request; send it on unchanged."""
        self._on_attempt()
        return request


@dataclass
class Tally:
    """Items done, and of those: judged and passed, errored; tokens spent; since when."""

    done: int = 0
    """Items finished (with or without an error)."""
    judged: int = 0
    """Items finished with a verdict (the pass rate's denominator)."""
    passed: int = 0
    """Judged items that passed."""
    errors: int = 0
    """Items that ended in an error."""
    tokens: int = 0
    """Tokens spent, model and judge."""
    started: float = field(default_factory=time.perf_counter)
    """`time.perf_counter()` at the start."""

    def count(self, *, ok: bool, passed: bool | None) -> None:
        """One more item done: `ok` unless it errored; `passed` when it was judged."""
        self.done += 1
        self.errors += not ok
        if passed is not None:
            self.judged += 1
            self.passed += passed

    def fields(self) -> dict[str, str]:
        """The bar's figures: rate, pass rate, tokens, errors."""
        elapsed = max(time.perf_counter() - self.started, 1e-9)
        return {
            "rate": f"{self.done / elapsed:,.2f}/s",
            "pass_rate": f"{self.passed / self.judged:.0%}" if self.judged else "-",
            "tokens": f"{self.tokens:,}",
            "errors": str(self.errors),
        }


def console(*, enabled: bool) -> Console | None:
    """A console on stderr for the bar; `None` when it is off or `rich` is not installed."""
    if not enabled:
        return None
    try:
        from rich.console import Console
    except ImportError:
        print('no progress bar: pip install "jevrefine[cli]" for one', file=sys.stderr)
        return None
    return Console(stderr=True)


class Bar:
    """The live progress bar (rate, pass rate, tokens, errors) on stderr; silent when off."""

    def __init__(self, console: Console | None, total: int | None) -> None:
        self._progress: Progress | None = None
        if console is None:
            return
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeElapsedColumn,
        )

        self._progress = Progress(
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.fields[rate]}"),
            TextColumn("pass {task.fields[pass_rate]}"),
            TextColumn("{task.fields[tokens]} tokens"),
            TextColumn("{task.fields[errors]} errors"),
            TextColumn("{task.fields[activity]}"),
            TimeElapsedColumn(),
            console=console,
            refresh_per_second=4,
        )
        self._task = self._progress.add_task(
            "jevrefine",
            total=total,
            rate="-",
            pass_rate="-",
            tokens="0",
            errors="0",
            activity="",
        )

    def __enter__(self) -> Bar:
        if self._progress is not None:
            self._progress.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._progress is not None:
            self._progress.stop()

    def advance(self, fields: dict[str, str]) -> None:
        """One more line done; `fields` are the figures shown."""
        self._update(fields, advance=1)

    def show(self, fields: dict[str, str], *, completed: float | None = None) -> None:
        """New figures, no line done (an attempt started): the bar moves while items run.

        `completed` sets the bar's position (a fraction of an item counts: the bar creeps
        forward per attempt; the count shown is whole items).
        """
        self._update(fields, advance=0, completed=completed)

    def _update(
        self, fields: dict[str, str], *, advance: int, completed: float | None = None
    ) -> None:
        if self._progress is not None:
            names = ("rate", "pass_rate", "tokens", "errors", "activity")
            shown: dict[str, Any] = {k: fields[k] for k in names if k in fields}
            if completed is not None:
                self._progress.update(self._task, completed=completed, **shown)
            else:
                self._progress.update(self._task, advance=advance, **shown)
