"""No repeated items or keys where JSON Schema counts them (parser/distinct.py): ``uniqueItems`` on arrays
of strings and open objects, keys under ``minProperties``. Checked against the ``jsonschema`` package,
the JSON-Schema-Test-Suite, and masks against advancing over every token of the vocabulary."""

import json

import jsonschema
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from banister import Compiler, Matcher
from banister.errors import SchemaError
from banister.grammar.json_schema import json_schema_to_grammar
from banister.mask.bitmask import allocate_token_bitmask
from banister.parser.distinct import DistinctItems
from banister.parser.recognizer import GrammarAutomaton
from banister.vocab.named import load_named
from shared_data import JSON_SCHEMA_TEST_SUITE

TAGS = {"type": "array", "items": {"type": "string"}, "uniqueItems": True}
SCHEMAS = [
    TAGS,
    {"type": "array", "items": {"type": "string", "pattern": "^[a-c]+$"}, "uniqueItems": True, "maxItems": 4},
    {"anyOf": [{**TAGS, "minItems": 3}, {"type": "array", "items": {"type": "string"}, "maxItems": 2}]},
    {**TAGS, "items": {"anyOf": [{"type": "string", "minLength": 2}, {"enum": ["a", "b", "\u00e9", "\""]}]}},
    {"type": "object", "properties": {"a": {**TAGS, "items": {"type": "string", "minLength": 1}},
                                      "b": {"type": "array", "items": TAGS}}},
]

RECORDS = {"type": "array", "uniqueItems": True,
           "items": {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "array"}}}}
OBJECTS = [
    RECORDS,
    {"type": "array", "uniqueItems": True, "items": {"type": ["string", "object"], "additionalProperties": {}}},
    {"type": "object", "properties": {"list": {
        "type": "array", "uniqueItems": True, "minItems": 1,
        "items": {"type": "object", "required": ["a"], "properties": {"a": {"type": "number"}}}}}},
]

COUNTED = [
    {"type": "object", "minProperties": 2, "additionalProperties": {"type": "integer"}},
    {"type": "object", "minProperties": 3, "properties": {"id": {"type": "integer"}},
     "patternProperties": {"^[a-z]+$": {"type": "integer"}}},
    {"type": "object", "minProperties": 2, "additionalProperties": {"type": ["string", "object"]}},
]


@pytest.fixture(scope="module")
def compiler(gpt2):
    return Compiler(gpt2.vocab)


def _accepts(compiled, text: str) -> bool:
    m = Matcher(compiled)
    return m.accept_string(text) and m.is_accepting()


def _spelled(value: str, escapes: list[bool]) -> str:
    """A JSON string of ``value`` with the characters that ``escapes`` marks written as ``\\u`` escapes
    (surrogate pairs past the BMP); only those that banister lets be escaped: non-ASCII ones and those
    JSON must escape (docs/json-schema.md)."""
    out = []
    for ch, escape in zip(value, escapes + [False] * len(value)):
        if not escape and (ch in '"\\' or ord(ch) < 0x20):
            out.append(json.dumps(ch)[1:-1])
        elif escape and (ch in '"\\' or not 0x20 <= ord(ch) < 0x7F):
            encoded = ch.encode("utf-16-be")
            out.extend(f"\\u{encoded[i]:02x}{encoded[i + 1]:02x}" for i in range(0, len(encoded), 2))
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'


_ITEMS = st.lists(st.tuples(st.text(st.sampled_from("ab\u00e9\U0001f600\""), max_size=3),
                            st.lists(st.booleans(), max_size=3)), max_size=5)


@settings(max_examples=150, deadline=None)
@given(st.sampled_from(range(len(SCHEMAS))), _ITEMS, st.sampled_from(["", " ", "\n  "]))
def test_string_items_agree_with_jsonschema(compiler, which, items, space):
    schema = SCHEMAS[which]
    array = "[" + space + ("," + space).join(_spelled(v, e) for v, e in items) + space + "]"
    text = array if schema.get("type") != "object" else f'{{"a": {array}, "b": [{array}, {array}]}}'
    expected = jsonschema.Draft202012Validator(schema).is_valid(json.loads(text))
    assert _accepts(compiler.json_schema(schema), text) == expected, text


_VALUES = st.sampled_from(["1", "1.0", "2", "true", "[1]", "[1.0, {}]", '"x"', "{}", '{"k": 1, "j": [2]}',
                           '{"j": [2.0], "k": 1}'])


@st.composite
def _objects(draw) -> str:
    """An object's text: named keys (a, b) first in schema order, other keys (y, z) in either order."""
    named = [k for k in ("a", "b") if draw(st.booleans())]
    other = draw(st.permutations([k for k in ("y", "z") if draw(st.booleans())]))
    return "{" + ", ".join(f'"{k}": {draw(_VALUES)}' for k in [*named, *other]) + "}"


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(range(len(OBJECTS))), st.lists(st.one_of(_objects(), st.sampled_from(['"x"', '"y"'])),
                                                      max_size=4))
def test_object_items_agree_with_jsonschema(compiler, which, items):
    # Items equal as JSON values repeat: key order aside, 1 and 1.0 equal, true and 1 not.
    schema = OBJECTS[which]
    array = "[" + ", ".join(items) + "]"
    text = array if which != 2 else f'{{"list": {array}}}'
    expected = jsonschema.Draft202012Validator(schema).is_valid(json.loads(text))
    assert _accepts(compiler.json_schema(schema), text) == expected, text


@pytest.mark.parametrize(("name", "schema", "prefix", "repeats"), [
    ("gpt2", TAGS, '["a.", "a', True),  # the rest of "a." and its quote, one token
    ("gpt2", TAGS, '["", ', True),  # a token holding a whole "" item
    ("gpt2", TAGS, '["", "', True),  # the quote of "" (alone and with what follows) and a token closing two strings
    ("gpt2", TAGS, '["\\u00e9.", "\u00e9', True),  # an earlier item spelled with an escape
    ("gpt2", TAGS, '["\u00e9", "\\u00', False),  # inside an escape: every token that closes the string is checked
    ("gpt2", TAGS, '["\U0001f600", "\\ud83d', False),  # a high surrogate waiting for its pair
    ("gpt2", TAGS, '["a", "b", ', False),
    ("llama3", TAGS, '["\\"", "', True),  # tokens that close the string after an escaped quote
    ("llama3", TAGS, '["\\\\", "', True),  # after an escaped backslash
    ("llama3", TAGS, '["a\\/", "a', True),  # "a\/" is "a/": the token '/"' repeats it
    ("gpt2", COUNTED[0], '{"a.": 1, "a', True),  # an object's key
    ("gpt2", COUNTED[0], '{"": 1, ', True),
    ("llama3", COUNTED[2], '{"a": "x", "b": "y', False),  # in a value: a token may close it and hold a whole key
    ("llama3", COUNTED[2], '{"a": {"a": "b"}', False),  # after an inner object, the outer one's keys
    ("gpt2", RECORDS, '[{"a": 1}, {"a": 1', True),  # the closing bracket, alone and with what follows
    ("gpt2", RECORDS, '[{},', True),  # a token holding a whole object
    ("gpt2", RECORDS, '[{"b": [1], "y": {}}, {"b": [1.0], "y": {', True),  # brackets closing three containers
    ("gpt2", RECORDS, '[{"a": 1, "y": []}, {"a": 1, "y": [', True),  # "]}" closes two
    ("llama3", OBJECTS[1], '["x", {"x": 1}, {"x": "', False),  # a string item and an object item
    ("llama3", OBJECTS[2], '{"list": [{"a": 2}, {"a": 2.0', True),
])
def test_masks_are_the_tokens_that_advance(name, schema, prefix, repeats):
    vocab = load_named(name).vocab
    compiled = Compiler(vocab).json_schema(schema)
    automaton = compiled.automaton
    assert isinstance(automaton, DistinctItems)
    m = Matcher(compiled)
    assert m.accept_string(prefix)
    bitmask = allocate_token_bitmask(1, vocab.vocab_size)
    m.fill_next_token_bitmask(bitmask)
    bits = np.unpackbits(bitmask[0].view(np.uint8), bitorder="little")[: vocab.vocab_size]
    allowed = {int(t) for t in np.flatnonzero(bits)}
    assert allowed == advancing(vocab, automaton, m.state)
    # the tokens the grammar alone allows that would repeat an item
    assert bool(advancing(vocab, automaton.automaton, m.state[0]) - allowed) == repeats


def advancing(vocab, automaton, state) -> set[int]:
    """The tokens over which ``automaton`` advances from ``state`` (what a mask must allow)."""
    return {t for t in range(vocab.vocab_size)
            if vocab.is_matchable(t) and automaton.advance(state, vocab.tokens[t]) is not None}


@settings(max_examples=100, deadline=None)
@given(st.sampled_from(range(len(COUNTED))),
       st.lists(st.tuples(st.text(st.sampled_from("ab\u00e9"), max_size=2), st.lists(st.booleans(), max_size=2)),
                max_size=4))
def test_counted_keys_do_not_repeat(compiler, which, keys):
    # Python's json keeps a repeated key's last value: the text would count a member more than
    # jsonschema does, so banister writes no repeated key there.
    schema = COUNTED[which]
    text = "{" + ", ".join(f"{_spelled(k, e)}: {i}" for i, (k, e) in enumerate(keys)) + "}"
    accepted = _accepts(compiler.json_schema(schema), text)
    repeated = len({k for k, _ in keys}) < len(keys)
    assert accepted == (not repeated and jsonschema.Draft202012Validator(schema).is_valid(json.loads(text))), text


def test_only_schemas_that_count_repeats_track_strings(compiler):
    assert isinstance(compiler.json_schema({"type": "array", "items": {"type": "string"}}).automaton,
                      GrammarAutomaton)
    assert isinstance(compiler.json_schema(TAGS).automaton, DistinctItems)
    assert isinstance(compiler.json_schema(COUNTED[0]).automaton, DistinctItems)
    assert isinstance(compiler.json_schema({"type": "object", "minProperties": 1}).automaton, GrammarAutomaton)
    with pytest.raises(SchemaError, match="uniqueItems"):  # the grammar alone can't enforce it
        json_schema_to_grammar(TAGS)
    with pytest.raises(SchemaError, match="uniqueItems"):
        compiler.json_schema(TAGS, distinct_items=False)


@pytest.mark.parametrize("items", [
    {"type": "string", "pattern": "^a+b$"},  # "ab" has one completion: refusing its quote would end nowhere
    {"type": "string", "maxLength": 8},
    {"type": ["string", "number"]},
    {"type": "object", "properties": {"a": {"type": "integer"}}, "additionalProperties": False},  # '{"a": 1' ends so
    {"type": "object", "maxProperties": 3},
    {"type": "object", "propertyNames": {"enum": ["a", "b"]}},
    {"type": "object", "patternProperties": {"^x": {"type": "integer"}}, "additionalProperties": False},
    {"type": "object", "properties": {"a": {"type": "integer"}}, "unevaluatedProperties": False},
])
def test_items_that_can_run_out_of_completions_are_refused(compiler, items):
    with pytest.raises(SchemaError, match="uniqueItems"):
        compiler.json_schema({"type": "array", "items": items, "uniqueItems": True})


def test_the_warm_cache_keeps_the_tracking(gpt2, tmp_path):
    for _ in range(2):  # the second compile reads the grammar back
        compiled = Compiler(gpt2.vocab, cache_dir=tmp_path, cache_size=0).json_schema(TAGS)
        assert isinstance(compiled.automaton, DistinctItems)
        assert not _accepts(compiled, '["x", "x"]') and _accepts(compiled, '["x", "y"]')


def test_suite_unique_items_groups_that_compile_agree(compiler):
    checked = 0
    for group in json.loads((JSON_SCHEMA_TEST_SUITE / "draft2020-12" / "uniqueItems.json").read_text()):
        try:
            compiled = compiler.json_schema(group["schema"])
        except SchemaError:
            continue
        for test in group["tests"]:
            assert _accepts(compiled, json.dumps(test["data"])) == test["valid"], test["description"]
            checked += 1
    assert checked >= 10
