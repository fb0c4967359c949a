"""The fast paths of the lexer and recogniser agree with the slow general ones.

Literal lexemes get their DFA straight from their bytes, contexts of several lexemes are products
built over the live components only, and masks are assembled from sparse token sets: each is checked
here against the regex compiler, a naive product, and the dense mask.
"""

from __future__ import annotations

import random

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from banister.errors import GrammarError, LimitError
from banister.grammar.ir import Grammar, Lexeme, Ref
from banister.grammar.json_text import escape_text, json_keys_except, json_strings
from banister.parser.earley import EarleyTables
from banister.parser.lexer import LexemeDFA, LexerContext, _literal_bytes, finite_language, lexeme_language
from banister.regex import DEAD, compile_regex

TEXTS = ["name", "a-b/c", "x\ny", "\x00\x7f\x80", "é😀", "\\", "{}[]()", "a,b:c", "#&~<>=!@%`'\"", " \t", "",
         "a key too long for a uint8 table, " * 8]


@pytest.mark.parametrize("text", TEXTS)
def test_literal_lexemes_match_exactly_their_text(text: str) -> None:
    pattern = escape_text(text)
    data = _literal_bytes(pattern)
    assert data == text.encode("utf-8")
    fast = LexemeDFA.literal(data)
    slow = compile_regex(pattern)
    state, fast_state = slow.start, fast.start
    for i in range(len(data) + 1):
        for b in range(256):
            assert (slow.step(state, b) == DEAD) == (fast.transitions[fast_state, b] == DEAD), (i, b)
        assert slow.is_accepting(state) == fast.is_accepting(fast_state)
        if i < len(data):
            state, fast_state = slow.step(state, data[i]), int(fast.transitions[fast_state, data[i]])


@pytest.mark.parametrize("pattern", ["a|b", "a*", "[a]", r"\d", "(?:a)", ".", "a{2}", r"\w", "^a", "a$", "a+"])
def test_non_literal_patterns_take_the_regex_compiler(pattern: str) -> None:
    assert _literal_bytes(pattern) is None


def test_braced_unicode_escapes_are_literals() -> None:
    assert _literal_bytes(r"\u{41}\u{1F600}") == "A😀".encode()
    assert _literal_bytes(r"\u{D800}") is None  # a lone surrogate is the regex compiler's error


def _accepted(transitions: np.ndarray, accepting: np.ndarray, start: int, limit: int = 5000) -> set[bytes] | None:
    """Every text a DFA accepts, or None when it accepts more than ``limit`` (or infinitely many)."""
    out: set[bytes] = set()
    stack = [(start, b"")]
    while stack:
        state, text = stack.pop()
        if state == DEAD:
            continue
        if accepting[state]:
            out.add(text)
        if len(out) > limit or len(text) > 200:
            return None
        stack.extend((int(t), text + bytes((b,))) for b, t in enumerate(transitions[state]) if t != DEAD)
    return out


FINITE = [
    json_strings(["configerror", "initialized", "running", "running_canceled", "stopped", "stopping"]),
    json_strings(["a/b", "é", "x\ny", "😀", 'say "hi"', ""]),
    "null|true|false", "[0-9]{2}", "a{0,3}b?", "(?:)", "-?(?:0|1|2)(?:\\.5)?", "[é-ë]x|y", "(?:ab|a)(?:c|bc)",
]


@pytest.mark.parametrize("pattern", FINITE)
def test_finite_patterns_list_what_the_regex_compiler_accepts(pattern: str) -> None:
    """A finite pattern's texts are listed from its parse, not compiled; the regex compiler's DFA (fully
    expanded and enumerated) is the oracle, for the list and for the trie DFA built from it."""
    texts = finite_language(pattern)
    assert texts is not None
    slow = compile_regex(pattern)
    slow.expand_from(slow.start)
    expected = _accepted(slow.transitions, slow.accepting, slow.start)
    assert set(texts) == expected
    fast = LexemeDFA.strings(texts)
    assert _accepted(fast.transitions, fast.accepting, fast.start) == expected
    assert lexeme_language(pattern, 1000) == (not expected, b"" in expected)


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet=st.sampled_from(list("azAZ09_ -.$/\\\"~#é\n\x7f\u2028😀")), max_size=8))
def test_one_string_is_written_as_each_of_its_json_spellings(text: str) -> None:
    """A property name's regex (written as it is when each character stands for itself, else character
    by character) matches the name however ``json.dumps`` spells it, and no name one character longer,
    shorter or different."""
    import json

    dfa = compile_regex(json_strings([text]))  # type: ignore[arg-type]
    for spelled in (json.dumps(text, ensure_ascii=False), json.dumps(text)):
        assert dfa.matches(spelled.encode("utf-8")), spelled
    others = [text + "a", text[:-1]] if text else ["a"]
    others += [text[:i] + "q" + text[i + 1 :] for i in range(len(text))]  # one character changed
    for other in others:
        assert not dfa.matches(json.dumps(other).encode("utf-8")), other


@settings(max_examples=40, deadline=None)
@given(st.lists(st.text(alphabet='ab/"é\\ ~\x7f', max_size=5), min_size=1, max_size=6))
def test_an_enum_hands_its_texts_to_the_lexer(values: list[str]) -> None:
    """The JSON front end writes an enum of plain strings as a regex and hands the lexer its texts, so
    no check parses the regex back into them: they must be exactly the regex's language (the regex
    compiler's DFA, enumerated, is the oracle). Other strings have several spellings: not handed over."""
    from banister.grammar.json_schema import json_schema_to_grammar
    from banister.grammar.json_text import plain_names
    from banister.parser import lexer

    grammar = json_schema_to_grammar({"enum": values})
    (pattern,) = [lex.pattern for lex in grammar.lexemes if lex.pattern.startswith('"')]
    assert (pattern in lexer._offered_texts) is plain_names(values)
    slow = compile_regex(pattern)
    slow.expand_from(slow.start)
    assert set(finite_language(pattern)) == _accepted(slow.transitions, slow.accepting, slow.start)


@pytest.mark.parametrize("pattern", ["a*", "[^a]", "a+b", "(?:a|b){0,20}", "^a", "a$", "[0-9]{5}", "\\d+", "a(?~b)"])
def test_infinite_or_big_patterns_are_not_listed(pattern: str) -> None:
    assert finite_language(pattern) is None


def test_an_empty_finite_language_starts_dead() -> None:
    assert LexemeDFA.strings(()).start == DEAD


def _sample(pattern: str, rng: random.Random) -> bytes:
    """A random member of ``pattern``, or a prefix of one with a stray byte (to test dead ends)."""
    dfa = compile_regex(pattern)
    state, out = dfa.start, bytearray()
    while len(out) < 20:
        live = [b for b in range(256) if dfa.step(state, b) != DEAD]
        if not live or (dfa.is_accepting(state) and rng.random() < 0.3):
            break
        ascii_live = [b for b in live if b < 0x80]
        b = rng.choice(ascii_live if ascii_live and rng.random() < 0.9 else live)
        out.append(b)
        state = dfa.step(state, b)
    if rng.random() < 0.3:
        out.insert(rng.randrange(len(out) + 1), rng.randrange(256))
    return bytes(out)


PATTERN_SETS = [
    [json_strings(["name"]), json_strings(["names"]), json_keys_except(["name", "names"])],
    [json_strings(["a", "b", "ab"]), json_keys_except(["a", "b", "ab"]), r"[ \t]+"],
    [r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?", "null|true|false", r"\{[ ]{0,3}", r"\[[ ]{0,3}\]", r"\["],
    [escape_text(w) for w in ["if", "in", "int", "i"]] + [r"[a-z]+"],
]


@pytest.mark.parametrize("patterns", PATTERN_SETS)
def test_product_context_agrees_with_its_lexemes(patterns: list[str]) -> None:
    ctx = LexerContext(frozenset(patterns), max_states=10_000)
    dfas = [compile_regex(p) for p in ctx.patterns]
    rng = random.Random(7)
    for _ in range(300):
        text = _sample(rng.choice(ctx.patterns), rng)
        state = ctx.start
        comps = [d.start for d in dfas]
        for b in text:
            state = ctx.step(state, b)
            comps = [d.step(s, b) if s != DEAD else DEAD for d, s in zip(dfas, comps)]
            assert (state == DEAD) == all(s == DEAD for s in comps), text
            if state == DEAD:
                break
            accepted = frozenset(i for i, (d, s) in enumerate(zip(dfas, comps)) if s != DEAD and d.is_accepting(s))
            aid = int(ctx.accept_id[state])
            assert (ctx.accept_sets[aid] if aid >= 0 else frozenset()) == accepted, text
            assert [i for i, _ in ctx.live(state)] == [i for i, s in enumerate(comps) if s != DEAD], text


def test_unproductive_start_is_refused() -> None:
    grammar = Grammar({"s": ((Ref("t"),),), "t": ((Ref("t"), Lexeme("a")),)}, "s")
    with pytest.raises(GrammarError, match="derives no text"):
        EarleyTables(grammar)


def test_filled_rows_equal_the_dense_masks() -> None:
    from banister.compiler import Compiler
    from banister.matcher import Matcher
    from banister.vocab import Vocabulary

    tokens = [bytes([b]) for b in range(256)] + [b'{"', b'":', b'"}', b"name", b'{"name": "', b'"x"}', b"  "]
    vocab = Vocabulary(tokens, eos_token_ids=[len(tokens)], vocab_size=len(tokens) + 1)
    compiled = Compiler(vocab).json_schema({"type": "object", "properties": {"name": {"type": "string"}}})
    automaton = compiled.automaton
    matcher = Matcher(compiled)
    for piece in [b'{"', b"name", b'":', b" ", b'"', b"x", b'"}']:
        row = np.zeros(len(automaton.token_mask(matcher.state)) + 2, dtype=np.uint32)
        accepting = automaton.fill_mask(matcher.state, row)
        assert np.array_equal(row[:-2], automaton.token_mask(matcher.state))
        assert not row[-2:].any()
        assert accepting == automaton.is_accepting(matcher.state)
        assert matcher.accept_string(piece)


def test_context_cache_is_bounded_by_bytes(monkeypatch):
    """The process-wide cache of contexts drops the least recently used ones past its byte budget; a
    dropped context is rebuilt equal."""
    from banister.parser import lexer

    sets = [frozenset({f'"key{i}-{j}"' for j in range(3)}) for i in range(40)]
    budget = 10 * lexer.LexerContext(sets[0], max_states=10_000).table_bytes()  # room for about ten
    monkeypatch.setattr(lexer, "CONTEXT_CACHE_BYTES", budget)
    first = lexer.lexer_context(sets[0], 10_000)
    for patterns in sets:
        ctx = lexer.lexer_context(patterns, 10_000)
        assert lexer.lexer_context(patterns, 10_000) is ctx  # a hit while cached
    assert lexer._context_cache_bytes <= budget
    assert sum(c.table_bytes() for c in lexer._context_cache.values()) == lexer._context_cache_bytes
    again = lexer.lexer_context(sets[0], 10_000)  # dropped long ago: built anew, the same automaton
    assert again is not first and again.patterns == first.patterns
    for text in sorted(sets[0]):
        a, b = first.start, again.start
        for byte in text.encode():
            a, b = first.step(a, byte), again.step(b, byte)
            assert first.live(a) == again.live(b)


def test_a_context_table_widens_as_its_states_outgrow_a_byte():
    """A context's table starts as uint8 and is int32 once it numbers more than 256 states; stepping
    it is still stepping its lexemes' own DFAs side by side."""
    from banister.parser.lexer import lexeme_dfa

    ctx = LexerContext(frozenset({"[a-z]{0,400}", "a[a-z]{0,399}b"}), max_states=10_000)
    assert ctx._table.dtype == np.uint8
    dfas = [lexeme_dfa(p, 10_000) for p in ctx.patterns]
    state, alone = ctx.start, [d.start for d in dfas]
    for byte in b"a" * 390 + b"b":
        state = ctx.step(state, byte)
        alone = [int(d.transitions[s, byte]) if s else 0 for d, s in zip(dfas, alone)]
        assert dict(ctx.live(state)) == {j: s for j, s in enumerate(alone) if s}
    assert ctx._table.dtype == np.int32 and state > 256


PLAIN_NAMES = ["a", "ab", "abc", "b", "loc", "location", "x y", "", "name_1", "Zz~"]
KEY_PIECES = ["a", "b", "c", "l", "o", "x", " ", "y", "\\u00e9", "é", '\\"', "\\/", "/", "\\n", "\\u0061", "\\",
              "\x01", "Z", "~", "_", "1", "n", "😀"]


@pytest.mark.parametrize("seed", range(12))
def test_key_exclusion_dfa_matches_its_regex(seed):
    """The JSON front end builds the DFA of "any key but these plain names" straight from their trie;
    the regex it offers the builder for (json_keys_except) is the definition, compiled here."""
    from banister.grammar.json_build import _keys_except_dfa
    from banister.grammar.json_text import ANY_CHAR, plain_names

    rng = random.Random(seed)
    names = tuple(rng.sample(PLAIN_NAMES, rng.randint(1, 5)))
    assert plain_names(names)
    fast = _keys_except_dfa(names, '"' + ANY_CHAR + '*"', 10_000)
    regex = compile_regex(json_keys_except(names))
    for _ in range(1500):
        base = rng.choice(names)
        body = base if rng.random() < 0.3 else base[: rng.randint(0, len(base))] + "".join(
            rng.choice(KEY_PIECES) for _ in range(rng.randint(0, 3)))
        text = ('"' + body + '"' + ('"' if rng.random() < 0.05 else "")).encode()
        state = fast.start
        for b in text:
            state = int(fast.transitions[state, b])
            if not state:
                break
        assert bool(state and fast.accepting[state]) is regex.matches(text), (names, text)


def test_front_end_offers_the_key_exclusion_builder():
    from banister.grammar.json_build import _keys_except_dfa
    from banister.grammar.json_schema import json_schema_to_grammar
    from banister.grammar.json_text import ANY_CHAR, plain_names
    from banister.parser.lexer import _builders, lexeme_dfa

    names = ["first_name", "last_name", "age"]
    grammar = json_schema_to_grammar({"type": "object", "properties": {n: {"type": "integer"} for n in names}})
    pattern = json_keys_except(names)
    assert Lexeme(pattern) in grammar.lexemes and pattern in _builders
    assert plain_names(names) and not plain_names(["a/b"]) and not plain_names(["é"])
    direct = _keys_except_dfa(tuple(names), '"' + ANY_CHAR + '*"', 10_000)
    assert np.array_equal(lexeme_dfa(pattern, 10_000).transitions, direct.transitions)  # the builder's, not the regex's
    assert direct.n_states <= _builders[pattern][1]  # the offer's bound holds


def test_a_key_exclusion_walks_its_string_states_as_the_string_lexeme(gpt2):
    """The key-exclusion DFA is grafted onto the string's: those states keep their numbers and rows,
    so their walks are the string lexeme's, made once for every object schema (a new set of names
    used to walk the open string's whole trie again at its first key)."""
    from banister.automaton import _WHOLE_TRIE
    from banister.grammar.json_build import _keys_except_dfa
    from banister.grammar.json_text import ANY_CHAR
    from banister.parser.lexer import lexeme_dfa
    from banister.parser.recognizer import GrammarAutomaton

    string = '"' + ANY_CHAR + '*"'
    keys = _keys_except_dfa(("alpha", "beta"), string, 10_000)
    plain, count = keys.shares
    assert plain is lexeme_dfa(string, 10_000) and count == plain.n_states
    assert np.array_equal(keys.transitions[:count], plain.transitions)
    assert np.array_equal(keys.accepting[:count], plain.accepting)
    from banister.grammar.json_schema import json_schema_to_grammar

    grammar = json_schema_to_grammar({"type": "object", "properties": {"alpha": {}, "beta": {}}})
    pattern = json_keys_except(["alpha", "beta"])  # the front end offered its builder
    assert Lexeme(pattern) in grammar.lexemes and lexeme_dfa(pattern, 10_000).shares == (plain, count)
    automaton = GrammarAutomaton(grammar, gpt2.vocab)
    inside = int(plain.transitions[plain.start, ord('"')])
    grafted = automaton._lexeme_walk(lexeme_dfa(pattern, 10_000), inside, _WHOLE_TRIE, b"")
    own = automaton._lexeme_walk(plain, inside, _WHOLE_TRIE, b"")
    # The same cached walk (its parts: compiled code returns the pair as a new tuple each time).
    assert grafted[0] is own[0] and grafted[1] is own[1]


def test_walks_are_kept_by_the_dfa_walked_not_its_pattern(gpt2):
    """A lexeme whose DFA leaves the bounded caches may be built again another way (its offered builder
    gone, the regex compiler instead): the same language with its states numbered otherwise, while
    contexts built with the first DFA live on. Walks are cached by the DFA walked (``serial``), so each
    numbering gets its own: a maxLength-25 string's counted DFA and its compiled regex both have 804
    states, numbered differently (a walk cached by pattern and state rejected "123 Main St" on
    MaskBench's dev split once such a lexeme's offer was gone)."""
    from banister.automaton import _WHOLE_TRIE
    from banister.grammar.json_build import _repeat, _run_dfa
    from banister.grammar.json_text import ANY_CHAR
    from banister.parser.recognizer import GrammarAutomaton

    vocab = gpt2.vocab
    pattern = '"' + _repeat(ANY_CHAR, 0, 25) + '"'
    counted = _run_dfa(0, 25, b'"', b'"', ANY_CHAR, 10_000)
    regex = compile_regex(pattern, max_states=10_000)
    state = 1
    while state < regex.n_states:  # every row, as lexeme_dfa completes a compiled regex
        regex.step(state, 0)
        state += 1
    compiled = LexemeDFA.from_regex(regex)
    assert counted.n_states == compiled.n_states and not np.array_equal(counted.transitions, compiled.transitions)
    automaton = GrammarAutomaton(Grammar({"s": ((Lexeme(pattern),),)}, "s"), vocab)
    differing = [q for q in range(1, compiled.n_states)
                 if not np.array_equal(counted.transitions[q], compiled.transitions[q])]
    for dfa in (counted, compiled):  # both numberings walked, the counted one first, through one cache
        for state in differing[:40]:
            _assert_whole_walk(automaton, dfa, state, automaton._lexeme_walk(dfa, state, _WHOLE_TRIE, b""))


def test_a_grammar_builds_offered_and_finite_lexemes_only_when_a_mask_needs_them(gpt2):
    from banister.compiler import CompiledGrammar
    from banister.grammar.json_schema import json_schema_to_grammar
    from banister.matcher import Matcher
    from banister.parser import lexer
    from banister.parser.recognizer import GrammarAutomaton

    names = [f"offered_{i}" for i in range(5)]
    inner = {"type": "object", "properties": {n: {"enum": ["red", "green", f"blue_{i}"]} for i, n in enumerate(names)}}
    schema = {"type": "object", "properties": {"inner": inner}}  # the first mask reads into the root's keys only
    grammar = json_schema_to_grammar(schema)
    keys = json_keys_except(names)
    enum = next(lex.pattern for lex in grammar.lexemes if "blue_0" in lex.pattern)
    assert keys in lexer._builders and lexer.finite_language(enum) is not None
    automaton = GrammarAutomaton(grammar, gpt2.vocab)
    assert not lexer.lexeme_is_empty(keys, 10_000) and not lexer.lexeme_is_empty(enum, 10_000)

    def built_before(pattern: str, max_states: int) -> bool:
        misses = lexer.lexeme_dfa.cache_info().misses
        lexer.lexeme_dfa(pattern, max_states)
        return lexer.lexeme_dfa.cache_info().misses == misses

    assert not built_before(keys, 10_000) and not built_before(enum, 10_000)  # built only on request
    with pytest.raises(LimitError):  # a finite language too big for the limit is built (and so checked) at once
        lexer.lexeme_is_empty(enum, 4)
    matcher = Matcher(CompiledGrammar(automaton, "json_schema", 0.0))
    bitmask = np.zeros((1, (gpt2.vocab.vocab_size + 31) // 32), dtype=np.int32)
    for piece in ['{"', "inner", '": {"', "offered_0", '": "', "blue_0", '", "', "other", '": 1', "}}"]:
        matcher.fill_next_token_bitmask(bitmask)  # builds the DFAs this step's lexemes need
        first = gpt2.encode(piece)[0]
        assert bitmask[0, first >> 5] >> (first & 31) & 1, piece
        assert matcher.accept_string(piece), piece
    assert matcher.is_accepting()
    assert lexer.lexeme_dfa(keys, 10_000).n_states <= lexer._builders[keys][1]


LOOP_PATTERNS = [
    json_keys_except(["name", "names", "location", "loc", "zeta", "a b", "naïve"]),
    json_keys_except([f"field_{i}" for i in range(30)]),
    r'"[^"\\]*(?:cat|dog)[^"\\]*"',
]


@pytest.mark.parametrize("pattern", LOOP_PATTERNS)
def test_walks_derived_from_a_loop_equal_whole_walks(gpt2, pattern: str) -> None:
    """Every lexeme state whose walk is derived from a loop's (first-byte subtrees swapped) gets the
    same tokens and crossings as a plain walk of the whole trie."""
    from banister.parser.lexer import lexeme_dfa
    from banister.parser.recognizer import GrammarAutomaton

    vocab = gpt2.vocab
    automaton = GrammarAutomaton(Grammar({"s": ((Lexeme(pattern),),)}, "s"), vocab)
    dfa = lexeme_dfa(pattern, 10_000)
    derived = 0
    for state in range(1, dfa.n_states):
        got = automaton._walk_from_loop(dfa, state)
        if got is None:
            continue
        derived += 1
        _assert_whole_walk(automaton, dfa, state, got)
    assert derived >= 5


RUNS = [(0, 25, b'"', b'"'), (3, 7, b'"', b'"'), (40, 190, b'"', b'"'), (5, None, b'"', b'"'), (0, None, b'"', b'"'),
        (32, 32, b"", b""), (0, 31, b"", b'"'), (2, None, b"", b"")]
UNITS = {"any": None, "base64": "[0-9a-zA-Z+/=]", "dot": "[^\n\r\u2028\u2029]"}
"""Characters a run counts: any, or a class (as ``^data:...;base64,[0-9a-zA-Z+/=]*$`` or ``.+`` beside
a long ``maxLength``), whose JSON text has escaped forms too (``\\/``, ``\\u00e9``)."""


@pytest.mark.parametrize(("low", "high", "before", "after", "unit"),
                         [(*run, "any") for run in RUNS] + [(0, 40, b'"', b'"', "base64"), (3, None, b"", b'"', "dot"),
                                                            (32, 32, b"", b"", "base64")])
def test_walks_cut_from_a_run_table_equal_whole_walks(gpt2, low, high, before, after, unit) -> None:
    """Every state of a counted run (a JSON string's characters between bounds) where a character
    begins, its walk cut from the vocabulary's table of characters per token, gets the same tokens and
    crossings as a plain walk of the whole trie; the other states are walked."""
    from banister.grammar.json_build import _repeat, _run_dfa
    from banister.grammar.json_text import ANY_CHAR, json_char
    from banister.parser.recognizer import GrammarAutomaton
    from banister.regex import parse_regex

    unit = ANY_CHAR if UNITS[unit] is None else json_char(parse_regex(UNITS[unit]).ranges)
    pattern = before.decode() + _repeat(unit, low, high) + after.decode()
    automaton = GrammarAutomaton(Grammar({"s": ((Lexeme(pattern),),)}, "s"), gpt2.vocab)
    dfa = _run_dfa(low, high, before, after, unit, 10_000)
    cuts = {state: automaton._walk_from_run(dfa, state) for state in range(1, dfa.n_states)}
    cuts = {state: got for state, got in cuts.items() if got is not None}
    assert len(cuts) == (high if high is not None else low) + 1  # every layer's start, the top included
    for state, got in cuts.items():
        _assert_whole_walk(automaton, dfa, state, got)


def _assert_whole_walk(automaton, dfa, state: int, got) -> None:
    """``got`` (tokens, crossing nodes) is what a plain walk of the whole trie from ``state`` finds."""
    from banister.automaton import _WHOLE_TRIE, walk_tokens

    tokens, nodes = got
    words = np.zeros_like(automaton.token_mask(automaton.initial))
    want_nodes, _ = walk_tokens(automaton.vocab, dfa.transitions, dfa.accepting, state, _WHOLE_TRIE, words)
    got_words = np.zeros_like(words)
    if tokens is not None:
        index, values = tokens
        got_words[slice(None) if index is None else index] |= values
    assert np.array_equal(got_words, words), state
    assert np.array_equal(nodes, want_nodes), state


def test_nodes_are_told_apart_by_first_byte(gpt2) -> None:
    """A derived walk drops the loop's crossings below the bytes it walks again; the trie's nodes whose
    text starts with none of them, against each node's first byte read off the preorder arrays."""
    from banister.parser.recognizer import _walk_caches

    trie = gpt2.vocab.trie
    first_byte, current = [], -1
    for depth, byte in zip(trie.depth.tolist(), trie.byte.tolist()):
        current = byte if depth == 1 else current
        first_byte.append(current)
    by_first = _walk_caches(gpt2.vocab)[2]
    rng = np.random.default_rng(7)
    for size in [0, 1, 50, 5_000, len(first_byte)]:
        nodes = np.sort(rng.choice(len(first_byte), size, replace=False)).astype(np.int32)
        for count in [1, 3, 64]:
            first = np.unique(rng.integers(0, 256, count))
            want = [i for i in nodes.tolist() if first_byte[i] not in set(first.tolist())]
            assert by_first.not_starting_with(nodes, first).tolist() == want


def test_front_end_regexes_are_handed_over_whole() -> None:
    """A regex the front end compiled to ask about a lexeme is completed by ``lexeme_dfa`` rather than
    compiled again; the DFA is the one a fresh compile gives, and a different state limit compiles anew."""
    from banister.parser import lexer

    pattern = r"[a-c]{2,4}x?|[0-9]+\.[0-9]"
    lexer.lexeme_language.cache_clear()
    lexer.lexeme_dfa.cache_clear()
    assert lexer.lexeme_language(pattern, 1000) == (False, False)
    assert pattern in lexer._front_end_regexes
    handed = lexer.lexeme_dfa(pattern, 10_000)
    assert pattern not in lexer._front_end_regexes
    fresh = lexer.LexemeDFA.from_regex(_completed(compile_regex(pattern, max_states=10_000)))
    assert np.array_equal(handed.transitions, fresh.transitions)
    assert np.array_equal(handed.accepting, fresh.accepting)
    lexer.lexeme_language.cache_clear()
    lexer.lexeme_language(pattern, 1000)
    with pytest.raises(LimitError):
        lexer.lexeme_dfa(pattern, 3)  # the kept regex has the default limit: not used


def _completed(dfa):
    """``dfa`` with every row computed, state by state in order (as ``lexeme_dfa`` does)."""
    state = 1
    while state < dfa.n_states:
        dfa.step(state, 0)
        state += 1
    return dfa


def _same_language(fast: LexemeDFA, pattern: str) -> bool:
    """Whether a table DFA accepts exactly what the regex compiler's DFA of ``pattern`` does (both
    explored together over every byte)."""
    regex = compile_regex(pattern)
    seen = {(fast.start, regex.start)}
    todo = list(seen)
    while todo:
        mine, theirs = todo.pop()
        if bool(fast.accepting[mine]) != (theirs != DEAD and regex.is_accepting(theirs)):
            return False
        for byte in range(256):
            a = int(fast.transitions[mine, byte])
            b = regex.step(theirs, byte) if theirs != DEAD else DEAD
            if (a == DEAD) != (b == DEAD):
                return False
            if a != DEAD and (a, b) not in seen:
                seen.add((a, b))
                todo.append((a, b))
    return True


@settings(max_examples=40, deadline=None)
@given(unit=st.sampled_from(["(?:ab|c)", "[0-9]", "é", "(?:x|yz|\\u{1F600})"]), low=st.integers(0, 4),
       extra=st.one_of(st.none(), st.integers(0, 3)), before=st.sampled_from([b"", b'"', b"<<"]),
       after=st.sampled_from([b"", b'"', b">>"]))
def test_a_counted_run_is_the_regex_of_its_repeat(unit, low, extra, before, after):
    """``LexemeDFA.counted`` lays a unit's DFA out once per count; the regex ``before unit{low,high}
    after`` is its definition."""
    high = None if extra is None else low + extra
    if low == 0 and not (before or after):
        return  # matches the empty string: never a lexeme
    from banister.parser.lexer import lexeme_dfa

    unit_dfa = lexeme_dfa(unit, 10_000)
    dfa = LexemeDFA.counted(unit_dfa, low, high, before, after)
    quant = f"{{{low},}}" if high is None else f"{{{low},{high}}}"
    pattern = escape_text(before.decode()) + f"(?:{unit}){quant}" + escape_text(after.decode())
    assert dfa.n_states == LexemeDFA.counted_states(unit_dfa, low, high, before, after)
    assert _same_language(dfa, pattern), pattern


def test_a_counted_run_refuses_a_unit_that_goes_on_after_accepting():
    from banister.parser.lexer import lexeme_dfa

    with pytest.raises(ValueError):
        LexemeDFA.counted(lexeme_dfa("ab?", 100), 0, 3)
    with pytest.raises(ValueError):
        LexemeDFA.counted(lexeme_dfa("[0-9]", 100), 0, 3, after=b"1")


def test_string_length_runs_are_built_from_the_character_dfa():
    """A string with length bounds is runs of at most ``max_lexeme_repeat`` characters; the front end
    offers each run's layered DFA, which the grammar then uses (not the regex compiler's)."""
    from banister.grammar.json_schema import json_schema_to_grammar
    from banister.grammar.json_text import ANY_CHAR
    from banister.parser.lexer import _builders, lexeme_dfa

    runs = []
    for bounds in ({"maxLength": 3}, {"minLength": 33, "maxLength": 34}):
        grammar = json_schema_to_grammar({"type": "string", **bounds})
        runs += [lex.pattern for lex in grammar.lexemes if ANY_CHAR in lex.pattern]
    # "{0,3}" quoted; then a full run of 32 and a closing run of 1 or 2 characters
    assert len(runs) == 3
    compared = 0
    for pattern in runs:
        assert pattern in _builders
        built = lexeme_dfa(pattern, 10_000)
        assert built.n_states == _builders[pattern][1]
        if built.n_states < 200:  # the run of 32 (1,025 states) takes seconds to explore against the regex
            assert _same_language(built, pattern), pattern
            compared += 1
    assert compared == 2


def test_a_context_state_is_stepped_byte_by_byte_before_it_gets_its_row():
    """Accepted text makes only the successors it reads; a state stepped by more than LAZY_BYTES bytes
    gets its whole row, which agrees with the successors made one at a time."""
    from banister.parser.lexer import LAZY_BYTES

    ctx = LexerContext(frozenset(['"alpha"', '"beta"', '"gamma"', '"[a-z]{1,12}"']), max_states=1000)
    inside = ctx.step(ctx.start, ord('"'))
    made = {b: ctx.step(inside, b) for b in b"abg"}
    assert not ctx._expanded[inside] and ctx._cells_made[inside] == 3
    row = ctx.row(inside)
    assert ctx._expanded[inside] and inside not in ctx._cells_made and all(k >> 8 != inside for k in ctx._cells)
    assert all(int(row[b]) == t for b, t in made.items()) and int(row[ord("0")]) == DEAD
    other = ctx.step(inside, ord("a"))
    for b in range(ord("a"), ord("a") + LAZY_BYTES + 1):
        ctx.step(other, b)
    assert ctx._expanded[other] and other not in ctx._cells_made


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sets(st.integers(0, 400), min_size=1, max_size=60), min_size=2, max_size=8))
def test_few_crossings_are_grouped_as_numpy_groups_many(crossings: list[set[int]]) -> None:
    """A walk's crossings, lexeme ``k`` crossing at ``crossings[k]``: the Python grouping for a few
    nodes and the numpy one for many give every node the same accept set, nodes ascending, groups
    by accept set id."""
    from banister.parser.recognizer import _crossing_groups, _few_crossing_groups

    ctx = LexerContext(frozenset(escape_text(f"k{i}") for i in range(8)), max_states=1_000)
    nodes = [np.array(sorted(found), dtype=np.int32) for found in crossings]
    lexemes = list(range(len(nodes)))
    expected = {node: frozenset(k for k, found in enumerate(crossings) if node in found)
                for node in set().union(*crossings)}
    for grouping in (_few_crossing_groups, _crossing_groups):
        groups = grouping(ctx, nodes, lexemes)
        assert [aid for aid, _, _ in groups] == sorted(aid for aid, _, _ in groups)
        seen = {}
        for aid, found, key in groups:
            assert found.dtype == np.int32 and key == found.tobytes()
            assert found.tolist() == sorted(found.tolist())
            seen.update((node, ctx.accept_sets[aid]) for node in found.tolist())
        assert seen == expected


def test_a_dropped_regex_dfa_is_built_again_when_a_grammar_is_compiled():
    """A lexeme the regex compiler builds is built when a grammar using it is compiled, also when the
    bounded DFA cache dropped it since another grammar asked: no mask pays for the regex compiler."""
    from banister.parser import lexer

    pattern = "[a-c]+x(?:yz)*"  # neither a literal nor a finite language: the regex compiler builds it
    assert not lexer.lexeme_is_empty(pattern, 10_000)
    lexer.lexeme_dfa.cache_clear()  # as if pushed out by 8,192 other patterns
    assert not lexer.lexeme_is_empty(pattern, 10_000)
    misses = lexer.lexeme_dfa.cache_info().misses
    lexer.lexeme_dfa(pattern, 10_000)  # what a mask asks for
    assert lexer.lexeme_dfa.cache_info().misses == misses
