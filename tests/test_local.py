"""The local model server and model file acquisition."""

from __future__ import annotations

from pathlib import Path

import pytest

from jevrefine.local import (
    LocalModelServer,
    LocalModelUnavailableError,
    cache_dir,
    locate_model,
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
