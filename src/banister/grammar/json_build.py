"""Shapes to grammar rules: one nonterminal per schema node, lexemes for keys, strings, numbers, punctuation.

Nodes are compiled from a work list (never recursively), so recursive and deeply nested schemas build
in time linear in what is reachable. Whitespace lives inside the punctuation lexemes (``{`` followed by
whitespace, whitespace ``,`` whitespace, ...), so every run of whitespace belongs to exactly one lexeme and
the cap on a run is exact. At the end, rules that derive no text are removed (a model is never steered
into a dead end) and rules with one single-symbol alternative are inlined. With ``defer``, property
values proved to admit some text and to compile without error wait until a parser first needs one,
which builds them all: the builder stays with the grammar as its expander and trims their rules the
same way as it builds them.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import itertools
import json
import sys
import time
from collections import deque
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, Literal

import numpy as np

from banister.errors import GrammarError, LimitError, SchemaError
from banister.grammar import json_automata
from banister.grammar.ir import DISTINCT, Alternative, Expander, Grammar, Lexeme, Ref, Symbol, least_derived
from banister.grammar.json_automata import CharDFA
from banister.grammar.json_logic import (
    ALL_TYPES,
    ANY,
    FALSE,
    TRUE,
    TYPES,
    ArrTerm,
    KeySet,
    Logic,
    Node,
    NumTerm,
    ObjTerm,
    Shape,
    StrTerm,
    canon,
    json_type,
    node_and,
    node_not,
    string_dfa,
    to_fraction,
)
from banister.grammar.json_numbers import exponent_forms, number_dfa
from banister.grammar.json_bytes import text_dfa
from banister.grammar.json_strings import CountedRun, StringPlan, key_dfa_regex, string_plan
from banister.grammar.json_text import (
    ANY_CHAR,
    INTEGER,
    NUMBER,
    json_char,
    json_char_parts,
    json_keys_except,
    json_strings,
    number_value_regex,
    plain_names,
    signed_number_regex,
)
from banister.grammar.regex_text import char_class, escape_text
from banister.parser.lexer import LexemeDFA, lexeme_dfa, lexeme_language, offer_builder, prefix_trie, table_dtype
from banister.regex.charset import Ranges, normalize


@dataclass(frozen=True)
class SchemaSettings:
    """Limits that keep compilation bounded; each LimitError names the setting to raise (the table in
    docs/json-schema.md says what each one limits)."""

    max_enum_values: int = 20_000
    max_alternatives: int = 256
    max_depth: int = 200
    max_object_states: int = 4096
    max_reordered_names: int = 16
    max_array_states: int = 4096
    max_unique_values: int = 8
    max_string_states: int = 2_000
    max_number_states: int = 2_000
    max_regex_length: int = 20_000
    max_automaton_lexeme_states: int = 4096
    max_lexeme_repeat: int = 32
    max_nfa_states: int = 200_000
    max_grammar_size: int = 1 << 19
    max_inline_regex_length: int = 1_000_000
    time_limit_s: float = 20.0


@dataclass(frozen=True)
class BuildOptions:
    key_order: str
    whitespace: str
    max_whitespace: int
    max_nesting: int | None
    settings: SchemaSettings
    deadline: float
    defer: bool = False
    """Leave property values that ``Logic.deferrable`` proves safe pending (see :meth:`symbol`),
    all built when a parser first needs one: the grammar's ``expander`` is the builder."""
    distinct_items: bool = False
    """Mark with :data:`~banister.grammar.ir.DISTINCT` lexemes where values must not repeat: the items of
    arrays of strings or open objects under ``uniqueItems`` (refused without it) and, under ``minProperties`` of two or
    more, the keys that no name covers (the grammar is then marked ``distinct_items``)."""


Piece = tuple[Symbol, ...]
"""The symbols of one member of an array or object, written into the sequence's rules."""


class _Rules:
    """Rules under construction, with lexeme checks and the final clean-up."""

    def __init__(self, settings: SchemaSettings) -> None:
        self.rules: dict[str, list[Alternative]] = {}
        self._names = itertools.count()
        self._lexemes: dict[str, Lexeme | None] = {}
        self._size = 0
        self._settings = settings
        # What finish and extend have settled: the rules known to derive text, those inlined away (by
        # name), those in the grammar so far (and its lexemes), and the rules made since.
        self._settled: dict[str, list[Alternative]] = {}
        self._alias: dict[str, Symbol] = {}
        self._emitted: set[str] = set()
        self._emitted_lexemes: set[Lexeme] = set()
        self._new: list[str] = []

    def fresh(self, prefix: str) -> str:
        name = f"{prefix}#{next(self._names)}"
        self._new.append(name)
        return name

    def define(self, name: str, alternatives: Iterable[Iterable[Symbol | None]]) -> None:
        """Define ``name``; alternatives holding a None (an empty language) are dropped."""
        kept: list[Alternative] = []
        size = 0
        for alt in alternatives:
            alt = tuple(alt)
            for s in alt:
                if s is None:
                    break
            else:
                kept.append(alt)  # type: ignore[arg-type]
                size += len(alt) + 1
        self.rules.setdefault(name, []).extend(kept)
        self.grow(size)

    def grow(self, size: int) -> None:
        """Count ``size`` more symbols, written into ``rules`` directly (LimitError past the cap)."""
        self._size += size
        if self._size > self._settings.max_grammar_size:
            raise LimitError(
                f"the grammar grew past {self._settings.max_grammar_size} symbols", setting="max_grammar_size"
            )

    def add(self, prefix: str, alternatives: Iterable[Iterable[Symbol | None]]) -> Ref:
        name = self.fresh(prefix)
        self.define(name, alternatives)
        return Ref(name)

    def lexeme(self, pattern: str) -> Lexeme | None:
        """A terminal for ``pattern``; None when it matches nothing."""
        if pattern in self._lexemes:
            return self._lexemes[pattern]
        empty, nullable = lexeme_language(pattern, self._settings.max_nfa_states)
        if nullable:
            raise GrammarError(f"internal: lexeme {pattern[:80]!r} matches the empty string")
        found = None if empty else Lexeme(pattern)
        self._lexemes[pattern] = found
        return found

    def finish(self, start: Symbol | None, pending: Iterable[str] = (), expander: Expander | None = None,
               distinct_items: bool = False) -> Grammar:
        """The grammar from ``start``: unproductive and unreachable rules removed, unit rules inlined.
        Rules ``pending`` (declared, no alternatives yet) count as deriving text and stay pending, for
        ``expander`` to build (:meth:`extend`)."""
        if start is None:
            return Grammar({"start": ()}, "start")
        rules = dict(self.rules)
        rules["start"] = [(start,)]
        waiting = frozenset(pending)
        productive, complete = _productive({**rules, **{name: [()] for name in waiting}} if waiting else rules)
        if "start" not in productive:
            return Grammar({"start": ()}, "start")
        if complete:
            kept = rules
        else:
            kept = {
                name: [a for a in alts if all(type(s) is not Ref or s.name in productive for s in a)]
                for name, alts in rules.items()
                if name in productive
            }
        self._settled, self._alias, self._new = kept, _unit_rules(kept, {"start"}), []
        out, lexemes, size = self._emit("start")
        waiting = waiting.intersection(out)
        return Grammar.from_trimmed(out, "start", lexemes, size, waiting, expander if waiting else None, distinct_items)

    def holds(self, name: str) -> bool:
        """Whether the grammar :meth:`finish` made, as :meth:`extend` grew it, holds rule ``name``."""
        return name in self._emitted

    def extend(self, names: Sequence[str], pending: Iterable[str]
               ) -> tuple[dict[str, tuple[Alternative, ...]], tuple[Lexeme, ...]]:
        """What pending rules ``names``, defined since, add to the grammar :meth:`finish` made (see
        ``Expander.expand``): their rules and the rules they reach that the grammar lacks, trimmed and
        inlined as :meth:`finish` does, with the lexemes they bring. The rules still ``pending`` count
        as deriving text."""
        waiting = frozenset(pending)
        batch = {n: self.rules[n] for n in (*names, *self._new)}
        settled, alias = self._settled, self._alias

        def needs(alt: Alternative) -> list[str] | None:
            """The batch's rules ``alt`` waits for; None when it refers to a rule that derives nothing."""
            out = []
            for s in alt:
                if type(s) is Ref:
                    if s.name in batch:
                        if s.name not in waiting:
                            out.append(s.name)
                    elif s.name not in settled and s.name not in alias:
                        return None
            return out

        waits = {n: [needs(alt) for alt in alts] for n, alts in batch.items()}
        productive = least_derived([(n, found) for n, each in waits.items() for found in each if found is not None]
                                   + [(n, []) for n in waiting if n in batch])
        for n in names:
            if n not in productive:
                raise GrammarError(f"internal: the deferred rule {n!r} derives no text")
        kept = {
            n: [alt for alt, found in zip(batch[n], waits[n]) if found is not None and productive.issuperset(found)]
            for n in batch
            if n in productive
        }
        settled.update(kept)
        alias.update(_unit_rules(kept, waiting.union(names)))
        self._new = []
        out: dict[str, tuple[Alternative, ...]] = {}
        lexemes: tuple[Lexeme, ...] = ()
        for n in names:
            more, new_lexemes, _ = self._emit(n)
            out.update(more)
            lexemes += new_lexemes
        return out, lexemes

    def _emit(self, root: str) -> tuple[dict[str, tuple[Alternative, ...]], tuple[Lexeme, ...], int]:
        """The settled rules reachable from ``root`` that the grammar does not hold yet (``root`` itself
        always), references to inlined rules resolved, with the lexemes new to it and their size."""
        alias, rules = self._alias, self._settled

        def resolve(sym: Symbol) -> Symbol:
            seen = 0
            while type(sym) is Ref and sym.name in alias and seen < 1000:
                sym = alias[sym.name]
                seen += 1
            return sym

        emitted, known = self._emitted, self._emitted_lexemes
        out: dict[str, tuple[Alternative, ...]] = {}
        lexemes: dict[Lexeme, None] = {}
        size = 0
        todo = [root]
        while todo:
            name = todo.pop()
            if name in out or (name in emitted and name != root):
                continue
            alts = rules[name]
            if alias:
                resolved = []
                for alt in alts:
                    for s in alt:
                        if type(s) is Ref and s.name in alias:
                            alt = tuple(resolve(s) for s in alt)
                            break
                    resolved.append(alt)
            else:
                resolved = alts
            unique = (tuple(resolved) if len(resolved) < 2 else tuple(dict.fromkeys(resolved)))
            out[name] = unique
            for alt in unique:
                size += len(alt) + 1
                for s in alt:
                    if isinstance(s, Ref):
                        if s.name not in out:
                            todo.append(s.name)
                    elif s not in known:
                        lexemes[s] = None
        emitted.update(out)
        known.update(lexemes)
        # Productive (checked before), reachable (this walk), lexemes and size counted on the way.
        return out, tuple(lexemes), size


@contextlib.contextmanager
def _nesting_limit() -> Iterator[None]:
    """A schema nested past Python's stack (RecursionError) as the LimitError it is."""
    try:
        yield
    except RecursionError as err:
        raise LimitError("the schema is nested too deeply", setting="max_depth") from err


def _unit_rules(rules: dict[str, list[Alternative]], kept: frozenset[str] | set[str]) -> dict[str, Symbol]:
    """The rules with a single one-symbol alternative (inlined where they are used), but those ``kept``."""
    return {name: alts[0][0] for name, alts in rules.items() if len(alts) == 1 and len(alts[0]) == 1 and name not in kept}


def _text_edges(dfa: CharDFA) -> list[list[tuple[Ranges, int]]]:
    """Each state's edges grouped by target, as the code points text can hold (surrogates never occur
    in text, so an edge over surrogates alone is dropped)."""
    rows = []
    for row in dfa.edges:
        by_target: dict[int, list[tuple[int, int]]] = {}
        for lo, hi, t in row:
            by_target.setdefault(t, []).append((lo, hi))
        rows.append([(usable, t) for t, ranges in by_target.items() if (usable := normalize(ranges))])
    return rows


@functools.lru_cache(maxsize=16)
def _string_states(any_string: str) -> int:
    """The states of the DFA of ``any_string`` (any JSON string; a few dozen)."""
    return lexeme_dfa(any_string, 1 << 16).n_states


def _keys_except_dfa(names: tuple[str, ...], any_string: str, max_states: int) -> LexemeDFA:
    """The DFA of ``json_keys_except(names)`` for plain names (:func:`plain_names`), without the regex
    compiler: the trie of the names grafted onto the DFA of ``any_string`` (any JSON string). A trie
    node reads its branches' bytes, ends the key on ``"`` unless it spells a name, and reads any other
    byte as the string's body would: a character no branch takes (its raw byte, an escape, a UTF-8
    sequence: a plain name's characters are only ever written raw) leaves the names for good. The
    string's states keep their numbers, so their trie walks are the string's (``shares``)."""
    string = lexeme_dfa(any_string, max_states)
    quote = ord('"')
    body = int(string.transitions[string.start, quote])
    end = int(string.transitions[body, quote])
    texts = [name.encode("ascii") for name in names]  # plain names are printable ASCII
    node, parents, labels = prefix_trie(texts)
    base = string.n_states
    n = len(node)
    table = np.zeros((base + n + 1, 256), dtype=table_dtype(base + n + 1))
    table[:base] = string.transitions
    table[base : base + n] = string.transitions[body]
    table[base : base + n, quote] = end
    if parents:
        table[base + np.array(parents), labels] = np.arange(base + 1, base + n)
    table[[base + node[text] for text in texts], quote] = 0
    table[-1, quote] = base  # the start: the opening quote leads to the root
    accepting = np.zeros(table.shape[0], dtype=np.bool_)
    accepting[:base] = string.accepting
    return LexemeDFA(table, accepting, table.shape[0] - 1, shares=(string, base))


def _machine_edges(rows: list, parts: Any) -> list[list]:
    """The edges ``[source, label regex, target]`` of an automaton lexeme: one per regex of
    ``parts(ranges)`` for each edge of ``rows`` (:func:`_text_edges`)."""
    return [[s, part, t] for s, row in enumerate(rows) for ranges, t in row for part in parts(ranges)]


def _machine_text(dfa: CharDFA, edges: list[list]) -> str:
    """The ``(?@...)`` regex of an automaton lexeme: ``dfa``'s start and accepting states, and ``edges``
    ``[source, label regex, target]``."""
    accepting = [s for s in range(dfa.n_states) if dfa.accepting[s]]
    return "(?@" + json.dumps([0, accepting, edges], separators=(",", ":")) + ")"


def _machine_states(n_states: int, edges: list[list]) -> int:
    """About how many states the byte-level DFA of a ``(?@...)`` lexeme has, counted before building it:
    the automaton's own states, and for each label and target the states inside the label (the bytes of
    a multi-byte character, of an escape). Edges that read the same label into the same state share
    those (the NFA builds them once), so each pair counts once: a key automaton's states read escapes
    and non-ASCII characters alike and add a few dozen states in all, a length-counting automaton adds
    them at every count. Over the 113 automata of more than 40 states that MaskBench's dev split builds,
    the DFA has at most 6% more states than this, and far fewer where the automaton minimises."""
    inner = {part: _inner_states(lexeme_dfa(part, _LABEL_STATES)) for part in {edge[1] for edge in edges}}
    return n_states + sum(inner[part] for part, _ in {(edge[1], edge[2]) for edge in edges})


_LABEL_STATES = 1 << 16  # a one-character label's DFA has at most a few dozen


def _inner_states(label: LexemeDFA) -> int:
    """The states of a one-character label's DFA between its start and its end: those neither dead,
    nor the start, nor accepting (a character ends where it is accepted)."""
    return int(label.n_states - np.count_nonzero(label.accepting)) - 2


def _text_dfa(dfa: CharDFA, max_states: int) -> LexemeDFA:
    """The offered builder of a string planned from ``dfa`` (see ``JsonGrammarBuilder._text_lexeme``)."""
    return text_dfa(dfa, quoted=True, max_states=max_states)


_UNKNOWN_STATES = sys.maxsize
"""The bound a builder offers when its states are not known before it runs: :func:`lexeme_is_empty` then
builds the lexeme when its grammar is compiled, as it would have compiled the regex."""


def _run_dfa(low: int, high: int | None, before: bytes, after: bytes, unit: str, max_states: int) -> LexemeDFA:
    """The DFA of a run of JSON string characters (see ``JsonGrammarBuilder._run``)."""
    return LexemeDFA.counted(lexeme_dfa(unit, max_states), low, high, before, after)


@functools.lru_cache(maxsize=1024)
def _number_automaton(lo: Fraction | None, lo_x: bool, hi: Fraction | None, hi_x: bool, integer: bool, nonint: bool,
                      fraction: str | None, mult: tuple[Fraction, ...], nonmult: tuple[Fraction, ...],
                      excluded: frozenset[Fraction], exponents: bool, max_states: int
                      ) -> tuple[CharDFA, str] | None:
    """The minimal DFA of the numbers meeting these constraints, and (``exponents``) of the exponent
    forms whose magnitude alone puts them in range (:func:`exponent_forms`), with its ``(?@...)``
    pattern; None when no plain decimal meets them. Cached process-wide: the same ranges recur across
    schemas (``minimum: 0``, percentages, ports), and their DFAs are only read afterwards."""
    dfa = number_dfa(lo, lo_x, hi, hi_x, integer=integer, nonint=nonint, fraction=fraction, mult=mult,
                     nonmult=nonmult, excluded=excluded, max_states=max_states)
    if json_automata.is_empty(dfa):
        return None
    extra = exponent_forms(lo, lo_x, hi, hi_x, integer=integer) if exponents else None
    if extra is not None:
        forms = json_automata.from_pattern(extra, search=False)
        dfa = json_automata.minimize(json_automata.product([dfa, forms], any, max_states=max_states,
                                                           what="a number constraint", setting="max_number_states"))
    return dfa, _machine_text(dfa, _machine_edges(_text_edges(dfa), lambda ranges: (char_class(ranges),)))


def _ascii_dfa(dfa: CharDFA, max_states: int) -> LexemeDFA:
    """The byte DFA of a DFA over ASCII characters (each one byte), as it stands: state ``s`` becomes
    ``s + 1`` (0 is dead)."""
    n = dfa.n_states + 1
    table = np.zeros((n, 256), dtype=table_dtype(n))
    for state, row in enumerate(dfa.edges, 1):
        for lo, hi, target in row:
            table[state, lo:hi + 1] = target + 1
    accepting = np.zeros(n, dtype=np.bool_)
    accepting[1:] = dfa.accepting
    return LexemeDFA(table, accepting, 1)


_PLAIN_LEXEMES: dict[tuple, tuple[Symbol, ...]] = {}
"""The alternatives of a schema of scalar types alone or of a constrained leaf, by :meth:`Logic.plain_scalar`'s
or :meth:`Logic.plain_leaf`'s key and the settings, when they are lexemes (they then depend on nothing
else; rules would be the grammar's own): the lexemes the first grammar made are every grammar's, and
``{"type": "string"}``, ``{"minimum": 0}``, ``{"maxLength": 255}`` and formats recur across schemas.
Emptied when it holds ``_MAX_PLAIN_LEXEMES``."""
_MAX_PLAIN_LEXEMES = 4096


# (Helpers that nested functions call are module functions: under mypyc a nested function that calls
# another one keeps both in its scope's environment, a reference cycle left for the collector.)


def _item_node(t: ArrTerm, n: int) -> Node:
    """The node of an array's item at position ``n``."""
    return node_and(*[node for i, node in t.at if i == n], *[node for s, node in t.rest if s <= n])


def _deps_met(t: ObjTerm, present: frozenset[str]) -> bool:
    """Whether the names ``present`` meet the object's dependencies (dependentRequired)."""
    return all(a not in present or set(bs) <= present for a, bs in t.deps)


def _holds_no_node(shape: Shape) -> bool:
    """Whether a shape's terms refer to no schema node (no items, properties, key rules or ``contains``),
    so compiling it reaches no node, its own included."""
    if "array" in shape.types:
        a = shape.array
        if a.at or a.rest or a.contains:
            return False
    if "object" in shape.types:
        o = shape.object
        if o.props or o.rules or o.exists:
            return False
    return True


def _productive(rules: dict[str, list[Alternative]]) -> tuple[set[str], bool]:
    """The rules that derive some text, and whether every alternative of every rule does (then there is
    nothing to remove).

    Passes over the rules still in doubt, in reverse order: the builder defines a rule before the rules
    it refers to (they are queued when referred to), so the first pass meets most references first and
    settles most rules; a pass that settles none leaves only rules that derive nothing. Rules refer only
    to rules, so when all derive text, so do all alternatives. Past ``_PRODUCTIVE_PASSES`` (long chains
    of rules defined the other way round), a worklist takes over, linear in any order."""
    productive: set[str] = set()
    doubtful = list(reversed(rules.items()))
    for _ in range(_PRODUCTIVE_PASSES):
        left = []
        for name, alternatives in doubtful:
            for alt in alternatives:
                for s in alt:
                    if type(s) is Ref and s.name not in productive:
                        break
                else:
                    productive.add(name)
                    break
            else:
                left.append((name, alternatives))
        if not left or len(left) == len(doubtful):
            return productive, not left
        doubtful = left
    return _productive_worklist(rules)


_PRODUCTIVE_PASSES = 8


def _productive_worklist(rules: dict[str, list[Alternative]]) -> tuple[set[str], bool]:
    """:func:`_productive` by a worklist over alternatives, each waiting for its references."""
    productive = least_derived((name, [s.name for s in alt if type(s) is Ref]) for name, alts in rules.items()
                               for alt in alts)
    return productive, len(productive) == len(rules)


class JsonGrammarBuilder:
    """Compiles schema nodes (see :mod:`json_logic`) into one grammar."""

    def __init__(self, logic: Logic, options: BuildOptions) -> None:
        self.logic = logic
        self.o = options
        self.s = options.settings
        self.r = _Rules(options.settings)
        self._nodes: dict[Node, Symbol | None] = {}
        self._entered: set[Node] = set()  # the nodes whose symbols are being made (see symbol)
        self._queue: deque[tuple[Node, str]] = deque()
        self._pending: dict[str, Node] = {}  # nonterminals left for a parser to ask for (see expand)
        self._cache: dict[Any, Any] = {}
        ws = options.whitespace
        w = "" if ws != "flexible" or options.max_whitespace == 0 else f"[ \\t\\n\\r]{{0,{options.max_whitespace}}}"
        colon, comma = (": ", ", ") if ws == "pretty" else (":", ",")
        self.open_obj = self._lex(r"\{" + w)
        self.close_obj = self._lex(w + r"\}")
        self.empty_obj = self._lex(r"\{" + w + r"\}")
        self.open_arr = self._lex(r"\[" + w)
        self.close_arr = self._lex(w + r"\]")
        self.empty_arr = self._lex(r"\[" + w + r"\]")
        self.colon = self._lex(w + escape_text(colon) + w)
        self.comma = self._lex(w + escape_text(comma) + w)
        self.quote = self._lex('"')
        self.string = self._lex('"' + ANY_CHAR + '*"')
        self.distinct_colon = self._lex(DISTINCT + self.colon.pattern)
        self.distinct_comma = self._lex(DISTINCT + self.comma.pattern)
        self.distinct_close = self._lex(DISTINCT + self.close_arr.pattern)

    @staticmethod
    def _lex(pattern: str) -> Lexeme:
        """A lexeme built here by construction (non-empty, never matching the empty string): not compiled
        now; the test suite compiles every lexeme of the grammars it checks."""
        return Lexeme(pattern)

    def build(self, node: Node) -> Grammar:
        with _nesting_limit():
            start = self.symbol(node)
            self._drain()
        return self.r.finish(start, self._pending, self, self.o.distinct_items)

    def expand(self, name: str) -> tuple[dict[str, tuple[Alternative, ...]], tuple[Lexeme, ...]]:
        """Build the node that nonterminal ``name`` was left pending for and, with it, every other node
        pending in the grammar, values inside them included (``Expander.expand``), within a time limit
        of its own. The first value a parser reaches builds them all, so one mask of a document pays
        for the builds instead of one mask per value (a mask's tail counts slow masks)."""
        deadline = time.monotonic() + self.s.time_limit_s
        self.o = dataclasses.replace(self.o, deadline=deadline, defer=False)
        self.logic.opts = dataclasses.replace(self.logic.opts, deadline=deadline)
        names = [name, *(n for n in self._pending if n != name and self.r.holds(n))]
        self._queue.extend((self._pending.pop(n), n) for n in names)
        with _nesting_limit():
            self._drain()
        return self.r.extend(names, self._pending)

    def _drain(self) -> None:
        """Compile the nodes of the work list."""
        while True:  # the time is checked at least once: the start may have needed no expansion
            if time.monotonic() > self.o.deadline:
                raise LimitError("compiling the schema took too long", setting="time_limit_s")
            if not self._queue:
                return
            item, name = self._queue.popleft()
            self.r.define(name, ((s,) for s in self._alternatives(item)))

    def symbol(self, node: Node, value: bool = False) -> Symbol | None:
        """The symbol of a node; None when it admits nothing. A node whose shapes hold no further node
        (a string, a number, an enum...) is compiled now, its one symbol used as it is; any other gets
        a nonterminal, compiled later from the work list (the way a recursive schema's nodes refer to
        themselves). The commonest forms of schema (a reference alone, scalar types alone, an enum of
        strings, a leaf's own constraints, an array of one item schema, an object of properties, an
        ``anyOf`` or ``oneOf`` alone) take shortcuts past the logic's shapes: see ``Logic.pure_ref`` and
        ``Logic.plain_*``. A node met again inside its own shortcut (an array of itself) is compiled
        from the work list. With ``defer``, a property's ``value`` that ``Logic.deferrable`` accepts is
        left pending: a parser predicts it only once its key is written, so the first masks never need it
        (an item or a branch may be predicted at a document's first byte)."""
        if node == FALSE:
            return None
        if node == TRUE:
            return self.any_value(self.o.max_nesting)
        if node in self._nodes:
            return self._nodes[node]
        if node in self._entered:
            return self._deferred(node)
        if value and self.o.defer and self.logic.deferrable(node):
            return self._deferred(node, later=True)
        self._entered.add(node)
        try:
            found = self._compiled(node)
        finally:
            self._entered.discard(node)
        self._nodes[node] = found
        return found

    def _compiled(self, node: Node) -> Symbol | None:
        """The symbol of a node not met before (see :meth:`symbol`)."""
        target = self.logic.pure_ref(node)
        if target is not None:  # the referenced schema's symbol, shared by every reference to it
            return self.symbol(target)
        if self.logic.plain_any(node):
            return self.any_value(self.o.max_nesting)
        if (plain := self.logic.plain_scalar(node) or self.logic.plain_leaf(node)) is not None:
            key = (plain, self.s)
            alternatives = _PLAIN_LEXEMES.get(key)
            if alternatives is None:
                alternatives = tuple(self._alternatives(node))
                if all(type(s) is Lexeme for s in alternatives):
                    if len(_PLAIN_LEXEMES) >= _MAX_PLAIN_LEXEMES:
                        _PLAIN_LEXEMES.clear()  # (lexemes, quick to make again; one call, safe across threads)
                    _PLAIN_LEXEMES[key] = alternatives
            # One rule per grammar for the types of several such schemas.
            return self._cached(("plain", key), lambda: self._union(alternatives))
        if (strings := self.logic.plain_strings(node)) is not None:
            term = StrTerm(values=strings)
            return self._cached(("str", term), lambda: self.string_symbol(term))
        if (array := self.logic.plain_array(node)) is not None:
            return self._plain_array(*array)
        if (branches := self.logic.plain_branches(node)) is not None:
            return self._union([s for s in dict.fromkeys(map(self.symbol, branches)) if s is not None])
        if self._holds_no_node(node):
            return self._union(self._alternatives(node))
        return self._deferred(node)

    def _deferred(self, node: Node, later: bool = False) -> Ref:
        """A nonterminal for ``node``, compiled later from the work list (``later``: when a parser
        first needs it, see :meth:`expand`)."""
        found = self._nodes[node] = Ref(self.r.fresh("node"))
        self.r.rules.setdefault(found.name, [])
        if later:
            self._pending[found.name] = node
        else:
            self._queue.append((node, found.name))
        return found

    def _plain_array(self, items: Node, low: int, high: int | None, distinct: bool = False) -> Symbol | None:
        """An array of ``low`` to ``high`` (None: any number of) items under ``items`` (see
        :meth:`Logic.plain_array`): the rules the member sequence writes for it, without working out
        its states. Rule ``k`` follows the ``k``-th item; past ``low`` (and the first) an unbounded
        array's last rule loops. ``distinct``: items (strings, open objects), separated and closed by the
        :data:`~banister.grammar.ir.DISTINCT` lexemes, which a recognizer ends no repeated item with."""
        if high is not None and high < low:
            return None
        item = self.symbol(items)
        if item is None:
            return self.empty_arr if low == 0 else None
        comma, close = (self.distinct_comma, self.distinct_close) if distinct else (self.comma, self.close_arr)

        def write() -> Symbol:
            count = high if high is not None else max(low, 1)
            then = [Ref(self.r.fresh("then")) for _ in range(count)]
            for k, rule in enumerate(then, 1):
                more = then[k] if k < count else rule if high is None else None
                self.r.define(rule.name, [
                    *([(close,)] if k >= low else []),
                    *([(comma, item, more)] if more is not None else []),
                ])
            return self.r.add("seq", [
                *([(self.open_arr, item, then[0])] if count else []),
                *([(self.empty_arr,)] if low == 0 else []),
            ])

        return self._cached(("array of", item, low, high, distinct), write)

    def _union(self, alternatives: Sequence[Symbol]) -> Symbol | None:
        """One symbol for ``alternatives``: the only one, a rule of them, or None when there are none."""
        if len(alternatives) == 1:
            return alternatives[0]
        return self.r.add("node", [(s,) for s in alternatives]) if alternatives else None

    def _holds_no_node(self, node: Node) -> bool:
        """Whether compiling ``node`` reaches no other node (then it is compiled at once)."""
        term = self.logic.plain_object(node)
        if term is not None:
            return not (term.props or term.rules)
        return all(_holds_no_node(shape) for shape in self.logic.dnf(node))

    def _alternatives(self, node: Node) -> list[Symbol]:
        term = self.logic.plain_object(node)
        if term is not None:  # one shape, the object term: no expansion, nothing to prune
            found = self._cached(("obj", term, node), lambda: self.object(term, node))
            return [] if found is None else [found]
        out: list[Symbol | None] = []
        for shape in self.logic.dnf(node):
            shape = self.logic.prune(shape)
            if shape.types == ALL_TYPES and all(shape.free(t) for t in TYPES):
                out.append(self.any_value(self.o.max_nesting))
                continue
            for kind in TYPES:
                if kind in shape.types:
                    out.append(self._typed(kind, shape, node))
        return [s for s in dict.fromkeys(out) if s is not None]

    def _typed(self, kind: str, shape: Any, node: Node) -> Symbol | None:
        if kind == "null":
            return self._lex("null")
        if kind == "boolean":
            return self._lex("|".join(sorted("true" if b else "false" for b in shape.boolean)))
        if kind == "number":
            return self._cached(("num", shape.number), lambda: self.number(shape.number))
        if kind == "string":
            return self._cached(("str", shape.string), lambda: self.string_symbol(shape.string))
        if kind == "array":
            return self._cached(("arr", shape.array), lambda: self.array(shape.array))
        return self._cached(("obj", shape.object, node), lambda: self.object(shape.object, node))

    def _cached(self, key: Any, make: Any) -> Any:
        if key not in self._cache:
            self._cache[key] = make()
        return self._cache[key]

    # ---------------------------------------------------------------------------------- free values

    def any_value(self, depth: int | None) -> Symbol:
        """Any JSON value with arrays and objects nested at most ``depth`` deep (None: any depth)."""
        key = ("any", depth)
        if key in self._cache:
            return self._cache[key]  # type: ignore[return-value]
        if depth is None:
            return self._any_value_recursive()
        # Built level by level from the deepest one not built yet (the names are taken in the order a
        # recursive build would take them); each level is six rules written straight into the table.
        low = depth
        while low > 0 and ("any", low - 1) not in self._cache:
            low -= 1
        scalars = [(self._lex("null|true|false"),), (self._lex(NUMBER),), (self.string,)]
        r = self.r
        rules = r.rules
        ref = None
        for level in range(low, depth + 1):
            if level == 0:
                name = r.fresh("any")
                rules.setdefault(name, []).extend(scalars)
                r.grow(6)
            else:
                inner = self._cache[("any", level - 1)]
                member, members, items = Ref(r.fresh("member")), Ref(r.fresh("members")), Ref(r.fresh("items"))
                obj, arr, name = Ref(r.fresh("object")), Ref(r.fresh("array")), r.fresh("any")
                rules.setdefault(member.name, []).append((self.string, self.colon, inner))
                rules.setdefault(members.name, []).extend([(member,), (members, self.comma, member)])
                rules.setdefault(items.name, []).extend([(inner,), (items, self.comma, inner)])
                rules.setdefault(obj.name, []).extend([(self.empty_obj,), (self.open_obj, members, self.close_obj)])
                rules.setdefault(arr.name, []).extend([(self.empty_arr,), (self.open_arr, items, self.close_arr)])
                rules.setdefault(name, []).extend([*scalars, (obj,), (arr,)])
                r.grow(38)
            ref = self._cache[("any", level)] = Ref(name)
        return ref  # type: ignore[return-value]

    def _any_value_recursive(self) -> Ref:
        """Any JSON value, nested to any depth: one level of the rules above that refers to itself."""
        r = self.r
        value = Ref(r.fresh("any"))
        self._cache[("any", None)] = value
        member, members, items = Ref(r.fresh("member")), Ref(r.fresh("members")), Ref(r.fresh("items"))
        obj, arr = Ref(r.fresh("object")), Ref(r.fresh("array"))
        r.define(member.name, [(self.string, self.colon, value)])
        r.define(members.name, [(member,), (members, self.comma, member)])
        r.define(items.name, [(value,), (items, self.comma, value)])
        r.define(obj.name, [(self.empty_obj,), (self.open_obj, members, self.close_obj)])
        r.define(arr.name, [(self.empty_arr,), (self.open_arr, items, self.close_arr)])
        r.define(value.name, [(self._lex("null|true|false"),), (self._lex(NUMBER),), (self.string,), (obj,), (arr,)])
        return value

    def value(self, value: Any) -> Symbol | None:
        """Exactly one JSON value (objects in their own key order)."""
        kind = json_type(value)
        if kind == "null":
            return self._lex("null")
        if kind == "boolean":
            return self._lex("true" if value else "false")
        if kind == "number":
            return self._lex(_number_values([to_fraction(value)], "any"))
        if kind == "string":
            return self._lex(json_strings([value]) or "")
        if kind == "array":
            if not value:
                return self.empty_arr
            body: list[Symbol | None] = [self.open_arr]
            for i, v in enumerate(value):
                body.extend([self.comma] if i else [])
                body.append(self.value(v))
            return self.r.add("const", [(*body, self.close_arr)])
        if not value:
            return self.empty_obj
        body = [self.open_obj]
        for i, (k, v) in enumerate(value.items()):
            body.extend([self.comma] if i else [])
            body.extend([self._lex(json_strings([k]) or ""), self.colon, self.value(v)])
        return self.r.add("const", [(*body, self.close_obj)])

    # ---------------------------------------------------------------------------------- numbers

    def number(self, t: NumTerm) -> Symbol | None:
        form = "plain" if t.plain else "fraction" if t.nonplain else "any"
        if t.values is not None:
            kept = sorted(v for v in t.values if t.admits(v))
            if len(kept) > self.s.max_enum_values:
                raise LimitError(f"an enum of {len(kept)} numbers", setting="max_enum_values")
            values = _number_values(kept, form)
            return self._lex(values) if values else None
        simple = not (t.mult or t.nonmult or t.nonint or t.excluded or t.nonplain)
        if simple and t.lo is None and t.hi is None:
            if t.plain:
                return self._lex(r"-?(?:0|[1-9][0-9]*)")
            if t.integer:
                return self._lex(f"{INTEGER}|{exponent_forms(None, False, None, False, integer=True)}")
            return self._lex(NUMBER)
        if simple and not t.integer and {t.lo, t.hi} <= {None, Fraction(0)}:
            if t.lo is not None and t.hi is not None:
                return self._lex(number_value_regex(Fraction(0)) or "") if not (t.lo_x or t.hi_x) else None
            if t.lo is not None:
                return self._lex(signed_number_regex("+", t.lo_x))
            return self._lex(signed_number_regex("-", t.hi_x))
        fraction = "forbid" if t.plain else "require" if t.nonplain else None
        found = _number_automaton(t.lo, t.lo_x, t.hi, t.hi_x, t.integer, t.nonint, fraction, t.mult, t.nonmult,
                                  t.excluded, simple and not t.plain, self.s.max_number_states)
        if found is None:
            return None
        dfa, pattern = found
        if dfa.n_states + 1 > self.s.max_automaton_lexeme_states:
            return self._dfa_rules(dfa, char_class, None, "number")
        # One automaton lexeme, whose byte DFA is the number DFA itself (its characters are ASCII),
        # offered to the lexer: writing the DFA out as a regex for the regex compiler to build back was
        # most of a new range's compile time (about 0.8 ms of 1.45).
        offer_builder(pattern, functools.partial(_ascii_dfa, dfa), dfa.n_states + 1)
        return self._lex(pattern)

    # ---------------------------------------------------------------------------------- strings

    def string_symbol(self, t: StrTerm) -> Symbol | None:
        plan = string_plan(
            t.unplaced(),
            max_enum_values=self.s.max_enum_values,
            max_states=self.s.max_string_states,
            max_regex_length=self.s.max_regex_length,
        )
        return self._plan(plan)

    def _plan(self, plan: StringPlan | None) -> Symbol | None:
        if plan is None:
            return None
        if plan.kind == "regex":
            return self.r.lexeme(plan.regex) if plan.dfa is None else self._text_lexeme(plan.regex, plan.dfa)
        if plan.kind == "runs":
            strings = [self._length(run) for run in plan.runs] + ([self.r.lexeme(plan.regex)] if plan.regex else [])
            return strings[0] if len(strings) == 1 else self.r.add("string", [(each,) for each in strings])
        assert plan.dfa is not None
        symbol = self._dfa_rules(plan.dfa, json_char, self.quote, "chars", json_char_parts)
        if isinstance(symbol, Lexeme):  # one automaton lexeme (``(?@...)``): its bytes built from the DFA too
            self._text_lexeme(symbol.pattern, plan.dfa)
        return symbol

    def _text_lexeme(self, pattern: str, dfa: CharDFA) -> Lexeme:
        """The lexeme ``pattern``, the JSON strings of the non-empty ``dfa``, its byte DFA offered as built
        from ``dfa`` directly (:func:`json_bytes.text_dfa`): the regex compiler took much of a slow
        schema's compile time over such regexes (a key region's, thousands of characters long)."""
        offer_builder(pattern, functools.partial(_text_dfa, dfa), _UNKNOWN_STATES)
        return self._lex(pattern)

    def _length(self, run: CountedRun) -> Symbol:
        """The strings of ``run``: its opening, ``low..high`` characters of its unit, its closing. A long
        run is blocks of ``max_lexeme_repeat`` characters, each a lexeme, then a closing run with the
        closing text and the quote; the counts of blocks are rules whose number grows with the logarithm
        of the bound (``maxLength: 1000000`` is a few dozen rules, not 31,250)."""
        low, high, unit = run.low, run.high, run.unit
        block = self.s.max_lexeme_repeat
        short = (high is not None and high <= block) or (high is None and low <= block)
        if short and not run.opening:
            return self._run(low, high, '"', run.closing + '"', unit)
        opening = self._lex('"' + run.opening) if run.opening else self.quote
        if short:
            return self.r.add("string", [(opening, self._closing(low, high, run))])
        full = self._blocks(1, unit)
        fewest, first = divmod(low, block)  # the full blocks every string has, the characters after them
        if high is None:
            loop = self.r.fresh("len")
            self.r.define(loop, [(self._closing(0, block - 1, run),), (full, Ref(loop))])
            rest = [(self._closing(first, block - 1, run),), (full, Ref(loop))]
        else:
            most, last = divmod(high, block)
            if fewest == most:
                rest = [(self._closing(first, last, run),)]
            else:  # fewest blocks and a run from `first` on; or more blocks, and at `most` a run to `last`
                between = most - fewest - 1
                after: Symbol = self._closing(0, last, run)
                if between:
                    up_to = self._up_to_blocks(between - 1, self._closing(0, block - 1, run), unit)
                    after = self.r.add("len", [(up_to,), (self._blocks(between, unit), after)])
                rest = [(self._closing(first, block - 1, run),), (full, after)]
        head: tuple[Symbol, ...] = (opening,) if not fewest else (opening, self._blocks(fewest, unit))
        return self.r.add("string", [(*head, *alt) for alt in rest])

    def _closing(self, low: int, high: int | None, run: CountedRun) -> Lexeme:
        """``low`` to ``high`` characters of ``run``'s unit, its closing text and the quote."""
        return self._run(low, high, "", run.closing + '"', run.unit)

    def _blocks(self, count: int, unit: str) -> Symbol:
        """Exactly ``count`` (at least 1) full blocks of ``unit`` (one lexeme), a rule per halving."""
        if count == 1:
            return self._run(self.s.max_lexeme_repeat, self.s.max_lexeme_repeat, "", "", unit)
        half, odd = self._blocks(count // 2, unit), (self._blocks(1, unit),) * (count % 2)
        return self._cached(("blocks", unit, count), lambda: self.r.add("len", [(half, half, *odd)]))

    def _up_to_blocks(self, count: int, then: Symbol, unit: str) -> Symbol:
        """None to ``count`` full blocks of ``unit``, then ``then``. ``0..2m+1`` blocks are ``0..m``, then
        none or ``m+1``: each count is read one way only, so the parser's sets do not grow with it."""
        if count == 0:
            return then
        if count % 2 == 0:
            return self.r.add("len", [(then,), (self._blocks(1, unit), self._up_to_blocks(count - 1, then, unit))])
        half = count // 2
        return self._up_to_blocks(half, self.r.add("len", [(then,), (self._blocks(half + 1, unit), then)]), unit)

    def _run(self, low: int, high: int | None, before: str, after: str, unit: str) -> Lexeme:
        """``low`` to ``high`` characters of ``unit`` between the regexes ``before`` and ``after``, as one
        lexeme. Between quotes or nothing, its DFA is offered to be built layer by layer
        (``LexemeDFA.counted``); with other text around it the regex compiler builds it."""
        pattern = before + _repeat(unit, low, high) + after
        if before in ("", '"') and after in ("", '"'):
            ends = before.encode(), after.encode()
            offer_builder(pattern, functools.partial(_run_dfa, low, high, *ends, unit),
                          LexemeDFA.counted_states(lexeme_dfa(unit, 1 << 16), low, high, *ends))
        return self._lex(pattern)

    def _dfa_rules(self, dfa: CharDFA, label: Any, close: Lexeme | None, prefix: str, parts: Any = None
                   ) -> Symbol | None:
        """A DFA with no short regex (between ``close`` quotes, if given): one ``(?@...)`` lexeme when its
        byte-level DFA has at most ``max_automaton_lexeme_states`` states, else right-linear rules, one
        nonterminal per state and one lexeme per edge label (every character then crosses a lexeme
        boundary).
        ``label(ranges)``: the regex of one edge; ``parts(ranges)``, if given: the same as regexes whose
        union it is, for the lexeme's edges (see :func:`json_char_parts`)."""
        rows = _text_edges(dfa)
        if close is not None or not dfa.accepting[0]:
            try:
                return self._dfa_lexeme(dfa, rows, parts or (lambda ranges: (label(ranges),)), close is not None)
            except LimitError:  # its byte-level DFA is too big for one lexeme
                pass
        names = [self.r.fresh(prefix) for _ in range(dfa.n_states)]
        for s, row in enumerate(rows):
            alts: list[tuple[Symbol | None, ...]] = [(self._lex(label(ranges)), Ref(names[t])) for ranges, t in row]
            if dfa.accepting[s]:
                alts.append((close,) if close is not None else ())
            self.r.define(names[s], alts)
        if close is None:
            return Ref(names[0])
        return self.r.add("string", [(close, Ref(names[0]))])

    def _dfa_lexeme(self, dfa: CharDFA, rows: list, parts: Any, quoted: bool) -> Lexeme | None:
        """The DFA (``rows``: its :func:`_text_edges`) as one lexeme whose edges read ``parts(ranges)``
        (an edge each); None when it accepts no text. LimitError when its byte-level DFA would have more
        than ``max_automaton_lexeme_states`` states (:func:`_machine_states`)."""
        in_text = CharDFA([sorted((lo, hi, t) for ranges, t in row for lo, hi in ranges) for row in rows],
                          dfa.accepting)
        if json_automata.is_empty(json_automata.trim(in_text)):
            return None
        edges = _machine_edges(rows, parts)
        limit = self.s.max_automaton_lexeme_states
        if _machine_states(dfa.n_states, edges) > limit:
            raise LimitError(f"an automaton lexeme needs more than {limit} states", "max_automaton_lexeme_states")
        machine = _machine_text(dfa, edges)
        return self._lex('"' + machine + '"' if quoted else machine)

    # ---------------------------------------------------------------------------------- arrays

    def array(self, t: ArrTerm) -> Symbol | None:
        if t.values is not None:
            kept = [v for v in (json.loads(x) for x in t.values) if self.logic._array_admits(t, v)]
            return self.r.add("enum", [(self.value(v),) for v in kept]) if kept else None
        if t.unique and (t.max_items is None or t.max_items > 1):
            return self._unique_array(t)
        positions = max([i + 1 for i, _ in t.at] + [s for s, _ in t.rest] + [c.start for c in t.contains] + [0])
        counted = [c for c in t.contains if c.max is not None]
        claimed = [c for c in t.contains if c.max is None and c.min > 0]
        if len(t.contains) > 3:
            raise SchemaError("more than three contains on one array", t.contains[0].where, "contains")
        top = max(positions, t.min_items, 1) if t.max_items is None else max(positions, t.min_items, t.max_items)

        caps = [c.max + 1 for c in counted] + [c.min for c in claimed]  # type: ignore[operator]

        def final(state: tuple) -> bool:
            n, counts = state
            if n < t.min_items:
                return False
            for c, k in zip(counted + claimed, counts):
                if k < c.min or (c.max is not None and k > c.max):
                    return False
            return True

        def moves(state: tuple) -> list[tuple[Piece, tuple]]:
            n, counts = state
            if t.max_items is not None and n >= t.max_items:
                return []
            base = _item_node(t, n)
            options: list[tuple[Node, tuple]] = [(base, ())]
            for c in counted + claimed:
                active = n >= c.start
                nxt_options = []
                for node, ks in options:
                    if not active:
                        nxt_options.append((node, (*ks, 0)))
                        continue
                    nxt_options.append((node_and(node, c.node), (*ks, 1)))
                    nxt_options.append((node_and(node, node_not(c.node)) if c.max is not None else node, (*ks, 0)))
                options = nxt_options
            out: list[tuple[Piece, tuple]] = []
            for node, ks in options:
                new_counts = tuple(min(k + d, cap) for k, d, cap in zip(counts, ks, caps))
                if any(c.max is not None and k > c.max for c, k in zip(counted + claimed, new_counts)):
                    continue
                item = self.symbol(node)
                if item is not None:
                    out.append(((item,), (min(n + 1, top), new_counts)))
            return out

        return self._sequence((0, tuple(0 for _ in caps)), final, moves, "array")

    def _sequence(
        self,
        start: tuple,
        final: Any,
        moves: Any,
        kind: Literal["array", "object"],
        skip: Any = None,
    ) -> Symbol:
        """Bracketed, comma-separated members driven by states: ``moves(state)`` lists (a member's
        symbols, next state); the sequence may close in a state where ``final(state)``. ``skip(state)``, if
        given, is a state whose members may come next instead, or None (an optional property left
        out: each position then offers its own member or the next position's, a rule of two
        alternatives rather than one per later member). ``kind`` picks the brackets and the state
        limit (``max_array_states`` or ``max_object_states``)."""
        if kind == "array":
            open_, close, empty, limit = self.open_arr, self.close_arr, self.empty_arr, self.s.max_array_states
        else:
            open_, close, empty, limit = self.open_obj, self.close_obj, self.empty_obj, self.s.max_object_states
        setting = f"max_{kind}_states"
        first: dict[tuple, Ref] = {}
        after: dict[tuple, Ref] = {}
        todo: deque[tuple[bool, tuple]] = deque()

        def ref(table: dict[tuple, Ref], state: tuple) -> Ref:
            found = table.get(state)
            if found is None:
                if len(first) + len(after) > 2 * limit:
                    raise LimitError(f"a member sequence needs more than {limit} states", setting=setting)
                found = table[state] = Ref(self.r.fresh("item" if table is first else "then"))
                todo.append((table is first, state))
            return found

        alts: list[tuple[Symbol | None, ...]] = [(open_, ref(first, start))]
        if final(start):
            alts.append((empty,))
        while todo:
            is_first, state = todo.popleft()
            steps = moves(state)
            later = None if skip is None else skip(state)
            if is_first:
                options: list[tuple[Symbol | None, ...]] = [(*piece, ref(after, nxt)) for piece, nxt in steps]
                if later is not None:
                    options.append((ref(first, later),))
                self.r.define(first[state].name, options)
            else:
                more: list[tuple[Symbol | None, ...]] = [(close,)] if final(state) else []
                if steps or later is not None:
                    more.append((self.comma, ref(first, state)))
                self.r.define(after[state].name, more)
        return self.r.add("seq", alts)

    def _unique_array(self, t: ArrTerm) -> Symbol | None:
        if t.at or t.contains or any(s > 0 for s, _ in t.rest):
            raise SchemaError(
                "uniqueItems with positional items or contains is not supported", t.unique or "", "uniqueItems"
            )
        item = node_and(*(n for _, n in t.rest))
        values = self._finite_values(item)
        if values is None or len(values) > self.s.max_unique_values:
            if self.o.distinct_items and self._endless_items(item):
                return self._plain_array(item, t.min_items, t.max_items, distinct=True)
            raise SchemaError(
                "uniqueItems is only enforced when items come from a few values (an enum, booleans)"
                + (" or are strings or objects whose every prefix has endless completions"
                   if self.o.distinct_items else ""),
                t.unique or "",
                "uniqueItems",
            )
        symbols = [self.value(v) for v in values]

        def final(state: tuple) -> bool:
            n = state[0].bit_count()
            return n >= t.min_items

        def moves(state: tuple) -> list[tuple[Piece, tuple]]:
            used = state[0]
            if t.max_items is not None and used.bit_count() >= t.max_items:
                return []
            return [((sym,), (used | (1 << i),)) for i, sym in enumerate(symbols) if sym is not None and not used >> i & 1]

        return self._sequence((0,), final, moves, "array")

    def _endless_items(self, node: Node) -> bool:
        """Whether ``node`` admits only strings and objects, and every prefix of one has endless
        completions: then refusing a repeated item's closing quote or bracket never leaves it with no way
        to end."""
        shapes = self.logic.dnf(node)
        if not shapes or not all(shape.types and shape.types <= {"string", "object"} for shape in shapes):
            return False
        if not all(self._open_object(shape.object) for shape in shapes if "object" in shape.types):
            return False
        # The strings of all shapes together: an enum beside {"minLength": 1} leaves no prefix short.
        n = self.s.max_string_states
        try:
            strings = [string_dfa(shape.string.unplaced(), max_states=n) for shape in shapes if "string" in shape.types]
            return not strings or json_automata.is_endless(
                strings[0] if len(strings) == 1 else json_automata.product(strings, any, max_states=n))
        except LimitError:
            return False

    def _open_object(self, t: ObjTerm) -> bool:
        """Whether an object under ``t`` can always take one more key: no count or value list bounds it,
        no obligation holds it, and every key but the named ones is allowed, with a value (the one
        region of :meth:`_extra_members`)."""
        if t.max_props is not None or t.values is not None or t.exists:
            return False
        rules = [(keys, node) for keys, node, _ in t.rules]
        return self._one_region(rules) and self.symbol(node_and(*(node for _, node in rules))) is not None

    def _one_region(self, rules: list[tuple[KeySet, Node]]) -> bool:
        """Whether ``rules`` give every key but the named ones one value node: each is the rule of other
        keys (no patterns to split them), or admits any value (``patternProperties: {"^.{1,255}$": {}}``
        beside no ``additionalProperties``: splitting the keys by pattern would change nothing)."""
        return (all(keys[0] == "other" and not keys[2] for keys, _ in rules)
                or all(self.logic.dnf(node) == [ANY] for _, node in rules))

    def _finite_values(self, node: Node) -> list[Any] | None:
        """The values of a node when it admits a finite, enumerable set of them."""
        out: dict[Any, Any] = {}
        for shape in self.logic.dnf(node):
            for kind in shape.types:
                if kind == "null":
                    found: list[Any] = [None]
                elif kind == "boolean":
                    found = sorted(shape.boolean)
                elif (
                    kind == "number"
                    and shape.number.values is not None
                    and not (shape.number.plain or shape.number.nonplain)
                ):
                    found = [_as_json_number(v) for v in sorted(shape.number.values) if shape.number.admits(v)]
                elif kind == "string" and shape.string.values is not None:
                    found = sorted(v for v in shape.string.values if shape.string.admits(v))
                elif kind in ("array", "object") and getattr(shape, kind).values is not None:
                    found = [json.loads(x) for x in getattr(shape, kind).values]
                    found = [v for v in found if self.logic.shape_admits(shape.only({kind}), v)]
                else:
                    return None
                for v in found:
                    out.setdefault(canon(v), v)
        return list(out.values())

    # ---------------------------------------------------------------------------------- objects

    def object(self, t: ObjTerm, node: Node) -> Symbol | None:
        """Members in sequence; states track the position among the named keys (or the set used, for
        ``key_order="any"``), the member count, the names that dependencies mention, and which "some key
        in K has a value in W" obligations (``exists``, from complements) a member has met."""
        logic = self.logic
        if t.values is not None:
            kept = [v for v in (json.loads(x) for x in t.values) if logic._object_admits(t, v)]
            return self.r.add("enum", [(self.value(v),) for v in kept]) if kept else None
        if len(t.exists) > 2:
            raise SchemaError("more than two 'some key' obligations (complements) on one object", t.exists[0][2])
        # Every name the node's schemas mention takes its place in schema order, also in a branch that
        # does not declare it (its value then follows this branch's rules), so schema order is the same
        # whichever branch matches (the other orders are below).
        rank = logic.rank(node)
        names: list[str] = list(
            dict.fromkeys(
                [*rank, *(n for n, _ in t.props), *sorted(t.required), *(x for a, bs in t.deps for x in (a, *bs))]
            )
        )
        names.sort(key=lambda n: rank.get(n, len(rank)))
        declared: dict[str, list[Node]] = {}
        for k, n in t.props:
            declared.setdefault(k, []).append(n)
        members: dict[str, list[tuple[Piece, int]]] = {}
        for name in names:
            parts = [*declared.get(name, ()), *(n for keys, n, _ in t.rules if logic.key_in(keys, name))]
            witness = [(e, w) for e, (keys, w, _) in enumerate(t.exists) if logic.key_in(keys, name)]
            members[name] = self._variants(node_and(*parts), witness, lambda n, name=name: self._member(name, n))
        if any(not members[n] for n in t.required):
            return None
        # Where a count needs two members, an other key is followed by the marked colon, which ends no
        # repeated key (see DistinctItems): a repeat would count twice here and once in a JSON parser.
        distinct = self.o.distinct_items and t.min_props >= 2
        extra = self._cached(("extra", t.rules, t.exists, tuple(sorted(names)), distinct),
                             lambda: self._extra_members(t, names, distinct))
        tracked = sorted({x for a, bs in t.deps for x in (a, *bs)})
        cap = t.max_props if t.max_props is not None else t.min_props  # counts past it change nothing
        done = (1 << len(t.exists)) - 1

        if self.o.key_order == "any":
            return self._any_order(t, names, members, extra, cap, done)

        # Named keys go in schema order. An object of a few possible names also takes them in the two
        # other orders schemas are written for: this branch's own (an anyOf branch's properties as it
        # lists them) and inherited first (what $ref, allOf... declare before the schema's own). Each
        # order is a copy of the member sequence; names no member can have take no place.
        live = [n for n in names if members[n]]
        orders = [live]
        # (One schema of properties alone, ``Logic.plain_object``, has one order.)
        if len(live) <= self.s.max_reordered_names and logic.plain_object(node) is None:
            declared_at: dict[str, int] = {}
            for k, _ in t.props:
                declared_at.setdefault(k, len(declared_at))
            inherited = logic.rank(node, own_first=False)
            orders.append(sorted(live, key=lambda n: declared_at.get(n, len(declared_at))))
            orders.append(sorted(live, key=lambda n: inherited.get(n, len(inherited))))

        def in_order(order: list[str]) -> Symbol:
            n_names = len(order)
            required_from = [False] * (n_names + 1)
            for i in range(n_names - 1, -1, -1):
                required_from[i] = required_from[i + 1] or order[i] in t.required

            def final(state: tuple) -> bool:
                i, c, present, bits = state
                return not required_from[i] and c >= t.min_props and _deps_met(t, present) and bits == done

            def moves(state: tuple) -> list[tuple[Piece, tuple]]:
                # The member of the name at position i (or, past the names, any other key's).
                i, c, present, bits = state
                if t.max_props is not None and c >= t.max_props:
                    return []
                if i == n_names:
                    return [(piece, (n_names, min(c + 1, cap), present, bits | b)) for piece, b in extra]
                name = order[i]
                now = present | {name} if name in tracked else present
                return [(piece, (i + 1, min(c + 1, cap), now, bits | b)) for piece, b in members[name]]

            def skip(state: tuple) -> tuple | None:
                # An optional name left out: the next position's members instead.
                i, c, present, bits = state
                if i == n_names or order[i] in t.required or (t.max_props is not None and c >= t.max_props):
                    return None
                if i + 1 == n_names and not extra:
                    return None
                return (i + 1, c, present, bits)

            return self._sequence((0, 0, frozenset(), 0), final, moves, "object", skip)

        sequences = [(in_order(order),) for order in {tuple(o): o for o in orders}.values()]
        return sequences[0][0] if len(sequences) == 1 else self.r.add("object", sequences)

    def _variants(self, base: Node, witness: list[tuple[int, Node]], make: Any) -> list[tuple[Any, int]]:
        """What ``make`` gives for a member's node: the plain one, and one per subset of the obligations
        it can meet (its value then also valid under their nodes), with the bits of that subset."""
        out = []
        for size in range(len(witness) + 1):
            for chosen in itertools.combinations(witness, size):
                sym = make(node_and(base, *(w for _, w in chosen)))
                if sym is not None:
                    out.append((sym, sum(1 << e for e, _ in chosen)))
        return out

    def _member(self, name: str, node: Node) -> Piece | None:
        """``"name": value``, written into the object's rules (a rule of its own would cost the parser
        one more item to predict and complete per member)."""
        value = self.symbol(node, value=True)
        return None if value is None else (self._lex(json_strings([name]) or ""), self.colon, value)

    def _any_order(
        self,
        t: ObjTerm,
        names: list[str],
        members: dict[str, list[tuple[Piece, int]]],
        extra: list[tuple[Piece, int]],
        cap: int,
        done: int,
    ) -> Symbol | None:
        usable = [n for n in names if members[n]]
        if 2 ** len(usable) > self.s.max_object_states:
            raise LimitError(
                f"key_order='any' with {len(usable)} named properties needs 2^{len(usable)} states",
                setting="max_object_states",
            )

        def final(state: tuple) -> bool:
            used, c, bits = state
            return t.required <= used and c >= t.min_props and _deps_met(t, used) and bits == done

        def moves(state: tuple) -> list[tuple[Piece, tuple]]:
            used, c, bits = state
            if t.max_props is not None and c >= t.max_props:
                return []
            out: list[tuple[Piece, tuple]] = [
                (piece, (used | {n}, min(c + 1, cap), bits | b)) for n in usable if n not in used for piece, b in members[n]
            ]
            out += [(piece, (used, min(c + 1, cap), bits | b)) for piece, b in extra]
            return out

        return self._sequence((frozenset(), 0, 0), final, moves, "object")

    def _extra_members(self, t: ObjTerm, names: list[str], distinct: bool = False) -> list[tuple[Piece, int]]:
        """Members whose key is none of ``names``, with the obligation bits each can meet. Their key
        language is split into regions by the rules (patternProperties, additionalProperties,
        propertyNames) and obligations that apply, each region with its value node. ``distinct``: the
        keys of a region whose every prefix has endless completions are followed by the marked colon."""
        rules = [(keys, node) for keys, node, _ in t.rules]
        if not t.exists and self._one_region(rules):
            # The usual case: one region, every key but the names (the rules' names are among them).
            value = self.symbol(node_and(*(node for _, node in rules)))
            if value is None:  # a closed object: no key text to build
                return []
            pattern = json_keys_except(names)
            if names and plain_names(names):
                offer_builder(pattern, functools.partial(_keys_except_dfa, tuple(names), self.string.pattern),
                              _string_states(self.string.pattern) + sum(map(len, names)) + 2)
            return [((self._lex(pattern), self.distinct_colon if distinct else self.colon, value), 0)]
        keysets = [keys for keys, _ in rules] + [keys for keys, _, _ in t.exists]
        components = [self._keyset_dfa(keys) for keys in keysets]
        components.append(json_automata.literals(names))
        both, combos = json_automata.product_states(components, max_states=self.s.max_string_states)
        signatures: dict[tuple[bool, ...], list[int]] = {}
        for i, combo in enumerate(combos):
            flags = json_automata.flags(components, combo)
            if not flags[-1]:
                signatures.setdefault(flags[:-1], []).append(i)
        by_bits: dict[int, list[tuple[Symbol, ...]]] = {}
        for sig, states in signatures.items():
            value_node = node_and(*(node for (_, node), on in zip(rules, sig) if on))
            if value_node == FALSE:
                continue
            accepting = [False] * len(combos)
            for i in states:
                accepting[i] = True
            region = json_automata.trim(CharDFA(both.edges, accepting))
            key_symbol = self._plan(key_dfa_regex(region, self.s.max_regex_length))
            if key_symbol is None:
                continue
            colon = self.distinct_colon if distinct and json_automata.is_endless(region) else self.colon
            witness = [(e, w) for e, (_, w, _) in enumerate(t.exists) if sig[len(rules) + e]]
            for value, bits in self._variants(value_node, witness, self.symbol):
                by_bits.setdefault(bits, []).append((key_symbol, colon, value))
        return [((self.r.add("extra", alts),), bits) for bits, alts in by_bits.items()]

    def _keyset_dfa(self, keys: tuple) -> CharDFA:
        n = self.s.max_string_states
        if keys[0] == "pattern":
            return json_automata.from_pattern(keys[1], max_states=n)
        if keys[0] == "other":
            parts = [json_automata.literals(keys[1])] + [json_automata.from_pattern(p, max_states=n) for p in keys[2]]
            return json_automata.product(parts, lambda f: not any(f), max_states=n)
        # Keys not valid under the string schema keys[1].
        allowed = []
        for shape in self.logic.dnf(keys[1]):
            if "string" in shape.types:
                allowed.append(string_dfa(shape.string.unplaced(), max_states=n))
        if not allowed:
            return json_automata.length(0, None, max_states=n)
        return json_automata.product(allowed, lambda f: not any(f), max_states=n)


def _repeat(unit: str, low: int, high: int | None) -> str:
    if high == 0:
        return ""
    if high is None:
        return unit + ("*" if low == 0 else "+" if low == 1 else f"{{{low},}}")
    if low == high:
        return unit + ("" if low == 1 else f"{{{low}}}")
    return unit + ("?" if (low, high) == (0, 1) else f"{{{low},{high}}}")


def _as_json_number(v: Fraction) -> Any:
    return int(v) if v.denominator == 1 else float(v)


def _number_values(values: list[Fraction], form: str) -> str:
    """A regex for the numbers with exactly these values (plain decimal forms, plus the exponent form
    Python's ``json`` writes for such a float); ``form`` as in :func:`number_value_regex`."""
    alts = []
    for v in values:
        extra = []
        as_float = float(v)
        if Fraction(repr(as_float)) == v:
            text = json.dumps(as_float)
            if "e" in text:
                extra.append(text)
        regex = number_value_regex(v, extra, form)
        if regex is not None:
            alts.append(regex)
    return "|".join(alts)
