"""JSON text as regexes: string characters with their escapes, literal strings, numbers, punctuation.

Escaping policy (documented in docs/json-schema.md): inside a string, a character may be written raw
(unless it is a control character, ``"`` or ``\\``), with its short escape (``\\" \\\\ \\/ \\b \\f \\n
\\r \\t``), or as ``\\uXXXX`` (either hex case; a surrogate pair for code points above U+FFFF) when it is
a control character, ``"``, ``\\``, DEL or non-ASCII. That covers every writer that escapes only what it must
or everything non-ASCII (``json.dumps`` with or without ``ensure_ascii``); ``\\u0041`` for ``A`` is not
accepted.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from fractions import Fraction
from functools import lru_cache

from banister.errors import LimitError
from banister.grammar.regex_text import (
    char_class,
    escape_char,
    escape_text,
    intersect,
    subtract,
)
from banister.regex import charset
from banister.regex.charset import Ranges

SHORT_ESCAPES = {0x22: '"', 0x5C: "\\", 0x2F: "/", 0x08: "b", 0x0C: "f", 0x0A: "n", 0x0D: "r", 0x09: "t"}
RAW_FORBIDDEN: Ranges = charset.normalize([(0x00, 0x1F), (0x22, 0x22), (0x5C, 0x5C)])
U_ESCAPABLE: Ranges = charset.normalize([(0x00, 0x1F), (0x22, 0x22), (0x5C, 0x5C), (0x7F, 0x10FFFF)])
ESCAPE_RELEVANT: Ranges = charset.normalize([*U_ESCAPABLE, (0x2F, 0x2F)])
_ASCII: Ranges = ((0, 0x7F),)
_MAX_GROUP_NESTING = 90

NUMBER = r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?"
"""Any JSON number."""
MAX_EXPONENT = 307
"""Largest exponent of an integer in exponent notation (``1e+307``): with a one-digit mantissa the
magnitude stays below 1e308, so a double parser never reads ``inf`` (which is not an integer)."""
MAX_NEGATIVE_EXPONENT = 323
"""Largest negative exponent where 0 is excluded (``exclusiveMinimum: 0``): a mantissa of at least 1
keeps the magnitude at or above 1e-323, which a double parser does not read as 0."""
MAX_FRACTION_INT_DIGITS = 16
"""Most integer digits before a fraction part (``1234567890123456.0``) where integer-ness or
``multipleOf`` depends on the value and no bound caps it: a text with a fraction or an exponent is read
as a double, and beyond about 10^308 that is ``inf``. 16 digits keep every integral float
``json.dumps`` writes in plain notation (up to ``1e16``)."""
MAX_FRACTION_ZEROS = 20
"""Most zeros between ``0.`` and the first non-zero digit where a value that reads as 0 in a double
(below about 2.5e-324) would break the constraint (``exclusiveMinimum: 0``, ``not: {const: 0}``, not
an integer...). Any bound under 323 is exact; 20 keeps the digit-by-digit automata small (``json.dumps``
writes values below 1e-4 in exponent form)."""
INTEGER = (
    r"-?(?:(?:0|[1-9][0-9]{0," + str(MAX_FRACTION_INT_DIGITS - 1) + r"})(?:\.0+)?|[1-9][0-9]{"
    + str(MAX_FRACTION_INT_DIGITS) + r",})"
)
"""A JSON number with an integer value, without exponent (``1`` and ``1.0`` but not ``1e0``); a zero
fraction only after at most :data:`MAX_FRACTION_INT_DIGITS` integer digits."""
_EXP = r"(?:[eE][+-]?[0-9]+)?"


def digit_range_regex(low: int, high: int | None) -> str:
    """A regex for the digit strings, leading zeros allowed, whose value is in ``[low, high]``
    (``high`` None: no upper end)."""
    if low < 0 or (high is not None and high < low):
        raise ValueError(f"empty or negative range [{low}, {high}]")
    if high is None:
        if low == 0:
            return "[0-9]+"
        width = len(str(low))
        return "0*(?:" + digit_range_regex(low, 10**width - 1)[5:-1] + f"|[1-9][0-9]{{{width},}})"
    alts = []
    for length in range(len(str(low)), len(str(high)) + 1):
        lo = max(low, 10 ** (length - 1) if length > 1 else 0)
        hi = min(high, 10**length - 1)
        if lo <= hi:
            alts.append(_same_length_range(str(lo), str(hi)))
    return "0*(?:" + "|".join(alts) + ")"


def _same_length_range(lo: str, hi: str) -> str:
    if lo == hi:
        return lo
    if len(lo) == 1:
        return f"[{lo}-{hi}]"
    n = len(lo) - 1
    if lo[0] == hi[0]:
        return lo[0] + "(?:" + _same_length_range(lo[1:], hi[1:]) + ")"
    if lo[1:] == "0" * n and hi[1:] == "9" * n:
        return f"[{lo[0]}-{hi[0]}][0-9]{{{n}}}"
    alts = [lo[0] + "(?:" + _same_length_range(lo[1:], "9" * n) + ")"]
    if int(hi[0]) - int(lo[0]) > 1:
        alts.append(f"[{int(lo[0]) + 1}-{int(hi[0]) - 1}][0-9]{{{n}}}")
    alts.append(hi[0] + "(?:" + _same_length_range("0" * n, hi[1:]) + ")")
    return "(?:" + "|".join(alts) + ")"


def _hex_digits(values: Iterable[int]) -> str:
    chars: list[tuple[int, int]] = []
    for v in values:
        if v < 10:
            chars.append((0x30 + v, 0x30 + v))
        else:
            chars.append((0x61 + v - 10, 0x61 + v - 10))
            chars.append((0x41 + v - 10, 0x41 + v - 10))
    return char_class(charset.normalize(chars))


def _clip(ranges: Ranges, lo: int, hi: int) -> Ranges:
    return tuple((max(a, lo) - lo, min(b, hi) - lo) for a, b in ranges if a <= hi and b >= lo)


@lru_cache(maxsize=8192)
def hex_set(ranges: Ranges, width: int) -> str:
    """A regex for the ``width``-digit hex numerals (either case) whose value is in ``ranges`` (non-empty)."""
    if width == 0:
        return ""
    size = 16 ** (width - 1)
    groups: dict[str, list[int]] = {}
    for d in range(16):
        sub = _clip(ranges, d * size, (d + 1) * size - 1)
        if not sub:
            continue
        if sub == ((0, size - 1),):
            tail = "[0-9a-fA-F]" + (f"{{{width - 1}}}" if width > 2 else "") if width > 1 else ""
        else:
            tail = hex_set(sub, width - 1)
        groups.setdefault(tail, []).append(d)
    alts = [_hex_digits(digits) + tail for tail, digits in groups.items()]
    return alts[0] if len(alts) == 1 else "(?:" + "|".join(alts) + ")"


def _astral_escapes(ranges: Ranges) -> list[str]:
    """``uD8xx\\uDCxx`` (after the first backslash) for the code points of ``ranges`` above U+FFFF."""
    rows: dict[int, list[tuple[int, int]]] = {}
    for lo, hi in ranges:
        lo, hi = max(lo, 0x10000) - 0x10000, hi - 0x10000
        if lo > hi:
            continue
        for row in range(lo >> 10, (hi >> 10) + 1):
            a, b = max(lo, row << 10), min(hi, (row << 10) | 0x3FF)
            rows.setdefault(row, []).append((a & 0x3FF, b & 0x3FF))
    by_lows: dict[Ranges, list[tuple[int, int]]] = {}
    for row, row_lows in rows.items():
        by_lows.setdefault(charset.normalize(row_lows), []).append((row, row))
    out = []
    for lows, high_rows in by_lows.items():
        hi_set = _raw(tuple((0xD800 + a, 0xD800 + b) for a, b in high_rows))
        lo_set = tuple((0xDC00 + a, 0xDC00 + b) for a, b in lows)
        out.append("u" + hex_set(hi_set, 4) + r"\\u" + hex_set(lo_set, 4))
    return out


def _raw(ranges: Ranges) -> Ranges:
    # charset.normalize drops surrogates; the hex numerals of surrogates are wanted here.
    merged: list[list[int]] = []
    for lo, hi in sorted(ranges):
        if merged and lo <= merged[-1][1] + 1:
            merged[-1][1] = max(merged[-1][1], hi)
        else:
            merged.append([lo, hi])
    return tuple((a, b) for a, b in merged)


def escape_tail(ranges: Ranges) -> str | None:
    """A regex for what follows the backslash when one code point of ``ranges`` is written escaped;
    None if none of them may be."""
    return _escape_tail(intersect(ranges, ESCAPE_RELEVANT))


@lru_cache(maxsize=4096)
def _escape_tail(ranges: Ranges) -> str | None:
    alts = []
    for cp, letter in SHORT_ESCAPES.items():
        if intersect(ranges, charset.single(cp)):
            alts.append(escape_char(ord(letter)))
    escapable = intersect(ranges, U_ESCAPABLE)
    bmp = intersect(escapable, ((0, 0xFFFF),))
    if bmp:
        alts.append("u" + hex_set(bmp, 4))
    alts.extend(_astral_escapes(escapable))
    if not alts:
        return None
    return alts[0] if len(alts) == 1 else "(?:" + "|".join(alts) + ")"


@lru_cache(maxsize=4096)
def json_char(ranges: Ranges) -> str:
    """A regex (one unit) for the JSON string text of one code point of ``ranges``: raw or escaped, see
    the module docstring."""
    raw = subtract(ranges, RAW_FORBIDDEN)
    tail = escape_tail(ranges)
    if tail is None and not raw:
        raise ValueError("json_char of an empty set")
    return _raw_or_escaped(raw, tail)


@lru_cache(maxsize=4096)
def json_char_parts(ranges: Ranges) -> tuple[str, ...]:
    """:func:`json_char` of ``ranges`` as two regexes, its raw ASCII characters and the rest (raw
    non-ASCII characters and escapes), each there when not empty. An automaton's states mostly differ
    in the ASCII characters they read next and read escapes and non-ASCII characters alike: written
    apart, the second regex recurs from state to state (see ``Machine`` in the NFA builder)."""
    raw = subtract(ranges, RAW_FORBIDDEN)
    ascii_raw = intersect(raw, _ASCII)
    rest = subtract(raw, _ASCII)
    tail = escape_tail(ranges)
    first = (char_class(ascii_raw),) if ascii_raw else ()
    return first + ((_raw_or_escaped(rest, tail),) if rest or tail is not None else ())


def _raw_or_escaped(raw: Ranges, tail: str | None) -> str:
    """A regex for one code point written raw from ``raw`` or escaped, ``tail`` being what may follow
    the backslash (None: no escape)."""
    if tail is None:
        return char_class(raw)
    escaped = "\\\\" + tail
    return "(?:" + char_class(raw) + "|" + escaped + ")" if raw else "(?:" + escaped + ")"


ANY_CHAR: str = json_char(charset.ANY)
"""One character of any JSON string."""


def json_strings(values: Iterable[str]) -> str | None:
    """A regex for the JSON string literals (quotes included) of ``values``; None when there are none.

    Shared prefixes are factored (a trie), so a large enum stays linear in its total length; a few
    strings whose every character stands for itself are written side by side, which is as long.
    """
    if isinstance(values, (list, tuple)) and len(values) <= _FLAT_VALUES:
        if all(_VERBATIM.fullmatch(text) for text in values):
            if len(values) == 1:
                return '"' + values[0] + '"'
            return '"(?:' + "|".join(sorted(set(values))) + ')"' if values else None
        if len(values) == 1:
            # One string (a property name, mostly): the trie is a chain, written character by character.
            return '"' + "".join([_char_text(ch) for ch in values[0]]) + '"'
    root = _char_trie(values)
    if not root:
        return None
    return '"' + _trie_regex(root, 0) + '"'


_FLAT_VALUES = 16
"""Up to this many strings that need no escapes are written as a plain alternation, not a trie."""


def _char_trie(strings: Iterable[str]) -> dict:
    """The strings as a trie of nested dicts, one level per character; ``""`` marks a string's end."""
    root: dict = {}
    for text in strings:
        node = root
        for ch in text:
            node = node.setdefault(ch, {})
        node[""] = True
    return root


def _trie_regex(node: dict, depth: int) -> str:
    if depth > _MAX_GROUP_NESTING:
        raise LimitError("an enum's strings branch too deeply to be one regex", setting="max_enum_values")
    parts: list[str] = []
    end = "" in node
    for ch, child in node.items():
        if ch == "":
            continue
        text = [_char_text(ch)]
        while len(child) == 1 and "" not in child:
            ((nxt, child),) = child.items()
            text.append(_char_text(nxt))
        rest = _trie_regex(child, depth + 1) if child.keys() != {""} else ""
        parts.append("".join(text) + rest)
    if not parts:
        return ""
    if end:
        return "(?:" + "|".join(parts) + ")?"
    return parts[0] if len(parts) == 1 else "(?:" + "|".join(parts) + ")"


# ---------------------------------------------------------------- numbers


def decimal_text(value: Fraction) -> tuple[str, str] | None:
    """(integer digits, fraction digits) of ``abs(value)`` when it has a finite decimal expansion."""
    den = value.denominator
    twos = fives = 0
    while den % 2 == 0:
        den //= 2
        twos += 1
    while den % 5 == 0:
        den //= 5
        fives += 1
    if den != 1:
        return None
    scale = max(twos, fives)
    scaled = abs(value) * 10**scale
    digits = str(int(scaled)).rjust(scale + 1, "0")
    whole, frac = digits[: len(digits) - scale], digits[len(digits) - scale :]
    return whole, frac.rstrip("0")


def number_value_regex(value: Fraction, extra_texts: Iterable[str] = (), form: str = "any") -> str | None:
    """The decimal texts (no exponent) whose value is exactly ``value``, plus ``extra_texts`` verbatim.

    Trailing fraction zeros are allowed (``1.50``); zero may carry a minus sign. ``form``: ``"plain"``
    keeps the texts without a fraction, ``"fraction"`` those with one (or an exponent). None if there
    is no such text.
    """
    alts = [escape_text(t) for t in sorted(set(extra_texts))] if form != "plain" else []
    parts = decimal_text(value)
    if parts is not None:
        whole, frac = parts
        sign = "-?" if value == 0 else ("-" if value < 0 else "")
        tails = {"any": r"(?:\.0+)?", "plain": "", "fraction": r"\.0+"}
        if not frac:
            alts.insert(0, sign + whole + tails[form])
        elif form != "plain":
            alts.insert(0, sign + whole + r"\." + frac + "0*")
    if not alts:
        return None
    return alts[0] if len(alts) == 1 else "(?:" + "|".join(alts) + ")"


def signed_number_regex(sign: str, strict: bool) -> str:
    """Numbers (any JSON syntax, exponents included) that are >= 0 / > 0 (``sign="+"``) or <= 0 / < 0.

    ``strict`` excludes zero. Negative zero counts as zero. When zero is excluded, a non-zero value
    must not read as 0 in a double: at most :data:`MAX_FRACTION_ZEROS` zeros after ``0.`` and a
    negative exponent of at most :data:`MAX_NEGATIVE_EXPONENT` after a mantissa of at least 1.
    """
    frac = r"(?:\.[0-9]+)?"
    zero = r"0(?:\.0+)?" + _EXP
    if not strict:
        nonzero = r"(?:[1-9][0-9]*" + frac + r"|0\.[0-9]*[1-9][0-9]*)" + _EXP
        return f"(?:{nonzero}|-?{zero})" if sign == "+" else f"(?:-{nonzero}|-?{zero})"
    up = r"[eE]\+?[0-9]+"
    down = r"[eE]-" + digit_range_regex(0, MAX_NEGATIVE_EXPONENT)
    nonzero = (
        r"(?:[1-9][0-9]*" + frac + f"(?:{up}|{down})?"
        r"|0\.0{0," + str(MAX_FRACTION_ZEROS) + r"}[1-9][0-9]*" + f"(?:{up})?)"
    )
    return nonzero if sign == "+" else "-" + nonzero


def json_keys_except(names: Iterable[str]) -> str:
    """A regex for the JSON string literals whose value is none of ``names`` (each in any accepted
    escaping).

    Names that JSON text spells one way only (:func:`plain_names`, most of them) are left out of any
    string with the regex layer's difference, ``(?\\...)``: short to write, and the front end builds its
    DFA straight from the names' trie. Other names are left out on their trie: a string leaves the trie
    by an ASCII character no branch takes, by a non-ASCII or escaped character no branch takes (grouped
    by that set, so each such class appears once in the regex and its multi-byte states are shared),
    or by ending at a node that is not a name; then anything may follow. The size is linear in the
    names' total length.
    """
    names = tuple(names)
    if not names:
        return '"' + ANY_CHAR + '*"'  # (``(?\\...|)`` would leave out the empty key)
    if plain_names(names):
        return '"(?\\' + ANY_CHAR + "*|" + "|".join(map(escape_text, names)) + ')"'
    return _keys_except(names)


@lru_cache(maxsize=1024)
def _keys_except(names: tuple[str, ...]) -> str:
    root = _char_trie(names)
    deviations = _deviation_regex(root, 0)
    # Each trie node's leave step; groups in the order a depth-first walk (last branch first) meets them.
    step_of: dict[int, str | None] = {}
    groups: dict[str, None] = {}
    order: list[dict] = []
    stack: list[dict] = [root]
    while stack:
        node = stack.pop()
        order.append(node)
        step = _leave_step(frozenset(c for c in node if c))
        step_of[id(node)] = step
        if step is not None:
            groups.setdefault(step, None)
        stack.extend(child for c, child in node.items() if c)
    # What each subtree holds: the leave steps of its nodes, and _PREFIX when a node is not a name.
    below: dict[int, set] = {}
    for node in order[::-1]:  # (not reversed(): mypyc 2.4 fails on it over a list of Any)
        held: set[object] = {step_of[id(node)]}
        if "" not in node:
            held.add(_PREFIX)
        for c, child in node.items():
            if c:
                held |= below[id(child)]
        below[id(node)] = held
    alts = []
    if deviations:
        alts.append(f"(?:{deviations}){ANY_CHAR}*")
    for step in groups:
        every = len(groups) == 1 and None not in below[id(root)]
        alts.append(_marked_regex(root, step, step_of, below, every) + step + ANY_CHAR + "*")
    if _PREFIX in below[id(root)]:
        alts.append(_marked_regex(root, _PREFIX, step_of, below))
    return '"(?:' + "|".join(alts) + ')"'


_PREFIX = object()
_NOT_PLAIN = re.compile(r'[^\x20-\x7e]|["\\/]')
"""A character that is not printable ASCII, or that has a short escape."""


def plain_names(names: Iterable[str]) -> bool:
    """Whether every name is printable ASCII free of ``"``, ``\\`` and ``/``: characters JSON text
    can only write raw, so a key spells such a name in one way only."""
    return not any(_NOT_PLAIN.search(name) for name in names)


def _marked_regex(
    root: dict, mark: object, step_of: dict[int, str | None], below: dict[int, set], every: bool = False
) -> str:
    """A regex for exactly the paths from ``root`` to the nodes marked ``mark`` (a leave step, or
    ``_PREFIX`` for the nodes that are not names), wrapped as one unit: the regex of the trie of those
    paths, written as :func:`_trie_regex` would (branches last first, as the walk meets them).
    ``every``: every node is marked."""
    if every:
        body = _every_path_regex(root, 0)
    else:
        paths = _MarkedPaths(mark, step_of, below)
        body = paths.walk(root, paths.branches(root), 0)
    return "(?:" + body + ")" if body else ""


class _MarkedPaths:
    """The walk behind :func:`_marked_regex` (methods, not closures: a recursive closure is a reference
    cycle, left to the garbage collector after every compile)."""

    def __init__(self, mark: object, step_of: dict[int, str | None], below: dict[int, set]) -> None:
        self.mark, self.step_of, self.below = mark, step_of, below

    def marked(self, node: dict) -> bool:
        return (self.mark in self.below[id(node)]) and (
            ("" not in node) if self.mark is _PREFIX else self.step_of[id(node)] == self.mark
        )

    def branches(self, node: dict) -> list[tuple[str, dict]]:
        return [(c, child) for c, child in reversed(node.items()) if c and self.mark in self.below[id(child)]]

    def walk(self, node: dict, here: list[tuple[str, dict]], depth: int) -> str:
        if depth > _MAX_GROUP_NESTING:
            raise LimitError("an enum's strings branch too deeply to be one regex", setting="max_enum_values")
        parts: list[str] = []
        for ch, child in here:
            text = [_char_text(ch)]
            nxt = self.branches(child)
            while len(nxt) == 1 and not self.marked(child):
                ch, child = nxt[0]
                text.append(_char_text(ch))
                nxt = self.branches(child)
            rest = self.walk(child, nxt, depth + 1) if nxt else ""
            parts.append("".join(text) + rest)
        if not parts:
            return ""
        if self.marked(node):
            return "(?:" + "|".join(parts) + ")?"
        return parts[0] if len(parts) == 1 else "(?:" + "|".join(parts) + ")"


def _every_path_regex(node: dict, depth: int) -> str:
    """:func:`_marked_regex` with every node marked: each branch is one character and an optional rest."""
    if depth > _MAX_GROUP_NESTING:
        raise LimitError("an enum's strings branch too deeply to be one regex", setting="max_enum_values")
    parts = [
        _char_text(ch) + (_every_path_regex(child, depth + 1) if len(child) > ("" in child) else "")
        for ch, child in reversed(node.items())
        if ch
    ]
    return "(?:" + "|".join(parts) + ")?" if parts else ""


_CHAR_TEXT: dict[str, str] = {}


def _char_text(ch: str) -> str:
    """:func:`json_char` of one character (memoised by character)."""
    found = _CHAR_TEXT.get(ch)
    if found is None:
        found = _CHAR_TEXT[ch] = json_char(charset.single(ord(ch)))
    return found


_VERBATIM = re.compile("[" + re.escape("".join(c for c in map(chr, range(0x20, 0x7F)) if _char_text(c) == c)) + "]*")
"""Text whose every character :func:`_char_text` writes as itself (letters, digits, ``_``, space...)."""


@lru_cache(maxsize=4096)
def _leave_step(children: frozenset[str]) -> str | None:
    """The non-ASCII or escaped characters that leave a trie node whose branches are ``children``, as
    one regex unit; None if there are none. (Cached: most nodes have one or two branches.)"""
    others = charset.negate(charset.normalize((ord(c), ord(c)) for c in children))
    wide = subtract(intersect(others, ((0x80, 0x10FFFF),)), RAW_FORBIDDEN)
    tail = escape_tail(others)
    alts = ([char_class(wide)] if wide else []) + (["\\\\" + tail] if tail is not None else [])
    return "(?:" + "|".join(alts) + ")" if alts else None


@lru_cache(maxsize=4096)
def _ascii_leave(children: frozenset[str]) -> str | None:
    """The raw ASCII characters no branch of a node with branches ``children`` takes, as a class."""
    raw = subtract(_ASCII_RAW, charset.normalize((ord(c), ord(c)) for c in children))
    return char_class(raw) if raw else None


def _paths_regex(paths: list[str]) -> str:
    """A regex for exactly these strings (JSON text of each character), wrapped as one unit."""
    body = _trie_regex(_char_trie(paths), 0)
    return "(?:" + body + ")" if body else ""


_ASCII_RAW: Ranges = ((0x20, 0x21), (0x23, 0x5B), (0x5D, 0x7F))


_ONE_LEAVE: dict[str, str] = {}
""":func:`_ascii_leave` of one branch, by its character ("" for None)."""


def _deviation_regex(node: dict, depth: int) -> str:
    """Strings that follow the trie from ``node``, then take a raw ASCII character no branch takes."""
    if depth > _MAX_GROUP_NESTING:
        raise LimitError("property names branch too deeply to be one regex", setting="max_enum_values")
    parts = []
    chain = ""
    while True:
        if len(node) == 1 and "" not in node:
            # One branch and not a name (most nodes): follow it.
            ((c, node),) = node.items()
            raw = _ONE_LEAVE.get(c)
            if raw is None:
                raw = _ONE_LEAVE[c] = _ascii_leave(frozenset(c)) or ""
            if raw:
                parts.append(chain + raw)
            chain += _char_text(c)
            continue
        raw = _ascii_leave(frozenset(c for c in node if c))
        if raw is not None:
            parts.append(chain + raw)
        branches = [(c, child) for c, child in node.items() if c]
        if len(branches) != 1:
            break
        c, node = branches[0]
        chain += _char_text(c)
    for c, child in branches:
        inner = _deviation_regex(child, depth + 1)
        if inner:
            parts.append(chain + _char_text(c) + "(?:" + inner + ")")
    return "|".join(parts)
