"""Does refinement help? IFBench prompts on real local models, IFBench's verifiers as the oracle.

Per model (`LocalModelServer(model=...)`), on the same prompts (`PUBLISHED_N` cases of
`benchmarks/ifbench/cases.jsonl`, evenly spaced over the file; `--dev` takes others, to tune
on), with the same `max_tokens`, temperature 0 and seed, the same attempt cap (3 attempts):
`--benchmark ifeval` measures the same on IFEval's prompts instead (`IFEVAL_PUBLISHED_N` cases of
`benchmarks/ifeval/cases.jsonl`, IFEval's verifiers as the oracle, easier for small models).

- `baseline`: one attempt (attempt 1 of `refine:verifiers`, which costs nothing extra);
- `refine:verifiers`: `SelfRefineAdvisor` judged by code checks, one per instruction, calling
  the benchmark's verifier; a failed check's defect is the instruction's own description;
- `refine:model-judge`: `SelfRefineAdvisor` judged only by `ModelJudgeClient` on the same model,
  one noul per instruction (no oracle feedback);
- `DSPy Refine`: `dspy.Refine(N=3)` with the verifiers as the reward (1.0 when all pass);
- `pydantic-ai`: `Agent(retries=2)` whose `output_validator` raises `ModelRetry` with the
  failed instructions' descriptions.

The oracle (the benchmark's strict score, prompt level: every instruction followed) scores
every attempt.
Reported per setup: pass rate before (its own first attempt) and after, the lift with a paired
95 % interval, improved / degraded, error-introduction rate, improvements per degradation, model
and judge tokens per prompt, model seconds per prompt, and for the model judge its agreement with
the verifiers (Cohen's kappa over every judged attempt).

The setups share one model server; a response cache makes identical requests (attempt 1 of the
jevrefine setups) one generation, and charges its generation time to every setup that used it,
so seconds per prompt are what each setup would take alone.

    python -m benchmarks.bench_quality [--benchmark ifbench|ifeval] [--quick] [--n N]
        [--models NAME ...] [--setups ...] [--templates NAME ...] [--dump FILE.jsonl]
        [--cases ID ...] [--from-dump FILE ...]

`--quick` = 2 prompts on SmolLM2 only, 48 tokens (a smoke run of the wiring). CI does not
run this benchmark (it needs minutes of CPU per model); its statistics are tested on fixed
numbers in tests/test_bench_quality.py.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import statistics
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, ClassVar

# Before litellm is imported (by dspy): otherwise it downloads its model cost map.
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

import anyio
import anyio.from_thread
import anyio.to_thread

from jevrefine import ChatClient, RetryStrategy, SelfRefineAdvisor, context_keys
from jevrefine.advisors.self_refine import DEFAULT_FEEDBACK_TEMPLATE
from jevrefine.jev import Noul
from jevrefine.judge import Judge, JudgeInput, ModelJudgeClient, check, noul
from jevrefine.messages import ChatOptions, ChatResponse, Prompt, Usage
from jevrefine.models.base import ChatModel

from ._harness import bar, emit, figure
from ._loop import SHIPPED_LOOP
from .ifbench import convert as ifbench_convert
from .ifeval import convert as ifeval_convert
from .verifiable.cases import CaseFile
from .verifiable.verifiers import InstructionResult, Verifiers

ROOT = Path(__file__).parent.parent
ATTEMPTS = 3
SEED = 7
MODELS = ("smollm2-135m", "qwen2.5-coder-0.5b", "qwen2.5-coder-1.5b")
SETUPS = ("verifiers", "model-judge", "dspy", "pydantic-ai")
DEFAULT_MAX_TOKENS = 160
PUBLISHED_N = 200
"""The published subset: this many evenly spaced prompts of the 269 (the other 69 are the dev
slice, `--dev`, that loop options are tuned on). A full run is hours per model on 2 cores: split
it with `--cases`/`--part`, keep it with `--dump`, resume it with `--resume`, and share
generations between runs with `--cache`."""
HISTORY_N = 12
"""The size of the subset published before 2026-12-02 (its tables in RESULTS.md are history)."""
IFEVAL_PUBLISHED_N = 300
"""IFEval's published subset: this many evenly spaced prompts of the 475 (the other 175 are its
dev slice)."""

# Feedback templates measured for the refine loop (`--templates`); `default` is the SDK's.
TEMPLATES: Mapping[str, str] = {
    "default": DEFAULT_FEEDBACK_TEMPLATE,
    # The SDK's default until the pilot (the "default" rows of its tables).
    "reviewer": (
        "\n\nA reviewer rejected an earlier answer to this request:\n{feedback}\n"
        "Write a new answer that fixes every point above."
    ),
    "answer-only": (
        "\n\n(An earlier answer to this request broke these rules:\n{feedback}\n"
        "Answer the request above again, following every rule. Reply with the answer only.)"
    ),
    "with-answer": (
        "\n\nAn earlier answer to this request was:\n<<<\n{answer}\n>>>\nIt broke these rules:\n"
        "{feedback}\nAnswer the request above again, following every rule. Reply with the "
        "answer only."
    ),
}


# The SDK's loop options measured (`--strategies`): `SelfRefineAdvisor(strategy=...)` as a user
# writes it. The plain `verifiers` setup is the SDK's default strategy; `today` is the loop as it
# shipped before the options were measured (every option spelled out, so it stays that loop).
STRATEGIES: Mapping[str, RetryStrategy] = {
    "today": SHIPPED_LOOP,
    "fresh": RetryStrategy(temperature=0.7, fresh_seeds=True),
    "guard": RetryStrategy(repeats="guard", identical="resample", fresh_seeds=True),
    "stop": RetryStrategy(repeats="guard", identical="stop"),
    "fresh+guard": RetryStrategy(
        temperature=0.7, fresh_seeds=True, repeats="guard", identical="resample"
    ),
    "with-answer": RetryStrategy(feedback="with_answer"),
    "control": RetryStrategy(feedback="none", temperature=0.7, fresh_seeds=True),
    "best-of-3": RetryStrategy(samples=3, temperature=0.7, fresh_seeds=True),
}


# -- statistics (one small function, replaceable by jevrefine.evals) ---------------------------


def paired_summary(before: Sequence[bool], after: Sequence[bool]) -> dict[str, Any]:
    """Pass rates, lift and its paired 95 % interval, improved / degraded, error introduction.

    The interval is the normal approximation on the per-prompt differences (after − before,
    each −1, 0 or +1): mean ± 1.96 · sd / √n, clipped to [−1, 1]. It is 0 wide when no prompt
    changed; with n this small read it as a rough guide.
    """
    if len(before) != len(after):
        raise ValueError(f"paired samples differ in size: {len(before)} vs {len(after)}")
    n = len(before)
    if n == 0:
        raise ValueError("no prompts to summarise")
    diffs = [int(a) - int(b) for b, a in zip(before, after, strict=True)]
    lift = sum(diffs) / n
    sd = statistics.stdev(diffs) if n > 1 else 0.0
    half = 1.96 * sd / math.sqrt(n)
    improved = sum(1 for d in diffs if d > 0)
    degraded = sum(1 for d in diffs if d < 0)
    passed_before = sum(before)
    return {
        "n": n,
        "baseline_pass_rate": passed_before / n,
        "final_pass_rate": sum(after) / n,
        "lift": lift,
        "lift_ci95": [max(-1.0, lift - half), min(1.0, lift + half)],
        "improved": improved,
        "degraded": degraded,
        "error_introduction_rate": degraded / passed_before if passed_before else 0.0,
        "improvements_per_degradation": improved / degraded if degraded else None,
    }


def agreement(pairs: Sequence[tuple[bool, bool]]) -> dict[str, Any]:
    """Loop judge vs oracle over judged attempts, "positive" = passed: counts and Cohen's kappa."""
    tp = sum(1 for j, o in pairs if j and o)
    fp = sum(1 for j, o in pairs if j and not o)
    fn = sum(1 for j, o in pairs if not j and o)
    tn = sum(1 for j, o in pairs if not j and not o)
    n = tp + fp + fn + tn
    if n == 0:
        return {"tp": 0, "fp": 0, "fn": 0, "tn": 0, "kappa": None}
    observed = (tp + tn) / n
    expected = ((tp + fp) * (tp + fn) + (fn + tn) * (fp + tn)) / (n * n)
    # Undefined when both raters put everything in one class (no variation to agree on).
    kappa = None if expected == 1 else (observed - expected) / (1 - expected)
    return {"tp": tp, "fp": fp, "fn": fn, "tn": tn, "kappa": kappa}


# -- the benchmarks, the oracle and the judges --------------------------------------------------


@dataclass(frozen=True)
class Benchmark:
    """A benchmark of verifiable instructions that the loop is measured on (`--benchmark`)."""

    name: str
    """Its `--benchmark` name, recorded on every `--dump` row."""
    title: str
    """Its name in the report: `IFBench`."""
    prompts: str
    """What its prompts are called in the report: `test prompts`."""
    case_file: CaseFile
    published_n: int
    """The size of its published subset (the rest is its dev slice)."""
    figure_prefix: str
    """Its figures are `<figure_prefix>_<model>`."""

    @property
    def verifiers(self) -> Verifiers:
        return self.case_file.verifiers


IFBENCH = Benchmark(
    "ifbench", "IFBench", "test prompts", ifbench_convert.CASE_FILE, PUBLISHED_N, "quality"
)
IFEVAL = Benchmark(
    "ifeval", "IFEval", "prompts", ifeval_convert.CASE_FILE, IFEVAL_PUBLISHED_N, "quality_ifeval"
)
BENCHMARKS: Mapping[str, Benchmark] = {b.name: b for b in (IFBENCH, IFEVAL)}


@dataclass(frozen=True)
class Case:
    """One prompt of a benchmark (IFBench unless told) with its instructions."""

    id: str
    prompt: str
    ids: tuple[str, ...]
    kwargs: tuple[dict[str, Any], ...]
    benchmark: Benchmark = IFBENCH

    @classmethod
    def of(cls, raw: Mapping[str, Any], benchmark: Benchmark = IFBENCH) -> Case:
        meta = raw["metadata"]
        ids = tuple(meta["instruction_id_list"])
        return cls(raw["id"], raw["input"], ids, tuple(meta["kwargs"]), benchmark)

    def results(self, answer: str) -> list[InstructionResult]:
        return self.benchmark.verifiers.verify(answer, self.ids, self.kwargs, self.prompt)

    def passes(self, answer: str) -> bool:
        return all(r.passed for r in self.results(answer))

    def descriptions(self) -> list[str]:
        return [r.description for r in self.results("x")]


def verifier_judge(case: Case, client: ModelJudgeClient) -> Judge:
    """Code checks only: one per instruction, its defect the instruction's description."""
    criteria: list[Any] = []
    for index, (iid, description) in enumerate(zip(case.ids, case.descriptions(), strict=True)):

        def follows(judge_input: JudgeInput, index: int = index) -> bool:
            iid, kwargs = case.ids[index], case.kwargs[index]
            return case.benchmark.verifiers.verify_instruction(
                judge_input.assistant_answer, iid, kwargs, case.prompt
            ).passed

        criteria.append(check(f"{index}:{iid}", follows, description))
    # A Judge must hold a question (until code-check-only judges are allowed): one that never
    # applies, so no judging call is ever made.
    never = noul("unused", Noul("Unused."), applies_when=lambda _input: False)
    return Judge(client, [*criteria, never])


def model_judge(case: Case, client: ModelJudgeClient) -> Judge:
    """Only the model: one noul per instruction, worded as the benchmark describes it."""
    criteria = [
        noul(
            f"{index}:{iid}",
            Noul(
                "Does `assistant_answer` follow this instruction from the request exactly? "
                f"Instruction: {description}",
                when_false=description,
            ),
        )
        for index, (iid, description) in enumerate(zip(case.ids, case.descriptions(), strict=True))
    ]
    return Judge(client, criteria)


def failed_feedback(case: Case, answer: str) -> str:
    """The peers' retry message: one line per instruction not followed."""
    return "\n".join(f"- {r.description}" for r in case.results(answer) if not r.passed)


# -- a shared response cache --------------------------------------------------------------------


class SharedModel(ChatModel):
    """Answers an identical request once; charges its generation time to every use."""

    provider: ClassVar[str] = "openai"
    supports_tools: ClassVar[bool] = False
    supports_native_structured_output: ClassVar[bool] = True

    def __init__(self, inner: ChatModel, cache: ResponseCache) -> None:
        self.inner = inner
        self.cache = cache
        self.charged = 0.0
        self.original: str | None = None
        """The request of the refinement under way: a longer last user message is a retry."""
        self.retry_temperature: float | None = None
        """When set, retries are sampled at this temperature (attempt 1 stays at 0)."""
        self.resample_temperature: float | None = None
        """When set, a retry whose answer repeats the previous attempt's word for word is asked
        once more at this temperature (its answer replaces the repeat)."""
        self.previous: str | None = None
        """The last answer of the refinement under way (what a repeat is compared with)."""

    @property
    def model_name(self) -> str:
        return self.inner.model_name

    async def call(self, prompt: Prompt) -> ChatResponse:
        last = prompt.last_user_message()
        retry = self.original is not None and last is not None and last.text != self.original
        if retry and self.retry_temperature is not None:
            options = replace(prompt.options, temperature=self.retry_temperature)
            prompt = prompt.with_options(options)
        response = await self._cached(prompt)
        if retry and self.resample_temperature is not None and self._repeats(response):
            options = replace(prompt.options, temperature=self.resample_temperature)
            response = await self._cached(prompt.with_options(options))
        if self.original is not None:
            self.previous = response.text
        return response

    def _repeats(self, response: ChatResponse) -> bool:
        return self.previous is not None and response.text.strip() == self.previous.strip()

    async def _cached(self, prompt: Prompt) -> ChatResponse:
        key = self.cache.key(self.inner.model_name, prompt)
        hit = self.cache.get(key)
        if hit is None:
            started = time.perf_counter()
            response = await self.inner.call(prompt)
            hit = self.cache.put(key, response, time.perf_counter() - started)
        self.charged += hit[1]
        return hit[0]


class ResponseCache:
    """Generations by request, in memory and, with a path, in a JSONL file shared by runs.

    The key is what reaches the server (the model, each message's role and text, the options
    that are set), not a repr of the SDK's objects, so a file written by one version of the loop
    serves the next: a run of new loop options re-generates only the requests that changed.
    llama.cpp answers one request the same way every time (temperature 0; a fixed seed), so a
    stored generation is the one the server would give. Each entry keeps the seconds its
    generation took, charged to every use. Appends are single `write` calls of whole lines, so
    processes splitting one model's prompts may share the file.
    """

    def __init__(self, path: Path | None = None) -> None:
        self.path = path
        self.entries: dict[str, tuple[ChatResponse, float]] = {}
        if path is not None and path.exists():
            for line in path.read_text(encoding="utf-8").splitlines():
                if line.strip():
                    self._load(json.loads(line))

    @staticmethod
    def key(model: str, prompt: Prompt) -> str:
        messages = [(type(m).__name__, getattr(m, "text", repr(m))) for m in prompt.messages]
        options = {
            name: value
            for name, value in asdict(prompt.options).items()
            if value is not None and name != "model"
        }
        text = json.dumps([model, messages, options], sort_keys=True, default=repr)
        return hashlib.sha256(text.encode()).hexdigest()

    def get(self, key: str) -> tuple[ChatResponse, float] | None:
        return self.entries.get(key)

    def put(self, key: str, response: ChatResponse, seconds: float) -> tuple[ChatResponse, float]:
        self.entries[key] = (response, seconds)
        if self.path is not None and not response.result.logprobs:  # judge calls stay in memory
            usage = response.metadata.usage
            record = {
                "key": key,
                "text": response.text,
                "input_tokens": usage.input_tokens,
                "output_tokens": usage.output_tokens,
                "finish_reason": response.result.finish_reason or "stop",
                "seconds": seconds,
            }
            line = (json.dumps(record, ensure_ascii=False) + "\n").encode()
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            try:
                os.write(fd, line)
            finally:
                os.close(fd)
        return self.entries[key]

    def _load(self, record: Mapping[str, Any]) -> None:
        usage = Usage(input_tokens=record["input_tokens"], output_tokens=record["output_tokens"])
        response = ChatResponse.of_text(
            record["text"], usage=usage, finish_reason=record["finish_reason"]
        )
        self.entries[record["key"]] = (response, float(record["seconds"]))


# -- one row per prompt and setup ---------------------------------------------------------------


@dataclass
class Row:
    """What one setup did on one prompt."""

    case: str
    setup: str
    answers: list[str] = field(default_factory=list)
    oracle: list[bool] = field(default_factory=list)
    judged: list[bool | None] = field(default_factory=list)
    final: bool = False
    chosen: int = 1
    model_tokens: int = 0
    first_tokens: int = 0
    judge_tokens: int = 0
    seconds: float = 0.0
    error: str | None = None
    echoed: int = 0
    """Retries whose answer repeats the feedback (see `mark_retries`)."""
    unchanged: int = 0
    """Retries whose answer is the previous attempt's, word for word."""
    returned_echo: bool = False
    """The returned answer is a retry that echoes the feedback (see `mark_retries`)."""
    benchmark: str = IFBENCH.name
    """The benchmark of `case` (a `--dump` row written before IFEval came has none: IFBench)."""

    @property
    def baseline(self) -> bool:
        return bool(self.oracle and self.oracle[0])

    @property
    def final_answered(self) -> bool:
        """Passed, and not by echoing the feedback: a verifier can pass the instruction's own
        text (e.g. "no quotation left unexplained" holds for a text without quotations)."""
        return self.final and not self.returned_echo


async def run_refine(
    case: Case,
    setup: str,
    model: SharedModel,
    judge_model: SharedModel,
    options: ChatOptions,
    template: str,
    strategy: RetryStrategy | None = None,
) -> Row:
    """`SelfRefineAdvisor` with the verifiers' checks (`verifiers`) or the model judge."""
    client = ModelJudgeClient(judge_model)
    judge = (
        verifier_judge(case, client) if setup.startswith("verifiers") else model_judge(case, client)
    )
    advisor = SelfRefineAdvisor(
        judge, max_repeat_attempts=ATTEMPTS - 1, feedback_template=template, strategy=strategy
    )
    chat = ChatClient(model, advisors=[advisor], options=options)
    row = Row(case.id, setup, benchmark=case.benchmark.name)
    charged = model.charged + judge_model.charged
    response = await chat.prompt(case.prompt).call()
    report = response.context[context_keys.REFINE_REPORT]
    for attempt in report.attempts:
        row.answers.append(attempt.answer)
        row.oracle.append(case.passes(attempt.answer))
        row.judged.append(None if attempt.verdict is None else attempt.verdict.passed)
    row.chosen = report.chosen or len(report.attempts)
    row.final = row.oracle[row.chosen - 1]
    row.model_tokens = report.model_usage.total_tokens
    row.first_tokens = report.attempts[0].usage.total_tokens
    row.judge_tokens = report.judge_usage.total_tokens
    row.seconds = model.charged + judge_model.charged - charged
    return row


class DSPyRefine:
    """`dspy.Refine(N=3)` on the same server, the verifiers as its reward."""

    name = "dspy"

    def __init__(self, base_url: str, alias: str, max_tokens: int) -> None:
        import logging

        import dspy

        logging.getLogger("dspy").setLevel(logging.ERROR)
        self.dspy = dspy
        self.lm = dspy.LM(
            f"openai/{alias}",
            api_base=base_url,
            api_key="local",
            cache=False,
            num_retries=0,
            temperature=0.0,
            max_tokens=max_tokens,
            seed=SEED,
        )

    def one(self, case: Case) -> Row:
        row = Row(case.id, self.name, benchmark=case.benchmark.name)

        def reward(_args: dict[str, Any], prediction: Any) -> float:
            answer = str(getattr(prediction, "answer", "") or "")
            row.answers.append(answer)
            row.oracle.append(case.passes(answer))
            row.judged.append(row.oracle[-1])
            return 1.0 if row.oracle[-1] else 0.0

        refine = self.dspy.Refine(
            module=self.dspy.Predict("request -> answer"), N=ATTEMPTS, reward_fn=reward,
            threshold=1.0,
        )  # fmt: skip
        history = len(self.lm.history)
        started = time.perf_counter()
        try:
            with self.dspy.context(lm=self.lm):
                prediction = refine(request=case.prompt)
            answer = str(getattr(prediction, "answer", "") or "")
            row.final = case.passes(answer)
            row.chosen = (
                row.answers.index(answer) + 1 if answer in row.answers else len(row.answers)
            )
        except Exception as exc:  # a parse failure of the small model is a result, not a crash
            row.error = f"{type(exc).__name__}: {str(exc)[:200]}"
            row.final = False
        row.seconds = time.perf_counter() - started
        for entry in self.lm.history[history:]:
            row.model_tokens += _dspy_tokens(entry)
        if not row.oracle:  # failed before any answer was scored
            row.oracle.append(False)
            row.answers.append("")
        return row


def _dspy_tokens(entry: Mapping[str, Any]) -> int:
    """One DSPy history entry's total tokens: its `usage` dict, else the litellm response's."""
    usage: Any = entry.get("usage") or getattr(entry.get("response"), "usage", None) or {}
    if not isinstance(usage, Mapping):
        usage = {"total_tokens": getattr(usage, "total_tokens", 0)}
    return int(usage.get("total_tokens") or 0)


class PydanticAI:
    """`Agent(retries=2)` on the same server; `output_validator` + `ModelRetry(feedback)`."""

    name = "pydantic-ai"

    def __init__(self, base_url: str, alias: str, max_tokens: int) -> None:
        from pydantic_ai import Agent
        from pydantic_ai.models.openai import OpenAIChatModel as PaiModel
        from pydantic_ai.providers.openai import OpenAIProvider

        model = PaiModel(alias, provider=OpenAIProvider(base_url=base_url, api_key="local"))
        self.agent: Any = Agent(
            model,
            retries=ATTEMPTS - 1,
            model_settings={"temperature": 0.0, "max_tokens": max_tokens, "seed": SEED},
        )
        self.current: tuple[Case, Row] | None = None

        @self.agent.output_validator
        async def verified(output: str) -> str:
            from pydantic_ai import ModelRetry

            assert self.current is not None
            case, row = self.current
            row.answers.append(output)
            row.oracle.append(case.passes(output))
            row.judged.append(row.oracle[-1])
            if not row.oracle[-1]:
                raise ModelRetry("The answer broke these rules:\n" + failed_feedback(case, output))
            return output

    async def one(self, case: Case) -> Row:
        from pydantic_ai import UnexpectedModelBehavior, capture_run_messages
        from pydantic_ai.messages import ModelResponse

        row = Row(case.id, self.name, benchmark=case.benchmark.name)
        self.current = (case, row)
        started = time.perf_counter()
        with capture_run_messages() as messages:
            try:
                result = await self.agent.run(case.prompt)
                row.final = case.passes(result.output)
                row.chosen = len(row.answers)
            except UnexpectedModelBehavior as exc:  # retries exhausted: no answer returned
                row.error = f"{type(exc).__name__}: {str(exc)[:200]}"
                row.final = False
                row.chosen = len(row.answers)
        row.seconds = time.perf_counter() - started
        for message in messages:
            if isinstance(message, ModelResponse):
                row.model_tokens += message.usage.input_tokens + message.usage.output_tokens
        if not row.oracle:
            row.oracle.append(False)
            row.answers.append("")
        return row


# -- running and reporting ----------------------------------------------------------------------

# Words of the retry messages (the SDK's template, the variants, pydantic-ai's) that an answer
# only contains when it echoes the feedback instead of answering.
_FEEDBACK_WORDS = ("reviewer rejected", "broke these rules", "earlier answer to this request")


def mark_retries(row: Row, case: Case) -> Row:
    """Count the retries that echo the feedback, and those that repeat the previous answer.

    An echo quotes a retry message's own wording or the start (40 characters) of a failed
    instruction's description, which an answer that follows the request has no reason to copy;
    unless the request asks for a text to be repeated that holds the quote (IFEval's
    `combination:repeat_prompt`, IFBench's `repeat:*`: their `prompt_to_repeat`).
    """
    repeated = [str(k["prompt_to_repeat"]).lower() for k in case.kwargs if "prompt_to_repeat" in k]
    quotes = [
        quote
        for quote in (d[:40].lower() for d in case.descriptions())
        if not any(quote in text for text in repeated)
    ]
    pairs = zip(row.answers, row.answers[1:], strict=False)
    for number, (previous, answer) in enumerate(pairs, start=2):
        text = answer.lower()
        if any(w in text for w in _FEEDBACK_WORDS) or any(q and q in text for q in quotes):
            row.echoed += 1
            row.returned_echo = row.returned_echo or number == row.chosen
        if answer.strip() == previous.strip():
            row.unchanged += 1
    return row


def parse_variant(variant: str) -> tuple[str, float | None, float | None]:
    """`name`, `name@T` (retries at temperature T) or `name~T` (a repeat resampled at T)."""
    head, _, resample = variant.partition("~")
    template, _, temperature = head.partition("@")
    return (
        template,
        float(temperature) if temperature else None,
        float(resample) if resample else None,
    )


async def run_model(name: str, cases: list[Case], args: argparse.Namespace) -> list[Row]:
    from jevrefine.local import LocalModelServer

    rows: list[Row] = []
    options = ChatOptions(temperature=0.0, seed=SEED, max_tokens=args.max_tokens)
    server = LocalModelServer(model=name, threads=args.threads, ctx=args.ctx)
    async with server, server.openai_model() as inner:
        cache = ResponseCache(Path(args.cache) if args.cache else None)
        model, judge_model = SharedModel(inner, cache), SharedModel(inner, cache)
        peers: list[Any] = []
        for kind, setup in ((DSPyRefine, "dspy"), (PydanticAI, "pydantic-ai")):
            if setup in args.setups:
                try:
                    peers.append(kind(server.base_url, server.alias, args.max_tokens))
                except ImportError as error:
                    print(f"{setup}: not installed ({error.name})", file=sys.stderr)
        for number, case in enumerate(cases, 1):
            if case.id in args.finished.get(name, ()):
                continue
            for setup in args.setups:
                if setup not in ("verifiers", "model-judge"):
                    continue
                for variant in args.templates if setup == "verifiers" else ["default"]:
                    template, retry_t, resample_t = parse_variant(variant)
                    label = setup if variant == "default" else f"{setup}[{variant}]"
                    model.original, model.previous = case.prompt, None
                    model.retry_temperature, model.resample_temperature = retry_t, resample_t
                    row = await run_refine(
                        case, label, model, judge_model, options, TEMPLATES[template]
                    )
                    model.original = model.retry_temperature = model.resample_temperature = None
                    rows.append(row)
                for strategy in args.strategies if setup == "verifiers" else []:
                    row = await run_refine(
                        case,
                        f"{setup}{{{strategy}}}",
                        model,
                        judge_model,
                        options,
                        DEFAULT_FEEDBACK_TEMPLATE,
                        STRATEGIES[strategy],
                    )
                    rows.append(row)
            for peer in peers:
                if isinstance(peer, DSPyRefine):
                    row = await anyio.to_thread.run_sync(peer.one, case)
                else:
                    row = await peer.one(case)
                rows.append(row)
            done = [mark_retries(r, case) for r in rows if r.case == case.id]
            if args.dump:  # as it goes: a long run that is stopped keeps its prompts
                record = [{"model": name, **asdict(r)} for r in done]
                with Path(args.dump).open("a", encoding="utf-8") as out:  # noqa: ASYNC230
                    out.writelines(json.dumps(r, ensure_ascii=False) + "\n" for r in record)
            print(
                f"{name} {number}/{len(cases)} {case.id}: "
                + ", ".join(f"{r.setup} {int(r.baseline)}->{int(r.final)}" for r in done),
                file=sys.stderr,
                flush=True,
            )
    return rows


def summarise(rows: list[Row]) -> dict[str, dict[str, Any]]:
    """Per setup: the paired summary, tokens and seconds per prompt, judge agreement."""
    setups: dict[str, list[Row]] = {}
    for row in rows:
        setups.setdefault(row.setup, []).append(row)
    out: dict[str, dict[str, Any]] = {}
    first = next(iter(setups.values()))
    out["baseline"] = {
        **paired_summary([r.baseline for r in first], [r.baseline for r in first]),
        "model_tokens": statistics.mean(r.first_tokens for r in first),
        "judge_tokens": 0.0,
        "seconds": None,
        "attempts": 1.0,
        "errors": 0,
    }
    for setup, group in setups.items():
        summary = paired_summary([r.baseline for r in group], [r.final for r in group])
        answered = paired_summary([r.baseline for r in group], [r.final_answered for r in group])
        judged = [
            (bool(j), o) for r in group for j, o in zip(r.judged, r.oracle, strict=False)
            if j is not None
        ]  # fmt: skip
        out[setup] = {
            **summary,
            "model_tokens": statistics.mean(r.model_tokens for r in group),
            "judge_tokens": statistics.mean(r.judge_tokens for r in group),
            "seconds": statistics.mean(r.seconds for r in group),
            "attempts": statistics.mean(len(r.answers) for r in group),
            "errors": sum(1 for r in group if r.error),
            "retries": (retries := sum(max(0, len(r.answers) - 1) for r in group)),
            "echo_rate": sum(r.echoed for r in group) / retries if retries else None,
            "unchanged_rate": sum(r.unchanged for r in group) / retries if retries else None,
            "judge_agreement": agreement(judged) if setup.startswith("model-judge") else None,
            "answered_lift": answered["lift"],
            "answered_lift_ci95": answered["lift_ci95"],
        }
    return out


def _selection(args: argparse.Namespace) -> str:
    if args.from_dump:
        return "those run into " + ", ".join(f"`{Path(p).name}`" for p in args.from_dump)
    return f"{'the first' if args.first else 'evenly spaced'}, from number {args.skip + 1}"


def _answered(summary: Mapping[str, Any]) -> str:
    """The lift when a returned answer that echoes the feedback counts as failed."""
    if "answered_lift" not in summary:
        return ""
    lo, hi = summary["answered_lift_ci95"]
    return f"{summary['answered_lift'] * 100:+.1f} pp ({lo * 100:+.0f}, {hi * 100:+.0f})"


def _retries(summary: Mapping[str, Any]) -> str:
    if not summary.get("retries"):
        return ""
    return f"{summary['echo_rate']:.0%} / {summary['unchanged_rate']:.0%} of {summary['retries']}"


def markdown(results: dict[str, Any], args: argparse.Namespace) -> str:
    benchmark = BENCHMARKS[args.benchmark]
    case_file = benchmark.case_file.path.relative_to(ROOT).as_posix()
    lines = [
        f"## Does refinement help? {benchmark.title} on local models",
        "",
        f"{args.n} prompts ({_selection(args)}) of {benchmark.title}'s {args.available} "
        f"offline-verifiable {benchmark.prompts} (`{case_file}`), {benchmark.title}'s strict "
        "verifiers as the oracle, "
        f"{ATTEMPTS} attempts at most, temperature 0, seed {SEED}, max_tokens "
        f"{args.max_tokens}, {args.threads} llama.cpp threads on a shared 2-core machine. Lift = "
        "final − baseline pass rate with a paired 95 % interval (normal approximation on "
        "per-prompt differences); a peer's baseline is its own first attempt. Command: "
        f"`{args.command}`.",
        "",
    ]
    for model, summary in results.items():
        lines += [
            f"### {model}",
            "",
            "| setup | baseline | final | lift (95 % CI) | lift, an echo failing | "
            "improved / degraded | error intro. | attempts | echoed / unchanged retries | "
            "model tokens / prompt | judge tokens / prompt | s / prompt | kappa |",
            "|---|---:|---:|---|---|---:|---:|---:|---:|---:|---:|---:|---:|",
        ]
        for setup, s in summary.items():
            lo, hi = s["lift_ci95"]
            kappa = (s.get("judge_agreement") or {}).get("kappa")
            seconds = "" if s["seconds"] is None else f"{s['seconds']:.1f}"
            lines.append(
                f"| {setup} | {s['baseline_pass_rate']:.0%} | {s['final_pass_rate']:.0%} "
                f"| {s['lift'] * 100:+.1f} pp ({lo * 100:+.0f}, {hi * 100:+.0f}) "
                f"| {_answered(s)} "
                f"| {s['improved']} / {s['degraded']} | {s['error_introduction_rate']:.1%} "
                f"| {s['attempts']:.2f} | {_retries(s)} "
                f"| {s['model_tokens']:,.0f} | {s['judge_tokens']:,.0f} "
                f"| {seconds} | {'' if kappa is None else f'{kappa:.2f}'} |"
            )
        lines.append("")
    return "\n".join(lines)


def select(
    cases: Sequence[dict[str, Any]], n: int, skip: int = 0, *, first: bool = False
) -> list[dict[str, Any]]:
    """The published subset: `n` cases evenly spaced over the file (after `skip`), or the first.

    IFBench's file is grouped by instruction type, so its first cases share one or two types;
    evenly spaced ones cover the types in proportion.
    """
    pool = list(cases[skip:])
    if first or n >= len(pool):
        return pool[:n]
    step = len(pool) / n
    return [pool[int(i * step)] for i in range(n)]


def development(cases: Sequence[dict[str, Any]], n: int, published: int) -> list[dict[str, Any]]:
    """`n` cases evenly spaced over those *outside* the published subset of `published` cases.

    The loop is tuned on these, so the published numbers do not measure a fit to their prompts.
    """
    taken = {c["id"] for c in select(cases, published)}
    return select([c for c in cases if c["id"] not in taken], n)


def finished_cases(dump: Path, benchmark: Benchmark = IFBENCH) -> dict[str, set[str]]:
    """The cases of `benchmark` a `--dump` file holds, by model (a resumed run skips them).

    A prompt's rows are written together once all its setups ran, so a case in the file is
    finished; a line cut by a stop mid-write is ignored (its prompt runs again).
    """
    done: dict[str, set[str]] = {}
    if not dump.exists():
        return done
    for line in dump.read_text(encoding="utf-8").splitlines():
        try:
            data = json.loads(line)
        except json.JSONDecodeError:
            continue
        if data.get("benchmark", IFBENCH.name) == benchmark.name:
            done.setdefault(data["model"], set()).add(data["case"])
    return done


def load_dumps(paths: Sequence[str], benchmark: Benchmark = IFBENCH) -> dict[str, list[Row]]:
    """The rows of `benchmark` written by `--dump`, by model, counted afresh.

    A run may be split across files, and a file may hold rows of both benchmarks (a row without
    `benchmark` is IFBench's: it was written before IFEval came).
    """
    cases = {c["id"]: Case.of(c, benchmark) for c in benchmark.case_file.load()}
    rows: dict[str, list[Row]] = {}
    for path in paths:
        for line in Path(path).read_text(encoding="utf-8").splitlines():
            if line.strip():
                data = json.loads(line)
                model = data.pop("model")
                row = Row(**{**data, "echoed": 0, "unchanged": 0, "returned_echo": False})
                if row.benchmark == benchmark.name:
                    rows.setdefault(model, []).append(mark_retries(row, cases[row.case]))
    return rows


async def run(args: argparse.Namespace) -> None:
    benchmark = BENCHMARKS[args.benchmark]
    raw = benchmark.case_file.load()
    args.available = len(raw)
    if args.from_dump:
        rows = load_dumps(args.from_dump, benchmark)
        if not rows:  # e.g. IFEval's dumps reported as IFBench's, the default
            others = ", ".join(name for name in BENCHMARKS if name != benchmark.name)
            raise SystemExit(
                f"bench_quality: {', '.join(args.from_dump)} hold no {benchmark.title} rows; pass "
                f"--benchmark with the benchmark they were run on ({others})"
            )
        report(rows, args)
        return
    if args.dev:
        chosen = development(raw, args.n, benchmark.published_n)
    else:
        chosen = select(raw, args.n, args.skip, first=args.first)
    if args.cases:  # a part of the subset: one run split over processes, joined by --from-dump
        chosen = [c for c in chosen if c["id"] in args.cases]
    if args.part:  # part K of M: every M-th prompt from the K-th (same split for every setup)
        k, m = args.part
        chosen = chosen[k - 1 :: m]
    cases = [Case.of(c, benchmark) for c in chosen]
    args.finished = finished_cases(Path(args.dump), benchmark) if args.dump and args.resume else {}
    if args.dump and not args.resume:
        Path(args.dump).write_text("")  # noqa: ASYNC240 - before anything runs
    all_rows: dict[str, list[Row]] = {}
    for name in args.models:
        started = time.perf_counter()
        all_rows[name] = await run_model(name, cases, args)
        print(f"{name}: {time.perf_counter() - started:.0f} s", file=sys.stderr)
    if args.resume:  # this process ran only part of the rows: report on the whole file
        args.from_dump = [args.dump]
        report(load_dumps(args.from_dump, benchmark), args)
        return
    report(all_rows, args)


def report(all_rows: dict[str, list[Row]], args: argparse.Namespace) -> None:
    """Summarise, print the Markdown section and write the JSON (`_harness.emit`)."""
    if args.from_dump:  # the prompts every setup of a model finished: a paired comparison
        for name, rows in all_rows.items():
            by_setup: dict[str, set[str]] = {}
            for row in rows:
                by_setup.setdefault(row.setup, set()).add(row.case)
            common = set.intersection(*by_setup.values())
            all_rows[name] = [r for r in rows if r.case in common]
        args.n = max(len({r.case for r in rows}) for rows in all_rows.values())
    results = {name: summarise(rows) for name, rows in all_rows.items()}
    benchmark = BENCHMARKS[args.benchmark]
    figures = [
        figure(
            f"{benchmark.figure_prefix}_{name.replace('.', '_')}",
            f"{benchmark.title} lift over the baseline, {name} ({args.n} prompts; whisker: "
            "paired 95 % CI)",
            "lift (percentage points)",
            [lift_bar(setup, s) for setup, s in summary.items() if setup != "baseline"],
            ideal=0.0,
            ideal_label="no change",
        )
        for name, summary in results.items()
    ]
    data = {"benchmark": benchmark.name, "n": args.n, "results": results}
    emit(markdown(results, args), data, figures)
    if args.plots:  # a report from --dump files is not run by the harness, which plots its own
        from ._plots import plot_all

        plot_all({"benchmarks": {"bench_quality": {"figures": figures}}}, Path(args.plots))


def lift_bar(setup: str, summary: Mapping[str, Any]) -> dict[str, Any]:
    """A bar at the lift whose whisker is its paired 95 % interval (in percentage points)."""
    lo, hi = summary["lift_ci95"]
    return bar(
        f"{setup} ({summary['final_pass_rate']:.0%} final)", [lo, summary["lift"], hi], scale=100
    )


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The command line, with the defaults that depend on other options filled in."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument(
        "--benchmark",
        choices=list(BENCHMARKS),
        default=IFBENCH.name,
        help="the prompts and verifiers: IFBench's (default) or IFEval's (easier)",
    )
    parser.add_argument(
        "--quick", action="store_true", help="a smoke run: 2 prompts, SmolLM2 only, 48 tokens"
    )
    parser.add_argument(
        "--n",
        type=int,
        default=None,
        help=f"prompts (default: the published subset, {PUBLISHED_N} of IFBench, "
        f"{IFEVAL_PUBLISHED_N} of IFEval; quick: 2)",
    )
    parser.add_argument("--models", nargs="+", default=None, choices=MODELS)
    parser.add_argument("--setups", nargs="+", default=list(SETUPS), choices=SETUPS)
    parser.add_argument(
        "--templates",
        nargs="+",
        default=["default"],
        metavar="NAME[@T]",
        help=f"feedback templates to measure ({', '.join(TEMPLATES)}); @T samples retries at "
        "temperature T",
    )
    parser.add_argument(
        "--strategies",
        nargs="+",
        default=[],
        choices=list(STRATEGIES),
        help="the SDK's RetryStrategy variants to measure (setup verifiers{NAME})",
    )
    parser.add_argument("--max-tokens", type=int, default=DEFAULT_MAX_TOKENS)
    # One llama.cpp thread: on a shared 2-core machine two threads spin-wait for each other
    # while descheduled (measured here: 1 thread did 6 attempts in 48 s, 2 threads 3 in ~8 min).
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--ctx", type=int, default=4096)
    parser.add_argument(
        "--dump",
        # The harness (`nox -s bench`) passes no arguments: this keeps a full run's attempts.
        default=os.environ.get("JEVREFINE_BENCH_QUALITY_DUMP") or None,
        help="write every attempt here (JSONL; default $JEVREFINE_BENCH_QUALITY_DUMP)",
    )
    parser.add_argument("--skip", type=int, default=0, help="start after this many prompts")
    parser.add_argument(
        "--resume", action="store_true", help="keep --dump's rows and skip the prompts it holds"
    )
    parser.add_argument(
        "--cache",
        default=os.environ.get("JEVREFINE_BENCH_QUALITY_CACHE") or None,
        metavar="FILE.jsonl",
        help="keep generations here and reuse them across runs (default "
        "$JEVREFINE_BENCH_QUALITY_CACHE)",
    )
    parser.add_argument(
        "--part",
        nargs=2,
        type=int,
        default=None,
        metavar=("K", "M"),
        help="run part K of M of the prompts (every M-th from the K-th), for split runs",
    )
    parser.add_argument(
        "--cases", nargs="+", default=None, metavar="ID", help="only these cases of the subset"
    )
    parser.add_argument(
        "--first", action="store_true", help="the first N prompts, not N evenly spaced ones"
    )
    parser.add_argument("--plots", default=None, metavar="DIR", help="write the PNG plots here")
    parser.add_argument(
        "--dev",
        action="store_true",
        help="N prompts from outside the published subset (to tune the loop on)",
    )
    parser.add_argument(
        "--from-dump", nargs="+", default=None, metavar="FILE", help="report on --dump files"
    )
    args = parser.parse_args(argv)
    unknown = [t for t in args.templates if parse_variant(t)[0] not in TEMPLATES]
    if unknown:
        parser.error(f"unknown template(s) {unknown}; known: {', '.join(TEMPLATES)}")
    if args.resume and not args.dump:
        parser.error("--resume continues a --dump file: pass --dump FILE.jsonl too")
    args.command = "python -m benchmarks.bench_quality " + " ".join(argv or sys.argv[1:])
    if args.n is None:
        args.n = 2 if args.quick else BENCHMARKS[args.benchmark].published_n
    if args.quick and args.max_tokens == DEFAULT_MAX_TOKENS:
        args.max_tokens = 48  # a smoke test of the wiring, not a measurement
    if args.models is None:
        args.models = ["smollm2-135m"] if args.quick else list(MODELS)
    return args


def main(argv: list[str] | None = None) -> None:
    anyio.run(run, parse_args(argv))


if __name__ == "__main__":
    main()
