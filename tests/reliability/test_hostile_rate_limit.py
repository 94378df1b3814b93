"""A model server that lies about its usage, against a rate-limited batch (issue 29, RT-1).

The peer is raw asyncio on 127.0.0.1 (`_hostile_model_peer`): well-formed OpenAI chat
completions whose `usage` says what no honest server does (10^12 tokens for a one-word answer,
a count far above the call's `max_tokens`, negative, fractional, NaN, a string). Driven through
the real `OpenAIChatModel`, `refine_many(..., model_limit=...)` and `jevrefine run --model-tpm`.
Every batch runs inside `anyio.fail_after`, so the code before the fix (which charged 10^12
tokens to the bucket and then slept some 10^9 s for the next call) fails here instead of
hanging. Promise: no reported figure can stop a batch; each implausible one is logged once per
server at WARNING, naming the model and `scheme://host:port` (never a password in the base URL).
"""

from __future__ import annotations

import copy
import json
import logging
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from _hostile_model_peer import Answer, HostilePeer, body, raw

import jevrefine as jr
from jevrefine.exceptions import ModelError
from jevrefine.models.openai import OpenAIChatModel
from jevrefine.rate_limit import RateLimit, RateLimiter

MODEL = "liar"
TPM = 60_000
"""One full bucket is 1,000 tokens (a second's worth): a lie may cost one second, not 10^9."""
BOUND = 30.0
"""Far above what these batches need (a few seconds), far below what the old code slept."""
PASSWORD = "S3CRET-in-the-url"
LIMITER_LOG = "jevrefine.rate_limit"


def completion(usage: Any) -> dict[str, Any]:
    """An OpenAI chat completion answering "ok", with `usage` as given."""
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 1,
        "model": MODEL,
        "choices": [
            {"index": 0, "message": {"role": "assistant", "content": "ok"}, "finish_reason": "stop"}
        ],
        "usage": usage,
    }


TRILLION = {"prompt_tokens": 10**12 - 1, "completion_tokens": 1, "total_tokens": 10**12}
"""The largest count the adapters accept (`MAX_TOKEN_COUNT`), reported for a one-word call."""


def liar(usage: Any = TRILLION) -> Answer:
    return body(completion(usage))


def limiter_warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [
        r.getMessage()
        for r in caplog.records
        if r.name == LIMITER_LOG and r.levelno == logging.WARNING
    ]


async def _batch(peer: HostilePeer, limiter: RateLimiter, n: int, **options: Any) -> list[Any]:
    base_url = peer.url.replace("http://", f"http://alice:{PASSWORD}@") + "/v1"
    async with OpenAIChatModel(MODEL, base_url=base_url, api_key="sk-hostile-test") as model:
        client = jr.ChatClient(model, options=jr.ChatOptions(**options) if options else None)
        with anyio.fail_after(BOUND):
            return await jr.refine_many(
                client, [f"q{i}" for i in range(n)], concurrency=1, model_limit=limiter
            )


async def test_a_trillion_token_usage_figure_does_not_stop_the_batch(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The issue's repro through the real adapter: before the fix the 2nd call slept ~10^9 s."""
    limiter = RateLimiter(RateLimit(tokens_per_minute=TPM))
    async with HostilePeer() as peer:
        peer.script(liar())
        results = await _batch(peer, limiter, 4)
        port = peer.url.rsplit(":", 1)[1]
    assert [r.error for r in results if not r.ok] == []
    assert len(peer.requests) == 4
    assert limiter.implausible_usage == 4
    warnings = limiter_warnings(caplog)
    assert len(warnings) == 1, warnings  # once per server, not once per call
    (warning,) = warnings
    assert f"the openai model '{MODEL}' at http://127.0.0.1:{port}" in warning
    assert "1,000,000,000,000 tokens" in warning
    assert "tokens_per_minute=60,000" in warning
    assert "charges at most 1,000 beyond its estimate" in warning
    assert PASSWORD not in caplog.text
    assert "alice" not in caplog.text


async def test_a_figure_far_above_max_tokens_and_the_prompt_is_called_implausible(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Below `tokens_per_minute`, but no honest server counts 500,000 tokens for a two-character
    prompt whose answer may be at most 16 tokens."""
    usage = {"prompt_tokens": 499_990, "completion_tokens": 10, "total_tokens": 500_000}
    limiter = RateLimiter(RateLimit(tokens_per_minute=6_000_000))
    async with HostilePeer() as peer:
        peer.script(liar(usage))
        results = await _batch(peer, limiter, 2, max_tokens=16)
    assert all(r.ok for r in results)
    (warning,) = limiter_warnings(caplog)
    assert "500,000 tokens, far above what the call could use" in warning
    assert "its prompt and max_tokens" in warning


async def test_an_honest_figure_is_believed_and_not_logged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The control: an answer larger than its estimate (no max_tokens) is no lie."""
    usage = {"prompt_tokens": 5, "completion_tokens": 700, "total_tokens": 705}
    limiter = RateLimiter(RateLimit(tokens_per_minute=TPM))
    async with HostilePeer() as peer:
        peer.script(liar(usage))
        results = await _batch(peer, limiter, 2)
    assert all(r.ok for r in results)
    assert limiter.implausible_usage == 0
    assert limiter_warnings(caplog) == []


HOSTILE_BYTES = {
    "negative": b'"total_tokens": -1000000000000',
    "fractional": b'"total_tokens": 1e12',
    "nan": b'"total_tokens": NaN',
    "string": b'"total_tokens": "1000000000000"',
    "digits past the int limit": b'"total_tokens": ' + b"9" * 4301,
}


def _with_total(total: bytes) -> Answer:
    """A completion whose counts are all lies: `prompt_tokens` and `total_tokens` as given."""
    usage = {"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4}
    encoded = json.dumps(completion(usage)).encode()
    value = total.split(b": ", 1)[1]
    encoded = encoded.replace(b'"total_tokens": 4', total)
    return raw(encoded.replace(b'"prompt_tokens": 3', b'"prompt_tokens": ' + value))


@pytest.mark.parametrize("total", HOSTILE_BYTES.values(), ids=HOSTILE_BYTES.keys())
async def test_other_hostile_usage_values_end_the_batch_without_a_hang(total: bytes) -> None:
    """The adapter refuses a count that is no count (a typed `ModelError`); either way the
    batch ends, each call with its own result."""
    limiter = RateLimiter(RateLimit(tokens_per_minute=TPM))
    async with HostilePeer() as peer:
        peer.script(_with_total(total))
        results = await _batch(peer, limiter, 3)
    assert len(results) == 3
    for result in results:
        assert result.ok or isinstance(result.error, ModelError), result.error


def _inputs(tmp_path: Path, n: int) -> Path:
    source = tmp_path / "in.jsonl"
    source.write_text("".join(json.dumps(f"question {i}") + "\n" for i in range(n)))
    return source


@pytest.mark.slow
async def test_jevrefine_run_with_model_tpm_finishes_against_the_liar(tmp_path: Path) -> None:
    """The issue's CLI repro: `jevrefine run --model-tpm 60000` wrote 4 rows and hung. Run as a
    process, so that a hang is killed at the bound rather than left behind in a thread."""
    source, output = _inputs(tmp_path, 6), tmp_path / "out.jsonl"
    env = {"OPENAI_API_KEY": "sk-hostile-test", "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}
    async with HostilePeer() as peer:
        peer.script(liar(copy.deepcopy(TRILLION)))
        with anyio.fail_after(BOUND + 30):  # the interpreter's start-up on a loaded machine
            done = await anyio.run_process(
                [sys.executable, "-m", "jevrefine", "run", str(source), "-o", str(output),
                 "--provider", "openai", "--model", MODEL, "--base-url", peer.url + "/v1",
                 "--judge", "none", "--no-progress", "--concurrency", "2",
                 "--model-tpm", str(TPM)],
                env=env,
                check=False,
            )  # fmt: skip
    stderr = done.stderr.decode()
    assert done.returncode == 0, stderr
    rows = [json.loads(line) for line in output.read_text().splitlines()]
    assert [row["error"] for row in rows] == [None] * 6
    assert stderr.count("reported usage of 1,000,000,000,000 tokens") == 1, stderr
