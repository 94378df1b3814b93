"""`evaluate` on FunctionModel: the loop judge per mode, baseline and final, errors, callbacks."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from evals_support import Grader, write_cases

from jevrefine import ChatClient
from jevrefine.advisors.self_refine import SelfRefineAdvisor
from jevrefine.evals import Case, evaluate, load_cases
from jevrefine.exceptions import UserError
from jevrefine.jev.questions import Noul
from jevrefine.judge._judge import Judge, JudgeInput
from jevrefine.judge.criteria import check, noul
from jevrefine.messages import Prompt
from jevrefine.testing import FunctionModel

SHORT = {"type": "word-count", "value": {"max": 3}}


def cases_of(tmp_path: Path, *cases: dict[str, Any]) -> list[Case]:
    return load_cases(write_cases(tmp_path / "cases.jsonl", list(cases)))


def wordy_then_short(prompt: Prompt) -> str:
    """Long at first; once the feedback says 'use at most', short."""
    last = prompt.messages[-1].text  # type: ignore[union-attr]
    return "Paris." if "use at most" in last else "The capital of France is Paris."


async def test_asserts_judge_refines_with_the_oracle_sentence(tmp_path: Path) -> None:
    cases = cases_of(
        tmp_path,
        {"id": "fr", "input": "Capital of France?", "assert": [SHORT]},
        {"id": "ok", "input": "Say hi", "assert": [{"type": "icontains", "value": "capital"}]},
    )
    model = FunctionModel(wordy_then_short)
    seen: list[dict[str, Any]] = []
    report = await evaluate(cases, ChatClient(model), on_result=seen.append)
    data = report.to_dict()
    fr, ok = data["results"]
    assert (fr["passed_baseline"], fr["passed_final"], fr["chosen"]) == (False, True, 2)
    first, second = fr["attempts"]
    assert first["feedback"] == "- The answer has 6 words; use at most 3."
    assert (first["judge_passed"], first["oracle_passed"], first["failed_assertions"]) == (
        False, False, [0])  # fmt: skip
    assert second == {"index": 2, "answer": "Paris.", "judge_passed": True,
                      "oracle_passed": True, "failed_assertions": [], "feedback": None,
                      "escalated": [], "echo": False}  # fmt: skip
    assert "The answer has 6 words; use at most 3." in model.prompts[1].messages[-1].text  # type: ignore[union-attr]
    assert (ok["passed_baseline"], ok["chosen"], len(ok["attempts"])) == (True, 1, 1)
    assert (data["improved"], data["lift"], data["baseline_pass_rate"]) == (1, 0.5, 0.5)
    assert data["judge_agreement"]["kappa"] == 1.0
    assert sorted(r["id"] for r in seen) == ["fr", "ok"]
    assert data["model_tokens"] > 0
    assert data["judge_tokens"] == 0


async def test_none_runs_one_attempt_and_has_no_agreement(tmp_path: Path) -> None:
    cases = cases_of(tmp_path, {"input": "Capital of France?", "assert": [SHORT]})
    model = FunctionModel(wordy_then_short)
    data = (await evaluate(cases, ChatClient(model), judge="none")).to_dict()
    assert len(model.prompts) == 1
    assert data["judge_agreement"] is None
    (row,) = data["results"]
    assert (row["passed_baseline"], row["passed_final"], row["chosen"]) == (False, False, 1)
    assert row["attempts"][0]["judge_passed"] is None


async def test_config_uses_the_clients_own_advisor(tmp_path: Path) -> None:
    cases = cases_of(tmp_path, {"input": "Capital of France?", "assert": [SHORT]})
    always_fails = Judge(Grader(), [check("never", lambda i: False, "Never good enough.")])
    client = ChatClient(
        FunctionModel(wordy_then_short),
        advisors=[SelfRefineAdvisor(always_fails, max_repeat_attempts=1)],
    )
    data = (await evaluate(cases, client, judge="config")).to_dict()
    (row,) = data["results"]
    # The loop judge never passes, so the feedback never says "use at most": no improvement.
    assert [a["judge_passed"] for a in row["attempts"]] == [False, False]
    assert row["attempts"][0]["feedback"] == "- never: Never good enough."
    assert data["judge_agreement"] == {"tp": 0, "fp": 0, "fn": 0, "tn": 2, "kappa": None}
    with pytest.raises(UserError, match='pass judge="config" to evaluate it'):
        await evaluate(cases, client)
    with pytest.raises(UserError, match="this client has none"):
        await evaluate(cases, ChatClient(FunctionModel(wordy_then_short)), judge="config")


async def test_a_loop_that_gives_up_returns_no_answer(tmp_path: Path) -> None:
    cases = cases_of(tmp_path, {"input": "Capital of France?", "assert": [SHORT]})
    strict = Judge(Grader(), [check("never", lambda i: False, "Never good enough.")])
    advisor = SelfRefineAdvisor(strict, max_repeat_attempts=1, fail_on_exhausted_attempts=True)
    client = ChatClient(FunctionModel(wordy_then_short), advisors=[advisor])
    data = (await evaluate(cases, client, judge="config")).to_dict()
    (row,) = data["results"]
    assert (row["error"], row["chosen"], row["outcome"], row["passed_final"]) == (
        None, None, "failed", False)  # fmt: skip
    assert len(row["attempts"]) == 2
    assert data["per_assertion"]["word-count"]["final_pass_rate"] == 0.0


async def test_a_judge_object_and_its_fp_cells(tmp_path: Path) -> None:
    cases = cases_of(tmp_path, {"input": "Capital of France?", "assert": [SHORT]})
    lenient = Judge(Grader(), [check("anything", lambda i: True, "x")])
    data = (await evaluate(cases, ChatClient(FunctionModel(wordy_then_short)),
                           judge=lenient)).to_dict()  # fmt: skip
    assert data["judge_agreement"]["fp"] == 1  # the judge passed what the oracle failed
    assert data["results"][0]["chosen"] == 1


async def test_llm_rubric_in_the_loop_and_the_oracle(tmp_path: Path) -> None:
    cases = cases_of(
        tmp_path,
        {"input": "Greet me", "assert": [{"type": "llm-rubric", "value": "Polite."}]},
    )

    def rude_then_kind(prompt: Prompt) -> str:
        return "hello friend" if len(prompt.messages[-1].text) > 20 else "rude reply"  # type: ignore[union-attr]

    grader = Grader(0.9)
    data = (await evaluate(cases, ChatClient(FunctionModel(rude_then_kind)),
                           grader=grader)).to_dict()  # fmt: skip
    row = data["results"][0]
    assert (row["passed_baseline"], row["passed_final"]) == (False, True)
    assert data["judge_tokens"] == 14
    assert data["grader_tokens"] == 14
    assert "The answer must meet the rubric 'Polite.'" in row["attempts"][0]["feedback"]
    with pytest.raises(UserError, match="pass grader="):
        await evaluate(cases, ChatClient(FunctionModel(rude_then_kind)))


async def test_a_failing_case_is_an_error_row_and_left_out_of_the_rates(tmp_path: Path) -> None:
    cases = cases_of(
        tmp_path,
        {"id": "boom", "input": "explode", "assert": [SHORT]},
        {"id": "fine", "input": "hi", "assert": [SHORT]},
    )

    def model(prompt: Prompt) -> str:
        if prompt.messages[-1].text == "explode":  # type: ignore[union-attr]
            raise RuntimeError("the model broke")
        return "hi"

    data = (await evaluate(cases, ChatClient(FunctionModel(model)), concurrency=1)).to_dict()
    boom, fine = data["results"]
    assert boom["error"] == "RuntimeError: the model broke"
    assert boom["attempts"] == []
    assert boom["passed_final"] is None
    assert (data["cases"], data["errors"], data["final_pass_rate"]) == (2, 1, 1.0)
    assert data["attempts_histogram"] == {"1": 1}
    assert fine["error"] is None


async def test_async_on_result_and_messages_input(tmp_path: Path) -> None:
    cases = cases_of(
        tmp_path,
        {
            "input": [
                {"role": "user", "content": "My name is Ada."},
                {"role": "assistant", "content": "Hello Ada."},
                {"role": "user", "content": "What is my name?"},
            ],
            "system": "Be brief.",
            "expected": "Ada",
            "metadata": {"k": [1]},
            "assert": [{"type": "contains", "value": "Ada"}],
        },
    )
    model = FunctionModel(lambda p: "Ada")
    got: list[str] = []

    async def record(row: dict[str, Any]) -> None:
        got.append(row["id"])

    data = (await evaluate(cases, ChatClient(model), on_result=record)).to_dict()
    assert got == ["1"]
    roles = [m.role for m in model.prompts[0].messages]
    assert roles == ["system", "user", "assistant", "user"]
    row = data["results"][0]
    assert (row["expected"], row["metadata"]) == ("Ada", {"k": [1]})


async def test_no_cases_is_an_empty_report() -> None:
    report = await evaluate([], ChatClient(FunctionModel(lambda p: "x")))
    assert report.to_dict()["cases"] == 0


async def test_bad_arguments_fail_before_any_call(tmp_path: Path) -> None:
    cases = cases_of(tmp_path, {"input": "q", "assert": [SHORT]})
    model = FunctionModel(lambda p: "x")
    client = ChatClient(model)
    with pytest.raises(UserError, match='judge must be "asserts"'):
        await evaluate(cases, client, judge="rating")
    with pytest.raises(UserError, match="max_repeat_attempts"):
        await evaluate(cases, client, max_repeat_attempts=0)
    with pytest.raises(UserError, match="needs a ChatClient"):
        await evaluate(cases, model)  # type: ignore[arg-type]
    with pytest.raises(UserError, match="list of Case"):
        await evaluate(["q"], client)  # type: ignore[list-item]
    with pytest.raises(UserError, match="concurrency"):
        await evaluate(cases, client, concurrency=0)
    assert model.prompts == []


async def test_a_judge_of_checks_alone_makes_no_judging_call() -> None:
    grader = Grader()
    judge = Judge(grader, [check("short", lambda i: len(i.assistant_answer) < 5, "Too long.")])
    verdict = await judge.evaluate(JudgeInput("user: q", "a long answer"))
    assert not verdict.passed
    assert verdict.response is None
    assert grader.calls == []
    mixed = Judge(grader, [check("c", lambda i: True, "x"), noul("n", Noul("Good?"))])
    await mixed.evaluate(JudgeInput("user: q", "a"))
    assert len(grader.calls) == 1
