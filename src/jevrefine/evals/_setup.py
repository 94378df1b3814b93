"""What a report was made with: the setup facts shown in the pages' headers and compared.

`report_setup(model=..., cases_file=..., ...)` adds what every report should say and no caller
should have to look up: the date it was written and the jevrefine and Python versions. Both
`jevrefine eval` (the `setup` of its report) and `jevrefine run --report` (the header of its page)
build their facts with it, and every page shows them with the same renderer
(`_page.facts_panel`, with `SETUP_LABELS`).
"""

from __future__ import annotations

import datetime
import platform
from typing import Any

from .._version import __version__

__all__ = ["SETUP_LABELS", "report_setup"]

SETUP_LABELS = {
    "model": "model",
    "cases_file": "case file",
    "judge": "loop judge",
    "max_attempts": "max attempts",
    "temperature": "temperature",
    "max_tokens": "max tokens",
    "concurrency": "concurrency",
    "limit": "first cases only",
    "date": "written",
    "jevrefine": "jevrefine",
    "python": "Python",
}
"""The label of each setup key, in the order the headers show them (other keys follow)."""


def report_setup(**facts: Any) -> dict[str, Any]:
    """`facts`, then the date (UTC, ISO 8601, to the second) and the jevrefine and Python versions.

    A fact given as `None` is kept: it reads "default" in the header (a setting left to the
    provider, say), which is a fact too.
    """
    now = datetime.datetime.now(datetime.UTC).replace(microsecond=0)
    return {
        **facts,
        "date": now.isoformat().replace("+00:00", "Z"),
        "jevrefine": __version__,
        "python": platform.python_version(),
    }
