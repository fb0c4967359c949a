"""Lexer contexts: the product automaton of each set of lexemes the parser may accept next.

A context's state is the set of lexemes still alive, each with its DFA state (0 = none alive).
``accept_id[s]`` names the set of lexemes that have matched in full at ``s`` (-1 when none), so the
recogniser can end the lexeme there. States are numbered as the text reaches them, not built ahead.
"""

from __future__ import annotations

import itertools
import re
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable
from functools import lru_cache
from typing import Any, NamedTuple

import numpy as np

from banister.errors import LimitError, RegexError
from banister.regex import DEAD, Alternate, CharSet, Concat, Node, RegexDFA, Repeat, compile_regex, parse_regex

_context_ids = itertools.count()


def table_dtype(n_states: int) -> type[np.integer]:
    """The type of a transition table of ``n_states`` rows (a lexeme DFA's, a lexer context's): uint8
    when the states fit (most lexemes: literals, enums, property names; most contexts), int32
    otherwise. A quarter of the memory, and memory is time here: the pages of a new table are faulted
    in as it is written, and a process builds thousands."""
    return np.uint8 if n_states <= 256 else np.int32


_dfa_serials = itertools.count()


class LexemeDFA:
    """The complete DFA of one lexeme, as plain arrays (what lexer contexts and trie walks read).

    ``transitions`` is ``(n_states, 256)`` (:func:`table_dtype`) with no missing row (dead state 0),
    ``accepting`` is bool ``(n_states,)``. Only the arrays are kept: the regex's NFA and subset
    bookkeeping would be millions of small objects for the garbage collector to scan once thousands of
    lexemes are cached.

    ``shares`` is ``(dfa, n)`` when states ``1..n-1`` are, row for row, those of that other lexeme DFA
    (a builder grafted this DFA onto it), else None: the trie walks of those states are that DFA's,
    walked once for every lexeme grafted onto it.

    ``serial`` is unique in the process: what caches of walks key a DFA by. Not its pattern: a pattern
    whose DFA was dropped from the bounded cache (:func:`lexeme_dfa`) may be built again another way
    (an offered builder gone, the regex compiler instead), the same language with its states numbered
    otherwise, while contexts built with the first DFA live on.

    ``run`` is how :meth:`counted` laid out the states, else None: a trie walk from the start of one
    of its layers is then the vocabulary's table of units per token, cut at the bounds (see
    ``GrammarAutomaton._walk_from_run``), not a walk of its own.
    """

    __slots__ = ("accepting", "n_states", "run", "serial", "shares", "start", "transitions")

    def __init__(self, transitions: np.ndarray, accepting: np.ndarray, start: int, *,
                 shares: tuple[LexemeDFA, int] | None = None, run: Run | None = None) -> None:
        """A DFA given as its arrays (complete rows, dead state 0)."""
        self.transitions = np.ascontiguousarray(transitions, dtype=table_dtype(transitions.shape[0]))
        self.accepting = np.asarray(accepting, dtype=np.bool_)
        self.start = int(start)
        self.n_states = int(self.transitions.shape[0])
        self.shares = shares
        self.run = run
        self.serial = next(_dfa_serials)

    @classmethod
    def from_regex(cls, dfa: RegexDFA) -> LexemeDFA:
        """The arrays of a regex DFA whose rows are all computed."""
        table = dfa.transitions
        if table.size and int(table.min()) < 0:
            raise RuntimeError("lexeme DFA with an unexpanded row")
        # (accepting copied: the kernels take plain, writable arrays)
        return cls(table, np.array(dfa.accepting, dtype=np.bool_), int(dfa.start))

    @classmethod
    def literal(cls, data: bytes) -> LexemeDFA:
        """The DFA of exactly ``data``: state ``i + 1`` has read ``i`` bytes (0 is dead)."""
        n = len(data)
        table = np.zeros((n + 2, 256), dtype=table_dtype(n + 2))
        # One cell per byte, set from Python: every new schema's property names are built here, and a
        # fancy-indexed assignment took twice as long (a 10-byte name: 2.7 µs against 1.2, warm).
        cells = table.reshape(-1)
        for i, b in enumerate(data, 1):
            cells[i << 8 | b] = i + 1
        accepting = np.zeros(n + 2, dtype=np.bool_)
        accepting[n + 1] = True
        return cls(table, accepting, 1)

    @classmethod
    def strings(cls, texts: tuple[bytes, ...]) -> LexemeDFA:
        """The DFA of exactly ``texts`` (distinct): their trie, state 1 the root (0 is dead; with no
        text the start is dead)."""
        if not texts:
            return cls(np.zeros((1, 256), dtype=np.int32), np.zeros(1, dtype=np.bool_), DEAD)
        node, parents, labels = prefix_trie(texts)
        n = len(node) + 1
        table = np.zeros((n, 256), dtype=table_dtype(n))
        table[np.array(parents, dtype=np.intp) + 1, labels] = np.arange(2, n)
        accepting = np.zeros(n, dtype=np.bool_)
        accepting[[node[text] + 1 for text in texts]] = True
        return cls(table, accepting, 1)

    @classmethod
    def counted(cls, unit: LexemeDFA, low: int, high: int | None, before: bytes = b"", after: bytes = b"") -> LexemeDFA:
        """The DFA of ``before``, then ``low`` to ``high`` (None: no bound) texts of ``unit``, then ``after``:
        one layer of ``unit``'s states per count, filled in a few numpy steps (the regex compiler takes
        milliseconds over a counted run of a big unit, such as a JSON string of at most 32 characters).

        ``unit`` must accept only in states with no way out, never at its start, and no unit may start
        with the first byte of ``after`` (ValueError otherwise: the text would not split one way)."""
        u, final = unit.transitions, unit.accepting
        if final[unit.start] or u[final].any() or (after and u[unit.start, after[0]]):
            raise ValueError("a counted unit must end where it accepts and not start with the closing bytes")
        inner = [unit.start] + [q for q in range(1, unit.n_states) if not final[q] and q != unit.start]
        width = len(inner)  # states per layer; the layer's start (k units read) comes first
        layers = high if high is not None else low + 1  # full layers; a bounded run adds its top state
        base = 1 + len(before)
        top = base + layers * width
        n = top + (high is not None) + len(after)
        dtype = table_dtype(n)
        table = np.zeros((n, 256), dtype=dtype)
        if layers:
            # Layer 0's rows; layer k's are the same plus k layers wherever a byte leads somewhere (where
            # a unit ends, that is the next layer's start).
            index = np.zeros(unit.n_states, dtype=np.int64)
            index[inner] = base + np.arange(width)
            rows = u[inner]
            first = np.where(final[rows], base + width, index[rows]).astype(dtype)
            shift = (np.arange(layers, dtype=dtype) * width)[:, None, None]
            body = table[base:top].reshape(layers, width, 256)
            np.add(first, shift, out=body, where=(rows != DEAD)[None])
            if high is None:  # past ``low`` units, one more goes back to the last layer's start
                body[low][final[rows]] = base + low * width
        for i, byte in enumerate(before):
            table[1 + i, byte] = 2 + i if i + 1 < len(before) else base
        counts = range(low, high + 1) if high is not None else (low,)
        complete = [base + c * width for c in counts]
        accepting = np.zeros(n, dtype=np.bool_)
        if after:
            end = top + (high is not None)
            table[complete, after[0]] = end
            for i, byte in enumerate(after[1:]):
                table[end + i, byte] = end + i + 1
            accepting[n - 1] = True
        else:
            accepting[complete] = True
        run = Run(unit, low, high, base, width, after) if layers else None
        return cls(table, accepting, 1 if before else base, run=run)

    @staticmethod
    def counted_states(unit: LexemeDFA, low: int, high: int | None, before: bytes = b"", after: bytes = b"") -> int:
        """How many states :meth:`counted` makes for these arguments."""
        width = unit.n_states - int(unit.accepting.sum()) - 1
        layers = high if high is not None else low + 1
        return 1 + len(before) + layers * width + (high is not None) + len(after)

    def is_accepting(self, state: int) -> bool:
        return bool(self.accepting[state])


class Run(NamedTuple):
    """The layout of a :meth:`LexemeDFA.counted` DFA: ``low`` to ``high`` (None: no bound) texts of
    ``unit``, then ``after``; the state where ``k`` units have been read and the next begins is
    ``base + k * width`` (with no bound, ``k`` stops at ``low``, which loops)."""

    unit: LexemeDFA
    low: int
    high: int | None
    base: int
    width: int
    after: bytes

    def units_read(self, state: int) -> int | None:
        """How many units have been read at ``state`` when it is where one begins, else None."""
        k, offset = divmod(state - self.base, self.width)
        last = self.high if self.high is not None else self.low
        return k if offset == 0 and 0 <= k <= last and state >= self.base else None


def prefix_trie(texts: Iterable[bytes]) -> tuple[dict[bytes, int], list[int], list[int]]:
    """The trie of ``texts``: each prefix's node number (the empty one is 0, the others numbered as
    first met), and for nodes 1, 2, ... their parent's number and the byte that leads to them (what a
    DFA table is filled with in one numpy assignment)."""
    node = {b"": 0}
    parents: list[int] = []
    labels: list[int] = []
    for text in texts:
        for i in range(1, len(text) + 1):
            if text[:i] not in node:
                node[text[:i]] = len(node)
                parents.append(node[text[: i - 1]])
                labels.append(text[i - 1])
    return node, parents, labels


_builders: OrderedDict[str, tuple[Callable[[int], LexemeDFA], int]] = OrderedDict()
_builders_lock = threading.Lock()
MAX_LEXEME_BUILDERS = 4096


def offer_builder(pattern: str, build: Callable[[int], LexemeDFA], states: int) -> None:
    """Let :func:`lexeme_dfa` build ``pattern``'s DFA with ``build(max_states)`` instead of the regex
    compiler: a front end that knows the automaton behind a long regex hands it over this way. The
    offer says the language is not empty and ``build`` makes at most ``states`` states, so a grammar
    need not build it to learn either (:func:`lexeme_is_empty`). The pattern stays the definition
    (tests compare the two); the most recent offers are kept."""
    _keep(_builders, pattern, (build, states), MAX_LEXEME_BUILDERS)


_offered_texts: OrderedDict[str, tuple[bytes, ...]] = OrderedDict()  # under _builders_lock


def offer_texts(pattern: str, texts: Iterable[bytes]) -> None:
    """Tell :func:`finite_language` the texts ``pattern`` matches: a front end that wrote the pattern
    from them (an enum's strings) hands them over, so no lexeme check needs to parse the pattern back
    into them. The pattern stays the definition (tests compare the two); the most recent offers are
    kept (``MAX_LEXEME_BUILDERS``)."""
    _keep(_offered_texts, pattern, tuple(sorted(set(texts))), MAX_LEXEME_BUILDERS)


def _keep(table: OrderedDict[str, Any], pattern: str, value: Any, limit: int) -> None:
    """Enter what a front end hands over about ``pattern`` in one of the bounded tables of offers and
    hand-overs, as the most recent of its ``limit`` entries."""
    with _builders_lock:
        table[pattern] = value
        table.move_to_end(pattern)
        while len(table) > limit:
            table.popitem(last=False)


@lru_cache(maxsize=8192)
def lexeme_dfa(pattern: str, max_states: int) -> LexemeDFA:
    """The fully built DFA of a lexeme, shared by every grammar (lexemes recur across schemas).

    A plain literal (most lexemes: property names, punctuation, enum strings) is built directly from
    its bytes, a pattern a front end offered a builder for (:func:`offer_builder`) by that builder, a
    short finite language (:func:`finite_language`) as the trie of its texts; anything else goes
    through the regex compiler (completing the regex :func:`lexeme_language` compiled, if it did).
    """
    data = _literal_bytes(pattern)
    if data is not None and len(data) + 2 <= max_states:
        return LexemeDFA.literal(data)
    with _builders_lock:
        offer = _builders.get(pattern)
    if offer is not None:
        built = offer[0](max_states)
        if built.n_states <= max_states:
            return built
    texts = finite_language(pattern)
    if texts is not None and sum(map(len, texts)) + 2 <= max_states:
        return LexemeDFA.strings(texts)
    with _builders_lock:
        dfa = _front_end_regexes.pop(pattern, None)
    if dfa is None or dfa.max_states != max_states:
        dfa = compile_regex(pattern, max_states=max_states)
    state = 1  # every state is created reachable from the start: complete rows until none is missing
    while state < dfa.n_states:
        dfa.step(state, 0)
        state += 1
    return LexemeDFA.from_regex(dfa)


def lexeme_is_empty(pattern: str, max_states: int) -> bool:
    """Whether a lexeme matches nothing. A grammar asks it of every lexeme when it is compiled and
    builds a lexeme's DFA only when a mask first needs it: a literal, a short finite language and a
    pattern offered with a builder are answered without building their DFA (each is known to fit in
    ``max_states``, and is quick to build); any other pattern is built now, so a DFA that is too big
    fails at compile time, and no mask pays for the regex compiler. That holds for every grammar: the
    answer is not cached apart from the DFA (it was, and a DFA the bounded ``lexeme_dfa`` cache had
    dropped since was built again inside a mask: 64 ms in one of MaskBench's). (An offer pushed out of
    the bounded table, ``MAX_LEXEME_BUILDERS``, before a mask needs its DFA leaves it to the regex
    compiler: the same language, built more slowly.)"""
    quick = _quick_emptiness(pattern, max_states)
    return lexeme_dfa(pattern, max_states).start == DEAD if quick is None else quick


@lru_cache(maxsize=8192)
def _quick_emptiness(pattern: str, max_states: int) -> bool | None:
    """:func:`lexeme_is_empty` for a literal, an offered pattern or a short finite language (cached:
    lexemes recur across grammars); None for a pattern whose DFA must be built to tell."""
    data = _literal_bytes(pattern)
    if data is not None and len(data) + 2 <= max_states:
        return False
    with _builders_lock:
        offer = _builders.get(pattern)
    if offer is not None and offer[1] <= max_states:
        return False
    texts = finite_language(pattern)
    if texts is not None and sum(map(len, texts)) + 2 <= max_states:
        return not texts
    return None


@lru_cache(maxsize=8192)
def lexeme_language(pattern: str, max_nfa_states: int) -> tuple[bool, bool]:
    """(matches nothing, matches the empty string) for a lexeme pattern. Front ends ask it of every
    lexeme of every grammar, and lexemes recur across schemas: cached, and literals need no regex."""
    data = _literal_bytes(pattern)
    if data is not None and len(data) < max_nfa_states:
        return False, not data
    texts = finite_language(pattern)
    if texts is not None and sum(map(len, texts)) < max_nfa_states:
        return not texts, b"" in texts
    dfa = compile_regex(pattern, max_nfa_states=max_nfa_states)
    if dfa.nfa_states <= _HANDOVER_NFA_STATES:
        _keep(_front_end_regexes, pattern, dfa, _MAX_HANDOVERS)
    return dfa.start == DEAD, dfa.is_accepting(dfa.start)


_front_end_regexes: OrderedDict[str, RegexDFA] = OrderedDict()  # under _builders_lock, as the builders
"""The regexes :func:`lexeme_language` compiled most recently (its start state only), handed over to
:func:`lexeme_dfa`, which completes them rather than parsing and building the NFA again: a new schema's
lexemes are asked about by the front end, then built by the grammar's automaton."""
_MAX_HANDOVERS = 64
_HANDOVER_NFA_STATES = 20_000
"""Only regexes of up to this many NFA states are kept for the hand-over (a fifth of the regex compiler's
own NFA limit, so a pattern too big for it never gets through this way; an ``email`` string's is about
6,000, and compiling it twice cost 17 ms more)."""


MAX_FINITE_TEXTS = 1024
"""Most texts :func:`finite_language` lists for a pattern ..."""
MAX_FINITE_BYTES = 1 << 14
"""... and most bytes over all of them."""


@lru_cache(maxsize=2048)
def finite_language(pattern: str) -> tuple[bytes, ...] | None:
    """The texts (UTF-8, sorted) a lexeme pattern matches when they are few: an enum's strings, a choice
    of literals. None for an infinite language, a bigger one (``MAX_FINITE_TEXTS``, ``MAX_FINITE_BYTES``),
    an anchor or an extension, or a pattern that does not parse (the regex compiler reports it).
    A trie of them is the lexeme's DFA, built without the regex compiler's NFA and subsets (the bulk of
    a new schema's compile time when its enums are many). Texts a front end offered
    (:func:`offer_texts`) are taken as they are."""
    with _builders_lock:
        texts = _offered_texts.get(pattern)
    if texts is not None:
        return texts if len(texts) <= MAX_FINITE_TEXTS and sum(map(len, texts)) <= MAX_FINITE_BYTES else None
    if _UNBOUNDED.search(pattern):
        return None  # what may be a repeat with no bound, or an extension: not worth parsing to find out
    try:
        node = parse_regex(pattern, extensions=True)
    except (RegexError, LimitError):
        return None
    found = _texts(node)
    if found is None or sum(map(len, found)) > MAX_FINITE_BYTES:
        return None
    return tuple(sorted(set(found)))


_UNBOUNDED = re.compile(r"[*+]|,\}|\(\?[~@]")


def _texts(node: Node) -> list[bytes] | None:
    """Every text ``node`` matches (with repeats), or None past ``MAX_FINITE_TEXTS`` or where there is
    no finite list."""
    if type(node) is CharSet:
        if sum(hi - lo + 1 for lo, hi in node.ranges) > MAX_FINITE_TEXTS:
            return None
        return [chr(c).encode("utf-8") for lo, hi in node.ranges for c in range(lo, hi + 1)]
    if type(node) is Concat:
        out = [b""]
        for item in node.items:
            part = _texts(item)
            if part is None or len(out) * len(part) > MAX_FINITE_TEXTS:
                return None
            out = [a + b for a in out for b in part]
        return out
    if type(node) is Alternate:
        out = []
        for option in node.options:
            part = _texts(option)
            if part is None or len(out) + len(part) > MAX_FINITE_TEXTS:
                return None
            out += part
        return out
    if type(node) is Repeat and node.max is not None:
        each = _texts(node.item)
        if each is None:
            return None
        out, level = [], [b""]
        for k in range(node.max + 1):
            if k >= node.min:
                out += level
            if k < node.max:
                if len(level) * len(each) > MAX_FINITE_TEXTS or len(out) > MAX_FINITE_TEXTS:
                    return None
                level = [a + b for a in level for b in each]
        return out if len(out) <= MAX_FINITE_TEXTS else None
    return None  # an unbounded repeat, an anchor, an absent text or a machine


_LITERAL = re.compile(r"(?:[^\\^$.|?*+()\[\]{}]|\\[^0-9A-Za-z]|\\u\{[0-9A-Fa-f]{1,6}\})*", re.DOTALL)
_LITERAL_ESCAPE = re.compile(r"\\(?:u\{([0-9A-Fa-f]{1,6})\}|(.))", re.DOTALL)


@lru_cache(maxsize=16384)
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
"""Lexeme DFAs up to this many states are embedded whole in a context when first reached (see
:class:`LexerContext`); bigger ones are explored state by state."""
LAZY_BYTES = 16
"""A context state gets its successors one byte at a time, as text steps it, until more than this many
bytes have stepped it; then its whole row (see :meth:`LexerContext.step`). Bounds what the per-byte
successors hold."""


CONTEXT_CACHE_BYTES = 256 << 20
"""Most bytes of transition tables the process-wide cache of lexer contexts keeps (least recently used
contexts go first; a grammar keeps the contexts it has used)."""

_context_cache: OrderedDict[tuple[frozenset[str], int], LexerContext] = OrderedDict()
_context_cache_bytes = 0
_context_cache_lock = threading.Lock()


def lexer_context(patterns: frozenset[str], max_states: int) -> LexerContext:
    """The lexer context of a set of lexeme patterns, shared by every grammar that allows that set."""
    key = (patterns, max_states)
    with _context_cache_lock:
        ctx = _context_cache.get(key)
        if ctx is not None:
            _context_cache.move_to_end(key)
            return ctx
    ctx = LexerContext(patterns, max_states=max_states)
    with _context_cache_lock:
        if key not in _context_cache:
            _context_cache[key] = ctx
            ctx._counted = 0
        found = _context_cache[key]
    _account(found)
    return found


def _account(ctx: LexerContext) -> None:
    """Count a cached context's current table bytes against the cache's budget (contexts grow as they
    are explored) and drop the least recently used contexts past it."""
    global _context_cache_bytes
    with _context_cache_lock:
        if ctx._counted is None:  # not (or no longer) in the cache
            return
        size = ctx.table_bytes()
        _context_cache_bytes += size - ctx._counted
        ctx._counted = size
        while _context_cache_bytes > CONTEXT_CACHE_BYTES and len(_context_cache) > 1:
            _, old = _context_cache.popitem(last=False)
            _context_cache_bytes -= old._counted or 0  # (a cached context is counted)
            old._counted = None


_exploring = threading.RLock()
"""Serialises the exploration of every lexer context: short Python work under the GIL anyway, and a lock
per context was one more object per cached context for the garbage collector to track."""


Live = tuple[tuple[int, int], ...]
"""The lexemes alive in a context state: ``(lexeme index, its DFA state)`` pairs, by lexeme index."""


class LexerContext:
    """The product automaton of a set of lexemes, explored only as far as it is used.

    ``patterns[i]`` is lexeme ``i`` and ``dfas[i]`` its DFA as this context was built with it (read
    its states with that one, see ``LexemeDFA.serial``); a state is the set of lexemes still alive
    with their DFA states (:meth:`live`), numbered from 1 (0 is dead). ``accept_id[s]`` names the set of lexemes that have
    matched in full at ``s`` (-1 when none; ``accept_sets``/``accept_patterns`` by id). ``ident`` is
    unique in the process, so caches keyed by it can be shared across grammars.

    Nothing is built ahead: a state gets its number when some step first reaches it and its row of
    successors when a step first leaves it (:meth:`step`, :meth:`row`). A context of a hundred property
    names is a dictionary and a few rows, not the product of a hundred DFAs. A state where one lexeme of
    at most ``_BLOCK_STATES`` states is alive (most states: one literal after its first bytes) is that
    lexeme's own DFA state: the first time one is reached, the lexeme's whole DFA is embedded as a block
    of numbers (``base + state``), its rows copied in one numpy step. Token masks never read the product
    (the recogniser walks each live lexeme's own DFA); only text that is accepted steps through it.

    ``accept_id`` may be replaced by a bigger array as the context grows: read it from the context each
    time. Contexts are shared by threads; exploration is serialised by one process-wide lock.
    """

    # Slots, and tuples where nothing is added: the process-wide cache holds tens of thousands of
    # contexts, and every object of theirs that the collector tracks is scanned by each full collection.
    __slots__ = ("_block_base", "_blocks", "_cells", "_cells_made", "_counted",
                 "_expanded", "_index", "_live", "_live_bytes", "_max_states", "_n", "_small",
                 "_table", "accept_id", "accept_index", "accept_patterns", "accept_sets", "dfas", "ident",
                 "patterns", "start")

    def __init__(self, patterns: frozenset[str], *, max_states: int) -> None:
        self.ident = next(_context_ids)
        self.patterns: tuple[str, ...] = tuple(sorted(patterns))
        self.dfas = tuple(lexeme_dfa(p, max_states) for p in self.patterns)
        self._small = tuple(d.n_states <= _BLOCK_STATES for d in self.dfas)
        self._max_states = max_states
        self._counted: int | None = None  # bytes the process-wide cache counts for it (None: not cached)
        self.accept_index: dict[frozenset[int], int] = {}
        self.accept_sets: list[frozenset[int]] = []
        self.accept_patterns: tuple[tuple[str, ...], ...] = ()  # tuples of str: the collector drops them
        self._index: dict[Live, int] = {}  # explored states (several live lexemes, or one big one)
        self._live: dict[int, Live] = {}
        self._blocks: tuple[tuple[int, int, int, int], ...] = ()  # (first number, end, lexeme, base)
        self._block_base: dict[int, int] = {}
        self._live_bytes: dict[int, bytes] = {}
        self._cells: dict[int, int] = {}  # successors made one byte at a time, by state << 8 | byte (see step)
        self._cells_made: dict[int, int] = {}  # how many, by state
        if len(self.dfas) == 1 and self._small[0]:  # one lexeme: its DFA is the context, no copy
            d = self.dfas[0]
            self._table = d.transitions
            self._expanded = bytearray(b"\x01") * d.n_states
            aid = self.accept_set_id(frozenset((0,))) if bool(d.accepting.any()) else -1
            self.accept_id = np.where(d.accepting, aid, -1).astype(np.int32)
            self._n = d.n_states
            self._blocks = ((1, d.n_states, 0, 0),)
            self._block_base[0] = 0
            self.start = d.start
            return
        self._table = np.zeros((16, 256), dtype=table_dtype(16))
        self.accept_id = np.full(16, -1, dtype=np.int32)
        self._expanded = bytearray(16)
        self._expanded[DEAD] = 1  # the dead state's row is all dead
        self._n = 1
        with _exploring:
            self.start = self._intern(tuple((j, d.start) for j, d in enumerate(self.dfas) if d.start != DEAD))

    # -- reading ------------------------------------------------------------------------------------------

    def step(self, state: int, byte: int) -> int:
        """The state after reading ``byte`` in ``state`` (0: no lexeme can go on).

        Accepted text steps a state one byte at a time, so in a state whose row is not made yet only
        this byte's successor is: the whole row would number the successor of every byte (at a key's
        first byte, embedding the DFA of every property name). A state stepped by more than
        ``LAZY_BYTES`` different bytes gets its whole row."""
        if self._expanded[state]:
            return int(self._table[state, byte])
        found = self._cells.get(state << 8 | byte)
        return self._make_cell(state, byte) if found is None else found

    def _make_cell(self, state: int, byte: int) -> int:
        """Make the successor of one byte in a state without its row (see :meth:`step`)."""
        with _exploring:
            if not self._expanded[state]:
                made = self._cells_made[state] = self._cells_made.get(state, 0) + 1
                if made <= LAZY_BYTES:
                    live = self._live[state]
                    found = self._cells[state << 8 | byte] = self._intern(
                        tuple((j, t) for j, s in live if (t := int(self.dfas[j].transitions[s, byte])))
                    )
                    return found
                self._expand(state)
            return int(self._table[state, byte])

    def row(self, state: int) -> np.ndarray:
        """The successors of ``state`` by byte (256 entries, of the table's type: uint8 or int32; read-only use)."""
        if not self._expanded[state]:
            self._expand(state)
        return self._table[state]

    def live(self, state: int) -> Live:
        """The lexemes alive in ``state``, each with its own DFA state."""
        found = self._live.get(state)
        if found is not None:
            return found
        for first, end, j, base in self._blocks:
            if first <= state < end:
                return ((j, state - base),)
        return ()

    def live_bytes(self, state: int) -> bytes:
        """The bytes that lead ``state`` to a live state."""
        found = self._live_bytes.get(state)
        if found is None:
            found = self._live_bytes[state] = np.flatnonzero(self.row(state)).astype(np.uint8).tobytes()
        return found

    def accept_set_id(self, lexemes: frozenset[int]) -> int:
        """The id of a set of this context's lexemes (numbered on first use)."""
        found = self.accept_index.get(lexemes)
        if found is None:
            with _exploring:
                found = self.accept_index.get(lexemes)
                if found is None:
                    found = len(self.accept_sets)
                    self.accept_sets.append(lexemes)
                    self.accept_patterns += (tuple(self.patterns[i] for i in sorted(lexemes)),)
                    self.accept_index[lexemes] = found
        return found

    def table_bytes(self) -> int:
        """Bytes of the arrays this context holds, and about what its per-byte successors take (what the
        process-wide cache of contexts counts)."""
        return self._table.nbytes + self.accept_id.nbytes + 72 * len(self._cells)

    # -- exploring ----------------------------------------------------------------------------------------

    def _intern(self, live: Live) -> int:
        """The number of the state where ``live`` are alive (caller holds the lock)."""
        if not live:
            return DEAD
        if len(live) == 1 and self._small[live[0][0]]:
            j, s = live[0]
            return self._block(j) + s
        n = self._index.get(live)
        if n is None:
            if len(self._index) >= self._max_states:
                raise LimitError(f"a lexer context of {len(self.patterns)} lexemes needs more than "
                                 f"{self._max_states} states", "max_lexer_states")
            n = self._allocate(1)
            accepted = frozenset(j for j, s in live if self.dfas[j].accepting[s])
            if accepted:
                self.accept_id[n] = self.accept_set_id(accepted)
            self._live[n] = live
            self._index[live] = n
        return n

    def _block(self, j: int) -> int:
        """The base of lexeme ``j``'s embedded DFA (state ``s >= 1`` is ``base + s``), embedding it now
        if this is the first time (caller holds the lock)."""
        base = self._block_base.get(j)
        if base is None:
            d = self.dfas[j]
            first = self._allocate(d.n_states - 1)
            base = first - 1
            end = first + d.n_states - 1
            rows = d.transitions[1:].astype(np.int32)  # (numbered past the lexeme's own table type)
            self._table[first:end] = np.where(rows != 0, rows + base, 0)
            if bool(d.accepting[1:].any()):
                self.accept_id[first:end][d.accepting[1:]] = self.accept_set_id(frozenset((j,)))
            self._expanded[first:end] = b"\x01" * (end - first)
            self._blocks += ((first, end, j, base),)
            self._block_base[j] = base
        return base

    def _allocate(self, count: int) -> int:
        """Number ``count`` new states (rows unexpanded, nothing accepted); returns the first."""
        first = self._n
        need = first + count
        if need > 8 * self._max_states:  # a memory guard: blocks are bounded by their lexemes' own limits
            raise LimitError(f"a lexer context of {len(self.patterns)} lexemes needs more than "
                             f"{8 * self._max_states} states", "max_lexer_states")
        capacity = self._table.shape[0]
        if need > capacity:
            capacity = max(need, 2 * capacity)
            table = np.zeros((capacity, 256), dtype=table_dtype(capacity))
            table[:first] = self._table[:first]
            accept_id = np.full(capacity, -1, dtype=np.int32)
            accept_id[:first] = self.accept_id[:first]
            self._expanded.extend(bytes(capacity - len(self._expanded)))
            self._table, self.accept_id = table, accept_id
            _account(self)
        self._n = need
        return first

    def _expand(self, state: int) -> None:
        """Compute the row of an explored state: its live lexemes' rows, combined byte by byte. The
        distinct columns (what each byte leads every live lexeme to) are found with a dict: a few
        times faster than ``np.unique(..., axis=1)`` on 256 columns, and this runs as text is
        accepted."""
        with _exploring:
            if self._expanded[state]:
                return
            live = self._live[state]
            lexemes = [j for j, _ in live]
            combos: dict[tuple[int, ...], int] = {}
            columns = zip(*[self.dfas[j].transitions[s].tolist() for j, s in live])
            inverse = [combos.setdefault(column, len(combos)) for column in columns]
            ids = [self._intern(tuple((j, t) for j, t in zip(lexemes, combo) if t)) for combo in combos]
            self._table[state] = np.asarray(ids, dtype=np.int32)[inverse]
            self._expanded[state] = 1
            if self._cells_made.pop(state, None):
                for byte in range(256):
                    self._cells.pop(state << 8 | byte, None)
