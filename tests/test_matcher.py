"""Matcher agreement on real vocabularies: mask, accept_token, status, rollback and EOS tell one story.

Oracles: Python's ``re`` (members are drawn by hypothesis from the pattern) and the real tokenizers
(every member is tokenised the way the model would write it).
"""

from __future__ import annotations

import json
import random
import re

import numpy as np
import pytest
from hypothesis import assume, HealthCheck, given, settings
from hypothesis import strategies as st

from banister import Compiler, Matcher, allocate_token_bitmask
from banister.mask.bitmask import unpack_bitmask
from banister.vocab.named import load_named

# Patterns on which ECMA-262 and Python's re agree (ASCII classes, explicit ranges), so `re` is the oracle.
PATTERNS = [
    r"[0-9]{4}-[0-9]{2}-[0-9]{2}",
    r"(0|[1-9][0-9]*)(\.[0-9]{1,3})?",
    r"[a-z]+@[a-z]+\.(com|org|net)",
    r"\"([^\"\\\n]|\\[\"\\nt])*\"",
    r"(yes|no|maybe)",
    r"[A-Z][a-z]{2,8}( [A-Z][a-z]{2,8}){0,2}",
    r"(ab|a)*c?",
    r"\{\"age\": [0-9]{1,3}\}",
    r"[àéîõü]{1,5}[日本語]?",
    r"(-?(0|[1-9][0-9]{0,5}))(, -?(0|[1-9][0-9]{0,5}))*",
]
VOCABS = ["llama3", "mistral"]


@pytest.fixture(scope="module", params=VOCABS)
def named(request):
    return load_named(request.param)


@pytest.fixture(scope="module")
def compilers(named):
    return Compiler(named.vocab)


def _allowed(matcher: Matcher, vocab_size: int) -> np.ndarray:
    bitmask = allocate_token_bitmask(1, vocab_size)
    matcher.fill_next_token_bitmask(bitmask)
    return unpack_bitmask(bitmask, vocab_size)[0]


def _shortest_completion(dfa, state: int) -> bytes:
    """Breadth-first search over bytes to an accepting state (the DFA's own tables)."""
    from collections import deque

    seen = {state: b""}
    queue = deque([state])
    while queue:
        s = queue.popleft()
        if dfa.is_accepting(s):
            return seen[s]
        for b in range(256):
            t = dfa.step(s, b)
            if t != 0 and t not in seen:
                seen[t] = seen[s] + bytes([b])
                queue.append(t)
    raise AssertionError("live state with no path to acceptance")


@pytest.mark.parametrize("pattern", PATTERNS)
@settings(max_examples=8, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
@given(data=st.data())
def test_tokenised_members_walk_through_the_masks(named, compilers, pattern, data):
    text = data.draw(st.from_regex(re.compile(pattern), fullmatch=True))
    ids = named.encode(text)
    # SentencePiece normalises text before encoding (U+2581 becomes a space): skip what it cannot spell.
    assume(named.vocab.decode(ids) == text.encode("utf-8"))
    matcher = Matcher(compilers.regex(pattern))
    eos = named.vocab.eos_token_ids[0]
    masks = []
    for token in ids:
        allowed = _allowed(matcher, named.vocab.vocab_size)
        masks.append(allowed)
        assert allowed[token], f"token {token} {named.vocab.tokens[token]!r} masked in {text!r}"
        assert not allowed[eos] or matcher.is_accepting()
        assert matcher.accept_token(token)
    assert matcher.is_accepting() and _allowed(matcher, named.vocab.vocab_size)[eos]
    assert matcher.status("") == "complete"
    # Rollback restores the exact masks, all the way back.
    for i in range(len(ids) - 1, -1, -1):
        matcher.rollback(1)
        assert np.array_equal(_allowed(matcher, named.vocab.vocab_size), masks[i])
    assert matcher.accept_token(eos) == (re.fullmatch(pattern, "") is not None)


@pytest.mark.parametrize("pattern", PATTERNS)
def test_random_tokens_accept_exactly_what_the_mask_allows(named, compilers, pattern):
    rng = random.Random(hash(pattern) & 0xFFFF)
    vocab = named.vocab
    compiled = compilers.regex(pattern)
    dfa = compiled.automaton.dfa
    matcher = Matcher(compiled)
    for _step in range(12):
        allowed = _allowed(matcher, vocab.vocab_size)
        allowed_ids = np.flatnonzero(allowed)
        probes = [rng.randrange(vocab.vocab_size) for _ in range(150)]
        probes += [int(t) for t in rng.sample(list(allowed_ids), min(40, len(allowed_ids)))]
        for token in probes:
            before = matcher.state
            ok = matcher.accept_token(token)
            assert ok == bool(allowed[token]), (token, vocab.tokens[token] if token < len(vocab.tokens) else None)
            if ok:
                # The token leads somewhere acceptance is still reachable, and status agrees.
                if token not in vocab.eos_token_ids:
                    rest = _shortest_completion(dfa, matcher.state)
                    assert matcher.status(rest) == "complete"
                matcher.rollback(1)
            assert matcher.state == before
        real = [t for t in allowed_ids if t not in vocab.eos_token_ids]
        if not real:
            break
        matcher.accept_token(int(rng.choice(real)))


def test_status_and_terminated_follow_re(compilers):
    pattern = r"(yes|no|maybe)"
    matcher = Matcher(compilers.regex(pattern))
    for text in ["", "y", "ye", "yes", "yess", "n", "no", "maybe", "mayb", "x"]:
        expected = "complete" if re.fullmatch(pattern, text) else ("open" if any(
            w.startswith(text) for w in ("yes", "no", "maybe")) else "dead")
        assert matcher.status(text) == expected, text
    assert matcher.accept_string("ye") and not matcher.is_terminated()
    assert matcher.accept_string("s") and matcher.is_terminated() and matcher.is_accepting()
    vocab = compilers.vocab
    allowed = _allowed(matcher, vocab.vocab_size)
    assert set(np.flatnonzero(allowed)) == set(vocab.eos_token_ids)
    assert not matcher.accept_string("!")


def test_jump_forward_copy_and_reset(compilers):
    matcher = Matcher(compilers.regex(r"\{\"name\": \"[a-z]+\"\}"))
    assert matcher.jump_forward_string() == '{"name": "'
    assert matcher.accept_string('{"name": "bo')
    twin = matcher.copy()
    assert twin.accept_string('b"}') and twin.is_terminated() and not matcher.is_terminated()
    assert matcher.jump_forward_string() == ""
    matcher.reset()
    assert matcher.num_accepted == 0 and matcher.status('{"name": "x"}') == "complete"
    with pytest.raises(ValueError):
        matcher.rollback(1)


def test_choice_masks_and_special_tokens_never_match(named, compilers):
    vocab = named.vocab
    matcher = Matcher(compilers.choice(["red", "green", "blue", "日本"]))
    allowed = np.flatnonzero(_allowed(matcher, vocab.vocab_size))
    texts = {vocab.tokens[t] for t in allowed}
    assert texts and all(any(w.encode().startswith(t) for w in ["red", "green", "blue", "日本"]) for t in texts)
    assert not set(allowed) & vocab.special_token_ids
    for word in ["red", "green", "blue", "日本"]:
        m = Matcher(compilers.choice(["red", "green", "blue", "日本"]))
        assert all(m.accept_token(t) for t in named.encode(word)) and m.is_terminated()


def test_compiler_caches_by_specification(compilers):
    a = compilers.regex("[0-9]+")
    assert compilers.regex("[0-9]+") is a
    assert compilers.choice(["a", "b"]) is compilers.choice(["a", "b"])
    uncached = Compiler(compilers.vocab, cache_size=0)  # no cache: every call compiles (and writes no key)
    assert uncached.json_schema({"type": "integer"}) is not uncached.json_schema({"type": "integer"})
    assert uncached.cache_info() == {"entries": 0, "capacity": 0}


def test_schemas_that_differ_only_in_key_order_are_cached_apart(compilers):
    """Declared properties are written in schema order: the order is part of the specification."""
    ab = {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
          "required": ["a", "b"], "additionalProperties": False}
    ba = {**ab, "properties": dict(reversed(ab["properties"].items()))}
    assert compilers.json_schema(ab) is compilers.json_schema(dict(ab))
    assert Matcher(compilers.json_schema(ab)).status('{"a":1,"b":2}') == "complete"
    assert Matcher(compilers.json_schema(ba)).status('{"b":1,"a":2}') == "complete"
    assert Matcher(compilers.json_schema(ba)).status('{"a":1,"b":2}') == "dead"
    # So is a resource's order, and which documents are given at all.
    uri = "https://example.com/ab.json"
    assert compilers.json_schema({"$ref": uri}, resources={uri: ab}) is compilers.json_schema({"$ref": uri},
                                                                                              resources={uri: dict(ab)})
    assert Matcher(compilers.json_schema({"$ref": uri}, resources={uri: ab})).status('{"b":1,"a":2}') == "dead"
    assert Matcher(compilers.json_schema({"$ref": uri}, resources={uri: ba})).status('{"b":1,"a":2}') == "complete"
    assert Matcher(compilers.json_schema({"$ref": uri}, resources={uri: {"type": "integer"}})).status("7") == "complete"


def test_masks_overwrite_whatever_the_row_held(named, compilers):
    """A grammar writes every word of the row (no clearing first): a row full of ones and a fresh one
    get the same mask, at new states and at states seen before (the memoised, merged path)."""
    compiled = compilers.json_schema({"type": "object", "properties": {"name": {"type": "string"},
                                                                        "tags": {"type": "array"}}})
    text = '{"name": "Ada Lovelace", "tags": [1, "x", {"a": null}]}'
    tokens = named.encode(text)
    for _round in range(2):  # the second round meets every state again
        matcher = Matcher(compiled)
        for token in tokens + [None]:
            fresh = allocate_token_bitmask(1, named.vocab.vocab_size)
            dirty = np.full((1, fresh.shape[1] + 3), -1, dtype=fresh.dtype)
            short = np.full((1, fresh.shape[1] // 2), -1, dtype=fresh.dtype)  # gets the words it has
            matcher.fill_next_token_bitmask(fresh)
            matcher.fill_next_token_bitmask(dirty)
            matcher.fill_next_token_bitmask(short)
            assert np.array_equal(dirty[0, : fresh.shape[1]], fresh[0]) and not dirty[0, fresh.shape[1]:].any()
            assert np.array_equal(short[0], fresh[0, : short.shape[1]])
            if token is not None:
                assert matcher.accept_token(token)


@pytest.mark.parametrize("eager_bytes", [0, 4 << 20])
def test_a_state_keeps_its_united_sets_at_its_first_or_second_mask(named, eager_bytes, monkeypatch):
    """A state whose mask unites several token sets keeps the row it ORed as one set: at its first mask
    while the grammar holds few such rows, else at its second. Either way every mask is the union of
    the state's sets, which ``token_mask`` computes apart."""
    from banister.parser import recognizer

    monkeypatch.setattr(recognizer, "MAX_EAGER_MERGED_BYTES", eager_bytes)
    compiled = Compiler(named.vocab, cache_size=0).json_schema(
        {"type": "object", "properties": {"name": {"type": "string"}, "n": {"type": "integer"}}})
    automaton = compiled.automaton
    text = '{"name": "Ada", "n": 12}'
    parts_after: dict = {}  # state -> how many sets it holds after each of its masks
    for _request in range(2):
        matcher = Matcher(compiled)
        for token in named.encode(text):
            state = matcher.state
            row = allocate_token_bitmask(1, named.vocab.vocab_size)
            matcher.fill_next_token_bitmask(row)
            assert np.array_equal(row[0, : automaton._words].view(np.uint32), automaton.token_mask(state)), token
            parts_after.setdefault(state, []).append(len(automaton._state_masks[state][0]))
            assert matcher.accept_token(token)
    assert automaton._merged_bytes > 0
    if eager_bytes:  # every state holds one set from its first mask on
        assert all(counts[0] == 1 for counts in parts_after.values())
    else:  # several sets after the first mask, one after the second
        assert any(counts[0] > 1 and counts[1:2] == [1] for counts in parts_after.values())
        assert all(counts[1:] == [1] * (len(counts) - 1) for counts in parts_after.values() if counts[0] > 1)


def test_a_reused_bitmask_gets_each_mask_in_the_row_asked_for(named, compilers):
    """A matcher keeps the view of the row it filled last: filling the same buffer again, another row of
    it, or another buffer writes where asked and nowhere else, at every step of a generation."""
    compiled = compilers.json_schema({"type": "object", "properties": {"id": {"type": "integer"}}})
    matcher = Matcher(compiled)
    shared = allocate_token_bitmask(3, named.vocab.vocab_size)
    for token in named.encode('{"id": 42}') + [None]:
        fresh = allocate_token_bitmask(1, named.vocab.vocab_size)
        matcher.fill_next_token_bitmask(fresh)
        for index in (0, 2, 2, 1):
            shared[:] = 0
            matcher.fill_next_token_bitmask(shared, index)
            assert np.array_equal(shared[index], fresh[0])
            assert not np.delete(shared, index, axis=0).any()
        other = allocate_token_bitmask(3, named.vocab.vocab_size)
        matcher.fill_next_token_bitmask(other, 1)
        assert np.array_equal(other[1], fresh[0]) and not shared[0].any()
        if token is not None:
            assert matcher.accept_token(token)


def test_bitmasks_of_the_wrong_kind_are_refused_by_name(named, compilers):
    """A bitmask must be int32 words in contiguous rows, on the CPU: anything else is a typed error that
    says what is wrong, and a CPU torch bitmask gets the same words as a numpy one."""
    import torch

    matcher = Matcher(compilers.json_schema({"type": "integer"}))
    words = allocate_token_bitmask(2, named.vocab.vocab_size)
    matcher.fill_next_token_bitmask(words, 1)
    for dtype in (np.int64, np.uint32, np.dtype(">i4")):
        with pytest.raises(TypeError, match="int32"):
            matcher.fill_next_token_bitmask(words.astype(dtype))
    with pytest.raises(ValueError, match="contiguous"):
        matcher.fill_next_token_bitmask(np.asfortranarray(words), 1)
    tensor = torch.zeros(words.shape, dtype=torch.int32)
    matcher.fill_next_token_bitmask(tensor, 1)
    assert np.array_equal(tensor.numpy()[1], words[1]) and not tensor.numpy()[0].any()
    with pytest.raises(ValueError, match="CPU"):
        matcher.fill_next_token_bitmask(torch.zeros(words.shape, dtype=torch.int32, device="meta"))


@pytest.mark.parametrize("cache_size", [0, 8])
def test_a_schema_that_is_not_json_data_is_a_schema_error(named, cache_size):
    """A dict holding itself, or a set, is refused with the front end's SchemaError whether or not the
    compiler keys a cache by the schema's JSON text (which cannot be written for them), also as a
    structural tag's body."""
    from banister.errors import SchemaError
    from banister.grammar.structural import Tag

    cyclic: dict = {"type": "object"}
    cyclic["properties"] = {"self": cyclic}
    compiler = Compiler(named.vocab, cache_size=cache_size)
    with pytest.raises(SchemaError, match="contains itself"):
        compiler.json_schema(cyclic)
    with pytest.raises(SchemaError, match="set"):
        compiler.json_schema({"enum": {1, 2}})
    with pytest.raises(SchemaError, match="contains itself"):
        compiler.structural_tag([Tag(begin="<a>", schema=cyclic, end="</a>")])


def test_compiling_pauses_garbage_collection_and_restores_it(named, monkeypatch):
    """Collection is off while a schema compiles and back as it was after, also when compiling fails."""
    import gc

    from banister.errors import SchemaError
    from banister.grammar import json_schema

    seen = []
    real = json_schema.json_schema_to_grammar

    def spy(schema, **options):
        seen.append(gc.isenabled())
        return real(schema, **options)

    monkeypatch.setattr(json_schema, "json_schema_to_grammar", spy)
    assert gc.isenabled()
    Compiler(named.vocab, cache_size=0).json_schema({"type": "integer"})
    with pytest.raises(SchemaError):
        Compiler(named.vocab, cache_size=0).json_schema({"type": "no such type"})
    Compiler(named.vocab, cache_size=0, pause_gc=False).json_schema({"type": "string"})
    assert seen == [False, False, True] and gc.isenabled()
    gc.disable()
    try:
        Compiler(named.vocab, cache_size=0).json_schema({"type": "boolean"})
        assert not gc.isenabled()  # off before: left off
    finally:
        gc.enable()


@pytest.mark.parametrize(
    ("schema", "prefix"),
    [
        ({"type": "string", "minLength": 40, "maxLength": 100}, ""),
        # a fixed prefix of either length, then a counted run of a character class (no digits)
        ({"type": "string", "pattern": "^(jpg|jpeg):[^0-9]*$", "minLength": 40, "maxLength": 100}, "jpeg:"),
    ],
)
def test_a_long_bounded_string_through_the_masks(named, compilers, schema, prefix):
    """A string of 40 to 100 characters is counted in 32-character lexemes by rules (see
    ``JsonGrammarBuilder._length``): tokens that run across the blocks are allowed exactly while the
    text stays inside the bound (and the pattern), and EOS exactly when it is within it."""
    import json

    compiled = compilers.json_schema(schema)
    eos = named.vocab.eos_token_ids[0]
    body = "many words, é and 日本 " * 8
    texts = [(prefix + body)[:n] for n in [0, 31, 39, 40, 63, 64, 65, 96, 97, 100, 101, 130]]
    texts += [prefix + body[:20] + "7" + body[:30]] if prefix else []  # a digit the run does not take
    for text in texts:
        matcher = Matcher(compiled)
        kept = True
        for token in named.encode(json.dumps(text, ensure_ascii=False)):
            if not _allowed(matcher, named.vocab.vocab_size)[token]:
                kept = False
                break
            assert matcher.accept_token(token)
        ends = kept and bool(_allowed(matcher, named.vocab.vocab_size)[eos])
        assert ends is (40 <= len(text) <= 100 and text.startswith(prefix) and "7" not in text), text
