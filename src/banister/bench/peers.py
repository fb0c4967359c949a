"""One small interface over banister and the peer engines, so a benchmark drives them all alike.

The peers are optional (`pip install banister[bench]`, plus XGrammar without its CUDA dependencies);
an engine whose package is missing raises ``ImportError`` naming the package when it is created.
Every engine is built from the same banister ``Vocabulary`` so they all see identical tokens.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from importlib import metadata
from typing import Any, Protocol

import numpy as np

from banister.compiler import Compiler
from banister.mask.kernels import warm_up
from banister.matcher import Matcher
from banister.vocab import Vocabulary


class EngineMatcher(Protocol):
    def fill(self, bitmask: np.ndarray) -> None:
        """Write the next-token mask into a 1-row int32 bitmask."""

    def accept(self, token: int) -> bool:
        """Advance by one token; False when the engine rejects it."""


class Engine(Protocol):
    name: str

    def compile_regex(self, pattern: str) -> Any: ...

    def compile_json_schema(self, schema: dict[str, Any]) -> Any: ...

    def matcher(self, compiled: Any) -> EngineMatcher: ...


class BanisterEngine:
    name = "banister"

    def __init__(self, vocab: Vocabulary, encode: Callable[[str], list[int]]) -> None:
        self.vocab = vocab
        self.compiler = Compiler(vocab, cache_size=0)
        warm_up()  # numba's code loads now, as each peer's native code is loaded before timing

    def compile_regex(self, pattern: str) -> Any:
        return self.compiler.regex(pattern)

    def compile_json_schema(self, schema: dict[str, Any]) -> Any:
        return self.compiler.json_schema(schema)  # type: ignore[attr-defined]

    def matcher(self, compiled: Any) -> EngineMatcher:
        m = Matcher(compiled)
        return _Adapter(fill=m.fill_next_token_bitmask, accept=m.accept_token)

    def forced_token_count(self, compiled: Any, tokens: list[int]) -> int | None:
        """How many of ``tokens`` (a valid instance) lie entirely inside the bytes the grammar forces;
        None when the grammar does not accept the instance whole.

        Before each token the matcher's jump-forward bytes are computed; the token counts when its
        bytes are a prefix of them (an engine could have appended it without sampling).
        """
        m = Matcher(compiled)
        forced = 0
        for token in tokens:
            data = self.vocab.token_bytes(token)
            if data and m.jump_forward_bytes().startswith(data):
                forced += 1
            if not m.accept_token(token):
                return None
        return forced if m.is_accepting() else None


class LLGuidanceEngine:
    name = "llguidance"

    def __init__(self, vocab: Vocabulary, encode: Callable[[str], list[int]]) -> None:
        import llguidance
        import llguidance.numpy

        self._ll = llguidance
        self._fill = llguidance.numpy.fill_next_token_bitmask
        self.tokenizer = llguidance.LLTokenizer(llguidance.TokenizerWrapper(_GuidanceTokenizer(vocab, encode)))

    def compile_regex(self, pattern: str) -> Any:
        return self._ll.LLMatcher.grammar_from_regex(pattern)

    def compile_json_schema(self, schema: dict[str, Any]) -> Any:
        return self._ll.LLMatcher.grammar_from_json_schema(json.dumps(schema))

    def matcher(self, compiled: Any) -> EngineMatcher:
        # llguidance compiles the grammar when a matcher is made and reports a bad one there, as vLLM
        # reads it; a separate validate_grammar_with_warnings call would compile it a second time.
        m = self._ll.LLMatcher(self.tokenizer, compiled, log_level=0)
        if m.is_error():
            raise ValueError(m.get_error())
        return _Adapter(fill=lambda bitmask: self._fill(m, bitmask), accept=m.consume_token)


class XGrammarEngine:
    name = "xgrammar"

    def __init__(self, vocab: Vocabulary, encode: Callable[[str], list[int]]) -> None:
        import xgrammar

        self._xgr = xgrammar
        encoded = [vocab.token_bytes(i) for i in range(vocab.vocab_size)]
        info = xgrammar.TokenizerInfo(encoded, xgrammar.VocabType.RAW, vocab_size=vocab.vocab_size,
                                      stop_token_ids=list(vocab.eos_token_ids))
        self.compiler = xgrammar.GrammarCompiler(info, max_threads=1, cache_enabled=False)

    def compile_regex(self, pattern: str) -> Any:
        return self.compiler.compile_regex(pattern)

    def compile_json_schema(self, schema: dict[str, Any]) -> Any:
        return self.compiler.compile_json_schema(json.dumps(schema), any_whitespace=True, strict_mode=False)

    def matcher(self, compiled: Any) -> EngineMatcher:
        import torch

        m = self._xgr.GrammarMatcher(compiled)
        held: list[Any] = [None, None]  # the last bitmask and its torch view, made once per bitmask

        def fill(bitmask: np.ndarray) -> None:
            if held[0] is not bitmask:  # (a serving engine holds a tensor; a view per mask costs 0.4 us)
                held[:] = [bitmask, torch.from_numpy(bitmask)]
            m.fill_next_token_bitmask(held[1])

        return _Adapter(fill=fill, accept=m.accept_token)


class OutlinesCoreEngine:
    name = "outlines-core"

    def __init__(self, vocab: Vocabulary, encode: Callable[[str], list[int]]) -> None:
        import outlines_core

        self._oc = outlines_core
        by_bytes: dict[bytes, list[int]] = {}
        for tid in range(len(vocab.tokens)):
            if vocab.is_matchable(tid):
                by_bytes.setdefault(vocab.tokens[tid], []).append(tid)
        self.vocabulary = outlines_core.Vocabulary(vocab.eos_token_ids[0], by_bytes)

    def compile_regex(self, pattern: str) -> Any:
        return self._oc.Index(pattern, self.vocabulary)

    def compile_json_schema(self, schema: dict[str, Any]) -> Any:
        return self.compile_regex(self._oc.json_schema.build_regex_from_schema(json.dumps(schema)))

    def matcher(self, compiled: Any) -> EngineMatcher:
        guide = self._oc.Guide(compiled)

        def accept(token: int) -> bool:
            try:
                guide.advance(token, return_tokens=False)
            except ValueError:
                return False
            return True

        return _Adapter(fill=lambda bitmask: guide.write_mask_into(bitmask.ctypes.data, bitmask.size,
                                                                   bitmask.itemsize), accept=accept)


ENGINES: dict[str, type] = {
    "banister": BanisterEngine,
    "llguidance": LLGuidanceEngine,
    "xgrammar": XGrammarEngine,
    "outlines-core": OutlinesCoreEngine,
}


def engine_versions(names: list[str]) -> dict[str, str]:
    """What each engine of ``names`` runs: banister's version and the digest of its sources
    (:func:`banister._build.source_digest`), a peer's installed version ("not installed" when missing;
    each peer is named after its distribution)."""
    from banister import __version__, _build

    versions = {}
    for name in names:
        if name == "banister":
            versions[name] = f"{__version__} (sources {_build.source_digest()})"
        else:
            try:
                versions[name] = metadata.version(name)
            except metadata.PackageNotFoundError:
                versions[name] = "not installed"
    return versions


def make_engine(name: str, vocab: Vocabulary, encode: Callable[[str], list[int]]) -> Engine:
    """Build engine ``name`` over ``vocab`` and its real tokeniser ``encode``.

    Raises ``ImportError`` when the engine's package is not installed.
    """
    try:
        cls = ENGINES[name]
    except KeyError:
        raise ValueError(f"unknown engine {name!r}; known: {', '.join(ENGINES)}") from None
    return cls(vocab, encode)


class _Adapter:
    def __init__(self, fill: Any, accept: Any) -> None:
        self.fill = fill
        self.accept = accept


class _GuidanceTokenizer:
    """What llguidance's TokenizerWrapper reads: tokens as bytes, EOS, specials and the real encoder."""

    def __init__(self, vocab: Vocabulary, encode: Callable[[str], list[int]]) -> None:
        self.eos_token_id = vocab.eos_token_ids[0]
        self.bos_token_id = None
        self.tokens = [vocab.token_bytes(i) for i in range(vocab.vocab_size)]
        self.special_token_ids = sorted(vocab.special_token_ids)
        self._encode = encode

    def __call__(self, text: str) -> list[int]:
        return self._encode(text)

