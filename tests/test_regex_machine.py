"""banister's ``(?@...)`` regex construct (an automaton whose edges read regexes), against Python's `re`.

The oracle splits a text into pieces along a path of the automaton, each piece matched whole by its
edge's label with ``re.fullmatch``; the JSON Schema test compares the automaton lexeme with the rules it
replaces and with the `jsonschema` package.
"""

from __future__ import annotations

import json
import re
from functools import cache

import jsonschema
from hypothesis import given, settings
from hypothesis import strategies as st
from test_json_schema_helpers import matches

from banister.grammar.json_build import SchemaSettings
from banister.grammar.json_schema import json_schema_to_grammar
from banister.regex import compile_regex

LABELS = ["a", "b|c", "[0-9]+", "é", "ab?", "(?:xy)*", "[^a]"]
MACHINES = st.integers(1, 4).flatmap(
    lambda n: st.tuples(
        st.just(n),
        st.lists(st.integers(0, n - 1), max_size=n, unique=True),
        st.lists(st.tuples(st.integers(0, n - 1), st.sampled_from(LABELS), st.integers(0, n - 1)), max_size=8),
    )
)


def _oracle(n: int, accepting: list[int], edges: list[tuple[int, str, int]], text: str) -> bool:
    @cache
    def ok(pos: int, state: int, steps: int) -> bool:
        if pos == len(text) and state in accepting:
            return True
        if steps > 2 * len(text) + n:  # labels matching the empty text can't loop forever
            return False
        return any(
            re.fullmatch(label, text[pos:end]) and ok(end, target, steps + 1)
            for source, label, target in edges
            if source == state
            for end in range(pos, len(text) + 1)
        )

    return ok(0, 0, 0)


def _machine(accepting: list[int], edges: list[tuple[int, str, int]]) -> str:
    return "(?@" + json.dumps([0, accepting, [list(e) for e in edges]]) + ")"


@settings(max_examples=60, deadline=None)
@given(machine=MACHINES, texts=st.lists(st.text("abcé0xy", max_size=6), min_size=20, max_size=20))
def test_membership_matches_re(machine, texts):
    n, accepting, edges = machine
    dfa = compile_regex("<" + _machine(accepting, edges) + ">")
    for text in texts:
        assert dfa.matches(("<" + text + ">").encode()) is _oracle(n, accepting, edges, text), text


KEYS = st.text(st.sampled_from(list("tracedbugrn5é\"\\") + ["x", " "]), max_size=9)
SCHEMA = {
    "type": "object",
    "patternProperties": {"(trace|debug5|debug|error)": {"type": "integer"}},
    "additionalProperties": False,
}


@settings(max_examples=40, deadline=None)
@given(keys=st.lists(KEYS, min_size=1, max_size=3, unique=True), value=st.sampled_from([1, "s"]))
def test_key_automaton_lexeme_agrees_with_rules_and_jsonschema(keys, value):
    """An unanchored patternProperties alternation has no short regex over JSON text: its key language
    becomes one (?@...) lexeme (by default) or one rule per automaton state (with the limit at 0)."""
    as_lexeme = json_schema_to_grammar(SCHEMA)
    as_rules = json_schema_to_grammar(SCHEMA, settings=SchemaSettings(max_automaton_lexeme_states=0))
    assert any(lex.pattern.startswith('"(?@') for lex in as_lexeme.lexemes)
    assert not any("(?@" in lex.pattern for lex in as_rules.lexemes)
    instance = {k: value for k in keys}
    text = json.dumps(instance)
    valid = jsonschema.Draft202012Validator(SCHEMA).is_valid(instance)
    assert matches(as_lexeme, text) is valid, text
    assert matches(as_rules, text) is valid, text


def test_key_automaton_lexeme_through_the_matcher():
    from banister import Compiler, Matcher, Vocabulary

    vocab = Vocabulary([bytes([b]) for b in range(256)] + [b"</s>"], eos_token_ids=[256])
    compiled = Compiler(vocab).json_schema(SCHEMA)
    for instance in [{"xtracex": 1, "debug": 2}, {"error": 3}, {}, {"trac": 1}, {"debug": "s"}, {"a\"trace": 1}]:
        m = Matcher(compiled)
        text = json.dumps(instance)
        ok = m.accept_string(text) and m.is_accepting()
        assert ok is jsonschema.Draft202012Validator(SCHEMA).is_valid(instance), text
