"""JSON Schema front end: options, text policy, numbers and strings against brute force, bad input."""

from __future__ import annotations

import functools
import itertools
import json
import random
import re
import time
from dataclasses import fields
from fractions import Fraction
from pathlib import Path

import jsonschema
import pytest
import referencing
import referencing.jsonschema
from test_json_schema_helpers import matches

from banister.errors import LimitError, SchemaError
from banister.grammar.json_formats import FORMATS, SPEC_FORMATS
from banister.grammar.json_keywords import KEYWORDS, SETTINGS, reference_tables
from banister.grammar.json_schema import SchemaSettings, json_grammar, json_schema_to_grammar, json_schema_to_regex
from banister.parser.lexer import lexeme_dfa
from banister.regex import compile_regex

DOC = Path(__file__).parent.parent / "docs" / "json-schema.md"



def _cyclic() -> dict:
    """A dict holding itself: not JSON data."""
    schema: dict = {"type": "object"}
    schema["properties"] = {"self": schema}
    return schema

def accepts(schema, text: str, **options) -> bool:
    return matches(json_schema_to_grammar(schema, **options), text)


def regex_of(schema, **options):
    return compile_regex(json_schema_to_regex(schema, **options), max_states=100_000)


# ------------------------------------------------------------------------------------------ options


def test_whitespace_modes():
    schema = {"type": "object", "properties": {"a": {"type": "array", "items": {"type": "integer"}}}}
    value = {"a": [1, 2]}
    flexible = json_schema_to_grammar(schema)
    assert matches(flexible, json.dumps(value))
    assert matches(flexible, json.dumps(value, indent=2))
    assert matches(flexible, json.dumps(value, separators=(",", ":")))
    assert not matches(flexible, " " + json.dumps(value))  # nothing around the value
    assert not matches(flexible, '{"a": [1,' + " " * 21 + "2]}")  # a run longer than max_whitespace
    assert matches(flexible, '{"a": [1,' + " " * 20 + "2]}")
    assert not matches(flexible, '{"a": [1,\v2]}')  # not JSON whitespace
    compact = json_schema_to_grammar(schema, whitespace="compact")
    assert matches(compact, '{"a":[1,2]}') and not matches(compact, '{"a": [1,2]}')
    pretty = json_schema_to_grammar(schema, whitespace="pretty")
    assert matches(pretty, json.dumps(value)) and not matches(pretty, '{"a":[1,2]}')
    assert matches(pretty, "{}") and matches(pretty, '{"a": []}')
    assert not matches(json_schema_to_grammar(schema, max_whitespace=0), json.dumps(value))


def test_key_order_schema_and_any():
    schema = {
        "type": "object",
        "properties": {"b": {"type": "integer"}, "a": {"type": "string"}, "c": {"type": "boolean"}},
        "required": ["a"],
    }
    schema_order = json_schema_to_grammar(schema)
    any_order = json_schema_to_grammar(schema, key_order="any")
    for text, in_schema_order in [
        ('{"b": 1, "a": "x", "c": true}', True),
        ('{"a": "x"}', True),
        ('{"a": "x", "zz": null, "yy": 2}', True),  # extra keys after the named ones
        ('{"a": "x", "b": 1}', False),
        ('{"zz": null, "a": "x"}', False),
    ]:
        assert matches(schema_order, text) is in_schema_order, text
        assert matches(any_order, text), text
    for bad in ['{"a": "x", "a": "y"}', '{"b": 1}', '{"a": "x", "b": "no"}', '{"a": "x", "b": 1, "b": 2}']:
        assert not matches(schema_order, bad) and not matches(any_order, bad), bad


BRANCHES = {"anyOf": [
    {"properties": {"expect": {"type": "string"}, "field": {"type": "string"}}, "required": ["field", "expect"],
     "additionalProperties": False},
    {"properties": {"error": {"type": "string"}, "field": {"type": "string"}}, "required": ["error", "field"],
     "additionalProperties": False},
]}
INHERITED = {"$defs": {"base": {"properties": {"level": {"enum": ["warn", "error"]}}}},
             "allOf": [{"$ref": "#/$defs/base"}], "properties": {"x": {"type": "integer"}, "y": {"type": "integer"}}}
LEGACY_REF = {"$schema": "http://json-schema.org/draft-04/schema#", "$ref": "#/definitions/car",
              "properties": {"track": {"type": "string"}},  # beside $ref in draft 4: does not apply
              "definitions": {"car": {"properties": {"reg": {"type": "string"}}, "required": ["reg"]}}}


@pytest.mark.parametrize("schema, values, schema_orders, other_orders", [
    (BRANCHES, [{"field": "f", "expect": "e"}, {"field": "f", "error": "e"}],
     {("expect", "field"), ("field", "error")}, {("error", "field")}),
    (INHERITED, [{"x": 1, "y": 2, "level": "warn"}], {("x", "y", "level")}, {("level", "x", "y")}),
    (LEGACY_REF, [{"reg": "r", "track": 5}], {("reg", "track")}, set()),
])
def test_key_orders_of_branches_and_inheritance(schema, values, schema_orders, other_orders):
    """A small object takes its keys in schema order, in its branch's own order and with inherited
    properties first, and in no other order; with ``max_reordered_names=0`` in schema order only. Every
    accepted text is valid under the jsonschema package."""
    validator = jsonschema.validators.validator_for(schema)(schema)
    grammars = {
        "all": json_schema_to_grammar(schema),
        "schema": json_schema_to_grammar(schema, settings=SchemaSettings(max_reordered_names=0)),
    }
    accepted: dict[str, set] = {"all": set(), "schema": set()}
    for value in values:
        for keys in itertools.permutations(value):
            text = json.dumps({k: value[k] for k in keys})
            for name, grammar in grammars.items():
                if matches(grammar, text):
                    assert validator.is_valid(json.loads(text)), text
                    accepted[name].add(keys)
    assert accepted == {"all": schema_orders | other_orders, "schema": schema_orders}


def test_optional_properties_grow_the_grammar_linearly():
    """Each position among the names offers its own member or the next position's, so a run of n
    optional properties is O(n) alternatives (a rule listing every later member was O(n^2)); every
    subset, in schema order, still matches, and no other order does."""
    def size(n: int) -> int:
        props = {f"p{i}": {"type": "integer"} for i in range(n)}
        return json_schema_to_grammar({"type": "object", "properties": props, "additionalProperties": False}).size

    assert size(80) < 2.2 * size(40) and size(40) < 2.2 * size(20)
    names = ["a", "b", "c", "d", "e"]
    schema = {"type": "object", "properties": {n: {"type": "integer"} for n in names}, "required": ["c"],
              "additionalProperties": False}
    grammar = json_schema_to_grammar(schema)
    for k in range(len(names) + 1):
        for chosen in itertools.permutations(names, k):
            text = json.dumps({n: 1 for n in chosen})
            in_order = list(chosen) == sorted(chosen)
            assert matches(grammar, text) is ("c" in chosen and in_order), text


def test_strict_closes_objects():
    schema = {"type": "object", "properties": {"a": {"type": "object", "properties": {"b": {}}}}}
    assert accepts(schema, '{"a": {"b": 1, "c": 2}, "d": 3}')
    assert not accepts(schema, '{"a": {"b": 1, "c": 2}}', strict=True)
    assert not accepts(schema, '{"a": {}, "d": 3}', strict=True)
    assert accepts(schema, '{"a": {"b": [1, {"free": "form"}]}}', strict=True)
    assert accepts({**schema, "additionalProperties": True}, '{"d": 3}', strict=True)


def test_options_are_checked():
    for bad in [{"key_order": "sorted"}, {"whitespace": "tabs"}, {"max_whitespace": -1}, {"draft": "3"}]:
        with pytest.raises(ValueError):
            json_schema_to_grammar({}, **bad)


def test_json_mode_and_nesting_cap():
    grammar = json_grammar(max_nesting=3)
    for value in [None, True, 0, -1.5e3, "x", [], {}, {"a": [1, {"b": None}]}, [[[1]]]]:
        assert matches(grammar, json.dumps(value)), value
    assert not matches(grammar, "[[[[1]]]]")
    for bad in ["", "nul", "[1,]", '{"a" 1}', "01", "1.", '"\\x"', "[1] [2]", "{,}"]:
        assert not matches(grammar, bad), bad


def test_free_values_nest_to_any_depth_by_default():
    deep = json.dumps(functools.reduce(lambda inner, i: [inner] if i % 2 else {"k": inner}, range(100), 0))
    assert json.loads(deep)  # a hundred levels: Python's parser reads it, so must the grammar
    assert matches(json_grammar(), deep)
    assert accepts({"type": "object", "properties": {"a": {"type": "integer"}}}, '{"a": 1, "b": ' + deep + '}')
    assert not matches(json_grammar(), deep[:-1])
    for bad in ["[1,]", '{"a" 1}', "{,}", "[[1]]]"]:
        assert not matches(json_grammar(), bad), bad
    with pytest.raises(ValueError, match="max_nesting"):
        json_schema_to_grammar({}, max_nesting=-1)


def test_drafts():
    legacy = {"$schema": "http://json-schema.org/draft-04/schema#", "minimum": 5, "exclusiveMinimum": True}
    assert not accepts(legacy, "5") and accepts(legacy, "6")
    draft4_integer = {"$schema": "http://json-schema.org/draft-04/schema#", "type": "integer"}
    assert accepts(draft4_integer, "6") and not accepts(draft4_integer, "6.0")  # draft 4: 6.0 is no integer
    assert accepts({"type": "integer"}, "6.0")
    siblings = {"definitions": {"s": {"type": "string"}}, "$ref": "#/definitions/s", "maxLength": 1}
    assert accepts(siblings, '"long"', draft="7")  # $ref siblings are ignored before 2019-09
    assert not accepts(siblings, '"long"')
    tuple_items = {"items": [{"type": "integer"}], "additionalItems": False}
    assert accepts(tuple_items, "[1]", draft="7") and not accepts(tuple_items, "[1, 2]", draft="7")
    draft4_const = {"$schema": "http://json-schema.org/draft-04/schema#", "const": 1}
    assert accepts(draft4_const, "2")  # not a draft 4 keyword: ignored, as validators do
    dependencies = {"dependencies": {"a": ["b"]}}
    assert accepts(dependencies, '{"a": 1}') and not accepts(dependencies, '{"a": 1}', draft="7")
    anchors = {"$defs": {"x": {"$anchor": "here", "type": "null"}}, "$ref": "#here"}
    assert accepts(anchors, "null") and not accepts(anchors, "1")


# ------------------------------------------------------------------------------------------ strings


def test_string_escapes_and_lengths():
    schema = {"type": "string", "minLength": 2, "maxLength": 3}
    rx = regex_of(schema)
    for value in ["ab", "é\n", "💩💩💩", '"\\/', "\u2028x"]:
        for ensure_ascii in (True, False):
            assert rx.matches(json.dumps(value, ensure_ascii=ensure_ascii).encode()), value
    assert rx.matches(b'"a\\/"')  # the optional escape of '/'
    for bad in ['"a"', '"abcd"', '"\\u0041b"', '"a\x01"', '"\\ud800a"', '"\\q1"']:
        assert not rx.matches(bad.encode()), bad


def test_long_lengths_are_split_into_rules():
    grammar = json_schema_to_grammar({"type": "string", "minLength": 40, "maxLength": 100})
    assert len(grammar.rules) > 2  # not one giant counted lexeme
    for n, ok in [(39, False), (40, True), (64, True), (100, True), (101, False)]:
        assert matches(grammar, json.dumps("x" * n)) is ok, n
    assert matches(grammar, json.dumps("é" * 70, ensure_ascii=True))


@pytest.mark.parametrize("low", [0, 1, 2, 3, 5, 6, 7, 9, 13])
def test_counts_of_blocks_give_exactly_the_lengths_of_the_bounds(low):
    """Blocks of three characters (``max_lexeme_repeat: 3``), so that short strings go through every
    way of counting blocks: none, one, many, up to a bound that is or is not a multiple."""
    for high in [None, *range(max(low, 4), 31)]:
        schema = {"type": "string", "minLength": low, **({} if high is None else {"maxLength": high})}
        grammar = json_schema_to_grammar(schema, settings=SchemaSettings(max_lexeme_repeat=3))
        for n in range((high or low + 12) + 4):
            assert matches(grammar, json.dumps("x" * n)) is (low <= n <= (high or n)), (low, high, n)


def test_a_length_bound_of_a_million_is_a_few_rules():
    """``maxLength: 1000000`` (MaskBench has it): rules for the counts of 32-character blocks by halving,
    not one rule per block (31,250 of them took a second to compile)."""
    grammar = json_schema_to_grammar({"type": "string", "minLength": 100, "maxLength": 1_000_000})
    assert len(grammar.rules) < 100
    for n, ok in [(99, False), (100, True), (5_000, True)]:
        assert matches(grammar, json.dumps("x" * n)) is ok, n


@pytest.mark.parametrize(
    "pattern",
    [
        "^[ab]+$", "ab", "^a", "b$", "^(ab|ba)*$", "a.c", "^a{2,3}$", "(^a|b$)", "[^a]", "^$", "a|^b|c$", "\\d",
        "^ab?c*$", "^a?b{0,2}1?.+$", "^(a|bc)?1*$", "^a$|^b.*$", "^.*b?$", "^a*b?c*$", "([ab]+)?", ".*", "^a?",
        "c*$", "^(a|)",
    ],
)
def test_patterns_with_lengths_match_python(pattern):
    alphabet = "abc1\n"
    texts = ["".join(p) for k in range(6) for p in itertools.product(alphabet, repeat=k)]
    for low, high in [(0, None), (2, 4), (1, 1), (3, None)]:
        schema = {"type": "string", "pattern": pattern, "minLength": low}
        if high is not None:
            schema["maxLength"] = high
        rx = regex_of(schema)
        ecma = pattern.replace("$", r"\Z")  # ECMA '$' is the end of the string, not before a final newline
        for text in texts:
            expected = re.search(ecma, text) is not None and low <= len(text) <= (high or 99)
            assert rx.matches(json.dumps(text).encode()) is expected, (pattern, low, high, text)


@pytest.mark.parametrize(
    "schema",
    [
        {"pattern": "^https?://.+$", "maxLength": 100},
        {"pattern": "^data:image/(jpg|jpeg|png|svg\\+xml);base64,[0-9a-zA-Z+/=]*$", "maxLength": 90},
        {"pattern": "^[a-z][-a-z0-9.+]*$", "minLength": 40, "maxLength": 80},
        {"pattern": "^x[a-z]{70,100}y$"},
        {"pattern": "^(ab|c)?[a-c]{0,200}$", "minLength": 66, "maxLength": 150},
    ],
)
def test_patterns_with_long_counted_runs_match_jsonschema(schema):
    """A run longer than a lexeme holds (beside fixed prefixes of several lengths) is laid out in
    32-character blocks (``json_strings.CountedRun``): exact at every length around the bounds."""
    schema = {"type": "string", **schema}
    grammar = json_schema_to_grammar(schema)
    validator = jsonschema.Draft202012Validator(schema)
    rng = random.Random(5)
    pieces = ["", "http://", "https://", "data:image/jpg;base64,", "data:image/svg+xml;base64,", "x", "ab", "c"]
    seen = set()
    for _ in range(1000):
        alphabet = rng.choice(["abc", "abcxy", "abc09+/=", "abcxy09+/=.-\u00e9:"])
        length = rng.randint(0, 160) if rng.random() < 0.5 else rng.randint(55, 105)  # (near most bounds)
        run = "".join(rng.choice(alphabet) for _ in range(length))
        text = rng.choice(pieces) + run + rng.choice(["", "", "y"])  # (no final newline: before one,
        # Python's ``$``, which jsonschema uses, holds too)
        valid = validator.is_valid(text)
        seen.add(valid)
        assert matches(grammar, json.dumps(text)) is valid, (schema, text)
    assert seen == {True, False}


def _lexeme_accepts(dfa, data: bytes) -> bool:
    """Whether a lexeme's byte DFA (dead state 0, which every byte leaves dead) accepts ``data``."""
    state = dfa.start
    for byte in data:
        state = int(dfa.transitions[state, byte])
    return bool(dfa.accepting[state])


def test_a_pattern_every_string_matches_leaves_a_long_length_bound_exact():
    """``([0-9a-zA-Z]+)?`` with ``maxLength: 4096`` (a MaskBench schema): the pattern constrains nothing, so
    the bound is a counted run; as a product with the pattern's automaton it needed more states than
    ``max_string_states`` allows."""
    grammar = json_schema_to_grammar({"type": "string", "pattern": "([0-9a-zA-Z]+)?", "maxLength": 4096})
    for n, ok in [(0, True), (4096, True), (4097, False)]:
        assert matches(grammar, json.dumps("-" * n)) is ok, n


def test_a_pattern_of_two_prefixes_with_a_long_length_bound_compiles_with_the_default_limits():
    """``^https?://.+$`` with ``maxLength: 1024`` (a MaskBench schema): too long a run to expand into
    one lexeme per prefix, so it is the product of the pattern's automaton and a length counter, which
    must not count through the texts the pattern already rejected."""
    schema = {"type": "string", "maxLength": 1024, "pattern": "^https?://.+$"}
    grammar = json_schema_to_grammar(schema)
    for text in ["http://a", "https://" + "é" * 1016, "https://" + "é" * 1017, "http://" + "x" * 1017,
                 "ftp://a", "http://", "https:/x"]:
        expected = jsonschema.Draft202012Validator(schema).is_valid(text)
        assert matches(grammar, json.dumps(text)) is expected, text


def test_an_unanchored_alternation_of_many_words_stays_small():
    """``a|b|...`` in search semantics (MaskBench has lists of 17 and 120 names): every word's surrounding
    ``any character*`` is shared, so the string lexeme's DFA, built in full when a grammar is compiled,
    stays within the default state limit; and it agrees with Python's ``re.search``."""
    rng = random.Random(7)
    words = sorted({"".join(rng.choice("abcdefgh_") for _ in range(rng.randint(3, 6))) for _ in range(8)})
    pattern = "|".join(words) + "|^c_|_c$"  # written alternative by alternative: 27,654 states
    grammar = json_schema_to_grammar({"type": "string", "pattern": pattern})
    (lexeme,) = grammar.lexemes
    dfa = lexeme_dfa(lexeme.pattern, 10_000)
    ecma = pattern.replace("$", r"\Z")
    pieces = [*"abcdefgh_", "é", "\n", *words]
    texts = [*words, "c_", "x_c", "xc_", "c_x", ""] + [
        "".join(rng.choice(pieces) for _ in range(rng.randint(0, 6))) for _ in range(400)
    ]
    for text in texts:
        expected = re.search(ecma, text) is not None
        for ensure_ascii in (True, False):
            assert _lexeme_accepts(dfa, json.dumps(text, ensure_ascii=ensure_ascii).encode()) is expected, text


def test_pattern_intersections_and_complements():
    schema = {"allOf": [{"pattern": "^[a-c]+$"}, {"pattern": "b"}, {"not": {"pattern": "cc"}}], "type": "string"}
    rx = regex_of(schema)
    for k in range(5):
        for p in itertools.product("abcd", repeat=k):
            text = "".join(p)
            expected = re.fullmatch("[a-c]+", text) is not None and "b" in text and "cc" not in text
            assert rx.matches(json.dumps(text).encode()) is expected, text


def test_enums_and_consts():
    schema = {"enum": ["a", "é", 1, 1.5, None, True, [1, "x"], {"k": 2}]}
    grammar = json_schema_to_grammar(schema)
    for value in schema["enum"]:
        assert matches(grammar, json.dumps(value)), value
        assert matches(grammar, json.dumps(value, ensure_ascii=False)), value
    for text in ["1.0", "1.50", '"\\u00e9"', '[1, "x"]']:
        assert matches(grammar, text), text
    for text in ['"b"', "2", "false", "[1]", '{"k": 3}', '"A"', "1e0"]:
        assert not matches(grammar, text), text
    assert accepts({"const": 1e-07}, "1e-07") and accepts({"const": 1e-07}, "0.0000001")


@pytest.mark.parametrize("value_schema", [
    {"type": ["string", "null"]},
    {"type": ["integer", "null"], "description": "an annotation"},
    {"type": ["number", "integer"]},
    {"type": ["boolean"]},
    {"anyOf": [{"type": "integer"}, {"type": "null", "title": "none"}]},
    {"anyOf": [{"type": "integer"}, {"type": "number"}], "description": "an annotation"},
    {"anyOf": [{"type": "string"}, {"type": "boolean"}, {"type": "string"}]},
])
@pytest.mark.parametrize("draft", ["http://json-schema.org/draft-04/schema#", "https://json-schema.org/draft/2020-12/schema"])
def test_schemas_of_scalar_types_alone_match_a_validator(value_schema, draft):
    # Such a schema's grammar is shared by every schema and grammar (``Logic.plain_scalar``); the same
    # value schema twice in one schema shares its rule too.
    schema = {"$schema": draft, "type": "object", "properties": {"a": value_schema, "b": value_schema},
              "required": ["a"], "additionalProperties": False}
    validator = jsonschema.validators.validator_for(schema)(schema)
    grammar = json_schema_to_grammar(schema)
    values = [None, True, False, 0, -3, 2.5, 1.0, 10**20, "", "x", [], {}]
    for a, b in itertools.product(values, [*values, "absent"]):
        instance = {"a": a} if b == "absent" else {"a": a, "b": b}
        for text in {json.dumps(instance), json.dumps(instance).replace(".0", "")}:
            assert matches(grammar, text) is validator.is_valid(json.loads(text)), (text, draft)


@pytest.mark.parametrize("value_schema", [
    {"type": "string", "maxLength": 2},
    {"type": ["string", "null"], "maxLength": 2, "description": "an optional short text"},
    {"type": ["integer", "null"], "minimum": 0},
    {"type": ["null", "integer"], "minimum": 0},
    {"type": ["number", "string"], "minimum": 1, "maxLength": 1},
    {"type": ["boolean", "integer"], "multipleOf": 2},
    {"type": ["string"], "pattern": "^a"},
])
def test_schemas_of_leaf_constraints_match_a_validator(value_schema):
    # A schema of scalar types and their own constraints alone gets the lexemes the first grammar made
    # for the same types, keywords and draft (``Logic.plain_leaf``): two properties, two grammars.
    schema = {"type": "object", "properties": {"a": value_schema, "b": value_schema}, "required": ["a"],
              "additionalProperties": False}
    validator = jsonschema.validators.validator_for(schema)(schema)
    for _ in range(2):
        grammar = json_schema_to_grammar(schema)
        for a, b in itertools.product([None, True, 0, -1, 1, 2, 3, 0.5, "", "a", "ab", "abc", "b", []], [None, "absent"]):
            instance = {"a": a} if b == "absent" else {"a": a, "b": b}
            assert matches(grammar, json.dumps(instance)) is validator.is_valid(instance), instance


def test_leaf_lexemes_kept_apart_by_their_types():
    # The same constraints on another list of types are another key of the process-wide table.
    schema = {"type": "object", "properties": {"a": {"type": "integer", "minimum": 0},
                                               "b": {"type": ["integer", "null"], "minimum": 0}}}
    grammar = json_schema_to_grammar(schema)
    assert matches(grammar, '{"a": 1, "b": null}') and not matches(grammar, '{"a": null}')


@pytest.mark.parametrize("value_schema", [
    {"enum": ["a", "é", "", 'a"b', "x/y", "a", "ab"], "description": "an annotation"},
    {"type": "string", "enum": ["low", "high"]},
    {"const": "fixed", "title": "a title"},
    {"type": "string", "enum": []},
])
def test_schemas_of_strings_alone_match_a_validator(value_schema):
    # Such a schema's grammar is its values' string term alone (``Logic.plain_strings``).
    schema = {"type": "object", "properties": {"a": value_schema}, "required": ["a"], "additionalProperties": False}
    validator = jsonschema.validators.validator_for(schema)(schema)
    grammar = json_schema_to_grammar(schema)
    values = ["a", "é", "", 'a"b', "x/y", "ab", "b", "low", "high", "fixed", "A", None, 1, ["a"]]
    for value in values:
        for text in {json.dumps({"a": value}), json.dumps({"a": value}, ensure_ascii=False)}:
            assert matches(grammar, text) is validator.is_valid(json.loads(text)), text


@pytest.mark.parametrize("value_schema", [
    {"type": "array", "items": {"type": "integer"}, "description": "an annotation"},
    {"type": "array", "items": {"type": "object", "properties": {"k": {"type": "string"}}, "required": ["k"]}},
    {"type": "array", "items": {"type": "array", "items": {"type": "boolean"}}},
    {"type": "array"},
    {"type": "array", "items": True},
    {"type": "array", "items": False},
    {"type": "array", "items": {"enum": ["x", "y"]}, "title": "a title"},
    {"type": "array", "items": {"type": "integer"}, "minItems": 1},
    {"type": "array", "items": {"type": "integer"}, "minItems": 2, "maxItems": 3},
    {"type": "array", "items": {"type": "integer"}, "maxItems": 1},
    {"type": "array", "maxItems": 0},
    {"type": "array", "items": False, "minItems": 1},
    {"type": "array", "items": {"type": "integer"}, "minItems": 3, "maxItems": 2},
    {"type": "array", "items": {"type": "integer"}, "minItems": 2, "maxItems": 100},
])
def test_schemas_of_arrays_alone_match_a_validator(value_schema):
    # An array whose items all follow one schema, of a few items at least or at most, is written
    # without the member sequence's states (``Logic.plain_array``); the same items twice in one schema
    # share the array's rules. Counts past a few take the general way.
    schema = {"type": "object", "properties": {"a": value_schema, "b": value_schema}, "required": ["a"],
              "additionalProperties": False}
    validator = jsonschema.validators.validator_for(schema)(schema)
    grammar = json_schema_to_grammar(schema)
    values = [[], [1], [1, 2], [1, 2, 3], [1, 2, 3, 4], [1.5], ["x"], ["x", "y", "z"], [{"k": "v"}], [{}],
              [[True], []], [[1]], [None], 1, "x", None]
    for a, b in itertools.product(values, [[], [2, "x"], "absent"]):
        instance = {"a": a} if b == "absent" else {"a": a, "b": b}
        text = json.dumps(instance)
        assert matches(grammar, text) is validator.is_valid(instance), text


@pytest.mark.parametrize("draft", ["http://json-schema.org/draft-07/schema#", "https://json-schema.org/draft/2020-12/schema"])
def test_references_alone_match_a_validator(draft):
    # A schema of ``$ref`` alone compiles as its target, shared by every reference (``Logic.pure_ref``);
    # before 2019-09 a reference's siblings are ignored, from it on they apply.
    item = {"type": "object", "properties": {"k": {"type": "integer"}}, "required": ["k"]}
    schema = {"$schema": draft, "definitions": {"item": item, "alias": {"$ref": "#/definitions/item", "title": "t"},
                                                "text": {"type": "string"}},
              "type": "object", "additionalProperties": False,
              "properties": {"a": {"$ref": "#/definitions/item"}, "b": {"$ref": "#/definitions/alias"},
                             "c": {"$ref": "#/definitions/text", "type": "integer"}}}
    validator = jsonschema.validators.validator_for(schema)(schema)
    grammar = json_schema_to_grammar(schema)
    values = [{"k": 1}, {"k": "x"}, {}, "s", 3]
    for a, b, c in itertools.product(values, values, values):
        text = json.dumps({"a": a, "b": b, "c": c})
        assert matches(grammar, text) is validator.is_valid(json.loads(text)), (text, draft)
    cycle = {"$schema": draft, "definitions": {"x": {"$ref": "#/definitions/y"}, "y": {"$ref": "#/definitions/x"}},
             "properties": {"p": {"$ref": "#/definitions/x"}}}
    with pytest.raises(SchemaError, match="cycle"):
        json_schema_to_grammar(cycle)


_PERSON = "https://example.com/schemas/person.json"
_ADDRESS = "https://example.com/schemas/address.json"
_DRAFT_7, _DRAFT_2020_12 = "http://json-schema.org/draft-07/schema#", "https://json-schema.org/draft/2020-12/schema"
_RESOURCES = {
    # Draft 7 by its $schema: a $ref hides its siblings (maxLength) there.
    _PERSON: {"$schema": _DRAFT_7, "definitions": {"name": {"type": "string", "minLength": 1}},
              "type": "object", "properties": {"name": {"$ref": "#/definitions/name", "maxLength": 2},
                                               "address": {"$ref": "address.json"}},
              "required": ["name"]},
    _ADDRESS: {"$id": _ADDRESS, "type": "object", "properties": {"zip": {"type": "string", "pattern": "^[0-9]{5}$"}},
               "required": ["zip"], "additionalProperties": False,
               "$defs": {"city": {"$anchor": "city", "enum": ["Oslo", "Lima"]}}},
}


def test_references_into_resources_match_a_validator():
    # Documents given as ``resources`` are reached by absolute and relative URIs, anchors and pointers,
    # each in its own draft; jsonschema with the same documents in its registry is the oracle.
    schema = {"type": "object", "additionalProperties": False,
              "properties": {"owner": {"$ref": _PERSON}, "city": {"$ref": f"{_ADDRESS}#city"},
                             "alias": {"$ref": f"{_PERSON}#/definitions/name"}}}
    registry = referencing.Registry().with_resources(
        (uri, referencing.Resource.from_contents(doc, default_specification=referencing.jsonschema.DRAFT202012))
        for uri, doc in _RESOURCES.items())
    validator = jsonschema.Draft202012Validator(schema, registry=registry)
    grammar = json_schema_to_grammar(schema, resources=_RESOURCES)
    owners = [{"name": "Ada"}, {"name": ""}, {}, {"name": "Al", "address": {"zip": "12345"}},
              {"name": "Al", "address": {"zip": "123"}}, {"name": "Al", "address": {"zip": "12345", "x": 1}}, 3]
    for owner, city, alias in itertools.product(owners, ["Oslo", "Rome", 1], ["Bo", ""]):
        instance = {"owner": owner, "city": city, "alias": alias}
        text = json.dumps(instance)
        assert matches(grammar, text) is validator.is_valid(instance), text


def test_resources_are_checked_and_named_in_errors():
    with pytest.raises(SchemaError, match="resources=") as err:
        json_schema_to_grammar({"$ref": _PERSON})  # nothing is fetched
    assert err.value.pointer == ""
    with pytest.raises(SchemaError) as err:
        json_schema_to_grammar({"$ref": _PERSON}, resources={_PERSON: {"properties": {"a": {"pattern": "(?<=a)"}}}})
    assert err.value.pointer == f"{_PERSON}#/properties/a/pattern"
    assert f"at {_PERSON}#/properties/a/pattern" in str(err.value)
    with pytest.raises(SchemaError) as err:
        json_schema_to_grammar({"$ref": f"{_PERSON}#/nope"}, resources={_PERSON: {}})
    assert err.value.keyword == "$ref"
    with pytest.raises(SchemaError, match="not a schema") as err:
        json_schema_to_grammar({}, resources={_PERSON: 3})
    assert err.value.pointer == f"{_PERSON}#"
    for uri in ["person.json", f"{_PERSON}#/definitions", 7]:
        with pytest.raises(ValueError, match="absolute URI"):
            json_schema_to_grammar({}, resources={uri: {}})
    with pytest.raises(TypeError, match="resources"):
        json_schema_to_grammar({}, resources=[_PERSON])
    # A resource without $schema is read in the schema's draft: in draft 7, a $ref hides its siblings.
    doc = {"definitions": {"n": {"type": "integer"}}, "properties": {"a": {"$ref": "#/definitions/n", "maximum": 1}}}
    for draft, five in [(_DRAFT_7, True), (_DRAFT_2020_12, False)]:
        grammar = json_schema_to_grammar({"$schema": draft, "$ref": _PERSON}, resources={_PERSON: doc})
        assert matches(grammar, '{"a": 5}') is five
    # The document's own $id names it before a resource of the same URI.
    own = {"$id": _PERSON, "$defs": {"n": {"type": "integer"}}, "$ref": f"{_PERSON}#/$defs/n"}
    assert matches(json_schema_to_grammar(own, resources={_PERSON: {"$defs": {"n": {"type": "string"}}}}), "3")


def test_dynamic_references_with_one_target_in_every_scope_match_a_validator():
    # A tree whose nodes' $dynamicRef finds the one resource defining its $dynamicAnchor, and one by pointer.
    tree = {"$id": "https://example.com/tree", "$dynamicAnchor": "node", "type": "object",
            "properties": {"data": {"type": "integer"},
                           "children": {"type": "array", "items": {"$dynamicRef": "#node"}},
                           "first": {"$dynamicRef": "#/properties/data"}}}
    validator = jsonschema.Draft202012Validator(tree)
    grammar = json_schema_to_grammar(tree)
    for instance in [{"data": 1}, {"children": [{"data": 2}, {"children": [{"data": "x"}]}]}, {"children": [3]},
                     {"first": 4}, {"first": "4"}, {"children": [{"first": 5.5}]}]:
        text = json.dumps(instance)
        assert matches(grammar, text) is validator.is_valid(instance), text
    # Extended by the root, which defines the same $dynamicAnchor, every node is the root's (strict) one.
    strict = {"$id": "https://example.com/strict-tree", "$dynamicAnchor": "node", "$ref": "tree",
              "unevaluatedProperties": False}
    resources = {"https://example.com/tree": tree}
    registry = referencing.Registry().with_resources(
        (uri, referencing.jsonschema.DRAFT202012.create_resource(doc)) for uri, doc in resources.items())
    validator = jsonschema.Draft202012Validator(strict, registry=registry)
    grammar = json_schema_to_grammar(strict, resources=resources)
    for instance in [{"data": 1}, {"children": [{"data": 2}]}, {"children": [{"daat": 2}]}, {"dat": 1},
                     {"children": [{"children": [{"first": 1, "x": 2}]}]}]:
        text = json.dumps(instance)
        assert matches(grammar, text) is validator.is_valid(instance), text
    # Reached from a root that does not define it, the target depends on the path: refused.
    with pytest.raises(SchemaError, match="dynamic scoping") as err:
        json_schema_to_grammar({"$ref": "https://example.com/strict-tree"},
                               resources={**resources, "https://example.com/strict-tree": strict})
    assert err.value.keyword == "$dynamicRef"
    assert err.value.pointer == "https://example.com/tree#/properties/children/items"


def test_recursive_references_with_one_target_in_every_scope_match_a_validator():
    # Draft 2019-09's form: $recursiveRef "#" and $recursiveAnchor at resource roots, read as $dynamicRef is.
    draft = "https://json-schema.org/draft/2019-09/schema"
    tree = {"$schema": draft, "$id": "https://example.com/tree", "$recursiveAnchor": True, "type": "object",
            "properties": {"data": {"type": "integer"}, "children": {"type": "array", "items": {"$recursiveRef": "#"}}}}
    strict = {"$schema": draft, "$id": "https://example.com/strict-tree", "$recursiveAnchor": True, "$ref": "tree",
              "unevaluatedProperties": False}
    resources = {"https://example.com/tree": tree}
    registry = referencing.Registry().with_resources(
        (uri, referencing.Resource.from_contents(doc)) for uri, doc in resources.items())
    instances = [{"data": 1}, {"children": [{"data": 2}]}, {"children": [{"daat": 2}]}, {"children": ["x"]}, {"dat": 1}]
    for schema in [tree, strict]:
        validator = jsonschema.Draft201909Validator(schema, registry=registry)
        grammar = json_schema_to_grammar(schema, resources=resources)
        for instance in instances:
            text = json.dumps(instance)
            assert matches(grammar, text) is validator.is_valid(instance), (schema["$id"], text)
    with pytest.raises(SchemaError, match="dynamic scoping") as err:
        json_schema_to_grammar({"$schema": draft, "$ref": "https://example.com/strict-tree"},
                               resources={**resources, "https://example.com/strict-tree": strict})
    assert err.value.keyword == "$recursiveRef"


_CLOSED_X = {"type": "object", "properties": {"x": {"type": "integer"}}, "required": ["x"], "additionalProperties": False}
_CLOSED_Y = {"type": "object", "properties": {"y": {"type": "string"}}, "required": ["y"], "additionalProperties": False}


@pytest.mark.parametrize("value_schema", [
    {"anyOf": [{"$ref": "#/$defs/closed_x"}, {"type": "null"}], "description": "an optional reference"},
    {"anyOf": [_CLOSED_X, _CLOSED_Y]},
    {"anyOf": [{"$ref": "#/$defs/closed_x"}, _CLOSED_Y, {"type": "string", "maxLength": 2}]},
    {"anyOf": [{"type": "object", "properties": {"x": {"type": "integer"}}}, {"type": "array", "items": {"type": "integer"}}]},
    {"anyOf": [{"type": "object", "properties": {"x": {"type": "integer"}}}, {"type": "object", "properties": {"y": {}}}]},
    {"anyOf": [_CLOSED_X, {"type": "object", "properties": {"x": {"type": "string"}}, "additionalProperties": False}]},
    {"anyOf": [True, {"type": "null"}]},
    {"anyOf": [False, {"enum": ["a", 1]}]},
    {"anyOf": [{"anyOf": [{"type": "integer"}, _CLOSED_Y]}, {"type": "null"}]},
    {"anyOf": [{"type": "string", "minLength": 3, "maxLength": 1}, {"type": "boolean"}], "$defs": {}},
    {"oneOf": [{"$ref": "#/$defs/closed_x"}, {"type": "null"}]},
    {"oneOf": [{"type": ["string", "null"]}, {"type": "array", "items": {"type": "integer"}}, {"type": "integer"}]},
    {"oneOf": [{"type": "integer"}, {"type": "number"}]},
    {"oneOf": [{"type": "string"}, {"type": "string", "maxLength": 2}]},
    {"oneOf": [_CLOSED_X, _CLOSED_Y, {"type": "object", "properties": {"x": {"type": "number"}}}]},
    {"oneOf": [{"type": "string"}, {"enum": ["a", 1]}]},
    {"oneOf": [True, {"type": "null"}]},
])
def test_anyof_alone_matches_a_validator(value_schema):
    # A schema of ``anyOf`` alone is the union of its branches, each compiled alone, unless property
    # order could differ; so is one of ``oneOf`` whose branches' types are apart
    # (``Logic.plain_branches``). The other cases take the general way.
    schema = {"$defs": {"closed_x": _CLOSED_X}, "type": "object", "properties": {"a": value_schema},
              "required": ["a"], "additionalProperties": False}
    validator = jsonschema.validators.validator_for(schema)(schema)
    grammar = json_schema_to_grammar(schema)
    values = [None, True, 1, 1.5, "", "ab", "abc", "a", [], [1, 2], ["x"], {}, {"x": 1}, {"x": "s"}, {"y": "s"},
              {"y": 1}, {"x": 1, "y": "s"}, {"z": 0}]  # (declared names first: the default key order)
    for value in values:
        text = json.dumps({"a": value})
        assert matches(grammar, text) is validator.is_valid({"a": value}), text


def test_anyof_branches_keep_the_schema_order_of_every_branch():
    # Inside an anyOf, an object takes its names in the anyOf's schema order as well as its own: two
    # closed branches that share names in different orders are compiled the general way.
    first = {"type": "object", "properties": {"x": {"type": "integer"}, "y": {"type": "integer"}},
             "required": ["x", "y"], "additionalProperties": False}
    second = {"type": "object", "properties": {"y": {"type": "string"}, "x": {"type": "string"}},
              "required": ["x", "y"], "additionalProperties": False}
    grammar = json_schema_to_grammar({"anyOf": [first, second]})
    for text in ['{"x": "a", "y": "b"}', '{"y": "b", "x": "a"}', '{"x": 1, "y": 2}']:
        assert matches(grammar, text), text
    assert not matches(grammar, '{"x": 1, "y": "b"}')


@pytest.mark.parametrize("value_schema", [
    {"description": "says nothing of its value", "$comment": "so any value"},
    {"$id": "https://example.com/leaf", "type": "string", "maxLength": 2},
    {"id": "#leaf", "type": "integer", "$schema": "http://json-schema.org/draft-04/schema#"},
    {"$anchor": "x", "type": ["boolean", "null"], "definitions": {"unused": False}},
    {"$id": "https://example.com/obj", "type": "object", "properties": {"k": {"$ref": "#/$defs/n"}},
     "required": ["k"], "additionalProperties": False, "$defs": {"n": {"type": "number", "maximum": 2}}},
    {"$id": "https://example.com/ref", "$ref": "#/$defs/n", "$defs": {"n": {"enum": [1, "a"]}}},
])
def test_schemas_with_identifiers_and_definitions_match_a_validator(value_schema):
    # Identifiers, ``$schema`` and definitions constrain nothing where they stand: the shortcuts take
    # such schemas too (references inside resolve against the identifier's base).
    schema = {"type": "object", "properties": {"a": value_schema}, "required": ["a"], "additionalProperties": False}
    validator = jsonschema.validators.validator_for(schema)(schema)
    grammar = json_schema_to_grammar(schema)
    for value in [None, True, 0, 1, 2, 3.5, "", "ab", "abc", "a", [], [1], {}, {"k": 1}, {"k": 3}, {"k": "x"}]:
        text = json.dumps({"a": value})
        assert matches(grammar, text) is validator.is_valid({"a": value}), text


def test_schemas_that_hold_themselves_through_shortcuts():
    # An array of itself (its items a reference to it, directly or through a union) meets itself
    # inside its own shortcut: it is compiled from the work list, as any recursive node. An anyOf that refers to itself with no
    # schema in between is refused, as the full expansion refuses it.
    itself = {"$ref": "#/$defs/a"}
    for definition in [
        {"type": "array", "items": itself},
        {"type": "array", "items": {"anyOf": [itself, {"type": "integer"}]}},
        {"anyOf": [{"type": "null"}, {"type": "array", "items": itself}]},
        {"oneOf": [{"type": "integer"}, {"type": "array", "items": itself, "maxItems": 2}]},
    ]:
        nested = {"$defs": {"a": definition}, **itself}
        validator = jsonschema.validators.validator_for(nested)(nested)
        grammar = json_schema_to_grammar(nested)
        for value in [[], [[]], [[], [[[]]]], [1], [[1]], [1, [2, None]], [[], [], []], {}, None, 3]:
            assert matches(grammar, json.dumps(value)) is validator.is_valid(value), (definition, value)
    loop = {"$defs": {"a": {"anyOf": [{"$ref": "#/$defs/a"}, {"type": "null"}]}}, "$ref": "#/$defs/a"}
    with pytest.raises(SchemaError, match="cycle"):
        json_schema_to_grammar(loop)


def test_formats_against_examples():
    good = {
        "date": ["2024-02-29", "2023-12-31"],
        "date-time": ["2024-01-01T12:00:00Z", "2024-01-01t12:00:00.5+05:30"],
        "time": ["23:59:59Z", "00:00:00-01:00"],
        "email": ["a.b@example.com", '"x y"@[127.0.0.1]'],
        "hostname": ["example.com", "a-b.c"],
        "ipv4": ["192.168.0.1"],
        "ipv6": ["::1", "1:2:3:4:5:6:7:8", "::ffff:1.2.3.4", "1::"],
        "uri": ["https://example.com/a?b#c", "urn:isbn:0451450523"],
        "uri-reference": ["../a/b", "#frag", ""],
        "uuid": ["123e4567-e89b-12d3-a456-426614174000"],
        "duration": ["P1Y2M3DT4H5M6S", "P2W", "PT1S"],
        "json-pointer": ["", "/a~1b/0"],
        "idn-email": ["a.b@example.com"],
        "idn-hostname": ["example.com"],
        "iri": ["https://example.com/a?b#c"],
        "iri-reference": ["../a/b", ""],
        "uri-template": ["http://example.com/{user}/repos{?page,per_page}", "{+path}/{.a.b,c%41}{;x}{/a*}{#f:3}", "",
                         "a'b\u00e9\U0001f600"],
    }
    bad = {
        "date": ["2023-02-29", "2024-13-01", "0000-01-01", "2024-1-01"],
        "date-time": ["2024-01-01 12:00:00Z", "2024-01-01T24:00:00Z", "2024-01-01T12:00:00"],
        "time": ["24:00:00Z", "12:00:00"],
        "email": ["a@b@c", "@x.com", "a..b@x.com", "a@-x.com"],
        "hostname": ["-a.com", "a_b.com", "a." + "b" * 64, ""],
        "ipv4": ["256.1.1.1", "01.1.1.1", "1.1.1"],
        "ipv6": ["1:2:3:4:5:6:7:8:9", ":::", "1::2::3", "fe80::1%eth0"],
        "uri": ["no scheme", "http://a b"],
        "uri-reference": ["a b", "\\\\x"],
        "uuid": ["123e4567e89b12d3a456426614174000"],
        "duration": ["P", "PT", "P1D2H", "P1Y2W"],
        "json-pointer": ["a", "/~2"],
        # The IDN and IRI formats are their ASCII forms: a non-ASCII one is refused (narrower).
        "idn-email": ["a@b@c", "é@example.com"],
        "idn-hostname": ["-a.com", "bücher.de"],
        "iri": ["no scheme", "http://é.fr", "http://[::1]/"],
        "iri-reference": ["a b", "/é"],
        # A name led by an escape (`{%41}`) is RFC 6570's and refused by the checker here (narrower).
        "uri-template": ["{}", "{a", "x}", "{=a}", "{a:0}", "{a:1000}", "a b", "{%41}", "a%b", "a\ufffeb"],
    }
    for name in good:
        rx = regex_of({"type": "string", "format": name})
        for text in good[name]:
            assert rx.matches(json.dumps(text).encode()), (name, text)
        for text in bad[name]:
            assert not rx.matches(json.dumps(text).encode()), (name, text)
    assert accepts({"format": "int32"}, "2147483647") and not accepts({"format": "int32"}, "2147483648")
    # A name JSON Schema does not define is an annotation, as jsonschema treats it, unless asked otherwise.
    checker = jsonschema.Draft202012Validator.FORMAT_CHECKER
    assert jsonschema.Draft202012Validator({"format": "made-up"}, format_checker=checker).is_valid("anything")
    assert accepts({"format": "made-up"}, '"anything"') and accepts({"format": "made-up"}, "3")
    with pytest.raises(SchemaError, match="not defined by JSON Schema") as err:
        json_schema_to_grammar({"items": {"format": "made-up"}}, unknown_formats="error")
    assert err.value.pointer == "/items/format"


def test_every_format_of_the_specification_is_enforced():
    assert SPEC_FORMATS <= FORMATS.keys()
    # One the table lacked would be refused unless ignored.
    table = dict(FORMATS)
    del FORMATS["uri-template"]
    try:
        with pytest.raises(SchemaError, match="not supported") as err:
            json_schema_to_grammar({"properties": {"x": {"format": "uri-template"}}})
        assert err.value.pointer == "/properties/x/format"
        assert accepts({"format": "uri-template"}, '"{"', unsupported_formats="ignore")
    finally:  # in its order: the docs' table is generated from it
        FORMATS.clear()
        FORMATS.update(table)


# ------------------------------------------------------------------------------------------ numbers


def _decimal_texts(rng: random.Random) -> list[str]:
    out = {"0", "-0", "0.0", "1", "-1", "1.0", "10", "0.5", "-0.5", "100", "99.99", "1.25", "2.5"}
    for _ in range(400):
        whole = rng.choice(["0", str(rng.randint(1, 9)), str(rng.randint(10, 999)), str(rng.randint(1, 10**7))])
        text = whole + (
            "." + "".join(rng.choice("0123456789") for _ in range(rng.randint(1, 3))) if rng.random() < 0.5 else ""
        )
        out.add(("-" if rng.random() < 0.4 else "") + text)
    return sorted(out)


@pytest.mark.parametrize("seed", range(12))
def test_number_constraints_match_exact_arithmetic(seed):
    rng = random.Random(seed)
    values = [0, 1, -1, 5, 7.5, -2.25, 100, 1000, 0.125, -300, 65535]
    schema: dict = {"type": rng.choice(["number", "integer"])}
    for key in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"):
        if rng.random() < 0.4:
            schema[key] = rng.choice(values)
    if rng.random() < 0.5:
        schema["multipleOf"] = rng.choice([2, 3, 5, 0.5, 0.25, 7, 11, 0.1])
    if rng.random() < 0.3:
        schema["not"] = {"const": rng.choice(values)}
    grammar = json_schema_to_grammar(schema)
    for text in _decimal_texts(rng):
        v = Fraction(text)
        ok = schema["type"] == "number" or v.denominator == 1
        ok = ok and ("minimum" not in schema or v >= Fraction(repr(schema["minimum"])))
        ok = ok and ("maximum" not in schema or v <= Fraction(repr(schema["maximum"])))
        ok = ok and ("exclusiveMinimum" not in schema or v > Fraction(repr(schema["exclusiveMinimum"])))
        ok = ok and ("exclusiveMaximum" not in schema or v < Fraction(repr(schema["exclusiveMaximum"])))
        ok = ok and ("multipleOf" not in schema or (v / Fraction(repr(schema["multipleOf"]))).denominator == 1)
        ok = ok and ("not" not in schema or v != Fraction(repr(schema["not"]["const"])))
        assert matches(grammar, text) is ok, (schema, text)


@pytest.mark.parametrize("seed", range(6))
def test_a_bounded_number_lexeme_is_built_from_its_dfa_as_its_pattern_defines(seed):
    """A number range's lexeme is an automaton pattern whose byte DFA the front end offers to the lexer
    straight from the number DFA (no regex written out and compiled back): the offered DFA and the regex
    compiler's DFA of the pattern accept the same texts, exponent forms included, and only valid ones."""
    from banister.parser.lexer import _builders, lexeme_dfa

    rng = random.Random(seed)
    offers = 0
    for _ in range(8):
        schema: dict = {"type": rng.choice(["number", "integer"])}
        for key in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"):
            if rng.random() < 0.5:
                schema[key] = rng.choice([rng.randint(-400, 400), round(rng.uniform(-90, 180), rng.randint(1, 3))])
        if rng.random() < 0.25:
            schema["multipleOf"] = rng.choice([2, 5, 0.5, 0.25])
        grammar = json_schema_to_grammar(schema)
        if not grammar.lexemes:
            continue  # an empty range
        (lexeme,) = grammar.lexemes
        offers += lexeme.pattern in _builders
        offered, defined = lexeme_dfa(lexeme.pattern, 10_000), compile_regex(lexeme.pattern)
        validator = jsonschema.Draft202012Validator(schema)
        for _ in range(150):
            value = rng.choice([rng.randint(-2000, 2000), round(rng.uniform(-500, 500), rng.randint(0, 4)),
                                rng.choice([1e16, -3e17, 5e-07, -2.5e-06, 1e-05, 0.0, -0.0])])
            text = json.dumps(value).encode()
            accepted = _lexeme_accepts(offered, text)
            assert accepted is defined.matches(text), (schema, text)
            if accepted and "multipleOf" not in schema:  # (jsonschema checks multipleOf in floats)
                assert validator.is_valid(value), (schema, text)
    assert offers


def test_unbounded_numbers_accept_json_syntax():
    rx = regex_of({"type": "number"})
    for text in ["0", "-0", "1e5", "1E+5", "-1.5e-3", "12.0"]:
        assert rx.matches(text.encode()), text
    for text in ["01", "1.", ".5", "+1", "1e", "NaN", "Infinity", "0x1"]:
        assert not rx.matches(text.encode()), text
    integer = regex_of({"type": "integer"})
    assert integer.matches(b"3") and integer.matches(b"3.00") and not integer.matches(b"3.5")
    assert integer.matches(b"1e+16") and integer.matches(b"3e0") and not integer.matches(b"1.5e1")  # narrowing
    bounded = regex_of({"type": "number", "minimum": 2, "maximum": 1000})
    assert bounded.matches(b"2.5") and not bounded.matches(b"1e+16") and not bounded.matches(b"2.5e0")
    assert regex_of({"type": "number", "maximum": 10}).matches(b"-1e+16")
    assert regex_of({"type": "number", "exclusiveMinimum": 0, "maximum": 1}).matches(b"5e-07")
    assert regex_of({"minimum": 0, "type": "number"}).matches(b"1e-05")  # bounds at 0 keep exponents


_HUGE_AND_TINY = [
    "5E47420", "1e400", "-1e400", "1e308", "1e307", "9.9e307", "-9e307", "1e+0307", "1.5e307", "1e-400",
    "-1e-400", "1e-307", "1e-308", "5e-324", "1.5e-320", "0.1e-307", "0." + "0" * 400 + "1",
    "0." + "0" * 306 + "1", "0." + "0" * 307 + "1", "-0." + "0" * 400 + "1", "1" + "0" * 400, "1" + "0" * 400 + ".0",
    "1" + "0" * 400 + ".5", "1" + "0" * 15 + ".0", "1" + "0" * 16 + ".0", "2" + "0" * 15 + ".5", "1" + "0" * 20,
    "0", "0.0", "-0.0", "1e-5", "3", "2.5", "1e+16", "1e16", "-5e-07",
]
_NUMBER_SCHEMAS = [
    {"type": "integer"},
    {"type": "integer", "minimum": 0},
    {"type": "integer", "maximum": 0},
    {"type": "integer", "multipleOf": 2},
    {"type": "number", "multipleOf": 0.5},
    {"type": "number", "multipleOf": 0.5, "minimum": -10},
    {"type": "number", "exclusiveMinimum": 0},
    {"type": "number", "exclusiveMaximum": 0},
    {"type": "number", "exclusiveMinimum": 0, "maximum": 1},
    {"type": "number", "not": {"const": 0}},
    {"type": "number", "not": {"type": "integer"}},
    {"type": "number", "not": {"multipleOf": 3}},
    {"type": "number", "minimum": 0},
    {"type": "number", "maximum": 10},
    {"type": "number"},
]


@pytest.mark.parametrize("schema", _NUMBER_SCHEMAS, ids=json.dumps)
def test_numbers_that_overflow_or_underflow_a_double(schema):
    """Oracle: Python's json (which reads a fraction or exponent as a double: inf past ~1.8e308, 0 below
    ~2.5e-324) and jsonschema. No text is accepted that the oracle rejects; texts written the way
    json.dumps writes them, and huge plain integers, keep being accepted."""
    jsonschema = pytest.importorskip("jsonschema")
    validator = jsonschema.Draft202012Validator(schema)
    grammar = json_schema_to_grammar(schema)

    def valid(text):
        value = json.loads(text)
        try:
            return validator.is_valid(value)
        except (OverflowError, ValueError):
            # jsonschema's float multipleOf raises on inf (not a multiple) and on ints past a double
            # (10**400 / 0.5): there it cannot decide, and the exact answer stands.
            return None if isinstance(value, int) else False

    for text in _HUGE_AND_TINY:
        if matches(grammar, text):
            assert valid(text) is not False, text
        elif valid(text) and Fraction(text) != 0:
            value = json.loads(text)
            assert not isinstance(value, int) or value >= 10**16 or "multipleOf" in json.dumps(schema), text
            plain_only = "multipleOf" in json.dumps(schema) or "not" in schema  # documented narrowing
            if isinstance(value, float) and 1e-300 < abs(value) < 1e300 and json.dumps(value) == text:
                assert plain_only and "e" in text, f"{text} is how json.dumps writes a valid value"


# ------------------------------------------------------------------------------------------ structure


def test_arrays():
    schema = {
        "type": "array",
        "prefixItems": [{"type": "string"}],
        "items": {"type": "integer"},
        "minItems": 2,
        "maxItems": 4,
        "contains": {"const": 7},
        "maxContains": 1,
    }
    grammar = json_schema_to_grammar(schema)
    for value, ok in [
        (["a", 7], True),
        (["a", 1, 7, 2], True),
        (["a"], False),
        (["a", 1], False),
        (["a", 7, 7], False),
        (["a", 1, 2, 3, 7], False),
        ([1, 7], False),
    ]:
        assert matches(grammar, json.dumps(value)) is ok, value
    unique = json_schema_to_grammar({"type": "array", "items": {"enum": ["x", "y", 1]}, "uniqueItems": True})
    assert matches(unique, '["y", 1, "x"]') and not matches(unique, '["x", 1, "x"]')


@pytest.mark.parametrize(
    "schema",
    [
        # Every key admits any value, whichever pattern it matches: no split by pattern is needed (the
        # pattern's automaton, over JSON text, would need more than max_states).
        {"type": "object", "patternProperties": {"^.{1,255}$": {}}},
        {"type": "object", "patternProperties": {"^.{1,255}$": True, "^x": {}}, "additionalProperties": {}},
        {"type": "object"},  # (the empty key among them: its regex had left it out)
        # A split it does need: 256 code-point states, a few more bytes each (UTF-8).
        {"type": "object", "patternProperties": {"^.{1,255}$": {"type": "array"}}, "additionalProperties": {"type": "integer"}},
    ],
)
def test_keys_of_a_long_counted_pattern(schema):
    grammar = json_schema_to_grammar(schema, key_order="any")
    validator = jsonschema.Draft202012Validator(schema)
    rng = random.Random(3)
    for _ in range(60):
        value = {"".join(rng.choice("xyé中") for _ in range(rng.choice([0, 1, 5, 255, 256]))):
                 rng.choice([[1], 2, "s"]) for _ in range(rng.randint(0, 2))}
        assert matches(grammar, json.dumps(value)) is validator.is_valid(value), value


def test_a_key_pattern_past_max_string_states_names_that_setting():
    schema = {"type": "object", "patternProperties": {"^.{1,3000}$": {"type": "array"}}, "additionalProperties": False}
    with pytest.raises(LimitError) as info:
        json_schema_to_grammar(schema)
    assert info.value.setting == "max_string_states"
    wider = json_schema_to_grammar(schema, settings=SchemaSettings(max_string_states=3100))
    assert matches(wider, json.dumps({"k" * 3000: []}))


def test_objects_pattern_properties_and_names():
    schema = {
        "type": "object",
        "properties": {"id": {"type": "integer"}},
        "patternProperties": {"^x-": {"type": "string"}, "y$": {"type": "boolean"}},
        "additionalProperties": {"type": "null"},
        "propertyNames": {"maxLength": 4},
        "minProperties": 1,
        "dependentRequired": {"x-ay": ["id"]},
    }
    grammar = json_schema_to_grammar(schema, key_order="any")
    for value, ok in [
        ({"id": 1}, True),
        ({"x-a": "s"}, True),
        ({"x-ay": "s", "id": 1}, False),  # x-ay matches both patterns: string and boolean at once
        ({"ay": True}, True),
        ({"zz": None}, True),
        ({"zz": 1}, False),
        ({"x-abc": "s"}, False),  # name too long
        ({}, False),
        ({"id": 1, "id2": None}, True),
    ]:
        assert matches(grammar, json.dumps(value)) is ok, value


def test_one_of_and_if_then_else():
    one_of = {"oneOf": [{"type": "integer"}, {"minimum": 2}]}
    grammar = json_schema_to_grammar(one_of)
    assert matches(grammar, "1") and matches(grammar, "2.5") and not matches(grammar, "3")
    assert matches(grammar, '"s"') and not matches(grammar, "1.5")  # a string is valid under branch 2 only
    conditional = {
        "if": {"properties": {"kind": {"const": "a"}}, "required": ["kind"]},
        "then": {"required": ["a"]},
        "else": {"not": {"required": ["a"]}},
        "type": "object",
    }
    grammar = json_schema_to_grammar(conditional, key_order="any")
    for value, ok in [({"kind": "a", "a": 1}, True), ({"kind": "a"}, False), ({"kind": "b"}, True), ({"a": 1}, False)]:
        assert matches(grammar, json.dumps(value)) is ok, value


def test_complements_of_key_rules():
    some_other_key = {"type": "object", "not": {"properties": {"a": {}}, "additionalProperties": False}}
    grammar = json_schema_to_grammar(some_other_key)
    for value, ok in [({}, False), ({"a": 1}, False), ({"b": 1}, True), ({"a": 1, "b": 2}, True)]:
        assert matches(grammar, json.dumps(value)) is ok, value
    long_name = {"type": "object", "not": {"propertyNames": {"maxLength": 2}}}
    grammar = json_schema_to_grammar(long_name, key_order="any")
    for value, ok in [({}, False), ({"ab": 1}, False), ({"abc": 1}, True), ({"ab": 1, "abcd": 2}, True)]:
        assert matches(grammar, json.dumps(value)) is ok, value
    overlapping = {
        "type": "object",
        "oneOf": [
            {"properties": {"a": {}, "b": {}}, "additionalProperties": False},
            {"properties": {"a": {}, "c": {}}, "additionalProperties": False},
        ],
    }
    grammar = json_schema_to_grammar(overlapping, key_order="any")
    for value, ok in [
        ({}, False),
        ({"a": 1}, False),
        ({"b": 1}, True),
        ({"a": 1, "c": 1}, True),
        ({"b": 1, "c": 1}, False),
    ]:
        assert matches(grammar, json.dumps(value)) is ok, value


@pytest.mark.parametrize("schema", [
    # One branch per key, each closed: "some key other than b's" is met by a's own key, so each branch
    # is one term, not the product of the others' complements (pyrseas' privileges).
    {"oneOf": [{"type": "object", "properties": {k: {"type": "boolean"}}, "additionalProperties": False}
               for k in "abcdefghij"]},
    {"oneOf": [{"type": "object", "properties": {"a": {}, "b": {}}, "required": ["a"], "additionalProperties": False},
               {"type": "object", "properties": {"c": {}}, "additionalProperties": False},
               {"type": "object", "patternProperties": {"^[a-c]$": {"type": "integer"}},
                "additionalProperties": False}]},
    {"allOf": [{"properties": {"a": {}, "b": {}}, "additionalProperties": False},
               {"not": {"properties": {"a": {}}, "additionalProperties": False}},
               {"not": {"properties": {"b": {}}, "additionalProperties": False}}]},
])
def test_complements_of_closed_objects_settle_on_their_keys(schema):
    validator = jsonschema.Draft202012Validator(schema)
    grammar = json_schema_to_grammar(schema, key_order="any")
    values = [{}, {"a": True}, {"b": False}, {"a": 1}, {"c": 2}, {"a": True, "b": True}, {"a": 1, "c": 2},
              {"j": True}, {"a": True, "j": False}, {"d": None}, {"b": 1, "c": 1}, {"x": 1}, [], "a"]
    for value in values:
        assert matches(grammar, json.dumps(value)) is validator.is_valid(value), value


def test_recursion_and_regex_function():
    tree = {
        "type": "object",
        "properties": {"v": {"type": "integer"}, "kids": {"type": "array", "items": {"$ref": "#"}}},
    }
    grammar = json_schema_to_grammar(tree)
    assert matches(grammar, '{"v": 1, "kids": [{"v": 2, "kids": [{"kids": []}]}]}')
    assert not matches(grammar, '{"kids": [{"v": "x"}]}')
    with pytest.raises(SchemaError):
        json_schema_to_regex(tree)
    flat = {
        "type": "object",
        "properties": {"a": {"enum": [1, 2]}, "b": {"type": "array", "items": {"type": "boolean"}}},
        "required": ["a"],
        "additionalProperties": False,
    }
    rx = regex_of(flat)
    grammar = json_schema_to_grammar(flat)
    for text in ['{"a": 1}', '{"a": 2, "b": [true, false]}', '{"a": 3}', '{"b": []}', '{"a": 1, "b": [1]}']:
        assert rx.matches(text.encode()) is matches(grammar, text), text
    with pytest.raises(LimitError, match="max_inline_regex_length"):
        json_schema_to_regex({"type": "object"})


# ------------------------------------------------------------------------------------------ bad input


@pytest.mark.parametrize(
    "schema,error,keyword",
    [
        ('{"type": ', SchemaError, None),
        ({"type": "strin"}, SchemaError, "type"),
        ({"$ref": "#/definitions/nope"}, SchemaError, "$ref"),
        ({"$ref": "#"}, SchemaError, "$ref"),
        (
            {"$defs": {"a": {"$ref": "#/$defs/b"}, "b": {"allOf": [{"$ref": "#/$defs/a"}]}}, "$ref": "#/$defs/a"},
            SchemaError,
            "$ref",
        ),
        ({"$ref": "http://example.com/remote.json"}, SchemaError, "$ref"),
        ({"minimum": "3"}, SchemaError, "minimum"),
        ({"required": "a"}, SchemaError, "required"),
        ({"pattern": "(?=a)"}, SchemaError, "pattern"),
        ({"multipleOf": 0}, SchemaError, "multipleOf"),
        ([1, 2], SchemaError, None),
        ({"enum": [float("nan")]}, SchemaError, None),
        ({"$dynamicRef": "#x"}, SchemaError, "$dynamicRef"),
        (json.loads('{"enum": ["a\\ud800"]}'), SchemaError, None),  # a lone surrogate, as json.loads reads it
        (json.loads('{"properties": {"\\udc00": {}}}'), SchemaError, None),
        (_cyclic(), SchemaError, None),
        ({"properties": {1: {}}}, SchemaError, None),
        ({"enum": [{1, 2}]}, SchemaError, None),
        ({"const": float("inf")}, SchemaError, None),
        ({"enum": [[{"a": b"x"}]]}, SchemaError, None),
    ],
)
def test_malformed_schemas_raise_typed_errors(schema, error, keyword):
    with pytest.raises(error) as err:
        json_schema_to_grammar(schema)
    if keyword is not None:
        assert err.value.keyword == keyword


def test_a_schema_shared_in_two_places_is_json_data():
    shared = {"type": "string"}
    grammar = json_schema_to_grammar({"properties": {"a": shared, "b": {"items": shared}}})
    assert grammar.rules


def _timed(schema, **options):
    start = time.perf_counter()
    try:
        json_schema_to_grammar(schema, **options)
        outcome = "ok"
    except (SchemaError, LimitError) as err:
        outcome = type(err).__name__
    return outcome, time.perf_counter() - start


def test_huge_and_deep_inputs_finish_in_bounded_time():
    outcome, seconds = _timed({"enum": [f"value-{i}" for i in range(100_000)]})
    assert outcome == "LimitError" and seconds < 5
    outcome, seconds = _timed({"enum": [f"v{i}" for i in range(5_000)]})
    assert outcome == "ok" and seconds < 5
    deep: dict = {"type": "integer"}
    for _ in range(1000):
        deep = {"type": "object", "properties": {"a": deep}}
    outcome, seconds = _timed(deep)
    assert outcome == "ok" and seconds < 10
    nested: dict = {"type": "string"}
    for _ in range(1000):
        nested = {"allOf": [nested]}
    outcome, seconds = _timed(nested)
    assert outcome == "LimitError" and seconds < 5
    assert _timed("[" * 100_000 + "]" * 100_000)[0] in ("SchemaError", "LimitError")
    outcome, seconds = _timed({"type": "object", "properties": {f"p{i}": {} for i in range(40)}}, key_order="any")
    assert outcome == "LimitError" and seconds < 5
    outcome, seconds = _timed({"type": "array", "maxItems": 10**6})
    assert outcome == "LimitError" and seconds < 5
    # (Each once ran out of memory. A length alone is rules by halving its count of blocks: it compiles;
    # beside a pattern it is a product automaton, one state per character, past max_string_states.)
    for string, refused in (({"type": "string", "minLength": 1e20}, False),
                            ({"type": "string", "maxLength": 10**30}, False),
                            ({"type": "string", "pattern": "^a", "minLength": 10**12}, True)):
        outcome, seconds = _timed(string)
        assert outcome == ("LimitError" if refused else "ok") and seconds < 5, string
    outcome, seconds = _timed({"type": "array", "items": {"type": "string"}}, settings=SchemaSettings(time_limit_s=0))
    assert outcome == "LimitError"


def test_unsatisfiable_schemas_give_empty_grammars():
    for schema in [
        False,
        {"not": {}},
        {"type": "object", "properties": {"x": {"$ref": "#"}}, "required": ["x"]},
        {"type": "integer", "minimum": 1, "maximum": 0},
        {"allOf": [{"type": "string"}, {"type": "null"}]},
        {"type": "string", "pattern": "[^\\s\\S]"},  # a pattern alone is found empty when its lexeme is made
        {"type": "string", "pattern": "^ab$", "maxLength": 1},
        {"type": "object", "properties": {"k": {"type": "string", "pattern": "^ab$", "maxLength": 1}}, "required": ["k"]},
        # Objects that say only their properties are not pruned as shapes: trimming the grammar finds these.
        {"type": "object", "properties": {"a": {"type": "object", "properties": {"b": False}, "required": ["b"]}},
         "required": ["a"]},
        {"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a", "b"], "additionalProperties": False},
    ]:
        grammar = json_schema_to_grammar(schema)
        assert grammar.rules[grammar.start] == (), schema
    # Left optional, such a property can only be left out.
    schema = {"type": "object", "properties": {"a": {"type": "object", "properties": {"b": False}, "required": ["b"]},
                                               "c": {"type": "integer"}}}
    for text in ['{}', '{"c": 1}', '{"a": {}}', '{"a": {"b": 1}, "c": 1}', '{"c": 1, "d": 2}']:
        assert accepts(schema, text) is jsonschema.Draft202012Validator(schema).is_valid(json.loads(text)), text


@pytest.mark.parametrize("combinator", ["anyOf", "oneOf"])
def test_an_empty_pattern_branch_admits_nothing(combinator):
    # The logic takes a pattern alone to admit strings; the branch's lexeme then finds it empty.
    schema = {combinator: [{"type": "string", "pattern": "^ab$", "maxLength": 1}, {"type": ["string", "integer"]}]}
    for text in ['"ab"', '"a"', '""', "5", "null"]:
        assert accepts(schema, text) is jsonschema.Draft202012Validator(schema).is_valid(json.loads(text)), text


# ------------------------------------------------------------------------------------------ docs


def test_docs_tables_match_the_registry():
    text = DOC.read_text()
    begin, end = "<!-- BEGIN GENERATED: reference_tables() -->\n", "<!-- END GENERATED -->"
    generated = text[text.index(begin) + len(begin) : text.index(end)]
    assert generated == reference_tables(), "regenerate docs/json-schema.md from reference_tables()"
    names = [k.name for k in KEYWORDS]
    assert len(names) == len(set(names))
    assert set(SETTINGS) == {f.name for f in fields(SchemaSettings)}


def test_unevaluated_next_to_applicators():
    """unevaluated* sees the annotations of $ref/allOf exactly and of anyOf/oneOf/if per branch (a
    narrowing where branches overlap); the complement of such a narrowed schema is refused."""
    base = {"$defs": {"a": {"properties": {"a": {"type": "integer"}}}}, "unevaluatedProperties": False}
    g = json_schema_to_grammar({**base, "allOf": [{"$ref": "#/$defs/a"}, {"properties": {"b": True}}]})
    assert matches(g, '{"a": 1, "b": 2}') and matches(g, "{}")
    assert not matches(g, '{"a": 1, "c": 2}') and not matches(g, '{"a": "x"}')
    g = json_schema_to_grammar({**base, "oneOf": [{"required": ["a"], "$ref": "#/$defs/a"}, {"required": ["b"]}]})
    assert matches(g, '{"a": 1}') and not matches(g, '{"b": 1}')  # b is not evaluated by the second branch
    g = json_schema_to_grammar(
        {"if": {"properties": {"k": {"const": 1}}, "required": ["k"]}, "then": {"properties": {"v": True}},
         "unevaluatedProperties": False}
    )
    assert matches(g, '{"k": 1, "v": 2}') and not matches(g, '{"k": 2, "v": 2}') and matches(g, "{}")
    g = json_schema_to_grammar({"prefixItems": [True], "allOf": [{"prefixItems": [True, True]}], "unevaluatedItems": False})
    assert matches(g, "[1, 2]") and not matches(g, "[1, 2, 3]")
    g = json_schema_to_grammar(
        {"properties": {"a": True}, "dependentSchemas": {"a": {"properties": {"b": True}}}, "unevaluatedProperties": False}
    )
    assert matches(g, '{"a": 1, "b": 2}') and not matches(g, '{"b": 2}')
    with pytest.raises(SchemaError) as err:
        json_schema_to_grammar({"not": {"anyOf": [True, {"properties": {"a": True}}], "unevaluatedProperties": False}})
    assert err.value.keyword == "unevaluatedProperties"
