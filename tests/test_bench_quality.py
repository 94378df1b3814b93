"""The quality benchmark's arithmetic and judges, without a model (the run itself is too slow
for CI: minutes of CPU per model; `python -m benchmarks.bench_quality --quick` runs it)."""

from __future__ import annotations

import json
import math
from dataclasses import asdict

import pytest
from benchmarks import bench_quality as bq
from benchmarks.ifbench import convert, verify

from jevrefine.judge import JudgeInput, ModelJudgeClient
from jevrefine.messages import ChatOptions, Prompt, UserMessage
from jevrefine.testing import FunctionModel


def _case(benchmark: str, case_id: str) -> bq.Case:
    chosen = bq.BENCHMARKS[benchmark]
    [raw] = [c for c in chosen.case_file.load() if c["id"] == case_id]
    return bq.Case.of(raw, chosen)


try:
    verify.registry()
    bq.IFEVAL.verifiers.registry()
    HAVE_VERIFIERS = True
except verify.VerifierUnavailableError:
    HAVE_VERIFIERS = False


def test_paired_summary_counts_and_interval() -> None:
    before = [True, True, False, False, False, True, False, False]
    after = [True, False, True, True, False, True, True, False]
    s = bq.paired_summary(before, after)
    assert (s["n"], s["improved"], s["degraded"]) == (8, 3, 1)
    assert s["baseline_pass_rate"] == 3 / 8
    assert s["final_pass_rate"] == 5 / 8
    assert s["lift"] == pytest.approx(2 / 8)
    assert s["error_introduction_rate"] == pytest.approx(1 / 3)
    assert s["improvements_per_degradation"] == 3
    # diffs 0,-1,1,1,0,0,1,0: mean 0.25, sample sd sqrt(0.5), half-width 1.96 * sd / sqrt(8)
    half = 1.96 * math.sqrt(0.5) / math.sqrt(8)
    assert s["lift_ci95"] == pytest.approx([0.25 - half, 0.25 + half])


def test_paired_summary_edge_cases() -> None:
    s = bq.paired_summary([False, False], [False, False])
    assert s["lift_ci95"] == [0.0, 0.0]
    assert s["error_introduction_rate"] == 0.0
    assert s["improvements_per_degradation"] is None
    with pytest.raises(ValueError, match="differ in size"):
        bq.paired_summary([True], [True, False])
    with pytest.raises(ValueError, match="no prompts"):
        bq.paired_summary([], [])


def test_kappa() -> None:
    perfect = bq.agreement([(True, True), (False, False), (True, True)])
    assert perfect["kappa"] == 1.0
    # Always "passed" whatever the oracle says: no better than chance.
    blind = bq.agreement([(True, True), (True, False), (True, True), (True, False)])
    assert blind["kappa"] == 0.0
    assert (blind["tp"], blind["fp"], blind["fn"], blind["tn"]) == (2, 2, 0, 0)
    mixed = bq.agreement([(True, True), (True, False), (False, False), (False, False)])
    # observed 0.75; expected (2*1 + 2*3) / 16 = 0.5; kappa 0.5
    assert mixed["kappa"] == pytest.approx(0.5)
    assert bq.agreement([])["kappa"] is None
    assert bq.agreement([(False, False), (False, False)])["kappa"] is None  # one class only


KEYWORDS = "kaleidoscope nebula nebula " + "whisper " * 3 + "labyrinth " * 5 + "paradox " * 7


@pytest.mark.skipif(not HAVE_VERIFIERS, reason="the verifiers are not installed")
@pytest.mark.parametrize(
    ("benchmark", "case_id", "bad", "good", "named"),
    [
        # IFBench's first prompt: keywords a given number of times each.
        ("ifbench", "ifbench-0", "No keywords here.", KEYWORDS, "0:count:keywords_multiple"),
        (
            "ifeval",
            "ifeval-1001",
            "Good morrow, traveller.",
            "Good morrow.",
            "0:punctuation:no_comma",
        ),
    ],
)
async def test_verifier_judge_fails_with_the_instruction_and_makes_no_call(
    benchmark: str, case_id: str, bad: str, good: str, named: str
) -> None:
    case = _case(benchmark, case_id)
    model = FunctionModel(lambda _prompt: "yes")
    judge = bq.verifier_judge(case, ModelJudgeClient(model))
    verdict = await judge.evaluate(JudgeInput("user: " + case.prompt, bad))
    assert not verdict.passed
    assert named in verdict.feedback
    assert case.descriptions()[0] in verdict.feedback
    assert (await judge.evaluate(JudgeInput("user: x", good))).passed
    assert model.prompts == []  # code checks only: the judge model was never asked


async def test_shared_model_answers_once_and_heats_only_retries() -> None:
    model = FunctionModel(lambda prompt: f"answer at {prompt.options.temperature}")
    shared = bq.SharedModel(model, bq.ResponseCache())
    shared.original, shared.retry_temperature = "Q", 0.7
    cold = Prompt((UserMessage("Q"),), ChatOptions(temperature=0.0))
    retry = Prompt((UserMessage("Q\n\nfix it"),), ChatOptions(temperature=0.0))
    assert (await shared.call(cold)).text == "answer at 0.0"
    assert (await shared.call(cold)).text == "answer at 0.0"
    assert (await shared.call(retry)).text == "answer at 0.7"
    assert len(model.prompts) == 2  # the repeated first attempt came from the cache


async def test_the_file_cache_serves_a_later_run_and_keys_on_what_is_sent(tmp_path) -> None:
    path = tmp_path / "cache.jsonl"
    first = FunctionModel(lambda prompt: f"answer at {prompt.options.temperature}")
    cold = Prompt((UserMessage("Q"),), ChatOptions(temperature=0.0, seed=7))
    await bq.SharedModel(first, bq.ResponseCache(path)).call(cold)
    later = FunctionModel(lambda prompt: "a new generation")
    shared = bq.SharedModel(later, bq.ResponseCache(path))
    assert (await shared.call(cold)).text == "answer at 0.0"
    assert shared.charged > 0  # the stored generation's seconds are charged again
    other_seed = Prompt((UserMessage("Q"),), ChatOptions(temperature=0.0, seed=8))
    assert (await shared.call(other_seed)).text == "a new generation"
    assert len(later.prompts) == 1


@pytest.mark.skipif(not HAVE_VERIFIERS, reason="the IFBench verifiers are not installed")
def test_echoes_and_repeats_are_counted() -> None:
    case = bq.Case.of(convert.load_cases()[0])
    description = case.descriptions()[0]
    row = bq.Row(case.id, "verifiers", answers=["first", "first", "A reviewer rejected it", "x"])
    bq.mark_retries(row, case)
    assert (row.echoed, row.unchanged) == (1, 1)
    quoting = bq.Row(case.id, "verifiers", answers=["first", "Sure. " + description])
    assert bq.mark_retries(quoting, case).echoed == 1


@pytest.mark.skipif(not HAVE_VERIFIERS, reason="the IFBench verifiers are not installed")
def test_a_pass_by_echoing_the_feedback_is_not_an_answered_pass() -> None:
    case = bq.Case.of(convert.load_cases()[0])
    echo = "The answer broke these rules: " + case.descriptions()[0]
    returned = bq.Row(case.id, "verifiers", answers=["draft", echo], final=True, chosen=2)
    assert not bq.mark_retries(returned, case).final_answered
    # An echo that was not returned does not count against the returned answer.
    earlier = bq.Row(
        case.id, "verifiers", answers=["draft", echo, "a real answer"], final=True, chosen=3
    )
    assert bq.mark_retries(earlier, case).final_answered


def test_the_subset_is_evenly_spaced_unless_first() -> None:
    cases = [{"id": str(i)} for i in range(10)]
    assert [c["id"] for c in bq.select(cases, 3)] == ["0", "3", "6"]
    assert [c["id"] for c in bq.select(cases, 3, first=True)] == ["0", "1", "2"]
    assert [c["id"] for c in bq.select(cases, 2, skip=4)] == ["4", "7"]
    assert len(bq.select(cases, 50)) == 10


def test_variants_name_a_template_a_retry_temperature_or_a_resample() -> None:
    assert bq.parse_variant("default") == ("default", None, None)
    assert bq.parse_variant("answer-only@0.7") == ("answer-only", 0.7, None)
    assert bq.parse_variant("default~0.7") == ("default", None, 0.7)


def test_the_development_slice_never_overlaps_the_published_subset() -> None:
    cases = [{"id": str(i)} for i in range(100)]
    published = {c["id"] for c in bq.select(cases, 12)}
    dev = bq.development(cases, 20, 12)
    assert len(dev) == 20
    assert not published & {c["id"] for c in dev}


async def test_a_repeated_retry_is_resampled_once_at_the_resample_temperature() -> None:
    # The model repeats itself at temperature 0 whatever the feedback says.
    model = FunctionModel(lambda prompt: "same" if prompt.options.temperature == 0.0 else "fresh")
    shared = bq.SharedModel(model, bq.ResponseCache())
    shared.original, shared.resample_temperature = "Q", 0.7
    first = Prompt((UserMessage("Q"),), ChatOptions(temperature=0.0))
    retry = Prompt((UserMessage("Q\n\nfix it"),), ChatOptions(temperature=0.0))
    assert (await shared.call(first)).text == "same"
    assert (await shared.call(retry)).text == "fresh"
    temperatures = [p.options.temperature for p in model.prompts]
    assert temperatures == [0.0, 0.0, 0.7]  # the repeat was asked again, hotter
    shared.resample_temperature = None
    shared.previous = "same"
    assert (await shared.call(retry)).text == "same"  # off: the repeat is kept (from the cache)


# -- IFEval (`--benchmark ifeval`) --------------------------------------------------------------


@pytest.mark.skipif(not HAVE_VERIFIERS, reason="the IFEval verifiers are not installed")
def test_echoes_of_ifeval_feedback_are_counted_but_not_a_text_asked_to_be_repeated() -> None:
    case = _case("ifeval", "ifeval-1019")  # all lowercase
    [description] = case.descriptions()
    assert description.startswith("Your entire response should be in English")
    echo = bq.Row(case.id, "verifiers", answers=["Draft.", "sure. " + description.lower()])
    assert bq.mark_retries(echo, case).echoed == 1
    # Repeat the request (which itself says "Your answer must contain a title, wrapped in double
    # angular brackets"), then answer with a title: a retry that does so is not an echo.
    repeat = _case("ifeval", "ifeval-2305")
    request = repeat.kwargs[0]["prompt_to_repeat"]
    assert any(d[:40].lower() in request.lower() for d in repeat.descriptions())
    answer = request + "\n<<Shadow>>\nShadow."
    assert repeat.passes(answer)
    retry = bq.Row(repeat.id, "verifiers", answers=["Shadow.", answer], final=True, chosen=2)
    marked = bq.mark_retries(retry, repeat)
    assert (marked.echoed, marked.final_answered) == (0, True)


def _dump_line(model: str, row: bq.Row, *, old: bool = False) -> str:
    record = {"model": model, **asdict(row)}
    if old:  # written before IFEval came: no `benchmark` field
        del record["benchmark"]
    return json.dumps(record) + "\n"


@pytest.mark.skipif(not HAVE_VERIFIERS, reason="the verifiers are not installed")
def test_a_dump_of_both_benchmarks_reports_each_on_its_own(tmp_path) -> None:
    ifbench_case = bq.Case.of(convert.load_cases()[0])
    ifeval_case = _case("ifeval", "ifeval-1001")
    old = bq.Row(ifbench_case.id, "verifiers", answers=["a"], oracle=[False])
    new = bq.Row(ifeval_case.id, "verifiers", answers=["b"], oracle=[True], final=True)
    new.benchmark = "ifeval"
    dump = tmp_path / "attempts.jsonl"
    dump.write_text(_dump_line("smol", old, old=True) + _dump_line("smol", new))
    ifbench_rows = bq.load_dumps([str(dump)])
    ifeval_rows = bq.load_dumps([str(dump)], bq.IFEVAL)
    assert [(r.case, r.benchmark) for r in ifbench_rows["smol"]] == [(old.case, "ifbench")]
    assert [(r.case, r.benchmark) for r in ifeval_rows["smol"]] == [(new.case, "ifeval")]
    assert bq.finished_cases(dump) == {"smol": {old.case}}
    assert bq.finished_cases(dump, bq.IFEVAL) == {"smol": {new.case}}


@pytest.mark.skipif(not HAVE_VERIFIERS, reason="the verifiers are not installed")
def test_a_report_on_dumps_without_the_benchmarks_rows_says_which_to_pass(tmp_path) -> None:
    row = bq.Row("ifeval-1001", "verifiers", answers=["b"], oracle=[True], final=True)
    row.benchmark = "ifeval"
    dump = tmp_path / "ifeval.jsonl"
    dump.write_text(_dump_line("smol", row))
    with pytest.raises(SystemExit, match=r"hold no IFBench rows; pass --benchmark .* \(ifeval\)"):
        bq.main(["--from-dump", str(dump)])


def test_ifevals_published_subset_and_dev_slice_split_its_cases() -> None:
    cases = bq.IFEVAL.case_file.load()
    published = bq.select(cases, bq.IFEVAL_PUBLISHED_N)
    dev = bq.development(cases, len(cases), bq.IFEVAL_PUBLISHED_N)
    assert (len(cases), len(published), len(dev)) == (475, 300, 175)
    ids = [c["id"] for c in published], [c["id"] for c in dev]
    assert not set(ids[0]) & set(ids[1])
    assert set(ids[0]) | set(ids[1]) == {c["id"] for c in cases}
    assert ids[0][:3] == ["ifeval-1000", "ifeval-1001", "ifeval-1012"]  # every 1.58th case


def test_the_benchmark_option_picks_the_subset_size_and_names_the_report() -> None:
    assert bq.parse_args([]).benchmark == "ifbench"
    assert bq.parse_args([]).n == bq.PUBLISHED_N == 200
    args = bq.parse_args(["--benchmark", "ifeval"])
    assert (args.benchmark, args.n) == ("ifeval", 300)
    assert bq.parse_args(["--benchmark", "ifeval", "--quick"]).n == 2
    args.available, args.threads = 475, 1
    row = bq.Row("ifeval-1001", "verifiers", answers=["x"], oracle=[True], final=True)
    text = bq.markdown({"smol": bq.summarise([row])}, args)
    assert text.startswith("## Does refinement help? IFEval on local models")
    assert "of IFEval's 475 offline-verifiable prompts (`benchmarks/ifeval/cases.jsonl`)" in text
    ifbench = bq.parse_args([])
    ifbench.available, ifbench.threads = 269, 1
    text = bq.markdown({"smol": bq.summarise([row])}, ifbench)
    assert text.startswith("## Does refinement help? IFBench on local models")
    assert (
        "IFBench's 269 offline-verifiable test prompts (`benchmarks/ifbench/cases.jsonl`)" in text
    )


def test_judge_kappa_summary_counts_and_bounds_its_interval() -> None:
    from benchmarks import bench_judge_kappa as bk

    rows = [
        bk.Judged("j", f"c{i}", "m", 1, oracle=i % 3 == 0, judged=i % 2 == 0, judge_tokens=10,
                  seconds=1.0)
        for i in range(30)
    ]  # fmt: skip
    summary = bk.summary(rows)
    assert summary["tp"] + summary["fp"] + summary["fn"] + summary["tn"] == 30
    assert summary["tp"] == sum(1 for r in rows if r.oracle and r.judged)
    lo, hi = summary["kappa_ci95"]
    assert -1.0 <= lo <= hi <= 1.0
    perfect = [bk.Judged("j", f"c{i}", "m", 1, i % 2 == 0, i % 2 == 0, 0, 0.0) for i in range(20)]
    assert bk.summary(perfect)["kappa"] == 1.0


def test_offline_default_table_pairs_models_on_shared_prompts_and_counts_echoes_failed() -> None:
    from benchmarks import bench_offline_default as bd

    def rows(finals: list[bool], seconds: float, echo_at: int | None = None) -> dict[str, bq.Row]:
        made = {}
        for i, final in enumerate(finals):
            row = bq.Row(f"c{i}", "verifiers", oracle=[False, final], final=final, seconds=seconds)
            row.returned_echo = i == echo_at
            made[row.case] = row
        return made

    quality = {
        "small": rows([True, False, False, False], 1.0),
        # c0 passes only by echoing the feedback; c4 is on no other model's list
        "big": {**rows([True, True, True, False], 9.0, echo_at=0), "c4": bq.Row("c4", "verifiers")},
    }
    timing = {"small": rows([False], 2.0), "big": rows([False], 6.0)}
    text = bd.table(quality, timing, default="small")
    small, big = (line for line in text.splitlines() if line.startswith(("| small", "| big")))
    assert text.startswith("4 prompts every model was run on")
    # big: 2 of 4 answered (the echo fails), +25 pp over small's 1 of 4, per prompt -1, +1, +1, 0
    assert "| 50.0% |" in big
    assert "+25.0 pp (" in big
    assert small.split("|")[7].strip() == f"{0.25 * 60 / 2.0:.2f}"  # passes per minute
    assert big.split("|")[7].strip() == f"{0.5 * 60 / 6.0:.2f}"
    assert big.split("|")[8].strip() == "12"  # seconds per passing answer: 6 / 0.5
    assert big.split("|")[9].strip() == "9.0"  # the published run's seconds beside
    with pytest.raises(SystemExit, match="--default nobody has no --quality rows"):
        bd.table(quality, timing, default="nobody")
