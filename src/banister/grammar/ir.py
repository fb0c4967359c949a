"""The one grammar form every front end compiles to: rules over lexemes, each lexeme a regex.

Semantics are those of a context-free grammar whose terminals are regular languages: a text is in the
language when it splits into pieces ``w1 .. wn`` with ``wi`` matched *as a whole* by lexeme ``i`` and
the lexeme sequence derivable from ``start``. Lexing is not greedy: a lexeme may end wherever its regex
accepts, so any CFG is enforced exactly. A lexeme never matches the empty string (make the rule
optional instead); the builder checks this.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Literal, NamedTuple, Protocol, TypeVar

from banister.errors import GrammarError


DISTINCT = "(?:)"
"""Leads the pattern of a lexeme that follows a value which must not repeat one its array or object
holds (an item under ``uniqueItems``, a key counted by ``minProperties``): an empty group, so the
lexeme's language is the plain one's while its pattern, which names it, is not. A grammar marked
``distinct_items`` is read so (:mod:`banister.parser.distinct`)."""


class Lexeme(NamedTuple):
    """A terminal: a regex (banister syntax, whole-match) over the text.

    Symbols are named tuples: grammars are built, checked and numbered by hashing and comparing
    millions of them, and a tuple does both in C."""

    pattern: str


class Ref(NamedTuple):
    """A nonterminal reference."""

    name: str
    kind: Literal["ref"] = "ref"
    """Always ``"ref"``: tells ``Ref(x)`` from ``Lexeme(x)`` (tuples compare item by item)."""

    def __repr__(self) -> str:
        return f"Ref(name={self.name!r})"


Symbol = Lexeme | Ref
Alternative = tuple[Symbol, ...]


class Expander(Protocol):
    """What builds a grammar's pending rules when a parser first needs them (see ``Grammar.expander``)."""

    def expand(self, name: str) -> tuple[dict[str, tuple[Alternative, ...]], tuple[Lexeme, ...]]:
        """The rules that define pending rule ``name``: its alternatives and every rule they reach that
        the grammar does not have yet (pending ones among them, with no alternatives), and the lexemes
        they use that it does not have yet. Other pending rules may come defined with it, and are then
        built. Called once per pending rule at most."""


@dataclass(frozen=True)
class Grammar:
    """Rules (nonterminal -> alternatives, each a sequence of symbols) and the start nonterminal.

    ``trimmed`` is a front end's promise that every rule derives some text and is reachable from the
    start, and every lexeme matches some text: the parser then skips its own useless-symbol pass.

    A trimmed grammar may leave rules ``pending``: listed with no alternatives yet, which its
    ``expander`` builds when a parser first predicts them (the JSON front end leaves property values
    proved safe so, see ``json_schema_to_grammar``'s ``defer``). The promise covers them too:
    each derives some text once built.

    ``distinct_items``: lexemes whose patterns start with :data:`DISTINCT` follow no item (a string, an
    object) equal to one its array held before, nor a key equal to one its object held. Only a recognizer
    that tracks those values reads the grammar right (``banister.parser.distinct.DistinctItems``).
    ``free_text_triggers`` (structural tags): that reader takes the text for free text up to each of
    these triggers, and for JSON from there until the containers it opens close.
    """

    rules: Mapping[str, tuple[Alternative, ...]]
    start: str
    trimmed: bool = False
    distinct_items: bool = False
    free_text_triggers: tuple[str, ...] = ()
    lexemes: tuple[Lexeme, ...] = field(init=False)
    size: int = field(init=False, repr=False, compare=False)
    """Symbols over all alternatives (each counts one more): the measure that grammar-size limits apply to."""
    pending: frozenset[str] = field(init=False, repr=False, compare=False)
    expander: Expander | None = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.start not in self.rules:
            raise GrammarError(f"start rule {self.start!r} is not defined")
        seen: dict[Lexeme, None] = {}
        rules = self.rules
        size = 0
        for name, alternatives in rules.items():
            for alt in alternatives:
                size += len(alt) + 1
                for sym in alt:
                    if type(sym) is Lexeme:
                        seen.setdefault(sym)
                    elif type(sym) is not Ref:
                        raise GrammarError(f"rule {name!r} holds {sym!r}, which is neither a Lexeme nor a Ref")
                    elif sym.name not in rules:
                        raise GrammarError(f"rule {name!r} refers to undefined rule {sym.name!r}")
        object.__setattr__(self, "lexemes", tuple(seen))
        object.__setattr__(self, "size", size)
        object.__setattr__(self, "pending", frozenset())
        object.__setattr__(self, "expander", None)

    @classmethod
    def from_trimmed(cls, rules: Mapping[str, tuple[Alternative, ...]], start: str, lexemes: tuple[Lexeme, ...],
                     size: int, pending: frozenset[str] = frozenset(), expander: Expander | None = None,
                     distinct_items: bool = False) -> Grammar:
        """A grammar a front end has trimmed (see ``trimmed``) and counted as it went: its lexemes in order
        of first use over ``rules`` and its size. Taken as given, not walked and checked again."""
        self = object.__new__(cls)
        for name, value in (("rules", rules), ("start", start), ("trimmed", True), ("lexemes", lexemes), ("size", size),
                            ("pending", pending), ("expander", expander), ("distinct_items", distinct_items)):
            object.__setattr__(self, name, value)
        return self


class GrammarBuilder:
    """Builds a Grammar rule by rule, with fresh names and the usual regular-operator helpers.

    Every helper returns a symbol to use inside other alternatives.
    """

    def __init__(self) -> None:
        self._rules: dict[str, list[Alternative]] = {}
        self._counter = itertools.count()
        self._lexeme_check: dict[str, bool] = {}

    def fresh(self, prefix: str = "r") -> str:
        """A rule name not used yet."""
        while True:
            name = f"{prefix}#{next(self._counter)}"
            if name not in self._rules:
                return name

    def lexeme(self, pattern: str) -> Lexeme:
        """A terminal for ``pattern``; refuses patterns that match the empty string."""
        if pattern not in self._lexeme_check:
            from banister.regex import compile_regex

            dfa = compile_regex(pattern)
            self._lexeme_check[pattern] = dfa.is_accepting(dfa.start)
        if self._lexeme_check[pattern]:
            raise GrammarError(f"lexeme {pattern!r} matches the empty string; make the rule optional instead")
        return Lexeme(pattern)

    def literal(self, text: str) -> Lexeme:
        """A terminal that matches exactly ``text`` (non-empty)."""
        from banister.compiler import escape_regex

        if not text:
            raise GrammarError("an empty literal is not a lexeme; use an empty alternative")
        return Lexeme(escape_regex(text))

    def rule(self, name: str, alternatives: Iterable[Iterable[Symbol]]) -> Ref:
        """Define (or extend) rule ``name``; an empty alternative ``()`` derives the empty string."""
        self._rules.setdefault(name, []).extend(tuple(alt) for alt in alternatives)
        return Ref(name)

    def declare(self, name: str) -> Ref:
        """A reference to a rule that will be defined later (for recursion)."""
        self._rules.setdefault(name, [])
        return Ref(name)

    def seq(self, *symbols: Symbol) -> Ref:
        return self.rule(self.fresh("seq"), [symbols])

    def choice(self, *alternatives: Iterable[Symbol]) -> Ref:
        return self.rule(self.fresh("alt"), alternatives)

    def optional(self, symbol: Symbol) -> Ref:
        return self.rule(self.fresh("opt"), [(symbol,), ()])

    def star(self, symbol: Symbol) -> Ref:
        """Zero or more ``symbol`` (left-recursive, which Earley handles in linear time)."""
        name = self.fresh("star")
        return self.rule(name, [(), (Ref(name), symbol)])

    def plus(self, symbol: Symbol) -> Ref:
        name = self.fresh("plus")
        return self.rule(name, [(symbol,), (Ref(name), symbol)])

    def repeat(self, symbol: Symbol, min_count: int, max_count: int | None, separator: Symbol | None = None) -> Ref:
        """``symbol`` repeated ``min_count..max_count`` times (None = unbounded), with an optional separator.

        Bounded repetition is expanded into a chain of rules whose size grows linearly with the bound.
        """
        if min_count < 0 or (max_count is not None and max_count < min_count):
            raise GrammarError(f"bad repetition bounds {{{min_count},{max_count}}}")
        sep: tuple[Symbol, ...] = () if separator is None else (separator,)
        if max_count == 0:
            return self.rule(self.fresh("empty"), [()])
        # tail(k): zero to k more items, each preceded by the separator.
        if max_count is None:
            more = self.fresh("more")
            tail = self.rule(more, [(), (Ref(more), *sep, symbol)])
            extra_needed = max(min_count - 1, 0)
        else:
            extra_max = max_count - 1
            extra_needed = max(min_count - 1, 0)
            tail = self.rule(self.fresh("end"), [()])
            for _ in range(extra_max - extra_needed):
                tail = self.rule(self.fresh("upto"), [(), (*sep, symbol, tail)])
        body: tuple[Symbol, ...] = (symbol,)
        for _ in range(extra_needed):
            body = (*body, *sep, symbol)
        nonempty = self.rule(self.fresh("rep"), [(*body, tail)])
        return nonempty if min_count >= 1 else self.optional(nonempty)

    def build(self, start: str | Ref, *, distinct_items: bool = False,
              free_text_triggers: tuple[str, ...] = ()) -> Grammar:
        start_name = start.name if isinstance(start, Ref) else start
        empty = [name for name, alts in self._rules.items() if not alts]
        if empty:
            raise GrammarError(f"rules declared but never defined: {', '.join(sorted(empty)[:5])}")
        return Grammar({name: tuple(alts) for name, alts in self._rules.items()}, start_name,
                       distinct_items=distinct_items, free_text_triggers=free_text_triggers)


Head = TypeVar("Head")


def least_derived(alternatives: Iterable[tuple[Head, list[Head]]]) -> set[Head]:
    """The least set of heads where a head is in when one of its alternatives needs only heads that are.

    Each alternative is ``(head, needs)``; one that needs nothing puts its head in at once. With rules as
    heads and the rules an alternative refers to as its needs, these are the rules that derive some
    text; leave out the alternatives that use a lexeme and they are the rules that derive the empty
    string. Linear: each alternative counts the needs it still misses, and is told when one is met.
    """
    users: dict[Head, list[int]] = {}
    missing: list[int] = []
    owner: list[Head] = []
    ready: list[Head] = []
    for head, needs in alternatives:
        if not needs:
            ready.append(head)
            continue
        k = len(missing)
        missing.append(len(needs))
        owner.append(head)
        for need in needs:
            found = users.get(need)
            if found is None:
                users[need] = [k]
            else:
                found.append(k)
    derived: set[Head] = set()
    while ready:
        head = ready.pop()
        if head in derived:
            continue
        derived.add(head)
        for k in users.get(head, ()):
            missing[k] -= 1
            if missing[k] == 0:
                ready.append(owner[k])
    return derived
