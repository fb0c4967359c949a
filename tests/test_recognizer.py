"""The grammar recogniser agrees with the slow Earley oracle, and its masks with its own accept_token.

Random grammars (recursive, nullable, ambiguous, with overlapping lexemes) are checked on every short
string; a JSON-like grammar is checked on a real vocabulary the way the regex matcher is.
"""

from __future__ import annotations

import gzip
import itertools
import json
import random
import threading

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from shared_data import MASKBENCH_DEV

from banister import Compiler, Matcher, Vocabulary, allocate_token_bitmask
from banister.errors import GrammarError
from banister.grammar.ir import Grammar, Lexeme, Ref
from banister.grammar.reference import matches
from banister.mask.bitmask import unpack_bitmask
from banister.vocab.named import load_named

LEXEMES = [Lexeme(p) for p in ["a", "b", "ab", "ba", "[ab]", "a+", "(ab)+", "b?a", "a[ab]{0,2}", "c"]]
BYTE_VOCAB = Vocabulary([bytes([b]) for b in range(256)] + [b"</s>"], eos_token_ids=[256])
# A vocabulary of multi-byte tokens over the same alphabet, so tokens cross lexeme boundaries.
MULTI_VOCAB = Vocabulary(
    ["".join(p).encode() for n in range(1, 4) for p in itertools.product("abc", repeat=n)] + [b"</s>"],
    eos_token_ids=[39],
)
STRINGS = ["".join(p) for n in range(0, 7) for p in itertools.product("abc", repeat=n)]


@st.composite
def grammars(draw):
    names = [f"N{i}" for i in range(draw(st.integers(1, 4)))]
    symbol = st.one_of(st.sampled_from(LEXEMES), st.sampled_from([Ref(n) for n in names]))
    rules = {n: tuple(tuple(draw(st.lists(symbol, max_size=3))) for _ in range(draw(st.integers(1, 3)))) for n in names}
    return Grammar(rules, "N0")


def _allowed(matcher: Matcher, vocab: Vocabulary) -> np.ndarray:
    bitmask = allocate_token_bitmask(1, vocab.vocab_size)
    matcher.fill_next_token_bitmask(bitmask)
    return unpack_bitmask(bitmask, vocab.vocab_size)[0]


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(grammars())
def test_membership_agrees_with_the_earley_oracle(grammar):
    try:
        compiled = Compiler(BYTE_VOCAB).grammar_ir(grammar)
    except GrammarError:  # the start derives no text: the oracle must agree that nothing matches
        assert not any(matches(grammar, s) for s in STRINGS)
        return
    language = {s for s in STRINGS if matches(grammar, s)}
    for s in STRINGS:
        status = Matcher(compiled).status(s)
        assert (status == "complete") == (s in language), (s, status)
        if s in language:  # every prefix of a member is alive
            assert all(Matcher(compiled).status(s[:i]) != "dead" for i in range(len(s)))


@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
@given(grammars(), st.randoms(use_true_random=False))
def test_masks_agree_with_accept_and_lead_to_acceptance(grammar, rnd):
    try:
        compiled = Compiler(MULTI_VOCAB).grammar_ir(grammar)
    except GrammarError:
        return
    language = [s for s in STRINGS if matches(grammar, s)]
    _check_masks_on_a_random_walk(compiled, rnd, 6)
    assert all(Matcher(compiled).status(s) == "complete" for s in language)


def _check_masks_on_a_random_walk(compiled, rnd, steps: int) -> None:
    """At each of ``steps`` tokens (over MULTI_VOCAB), drawn from the mask: the mask allows exactly the
    tokens ``accept_token`` takes."""
    m = Matcher(compiled)
    for _ in range(steps):
        allowed = _allowed(m, MULTI_VOCAB)
        for tok in range(MULTI_VOCAB.vocab_size):
            ok = m.accept_token(tok)
            assert ok == bool(allowed[tok]), (tok, MULTI_VOCAB.tokens[tok])
            if ok:
                m.rollback(1)
        ids = [t for t in np.flatnonzero(allowed) if t != 39]
        if not ids:
            break
        m.accept_token(rnd.choice(ids))


def test_full_caches_drop_their_oldest_entries_and_masks_stay_exact(monkeypatch):
    """A full cache loses its oldest 1/64 (not everything at once); with caches of a few entries, so
    that every mask evicts, masks still agree with accept_token."""
    from banister.parser import recognizer

    cache = dict.fromkeys(range(128))
    recognizer._make_room(cache, 128)
    assert list(cache) == list(range(2, 128))
    recognizer._make_room(cache, 128)
    assert len(cache) == 126
    monkeypatch.setattr(recognizer, "MAX_CACHED_WALKS", 4)
    monkeypatch.setattr(recognizer, "MAX_STATE_MASKS", 2)
    grammar = Grammar({"N0": ((LEXEMES[6], Ref("N1")), (LEXEMES[8],)), "N1": ((LEXEMES[1], Ref("N0")), (LEXEMES[9],))}, "N0")
    compiled = Compiler(MULTI_VOCAB, cache_size=0).grammar_ir(grammar)
    for seed in range(4):
        _check_masks_on_a_random_walk(compiled, random.Random(seed), 12)
    assert len(recognizer._walk_caches(MULTI_VOCAB)[0]) <= 4


def _json_grammar() -> Grammar:
    from banister.grammar.ir import GrammarBuilder

    b = GrammarBuilder()
    value = b.declare("value")
    ws = b.optional(b.lexeme(r"[ \n]{1,16}"))
    string = b.lexeme(r'"([^"\\\x00-\x1f]|\\["\\/bfnrt]|\\u[0-9a-fA-F]{4})*"')
    number = b.lexeme(r"-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?")
    comma, colon = b.literal(","), b.literal(":")
    member = b.seq(ws, string, ws, colon, ws, value, ws)
    obj = b.seq(b.literal("{"), b.choice([ws], [b.repeat(member, 1, None, comma)]), b.literal("}"))
    item = b.seq(ws, value, ws)
    arr = b.seq(b.literal("["), b.choice([ws], [b.repeat(item, 1, None, comma)]), b.literal("]"))
    b.rule("value", [(string,), (number,), (obj,), (arr,), (b.literal("true"),), (b.literal("false"),), (b.literal("null"),)])
    return b.build("value")


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-10**6, 10**6) | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=5), inner, max_size=4),
    max_leaves=10,
)


@pytest.fixture(scope="module")
def llama_json():
    named = load_named("llama3")
    return named, Compiler(named.vocab).grammar_ir(_json_grammar())


@settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
@given(value=json_values, indent=st.sampled_from([None, 1]))
def test_real_vocabulary_walk_rollback_and_eos(llama_json, value, indent):
    named, compiled = llama_json
    vocab = named.vocab
    text = json.dumps(value, indent=indent)
    ids = named.encode(text)
    m = Matcher(compiled)
    masks = []
    for tok in ids:
        allowed = _allowed(m, vocab)
        masks.append(allowed)
        assert allowed[tok], (text, vocab.tokens[tok])
        assert bool(allowed[128001]) == m.is_accepting()
        assert m.accept_token(tok)
    assert m.is_accepting() and _allowed(m, vocab)[128001]
    rng = random.Random(len(text))
    for i in range(len(ids) - 1, -1, -1):
        m.rollback(1)
        allowed = _allowed(m, vocab)
        assert np.array_equal(allowed, masks[i])
        for tok in rng.sample(range(vocab.vocab_size), 30) + rng.sample(list(np.flatnonzero(allowed)), min(5, int(allowed.sum()))):
            ok = m.accept_token(int(tok))
            assert ok == bool(allowed[tok])
            if ok:
                m.rollback(1)


def test_broken_json_is_dead(llama_json):
    _, compiled = llama_json
    for text, status in [('{"a": 1}', "complete"), ('{"a" 1}', "dead"), ("[1, 2", "open"), ("[1,]", "dead"),
                         ("01", "dead"), ('"\\x"', "dead"), ("nul", "open"), ("[1 2]", "dead")]:
        assert Matcher(compiled).status(text) == status, text
    assert Matcher(compiled).jump_forward_string() == ""
    m = Matcher(compiled)
    assert m.accept_string("tr") and m.jump_forward_string() == "ue"


def test_a_grammar_symbol_of_another_type_is_a_typed_error():
    with pytest.raises(GrammarError, match="neither a Lexeme nor a Ref"):
        Grammar({"s": ((Lexeme("a"), "b"),)}, "s")


_ONE_IN_TEN = st.integers(0, 9).map(lambda k: k == 0)
_WORDS = st.dictionaries(st.integers(0, 1023), st.integers(1, 2**32 - 1), min_size=1, max_size=12)


@given(st.lists(st.tuples(_ONE_IN_TEN, _WORDS), min_size=2, max_size=24))  # a dense part: one in ten
def test_unions_of_token_sets_match_their_bitwise_or(sets):
    """However token sets are merged (word by word when few, into a copy of a dense one, through a whole
    bitmask, or sorted when many), the result is the OR of their words; it is dense when a part is or
    when a sixteenth of its words are set, and a sparse result lists its non-zero words in order."""
    from banister.parser.recognizer import _apply, _union

    n_words = 1024
    parts = []
    for dense, words in sets:
        if dense:  # every word set: as dense as a set gets
            full = np.array([words.get(i, 1 + i) for i in range(n_words)], dtype=np.uint32)
            parts.append((None, full))
        else:
            parts.append((np.array(sorted(words), dtype=np.intp),
                          np.array([words[i] for i in sorted(words)], dtype=np.uint32)))
    expected = np.zeros(n_words, dtype=np.uint32)
    for part in parts:
        _apply(expected, part)
    index, words = _union(parts, n_words)
    got = np.zeros(n_words, dtype=np.uint32)
    if index is None:
        got[:] = words
    else:
        assert np.all(np.diff(index) > 0) and np.count_nonzero(words) == words.size
        got[index] = words
    assert np.array_equal(got, expected)
    assert (index is None) == (any(dense for dense, _ in sets) or np.count_nonzero(expected) * 16 > n_words)


@given(st.lists(st.integers(0, 7), min_size=1, max_size=400))
def test_histories_are_persistent_sequences(picks):
    """Earley histories branch (masks scan many lexemes from one state): appending to any earlier one,
    across chunk boundaries, leaves every history equal to the tuple it stands for."""
    from banister.parser.earley import History

    histories = [(History(), ())]
    for k, pick in enumerate(picks):  # mostly the newest, so the histories grow past a few chunks
        history, expected = histories[-1] if pick else histories[k * 7919 % len(histories)]
        histories.append((history.append(k), (*expected, k)))
    for history, expected in histories:
        assert len(history) == len(expected) and [history[i] for i in range(len(history))] == list(expected)
        with pytest.raises(IndexError):
            history[len(history)]


@given(st.lists(st.lists(st.lists(st.integers(-3, 9), max_size=3), max_size=3), min_size=1, max_size=10),
       st.frozensets(st.integers(-3, -1)))
def test_nullable_and_productive_rules_are_the_plain_fixpoints(rules, excluded):
    """The parser's nullable and productive rules (integer rules: ``s >= 0`` a rule, ``s < 0`` a
    lexeme) against the textbook fixpoint: add any rule with an alternative whose symbols all qualify
    until none is added."""
    from banister.parser.earley import _least_rules

    rules = [[tuple(s % len(rules) if s >= 0 else s for s in alt) for alt in alts] for alts in rules]

    def fixpoint(lexeme_ok) -> frozenset[int]:
        found: set[int] = set()
        while True:
            more = {i for i, alts in enumerate(rules)
                    if any(all(s in found if s >= 0 else lexeme_ok(s) for s in alt) for alt in alts)}
            if more <= found:
                return frozenset(found)
            found |= more

    assert _least_rules(rules, ()) == fixpoint(lambda s: False)
    assert _least_rules(rules, excluded) == fixpoint(lambda s: s not in excluded)


def test_a_long_document_holds_memory_in_proportion_to_its_length(llama_json):
    """What a matcher holds grows linearly with the document: each Earley state reaches the states
    before it through a shared history, not a copy of all of them (which held 267 MB for 4,000 items)."""
    import gc
    import tracemalloc

    named, _ = llama_json
    compiled = Compiler(named.vocab).json_schema({"type": "array", "items": {"type": "integer"}})

    def per_token(n: int) -> float:
        tokens = named.encode(json.dumps(list(range(n))))
        gc.collect()
        tracemalloc.start()
        try:
            matcher = Matcher(compiled)
            assert all(matcher.accept_token(t) for t in tokens) and matcher.is_accepting()
            gc.collect()
            held = tracemalloc.get_traced_memory()[0]
        finally:
            tracemalloc.stop()
        return held / len(tokens)

    short, long = per_token(500), per_token(4000)
    assert long < 2 * short, (short, long)


def _cyclic_garbage(named, documents) -> list[str]:
    """The types of what a collection finds unreachable after compiling and serving ``documents``
    (schema, instances) with the collector off and dropping everything: reference cycles, which a
    collection would have to find (pausing some later mask)."""
    import gc

    from banister.errors import BanisterError
    from banister.mask.kernels import warm_up

    bitmask = allocate_token_bitmask(1, named.vocab.vocab_size)
    warm_up()  # loading the kernels' machine code leaves numba's ctypes types behind: process start-up
    was_enabled = gc.isenabled()
    gc.disable()
    gc.collect()
    try:
        for schema, instances in documents:
            try:
                compiled = Compiler(named.vocab, cache_size=0).json_schema(schema)
            except BanisterError:
                continue
            for doc in instances:
                matcher = Matcher(compiled)
                for token in named.encode(json.dumps(doc, ensure_ascii=False)):
                    matcher.fill_next_token_bitmask(bitmask)
                    if not matcher.accept_token(token):
                        break
            compiled = matcher = None
        gc.set_debug(gc.DEBUG_SAVEALL)
        gc.collect()
        return sorted({getattr(o, "__qualname__", type(o).__qualname__) for o in gc.garbage})
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
        gc.collect()
        if was_enabled:
            gc.enable()


def test_a_dropped_grammar_is_freed_without_the_garbage_collector(llama_json):
    """Compiling, serving requests and dropping the grammar leave no reference cycle: parse states refer
    only to the states before them (the scans from a state are memoised by the parser), and the
    compiler's recursive helpers are plain functions or methods, not closures (nor, where mypyc
    compiles, nested functions that call each other)."""
    named, _ = llama_json
    schema = {"type": "object", "properties": {"name": {"type": "string", "pattern": "^[a-zé]{0,3}(ж|ab)?$"}, "tags": {"type": "array", "items": {
        "anyOf": [{"type": "integer"}, {"enum": ["x", "y"]}]}}}, "required": ["name"]}
    documents = [(schema, [{"name": "a", "tags": [1, "x", 22]}, {"name": "béж"}, {"name": "", "tags": []}])]
    assert _cyclic_garbage(named, documents) == []


@pytest.mark.skipif(not MASKBENCH_DEV.exists(), reason="MaskBench data not found")
def test_maskbench_schemas_leave_no_reference_cycles(gpt2):
    """The same over a sample of real schemas and their instances (enums, arrays, objects with
    dependencies: each front-end path that once left a cycle per compile)."""
    with gzip.open(MASKBENCH_DEV, "rt") as fh:
        records = random.Random(3).sample([json.loads(line) for line in fh], 80)
    assert _cyclic_garbage(gpt2, [(r["schema"], [t["data"] for t in r["tests"]]) for r in records]) == []


def _served_and_collected(named, compiled):
    """``compiled`` after one document was served (making parse states and lexer contexts) and
    collections have looked at everything: two, because a collection untracks a tuple of tuples only if
    it met the inner ones first (which depends on what ran before), and the next one then does."""
    import gc

    matcher = Matcher(compiled)
    bitmask = allocate_token_bitmask(1, named.vocab.vocab_size)
    for token in named.encode(json.dumps({"a": [1, {"b": None}], "c": "d"})):
        matcher.fill_next_token_bitmask(bitmask)
        assert matcher.accept_token(token)
    gc.collect()
    gc.collect()
    return compiled


def test_parse_states_hold_little_for_the_garbage_collector(llama_json):
    """A server's cached grammars keep their parse states for as long as they live, and every full
    collection scans what is tracked: a state's item tables (tuples of ints) and the lexemes it expects
    (one shared copy per set) leave nothing more to scan once a collection has looked at them."""
    import gc

    compiled = _served_and_collected(*llama_json)
    parser = compiled.automaton.parser
    states = [state for scans in parser.scans.values() for state in scans.values() if state is not None]
    assert len(states) > 20
    assert not any(gc.is_tracked(s._waiting) or gc.is_tracked(s._by_lexeme) for s in states)
    expected = {id(s.expected) for s in states}
    assert len(expected) == len({s.expected for s in states})


def test_lexer_contexts_hold_little_for_the_garbage_collector(llama_json):
    """The process-wide cache keeps tens of thousands of lexer contexts: once a collection has looked
    at one, what is left for every later collection to scan is the context and its accept sets, not
    an attribute dict, a lock, or a list per embedded lexeme or accept set."""
    import gc

    compiled = _served_and_collected(*llama_json)
    contexts = list(compiled.automaton._contexts.values())
    assert len(contexts) > 5 and any(ctx.accept_patterns for ctx in contexts)
    for ctx in contexts:
        assert not hasattr(ctx, "__dict__")
        held = [ctx._blocks, ctx._small, ctx.accept_patterns, *ctx.accept_patterns]
        assert not any(gc.is_tracked(x) for x in held)
        assert not any(isinstance(x, type(threading.RLock())) for x in gc.get_referents(ctx))
