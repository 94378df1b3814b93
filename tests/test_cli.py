"""The `jevrefine` command: provider choice, arguments, and the demo on the real local model."""

from __future__ import annotations

import contextlib
import io
import json
import subprocess
import sys
from typing import Any

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
    local_server: LocalModelServer, monkeypatch: pytest.MonkeyPatch, tmp_path: Any
) -> None:
    # The demo starts its own server: run it in a subprocess so the two never share a process.
    env = {
        k: v
        for k, v in __import__("os").environ.items()
        if k not in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY")
    }
    # The bundled model, answering and judging: the demo's own defaults (the Qwen models) are
    # 1.5 GB of downloads. A cache of its own: a test never touches the user's.
    env["JEVREFINE_LOCAL_MODEL"] = "smollm2-135m"
    env["JEVREFINE_LOCAL_JUDGE_MODEL"] = "smollm2-135m"
    env["JEVREFINE_LOCAL_THREADS"] = "1"
    env["JEVREFINE_CACHE_DIR"] = str(tmp_path / "cache")
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
    assert "agrees_with_reference=" in out
    assert "smollm2 (the answering model itself)" in out  # said, when it judges itself
    assert "  outcome: " in out
    assert "output tokens" in out
    assert "CityFacts" in out


def _judging(answers: dict[str, str] | None = None) -> Any:
    """A `DemoJudging` on a judge model of its own (FunctionModel), answering yes by default."""
    from jevrefine import Prompt
    from jevrefine.cli._demo import DemoJudging
    from jevrefine.judge import ModelJudgeClient, noul
    from jevrefine.judge._judge import REFERENCE_QUESTION
    from jevrefine.testing import FunctionModel

    def judge(prompt: Prompt) -> str:
        text = prompt.messages[-1].text  # type: ignore[union-attr]
        for answer, reply in (answers or {}).items():
            if answer in text:
                return json.dumps({"answer": reply})
        return '{"answer": "yes"}'

    question = (noul("agrees_with_reference", REFERENCE_QUESTION),)
    return DemoJudging(ModelJudgeClient(FunctionModel(judge)), question, "a test judge")


async def test_the_demo_feedback_names_the_defect_and_retries_are_sampled_fresh() -> None:
    """Promise (issue 32, 3): the demo's feedback says what is wrong (too long, what the judge
    found), never the answer; the retries are sampled at RETRY_TEMPERATURE with a seed each
    (at temperature 0 a small model repeats its draft whatever the feedback)."""
    from jevrefine import Prompt
    from jevrefine.cli._demo import RETRY_TEMPERATURE, WORD_LIMIT, refine_demo
    from jevrefine.testing import FunctionModel

    seen: list[Prompt] = []

    def answer(prompt: Prompt) -> str:
        seen.append(prompt)
        if len(seen) < 3:
            return " ".join(["long"] * (WORD_LIMIT + 1))
        return "Air scatters blue light more than red."

    out = io.StringIO()
    await refine_demo(out, FunctionModel(answer), "Why is the sky blue?", "Be brief.", _judging())
    retry = seen[1].messages[-1].text  # type: ignore[union-attr]
    assert f"The answer is longer than {WORD_LIMIT} words" in retry
    assert "scatter" not in retry.lower()  # the feedback names the gap, not the answer
    options = [(p.options.temperature, p.options.seed) for p in seen]
    assert options[0] == (0.0, 7)
    assert [t for t, _ in options[1:]] == [RETRY_TEMPERATURE, RETRY_TEMPERATURE]
    assert len({seed for _, seed in options}) == 3
    assert "the first draft failed short; the returned answer passes" in out.getvalue()


async def test_demo_streams_each_attempt_then_its_verdict_before_the_next_model_call() -> None:
    """Promise (issue 32, 7): each attempt's text is printed as the model streams it, then its
    verdict, before the model is asked again."""
    from jevrefine import Prompt
    from jevrefine.cli._demo import WORD_LIMIT, refine_demo
    from jevrefine.testing import FunctionModel

    long_answer = " ".join(["word"] * (WORD_LIMIT + 5))
    out = io.StringIO()
    calls = 0

    def answer(prompt: Prompt) -> str:
        nonlocal calls
        calls += 1
        out.write(f"<model call {calls}>")  # where the model was called, in the same stream
        if calls == 1:
            return long_answer
        # The second draft echoes the feedback (short, but no answer); the third answers.
        return "The answer is longer than 25 words." if calls == 2 else "Short answer."

    async def chunks(prompt: Prompt) -> Any:
        for part in answer(prompt).split(" "):  # one chunk a word: several deltas
            yield f"{part} "

    model = FunctionModel(answer, stream_function=chunks)
    await refine_demo(out, model, "Why?", "Be brief.", _judging())
    text = out.getvalue()
    expected = [
        "attempt 1: <model call 1>word word",
        f"({WORD_LIMIT + 5} words)",
        "verdict: passed=false [short=FAILED, not_an_echo=PASSED, "
        "agrees_with_reference=NOT_APPLICABLE]",
        "- short: The answer is longer than",
        "rejected: sent back with that feedback",
        "attempt 2: <model call 2>The answer is longer",
        "verdict: passed=false [short=PASSED, not_an_echo=FAILED,",
        "- not_an_echo: The answer talks about these rules",
        "attempt 3: <model call 3>Short answer.",
        "verdict: passed=true [short=PASSED, not_an_echo=PASSED, agrees_with_reference=PASSED]",
        "outcome: passed after 3 attempt(s), returned attempt 3",
        "the first draft failed short; the returned answer passes every criterion",
    ]
    positions = [text.index(line) for line in expected]
    assert positions == sorted(positions), text
    assert "Short answer." in text.rsplit("every criterion", 1)[1]


async def test_when_no_attempt_passes_the_demo_says_so_and_labels_the_best_attempt() -> None:
    """Promise (issue 32, 2): a failed answer is never shown as a passed one: "no attempt
    passed; best attempt shown" with its verdict, and the answer marked as not passed."""
    from jevrefine import Prompt
    from jevrefine.cli._demo import refine_demo
    from jevrefine.testing import FunctionModel

    drafts = iter(["Paris is big.", "Lyon.", "Marseille."])
    out = io.StringIO()
    judging = _judging({"Paris is big.": "no", "Lyon.": "no", "Marseille.": "no"})

    def answer(prompt: Prompt) -> str:
        return next(drafts)

    await refine_demo(out, FunctionModel(answer), "Capital of France?", "Be brief.", judging)
    text = out.getvalue()
    assert "outcome: best_attempt after 3 attempt(s), returned attempt 3" in text
    assert "no attempt passed; best attempt shown (attempt 3: passed=false [" in text
    assert "[did not pass the judge] Marseille." in text
    assert "passes every criterion" not in text


async def test_the_typed_step_is_refined_with_the_validation_error() -> None:
    """Promise (issue 32, 3): the demo's typed step sends an answer that does not fit
    CityFacts back with the validation error, and prints the value the retry gets right."""
    from jevrefine import Prompt
    from jevrefine.cli._demo import typed_demo
    from jevrefine.cli._main import CityFacts
    from jevrefine.testing import FunctionModel

    replies = iter([6000000, 2.1])
    prompts: list[str] = []

    def answer(prompt: Prompt) -> str:
        prompts.append(prompt.messages[-1].text)  # type: ignore[union-attr]
        population = next(replies)
        return json.dumps({"city": "Paris", "country": "France", "population_millions": population})

    out = io.StringIO()
    await typed_demo(out, FunctionModel(answer), "Be brief.", "Paris facts?", CityFacts)
    text = out.getvalue()
    error = (
        "population_millions (the number of inhabitants, in millions): input should be less "
        "than 100; you wrote 6000000"
    )
    assert f"- fits_output_type: The answer is not a valid CityFacts: {error}" in text
    assert error in prompts[1]
    assert "fits CityFacts" in text
    assert "CityFacts(city='Paris', country='France', population_millions=2.1)" in text


# --- messages a newcomer reads (issue 32, 9) --------------------------------------------------


def test_help_describes_the_command_not_its_module(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        cli.main(["--help"])
    assert info.value.code == 0
    out = capsys.readouterr().out
    assert _main.DESCRIPTION.split()[0] in out
    assert "argument parser" not in out
    assert "dispatches" not in out


def test_a_mistyped_flag_is_named_by_its_command_with_the_closest_flag(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Promise: `run --concurency 4 prompts.jsonl` says which flag is unknown, suggests
    `--concurrency`, under `run`'s usage; the input file is not called unrecognized."""
    with pytest.raises(SystemExit) as info:
        cli.main(["run", "--concurency", "4", "prompts.jsonl"])
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("usage: jevrefine run ")
    assert (
        "jevrefine run: error: unrecognized option --concurency (did you mean --concurrency?)"
        in err
    )
    assert "prompts.jsonl" not in err
    with pytest.raises(SystemExit):
        cli.main(["eval", "cases.jsonl", "--limt=3"])
    assert "unrecognized option --limit" not in (err := capsys.readouterr().err)
    assert "unrecognized option --limt (did you mean --limit?)" in err


def test_a_mistyped_command_or_choice_gets_a_suggestion(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        cli.main(["rnu", "prompts.jsonl"])
    assert "invalid choice: 'rnu'" in (err := capsys.readouterr().err)
    assert "did you mean 'run'?" in err
    with pytest.raises(SystemExit):
        cli.main(["run", "--judge", "ratng"])
    assert "did you mean 'rating'?" in capsys.readouterr().err


def test_stray_arguments_are_named_as_such(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        cli.main(["check-config", "extra"])
    err = capsys.readouterr().err
    assert "jevrefine check-config: error: unexpected argument(s): extra" in err
