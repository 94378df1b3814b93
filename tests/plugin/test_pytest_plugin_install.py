"""The pytest plugin in a fresh project that only installs jevrefine (the wheel, with pip).

The wheel is built from this checkout and pip-installs into a new virtual environment whose
only other packages are this interpreter's (jevrefine's dependencies and pytest, reached through
a `.pth` file, so nothing is downloaded but the build backend). The project has no conftest and
no `-p`: the fixtures, `assert_answer` and the marker must arrive through the entry point.
"""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
import venv
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[2]

PROJECT_TEST = """
import sys

import pytest

import jevrefine
from jevrefine.jev import JudgeClient
from jevrefine.pytest import assert_answer


def test_jevrefine_is_the_installed_wheel():
    assert jevrefine.__file__.startswith(sys.prefix), jevrefine.__file__


@pytest.mark.anyio
async def test_fixtures_and_assert_answer(fake_jev, function_model):
    fake_jev.answer = lambda state, questions: {"names_paris": 0.9}
    answer = function_model("Paris.")
    async with JudgeClient("test-key", base_url=fake_jev.base_url) as jev:
        verdict = await assert_answer("Paris.", "Names Paris?", judge=jev)
        fake_jev.answer = lambda state, questions: {"names_paris": 0.1}
        with pytest.raises(AssertionError, match=r"\\[FAILED\\] names_paris \\(P\\(yes\\) 0.10\\)"):
            await assert_answer("Lyon.", "Names Paris?", judge=jev)
    assert verdict.passed and len(fake_jev.requests) == 2
    assert answer.model_name == "function"


@pytest.mark.needs_key("H22_SURELY_UNSET_KEY")
def test_skipped_without_the_key():
    raise AssertionError("must not run")
"""


def _run(*command: str | Path, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTEST_ADDOPTS")}
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    return subprocess.run(
        [str(part) for part in command],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=280,
        check=False,
    )


def _ok(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 0, f"{result.args}\n{result.stdout}\n{result.stderr}"
    return result.stdout


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_a_fresh_project_gets_the_plugin_from_pip_install(tmp_path: Path) -> None:
    wheels = tmp_path / "wheels"
    _ok(_run(sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", wheels, ROOT))
    (wheel,) = wheels.glob("jevrefine-*.whl")

    env_dir = tmp_path / "venv"
    venv.create(env_dir, with_pip=False)
    python = env_dir / "bin" / "python"
    site = Path(
        _ok(_run(python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])")).strip()
    )
    # The dependencies come from this interpreter, after the venv's own packages on sys.path.
    shared = {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]}
    (site / "dependencies.pth").write_text("\n".join(sorted(shared)) + "\n")
    _ok(_run(sys.executable, "-m", "pip", "--python", python, "install", "--no-deps", "-q", wheel))

    project = tmp_path / "project"
    project.mkdir()
    (project / "test_app.py").write_text(PROJECT_TEST)
    result = _run(python, "-m", "pytest", "-rs", "-p", "no:cacheprovider", cwd=project)
    output = _ok(result)
    assert "2 passed, 1 skipped" in output, output
    assert "needs H22_SURELY_UNSET_KEY set in the environment (unset)" in output
