"""The token automaton of a grammar: Earley over lexemes, lexer contexts, and cached trie walks.

A state is a frozenset of hypotheses ``(parse, context, lexer_state)``: the Earley state before the
current lexeme, the lexer context the parser allowed, and how far into the lexeme the text is. Lexing is
not greedy, so where a lexeme could end *and* continue both branches are kept; they are few and die
quickly. The initial hypothesis is ``(parse, None, 0)``: nothing of the first lexeme read yet.

Masks (the design note in DESIGN.md, "context-independent vs context-dependent tokens"): the tokens
that stay inside the current lexeme depend on the lexer state alone, so one trie walk per
``(context, lexer state)`` is cached with the *crossings* it found (trie nodes where a lexeme may
end). Only those few subtrees consult the parser: for each group of crossings the parser scans the
lexeme, and the subtrees are walked again in the next context; those walks are cached too, keyed by
the walk they came from and the context they continue in.
"""

from __future__ import annotations

import itertools
import threading
import weakref
from dataclasses import dataclass

import numpy as np

from banister.automaton import _WHOLE_TRIE, walk_tokens
from banister.grammar.ir import Grammar
from banister.mask.bitmask import bitmask_words
from banister.parser.earley import EarleyParser, EarleyTables, ParseState
from banister.parser.lexer import LexerContext, lexeme_dfa, lexer_context
from banister.regex import DEAD
from banister.vocab import Vocabulary

Hypothesis = tuple[ParseState, "LexerContext | None", int]
GrammarState = frozenset[Hypothesis]


@dataclass(frozen=True)
class _Walk:
    ident: int
    words: np.ndarray
    groups: tuple[tuple[int, np.ndarray], ...]  # (accept-set id, trie nodes below which it may end)


class GrammarAutomaton:
    """Implements the TokenAutomaton interface for a Grammar over a vocabulary."""

    def __init__(
        self,
        grammar: Grammar,
        vocab: Vocabulary,
        *,
        max_states: int = 10_000,
        max_grammar_symbols: int = 1 << 19,
    ) -> None:
        self.vocab = vocab
        self.grammar = grammar
        self._max_states = max_states
        dfas = {lex: lexeme_dfa(lex.pattern, max_states) for lex in grammar.lexemes}
        empty = frozenset(lex for lex, dfa in dfas.items() if dfa.start == DEAD)
        self.tables = EarleyTables(grammar, empty, max_symbols=max_grammar_symbols)
        self.parser = EarleyParser(self.tables)
        self._patterns = [lex.pattern for lex in self.tables.lexemes]
        self._lexeme_id = {p: i for i, p in enumerate(self._patterns)}
        self._contexts: dict[frozenset[int], LexerContext] = {}
        self._accepts: dict[tuple[int, int], frozenset[int]] = {}
        self._walks, self._lexeme_walks = _walk_caches(vocab)
        self._words = bitmask_words(vocab.vocab_size)
        self.initial: GrammarState = frozenset({(self.parser.initial, None, 0)})
        self.context(self.parser.initial)  # fail at compile time if the first context is too big

    # -- lexer contexts ---------------------------------------------------------------------------------

    def context(self, parse: ParseState) -> LexerContext:
        """The lexer context of the lexemes ``parse`` expects (shared across grammars by pattern set)."""
        ctx = self._contexts.get(parse.expected)
        if ctx is None:
            patterns = frozenset(self._patterns[i] for i in parse.expected)
            ctx = self._contexts[parse.expected] = lexer_context(patterns, self._max_states)
        return ctx

    def _scan(self, parse: ParseState, ctx: LexerContext, aid: int) -> ParseState | None:
        """The parse after the lexemes of accept set ``aid`` of ``ctx`` matched."""
        key = (ctx.ident, aid)
        lexemes = self._accepts.get(key)
        if lexemes is None:
            lexemes = self._accepts[key] = frozenset(self._lexeme_id[p] for p in ctx.accept_patterns[aid])
        return self.parser.scan(parse, lexemes)

    def _end(self, parse: ParseState, ctx: LexerContext, lex: int) -> ParseState | None:
        """The parse after ending the current lexeme here, or None when no lexeme is complete."""
        aid = int(ctx.accept_id[lex])
        return None if aid < 0 else self._scan(parse, ctx, aid)

    # -- the TokenAutomaton interface -------------------------------------------------------------------

    def advance(self, state: GrammarState, data: bytes) -> GrammarState | None:
        hyps = state
        for b in data:
            nxt: set[Hypothesis] = set()
            for parse, ctx, lex, _ in self._branches(hyps):
                s = int(ctx.transitions[lex, b])
                if s:
                    nxt.add((parse, ctx, s))
            if not nxt:
                return None
            hyps = frozenset(nxt)
        return hyps

    def is_accepting(self, state: GrammarState) -> bool:
        return any(boundary and parse.accepting for parse, _, _, boundary in self._branches(state))

    def is_final(self, state: GrammarState) -> bool:
        return self.is_accepting(state) and not self._live_bytes(state)

    def forced_bytes(self, state: GrammarState, limit: int = 1024) -> bytes:
        out = bytearray()
        while len(out) < limit and not self.is_accepting(state):
            live = self._live_bytes(state)
            if len(live) != 1:
                break
            byte = bytes(live)
            nxt = self.advance(state, byte)
            if nxt is None:  # a live byte always advances; stop rather than trust it blindly
                break
            out += byte
            state = nxt
        return bytes(out)

    def token_mask(self, state: GrammarState) -> np.ndarray:
        out = np.zeros(self._words, dtype=np.uint32)
        for parse, ctx, lex, _ in self._branches(state):
            self._collect((ctx.ident, lex), parse, ctx, lex, _WHOLE_TRIE, out)
        return out

    # -- internals --------------------------------------------------------------------------------------

    def _branches(self, state: GrammarState) -> list[tuple[ParseState, LexerContext, int, bool]]:
        """Where the next byte may be read: ``(parse, context, lexer state, at a lexeme boundary)``.

        A hypothesis inside a lexeme reads on in it; if the lexeme could end here, it also reads from
        the start of the next context, after the parser has scanned the lexeme.
        """
        out = []
        for parse, ctx, lex in state:
            if ctx is None:
                ctx = self.context(parse)
                out.append((parse, ctx, ctx.start, True))
                continue
            out.append((parse, ctx, lex, False))
            after = self._end(parse, ctx, lex)
            if after is not None:
                c2 = self.context(after)
                out.append((after, c2, c2.start, True))
        return out

    def _live_bytes(self, state: GrammarState) -> set[int]:
        live: set[int] = set()
        for _, ctx, lex, _ in self._branches(state):
            live.update(ctx.live_bytes[lex])
        return live

    def _collect(self, key: tuple, parse: ParseState, ctx: LexerContext, start: int, roots: np.ndarray,
                 out: np.ndarray) -> None:
        walk = self._walks.get(key)
        if walk is None:
            walk = self._walk(ctx, start, roots)
            if len(self._walks) >= MAX_CACHED_WALKS:
                self._walks.clear()
            self._walks[key] = walk
        out |= walk.words
        for aid, sub_roots in walk.groups:
            after = self._scan(parse, ctx, aid)
            if after is None:
                continue
            c2 = self.context(after)
            self._collect((walk.ident, aid, c2.ident), after, c2, c2.start, sub_roots, out)

    def _walk(self, ctx: LexerContext, start: int, roots: np.ndarray) -> _Walk:
        if roots is _WHOLE_TRIE and len(ctx.patterns) <= 62:
            return self._walk_by_lexeme(ctx, start)
        words = np.zeros(self._words, dtype=np.uint32)
        nodes, states = walk_tokens(self.vocab, ctx.transitions, ctx.accepting, start, roots, words)
        return self._grouped(words, nodes, ctx.accept_id[states])

    def _walk_by_lexeme(self, ctx: LexerContext, start: int) -> _Walk:
        """A whole-trie walk of a context state, assembled from the walks of its lexemes' states.

        The product is alive exactly when some lexeme is, so its allowed tokens are the union of the
        lexemes' own, and a crossing's accept set is the set of lexemes accepting at that node. The
        lexeme walks are cached per vocabulary and shared by every context and grammar that uses the
        lexeme: a new context costs a few ORs, not a walk of the trie.
        """
        words = np.zeros(self._words, dtype=np.uint32)
        nodes, bits = [], []
        for i, component in enumerate(ctx.components[start]):
            if component == DEAD:
                continue
            lexeme_words, crossings = self._lexeme_walk(ctx.patterns[i], int(component))
            words |= lexeme_words
            if crossings.size:
                nodes.append(crossings)
                bits.append(np.full(crossings.size, 1 << i, dtype=np.int64))
        if not nodes:
            return self._grouped(words, np.empty(0, dtype=np.int32), np.empty(0, dtype=np.int32))
        all_nodes, all_bits = np.concatenate(nodes), np.concatenate(bits)
        order = np.argsort(all_nodes, kind="stable")
        all_nodes, all_bits = all_nodes[order], all_bits[order]
        unique_nodes, first = np.unique(all_nodes, return_index=True)
        masks = np.bitwise_or.reduceat(all_bits, first)
        lookup = {}
        for m in np.unique(masks).tolist():
            lookup[m] = ctx.accept_index[frozenset(i for i in range(len(ctx.patterns)) if m >> i & 1)]
        aids = np.fromiter((lookup[m] for m in masks.tolist()), dtype=np.int32, count=masks.size)
        return self._grouped(words, unique_nodes.astype(np.int32), aids)

    def _lexeme_walk(self, pattern: str, state: int) -> tuple[np.ndarray, np.ndarray]:
        """(allowed words, crossing nodes) of one lexeme's DFA state over the whole trie (cached)."""
        key = (pattern, state)
        hit = self._lexeme_walks.get(key)
        if hit is None:
            dfa = lexeme_dfa(pattern, self._max_states)
            words = np.zeros(self._words, dtype=np.uint32)
            nodes, _ = walk_tokens(self.vocab, dfa.transitions, dfa.accepting, state, _WHOLE_TRIE, words)
            words.setflags(write=False)
            if len(self._lexeme_walks) >= MAX_CACHED_WALKS:
                self._lexeme_walks.clear()
            hit = self._lexeme_walks[key] = (words, nodes)
        return hit

    @staticmethod
    def _grouped(words: np.ndarray, nodes: np.ndarray, aids: np.ndarray) -> _Walk:
        groups = tuple((int(aid), np.ascontiguousarray(nodes[aids == aid])) for aid in np.unique(aids))
        words.setflags(write=False)
        return _Walk(next(_walk_ids), words, groups)


MAX_CACHED_WALKS = 200_000
"""Most trie walks cached per vocabulary (the cache is cleared when it fills)."""

_walk_ids = itertools.count()
_WalkCaches = tuple[dict[tuple, _Walk], dict[tuple[str, int], tuple[np.ndarray, np.ndarray]]]
_vocab_caches: weakref.WeakKeyDictionary[Vocabulary, _WalkCaches] = weakref.WeakKeyDictionary()
_vocab_caches_lock = threading.Lock()


def _walk_caches(vocab: Vocabulary) -> _WalkCaches:
    """The walks of one vocabulary, shared by all its grammars (lexemes and contexts recur across
    schemas): context walks by key, and lexeme walks by (pattern, DFA state)."""
    with _vocab_caches_lock:
        caches = _vocab_caches.get(vocab)
        if caches is None:
            caches = _vocab_caches[vocab] = ({}, {})
        return caches
