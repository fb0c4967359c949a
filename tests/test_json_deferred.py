"""Deferred property values: a schema compiled with its nested values proved safe left pending (as the
Compiler compiles) allows exactly what its whole grammar allows, mask by mask, builds its values only
when a parser first reaches one, and compiles at once what could be a dead end."""

from __future__ import annotations

import gzip
import json
import random
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_json_schema_helpers import Reorder

from banister import Compiler, Matcher
from banister.errors import BanisterError, LimitError, SchemaError
from banister.grammar.json_schema import json_schema_to_grammar
from banister.mask.bitmask import allocate_token_bitmask
from banister.parser.recognizer import GrammarAutomaton

DATA = Path(__file__).parent.parent.parent / "shared" / "data" / "maskbench" / "dev.jsonl.gz"
if not DATA.exists():
    DATA = Path("/work/shared/data/maskbench/dev.jsonl.gz")
MAX_TOKENS = 160


def _deferring_records(count: int) -> list[dict]:
    """MaskBench dev records (a fixed random draw) whose schema leaves some part pending."""
    with gzip.open(DATA, "rt") as f:
        records = [json.loads(line) for line in f]
    found = []
    for record in random.Random(7).sample(records, len(records)):
        try:
            grammar = json_schema_to_grammar(record["schema"], defer=True)
        except (SchemaError, LimitError):  # a schema banister refuses defers nothing
            grammar = None
        if grammar is not None and grammar.pending:
            found.append(record)
            if len(found) == count:
                break
    return found


def _validator(schema):
    jsonschema = pytest.importorskip("jsonschema")
    cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    return cls(schema, format_checker=cls.FORMAT_CHECKER)


@pytest.mark.skipif(not DATA.exists(), reason="MaskBench data not found")
def test_masks_are_the_whole_grammars_along_maskbench_instances(gpt2):
    vocab = gpt2.vocab
    records = _deferring_records(30)
    assert len(records) == 30
    built = 0
    for record in records:
        schema = record["schema"]
        whole = GrammarAutomaton(json_schema_to_grammar(schema), vocab)
        deferred = GrammarAutomaton(json_schema_to_grammar(schema, defer=True), vocab)
        left = deferred.tables.unbuilt
        assert left and not whole.tables.unbuilt
        validator, reorder = _validator(schema), Reorder(schema)
        for test in record["tests"]:
            text = json.dumps(reorder(test["data"]))
            a, b = whole.initial, deferred.initial
            tokens = gpt2.encode(text)
            for token in tokens[:MAX_TOKENS]:
                assert np.array_equal(whole.token_mask(a), deferred.token_mask(b)), (record["id"], text)
                data = vocab.token_bytes(token)
                a, b = whole.advance(a, data), deferred.advance(b, data)
                assert (a is None) == (b is None), (record["id"], text)
                if a is None:
                    break
            else:
                if len(tokens) <= MAX_TOKENS:
                    assert whole.is_accepting(a) == deferred.is_accepting(b)
                    if validator.is_valid(test["data"]):  # the oracle: valid, in schema order, accepted
                        assert deferred.is_accepting(b), (record["id"], text)
        built += left - deferred.tables.unbuilt
    assert built > 0


def test_values_wait_until_the_output_reaches_one_which_builds_them_all(gpt2):
    schema = {
        "type": "object",
        "properties": {
            "a": {"type": "object", "properties": {"x": {"type": "integer"}}, "required": ["x"]},
            "b": {"type": "array", "items": {"type": "object", "properties": {"y": {"type": "string"}}}},
            "c": {"type": "integer"},
        },
    }
    compiled = Compiler(gpt2.vocab).json_schema(schema)
    tables = compiled.automaton.tables  # type: ignore[attr-defined]
    assert tables.unbuilt == 2
    matcher = Matcher(compiled)
    for token in gpt2.encode('{"c": 1}'):  # the parser predicts no value left pending
        assert matcher.accept_token(token)
    assert matcher.is_accepting() and tables.unbuilt == 2
    matcher = Matcher(compiled)
    for token in gpt2.encode('{"a": {"x": 1}}'):
        assert matcher.accept_token(token)
    assert matcher.is_accepting()
    assert tables.unbuilt == 0  # "b"'s array with "a"'s object, in one build
    matcher = Matcher(compiled)
    for token in gpt2.encode('{"a": {}}'):
        if not matcher.accept_token(token):
            break
    else:
        assert not matcher.is_accepting()  # x is required


@pytest.mark.parametrize(
    "inner",
    [
        {"type": "object", "properties": {"x": False}, "required": ["x"]},  # a required property admits nothing
        {"type": "object", "properties": {"x": {}}, "required": ["y"], "additionalProperties": False},
        {"type": "object", "properties": {"x": {"type": "string", "enum": [1]}}, "required": ["x"]},
        {"type": "array", "items": {"type": "string"}, "minItems": 1, "maxItems": 0},
        {"type": "object", "properties": {"x": {"type": "integer", "minimum": 0.5, "maximum": 0.7}}, "required": ["x"]},
        {"type": "object", "properties": {"x": {"type": "string", "minLength": 3, "maxLength": 2}}, "required": ["x"]},
        {"type": "object", "properties": {"x": {"type": "number", "exclusiveMinimum": 1, "maximum": 1}}, "required": ["x"]},
        {"type": "object", "properties": {"x": {"type": "string", "format": "date", "maxLength": 3}}, "required": ["x"]},
        {"type": "object", "properties": {"x": {"type": "string", "enum": ["abc"], "maxLength": 2}}, "required": ["x"]},
        {"type": "object", "properties": {"x": {"$ref": "#/properties/a"}}, "required": ["x"]},  # no end
    ],
)
def test_a_part_that_may_admit_nothing_is_compiled_at_once(gpt2, inner):
    """Such a part is no dead end: the keys that lead to it are never allowed."""
    schema = {"type": "object", "properties": {"a": inner, "b": {"type": "integer"}}}
    validator = _validator(schema)
    assert validator.is_valid({"b": 1}) and not validator.is_valid({"a": {}}) and not validator.is_valid({"a": []})
    compiled = Compiler(gpt2.vocab).json_schema(schema)
    automaton = compiled.automaton
    state = automaton.advance(automaton.initial, b'{"')
    assert automaton.advance(state, b'a"') is None
    assert automaton.is_accepting(automaton.advance(state, b'b": 1}'))
    assert automaton.tables.unbuilt == 0  # type: ignore[attr-defined]


def test_threads_building_the_same_parts_agree(gpt2):
    schema = {
        "type": "object",
        "properties": {f"p{i}": {"type": "object", "properties": {"v": {"type": "integer"}, "w": {"type": "string"}}}
                       for i in range(12)},
    }
    text = json.dumps({f"p{i}": {"v": i, "w": "x" * i} for i in range(12)})
    tokens = gpt2.encode(text)
    reference = GrammarAutomaton(json_schema_to_grammar(schema), gpt2.vocab)
    expected = []
    state = reference.initial
    for token in tokens:
        expected.append(reference.token_mask(state).copy())
        state = reference.advance(state, gpt2.vocab.token_bytes(token))
    shared = GrammarAutomaton(json_schema_to_grammar(schema, defer=True), gpt2.vocab)
    failures: list[str] = []

    def walk() -> None:
        state = shared.initial
        for k, token in enumerate(tokens):
            if not np.array_equal(shared.token_mask(state), expected[k]):
                failures.append(f"mask {k}")
            state = shared.advance(state, gpt2.vocab.token_bytes(token))

    threads = [threading.Thread(target=walk) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not failures
    assert shared.tables.unbuilt == 0


@pytest.mark.skipif(not DATA.exists(), reason="MaskBench data not found")
def test_compiles_on_threads_beside_masks_agree_with_one_thread(gpt2):
    """As ``banister serve`` runs (grammars compile on threads while the engine thread fills masks):
    three threads, each compiling MaskBench schemas and filling masks along their instances, with
    the interpreter switching threads often, see the bitmasks one thread sees."""
    with gzip.open(DATA, "rt") as f:
        records = random.Random(11).sample([json.loads(line) for line in f], 40)

    def bitmasks(compiler: Compiler, record: dict) -> list[bytes] | str:
        try:
            compiled = compiler.json_schema(record["schema"])
        except BanisterError as exc:
            return type(exc).__name__
        seen, bitmask = [], allocate_token_bitmask(1, gpt2.vocab.vocab_size)
        for test in record["tests"]:
            matcher = Matcher(compiled)
            for token in gpt2.encode(json.dumps(test["data"], ensure_ascii=False))[:MAX_TOKENS]:
                matcher.fill_next_token_bitmask(bitmask)
                seen.append(bitmask.tobytes())
                if not matcher.accept_token(token):
                    break
        return seen

    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-5)
    try:
        shared = Compiler(gpt2.vocab, cache_size=0)
        with ThreadPoolExecutor(3) as pool:
            threaded = list(pool.map(lambda record: bitmasks(shared, record), records))
    finally:
        sys.setswitchinterval(interval)
    alone = Compiler(gpt2.vocab, cache_size=0)
    assert [bitmasks(alone, record) for record in records] == threaded
    assert sum(len(seen) for seen in threaded if isinstance(seen, list)) > 2000  # schemas compiled, masks taken


def test_grammars_that_must_be_whole_are_built_whole(gpt2, tmp_path):
    """A compiler with a warm cache stores its grammars, and key_order="any" may refuse an object only
    when it is built: both compile every part now; a grammar with pending rules is never stored."""
    from banister.cache import grammar_to_json

    schema = {"type": "object", "properties": {"a": {"type": "object", "properties": {"x": {"type": "integer"}}}}}
    assert Compiler(gpt2.vocab).json_schema(schema).automaton.tables.unbuilt == 1  # type: ignore[attr-defined]
    stored = Compiler(gpt2.vocab, cache_dir=tmp_path).json_schema(schema)
    assert stored.automaton.tables.unbuilt == 0  # type: ignore[attr-defined]
    assert not json_schema_to_grammar(schema, key_order="any", defer=True).pending
    with pytest.raises(ValueError, match="pending"):
        grammar_to_json(json_schema_to_grammar(schema, defer=True))


def test_a_malformed_type_under_a_value_is_reported_not_deferred():
    """The deferral test reads ``type`` as the logic does: a list holding a non-name is the logic's
    SchemaError at compile time (it was a TypeError inside the test)."""
    schema = {"type": "object", "properties": {"a": {"type": "object", "properties": {"b": {"type": [["x"]]}}}}}
    with pytest.raises(SchemaError, match="type must be"):
        json_schema_to_grammar(schema, defer=True)


_PLAIN = {"type": "object", "properties": {"x": {"type": "integer"}}}


@pytest.mark.parametrize(
    "inner",
    [
        {"type": "object", "properties": {"x": {"type": "string", "minLength": 1, "maxLength": 255}}, "required": ["x"]},
        {"type": "object", "properties": {"x": {"type": "integer", "minimum": 1, "exclusiveMaximum": 100}}},
        {"type": "object", "properties": {"x": {"type": "number", "minimum": -0.5}, "y": {"type": "string", "format": "date"}}},
        {"type": "array", "items": {"type": "string"}, "minItems": 1, "maxItems": 10},
        {"type": "object", "properties": {"x": {"const": "on"}}, "x-kubernetes-patch-strategy": "merge", "example": {}},
        {"$ref": "#/$defs/plain"},
        {"type": "object", "properties": {"x": {"$ref": "#/$defs/plain"}}, "required": ["x"]},
    ],
)
def test_values_with_leaf_constraints_and_references_are_deferred(gpt2, inner):
    """What ``Logic.deferrable`` proves besides the plainest values: string lengths, numeric bounds,
    formats, ``const``, keywords that constrain nothing and references; the first mask inside the
    value is the whole grammar's."""
    schema = {"$defs": {"plain": _PLAIN}, "type": "object", "properties": {"a": inner, "b": {"type": "integer"}}}
    whole = GrammarAutomaton(json_schema_to_grammar(schema), gpt2.vocab)
    deferred = GrammarAutomaton(json_schema_to_grammar(schema, defer=True), gpt2.vocab)
    assert deferred.tables.unbuilt == 1
    text = b'{"a": '
    a, b = whole.advance(whole.initial, text), deferred.advance(deferred.initial, text)
    assert np.array_equal(whole.token_mask(a), deferred.token_mask(b))
    assert deferred.tables.unbuilt == 0


_LEAF_VALUES = st.sampled_from([0, 1, 2, 3, 64, 65, 70_000, -1, 0.5, 1.5, 2.0, -2.5, 0.1, 1e-7, 1e20, 10**15,
                                3.14159265358979, True, False, "2", None, []])
_LEAF = st.fixed_dictionaries(
    {},
    optional={
        **{key: _LEAF_VALUES for key in ("minItems", "maxItems", "minLength", "maxLength",
                                          "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum")},
        "type": st.sampled_from(["string", "integer", "number", "array", "null", ["integer", "null"],
                                 ["string", "number"], ["array", "string"], "bogus", 3]),
        "format": st.sampled_from(["date", "email", "uuid", "int32", "nonsense", 3]),
        "enum": st.lists(st.sampled_from([1, 2.5, "a", None, True, [1]]), max_size=3),
        "const": st.sampled_from([1, "a", None, 2.5, {}]),
        "items": st.sampled_from([{"type": "string"}, False, {}, [{}], {"type": "string", "maxLength": -1}]),
        "x-vendor": st.just(1),
    },
)
_PLAIN_LEAF = st.fixed_dictionaries(
    {},
    optional={
        "type": st.sampled_from(["string", "integer", "array", "null", ["integer", "null"], ["boolean", "string"]]),
        "enum": st.lists(st.sampled_from([1, 2.5, "a", None, True, [1]]), max_size=3),
        "items": st.sampled_from([{"type": "string"}, {"enum": ["a"]}, {}, True]),
        "title": st.just("t"),
    },
)
"""Leaves of the plainest values; ``_LEAF`` adds counts, bounds, formats, ``const`` and their misuses."""


@given(st.one_of(_PLAIN_LEAF, _LEAF))
@settings(max_examples=300, deadline=None)
def test_a_deferred_value_compiles_and_admits_something(leaf):
    """The promise ``Logic.deferrable`` makes, checked against the whole compile: when a required value
    whose required property is ``leaf`` is left pending, compiling it at once raises nothing and the
    document admits some text."""
    schema = {"type": "object", "properties": {"a": {"type": "object", "properties": {"x": leaf}, "required": ["x"]}},
              "required": ["a"]}
    try:
        deferred = json_schema_to_grammar(schema, defer=True)
    except BanisterError:
        return  # (not deferred: the value was compiled at once and reported)
    if deferred.pending:
        whole = json_schema_to_grammar(schema)
        assert whole.rules[whole.start], leaf
