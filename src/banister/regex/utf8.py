"""Code-point ranges as UTF-8 byte-range sequences, the unit the byte-level NFA is built from.

A range of code points is split so that each piece is a *sequence*: a list of byte ranges whose
cartesian product is exactly the UTF-8 encodings of the piece. Pieces are cut where the encoded length
changes (U+007F, U+07FF, U+FFFF), around the surrogates (U+D800..U+DFFF have no UTF-8 encoding) and
wherever a lead byte would not cover whole blocks of continuation bytes.
"""

from __future__ import annotations

MAX_CODE_POINT = 0x10FFFF
SURROGATE_LO = 0xD800
SURROGATE_HI = 0xDFFF

ByteRange = tuple[int, int]

_LENGTH_LIMITS = (0x7F, 0x7FF, 0xFFFF)


def utf8_sequences(lo: int, hi: int) -> list[list[ByteRange]]:
    """Byte-range sequences, in ascending order, whose products are the UTF-8 encodings of ``lo..hi``.

    Surrogates inside the range are left out (they cannot be encoded); a range made only of surrogates
    gives an empty list.
    """
    if not 0 <= lo <= hi <= MAX_CODE_POINT:
        raise ValueError(f"bad code point range {lo:#x}..{hi:#x}")
    out: list[list[ByteRange]] = []
    stack = [(lo, hi)]
    while stack:
        lo, hi = stack.pop()
        if lo > hi:
            continue
        pieces = _split(lo, hi)
        if pieces is None:
            out.append(list(zip(chr(lo).encode("utf-8"), chr(hi).encode("utf-8"))))
        else:
            stack.append(pieces[1])
            stack.append(pieces[0])
    return out


def _split(lo: int, hi: int) -> tuple[tuple[int, int], tuple[int, int]] | None:
    """The two halves ``lo..hi`` must be cut into, or None when it is already one sequence."""
    if lo <= SURROGATE_HI and hi >= SURROGATE_LO:
        return (lo, SURROGATE_LO - 1), (SURROGATE_HI + 1, hi)
    for limit in _LENGTH_LIMITS:
        if lo <= limit < hi:
            return (lo, limit), (limit + 1, hi)
    if hi <= 0x7F:
        return None
    length = len(chr(lo).encode("utf-8"))
    for i in range(1, length):
        low_bits = (1 << (6 * i)) - 1
        if lo & ~low_bits == hi & ~low_bits:
            continue
        if lo & low_bits:
            return (lo, lo | low_bits), ((lo | low_bits) + 1, hi)
        if hi & low_bits != low_bits:
            return (lo, (hi & ~low_bits) - 1), (hi & ~low_bits, hi)
    return None
