"""An incremental Earley parser over lexeme ids, with immutable states (rollback is free).

Items are ints: ``(origin << 20) | dotted`` where ``dotted`` numbers every (alternative, dot) pair.
Nullable nonterminals are handled by advancing over them at prediction time (Aycock and Horspool),
so a completion never has to look at the set it is being built in. Useless symbols (that derive no
text, or can't be reached) are removed up front, so every item of every set can still be completed:
each lexeme the parser expects leads somewhere acceptance is reachable.
"""

from __future__ import annotations

from collections.abc import Iterable

from banister.errors import GrammarError, LimitError
from banister.grammar.ir import Grammar, Lexeme, Ref

_DOT_BITS = 20
_DOT_MASK = (1 << _DOT_BITS) - 1


class EarleyTables:
    """The grammar in integer form, shared by every parse of it."""

    def __init__(self, grammar: Grammar, *, max_symbols: int = 1 << 19) -> None:
        if grammar.size > max_symbols:
            raise LimitError(f"grammar has {grammar.size} symbols, more than {max_symbols}", "max_grammar_symbols")
        rules = _prune_useless(grammar)
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
        nullable = _nullable(rules_int)
        self.nullable = nullable
        self.rule_names = names + ["<start>"]


class ParseState:
    """One Earley set and, through ``sets``, every set before it. Immutable once built."""

    __slots__ = ("sets", "index", "items", "waiting", "by_lexeme", "expected", "accepting", "_scans")

    def __init__(self, sets: tuple[ParseState, ...], items: frozenset[int], tables: EarleyTables) -> None:
        self.sets = sets  # the earlier states, by index
        self.index = len(sets)
        self.items = items
        waiting: dict[int, list[int]] = {}
        by_lexeme: dict[int, list[int]] = {}
        accepting = False
        for it in items:
            sym = tables.next_symbol[it & _DOT_MASK]
            if sym is None:
                if tables.lhs[it & _DOT_MASK] == tables.start_nt and it >> _DOT_BITS == 0:
                    accepting = True
            elif sym >= 0:
                waiting.setdefault(sym, []).append(it)
            else:
                by_lexeme.setdefault(-1 - sym, []).append(it)
        self.waiting = waiting
        self.by_lexeme = by_lexeme
        self.expected = frozenset(by_lexeme)
        self.accepting = accepting
        self._scans: dict[frozenset[int], ParseState | None] = {}


class EarleyParser:
    """Builds the initial state and scans lexemes; results are memoised on the states."""

    def __init__(self, tables: EarleyTables) -> None:
        self.tables = tables
        t = tables
        self.initial = self._close((), [(0 << _DOT_BITS) | d for d in t.alt_starts[t.start_nt]])

    def scan(self, state: ParseState, lexemes: frozenset[int]) -> ParseState | None:
        """The state after one lexeme matched by any of ``lexemes`` (same text), or None if none fits."""
        memo = state._scans
        if lexemes in memo:
            return memo[lexemes]
        kernel = [it + 1 for lex in lexemes for it in state.by_lexeme.get(lex, ())]
        result = self._close(state.sets + (state,), kernel) if kernel else None
        memo[lexemes] = result
        return result

    def _close(self, sets: tuple[ParseState, ...], kernel: Iterable[int]) -> ParseState:
        t = self.tables
        k = len(sets)
        items = set(kernel)
        agenda = list(items)
        predicted: set[int] = set()
        while agenda:
            it = agenda.pop()
            dotted = it & _DOT_MASK
            sym = t.next_symbol[dotted]
            if sym is None:
                origin = it >> _DOT_BITS
                if origin == k:
                    continue  # an empty derivation: already advanced over at prediction (nullable)
                for parent in sets[origin].waiting.get(t.lhs[dotted], ()):
                    if parent + 1 not in items:
                        items.add(parent + 1)
                        agenda.append(parent + 1)
            elif sym >= 0:
                if sym not in predicted:
                    predicted.add(sym)
                    for d in t.alt_starts[sym]:
                        new = (k << _DOT_BITS) | d
                        if new not in items:
                            items.add(new)
                            agenda.append(new)
                if sym in t.nullable and it + 1 not in items:
                    items.add(it + 1)
                    agenda.append(it + 1)
        return ParseState(sets, frozenset(items), t)


def _nullable(rules: list[list[tuple[int, ...]]]) -> frozenset[int]:
    nullable: set[int] = set()
    changed = True
    while changed:
        changed = False
        for nt, alternatives in enumerate(rules):
            if nt not in nullable and any(all(s >= 0 and s in nullable for s in alt) for alt in alternatives):
                nullable.add(nt)
                changed = True
    return frozenset(nullable)


def _prune_useless(grammar: Grammar) -> dict[str, list[tuple]]:
    """Drop alternatives using rules that derive no text, then rules the start can't reach."""
    from banister.regex import DEAD, compile_regex

    empty_lexemes = {lex for lex in grammar.lexemes if compile_regex(lex.pattern).start == DEAD}
    productive: set[str] = set()
    changed = True
    while changed:
        changed = False
        for name, alternatives in grammar.rules.items():
            if name not in productive and any(
                all((isinstance(s, Lexeme) and s not in empty_lexemes) or (isinstance(s, Ref) and s.name in productive) for s in alt)
                for alt in alternatives
            ):
                productive.add(name)
                changed = True
    if grammar.start not in productive:
        raise GrammarError(f"the start rule {grammar.start!r} derives no text at all")

    def usable(alt: tuple) -> bool:
        return all((isinstance(s, Lexeme) and s not in empty_lexemes) or (isinstance(s, Ref) and s.name in productive) for s in alt)

    reachable, stack = {grammar.start}, [grammar.start]
    while stack:
        for alt in grammar.rules[stack.pop()]:
            if usable(alt):
                for s in alt:
                    if isinstance(s, Ref) and s.name not in reachable:
                        reachable.add(s.name)
                        stack.append(s.name)
    return {name: [alt for alt in grammar.rules[name] if usable(alt)] for name in grammar.rules if name in reachable}
