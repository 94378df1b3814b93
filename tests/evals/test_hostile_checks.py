"""Hostile answers and schemas against the evals' checks (issue 29: RT-2, RT-3, RT-6, RT-7, RT-15).

Before: `^(a+)+$` against `"a" * 40 + "!"` froze `evaluate` on the event loop (no timeout,
no cancellation, no Ctrl-C); a schema `$ref` was fetched from the network or read from the disk;
`equals` held `false` equal to `0`; `is-json` took `NaN`; `{"$ref": "#"}` loaded and then failed
every case with a `RecursionError` after its model calls. Now each check of an answer is bounded
in time, no reference is fetched, equality is JSON's, JSON is strict, and a schema that loops
is refused when the file loads.
"""

from __future__ import annotations

import json
import os
import signal
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from evals_support import one_case, write_cases

from jevrefine import ChatClient, evals
from jevrefine.evals import CaseFileError, load_cases
from jevrefine.evals._asserts import check_code, score_answer
from jevrefine.evals._bounded import CheckWorker, CheckWorkerError
from jevrefine.evals._cases import Assertion
from jevrefine.messages import Prompt
from jevrefine.testing import FakeOpenAIServer, FunctionModel

EVIL = "^(a+)+$"
"""Backtracks for 2^n steps on n a's that end in something else."""
EVIL_ANSWER = "a" * 40 + "!"
SECRET = "sk-test-hostile-evals-0123456789"


def by_input(answers: dict[str, str]) -> FunctionModel:
    """A model that answers each case's input from `answers` (its last user message)."""

    def answer(prompt: Prompt) -> str:
        text = getattr(prompt.messages[-1], "text", "")
        return next((a for q, a in answers.items() if text.startswith(q)), "ok")

    return FunctionModel(answer)


def backtracking_cases(tmp_path: Path) -> list[evals.Case]:
    pattern_schema = {"type": "object", "properties": {"name": {"pattern": EVIL}}}
    keys_schema = {"patternProperties": {EVIL: {}}, "additionalProperties": False}
    pattern, keys = (
        [{"type": "is-json", "value": pattern_schema}],
        [{"type": "contains-json", "value": keys_schema}],
    )
    return load_cases(
        write_cases(
            tmp_path / "cases.jsonl",
            [
                {"id": "regex", "input": "r", "assert": [{"type": "regex", "value": EVIL}]},
                {"id": "not-regex", "input": "r", "assert": [{"type": "not-regex", "value": EVIL}]},
                {"id": "pattern", "input": "p", "assert": pattern},
                {"id": "keys", "input": "k", "assert": keys},
                {"id": "fine", "input": "f", "assert": [{"type": "contains", "value": "ok"}]},
            ],
        )
    )  # fmt: skip


def backtracking_model() -> FunctionModel:
    return by_input(
        {
            "r": EVIL_ANSWER,
            "p": json.dumps({"name": EVIL_ANSWER}),
            "k": json.dumps({EVIL_ANSWER: 1}),
        }
    )


async def test_a_backtracking_check_is_a_failed_assertion_and_the_other_cases_go_on(
    tmp_path: Path,
) -> None:
    cases = backtracking_cases(tmp_path)
    client = ChatClient(backtracking_model())
    with anyio.fail_after(90):  # before: never returned (the loop itself was stuck in re)
        report = await evals.evaluate(
            cases, client, judge="asserts", max_repeat_attempts=1, check_timeout=0.5
        )
    rows = {row["id"]: row for row in report.to_dict()["results"]}
    assert all(row["error"] is None for row in rows.values())
    assert rows["fine"]["passed_final"] is True
    for name, what in [
        ("regex", "The regular expression"),
        ("not-regex", "The regular expression"),  # no verdict is no pass, not- or not
        ("pattern", "Checking the JSON schema"),
        ("keys", "Checking the JSON schema"),
    ]:
        row = rows[name]
        assert row["passed_final"] is False, name
        first = row["attempts"][0]
        assert first["failed_assertions"] == [0]
        assert first["feedback"] == f"- {what} took longer than 0.5 s on this answer."


async def test_cancellation_ends_a_backtracking_check_at_once(tmp_path: Path) -> None:
    cases = backtracking_cases(tmp_path)[:1]
    with anyio.move_on_after(1) as scope:  # before: the loop never got back to the deadline
        await evals.evaluate(cases, ChatClient(backtracking_model()), check_timeout=3600)
    assert scope.cancelled_caught
    # The killed worker left nothing behind: a fresh one answers at once.
    async with CheckWorker(timeout=30) as worker:
        assert await worker.search("a+", "baa") == "aa"


async def test_ctrl_c_stops_an_eval_stuck_in_a_backtracking_check(tmp_path: Path) -> None:
    cases = write_cases(
        tmp_path / "cases.jsonl",
        [
            {"id": "first", "input": "one", "assert": [{"type": "contains", "value": "one"}]},
            # The answer is "Echo: aaa…!": unanchored, the search backtracks from each "a".
            {"id": "evil", "input": EVIL_ANSWER, "assert": [{"type": "regex", "value": "(a+)+$"}]},
        ],
    )
    out = tmp_path / "rows.jsonl"
    # FakeOpenAIServer answers "Echo: <input>": the evil case's answer backtracks.
    async with FakeOpenAIServer() as model:
        command = [
            *(sys.executable, "-m", "jevrefine", "eval", str(cases), "--provider", "openai"),
            *("--base-url", model.base_url, "--out", str(out), "--concurrency", "1"),
            *("--check-timeout", "3600", "--no-progress", "--judge", "none"),
        ]
        env = {**os.environ, "OPENAI_API_KEY": SECRET}
        with (tmp_path / "stderr.txt").open("wb") as err:
            process = await anyio.open_process(command, env=env, stdout=err, stderr=err)
            with anyio.fail_after(60):
                # Another process writes the file: polling is the only way to see it.
                while len(model.chat_requests) < 2 or not out.exists():  # noqa: ASYNC110
                    await anyio.sleep(0.05)
                await anyio.sleep(0.5)  # the evil answer is in its check now
            process.send_signal(signal.SIGINT)
            with anyio.fail_after(30):  # before: SIGINT never reached Python inside re.search
                await process.wait()
    stderr = (tmp_path / "stderr.txt").read_text()
    assert process.returncode == 130, stderr
    assert "Traceback" not in stderr
    assert [row["id"] for row in map(json.loads, out.read_text().split("\n")[:-1])] == ["first"]


def test_python_re_semantics_are_kept(tmp_path: Path) -> None:
    # The worker runs Python's own re: its syntax (lookbehind, named groups, inline flags).
    case = one_case(
        tmp_path,
        {"type": "regex", "value": r"(?i)(?<=id:)(?P<n>\d+)\b"},
        {"type": "not-regex", "value": r"(?s)a.b"},
    )

    async def check() -> list[bool]:
        async with CheckWorker() as worker:
            return [(await check_code(a, "ID:42 a\nc", worker)).passed for a in case.assertions]

    assert anyio.run(check) == [True, True]


# -- RT-3: no reference is ever fetched -----------------------------------------------------------


async def test_a_schema_ref_is_never_fetched_nor_read(tmp_path: Path) -> None:
    connections: list[int] = []

    async def never_answer(stream: anyio.abc.SocketStream) -> None:
        connections.append(1)
        await anyio.sleep_forever()

    secret = tmp_path / "secret.json"
    secret.write_text('{"type": "string", "description": "TOP-SECRET-VALUE"}')
    listener = await anyio.create_tcp_listener(local_host="127.0.0.1")
    port = listener.extra(anyio.abc.SocketAttribute.local_port)
    async with listener, anyio.create_task_group() as group:
        group.start_soon(listener.serve, never_answer)
        for ref in (f"http://127.0.0.1:{port}/schema.json", secret.as_uri(), "secret.json"):
            schema = {"type": "object", "properties": {"a": {"$ref": ref}}}
            path = write_cases(
                tmp_path / "c.jsonl",
                [{"id": "refs", "input": "q", "assert": [{"type": "is-json", "value": schema}]}],
            )
            with pytest.raises(CaseFileError) as caught:
                # Before: fetched on the loop (froze while the server kept silent) or read.
                await anyio.to_thread.run_sync(load_cases, path)
            error = caught.value
            assert (error.case_id, error.assertion) == ("refs", 0)
            assert f"$ref {ref!r} does not resolve inside the schema" in str(error)
            assert "TOP-SECRET-VALUE" not in str(error)
        # Even a schema that skipped load_cases is checked with no retrieval at all.
        schema = {"$ref": f"http://127.0.0.1:{port}/schema.json"}
        bypass = Assertion(0, "is-json", value=schema, schema=schema)
        with anyio.fail_after(30), pytest.raises(CheckWorkerError, match="Unresolvable"):
            await check_code(bypass, '{"a": 1}')
        group.cancel_scope.cancel()
    assert connections == []


def test_refs_inside_the_schema_and_to_the_metaschemas_still_work(tmp_path: Path) -> None:
    schema = {
        "$defs": {"name": {"type": "string", "minLength": 1}},
        "type": "object",
        "properties": {
            "name": {"$ref": "#/$defs/name"},
            "children": {"type": "array", "items": {"$ref": "#"}},  # recursion into the answer
            "schema": {"$ref": "https://json-schema.org/draft/2020-12/schema"},
        },
    }
    case = one_case(tmp_path, {"type": "is-json", "value": schema})
    good = json.dumps({"name": "a", "children": [{"name": "b"}], "schema": {"type": "string"}})
    bad = json.dumps({"name": "a", "children": [{"name": ""}]})

    async def check() -> list[bool]:
        async with CheckWorker() as worker:
            return [(await check_code(case.assertions[0], a, worker)).passed for a in (good, bad)]

    assert anyio.run(check) == [True, False]


# -- RT-15: a schema that loops in place is refused at load ---------------------------------------

LOOPING: list[Any] = [
    {"$ref": "#"},
    {"allOf": [{"$ref": "#"}]},
    {"anyOf": [{"type": "string"}, {"$ref": "#"}]},
    {"not": {"$ref": "#"}},
    {"if": {"$ref": "#"}},
    {"dependentSchemas": {"a": {"$ref": "#"}}},
    {"$defs": {"a": {"$ref": "#/$defs/b"}, "b": {"oneOf": [{"$ref": "#/$defs/a"}]}},
     "properties": {"x": {"$ref": "#/$defs/a"}}},
]  # fmt: skip


@pytest.mark.parametrize("schema", LOOPING, ids=lambda s: json.dumps(s)[:40])
def test_a_schema_that_refers_to_itself_without_end_fails_at_load(
    tmp_path: Path, schema: Any
) -> None:
    path = write_cases(
        tmp_path / "c.jsonl",
        [{"id": "loop", "input": "q", "assert": [{"type": "contains-json", "value": schema}]}],
    )
    with pytest.raises(CaseFileError, match="refers to itself without end") as caught:
        load_cases(path)  # before: loaded, then RecursionError in every case after its calls
    assert (caught.value.case_id, caught.value.assertion) == ("loop", 0)


@pytest.mark.parametrize(
    ("schema", "message"),
    [
        ({"$schema": "http://127.0.0.1:9/meta"}, "no JSON Schema dialect jsonschema knows"),
        ({"type": "string", "pattern": "("}, "the JSON schema is invalid"),
        ({"$ref": "#/$defs/missing"}, "does not resolve inside the schema"),
    ],
)
def test_other_schemas_that_cannot_check_fail_at_load(
    tmp_path: Path, schema: Any, message: str
) -> None:
    path = write_cases(
        tmp_path / "c.jsonl", [{"input": "q", "assert": [{"type": "is-json", "value": schema}]}]
    )
    with pytest.raises(CaseFileError, match=message):
        load_cases(path)


# -- RT-6: equals is JSON equality ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("expected", "answer", "equal"),
    [
        (False, "0", False),
        (True, "1", False),
        (0, "false", False),
        ({"ok": True}, '{"ok": 1}', False),
        ([1, True], "[1, 1]", False),
        (None, "0", False),
        ({"a": None}, '{"a": false}', False),
        ([1, 2], "[2, 1]", False),
        ({"a": 1}, '{"a": 1, "b": 2}', False),
        (1, "1.0", True),  # one JSON number: JSON.parse reads both alike
        ({"ok": True, "n": [1.5, None]}, '{"n": [1.5, null], "ok": true}', True),
    ],
)
async def test_equals_is_json_equality(
    tmp_path: Path, expected: Any, answer: str, equal: bool
) -> None:
    case = one_case(tmp_path, {"type": "equals", "value": expected})
    assert (await check_code(case.assertions[0], answer)).passed is equal  # before: True == 1


# -- RT-7: strict JSON ----------------------------------------------------------------------------


@pytest.mark.parametrize("answer", ["NaN", "Infinity", "-Infinity", "1e999", '{"x": NaN}'])
async def test_is_json_refuses_what_json_parse_refuses(tmp_path: Path, answer: str) -> None:
    case = one_case(
        tmp_path,
        {"type": "is-json"},
        {"type": "is-json", "value": {"type": ["number", "object"]}},
        {"type": "contains-json", "value": {"type": "array"}},
    )
    results = [
        await check_code(a, answer if a.index < 2 else f"[{answer}]") for a in case.assertions
    ]
    assert [r.passed for r in results] == [False, False, False]  # before: all three passed
    assert "The answer must be valid JSON; " in results[0].defect


def test_a_case_file_with_nan_or_infinity_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "c.jsonl"
    path.write_text('{"input": "q", "assert": [{"type": "equals", "value": NaN}]}\n')
    with pytest.raises(CaseFileError, match=r"c\.jsonl:1: not valid JSON \(NaN is not a JSON"):
        load_cases(path)


# -- issue 31 item 3: one surrounding code fence, on request --------------------------------------

FENCED = "```json\n" + json.dumps({"city": "Paris"}) + "\n```"


@pytest.mark.parametrize(
    ("answer", "allowed"),
    [
        (FENCED, True),
        ("  ```\n[1, 2]\n```\n", True),  # no language, whitespace around
        ('{"city": "Paris"}', True),  # no fence at all is still JSON
        (FENCED + "\n" + FENCED, False),  # two fences are not one
        ("Here it is:\n" + FENCED, False),  # prose around the fence
        ("```json\nNaN\n```", False),  # the body is held to strict JSON
    ],
)
async def test_is_json_accepts_one_surrounding_fence_when_asked(
    tmp_path: Path, answer: str, allowed: bool
) -> None:
    schema = {"type": ["object", "array"]}
    case = one_case(
        tmp_path,
        {"type": "is-json", "value": schema, "fence": "allow"},
        {"type": "is-json", "value": schema},
    )
    lenient, strict = [await check_code(a, answer) for a in case.assertions]
    assert lenient.passed is allowed
    assert strict.passed is (answer == '{"city": "Paris"}')  # the default stays strict


async def test_the_asserts_judge_uses_the_same_fence_check(tmp_path: Path) -> None:
    path = write_cases(
        tmp_path / "c.jsonl",
        [{"id": "j", "input": "q", "assert": [{"type": "is-json", "fence": "allow"}]}],
    )
    report = await evals.evaluate(load_cases(path), ChatClient(FunctionModel(lambda p: FENCED)))
    (row,) = report.to_dict()["results"]
    assert (row["passed_baseline"], len(row["attempts"])) == (True, 1)  # no retry asked for


@pytest.mark.parametrize(
    ("assertion", "message"),
    [
        ({"type": "contains-json", "fence": "allow"}, "contains-json finds the JSON inside"),
        ({"type": "contains", "value": "x", "fence": "allow"}, "fence applies to is-json only"),
        ({"type": "is-json", "fence": True}, 'fence must be "allow"'),
    ],
)
def test_a_misplaced_fence_option_is_a_case_file_error(
    tmp_path: Path, assertion: dict[str, Any], message: str
) -> None:
    with pytest.raises(CaseFileError, match=message):
        one_case(tmp_path, assertion)


async def test_score_answer_runs_its_checks_in_a_worker_of_its_own(tmp_path: Path) -> None:
    case = one_case(tmp_path, {"type": "regex", "value": r"\d+"})
    assert (await score_answer(case, "no digits", None)).failed == [0]


SLOW_CHECKS = """
import time

import anyio


def stuck(output, context):
    time.sleep(3600)


async def stuck_async(output, context):
    await anyio.sleep(3600)
"""


@pytest.mark.parametrize("name", ["stuck", "stuck_async"])
async def test_a_python_check_past_the_bound_fails_and_the_run_goes_on(
    tmp_path: Path, name: str
) -> None:
    (tmp_path / "slow_checks.py").write_text(SLOW_CHECKS)
    check = {"type": "python", "value": f"slow_checks.py:{name}"}
    path = write_cases(
        tmp_path / "c.jsonl",
        [
            {"id": "slow", "input": "q", "assert": [check]},
            {"id": "fine", "input": "f", "assert": [{"type": "contains", "value": "ok"}]},
        ],
    )  # fmt: skip
    with anyio.fail_after(60):  # before: a sync check that never returns froze the loop for good
        report = await evals.evaluate(
            load_cases(path), ChatClient(by_input({})), judge="none", check_timeout=0.5
        )
    slow, fine = report.to_dict()["results"]
    assert (slow["error"], slow["passed_final"], fine["passed_final"]) == (None, False, True)
    assert slow["attempts"][0]["failed_assertions"] == [0]
