"""The warm-start cache: round trips, corrupt and stale files ignored, and warm grammars mask like cold ones."""

import json
import os

import numpy as np
import pytest

import banister.cache as cache_mod
from banister import Compiler, Matcher, WarmCache, allocate_token_bitmask
from banister.cache import grammar_from_json, grammar_to_json
from banister.grammar.json_schema import json_schema_to_grammar
from banister.vocab import Vocabulary
from banister.vocab.trie import TokenTrie

SCHEMA = {
    "type": "object",
    "properties": {"name": {"type": "string", "maxLength": 12}, "age": {"type": "integer", "minimum": 0},
                   "tags": {"type": "array", "items": {"enum": ["a", "b\u00e9", "c\U0001F600"]}}},
    "required": ["name", "age"],
}
INSTANCE = {"name": "Zo\u00e9 \"Q\"", "age": 42, "tags": ["b\u00e9", "c\U0001F600"]}
PATTERN = r"(ab|c[0-9]{2,4})+\u00e9?"


def small_vocab():
    tokens = [bytes([b]) for b in range(256)] + [b"ab", b"abc", b'{"', b'":', b"</s>", b"\xc3", b"\xc3\xa9"]
    return Vocabulary(tokens, eos_token_ids=[260])


def entries(root, prefix):
    return sorted(p for p in (root / "grammars").glob(f"{prefix}-*.bin"))


def test_grammar_ir_round_trips_through_json():
    grammar = json_schema_to_grammar(SCHEMA)
    back = grammar_from_json(json.loads(json.dumps(grammar_to_json(grammar))))
    assert back == grammar
    assert back.lexemes == grammar.lexemes


def test_trie_round_trips_and_is_read_back(tmp_path):
    vocab = small_vocab()
    cache = WarmCache(tmp_path)
    built = cache.trie(vocab)
    assert cache.stats["writes"] == 1
    again = WarmCache(tmp_path).trie(small_vocab())
    for name, arr in built.to_arrays().items():
        np.testing.assert_array_equal(again.to_arrays()[name], arr)
    fresh = TokenTrie.build(vocab.tokens, vocab.special_token_ids)
    np.testing.assert_array_equal(fresh.skip, again.skip)
    with pytest.raises(ValueError):
        TokenTrie.from_arrays({**built.to_arrays(), "skip": built.skip[:-1]})


def test_compiler_writes_then_reads_entries(tmp_path):
    vocab = small_vocab()
    cold = Compiler(vocab, cache_dir=tmp_path)
    cold.json_schema(SCHEMA)
    cold.regex(PATTERN)
    cold.choice(["yes", "no"])
    assert len(entries(tmp_path, "ir")) == 1 and len(entries(tmp_path, "dfa")) == 2
    assert not list(tmp_path.rglob("*.part"))  # atomic writes leave no temporary file
    warm = Compiler(small_vocab(), cache_dir=tmp_path)
    warm.json_schema(SCHEMA)
    warm.regex(PATTERN)
    warm.choice(["yes", "no"])
    assert warm.warm_cache.stats["hits"] == 4 and warm.warm_cache.stats["writes"] == 0  # trie + 3 entries


@pytest.mark.parametrize("damage", ["garbage", "truncated", "flipped", "empty", "other-format"])
def test_a_damaged_entry_is_ignored_and_rewritten(tmp_path, damage):
    Compiler(small_vocab(), cache_dir=tmp_path).json_schema(SCHEMA)
    (path,) = entries(tmp_path, "ir")
    data = path.read_bytes()
    if damage == "garbage":
        data = os.urandom(len(data))
    elif damage == "truncated":
        data = data[: len(data) // 2]
    elif damage == "flipped":
        data = data[:-10] + bytes([data[-10] ^ 0x20]) + data[-9:]
    elif damage == "empty":
        data = b""
    else:
        data = data.replace(b'"format": 1', b'"format": 0')
    path.write_bytes(data)
    compiler = Compiler(small_vocab(), cache_dir=tmp_path)
    compiled = compiler.json_schema(SCHEMA)
    assert Matcher(compiled).accept_string(json.dumps(INSTANCE, ensure_ascii=False))
    assert compiler.warm_cache.stats["rejected"] == 1 and compiler.warm_cache.stats["writes"] == 1
    assert path.read_bytes() != data  # rewritten whole
    assert Compiler(small_vocab(), cache_dir=tmp_path).warm_cache.load_grammar(path.stem[3:]) is not None


def test_a_damaged_trie_is_rebuilt(tmp_path):
    WarmCache(tmp_path).trie(small_vocab())
    (path,) = (tmp_path / "tables").glob("trie-*.bin")
    path.write_bytes(path.read_bytes()[:100])
    vocab = small_vocab()
    Compiler(vocab, cache_dir=tmp_path)
    np.testing.assert_array_equal(vocab.trie.byte, TokenTrie.build(vocab.tokens, vocab.special_token_ids).byte)


def test_an_entry_from_other_code_is_not_read(tmp_path, monkeypatch):
    Compiler(small_vocab(), cache_dir=tmp_path).json_schema(SCHEMA)
    monkeypatch.setattr(cache_mod, "code_hash", lambda: "an-edited-front-end")
    compiler = Compiler(small_vocab(), cache_dir=tmp_path)
    compiler.json_schema(SCHEMA)
    assert compiler.warm_cache.stats["writes"] == 1  # a miss: compiled cold and stored under the new key
    assert len(entries(tmp_path, "ir")) == 2


def test_an_unwritable_directory_is_skipped(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    compiled = Compiler(small_vocab(), cache_dir=blocker / "cache").regex(PATTERN)
    assert Matcher(compiled).accept_string("c123ab\u00e9")


def test_size_bound_evicts_the_least_recently_used(tmp_path):
    cache = WarmCache(tmp_path, max_bytes=100_000)
    compiler = Compiler(small_vocab(), cache_dir=cache)  # each DFA entry is about 20 kB
    for k in range(12):
        compiler.choice([f"option{k}", f"other{k}"])
    assert 0 < cache.size() <= 100_000
    assert len(entries(tmp_path, "dfa")) < 12


def test_warm_grammar_masks_equal_cold_ones_on_a_real_vocabulary(tmp_path, gpt2):
    vocab = gpt2.vocab
    cold = Compiler(vocab, cache_size=0, cache_dir=tmp_path)
    warm = Compiler(vocab, cache_size=0, cache_dir=tmp_path)
    for compile_ in (lambda c: c.json_schema(SCHEMA), lambda c: c.regex(PATTERN)):
        a, b = compile_(cold), compile_(warm)
        assert a.automaton is not b.automaton
        text = json.dumps(INSTANCE, ensure_ascii=False) if a.kind == "json_schema" else "c123abab\u00e9"
        tokens = gpt2.encode(text)
        ma, mb = Matcher(a), Matcher(b)
        bits_a, bits_b = allocate_token_bitmask(1, vocab.vocab_size), allocate_token_bitmask(1, vocab.vocab_size)
        for token in [*tokens, vocab.eos_token_ids[0]]:
            ma.fill_next_token_bitmask(bits_a)
            mb.fill_next_token_bitmask(bits_b)
            np.testing.assert_array_equal(bits_a, bits_b)
            assert ma.accept_token(token) and mb.accept_token(token)
    assert warm.warm_cache.stats["hits"] >= 2 and warm.warm_cache.stats["writes"] == 0


def test_a_huge_grammar_is_not_stored(tmp_path, monkeypatch):
    monkeypatch.setattr(cache_mod, "MAX_GRAMMAR_ENTRY_BYTES", 100)
    compiler = Compiler(small_vocab(), cache_dir=tmp_path)
    assert Matcher(compiler.json_schema(SCHEMA)).accept_string(json.dumps(INSTANCE, ensure_ascii=False))
    assert entries(tmp_path, "ir") == []
