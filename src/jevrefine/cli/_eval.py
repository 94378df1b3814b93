"""`jevrefine eval CASES.jsonl`: score a refine setup on a case file (see `jevrefine.evals`).

It takes the model flags and config file of `jevrefine run`. Its results are always kept: with
no `--out`, `--json` or `--report`, they go to a folder of their own,
`eval-results/<case file stem>-<UTC time>/` (`rows.jsonl`, `report.json`, `report.html`), named
at the start and at the end; `--no-save` keeps nothing. Every output path is checked against
every input (the case file, the config, the rows resumed from) before any model call.

A case file is code: a `python` assertion runs the function it names. Run only case files you
trust.

Exit codes:

- 0: every case ran (whatever the pass rate);
- 1: some case errored (its row has `error` set; a resumed run runs it again);
- 2: bad input or config (a bad case file, a bad flag): nothing ran;
- 130: interrupted; every row written to `--out` so far is complete, so the same command resumes.
"""

from __future__ import annotations

import argparse
import datetime
import importlib.util
import json
import math
import os
import sys
from collections.abc import Callable
from contextlib import AsyncExitStack
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, Final

import anyio

from ..advisors.self_refine import RetryStrategy
from ..evals._bounded import DEFAULT_CHECK_TIMEOUT
from ..exceptions import JevrefineError, UserError
from ..messages import ChatOptions
from ._config import CliConfig, ConfigError, JudgeSection, open_models
from ._io import check_paths, json_line, open_output
from ._progress import AttemptCounter, Bar, Tally, console
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

CONTROL: Final = RetryStrategy(feedback="none", temperature=0.7, fresh_seeds=True)
"""`--control`'s strategy: retries ask the original request again, sampled afresh (at
temperature 0 they would only repeat attempt 1), without the judge's defects."""

LOCAL_MAX_TOKENS = 160
"""`max_tokens` of the local model when none is set: the small model otherwise rambles until
its context is full, and a retry prompt that quotes such an answer no longer fits."""

DEFAULT_RESULTS = "eval-results"
"""The folder under which a run with no output flag keeps its results (one folder per run)."""

TRUST_NOTE = (
    "A case file is code: a python assertion runs the function it names (file.py:function "
    "beside the case file, or module:function of an installed module). Run only case files "
    "you trust."
)

LOCAL_CONCURRENCY = 1
"""Cases in flight on the local model when `--concurrency` is not given: its server answers one
request at a time, so more would only queue, and the queueing would count as each case's
latency."""


def add_eval_command(commands: Any) -> None:
    """Add `eval` to the `jevrefine` sub-command parsers."""
    parser = commands.add_parser(
        "eval",
        help="score a refine setup on a JSONL case file: pass rates before and after",
        description="Score a refine setup on a JSONL case file: pass rates before and after. "
        f"{TRUST_NOTE} Results are kept in {DEFAULT_RESULTS}/<stem>-<UTC time>/ unless --out, "
        "--json, --report or --no-save say otherwise.",
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
        "--control",
        action="store_true",
        help="the no-feedback control: retries ask the request again (sampled afresh) without "
        "the judge's defects; compare its report with a normal run to see whether your model "
        "uses the feedback (jevrefine compare A.json B.json)",
    )
    parser.add_argument(
        "--restart", action="store_true", help="overwrite --out instead of resuming it"
    )
    parser.add_argument(
        "--no-save",
        action="store_true",
        help=f"keep no results (by default, with no --out, --json or --report, they go to "
        f"{DEFAULT_RESULTS}/<case file stem>-<UTC time>/)",
    )
    parser.add_argument(
        "--allow-python-outside",
        action="store_true",
        help="let a python assertion's file.py lie outside the case file's folder (a case file "
        "is code: run only case files you trust)",
    )
    parser.add_argument(
        "--check-timeout",
        type=_seconds,
        default=DEFAULT_CHECK_TIMEOUT,
        help="seconds one check of one answer may take (a regex, a JSON schema, a python "
        f"function; default {DEFAULT_CHECK_TIMEOUT:g}): past it the assertion fails",
    )
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    _model_flags(parser)
    limit_flags(parser)


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not value > 0 or math.isinf(value):
        raise argparse.ArgumentTypeError(f"{text!r} is not a positive number of seconds")
    return value


def eval_command(args: argparse.Namespace) -> int:
    """Run `jevrefine eval`; returns the exit status."""
    try:
        config = _config(args)
        from ..evals import load_cases

        if args.html_path and importlib.util.find_spec("jevrefine.evals._html") is None:
            raise ConfigError("--report: this jevrefine build has no HTML report renderer")
        cases = load_cases(args.cases, allow_python_outside=args.allow_python_outside)
        if args.limit is not None:
            if args.limit < 1:
                raise ConfigError(f"--limit must be at least 1, got {args.limit}")
            cases = cases[: args.limit]
        _check_outputs(args)
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


def _check_outputs(args: argparse.Namespace) -> None:
    """Choose the default output folder when no output is named; refuse outputs over inputs.

    Before any model call: an output that is the case file, the config or another output (a
    symlink or a hard link to one included), or in a folder that does not exist, is exit 2.
    `--json` and `--report` must not be the rows file either, which is read to resume.
    """
    if args.no_save:
        if args.out or args.json_path or args.html_path:
            raise ConfigError("--no-save keeps nothing: drop it, or drop --out/--json/--report")
    elif not (args.out or args.json_path or args.html_path):
        folder = _results_folder(args.cases)
        args.results_folder = folder
        args.out = str(folder / "rows.jsonl")
        args.json_path = str(folder / "report.json")
        if importlib.util.find_spec("jevrefine.evals._html") is not None:
            args.html_path = str(folder / "report.html")
    inputs = {"the case file": args.cases, "--config": args.config}
    check_paths(inputs, {"--out": args.out})
    check_paths(
        {**inputs, "--out (the rows resumed from)": args.out},
        {"--json": args.json_path, "--report": args.html_path},
    )


def _results_folder(cases: str) -> Path:
    """A new folder for this run's results: `eval-results/<stem>-<UTC time>[-N]/`."""
    stamp = datetime.datetime.now(datetime.UTC).strftime("%Y%m%dT%H%M%SZ")
    base = Path(DEFAULT_RESULTS) / f"{Path(cases).stem}-{stamp}"
    folder, number = base, 1
    while True:
        try:
            folder.mkdir(parents=True)
            return folder
        except FileExistsError:
            number += 1
            folder = base.with_name(f"{base.name}-{number}")


def previous_rows(
    path: str | None, *, fingerprints: dict[str, str] | None = None
) -> tuple[dict[str, dict[str, Any]], list[str]]:
    """The usable rows already in `--out` by case id (the last of an id wins), and notes.

    The notes say what was not used, one line each (for stderr). Every row is validated
    (types, bounded numbers): a line cut short by an interruption, a hand edit or a tampered
    row is reported by its line number, and its case runs again. With `fingerprints` (case id
    -> fingerprint), a row made from another version of its case, or in another setup, is not
    used either.
    """
    from ..evals._rows import read_row

    rows: dict[str, dict[str, Any]] = {}
    notes: list[str] = []
    if path is None or path == "-" or not os.path.exists(path):
        return rows, notes
    with open(path, "rb") as file:
        for number, line in enumerate(file, start=1):
            if not line.strip():
                continue
            row = read_row(line)
            if isinstance(row, str):
                notes.append(f"{path}:{number}: not a result row ({row}); its case runs again")
                continue
            rows[row["id"]] = row
    if fingerprints is not None:
        for case_id, row in list(rows.items()):
            if case_id in fingerprints and row.get("fingerprint") != fingerprints[case_id]:
                del rows[case_id]
                notes.append(
                    f"{path}: case {case_id!r} changed (or the setup did) since its row was "
                    "written: it runs again"
                )
    return rows, notes


class _Progress(Tally):
    def __init__(self, attempts_per_case: int) -> None:
        super().__init__()
        self.attempts_per_case = attempts_per_case
        self.asked = 0
        """Model answers asked for so far (every attempt of every case)."""
        self.answered = 0
        """Of those, the attempts of the cases done (from their rows)."""

    def add(self, row: dict[str, Any]) -> None:
        """One more case done, read from its report row."""
        self.tokens += sum(int(row.get(k) or 0) for k in ("model_tokens", "judge_tokens"))
        self.tokens += int(row.get("grader_tokens") or 0)
        self.answered += len(row.get("attempts") or ())
        ok = row.get("error") is None
        self.count(ok=ok, passed=bool(row.get("passed_final")) if ok else None)

    def position(self, in_flight: int) -> float:
        """Cases done, plus a share of a case per attempt of the cases in flight.

        A case takes at most `attempts_per_case` answers; each one moves the bar by less than
        that share of a case, so the bar never reaches a case before it is done.
        """
        share = 1 / (self.attempts_per_case + 1)
        running = max(0, self.asked - self.answered) * share
        return self.done + min(running, in_flight * (1 - share))

    def fields(self) -> dict[str, str]:
        return {**super().fields(), "activity": f"{self.asked} answers asked"}


class _Eval:
    """One `jevrefine eval` invocation: resume, models, progress, the report files."""

    def __init__(self, args: argparse.Namespace, config: CliConfig, cases: list[Case]) -> None:
        from ..evals._rows import case_fingerprint

        self.args = args
        self.config = config
        self.cases = cases
        most = 1 if args.eval_judge == "none" else config.refine.max_repeat_attempts + 1
        self.progress = _Progress(most)
        setup = self._setup()
        self.fingerprints = {case.id: case_fingerprint(case, setup) for case in cases}
        self.bar: Bar | None = None
        self.on_attempt: Callable[[], None] = lambda: None
        """Called as each attempt goes to the model (set by `run`, for the progress bar)."""

    def _setup(self) -> dict[str, Any]:
        """What decides a verdict besides the case: a row is reused only in the same setup."""
        model, refine = self.config.model, self.config.refine
        needs_grader = any(case.needs_grader for case in self.cases)
        return {
            # The model, not the address it is served at (a port changes; a URL may hold a
            # password): provider, name, system message and sampling options.
            "model": model.model_dump(mode="json", exclude={"base_url"}),
            "provider": resolve_provider(model.provider),
            "judge": self.args.eval_judge,
            "judge_config": self.config.judge.model_dump(mode="json")
            if self.args.eval_judge == "config"
            else None,
            "refine": refine.model_dump(mode="json"),
            "control": bool(self.args.control),
            "grader": ("jev" if os.environ.get("TYPESAFE_API_KEY") else "model")
            if needs_grader
            else None,
        }

    async def run(self) -> int:
        args = self.args
        done: dict[str, dict[str, Any]] = {}
        self._say_where("results")
        if not args.restart:
            earlier, notes = await anyio.to_thread.run_sync(
                lambda: previous_rows(args.out, fingerprints=self.fingerprints)
            )
            for note in notes:
                print(note, file=sys.stderr)  # always said: a row left unused is never silent
            # A case that errored runs again; one that ran is kept as it is.
            done = {k: v for k, v in earlier.items() if v.get("error") is None}
        todo = [case for case in self.cases if case.id not in done]
        out = open_output(args.out, append=not args.restart) if args.out else None
        bar = self.bar = Bar(console(enabled=not args.no_progress), len(self.cases))
        for case in self.cases:
            if case.id in done:
                self.progress.add(done[case.id])
                bar.advance(self.progress.fields())
        in_flight = min(self._concurrency(), len(todo))

        def on_result(row: dict[str, Any]) -> None:
            row["fingerprint"] = self.fingerprints.get(row["id"])
            if out is not None:
                out.write(json_line(row) + "\n")  # valid UTF-8 whatever the answers hold
                out.flush()  # each row is complete on disk: an interrupted run resumes here
            self.progress.add(row)
            left = len(self.cases) - self.progress.done
            bar.show(self.progress.fields(), completed=self.progress.position(min(in_flight, left)))

        def on_attempt() -> None:
            self.progress.asked += 1
            left = len(self.cases) - self.progress.done
            bar.show(self.progress.fields(), completed=self.progress.position(min(in_flight, left)))

        self.on_attempt = on_attempt

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
        self._say_where("results kept")
        return EXIT_FAILURES if full.errors else EXIT_OK

    def _say_where(self, label: str) -> None:
        """Name the files the results go to (stderr: stdout may carry the JSON or the rows)."""
        args = self.args
        if args.no_save:
            print(f"{label}: none (--no-save)", file=sys.stderr)
            return
        folder = getattr(args, "results_folder", None)
        files = [p for p in (args.out, args.json_path, args.html_path) if p not in (None, "-")]
        if folder is not None:
            names = ", ".join(Path(p).name for p in files)
            print(f"{label}: {folder}{os.sep} ({names})", file=sys.stderr)
            if label == "results kept":
                print(f"  resume or re-render with: --out {args.out}", file=sys.stderr)
        elif files:
            print(f"{label}: {', '.join(files)}", file=sys.stderr)

    async def _open(self, stack: AsyncExitStack) -> tuple[ChatClient, SystemOneClient | None, str]:
        from ..client import ChatClient

        models = await stack.enter_async_context(open_models(self.config))
        section = self.config.model
        # Innermost: called as each attempt goes to the model, so the bar moves per attempt.
        advisors: list[Any] = [AttemptCounter(lambda: self.on_attempt())]
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

        # The model, the config's judge and the grader, each under its limiter (if any).
        limits = batch_limits(self.args)
        return await evaluate(
            todo,
            limits.on_client(client),
            judge=self.args.eval_judge,
            grader=None if grader is None else limits.on_judge_client(grader),
            max_repeat_attempts=self.config.refine.max_repeat_attempts,
            concurrency=self._concurrency(),
            on_result=on_result,
            check_timeout=self.args.check_timeout,
            strategy=CONTROL if self.args.control else None,
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
        if data["echo_passes"]:
            lines.append(
                f"  echoes: {data['echo_passes']} returned answer(s) passed by quoting the "
                f"feedback; counted as failed: {data['final_pass_rate_answered']:.1%} returned, "
                f"lift {data['lift_answered']:+.1%}"
            )
        if self.args.control:
            lines.append("  control: retries were asked without the judge's defects")
        if data["escalated"]:
            lines.append(f"  escalated: {data['escalated']:,} criteria to the stronger judge")
        # stderr when the JSON or the rows go to stdout, so that stays parseable.
        to_stdout = "-" in (self.args.json_path, self.args.out)
        stream: IO[str] = sys.stderr if to_stdout else sys.stdout
        stream.write("\n".join(lines) + "\n")
