"""fill_next_token_bitmask_batch: every row equals the matcher's own single fill, on the GPT-2 vocabulary."""

import json

import numpy as np
import pytest

from banister import (
    Compiler,
    Matcher,
    allocate_token_bitmask,
    fill_next_token_bitmask_batch,
)

SCHEMAS = [
    {"type": "object", "properties": {"name": {"type": "string"}, "n": {"type": "integer"}}, "required": ["name"]},
    {"type": "array", "items": {"enum": ["red", "green", "blue"]}, "maxItems": 3},
]
INSTANCES = [{"name": "Ada \u00e9", "n": -17}, ["green", "red"]]


@pytest.fixture(scope="module")
def matchers(gpt2):
    """Matchers at every position of the instances, plus a regex one and one after EOS."""
    compiler = Compiler(gpt2.vocab)
    out = []
    for schema, instance in zip(SCHEMAS, INSTANCES):
        compiled = compiler.json_schema(schema)
        m = Matcher(compiled)
        for token in gpt2.encode(json.dumps(instance, ensure_ascii=False)):
            out.append(m.copy())
            assert m.accept_token(token)
        out.append(m.copy())  # complete: EOS allowed
        assert m.accept_token(gpt2.vocab.eos_token_ids[0])
        out.append(m)  # after EOS: only EOS
    out.append(Matcher(compiler.regex(r"[0-9]{1,3}(\.[0-9]+)?")))
    return out


def single_rows(matchers, vocab_size):
    expected = allocate_token_bitmask(len(matchers), vocab_size)
    for i, m in enumerate(matchers):
        m.fill_next_token_bitmask(expected, i)
    return expected


@pytest.mark.parametrize("threads", [1, 2, 3, None])
def test_rows_equal_single_fills(gpt2, matchers, threads):
    vocab_size = gpt2.vocab.vocab_size
    expected = single_rows(matchers, vocab_size)
    states = [m.state for m in matchers]
    bitmask = allocate_token_bitmask(len(matchers), vocab_size)
    bitmask[:] = 12345  # every row is overwritten
    fill_next_token_bitmask_batch(matchers, bitmask, threads=threads)
    np.testing.assert_array_equal(bitmask, expected)
    assert [m.state for m in matchers] == states  # filling changes no matcher


def test_indices_place_rows_and_leave_the_others(gpt2, matchers):
    vocab_size = gpt2.vocab.vocab_size
    chosen = matchers[:5]
    expected = single_rows(chosen, vocab_size)
    bitmask = allocate_token_bitmask(8, vocab_size)
    bitmask[:] = 7
    rows = [6, 0, 3, 1, 7]
    fill_next_token_bitmask_batch(chosen, bitmask, rows, threads=2)
    for k, r in enumerate(rows):
        np.testing.assert_array_equal(bitmask[r], expected[k])
    assert (bitmask[[2, 4, 5]] == 7).all()


def test_torch_bitmask(gpt2, matchers):
    torch = pytest.importorskip("torch")
    expected = single_rows(matchers[:4], gpt2.vocab.vocab_size)
    bitmask = torch.zeros(expected.shape, dtype=torch.int32)
    fill_next_token_bitmask_batch(matchers[:4], bitmask, threads=2)
    np.testing.assert_array_equal(bitmask.numpy(), expected)


def test_bad_arguments(gpt2, matchers):
    bitmask = allocate_token_bitmask(2, gpt2.vocab.vocab_size)
    with pytest.raises(ValueError):
        fill_next_token_bitmask_batch(matchers[:2], bitmask, [0])
    with pytest.raises(IndexError):
        fill_next_token_bitmask_batch(matchers[:2], bitmask, [0, 2])
    with pytest.raises(ValueError):
        fill_next_token_bitmask_batch(matchers[:2], bitmask, threads=0)
    with pytest.raises(ValueError):
        fill_next_token_bitmask_batch(matchers[:1], bitmask[0])
    fill_next_token_bitmask_batch([], bitmask)  # nothing to do
