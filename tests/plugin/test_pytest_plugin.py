"""The `jevrefine.pytest` plugin, tested the way pytest tests plugins: with `pytester`.

Each test writes a small test module, runs pytest on it in-process with the plugin loaded as
pytest loads it from the entry point (`-p jevrefine.pytest`), and reads the outcome.
See tests/plugin/test_pytest_plugin_install.py for the plugin in a freshly installed project.
The behaviour follows the seed library's test-support module, `decision-test`
(spring-ai-community/spring-ai-typesafe, docs/testing/DecisionAssertions.md).
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest

# Imported here so that pytester's in-process runs find it loaded (it restores sys.modules
# after each run, and importing the SDK again every time would dominate the runs' time).
import jevrefine.models.openai  # noqa: F401

pytest_plugins = ["pytester"]

# The inner runs leave out the other installed plugins that cost time and test nothing here.
# The plugin module may already be imported, without assertion rewriting, by an earlier test
# (the docs' examples import it): pytest's warning about that says nothing about the plugin.
INI = """
[pytest]
anyio_mode = auto
filterwarnings =
    error
    ignore::pytest.PytestAssertRewriteWarning
addopts = -p no:asyncio -p no:cacheprovider -p no:hypothesispytest -p no:langsmith_plugin
"""


@pytest.fixture
def run(pytester: pytest.Pytester):
    """Run pytest on `source` with the plugin, as its entry point loads it."""
    pytester.makeini(INI)

    def runner(source: str, *args: str) -> pytest.RunResult:
        pytester.makepyfile(test_app=source)
        return pytester.runpytest("-p", "jevrefine.pytest", "--strict-markers", *args)

    return runner


def test_the_entry_point_names_the_plugin_module() -> None:
    pyproject = tomllib.loads((Path(__file__).parents[2] / "pyproject.toml").read_text())
    assert pyproject["project"]["entry-points"]["pytest11"] == {
        "jevrefine.pytest": "jevrefine.pytest"
    }


def test_fake_servers_are_started_per_test_and_stopped_after(run) -> None:
    result = run(
        """
import socket
import urllib.request

seen = {}


def _get(url):
    with urllib.request.urlopen(url, timeout=5) as response:
        return response.status


def test_first(fake_openai, fake_anthropic, fake_jev):
    assert _get(fake_openai.base_url + "/models") == 200
    assert _get(fake_jev.base_url + "/v1/models") == 200
    assert fake_anthropic.base_url.startswith("http://127.0.0.1:")
    assert [r.path for r in fake_openai.requests] == ["/v1/models"]
    seen["ports"] = (fake_openai.port, fake_anthropic.port, fake_jev.port)
    seen["server"] = fake_jev


def test_second_gets_fresh_servers(fake_openai, fake_jev):
    assert fake_openai.requests == [] and fake_jev.requests == []
    assert fake_jev is not seen["server"]


def test_the_first_servers_were_stopped():
    for port in seen["ports"]:
        with socket.socket() as sock:
            sock.settimeout(2)
            assert sock.connect_ex(("127.0.0.1", port)) != 0
"""
    )
    result.assert_outcomes(passed=3)


def test_fake_openai_serves_the_openai_chat_model(run) -> None:
    result = run(
        """
import jevrefine as jr
from jevrefine.models.openai import OpenAIChatModel


async def test_scripted(fake_openai):
    fake_openai.script("It is sunny in Paris.")
    async with OpenAIChatModel("gpt-4o", base_url=fake_openai.base_url, api_key="test") as model:
        answer = await jr.ChatClient(model).prompt("Weather in Paris?").content()
    assert answer == "It is sunny in Paris."
    assert fake_openai.chat_requests[0]["messages"][-1]["content"] == "Weather in Paris?"
"""
    )
    result.assert_outcomes(passed=1)


def test_function_model_is_a_factory(run) -> None:
    result = run(
        """
import pytest
import jevrefine as jr
from jevrefine.exceptions import UserError
from jevrefine.testing import FunctionModel


async def test_function(function_model):
    model = function_model(lambda prompt: prompt.messages[-1].text.upper())
    assert isinstance(model, FunctionModel)
    assert await jr.ChatClient(model).prompt("hi").content() == "HI"
    assert len(model.prompts) == 1


async def test_one_text_always(function_model):
    model = function_model("Paris.", model_name="fixed")
    client = jr.ChatClient(model)
    assert [await client.prompt(q).content() for q in ("a", "b")] == ["Paris.", "Paris."]
    assert model.model_name == "fixed"


async def test_texts_in_turn_then_a_clear_error(function_model):
    client = jr.ChatClient(function_model(["Lyon.", "Paris."]))
    assert await client.prompt("a").content() == "Lyon."
    assert await client.prompt("b").content() == "Paris."
    with pytest.raises(UserError, match="scripted only 2 replies"):
        await client.prompt("c").content()


def test_an_empty_script_is_refused(function_model):
    with pytest.raises(UserError, match="non-empty list of reply texts"):
        function_model([])
"""
    )
    result.assert_outcomes(passed=4)


ANSWERS = """
from jevrefine.jev import Choice, JudgeClient, Noul
from jevrefine.judge import check, choice, noul
from jevrefine.pytest import assert_answer


def answers(state, questions):
    correct = "Paris" in state["assistant_answer"]
    return {
        "does_assistant_answer_name_paris": 0.95 if correct else 0.05,
        "is_it_polite": 0.9,
        "tone": {"type": "choice", "choice": "polite",
                 "probabilities": {"polite": 0.52, "rude": 0.48}},
    }
"""


def test_assert_answer_passes_and_returns_the_verdict(run) -> None:
    result = run(
        ANSWERS
        + """

async def test_passes(fake_jev):
    fake_jev.answer = answers
    async with JudgeClient("test-key", base_url=fake_jev.base_url) as jev:
        verdict = await assert_answer(
            "Paris is the capital.",
            "Does `assistant_answer` name Paris?",
            "Is it polite?",
            judge=jev,
            question="Capital of France?",
        )
    assert verdict.passed
    assert [f.criterion for f in verdict.findings] == [
        "does_assistant_answer_name_paris", "is_it_polite"]
    sent = fake_jev.requests[0].json
    assert sent["state"] == {"user_question": "Capital of France?",
                             "assistant_answer": "Paris is the capital."}
    assert len(fake_jev.requests) == 1
"""
    )
    result.assert_outcomes(passed=1)


def test_assert_answer_failure_lists_every_criterion_with_detail_and_probability(run) -> None:
    """Seed: docs/testing/DecisionAssertions.md (the message names each criterion that did not
    pass, in its own words, with the numbers; INCONCLUSIVE does not pass in a test)."""
    result = run(
        ANSWERS
        + """
from jevrefine.judge import Judge


async def test_fails(fake_jev):
    fake_jev.answer = answers
    async with JudgeClient("test-key", base_url=fake_jev.base_url) as jev:
        judge = Judge(jev, [
            noul("does_assistant_answer_name_paris",
                 Noul("Does `assistant_answer` name Paris?", when_false="Names another city"),
                 0.7),
            noul("is_it_polite", Noul("Is it polite?"), 0.7),
            choice("tone", Choice("Tone?", options=["polite", "rude"]), accept=["polite"]),
            check("short", lambda i: len(i.assistant_answer) < 5, "Longer than 4 characters"),
        ], min_confidence=0.6)
        await assert_answer("Lyon is the capital.", judge=judge)
"""
    )
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "*AssertionError: the answer did not pass 3 of 4 criteria:",
            "*- [[]FAILED] does_assistant_answer_name_paris (P(yes) 0.05): Names another city "
            "(P(yes) 0.05, needed at least 0.70)",
            "*- [[]INCONCLUSIVE] tone (P(accepted) 0.52): inconclusive, only 0.52 *",
            "*- [[]FAILED] short (check failed): Longer than 4 characters",
            "*passed=false [[]does_assistant_answer_name_paris=FAILED, is_it_polite=PASSED, "
            "tone=INCONCLUSIVE, short=FAILED]",
            "*answer: 'Lyon is the capital.'",
        ]
    )
    assert "is_it_polite (" not in result.stdout.str()


def test_assert_answer_with_a_model_judge_client(run) -> None:
    """A `ModelJudgeClient` is a `SystemOneClient` too: criteria are asked of a chat model."""
    result = run(
        """
import json
import pytest
from jevrefine.judge import ModelJudgeClient
from jevrefine.pytest import assert_answer


async def test_fails_on_the_model_judge(function_model):
    judge_model = function_model(json.dumps({"answer": "no"}))
    client = ModelJudgeClient(judge_model, logprobs=False)
    with pytest.raises(AssertionError, match=r"\\[FAILED\\] is_it_correct \\(P\\(yes\\) 0.00\\)"):
        await assert_answer("Lyon.", "Is it correct?", judge=client, question="Capital?")
"""
    )
    result.assert_outcomes(passed=1)


def test_assert_answer_refuses_what_does_not_fit(run) -> None:
    result = run(
        ANSWERS
        + """
import pytest
from jevrefine.exceptions import UserError
from jevrefine.judge import Judge, JudgeInput


async def test_refusals(fake_jev):
    async with JudgeClient("test-key", base_url=fake_jev.base_url) as jev:
        with pytest.raises(UserError, match="at least one criterion"):
            await assert_answer("x", judge=jev)
        judge = Judge(jev, [noul("ok", Noul("Ok?"), 0.5)])
        with pytest.raises(UserError, match="not both"):
            await assert_answer("x", "Is it ok?", judge=judge)
        with pytest.raises(UserError, match="needs a Judge, or a SystemOneClient"):
            await assert_answer("x", "Is it ok?", judge=object())
        with pytest.raises(UserError, match="plain-language yes/no questions"):
            await assert_answer("x", 42, judge=jev)
        with pytest.raises(UserError, match="put them in the JudgeInput"):
            await assert_answer(JudgeInput("q", "a"), "Ok?", judge=jev, question="q")
        with pytest.raises(UserError, match="judges a str, a ChatClientResponse, a ChatResp"):
            await assert_answer(None, "Ok?", judge=jev)
        with pytest.raises(UserError, match="minimum"):
            await assert_answer("x", "Ok?", judge=jev, minimum=1.5)
    assert fake_jev.requests == []
"""
    )
    result.assert_outcomes(passed=1)


def test_assert_answer_judges_a_chat_response_text(run) -> None:
    result = run(
        ANSWERS
        + """
import jevrefine as jr


async def test_response(fake_jev, function_model):
    fake_jev.answer = answers
    response = await jr.ChatClient(function_model("Paris.")).prompt("Capital?").call()
    async with JudgeClient("test-key", base_url=fake_jev.base_url) as jev:
        await assert_answer(response, "Does `assistant_answer` name Paris?", judge=jev)
        await assert_answer(response.chat_response, "Is it polite?", judge=jev)
    assert [r.json["state"]["assistant_answer"] for r in fake_jev.requests] == ["Paris."] * 2
"""
    )
    result.assert_outcomes(passed=1)


NEEDS_KEY = """
import pytest


@pytest.mark.needs_key("H22_KEY_A")
def test_one_key():
    pass


@pytest.mark.needs_key("H22_KEY_A", "H22_KEY_B")
def test_two_keys():
    pass


@pytest.mark.needs_key("H22_KEY_B")
class TestOnClass:
    def test_inherits(self):
        pass
"""


def test_needs_key_skips_with_the_reason_when_unset(run, monkeypatch) -> None:
    monkeypatch.setenv("H22_KEY_A", "sk-do-not-show-this")
    monkeypatch.delenv("H22_KEY_B", raising=False)
    result = run(NEEDS_KEY, "-rs")
    result.assert_outcomes(passed=1, skipped=2)
    result.stdout.fnmatch_lines(
        [
            "SKIPPED [[]1] test_app.py:9: needs H22_KEY_B set in the environment (unset)",
            "SKIPPED [[]1] test_app.py*: needs H22_KEY_B set in the environment (unset)",
        ]
    )
    assert "sk-do-not-show-this" not in result.stdout.str()


def test_needs_key_runs_when_every_key_is_set_and_skips_on_blank(run, monkeypatch) -> None:
    monkeypatch.setenv("H22_KEY_A", "a")
    monkeypatch.setenv("H22_KEY_B", "b")
    run(NEEDS_KEY).assert_outcomes(passed=3)
    monkeypatch.setenv("H22_KEY_A", "  ")
    result = run(NEEDS_KEY, "-rs")
    result.assert_outcomes(passed=1, skipped=2)
    result.stdout.fnmatch_lines(["*needs H22_KEY_A set in the environment (unset)"])


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ("", '*needs_key() needs a variable name, e.g. @pytest.mark.needs_key("OPENAI_API_KEY")'),
        ("42", "*needs_key takes environment variable names as strings, got [[]42]"),
        ('name="X"', "*needs_key takes only variable names, got keywords [[]'name'] on *"),
    ],
)
def test_needs_key_without_names_stops_the_run_with_a_usage_error(run, arguments, message) -> None:
    result = run(f"import pytest\n\n@pytest.mark.needs_key({arguments})\ndef test_x():\n    pass\n")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([message])


def test_the_marker_is_registered(run) -> None:
    result = run("def test_nothing():\n    pass\n", "--markers")
    result.stdout.fnmatch_lines(["@pytest.mark.needs_key(*names): skip the test unless*"])


GUIDE = Path(__file__).parents[2] / "docs" / "guide" / "testing.md"
_FILE_THEN_OUTPUT = re.compile(
    r"```python\n# (?P<name>test_\w+)\.py\n(?P<code>.*?)```.*?```text\n(?P<output>.*?)```",
    re.DOTALL,
)


def _guide_files() -> dict[str, tuple[str, list[str]]]:
    found = _FILE_THEN_OUTPUT.finditer(GUIDE.read_text(encoding="utf-8"))
    return {m["name"]: (m["code"], m["output"].splitlines()) for m in found}


def test_the_guides_test_files_run_and_print_what_the_guide_shows(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """docs/guide/testing.md: each test file it shows runs as shown, with the output shown."""
    monkeypatch.delenv("TYPESAFE_API_KEY", raising=False)
    files = _guide_files()
    assert sorted(files) == ["test_support_bot", "test_wrong_city"]
    pytester.makeini(INI)
    code, skipped = files["test_support_bot"]
    pytester.makepyfile(test_support_bot=f"# test_support_bot.py\n{code}")
    result = pytester.runpytest("-p", "jevrefine.pytest", "--strict-markers", "-rs")
    result.assert_outcomes(passed=1, skipped=1)
    result.stdout.fnmatch_lines([line.replace("[", "[[]") for line in skipped])

    code, failure = files["test_wrong_city"]
    pytester.makepyfile(test_wrong_city=f"# test_wrong_city.py\n{code}")
    result = pytester.runpytest("-p", "jevrefine.pytest", "test_wrong_city.py")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([f"E *{line.strip()}".replace("[", "[[]") for line in failure])
