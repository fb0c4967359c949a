"""Lexer contexts: one product DFA for each set of lexemes the parser may accept next.

A context's state is the tuple of every lexeme's DFA state (0 = the dead tuple). ``accept_id[s]`` names
the set of lexemes that have matched in full at state ``s`` (-1 when none), so the recogniser can end
the lexeme there. Transitions are computed once per byte class (bytes that every component DFA treats
alike), so building a context costs states x classes, not states x 256.
"""

from __future__ import annotations

import itertools
from functools import lru_cache

import numpy as np

from banister.errors import LimitError
from banister.regex import DEAD, RegexDFA, compile_regex

_context_ids = itertools.count()


@lru_cache(maxsize=8192)
def lexeme_dfa(pattern: str, max_states: int) -> RegexDFA:
    """The fully built DFA of a lexeme, shared by every grammar (lexemes recur across schemas)."""
    dfa = compile_regex(pattern, max_states=max_states)
    dfa.expand_from(dfa.start)
    return dfa


@lru_cache(maxsize=8192)
def lexer_context(patterns: frozenset[str], max_states: int) -> LexerContext:
    """The lexer context of a set of lexeme patterns, shared by every grammar that allows that set."""
    return LexerContext(patterns, max_states=max_states)


class LexerContext:
    """The product DFA of a set of lexemes; built eagerly, immutable afterwards.

    ``patterns[i]`` is lexeme ``i`` of this context; ``accept_sets`` hold such indices. ``ident`` is
    unique in the process, so caches keyed by it can be shared across grammars.
    """

    def __init__(self, patterns: frozenset[str], *, max_states: int) -> None:
        self.ident = next(_context_ids)
        self.patterns: tuple[str, ...] = tuple(sorted(patterns))
        ids = range(len(self.patterns))
        comps = [lexeme_dfa(p, max_states) for p in self.patterns]
        tables = [d.transitions[: d.n_states] for d in comps]
        if tables:
            columns = np.concatenate(tables, axis=0).T  # 256 x total component states
            _, first, class_of = np.unique(columns, axis=0, return_index=True, return_inverse=True)
        else:
            first, class_of = np.zeros(1, dtype=np.int64), np.zeros(256, dtype=np.int64)
        class_of = class_of.reshape(-1)
        reps = [int(b) for b in first]
        start = tuple(d.start for d in comps)
        dead = tuple(DEAD for _ in comps)
        index: dict[tuple[int, ...], int] = {dead: 0}
        order: list[tuple[int, ...]] = [dead]
        rows: list[list[int]] = [[0] * len(reps)]
        if any(s != DEAD for s in start):
            index[start] = 1
            order.append(start)
        i = 1
        while i < len(order):
            cur = order[i]
            row = []
            for b in reps:
                nxt = tuple(t[s, b] if s != DEAD else DEAD for t, s in zip(tables, cur))
                j = index.get(nxt)
                if j is None:
                    if len(order) >= max_states:
                        raise LimitError(
                            f"a lexer context of {len(ids)} lexemes needs more than {max_states} states",
                            "max_lexer_states",
                        )
                    j = index[nxt] = len(order)
                    order.append(nxt)
                row.append(j)
            rows.append(row)
            i += 1
        by_class = np.asarray(rows, dtype=np.int32).reshape(len(order), len(reps))
        self.transitions = np.ascontiguousarray(by_class[:, class_of])
        self.start = 1 if len(order) > 1 else 0
        self.n_states = len(order)
        accept_sets: dict[frozenset[int], int] = {}
        accept_id = np.full(len(order), -1, dtype=np.int32)
        for s, tup in enumerate(order):
            acc = frozenset(lex for lex, comp, cs in zip(ids, comps, tup) if cs != DEAD and comp.is_accepting(int(cs)))
            if acc:
                accept_id[s] = accept_sets.setdefault(acc, len(accept_sets))
        self.components: list[tuple[int, ...]] = order  # each state's tuple of lexeme DFA states
        self.accept_id = accept_id
        self.accept_index = accept_sets  # accept set (lexeme indices) -> its id
        self.accept_sets: list[frozenset[int]] = list(accept_sets)
        self.accept_patterns: list[frozenset[str]] = [frozenset(self.patterns[i] for i in acc) for acc in accept_sets]
        self.accepting = accept_id >= 0
        live = self.transitions != 0
        self.live_bytes = [np.flatnonzero(live[s]).astype(np.uint8).tobytes() for s in range(len(order))]
