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
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from test_json_schema_helpers import matches

from banister.grammar.json_build import SchemaSettings
from banister.grammar.json_schema import json_schema_to_grammar
from banister.grammar.json_text import json_char, json_char_parts
from banister.grammar.regex_text import subtract
from banister.regex import compile_regex
from banister.regex.charset import normalize

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


OPTIONS = ["verbose", "debug", "quiet", "list-installed", "list-available", "version", "reset", "runtime-id",
           "input-file", "namespace", "license-header", "add-credentials", "package-name", "package-version",
           "sync-methods", "payload-flattening-threshold", "override-client-name", "use-internal-constructors",
           "models-name", "output-file", "message-format", "azure-validator", "openapi-type", "model-validator",
           "semantic-validator", "csharp", "nodejs", "python", "java", "ruby", "go", "typescript"]
OPTIONS_SCHEMA = {
    "type": "object",
    "properties": {name: {"type": "boolean"} for name in OPTIONS},
    "patternProperties": {"^sdkrel:": {"type": "string"}},
    "additionalProperties": {"type": "integer"},
}
OPTION_KEYS = st.one_of(
    st.sampled_from(OPTIONS),
    st.builds(lambda name, cut, tail: name[:cut] + tail, st.sampled_from(OPTIONS), st.integers(0, 12),
              st.sampled_from(["", "s", "-x", "é", "\"", "\\", "\n", "/"])),
    st.builds("sdkrel:{}".format, st.text("ab:é", max_size=3)),
    st.text("sdkrel:-aé\"", max_size=8),
)


@cache
def options_grammars():
    """OPTIONS_SCHEMA's grammar under the default limit and under a limit of 256 byte-level states
    (compiled once, not for each drawn example)."""
    return (json_schema_to_grammar(OPTIONS_SCHEMA),
            json_schema_to_grammar(OPTIONS_SCHEMA, settings=SchemaSettings(max_automaton_lexeme_states=256)))


@settings(max_examples=40, deadline=None)
@given(keys=st.lists(OPTION_KEYS, min_size=1, max_size=3, unique=True),
       values=st.lists(st.sampled_from([True, 1, "s"]), min_size=3, max_size=3))
def test_big_key_automaton_is_one_lexeme(keys, values):
    """Every key but 32 names and those matching a pattern: an automaton of hundreds of states, whose
    states read escapes and non-ASCII characters alike, so its byte-level DFA stays about as small. It is
    one lexeme (it used to be one rule per state, a lexeme per character); with too small a limit for its
    byte-level states it is rules again. Both agree with the `jsonschema` package."""
    as_lexeme, as_rules = options_grammars()
    assert any(lex.pattern.startswith('"(?@') for lex in as_lexeme.lexemes)
    assert not any("(?@" in lex.pattern for lex in as_rules.lexemes)
    instance = dict(zip(keys, values))
    named_first = sorted(instance, key=lambda k: OPTIONS.index(k) if k in OPTIONS else len(OPTIONS))  # schema order
    text = json.dumps({k: instance[k] for k in named_first}, ensure_ascii=False)
    valid = jsonschema.Draft202012Validator(OPTIONS_SCHEMA).is_valid(instance)
    assert matches(as_lexeme, text) is valid, text
    assert matches(as_rules, text) is valid, text


COUNTED = {"type": "string", "pattern": "[a-z_.-]+", "minLength": 3, "maxLength": 40}


@settings(max_examples=30, deadline=None)
@given(text=st.lists(st.sampled_from(list("ab_.-é A") + ["\\u00e9", "\\n", "\\\"", "\\/"]), max_size=45).map("".join))
def test_counted_automaton_too_big_for_one_lexeme_is_rules(text):
    """A pattern counted up to a length reads every escape into a different count: each state has its
    own escape paths, so its byte-level DFA is some twenty times its states. Past the limit it is one
    rule per state; within it one lexeme; both agree with the `jsonschema` package."""
    as_rules = json_schema_to_grammar(COUNTED, settings=SchemaSettings(max_automaton_lexeme_states=1000))
    as_lexeme = json_schema_to_grammar(COUNTED)
    assert not any("(?@" in lex.pattern for lex in as_rules.lexemes)
    assert any("(?@" in lex.pattern for lex in as_lexeme.lexemes)
    document = '"' + text + '"'
    try:
        valid = jsonschema.Draft202012Validator(COUNTED).is_valid(json.loads(document))
    except json.JSONDecodeError:
        valid = False
    assert matches(as_rules, document) is valid, document
    assert matches(as_lexeme, document) is valid, document


SURROGATES = ((0xD800, 0xDFFF),)
CODE_POINTS = st.one_of(st.integers(0, 0x7F), st.integers(0x80, 0x800), st.integers(0xD700, 0xE100),
                        st.integers(0xFFF0, 0x10FFFF))


@settings(max_examples=60, deadline=None)
@given(ranges=st.lists(st.tuples(CODE_POINTS, st.integers(0, 300)), min_size=1, max_size=4),
       chars=st.lists(CODE_POINTS, min_size=10, max_size=10))
def test_json_char_parts_union_is_json_char(ranges, chars):
    """The two regexes of ``json_char_parts`` match together what ``json_char`` matches: every code
    point raw and in each escaped form, in or out of the set."""
    normal = subtract(normalize([(lo, min(lo + width, 0x10FFFF)) for lo, width in ranges]), SURROGATES)
    assume(normal)  # text holds no surrogate: automata have no edge over surrogates alone
    whole = compile_regex(json_char(normal))
    parts = compile_regex("(?:" + "|".join(json_char_parts(normal)) + ")")
    for cp in chars:
        forms = [json.dumps(chr(cp), ensure_ascii=False)[1:-1], json.dumps(chr(cp))[1:-1], f"\\u{cp:04X}" if cp < 0x10000 else ""]
        if 0xD800 <= cp <= 0xDFFF:
            forms = [f"\\u{cp:04x}"]  # a lone surrogate can only be written escaped
        for form in forms:
            data = form.encode("utf-8", "surrogatepass")
            assert parts.matches(data) is whole.matches(data), form
