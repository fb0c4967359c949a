"""Property tests: instances hypothesis-jsonschema draws are accepted (keys in schema order); random
mutations that ``jsonschema`` calls invalid are rejected; random schema shapes compile or refuse with
a typed error, quickly."""

from __future__ import annotations

import json
import re
import time
import warnings

import hypothesis_jsonschema
import jsonschema
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from test_json_schema_helpers import Reorder, matches

from banister.errors import LimitError, SchemaError
from banister.grammar.json_formats import FORMATS
from banister.grammar.json_logic import pattern_matches
from banister.grammar.json_schema import json_schema_to_grammar
from banister.regex import parse_pattern

SCHEMAS = [
    {
        "type": "object",
        "properties": {
            "name": {"type": "string", "minLength": 1, "maxLength": 12},
            "age": {"type": "integer", "minimum": 0, "maximum": 150},
            "tags": {"type": "array", "items": {"enum": ["a", "b", "c"]}, "maxItems": 4},
            "score": {"type": "number", "exclusiveMinimum": -1.5, "maximum": 1000, "multipleOf": 0.5},
        },
        "required": ["name"],
        "additionalProperties": False,
    },
    {
        "type": "object",
        "properties": {"kind": {"const": "circle"}, "r": {"type": "number", "minimum": 0}},
        "required": ["kind"],
        "patternProperties": {"^x-": {"type": "boolean"}},
        "additionalProperties": {"type": "null"},
        "maxProperties": 4,
    },
    {
        "anyOf": [
            {"type": "string", "pattern": "^[a-f0-9]{2,6}$"},
            {"type": "array", "items": {"type": "integer"}, "minItems": 1, "maxItems": 3},
        ]
    },
    {"oneOf": [{"type": "integer", "multipleOf": 3}, {"type": "integer", "multipleOf": 5}]},
    {
        "$defs": {
            "point": {
                "type": "object",
                "properties": {"x": {"type": "integer"}, "y": {"type": "integer"}},
                "required": ["x", "y"],
                "additionalProperties": False,
            }
        },
        "type": "object",
        "properties": {"from": {"$ref": "#/$defs/point"}, "to": {"$ref": "#/$defs/point"}},
        "required": ["from"],
    },
    {
        "$schema": "http://json-schema.org/draft-07/schema#",
        "type": "array",
        "items": [{"type": "string", "format": "date"}, {"type": "boolean"}],
        "additionalItems": {"type": "number", "maximum": 10},
        "contains": {"type": "number", "minimum": 5},
    },
    {
        "type": "object",
        "properties": {"a": {"type": "string", "format": "uuid"}, "b": {"type": "string", "format": "ipv4"}},
        "dependentRequired": {"a": ["b"]},
    },
    {"type": "string", "minLength": 2, "maxLength": 40},
    {
        "type": "object",
        "properties": {
            "when": {"type": "string", "format": "date-time"},
            "n": {"type": ["integer", "null"], "not": {"const": 13}},
        },
    },
]

_SETTINGS = settings(max_examples=30, deadline=None, suppress_health_check=list(HealthCheck), database=None, derandomize=True)


def _validator(schema):
    cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    return cls(schema, format_checker=cls.FORMAT_CHECKER)


@pytest.mark.parametrize("index", range(len(SCHEMAS)))
def test_generated_instances_are_accepted(index):
    schema = SCHEMAS[index]
    grammar = json_schema_to_grammar(schema)
    reorder = Reorder(schema)
    validator = _validator(schema)

    @_SETTINGS
    @given(hypothesis_jsonschema.from_schema(schema))
    def check(instance):
        assume(validator.is_valid(instance))  # formats newer than draft 7 are unknown to the generator
        assert matches(grammar, json.dumps(reorder(instance))), instance

    check()


def _has_exponent(value) -> bool:
    """Whether json.dumps writes some number of the value in exponent form."""
    if isinstance(value, dict):
        return any(_has_exponent(v) for v in value.values())
    if isinstance(value, list):
        return any(_has_exponent(v) for v in value)
    return isinstance(value, float) and "e" in repr(value)


def _mutations(value):
    """Small edits of a JSON value, each returning a new value."""
    out = [None, True, "x", -7, 2.5, [], {}, [value], {"k": value}]
    if isinstance(value, dict):
        for key in value:
            out.append({k: v for k, v in value.items() if k != key})
            for other in _mutations(value[key])[:6]:
                out.append({**value, key: other})
        out.append({**value, "extra": 1})
    elif isinstance(value, list):
        if value:
            out.append(value[:-1])
            out.append(value + value[-1:])
            for other in _mutations(value[0])[:6]:
                out.append([other, *value[1:]])
    elif isinstance(value, str):
        out += [value + "z", value[:-1], value.upper(), value * 3, value + "\u00e9"]
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        out += [value + 1, value - 1, value * 10, value + 0.5, -value]
    return out


@pytest.mark.parametrize("index", range(len(SCHEMAS)))
def test_mutations_jsonschema_rejects_are_rejected(index):
    schema = SCHEMAS[index]
    grammar = json_schema_to_grammar(schema)
    validator = _validator(schema)
    reorder = Reorder(schema)

    @_SETTINGS
    @given(hypothesis_jsonschema.from_schema(schema), st.integers(min_value=0, max_value=10**6))
    def check(instance, pick):
        options = _mutations(instance)
        mutated = options[pick % len(options)]
        text = json.dumps(reorder(mutated))
        if not validator.is_valid(mutated):
            assert not matches(grammar, text), mutated
        elif not _has_exponent(mutated):  # exponent forms under multipleOf: a documented narrowing
            assert matches(grammar, text), mutated

    check()


_SMALL_VALUES = st.recursive(
    st.sampled_from([None, True, False, 0, 1, 1.0, 2.5, "", "a", "b"]),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.sampled_from(["a", "b", "c"]), inner, max_size=3),
    max_leaves=6,
)


@settings(_SETTINGS, max_examples=60)
@given(st.lists(_SMALL_VALUES, min_size=1, max_size=4), st.lists(_SMALL_VALUES, max_size=3))
def test_complements_of_enums_agree_with_jsonschema(enum, others):
    # ``not`` of an enum whose values nest arrays and objects: item counts or sets of keys no value has,
    # or the first item (key) where an instance leaves the values' trie. Any key order, so that every
    # text ``json.dumps`` writes counts; in schema order the grammar may only accept less.
    schema = {"not": {"enum": enum}}
    validator = _validator(schema)
    grammars = [json_schema_to_grammar(schema, key_order="any"), json_schema_to_grammar(schema)]
    candidates = [*enum, *others]
    for value in list(candidates):
        candidates += _mutations(value)
    for value in candidates:
        text, valid = json.dumps(value), validator.is_valid(value)
        assert matches(grammars[0], text) is valid, (enum, text)
        assert valid or not matches(grammars[1], text), (enum, text)


_SCALARS = st.sampled_from(
    [
        {"type": "string"},
        {"type": "integer", "minimum": 3},
        {"enum": [1, "a", None]},
        {"const": True},
        {"type": "number", "multipleOf": 0.25},
        {"type": "string", "pattern": "^a+b?$", "maxLength": 5},
        {},
        {"type": "string", "format": "date"},
        False,
        True,
        {"type": "null"},
    ]
)
_SCHEMAS = st.recursive(
    _SCALARS,
    lambda inner: st.one_of(
        st.builds(lambda s: {"type": "array", "items": s}, inner),
        st.builds(
            lambda s, n: {"type": "array", "items": s, "minItems": n, "maxItems": n + 2}, inner, st.integers(0, 3)
        ),
        st.builds(
            lambda d, r: {"type": "object", "properties": d, "required": r[: len(d)]},
            st.dictionaries(st.sampled_from("abcd"), inner, max_size=3),
            st.lists(st.sampled_from("abcd")),
        ),
        st.builds(lambda a, b: {"anyOf": [a, b]}, inner, inner),
        st.builds(lambda a, b: {"oneOf": [a, b]}, inner, inner),
        st.builds(lambda a, b: {"allOf": [a, b]}, inner, inner),
        st.builds(lambda a: {"not": a}, inner),
        st.builds(lambda a, b, c: {"if": a, "then": b, "else": c}, inner, inner, inner),
        st.builds(lambda a: {"type": "array", "items": a, "uniqueItems": True}, inner),
        st.builds(lambda a: {"$defs": {"x": a}, "$ref": "#/$defs/x"}, inner),
    ),
    max_leaves=8,
)


@settings(_SETTINGS, max_examples=60)
@given(_SCHEMAS)
def test_random_schema_shapes_compile_or_refuse_quickly(schema):
    start = time.perf_counter()
    try:
        grammar = json_schema_to_grammar(schema)
    except (SchemaError, LimitError):
        return
    assert time.perf_counter() - start < 5
    validator = _validator(schema)
    for value in [None, True, 0, 3, 0.25, "a", "ab", "2024-01-01", [], [1], {}, {"a": "x"}, {"a": 3, "b": None}]:
        if matches(grammar, json.dumps(Reorder(schema)(value))):
            assert validator.is_valid(value), value


# Formats the jsonschema checker here understands (rfc3339-validator, rfc3986-validator, rfc3987-syntax,
# fqdn, idna, isoduration installed): every string our regex admits must pass it.
_CHECKED_FORMATS = [
    "date",
    "time",
    "date-time",
    "duration",
    "email",
    "idn-email",
    "hostname",
    "idn-hostname",
    "ipv4",
    "ipv6",
    "uri",
    "uri-reference",
    "iri",
    "iri-reference",
    "uuid",
    "uri-template",
    "json-pointer",
    "relative-json-pointer",
    "regex",
]


@pytest.mark.parametrize("name", _CHECKED_FORMATS)
def test_format_regexes_are_sound(name):
    checker = jsonschema.Draft202012Validator.FORMAT_CHECKER
    if name not in checker.checkers:
        pytest.skip(f"jsonschema has no checker for {name} here")

    @_SETTINGS
    @given(st.from_regex(FORMATS[name].regex, fullmatch=True))
    def check(text):
        assert checker.conforms(text, name), text

    check()


@_SETTINGS
@given(st.from_regex(FORMATS["regex"].regex, fullmatch=True))
def test_regex_format_strings_are_patterns_in_both_dialects(text):
    # The ``regex`` format's subset is read by Python's ``re`` without a warning (nested sets, set
    # operations) and by banister's ECMA-262 parser, which enforces ``pattern`` with it.
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        re.compile(text)
    parse_pattern(text)


# Edits that take a string of a format out of it, or keep it in by a checker's lenient reading: a final
# newline (``$``), lowercase ``t``/``z`` (``upper()``), digits of other scripts, ligatures.
_EDIT_CHARS = st.sampled_from([*"0129aF:-.TtZz+ %[]/?#@\n", "\u0663", "\u017f", "\u00df", "\ufb06", "\u00e9"])


@pytest.mark.parametrize("name", [name for name in _CHECKED_FORMATS if FORMATS[name].outer])
def test_complements_of_narrowed_formats_are_sound(name):
    # ``not: {format: ...}`` of a format narrowed here is "does not match its outer pattern": every string
    # the checker accepts must match it, so no string the complement admits is of the format.
    checker = jsonschema.Draft202012Validator.FORMAT_CHECKER
    if name not in checker.checkers:
        pytest.skip(f"jsonschema has no checker for {name} here")
    outer = FORMATS[name].outer
    schema = {"type": "string", "not": {"format": name}}
    grammar = json_schema_to_grammar(schema)
    assert matches(grammar, json.dumps("~ ~"))  # the complement is not empty: it has no format's shape

    @settings(_SETTINGS, max_examples=150)
    @given(st.from_regex(FORMATS[name].regex, fullmatch=True),
           st.lists(st.tuples(st.integers(0, 80), _EDIT_CHARS, st.booleans()), max_size=3))
    def check(text, edits):
        for at, char, insert in edits:
            at %= len(text) + 1
            text = text[:at] + char + text[at + (0 if insert else 1):]
        for candidate in (text, text + "\n"):
            if checker.conforms(candidate, name):
                assert pattern_matches(outer, candidate), candidate
                assert not matches(grammar, json.dumps(candidate)), candidate

    check()


# ---------------------------------------------------------------------- generated schema shapes
#
# Schemas drawn from the keywords below (patterns from a small set without `$`, whose meaning differs
# between Python's re and ECMA-262 before a final newline; multipleOf values exact in binary, so
# jsonschema's float division agrees with exact arithmetic); instances from hypothesis-jsonschema where
# it can generate for the schema, a fixed pool, and mutations of both. jsonschema decides validity. The
# invariant: no false accept; a false reject only for a documented narrowing (a number in exponent form
# where bounds or multipleOf apply; unevaluated* whose annotations come from branches).

_NUMS = st.sampled_from([-3, -2.5, 0, 1, 2, 10, 100])
_PATTERNS = st.sampled_from(["^[a-c]", "^x", "[0-9]", "^(ab|c)+", "z"])
_VALUES = st.sampled_from([None, True, False, 0, 1, -2, 2.5, "", "a", "ab", "x1", "zz", [], [1], ["a"]])


def _with(base: dict, extra: dict) -> dict:
    return {**base, **{k: v for k, v in extra.items() if v is not None}}


def _opt(strategy):
    return st.none() | strategy


_LEAVES = st.one_of(
    st.builds(
        lambda lo, n, p: _with({"type": "string"}, {"minLength": lo, "maxLength": None if n is None else lo + n, "pattern": p}),
        st.integers(0, 3),
        _opt(st.integers(0, 4)),
        _opt(_PATTERNS),
    ),
    st.builds(
        lambda t, lo, hi, ex, m: _with(
            {"type": t}, {"minimum": lo, "maximum": hi, "exclusiveMinimum" if ex else "exclusiveMaximum": ex, "multipleOf": m}
        ),
        st.sampled_from(["integer", "number"]),
        _opt(_NUMS),
        _opt(_NUMS),
        _opt(_NUMS),
        _opt(st.sampled_from([2, 3, 0.5, 0.25])),
    ),
    st.builds(lambda vs: {"enum": vs}, st.lists(_VALUES, min_size=1, max_size=4, unique_by=json.dumps)),
    st.builds(lambda v: {"const": v}, _VALUES),
    st.sampled_from(
        [{}, True, False, {"type": "boolean"}, {"type": "null"}, {"type": ["string", "null"]}, {"$ref": "#/$defs/d"}]
    ),
)


def _object(props, required, extra, lo, hi):
    schema: dict = {"type": "object", "properties": props, "required": [r for r in required if r in props]}
    if extra is not None:
        schema["additionalProperties"] = extra
    return _with(schema, {"minProperties": lo, "maxProperties": hi})


def _array(items, prefix, lo, n):
    schema: dict = {"type": "array"}
    if prefix:
        schema["prefixItems"] = prefix
    if items is not None:
        schema["items"] = items
    return _with(schema, {"minItems": lo, "maxItems": None if n is None else (lo or 0) + n})


_SHAPES = st.recursive(
    _LEAVES,
    lambda inner: st.one_of(
        st.builds(
            _object,
            st.dictionaries(st.sampled_from(["a", "b", "c"]), inner, max_size=3),
            st.lists(st.sampled_from(["a", "b", "c"]), max_size=3, unique=True),
            _opt(st.booleans() | inner),
            _opt(st.integers(0, 2)),
            _opt(st.integers(1, 3)),
        ),
        st.builds(
            _array,
            _opt(inner),
            st.lists(inner, max_size=2),
            _opt(st.integers(0, 2)),
            _opt(st.integers(0, 2)),
        ),
        st.builds(lambda a, b: {"anyOf": [a, b]}, inner, inner),
        st.builds(lambda a, b: {"oneOf": [a, b]}, inner, inner),
        st.builds(lambda a, b: {"allOf": [a, b]}, inner, inner),
        st.builds(lambda a: {"not": a}, inner),
        st.builds(
            lambda a, key, u: {**a, key: u} if isinstance(a, dict) else a,
            inner,
            st.sampled_from(["unevaluatedProperties", "unevaluatedItems"]),
            st.sampled_from([False, {"type": "integer"}]),
        ),
    ),
    max_leaves=6,
)
_GENERATED = st.builds(
    lambda defs, body: {"$defs": {"d": defs}, **body} if isinstance(body, dict) else body,
    _SHAPES.filter(lambda s: s != {"$ref": "#/$defs/d"}),
    _SHAPES,
)
_POOL = [None, True, 0, 1, 3, -2.5, 0.25, 100, 1.5, "", "a", "ab", "abc", "x9", [], [1], ["a", 2], {}, {"a": 1}]


@settings(_SETTINGS, max_examples=80)
@given(_GENERATED, st.data())
def test_generated_schema_shapes_agree_with_jsonschema(schema, data):
    try:
        grammar = json_schema_to_grammar(schema)
    except (SchemaError, LimitError):
        return  # refusing is allowed; accepting wrongly is not
    validator = _validator(schema)
    reorder = Reorder(schema)
    candidates = list(_POOL)
    try:
        instances = hypothesis_jsonschema.from_schema(schema)
    except Exception:  # noqa: BLE001 - a schema hypothesis-jsonschema can't generate for (recursive $ref...)
        instances = None
    if instances is not None and not instances.is_empty:
        candidates += data.draw(st.lists(instances, max_size=2))
    for value in list(candidates):
        candidates += _mutations(value)[:8]
    for value in candidates:
        text = json.dumps(reorder(value))
        try:
            valid = validator.is_valid(json.loads(text))
        except RecursionError:
            continue
        if matches(grammar, text):
            assert valid, (schema, text)
        elif valid:
            assert _has_exponent(value) or "unevaluated" in json.dumps(schema), (schema, text)
