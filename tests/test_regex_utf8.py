"""utf8_sequences: the byte strings each range's sequences generate are exactly the range's UTF-8 encodings."""

from __future__ import annotations

import random

import numpy as np
import pytest

from banister.regex.utf8 import utf8_sequences

ALL = np.array([c for c in range(0x110000) if not 0xD800 <= c <= 0xDFFF], dtype=np.int64)

# PACKED[c]: the UTF-8 encoding of code point c as a big-endian integer (unique across lengths because
# lead bytes differ); -1 for surrogates.
PACKED = np.full(0x110000, -1, dtype=np.int64)
PACKED[ALL] = [int.from_bytes(chr(c).encode("utf-8"), "big") for c in ALL.tolist()]

LEAD_MASK = {1: 0x7F, 2: 0x1F, 3: 0x0F, 4: 0x07}


def _product(seq: list[tuple[int, int]]) -> tuple[np.ndarray, np.ndarray]:
    """Every byte string of the product in lexicographic order: (packed big-endian, decoded code point)."""
    packed = np.zeros(1, dtype=np.int64)
    values = np.zeros(1, dtype=np.int64)
    for k, (lo, hi) in enumerate(seq):
        axis = np.arange(lo, hi + 1, dtype=np.int64)
        bits = axis & (LEAD_MASK[len(seq)] if k == 0 else 0x3F)
        packed = ((packed << 8)[:, None] | axis[None, :]).ravel()
        values = ((values << 6)[:, None] | bits[None, :]).ravel()
    return packed, values


def check_range(lo: int, hi: int) -> None:
    """The sequences' products, in order, are exactly the encodings of the valid code points in lo..hi."""
    expected = ALL[np.searchsorted(ALL, lo) : np.searchsorted(ALL, hi, side="right")]
    sequences = utf8_sequences(lo, hi)
    total = 0
    decoded = []
    for seq in sequences:
        assert 1 <= len(seq) <= 4
        assert all(0 <= a <= b <= 0xFF for a, b in seq)
        total += int(np.prod([b - a + 1 for a, b in seq]))
        assert total <= len(expected), "sequences generate more byte strings than the range has code points"
        packed, values = _product(seq)
        assert values.max() <= 0x10FFFF
        # each byte string is the canonical encoding of the code point it decodes to: no overlongs, no
        # surrogates, lead byte of the right length
        assert np.array_equal(PACKED[values], packed)
        decoded.append(values)
    got = np.concatenate(decoded) if decoded else np.zeros(0, dtype=np.int64)
    assert np.array_equal(got, expected)


def test_whole_code_space() -> None:
    check_range(0, 0x10FFFF)
    assert len(utf8_sequences(0, 0x10FFFF)) <= 10


BOUNDARIES = sorted(
    {
        0,
        0x7F,
        0x80,
        0x7FF,
        0x800,
        0xFFF,
        0x1000,
        0xD7FF,
        0xD800,
        0xDBFF,
        0xDC00,
        0xDFFF,
        0xE000,
        0xFFFF,
        0x10000,
        0x3FFFF,
        0x40000,
        0xFFFFF,
        0x100000,
        0x10FFFF,
        0x83F,
        0x840,
        0x10FC0,
    }
)


@pytest.mark.parametrize("lo", BOUNDARIES)
def test_boundary_pairs(lo: int) -> None:
    for hi in BOUNDARIES:
        if hi >= lo:
            check_range(lo, hi)
        for delta in (-1, 1):
            if 0 <= lo + delta <= hi:
                check_range(lo + delta, hi)


def test_random_ranges() -> None:
    rng = random.Random(1234)
    for _ in range(500):
        lo = rng.randrange(0x110000)
        width = int(2 ** rng.uniform(0, 20))
        check_range(lo, min(lo + width, 0x10FFFF))
    for _ in range(200):
        a, b = sorted(rng.randrange(0x110000) for _ in range(2))
        check_range(a, b)


def test_surrogates_only_is_empty() -> None:
    assert utf8_sequences(0xD800, 0xDFFF) == []
    assert utf8_sequences(0xD900, 0xDA00) == []


def test_bad_range() -> None:
    with pytest.raises(ValueError):
        utf8_sequences(5, 4)
    with pytest.raises(ValueError):
        utf8_sequences(0, 0x110000)
