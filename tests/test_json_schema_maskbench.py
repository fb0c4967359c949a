"""A fixed sample of the MaskBench dev split, checked with the exact oracle (no tokenizer involved).

Protocol (../shared/RECIPES.md): instance text = ``json.dumps(data, ensure_ascii=False)``, as is. A
schema passes when it compiles, every valid instance is accepted and every invalid one rejected.
Labels are re-checked with ``jsonschema`` (the draft's validator, format checking on) and
disagreements are reported. Run both key orders: instances keep the key order the data has, which
is not always the schema's.
"""

from __future__ import annotations

import collections
import gzip
import json
import random
from pathlib import Path
from typing import Any

import pytest
from test_json_schema_helpers import Reorder, matches

from banister.errors import LimitError, SchemaError
from banister.grammar.json_schema import json_schema_to_grammar

DATA = Path(__file__).parent.parent.parent / "shared" / "data" / "maskbench" / "dev.jsonl.gz"
if not DATA.exists():
    DATA = Path("/work/shared/data/maskbench/dev.jsonl.gz")
SAMPLE = 200
SEED = 0


def _sample() -> list[dict]:
    with gzip.open(DATA, "rt") as f:
        records = [json.loads(line) for line in f]
    return random.Random(SEED).sample(records, SAMPLE)


def _truth(schema, data, label: bool) -> bool:
    jsonschema = pytest.importorskip("jsonschema")
    cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    try:
        return cls(schema, format_checker=cls.FORMAT_CHECKER).is_valid(data)
    except Exception:
        return label


@pytest.mark.skipif(not DATA.exists(), reason="MaskBench data not found")
def test_maskbench_sample():
    stats: collections.Counter = collections.Counter()
    false_accepts: list[str] = []
    for record in _sample():
        schema = record["schema"]
        reorder = Reorder(schema)
        for test in record["tests"]:
            if test["valid"]:
                stats["valid instances"] += 1
                stats["in schema order"] += json.dumps(reorder(test["data"])) == json.dumps(test["data"])
            if _truth(schema, test["data"], test["valid"]) != test["valid"]:
                stats["labels jsonschema disagrees with"] += 1
        for order in ("schema", "any"):
            try:
                grammar = json_schema_to_grammar(schema, key_order=order)
            except (SchemaError, LimitError) as err:
                stats[f"{order}: refused ({type(err).__name__})"] += 1
                continue
            stats[f"{order}: compiled"] += 1
            ok = True
            for test in record["tests"]:
                accepted = matches(grammar, json.dumps(test["data"], ensure_ascii=False))
                stats[f"{order}: instances right"] += accepted == test["valid"]
                if accepted and not test["valid"]:
                    stats[f"{order}: invalid accepted"] += 1
                    false_accepts.append(record["id"])
                    ok = False
                elif not accepted and test["valid"]:
                    stats[f"{order}: valid rejected"] += 1
                    ok = False
            stats[f"{order}: schemas passing"] += ok
    print(f"\nMaskBench dev sample of {SAMPLE}: " + ", ".join(f"{k} {v}" for k, v in sorted(stats.items())))
    assert stats["schema: invalid accepted"] == 0 and stats["any: invalid accepted"] == 0, false_accepts
    assert stats["schema: schemas passing"] >= 0.85 * SAMPLE


def test_the_front_ends_counts_equal_a_checked_grammars():
    """The JSON front end hands over its grammar with the lexemes and size it counted while trimming
    (``Grammar.from_trimmed``); the checked constructor, walking the rules again, finds the same."""
    from banister.grammar.ir import Grammar

    compiled = 0
    for record in _sample()[:100]:
        try:
            grammar = json_schema_to_grammar(record["schema"])
        except (SchemaError, LimitError):
            continue
        checked = Grammar(grammar.rules, grammar.start, trimmed=True)
        assert (checked.lexemes, checked.size) == (grammar.lexemes, grammar.size), record["id"]
        compiled += 1
    assert compiled > 90


def _compile_each(schemas: list, reset: Any = None, **options: Any) -> list:
    """Each schema's grammar (start and rules) or the name of its error; ``reset()`` runs before each
    compile when given (to empty a process-wide memo, so each grammar builds its own parts)."""
    out: list = []
    for schema in schemas:
        if reset is not None:
            reset()
        try:
            grammar = json_schema_to_grammar(schema, **options)
        except (SchemaError, LimitError) as err:
            out.append(type(err).__name__)
            continue
        out.append((grammar.start, grammar.rules))
    return out


@pytest.mark.parametrize("options", [{}, {"whitespace": "pretty", "strict": True}, {"key_order": "any", "draft": "4"}])
def test_plain_scalars_shared_across_grammars_are_what_each_would_build(options):
    """A schema that says only its scalar type (besides annotations and unknown keywords) gets the symbol
    the first grammar made for that type and draft (``_PLAIN_LEXEMES``): every grammar is the same
    whether the table is empty before each compile (each builds its own) or full from the others."""
    from banister.grammar import json_build, json_logic

    records = _sample()[:60]
    extra = {"type": "object", "properties": {t: {"type": t, "title": t, "x-vendor": 1} for t in json_logic._SCALAR_TYPES}}
    schemas = [r["schema"] for r in records] + [extra, {**extra, "$schema": "http://json-schema.org/draft-04/schema#"}]
    def scalars() -> set:
        return {plain for plain, _ in json_build._PLAIN_LEXEMES if len(plain) == 2}  # (types, draft)

    alone = _compile_each(schemas, json_build._PLAIN_LEXEMES.clear, **options)
    assert scalars()  # the last compile left its scalars ...
    assert _compile_each(schemas, **options) == alone  # ... and every compile then found the others' too
    assert len({draft for _, draft in scalars()}) >= 2  # drafts 4 and 2020-12 both used


def test_string_memos_shared_across_schemas_are_what_each_would_build():
    """String plans and DFAs are memoised process-wide by their constraints without the keywords'
    pointers (``StrTerm.unplaced``), and the lexemes of leaf schemas by their keywords: the same format
    or pattern at another pointer, in another schema or the same one, is a hit, and every grammar is
    what it is when the memos are emptied before each compile."""
    from banister.grammar import json_build, json_logic, json_strings

    memos = (json_strings.string_plan, json_logic.string_dfa, json_logic._string_term_empty)

    def reset() -> None:
        for memo in memos:
            memo.cache_clear()
        json_build._PLAIN_LEXEMES.clear()

    formats = {"type": "object", "properties": {
        "start": {"type": "string", "format": "date-time"}, "end": {"type": "string", "format": "date-time"},
        "code": {"type": "string", "pattern": "^[A-Z]{3}$"}, "other": {"allOf": [{"pattern": "^[A-Z]{3}$"}]},
        "again": {"type": "string", "pattern": "^[A-Z]{3}$"}}}
    schemas = [r["schema"] for r in _sample()[:60]] + [formats]
    alone = _compile_each(schemas, reset)
    plans = json_strings.string_plan.cache_info()
    # The last schema: one plan per distinct constraint, asked again where no leaf lexeme answers
    # ("other"); "end" and "again" are the leaf lexemes of "start" and "code".
    assert plans.hits == 1 and plans.currsize == 2 and len(json_build._PLAIN_LEXEMES) == 2
    assert _compile_each(schemas) == alone
