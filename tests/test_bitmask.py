"""The bitmask contract: layout, allocation, and applying it to numpy and torch logits."""

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from banister import allocate_token_bitmask, apply_token_bitmask_inplace
from banister.mask.bitmask import unpack_bitmask


def _bitmask_from_allowed(allowed: np.ndarray) -> np.ndarray:
    """Pack boolean rows into the shared layout the slow, obvious way (token t -> word t//32, bit t%32)."""
    rows, width = allowed.shape
    words = np.zeros((rows, (width + 31) // 32), dtype=np.int64)
    for r in range(rows):
        for t in np.flatnonzero(allowed[r]):
            words[r, t // 32] |= 1 << (t % 32)
    return words.astype(np.uint32).view(np.int32)


def test_allocate_shape_dtype_and_all_allowed():
    mask = allocate_token_bitmask(3, 70)
    assert mask.shape == (3, 3) and mask.dtype == np.int32
    assert unpack_bitmask(mask, 70).all()
    with pytest.raises(ValueError):
        allocate_token_bitmask(0, 10)


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 4), st.integers(1, 130), st.integers(0, 40), st.data())
def test_apply_matches_packed_allowed_numpy_and_torch(rows, vocab, pad, data):
    allowed = np.array(data.draw(st.lists(st.booleans(), min_size=rows * vocab, max_size=rows * vocab))).reshape(
        rows, vocab
    )
    bitmask = _bitmask_from_allowed(allowed)
    logits = np.random.default_rng(0).normal(size=(rows, vocab + pad)).astype(np.float32)
    expected = np.where(np.pad(allowed, ((0, 0), (0, pad))), logits, -np.inf)
    # Columns past the vocabulary but inside the last word are whatever the packed bits say (zero here).
    out_np = apply_token_bitmask_inplace(logits.copy(), bitmask)
    np.testing.assert_array_equal(out_np, expected)
    out_t = apply_token_bitmask_inplace(torch.from_numpy(logits.copy()), torch.from_numpy(bitmask))
    np.testing.assert_array_equal(out_t.numpy(), expected)


def test_indices_select_rows_and_one_dimensional_logits():
    allowed = np.zeros((1, 40), dtype=bool)
    allowed[0, [0, 33, 39]] = True
    bitmask = _bitmask_from_allowed(allowed)
    logits = np.zeros((3, 40), dtype=np.float32)
    apply_token_bitmask_inplace(logits, bitmask, indices=[2])
    assert np.isfinite(logits[:2]).all()
    assert np.flatnonzero(np.isfinite(logits[2])).tolist() == [0, 33, 39]
    single = torch.zeros(40)
    apply_token_bitmask_inplace(single, torch.from_numpy(bitmask[0]))
    assert torch.isfinite(single).nonzero().flatten().tolist() == [0, 33, 39]


def test_padded_logits_beyond_bitmask_are_forbidden():
    bitmask = allocate_token_bitmask(1, 32)  # one word: all 32 allowed
    logits = torch.zeros(1, 50)
    apply_token_bitmask_inplace(logits, bitmask)
    assert torch.isfinite(logits[0, :32]).all() and torch.isinf(logits[0, 32:]).all()
