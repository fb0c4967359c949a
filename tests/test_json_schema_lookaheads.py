"""Patterns that start with lookaheads (``^(?!org\\.bukkit\\.)...``): exact, against Python's ``re``
and the ``jsonschema`` package, wherever a pattern is read (``pattern``, ``patternProperties``, ``not``,
enum values); a lookahead anywhere else is still refused, with its position."""

from __future__ import annotations

import itertools
import json
import random
import re

import jsonschema
import pytest
from test_json_schema_helpers import matches

from banister.errors import RegexError, SchemaError
from banister.grammar.json_schema import json_schema_to_grammar
from banister.regex import compile_regex, parse_pattern

ALPHABET = "ab-.@"
TEXTS = ["".join(p) for k in range(6) for p in itertools.product(ALPHABET, repeat=k)]

PATTERNS = [
    "^(?!a)",
    "^(?=a)",
    "^(?!a\\.)[ab.]+$",
    "^(?!@@)[\\w@]+$",
    "^(?=.{2,4}$)(?!.*--)[a-b-]+",
    "^(?!^a|b\\.|-)",
    "^(?=a)(?=.*b)(?!.*\\.$)",
    "^(?!.*(ab|ba)).*b$",
    "(?i)^(?!A)[a-z]*$",
]


def _search(pattern: str, text: str) -> bool:
    """ECMA-262 search semantics (the texts have no newline, before which Python's ``$`` also holds)."""
    assert "\n" not in text
    return re.search(pattern, text) is not None


@pytest.mark.parametrize("pattern", PATTERNS)
def test_a_pattern_with_leading_lookaheads_admits_what_python_finds(pattern):
    bounded = {"type": "string", "pattern": pattern, "minLength": 1, "maxLength": 4}
    for schema, length in (({"type": "string", "pattern": pattern}, range(99)), (bounded, range(1, 5))):
        grammar = json_schema_to_grammar(schema)
        for text in TEXTS:
            expected = _search(pattern, text) and len(text) in length
            assert matches(grammar, json.dumps(text)) is expected, (schema, text)


@pytest.mark.parametrize("pattern", PATTERNS[:5])
def test_the_complement_of_such_a_pattern_admits_the_other_strings(pattern):
    grammar = json_schema_to_grammar({"type": "string", "not": {"pattern": pattern}})
    for text in TEXTS:
        assert matches(grammar, json.dumps(text)) is not _search(pattern, text), text


def test_enum_values_are_kept_by_such_a_pattern_as_python_keeps_them():
    values = ["org.bukkit.Main", "org.example.Main", "Main", "org.bukkit"]
    pattern = "^(?!org\\.bukkit\\.)([a-zA-Z_$][a-zA-Z\\d_$]*\\.)*[a-zA-Z_$][a-zA-Z\\d_$]*$"
    grammar = json_schema_to_grammar({"enum": values, "pattern": pattern})
    for value in values:
        assert matches(grammar, json.dumps(value)) is _search(pattern, value), value


def test_pattern_properties_with_a_lookahead_split_keys_as_jsonschema_does():
    """The shape of a browser extension's messages file: a message per key, except the reserved ``@@``
    keys; with the other keys closed, a reserved key is no key at all."""
    schema = {
        "type": "object",
        "patternProperties": {"^(?!@@)[\\w@]+$": {"type": "integer"}, "^@@": {"type": "boolean"}},
        "additionalProperties": False,
    }
    grammar = json_schema_to_grammar(schema, key_order="any")
    validator = jsonschema.Draft202012Validator(schema)
    rng = random.Random(7)
    names = ["@@ui", "@@", "a@@", "ab", "@a", "a-b", "", "_"]
    for _ in range(300):
        keys = rng.sample(names, rng.randint(0, 3))
        value = {k: rng.choice([1, True, "x"]) for k in keys}
        assert matches(grammar, json.dumps(value)) is validator.is_valid(value), value


def test_several_patterns_with_lookaheads_on_one_string_intersect():
    schema = {"type": "string", "allOf": [{"pattern": "^(?!a)"}, {"pattern": "^(?=.*b)"}], "pattern": "^(?!.*-)"}
    grammar = json_schema_to_grammar(schema)
    validator = jsonschema.Draft202012Validator(schema)
    for text in TEXTS:
        assert matches(grammar, json.dumps(text)) is validator.is_valid(text), text


@pytest.mark.parametrize(
    ("pattern", "position"),
    [("a(?!b)", 1), ("(?!a)b", 0), ("^x(?=a)", 2), ("^((?!a)b)", 2), ("^(?!a)b|c", 1), ("^(?!a(?=b))", 5)],
)
def test_a_lookahead_anywhere_else_is_refused_with_its_position(pattern, position):
    with pytest.raises(RegexError) as info:
        parse_pattern(pattern)
    assert info.value.position == position and "lookahead" in str(info.value)
    with pytest.raises(SchemaError, match="lookahead") as schema_info:
        json_schema_to_grammar({"type": "string", "pattern": pattern})
    assert schema_info.value.keyword == "pattern"


def test_a_regex_constraint_still_refuses_every_lookahead():
    """``compile_regex`` (a regex constraint, a grammar's lexeme) has no product to put them in."""
    with pytest.raises(RegexError, match="lookahead is not supported"):
        compile_regex("^(?!a)b")
