"""`jevrefine run`, `jevrefine judge` and `jevrefine check-config`.

Exit codes (also in the docs' CLI page):

- 0: every input line was processed (or already in the output) without an error;
- 1: some items failed (their `error` is set in the output) or some input lines were bad
  (reported with their line number on stderr, and skipped);
- 2: a usage or configuration error (bad flag, bad config file, unreadable input, a missing API
  key): nothing ran;
- 3: the run stopped before every line was processed, by an error outside any one item (a
  model server that could not start, an output that cannot be written, a bug in jevrefine);
  every line written so far is complete, so the same command resumes;
- 130: interrupted (Ctrl-C); every line written so far is complete, so the same command
  resumes.

Resuming (the default when the output file exists): an item whose row has no `error` is kept
and skipped; an item whose row records an error runs again, and its old row is removed from
the output first (the file is rewritten beside itself and renamed over, so it always holds one
row per id). An answer the judge did not pass (`outcome` `best_attempt`) is a result, not an
error: it is kept. `--restart` runs everything again.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
import traceback
from collections.abc import AsyncGenerator, Callable
from contextlib import aclosing
from dataclasses import dataclass, replace
from typing import IO, TYPE_CHECKING, Any

import anyio

from .._fanout import BatchResult, iter_all
from ..batch import BatchLimits, RefineSummary, refine_iter
from ..client import ChatClient
from ..exceptions import JevrefineError, UserError
from ..judge.calibration import CALIBRATION_PAIRS
from ..messages import ChatOptions
from ..rate_limit import RateLimit, RateLimiter
from ._calibration import wants_calibration
from ._config import CliConfig, ConfigError, Models, load_config, missing_key, open_models
from ._io import (
    BadLine,
    Record,
    check_paths,
    compact_output,
    count_lines,
    done_ids,
    json_line,
    open_output,
    output_rows,
    read_records,
    retried_ids,
)
from ._progress import AttemptCounter, Bar, Tally, console
from ._providers import add_provider_flags
from ._setup import run_setup

if TYPE_CHECKING:
    from ..client import PromptSpec
    from ..judge._judge import Judge
    from ..judge.calibration import Calibration

__all__ = ["add_commands", "run_command"]

EXIT_OK = 0
EXIT_FAILURES = 1
EXIT_USAGE = 2
EXIT_CRASHED = 3
EXIT_INTERRUPTED = 130


def add_commands(commands: Any) -> None:
    """Add `run`, `judge` and `check-config` to the `jevrefine` sub-command parsers."""
    run = commands.add_parser("run", help="refine every prompt of a JSONL file, write JSONL")
    _io_flags(run, "prompts")
    _model_flags(run)
    _judge_flags(run)
    run.add_argument(
        "--max-repeat-attempts", type=int, help="retries after the first answer (default 2)"
    )
    run.add_argument(
        "--token-budget", type=int, help="stop retrying once model and judge used this many tokens"
    )
    run.add_argument("--report", metavar="FILE.html", help="also write an HTML page of the output")
    judge = commands.add_parser(
        "judge", help="judge question/answer pairs from a JSONL file, write verdicts"
    )
    _io_flags(judge, "question/answer pairs")
    _model_flags(judge)
    _judge_flags(judge)
    judge.add_argument(
        "--calibrate",
        action="store_true",
        help="measure the judge on 12 built-in known right and wrong answers, print how many "
        "it told apart, and exit (0: it discriminates, 1: near chance); reads no input",
    )
    check = commands.add_parser(
        "check-config", help="validate the settings and the API keys they need, print them"
    )
    check.add_argument("--config", help="a jevrefine.toml file (flags override it)")
    _model_flags(check)
    _judge_flags(check)


def _io_flags(parser: argparse.ArgumentParser, what: str) -> None:
    parser.add_argument("input", nargs="?", help=f"JSONL file of {what} ('-' or none: stdin)")
    parser.add_argument("-o", "--output", help="JSONL output ('-' or none: stdout)")
    parser.add_argument("--config", help="a jevrefine.toml file (flags override it)")
    parser.add_argument(
        "--concurrency",
        type=int,
        help="items in flight at once (default 16; on the local model 2, one server slot each)",
    )
    parser.add_argument("--id-field", help="the input's id field (default: id; else line number)")
    parser.add_argument(
        "--restart",
        action="store_true",
        help="overwrite the output instead of resuming it (resuming re-runs errored items)",
    )
    parser.add_argument(
        "--ordered",
        action="store_true",
        help="write results in input order (held back until the earlier ones are done)",
    )
    parser.add_argument(
        "--no-progress", action="store_true", help="no progress bar or summary table"
    )
    limit_flags(parser)


def limit_flags(parser: argparse.ArgumentParser) -> None:
    """`--model-rpm`, `--model-tpm`, `--judge-rpm`, `--judge-tpm`: the providers' limits."""
    for who in ("model", "judge"):
        parser.add_argument(
            f"--{who}-rpm",
            type=_per_minute,
            help=f"the {who} provider's requests per minute, for the whole batch (a 429 pauses "
            "every call, then the rate ramps back)",
        )
        parser.add_argument(
            f"--{who}-tpm", type=_per_minute, help=f"the {who} provider's tokens per minute"
        )


def _per_minute(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not value > 0 or math.isinf(value):
        raise argparse.ArgumentTypeError(f"{text!r} is not a positive number per minute")
    return value


def batch_limits(args: argparse.Namespace) -> BatchLimits:
    """The limits the flags ask for (`--model-rpm`, `--judge-tpm`, ...), one limiter each.

    Put around the batch's model and judge (`BatchLimits.on_client`, `on_judge`), they are
    shared by every call of the run.
    """
    limiters: list[RateLimiter | None] = []
    for who in ("model", "judge"):
        rpm, tpm = getattr(args, f"{who}_rpm", None), getattr(args, f"{who}_tpm", None)
        if rpm is None and tpm is None:
            limiters.append(None)
            continue
        try:
            limit = RateLimit(requests_per_minute=rpm, tokens_per_minute=tpm)
        except UserError as exc:
            raise ConfigError(f"--{who}-rpm/--{who}-tpm: {exc}") from None
        limiters.append(RateLimiter(limit, name=who))
    return BatchLimits(model=limiters[0], judge=limiters[1])


def _model_flags(parser: argparse.ArgumentParser) -> None:
    add_provider_flags(
        parser,
        provider_help="auto (default): OpenAI or Anthropic when their API key is set, else the "
        "local model",
        model_help="model name (for local, a GGUF path)",
    )
    parser.add_argument("--base-url", help="an OpenAI- or Anthropic-compatible server")
    parser.add_argument("--system", help="system message for every prompt")
    parser.add_argument("--temperature", type=float, help="sampling temperature, 0 to 2")
    parser.add_argument(
        "--max-tokens",
        type=int,
        help="the longest answer, in tokens (default: the provider's; 256 on the local model)",
    )


def _judge_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--judge",
        choices=["auto", "reference", "rating", "jev", "model", "none"],
        help="the judge's kind (default auto: reference on a local judge model, else rating)",
    )
    add_provider_flags(
        parser,
        prefix="judge-",
        provider_help="the judging model's provider (default: the answering model's; offline, "
        "the local judge model on its own server)",
        model_help="the judge's model",
    )
    parser.add_argument("--judge-base-url", help="the judge's server")
    parser.add_argument("--success-rating", type=int, help="least passing rating, 1-4")


def config_of(args: argparse.Namespace) -> CliConfig:
    """The settings: `--config` file, overridden by the flags given."""
    flags = vars(args)
    return load_config(
        flags.get("config"),
        {
            "model": {
                "provider": flags.get("provider"),
                "name": flags.get("model"),
                "base_url": flags.get("base_url"),
                "system": flags.get("system"),
                "temperature": flags.get("temperature"),
                "max_tokens": flags.get("max_tokens"),
            },
            "judge": {
                "kind": flags.get("judge"),
                "provider": flags.get("judge_provider"),
                "name": flags.get("judge_model"),
                "base_url": flags.get("judge_base_url"),
                "success_rating": flags.get("success_rating"),
            },
            "refine": {
                "max_repeat_attempts": flags.get("max_repeat_attempts"),
                "token_budget": flags.get("token_budget"),
            },
            "run": {"concurrency": flags.get("concurrency"), "id_field": flags.get("id_field")},
        },
    )


def run_command(args: argparse.Namespace) -> int:
    """Run `run`, `judge` or `check-config`; returns the exit status."""
    batch: _Batch | None = None
    try:
        config = config_of(args)
        if args.command == "check-config":
            print(json.dumps(config.describe(), indent=2))
            problem = missing_key(config)
            if problem is not None:
                # The settings are printed, but `run` would stop on this: say so, exit apart.
                print(f"jevrefine check-config: {problem}", file=sys.stderr)
                return EXIT_USAGE
            return EXIT_OK
        problem = missing_key(config)
        if problem is not None:
            raise ConfigError(problem)  # said in flags and variables, before any model starts
        if args.input not in (None, "-"):
            with open(args.input, "rb"):
                pass  # unreadable input is a usage error, found before any model starts
        # Appending results to the file being read would feed them back in as input; a report
        # over the input, the config or the output (a symlink or hard link included) would
        # destroy it. All refused here, before any model starts.
        check_paths(
            {"the input": args.input, "--config": getattr(args, "config", None)},
            {"the output": args.output},
        )
        report = getattr(args, "report", None)
        check_paths(
            {
                "the input": args.input,
                "--config": getattr(args, "config", None),
                "the output": args.output,
            },
            {"--report": report},
        )
        batch = _Batch(args, config)
        return anyio.run(batch.run)
    except UserError as exc:  # ConfigError included: a setting, a flag, a missing key
        print(f"jevrefine {args.command}: {exc}", file=sys.stderr)
        return EXIT_CRASHED if batch is not None and batch.started else EXIT_USAGE
    except OSError as exc:
        print(f"jevrefine {args.command}: {exc.strerror or exc}: {exc.filename}", file=sys.stderr)
        # Before the first item an unreadable file is a usage error; after it, a stopped run.
        return EXIT_CRASHED if batch is not None and batch.started else EXIT_USAGE
    except JevrefineError as exc:
        print(f"jevrefine {args.command} stopped: {exc}; {_RESUME}", file=sys.stderr)
        return EXIT_CRASHED
    except KeyboardInterrupt:
        print(f"jevrefine {args.command}: interrupted; run it again to resume", file=sys.stderr)
        return EXIT_INTERRUPTED
    except Exception as exc:  # a bug: say so, keep the traceback for the report, exit apart
        traceback.print_exc(file=sys.stderr)
        print(
            f"jevrefine {args.command} crashed ({type(exc).__name__}); this is a bug in "
            f"jevrefine, please report it with the traceback above; {_RESUME}",
            file=sys.stderr,
        )
        return EXIT_CRASHED


_RESUME = "every line written so far is complete: run the same command again to resume"


@dataclass
class _Stats(Tally):
    resumed: int = 0
    retried: int = 0
    bad: int = 0
    in_flight: int = 0
    answers: int = 0
    """Model answers asked for so far (every attempt of every item), finished or not."""

    def fields(self) -> dict[str, str]:
        activity = f"{self.in_flight} in flight, {self.answers} answers asked"
        return {**super().fields(), "activity": activity}


class _Batch:
    """One `run` or `judge` invocation: input, output, progress and the summary."""

    def __init__(self, args: argparse.Namespace, config: CliConfig) -> None:
        self.args = args
        self.config = config
        self.judging = args.command == "judge"
        self.stats = _Stats()
        self.console = console(enabled=not args.no_progress)
        self._bar: Bar | None = None
        self.started = False
        """Whether the models are open and items may have run."""
        # --report reads the output file back at the end (resumed rows too); stdout is kept here.
        self.report: str | None = getattr(args, "report", None)
        self.report_rows: list[dict[str, Any]] | None = (
            [] if self.report and args.output in (None, "-") else None
        )

    def bar(self, total: int | None) -> Bar:
        """The progress bar, created on first use."""
        if self._bar is None:
            self._bar = Bar(self.console, total)
        return self._bar

    async def run(self) -> int:
        args, config = self.args, self.config
        if self.judging and config.judge.kind == "none":
            raise ConfigError("judge needs a judge: set --judge or [judge] kind")
        if getattr(args, "calibrate", False):
            return await self._calibrate_only()
        # These read whole files: on a worker thread, so a big file never blocks the loop.
        skip: set[str] = set()
        if not args.restart:
            skip = await anyio.to_thread.run_sync(done_ids, args.output, self._bad_row)
            # Errored items run again: their old rows go first, so each id keeps one row.
            retry = await anyio.to_thread.run_sync(retried_ids, args.output)
            self.stats.retried = await anyio.to_thread.run_sync(compact_output, args.output, retry)
        total = await anyio.to_thread.run_sync(count_lines, args.input)
        required = ("question", "answer") if self.judging else (config.run.prompt_field,)
        records = read_records(
            args.input,
            required=required,
            id_field=config.run.id_field,
            skip_ids=skip,
            on_bad=self._bad,
            on_skip=self._skipped,
            optional=("expected_output",) if self.judging else (),
        )
        out = open_output(args.output, append=not args.restart)
        try:
            opened = open_models(config, local_slots=config.concurrency(), judge_only=self.judging)
            async with opened as models:
                self.started = True
                if wants_calibration(models):
                    await self._show_calibration(models)
                limits = batch_limits(args)
                with self.bar(total):
                    if self.judging:
                        assert models.judge is not None
                        await self._judge_all(limits.on_judge(models.judge), records, out)
                    else:
                        client = limits.on_client(self._client(models.model, models.judge))
                        await self._refine_all(client, records, out)
                where = models.description
                self._summary(where)
                if self.report:
                    await anyio.to_thread.run_sync(self._write_report, self.report, where)
                    if self.console is not None:
                        self.console.print(f"report: {self.report}")
        finally:
            if out is not sys.stdout:
                out.close()
        return EXIT_FAILURES if self.stats.errors or self.stats.bad else EXIT_OK

    async def _show_calibration(self, models: Models, *, refresh: bool = False) -> Calibration:
        """Measure (or read from the cache) the judge's calibration; say it on stderr."""
        from ._calibration import calibration_line, is_cached, measure

        assert models.judge is not None
        if refresh or not is_cached(models.judge, models):
            print(
                f"judge: {models.judge_description}; checking it on {len(CALIBRATION_PAIRS)} "
                "known right and wrong answers (once per judge model, then cached)...",
                file=sys.stderr,
                flush=True,
            )
        calibration, cached = await measure(models.judge, models, refresh=refresh)
        print(calibration_line(calibration, models, cached=cached), file=sys.stderr, flush=True)
        return calibration

    async def _calibrate_only(self) -> int:
        """`judge --calibrate`: measure afresh, print, exit 1 when near chance."""
        config = self.config
        async with open_models(config, local_slots=config.concurrency(), judge_only=True) as models:
            self.started = True
            if models.judge is not None:  # its calls under the --judge-* limits, if any
                models = replace(models, judge=batch_limits(self.args).on_judge(models.judge))
            calibration = await self._show_calibration(models, refresh=True)
        return EXIT_FAILURES if calibration.near_chance else EXIT_OK

    def _client(self, model: Any, judge: Judge | None) -> ChatClient:
        section, refine = self.config.model, self.config.refine
        advisors: list[Any] = [AttemptCounter(self._answer_asked)]
        if judge is not None:
            from ..advisors.self_refine import SelfRefineAdvisor

            advisors.append(
                SelfRefineAdvisor(
                    judge,
                    max_repeat_attempts=refine.max_repeat_attempts,
                    fail_on_exhausted_attempts=refine.fail_on_exhausted_attempts,
                    token_budget=refine.token_budget,
                )
            )
        options = ChatOptions(temperature=section.temperature, max_tokens=self.config.max_tokens())
        return ChatClient(model, system=section.system, advisors=advisors, options=options)

    def _answer_asked(self) -> None:
        # Called as each attempt goes to the model: the bar moves long before an item ends.
        self.stats.answers += 1
        self.bar(None).show(self.stats.fields())

    async def _refine_all(
        self, client: ChatClient, records: AsyncGenerator[Record, None], out: IO[str]
    ) -> None:
        in_flight: dict[int, Record] = {}
        prompt_field = self.config.run.prompt_field
        numbered = _enumerate(records)

        async def specs() -> AsyncGenerator[PromptSpec, None]:
            # refine_iter numbers its inputs 0, 1, ...: remember each one's record until it ends.
            async for index, record in numbered:
                in_flight[index] = record
                self.stats.in_flight += 1
                yield client.prompt(record.fields[prompt_field])

        writer = _OrderedWriter(self._write, out) if self.args.ordered else None
        inputs = specs()
        stream = refine_iter(client, inputs, concurrency=self.config.concurrency())
        # Each generator is closed here, by the task that ran it, the consumer first and then
        # each one it read from. Left to the event loop's shutdown (on Ctrl-C), they were closed
        # all at once, one while another was closing it: "aclose(): asynchronous generator is
        # already running", with a long traceback before the friendly message.
        async with aclosing(records), aclosing(numbered), aclosing(inputs), aclosing(stream):
            async for result in stream:
                record = in_flight.pop(result.index)
                self.stats.in_flight -= 1
                summary = RefineSummary.of(result)
                row = {"id": record.id, "line": record.line, **summary.as_dict()}
                del row["index"]
                row.update(_why(summary.verdict))
                self.stats.tokens += summary.tokens
                ok, passed = summary.error is None, summary.passed
                if writer is None:
                    self._write(out, row, ok=ok, passed=passed)
                else:
                    writer.add(result.index, row, ok=ok, passed=passed)

    async def _judge_all(
        self, judge: Judge, records: AsyncGenerator[Record, None], out: IO[str]
    ) -> None:
        from ..judge._judge import JudgeInput

        async def evaluate(record: Record) -> tuple[Record, Any]:
            fields = record.fields
            judge_input = JudgeInput(
                fields["question"], fields["answer"], expected_output=fields.get("expected_output")
            )
            self.stats.in_flight += 1
            try:
                return record, await judge.evaluate(judge_input)
            except Exception as exc:
                raise _Tagged(record, exc) from exc
            finally:
                self.stats.in_flight -= 1

        writer = _OrderedWriter(self._write, out) if self.args.ordered else None
        results = iter_all(evaluate, records, concurrency=self.config.concurrency())
        async with aclosing(records), aclosing(results):
            async for result in results:
                row, ok = self._verdict_row(result)
                if writer is None:
                    self._write(out, row, ok=ok, passed=row["passed"])
                else:
                    writer.add(result.index, row, ok=ok, passed=row["passed"])

    def _verdict_row(self, result: BatchResult[Any]) -> tuple[dict[str, Any], bool]:
        # The record rides along in the value, or in the error that wraps the item's own.
        record, verdict, error = _untag(result)
        row: dict[str, Any] = {"id": record.id, "line": record.line}
        if error is not None:
            row.update(
                passed=None, summary=None, feedback=None, failed_criteria=None,
                error=_error_text(error),
            )  # fmt: skip
            return row, False
        usage = verdict.response.usage if verdict.response is not None else None
        row.update(
            passed=verdict.passed,
            summary=verdict.summary(),
            findings={f.criterion: f.outcome.name for f in verdict.findings},
            tokens=usage.total_tokens if usage is not None else 0,
            **_why(verdict),
            error=None,
        )
        self.stats.tokens += row["tokens"]
        return row, True

    def _write(self, out: IO[str], row: dict[str, Any], *, ok: bool, passed: bool | None) -> None:
        out.write(json_line(row) + "\n")  # valid UTF-8 whatever the strings hold
        out.flush()  # each line is complete on disk: an interrupted run resumes from here
        if self.report_rows is not None:
            self.report_rows.append(row)
        self.stats.count(ok=ok, passed=passed)
        self.bar(None).advance(self.stats.fields())

    def _write_report(self, path: str, where: str) -> None:
        from ..evals._html import write_run_html

        rows = self.report_rows
        if rows is None:

            def left_out(bad: BadLine) -> None:
                # A tampered or hand-edited row: said, and left out of the page (never a crash).
                print(
                    f"{self.args.output}:{bad.line}: not a result row ({bad.reason}); left out "
                    "of the report",
                    file=sys.stderr,
                )

            rows = output_rows(self.args.output, left_out)
        stats = self.stats
        name = os.path.basename(self.args.input) if self.args.input not in (None, "-") else "stdin"
        summary = run_setup(
            self.config,
            model=where,
            input=self.args.input or "-",
            resumed=stats.resumed,
            bad_lines=stats.bad,
            wall_time_s=round(time.perf_counter() - stats.started, 3),
        )
        with open(path, "w", encoding="utf-8") as file:
            write_run_html(rows, summary, file, title=f"jevrefine run: {name}")

    def _bad(self, bad: BadLine) -> None:
        self.stats.bad += 1
        # Always reported, progress bar or not: a skipped line must never go unnoticed.
        print(f"line {bad.line}: {bad.reason}; skipped", file=sys.stderr)
        self.bar(None).advance(self.stats.fields())

    def _bad_row(self, bad: BadLine) -> None:
        # A row cut short, hand-edited or tampered with: said; its item runs again.
        print(
            f"{self.args.output}:{bad.line}: not a result row ({bad.reason}); its item runs again",
            file=sys.stderr,
        )

    def _skipped(self, record: Record) -> None:
        self.stats.resumed += 1
        self.bar(None).advance(self.stats.fields())

    def _summary(self, where: str) -> None:
        stats = self.stats
        lines = {
            "model": where,
            "processed": f"{stats.done:,}",
            "passed": f"{stats.passed:,} of {stats.judged:,} judged" if stats.judged else "-",
            "errors": f"{stats.errors:,}",
            "already done (resumed)": f"{stats.resumed:,}",
            "run again (errored before)": f"{stats.retried:,}",
            "bad input lines": f"{stats.bad:,}",
            "tokens": f"{stats.tokens:,}",
            "wall time": f"{time.perf_counter() - stats.started:.1f} s",
            "rate": stats.fields()["rate"],
        }
        if self.console is None:
            return
        from rich.table import Table

        table = Table(title=f"jevrefine {self.args.command}", show_header=False)
        for name, value in lines.items():
            table.add_row(name, value)
        self.console.print(table)


async def _enumerate(
    records: AsyncGenerator[Record, None],
) -> AsyncGenerator[tuple[int, Record], None]:
    index = 0
    async for record in records:
        yield index, record
        index += 1


class _OrderedWriter:
    """Holds results back until every earlier input's result is written (`--ordered`).

    Indexes are 0, 1, ... without gaps, so at most the results of the items in flight ahead of
    the oldest unfinished one are held: about `concurrency` rows.
    """

    def __init__(self, write: Callable[..., None], out: IO[str]) -> None:
        self._write = write
        self._out = out
        self._next = 0
        self._held: dict[int, tuple[dict[str, Any], bool, bool | None]] = {}

    def add(self, index: int, row: dict[str, Any], *, ok: bool, passed: bool | None) -> None:
        """Take one result; write it and any held ones that are now next in order."""
        self._held[index] = (row, ok, passed)
        while self._next in self._held:
            held, held_ok, held_passed = self._held.pop(self._next)
            self._write(self._out, held, ok=held_ok, passed=held_passed)
            self._next += 1


def _why(verdict: Any) -> dict[str, Any]:
    """Why an answer failed: the criteria counted against it and the judge's feedback."""
    if verdict is None:
        return {"failed_criteria": None, "feedback": None}
    counted = getattr(verdict, "counted_failures", ())
    return {
        "failed_criteria": [f.criterion for f in counted],
        "feedback": getattr(verdict, "feedback", "") or None,
    }


class _Tagged(Exception):
    """Carries a record with its item's error through `iter_all`."""

    def __init__(self, record: Record, error: Exception) -> None:
        super().__init__(str(error))
        self.record = record
        self.error = error


def _untag(result: BatchResult[Any]) -> tuple[Record, Any, Exception | None]:
    value = result.value
    if isinstance(value, tuple):
        return value[0], value[1], None
    error = result.error
    assert isinstance(error, _Tagged)
    return error.record, None, error.error


def _error_text(error: Exception) -> str:
    return f"{type(error).__name__}: {error}"
