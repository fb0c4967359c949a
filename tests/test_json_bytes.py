"""``json_bytes.text_dfa`` against the regex compiler: the byte DFA it builds from a code-point DFA
accepts exactly the texts of ``json_char``'s regex for the same DFA (every escape, surrogate pairs,
raw UTF-8), and every state but the dead one can still reach acceptance."""

from __future__ import annotations

import random

import pytest

from banister.grammar import json_automata
from banister.grammar.json_bytes import text_dfa
from banister.grammar.json_text import json_char
from banister.regex import DEAD, compile_regex

PATTERNS = [
    "^a$", "^[a-z]+$", "abc", "^$", ".", "^[^a]*$", "^[\\x00-\\x1f\"\\\\/]{1,3}$", "^\\u007f\\u0080\\u07ff\\u0800$",
    "^[\\ud7ff\\ue000\\uffff]+$", "^[😀-😂]{1,2}$", "^(?:\\u{10000}|\\u{10FFFF}|\\u{103FF}|\\u{10400})$",
    "^[\\u{1F000}-\\u{1F0FF}a]*b$", "(x|yy)+z", "^[^\\u0000-\\uffff]$", "^[é日本]{2}$", "^\\d{2,3}-[A-F]+$",
]


def _same_language(built, regex) -> None:
    """Both DFAs walked side by side from their starts over every byte: acceptance agrees everywhere."""
    seen = {(built.start, regex.start)}
    todo = list(seen)
    while todo:
        a, b = todo.pop()
        assert bool(built.accepting[a]) == regex.is_accepting(b), (a, b)
        for byte in range(256):
            pair = (int(built.transitions[a, byte]), regex.step(b, byte))
            assert (pair[0] == DEAD) == (pair[1] == DEAD), (a, b, byte)
            if pair not in seen:
                seen.add(pair)
                todo.append(pair)


def _live(built) -> None:
    """Every state but the dead one reaches acceptance."""
    n = built.n_states
    back: list[set[int]] = [set() for _ in range(n)]
    for s in range(1, n):
        for t in set(built.transitions[s].tolist()) - {DEAD}:
            back[t].add(s)
    alive = {s for s in range(1, n) if built.accepting[s]}
    todo = list(alive)
    while todo:
        for s in back[todo.pop()] - alive:
            alive.add(s)
            todo.append(s)
    reachable = {built.start}
    todo = [built.start]
    while todo:
        for t in set(built.transitions[todo.pop()].tolist()) - {DEAD} - reachable:
            reachable.add(t)
            todo.append(t)
    assert reachable - {DEAD} <= alive


@pytest.mark.parametrize("quoted", [True, False])
@pytest.mark.parametrize("pattern", PATTERNS)
def test_text_dfa_accepts_what_the_json_char_regex_accepts(pattern, quoted):
    dfa = json_automata.minimize(json_automata.from_pattern(pattern))
    built = text_dfa(dfa, quoted=quoted, max_states=100_000)
    regex = json_automata.to_regex(dfa, json_char, max_length=10**7)
    assert regex is not None
    _same_language(built, compile_regex('"' + regex + '"' if quoted else regex, max_states=100_000))
    _live(built)


@pytest.mark.parametrize("seed", range(12))
def test_text_dfa_on_random_automata(seed):
    """Random code-point DFAs over ranges that straddle every boundary of the escaping policy."""
    rng = random.Random(seed)
    points = [0, 0x08, 0x0A, 0x1F, 0x20, 0x22, 0x2F, 0x41, 0x5C, 0x7E, 0x7F, 0x80, 0x7FF, 0x800, 0xD7FF,
              0xE000, 0xFFFF, 0x10000, 0x103FF, 0x10400, 0x10FFFF]
    n = rng.randint(1, 5)
    edges = []
    for _ in range(n):
        cuts = sorted(rng.sample(points, rng.randint(2, 8)))
        row = [(lo, hi, rng.randrange(n)) for lo, hi in zip(cuts[::2], cuts[1::2]) if rng.random() < 0.8]
        edges.append(sorted(row))
    accepting = [rng.random() < 0.5 for _ in range(n)]
    dfa = json_automata.trim(json_automata.CharDFA(edges, accepting))
    if json_automata.is_empty(dfa):
        assert text_dfa(dfa, quoted=True, max_states=1000).start == DEAD
        return
    built = text_dfa(dfa, quoted=True, max_states=100_000)
    regex = json_automata.to_regex(dfa, json_char, max_length=10**7)
    _same_language(built, compile_regex('"' + regex + '"', max_states=100_000))
    _live(built)


def test_text_dfa_past_max_states_raises():
    from banister.errors import LimitError

    with pytest.raises(LimitError):
        text_dfa(json_automata.from_pattern("^[😀-😂é]{1,40}$"), quoted=True, max_states=50)


@pytest.mark.parametrize("max_regex_length", [20_000, 10])
def test_strings_built_from_automata_through_real_masks(gpt2, max_regex_length):
    """A key region and a product of string constraints, whose bytes the automaton takes from
    ``text_dfa`` (a short ``max_regex_length`` makes them ``(?@...)`` automaton lexemes): a document is
    accepted token by token, EOS included, exactly when ``jsonschema`` finds it valid."""
    import json

    import jsonschema

    from banister.compiler import Compiler
    from banister.grammar.json_build import SchemaSettings
    from banister.mask.bitmask import allocate_token_bitmask, unpack_bitmask
    from banister.matcher import Matcher

    schema = {
        "type": "object",
        "patternProperties": {"^x-": {"type": "integer"}},
        "propertyNames": {"maxLength": 6},
        "additionalProperties": {"type": "string", "pattern": "^[a-cé]+$", "not": {"pattern": "bb"}},
    }
    compiled = Compiler(gpt2.vocab, cache_size=0).json_schema(
        schema, key_order="any", settings=SchemaSettings(max_regex_length=max_regex_length))
    machines = [p for p in compiled.automaton._patterns if p.startswith("\"(?@")]
    assert bool(machines) is (max_regex_length == 10)
    from banister.parser.lexer import _builders

    assert all(pattern in _builders for pattern in machines)  # built from the DFA, not the regex
    validator = jsonschema.Draft202012Validator(schema)
    eos, size = gpt2.vocab.eos_token_ids[0], gpt2.vocab.vocab_size
    bitmask = allocate_token_bitmask(1, size)
    rng = random.Random(max_regex_length)
    seen = set()
    for _ in range(60):
        value = {rng.choice(["x-1", "x-", "ab", "abcdefg", "é", "x-long"]): rng.choice([1, "ab", "abb", "cé", ""])
                 for _ in range(rng.randint(0, 2))}
        matcher, ok = Matcher(compiled), True
        for token in gpt2.encode(json.dumps(value, ensure_ascii=rng.random() < 0.5)):
            matcher.fill_next_token_bitmask(bitmask)
            if not unpack_bitmask(bitmask, size)[0][token]:
                ok = False
                break
            assert matcher.accept_token(token)
        if ok:
            matcher.fill_next_token_bitmask(bitmask)
            ok = bool(unpack_bitmask(bitmask, size)[0][eos])
        seen.add(ok)
        assert ok is validator.is_valid(value), value
    assert seen == {True, False}
