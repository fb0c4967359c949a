"""Printing code points and code-point sets as banister regex text, and small set operations on them.

Shared by the front ends that build regex text (JSON Schema: :mod:`json_text`, :mod:`json_automata`;
GBNF and Lark: :mod:`ebnf_regex`). The printed text is read back by :func:`banister.regex.parse_regex`:
printable ASCII is written as itself unless it is a metacharacter (escaped with a backslash), every
other code point as ``\\u{X}``, so the text is plain ASCII and means the same under any normalisation.
"""

from __future__ import annotations

from bisect import bisect_right

from banister.regex import charset
from banister.regex.charset import Ranges
from banister.regex.utf8 import MAX_CODE_POINT

META = frozenset("\\^$.|?*+()[]{}/-")
"""Characters escaped outside a class."""
CLASS_META = frozenset("\\]^-[")
"""Characters escaped inside a class."""


def escape_char(cp: int, *, in_class: bool = False) -> str:
    """A regex (or, ``in_class``, a class member) matching exactly the code point ``cp``."""
    if 0x20 <= cp < 0x7F:
        c = chr(cp)
        return "\\" + c if c in (CLASS_META if in_class else META) else c
    return f"\\u{{{cp:X}}}"


def escape_text(text: str) -> str:
    """A regex matching exactly ``text``."""
    if text.isascii() and text.isprintable():  # (most texts: property names, enum strings)
        return text.translate(_META_ESCAPES)
    return "".join(escape_char(ord(c)) for c in text)


_META_ESCAPES = {ord(c): "\\" + c for c in META}


def char_class(ranges: Ranges, *, negate_if_shorter: bool = False) -> str:
    """A regex for one code point of ``ranges`` (``[]`` when empty). ``negate_if_shorter``: write
    ``[^...]`` when the complement has fewer ranges."""
    if len(ranges) == 1 and ranges[0][0] == ranges[0][1]:
        return escape_char(ranges[0][0])
    negated = False
    if negate_if_shorter and ranges:
        complement = charset.negate(ranges)
        if len(complement) < len(ranges):
            ranges, negated = complement, True
    parts = []
    for lo, hi in ranges:
        first = escape_char(lo, in_class=True)
        if lo == hi:
            parts.append(first)
        elif hi == lo + 1:
            parts.append(first + escape_char(hi, in_class=True))
        else:
            parts.append(f"{first}-{escape_char(hi, in_class=True)}")
    return ("[^" if negated else "[") + "".join(parts) + "]"


def intersect(a: Ranges, b: Ranges) -> Ranges:
    """The code points in both (normalised) sets."""
    out = []
    i = j = 0
    while i < len(a) and j < len(b):
        lo, hi = max(a[i][0], b[j][0]), min(a[i][1], b[j][1])
        if lo <= hi:
            out.append((lo, hi))
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return tuple(out)


def subtract(a: Ranges, b: Ranges) -> Ranges:
    """The code points of ``a`` not in ``b``."""
    return intersect(a, charset.negate(b))


def contains(ranges: Ranges, cp: int) -> bool:
    """Whether the normalised set ``ranges`` holds ``cp``."""
    i = bisect_right(ranges, (cp, MAX_CODE_POINT + 1)) - 1
    return i >= 0 and ranges[i][0] <= cp <= ranges[i][1]
