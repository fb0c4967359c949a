"""String constraints as JSON string lexemes: a regex over the *escaped* text, or an automaton.

A ``pattern`` (JSON Schema search semantics) is translated AST to AST: every character set becomes the
JSON text of one such character (raw or escaped, see :mod:`json_text`), and an end left unanchored gets
``any character*``. Length bounds are folded into the pattern when they are implied or when the pattern
is one counted run (``^[a-z]+$`` with ``maxLength: 8`` is ``[a-z]{1,8}``); other combinations go through
:mod:`json_automata`. A run longer than a lexeme should hold (``^https?://.+$`` with ``maxLength: 2048``)
is planned as a :class:`CountedRun`, which the builder lays out in blocks.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from banister.errors import LimitError
from banister.grammar import json_automata
from banister.grammar.json_automata import CharDFA
from banister.grammar.json_formats import format_regex
from banister.grammar.json_logic import StrTerm, schema_regex, string_dfa
from banister.grammar.json_text import ANY_CHAR, json_char, json_strings, plain_names
from banister.parser.lexer import offer_texts
from banister.regex.nodes import Alternate, Anchor, CharSet, Concat, Node, Repeat


@dataclass(frozen=True)
class CountedRun:
    """The strings of ``opening`` (a regex of JSON text, after the quote), then ``low`` to ``high``
    (None: no bound) characters of ``unit`` (the regex of one character's JSON text), then ``closing``
    (before the quote)."""

    low: int
    high: int | None
    unit: str = ANY_CHAR
    opening: str = ""
    closing: str = ""


@dataclass(frozen=True)
class StringPlan:
    """How to emit a string: ``regex`` (the whole lexeme, quotes included; written from ``dfa`` when
    there is one, whose bytes are then built from it), ``runs`` (the strings of any of ``runs``, or of
    ``regex`` when there is one: the builder splits long runs into blocks), or ``dfa`` (rules, one per
    state)."""

    kind: str
    regex: str = ""
    runs: tuple[CountedRun, ...] = ()
    dfa: CharDFA | None = None


def render(node: Node) -> str:
    """The JSON-string-content regex of an anchor-free AST (each code point as its JSON text)."""
    if isinstance(node, CharSet):
        return json_char(node.ranges) if node.ranges else "[]"
    if isinstance(node, Concat):
        return "".join(render(item) for item in node.items)
    if isinstance(node, Alternate):
        return "(?:" + "|".join(render(o) for o in node.options) + ")"
    if isinstance(node, Repeat):
        inner = render(node.item)
        if not isinstance(node.item, CharSet):
            inner = "(?:" + inner + ")"
        if node.max is None:
            quant = "*" if node.min == 0 else "+" if node.min == 1 else f"{{{node.min},}}"
        elif node.min == node.max:
            quant = f"{{{node.min}}}"
        else:
            quant = "?" if (node.min, node.max) == (0, 1) else f"{{{node.min},{node.max}}}"
        return inner + quant
    raise ValueError("anchors must be removed before rendering")


def _has_anchor(node: Node) -> bool:
    if isinstance(node, Anchor):
        return True
    if isinstance(node, Concat):
        return any(_has_anchor(i) for i in node.items)
    if isinstance(node, Alternate):
        return any(_has_anchor(o) for o in node.options)
    if isinstance(node, Repeat):
        return _has_anchor(node.item)
    return False


def _edge_split(node: Node) -> list[tuple[bool, Node, bool]] | None:
    """Alternatives ``(anchored at start, anchor-free core, anchored at end)``; None when an anchor sits
    anywhere else."""
    if isinstance(node, Alternate):
        out: list[tuple[bool, Node, bool]] = []
        for option in node.options:
            part = _edge_split(option)
            if part is None:
                return None
            out.extend(part)
        return out
    items = list(node.items) if isinstance(node, Concat) else [node]
    start = end = False
    while items and isinstance(items[0], Anchor) and items[0].kind == "start":
        start = True
        items.pop(0)
    while items and isinstance(items[-1], Anchor) and items[-1].kind == "end":
        end = True
        items.pop()
    core: Node = items[0] if len(items) == 1 else Concat(tuple(items))
    if _has_anchor(core):
        return None
    return [(start, core, end)]


def _bounds(node: Node) -> tuple[int, int | None]:
    if isinstance(node, CharSet):
        return 1, 1
    if isinstance(node, Concat):
        lo = 0
        total: int | None = 0
        for item in node.items:
            a, b = _bounds(item)
            lo += a
            total = None if total is None or b is None else total + b
        return lo, total
    if isinstance(node, Alternate):
        pairs = [_bounds(o) for o in node.options]
        his = [b for _, b in pairs]
        return min(a for a, _ in pairs), None if None in his else max(his)  # type: ignore[type-var]
    if isinstance(node, Repeat):
        a, b = _bounds(node.item)
        if b == 0:
            return 0, 0
        return a * node.min, None if b is None or node.max is None else b * node.max
    return 0, 0


@lru_cache(maxsize=2048)
def _split(pattern: str, search: bool) -> tuple[tuple[bool, Node, bool], ...] | None:
    """The pattern's alternatives as :func:`_edge_split` gives them; None for a pattern with
    lookaheads (an automaton product, :func:`json_automata.from_pattern`) or anchors inside."""
    node, looks = schema_regex(pattern)
    if looks:
        return None
    parts = _edge_split(node)
    if parts is None:
        return None
    if not search:
        return tuple((True, core, True) for _, core, _ in parts)
    return tuple(parts)


def _matches_everything(pattern: str) -> bool:
    """Whether every string has a match of ``pattern`` (search semantics): an alternative open at one end
    or both whose core matches the empty string, such as ``.*`` or ``([A-Z]+)?``. It constrains nothing,
    so a length bound next to it is a plain counted run, not a product with its automaton."""
    parts = _split(pattern, True)
    return parts is not None and any(not (start and end) and _bounds(core)[0] == 0 for start, core, end in parts)


def _content(parts: tuple[tuple[bool, Node, bool], ...]) -> str:
    """The string content of ``parts``; alternatives anchored alike share their ``any character*`` ends.

    ``a|b`` is written ``.*(?:a|b).*``, not ``.*a.*|.*b.*``: in the second, each alternative's trailing
    loop is its own NFA state, so the DFA remembers which one matched while it goes on tracking the
    others (17 words gave more than 100,000 states; shared, 104).
    """
    groups: dict[tuple[bool, bool], list[str]] = {}
    for start, core, end in parts:
        groups.setdefault((start, end), []).append(render(core))
    alts = [
        ("" if start else ANY_CHAR + "*") + _either(cores) + ("" if end else ANY_CHAR + "*")
        for (start, end), cores in groups.items()
    ]
    return _either(alts)


def _either(options: list[str]) -> str:
    return options[0] if len(options) == 1 else "(?:" + "|".join(options) + ")"


def _length_range(parts: tuple[tuple[bool, Node, bool], ...]) -> tuple[int, int | None]:
    lows, highs = [], []
    for start, core, end in parts:
        lo, hi = _bounds(core)
        lows.append(lo)
        highs.append(hi if start and end else None)
    return min(lows), None if None in highs else max(highs)  # type: ignore[type-var]


_MAX_LENGTH_VARIANTS = 16
_MAX_LEXEME_RUN = 64
"""Longest bounded run of characters kept in a pattern's lexeme (a lexeme has an automaton state per
character counted; a longer run is a :class:`CountedRun`)."""


def _push_length(parts: tuple[tuple[bool, Node, bool], ...], min_len: int, max_len: int | None):
    """The anchored alternatives with their one counted run re-bounded to the length range (short
    optional pieces such as ``s?`` are first expanded into variants); None if the pattern is not of
    that form, () if the range makes it empty."""
    if not all(start and end for start, _, end in parts):
        return None
    out = []
    for _, core, _ in parts:
        variants = _fixed_variants(list(core.items) if isinstance(core, Concat) else [core])
        if variants is None:
            return None
        for items in variants:
            pushed = _push_one(items, min_len, max_len)
            if pushed is None:
                return None
            if isinstance(pushed, Concat):
                out.append((True, pushed, True))
    return tuple(out)


def _fixed_variants(items: list[Node]) -> list[list[Node]] | None:
    """``items`` with every variable piece but one main run (the unbounded one, else the last) fixed
    to one length per variant (at most ``_MAX_LENGTH_VARIANTS``): a short bounded repeat (at most 4
    counts) to each count, an alternation of fixed-length options (``(jpg|jpeg|png)``) to the options
    of each length."""
    variable = [i for i, item in enumerate(items) if _bounds(item)[0] != _bounds(item)[1]]
    unbounded = [i for i in variable if _bounds(items[i])[1] is None]
    if len(unbounded) > 1:
        return None
    main = unbounded[0] if unbounded else variable[-1] if variable else None
    variants = [items]
    for i in variable:
        item = items[i]
        if i == main:
            continue
        if isinstance(item, Repeat) and item.max is not None and item.max - item.min <= 3:
            fixed: list[Node] = [Repeat(item.item, k, k) for k in range(item.min, item.max + 1)]
        elif isinstance(item, Alternate) and all(_bounds(o)[0] == _bounds(o)[1] for o in item.options):
            by_length: dict[int, list[Node]] = {}
            for option in item.options:
                by_length.setdefault(_bounds(option)[0], []).append(option)
            fixed = [group[0] if len(group) == 1 else Alternate(tuple(group)) for group in by_length.values()]
        else:
            return None
        variants = [[*v[:i], piece, *v[i + 1 :]] for v in variants for piece in fixed]
        if len(variants) > _MAX_LENGTH_VARIANTS:
            return None
    return variants


def _counted_runs(parts: tuple[tuple[bool, Node, bool], ...]) -> StringPlan | None:
    """A ``runs`` plan for anchored alternatives of which some hold a bounded run of characters too long
    for a lexeme (each at most one): a :class:`CountedRun` each, the others one regex; None when there
    is no such run, or a run the plan cannot take (two in one alternative, an unanchored one)."""
    short: list[tuple[bool, Node, bool]] = []
    runs: list[CountedRun] = []
    for start, core, end in parts:
        items = list(core.items) if isinstance(core, Concat) else [core]
        long = [i for i, item in enumerate(items)
                if isinstance(item, Repeat) and item.max is not None and item.max > _MAX_LEXEME_RUN]
        if not long:
            short.append((start, core, end))
            continue
        run = items[long[0]]
        if len(long) > 1 or not (start and end) or not (isinstance(run, Repeat) and isinstance(run.item, CharSet)
                                                        and run.item.ranges):
            return None
        opening, closing = render(Concat(tuple(items[: long[0]]))), render(Concat(tuple(items[long[0] + 1 :])))
        runs.append(CountedRun(run.min, run.max, json_char(run.item.ranges), opening, closing))
    if not runs:
        return None
    return StringPlan("runs", '"' + _content(tuple(short)) + '"' if short else "", tuple(runs))


def _push_one(items: list[Node], min_len: int, max_len: int | None) -> Concat | tuple[()] | None:
    variable = [i for i, item in enumerate(items) if _bounds(item)[0] != _bounds(item)[1]]
    if not variable:
        size = sum(_bounds(item)[0] for item in items)
        fits = min_len <= size and (max_len is None or size <= max_len)
        return Concat(tuple(items)) if fits else ()
    if len(variable) != 1:
        return None
    run = items[variable[0]]
    if not (isinstance(run, Repeat) and isinstance(run.item, CharSet)):
        return None
    fixed = sum(_bounds(item)[0] for i, item in enumerate(items) if i != variable[0])
    lo = max(run.min, min_len - fixed)
    hi = run.max if max_len is None else (max_len - fixed if run.max is None else min(run.max, max_len - fixed))
    if hi is not None and lo > hi:
        return ()
    items = list(items)
    items[variable[0]] = Repeat(run.item, lo, hi)
    return Concat(tuple(items))


@lru_cache(maxsize=4096)
def string_plan(term: StrTerm, *, max_enum_values: int, max_states: int, max_regex_length: int) -> StringPlan | None:
    """How to emit the strings ``term`` admits; None when it admits none. Memoised across schemas
    (terms and plans are immutable): formats and patterns recur."""
    if term.values is not None:
        kept = sorted(v for v in term.values if term.admits(v))
        if len(kept) > max_enum_values:
            raise LimitError(f"an enum of {len(kept)} strings", setting="max_enum_values")
        regex = json_strings(kept)
        if regex is None:
            return None
        if plain_names(kept):  # one spelling each (printable ASCII that is never escaped)
            offer_texts(regex, [f'"{v}"'.encode() for v in kept])
        return StringPlan("regex", regex)
    if term.max_len is not None and term.min_len > term.max_len:
        return None
    sources = [(p, True) for p, _ in term.patterns if not _matches_everything(p)]
    sources += [(format_regex(f, term.max_len), False) for f, _ in term.formats]
    if not (term.neg_patterns or term.neg_formats or term.excluded):
        if not sources:
            return StringPlan("runs", runs=(CountedRun(term.min_len, term.max_len),))
        if len(sources) == 1:
            parts = _split(*sources[0])
            if parts is not None:
                lo, hi = _length_range(parts)
                fits = lo >= term.min_len and (term.max_len is None or (hi is not None and hi <= term.max_len))
                if not fits:
                    pushed = _push_length(parts, term.min_len, term.max_len)
                    if pushed == ():
                        return None
                    parts = pushed
                if parts is not None:
                    return _counted_runs(parts) or StringPlan("regex", '"' + _content(parts) + '"')
    return _automaton_plan(string_dfa(term, max_states=max_states), max_regex_length)


def key_dfa_regex(dfa: CharDFA, max_regex_length: int) -> StringPlan | None:
    """A plan for the JSON strings of a key language given as a DFA."""
    return _automaton_plan(json_automata.minimize(dfa), max_regex_length)


def _automaton_plan(dfa: CharDFA, max_regex_length: int) -> StringPlan | None:
    """The plan of the strings of a minimal ``dfa``: its regex (its bytes built from ``dfa``), or rules
    when the regex would be longer than ``max_regex_length``; None when it accepts nothing."""
    if json_automata.is_empty(dfa):
        return None
    regex = json_automata.to_regex(dfa, json_char, max_length=max_regex_length)
    if regex is not None:
        return StringPlan("regex", '"' + regex + '"', dfa=dfa)
    return StringPlan("dfa", dfa=dfa)
