"""An incremental Earley parser over lexeme ids, with immutable states (rollback is free).

Items are ints: ``(origin << 20) | dotted`` where ``dotted`` numbers every (alternative, dot) pair.
Nullable nonterminals are handled by advancing over them at prediction time (Aycock and Horspool),
so a completion never has to look at the set it is being built in. Useless symbols (that derive no
text, or can't be reached) are removed up front, so every item of every set can still be completed:
each lexeme the parser expects leads somewhere acceptance is reachable.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TypeVar

from banister.errors import GrammarError, LimitError
from banister.grammar.ir import Grammar, Lexeme, Ref

K = TypeVar("K")
S = TypeVar("S")
_DOT_BITS = 20
_DOT_MASK = (1 << _DOT_BITS) - 1


class EarleyTables:
    """The grammar in integer form, shared by every parse of it.

    ``empty_lexemes`` are lexemes whose regex matches nothing; alternatives using them are dropped.
    """

    def __init__(self, grammar: Grammar, empty_lexemes: frozenset[Lexeme] = frozenset(), *,
                 max_symbols: int = 1 << 19) -> None:
        if grammar.size > max_symbols:
            raise LimitError(f"grammar has {grammar.size} symbols, more than {max_symbols}", "max_grammar_symbols")
        rules = _prune_useless(grammar, empty_lexemes)
        names = list(rules)
        self.lexemes: tuple[Lexeme, ...] = tuple(dict.fromkeys(s for alts in rules.values() for alt in alts for s in alt if isinstance(s, Lexeme)))
        lexeme_id = {lex: i for i, lex in enumerate(self.lexemes)}
        rule_id = {name: i for i, name in enumerate(names)}
        start_id = len(names)  # an augmented start: S' -> start
        rules_int: list[list[tuple[int, ...]]] = []
        for name in names:
            rules_int.append([tuple(rule_id[s.name] if isinstance(s, Ref) else -1 - lexeme_id[s] for s in alt) for alt in rules[name]])
        rules_int.append([(rule_id[grammar.start],)])
        # dotted items: next symbol (None = complete), lhs, and the first dotted id of each alternative
        self.next_symbol: list[int | None] = []
        self.lhs: list[int] = []
        self.alt_starts: list[list[int]] = []
        for nt, alternatives in enumerate(rules_int):
            starts = []
            for alt in alternatives:
                starts.append(len(self.next_symbol))
                for dot in range(len(alt) + 1):
                    self.next_symbol.append(alt[dot] if dot < len(alt) else None)
                    self.lhs.append(nt)
            self.alt_starts.append(starts)
        if len(self.next_symbol) > _DOT_MASK:
            raise LimitError(f"grammar has {len(self.next_symbol)} items, more than {_DOT_MASK}", "max_grammar_symbols")
        self.start_nt = start_id
        self.start_done = self.alt_starts[start_id][0] + 1  # S' -> start .
        self.nullable = _nullable(rules_int)
        self.rule_names = names + ["<start>"]
        self._predicts: dict[int, frozenset[int]] = {}

    def predicts(self, nonterminal: int) -> frozenset[int]:
        """Dotted items added when ``nonterminal`` is predicted: transitively, advanced over nullables."""
        hit = self._predicts.get(nonterminal)
        if hit is None:
            hit = self._predicts[nonterminal] = self._prediction_closure(nonterminal)
        return hit

    def _prediction_closure(self, nonterminal: int) -> frozenset[int]:
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
                    agenda.extend(self.alt_starts[sym])
                if sym in self.nullable:
                    agenda.append(d + 1)
        return frozenset(items)


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
        self.waiting = waiting
        self.by_lexeme = by_lexeme
        self.expected = frozenset(by_lexeme)


class ParseState:
    """One Earley set and, through ``sets``, every set before it. Immutable once built.

    Items are split in two: the *dynamic* ones (origin before this set: scanned or completed) kept
    one by one, and the predicted ones, shared through a ``_Predicted`` table.
    """

    __slots__ = ("sets", "index", "_waiting", "_by_lexeme", "_predicted", "expected", "accepting", "_scans")

    def __init__(self, sets: tuple[ParseState, ...], items: set[int], predicted: _Predicted,
                 accepting: bool, tables: EarleyTables) -> None:
        self.sets = sets  # the earlier states, by index
        self.index = len(sets)
        waiting: dict[int, list[int]] = {}
        by_lexeme: dict[int, list[int]] = {}
        for it in items:
            sym = tables.next_symbol[it & _DOT_MASK]
            if sym is not None and sym >= 0:
                waiting.setdefault(sym, []).append(it)
            elif sym is not None:
                by_lexeme.setdefault(-1 - sym, []).append(it)
        self._waiting = waiting
        self._by_lexeme = by_lexeme
        self._predicted = predicted
        self.expected = predicted.expected.union(by_lexeme) if by_lexeme else predicted.expected
        self.accepting = accepting
        self._scans: dict[frozenset[int], ParseState | None] = {}

    def waiting_for(self, nonterminal: int) -> list[int]:
        """Items of this set whose next symbol is ``nonterminal`` (to advance when it completes)."""
        base = self.index << _DOT_BITS
        return self._waiting.get(nonterminal, []) + [base | d for d in self._predicted.waiting.get(nonterminal, ())]

    def scanning(self, lexemes: frozenset[int]) -> list[int]:
        """Items of this set advanced over a lexeme in ``lexemes``."""
        base = self.index << _DOT_BITS
        out = []
        for lex in lexemes:
            out.extend(it + 1 for it in self._by_lexeme.get(lex, ()))
            out.extend((base | d) + 1 for d in self._predicted.by_lexeme.get(lex, ()))
        return out


class EarleyParser:
    """Builds the initial state and scans lexemes; results are memoised on the states."""

    def __init__(self, tables: EarleyTables) -> None:
        self.tables = tables
        self._predicted: dict[frozenset[int], _Predicted] = {}
        self.initial = self._close((), [], {tables.start_nt})

    def scan(self, state: ParseState, lexemes: frozenset[int]) -> ParseState | None:
        """The state after one lexeme matched by any of ``lexemes`` (same text), or None if none fits.

        Results are memoised on ``state``, except on the initial state: it lives as long as the compiled
        grammar, and memoising there would keep every parse of every request alive through the chain
        of memos. Elsewhere a memo lives exactly as long as a request holds the state.
        """
        memo = state._scans
        if lexemes in memo:
            return memo[lexemes]
        kernel = state.scanning(lexemes)
        result = self._close(state.sets + (state,), kernel, set()) if kernel else None
        if state.index:
            memo[lexemes] = result
        return result

    def _close(self, sets: tuple[ParseState, ...], kernel: list[int], predicted: set[int]) -> ParseState:
        """Complete the kernel items (all with an origin before this set) and gather predictions."""
        t = self.tables
        items = set(kernel)
        agenda = list(items)
        while agenda:
            it = agenda.pop()
            dotted = it & _DOT_MASK
            sym = t.next_symbol[dotted]
            if sym is None:
                for parent in sets[it >> _DOT_BITS].waiting_for(t.lhs[dotted]):
                    if parent + 1 not in items:
                        items.add(parent + 1)
                        agenda.append(parent + 1)
            elif sym >= 0:
                predicted.add(sym)
                if sym in t.nullable and it + 1 not in items:
                    items.add(it + 1)
                    agenda.append(it + 1)
        key = frozenset(predicted)
        table = self._predicted.get(key)
        if table is None:
            table = self._predicted[key] = _Predicted(frozenset().union(*(t.predicts(nt) for nt in key)), t)
        if sets:
            done = t.start_done
            accepting = any(it & _DOT_MASK == done and it >> _DOT_BITS == 0 for it in items)
        else:
            accepting = t.start_nt in t.nullable
        return ParseState(sets, items, table, accepting, t)


def _derivable(rules: Mapping[K, Sequence[Sequence[S]]], rule_of: Callable[[S], K | None],
               terminal_ok: Callable[[S], bool]) -> set[K]:
    """The least set of rules having an alternative whose every symbol is an ok terminal or a rule in
    the set (nullable rules, productive rules). Linear time: each alternative counts what it still needs."""
    waiting: dict[K, list[tuple[K, int]]] = {}
    missing: dict[tuple[K, int], int] = {}
    queue: list[K] = []
    for name, alternatives in rules.items():
        for a, alt in enumerate(alternatives):
            refs = [rule_of(sym) for sym in alt]
            if any(r is None and not terminal_ok(sym) for r, sym in zip(refs, alt)):
                continue
            needed = [r for r in refs if r is not None]
            missing[(name, a)] = len(needed)
            for r in needed:
                waiting.setdefault(r, []).append((name, a))
            if not needed:
                queue.append(name)
    done: set[K] = set()
    while queue:
        name = queue.pop()
        if name in done:
            continue
        done.add(name)
        for key in waiting.get(name, ()):
            missing[key] -= 1
            if missing[key] == 0:
                queue.append(key[0])
    return done


def _nullable(rules: list[list[tuple[int, ...]]]) -> frozenset[int]:
    return frozenset(_derivable(dict(enumerate(rules)), lambda s: s if s >= 0 else None, lambda s: False))


def _prune_useless(grammar: Grammar, empty_lexemes: frozenset[Lexeme]) -> dict[str, list[tuple]]:
    """Drop alternatives using rules or lexemes that match no text, then rules the start can't reach."""
    productive = _derivable(grammar.rules, lambda s: s.name if isinstance(s, Ref) else None,
                            lambda s: s not in empty_lexemes)
    if grammar.start not in productive:
        raise GrammarError(f"the start rule {grammar.start!r} derives no text at all")

    def usable(alt: tuple) -> bool:
        return all(s.name in productive if isinstance(s, Ref) else s not in empty_lexemes for s in alt)

    reachable, stack = {grammar.start}, [grammar.start]
    while stack:
        for alt in grammar.rules[stack.pop()]:
            if usable(alt):
                for s in alt:
                    if isinstance(s, Ref) and s.name not in reachable:
                        reachable.add(s.name)
                        stack.append(s.name)
    return {name: [alt for alt in grammar.rules[name] if usable(alt)] for name in grammar.rules if name in reachable}
