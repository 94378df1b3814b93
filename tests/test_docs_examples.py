"""Every Python example in the README and docs/ runs, as written, against the fakes.

The blocks of one page run in order in one namespace (like a notebook). Model and judge clients
built from the environment reach the fake servers: `OPENAI_BASE_URL`, `ANTHROPIC_BASE_URL` and
`TYPESAFE_BASE_URL` point at `FakeOpenAIServer`, `FakeAnthropicServer` and `FakeJevServer`, with
test keys. A page may hold hidden setup code in `<!-- docs-test setup ... -->` (with the fake
servers at hand as `docs_fakes`); a block preceded by `<!-- docs-test skip: reason -->` is only
parsed, and the reason is reported. A block preceded by `<!-- docs-test no-keys: reason -->`
promises to need no API key: it runs with every key variable unset (and no fake server in the
environment), so a client that demands one fails the test.
"""

from __future__ import annotations

import ast
import asyncio
import contextlib
import gc
import inspect
import io
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType, SimpleNamespace
from typing import Any

import pytest

from jevrefine import ChatModel
from jevrefine.jev import JudgeClient
from jevrefine.testing import FakeAnthropicServer, FakeJevServer, FakeOpenAIServer

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]

# Pages whose examples a dedicated test runs (with assertions on what they print).
COVERED_ELSEWHERE = {
    "docs/guide/batch.md": "tests/test_docs_batch.py",
    "docs/guide/self-refine.md": "tests/refine/test_refine_guide.py",
    "docs/guide/judge.md": "tests/refine/test_refine_guide.py",
    "docs/guide/tools.md": "tests/tools/test_tools_guide.py",
    "docs/guide/jev-chat-model.md": "tests/test_jev_guides.py",
    "docs/guide/guardrail.md": "tests/test_jev_guides.py",
    "docs/guide/retrieval.md": "tests/test_retrieval_guides.py",
    "docs/guide/judge-patterns.md": "tests/test_retrieval_guides.py",
    "docs/guide/logging.md": "tests/test_retrieval_guides.py",
    # These need a Ray cluster, a terminal or a web server: the same code runs in these tests,
    # and tests/test_docs_batch.py checks that every block of the pages parses.
    "docs/guide/ray.md": "tests/distributed/test_ray.py",
    "docs/guide/cli.md": "tests/test_cli_run.py",
    "docs/guide/web.md": "tests/test_integrations.py",
}

_PIECE = re.compile(
    r"<!-- docs-test setup\n(?P<setup>.*?)-->"
    r"|<!-- docs-test skip: (?P<skip>.*?) -->\s*```python\n(?P<skipped>.*?)```"
    r"|<!-- docs-test no-keys: (?P<nokeys>.*?) -->\s*```python\n(?P<keyless>.*?)```"
    r"|```python\n(?P<code>.*?)```",
    re.DOTALL,
)

KEY_VARIABLES = (
    "OPENAI_API_KEY",
    "OPENAI_BASE_URL",
    "ANTHROPIC_API_KEY",
    "ANTHROPIC_BASE_URL",
    "TYPESAFE_API_KEY",
    "TYPESAFE_BASE_URL",
)
"""What a `no-keys` block runs without."""


def _pieces(page: Path) -> list[tuple[str, str]]:
    """(kind, text) in page order; kind is `setup`, `code`, `no-keys` or `skip:<reason>`."""
    found: list[tuple[str, str]] = []
    for match in _PIECE.finditer(page.read_text(encoding="utf-8")):
        if match["setup"] is not None:
            found.append(("setup", match["setup"]))
        elif match["skip"] is not None:
            found.append((f"skip:{match['skip']}", match["skipped"]))
        elif match["nokeys"] is not None:
            found.append(("no-keys", match["keyless"]))
        else:
            found.append(("code", match["code"]))
    return found


def _name(page: Path) -> str:
    return page.relative_to(ROOT).as_posix()


_CLOSABLE = (ChatModel, JudgeClient)


def _clients_of(value: object) -> list[ChatModel | JudgeClient]:
    """The clients `value` is or holds directly (a `ChatClient`'s model, a `Judge`'s client)."""
    inner = [value, getattr(value, "model", None), getattr(value, "client", None)]
    return [c for c in inner if isinstance(c, _CLOSABLE)]


RUNNABLE = [
    p
    for p in PAGES
    if _name(p) not in COVERED_ELSEWHERE and any(k != "setup" for k, _ in _pieces(p))
]


@contextlib.contextmanager
def _fakes_in_environment(monkeypatch: pytest.MonkeyPatch) -> Iterator[SimpleNamespace]:
    with FakeOpenAIServer() as openai, FakeAnthropicServer() as anthropic, FakeJevServer() as jev:
        monkeypatch.setenv("OPENAI_BASE_URL", openai.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "sk-docs-test")
        monkeypatch.setenv("ANTHROPIC_BASE_URL", anthropic.base_url)
        monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-docs-test")
        monkeypatch.setenv("TYPESAFE_BASE_URL", jev.base_url)
        monkeypatch.setenv("TYPESAFE_API_KEY", "ts-docs-test")
        yield SimpleNamespace(openai=openai, anthropic=anthropic, jev=jev)


@pytest.mark.parametrize("page", RUNNABLE, ids=_name)
def test_page_examples_run(page: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.chdir(tmp_path)  # examples may write files (a SQLite memory, results)
    skipped: list[str] = []
    opened: dict[int, ChatModel | JudgeClient] = {}
    # One event loop for the page's top-level `await`s (objects made in one block live on in the
    # next), idle between blocks, so that a block may also call `anyio.run(main)` itself.
    with (
        _fakes_in_environment(monkeypatch) as fakes,
        contextlib.redirect_stdout(io.StringIO()),
        asyncio.Runner() as runner,
    ):
        # A real module, so that dataclasses and pickling find the examples' classes; setup
        # blocks may script the fakes through `docs_fakes`.
        module = ModuleType(f"docs_{page.stem.replace('-', '_')}")
        monkeypatch.setitem(sys.modules, module.__name__, module)
        namespace: dict[str, Any] = module.__dict__
        namespace["docs_fakes"] = fakes
        for number, (kind, text) in enumerate(_pieces(page), 1):
            where = f"{_name(page)}[{number}]"
            if kind.startswith("skip:"):
                ast.parse(text, filename=where, feature_version=(3, 11))
                skipped.append(kind.removeprefix("skip:"))
                continue
            code = compile(text, where, "exec", ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
            with monkeypatch.context() as keyless:
                if kind == "no-keys":
                    for variable in KEY_VARIABLES:
                        keyless.delenv(variable, raising=False)
                result = eval(code, namespace)
                if inspect.iscoroutine(result):
                    runner.run(result)
            # A later block may rebind a name (a setup block's `jev`, then `async with ... as
            # jev`): remember every client a block left in the namespace, to close it below.
            opened.update((id(c), c) for v in namespace.values() for c in _clients_of(v))
        # Close what the examples left open (a page may build a model in a setup block and never
        # close it), on the loop that opened it; closing twice is harmless.
        for value in opened.values():
            runner.run(value.aclose())
        # Drop the page's objects now, while this test runs: an object an example left unclosed
        # is then reported here, as this page's failure, not in whichever test collects it.
        namespace.clear()
        opened.clear()
        gc.collect()
    for reason in skipped:
        assert reason.strip(), f"a skipped block of {_name(page)} gives no reason"


def test_pages_covered_elsewhere_exist() -> None:
    for page, test in COVERED_ELSEWHERE.items():
        assert (ROOT / page).is_file(), page
        assert (ROOT / test).is_file(), test


def test_a_no_keys_block_runs_with_no_key_set(monkeypatch: pytest.MonkeyPatch) -> None:
    """The marker holds its promise: a block that builds a Jev client fails under it."""
    page = ROOT / "docs" / "guide" / "streaming.md"
    keyless = [text for kind, text in _pieces(page) if kind == "no-keys"]
    assert keyless, "streaming.md promises an example that needs no key"
    with _fakes_in_environment(monkeypatch), monkeypatch.context() as scope:
        for variable in KEY_VARIABLES:
            scope.delenv(variable, raising=False)
        from jevrefine.jev import JudgeUsageError

        with pytest.raises(JudgeUsageError, match="no API key"):
            JudgeClient()


def test_the_streaming_example_prints_what_its_page_shows(monkeypatch: pytest.MonkeyPatch) -> None:
    """docs/guide/streaming.md: the live example, run with no key, prints the lines shown."""
    page = ROOT / "docs" / "guide" / "streaming.md"
    text = page.read_text(encoding="utf-8")
    (example,) = [code for kind, code in _pieces(page) if kind == "no-keys"]
    after = text.split(example, 1)[1].split("```", 1)[1]  # past the example's closing fence
    shown_block = re.search(r"```\n(.*?)```", after, re.DOTALL)  # the plain block after it
    assert shown_block is not None
    shown = shown_block.group(1)
    for variable in KEY_VARIABLES:
        monkeypatch.delenv(variable, raising=False)
    printed = io.StringIO()
    namespace: dict[str, Any] = {}
    with contextlib.redirect_stdout(printed), asyncio.Runner() as runner:
        code = compile(example, "streaming.md", "exec", ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
        result = eval(code, namespace)
        if inspect.iscoroutine(result):
            runner.run(result)
    assert printed.getvalue() == shown
