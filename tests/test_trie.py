"""The flat preorder token trie: it must describe exactly the matchable tokens."""

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from banister import Vocabulary


def _tokens_from_trie(trie) -> dict[bytes, list[int]]:
    path: list[int] = []
    found: dict[bytes, list[int]] = {}
    for i in range(trie.n_nodes):
        del path[trie.depth[i] - 1 :]
        path.append(int(trie.byte[i]))
        ids = trie.token_ids[trie.token_start[i] : trie.token_start[i + 1]].tolist()
        if ids:
            found[bytes(path)] = sorted(ids)
    return found


@settings(max_examples=80, deadline=None)
@given(st.lists(st.binary(max_size=6), min_size=1, max_size=40))
def test_trie_holds_exactly_the_matchable_tokens(tokens):
    vocab = Vocabulary(tokens + [b"<eos>"], eos_token_ids=[len(tokens)], special_token_ids=[0])
    trie = vocab.trie
    expected: dict[bytes, list[int]] = {}
    for tid, tb in enumerate(tokens):
        if vocab.is_matchable(tid):
            expected.setdefault(tb, []).append(tid)
    assert _tokens_from_trie(trie) == expected
    # skip[i] is the end of node i's subtree: every node in between is deeper.
    for i in range(trie.n_nodes):
        inside = trie.depth[i + 1 : trie.skip[i]]
        assert (inside > trie.depth[i]).all()
        assert trie.skip[i] == trie.n_nodes or trie.depth[trie.skip[i]] <= trie.depth[i]
    assert trie.max_depth == max((len(t) for t in expected), default=0)


def test_vocab_size_padding_and_errors():
    vocab = Vocabulary([b"a", b"b"], eos_token_ids=[1], vocab_size=64)
    assert len(vocab) == 64 and not vocab.is_matchable(40) and vocab.token_bytes(40) == b""
    assert np.array_equal(vocab.trie.token_ids, [0])
    import pytest

    from banister import VocabularyError

    with pytest.raises(VocabularyError, match="vocab_size"):
        Vocabulary([b"a", b"b"], eos_token_ids=[1], vocab_size=1)
    with pytest.raises(VocabularyError, match="outside"):
        Vocabulary([b"a"], eos_token_ids=[5])
    with pytest.raises(VocabularyError, match="EOS"):
        Vocabulary([b"a"], eos_token_ids=[])


@settings(max_examples=60, deadline=None)
@given(st.lists(st.binary(min_size=1, max_size=3).map(lambda b: bytes(97 + x % 4 for x in b)), min_size=1, max_size=30))
def test_the_walk_keeps_every_id_of_a_shared_byte_string(tokens):
    """Tokens over "abcd", so byte strings repeat: the walk kernel reads one token per node from
    ``node_token`` and the several ids of a shared byte string from ``token_ids``; the tokens it keeps
    for ``[ab]*c?`` are those Python's ``re`` matches in full (the language is its own prefixes)."""
    import re

    from banister.automaton import _WHOLE_TRIE, walk_tokens
    from banister.parser.lexer import lexeme_dfa

    vocab = Vocabulary(tokens + [b"<eos>"], eos_token_ids=[len(tokens)])
    trie = vocab.trie
    for i, ids in enumerate(np.split(trie.token_ids, trie.token_start[1:-1])):
        assert trie.node_token[i] == (ids[0] if len(ids) == 1 else -1 if not len(ids) else -2)
    dfa = lexeme_dfa("[ab]*c?", 100)
    words = np.zeros((len(vocab) + 31) // 32, dtype=np.uint32)
    walk_tokens(vocab, dfa.transitions, dfa.accepting, dfa.start, _WHOLE_TRIE, words)
    kept = {t for t in range(len(tokens)) if words[t >> 5] >> (t & 31) & 1}
    assert kept == {t for t, text in enumerate(tokens) if re.fullmatch(rb"[ab]*c?", text)}
