"""The `jevrefine` command: provider choice, arguments, and the demo on the real local model."""

from __future__ import annotations

import subprocess
import sys

import pytest

from jevrefine import cli
from jevrefine.local import LocalModelServer


def test_provider_follows_the_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    assert cli.choose_provider("auto") == "local"
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test")
    assert cli.choose_provider("auto") == "anthropic"
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    assert cli.choose_provider("auto") == "openai"
    assert cli.choose_provider("local") == "local"


def test_unknown_command_is_rejected(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        cli.main(["frobnicate"])
    assert info.value.code == 2
    assert "invalid choice" in capsys.readouterr().err


def test_version() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "jevrefine", "--version"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0
    assert result.stdout.startswith("jevrefine ")


@pytest.mark.local_model
@pytest.mark.slow
def test_demo_runs_offline_on_the_local_model(
    local_server: LocalModelServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The demo starts its own server: run it in a subprocess so the two never share a process.
    env = {
        k: v
        for k, v in __import__("os").environ.items()
        if k not in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY")
    }
    result = subprocess.run(
        [sys.executable, "-m", "jevrefine", "demo", "Name one colour.", "--provider", "auto"],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "local llama.cpp server" in out
    assert "> Name one colour." in out
    assert "output tokens" in out
    assert "CityFacts" in out
