"""Regex text -> AST, for the ECMA-262 syntax JSON Schema ``pattern`` uses (code-point semantics).

Everything is parsed into plain sets of code points, concatenation, alternation, bounded or unbounded
repetition and the ``^``/``$`` anchors; lookaheads right after a leading ``^`` are taken apart by
:func:`parse_pattern`. Constructs that are not regular (backreferences), other lookarounds, ``\\b``,
``\\p{...}`` and malformed input raise :class:`RegexError` with the offset of the offending construct.
"""

from __future__ import annotations

import json
import re
from functools import lru_cache

from banister.errors import RegexError
from banister.regex import charset
from banister.regex.charset import Ranges
from banister.regex.nodes import Absent, Alternate, Anchor, CharSet, Concat, Difference, Lookahead, Machine, Node, Repeat
from banister.regex.utf8 import MAX_CODE_POINT, SURROGATE_HI, SURROGATE_LO

_BRACED = re.compile(r"\{([0-9]+)(,([0-9]*))?\}")
_GROUP_NAME = re.compile(r"[A-Za-z_$][A-Za-z0-9_$]*>")
_HEX2 = re.compile(r"[0-9A-Fa-f]{2}")
_HEX4 = re.compile(r"[0-9A-Fa-f]{4}")
_HEX_BRACED = re.compile(r"\{([0-9A-Fa-f]+)\}")
_CONTROL_ESCAPES = {"n": 0x0A, "t": 0x09, "r": 0x0D, "f": 0x0C, "v": 0x0B}
_MAX_GROUP_DEPTH = 100
_JSON = json.JSONDecoder()
_LITERAL_RUN = re.compile(r"[^\\^$.|?*+()\[\]{}]+")
"""Characters that stand for themselves wherever they are (others go through :meth:`_Parser.term`)."""
_CLASS_TEXT = re.compile(r"\[(?:[^\\\]]|\\.)*\]", re.DOTALL)
"""A character class's text: up to the first ``]`` not escaped (ECMA-262: ``[]`` is a class, empty)."""
_SURROGATES = re.compile(r"[\ud800-\udfff]")
_classes: dict[tuple[str, bool], CharSet] = {}
"""Character classes parsed before, by text and case folding: the same few recur in most patterns
(``[0-9]``, ``[a-zA-Z]``), and a pattern is parsed twice, alone and inside its string's lexeme."""
_MAX_CLASSES = 4096


def _char_set(ranges: Ranges, fold: bool) -> CharSet:
    """The node of ``ranges``, closed under ASCII case swapping when ``fold`` (``(?i)``)."""
    return CharSet(charset.fold_ascii_case(ranges) if fold else ranges)


@lru_cache(maxsize=4096)
def _literal(ch: str, fold: bool) -> CharSet:
    """The node of one plain character (shared: nodes are immutable)."""
    return _char_set(charset.single(ord(ch)), fold)


def parse_regex(pattern: str, *, extensions: bool = False) -> Node:
    """The AST of ``pattern``; a leading ``(?i)`` makes every letter match both ASCII cases.

    ``extensions=True`` also reads banister's own construct (never valid ECMA-262, so JSON Schema
    patterns, parsed without it, refuse it): ``(?~s1|s2)``, the texts in which none of the literal
    strings ``s1``, ``s2`` occurs; ``(?~+s1|s2)`` the same but not empty; ``(?~>s1|s2)`` the texts
    whose first occurrence of any of the strings is ``s1``, at the very end. The strings are
    non-empty literals (escapes allowed; a string starting with ``+`` or ``>`` escapes it) and none
    may occur inside another. ``(?\\base|s1|s2)``: the texts ``base`` (one alternative: group it if it
    has more) matches other than the literal strings ``s1``, ``s2`` (the empty one allowed). And
    ``(?@[start, [accepting...], [[source, "label", target], ...]])``:
    an automaton whose edges read the regexes ``label`` (states are numbers from 0; see
    :class:`~banister.regex.nodes.Machine`), written as JSON so labels need no escaping.
    """
    return _Parser(pattern, extensions=extensions).parse()


def parse_pattern(pattern: str, *, extensions: bool = False) -> tuple[Node, tuple[Lookahead, ...]]:
    """``pattern`` with the lookaheads at its start taken apart: ``^(?!A)(?=B)C`` is the AST of ``^C``
    and the lookaheads ``^A`` (negative) and ``^B``.

    ``^`` holds at offset 0 only, so with search semantics a text matches the pattern exactly when it
    has a match of ``^C``, none of ``^A`` and one of ``^B``: an intersection of regular languages and
    complements, which the JSON front end builds as a product of automata. A lookahead anywhere else
    (after other text, inside a group, or in a pattern with a top-level ``|``, whose other alternatives
    it would not govern) raises :class:`RegexError`, as every lookahead does in :func:`parse_regex`.
    """
    return _Parser(pattern, extensions=extensions, lookaheads=True).parse_with_lookaheads()


class _Parser:
    """Recursive descent over the pattern text; ``pos`` is the offset of the next unread character."""

    def __init__(self, pattern: str, *, extensions: bool = False, lookaheads: bool = False) -> None:
        self.text = pattern
        self.extensions = extensions
        self.lookaheads = lookaheads
        self.pos = 0
        self.ignore_case = False
        self.depth = 0
        self.names: set[str] = set()

    def error(self, message: str, position: int) -> RegexError:
        return RegexError(message, self.text, position)

    def peek(self, offset: int = 0) -> str:
        i = self.pos + offset
        return self.text[i] if i < len(self.text) else ""

    def parse(self) -> Node:
        self.flags()
        return self.whole()

    def parse_with_lookaheads(self) -> tuple[Node, tuple[Lookahead, ...]]:
        """See :func:`parse_pattern`."""
        self.flags()
        text = self.text
        first = self.pos + 1
        if not text.startswith("^", self.pos) or not text.startswith(("(?=", "(?!"), first):
            return self.whole(), ()
        looks = []
        self.pos = first
        while text.startswith(("(?=", "(?!"), self.pos):
            start = self.pos
            self.pos += 3
            self.depth += 1
            body = self.disjunction()
            self.depth -= 1
            if self.peek() != ")":
                raise self.error("missing ')' for this group", start)
            self.pos += 1
            looks.append(Lookahead(text[start + 2] == "!", Concat((Anchor("start"), body))))
        rest = self.whole()
        if isinstance(rest, Alternate):
            raise self.error("a lookahead after ^ is supported only in a pattern without a top-level '|'", first)
        return Concat((Anchor("start"), rest)), tuple(looks)

    def flags(self) -> None:
        """Reads a leading ``(?i)`` (after refusing lone surrogates anywhere)."""
        if not self.text.isascii() and (m := _SURROGATES.search(self.text)):
            raise self.error("lone surrogate character (not encodable as UTF-8)", m.start())
        if self.text.startswith("(?i)"):
            self.ignore_case = True
            self.pos = 4

    def whole(self) -> Node:
        """The rest of the pattern, to its end."""
        node = self.disjunction()
        if self.pos < len(self.text):
            raise self.error("unbalanced ')'", self.pos)
        return node

    def disjunction(self) -> Node:
        options = [self.alternative()]
        while self.peek() == "|":
            self.pos += 1
            options.append(self.alternative())
        return options[0] if len(options) == 1 else Alternate(tuple(options))

    def alternative(self) -> Node:
        items: list[Node] = []
        text, end = self.text, len(self.text)
        while self.pos < end and text[self.pos] not in "|)":
            run = _LITERAL_RUN.match(text, self.pos)
            if run is not None:
                # Plain characters, read in one step; a quantifier after the run applies to its last.
                stop = run.end()
                if stop < end and (text[stop] in "*+?" or (text[stop] == "{" and _BRACED.match(text, stop))):
                    stop -= 1
                if stop > self.pos:
                    fold = self.ignore_case
                    items += [_literal(ch, fold) for ch in text[self.pos : stop]]
                    self.pos = stop
                    continue
            items.append(self.term())
        return items[0] if len(items) == 1 else Concat(tuple(items))

    def term(self) -> Node:
        start = self.pos
        ch = self.peek()
        if ch in ("^", "$"):
            self.pos += 1
            anchor = Anchor("start" if ch == "^" else "end")
            if self.quantifier() is not None:
                raise self.error(f"nothing to repeat: the anchor {ch!r} cannot be quantified", self.pos - 1)
            return anchor
        if ch in "*+?" or (ch == "{" and _BRACED.match(self.text, start)):
            raise self.error(f"nothing to repeat before {ch!r}", start)
        atom = self.atom()
        bounds = self.quantifier()
        if bounds is None:
            return atom
        return Repeat(atom, bounds[0], bounds[1])

    def atom(self) -> Node:
        ch = self.peek()
        if ch == "(":
            return self.group()
        if ch == "[":
            return self.char_class()
        if ch == ".":
            self.pos += 1
            return CharSet(charset.DOT)
        if ch == "\\":
            return self.atom_escape()
        self.pos += 1
        return _literal(ch, self.ignore_case)

    def char_set(self, ranges: Ranges) -> CharSet:
        return _char_set(ranges, self.ignore_case)

    def quantifier(self) -> tuple[int, int | None] | None:
        """Reads a quantifier (and its lazy ``?``) if one follows; laziness does not change the language."""
        start = self.pos
        ch = self.peek()
        bounds: tuple[int, int | None]
        if ch == "*":
            bounds, self.pos = (0, None), start + 1
        elif ch == "+":
            bounds, self.pos = (1, None), start + 1
        elif ch == "?":
            bounds, self.pos = (0, 1), start + 1
        elif ch == "{" and (m := _BRACED.match(self.text, start)):
            low = int(m.group(1))
            high = low if m.group(2) is None else (int(m.group(3)) if m.group(3) else None)
            if high is not None and high < low:
                raise self.error("numbers out of order in {} quantifier", start)
            bounds, self.pos = (low, high), m.end()
        else:
            return None
        if self.peek() == "?":
            self.pos += 1
        return bounds

    def group(self) -> Node:
        start = self.pos
        text = self.text
        if text.startswith("(?", start):
            if text.startswith("(?:", start):
                self.pos = start + 3
            elif text.startswith(("(?=", "(?!"), start):
                where = "supported only right after a leading ^" if self.lookaheads else "not supported in this regex"
                raise self.error(f"lookahead is {where}", start)
            elif text.startswith(("(?<=", "(?<!"), start):
                raise self.error("lookbehind is not supported", start)
            elif text.startswith("(?P=", start):
                raise self.error("backreference (?P=...) is not regular (not supported)", start)
            elif text.startswith(("(?<", "(?P<"), start):
                self.pos = start + (3 if text[start + 2] == "<" else 4)
                self.group_name()
            elif text.startswith("(?~", start) and self.extensions:
                return self.absent(start)
            elif text.startswith("(?@", start) and self.extensions:
                return self.machine(start)
            elif text.startswith("(?\\", start) and self.extensions:
                return self.difference(start)
            elif text.startswith("(?i)", start):
                raise self.error("the inline flag (?i) is only supported at the very start", start)
            else:
                raise self.error(f"unknown group construct {text[start : start + 3]!r}", start)
        else:
            self.pos = start + 1
        self.depth += 1
        if self.depth > _MAX_GROUP_DEPTH:
            raise self.error(f"groups nested more than {_MAX_GROUP_DEPTH} deep", start)
        body = self.disjunction()
        self.depth -= 1
        if self.peek() != ")":
            raise self.error("missing ')' for this group", start)
        self.pos += 1
        return body

    def absent(self, start: int) -> Absent:
        """``(?~...)`` at ``start`` (see :func:`parse_regex`)."""
        mode = self.text[start + 3 : start + 4]
        mode = mode if mode in ("+", ">") else ""
        options = self.extension_options(start, 3 + len(mode))
        strings = [self.literal_text(option, start, "(?~...)") for option in options]
        if not all(strings):
            raise self.error("(?~...) takes non-empty literal strings separated by '|'", start)
        for i, u in enumerate(strings):
            for j, v in enumerate(strings):
                if i != j and u in v:
                    raise self.error(f"(?~...): {u!r} occurs inside {v!r}", start)
        return Absent(tuple(strings), strings[0] if mode == ">" else None, mode == "+")

    def difference(self, start: int) -> Difference:
        """``(?\\...)`` at ``start`` (see :func:`parse_regex`)."""
        base, *options = self.extension_options(start, 3)
        return Difference(base, tuple(self.literal_text(option, start, "(?\\...)") for option in options))

    def extension_options(self, start: int, skip: int) -> list[Node]:
        """The ``|``-separated alternatives of the extension group at ``start`` whose body begins
        ``skip`` characters in, up to its ``)``."""
        if self.ignore_case:
            raise self.error(f"{self.text[start : start + 3]}...) is not supported with (?i)", start)
        self.pos = start + skip
        options: list[Node] = [self.alternative()]
        while self.peek() == "|":
            self.pos += 1
            options.append(self.alternative())
        if self.peek() != ")":
            raise self.error("missing ')' for this group", start)
        self.pos += 1
        return options

    def literal_text(self, option: Node, start: int, construct: str) -> str:
        """The string an alternative of an extension spells (RegexError unless it is a literal)."""
        items = option.items if isinstance(option, Concat) else (option,)
        if not all(isinstance(i, CharSet) and len(i.ranges) == 1 and i.ranges[0][0] == i.ranges[0][1] for i in items):
            raise self.error(f"{construct} takes literal strings separated by '|'", start)
        return "".join(chr(i.ranges[0][0]) for i in items)  # type: ignore[union-attr]

    def machine(self, start: int) -> Machine:
        """``(?@...)`` at ``start`` (see :func:`parse_regex`)."""
        if self.ignore_case:
            raise self.error("(?@...) is not supported with (?i)", start)
        try:
            spec, end = _JSON.raw_decode(self.text, start + 3)
        except ValueError as err:
            raise self.error(f"(?@...) holds no JSON automaton: {err}", start) from err
        if self.text[end : end + 1] != ")":
            raise self.error("missing ')' for this group", start)
        self.pos = end + 1
        shape = self.error('(?@...) takes [start, [accepting...], [[source, "label", target], ...]]', start)
        if not (isinstance(spec, list) and len(spec) == 3 and isinstance(spec[1], list) and isinstance(spec[2], list)
                and all(isinstance(e, list) and len(e) == 3 and isinstance(e[1], str) for e in spec[2])):
            raise shape
        states = [spec[0], *spec[1], *(e[0] for e in spec[2]), *(e[2] for e in spec[2])]
        if not all(type(q) is int and q >= 0 for q in states):
            raise shape
        edges = []
        parsed: dict[str, Node] = {}  # labels recur from state to state: each is parsed once
        for source, label, target in spec[2]:
            node = parsed.get(label)
            if node is None:
                try:
                    node = parsed[label] = _Parser(label, extensions=self.extensions).parse()
                except RegexError as err:
                    raise self.error(f"(?@...): edge label {label!r}: {err}", start) from err
            edges.append((source, node, target))
        return Machine(max(states) + 1, spec[0], tuple(spec[1]), tuple(edges))

    def group_name(self) -> None:
        start = self.pos
        m = _GROUP_NAME.match(self.text, start)
        if m is None:
            raise self.error("bad group name", start)
        name = m.group(0)[:-1]
        if name in self.names:
            raise self.error(f"duplicate group name {name!r}", start)
        self.names.add(name)
        self.pos = m.end()

    def atom_escape(self) -> Node:
        start = self.pos
        ch = self.peek(1)
        if ch in ("b", "B"):
            raise self.error(f"the word-boundary assertion \\{ch} is not supported", start)
        if ch and ch in "123456789":
            raise self.error("backreferences are not regular (not supported)", start)
        if ch == "k" and self.peek(2) == "<":
            raise self.error("backreferences are not regular (not supported)", start)
        value = self.escape(in_class=False)
        return self.char_set(charset.single(value) if isinstance(value, int) else value)

    def escape(self, *, in_class: bool) -> int | Ranges:
        """Reads ``\\...`` at ``pos``: a code point or, for ``\\d``-like escapes, a set."""
        start = self.pos
        ch = self.peek(1)
        self.pos += 2
        if not ch:
            raise self.error("trailing backslash", start)
        if ch in charset.CLASS_ESCAPES:
            return charset.CLASS_ESCAPES[ch]
        if ch in _CONTROL_ESCAPES:
            return _CONTROL_ESCAPES[ch]
        if ch == "0":
            if self.peek() and self.peek() in "0123456789":
                raise self.error("octal escapes are not supported", start)
            return 0
        if ch == "x":
            m = _HEX2.match(self.text, self.pos)
            if m is None:
                raise self.error("bad \\x escape: needs two hex digits", start)
            self.pos = m.end()
            return int(m.group(0), 16)
        if ch == "u":
            return self.unicode_escape(start)
        if ch == "c":
            letter = self.peek()
            if not (letter.isascii() and letter.isalpha()):
                raise self.error("bad \\c escape: needs an ASCII letter", start)
            self.pos += 1
            return ord(letter) % 32
        if ch in ("p", "P"):
            raise self.error(f"Unicode property escapes \\{ch}{{...}} are not supported", start)
        if in_class and ch == "b":
            return 0x08
        if ch.isascii() and ch.isalnum():
            raise self.error(f"bad escape \\{ch}", start)
        return ord(ch)

    def unicode_escape(self, start: int) -> int:
        """``\\uHHHH`` (a surrogate pair of them makes one code point) or ``\\u{H...}``."""
        m = _HEX_BRACED.match(self.text, self.pos)
        if m is not None:
            value = int(m.group(1), 16)
            if value > MAX_CODE_POINT:
                raise self.error("code point above U+10FFFF", start)
            if SURROGATE_LO <= value <= SURROGATE_HI:
                raise self.error("lone surrogate escape (not encodable as UTF-8)", start)
            self.pos = m.end()
            return value
        m = _HEX4.match(self.text, self.pos)
        if m is None:
            raise self.error("bad \\u escape: needs four hex digits or {hex}", start)
        value = int(m.group(0), 16)
        self.pos = m.end()
        if 0xD800 <= value <= 0xDBFF and self.text.startswith("\\u", self.pos):
            low = _HEX4.match(self.text, self.pos + 2)
            if low is not None and 0xDC00 <= int(low.group(0), 16) <= 0xDFFF:
                self.pos = low.end()
                return 0x10000 + ((value - 0xD800) << 10) + (int(low.group(0), 16) - 0xDC00)
        if SURROGATE_LO <= value <= SURROGATE_HI:
            raise self.error("lone surrogate escape (not encodable as UTF-8)", start)
        return value

    def char_class(self) -> CharSet:
        """``[...]`` at ``pos``, the node of every earlier parse of the same text (``_classes``)."""
        whole = _CLASS_TEXT.match(self.text, self.pos)
        if whole is None:  # unterminated: the full parse says where
            return self._char_class()
        key = (whole.group(), self.ignore_case)
        found = _classes.get(key)
        if found is None:
            found = self._char_class()
            if self.pos == whole.end():
                if len(_classes) >= _MAX_CLASSES:
                    _classes.clear()
                _classes[key] = found
        else:
            self.pos = whole.end()
        return found

    def _char_class(self) -> CharSet:
        start = self.pos
        self.pos += 1
        negated = self.peek() == "^"
        if negated:
            self.pos += 1
        parts: list[tuple[int, int]] = []
        while True:
            if self.pos >= len(self.text):
                raise self.error("unterminated character class", start)
            if self.peek() == "]":
                self.pos += 1
                break
            first_pos = self.pos
            first = self.class_atom()
            if self.peek() == "-" and self.peek(1) not in ("]", ""):
                self.pos += 1
                last = self.class_atom()
                if not isinstance(first, int) or not isinstance(last, int):
                    raise self.error("a class escape cannot bound a character range", first_pos)
                if first > last:
                    raise self.error("character range out of order", first_pos)
                parts.append((first, last))
            elif isinstance(first, int):
                parts.append((first, first))
            else:
                parts.extend(first)
        ranges = charset.normalize(parts)
        if self.ignore_case:
            ranges = charset.fold_ascii_case(ranges)
        return CharSet(charset.negate(ranges) if negated else ranges)

    def class_atom(self) -> int | Ranges:
        if self.peek() != "\\":
            self.pos += 1
            return ord(self.text[self.pos - 1])
        ch = self.peek(1)
        if ch == "B" or ch == "k" or (ch and ch in "123456789"):
            raise self.error(f"bad escape \\{ch} in character class", self.pos)
        return self.escape(in_class=True)
