"""A broken or hostile judge never approves: bodies that do not answer the questions asked.

Promises (issue 16, items 2, 3 and 12): every number in a Jev body is finite and in range, every
distribution sums to 1 within `PROBABILITY_TOLERANCE`, a label or level belongs to its question,
every question asked has one answer of its type and nothing else is answered; anything else is a
`JudgeResponseError` naming the field (never `OverflowError`, `ValueError` or a pass). It is not
transient, so `SelfRefineAdvisor` re-raises it under `FAIL_OPEN` too: never `outcome='passed'`.
The bodies come from a raw peer (`Infinity` and 310-digit numbers are not JSON Python writes).
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import warnings
from typing import Any

import anyio
import pytest
from _hostile_jev import HostileServer, response
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import jevrefine as jr
from jevrefine.advisors.self_refine import JudgeErrorPolicy, SelfRefineAdvisor
from jevrefine.jev import (
    Choice,
    JudgeClient,
    JudgeError,
    JudgeResponseError,
    Noul,
    RetryPolicy,
    Score,
    SystemOneResponse,
)
from jevrefine.jev.errors import api_error, message_of
from jevrefine.jev.responses import (
    PROBABILITY_TOLERANCE,
    UnknownAnswerWarning,
    check_answers,
    parse_models,
    parse_system_one,
)
from jevrefine.jev.retry import parse_retry_after
from jevrefine.judge import Judge, ModelJudgeClient, choice, noul, score
from jevrefine.messages import AssistantMessage, ChatResponse, Generation, Prompt, TokenLogprob
from jevrefine.testing import FunctionModel

EXAMPLES = int(os.environ.get("JEVREFINE_FUZZ_EXAMPLES", "100"))
FUZZ = settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])

TONE = Choice("What is the tone?", options=["polite", "rude"])
HELP = Score("How helpful?", levels=["poor", "fair", "good"])  # max level 2
QUESTIONS: dict[str, Any] = {"g": Noul("Grounded?"), "t": TONE, "h": HELP}
GOOD = {
    "g": '{"type":"noul","noul":0.9}',
    "t": '{"type":"choice","choice":"polite","probabilities":{"polite":0.9,"rude":0.1}}',
    "h": '{"type":"score","score":2.0,"legend":{"0":"poor","1":"fair","2":"good"},'
    '"probabilities":{"0":0.0,"1":0.0,"2":1.0}}',
}
HUGE = "9" * 310


def _body(**answers: str | None) -> bytes:
    merged = {**GOOD, **answers}
    parts = ",".join(f'"{k}":{v}' for k, v in merged.items() if v is not None)
    return ('{"model":"jev-1","answers":{' + parts + '},"usage":{"input_tokens":1}}').encode()


def _score(score: str, probabilities: str = '{"0":0.0,"1":0.0,"2":1.0}') -> str:
    return f'{{"type":"score","score":{score},"legend":{{}},"probabilities":{probabilities}}}'


def _choice(label: str, probabilities: str) -> str:
    return f'{{"type":"choice","choice":"{label}","probabilities":{probabilities}}}'


BROKEN: dict[str, tuple[bytes, str]] = {
    "noul Infinity": (_body(g='{"type":"noul","noul":Infinity}'), "answers.g.noul"),
    "noul NaN": (_body(g='{"type":"noul","noul":NaN}'), "answers.g.noul"),
    "noul 1e999": (_body(g='{"type":"noul","noul":1e999}'), "answers.g.noul"),
    "noul 7.5": (_body(g='{"type":"noul","noul":7.5}'), "answers.g.noul"),
    "noul negative": (_body(g='{"type":"noul","noul":-0.1}'), "answers.g.noul"),
    "noul true": (_body(g='{"type":"noul","noul":true}'), "answers.g.noul"),
    "noul string": (_body(g='{"type":"noul","noul":"0.9"}'), "answers.g.noul"),
    "noul 310 digits": (_body(g=f'{{"type":"noul","noul":{HUGE}}}'), "answers.g.noul"),
    "choice Infinity": (
        _body(t=_choice("polite", '{"polite":Infinity,"rude":0}')),
        "answers.t.probabilities.polite",
    ),
    "choice sums to 2": (
        _body(t=_choice("polite", '{"polite":1.0,"rude":1.0}')),
        "answers.t.probabilities",
    ),
    "choice not an option": (
        _body(t=_choice("cheerful", '{"polite":0.5,"rude":0.5}')),
        "answers.t.choice",
    ),
    "choice unknown label": (
        _body(t=_choice("polite", '{"polite":0.5,"cheerful":0.5}')),
        "answers.t.probabilities",
    ),
    "choice confidence 2": (
        _body(t='{"type":"choice","choice":"polite","probabilities":{"polite":1},"confidence":2}'),
        "answers.t.confidence",
    ),
    "score 99 of 2": (_body(h=_score("99")), "answers.h.score"),
    "score negative": (_body(h=_score("-1")), "answers.h.score"),
    "score 310 digits": (_body(h=_score(HUGE)), "answers.h.score"),
    "score level 7": (_body(h=_score("2", '{"7":1.0}')), "answers.h.probabilities"),
    "score level +1": (_body(h=_score("1", '{"+1":1.0}')), "answers.h.probabilities.+1"),
    "score sums to 0.5": (_body(h=_score("1", '{"1":0.5}')), "answers.h.probabilities"),
    "score no probabilities": (_body(h=_score("2", "{}")), "answers.h.probabilities"),
    "empty answers": (b'{"model":"jev-1","answers":{}}', "answers"),
    "missing id": (_body(h=None), "answers.h"),
    "extra id": (_body(x='{"type":"noul","noul":1.0}'), "answers.x"),
    "wrong type": (_body(g=_choice("polite", '{"polite":1.0}')), "answers.g.type"),
    "unknown type for a noul": (_body(g='{"type":"box","x":1}'), "answers.g"),
    "usage negative": (
        b'{"model":"m","answers":{},"usage":{"input_tokens":-1}}',
        "usage.input_tokens",
    ),
    "usage huge": (
        b'{"model":"m","answers":{},"usage":{"input_tokens":' + HUGE.encode() + b"}}",
        "usage.input_tokens",
    ),
    "4301-digit number": (b'{"model":"m","answers":{"g":' + b"9" * 4301 + b"}}", ""),
}


def _client(server: HostileServer, **kwargs: Any) -> JudgeClient:
    return JudgeClient(
        "k", base_url=server.base_url, retry=RetryPolicy(max_retries=2, initial_backoff=0), **kwargs
    )


@pytest.mark.parametrize("case", list(BROKEN))
async def test_a_body_that_is_no_answer_is_a_response_error_naming_the_field(case: str) -> None:
    """Promise: each broken body is one `JudgeResponseError` (never retried) naming the field."""
    body, field = BROKEN[case]
    async with HostileServer(response(body)) as server, _client(server) as client:
        with warnings.catch_warnings(), anyio.fail_after(5):
            warnings.simplefilter("ignore", UnknownAnswerWarning)
            with pytest.raises(JudgeResponseError) as caught:
                await client.system_one("s", QUESTIONS)
    assert caught.value.field_path == field
    if field:
        assert repr(field) in str(caught.value)
    assert not caught.value.is_transient
    assert len(server.requests) == 1


@pytest.mark.parametrize("case", ["noul 7.5", "choice sums to 2", "score 99 of 2", "missing id"])
@pytest.mark.parametrize("policy", list(JudgeErrorPolicy))
@pytest.mark.parametrize("fail_on_exhausted", [False, True])
async def test_a_broken_judge_never_passes_an_answer(
    case: str, policy: JudgeErrorPolicy, fail_on_exhausted: bool
) -> None:
    """Promise: through `SelfRefineAdvisor`, under either policy, a broken judge raises: the
    answer is never returned as passed (these once gave `outcome='passed'` at a 0.7 gate)."""
    body, _ = BROKEN[case]
    model = FunctionModel(lambda prompt: "An answer.")
    async with HostileServer(response(body)) as server, _client(server) as jev:
        judge = Judge(
            jev,
            [noul("g", QUESTIONS["g"], 0.7), choice("t", TONE, ["polite"]), score("h", HELP, 2)],
        )
        refine = SelfRefineAdvisor(
            judge, judge_error_policy=policy, fail_on_exhausted_attempts=fail_on_exhausted
        )
        chat = jr.ChatClient(model, advisors=[refine])
        with anyio.fail_after(5), pytest.raises(JudgeResponseError):
            await chat.prompt("Question?").call()


async def test_any_system_one_client_is_held_to_the_same_bar() -> None:
    """Promise: `Judge` checks the answers of any `SystemOneClient`, not only `JudgeClient`'s."""

    class Lenient:
        async def system_one(self, state: Any, questions: Any, **_: Any) -> SystemOneResponse:
            from jevrefine.jev import ScoreAnswer

            return SystemOneResponse("m", {"h": ScoreAnswer(99.0, {}, {2: 1.0})})

    judge = Judge(Lenient(), [score("h", HELP, minimum=1)])  # type: ignore[arg-type]
    from jevrefine.judge import JudgeInput

    with pytest.raises(JudgeResponseError, match=r"answers\.h\.score"):
        await judge.evaluate(JudgeInput("q", "a"))


def test_error_findings_count_as_failures_and_fail_on_error_is_deprecated() -> None:
    """Promise: an ERROR finding is never a pass; `fail_on_error`, which could never take
    effect (nothing produces ERROR: a missing answer raises), warns and changes nothing."""
    from jevrefine.judge import Outcome

    class Any1:
        async def system_one(self, *a: Any, **k: Any) -> SystemOneResponse:  # pragma: no cover
            raise AssertionError

    judge = Judge(Any1(), [noul("g", QUESTIONS["g"])])  # type: ignore[arg-type]
    assert judge._counts_as_failed(Outcome.ERROR)
    with pytest.warns(DeprecationWarning, match="fail_on_error=.* has no effect"):
        lenient = Judge(Any1(), [noul("g", QUESTIONS["g"])], fail_on_error=False)  # type: ignore[arg-type]
    assert lenient._counts_as_failed(Outcome.ERROR)


# -- ModelJudgeClient: the chat model's text and logprobs are hostile too ---------------------


def _logprob_model(logprob: float) -> FunctionModel:
    def answer(prompt: Prompt) -> ChatResponse:
        text = '{"answer": "yes"}'
        top = ((' "yes', logprob), (' "no', -1.0))
        logprobs = (TokenLogprob('{"answer":', -0.01), TokenLogprob(' "yes', logprob, top))
        return ChatResponse((Generation(AssistantMessage(text), {"logprobs": logprobs}),))

    return FunctionModel(answer)


@pytest.mark.parametrize("logprob", [math.inf, math.nan, 800.0, 1e308])
async def test_model_judge_survives_hostile_logprobs(logprob: float) -> None:
    """Promise: NaN, infinite or impossible (> 0) log probabilities never overflow or leak a
    NaN into a verdict: the answer is a valid noul in [0, 1]."""
    client = ModelJudgeClient(_logprob_model(logprob))
    answer = (await client.system_one("s", {"g": Noul("q?")})).noul("g")
    assert 0.0 <= answer.noul <= 1.0


# -- errors and Retry-After: huge numbers stay typed --------------------------------------------


@pytest.mark.parametrize(
    "body",
    [
        b'{"detail": 1e999}',
        b'{"error": {"message": ' + HUGE.encode() + b"}}",
        b'{"detail": [{"loc": [' + HUGE.encode() + b'], "msg": NaN}]}',
        b'{"detail": ' + b"9" * 4301 + b"}",
        b"[" * 5000 + b"]" * 5000,
    ],
)
async def test_error_bodies_with_huge_numbers_stay_typed(body: bytes) -> None:
    raw = response(body, status=b"400 Bad Request")
    async with HostileServer(raw) as server, _client(server) as client:
        with anyio.fail_after(5), pytest.raises(JudgeError) as caught:
            await client.system_one("s", QUESTIONS)
    assert caught.value.is_transient is False
    assert len(str(caught.value)) < 2000


@pytest.mark.parametrize(
    "retry_after", [b"1e300", b"9" * 5000, b"inf", b"Fri, 31 Dec 9999 23:59:59 GMT"]
)
async def test_an_absurd_retry_after_is_not_waited_for(retry_after: bytes) -> None:
    """Promise: a server asking for more than `max_retry_after` (60 s) gets its 429 raised at
    once; a value that is no number is ignored (the usual backoff). Never a hang or overflow."""
    raw = response(
        b"{}", status=b"429 Too Many Requests", headers=b"retry-after: " + retry_after + b"\r\n"
    )
    async with HostileServer(raw) as server, _client(server, total_timeout=None) as client:
        with anyio.fail_after(5), pytest.raises(JudgeError) as caught:
            await client.system_one("s", QUESTIONS)
    assert caught.value.is_transient
    assert len(server.requests) in (1, 3)  # raised at once, or retried on the usual backoff


# -- fuzz over bodies --------------------------------------------------------------------------

_json = st.recursive(
    st.none()
    | st.booleans()
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.integers(min_value=-(10**400), max_value=10**400)
    | st.text(max_size=10)
    | st.sampled_from(["noul", "choice", "score", "polite", "rude", "0", "1", "2", "g", "t", "h"]),
    lambda children: (
        st.lists(children, max_size=4)
        | st.dictionaries(
            st.sampled_from(
                [
                    "type",
                    "noul",
                    "choice",
                    "score",
                    "probabilities",
                    "legend",
                    "confidence",
                    "g",
                    "t",
                    "h",
                    "0",
                    "1",
                    "2",
                    "polite",
                    "rude",
                    "x",
                ]
            ),
            children,
            max_size=5,
        )
    ),
    max_leaves=25,
)
_answers = st.dictionaries(st.sampled_from(["g", "t", "h", "x"]), _json, max_size=4)
_bodies = st.one_of(
    _json,
    st.fixed_dictionaries(
        {"model": st.one_of(st.text(max_size=5), _json), "answers": _answers},
        optional={
            "usage": st.one_of(
                _json, st.dictionaries(st.sampled_from(["input_tokens", "output_tokens"]), _json)
            )
        },
    ),
)


@pytest.mark.slow
@FUZZ
@given(data=_bodies)
def test_fuzz_system_one_bodies_give_a_valid_answer_or_a_response_error(data: Any) -> None:
    """Promise: any decoded body parses and checks, or is a `JudgeResponseError`; what passes
    holds only finite, in-range numbers."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UnknownAnswerWarning)
        try:
            parsed = parse_system_one(data, "rid")
            check_answers(parsed, QUESTIONS, body=data)
        except JudgeResponseError as error:
            str(error)  # renders
            return
    noul_value = parsed.noul("g").noul
    assert 0.0 <= noul_value <= 1.0
    for answer in (parsed.choice("t"), parsed.score("h")):
        assert abs(math.fsum(answer.probabilities.values()) - 1.0) <= PROBABILITY_TOLERANCE
    assert 0.0 <= parsed.score("h").score <= 2.0 + 2 * PROBABILITY_TOLERANCE
    assert parsed.choice("t").choice in ("polite", "rude")


@pytest.mark.slow
@FUZZ
@given(data=_json)
def test_fuzz_models_and_error_bodies_stay_typed(data: Any) -> None:
    """Promise: `/v1/models` bodies parse or raise `JudgeResponseError`; an error body always
    renders into a bounded message."""
    with contextlib.suppress(JudgeResponseError):
        parse_models(data)
    assert len(message_of(data)) <= 500
    for status in (400, 422, 429, 503):
        assert str(api_error(status, data, request_id="r"))


@FUZZ
@given(value=st.one_of(st.text(max_size=30), st.integers().map(str), st.floats().map(repr)))
def test_fuzz_retry_after_is_a_finite_wait_or_nothing(value: str) -> None:
    for name in ("retry-after", "retry-after-ms"):
        wait = parse_retry_after({name: value})
        assert wait is None or (math.isfinite(wait) and wait >= 0)


def test_the_tolerance_is_documented() -> None:
    assert PROBABILITY_TOLERANCE == 1e-3
    body = json.loads(_body(t=_choice("polite", '{"polite":0.9995,"rude":0.0}')))
    check_answers(parse_system_one(body), QUESTIONS)  # within 1e-3: accepted
