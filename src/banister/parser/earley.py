"""An incremental Earley parser over lexeme ids, with immutable states (rollback is free).

Items are ints: ``(origin << 20) | dotted`` where ``dotted`` numbers every (alternative, dot) pair.
Nullable nonterminals are handled by advancing over them at prediction time (Aycock and Horspool),
so a completion never has to look at the set it is being built in. Useless symbols (that derive no
text, or can't be reached) are removed up front, so every item of every set can still be completed:
each lexeme the parser expects leads somewhere acceptance is reachable.
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Sequence
from typing import Generic, TypeVar, cast

from banister.errors import GrammarError, LimitError
from banister.grammar.ir import Grammar, Lexeme, Ref, Symbol, least_derived

_DOT_BITS = 20
_DOT_MASK = (1 << _DOT_BITS) - 1


class EarleyTables:
    """The grammar in integer form, shared by every parse of it.

    ``empty_lexemes`` are lexemes whose regex matches nothing; alternatives using them are dropped.

    A grammar's pending rules (``Grammar.pending``) are built by its expander when a prediction first
    reaches them (:meth:`predicts`): the tables grow, and what they held stays as it was, so every
    state and memo made before stays valid.
    """

    def __init__(self, grammar: Grammar, empty_lexemes: frozenset[Lexeme] = frozenset(), *,
                 max_symbols: int = 1 << 19) -> None:
        if grammar.size > max_symbols:
            raise LimitError(f"grammar has {grammar.size} symbols, more than {max_symbols}", "max_grammar_symbols")
        rules_int, self.lexemes, names = _int_rules(grammar, empty_lexemes)
        # Pending rules, and what building them needs (dropped once none is left: the expander holds the
        # front end's state).
        self._pending: set[int] = set()
        self._expander = grammar.expander
        if self._expander is not None:
            self._code: dict[str, int] = {name: i for i, name in enumerate(names)}
            self._lexeme_code: dict[Lexeme, int] = {lex: j for j, lex in enumerate(self.lexemes)}
            self._pending.update(self._code[name] for name in grammar.pending if name in self._code)
            self._size = grammar.size
            self._max_symbols = max_symbols
            self._expanding = threading.Lock()
        # Dotted items: next symbol (None = complete), lhs, and the first dotted id of each alternative.
        # Kept as tuples of ints, which the garbage collector stops scanning after one look (a big
        # schema's are hundreds of thousands long, and a list is scanned again by every collection).
        next_symbol: list[int | None] = []
        lhs: list[int] = []
        alt_starts: list[tuple[int, ...]] = []
        for nt, alternatives in enumerate(rules_int):
            starts = []
            for alt in alternatives:
                starts.append(len(next_symbol))
                next_symbol.extend(alt)
                next_symbol.append(None)
            lhs.extend([nt] * (len(next_symbol) - len(lhs)))
            alt_starts.append(tuple(starts))
        if len(next_symbol) > _DOT_MASK:
            raise LimitError(f"grammar has {len(next_symbol)} items, more than {_DOT_MASK}", "max_grammar_symbols")
        # (Lists where pending rules will add to them in place, see _expand.)
        self.next_symbol: Sequence[int | None] = tuple(next_symbol) if grammar.expander is None else next_symbol
        self.lhs: Sequence[int] = tuple(lhs) if grammar.expander is None else lhs
        self.alt_starts: Sequence[tuple[int, ...]] = tuple(alt_starts) if grammar.expander is None else alt_starts
        start_id = len(names)  # the augmented start S' -> start, last
        self.start_nt = start_id
        self.start_done = self.alt_starts[start_id][0] + 1  # S' -> start .
        # Only a rule with an empty alternative starts the nullable set (JSON grammars have none).
        has_empty = not all(map(len, itertools.chain.from_iterable(rules_int)))
        self.nullable = _least_rules(rules_int, ()) if has_empty else frozenset()
        self.rule_names = names + ["<start>"]  # (pending rules' are appended after it when built)
        self._predicts: dict[int, frozenset[int]] = {}

    @property
    def unbuilt(self) -> int:
        """How many of the grammar's pending rules are not built yet."""
        return len(self._pending)

    def predicts(self, nonterminal: int) -> frozenset[int]:
        """Dotted items added when ``nonterminal`` is predicted: transitively, advanced over nullables
        (pending rules met on the way are built first)."""
        hit = self._predicts.get(nonterminal)
        if hit is None:
            hit = self._predicts[nonterminal] = self._prediction_closure(nonterminal)
        return hit

    def _prediction_closure(self, nonterminal: int) -> frozenset[int]:
        pending = self._pending
        if nonterminal in pending:
            self._expand(nonterminal)
        seen_nt = {nonterminal}
        items: set[int] = set()
        agenda = list(self.alt_starts[nonterminal])
        while agenda:
            d = agenda.pop()
            if d in items:
                continue
            items.add(d)
            sym = self.next_symbol[d]
            if sym is not None and sym >= 0:
                if sym not in seen_nt:
                    seen_nt.add(sym)
                    if sym in pending:
                        self._expand(sym)
                    agenda.extend(self.alt_starts[sym])
                if sym in self.nullable:
                    agenda.append(d + 1)
        return frozenset(items)

    def _expand(self, nonterminal: int) -> None:
        """Build pending rule ``nonterminal`` (and any other pending rule the expander defines with it):
        the rules and lexemes its grammar's expander gives are numbered after those the tables hold
        (``LimitError`` past ``max_symbols``)."""
        with self._expanding:
            if nonterminal not in self._pending:
                return  # (another thread built it)
            rules, lexemes = self._expander.expand(self.rule_names[nonterminal])  # type: ignore[union-attr]
            code, lexeme_code, names = self._code, self._lexeme_code, self.rule_names
            for name in rules:
                if name not in code:
                    code[name] = len(names)
                    names.append(name)
            new_lexemes = tuple(lex for lex in lexemes if lex not in lexeme_code)
            for lex in new_lexemes:
                lexeme_code[lex] = len(lexeme_code)

            def number(sym: Symbol) -> int:
                return code[sym.name] if type(sym) is Ref else -1 - lexeme_code[sym]  # type: ignore[index]

            next_symbol = cast(list, self.next_symbol)  # (lists in a grammar with an expander)
            lhs, alt_starts = cast(list, self.lhs), cast(list, self.alt_starts)
            alt_starts += [()] * (len(names) - len(alt_starts))
            grown = 0
            for name, alternatives in rules.items():
                nt = code[name]
                starts = []
                for alt in alternatives:
                    starts.append(len(next_symbol))
                    next_symbol.extend(map(number, alt))
                    next_symbol.append(None)
                    grown += len(alt) + 1
                lhs.extend([nt] * (len(next_symbol) - len(lhs)))
                alt_starts[nt] = tuple(starts)
                if not alternatives:
                    self._pending.add(nt)
                elif all(alternatives):
                    self._pending.discard(nt)
                else:
                    raise GrammarError(f"internal: the deferred rule {name!r} derives the empty string")
            self._size += grown
            if self._size > self._max_symbols or len(next_symbol) > _DOT_MASK:
                raise LimitError(f"grammar grew to {self._size} symbols, more than {self._max_symbols}",
                                 "max_grammar_symbols")
            self.lexemes = (*self.lexemes, *new_lexemes)
            self._pending.discard(nonterminal)
            if not self._pending:
                self._expander = None
                self._code, self._lexeme_code = {}, {}


class _Predicted:
    """What predicting a set of nonterminals adds to an Earley set, with origins left out.

    Prediction is static: the items predicted at position ``k`` (transitively, advanced over nullable
    symbols) depend only on which nonterminals were predicted, never on the text. So it is computed
    once per distinct set of nonterminals and shared by every Earley set that predicts them.
    """

    __slots__ = ("waiting", "by_lexeme", "expected")

    def __init__(self, dotted: frozenset[int], tables: EarleyTables) -> None:
        waiting: dict[int, list[int]] = {}
        by_lexeme: dict[int, list[int]] = {}
        for d in dotted:
            sym = tables.next_symbol[d]
            if sym is not None and sym >= 0:
                waiting.setdefault(sym, []).append(d)
            elif sym is not None:
                by_lexeme.setdefault(-1 - sym, []).append(d)
        self.waiting = _frozen(waiting)
        self.by_lexeme = _frozen(by_lexeme)
        self.expected = frozenset(by_lexeme)


def _frozen(items: dict[int, list[int]]) -> dict[int, tuple[int, ...]]:
    """``items`` with tuples for lists: a tuple of ints, and then the dict holding only such tuples,
    are dropped by the garbage collector after one look (a list never is), and a server's cached
    grammars hold hundreds of thousands of these in their parse states. No items: one shared empty
    table (most states have no dynamic items of one kind or the other)."""
    return {key: tuple(found) for key, found in items.items()} if items else _NO_ITEMS


_NO_ITEMS: dict[int, tuple[int, ...]] = {}  # read only


_CHUNK_BITS = 6
_CHUNK = 1 << _CHUNK_BITS


_T = TypeVar("_T")


class History(Generic[_T]):
    """The Earley sets before a state, by index: an immutable sequence that shares its past (of parse
    states here; any item type to its tests).

    Full chunks of ``_CHUNK`` states are tuples shared by every later history, then a short tail, so
    appending copies at most a chunk (and, once a chunk, the tuple of chunks). A state holding a plain
    tuple of every set before it made a document of n lexemes hold n²/2 references: 267 MB for an array
    of 4,000 integers.
    """

    __slots__ = ("chunks", "size", "tail")

    def __init__(self, chunks: tuple[tuple[_T, ...], ...] = (), tail: tuple[_T, ...] = ()) -> None:
        self.chunks = chunks
        self.tail = tail
        self.size = (len(chunks) << _CHUNK_BITS) + len(tail)

    def __len__(self) -> int:
        return self.size

    def __getitem__(self, index: int) -> _T:
        if not 0 <= index < self.size:
            raise IndexError(index)
        base = len(self.chunks) << _CHUNK_BITS
        return self.tail[index - base] if index >= base else self.chunks[index >> _CHUNK_BITS][index & (_CHUNK - 1)]

    def append(self, state: _T) -> History[_T]:
        """This history with ``state`` after it (a new history; this one is unchanged)."""
        if len(self.tail) < _CHUNK:
            return History(self.chunks, (*self.tail, state))
        return History((*self.chunks, self.tail), (state,))


_NO_HISTORY: History[ParseState] = History()
_MISSING = object()  # absent from a scan memo (None there means: no item fits); the recogniser reads them too


class ParseState:
    """One Earley set and, through ``sets``, every set before it. Immutable once built.

    Items are split in two: the *dynamic* ones (origin before this set: scanned or completed) kept
    one by one, and the predicted ones, shared through a ``_Predicted`` table.

    A state refers only to the states before it: what was scanned from it is memoised by the parser
    (:meth:`EarleyParser.scan`), so states never form a cycle and a dropped grammar's states are
    freed at once, not left for the garbage collector to find. Its item tables hold tuples, and
    ``expected`` is shared by the parser's states that expect the same lexemes, for the same reason.
    """

    __slots__ = ("sets", "index", "_waiting", "_by_lexeme", "_predicted", "expected", "accepting", "mask_memo")

    def __init__(self, sets: History[ParseState], waiting: dict[int, tuple[int, ...]], by_lexeme: dict[int, tuple[int, ...]],
                 predicted: _Predicted, expected: frozenset[int], accepting: bool) -> None:
        self.sets = sets  # the earlier states, by index
        self.index = len(sets)
        self._waiting = waiting
        self._by_lexeme = by_lexeme
        self._predicted = predicted
        self.expected = expected  # the lexemes of by_lexeme and predicted
        self.accepting = accepting
        self.mask_memo: dict | None = None  # the recogniser's memo of masks from this state

    def scanning(self, lexemes: frozenset[int]) -> list[int]:
        """Items of this set advanced over a lexeme in ``lexemes`` (distinct: an item expects one
        symbol, and its origin tells a dynamic item from a predicted one)."""
        dynamic, predicted = self._by_lexeme, self._predicted.by_lexeme
        base = (self.index << _DOT_BITS) + 1  # a predicted item's origin is this set
        out: list[int] = []
        for lex in lexemes:
            found = dynamic.get(lex)
            if found:
                out += [it + 1 for it in found]
            found = predicted.get(lex)
            if found:
                out += [base + d for d in found]
        return out


class EarleyParser:
    """Builds the initial state and scans lexemes; results are memoised by state (``scans``)."""

    def __init__(self, tables: EarleyTables, *, max_shared_states: int = 2048) -> None:
        self.tables = tables
        self._predicted: dict[frozenset[int], _Predicted] = {}
        self._expected: dict[frozenset[int], frozenset[int]] = {}  # one copy of each set states expect
        self.initial = self._close(_NO_HISTORY, [], {tables.start_nt})
        self.scans: dict[ParseState, dict[frozenset[int], ParseState | None]] = {}
        """Each state's memo of scans: lexeme set -> the state after it (None: no item fits)."""
        self._child_sets: dict[ParseState, History[ParseState]] = {}  # the one ``sets`` of every state scanned from a state
        self._max_shared = max_shared_states
        self._shared = 0

    def scan(self, state: ParseState, lexemes: frozenset[int]) -> ParseState | None:
        """The state after one lexeme matched by any of ``lexemes`` (same text), or None if none fits.

        Results are memoised by state (``scans``), which makes the states a trie of lexeme sequences
        shared by every request of the grammar: requests whose documents have the same shape (the
        same lexemes in the same order, whatever their text) share their parse states and everything
        memoised for them (scans here, masks in the recogniser). The memo belongs to the compiled
        grammar, so it is bounded: after ``max_shared_states`` new entries it is dropped and the
        sharing starts afresh (states that requests still hold stay valid, just no longer shared).
        """
        memo = self.scans.get(state)
        if memo is None:
            memo = self.scans[state] = {}
        else:
            found = memo.get(lexemes, _MISSING)
            if found is not _MISSING:
                return cast("ParseState | None", found)
        kernel = state.scanning(lexemes)
        if kernel:
            sets = self._child_sets.get(state)
            if sets is None:  # one history for every state scanned from this one (masks scan many)
                sets = self._child_sets[state] = state.sets.append(state)
            result = self._close(sets, kernel, set())
        else:
            result = None
        memo[lexemes] = result
        self._shared += 1
        if self._shared > self._max_shared:
            self._shared = 0
            self.scans = {}
            self._child_sets = {}
            self._expected = {}
        return result

    def _close(self, sets: History[ParseState], kernel: list[int], predicted: set[int]) -> ParseState:
        """Complete the kernel items (all with an origin before this set) and gather predictions.

        Every item is taken off the agenda once, so it is filed there by its next symbol too: items
        waiting for a nonterminal, items expecting a lexeme (the state's tables, built in one pass).
        """
        t = self.tables
        next_symbol, lhs = t.next_symbol, t.lhs
        nullable = t.nullable
        items = set(kernel)
        agenda = kernel  # distinct items (see ParseState.scanning), this call's to consume
        chunks, tail = sets.chunks, sets.tail  # sets[i], inlined below
        tail_from = len(chunks) << _CHUNK_BITS
        waiting: dict[int, list[int]] = {}
        by_lexeme: dict[int, list[int]] = {}
        while agenda:
            it = agenda.pop()
            dotted = it & _DOT_MASK
            sym = next_symbol[dotted]
            if sym is None:
                # Advance the items of the origin's set that wait for this item's nonterminal: its own
                # (dynamic) ones, then its predicted ones, which carry the origin as theirs.
                origin = it >> _DOT_BITS
                at = tail[origin - tail_from] if origin >= tail_from else chunks[origin >> _CHUNK_BITS][origin & (_CHUNK - 1)]
                nt = lhs[dotted]
                for parent in at._waiting.get(nt, ()):
                    parent += 1
                    if parent not in items:
                        items.add(parent)
                        agenda.append(parent)
                base = (origin << _DOT_BITS) + 1
                for d in at._predicted.waiting.get(nt, ()):
                    parent = base + d
                    if parent not in items:
                        items.add(parent)
                        agenda.append(parent)
            elif sym >= 0:
                predicted.add(sym)
                found = waiting.get(sym)
                if found is None:
                    waiting[sym] = [it]
                else:
                    found.append(it)
                if sym in nullable and it + 1 not in items:
                    items.add(it + 1)
                    agenda.append(it + 1)
            else:
                found = by_lexeme.get(-1 - sym)
                if found is None:
                    by_lexeme[-1 - sym] = [it]
                else:
                    found.append(it)
        key = frozenset(predicted)
        table = self._predicted.get(key)
        if table is None:
            table = self._predicted[key] = _Predicted(frozenset().union(*(t.predicts(nt) for nt in key)), t)
        if sets.size:
            accepting = t.start_done in items  # S' -> start . with origin 0 (the item's int is its dotted id)
        else:
            accepting = t.start_nt in t.nullable
        expected = table.expected.union(by_lexeme) if by_lexeme else table.expected
        expected = self._expected.setdefault(expected, expected)
        return ParseState(sets, _frozen(waiting), _frozen(by_lexeme), table, expected, accepting)


def _int_rules(grammar: Grammar, empty_lexemes: frozenset[Lexeme]
               ) -> tuple[list[list[tuple[int, ...]]], tuple[Lexeme, ...], list[str]]:
    """The grammar in integer form, useless symbols removed (alternatives using rules or lexemes that
    match no text, then rules the start can't reach): ``(rules, lexemes, rule names)``. A rule symbol
    is its index, lexeme ``j`` is ``-1 - j``; the last rule is the augmented start ``S' -> start``.
    A trimmed grammar (its front end removed them already) is only encoded."""
    all_names = list(grammar.rules)
    all_lexemes = grammar.lexemes
    # A Ref is the tuple (name, "ref"): a plain tuple keys the same entry, made without Ref's constructor.
    code: dict[Symbol | tuple[str, str], int] = {(name, "ref"): i for i, name in enumerate(all_names)}
    code.update((lex, -1 - j) for j, lex in enumerate(all_lexemes))  # a Ref and a Lexeme never compare equal
    number = code.__getitem__
    encoded = [[tuple(map(number, alt)) for alt in alternatives] for alternatives in grammar.rules.values()]
    start = code[Ref(grammar.start)]
    if grammar.trimmed and not empty_lexemes:
        encoded.append([(start,)])
        return encoded, all_lexemes, all_names
    empty = frozenset(code[lex] for lex in empty_lexemes if lex in code)
    pending = {code[Ref(name)] for name in grammar.pending}  # (they derive text once built)
    productive = _least_rules([[()] if i in pending else alts for i, alts in enumerate(encoded)], empty)
    if start not in productive:
        raise GrammarError(f"the start rule {grammar.start!r} derives no text at all")

    def usable(alt: tuple[int, ...]) -> bool:
        return all(s in productive if s >= 0 else s not in empty for s in alt)

    usable_alts = [[alt for alt in alternatives if usable(alt)] for alternatives in encoded]
    reachable = bytearray(len(all_names))
    reachable[start] = 1
    stack = [start]
    while stack:
        for alt in usable_alts[stack.pop()]:
            for s in alt:
                if s >= 0 and not reachable[s]:
                    reachable[s] = 1
                    stack.append(s)
    kept = [i for i in range(len(all_names)) if reachable[i]]
    new_rule = {old: new for new, old in enumerate(kept)}
    new_lexeme: dict[int, int] = {}  # numbered by first appearance in the kept rules
    rules_int: list[list[tuple[int, ...]]] = []
    for old in kept:
        alternatives = []
        for alt in usable_alts[old]:
            out = []
            for s in alt:
                if s >= 0:
                    out.append(new_rule[s])
                else:
                    j = new_lexeme.get(s)
                    if j is None:
                        j = new_lexeme[s] = len(new_lexeme)
                    out.append(-1 - j)
            alternatives.append(tuple(out))
        rules_int.append(alternatives)
    rules_int.append([(new_rule[start],)])
    lexemes = tuple(all_lexemes[-1 - s] for s in new_lexeme)
    return rules_int, lexemes, [all_names[i] for i in kept]


def _least_rules(rules: list[list[tuple[int, ...]]], excluded: frozenset[int] | tuple) -> frozenset[int]:
    """The least set of rules having an alternative whose symbols are all lexemes not in ``excluded`` or
    rules in the set. With every lexeme excluded (``()``): the nullable rules; with the lexemes that
    match nothing excluded: the productive rules."""
    every = excluded == ()
    return frozenset(least_derived(
        (name, [s for s in alt if s >= 0]) for name, alternatives in enumerate(rules) for alt in alternatives
        if not any(s < 0 and (every or s in excluded) for s in alt)
    ))
