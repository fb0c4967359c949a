"""benchmarks/fuzz_generate.py: random generations under the masks of MaskBench's and the
JSON-Schema-Test-Suite's schemas, checked by the ``jsonschema`` package, and under Lark grammars, checked
by the ``lark`` package. Samples run here with no wrong answer; the whole split is in the docs."""

from __future__ import annotations

import functools
import importlib.util
import json
import random
from pathlib import Path

import pytest
from shared_data import JSON_SCHEMA_TEST_SUITE
from test_bench_maskbench import _run_benchmark
from test_ebnf_lark import LALR_AGREES, grammar, lark_accepts, lark_parser

from banister import Compiler, Matcher, allocate_token_bitmask
from banister.vocab.named import load_named

SCRIPT = Path(__file__).parent.parent / "benchmarks" / "fuzz_generate.py"


@functools.cache
def _script():
    spec = importlib.util.spec_from_file_location("fuzz_generate", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("schema, text, expected", [
    ({"type": "object", "minProperties": 2, "additionalProperties": {"type": "integer"}}, '{"a": 1, "a": 2}',
     "repeated key"),
    ({"type": "object", "minProperties": 2, "additionalProperties": {"type": "integer"}}, '{"a": 1, "a": "x"}',
     "unexplained"),
    ({"type": "string", "pattern": "^\\s$"}, '"\\ufeff"', "regex dialect"),
    ({"type": "string", "pattern": "^\\s$"}, '"x"', "unexplained"),
    ({"type": "string", "pattern": "^\\W$"}, '"\u30a1"', "regex dialect"),
    ({"type": "string", "pattern": "^\\W$"}, '"a"', "unexplained"),
    ({"patternProperties": {"^.+$": {"type": "string"}}}, '{"\\r": 1}', "regex dialect"),  # ECMA's . stops at CR
    ({"patternProperties": {"^.+$": {"type": "string"}}}, '{"a": 1}', "unexplained"),
    ({"type": "string", "pattern": "^\\cC$"}, '"\\u0003"', "no Python regex"),
    ({"enum": [1e308]}, "1" + "0" * 308, "double rounding"),
    ({"enum": [1e308]}, "2" + "0" * 308, "unexplained"),
    ({"allOf": [{"enum": [1e308]}, {"not": {"type": "integer", "multipleOf": 0.123456789}}]}, "1" + "0" * 308,
     "double rounding"),
    ({"allOf": [{"enum": [1e308]}, {"not": {"type": "integer", "multipleOf": 0.5}}]}, "1" + "0" * 308,
     "unexplained"),
    ({"type": "string", "format": "date"}, '"2024-02-30"', "unexplained"),
    ({"type": "string", "format": "date"}, '"2024-02-29"', "valid"),
])
def test_the_verdict_names_a_documented_difference_only_where_it_explains_the_rejection(schema, text, expected):
    """A rejection is put down to a difference the docs name only when taking that difference away makes
    ``jsonschema`` accept the text; any other rejection (formats asserted) stays unexplained."""
    assert _script().verdict(schema, text) == expected


@pytest.mark.parametrize("source", ["maskbench", "suite"])
def test_random_generations_are_valid(tmp_path, source):
    """Over a sample of MaskBench's schemas and over the JSON-Schema-Test-Suite's, every finished random
    generation is valid under ``jsonschema`` (or differs only as the docs say), every allowed token is
    accepted, and no state short of the end allows nothing."""
    if source == "maskbench":
        data = ["--sample", "80"]
    elif JSON_SCHEMA_TEST_SUITE.exists():
        data = ["--suite", str(JSON_SCHEMA_TEST_SUITE)]
    else:
        pytest.skip("the JSON-Schema-Test-Suite is not present")
    out = tmp_path / "fuzz.json"
    _run_benchmark("fuzz_generate.py", *data, "--tokenizer", "gpt2", "--walks", "2", "--seed", "5", "--json", str(out))
    found = json.loads(out.read_text())
    counts = found["counts"]
    assert found["wrong"] == [], found["wrong"][:3]
    assert counts["schemas"] >= 70 and counts["done"] >= 100, counts
    assert counts.get("valid", 0) >= 0.9 * counts["done"], counts


@functools.cache
def _gpt2_tokens():
    """GPT-2's vocabulary, its tokens' bytes and which hold a character that ends something in these
    grammars (a string, a bracket, a CSV row)."""
    vocab = load_named("gpt2").vocab
    return (vocab, *_script().token_texts(vocab, b'"]}),\n'))


@pytest.mark.parametrize("relative", LALR_AGREES)
def test_random_generations_under_lark_grammars_are_what_lark_parses(relative):
    """The same random generation (``walk``) under the masks of the Lark grammars whose language the
    ``lark`` package reads as banister does: every allowed token is accepted, no state short of the end
    allows nothing, and ``lark``'s own parser accepts every finished text."""
    vocab, texts, closing = _gpt2_tokens()
    compiled = Compiler(vocab).grammar_ir(grammar(relative))
    theirs = lark_parser(relative)
    bitmask = allocate_token_bitmask(1, vocab.vocab_size)
    rng = random.Random(relative)
    finished = 0
    for _ in range(30):
        status, data = _script().walk(Matcher(compiled), vocab, texts, closing, rng, 300, bitmask)
        assert status in ("done", "too long"), (status, data)
        if status == "done":
            finished += 1
            assert lark_accepts(theirs, data.decode("utf-8")), data
    assert finished >= 10, finished
