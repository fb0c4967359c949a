"""The byte automaton of a code-point DFA's strings written as JSON string text, built state by state.

:mod:`json_text` writes a string constraint as a regex over JSON text (each character raw or escaped,
see its escaping policy), and the regex compiler turns that back into bytes: for a key region or an
automaton-planned string, a regex of thousands of characters, parsed, built into an NFA of thousands of
states and determinised: much of a slow schema's compile time. :func:`text_dfa` writes the same
language's byte DFA straight from the code-point DFA.

A state between two characters is the code-point DFA's state. A state inside one (after a UTF-8 lead
byte, some ``\\u`` hex digits, a high surrogate) is what the bytes still to come can lead to: the block
of code points those bytes can still spell, each mapped to the state it reaches. Such a state is keyed
by that map relative to its block, so every place that reads, say, two more continuation bytes into
one state shares one state.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from banister.errors import LimitError
from banister.grammar.json_automata import CharDFA, Edge, trim
from banister.grammar.json_text import ESCAPE_RELEVANT, RAW_FORBIDDEN, SHORT_ESCAPES, U_ESCAPABLE
from banister.grammar.regex_text import subtract
from banister.parser.lexer import LexemeDFA, table_dtype
from banister.regex import DEAD
from banister.regex.charset import Ranges, normalize

_HEX_BYTES: tuple[tuple[int, ...], ...] = tuple(tuple({ord(c) for c in f"{v:x}{v:X}"}) for v in range(16))
"""The bytes of each hex digit's value (either case)."""
_SURROGATES: Ranges = ((0xD800, 0xDFFF),)
_RAW_BY_LENGTH: tuple[Ranges, ...] = (
    subtract(((0x00, 0x7F),), RAW_FORBIDDEN),
    ((0x80, 0x7FF),),
    subtract(((0x800, 0xFFFF),), _SURROGATES),
    ((0x10000, 0x10FFFF),),
)
"""The code points written raw in UTF-8 sequences of 1 to 4 bytes."""
_U_SINGLE: Ranges = subtract(normalize([(lo, min(hi, 0xFFFF)) for lo, hi in U_ESCAPABLE if lo <= 0xFFFF]), _SURROGATES)
"""The code points written as one ``\\uXXXX``."""
_ESCAPED: Ranges = subtract(ESCAPE_RELEVANT, _SURROGATES)
"""The code points with an escaped form: short, one ``\\uXXXX`` or a surrogate pair."""
_ASTRAL = 0x10000

Map = tuple[tuple[int, int, Any], ...]
"""A block of code points (or of 16-bit units), counted from the block's start, by ranges: each to the
code-point DFA's state it leads to (an int) or, for a high surrogate, to the map of the low surrogates
that may follow it (``0xDC00..0xDFFF``) to those states."""


def text_dfa(dfa: CharDFA, *, quoted: bool, max_states: int) -> LexemeDFA:
    """The byte DFA of the JSON string text (``quoted``: within its quotes) of the strings ``dfa``
    accepts, exactly as :func:`json_text.json_char` writes each character. Every state but the dead
    one can reach acceptance. LimitError past ``max_states`` states."""
    return _Builder(trim(dfa), quoted, max_states).build()


class _Builder:
    """The states of :func:`text_dfa`, numbered as they are first reached, by key (see the module
    docstring): ``("open",)`` before the quote, ``("at", q)`` between characters, ``("end",)`` after the
    closing quote, ``("esc", q)`` after a backslash, ``("utf8" | "hex", bytes or digits left, block)``
    inside a character, ``("low" | "lowu", block)`` between the halves of a surrogate pair."""

    def __init__(self, dfa: CharDFA, quoted: bool, max_states: int) -> None:
        self.dfa = dfa
        self.quoted = quoted
        self.max_states = max_states
        self.ids: dict[tuple, int] = {}
        self.keys: list[tuple] = [("dead",)]
        self.rows: list[dict[int, int]] = [{}]

    def build(self) -> LexemeDFA:
        if not self.dfa.edges[0] and not self.dfa.accepting[0]:  # empty language: the start is dead
            return LexemeDFA(np.zeros((1, 256), dtype=np.int32), np.zeros(1, dtype=np.bool_), DEAD)
        start = self.state(("open",) if self.quoted else ("at", 0))
        done = 1
        while done < len(self.keys):
            self.rows.append(self.row(self.keys[done]))
            done += 1
        n = len(self.keys)
        table = np.zeros((n, 256), dtype=table_dtype(n))
        for state, row in enumerate(self.rows):
            for byte, target in row.items():
                table[state, byte] = target
        accepting = np.array([self.accepts(key) for key in self.keys], dtype=np.bool_)
        return LexemeDFA(table, accepting, start)

    def accepts(self, key: tuple) -> bool:
        if self.quoted:
            return key[0] == "end"
        return key[0] == "at" and self.dfa.accepting[key[1]]

    def state(self, key: tuple) -> int:
        found = self.ids.get(key)
        if found is None:
            if len(self.keys) >= self.max_states:
                raise LimitError(f"a string's JSON text needs more than {self.max_states} automaton states",
                                 setting="max_states")
            found = self.ids[key] = len(self.keys)
            self.keys.append(key)
        return found

    def row(self, key: tuple) -> dict[int, int]:
        """The transitions out of the state ``key`` (live targets only)."""
        kind = key[0]
        out: dict[int, int] = {}
        if kind == "open":
            out[0x22] = self.state(("at", 0))
        elif kind == "at":
            self.boundary(key[1], out)
        elif kind == "esc":
            for cp, letter in SHORT_ESCAPES.items():
                target = self.dfa.step(key[1], cp)
                if target >= 0:
                    out[ord(letter)] = self.state(("at", target))
            units = _units(self.dfa.edges[key[1]])
            if units:
                out[ord("u")] = self.state(("hex", 4, units))
        elif kind == "utf8":
            _, remaining, block = key
            for x, part in _parts(block, 64 ** (remaining - 1)).items():
                out[0x80 + x] = self.inside("utf8", remaining - 1, part)
        elif kind == "hex":
            _, remaining, block = key
            for digit, part in _parts(block, 16 ** (remaining - 1)).items():
                target = self.inside("hex", remaining - 1, part)
                for byte in _HEX_BYTES[digit]:
                    out[byte] = target
        elif kind == "low":  # a high surrogate read: ``\u`` and the low one must follow
            out[0x5C] = self.state(("lowu", key[1]))
        elif kind == "lowu":
            out[ord("u")] = self.state(("hex", 4, key[1]))
        return out

    def boundary(self, q: int, out: dict[int, int]) -> None:
        """The transitions between two characters, in the code-point DFA's state ``q``."""
        edges = self.dfa.edges[q]
        for lo, hi, target in _clip(edges, _RAW_BY_LENGTH[0]):
            for byte in range(lo, hi + 1):
                out[byte] = self.state(("at", target))
        for length, lead in ((2, 0xC0), (3, 0xE0), (4, 0xF0)):
            raw = _clip(edges, _RAW_BY_LENGTH[length - 1])
            for x, part in _parts(tuple(raw), 64 ** (length - 1)).items():  # the lead byte's payload bits
                out[lead + x] = self.inside("utf8", length - 1, part)
        if _clip(edges, _ESCAPED):  # (a state ``row`` fills: some escape leads on)
            out[0x5C] = self.state(("esc", q))
        if self.quoted and self.dfa.accepting[q]:
            out[0x22] = self.state(("end",))

    def inside(self, kind: str, remaining: int, block: Map) -> int:
        """The state inside a character with ``remaining`` bytes or digits to read into ``block``
        (one code point or unit left: the character is complete, or a high surrogate is)."""
        if remaining:
            return self.state((kind, remaining, block))
        target = block[0][2]
        return self.state(("at", target) if isinstance(target, int) else ("low", target))


def _clip(edges: tuple[Edge, ...], ranges: Ranges) -> list[Edge]:
    """``edges`` restricted to the code points of ``ranges``."""
    out = []
    for lo, hi, target in edges:
        for a, b in ranges:
            if a <= hi and lo <= b:
                out.append((max(lo, a), min(hi, b), target))
    return out


def _parts(block: Map, size: int) -> dict[int, Map]:
    """A block's map cut into sub-blocks ``size`` wide: ``{i: the map of sub-block i, counted from its
    start}`` for the sub-blocks it reaches."""
    out: dict[int, list] = {}
    for lo, hi, target in block:
        for i in range(lo // size, hi // size + 1):
            start = i * size
            piece = (max(lo, start) - start, min(hi, start + size - 1) - start, target)
            found = out.get(i)
            if found is None:
                out[i] = [piece]
            else:
                found.append(piece)
    return {i: tuple(part) for i, part in out.items()}


def _units(edges: tuple[Edge, ...]) -> Map:
    """What ``\\u`` and four hex digits can spell from a state with these ``edges``: its single code
    points, and the high surrogates of its pairs, each with the map of the low surrogates after it
    (the same for every high surrogate whose 1,024 code points one edge covers)."""
    units: list = list(_clip(edges, _U_SINGLE))
    partial: dict[int, list[Edge]] = {}
    for lo, hi, target in _clip(edges, ((_ASTRAL, 0x10FFFF),)):
        first, last = (lo - _ASTRAL) >> 10, (hi - _ASTRAL) >> 10
        whole_first, whole_last = first, last
        for high in {first, last}:  # the edge's ends may cover their high surrogate's code points in part
            base = _ASTRAL + (high << 10)
            a, b = max(lo, base), min(hi, base + 0x3FF)
            if (a, b) != (base, base + 0x3FF):
                partial.setdefault(high, []).append((0xDC00 + a - base, 0xDC00 + b - base, target))
                whole_first += high == first
                whole_last -= high == last
        if whole_first <= whole_last:
            units.append((0xD800 + whole_first, 0xD800 + whole_last, ((0xDC00, 0xDFFF, target),)))
    units += [(0xD800 + high, 0xD800 + high, tuple(sorted(low))) for high, low in partial.items()]
    return tuple(sorted(units, key=lambda e: e[0]))
