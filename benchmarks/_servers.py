"""Fake servers in their own process, and a counting fake OpenAI server for the loop benchmark.

The servers run in a child process so that the CPU this process measures is the client's alone
(in one process the server's CPU would dilute every ratio, and share the client's GIL).

`python -m benchmarks._servers --latency S` serves a `CountingOpenAIServer` and prints its base
URL; it answers `GET /v1/stats` with the chat calls and prompt tokens (words) it has served, and
`POST /v1/stats/reset` zeroes them. Its replies are the fake's echo, except for DSPy's
`ChatAdapter` prompts, which get the `[[ ## field ## ]]` sections DSPy parses.
"""

from __future__ import annotations

import contextlib
import re
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

from jevrefine.testing import FakeOpenAIServer
from jevrefine.testing._http import HTTPRequest, HTTPResponse, serve_until_stdin_closes
from jevrefine.testing._openai_server import OpenAIReply


@contextlib.contextmanager
def serving_process(module: str, *args: str) -> Iterator[tuple[int, str]]:
    """Run `python -m module *args` (a fake server that prints its URL); yield (pid, URL).

    The pid lets a benchmark count the server's CPU time too.
    """
    process = subprocess.Popen(
        [sys.executable, "-m", module, *args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert process.stdin is not None
    assert process.stdout is not None
    try:
        url = process.stdout.readline().strip()
        if not url.startswith("http"):
            raise SystemExit(f"{module} did not start (printed {url!r})")
        yield process.pid, url
    finally:
        process.stdin.close()  # the fakes serve until stdin closes
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()


@contextlib.contextmanager
def serving(module: str, *args: str) -> Iterator[str]:
    """Run `python -m module *args` (a fake server that prints its URL); yield the URL."""
    with serving_process(module, *args) as (_, url):
        yield url


_OUTPUT_FIELDS = re.compile(r"Your output fields are:\n(.*?)\n\n", re.S)
_FIELD = re.compile(r"^\d+\. `(\w+)`", re.M)


def _words(body: dict[str, Any]) -> int:
    total = 0
    for message in body.get("messages") or ():
        content = message.get("content")
        if isinstance(content, list):
            content = " ".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
        total += len(str(content or "").split())
    return total


class CountingOpenAIServer(FakeOpenAIServer):
    """The fake OpenAI server, counting calls and prompt words, and speaking DSPy's format."""

    def __init__(self, *, latency: float = 0.0) -> None:
        super().__init__(latency=latency)
        self.calls = 0
        self.prompt_words = 0

    async def handle(self, request: HTTPRequest) -> Any:
        if request.path == "/v1/stats":
            if request.method == "POST":
                self.calls = self.prompt_words = 0
                self.requests.clear()  # keep the recorded requests from growing without bound
            return HTTPResponse.json({"calls": self.calls, "prompt_words": self.prompt_words})
        return await super().handle(request)

    def default_reply(self, body: dict[str, Any]) -> Any:
        self.calls += 1
        self.prompt_words += _words(body)
        messages = body.get("messages") or []
        system = messages[0].get("content") if messages else None
        if isinstance(system, str) and "[[ ## completed ## ]]" in system:
            return self._dspy_reply(system, body)
        return super().default_reply(body)

    def _dspy_reply(self, system: str, body: dict[str, Any]) -> Any:
        fields = _OUTPUT_FIELDS.search(system)
        names = _FIELD.findall(fields.group(1)) if fields else ["answer"]
        parts = []
        for name in names:
            # Refine's OfferFeedback asks for `advice: dict[str, str]`, one entry per module.
            # Not the echo: DSPy's prompt holds `[[ ## x ## ]]` markers that confuse its parser.
            value = '{"self": "Acknowledge the review."}' if name == "advice" else "An answer."
            parts.append(f"[[ ## {name} ## ]]\n{value}\n")
        parts.append("[[ ## completed ## ]]")
        return OpenAIReply(content="\n".join(parts))


def main(argv: list[str] | None = None) -> None:
    import argparse

    parser = argparse.ArgumentParser(description="Serve a CountingOpenAIServer on 127.0.0.1.")
    parser.add_argument("--latency", type=float, default=0.0, help="seconds per response")
    args = parser.parse_args(argv)
    serve_until_stdin_closes(CountingOpenAIServer(latency=args.latency))


if __name__ == "__main__":
    main()
