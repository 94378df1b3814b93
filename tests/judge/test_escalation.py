"""`Judge(..., escalate_to=..., escalate_below=0.9)`: unsure criteria re-asked of a stronger client.

Both clients are `JudgeClient`s over real loopback `FakeJevServer`s. Behaviour and defaults
follow the seed library's docs/judge/JevJudge.md, "Escalating uncertain criteria"
(spring-ai-community/spring-ai-typesafe).
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from typing import Any

import pytest

import jevrefine as jr
from evals.report_fixture import page_rows
from jevrefine.jev import Choice, JudgeClient, JudgeUsageError, Noul, RetryPolicy, Score
from jevrefine.judge import (
    DEFAULT_ESCALATE_BELOW,
    Judge,
    JudgeInput,
    Outcome,
    check,
    choice,
    noul,
    score,
)
from jevrefine.testing import FakeJevServer, FunctionModel
from support import Telemetry

INPUT = JudgeInput("user: Weather in Paris?", "It is 15 °C and sunny.")


def _answers(values: dict[str, Any]):
    return lambda state, questions: {k: v for k, v in values.items() if k in questions}


@pytest.fixture
async def weak() -> AsyncIterator[FakeJevServer]:
    async with FakeJevServer() as server:
        yield server


@pytest.fixture
async def strong() -> AsyncIterator[FakeJevServer]:
    async with FakeJevServer() as server:
        yield server


def _client(server: FakeJevServer, **kwargs: Any) -> JudgeClient:
    return JudgeClient("test-key", base_url=server.base_url, **kwargs)


def _asked(server: FakeJevServer) -> list[list[str]]:
    return [sorted(r.json["questions"]) for r in server.requests]


NOULS = [
    noul("sure_yes", Noul("Sure yes?"), 0.7),
    noul("unsure", Noul("Unsure?", when_false="Not sure at all"), 0.7),
    noul("sure_no", Noul("Sure no?", when_false="Clearly not"), 0.7),
]


async def test_only_the_unsure_criteria_go_to_the_stronger_client_in_one_call(
    weak: FakeJevServer, strong: FakeJevServer
) -> None:
    """JevJudge.md: a noul at 0.55 is escalated, one at 0.03 is not; the stronger judge's
    answer is judged by the criterion's own minimum and the finding is marked escalated."""
    weak.answer = _answers({"sure_yes": 0.95, "unsure": 0.55, "sure_no": 0.03})
    strong.answer = _answers({"unsure": 0.2})
    async with _client(weak) as first, _client(strong) as second:
        verdict = await Judge(first, NOULS, escalate_to=second).evaluate(INPUT)
    assert _asked(weak) == [["sure_no", "sure_yes", "unsure"]]
    assert _asked(strong) == [["unsure"]]
    assert strong.requests[0].json["state"] == INPUT.state()
    unsure = verdict.finding("unsure")
    assert (unsure.outcome, unsure.escalated, unsure.score) == (Outcome.FAILED, True, 0.2)
    assert [f.criterion for f in verdict.escalated()] == ["unsure"]
    assert not verdict.finding("sure_yes").escalated
    assert verdict.finding("sure_no").outcome is Outcome.FAILED
    assert verdict.summary() == (
        "passed=false [sure_yes=PASSED, unsure=FAILED(escalated), sure_no=FAILED]"
    )
    assert "- unsure: Not sure at all (P(yes) 0.20, needed at least 0.70)" in verdict.feedback


async def test_the_stronger_clients_tokens_count_in_the_verdicts_usage(
    weak: FakeJevServer, strong: FakeJevServer
) -> None:
    weak.answer = _answers({"sure_yes": 0.95, "unsure": 0.55, "sure_no": 0.03})
    async with _client(weak) as first, _client(strong) as second:
        alone = await Judge(first, NOULS).evaluate(INPUT)
        both = await Judge(first, NOULS, escalate_to=second).evaluate(INPUT)
    assert alone.response is not None
    assert both.response is not None
    extra = both.response.usage.total_tokens - alone.response.usage.total_tokens
    assert extra > 0
    assert len(strong.requests) == 1


async def test_no_call_when_the_first_client_is_sure_throughout(
    weak: FakeJevServer, strong: FakeJevServer
) -> None:
    """JevJudge.md: nothing is paid when Jev was confident throughout."""
    weak.answer = _answers({"sure_yes": 0.97, "unsure": 0.92, "sure_no": 0.02})
    async with _client(weak) as first, _client(strong) as second:
        verdict = await Judge(first, NOULS, escalate_to=second).evaluate(INPUT)
    assert strong.requests == []
    assert verdict.escalated() == []
    assert "escalat" not in verdict.summary()


async def test_escalate_below_is_the_bar(weak: FakeJevServer, strong: FakeJevServer) -> None:
    weak.answer = _answers({"sure_yes": 0.8, "unsure": 0.55, "sure_no": 0.03})
    strong.answer = _answers({"sure_yes": 0.9, "unsure": 0.9})
    assert DEFAULT_ESCALATE_BELOW == 0.9
    async with _client(weak) as first, _client(strong) as second:
        await Judge(first, NOULS, escalate_to=second).evaluate(INPUT)
        await Judge(first, NOULS, escalate_to=second, escalate_below=0.6).evaluate(INPUT)
    assert _asked(strong) == [["sure_yes", "unsure"], ["unsure"]]


LEGEND = {"0": "no", "1": "some", "2": "yes"}


async def test_choice_score_and_inconclusive_findings_are_escalated_by_their_support(
    weak: FakeJevServer, strong: FakeJevServer
) -> None:
    """JevJudge.md: escalated when the answer errored or was INCONCLUSIVE, or when less than the
    threshold of the probability supports the verdict (the share on its side)."""
    criteria = [
        choice("tone", Choice("Tone?", options=["polite", "rude"]), accept=["polite"]),
        score("helpful", Score("Helpful?", levels=["no", "some", "yes"]), 2),
        choice("topic", Choice("Topic?", options=["weather", "sports"]), accept=["weather"]),
    ]
    weak.answer = _answers(
        {
            "tone": {"type": "choice", "choice": "polite",
                     "probabilities": {"polite": 0.97, "rude": 0.03}},
            "helpful": {"type": "score", "score": 1.7, "legend": LEGEND,
                        "probabilities": {"0": 0.05, "1": 0.2, "2": 0.75}},
            "topic": {"type": "choice", "choice": "weather",
                      "probabilities": {"weather": 0.55, "sports": 0.45}},
        }
    )  # fmt: skip
    strong.answer = _answers(
        {
            "helpful": {"type": "score", "score": 2.0, "legend": LEGEND,
                        "probabilities": {"0": 0.0, "1": 0.0, "2": 1.0}},
            "topic": {"type": "choice", "choice": "sports",
                      "probabilities": {"weather": 0.1, "sports": 0.9}},
        }
    )  # fmt: skip
    async with _client(weak) as first, _client(strong) as second:
        judge = Judge(first, criteria, min_confidence=0.6, escalate_to=second, escalate_below=0.5)
        verdict = await judge.evaluate(INPUT)
        # With the bar at 0.5 only the INCONCLUSIVE topic (0.55 < min_confidence) goes up.
        assert _asked(strong) == [["topic"]]
        assert verdict.finding("topic").outcome is Outcome.FAILED
        verdict = await Judge(first, criteria, escalate_to=second).evaluate(INPUT)
    assert _asked(strong)[1] == ["helpful", "topic"]
    assert verdict.finding("helpful").outcome is Outcome.PASSED
    assert verdict.finding("helpful").escalated
    assert not verdict.finding("tone").escalated


MODE = Choice("Mode?", options=["answered", "clarify"])


async def test_dependents_follow_the_escalated_decision(
    weak: FakeJevServer, strong: FakeJevServer
) -> None:
    """JevJudge.md: dependents (when_chosen, when_passed) follow the escalated decision."""
    criteria = [
        choice("mode", MODE, accept=["answered", "clarify"]),
        noul("has_details", Noul("Details?"), 0.5, when_chosen=("mode", ["answered"])),
    ]
    weak.answer = _answers(
        {
            "mode": {"type": "choice", "choice": "answered",
                     "probabilities": {"answered": 0.6, "clarify": 0.4}},
            "has_details": 0.99,
        }
    )  # fmt: skip
    strong.answer = _answers(
        {"mode": {"type": "choice", "choice": "clarify",
                  "probabilities": {"answered": 0.05, "clarify": 0.95}}}
    )  # fmt: skip
    async with _client(weak) as first, _client(strong) as second:
        verdict = await Judge(first, criteria, escalate_to=second).evaluate(INPUT)
    # The accepted share is 1.0 either way: mode passes surely and is not escalated...
    assert _asked(strong) == []
    criteria[0] = choice(
        "mode", Choice("Mode?", options=["answered", "clarify"]), accept=["answered"]
    )
    async with _client(weak) as first, _client(strong) as second:
        verdict = await Judge(first, criteria, escalate_to=second).evaluate(INPUT)
    # ...accepting only "answered", 0.6 is unsure: the stronger client says clarify.
    assert _asked(strong) == [["mode"]]
    assert verdict.finding("mode").escalated
    details = verdict.finding("has_details")
    assert details.outcome is Outcome.NOT_APPLICABLE
    assert "mode chose 'clarify'" in details.detail


async def test_code_checks_and_inapplicable_criteria_are_never_escalated(
    weak: FakeJevServer, strong: FakeJevServer
) -> None:
    criteria = [
        check("short", lambda i: False, "Too long"),
        noul("skipped", Noul("Skipped?"), 0.7, applies_when=lambda i: False),
        noul("unsure", Noul("Unsure?"), 0.7),
    ]
    weak.answer = _answers({"unsure": 0.5})
    strong.answer = _answers({"unsure": 0.95})
    async with _client(weak) as first, _client(strong) as second:
        verdict = await Judge(first, criteria, escalate_to=second).evaluate(INPUT)
    assert _asked(strong) == [["unsure"]]
    assert [f.criterion for f in verdict.escalated()] == ["unsure"]
    assert verdict.summary() == (
        "passed=false [short=FAILED, skipped=NOT_APPLICABLE, unsure=PASSED(escalated)]"
    )


async def test_a_failing_stronger_client_leaves_the_first_findings_marked(
    weak: FakeJevServer, caplog: pytest.LogCaptureFixture
) -> None:
    """JevJudge.md: when the escalation fails, Jev's own finding stands, a warning is logged,
    and the summary reads `(escalation failed)`: a cascade that never works does not pass for
    one that does."""
    weak.answer = _answers({"sure_yes": 0.95, "unsure": 0.55, "sure_no": 0.03})
    async with FakeJevServer(api_key="the-right-key") as guarded:
        wrong = JudgeClient(
            "sk-wrong-secret-key", base_url=guarded.base_url, retry=RetryPolicy(max_retries=0)
        )
        async with _client(weak) as first, wrong:
            with caplog.at_level(logging.WARNING, logger="jevrefine.judge"):
                verdict = await Judge(first, NOULS, escalate_to=wrong).evaluate(INPUT)
        assert len(guarded.requests) == 1
    unsure = verdict.finding("unsure")
    assert (unsure.outcome, unsure.escalated, unsure.escalation_failed) == (
        Outcome.FAILED, False, True)  # fmt: skip
    assert unsure.score == 0.55
    assert "unsure=FAILED(escalation failed)" in verdict.summary()
    assert verdict.escalated() == []
    (record,) = [r for r in caplog.records if r.name == "jevrefine.judge"]
    assert "JudgeAuthenticationError" in record.getMessage()
    assert "sk-wrong" not in caplog.text


async def test_the_same_client_may_escalate_to_a_stronger_model(weak: FakeJevServer) -> None:
    weak.answer = _answers({"sure_yes": 0.95, "unsure": 0.55, "sure_no": 0.03})
    async with _client(weak) as jev:
        judge = Judge(jev, NOULS, escalate_to=jev, escalate_model="jev-1.14.0")
        verdict = await judge.evaluate(INPUT)
    assert [r.json["model"] for r in weak.requests] == ["jev-latest", "jev-1.14.0"]
    assert verdict.finding("unsure").escalated


def test_escalation_arguments_are_checked() -> None:
    client = JudgeClient("k", base_url="http://127.0.0.1:9")
    with pytest.raises(JudgeUsageError, match="escalate_to needs a SystemOneClient"):
        Judge(client, NOULS, escalate_to="strong")  # type: ignore[arg-type]
    with pytest.raises(JudgeUsageError, match="escalate_below"):
        Judge(client, NOULS, escalate_to=client, escalate_below=1.5)
    assert "escalate_to=" in repr(Judge(client, NOULS, escalate_to=client))


async def test_escalated_findings_are_marked_on_the_evaluation_events(
    weak: FakeJevServer, strong: FakeJevServer, otel: Telemetry
) -> None:
    weak.answer = _answers({"sure_yes": 0.95, "unsure": 0.55, "sure_no": 0.95})
    strong.answer = _answers({"unsure": 0.99})
    async with _client(weak) as first, _client(strong) as second:
        judge = Judge(first, NOULS, escalate_to=second)
        client = jr.ChatClient(
            FunctionModel(lambda prompt: "It is sunny."),
            advisors=[jr.SelfRefineAdvisor(judge)],
            tracer_provider=otel.tracer_provider,
        )
        assert await client.prompt("Weather?").content() == "It is sunny."
    (attempt,) = [s for s in otel.spans() if s.name == "self_refine.attempt"]
    marks = {
        e.attributes["gen_ai.evaluation.name"]: e.attributes.get("jevrefine.evaluation.escalated")
        for e in attempt.events
        if e.name == "gen_ai.evaluation.result"
    }
    assert marks == {"sure_yes": None, "unsure": True, "sure_no": None}


async def test_jevrefine_evals_rows_and_report_mark_the_escalated_criteria(
    weak: FakeJevServer, strong: FakeJevServer, tmp_path
) -> None:
    """The evaluation report names each attempt's escalated criteria and counts them."""
    from jevrefine.evals import evaluate, load_cases

    case = '{"input": "Weather in Paris?", "assert": [{"type": "icontains", "value": "sunny"}]}'
    (tmp_path / "cases.jsonl").write_text(case + "\n", encoding="utf-8")
    cases = load_cases(tmp_path / "cases.jsonl")
    weak.answer = _answers({"sure_yes": 0.95, "unsure": 0.55, "sure_no": 0.95})
    strong.answer = _answers({"unsure": 0.97})
    async with _client(weak) as first, _client(strong) as second:
        judge = Judge(first, NOULS, escalate_to=second)
        report = await evaluate(
            cases, jr.ChatClient(FunctionModel(lambda prompt: "Sunny.")), judge=judge
        )
    data = report.to_dict()
    (row,) = data["results"]
    assert [a["escalated"] for a in row["attempts"]] == [["unsure"]]
    assert data["escalated"] == 1
    # The HTML report page shows it on the attempt too.
    report.write_html(tmp_path / "report.html")
    page = (tmp_path / "report.html").read_text(encoding="utf-8")
    (shown,) = page_rows(page)  # the page's rows are data, drawn by its script
    chips = [chip for block in shown["b"] if block[0] == "attempt" for chip in block[1]["chips"]]
    assert ["escalated: unsure", "info"] in chips


CONFIG = """
[model]
provider = "openai"
base_url = "{openai}"
name = "fake-model"

[judge]
kind = "jev"
base_url = "{weak}"

[[judge.criteria]]
name = "unsure"
question = "Unsure?"
minimum = 0.7

[judge.escalate]
kind = "jev"
base_url = "{strong}"
name = "jev-1.14.0"
below = 0.8
"""


async def test_the_cli_config_builds_an_escalating_judge(
    weak: FakeJevServer, strong: FakeJevServer, tmp_path, monkeypatch
) -> None:
    """`[judge.escalate]` in the `jevrefine run` / `eval` config file."""
    from jevrefine.cli._config import ConfigError, load_config, missing_key, open_models
    from jevrefine.testing import FakeOpenAIServer

    monkeypatch.setenv("TYPESAFE_API_KEY", "ts-test")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    weak.answer = _answers({"unsure": 0.6})
    strong.answer = _answers({"unsure": 0.1})
    path = tmp_path / "jevrefine.toml"
    async with FakeOpenAIServer() as openai:
        path.write_text(
            CONFIG.format(openai=openai.base_url, weak=weak.base_url, strong=strong.base_url)
        )
        config = load_config(str(path), {})
        async with open_models(config) as models:
            judge = models.judge
            assert judge is not None
            assert judge.escalate_below == 0.8
            verdict = await judge.evaluate(INPUT)
    assert verdict.summary() == "passed=false [unsure=FAILED(escalated)]"
    assert [r.json["model"] for r in strong.requests] == ["jev-1.14.0"]
    monkeypatch.delenv("TYPESAFE_API_KEY")
    assert "TYPESAFE_API_KEY" in (missing_key(config) or "")
    bad = tmp_path / "bad.toml"
    bad.write_text('[judge]\nkind = "rating"\n[judge.escalate]\nkind = "jev"\n')
    with pytest.raises(ConfigError, match=r"\[judge.escalate\] re-asks criteria"):
        load_config(str(bad), {})
