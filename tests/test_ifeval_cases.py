"""The IFEval case file: the pinned source, a conversion that reproduces the committed file, the
left-out prompts and why, and IFEval's verifiers on hand-written answers that pass and fail (the
verifiers' set-up: tests/verifier_support.py).
"""

from __future__ import annotations

import hashlib
import json
import random
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from benchmarks.ifeval import convert, verify
from benchmarks.verifiable.verifiers import VerifierUnavailableError

from jevrefine.evals import load_cases
from verifier_support import DUMMY, evaluate_answers, resolve, skip_without

CASE_FILE = convert.CASE_FILE
VERIFIERS = verify.VERIFIERS
ROOT = Path(__file__).parent.parent
SOURCE_SHA256 = "67ffeee0fcb87c317c5b08a2de85557b4a7e96ada6178aa645b4954fe4b53d49"
"""The sha256 benchmarks/ifeval/README.md gives for `data/input_data.jsonl`."""

needs_verifiers = skip_without(VERIFIERS)


def _case(case_id: str) -> dict[str, Any]:
    [case] = [c for c in CASE_FILE.load() if c["id"] == case_id]
    return case


def _context(case_id: str) -> dict[str, Any]:
    return {"metadata": _case(case_id)["metadata"]}


def test_the_source_is_the_file_the_readme_pins() -> None:
    digest = hashlib.sha256(CASE_FILE.source.read_bytes()).hexdigest()
    assert digest == SOURCE_SHA256
    assert SOURCE_SHA256 in (ROOT / "benchmarks" / "ifeval" / "README.md").read_text()
    assert (CASE_FILE.source.parent / "LICENSE").read_text().lstrip().startswith("Apache License")


def test_case_file_is_the_conversion_of_the_source() -> None:
    cases, left_out = CASE_FILE.convert(CASE_FILE.read_source())
    again, _ = CASE_FILE.convert(CASE_FILE.read_source())
    assert cases == again  # deterministic: nothing in the conversion draws or runs a verifier
    assert CASE_FILE.load() == json.loads(json.dumps(cases))
    assert (len(cases), left_out) == (475, 66)
    assert sum(len(c["assert"]) for c in cases) == 706


def test_the_converter_writes_the_committed_file_byte_for_byte(tmp_path: Path) -> None:
    out = tmp_path / "cases.jsonl"
    assert CASE_FILE.main(["--out", str(out)]) == 0
    assert out.read_bytes() == CASE_FILE.path.read_bytes()


def test_left_out_prompts_are_those_needing_nltk_data_or_checking_a_random_letter() -> None:
    rows = list(CASE_FILE.read_source())
    assert len(rows) == 541
    kept = {c["metadata"]["key"] for c in CASE_FILE.load()}
    random_letter = set()
    for row in rows:
        ids, kwargs = row["instruction_id_list"], row["kwargs"]
        needs_data = bool(verify.NLTK_DATA_TYPES.intersection(ids))
        draws = any(verify.draws_random_letter(i, k) for i, k in zip(ids, kwargs, strict=True))
        assert (str(row["key"]) not in kept) == (needs_data or draws)
        if draws and not needs_data:
            random_letter.add(row["key"])
    assert random_letter == {1122, 1129}  # `#` and `!` (README)


def test_draws_random_letter_accepts_letters_only() -> None:
    letter = "keywords:letter_frequency"
    assert not verify.draws_random_letter(letter, {"letter": "t"})
    assert not verify.draws_random_letter(letter, {"letter": "Q"})
    for odd in ("#", "!", "", "ab", "é", None):
        assert verify.draws_random_letter(letter, {"letter": odd})
    assert not verify.draws_random_letter("keywords:frequency", {"letter": "#"})


def test_cases_follow_the_case_format_and_load_as_jevrefine_cases() -> None:
    for case in CASE_FILE.load():
        ids = case["metadata"]["instruction_id_list"]
        assert [a["value"] for a in case["assert"]] == [
            f"benchmarks.ifeval.verify:check_{i}" for i in range(len(ids))
        ]
        assert all(a["type"] == "python" for a in case["assert"])
        assert len(case["metadata"]["kwargs"]) == len(ids) <= verify.MAX_INSTRUCTIONS
        assert case["id"] == f"ifeval-{case['metadata']['key']}"
    loaded = load_cases(CASE_FILE.path)
    assert [c.id for c in loaded] == [c["id"] for c in CASE_FILE.load()]


@needs_verifiers
def test_every_assertion_imports_and_runs_on_a_dummy_answer() -> None:
    ran = 0
    for case in CASE_FILE.load():
        context = {"metadata": case["metadata"], "vars": {}}
        parts = [resolve(a["value"])(DUMMY, context) for a in case["assert"]]
        assert all(isinstance(p, bool) for p in parts)
        assert verify.check(DUMMY, context) == all(parts)
        ran += len(parts)
    assert ran == 706


@needs_verifiers
@pytest.mark.parametrize(
    ("case_id", "passing", "failing"),
    [
        ("ifeval-1001", "Good morrow sweet traveller.", "Good morrow, sweet traveller."),
        (
            "ifeval-1019",
            "can two young boys with toy guns and horns play outside today?",
            "Can two young boys with toy guns and horns play outside today?",
        ),
        (
            "ifeval-1075",
            '```json\n{"product": "diaper", "comfort": "soft"}\n```',
            'Here it is: {"product": "diaper"}',
        ),
        (
            "ifeval-1128",
            "The sentiment is negative. Is there anything else I can help with?",
            "Is there anything else I can help with? The sentiment is negative.",
        ),
        ("ifeval-1072", "hammock " * 400, "hammock " * 399),
        (
            "ifeval-1108",
            "ಹ್ಯಾಂಬರ್ಗರ್ ಒಂದು ಸ್ಯಾಂಡ್‌ವಿಚ್ ಅಲ್ಲ. ಅದು ಬೇರೆ ರೀತಿಯ ಆಹಾರ ಎಂದು ಹಲವರು ಹೇಳುತ್ತಾರೆ.",
            "A hamburger is not a sandwich, many people say it is a different kind of food.",
        ),
    ],
)
def test_verifiers_discriminate(case_id: str, passing: str, failing: str) -> None:
    context = _context(case_id)
    assert verify.check_0(passing, context) is True
    assert verify.check_0(failing, context) is False
    assert verify.check_0("   ", context) is False  # strict: an empty answer follows nothing


@needs_verifiers
def test_each_instruction_of_a_case_is_its_own_assertion() -> None:
    # No commas, 3 highlighted sections, at least 300 words.
    context = _context("ifeval-1000")
    short = "Raymond III was Count of Tripoli. *Early life* *Regency* *Hattin*"
    assert [verify.check_0(short, context), verify.check_1(short, context)] == [True, True]
    assert verify.check_2(short, context) is False
    assert verify.check(short, context) is False
    assert verify.check(short + " word" * 300, context) is True
    assert verify.check(short.replace("Raymond", "Raymond,") + " word" * 300, context) is False
    with pytest.raises(IndexError, match="only 1 instruction"):
        verify.check_1(DUMMY, _context("ifeval-1001"))


@needs_verifiers
def test_repeat_the_request_then_answer() -> None:
    context = _context("ifeval-1012")  # repeat the request, then an email with a <<title>>
    request = context["metadata"]["kwargs"][0]["prompt_to_repeat"]
    answer = request + "\n\n<<Resignation>>\nDear boss, I am quitting."
    assert verify.check(answer, context) is True
    assert verify.check_0("<<Resignation>>\nDear boss, I am quitting.", context) is False
    assert verify.check_1("Dear boss, I am quitting.", context) is False
    # IFEval's quirk, kept: the repeated request holds "<<title>>", which is a title.
    assert verify.check_1(request + "\nDear boss, I am quitting.", context) is True


@needs_verifiers
def test_a_language_verdict_is_the_same_every_time() -> None:
    # langdetect, unseeded, calls "si si" Finnish or Italian at random (about 60 / 40 here).
    verdicts = {
        VERIFIERS.verify_instruction("si si", "language:response_language", {"language": "fi"})
        for _ in range(40)
    }
    assert len(verdicts) == 1


@needs_verifiers
def test_an_unknown_instruction_is_named() -> None:
    with pytest.raises(KeyError, match="IFEval has no instruction 'count:numbers'"):
        VERIFIERS.verify_instruction(DUMMY, "count:numbers", {})


@needs_verifiers
def test_the_nltk_data_types_are_the_verifiers_that_need_punkt() -> None:
    import nltk

    try:
        nltk.data.find("tokenizers/punkt")
    except LookupError:
        pass
    else:  # pragma: no cover - a machine with NLTK's data downloaded
        pytest.skip("NLTK's punkt data is installed here: every IFEval verifier runs")
    failing: dict[str, str] = {}
    for row in CASE_FILE.read_source():
        for iid, kwargs in zip(row["instruction_id_list"], row["kwargs"], strict=True):
            try:
                VERIFIERS.verify_instruction(DUMMY, iid, kwargs, row["prompt"])
            except VerifierUnavailableError as exc:
                failing[iid] = str(exc)
    assert set(failing) == verify.NLTK_DATA_TYPES
    assert all("needs NLTK data files" in message for message in failing.values())


@needs_verifiers
def test_the_random_letter_rule_is_what_the_verifier_does() -> None:
    # Built under two seeds, an instruction whose verifier takes its arguments as given states
    # the same constraint twice; one that draws a replacement states two.
    registry = VERIFIERS.registry()
    state = random.getstate()
    try:
        for row in CASE_FILE.read_source():
            for iid, kwargs in zip(row["instruction_id_list"], row["kwargs"], strict=True):
                descriptions = set()
                for seed in (1, 2):
                    random.seed(seed)
                    descriptions.add(registry[iid](iid).build_description(**kwargs))
                assert (len(descriptions) > 1) == verify.draws_random_letter(iid, kwargs), row
    finally:
        random.setstate(state)


@needs_verifiers
@pytest.mark.parametrize("order", [("ifbench", "ifeval"), ("ifeval", "ifbench")])
def test_both_benchmarks_verifiers_load_in_one_process(order: tuple[str, str]) -> None:
    # Each imports its registry under one empty `if_verifiable` parent: the second must find the
    # first's parent in place (importlib.util.find_spec raises on a parent without a spec).
    script = (
        "import importlib, sys\n"
        f"for name in {order!r}:\n"
        "    verify = importlib.import_module(f'benchmarks.{name}.verify')\n"
        "    assert len(verify.VERIFIERS.registry()) > 20, name\n"
        "assert 'datasets' not in sys.modules\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr


@needs_verifiers
async def test_jevrefine_evaluates_the_case_file() -> None:
    short = "Raymond III was Count of Tripoli. *Early life* *Regency* *Hattin*"
    answers = {
        "ifeval-1000": short + " word" * 300,  # three instructions, all followed
        "ifeval-1001": "Good morrow, traveller.",  # a comma
        "ifeval-1128": "Negative. Is there anything else I can help with?",
    }
    passed = await evaluate_answers(CASE_FILE.path, answers)
    assert passed == {"ifeval-1000": True, "ifeval-1001": False, "ifeval-1128": True}
