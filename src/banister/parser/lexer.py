"""Lexer contexts: one product DFA for each set of lexemes the parser may accept next.

A context's state is the tuple of every lexeme's DFA state (0 = the dead tuple). ``accept_id[s]`` names
the set of lexemes that have matched in full at state ``s`` (-1 when none), so the recogniser can end
the lexeme there. Transitions are computed once per byte class (bytes that every component DFA treats
alike), so building a context costs states x classes, not states x 256.
"""

from __future__ import annotations

import itertools
import re
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from functools import lru_cache

import numpy as np

from banister.errors import LimitError
from banister.regex import DEAD, RegexDFA, compile_regex

_context_ids = itertools.count()


class LexemeDFA:
    """The complete DFA of one lexeme, as plain arrays (what lexer contexts and trie walks read).

    ``transitions`` is int32 ``(n_states, 256)`` with no missing row (dead state 0), ``accepting`` is
    bool ``(n_states,)``, ``byte_class`` gives bytes that every state treats alike the same id. Only the
    arrays are kept: the regex's NFA and subset bookkeeping would be millions of small objects for the
    garbage collector to scan once thousands of lexemes are cached.
    """

    __slots__ = ("accepting", "byte_class", "n_states", "start", "transitions")

    def __init__(self, dfa: RegexDFA) -> None:
        table = np.ascontiguousarray(dfa.transitions, dtype=np.int32)
        if table.size and int(table.min()) < 0:
            raise RuntimeError("lexeme DFA with an unexpanded row")
        accepting = np.array(dfa.accepting, dtype=np.bool_)  # (writable: the kernels take plain arrays)
        self.transitions = table
        self.accepting = accepting
        self.start = int(dfa.start)
        self.n_states = int(dfa.n_states)
        classes = getattr(dfa, "_byte_class", None)  # the DFA's own byte classes, when it exposes them
        self.byte_class = np.asarray(classes, dtype=np.int64) if classes is not None and len(classes) == 256 \
            else _column_classes(table)

    @classmethod
    def from_table(cls, transitions: np.ndarray, accepting: np.ndarray, start: int) -> LexemeDFA:
        """A DFA given as its arrays (complete rows, dead state 0); byte classes are found here."""
        self = cls.__new__(cls)
        self.transitions = np.ascontiguousarray(transitions, dtype=np.int32)
        self.accepting = np.asarray(accepting, dtype=np.bool_)
        self.start = int(start)
        self.n_states = int(self.transitions.shape[0])
        self.byte_class = _column_classes(self.transitions)
        return self

    @classmethod
    def literal(cls, data: bytes) -> LexemeDFA:
        """The DFA of exactly ``data``: state ``i + 1`` has read ``i`` bytes (0 is dead)."""
        self = cls.__new__(cls)
        n = len(data)
        table = np.zeros((n + 2, 256), dtype=np.int32)
        table[np.arange(1, n + 1), np.frombuffer(data, dtype=np.uint8)] = np.arange(2, n + 2, dtype=np.int32)
        accepting = np.zeros(n + 2, dtype=np.bool_)
        accepting[n + 1] = True
        self.transitions = table
        self.accepting = accepting
        self.start = 1
        self.n_states = n + 2
        used = np.unique(np.frombuffer(data, dtype=np.uint8))
        byte_class = np.zeros(256, dtype=np.int64)  # each byte of the text its own class, the rest one
        byte_class[used] = np.arange(1, used.size + 1)
        self.byte_class = byte_class
        return self

    def is_accepting(self, state: int) -> bool:
        return bool(self.accepting[state])


def _column_classes(table: np.ndarray) -> np.ndarray:
    """Byte classes of a transition table: bytes whose columns are equal share an id."""
    columns = np.ascontiguousarray(table.T)
    ids: dict[bytes, int] = {}
    return np.asarray([ids.setdefault(columns[b].tobytes(), len(ids)) for b in range(256)], dtype=np.int64)


_builders: OrderedDict[str, Callable[[int], LexemeDFA]] = OrderedDict()
_builders_lock = threading.Lock()
MAX_LEXEME_BUILDERS = 4096


def offer_builder(pattern: str, build: Callable[[int], LexemeDFA]) -> None:
    """Let :func:`lexeme_dfa` build ``pattern``'s DFA with ``build(max_states)`` instead of the regex
    compiler: a front end that knows the automaton behind a long regex hands it over this way. The
    pattern stays the definition (tests compare the two); the most recent offers are kept."""
    with _builders_lock:
        _builders[pattern] = build
        _builders.move_to_end(pattern)
        while len(_builders) > MAX_LEXEME_BUILDERS:
            _builders.popitem(last=False)


@lru_cache(maxsize=8192)
def lexeme_dfa(pattern: str, max_states: int) -> LexemeDFA:
    """The fully built DFA of a lexeme, shared by every grammar (lexemes recur across schemas).

    A plain literal (most lexemes: property names, punctuation, enum strings) is built directly from
    its bytes, a pattern a front end offered a builder for (:func:`offer_builder`) by that builder;
    anything else goes through the regex compiler.
    """
    data = _literal_bytes(pattern)
    if data is not None and len(data) + 2 <= max_states:
        return LexemeDFA.literal(data)
    with _builders_lock:
        build = _builders.get(pattern)
    if build is not None:
        built = build(max_states)
        if built.n_states <= max_states:
            return built
    dfa = compile_regex(pattern, max_states=max_states)
    state = 1  # every state is created reachable from the start: complete rows until none is missing
    while state < dfa.n_states:
        dfa.step(state, 0)
        state += 1
    return LexemeDFA(dfa)


_LITERAL = re.compile(r"(?:[^\\^$.|?*+()\[\]{}]|\\[^0-9A-Za-z]|\\u\{[0-9A-Fa-f]{1,6}\})*", re.DOTALL)
_LITERAL_ESCAPE = re.compile(r"\\(?:u\{([0-9A-Fa-f]{1,6})\}|(.))", re.DOTALL)


def _literal_bytes(pattern: str) -> bytes | None:
    """The UTF-8 text a regex ``pattern`` matches when it is a plain literal (characters and escaped
    punctuation, ``\\u{H}`` escapes); None for anything else."""
    if _LITERAL.fullmatch(pattern) is None:
        return None
    if "\\" not in pattern:
        text = pattern
    else:
        out = []
        pos = 0
        for m in _LITERAL_ESCAPE.finditer(pattern):
            out.append(pattern[pos : m.start()])
            if m.group(1) is not None:
                cp = int(m.group(1), 16)
                if cp > 0x10FFFF or 0xD800 <= cp <= 0xDFFF:
                    return None
                out.append(chr(cp))
            else:
                out.append(m.group(2))
            pos = m.end()
        out.append(pattern[pos:])
        text = "".join(out)
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate: leave it to the regex compiler's errors
        return None


_BLOCK_STATES = 256
"""Lexeme DFAs up to this many states are copied whole into a product context (see _build_product)."""


CONTEXT_CACHE_BYTES = 256 << 20
"""Most bytes of transition tables the process-wide cache of lexer contexts keeps (least recently used
contexts go first; a grammar keeps the contexts it has used)."""

_context_cache: OrderedDict[tuple[frozenset[str], int], LexerContext] = OrderedDict()
_context_cache_bytes = 0
_context_cache_lock = threading.Lock()


def lexer_context(patterns: frozenset[str], max_states: int) -> LexerContext:
    """The lexer context of a set of lexeme patterns, shared by every grammar that allows that set."""
    global _context_cache_bytes
    key = (patterns, max_states)
    with _context_cache_lock:
        ctx = _context_cache.get(key)
        if ctx is not None:
            _context_cache.move_to_end(key)
            return ctx
    ctx = LexerContext(patterns, max_states=max_states)
    size = ctx.table_bytes()
    with _context_cache_lock:
        if key not in _context_cache:
            _context_cache[key] = ctx
            _context_cache_bytes += size
            while _context_cache_bytes > CONTEXT_CACHE_BYTES and len(_context_cache) > 1:
                _, old = _context_cache.popitem(last=False)
                _context_cache_bytes -= old.table_bytes()
        return _context_cache[key]


class LexerContext:
    """The product DFA of a set of lexemes; built eagerly, immutable afterwards.

    ``patterns[i]`` is lexeme ``i`` of this context; ``accept_sets`` hold such indices. ``ident`` is
    unique in the process, so caches keyed by it can be shared across grammars.

    A context of one lexeme is that lexeme's DFA itself (no product to build). Otherwise the product
    is explored from the start tuple, reading only the components still alive in each state (most
    states of a context have one live lexeme: a key literal and the other-keys lexeme part after one
    character), one step per combined byte class.
    """

    def __init__(self, patterns: frozenset[str], *, max_states: int) -> None:
        self.ident = next(_context_ids)
        self.patterns: tuple[str, ...] = tuple(sorted(patterns))
        comps = [lexeme_dfa(p, max_states) for p in self.patterns]
        k = len(comps)
        self._live: dict[int, bytes] = {}
        if k == 1:
            dfa = comps[0]
            self.transitions = dfa.transitions
            self.start = int(dfa.start)
            self.n_states = int(dfa.n_states)
            self.components: Sequence[tuple[int, ...]] = _Singletons(self.n_states)
            self.accept_id = np.where(dfa.accepting, 0, -1).astype(np.int32)
            accept_sets = {frozenset((0,)): 0} if bool(dfa.accepting.any()) else {}
        else:
            self._build_product(comps, max_states)
            accept_sets = self._accept_sets
        self.accept_index = accept_sets  # accept set (lexeme indices) -> its id
        self.accept_sets: list[frozenset[int]] = list(accept_sets)
        self.accept_patterns: list[frozenset[str]] = [frozenset(self.patterns[i] for i in acc) for acc in accept_sets]
        self.accepting = self.accept_id >= 0

    def table_bytes(self) -> int:
        """Bytes of the arrays this context reads (what the process-wide cache of contexts counts)."""
        return self.transitions.nbytes + self.accept_id.nbytes + self.accepting.nbytes

    def _build_product(self, comps: list[LexemeDFA], max_states: int) -> None:
        k = len(comps)
        # Combined byte classes (bytes every component treats alike), refined one component at a time.
        combined = np.zeros(256, dtype=np.int64)
        radix = 1
        for d in comps:
            size = int(d.byte_class.max()) + 1
            if radix * size >= 1 << 62:  # compress before the mixed-radix key overflows
                combined = np.unique(combined, return_inverse=True)[1].reshape(-1).astype(np.int64)
                radix = int(combined.max()) + 1
            combined = combined * size + d.byte_class
            radix *= size
        _, first, class_of = np.unique(combined, return_index=True, return_inverse=True)
        reps: list[int] = first.tolist()
        rep_index = first.astype(np.intp)
        class_of = class_of.reshape(-1)
        tables = [d.transitions for d in comps]
        rows: list[dict[int, list[int]]] = [{} for _ in comps]  # component state -> its row by class

        def row(i: int, s: int) -> list[int]:
            r = rows[i].get(s)
            if r is None:
                r = rows[i][s] = tables[i][s, rep_index].tolist()
            return r

        n_classes = len(reps)
        dead = (DEAD,) * k
        start = tuple(int(d.start) for d in comps)
        # States with several live lexemes are explored here one by one; a state with one live lexeme
        # ``j`` is that lexeme's DFA state, and everything after it is too: the first time one is
        # reached, lexeme ``j``'s whole DFA is embedded as a block of states (``block_base[j] + s``),
        # its rows copied in one numpy step instead of explored in Python. A lexeme DFA of more than
        # _BLOCK_STATES states is explored instead (a state late in a big DFA may reach few others).
        index: dict[tuple[int, ...], int] = {dead: 0}
        order: list[tuple[int, ...]] = [dead]  # the explored (multi-live) states, by exploration order
        ids: list[int] = [0]  # their state ids
        lives: list[list[int]] = [[]]
        out_rows: list[list[int]] = [[0] * n_classes]
        block_base: dict[int, int] = {}
        n_total = [1]

        def block(j: int) -> int:
            base = block_base.get(j)
            if base is None:
                base = block_base[j] = n_total[0] - 1  # lexeme state s >= 1 is state base + s
                n_total[0] += comps[j].n_states - 1
            return base

        def new_state(nxt: tuple[int, ...], live: list[int]) -> int:
            if len(order) >= max_states:
                raise LimitError(
                    f"a lexer context of {k} lexemes needs more than {max_states} states", "max_lexer_states"
                )
            n = index[nxt] = n_total[0]
            n_total[0] += 1
            order.append(nxt)
            ids.append(n)
            lives.append(live)
            return n

        small = [d.n_states <= _BLOCK_STATES for d in comps]
        start_live = [j for j, s in enumerate(start) if s != DEAD]
        if len(start_live) == 1 and small[start_live[0]]:
            self.start = block(start_live[0]) + start[start_live[0]]
        elif start_live:
            self.start = new_state(start, start_live)
        else:
            self.start = 0
        i = 1
        while i < len(order):
            cur = order[i]
            live = lives[i]
            if len(live) == 1:  # one live lexeme too big to embed: explored like the others
                j = live[0]
                targets: list = row(j, cur[j])
                local: dict = {}
                for t in set(targets):
                    if not t:
                        local[t] = 0
                        continue
                    nxt = dead[:j] + (t,) + dead[j + 1 :]
                    n = index.get(nxt)
                    local[t] = new_state(nxt, [j]) if n is None else n
                out_rows.append([local[t] for t in targets])
                i += 1
                continue
            targets = list(zip(*(row(j, cur[j]) for j in live)))
            local = {}
            for combo in set(targets):
                alive = [(j, t) for j, t in zip(live, combo) if t != DEAD]
                if not alive:
                    local[combo] = 0
                elif len(alive) == 1 and small[alive[0][0]]:
                    j, t = alive[0]
                    local[combo] = block(j) + t
                else:
                    nxt_list = list(dead)
                    for j, t in alive:
                        nxt_list[j] = t
                    nxt = tuple(nxt_list)
                    n = index.get(nxt)
                    local[combo] = new_state(nxt, [j for j, _ in alive]) if n is None else n
            out_rows.append([local[t] for t in targets])
            i += 1
        total = n_total[0]
        if total > 8 * max_states:  # a memory guard: blocks are bounded by their lexemes' own limits
            raise LimitError(f"a lexer context of {k} lexemes needs more than {8 * max_states} states",
                             "max_lexer_states")
        transitions = np.zeros((total, 256), dtype=np.int32)
        by_class = np.asarray(out_rows, dtype=np.int32).reshape(len(order), n_classes)
        transitions[np.asarray(ids, dtype=np.intp)] = by_class[:, class_of]
        accept_sets: dict[frozenset[int], int] = {}
        accept_id = np.full(total, -1, dtype=np.int32)
        accepting = [d.accepting.tolist() for d in comps]
        for n, tup, live in zip(ids, order, lives):
            acc = frozenset(j for j in live if accepting[j][tup[j]])
            if acc:
                accept_id[n] = accept_sets.setdefault(acc, len(accept_sets))
        blocks = []
        for j, base in sorted(block_base.items(), key=lambda item: item[1]):
            d = comps[j]
            rows_j = d.transitions[1:]
            transitions[base + 1 : base + d.n_states] = np.where(rows_j != 0, rows_j + base, 0)
            if bool(d.accepting[1:].any()):
                accept_id[base + 1 : base + d.n_states][d.accepting[1:]] = accept_sets.setdefault(
                    frozenset((j,)), len(accept_sets))
            blocks.append((base + 1, base + d.n_states, j, base))
        self.transitions = transitions
        self.n_states = total
        self.components = _ProductComponents(total, dead, {n: tup for n, tup in zip(ids, order)}, blocks)
        self.accept_id = accept_id
        self._accept_sets = accept_sets

    def live_bytes(self, state: int) -> bytes:
        """The bytes that lead ``state`` to a live state (computed on first use)."""
        found = self._live.get(state)
        if found is None:
            found = self._live[state] = np.flatnonzero(self.transitions[state]).astype(np.uint8).tobytes()
        return found


class _ProductComponents:
    """``components`` of a product context: explored states by id, block states from their lexeme."""

    __slots__ = ("_blocks", "_dead", "_explored", "_n")

    def __init__(self, n: int, dead: tuple[int, ...], explored: dict[int, tuple[int, ...]],
                 blocks: list[tuple[int, int, int, int]]) -> None:
        self._n = n
        self._dead = dead
        self._explored = explored
        self._blocks = blocks  # (first id, end id, lexeme, base)

    def __len__(self) -> int:
        return self._n

    def __getitem__(self, s: int) -> tuple[int, ...]:
        found = self._explored.get(s)
        if found is not None:
            return found
        for first, end, j, base in self._blocks:
            if first <= s < end:
                return self._dead[:j] + (s - base,) + self._dead[j + 1 :]
        raise IndexError(s)


class _Singletons:
    """``components`` of a one-lexeme context: state ``s`` is the tuple ``(s,)``."""

    __slots__ = ("_n",)

    def __init__(self, n: int) -> None:
        self._n = n

    def __len__(self) -> int:
        return self._n

    def __getitem__(self, s: int) -> tuple[int, ...]:
        if not 0 <= s < self._n:
            raise IndexError(s)
        return (s,)


