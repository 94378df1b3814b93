"""What a newcomer sees offline (issue 32): the README's and the guides' claims held against the
constants, the offline judge wiring (never the answering model judging itself), the judge's
calibration line and cache, and `judge --calibrate`."""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any, ClassVar

import pytest

import jevrefine.local
from cli_support import run_cli, write_jsonl
from jevrefine.cli import _main
from jevrefine.cli._config import load_config, open_models
from jevrefine.cli._providers import local_model_title
from jevrefine.judge import CALIBRATION_PAIRS
from jevrefine.local import KNOWN_MODELS, OFFLINE_JUDGE_MODEL, OFFLINE_MODEL
from jevrefine.models.openai import OpenAIChatModel
from jevrefine.testing import FakeOpenAIServer

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text(encoding="utf-8")
CLI_GUIDE = (ROOT / "docs" / "guide" / "cli.md").read_text(encoding="utf-8")
GETTING_STARTED = (ROOT / "docs" / "guide" / "getting-started.md").read_text(encoding="utf-8")


def _title_and_size(name: str) -> tuple[str, str]:
    known = KNOWN_MODELS[name]
    return known.description.split(",", 1)[0], f"{known.size / 2**20:,.0f} MiB"


# --- the README and the guides say what runs (issue 32, 4) -------------------------------------


@pytest.mark.parametrize("name", [OFFLINE_MODEL, OFFLINE_JUDGE_MODEL])
@pytest.mark.parametrize(
    "text",
    [README, GETTING_STARTED, _main.__doc__ or "", _main.demo_description()],
    ids=["README", "getting-started", "the demo's docstring", "demo --help"],
)
def test_each_page_names_the_offline_models_and_their_sizes(text: str, name: str) -> None:
    """Promise: the README, the getting-started page, the demo's module docstring and `demo
    --help` name the model the demo runs and the judge, with their download sizes, from the
    constants (change `OFFLINE_MODEL` and these fail until the pages follow)."""
    title, size = _title_and_size(name)
    flat = " ".join(text.split())
    assert title in flat
    assert size in flat


def test_the_cli_guide_names_the_default_local_model_and_judge() -> None:
    flat = " ".join(CLI_GUIDE.split())
    for name in (OFFLINE_MODEL, OFFLINE_JUDGE_MODEL):
        title, size = _title_and_size(name)
        assert f"`{name}`" in flat
        assert f"{title}, {size}" in flat or f"{title}, a {size}" in flat


def test_no_page_says_the_demo_runs_smollm2() -> None:
    for text in (README, GETTING_STARTED, CLI_GUIDE, _main.__doc__ or ""):
        assert "SmolLM2-135M on llama.cpp" not in text
        assert "SmolLM2 on llama.cpp" not in text


def test_install_lines_install_from_a_checkout_not_the_index() -> None:
    """Promise: jevrefine is not on the package index, so no page tells to `pip install
    "jevrefine[...]"`; the README installs from a checkout (`pip install -e ".[local]"`)."""
    pages = [README, GETTING_STARTED, CLI_GUIDE]
    for text in pages:
        assert not re.search(r"pip install \"?jevrefine", text), text[:80]
    assert 'pip install -e ".[local' in README
    assert "not on the package index" in README
    assert "pip install -e" in jevrefine.local.INSTALL_HINT


def test_demo_help_shows_the_models(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        _main.main(["demo", "--help"])
    out = " ".join(capsys.readouterr().out.split())
    assert local_model_title(OFFLINE_MODEL) in out
    assert local_model_title(OFFLINE_JUDGE_MODEL) in out


# --- the offline judge is a model of its own (issue 32, 1) -------------------------------------


class _FakeLocalServer:
    """Stands in for `LocalModelServer`: records each model it is started on, serves a fake."""

    started: ClassVar[list[str]] = []
    base_url: ClassVar[str] = ""

    def __init__(self, model: Any = None, *, ctx: int = 4096, parallel: int = 1) -> None:
        self.model = str(model)
        self.known_model = KNOWN_MODELS.get(self.model)
        self.alias = self.known_model.alias if self.known_model else "smollm2"
        type(self).started.append(self.model)

    @property
    def url(self) -> str:
        return type(self).base_url

    async def __aenter__(self) -> _FakeLocalServer:
        return self

    async def __aexit__(self, *exc: object) -> None:
        return None

    def openai_model(self) -> OpenAIChatModel:
        return OpenAIChatModel(self.alias, base_url=type(self).base_url + "/v1", api_key="k")


@pytest.fixture
def fake_local(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> type[_FakeLocalServer]:
    for name in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "TYPESAFE_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.delenv("JEVREFINE_LOCAL_MODEL", raising=False)
    monkeypatch.delenv("JEVREFINE_LOCAL_JUDGE_MODEL", raising=False)
    monkeypatch.setenv("JEVREFINE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(jevrefine.local, "LocalModelServer", _FakeLocalServer)
    _FakeLocalServer.started = []
    return _FakeLocalServer


async def test_offline_the_judge_is_the_stronger_model_on_its_own_server(
    fake_local: type[_FakeLocalServer],
) -> None:
    """Promise: offline, `run` answers with OFFLINE_MODEL and judges with OFFLINE_JUDGE_MODEL,
    reference-guided, on a server of its own: never the answering model judging itself."""
    async with FakeOpenAIServer() as server:
        fake_local.base_url = server.base_url.removesuffix("/v1")
        config = load_config(None, {})
        async with open_models(config) as models:
            assert fake_local.started == [OFFLINE_MODEL, OFFLINE_JUDGE_MODEL]
            assert models.judge_model is not models.model
            assert not models.self_judging
            assert models.judge is not None
            assert [c.name for c in models.judge.criteria] == ["agrees_with_reference"]
            assert getattr(models.judge.client, "reference_answers", False)
            assert models.judge_description.startswith(
                f"{OFFLINE_JUDGE_MODEL} (a separate local server)"
            )


async def test_the_same_file_is_served_once_and_called_self_judging(
    fake_local: type[_FakeLocalServer], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("JEVREFINE_LOCAL_MODEL", "smollm2-135m")
    monkeypatch.setenv("JEVREFINE_LOCAL_JUDGE_MODEL", "smollm2-135m")
    async with FakeOpenAIServer() as server:
        fake_local.base_url = server.base_url.removesuffix("/v1")
        async with open_models(load_config(None, {})) as models:
            assert fake_local.started == ["smollm2-135m"]
            assert models.self_judging
            assert "(the answering model itself)" in models.judge_description


async def test_judging_pairs_offline_opens_only_the_judge_model(
    fake_local: type[_FakeLocalServer],
) -> None:
    async with FakeOpenAIServer() as server:
        fake_local.base_url = server.base_url.removesuffix("/v1")
        async with open_models(load_config(None, {}), judge_only=True) as models:
            assert fake_local.started == [OFFLINE_JUDGE_MODEL]
            assert models.model is models.judge_model


# --- the calibration line, its cache, and judge --calibrate ------------------------------------


def _judge_replies(correct: set[str]) -> Any:
    """A fake llama.cpp reply: reference requests get an answer; yes/no questions say "yes"
    exactly when the answer judged is in `correct`."""

    def reply(body: dict[str, Any]) -> str:
        user = body["messages"][-1]["content"]
        if "Write a correct answer" in user:
            return "A reference answer."
        if '"assistant_answer": ' not in user:
            return "4."  # an answer to a prompt of the run
        answer = user.split('"assistant_answer": ', 1)[1].split('", "', 1)[0].strip('"')
        return "yes" if answer in correct else "no"

    return reply


RIGHT = {
    "12 times 12 equals 144.",
    "Paris.",
    "A spider has eight legs.",
    "Water boils at 100 °C at sea level.",
    "Merci.",
    "Air molecules scatter blue sunlight much more than red, so blue light reaches us from "
    "every part of the sky.",
}
WRONG = {p.answer for p in CALIBRATION_PAIRS if not p.good}


@contextlib.asynccontextmanager
async def _offline(fake_local: type[_FakeLocalServer], correct: set[str]) -> AsyncIterator[Any]:
    async with FakeOpenAIServer(_judge_replies(correct)) as server:
        fake_local.base_url = server.base_url.removesuffix("/v1")
        yield server


async def test_a_run_first_says_how_the_judge_did_and_reads_it_back_from_the_cache(
    fake_local: type[_FakeLocalServer], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Promise: before `run` uses a local judge, one line says how many known pairs it told
    apart; measured once, then read from the cache (no judging request the second time)."""
    source = write_jsonl(tmp_path / "in.jsonl", ["What is 2 + 2?"])
    async with _offline(fake_local, RIGHT | {"4."}) as server:
        args = ("run", str(source), "-o", str(tmp_path / "out.jsonl"), "--no-progress")
        assert await run_cli(*args) == 0
        first = capsys.readouterr().err
        asked = len(server.chat_requests)
        assert await run_cli(*args, "--restart") == 0
        second = capsys.readouterr().err
        again = len(server.chat_requests) - asked
    line = f"judge: {OFFLINE_JUDGE_MODEL} (a separate local server) told 12 of 12 known pairs apart"
    assert line in first
    assert "WARNING" not in first
    assert f"{line} (95 % interval 76-100 %) (cached;" in second
    # The second run asked only its own prompt: one answer, one reference, one verdict.
    assert again == 3
    cache = json.loads((tmp_path / "cache" / "judge-calibration.json").read_text())
    (entry,) = cache.values()
    assert (entry["agreed"], entry["total"]) == (12, 12)


async def test_a_judge_near_chance_is_a_warning_and_judge_calibrate_exits_1(
    fake_local: type[_FakeLocalServer], capsys: pytest.CaptureFixture[str]
) -> None:
    """Promise: a judge that passes everything (right on half the pairs) is flagged near
    chance, with what to do instead; `judge --calibrate` says so and exits 1."""
    everything = RIGHT | WRONG
    async with _offline(fake_local, everything):
        code = await run_cli("judge", "--calibrate", "--no-progress")
    err = capsys.readouterr().err
    assert code == 1
    assert "WARNING: the judge, qwen2.5-coder-1.5b (a separate local server), told 6 of 12" in err
    assert "passed 6 wrong answer(s)" in err
    assert "near chance" in err
    assert "--judge-model" in err
    assert fake_local.started == [OFFLINE_JUDGE_MODEL]  # judging opens no answering model


async def test_judge_calibrate_measures_afresh_and_exits_0_for_a_good_judge(
    fake_local: type[_FakeLocalServer], capsys: pytest.CaptureFixture[str]
) -> None:
    async with _offline(fake_local, RIGHT) as server:
        assert await run_cli("judge", "--calibrate", "--no-progress") == 0
        assert await run_cli("judge", "--calibrate", "--no-progress") == 0
        requests = len(server.chat_requests)
    err = capsys.readouterr().err
    assert err.count("told 12 of 12 known pairs apart") == 2
    assert "(cached;" not in err
    # Each time 12 verdicts and 6 references (one per distinct question).
    assert requests == 2 * (12 + 6)


def test_a_tampered_cache_entry_is_measured_again(tmp_path: Path) -> None:
    from jevrefine.cli._calibration import _cached

    assert _cached({"agreed": 12, "total": 12, "passed_bad": 0, "failed_good": 0}) is not None
    for bad in (
        {"agreed": 13, "total": 12, "passed_bad": 0, "failed_good": 0},
        {"agreed": True, "total": 12, "passed_bad": 0, "failed_good": 0},
        {"agreed": -1, "total": 12, "passed_bad": 13, "failed_good": 0},
        {"agreed": 0, "total": 0, "passed_bad": 0, "failed_good": 0},
        "12 of 12",
        None,
    ):
        assert _cached(bad) is None
