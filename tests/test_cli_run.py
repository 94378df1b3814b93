"""`jevrefine run`, `judge` and `check-config` end to end on the fake OpenAI and Jev servers."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest

from cli_support import SECRET, good_unless_bad, read_jsonl, run_cli, use_keys, write_jsonl
from cli_support import jev_config as shared_jev_config
from jevrefine import cli
from jevrefine.cli._config import AnswerCheck, ConfigError, load_config
from jevrefine.judge._judge import JudgeInput
from jevrefine.judge.criteria import CheckCriterion, QuestionCriterion
from jevrefine.testing import FakeJevServer, FakeOpenAIServer

SYSTEM = 'system = "Answer briefly."\nmax_tokens = 50\n'


def jev_config(tmp_path: Path, jev_url: str, **refine: Any) -> Path:
    """The shared Jev config with a system message, a token cap and 4 items in flight."""
    return shared_jev_config(tmp_path, jev_url, model=SYSTEM, refine=refine, run="concurrency = 4")


@pytest.fixture(autouse=True)
def keys(monkeypatch: pytest.MonkeyPatch) -> None:
    use_keys(monkeypatch)


async def test_run_refines_with_a_judge_and_reports(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    prompts = [{"id": f"q{i}", "prompt": f"question {i}"} for i in range(6)]
    prompts.append({"id": "q-bad", "prompt": "a bad one"})
    source = write_jsonl(tmp_path / "in.jsonl", prompts)
    output = tmp_path / "out.jsonl"
    async with FakeOpenAIServer() as model, FakeJevServer(good_unless_bad) as jev:
        config = jev_config(tmp_path, jev.base_url)
        code = await run_cli(
            "run", str(source), "-o", str(output), "--config", str(config),
            "--base-url", model.base_url, "--concurrency", "3",
        )  # fmt: skip
        judged = len(jev.requests)
    assert code == 0
    rows = {row["id"]: row for row in read_jsonl(output)}
    assert set(rows) == {p["id"] for p in prompts}
    assert rows["q0"]["answer"] == "Echo: question 0"
    assert (rows["q0"]["passed"], rows["q0"]["attempts"], rows["q0"]["outcome"]) == (
        True,
        1,
        "passed",
    )
    bad = rows["q-bad"]
    assert (bad["passed"], bad["attempts"], bad["outcome"]) == (False, 2, "best_attempt")
    assert rows["q0"]["model_tokens"] > 0
    assert judged == 6 + 2
    err = capsys.readouterr().err
    assert "6 of 7 judged" in err  # the summary table
    assert "pass 86%" in err  # the progress bar's final state
    assert SECRET not in err


async def test_resume_skips_done_ids_and_bad_lines_are_reported(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    prompts = [{"id": i, "prompt": f"question {i}"} for i in range(5)]
    source = write_jsonl(
        tmp_path / "in.jsonl",
        prompts,
        extra_lines=("{not json", '{"id": 9}', '["a list"]', json.dumps(prompts[0])),
    )
    output = tmp_path / "out.jsonl"
    # A previous run wrote ids 0 and 1, then died in the middle of a line.
    output.write_text(
        json.dumps({"id": 0, "answer": "old"}) + "\n" + json.dumps({"id": 1}) + '\n{"id": 2, "ans',
        encoding="utf-8",
    )
    async with FakeOpenAIServer() as model:
        code = await run_cli(
            "run", str(source), "-o", str(output), "--provider", "openai",
            "--base-url", model.base_url, "--judge", "none", "--no-progress",
        )  # fmt: skip
        asked = [r["messages"][-1]["content"] for r in model.chat_requests]
    assert code == 1  # bad lines make the exit status 1
    assert sorted(asked) == ["question 2", "question 3", "question 4"]
    lines = output.read_text(encoding="utf-8").splitlines()
    assert lines[2] == '{"id": 2, "ans'  # the cut line is left alone, on its own line
    rows = [json.loads(line) for line in lines[3:]]
    assert sorted(row["id"] for row in rows) == ["2", "3", "4"]
    assert all(row["passed"] is None and row["attempts"] == 1 for row in rows)
    err = capsys.readouterr().err
    assert "line 6: not valid JSON" in err
    assert "line 7: field 'prompt' is missing" in err
    assert "line 8: expected a JSON object, got list" in err
    assert "line 9: duplicate id '0'" in err


async def test_model_failures_are_rows_with_errors_and_exit_1(tmp_path: Path) -> None:
    source = write_jsonl(tmp_path / "in.jsonl", ["first", "second"])
    output = tmp_path / "out.jsonl"
    async with FakeOpenAIServer() as model:
        model.fail(400, times=1)  # 400 is not retried: exactly one item fails
        code = await run_cli(
            "run", str(source), "-o", str(output), "--provider", "openai",
            "--base-url", model.base_url, "--judge", "none", "--no-progress", "--concurrency", "1",
        )  # fmt: skip
    assert code == 1
    rows = read_jsonl(output)
    assert [row["id"] for row in rows] == ["1", "2"]  # bare strings: the id is the line number
    assert rows[0]["error"].startswith("ModelHTTPError")
    assert SECRET not in rows[0]["error"]
    assert rows[1]["answer"] == "Echo: second"


async def test_judge_command_writes_verdicts(tmp_path: Path) -> None:
    pairs = [
        {"id": "a", "question": "What is 2+2?", "answer": "4"},
        {"id": "b", "question": "What is 2+2?", "answer": "a bad answer"},
        {"id": "c", "question": "no answer field"},
    ]
    source = write_jsonl(tmp_path / "pairs.jsonl", pairs)
    output = tmp_path / "verdicts.jsonl"
    async with FakeJevServer(good_unless_bad) as jev:
        config = jev_config(tmp_path, jev.base_url)
        code = await run_cli(
            "judge", str(source), "-o", str(output), "--config", str(config), "--no-progress"
        )
    assert code == 1  # the pair without an answer is a bad line
    rows = {row["id"]: row for row in read_jsonl(output)}
    assert set(rows) == {"a", "b"}
    assert rows["a"]["passed"] is True
    assert rows["a"]["findings"] == {"is_good": "PASSED"}
    assert rows["b"]["passed"] is False
    assert "not good" in rows["b"]["feedback"]


def test_check_config_prints_settings_but_no_secret(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = jev_config(tmp_path, "http://127.0.0.1:9/v1", token_budget=500)
    assert cli.main(["check-config", "--config", str(config), "--temperature", "0.3"]) == 0
    out = capsys.readouterr().out
    described = json.loads(out)
    assert described["model"]["temperature"] == 0.3  # the flag overrides the file
    assert described["refine"]["token_budget"] == 500
    assert described["api_keys"]["openai"] == "set"
    assert SECRET not in out


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("[model]\nprovider = 'nope'\n", "model.provider"),
        ("[model\n", "not valid TOML"),
        ("[judge]\nkind = 'jev'\n", "at least one [[judge.criteria]]"),
        ("[run]\nconcurency = 3\n", "run.concurency: unknown key; did you mean concurrency?"),
        (
            "[judge]\nkind = 'jev'\n[[judge.criteria]]\nkind = 'choice'\nname = 't'\n"
            "question = 'Tone?'\noptions = ['polite', 'rude']\naccept = ['kind']\n",
            "judge.criteria[0].accept: choice('t'): accepted label(s) ['kind'] are not options",
        ),
    ],
)
def test_bad_config_exits_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: str, message: str
) -> None:
    config = tmp_path / "bad.toml"
    config.write_text(content, encoding="utf-8")
    assert cli.main(["check-config", "--config", str(config)]) == 2
    assert message in capsys.readouterr().err


CRITERIA = """
[judge]
kind = "jev"
base_url = "{jev_url}"
min_confidence = 0.5

[[judge.criteria]]
kind = "check"
name = "short"
max_length = 40
must_not_contain = ["AS AN AI"]
ignore_case = true

[[judge.criteria]]
kind = "choice"
name = "tone"
question = "What is the tone of `assistant_answer`?"
options = {{ polite = "Courteous", rude = "Insulting" }}
accept = ["polite"]

[[judge.criteria]]
kind = "score"
name = "helpfulness"
question = "How helpful is `assistant_answer`?"
levels = ["useless", "partial", "helpful"]
minimum = 1.5
when_chosen = {{ criterion = "tone", labels = ["polite"] }}

[[judge.criteria]]
name = "is_grounded"
question = "Is `assistant_answer` grounded?"
when_false = "States something unsupported"
minimum = 0.6
when_passed = "tone"
"""


def typed_answers(state: dict[str, Any], questions: dict[str, Any]) -> dict[str, Any]:
    """Polite and helpful, unless the answer mentions 'rude'."""
    rude = "rude" in state["assistant_answer"]
    answers: dict[str, Any] = {}
    for qid, question in questions.items():
        if question["type"] == "choice":
            answers[qid] = "rude" if rude else "polite"
        elif question["type"] == "score":
            answers[qid] = 1.8  # the expected level: mass on levels 1 and 2
        else:
            answers[qid] = 0.9
    return answers


async def test_judge_with_every_criterion_kind(tmp_path: Path) -> None:
    pairs = [
        {"id": "ok", "question": "Hi?", "answer": "Hello there."},
        {"id": "rude", "question": "Hi?", "answer": "a rude reply"},
        {"id": "long", "question": "Hi?", "answer": "As an AI, " + "x" * 60},
    ]
    source = write_jsonl(tmp_path / "pairs.jsonl", pairs)
    output = tmp_path / "verdicts.jsonl"
    async with FakeJevServer(typed_answers) as jev:
        config = tmp_path / "jevrefine.toml"
        config.write_text(CRITERIA.format(jev_url=jev.base_url), encoding="utf-8")
        code = await run_cli(
            "judge", str(source), "-o", str(output), "--config", str(config), "--no-progress"
        )
        asked = [sorted(request.json["questions"]) for request in jev.requests]
    assert code == 0
    rows = {row["id"]: row for row in read_jsonl(output)}
    assert rows["ok"]["passed"] is True
    assert rows["ok"]["findings"] == {
        "short": "PASSED",
        "tone": "PASSED",
        "helpfulness": "PASSED",
        "is_grounded": "PASSED",
    }
    rude = rows["rude"]
    assert rude["passed"] is False
    assert rude["findings"]["tone"] == "FAILED"
    # Both depend on the tone: not applicable once it failed.
    assert rude["findings"]["helpfulness"] == rude["findings"]["is_grounded"] == "NOT_APPLICABLE"
    assert rows["long"]["findings"]["short"] == "FAILED"
    assert "at most 40 characters" in rows["long"]["feedback"]
    assert ["helpfulness", "is_grounded", "tone"] in asked  # the check is never sent


def test_answer_checks() -> None:
    def answer(text: str) -> JudgeInput:
        return JudgeInput("q", text)

    check = AnswerCheck(
        max_length=20,
        min_length=3,
        pattern=re.compile(r"\d"),
        must_contain=("Paris",),
        must_not_contain=("maybe",),
    )
    assert check(answer("Paris, 2 million"))
    assert not check(answer("Paris"))  # no digit
    assert not check(answer("2 Lyon"))  # no Paris
    assert not check(answer("Paris 2, maybe"))
    assert not check(answer("Paris has about 2.1 million people"))  # too long
    assert "be at most 20 characters long" in check.describe()
    assert AnswerCheck(must_contain=("paris",), ignore_case=True)(answer("PARIS"))


@pytest.mark.parametrize(
    ("criterion", "key", "hint"),
    [
        ("name = 'a'\nquestion = 'q'\nlevels = ['x', 'y']\n", "judge.criteria[0].levels",
         'levels belongs to kind = "score" criteria'),
        ("kind = 'score'\nname = 'a'\nquestion = 'q'\nlevels = ['x', 'y']\nminimum = 3\n",
         "judge.criteria[0].minimum", "minimum=3.0 must be at most 1"),
        ("kind = 'score'\nname = 'a'\nquestion = 'q'\nlevels = ['x']\nminimum = 0\n",
         "judge.criteria[0].levels", "give 2 to 10, lowest first"),
        ("kind = 'score'\nname = 'a'\nquestion = 'q'\nlevels = ['x', 'y']\n",
         "judge.criteria[0].minimum", "required key missing: add minimum = ..."),
        ("kind = 'choise'\nname = 'a'\nquestion = 'q'\n", "judge.criteria[0]",
         'kind must be "noul" (the default), "score", "choice" or "check"'),
        ("kind = 'check'\nname = 'a'\n", "judge.criteria[0]",
         "needs at least one test: max_length, min_length, pattern"),
        ("kind = 'check'\nname = 'a'\npattern = '('\n", "judge.criteria[0].pattern",
         "missing ), unterminated subpattern"),
        ("kind = 'check'\nname = 'a'\nmax_length = 5\n", "judge.criteria",
         "at least one question criterion"),
        ("name = 'a'\nquestion = 'q'\nwhen_passed = 'b'\n", "judge.criteria[0].when_passed",
         "dependencies must point backwards"),
        ("name = 'a'\nquestion = 'q'\n[[judge.criteria]]\nname = 'a'\nquestion = 'r'\n",
         "judge.criteria[1].name", "two criteria are named 'a'"),
        ("name = 'a'\nquestion = 'q'\nwhen_chosen = { criterion = 'a', labels = [] }\n",
         "judge.criteria[0].when_chosen.labels", "at least 1 item"),
    ],
)  # fmt: skip
def test_bad_criteria_name_the_key(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], criterion: str, key: str, hint: str
) -> None:
    config = tmp_path / "bad.toml"
    config.write_text(f"[judge]\nkind = 'jev'\n[[judge.criteria]]\n{criterion}", encoding="utf-8")
    with pytest.raises(ConfigError) as info:
        load_config(str(config), {})
    assert info.value.key == key
    assert f"{key}: " in str(info.value)
    assert hint in str(info.value)
    assert str(config) in str(info.value)
    # check-config reports the same, with the key path, and exits 2.
    assert cli.main(["check-config", "--config", str(config)]) == 2
    err = capsys.readouterr().err
    assert key in err
    assert hint in err


def test_rating_takes_no_criteria(tmp_path: Path) -> None:
    config = tmp_path / "bad.toml"
    config.write_text(
        "[judge]\nkind = 'rating'\n[[judge.criteria]]\nname = 'a'\nquestion = 'q'\n",
        encoding="utf-8",
    )
    with pytest.raises(ConfigError, match='set kind = "jev"') as info:
        load_config(str(config), {})
    assert info.value.key == "judge.criteria"


def test_the_cli_guide_toml_is_valid(tmp_path: Path) -> None:
    guide = Path(__file__).resolve().parents[1] / "docs" / "guide" / "cli.md"
    blocks = re.findall(r"```toml\n(.*?)```", guide.read_text(encoding="utf-8"), re.DOTALL)
    assert len(blocks) >= 2
    for number, block in enumerate(blocks):
        path = tmp_path / f"guide-{number}.toml"
        path.write_text(block, encoding="utf-8")
        config = load_config(str(path), {})
        if config.judge.kind in ("jev", "model"):
            kinds = {type(c) for c in config.judge.build_criteria()}
            assert kinds == {CheckCriterion, QuestionCriterion}
            assert {c.kind for c in config.judge.criteria} == {"noul", "score", "choice", "check"}


async def test_model_judge_answers_the_criteria(tmp_path: Path) -> None:
    # kind = "model": a chat model (here the fake OpenAI server) answers the typed questions.
    source = write_jsonl(tmp_path / "in.jsonl", ["question"])
    output = tmp_path / "out.jsonl"
    config = tmp_path / "jevrefine.toml"
    config.write_text(
        "[judge]\nkind = 'model'\n[[judge.criteria]]\nkind = 'check'\nname = 'short'\n"
        "max_length = 5\n[[judge.criteria]]\nname = 'ok'\nquestion = 'Is it ok?'\n"
        "minimum = 0\n[refine]\nmax_repeat_attempts = 1\n",
        encoding="utf-8",
    )
    async with FakeOpenAIServer() as model:
        code = await run_cli(
            "run", str(source), "-o", str(output), "--config", str(config), "--provider",
            "openai", "--base-url", model.base_url, "--no-progress",
        )  # fmt: skip
        requests = len(model.chat_requests)
    assert code == 0
    (row,) = read_jsonl(output)
    assert row["answer"].startswith("Echo: question")
    assert (row["passed"], row["attempts"]) == (False, 2)  # the check fails both attempts
    assert requests == 4  # two answers, and the model judged each one


def test_missing_input_or_config_exits_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.main(["run", str(tmp_path / "missing.jsonl"), "--judge", "none"]) == 2
    assert "missing.jsonl" in capsys.readouterr().err
    assert cli.main(["check-config", "--config", str(tmp_path / "none.toml")]) == 2
    assert "not found" in capsys.readouterr().err


async def test_stdin_to_stdout_in_a_subprocess(tmp_path: Path) -> None:
    async with FakeOpenAIServer() as model:
        result = await anyio.run_process(
            [
                sys.executable, "-m", "jevrefine", "run", "--provider", "openai",
                "--base-url", model.base_url, "--judge", "none",
            ],
            input=b'{"id": "x", "prompt": "hello"}\n"bare prompt"\n',
            env={**os.environ, "OPENAI_API_KEY": SECRET},
            check=False,
        )  # fmt: skip
    assert result.returncode == 0, result.stderr.decode()
    rows = sorted(
        (json.loads(line) for line in result.stdout.decode().splitlines()), key=lambda r: r["id"]
    )
    assert [(r["id"], r["answer"]) for r in rows] == [
        ("2", "Echo: bare prompt"),
        ("x", "Echo: hello"),
    ]
    assert SECRET not in result.stderr.decode()


def test_demo_is_still_a_command() -> None:
    parser = cli.build_parser()
    assert parser.parse_args(["demo", "hi"]).command == "demo"
    assert parser.parse_args(["run", "in.jsonl"]).command == "run"


def test_help_lists_the_commands() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "jevrefine", "--help"], capture_output=True, text=True, check=True
    )
    for command in ("demo", "run", "judge", "check-config"):
        assert command in result.stdout


@pytest.mark.local_model
@pytest.mark.slow
@pytest.mark.timeout(600)
def test_run_on_the_local_model(tmp_path: Path) -> None:
    # The real SmolLM2 answers and rates its own answers 1-4; the CLI starts its
    # own llama.cpp server, so it runs in a subprocess (as the demo's test does).
    if importlib.util.find_spec("xllamacpp") is None and not os.environ.get("CI"):
        pytest.skip('the local model needs xllamacpp: pip install "jevrefine[local]"')
    source = tmp_path / "in.jsonl"
    source.write_text('"Name one colour."\n{broken\n', encoding="utf-8")
    output = tmp_path / "out.jsonl"
    env = {k: v for k, v in os.environ.items() if k not in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY")}
    # SmolLM2 answers and judges (the Qwen defaults are 1.5 GB of downloads); the judge's
    # calibration goes to a cache of the test's own.
    env["JEVREFINE_LOCAL_MODEL"] = "smollm2-135m"
    env["JEVREFINE_LOCAL_JUDGE_MODEL"] = "smollm2-135m"
    env["JEVREFINE_LOCAL_THREADS"] = "1"
    env["JEVREFINE_CACHE_DIR"] = str(tmp_path / "cache")
    result = subprocess.run(
        [
            sys.executable, "-m", "jevrefine", "run", str(source), "-o", str(output),
            "--provider", "local", "--max-tokens", "30", "--max-repeat-attempts", "1",
            "--concurrency", "1", "--judge", "rating",
        ],
        capture_output=True, text=True, env=env, timeout=540, check=False,
    )  # fmt: skip
    assert result.returncode == 1, result.stderr  # the broken line
    assert "line 2: not valid JSON" in result.stderr
    # SmolLM2 cannot judge: the calibration line says so before the run.
    assert "WARNING: the judge, smollm2 (the answering model itself)" in result.stderr
    assert "near chance" in result.stderr
    (row,) = read_jsonl(output)
    assert row["error"] is None, row
    assert row["answer"].strip()
    assert row["attempts"] in (1, 2)
    assert row["outcome"] in ("passed", "best_attempt")
    assert row["judge_tokens"] > 0
