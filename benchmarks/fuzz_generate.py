"""Random generation under banister's masks, every finished text checked by the ``jsonschema`` package.

For each schema banister compiles (MaskBench's, or with ``--suite`` the JSON-Schema-Test-Suite's), each
walk starts a matcher and picks, token by token, a random token the mask allows (most often one holding
a closing character ``" ] } ,``, so strings and containers end), and stops where EOS is allowed, now
and then. Three things would be wrong answers: a finished text that ``jsonschema`` rejects (formats
asserted, as banister asserts them), a token the mask allowed that the matcher refuses, and a state
short of the end where the mask allows nothing.

Where ``jsonschema`` disagrees for a reason the docs name, the text is counted under that reason (see
:func:`verdict`); anything else is listed as unexplained::

    .venv/bin/python benchmarks/fuzz_generate.py --tokenizer gpt2 [--sample N] [--walks 3] [--seed 0]
        [--suite DIR] [--option key_order='"any"'] [--json OUT]
"""

from __future__ import annotations

import argparse
import collections
import copy
import decimal
import functools
import json
import random
import re
import sys
import time
import warnings
from decimal import Decimal
from pathlib import Path
from typing import Any

import jsonschema
import numpy as np
import referencing
import referencing.jsonschema

from banister import Compiler, Matcher, allocate_token_bitmask
from banister.bench.maskbench import read_records
from banister.vocab.named import load_named

STOP = 0.35
"""Chance of stopping where EOS is allowed (else a random allowed token)."""
CLOSE_BIAS = 0.6
"""Chance of picking among the allowed tokens that hold a closing character, when there are some."""
_SPACES = {"\ufeff": " ", "\x1c": "!", "\x1d": "!", "\x1e": "!", "\x1f": "!", "\x85": "!",
           "\r": "\n", "\u2028": "\n", "\u2029": "\n"}
"""Characters that ECMA-262's ``\\s`` or ``.`` (banister's) and Python's (``jsonschema``'s) class apart,
each with one that Python classes as ECMA classes it (U+FEFF is white space to ECMA only, the next five
to Python only; ECMA's ``.`` stops at the line ends CR, U+2028 and U+2029, Python's only at LF)."""
_ECMA_WORD = re.compile(r"[A-Za-z0-9_]")  # ECMA-262's \w (Python's adds the letters and digits past ASCII)
EXPLAINED = ("too long", "valid", "repeated key", "regex dialect", "double rounding", "no Python regex")
"""What a walk may end in without a wrong answer (a walk given up, or a text ``jsonschema`` accepts or
rejects for a documented reason, see :func:`verdict`)."""
_EXACT_DIGITS = 1000
"""Digits of the decimal arithmetic that reads numbers exactly (``multipleOf`` of a number of 309 digits)."""


def token_texts(vocab: Any, closers: bytes = b'"]},') -> tuple[list[bytes], np.ndarray]:
    """Each token's bytes, and which of them hold one of ``closers`` (what :func:`walk` favours)."""
    texts = [vocab.token_bytes(t) for t in range(vocab.vocab_size)]
    return texts, np.array([any(c in t for c in closers) for t in texts])


def walk(matcher: Matcher, vocab: Any, texts: list[bytes], closing: np.ndarray, rng: random.Random,
         max_tokens: int, bitmask: np.ndarray) -> tuple[str, bytes]:
    """One random generation: ``("done" | "too long" | "dead end" | "refused", text)``."""
    eos = list(vocab.eos_token_ids)
    out = bytearray()
    for _ in range(max_tokens):
        matcher.fill_next_token_bitmask(bitmask)
        allowed_bits = np.unpackbits(bitmask[0].view(np.uint8), bitorder="little")[: vocab.vocab_size].astype(bool)
        may_end = bool(allowed_bits[eos].any())
        allowed_bits[eos] = False
        allowed = np.flatnonzero(allowed_bits)
        if may_end and (not allowed.size or rng.random() < STOP):
            return "done", bytes(out)
        if not allowed.size:
            return "dead end", bytes(out)
        if rng.random() < CLOSE_BIAS:
            closers = allowed[closing[allowed]]
            if closers.size:
                allowed = closers
        token = int(allowed[rng.randrange(allowed.size)])
        if not matcher.accept_token(token):
            return "refused", bytes(out)
        out += texts[token]
    return "too long", bytes(out)


def verdict(schema: Any, text: str, registry: referencing.Registry | None = None) -> str:
    """``"valid"`` when ``jsonschema`` accepts ``text`` under ``schema``; else the documented difference
    that explains its verdict, or ``"unexplained"`` (``"not JSON"`` for a text Python's ``json`` refuses,
    ``"no Python regex"`` for a schema whose pattern Python's ``re`` cannot read, such as ECMA's ``\\cC``):

    - ``"repeated key"``: a key repeated among additional properties, which banister judges member by
      member where it does not keep them apart (docs/json-schema.md, free-form values), while Python's
      ``json`` keeps the last value: the text is valid to ``jsonschema`` once member counts
      (``minProperties``) are left out;
    - ``"regex dialect"``: valid once the characters ECMA-262 and Python class apart in ``\\s``, ``\\w``,
      ``\\d`` and ``.`` are replaced by ones both class alike (patterns follow ECMA-262, docs/regex.md);
    - ``"double rounding"``: valid once the schema's and the text's numbers are read exactly (Python reads
      ``1e308`` as the nearest double, not ten to the 308th).
    """
    try:
        value = json.loads(text)
    except ValueError:
        return "not JSON"
    try:
        return _verdict(schema, text, value, {} if registry is None else {"registry": registry})
    except re.error:
        return "no Python regex"


def _verdict(schema: Any, text: str, value: Any, registry: dict[str, Any]) -> str:
    cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    formats = cls.FORMAT_CHECKER  # the draft's own checkers (a bare FormatChecker mixes the drafts')

    def valid(schema: Any, value: Any) -> bool:
        return cls(schema, format_checker=formats, **registry).is_valid(value)

    if valid(schema, value):
        return "valid"
    if _repeats_a_key(text) and valid(_without_counts(schema), value):
        return "repeated key"
    neutral = _dialect_free(value)
    if neutral != value and valid(schema, neutral):
        return "regex dialect"
    try:
        with decimal.localcontext(prec=_EXACT_DIGITS):
            exact = json.loads(json.dumps(schema), parse_float=Decimal)
            if valid(exact, json.loads(text, parse_float=Decimal)):
                return "double rounding"
    except (TypeError, ArithmeticError, jsonschema.SchemaError):
        pass
    return "unexplained"


def _repeats_a_key(text: str) -> bool:
    repeated = False

    def pairs(items: list[tuple[str, Any]]) -> dict:
        nonlocal repeated
        repeated |= len({k for k, _ in items}) < len(items)
        return dict(items)

    json.loads(text, object_pairs_hook=pairs)
    return repeated


def _without_counts(schema: Any) -> Any:
    """``schema`` without its ``minProperties`` keywords (a property named so stays: its value is a schema)."""
    out = copy.deepcopy(schema)
    stack = [out]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            if isinstance(node.get("minProperties"), int):
                del node["minProperties"]
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
    return out


def _dialect_free(value: Any) -> Any:
    """``value`` with every character the two dialects class apart replaced: those of ``_SPACES``, and a
    letter or digit beyond ASCII (Python's ``\\w`` and ``\\d`` hold it, ECMA's do not) by ``!``."""
    if isinstance(value, str):
        return "".join(_SPACES.get(c, "!" if re.match(r"\w", c) and not _ECMA_WORD.match(c) else c) for c in value)
    if isinstance(value, list):
        return [_dialect_free(v) for v in value]
    if isinstance(value, dict):
        return {_dialect_free(k): _dialect_free(v) for k, v in value.items()}
    return value


_DIALECT_2020_12 = "https://json-schema.org/draft/2020-12/schema"


def suite_records(tests: str) -> list[dict[str, Any]]:
    """The schemas of the JSON-Schema-Test-Suite (drafts 2020-12 and 7, optional tests included) as
    records, each naming its draft."""
    drafts = {"draft2020-12": _DIALECT_2020_12,
              "draft7": "http://json-schema.org/draft-07/schema#"}
    out = []
    for draft, uri in drafts.items():
        for path in sorted(Path(tests, draft).glob("**/*.json")):
            for i, group in enumerate(json.loads(path.read_text())):
                schema = group["schema"]
                if isinstance(schema, dict) and "$schema" not in schema:
                    schema = {"$schema": uri, **schema}
                out.append({"id": f"{path.relative_to(tests)}#{i}", "schema": schema})
    return out


def suite_remotes(tests: str) -> dict[str, Any]:
    """The suite's remote documents, by the URIs its schemas name them with (it serves them at
    localhost:1234): banister compiles with them as ``resources``, jsonschema reads them from a registry."""
    root = Path(tests).parent / "remotes"
    return {f"http://localhost:1234/{path.relative_to(root).as_posix()}": json.loads(path.read_text())
            for path in sorted(root.rglob("*.json"))}


def remote_registry(remotes: dict[str, Any], dialect: str) -> referencing.Registry:
    """jsonschema's registry of the suite's remotes, those without ``$schema`` read in ``dialect`` (the
    referring schema's, as banister reads a resource)."""
    spec = referencing.jsonschema.specification_with(dialect, default=referencing.jsonschema.DRAFT202012)
    return referencing.Registry().with_resources(
        (uri, referencing.Resource.from_contents(doc, default_specification=spec)) for uri, doc in remotes.items())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", default="/work/shared/data/maskbench/dev.jsonl.gz")
    ap.add_argument("--suite", help="the JSON-Schema-Test-Suite's tests directory: its schemas instead of --data's")
    ap.add_argument("--tokenizer", default="gpt2")
    ap.add_argument("--sample", type=int, help="a random sample of N records (default: all)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--walks", type=int, default=3, help="random generations per schema")
    ap.add_argument("--max-tokens", type=int, default=400, help="a walk longer than this is given up")
    ap.add_argument("--option", action="append", default=[], metavar="NAME=JSON",
                    help='a compile option, its value as JSON (--option key_order=\'"any"\'); repeatable')
    ap.add_argument("--json", help="also write the counts and the unexplained texts as JSON to this file")
    args = ap.parse_args()
    options = {name: json.loads(value) for name, _, value in (o.partition("=") for o in args.option)}
    # jsonschema runs ECMA patterns through Python's re, which warns of classes it may read otherwise one day
    warnings.filterwarnings("ignore", category=FutureWarning)

    named = load_named(args.tokenizer)
    vocab = named.vocab
    texts, closing = token_texts(vocab)
    records = suite_records(args.suite) if args.suite else list(read_records(args.data))
    remotes = suite_remotes(args.suite) if args.suite else {}
    registry_of = functools.cache(lambda dialect: remote_registry(remotes, dialect))
    rng = random.Random(args.seed)
    if args.sample:
        records = rng.sample(records, min(args.sample, len(records)))
    compiler = Compiler(vocab)
    bitmask = allocate_token_bitmask(1, vocab.vocab_size)
    counts: collections.Counter[str] = collections.Counter()
    wrong: list[dict[str, str]] = []
    started = time.perf_counter()
    for record in records:
        try:
            compiled = compiler.json_schema(record["schema"], **options, **({"resources": remotes} if remotes else {}))
        except Exception:  # noqa: BLE001 - a refused schema generates nothing (the bench counts refusals)
            counts["schemas refused"] += 1
            continue
        counts["schemas"] += 1
        schema = record["schema"]
        dialect = (schema.get("$schema") if isinstance(schema, dict) else None) or _DIALECT_2020_12
        registry = registry_of(dialect) if remotes else None
        for _ in range(args.walks):
            status, data = walk(Matcher(compiled), vocab, texts, closing, rng, args.max_tokens, bitmask)
            counts[status] += 1
            text = data.decode("utf-8", "replace")
            found = verdict(record["schema"], text, registry) if status == "done" else status
            if status == "done":
                counts[found] += 1
            if found not in EXPLAINED:
                wrong.append({"id": record["id"], "what": found, "text": text})
    elapsed = time.perf_counter() - started
    print(f"{args.tokenizer}: {counts['schemas']} schemas ({counts['schemas refused']} refused), "
          f"{args.walks} walks each, {elapsed:.0f} s" + (f", options {options}" if options else ""))
    for key in ("done", "too long", "valid", *EXPLAINED[2:], "unexplained", "not JSON", "dead end", "refused"):
        print(f"  {key:18s} {counts[key]}")
    for item in wrong[:20]:
        print(f"  {item['what'].upper()}: {item['id']} {item['text'][:200]!r}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"counts": dict(counts), "wrong": wrong}, f, indent=1)
    sys.stdout.flush()


if __name__ == "__main__":
    main()
