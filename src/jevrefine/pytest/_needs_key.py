"""The `needs_key` marker: skip a test, saying why, unless the named variables are set."""

from __future__ import annotations

import os

import pytest

__all__ = ["MARKER", "missing_keys", "pytest_collection_modifyitems", "pytest_configure"]

MARKER = "needs_key"
"""The marker's name: `@pytest.mark.needs_key("TYPESAFE_API_KEY", ...)`."""


def pytest_configure(config: pytest.Config) -> None:
    """Register the marker, so `--strict-markers` accepts it."""
    config.addinivalue_line(
        "markers",
        f"{MARKER}(*names): skip the test unless every named environment variable is set "
        "(jevrefine)",
    )


def missing_keys(names: tuple[object, ...]) -> list[str]:
    """The names among `names` whose variable is unset or blank, in the order given.

    Raises:
        pytest.UsageError: no name was given, or a name is not a non-blank string.
    """
    if not names:
        raise pytest.UsageError(
            f"@pytest.mark.{MARKER}() needs a variable name, e.g. "
            f'@pytest.mark.{MARKER}("OPENAI_API_KEY")'
        )
    bad = [name for name in names if not isinstance(name, str) or not name.strip()]
    if bad:
        raise pytest.UsageError(
            f"@pytest.mark.{MARKER} takes environment variable names as strings, got {bad!r}"
        )
    # Only the names are ever read back out: a key's value never reaches a reason or a log.
    return [str(name) for name in names if not os.environ.get(str(name), "").strip()]


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark `skip` the items whose `needs_key` markers name an unset variable.

    Markers on the test, its class and its module all count. pytest then reports the skip,
    with the reason, at the test's own line.

    Raises:
        pytest.UsageError: a marker names no variable, or something other than names.
    """
    for item in items:
        missing: list[str] = []
        for marker in item.iter_markers(MARKER):
            if marker.kwargs:
                raise pytest.UsageError(
                    f"@pytest.mark.{MARKER} takes only variable names, got keywords "
                    f"{sorted(marker.kwargs)} on {item.nodeid}"
                )
            missing.extend(name for name in missing_keys(marker.args) if name not in missing)
        if missing:
            reason = f"needs {', '.join(missing)} set in the environment (unset)"
            item.add_marker(pytest.mark.skip(reason=reason))
