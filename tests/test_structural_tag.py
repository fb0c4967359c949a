"""Structural tags (free text around constrained tags): Compiler.structural_tag.

Oracles written independently of the grammar: a scan of the text for the first trigger, `json` +
`jsonschema` for the tag bodies, and plain substring checks for the trigger regexes.
"""

from __future__ import annotations

import json
import random

import jsonschema
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_json_distinct_items import advancing

from banister import Compiler, Matcher, StructuralTagError, Tag, allocate_token_bitmask
from banister.errors import GrammarError, SchemaError
from banister.grammar.ebnf import parse_gbnf
from banister.grammar.structural import free_text_regex, until_trigger_regex
from banister.mask.bitmask import unpack_bitmask
from banister.parser.distinct import DistinctItems
from banister.regex import compile_regex
from banister.vocab.named import load_named

CITY = {
    "type": "object",
    "properties": {"city": {"type": "string", "maxLength": 6}},
    "required": ["city"],
    "additionalProperties": False,
}
COUNT = {"type": "integer", "minimum": 0}
TAGS = [
    Tag(begin='<tool_call>{"name": "w", "arguments": ', schema=CITY, end="}</tool_call>"),
    Tag(begin='<tool_call>{"name": "n", "arguments": ', schema=COUNT, end="}</tool_call>"),
    Tag(begin="<j>", schema=None, end="</j>"),
]
TRIGGERS = ["<tool_call>", "<j>"]
OPTIONS = {"whitespace": "compact"}


@pytest.fixture(scope="module")
def compiler(gpt2):
    return Compiler(gpt2.vocab)


def _compile(compiler, **flags):
    return compiler.structural_tag(TAGS, triggers=TRIGGERS, json_options=OPTIONS, **flags)


# -- the reference checker ----------------------------------------------------------------------------


def _compact(body: str) -> bool:
    """No whitespace outside strings (the compact whitespace option)."""
    in_string = escaped = False
    for ch in body:
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch in " \t\n\r":
            return False
    return True


def _body_ok(tag: Tag, body: str) -> bool:
    try:
        value = json.loads(body)
    except ValueError:
        return False
    if not _compact(body):
        return False
    if tag.schema is None:
        return True
    return jsonschema.Draft202012Validator(tag.schema).is_valid(value)


def reference(text: str, *, at_least_one: bool = False, stop_after_first: bool = False, tags=TAGS,
              triggers=TRIGGERS) -> bool:
    """Whether ``text`` is a complete output: free text, and from the first trigger on one tag, ..."""

    def rest(pos: int, count: int) -> bool:
        if stop_after_first and count:
            return pos == len(text)
        hits = [(text.find(t, pos), t) for t in triggers if text.find(t, pos) >= 0]
        if not hits:
            return count > 0 or not at_least_one
        start, trigger = min(hits)
        for tag in tags:
            if not tag.begin.startswith(trigger) or not text.startswith(tag.begin, start):
                continue
            body_start = start + len(tag.begin)
            for end_at in range(body_start, len(text) + 1):
                if text.startswith(tag.end, end_at) and _body_ok(tag, text[body_start:end_at]):
                    if rest(end_at + len(tag.end), count + 1):
                        return True
        return False

    return rest(0, 0)


def _accepts(compiled, text: str) -> bool:
    m = Matcher(compiled)
    return m.accept_string(text) and m.is_accepting()


# -- generated texts ----------------------------------------------------------------------------------

FREE_PIECES = ["a", " ", "\n", "é", "日本", "<", ">", "tool", "_call", "<tool", "_call>", "<j", "j>", "</j", "}"]
BODIES = st.one_of(
    st.fixed_dictionaries({"city": st.text("abcé\"\\ ", max_size=8)}),
    st.integers(-3, 1000),
    st.recursive(st.none() | st.booleans() | st.integers(-5, 5) | st.text("xy\"", max_size=3),
                 lambda kids: st.lists(kids, max_size=3) | st.dictionaries(st.text("ab", max_size=2), kids, max_size=2),
                 max_leaves=5),
)


@st.composite
def outputs(draw):
    parts = []
    for _ in range(draw(st.integers(0, 3))):
        parts.append("".join(draw(st.lists(st.sampled_from(FREE_PIECES), max_size=5))))
        tag = draw(st.sampled_from(TAGS))
        body = json.dumps(draw(BODIES), separators=(",", ":"), ensure_ascii=draw(st.booleans()))
        piece = tag.begin + body + tag.end
        cut = draw(st.sampled_from([None, "drop", "truncate"]))
        if cut == "drop" and piece:
            i = draw(st.integers(0, len(piece) - 1))
            piece = piece[:i] + piece[i + 1:]
        elif cut == "truncate":
            piece = piece[: draw(st.integers(0, len(piece)))]
        parts.append(piece)
    parts.append("".join(draw(st.lists(st.sampled_from(FREE_PIECES), max_size=5))))
    return "".join(parts)


@settings(max_examples=250, deadline=None, suppress_health_check=list(HealthCheck))
@given(text=outputs(), flags=st.sampled_from([(False, False), (True, False), (False, True), (True, True)]))
def test_acceptance_matches_the_reference(compiler, text, flags):
    at_least_one, stop_after_first = flags
    compiled = _compile(compiler, at_least_one=at_least_one, stop_after_first=stop_after_first)
    expected = reference(text, at_least_one=at_least_one, stop_after_first=stop_after_first)
    assert _accepts(compiled, text) == expected, text


def test_examples(compiler):
    compiled = _compile(compiler)
    ok = [
        "",
        "plain text, even < and > and <tool and _call>",
        'Let me check. <tool_call>{"name": "w", "arguments": {"city":"Paris"}}</tool_call> Done.',
        '<tool_call>{"name": "n", "arguments": 3}</tool_call><tool_call>{"name": "n", "arguments": 0}</tool_call>',
        "<j>[1,{\"a\":null}]</j> and more <j>true</j>",
    ]
    bad = [
        "text <tool_call> more text",  # a trigger must start a tag
        '<tool_call>{"name": "x", "arguments": 1}</tool_call>',  # no tag begins like this
        '<tool_call>{"name": "n", "arguments": -1}</tool_call>',  # schema: minimum 0
        '<tool_call>{"name": "w", "arguments": {"city":"Paris"}}',  # EOS inside a tag
        "<j>[1, 2]</j>",  # compact whitespace
    ]
    for text in ok:
        assert reference(text) and _accepts(compiled, text), text
    for text in bad:
        assert not reference(text) and not _accepts(compiled, text), text


def test_eos_rules(compiler):
    call = '<tool_call>{"name": "n", "arguments": 1}</tool_call>'
    plain = _compile(compiler)
    required = _compile(compiler, at_least_one=True)
    first = _compile(compiler, stop_after_first=True)
    m = Matcher(required)
    assert not m.is_accepting() and m.accept_string("preamble ") and not m.is_accepting()
    assert m.accept_string(call) and m.is_accepting() and m.accept_string(" after") and m.is_accepting()
    m = Matcher(first)
    assert m.is_accepting() and m.accept_string("thinking " + call)
    assert m.is_accepting() and m.is_terminated() and m.status(" more") == "dead"
    m = Matcher(plain)
    assert m.accept_string("x <tool_call>") and not m.is_accepting() and not m.is_terminated()
    # The mask allows EOS exactly when the matcher is accepting.
    vocab = plain.vocab
    eos = vocab.eos_token_ids[0]
    for compiled, text in [(plain, "hi"), (plain, "hi <j>1"), (required, "hi"), (required, call)]:
        m = Matcher(compiled)
        assert m.accept_string(text)
        assert _mask(m, vocab.vocab_size)[eos] == m.is_accepting()


def _mask(matcher, vocab_size):
    bitmask = allocate_token_bitmask(1, vocab_size)
    matcher.fill_next_token_bitmask(bitmask)
    return unpack_bitmask(bitmask, vocab_size)[0]


def test_trigger_split_across_tokens_and_inside_a_token(compiler, gpt2):
    compiled = _compile(compiler)
    vocab = gpt2.vocab
    ids = {vocab.tokens[i]: i for i in range(vocab.vocab_size) if vocab.is_matchable(i)}
    for pieces in ([b" <", b"tool", b"_", b"call", b">"], [b"<", b"j", b">"]):
        if all(p in ids for p in pieces):
            m = Matcher(compiled)
            assert m.accept_token(ids[b"Hi"])
            for p in pieces:
                assert _mask(m, vocab.vocab_size)[ids[p]]
                assert m.accept_token(ids[p])
            assert not m.is_accepting()  # inside a tag now
            assert m.status(" free text") == "dead"
    # A token that begins with ordinary text and ends inside the trigger.
    m = Matcher(compiled)
    assert m.accept_string("x <tool") and m.accept_string("_call>") and not m.is_accepting()
    assert m.status('{"name": "n", "arguments": 7}</tool_call>') == "complete"
    # Tokens that complete a trigger in their middle: allowed only if what follows fits the tag.
    ing = compiler.structural_tag([Tag(begin="ing", end=".", schema={"type": "integer"})])
    m = Matcher(ing)
    allowed = _mask(m, vocab.vocab_size)
    hits = [i for t, i in ids.items() if b"ing" in t]
    assert len(hits) > 100
    for i in hits:
        token = vocab.tokens[i]
        tail = token.split(b"ing", 1)[1]
        fits = tail == b"" or tail == b"-" or tail[:1].isdigit() and (tail.isdigit() and tail[:1] != b"0" or tail == b"0")
        assert allowed[i] == (m.status(token) != "dead") == fits, token
    assert allowed[ids[b" doing"]] and not allowed[ids[b"ings"]]


@pytest.mark.parametrize("name", ["gpt2", "llama3"])
def test_real_tokenizations_walk_through_the_masks(name):
    named = load_named(name)
    compiler = Compiler(named.vocab)
    compiled = _compile(compiler, at_least_one=True)
    text = ('Sure, I\'ll look that up: <tool_call>{"name": "w", "arguments": {"city":"Lyon"}}</tool_call>\n'
            "Also <j>{\"k\":[1,2,null]}</j> — fin. 日本")
    assert reference(text, at_least_one=True)
    ids = named.encode(text)
    m = Matcher(compiled)
    eos = named.vocab.eos_token_ids[0]
    rng = random.Random(7)
    for token in ids:
        allowed = _mask(m, named.vocab.vocab_size)
        assert allowed[token], named.vocab.tokens[token]
        assert allowed[eos] == m.is_accepting()
        _check_mask_agrees(m, allowed, rng, named.vocab)
        assert m.accept_token(token)
    assert m.is_accepting()


def _check_mask_agrees(m, allowed, rng, vocab):
    allowed_ids = np.flatnonzero(allowed)
    forbidden_ids = np.flatnonzero(~allowed)
    probes = [int(t) for t in rng.sample(list(allowed_ids), min(25, len(allowed_ids)))]
    refused = [int(t) for t in rng.sample(list(forbidden_ids), min(25, len(forbidden_ids)))]
    for t in probes:
        assert m.accept_token(t), vocab.tokens[t]
        m.rollback(1)
    for t in refused:
        assert not m.accept_token(t), vocab.tokens[t] if t < len(vocab.tokens) else t


def test_random_walk_mask_agrees_with_accept(compiler, gpt2):
    vocab = gpt2.vocab
    rng = random.Random(3)
    for flags in ({}, {"stop_after_first": True}):
        compiled = _compile(compiler, **flags)
        m = Matcher(compiled)
        prefix = ["Hello", " <", "j", ">", "[", "1"]
        for step in range(14):
            allowed = _mask(m, vocab.vocab_size)
            _check_mask_agrees(m, allowed, rng, vocab)
            candidates = [i for i in np.flatnonzero(allowed) if i not in vocab.eos_token_ids]
            if not candidates:
                break
            forced = prefix[step] if step < len(prefix) else None
            token = next((i for i in candidates if vocab.tokens[i] == (forced or "").encode()), None)
            assert m.accept_token(int(token if token is not None else rng.choice(candidates)))


# -- the trigger regexes ------------------------------------------------------------------------------

TRIGGER_SETS = st.lists(st.text("abé<", min_size=1, max_size=4), min_size=1, max_size=3, unique=True).filter(
    lambda ts: not any(u != v and u in v for u in ts for v in ts)
)


@settings(max_examples=60, deadline=None)
@given(triggers=TRIGGER_SETS, texts=st.lists(st.text("abé<x", max_size=10), min_size=20, max_size=20))
def test_trigger_regexes_match_a_substring_scan(triggers, texts):
    free = compile_regex(free_text_regex(triggers))
    until = {t: compile_regex(until_trigger_regex(t, triggers)) for t in triggers}
    for text in texts:
        data = text.encode()
        assert free.matches(data) == (bool(text) and not any(t in text for t in triggers)), (triggers, text)
        for t, dfa in until.items():
            expected = text.endswith(t) and not any(u in text[:-1] for u in triggers)
            assert dfa.matches(data) == expected, (triggers, t, text)


# -- arguments ----------------------------------------------------------------------------------------


def test_default_triggers_are_the_begins(compiler):
    compiled = compiler.structural_tag([Tag(begin="<a>", end="</a>", schema={"type": "integer"})])
    assert _accepts(compiled, "x <a>12</a> y") and not _accepts(compiled, "x <a>true</a>")
    assert _accepts(compiled, "x <b>true</b>")


def test_grammar_bodies_and_json_options(compiler):
    body = parse_gbnf('root ::= "yes" | "no"')
    compiled = compiler.structural_tag([Tag("<answer>", "</answer>", grammar=body)])
    assert _accepts(compiled, "Thinking... <answer>yes</answer>")
    assert not _accepts(compiled, "<answer>maybe</answer>")
    strict = compiler.structural_tag([Tag("<c>", "</c>", schema={"type": "object", "properties": {"a": {}}})],
                                     json_options={"strict": True, "whitespace": "pretty"})
    assert _accepts(strict, '<c>{"a": 1}</c>') and not _accepts(strict, '<c>{"a": 1, "b": 2}</c>')
    # A schema's $ref reaches the documents given as resources; a body of any JSON has no use for them.
    uri = "https://example.com/point.json"
    point = {"type": "object", "properties": {"x": {"type": "integer"}}, "required": ["x"]}
    tags = [Tag("<p>", "</p>", schema={"$ref": uri}), Tag("<j>", "</j>")]
    linked = compiler.structural_tag(tags, json_options={"resources": {uri: point}})
    assert _accepts(linked, '<p>{"x": 1}</p><j>[1]</j>') and not _accepts(linked, '<p>{"x": "1"}</p>')


@pytest.mark.parametrize(
    "tags, triggers, error",
    [
        ([], None, StructuralTagError),
        ([Tag("<a>", "</a>")], [""], StructuralTagError),
        ([Tag("<a>", "</a>")], ["<b"], StructuralTagError),  # begin starts with no trigger
        ([Tag("<a>", "</a>"), Tag("<a>", "</a>")], None, StructuralTagError),  # duplicate tag
        ([Tag("<a>", "</a>")], ["<a", "<a"], StructuralTagError),  # duplicate trigger
        ([Tag("<ab>", "</a>")], ["<a", "a"], StructuralTagError),  # a trigger inside another
        ([Tag("<a>", "</a>"), Tag("<a>x", "</a>")], None, StructuralTagError),
        ([Tag("", "</a>")], None, StructuralTagError),
        ([Tag("<a>", "</a>", schema={}, grammar=parse_gbnf('root ::= "x"'))], None, StructuralTagError),
        ([Tag("<a>", "</a>", schema={"type": "nope"})], None, SchemaError),
        (["<a>"], None, TypeError),
        ([Tag("<a>", "</a>")], "<a", TypeError),
    ],
)
def test_bad_arguments_raise_typed_errors(compiler, tags, triggers, error):
    with pytest.raises(error):
        compiler.structural_tag(tags, triggers=triggers)
    assert issubclass(StructuralTagError, GrammarError)


def test_compiler_caches_structural_tags(compiler):
    assert _compile(compiler) is _compile(compiler)
    assert _compile(compiler) is not _compile(compiler, at_least_one=True)


def test_tags_whose_schemas_differ_in_key_order_keep_their_own_order(compiler):
    props = {"a": {"type": "integer"}, "b": {"type": "integer"}}
    tags = [Tag(f"<{n}>", f"</{n}>", schema={"type": "object", "properties": p, "required": ["a", "b"],
                                               "additionalProperties": False})
            for n, p in (("x", props), ("y", dict(reversed(props.items()))))]
    compiled = compiler.structural_tag(tags)
    assert _accepts(compiled, '<x>{"a":1,"b":2}</x><y>{"b":1,"a":2}</y>')
    assert not _accepts(compiled, '<y>{"a":1,"b":2}</y>')


def test_a_trigger_no_tag_uses_is_forbidden(compiler):
    compiled = compiler.structural_tag([Tag("<a>", "</a>", schema={"type": "integer"})], triggers=["<a>", "STOP"])
    assert _accepts(compiled, "x <a>1</a> y") and not _accepts(compiled, "x STOP y")
    assert _accepts(compiled, "x STO P y")


def test_triggers_may_be_any_iterable(compiler):
    tags = [Tag("<a>", "</a>", schema={"type": "integer"}), Tag("<b>", "</b>", schema={"type": "integer"})]
    compiled = compiler.structural_tag(tags, triggers=(t for t in ["<a>", "<b>"]))
    assert _accepts(compiled, "<a>1</a><b>2</b>") and not _accepts(compiled, "<b>x</b>")


# -- repeats in tag bodies (uniqueItems) ----------------------------------------------------------------

UNIQUE = {"type": "object", "properties": {
    "tags": {"type": "array", "items": {"type": "string"}, "uniqueItems": True},
    "rows": {"type": "array", "items": {"type": "object"}, "uniqueItems": True},
}}
UNIQUE_TAGS = [Tag(begin='<tool_call>{"name": "u", "arguments": ', schema=UNIQUE, end="}</tool_call>")]
# Free text that a JSON reader would take for strings and containers left open or closed.
JSON_LIKE_PIECES = ['"', "[", "]", "{", "}", "\\", "a", " ", "<tool", "_call>", "</tool_call>"]


@st.composite
def unique_outputs(draw):
    parts = []
    for _ in range(draw(st.integers(0, 3))):
        parts.append("".join(draw(st.lists(st.sampled_from(JSON_LIKE_PIECES), max_size=5))))
        body = draw(st.fixed_dictionaries({}, optional={
            "tags": st.lists(st.sampled_from(["a", "b", "[", '"']), max_size=3),
            "rows": st.lists(st.dictionaries(st.sampled_from(["k", "j"]), st.sampled_from([1, 1.0, True, "x"]),
                                             max_size=2), max_size=3),
        }))
        body = {k: body[k] for k in UNIQUE["properties"] if k in body}  # in schema order
        piece = UNIQUE_TAGS[0].begin + json.dumps(body, separators=(",", ":")) + UNIQUE_TAGS[0].end
        if draw(st.booleans()):
            piece = piece[: draw(st.integers(0, len(piece)))]
        parts.append(piece)
    parts.append("".join(draw(st.lists(st.sampled_from(JSON_LIKE_PIECES), max_size=5))))
    return "".join(parts)


@pytest.mark.parametrize("triggers", [["<tool_call>"], None])  # None: the whole begin is the trigger
@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=unique_outputs())
def test_tag_bodies_hold_no_repeats_whatever_the_free_text_holds(compiler, triggers, text):
    compiled = compiler.structural_tag(UNIQUE_TAGS, triggers=triggers, json_options=OPTIONS)
    assert isinstance(compiled.automaton, DistinctItems)
    expected = reference(text, tags=UNIQUE_TAGS, triggers=triggers or [UNIQUE_TAGS[0].begin])
    assert _accepts(compiled, text) == expected, text


@pytest.mark.parametrize("prefix", [
    'He said "hi [{ <tool_call>{"name": "u", "arguments": {"tags": ["a", "b", "a',
    'x"]} <tool_call>{"name": "u", "arguments": {"rows": [{"k": 1}, {"k": 1',
    '<tool_call>{"name": "u", "arguments": {}}</tool_call> "[ <tool_call>{"name": "u", "arguments": {"tags": ["a", "a',
])
def test_masks_in_tag_bodies_leave_out_repeats(compiler, gpt2, prefix):
    vocab = gpt2.vocab
    compiled = compiler.structural_tag(UNIQUE_TAGS, triggers=["<tool_call>"])
    m = Matcher(compiled)
    assert m.accept_string(prefix)
    allowed = {int(t) for t in np.flatnonzero(_mask(m, vocab.vocab_size))}
    assert allowed == advancing(vocab, compiled.automaton, m.state)
    assert advancing(vocab, compiled.automaton.automaton, m.state[0]) - allowed  # the grammar alone would repeat


@pytest.mark.parametrize("tags", [
    [Tag(begin="<u>", schema=UNIQUE, end="</u>")],  # the begin opens no container: the body's end is unknown
    [Tag(begin="<u>[", schema=UNIQUE, end="]<u>")],  # the end holds the trigger
    [UNIQUE_TAGS[0], Tag(begin="<tool_call>g", grammar=parse_gbnf('root ::= "[" '), end="")],  # a grammar body
])
def test_repeats_are_refused_where_tags_cannot_be_told_from_free_text(compiler, tags):
    with pytest.raises(SchemaError, match="uniqueItems"):
        compiler.structural_tag(tags)


def test_the_warm_cache_keeps_the_triggers(gpt2, tmp_path):
    text = '"<tool_call>{"name": "u", "arguments": {"tags": ["a", "%s"]}}</tool_call>'
    for _ in range(2):  # the second compile reads the grammar back
        compiled = Compiler(gpt2.vocab, cache_dir=tmp_path, cache_size=0).structural_tag(UNIQUE_TAGS)
        assert compiled.automaton.initial[1].free
        assert _accepts(compiled, text % "b") and not _accepts(compiled, text % "a")
