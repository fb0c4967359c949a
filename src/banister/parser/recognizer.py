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
the crossing nodes and the context they continue in (so every key's closing quote, say, shares one).
A context's walk is the union of its live lexemes' own DFA walks, cached per vocabulary by lexeme state
and crossing nodes: contexts recur as new sets of the same lexemes, and none needs a product table.
"""

from __future__ import annotations

import itertools
import threading
import weakref
from collections.abc import Mapping
from types import MappingProxyType
from typing import TypeAlias, cast

import numpy as np

from banister.automaton import _WHOLE_TRIE, walk_tokens
from banister.errors import GrammarError
from banister.grammar.ir import Grammar
from banister.mask.bitmask import bitmask_words
from banister.mask.kernels import run_walk
from banister.parser.earley import _MISSING, EarleyParser, EarleyTables, ParseState
from banister.parser.lexer import LexemeDFA, LexerContext, lexeme_is_empty, lexer_context
from banister.regex import DEAD
from banister.vocab import Vocabulary

Hypothesis = tuple[ParseState, "LexerContext | None", int]
GrammarState = frozenset[Hypothesis]


Tokens: TypeAlias = "tuple[np.ndarray | None, np.ndarray] | None"
"""A cached set of tokens: None for no token, ``(None, words)`` with every bitmask word, or
``(index, words)`` with only the non-zero words and their indices (most walks allow a few tokens:
a handful of words instead of 16 KiB each, and no page of fresh memory touched per walk)."""


_Walk = tuple
"""A cached walk: ``(tokens, groups)``, the tokens it allows and its crossing groups, each
``(accept-set id, trie nodes below which it may end, those nodes' bytes)``. The walks below the nodes
are cached by the bytes, so every context that crosses at the same nodes shares them (the closing
quote of any key, say). A plain tuple of arrays, bytes and ints: the garbage collector stops tracking
it after one look, and the cache holds hundreds of thousands of them."""


class GrammarAutomaton:
    """Implements the TokenAutomaton interface for a Grammar over a vocabulary.

    The grammar is read once, into the parser's integer tables, and not kept: a big schema's Grammar IR
    is hundreds of thousands of small objects that the garbage collector would otherwise scan for as
    long as the compiled grammar lives.
    """

    def __init__(
        self,
        grammar: Grammar,
        vocab: Vocabulary,
        *,
        max_states: int = 10_000,
        max_grammar_symbols: int = 1 << 19,
    ) -> None:
        self.vocab = vocab
        self._max_states = max_states
        empty = frozenset(lex for lex in grammar.lexemes if lexeme_is_empty(lex.pattern, max_states))
        self.tables = EarleyTables(grammar, empty, max_symbols=max_grammar_symbols)
        self.parser = EarleyParser(self.tables)
        self._patterns = [lex.pattern for lex in self.tables.lexemes]
        self._lexeme_id = {p: i for i, p in enumerate(self._patterns)}
        self._contexts: dict[frozenset[int], LexerContext] = {}
        self._accepts: dict[tuple[int, int], frozenset[int]] = {}
        self._walks, self._lexeme_walks, self._first_bytes, self._runs = _walk_caches(vocab)
        self._state_masks: dict[GrammarState, tuple[tuple, bool]] = {}  # see _sets and fill_mask
        self._merged_bytes = 0  # held by merged token sets (see fill_mask)
        self._words = bitmask_words(vocab.vocab_size)
        self._no_tokens = np.zeros(self._words, dtype=np.uint32)
        self._no_tokens.setflags(write=False)
        self.initial: GrammarState = frozenset({(self.parser.initial, None, 0)})
        # The first mask's token sets, which every request needs, are computed now (memoised on the
        # initial parse state): a context that is too big fails at compile time, and no request pays
        # it. The state itself is entered in the state memo by the first request's mask (see _sets).
        self._parts(self._branches(self.initial))

    # -- lexer contexts ---------------------------------------------------------------------------------

    def context(self, parse: ParseState) -> LexerContext:
        """The lexer context of the lexemes ``parse`` expects (shared across grammars by pattern set)."""
        ctx = self._contexts.get(parse.expected)
        return ctx if ctx is not None else self.context_of(parse.expected)

    def context_of(self, lexemes: frozenset[int]) -> LexerContext:
        """The lexer context of the parser's lexemes ``lexemes`` (ids). A hypothesis
        ``(parse, context_of(some), context_of(some).start)`` may end its next lexeme only as one of
        ``some`` of the lexemes ``parse`` expects (see parser/distinct.py)."""
        ctx = self._contexts.get(lexemes)
        if ctx is None:
            self._add_lexemes()
            patterns = frozenset(self._patterns[i] for i in lexemes)
            ctx = self._contexts[lexemes] = lexer_context(patterns, self._max_states)
        return ctx

    def lexemes_marked(self, mark: str) -> frozenset[int]:
        """The ids of the parser's lexemes (those its tables hold so far) whose patterns start with ``mark``."""
        self._add_lexemes()
        return frozenset(i for i, p in enumerate(self._patterns) if p.startswith(mark))

    def _add_lexemes(self) -> None:
        """Number the lexemes the parser's tables gained when they built pending rules (each is checked
        as a compile checks its lexemes: one that matches nothing breaks the front end's promise)."""
        if len(self._patterns) == len(self.tables.lexemes):
            return
        with _adding_lexemes:
            for lex in self.tables.lexemes[len(self._patterns):]:
                if lexeme_is_empty(lex.pattern, self._max_states):
                    raise GrammarError(f"internal: the deferred lexeme {lex.pattern[:80]!r} matches nothing")
                self._lexeme_id[lex.pattern] = len(self._patterns)
                self._patterns.append(lex.pattern)

    def _scan(self, parse: ParseState, ctx: LexerContext, aid: int) -> ParseState | None:
        """The parse after the lexemes of accept set ``aid`` of ``ctx`` matched."""
        key = (ctx.ident, aid)
        lexemes = self._accepts.get(key)
        if lexemes is None:
            lexemes = self._accepts[key] = frozenset(self._lexeme_id[p] for p in ctx.accept_patterns[aid])
        return self.parser.scan(parse, lexemes)

    def end_lexeme(self, parse: ParseState, ctx: LexerContext, lex: int) -> ParseState | None:
        """The parse after ending the current lexeme here, or None when no lexeme is complete."""
        aid = int(ctx.accept_id[lex])
        return None if aid < 0 else self._scan(parse, ctx, aid)

    # -- the TokenAutomaton interface -------------------------------------------------------------------

    def advance(self, state: GrammarState, data: bytes) -> GrammarState | None:
        hyps = state
        i, n = 0, len(data)
        while i < n:
            if len(hyps) == 1:
                # One hypothesis inside a lexeme that can't end here (most bytes): step its context
                # without building a state per byte.
                ((parse, ctx, lex),) = hyps
                if ctx is not None and ctx.accept_id[lex] < 0:
                    while i < n and ctx.accept_id[lex] < 0:
                        lex = ctx.step(lex, data[i])
                        if not lex:
                            return None
                        i += 1
                    hyps = frozenset(((parse, ctx, lex),))
                    continue
            nxt: set[Hypothesis] = set()
            b = data[i]
            for parse, ctx, lex, _ in self._branches(hyps):
                s = ctx.step(lex, b)
                if s:
                    nxt.add((parse, ctx, s))
            if not nxt:
                return None
            hyps = frozenset(nxt)
            i += 1
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
        return self._mask(self._sets(state)[0])

    def _mask(self, parts: tuple) -> np.ndarray:
        """The union of token sets ``parts`` as bitmask words (a cached array when there is one set)."""
        if not parts:
            return self._no_tokens
        if len(parts) == 1 and parts[0][0] is None:
            return parts[0][1]  # a cached walk's words (read-only), no copy
        out = np.empty(self._words, dtype=np.uint32)
        _or_into(out, parts)
        return out

    def fill_mask(self, state: GrammarState, row: np.ndarray) -> bool:
        """Write the bits of the tokens allowed next into ``row`` (uint32 words; EOS not included) and
        return :meth:`is_accepting` of ``state`` (both from one look at the state).

        Every word of ``row`` is written: the bits of :meth:`token_mask`, without building the mask
        first, and zeros past the vocabulary; a ``row`` shorter than the vocabulary's words gets the
        ones it has.
        """
        words = self._words
        found = self._state_masks.get(state)
        seen = found is not None
        parts, accepting = found if found is not None else self._sets(state)
        if row.shape[0] < words:
            row[:] = self._mask(parts)[: row.shape[0]]
            return accepting
        if row.shape[0] > words:
            row[words:] = 0
        out = row[:words]
        if len(parts) > 1:
            self._unite(state, parts, accepting, seen, out)
            return accepting
        if len(parts) == 1 and parts[0][0] is None:
            out[:] = parts[0][1]  # one dense set (most states seen before): a copy, no clearing
        else:
            _or_into(out, parts)
        return accepting

    def _unite(self, state: GrammarState, parts: tuple, accepting: bool, seen: bool, out: np.ndarray) -> None:
        """OR the token sets ``parts`` of ``state`` into ``out`` and, within the grammar's budget, keep the
        union as the state's one set, so that a later mask of the state (a string's interior, another
        request at the same point) is a copy: at once while the grammar has spent little on such sets,
        else from a state's second mask on (most states of a long generation are met once).

        Kept per grammar: shared by a vocabulary's grammars in a bounded cache, unions made the median
        single-instance mask cheaper but the whole dev split's mask p99 dearer, whatever the cache
        dropped first (docs/performance.md, "Process-wide caches").
        """
        dense = _or_into(out, parts)
        spent = self._merged_bytes
        if spent < MAX_EAGER_MERGED_BYTES or (seen and spent < MAX_MERGED_BYTES):
            merged = _kept(out, dense=dense)
            self._merged_bytes += merged[1].nbytes + (0 if merged[0] is None else merged[0].nbytes)
            self._state_masks[state] = ((merged,), accepting)

    def _sets(self, state: GrammarState) -> tuple[tuple, bool]:
        """(the token sets whose union is the mask of ``state``, whether it accepts), memoised by state
        (:meth:`fill_mask` replaces a state's sets by their union at its first or second mask)."""
        masks = self._state_masks
        found = masks.get(state)
        if found is None:
            branches = self._branches(state)
            accepting = any(boundary and parse.accepting for parse, _, _, boundary in branches)
            _make_room(masks, MAX_STATE_MASKS)
            found = masks[state] = (tuple(self._parts(branches)), accepting)
        return found

    def _parts(self, branches: list) -> list:
        """The token sets whose union is the mask of a state with these ``branches``.

        A branch's sets depend only on its parse state and lexer state, so they are memoised on the
        parse state (which requests of the same document shape share, see ``EarleyParser.scan``):
        the tokens of a string's interior, or of a position another request has been at, are a
        dict lookup.
        """
        parts: list = []
        for parse, ctx, lex, _ in branches:
            memo = parse.mask_memo
            if memo is None:
                memo = parse.mask_memo = {}
            key = (ctx.ident, lex)
            found = memo.get(key)
            if found is None:
                collected: list = []
                self._collect(key, parse, ctx, lex, _WHOLE_TRIE, b"", collected)
                found = memo[key] = tuple(collected)
            parts.extend(found)
        return parts

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
            after = self.end_lexeme(parse, ctx, lex)
            if after is not None:
                c2 = self.context(after)
                out.append((after, c2, c2.start, True))
        return out

    def _live_bytes(self, state: GrammarState) -> set[int]:
        live: set[int] = set()
        for _, ctx, lex, _ in self._branches(state):
            live.update(ctx.live_bytes(lex))
        return live

    def _collect(self, key: tuple, parse: ParseState, ctx: LexerContext, start: int, roots: np.ndarray,
                 roots_key: bytes, out: list) -> None:
        """Append to ``out`` the token sets allowed from ``start`` below ``roots`` (and below the
        crossings of that walk, in the contexts the parser continues in)."""
        walk = self._walks.get(key)
        if walk is None:
            walk = self._walk(ctx, start, roots, roots_key)
            _make_room(self._walks, MAX_CACHED_WALKS)
            self._walks[key] = walk
        tokens, groups = walk
        if tokens is not None:
            out.append(tokens)
        if not groups:
            return
        # The crossing path, inlined (it runs for every crossing of every cold mask): the memos of
        # ``_scan``, ``EarleyParser.scan`` and ``context`` are read here directly.
        accepts = self._accepts
        scans = self.parser.scans.get(parse, _NO_SCANS)
        for aid, sub_roots, sub_key in groups:
            akey = (ctx.ident, aid)
            lexemes = accepts.get(akey)
            if lexemes is None:
                lexemes = accepts[akey] = frozenset(self._lexeme_id[p] for p in ctx.accept_patterns[aid])
            scanned = scans.get(lexemes, _MISSING)
            after = self.parser.scan(parse, lexemes) if scanned is _MISSING else cast("ParseState | None", scanned)
            if after is None:
                continue
            c2 = self._contexts.get(after.expected)
            if c2 is None:
                c2 = self.context(after)
            self._collect((sub_key, c2.ident), after, c2, c2.start, sub_roots, sub_key, out)

    def _walk(self, ctx: LexerContext, start: int, roots: np.ndarray, roots_key: bytes) -> _Walk:
        """The walk of context state ``start`` below ``roots`` (``roots_key``: their bytes), assembled
        from the walks of its live lexemes' DFA states.

        The product is alive exactly when some lexeme is, so its allowed tokens are the union of the
        lexemes' own, and a crossing's accept set is the set of lexemes accepting at that node. The
        lexeme walks are cached per vocabulary and shared by every context and grammar that uses the
        lexeme: a new context costs a few ORs, not a walk of the trie (nor a product to walk).
        """
        alive = ctx.live(start)
        if len(alive) == 1:
            # One live lexeme (the common case): its walk is the context's, and every crossing ends
            # exactly that lexeme.
            i, component = alive[0]
            lexeme_tokens, crossings = self._lexeme_walk(ctx.dfas[i], component, roots, roots_key)
            groups = (_group(ctx.accept_set_id(frozenset((i,))), crossings),) if crossings.size else ()
            return (lexeme_tokens, groups)
        merged: list[Tokens] = []
        nodes: list[np.ndarray] = []
        crossing_lexemes: list[int] = []
        for i, component in alive:
            lexeme_tokens, crossings = self._lexeme_walk(ctx.dfas[i], component, roots, roots_key)
            if lexeme_tokens is not None:
                merged.append(lexeme_tokens)
            if crossings.size:
                nodes.append(crossings)
                crossing_lexemes.append(i)
        tokens = _union(merged, self._words)
        if not nodes:
            return (tokens, ())
        if len(nodes) == 1:
            return (tokens, (_group(ctx.accept_set_id(frozenset(crossing_lexemes)), nodes[0]),))
        small = sum(found.size for found in nodes) <= _SMALL_CROSSINGS
        return (tokens, (_few_crossing_groups if small else _crossing_groups)(ctx, nodes, crossing_lexemes))

    def _lexeme_walk(self, dfa: LexemeDFA, state: int, roots: np.ndarray, roots_key: bytes
                     ) -> tuple[Tokens, np.ndarray]:
        """(allowed tokens, crossing nodes) of one lexeme DFA's state below ``roots`` (cached, by the
        DFA's ``serial``)."""
        key = (dfa.serial, state, roots_key)
        hit = self._lexeme_walks.get(key)
        if hit is None:
            if dfa.shares is not None and state < dfa.shares[1]:  # another lexeme's state: its walk
                hit = self._lexeme_walk(dfa.shares[0], state, roots, roots_key)
            elif roots is _WHOLE_TRIE:
                hit = self._walk_from_run(dfa, state) if dfa.run is not None else None
                if hit is None and dfa.n_states > _LOOP_MIN_STATES:
                    hit = self._walk_from_loop(dfa, state)
            if hit is None:
                scratch = _scratch(self._words)
                try:
                    nodes, touched = walk_tokens(self.vocab, dfa.transitions, dfa.accepting, state, roots,
                                                 scratch)
                except BaseException:
                    scratch.fill(0)
                    raise
                hit = (_take(scratch, touched), nodes)
            _make_room(self._lexeme_walks, MAX_CACHED_WALKS)
            self._lexeme_walks[key] = hit
        return hit

    def _walk_from_run(self, dfa: LexemeDFA, state: int) -> tuple[Tokens, np.ndarray] | None:
        """The whole-trie walk of ``state`` of a counted run (a string of at most 30 characters, say)
        cut from the vocabulary's table of units per token, or None when ``state`` is not where a unit
        begins.

        Each layer of a run is a state of its own, and each walked the whole trie (half a millisecond
        on GPT-2's vocabulary, for every token of a string value a document generates); but with ``k``
        units read, a token is kept exactly when the units it needs leave it inside the bound, or when
        it closes the run within both bounds, and it crosses where it closes within them."""
        run = dfa.run
        assert run is not None
        k = run.units_read(state)
        if k is None:
            return None
        key = (run.unit.serial, run.after)
        table = self._runs.get(key)
        if table is None:
            table = self._runs[key] = _RunTable(self.vocab, run.unit, run.after)
        room = None if run.high is None else run.high - k
        return table.cut(max(run.low - k, 0), room, _scratch(self._words))

    def _walk_from_loop(self, dfa: LexemeDFA, state: int) -> tuple[Tokens, np.ndarray] | None:
        """The whole-trie walk of ``state`` derived from that of a looping state that reads most bytes
        alike, or None when ``state`` has no such state.

        Big lexemes have many states that differ from one loop in a few bytes: the other-keys lexeme
        after each prefix of a property name, say, is an open string except for the bytes that go on
        with a name. Tokens are told apart by their first byte, so the walk of ``state`` is the loop's
        walk without the tokens that start with one of those bytes, plus a walk of just those bytes'
        subtrees: a few hundred trie nodes instead of the whole trie.
        """
        row = dfa.transitions[state]
        loop, share = _main_target(row)
        if loop == state or share < _LOOP_SHARE or _main_target(dfa.transitions[loop])[0] != loop:
            return None
        differing = np.flatnonzero(row != dfa.transitions[loop])
        if differing.size > _MAX_DIFFERING:
            return None
        tokens, crossings = self._lexeme_walk(dfa, loop, _WHOLE_TRIE, b"")
        by_first = self._first_bytes
        # The tokens starting with each differing byte, found before the scratch is taken (finding them
        # walks in it too).
        starting = [by_first.tokens(self.vocab, b, self._words) for b in differing.tolist()]
        scratch = _scratch(self._words)
        try:
            if tokens is not None:
                _apply(scratch, tokens)
            for first in starting:
                if first is not None:
                    _clear(scratch, first)
            roots = by_first.nodes[differing]
            nodes, _ = walk_tokens(self.vocab, dfa.transitions, dfa.accepting, state, roots[roots >= 0], scratch,
                                   include_roots=True)
        except BaseException:
            scratch.fill(0)
            raise
        if crossings.size:
            crossings = by_first.not_starting_with(crossings, differing)
            nodes = np.sort(np.concatenate([crossings, nodes]))
        return _take(scratch), nodes


_adding_lexemes = threading.Lock()  # (rare: once per batch of deferred rules, in any grammar)


def _group(aid: int, nodes: np.ndarray) -> tuple[int, np.ndarray, bytes]:
    """One crossing group of a walk (see ``_Walk``)."""
    nodes = np.ascontiguousarray(nodes)
    return aid, nodes, nodes.tobytes()


_SMALL_CROSSINGS = 64
"""Crossings of several lexemes, this many nodes in all or fewer, are grouped in Python: sorting a few
dozen nodes with numpy is mostly its per-call overhead."""


def _few_crossing_groups(ctx: LexerContext, nodes: list[np.ndarray], lexemes: list[int]) -> tuple:
    """The crossing groups of a walk where lexeme ``lexemes[k]`` crosses at ``nodes[k]``: each node
    goes to the accept set of every lexeme crossing there; groups by accept set id, nodes ascending."""
    crossing: dict[int, list[int]] = {}
    for lexeme, found in zip(lexemes, nodes):
        for node in found.tolist():
            crossing.setdefault(node, []).append(lexeme)
    ordered = sorted(crossing)
    return _grouped(ordered, [ctx.accept_set_id(frozenset(crossing[node])) for node in ordered])


def _crossing_groups(ctx: LexerContext, nodes: list[np.ndarray], lexemes: list[int]) -> tuple:
    """:func:`_few_crossing_groups` for many nodes, sorted and grouped with numpy."""
    all_nodes = np.concatenate(nodes)
    owner = np.repeat(np.arange(len(nodes)), [n.size for n in nodes])
    order = np.argsort(all_nodes, kind="stable")
    all_nodes, owner = all_nodes[order], owner[order]
    unique_nodes, first = np.unique(all_nodes, return_index=True)
    if len(nodes) <= 62:  # the lexemes crossing at each node as the bits of one integer
        keys = np.bitwise_or.reduceat(np.left_shift(1, owner.astype(np.int64)), first).tolist()
        owners = {m: [b for b in range(len(nodes)) if m >> b & 1] for m in set(keys)}
    else:
        keys = [tuple(run) for run in np.split(owner, first[1:])]
        owners = {k: k for k in set(keys)}
    lookup = {k: ctx.accept_set_id(frozenset(lexemes[b] for b in bs)) for k, bs in owners.items()}
    aids = np.fromiter((lookup[k] for k in keys), dtype=np.int32, count=len(keys))
    unique_nodes = unique_nodes.astype(np.int32)
    if unique_nodes.size <= 256:  # a few hundred crossings: grouped without numpy's per-call overhead
        return _grouped(unique_nodes.tolist(), aids.tolist())
    return tuple(_group(int(aid), unique_nodes[aids == aid]) for aid in np.unique(aids))


def _grouped(nodes: list[int], aids: list[int]) -> tuple:
    """Crossing ``nodes`` (ascending) that end the accept sets ``aids``, grouped by accept set id."""
    by_aid: dict[int, list[int]] = {}
    for node, aid in zip(nodes, aids):
        by_aid.setdefault(aid, []).append(node)
    return tuple(_group(aid, np.array(found, dtype=np.int32)) for aid, found in sorted(by_aid.items()))


_NO_SCANS: Mapping = MappingProxyType({})  # the scan memo of a state nothing was scanned from yet

_LOOP_MIN_STATES = 16
"""Walks are derived from a loop's (``_walk_from_loop``) only in lexemes of more states (a small DFA
has few states to walk, each once) ..."""
_LOOP_SHARE = 64
"""... when at least this many bytes lead from the state into the loop ..."""
_MAX_DIFFERING = 64
"""... and at most this many bytes lead elsewhere than the loop's own."""

MAX_STATE_MASKS = 65_536
"""Most states whose masks a grammar keeps ready (the oldest go first, see :func:`_make_room`)."""
MAX_MERGED_BYTES = 64 << 20
"""Most bytes a grammar spends on merged token sets (see ``fill_mask``); past it, masks OR their parts."""
MAX_EAGER_MERGED_BYTES = 4 << 20
"""Bytes of merged token sets a grammar keeps from a state's first mask on (see ``fill_mask``)."""

MAX_CACHED_WALKS = 200_000
"""Most trie walks cached per vocabulary (the oldest go first, see :func:`_make_room`)."""


def _make_room(cache: dict, limit: int) -> None:
    """Before an entry goes into ``cache``: when it holds ``limit`` entries or more, drop its oldest,
    down to ``limit`` less a sixty-fourth.

    Clearing a full cache at once freed hundreds of thousands of arrays inside one mask: 150 to 250 ms
    on MaskBench's dev split, each time a vocabulary's walk cache filled. A sixty-fourth at a time
    costs a few milliseconds, and the walks made last, which the next masks need, stay. (Two threads
    may both evict: a key already gone is skipped.)"""
    if len(cache) >= limit:
        for key in list(itertools.islice(cache, len(cache) - limit + max(1, limit >> 6))):
            cache.pop(key, None)


_SPARSE_SHARE = 16
"""A walk's tokens are kept sparse when at most 1/16 of the bitmask words are non-zero."""
_scratches = threading.local()


def _scratch(n_words: int) -> np.ndarray:
    """This thread's all-zero bitmask of ``n_words`` words, for a walk to set bits in; hand it back
    all-zero (:func:`_take` does)."""
    found = getattr(_scratches, "by_size", None)
    if found is None:
        found = _scratches.by_size = {}
    words = found.get(n_words)
    if words is None:
        words = found[n_words] = np.zeros(n_words, dtype=np.uint32)
    return words


def _take(scratch: np.ndarray, touched: np.ndarray | None = None) -> Tokens:
    """The tokens set in ``scratch``, as a cached (read-only) token set; clears ``scratch``.

    ``touched``: the indices of its non-zero words when known (the walk kernel reports them), else
    they are counted and, for a sparse set, searched for (see :func:`_kept`).
    """
    index, words = _kept(scratch, touched)
    if index is None:  # dense: some word is set
        scratch.fill(0)
        return None, words
    if not index.size:
        return None
    scratch[index] = 0
    return index, words


def _kept(words: np.ndarray, index: np.ndarray | None = None, *, dense: bool = False
          ) -> tuple[np.ndarray | None, np.ndarray]:
    """A read-only copy of the bitmask ``words`` as a token set: sparse (the indices of its non-zero
    words, given as ``index`` or searched for, and their values) when at most 1/16 of them are
    non-zero, else (or when the caller knows it is ``dense``) dense."""
    # Counted first: the indices of a dense row's words would cost ten times a count (10 µs against 1
    # on Llama-3's 4,008 words).
    if dense or (np.count_nonzero(words) if index is None else index.size) * _SPARSE_SHARE > words.size:
        copy = words.copy()
        copy.setflags(write=False)
        return None, copy
    if index is None:
        index = np.flatnonzero(words)
    index = index.astype(np.intp)  # a copy: the caller's buffer is not kept
    values = words[index]
    index.setflags(write=False)
    values.setflags(write=False)
    return index, values


def _union(parts: list, n_words: int) -> Tokens:
    """The union of token sets ``parts`` over bitmasks of ``n_words`` words."""
    if len(parts) <= 1:
        return parts[0] if parts else None
    if any(index is None for index, _ in parts):  # the union of a dense set is dense
        out = np.empty(n_words, dtype=np.uint32)
        _or_into(out, parts)
        out.setflags(write=False)
        return None, out
    if sum(index.size for index, _ in parts) <= _SMALL_UNION:
        return _small_union(parts)
    if len(parts) > _FEW_PARTS:
        return _sorted_union(parts, n_words)
    scratch = _scratch(n_words)
    for part in parts:
        _apply(scratch, part)
    return _take(scratch)


_SMALL_UNION = 32
"""Sparse token sets with at most this many words in all are merged word by word in Python: faster than
ORing them into a whole bitmask and searching it for its non-zero words."""
_FEW_PARTS = 8
"""More sparse token sets than this are merged by sorting their words (:func:`_sorted_union`): a fixed
dozen numpy calls, where ORing each into a bitmask costs one call per set (the key position of an
object of fifty properties unites fifty sets)."""


def _sorted_union(parts: list, n_words: int) -> Tokens:
    """The union of many sparse token sets: their words sorted by index and ORed run by run, then
    taken as a walk's are (:func:`_take`: sparse or dense by the same rule)."""
    index = np.concatenate([part[0] for part in parts])
    words = np.concatenate([part[1] for part in parts])
    order = np.argsort(index, kind="stable")
    index, words = index[order], words[order]
    runs = np.flatnonzero(np.diff(index, prepend=-1))
    scratch = _scratch(n_words)
    scratch[index[runs]] = np.bitwise_or.reduceat(words, runs)
    return _take(scratch, index[runs])


def _small_union(parts: list) -> Tokens:
    """The union of sparse token sets ``parts`` (few words in all), as a sparse token set."""
    merged: dict[int, int] = {}
    for index, words in parts:
        for i, word in zip(index.tolist(), words.tolist()):
            merged[i] = merged.get(i, 0) | word
    order = sorted(merged)
    index = np.array(order, dtype=np.intp)
    values = np.array([merged[i] for i in order], dtype=np.uint32)
    index.setflags(write=False)
    values.setflags(write=False)
    return index, values


def _or_into(out: np.ndarray, parts: tuple | list) -> bool:
    """Write the union of token sets ``parts`` into the words ``out`` (all of them); True when one of
    the sets is dense (then so is the union). A dense set is copied in and the others ORed onto it
    (copying costs less than clearing and ORing); without one, ``out`` is cleared first. A plain loop,
    not a generator: many masks of a state seen before come here with one sparse set, and on GPT-2's
    vocabulary a generator and a copy of zeros cost 0.4 µs more than the whole of clearing and ORing
    (0.85 µs)."""
    dense = None
    for index, words in parts:
        if index is None:
            dense = words
            break
    if dense is None:
        out.fill(0)
    else:
        np.copyto(out, dense)
    for part in parts:
        if part[1] is not dense:
            _apply(out, part)
    return dense is not None


def _apply(out: np.ndarray, tokens: tuple[np.ndarray | None, np.ndarray]) -> None:
    """OR a (non-empty) token set into the words ``out``."""
    index, words = tokens
    if index is None:
        out |= words
    else:
        out[index] |= words  # the indices are distinct


def _main_target(row: np.ndarray) -> tuple[int, int]:
    """The live state most bytes of a DFA row lead to, and how many bytes do."""
    counts = np.bincount(row, minlength=1)
    counts[DEAD] = 0
    target = int(counts.argmax())
    return target, int(counts[target])


class _FirstBytes:
    """The token trie by first byte, per vocabulary: each byte's node below the root, and the tokens
    that start with it (found on first use)."""

    def __init__(self, vocab: Vocabulary) -> None:
        trie = vocab.trie
        top = np.flatnonzero(trie.depth == 1).astype(np.int32)  # the root's children
        self.nodes = np.full(256, -1, dtype=np.int32)
        self.nodes[trie.byte[top].astype(np.int64)] = top
        self._skip = trie.skip
        self._tokens: dict[int, Tokens] = {}

    def not_starting_with(self, nodes: np.ndarray, first: np.ndarray) -> np.ndarray:
        """The trie nodes of ``nodes`` (sorted) whose text starts with none of the bytes ``first``: in
        preorder, the nodes below one first byte are one run, cut out by two binary searches."""
        tops = self.nodes[first]
        tops = tops[tops >= 0]
        begin = np.searchsorted(nodes, tops)
        end = np.searchsorted(nodes, self._skip[tops])
        cut = np.flatnonzero(end > begin)
        if not cut.size:
            return nodes
        keep = np.ones(nodes.size, dtype=np.bool_)
        for a, b in zip(begin[cut].tolist(), end[cut].tolist()):
            keep[a:b] = False
        return nodes[keep]

    def tokens(self, vocab: Vocabulary, byte: int, n_words: int) -> Tokens:
        """The tokens whose text starts with ``byte``."""
        if byte not in self._tokens:
            node = self.nodes[byte : byte + 1]
            scratch = _scratch(n_words)
            if node[0] >= 0:
                _, touched = walk_tokens(vocab, _ANY_BYTES, _ANY_BYTES_ACCEPTING, 1, node, scratch,
                                         include_roots=True)
                self._tokens[byte] = _take(scratch, touched)
            else:
                self._tokens[byte] = None
        return self._tokens[byte]


_ANY_BYTES = np.ones((2, 256), dtype=np.int32)
_ANY_BYTES[DEAD] = 0
_ANY_BYTES_ACCEPTING = np.zeros(2, dtype=np.bool_)


def _clear(out: np.ndarray, tokens: tuple[np.ndarray | None, np.ndarray]) -> None:
    """Clear a (non-empty) token set's bits in the words ``out``."""
    index, words = tokens
    if index is None:
        out &= ~words
    else:
        out[index] &= ~words


class _RunTable:
    """A vocabulary's tokens by the units of a counted run they need (see ``_walk_from_run``), for one
    unit and closing bytes: one walk of the trie through the run without bounds.

    ``inside[r]`` holds the tokens that stay inside the run needing at most ``r`` units, ``closing[c]``
    those that close it after at most ``c`` (both cumulative, a bitmask per count); ``cross_nodes``
    are where the run can end with more bytes below (a cut that keeps them all shares them, as cuts to
    one count share runs of ``_by_units``: walks' crossings are only read, and left writable, since
    numba compiles its kernels again for a read-only array), ``cross_units`` their units."""

    def __init__(self, vocab: Vocabulary, unit: LexemeDFA, after: bytes) -> None:
        free = LexemeDFA.counted(unit, 0, None, b"", after)
        assert free.run is not None
        trie = vocab.trie
        n_words = bitmask_words(vocab.vocab_size)
        units = np.full(n_words * 32, -1, dtype=np.int32)
        closes = np.zeros(n_words * 32, dtype=np.bool_)
        nodes = np.empty(trie.byte.shape[0], dtype=np.int32)
        node_units = np.empty(trie.byte.shape[0], dtype=np.int32)
        n = run_walk(free.transitions, free.accepting, free.run.base, free.run.base + free.run.width, trie.byte,
                     trie.depth, trie.skip, trie.token_start, trie.token_ids, trie.max_depth, units, closes,
                     nodes, node_units)
        self.cross_nodes = nodes[:n].copy()
        self.cross_units = node_units[:n].copy()
        self._fewest = int(self.cross_units.min()) if n else 0
        self._most = int(self.cross_units.max()) if n else 0
        order = np.argsort(self.cross_units, kind="stable")  # by count, nodes ascending within one
        self._by_units = self.cross_nodes[order]
        self._starts = np.searchsorted(self.cross_units[order], np.arange(self._most + 2)).tolist()
        alive = units >= 0
        self.inside = _by_count(units, alive & ~closes, n_words)
        self.closing = _by_count(units, alive & closes, n_words)

    def cut(self, low: int, high: int | None, scratch: np.ndarray) -> tuple[Tokens, np.ndarray]:
        """The walk of a layer start with ``low`` to ``high`` (None: any number) units still to come
        before the run may close, given an all-zero ``scratch`` to assemble its tokens in."""
        last = self.inside.shape[0] - 1
        if last >= 0:
            scratch |= self.inside[last if high is None else min(high, last)]
        last = self.closing.shape[0] - 1
        top = last if high is None else min(high, last)
        if low <= top:
            if low:
                scratch |= self.closing[top] & ~self.closing[low - 1]
            else:
                scratch |= self.closing[top]
        if low <= self._fewest and (high is None or high >= self._most):  # every crossing: shared, not cut
            return _take(scratch), self.cross_nodes
        if low == high:  # one count (a block of a long string): a run of the crossings sorted by count
            found = self._by_units[self._starts[min(low, self._most + 1)] : self._starts[min(low + 1, self._most + 1)]]
            return _take(scratch), found
        units = self.cross_units
        keep = units >= low if high is None else (units >= low) & (units <= high)
        return _take(scratch), self.cross_nodes[keep]


def _by_count(counts: np.ndarray, selected: np.ndarray, n_words: int) -> np.ndarray:
    """Row ``c``: the bitmask of the ``selected`` tokens whose count is at most ``c`` (rows up to the
    largest count)."""
    tokens = np.flatnonzero(selected)
    found = counts[tokens]
    rows = np.zeros((int(found.max()) + 1 if found.size else 0, n_words), dtype=np.uint32)
    np.bitwise_or.at(rows, (found, tokens >> 5), np.left_shift(1, tokens & 31).astype(np.uint32))
    np.bitwise_or.accumulate(rows, axis=0, out=rows)
    return rows


_WalkCaches = tuple[dict[tuple, _Walk], dict[tuple[int, int, bytes], tuple[Tokens, np.ndarray]], _FirstBytes,
                    dict[tuple[int, bytes], _RunTable]]
_vocab_caches: weakref.WeakKeyDictionary[Vocabulary, _WalkCaches] = weakref.WeakKeyDictionary()
_vocab_caches_lock = threading.Lock()


def _walk_caches(vocab: Vocabulary) -> _WalkCaches:
    """The walks of one vocabulary, shared by all its grammars (lexemes and contexts recur across
    schemas): context walks by key, lexeme walks by (DFA serial, DFA state, roots), the trie by
    first byte, and the tables of counted runs by (unit serial, closing bytes)."""
    with _vocab_caches_lock:
        caches = _vocab_caches.get(vocab)
        if caches is None:
            caches = _vocab_caches[vocab] = ({}, {}, _FirstBytes(vocab), {})
        return caches
