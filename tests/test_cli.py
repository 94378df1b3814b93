"""The `jevrefine` command: provider choice, arguments, and the demo on the real local model."""

from __future__ import annotations

import contextlib
import subprocess
import sys

import pytest

from jevrefine import cli
from jevrefine.cli import _config, _main
from jevrefine.cli._providers import HOSTED, open_chat_model
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


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
async def test_every_command_takes_the_default_model_name_from_the_one_table(
    monkeypatch: pytest.MonkeyPatch, provider: str
) -> None:
    """Promise: `demo` and the config-driven commands open the same default model of a
    provider, the one `HOSTED` names (issue 19: the names used to be written in three places)."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test")
    expected = HOSTED[provider].default_model
    async with _main.open_model(provider, None) as (demo_model, where):  # type: ignore[arg-type]
        assert demo_model.model_name == expected
        assert where.endswith(expected)
    async with contextlib.AsyncExitStack() as stack:
        config_model = await _config._open_model(stack, provider, None, None, 1)
        assert config_model.model_name == expected
        again, _ = await open_chat_model(stack, provider, "my-model")  # type: ignore[arg-type]
        assert again.model_name == "my-model"


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
@pytest.mark.timeout(280)  # a few local-model calls; a loaded 2-core machine can take a while
def test_demo_runs_offline_on_the_local_model(
    local_server: LocalModelServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The demo starts its own server: run it in a subprocess so the two never share a process.
    env = {
        k: v
        for k, v in __import__("os").environ.items()
        if k not in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY")
    }
    # The bundled model: the demo's own default (Qwen) is a 469 MiB download.
    env["JEVREFINE_LOCAL_MODEL"] = "smollm2-135m"
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
    assert "> Name one colour.  (self-refined)" in out
    # The refine loop: at least one attempt with a computed verdict, then the outcome.
    assert "  attempt 1: " in out
    assert "    verdict: passed=" in out
    assert "[short=" in out
    assert "answers_question=" in out
    assert "  outcome: " in out
    assert "output tokens" in out
    assert "CityFacts" in out


async def test_the_default_question_is_held_to_its_cause_and_the_retry_learns_it() -> None:
    """On "Why is the sky blue?" an answer that never names scattering fails, with a defect that
    says what is missing; an answer that does passes (the demo's draft must get better, not only
    shorter)."""
    import io

    from jevrefine import Prompt
    from jevrefine.cli._demo import SKY_PROMPT, refine_demo
    from jevrefine.testing import FunctionModel

    out = io.StringIO()
    seen: list[str] = []

    def answer(prompt: Prompt) -> str:
        text = prompt.messages[-1].text  # type: ignore[union-attr]
        if "allowed answers" in text.lower():
            return '{"answer": "yes"}'
        seen.append(text)
        if len(seen) == 1:
            return "The sky is blue because it is a shade of blue."
        return "Air molecules scatter blue sunlight more than red, so the sky looks blue."

    await refine_demo(out, FunctionModel(answer), SKY_PROMPT, "Be brief.")
    text = out.getvalue()
    assert "names_the_cause=FAILED" in text
    assert "say that the air scatters blue sunlight more than red" in seen[1]
    assert "the first draft failed names_the_cause; the returned answer passes" in text


async def test_demo_loop_prints_each_attempt_and_verdict_before_the_next_model_call() -> None:
    import io

    from jevrefine import Prompt
    from jevrefine.cli._demo import WORD_LIMIT, refine_demo
    from jevrefine.testing import FunctionModel

    long_answer = " ".join(["word"] * (WORD_LIMIT + 5))
    out = io.StringIO()
    calls = 0

    def answer(prompt: Prompt) -> str:
        nonlocal calls
        text = prompt.messages[-1].text  # type: ignore[union-attr]
        if "allowed answers" in text.lower():  # a judging request: answer "yes"
            return '{"answer": "yes"}'
        calls += 1
        out.write(f"<model call {calls}>\n")  # where the model was called, in the same stream
        if calls == 1:
            return long_answer
        # The second draft echoes the feedback (short, but no answer); the third answers.
        return "The answer is longer than 25 words." if calls == 2 else "Short answer."

    await refine_demo(out, FunctionModel(answer), "Why?", "Be brief.")
    text = out.getvalue()
    expected = [
        "<model call 1>",
        f"attempt 1: '{long_answer}' ({WORD_LIMIT + 5} words)",
        "verdict: passed=false [short=FAILED, not_an_echo=PASSED, answers_question=PASSED]",
        "- short: The answer is longer than",
        "<model call 2>",
        "attempt 2: 'The answer is longer than 25 words.' (7 words)",
        "verdict: passed=false [short=PASSED, not_an_echo=FAILED, answers_question=PASSED]",
        "- not_an_echo: The answer talks about these rules",
        "<model call 3>",
        "attempt 3: 'Short answer.' (2 words)",
        "verdict: passed=true [short=PASSED, not_an_echo=PASSED, answers_question=PASSED]",
        "outcome: passed after 3 attempt(s), returned attempt 3",
        "the first draft failed short; the returned answer passes every criterion",
    ]
    # Live: each attempt and its verdict are written before the model is asked again.
    positions = [text.index(line) for line in expected]
    assert positions == sorted(positions), text
    assert text.rstrip().endswith("Short answer.")
    assert text.rstrip().endswith("Short answer.")
