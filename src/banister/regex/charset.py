"""Sets of code points as sorted, disjoint, non-adjacent inclusive ranges (surrogates never included)."""

from __future__ import annotations

from collections.abc import Iterable

from banister.regex.utf8 import MAX_CODE_POINT, SURROGATE_HI, SURROGATE_LO

Ranges = tuple[tuple[int, int], ...]


def normalize(ranges: Iterable[tuple[int, int]]) -> Ranges:
    """Sort and merge ``ranges`` and drop the surrogates, which UTF-8 text cannot contain."""
    merged: list[list[int]] = []
    for lo, hi in sorted(ranges):
        if merged and lo <= merged[-1][1] + 1:
            merged[-1][1] = max(merged[-1][1], hi)
        else:
            merged.append([lo, hi])
    out: list[tuple[int, int]] = []
    for lo, hi in merged:
        if lo <= SURROGATE_HI and hi >= SURROGATE_LO:
            if lo < SURROGATE_LO:
                out.append((lo, SURROGATE_LO - 1))
            if hi > SURROGATE_HI:
                out.append((SURROGATE_HI + 1, hi))
        else:
            out.append((lo, hi))
    return tuple(out)


def negate(ranges: Ranges) -> Ranges:
    """Every encodable code point not in the normalized set ``ranges``."""
    gaps: list[tuple[int, int]] = []
    nxt = 0
    for lo, hi in ranges:
        if lo > nxt:
            gaps.append((nxt, lo - 1))
        nxt = hi + 1
    if nxt <= MAX_CODE_POINT:
        gaps.append((nxt, MAX_CODE_POINT))
    return normalize(gaps)


def fold_ascii_case(ranges: Ranges) -> Ranges:
    """``ranges`` closed under ASCII case swapping (what ``(?i)`` means here)."""
    extra: list[tuple[int, int]] = []
    for lo, hi in ranges:
        for first, last, shift in ((0x61, 0x7A, -32), (0x41, 0x5A, 32)):
            a, b = max(lo, first), min(hi, last)
            if a <= b:
                extra.append((a + shift, b + shift))
    return normalize(ranges + tuple(extra)) if extra else ranges


def single(code_point: int) -> Ranges:
    """The set holding one code point."""
    return ((code_point, code_point),)


DIGIT: Ranges = ((0x30, 0x39),)
WORD: Ranges = normalize([(0x30, 0x39), (0x41, 0x5A), (0x5F, 0x5F), (0x61, 0x7A)])
SPACE: Ranges = normalize(
    [
        (0x09, 0x0D),
        (0x20, 0x20),
        (0xA0, 0xA0),
        (0x1680, 0x1680),
        (0x2000, 0x200A),
        (0x2028, 0x2029),
        (0x202F, 0x202F),
        (0x205F, 0x205F),
        (0x3000, 0x3000),
        (0xFEFF, 0xFEFF),
    ]
)
ANY: Ranges = normalize([(0, MAX_CODE_POINT)])
DOT: Ranges = negate(normalize([(0x0A, 0x0A), (0x0D, 0x0D), (0x2028, 0x2029)]))

CLASS_ESCAPES: dict[str, Ranges] = {
    "d": DIGIT,
    "D": negate(DIGIT),
    "w": WORD,
    "W": negate(WORD),
    "s": SPACE,
    "S": negate(SPACE),
}
