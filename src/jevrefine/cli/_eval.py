"""`jevrefine eval CASES.jsonl`: score a refine setup on a case file (see `jevrefine.evals`).

It takes the model flags and config file of `jevrefine run`. Exit codes:

- 0: every case ran (whatever the pass rate);
- 1: some case errored (its row has `error` set; a resumed run runs it again);
- 2: bad input or config (a bad case file, a bad flag): nothing ran;
- 130: interrupted; every row written to `--out` so far is complete, so the same command resumes.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import sys
from contextlib import AsyncExitStack
from typing import IO, TYPE_CHECKING, Any

import anyio

from ..exceptions import JevrefineError, UserError
from ..messages import ChatOptions
from ._config import CliConfig, ConfigError, JudgeSection, open_models
from ._io import open_output, output_rows
from ._progress import Bar, Tally, console
from ._providers import resolve_provider
from ._run import _model_flags, batch_limits, config_of, limit_flags
from ._setup import eval_setup

if TYPE_CHECKING:
    from ..client import ChatClient
    from ..evals import Case, EvalReport, JudgeMode
    from ..jev.protocol import SystemOneClient
    from ..judge._judge import Judge

__all__ = ["LOCAL_CONCURRENCY", "LOCAL_MAX_TOKENS", "add_eval_command", "eval_command"]

_MODES: dict[str, JudgeMode] = {"asserts": "asserts", "config": "config", "none": "none"}

EXIT_OK = 0
EXIT_FAILURES = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130

LOCAL_MAX_TOKENS = 160
"""`max_tokens` of the local model when none is set: the small model otherwise rambles until
its context is full, and a retry prompt that quotes such an answer no longer fits."""

LOCAL_CONCURRENCY = 1
"""Cases in flight on the local model when `--concurrency` is not given: its server answers one
request at a time, so more would only queue, and the queueing would count as each case's
latency."""


def add_eval_command(commands: Any) -> None:
    """Add `eval` to the `jevrefine` sub-command parsers."""
    parser = commands.add_parser(
        "eval", help="score a refine setup on a JSONL case file: pass rates before and after"
    )
    parser.add_argument("cases", help="the JSONL case file (see the evals guide)")
    parser.add_argument("--config", help="a jevrefine.toml file (flags override it)")
    parser.add_argument(
        "--judge",
        dest="eval_judge",
        choices=["asserts", "config", "none"],
        default="asserts",
        help="what judges the refine loop: the case's assertions (default), the config's judge, "
        "or nothing (one attempt)",
    )
    parser.add_argument("--json", dest="json_path", help="write the report as JSON ('-': stdout)")
    parser.add_argument("--report", dest="html_path", help="write the report page (HTML)")
    parser.add_argument("--out", help="write each case's result row (JSONL); resumes from it")
    parser.add_argument(
        "--concurrency", type=int, help="cases in flight at once (default 8; 1 on the local model)"
    )
    parser.add_argument("--limit", type=int, help="run the first N cases only")
    parser.add_argument("--max-repeat-attempts", type=int, help="retries after the first answer")
    parser.add_argument(
        "--restart", action="store_true", help="overwrite --out instead of resuming it"
    )
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    _model_flags(parser)
    limit_flags(parser)


def eval_command(args: argparse.Namespace) -> int:
    """Run `jevrefine eval`; returns the exit status."""
    try:
        config = _config(args)
        from ..evals import load_cases

        if args.html_path and importlib.util.find_spec("jevrefine.evals._html") is None:
            raise ConfigError("--report: this jevrefine build has no HTML report renderer")
        cases = load_cases(args.cases)
        if args.out and os.path.exists(args.out) and os.path.samefile(args.cases, args.out):
            # Rows appended to the case file would make it unreadable on the next run.
            raise ConfigError(f"--out {args.out} is the case file: write the rows to another file")
        if args.limit is not None:
            if args.limit < 1:
                raise ConfigError(f"--limit must be at least 1, got {args.limit}")
            cases = cases[: args.limit]
        run = _Eval(args, config, cases)
        return anyio.run(run.run)
    except UserError as exc:
        print(f"jevrefine eval: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except OSError as exc:
        print(f"jevrefine eval: {exc.strerror or exc}: {exc.filename}", file=sys.stderr)
        return EXIT_USAGE
    except JevrefineError as exc:
        print(f"jevrefine eval failed: {exc}", file=sys.stderr)
        return EXIT_FAILURES
    except KeyboardInterrupt:
        print("jevrefine eval: interrupted; run it again to resume", file=sys.stderr)
        return EXIT_INTERRUPTED


def _config(args: argparse.Namespace) -> CliConfig:
    config = config_of(args)
    if args.eval_judge != "config":
        # Only --judge config uses the [judge] section: open no judge the run will not use.
        config = config.model_copy(update={"judge": JudgeSection(kind="none")})
    elif config.judge.kind == "none":
        raise ConfigError("--judge config needs a judge: set [judge] kind in --config")
    model = config.model
    if model.max_tokens is None and resolve_provider(model.provider) == "local":
        model = model.model_copy(update={"max_tokens": LOCAL_MAX_TOKENS})
        config = config.model_copy(update={"model": model})
    return config


def previous_rows(path: str | None) -> dict[str, dict[str, Any]]:
    """The rows already in `--out`, by case id; the last row of an id wins.

    A line cut short by an interruption, or anything that is not a row, is ignored: that case
    runs again.
    """
    return {row["id"]: row for row in output_rows(path) if isinstance(row.get("id"), str)}


class _Progress(Tally):
    def add(self, row: dict[str, Any]) -> None:
        """One more case done, read from its report row."""
        self.tokens += sum(int(row.get(k) or 0) for k in ("model_tokens", "judge_tokens"))
        self.tokens += int(row.get("grader_tokens") or 0)
        ok = row.get("error") is None
        self.count(ok=ok, passed=bool(row.get("passed_final")) if ok else None)


class _Eval:
    """One `jevrefine eval` invocation: resume, models, progress, the report files."""

    def __init__(self, args: argparse.Namespace, config: CliConfig, cases: list[Case]) -> None:
        self.args = args
        self.config = config
        self.cases = cases
        self.progress = _Progress()

    async def run(self) -> int:
        args = self.args
        done: dict[str, dict[str, Any]] = {}
        if not args.restart:
            earlier = await anyio.to_thread.run_sync(previous_rows, args.out)
            # A case that errored runs again; one that ran is kept as it is.
            done = {k: v for k, v in earlier.items() if v.get("error") is None}
        todo = [case for case in self.cases if case.id not in done]
        out = open_output(args.out, append=not args.restart) if args.out else None
        bar = Bar(console(enabled=not args.no_progress), len(self.cases))
        for case in self.cases:
            if case.id in done:
                self.progress.add(done[case.id])
                bar.advance(self.progress.fields())

        def on_result(row: dict[str, Any]) -> None:
            if out is not None:
                out.write(json.dumps(row, ensure_ascii=False) + "\n")
                out.flush()  # each row is complete on disk: an interrupted run resumes here
            self.progress.add(row)
            bar.advance(self.progress.fields())

        from ..evals import EvalReport

        report = EvalReport(results=(), judge=_MODES[args.eval_judge])
        where = "no model (every case was already done)"
        try:
            if todo:  # a finished run resumed opens no model (the local one takes a while)
                async with AsyncExitStack() as stack:
                    client, grader, where = await self._open(stack)
                    with bar:
                        report = await self._evaluate(todo, client, grader, on_result)
        finally:
            if out is not None and out is not sys.stdout:
                out.close()
        rows = {row["id"]: row for row in report.results}
        full = EvalReport(
            results=[rows.get(c.id) or done[c.id] for c in self.cases],
            judge=report.judge,
            setup=eval_setup(
                args, self.config, model=where if todo else None, concurrency=self._concurrency()
            ),
        )
        self._write(full)
        self._summary(full, where)
        return EXIT_FAILURES if full.errors else EXIT_OK

    async def _open(self, stack: AsyncExitStack) -> tuple[ChatClient, SystemOneClient | None, str]:
        from ..client import ChatClient

        models = await stack.enter_async_context(open_models(self.config))
        section = self.config.model
        advisors = []
        if self.args.eval_judge == "config":
            assert models.judge is not None
            advisors.append(self._advisor(models.judge))
        options = ChatOptions(temperature=section.temperature, max_tokens=section.max_tokens)
        client = ChatClient(models.model, system=section.system, advisors=advisors, options=options)
        grader: SystemOneClient | None = None
        if any(case.needs_grader for case in self.cases):
            grader = await self._grader(stack, models.model)
        return client, grader, models.description

    def _advisor(self, judge: Judge) -> Any:
        from ..advisors.self_refine import SelfRefineAdvisor

        refine = self.config.refine
        return SelfRefineAdvisor(
            judge,
            max_repeat_attempts=refine.max_repeat_attempts,
            fail_on_exhausted_attempts=refine.fail_on_exhausted_attempts,
            token_budget=refine.token_budget,
        )

    async def _grader(self, stack: AsyncExitStack, model: Any) -> SystemOneClient:
        # Jev when its key is set, else the configured model judges (LLM-as-a-judge).
        if os.environ.get("TYPESAFE_API_KEY"):
            from ..jev import JudgeClient

            return await stack.enter_async_context(JudgeClient())
        from ..judge import ModelJudgeClient

        return ModelJudgeClient(model)

    async def _evaluate(
        self,
        todo: list[Case],
        client: ChatClient,
        grader: SystemOneClient | None,
        on_result: Any,
    ) -> EvalReport:
        from ..evals import evaluate

        with batch_limits(self.args):  # the cases' tasks inherit the limits
            return await evaluate(
                todo,
                client,
                judge=self.args.eval_judge,
                grader=grader,
                max_repeat_attempts=self.config.refine.max_repeat_attempts,
                concurrency=self._concurrency(),
                on_result=on_result,
            )

    def _concurrency(self) -> int:
        if self.args.concurrency is not None:
            return int(self.args.concurrency)
        if resolve_provider(self.config.model.provider) == "local":
            return LOCAL_CONCURRENCY
        return 8

    def _write(self, report: EvalReport) -> None:
        json_path, html_path = self.args.json_path, self.args.html_path
        if json_path == "-":
            sys.stdout.write(json.dumps(report.to_dict(), ensure_ascii=False, indent=2) + "\n")
        elif json_path:
            report.write_json(json_path)
        if html_path:
            report.write_html(html_path)

    def _summary(self, report: EvalReport, where: str) -> None:
        data = report.to_dict()
        ran = data["cases"] - data["errors"]
        lo, hi = data["lift_ci95"]
        lines = [
            f"jevrefine eval: {self.args.cases} on {where}, judge: {self.args.eval_judge}",
            f"  cases: {data['cases']} ({data['errors']} errored; rates are over {ran})",
            f"  pass rate: {data['baseline_pass_rate']:.1%} at attempt 1 -> "
            f"{data['final_pass_rate']:.1%} returned",
            f"  lift: {data['lift']:+.1%} (95% paired interval {lo:+.1%} to {hi:+.1%}); "
            f"improved {data['improved']}, degraded {data['degraded']}",
            f"  tokens: model {data['model_tokens']:,}, judge {data['judge_tokens']:,}, "
            f"grader {data['grader_tokens']:,}; latency p50 {data['latency_s']['p50']:.2f} s, "
            f"p95 {data['latency_s']['p95']:.2f} s",
        ]
        if data["escalated"]:
            lines.append(f"  escalated: {data['escalated']:,} criteria to the stronger judge")
        # stderr when the JSON or the rows go to stdout, so that stays parseable.
        to_stdout = "-" in (self.args.json_path, self.args.out)
        stream: IO[str] = sys.stderr if to_stdout else sys.stdout
        stream.write("\n".join(lines) + "\n")
