"""Guided decoding for one sequence: the grammar from SamplingParams, token healing, closing early.

A :class:`Guide` wraps the sequence's :class:`~banister.Matcher` (or none, for free text) together
with the token-healing prefix that the output must start with. :func:`closing_bytes` finds
a short completion of a grammar, for closing a structure within the token budget.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterator
from functools import cached_property

import numpy as np

from banister.compiler import CompiledGrammar, Compiler
from banister.engine.types import RequestOptions
from banister.matcher import Matcher
from banister.sampling import SamplingParams
from banister.vocab import Vocabulary

#: JSON compile options the engine uses unless a request's ``json_options`` say otherwise: single-line
#: JSON with ``json.dumps``' separators, so the grammar forces (and jump-forward skips) every
#: separator and key (see docs/engine.md for the measurement).
DEFAULT_JSON_OPTIONS = {"whitespace": "pretty"}

# Most automaton states closing_bytes visits before giving up.
_SEARCH_LIMIT = 4000


def compile_request(compiler: Compiler, params: SamplingParams, options: RequestOptions) -> CompiledGrammar | None:
    """The compiled grammar of a request's structured-output field, or None for free text.

    A precompiled ``options.grammar`` is used as is (``ValueError`` when a structured-output field is
    set too, or when it was compiled for another vocabulary). Compile errors (``RegexError``,
    ``SchemaError``, ``GrammarError``, ``LimitError``) propagate.
    """
    if options.grammar is not None:
        given = [name for name in ("regex", "choice", "json_schema", "grammar") if getattr(params, name) is not None]
        if given or params.json_object:
            raise ValueError(f"RequestOptions.grammar and SamplingParams.{(given or ['json_object'])[0]} both given")
        theirs = options.grammar.vocab
        if theirs is not compiler.vocab and theirs.fingerprint != compiler.vocab.fingerprint:
            raise ValueError("RequestOptions.grammar was compiled for another vocabulary than the engine's")
        return options.grammar
    if params.regex is not None:
        return compiler.regex(params.regex)
    if params.choice is not None:
        return compiler.choice(params.choice)
    json_options = {**DEFAULT_JSON_OPTIONS, **options.json_options}
    if params.json_schema is not None:
        return compiler.json_schema(params.json_schema, **json_options)
    if params.grammar is not None:
        return compiler.grammar(params.grammar, syntax=options.grammar_syntax)
    if params.json_object:
        return compiler.json(**json_options)
    return None


class VocabIndex:
    """Lookups over a vocabulary's token bytes that guided decoding needs (built lazily, once).

    Parameters
    ----------
    vocab:
        The model's vocabulary.
    """

    def __init__(self, vocab: Vocabulary) -> None:
        self.vocab = vocab
        self._matchable = [t for t in range(len(vocab.tokens)) if vocab.is_matchable(t)]

    @cached_property
    def by_bytes(self) -> dict[bytes, int]:
        """Bytes -> the lowest matchable token id with exactly those bytes."""
        table: dict[bytes, int] = {}
        for t in self._matchable:
            table.setdefault(self.vocab.tokens[t], t)
        return table

    @cached_property
    def extendable(self) -> np.ndarray:
        """bool per id: the token's bytes are a proper prefix of another matchable token's bytes."""
        prefixes = {tok[:k] for tok in self.by_bytes for k in range(1, len(tok))}
        out = np.zeros(self.vocab.vocab_size, dtype=bool)
        for t in self._matchable:
            out[t] = self.vocab.tokens[t] in prefixes
        return out

    @cached_property
    def _longest(self) -> int:
        return max((len(b) for b in self.by_bytes), default=0)

    def greedy_tokens(self, data: bytes) -> list[int] | None:
        """Longest-match tokens spelling ``data`` exactly, or None when some byte has no token."""
        ids, i = [], 0
        while i < len(data):
            for size in range(min(self._longest, len(data) - i), 0, -1):
                token = self.by_bytes.get(data[i : i + size])
                if token is not None:
                    ids.append(token)
                    i += size
                    break
            else:
                return None
        return ids

    def healing_candidates(self, prefix: bytes) -> tuple[list[int], list[int]]:
        """(tokens whose bytes are a non-empty prefix of ``prefix``, tokens whose bytes start with it)."""
        inside = [t for k in range(1, len(prefix) + 1) if (t := self.by_bytes.get(prefix[:k])) is not None]
        beyond = [t for t in self._matchable if self.vocab.tokens[t].startswith(prefix)]
        return inside, beyond


class Guide:
    """The constraint on one sequence's output: an optional grammar and an optional healing prefix.

    While the healing prefix is pending, a token is allowed when its bytes are a prefix of the
    pending text, or start with it and continue validly into the grammar. After that the matcher
    alone decides. :attr:`healing_tokens` counts the output tokens spent on the prefix; those are
    never rolled back.

    Parameters
    ----------
    compiled:
        The grammar, or None for free text.
    heal:
        Bytes the output must start with (token healing); ``b""`` for none.
    index:
        Lookups over the vocabulary.
    """

    def __init__(self, compiled: CompiledGrammar | None, heal: bytes, index: VocabIndex) -> None:
        self.matcher = Matcher(compiled) if compiled is not None else None
        self.heal = heal
        self.healing_tokens = 0
        self._index = index
        self._words = (index.vocab.vocab_size + 31) // 32

    @property
    def constrained(self) -> bool:
        """Whether this step's tokens are restricted at all."""
        return self.matcher is not None or bool(self.heal)

    def is_terminated(self) -> bool:
        """Whether the grammar is done (EOS accepted, or complete and unable to grow)."""
        return not self.heal and self.matcher is not None and self.matcher.is_terminated()

    def is_complete(self) -> bool:
        """Whether the output so far satisfies the constraint (free text always does)."""
        return not self.heal and (self.matcher is None or self.matcher.is_accepting() or self.matcher.is_terminated())

    def fill(self, row: np.ndarray) -> None:
        """Write the allowed next tokens into one int32 bitmask row."""
        if not self.heal:
            if self.matcher is None:
                row[:] = -1
            else:
                self.matcher.fill_next_token_bitmask(row)
            return
        inside, beyond = self._index.healing_candidates(self.heal)
        tokens = self._index.vocab.tokens
        allowed = inside + [
            t for t in beyond
            if self.matcher is None or self.matcher.status(tokens[t][len(self.heal) :]) != "dead"
        ]  # fmt: skip
        ids = np.asarray(allowed, dtype=np.int64)
        words = np.zeros(self._words, dtype=np.uint32)
        np.bitwise_or.at(words, ids >> 5, (np.uint32(1) << (ids & 31).astype(np.uint32)))
        row[:] = words.view(np.int32)

    def accept(self, token: int) -> bool:
        """Take a sampled or forced token; False (nothing changed) when it is not allowed."""
        if not self.heal:
            return self.matcher is None or self.matcher.accept_token(token)
        if not self._index.vocab.is_matchable(token):
            return False
        data = self._index.vocab.tokens[token]
        if self.heal.startswith(data):
            self.heal = self.heal[len(data) :]
        elif data.startswith(self.heal):
            rest = data[len(self.heal) :]
            if rest and self.matcher is not None and not self.matcher.accept_string(rest):
                return False
            self.heal = b""
        else:
            return False
        self.healing_tokens += 1
        return True


def closing_bytes(compiled: CompiledGrammar, state: Hashable) -> bytes | None:
    """Bytes that take ``state`` to a complete match (``b""`` if it is one), or None if none is found.

    A depth-first search that takes forced bytes in one move and otherwise tries closing bytes
    first (quote, brackets, ``0``, comma...), openers last, and never visits a state twice. It finds
    a short completion for JSON-like grammars, not always the shortest; None when a few thousand
    states did not reach one. Read-only (the automaton only caches).
    """
    automaton = compiled.automaton
    if automaton.is_accepting(state):
        return b""
    seen = {state}
    stack = [(state, b"", _steps(compiled, state))]
    while stack:
        current, path, steps = stack[-1]
        for step in steps:
            nxt = automaton.advance(current, step)
            if nxt is None or nxt in seen:
                continue
            if automaton.is_accepting(nxt):
                return path + step
            if len(seen) >= _SEARCH_LIMIT:
                return None
            seen.add(nxt)
            stack.append((nxt, path + step, _steps(compiled, nxt)))
            break
        else:
            stack.pop()
    return None


_CLOSING_FIRST = b'"}])0,:' + bytes(range(ord("a"), ord("z") + 1)) + bytes(range(ord("A"), ord("Z") + 1))
_CLOSING_FIRST += b"123456789-._@/+'>" + b"{[( \n"
_PREFERENCE = [bytes([b]) for b in _CLOSING_FIRST] + [bytes([b]) for b in range(256) if b not in _CLOSING_FIRST]


def _steps(compiled: CompiledGrammar, state: Hashable) -> Iterator[bytes]:
    forced = compiled.automaton.forced_bytes(state)
    return iter([forced] if forced else _PREFERENCE)
