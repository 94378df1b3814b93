"""The `jevrefine` command (also `python -m jevrefine`), its subcommands, config and I/O.

`jevrefine run` refines the prompts of a JSONL file, `jevrefine judge` judges question/answer
pairs, `jevrefine eval` scores a refine setup on a case file, `jevrefine check-config` validates
the settings and `jevrefine demo` shows the refine loop. Without an OpenAI or Anthropic key every
command runs offline on the local model. Exit codes: 0 done, 1 some items failed, 2 bad input or
configuration, 3 the run stopped on an unexpected error, 130 interrupted.

One module per command: `_run` (run, judge), `_eval`, `_demo`; `_config` reads the TOML settings
and opens the models, `_io` the JSONL input and resumable output.
"""

from __future__ import annotations

from ._main import build_parser as build_parser
from ._main import choose_provider as choose_provider
from ._main import main as main
from ._main import run_demo as run_demo

__all__ = ["build_parser", "choose_provider", "main", "run_demo"]
