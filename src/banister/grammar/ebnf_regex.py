"""Regex ASTs for the GBNF and Lark front ends: smart constructors, printing, and Python ``re`` syntax.

The front ends build their regular parts as :mod:`banister.regex.nodes` trees, merge them into lexemes
and print them back in banister's regex syntax (:func:`to_pattern`). Lark's regex terminals are written
in Python's ``re`` syntax; :func:`parse_python_regex` reads them with Python's meaning of ``.``, ``\\w``,
``\\d``, ``\\s``, anchors, flags and case folding, and removes lookarounds (see :func:`remove_lookarounds`).
"""

from __future__ import annotations

import re
import unicodedata
from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import cache, partial
from itertools import pairwise, product

from banister.grammar.regex_text import char_class, contains, intersect
from banister.regex import charset
from banister.regex.charset import Ranges
from banister.regex.nodes import Alternate, CharSet, Concat, Node, Repeat
from banister.regex.utf8 import MAX_CODE_POINT, SURROGATE_HI, SURROGATE_LO

EPSILON: Node = Concat(())
"""Matches only the empty string."""
NOTHING: Node = CharSet(())
"""Matches nothing."""
ANY: Ranges = charset.ANY
NEWLINE: Ranges = charset.single(0x0A)
NOT_NEWLINE: Ranges = charset.negate(NEWLINE)

_MAX_LOOK_NODES = 200_000
_MAX_GROUP_DEPTH = 100
_MAX_LOOK_STRINGS = 64


class PatternError(Exception):
    """A pattern that cannot be read; ``offset`` is the 0-based position of the offending construct,
    ``setting`` the size setting that refused it (None for a malformed or unsupported pattern)."""

    def __init__(self, message: str, offset: int, setting: str | None = None) -> None:
        super().__init__(message)
        self.offset = offset
        self.setting = setting


# ----------------------------------------------------------------------------------------------------
# Smart constructors and inspection


def concat(items: Iterable[Node]) -> Node:
    """The concatenation, flattened; any item that matches nothing makes the whole match nothing."""
    out: list[Node] = []
    for item in items:
        if item == NOTHING:
            return NOTHING
        if isinstance(item, Concat):
            out.extend(item.items)
        else:
            out.append(item)
    return out[0] if len(out) == 1 else Concat(tuple(out))


def alternate(options: Iterable[Node]) -> Node:
    """The union, flattened, with every character-set option merged into one set (and ε as ``?``)."""
    ranges: list[tuple[int, int]] = []
    others: list[Node] = []
    seen: set[int] = set()
    empty = False
    stack = list(options)[::-1]
    while stack:
        option = stack.pop()
        if isinstance(option, Alternate):
            stack.extend(option.options[::-1])
        elif isinstance(option, CharSet):
            ranges.extend(option.ranges)
        elif option == EPSILON:
            empty = True
        elif id(option) not in seen:
            seen.add(id(option))
            others.append(option)
    out = ([CharSet(charset.normalize(ranges))] if ranges else []) + others
    if not out:
        return EPSILON if empty else NOTHING
    union = out[0] if len(out) == 1 else Alternate(tuple(out))
    return repeat(union, 0, 1) if empty and not nullable(union) else union


def repeat(item: Node, low: int, high: int | None) -> Node:
    """``item`` repeated ``low..high`` times (``high`` None: unbounded)."""
    if high == 0 or item == EPSILON:
        return EPSILON
    if item == NOTHING:
        return EPSILON if low == 0 else NOTHING
    if low == high == 1:
        return item
    return Repeat(item, low, high)


def chars(ranges: Iterable[tuple[int, int]]) -> Node:
    """One code point from ``ranges``."""
    return CharSet(charset.normalize(ranges))


def literal(text: str) -> Node:
    """Exactly ``text``."""
    return concat(CharSet(charset.single(ord(c))) for c in text)


def nullable(node: Node) -> bool:
    """Whether ``node`` matches the empty string (unconditionally: a lookaround does not count)."""
    if isinstance(node, CharSet):
        return False
    if isinstance(node, Concat):
        return all(nullable(item) for item in node.items)
    if isinstance(node, Alternate):
        return any(nullable(option) for option in node.options)
    if isinstance(node, Repeat):
        return node.min == 0 or nullable(node.item)
    return False  # a lookaround holds only sometimes


def without_empty(node: Node) -> Node:
    """The language of ``node`` less the empty string (so it can be a lexeme)."""
    if not nullable(node):
        return node
    if isinstance(node, Concat):
        if not node.items:
            return NOTHING
        first, rest = node.items[0], concat(node.items[1:])
        return alternate((concat((without_empty(first), rest)), without_empty(rest)))
    if isinstance(node, Alternate):
        return alternate(without_empty(option) for option in node.options)
    if isinstance(node, Repeat):
        return repeat(without_empty(node.item), 1, node.max)
    return NOTHING


def tree_size(node: Node, memo: dict[int, int] | None = None) -> int:
    """Nodes of ``node`` printed as a tree (shared subtrees count each time), a set counting its ranges."""
    memo = {} if memo is None else memo
    key = id(node)
    if key not in memo:
        if isinstance(node, CharSet):
            memo[key] = max(1, len(node.ranges))
        elif isinstance(node, Concat):
            memo[key] = 1 + sum(tree_size(item, memo) for item in node.items)
        elif isinstance(node, Alternate):
            memo[key] = 1 + sum(tree_size(option, memo) for option in node.options)
        elif isinstance(node, Repeat):
            memo[key] = 1 + tree_size(node.item, memo)
        else:
            memo[key] = 1
    return memo[key]


# ----------------------------------------------------------------------------------------------------
# Printing in banister's regex syntax

def to_pattern(node: Node) -> str:
    """``node`` in banister's regex syntax (whole-match)."""
    if isinstance(node, CharSet):
        return char_class(node.ranges, negate_if_shorter=True)
    if isinstance(node, Concat):
        if not node.items:
            return "(?:)"
        return "".join(f"(?:{to_pattern(i)})" if isinstance(i, Alternate) else to_pattern(i) for i in node.items)
    if isinstance(node, Alternate):
        return "|".join(to_pattern(option) for option in node.options)
    if isinstance(node, Repeat):
        item = node.item
        body = to_pattern(item)
        if not isinstance(item, CharSet) or len(item.ranges) == 0:
            body = f"(?:{body})"
        low, high = node.min, node.max
        if (low, high) == (0, None):
            quantifier = "*"
        elif (low, high) == (1, None):
            quantifier = "+"
        elif (low, high) == (0, 1):
            quantifier = "?"
        elif high is None:
            quantifier = f"{{{low},}}"
        elif low == high:
            quantifier = f"{{{low}}}"
        else:
            quantifier = f"{{{low},{high}}}"
        return body + quantifier
    raise TypeError(f"not a regex node: {node!r}")


# ----------------------------------------------------------------------------------------------------
# Python's character classes and case folding, computed with Python's own ``re``


@cache
def _all_code_points() -> str:
    return "".join(map(chr, range(SURROGATE_LO))) + "".join(map(chr, range(SURROGATE_HI + 1, MAX_CODE_POINT + 1)))


@cache
def python_class(letter: str, ascii_only: bool) -> Ranges:
    """What Python's ``re`` means by ``\\d``, ``\\w`` or ``\\s`` (upper case: the complement)."""
    if ascii_only:
        base = {"d": charset.DIGIT, "w": charset.WORD, "s": charset.normalize([(0x09, 0x0D), (0x20, 0x20)])}
        ranges = base[letter.lower()]
    else:
        found = re.finditer(f"\\{letter.lower()}+", _all_code_points())
        ranges = charset.normalize((ord(m.group()[0]), ord(m.group()[-1])) for m in found)
    return charset.negate(ranges) if letter.isupper() else ranges


@cache
def _cased() -> str:
    out = []
    for c in range(0x20000):
        ch = chr(c)
        if ch.lower() != ch or ch.upper() != ch or ch.casefold() != ch:
            out.append(ch)
    return "".join(out)


def _python_class_text(ranges: Ranges) -> str:
    return "[" + "".join(f"\\U{lo:08X}-\\U{hi:08X}" for lo, hi in ranges) + "]"


def fold_case(ranges: Ranges) -> Ranges:
    """``ranges`` closed under Python's case-insensitive matching (``re.IGNORECASE``)."""
    if not ranges:
        return ranges
    found = re.compile(_python_class_text(ranges), re.IGNORECASE).finditer(_cased())
    return charset.normalize(list(ranges) + [(ord(m.group()), ord(m.group())) for m in found])


# ----------------------------------------------------------------------------------------------------
# Lookarounds


@dataclass(frozen=True, slots=True)
class Look:
    """A lookaround inside one token: ``strings`` are the alternatives, each a sequence of sets.

    Read against the token alone (``re.fullmatch``): a lookahead sees the rest of the token, a
    lookbehind the part before it.
    """

    ahead: bool
    negative: bool
    strings: tuple[tuple[Ranges, ...], ...]


def _fixed_strings(node: Node | Look, offset: int) -> tuple[tuple[Ranges, ...], ...]:
    """The body of a lookaround as alternatives of fixed-length set sequences (or PatternError)."""
    if isinstance(node, CharSet):
        return ((node.ranges,),) if node.ranges else ()
    if isinstance(node, Concat):
        out: tuple[tuple[Ranges, ...], ...] = ((),)
        for item in node.items:
            parts = _fixed_strings(item, offset)
            out = tuple(a + b for a, b in product(out, parts))
            if len(out) > _MAX_LOOK_STRINGS:
                break
    elif isinstance(node, Alternate):
        out = tuple(s for option in node.options for s in _fixed_strings(option, offset))
    elif isinstance(node, Repeat) and node.max == node.min:
        out = _fixed_strings(concat([node.item] * node.min), offset)
    else:
        raise PatternError("a lookaround must match strings of a fixed length (no *, +, ? or nesting)", offset)
    if len(out) > _MAX_LOOK_STRINGS:
        raise PatternError("lookaround body too large", offset)
    return out


_State = frozenset
"""Pending lookahead obligations: ("neg", look, alternative, matched) and ("pos", look, progress)."""


class _LookaheadRemover:
    """Intersects a regex with the constraint automaton of its lookaheads (see remove_lookarounds).

    ``trans`` maps (node, state) to {state after: regex of the strings that lead there}; stars use
    Kleene's construction over the states the starred item reaches. Lookbehinds pass through as
    zero-width nodes.
    """

    def __init__(self, looks: list[Look], offset: int) -> None:
        self.looks = looks
        self.offset = offset
        sets = sorted({s for look in looks for string in look.strings for s in string})
        self.set_index = {s: i for i, s in enumerate(sets)}
        points = sorted({0, MAX_CODE_POINT + 1} | {p for s in sets for lo, hi in s for p in (lo, hi + 1)})
        groups: dict[tuple[bool, ...], list[tuple[int, int]]] = defaultdict(list)
        for lo, nxt in pairwise(points):
            groups[tuple(contains(s, lo) for s in sets)].append((lo, nxt - 1))
        self.atoms = [charset.normalize(r) for r in groups.values()]
        self.member = list(groups)  # member[atom][set index]
        self.memo: dict[tuple[int, _State], dict[_State, Node]] = {}
        self.keep: list[Node | Look] = []
        self.look_memo: dict[int, bool] = {}
        self.created = 0

    def run(self, node: Node | Look) -> Node:
        ends = self.trans(node, frozenset())
        return alternate(r for pending, r in ends.items() if not any(e[0] == "pos" for e in pending))

    def inside(self, atom: int, ranges: Ranges) -> bool:
        return self.member[atom][self.set_index[ranges]]

    def step(self, state: _State, atom: int) -> _State | None:
        out: set[tuple] = set()
        for entry in state:
            if entry[0] == "neg":
                _, look, alt, done = entry
                string = self.looks[look].strings[alt]
                if self.inside(atom, string[done]):
                    if done + 1 == len(string):
                        return None
                    out.add(("neg", look, alt, done + 1))
            else:
                _, look, progress = entry
                strings = self.looks[look].strings
                moved = frozenset(
                    (alt, done + 1) for alt, done in progress if self.inside(atom, strings[alt][done])
                )
                if any(done == len(strings[alt]) for alt, done in moved):
                    continue
                if not moved:
                    return None
                out.add(("pos", look, moved))
        return frozenset(out)

    def mark(self, state: _State, look_id: int) -> _State | None:
        look = self.looks[look_id]
        if any(not s for s in look.strings):
            return None if look.negative else state
        if look.negative:
            return state | {("neg", look_id, alt, 0) for alt in range(len(look.strings))}
        return state | {("pos", look_id, frozenset((alt, 0) for alt in range(len(look.strings))))}

    def node(self, made: Node) -> Node:
        self.created += 1
        if self.created > _MAX_LOOK_NODES:
            raise PatternError("the lookarounds make this pattern too large", self.offset)
        return made

    def has_look(self, node: Node | Look) -> bool:
        key = id(node)
        if key not in self.look_memo:
            found: list[Look] = []
            _looks(node, found, ahead_only=True)
            self.look_memo[key] = bool(found)
        return self.look_memo[key]

    def trans(self, node: Node | Look, state: _State) -> dict[_State, Node]:
        key = (id(node), state)
        if key not in self.memo:
            self.keep.append(node)
            self.memo[key] = self._trans(node, state)
        return self.memo[key]

    def _trans(self, node: Node | Look, state: _State) -> dict[_State, Node]:
        if isinstance(node, Look) and not node.ahead:
            return {state: node}  # type: ignore[dict-item]
        if not state and not self.has_look(node):
            return {} if node == NOTHING else {state: node}  # type: ignore[dict-item]
        if isinstance(node, Look):
            after = self.mark(state, self.looks.index(node))
            return {} if after is None else {after: EPSILON}
        if isinstance(node, CharSet):
            out: dict[_State, list[Node]] = defaultdict(list)
            for atom, atom_ranges in enumerate(self.atoms):
                piece = intersect(node.ranges, atom_ranges)
                if piece:
                    after = self.step(state, atom)
                    if after is not None:
                        out[after].append(CharSet(piece))
            return {s: self.node(alternate(v)) for s, v in out.items()}
        if isinstance(node, Concat):
            current: dict[_State, Node] = {state: EPSILON}
            for item in node.items:
                current = self.then(current, partial(self.trans, item))
            return current
        if isinstance(node, Alternate):
            out = defaultdict(list)
            for option in node.options:
                for s, r in self.trans(option, state).items():
                    out[s].append(r)
            return {s: self.node(alternate(v)) for s, v in out.items()}
        if isinstance(node, Repeat):
            current = {state: EPSILON}
            for _ in range(node.min):
                current = self.then(current, partial(self.trans, node.item))
            if node.max is None:
                return self.then(current, partial(self.star, node.item))
            return self.then(current, partial(self.up_to, node.item, node.max - node.min))
        raise TypeError(f"not a regex node: {node!r}")

    def then(self, current: dict[_State, Node], follow: Callable[[_State], dict[_State, Node]]) -> dict[_State, Node]:
        out: dict[_State, list[Node]] = defaultdict(list)
        for s1, r1 in current.items():
            for s2, r2 in follow(s1).items():
                out[s2].append(self.node(concat((r1, r2))))
        return {s: self.node(alternate(v)) for s, v in out.items()}

    def reachable(self, item: Node, start: _State) -> list[_State]:
        states, todo = [start], [start]
        while todo:
            for s in self.trans(item, todo.pop()):
                if s not in states:
                    states.append(s)
                    todo.append(s)
        return states

    def up_to(self, item: Node, count: int, start: _State) -> dict[_State, Node]:
        """Zero to ``count`` repetitions of ``item`` from ``start``."""
        states = self.reachable(item, start)
        table: dict[_State, dict[_State, Node]] = {s: {s: EPSILON} for s in states}
        for _ in range(count):
            shorter = table
            table = {}
            for s in states:
                merged: dict[_State, list[Node]] = defaultdict(list)
                merged[s].append(EPSILON)
                for t, r in self.then(self.trans(item, s), shorter.__getitem__).items():
                    merged[t].append(r)
                table[s] = {t: self.node(alternate(v)) for t, v in merged.items()}
        return table[start]

    def star(self, item: Node, start: _State) -> dict[_State, Node]:
        """Any number of repetitions of ``item`` from ``start`` (Kleene's construction)."""
        states = self.reachable(item, start)
        index = {s: i for i, s in enumerate(states)}
        n = len(states)
        grid: list[list[Node | None]] = [[None] * n for _ in range(n)]
        for s in states:
            for t, r in self.trans(item, s).items():
                grid[index[s]][index[t]] = r
        for k in range(n):
            cycle = grid[k][k]
            loop = EPSILON if cycle is None else self.node(repeat(cycle, 0, None))
            column = [grid[i][k] for i in range(n)]
            row = list(grid[k])
            for i, into in enumerate(column):
                if into is None:
                    continue
                for j, out_of in enumerate(row):
                    if out_of is None:
                        continue
                    path = self.node(concat((into, loop, out_of)))
                    old = grid[i][j]
                    grid[i][j] = path if old is None else self.node(alternate((old, path)))
        out = {start: EPSILON}
        for j, paths in enumerate(grid[0]):
            if paths is not None:
                out[states[j]] = paths if j else self.node(alternate((EPSILON, paths)))
        return out


def _looks(node: Node | Look, found: list[Look], *, ahead_only: bool = False) -> None:
    if isinstance(node, Look):
        if node not in found and (node.ahead or not ahead_only):
            found.append(node)
    elif isinstance(node, Concat):
        for item in node.items:
            _looks(item, found, ahead_only=ahead_only)
    elif isinstance(node, Alternate):
        for option in node.options:
            _looks(option, found, ahead_only=ahead_only)
    elif isinstance(node, Repeat):
        _looks(node.item, found, ahead_only=ahead_only)


def _reverse(node: Node | Look, memo: dict[int, Node | Look] | None = None) -> Node | Look:
    """The mirror image: reversed texts, lookbehinds turned into lookaheads and back. A subtree shared
    in ``node`` (the lookahead pass shares them) is reversed once and shared in the result, so a
    graph of a few thousand nodes never unfolds into the exponential tree it prints as."""
    memo = {} if memo is None else memo
    found = memo.get(id(node))
    if found is not None:
        return found
    if isinstance(node, Look):
        out: Node | Look = Look(not node.ahead, node.negative, tuple(s[::-1] for s in node.strings))
    elif isinstance(node, Concat):
        out = Concat(tuple(_reverse(item, memo) for item in node.items[::-1]))  # type: ignore[misc]
    elif isinstance(node, Alternate):
        out = Alternate(tuple(_reverse(option, memo) for option in node.options))  # type: ignore[misc]
    elif isinstance(node, Repeat):
        out = Repeat(_reverse(node.item, memo), node.min, node.max)  # type: ignore[arg-type]
    else:
        out = node
    memo[id(node)] = out
    return out


def remove_lookarounds(node: Node | Look, offset: int = 0) -> Node:
    """An equivalent regex without :class:`Look` nodes, read as ``re.fullmatch`` reads them.

    Lookarounds see only the token itself: a lookahead at the end of the token sees nothing (so a
    negative one always holds) and a lookbehind at its start sees nothing. Lookaheads are removed by
    intersecting with the automaton of pending obligations; lookbehinds the same way on the mirror
    image. Exact for lookaround bodies that are fixed-length sequences of character sets.
    """
    found: list[Look] = []
    _looks(node, found)
    if not found:
        return node  # type: ignore[return-value]
    ahead = [look for look in found if look.ahead]
    if ahead:
        node = _LookaheadRemover(ahead, offset).run(node)
    behind = [_reverse(look) for look in found if not look.ahead]
    if behind:
        node = _reverse(_LookaheadRemover(behind, offset).run(_reverse(node)))  # type: ignore[arg-type]
    if tree_size(node) > _MAX_LOOK_NODES:  # type: ignore[arg-type]
        raise PatternError("the lookarounds make this pattern too large", offset)
    return node  # type: ignore[return-value]


# ----------------------------------------------------------------------------------------------------
# Python ``re`` syntax

_CONTROL = {"n": 0x0A, "t": 0x09, "r": 0x0D, "f": 0x0C, "v": 0x0B, "a": 0x07}
_QUANTIFIER = re.compile(r"\{(\d*)(?:(,)(\d*))?\}")
_FLAGS = re.compile(r"\(\?([aiLmsux]+)\)")
_SCOPED = re.compile(r"\(\?([aimsx]*)(?:-([imsx]+))?:")
_GROUP_NAME = re.compile(r"\(\?P<([A-Za-z_]\w*)>")


def parse_python_regex(pattern: str, flags: str = "", *, max_repeat: int | None = None) -> Node:
    """The language ``re.fullmatch(pattern, text, flags)`` accepts, as a regex node without lookarounds.

    ``flags`` holds Python/Lark flag letters (``i m s x u a``). Lazy quantifiers match the same set of
    texts as greedy ones. Raises PatternError for what is not regular or not supported
    (backreferences, conditionals, atomic groups, possessive quantifiers, lookarounds whose body is
    not of fixed length) and for malformed patterns.
    """
    parser = _PythonParser(pattern, flags, max_repeat)
    return remove_lookarounds(parser.parse())


class _PythonParser:
    def __init__(self, text: str, flags: str, max_repeat: int | None) -> None:
        for letter in flags:
            if letter not in "imsxua":
                raise PatternError(f"unsupported regex flag {letter!r}", len(text))
        self.text = text
        self.pos = 0
        self.flags = set(flags) - {"u"}
        self.max_repeat = max_repeat
        self.depth = 0

    def error(self, message: str, offset: int | None = None) -> PatternError:
        return PatternError(message, self.pos if offset is None else offset)

    def peek(self) -> str:
        return self.text[self.pos] if self.pos < len(self.text) else ""

    def parse(self) -> Node | Look:
        while m := _FLAGS.match(self.text, self.pos):
            if "L" in m.group(1):
                raise self.error("the LOCALE flag is not supported")
            self.flags |= set(m.group(1)) - {"u"}
            self.pos = m.end()
        node = self.disjunction()
        if self.pos < len(self.text):
            raise self.error("unbalanced parenthesis")
        return node

    def skip_verbose(self) -> None:
        if "x" not in self.flags:
            return
        while self.pos < len(self.text):
            ch = self.text[self.pos]
            if ch.isspace():
                self.pos += 1
            elif ch == "#":
                end = self.text.find("\n", self.pos)
                self.pos = len(self.text) if end < 0 else end + 1
            else:
                return

    def disjunction(self) -> Node | Look:
        options = [self.alternative()]
        while self.peek() == "|":
            self.pos += 1
            options.append(self.alternative())
        return options[0] if len(options) == 1 else Alternate(tuple(options))  # type: ignore[arg-type]

    def alternative(self) -> Node | Look:
        items: list[Node | Look] = []
        while True:
            self.skip_verbose()
            if self.pos >= len(self.text) or self.peek() in "|)":
                break
            items.append(self.term())
        return items[0] if len(items) == 1 else Concat(tuple(items))  # type: ignore[arg-type]

    def term(self) -> Node | Look:
        start = self.pos
        atom = self.atom()
        self.skip_verbose()
        bounds = self.quantifier()
        if bounds is None:
            return atom
        self.skip_verbose()
        if self.quantifier() is not None:
            raise self.error("multiple repeat", start)
        if _zero_width(atom):  # a repeated assertion holds once or is skipped
            if self.text[start] != "(":
                raise self.error("nothing to repeat: an anchor cannot be quantified", start)
            return EPSILON if bounds[0] == 0 else atom
        return Repeat(atom, bounds[0], bounds[1])  # type: ignore[arg-type]

    def quantifier(self) -> tuple[int, int | None] | None:
        start = self.pos
        ch = self.peek()
        bounds: tuple[int, int | None]
        if ch in ("*", "+", "?") and ch:
            bounds = {"*": (0, None), "+": (1, None), "?": (0, 1)}[ch]
            self.pos += 1
        elif ch == "{" and (m := _QUANTIFIER.match(self.text, self.pos)) and (m.group(1) or m.group(2)):
            low = int(m.group(1) or 0)
            high = low if m.group(2) is None else (int(m.group(3)) if m.group(3) else None)
            if high is not None and high < low:
                raise self.error("min repeat greater than max repeat", start)
            limit = self.max_repeat
            if limit is not None and max(low, high or 0) > limit:
                raise PatternError(f"repetition bound above {limit}", start, "max_repeat")
            bounds = (low, high)
            self.pos = m.end()
        else:
            return None
        if self.peek() == "?":
            self.pos += 1
        elif self.peek() == "+":
            raise self.error("possessive quantifiers are not supported")
        return bounds

    def atom(self) -> Node | Look:
        start = self.pos
        ch = self.peek()
        if ch == "(":
            return self.group()
        if ch == "[":
            return self.char_class()
        if ch in ("*", "+", "?") or (ch == "{" and (m := _QUANTIFIER.match(self.text, start)) and (m.group(1) or m.group(2))):
            raise self.error("nothing to repeat")
        self.pos += 1
        if ch == ".":
            return CharSet(ANY if "s" in self.flags else NOT_NEWLINE)
        if ch == "^":
            body = NOT_NEWLINE if "m" in self.flags else ANY
            return Look(ahead=False, negative=True, strings=((body,),))
        if ch == "$":
            if "m" in self.flags:
                return Look(ahead=True, negative=True, strings=((NOT_NEWLINE,),))
            return Concat(
                (  # type: ignore[arg-type]
                    Look(ahead=True, negative=True, strings=((NOT_NEWLINE,),)),
                    Look(ahead=True, negative=True, strings=((NEWLINE, ANY),)),
                )
            )
        if ch == "\\":
            self.pos = start
            return self.escape_atom()
        return self.char_set(charset.single(ord(ch)))

    def char_set(self, ranges: Ranges, negated: bool = False) -> CharSet:
        if "i" in self.flags:
            ranges = fold_case(ranges)
        return CharSet(charset.negate(ranges) if negated else charset.normalize(ranges))

    def group(self) -> Node | Look:
        start = self.pos
        text = self.text
        saved = set(self.flags)
        look: tuple[bool, bool] | None = None
        if text.startswith("(?", start):
            if text.startswith("(?:", start):
                self.pos = start + 3
            elif m := _GROUP_NAME.match(text, start):
                self.pos = m.end()
            elif text.startswith("(?#", start):
                end = text.find(")", start)
                if end < 0:
                    raise self.error("missing ), unterminated comment", start)
                self.pos = end + 1
                return EPSILON
            elif text.startswith(("(?=", "(?!"), start):
                look, self.pos = (True, text[start + 2] == "!"), start + 3
            elif text.startswith(("(?<=", "(?<!"), start):
                look, self.pos = (False, text[start + 3] == "!"), start + 4
            elif text.startswith("(?P=", start):
                raise self.error("backreferences are not regular (not supported)", start)
            elif text.startswith("(?>", start):
                raise self.error("atomic groups are not supported", start)
            elif text.startswith("(?(", start):
                raise self.error("conditional groups are not supported", start)
            elif m := _SCOPED.match(text, start):
                self.flags |= set(m.group(1)) - {"u"}
                self.flags -= set(m.group(2) or "")
                self.pos = m.end()
            elif _FLAGS.match(text, start):
                raise self.error("global flags must be at the start of the pattern", start)
            else:
                raise self.error("unknown extension after '(?'", start)
        else:
            self.pos = start + 1
        self.depth += 1
        if self.depth > _MAX_GROUP_DEPTH:
            raise self.error(f"groups nested more than {_MAX_GROUP_DEPTH} deep", start)
        body = self.disjunction()
        self.depth -= 1
        self.flags = saved
        if self.peek() != ")":
            raise self.error("missing ), unterminated subpattern", start)
        self.pos += 1
        if look is None:
            return body
        _no_nested_look(body, start)
        return Look(ahead=look[0], negative=look[1], strings=_fixed_strings(body, start))

    def escape_atom(self) -> Node | Look:
        start = self.pos
        ch = self.text[start + 1] if start + 1 < len(self.text) else ""
        word = python_class("w", "a" in self.flags)
        if ch in ("b", "B"):
            self.pos += 2
            before, not_before = Look(False, False, ((word,),)), Look(False, True, ((word,),))
            after, not_after = Look(True, False, ((word,),)), Look(True, True, ((word,),))
            cases: tuple[tuple[Look, ...], ...]
            if ch == "b":
                cases = ((before, not_after), (not_before, after))
            else:  # Python's \B never matches inside an empty string
                some_before, some_after = Look(False, False, ((ANY,),)), Look(True, False, ((ANY,),))
                cases = ((before, after), (not_before, not_after, some_before), (not_before, not_after, some_after))
            return Alternate(tuple(Concat(c) for c in cases))  # type: ignore[arg-type]
        if ch == "A":
            self.pos += 2
            return Look(ahead=False, negative=True, strings=((ANY,),))
        if ch == "Z":
            self.pos += 2
            return Look(ahead=True, negative=True, strings=((ANY,),))
        if ch and ch in "123456789" and not re.match(r"[0-7]{3}", self.text[start + 1 : start + 4]):
            raise self.error("backreferences are not regular (not supported)", start)
        value = self.escape(in_class=False)
        if isinstance(value, int):
            return self.char_set(charset.single(value))
        return self.char_set(value)

    def escape(self, *, in_class: bool) -> int | Ranges:
        """Reads ``\\...`` at ``pos``: a code point, or a set for ``\\d``-like escapes."""
        start = self.pos
        text = self.text
        ch = text[start + 1] if start + 1 < len(text) else ""
        self.pos = start + 2
        if not ch:
            raise self.error("bad escape (end of pattern)", start)
        if ch in "dDwWsS":
            return python_class(ch, "a" in self.flags)
        if ch in _CONTROL:
            return _CONTROL[ch]
        if in_class and ch == "b":
            return 0x08
        if ch in "xuU":
            digits = {"x": 2, "u": 4, "U": 8}[ch]
            hex_text = text[self.pos : self.pos + digits]
            if len(hex_text) < digits or not all(c in "0123456789abcdefABCDEF" for c in hex_text):
                raise self.error(f"incomplete escape \\{ch}{hex_text}", start)
            self.pos += digits
            value = int(hex_text, 16)
            if value > MAX_CODE_POINT:
                raise self.error(f"bad escape \\{ch}{hex_text}", start)
            return value
        if ch == "N":
            m = re.match(r"\{([^}]*)\}", text[self.pos :])
            if m is None:
                raise self.error("missing {NAME} after \\N", start)
            try:
                value = ord(unicodedata.lookup(m.group(1)))
            except KeyError:
                raise self.error(f"undefined character name {m.group(1)!r}", start) from None
            self.pos += m.end()
            return value
        octal = re.match(r"0[0-7]{0,2}|[0-7]{3}", text[start + 1 : start + 4])
        if octal is not None:
            self.pos = start + 1 + octal.end()
            return int(octal.group(), 8)
        if ch.isascii() and ch.isalnum():
            raise self.error(f"bad escape \\{ch}", start)
        return ord(ch)

    def char_class(self) -> CharSet:
        start = self.pos
        self.pos += 1
        negated = self.peek() == "^"
        if negated:
            self.pos += 1
        parts: list[tuple[int, int]] = []
        first = True
        while True:
            if self.pos >= len(self.text):
                raise self.error("unterminated character set", start)
            if self.peek() == "]" and not first:
                self.pos += 1
                break
            first = False
            item_start = self.pos
            low = self.class_item()
            if self.peek() == "-" and self.pos + 1 < len(self.text) and self.text[self.pos + 1] != "]":
                self.pos += 1
                high = self.class_item()
                if not isinstance(low, int) or not isinstance(high, int):
                    raise self.error("bad character range", item_start)
                if low > high:
                    raise self.error("bad character range", item_start)
                parts.append((low, high))
            elif isinstance(low, int):
                parts.append((low, low))
            else:
                parts.extend(low)
        return self.char_set(charset.normalize(parts), negated)

    def class_item(self) -> int | Ranges:
        if self.peek() == "\\":
            return self.escape(in_class=True)
        self.pos += 1
        return ord(self.text[self.pos - 1])


def _zero_width(node: Node | Look) -> bool:
    if isinstance(node, Look):
        return True
    if isinstance(node, Concat):
        return bool(node.items) and all(_zero_width(item) for item in node.items)
    if isinstance(node, Alternate):
        return all(_zero_width(option) for option in node.options)
    return False


def _no_nested_look(node: Node | Look, offset: int) -> None:
    found: list[Look] = []
    _looks(node, found)
    if found:
        raise PatternError("lookarounds and anchors cannot be nested inside a lookaround", offset)
