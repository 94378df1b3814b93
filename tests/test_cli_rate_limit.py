"""`jevrefine run` / `judge` / `eval` take the providers' limits (--model-rpm, --judge-tpm, ...)."""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import pytest

from jevrefine import cli
from jevrefine.testing import FakeOpenAIServer

SECRET = "sk-test-do-not-print-0123456789"
SLOW_DOWN = {"error": {"message": "Rate limit reached", "code": "rate_limit_exceeded"}}


@pytest.fixture(autouse=True)
def keys(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)


async def run_cli(*argv: str) -> int:
    return await anyio.to_thread.run_sync(cli.main, list(argv))


def _inputs(tmp_path: Path, n: int) -> Path:
    source = tmp_path / "in.jsonl"
    source.write_text("".join(json.dumps(f"question {i}") + "\n" for i in range(n)))
    return source


@pytest.mark.slow
async def test_run_with_a_model_limit_outlasts_more_429s_than_the_sdk_retries(
    tmp_path: Path,
) -> None:
    """Four 429s in a row: more than the SDK's two retries, so without a limit the item fails;
    with --model-rpm the limiter pauses (Retry-After 10 ms) and retries it."""
    source, output = _inputs(tmp_path, 3), tmp_path / "out.jsonl"
    async with FakeOpenAIServer() as model:
        model.fail(429, SLOW_DOWN, headers={"retry-after-ms": "10"}, times=4)
        code = await run_cli(
            "run", str(source), "-o", str(output), "--provider", "openai",
            "--base-url", model.base_url, "--judge", "none", "--no-progress",
            "--concurrency", "1", "--model-rpm", "6000", "--model-tpm", "1000000",
        )  # fmt: skip
        sent = len(model.requests)
    assert code == 0
    rows = [json.loads(line) for line in output.read_text().splitlines()]
    assert [row["error"] for row in rows] == [None, None, None]
    assert sent == 3 + 4


async def test_run_without_a_limit_fails_that_item(tmp_path: Path) -> None:
    source, output = _inputs(tmp_path, 1), tmp_path / "out.jsonl"
    async with FakeOpenAIServer() as model:
        model.fail(429, SLOW_DOWN, headers={"retry-after-ms": "10"}, times=4)
        code = await run_cli(
            "run", str(source), "-o", str(output), "--provider", "openai",
            "--base-url", model.base_url, "--judge", "none", "--no-progress",
        )  # fmt: skip
    assert code == 1
    assert json.loads(output.read_text())["error"].startswith("ModelHTTPError")


@pytest.mark.parametrize("flag", ["--model-rpm", "--judge-tpm"])
def test_a_limit_that_is_not_positive_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], flag: str
) -> None:
    source = _inputs(tmp_path, 1)
    with pytest.raises(SystemExit) as exited:  # argparse's usage error
        cli.main(
            ["run", str(source), "--provider", "openai", "--base-url", "http://127.0.0.1:9/v1",
             "--judge", "none", "--no-progress", flag, "0"]
        )  # fmt: skip
    assert exited.value.code == 2
    assert "positive number per minute" in capsys.readouterr().err


def test_eval_takes_the_limit_flags(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        cli.main(["eval", "--help"])
    out = capsys.readouterr().out
    for flag in ("--model-rpm", "--model-tpm", "--judge-rpm", "--judge-tpm"):
        assert flag in out
