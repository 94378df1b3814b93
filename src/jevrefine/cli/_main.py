"""The argument parser and the `demo` command; `main` dispatches.

`jevrefine run` refines the prompts of a JSONL file, `jevrefine judge` judges question/answer
pairs and `jevrefine check-config` validates the settings (exit codes: `jevrefine.cli._run`).
`jevrefine eval` scores a refine setup on a case file (`jevrefine.cli._eval`).

`jevrefine demo` sends a prompt through a `ChatClient` with a `SelfRefineAdvisor` and shows the
refine loop as it runs (each attempt streamed as it is written, its verdict, the outcome), then
asks for a typed answer with structured output, refined with the validation error. It runs on
OpenAI when `OPENAI_API_KEY` is set, on Anthropic when `ANTHROPIC_API_KEY` is set, and otherwise
offline on the local model `OFFLINE_MODEL` (Qwen2.5-Coder-0.5B-Instruct, a 469 MiB download on
first use), judged by `OFFLINE_JUDGE_MODEL` (Qwen2.5-Coder-1.5B-Instruct, 1,066 MiB) on a server
of its own. `jevrefine demo --trace` then prints the OpenTelemetry span tree of the run (needs
`opentelemetry-sdk`).

A mistyped flag is reported by the command it was given to, with the closest flag it has ("did
you mean --concurrency?"); a mistyped command or choice likewise.
"""

from __future__ import annotations

import argparse
import contextlib
import difflib
import importlib.util
import re
import sys
from typing import TYPE_CHECKING, NoReturn, TextIO

import anyio
import pydantic

from .._version import __version__
from ..exceptions import JevrefineError
from ._compare import add_compare_command, compare_command
from ._eval import add_eval_command, eval_command
from ._providers import (
    LOCAL_JUDGE_MODEL_ENV,
    LOCAL_MODEL_ENV,
    OFFLINE_JUDGE_MODEL,
    OFFLINE_MODEL,
    Provider,
    add_provider_flags,
    local_model_title,
    open_chat_model,
    resolve_provider,
)
from ._run import add_commands as add_batch_commands
from ._run import run_command as run_batch_command

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Sequence

    from ..models.base import ChatModel

__all__ = ["main"]

DEFAULT_PROMPT = "Why is the sky blue?"
# No length rule in the system message: the demo's judge holds the word limit, so a first draft
# that runs long is what the loop visibly fixes.
DEMO_SYSTEM = "You are a helpful assistant."


class CityFacts(pydantic.BaseModel):
    """The typed answer the demo asks for."""

    city: str
    country: str
    # Bounded: SmolLM2 once answered 1111111111111111.0 million; a value no city has fails the
    # type, and the refine loop sends the validation error back.
    population_millions: float = pydantic.Field(
        gt=0, lt=100, description="the number of inhabitants, in millions"
    )


choose_provider = resolve_provider
"""The provider to use: the one requested, else the first whose API key is set, else local."""


def demo_description() -> str:
    """`demo --help`'s description: which models it runs on, named from the constants."""
    return (
        "Refine one judged answer, streaming each attempt as it is written, then ask for a typed "
        "answer refined with its validation error. On OpenAI when OPENAI_API_KEY is set, on "
        "Anthropic when ANTHROPIC_API_KEY is set, else offline: the answers come from "
        f"{local_model_title(OFFLINE_MODEL)} and the judge is "
        f"{local_model_title(OFFLINE_JUDGE_MODEL)} on a server of its own, both fetched on "
        f"first use into the model cache (--model, {LOCAL_MODEL_ENV} and "
        f"{LOCAL_JUDGE_MODEL_ENV} choose others)."
    )


@contextlib.asynccontextmanager
async def open_model(provider: Provider, model: str | None) -> AsyncIterator[tuple[ChatModel, str]]:
    """Open the demo's model; yields it with a one-line description of where it runs.

    Offline it is `OFFLINE_MODEL` unless `model` or `JEVREFINE_LOCAL_MODEL` names another.
    """
    async with contextlib.AsyncExitStack() as stack:
        yield await open_chat_model(stack, provider, model)


async def run_demo(
    prompt: str, provider: Provider, model: str | None, trace_run: bool = False
) -> None:
    """Refine one answer (attempts, verdicts, final answer), then ask for a typed one.

    With `trace_run`, every span of the run is kept in memory and printed as a tree at the end.
    """
    out = sys.stdout
    if not trace_run:
        await _demo_steps(out, prompt, provider, model)
        return
    from .. import telemetry
    from ._trace_tree import collect_spans, format_span_tree

    tracer_provider, exporter = collect_spans()
    # configure() reaches every client the demo builds: ChatClients, the judge, the guardrail.
    saved = telemetry.configure(tracer_provider=tracer_provider)
    try:
        await _demo_steps(out, prompt, provider, model)
    finally:
        telemetry.restore(saved)
        tracer_provider.shutdown()
        out.write("\nThe trace of the run (one tree per ChatClient call):\n\n")
        out.write(format_span_tree(exporter.get_finished_spans()))


async def _demo_steps(out: TextIO, prompt: str, provider: Provider, model: str | None) -> None:
    from ._demo import open_judge_client, refine_demo, typed_demo

    async with open_model(provider, model) as (chat_model, where):
        out.write(f"jevrefine {__version__} demo: {where}\n")
        async with open_judge_client(chat_model) as judging:
            out.write(f"  judge: {judging.description}\n")
            out.write(judging.calibration_note)
            out.write(f"\n> {prompt}  (self-refined)\n")
            await refine_demo(out, chat_model, prompt, DEMO_SYSTEM, judging)
        question = "Give the facts about Paris: its country and population in millions."
        out.write(f"> {question}  (as a typed CityFacts, self-refined)\n")
        await typed_demo(out, chat_model, DEMO_SYSTEM, question, CityFacts)


DESCRIPTION = (
    "Judged, self-refining LLM answers from the command line: every answer is judged against "
    "criteria, and one that falls short is retried with the judge's feedback. Runs on OpenAI "
    "or Anthropic when their API key is set, else offline on a local model."
)
"""What `jevrefine --help` says the command is (a user's words, not the module's docstring)."""

_INVALID_CHOICE = re.compile(r"invalid choice: '(?P<given>[^']*)' \(choose from (?P<options>.*)\)")


class _Parser(argparse.ArgumentParser):
    """An `ArgumentParser` that suggests the closest valid choice of a mistyped one."""

    def error(self, message: str) -> NoReturn:
        """Report `message` with this (sub)command's usage; exit 2."""
        match = _INVALID_CHOICE.search(message)
        if match is not None:
            options = re.findall(r"'([^']*)'", match["options"])
            close = difflib.get_close_matches(match["given"], options, n=1)
            if close:
                message += f"; did you mean {close[0]!r}?"
        super().error(message)


def _command_parsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def _unrecognized(parser: argparse.ArgumentParser, extras: Sequence[str]) -> str:
    """Why `extras` were not understood, with the closest flag `parser` has for each option."""
    flags = [flag for flag in parser._option_string_actions if flag.startswith("--")]
    options = [extra for extra in extras if extra.startswith("-") and extra != "-"]
    if not options:
        # Only stray arguments: the options were fine, so name what was left over.
        return f"unexpected argument(s): {' '.join(extras)}"
    problems = []
    for option in options:
        name = option.split("=", 1)[0]
        close = difflib.get_close_matches(name, flags, n=1)
        hint = f" (did you mean {close[0]}?)" if close else ""
        problems.append(f"unrecognized option {name}{hint}")
    return "; ".join(problems)


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """Parse the command line; a mistyped flag is reported by its subcommand, with a suggestion.

    `jevrefine run --concurency 4 prompts.jsonl` says `jevrefine run: error: unrecognized option
    --concurency (did you mean --concurrency?)` under `run`'s usage (exit 2), rather than the
    top-level usage and "unrecognized arguments" for the input file too.
    """
    parser = build_parser()
    args, extras = parser.parse_known_args(argv)
    if extras:
        command = _command_parsers(parser).get(getattr(args, "command", None) or "", parser)
        command.error(_unrecognized(command, extras))
    return args


def build_parser() -> argparse.ArgumentParser:
    """The command-line parser."""
    parser = _Parser(prog="jevrefine", description=DESCRIPTION)
    parser.add_argument("--version", action="version", version=f"jevrefine {__version__}")
    commands = parser.add_subparsers(dest="command", required=True)
    demo = commands.add_parser(
        "demo",
        help="refine a judged answer, then ask for a typed one",
        description=demo_description(),
    )
    demo.add_argument("prompt", nargs="?", default=DEFAULT_PROMPT, help="what to ask")
    add_provider_flags(
        demo,
        default="auto",
        provider_help="auto: OpenAI or Anthropic when their API key is set, else the local model",
        model_help="model name (or, for local, a GGUF file path)",
    )
    demo.add_argument(
        "--trace",
        action="store_true",
        help="print the run's OpenTelemetry span tree (needs opentelemetry-sdk)",
    )
    add_batch_commands(commands)
    add_eval_command(commands)
    add_compare_command(commands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit status."""
    args = parse_args(argv)
    if args.command == "demo":
        if args.trace and importlib.util.find_spec("opentelemetry.sdk") is None:
            print(
                "jevrefine demo --trace needs the OpenTelemetry SDK: pip install opentelemetry-sdk",
                file=sys.stderr,
            )
            return 2
        try:
            anyio.run(run_demo, args.prompt, choose_provider(args.provider), args.model, args.trace)
        except JevrefineError as exc:
            print(f"jevrefine demo failed: {exc}", file=sys.stderr)
            return 1
        except KeyboardInterrupt:
            return 130
        return 0
    if args.command == "eval":
        return eval_command(args)
    if args.command == "compare":
        return compare_command(args)
    return run_batch_command(args)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
