"""The MaskBench protocol, run for several engines in one process over the same records.

For each record and engine: compile the schema (a failure counts as a compile error and the schema
does not pass); for each test instance, the text is ``json.dumps(data, ensure_ascii=False)`` tokenised
without special tokens; before each token the engine fills a mask, the token must be allowed, then it
is accepted. A valid instance must get through every token and end complete (EOS allowed); an invalid
one must be refused somewhere (a token outside the mask, or an incomplete end). A schema passes when
all its instances are classified right.
"""

from __future__ import annotations

import gzip
import json
import random
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from banister.bench.peers import Engine, make_engine
from banister.mask.bitmask import allocate_token_bitmask
from banister.vocab import Vocabulary


def read_records(path: str, *, split: str | None = None, limit: int | None = None) -> Iterator[dict[str, Any]]:
    """MaskBench records (one JSON object a line, gzip or plain), optionally one split and a prefix."""
    opener = gzip.open if path.endswith(".gz") else open
    count = 0
    with opener(path, "rt", encoding="utf-8") as fh:
        for line in fh:
            if not line.strip():
                continue
            record = json.loads(line)
            if split and record.get("split") != split:
                continue
            yield record
            count += 1
            if limit is not None and count >= limit:
                return


@dataclass
class EngineTally:
    """Everything one engine measured over the run."""

    name: str
    schemas: int = 0
    passing: int = 0
    compile_errors: int = 0
    valid_rejected: int = 0
    invalid_accepted: int = 0
    tokens: int = 0
    mask_us: list[float] = field(default_factory=list)
    ttfm_us: list[float] = field(default_factory=list)
    compile_us: list[float] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)

    def summary(self) -> dict[str, Any]:
        return {
            "engine": self.name,
            "schemas": self.schemas,
            "passing": self.passing,
            "compile_errors": self.compile_errors,
            "valid_rejected": self.valid_rejected,
            "invalid_accepted": self.invalid_accepted,
            "tokens": self.tokens,
            "mask_us": _percentiles(self.mask_us, (50, 90, 99, 99.9, 100)),
            "ttfm_us": _percentiles(self.ttfm_us, (50, 90, 99)),
            "compile_us": _percentiles(self.compile_us, (50, 90, 99)),
        }


def _percentiles(values: list[float], qs: tuple[float, ...]) -> dict[str, float]:
    if not values:
        return {}
    arr = np.asarray(values)
    return {f"p{q:g}": float(np.percentile(arr, q)) for q in qs}


def _bit(bitmask: np.ndarray, token: int) -> bool:
    return bool((int(bitmask[0, token >> 5]) >> (token & 31)) & 1)


def run_record(engine: Engine, record: dict[str, Any], encode: Callable[[str], list[int]], vocab: Vocabulary,
               tally: EngineTally) -> None:
    """Run one record through one engine, adding to ``tally``."""
    tally.schemas += 1
    bitmask = allocate_token_bitmask(1, vocab.vocab_size)
    eos = vocab.eos_token_ids[0]
    start = time.perf_counter()
    try:  # some engines report a bad schema only when the first matcher is made
        compiled = engine.compile_json_schema(record["schema"])
        matcher = engine.matcher(compiled)
    except Exception as exc:  # a refusal is a result: counted, never a crash
        tally.compile_errors += 1
        tally.failures.append(f"{record['id']}: compile: {str(exc)[:160]}")
        return
    compiled_at = time.perf_counter()
    tally.compile_us.append((compiled_at - start) * 1e6)
    ok = True
    for i, test in enumerate(record["tests"]):
        text = json.dumps(test["data"], ensure_ascii=False)
        tokens = encode(text)
        if i:
            matcher = engine.matcher(compiled)
        accepted = True
        for j, token in enumerate(tokens):
            t0 = time.perf_counter()
            matcher.fill(bitmask)
            t1 = time.perf_counter()
            tally.mask_us.append((t1 - t0) * 1e6)
            if i == 0 and j == 0:
                tally.ttfm_us.append((compiled_at - start + t1 - t0) * 1e6)
            tally.tokens += 1
            if not _bit(bitmask, token) or not matcher.accept(token):
                accepted = False
                break
        if accepted:
            matcher.fill(bitmask)
            accepted = _bit(bitmask, eos)
        if accepted and not test["valid"]:
            tally.invalid_accepted += 1
            tally.failures.append(f"{record['id']}: invalid accepted: {text[:120]}")
            ok = False
        elif not accepted and test["valid"]:
            tally.valid_rejected += 1
            tally.failures.append(f"{record['id']}: valid rejected: {text[:120]}")
            ok = False
    tally.passing += ok


def run(records: list[dict[str, Any]], engines: list[Engine], encode: Callable[[str], list[int]],
        vocab: Vocabulary, *, progress: bool = True) -> list[EngineTally]:
    """Every record through every engine, record by record (so the engines see the same order)."""
    tallies = [EngineTally(e.name) for e in engines]
    started = time.perf_counter()
    for n, record in enumerate(records, 1):
        for engine, tally in zip(engines, tallies):
            run_record(engine, record, encode, vocab, tally)
        if progress:
            _progress(n, len(records), started)
    if progress:
        print(file=sys.stderr)
    return tallies


def _progress(done: int, total: int, started: float) -> None:
    width = 30
    filled = width * done // max(total, 1)
    elapsed = time.perf_counter() - started
    eta = elapsed / done * (total - done)
    print(f"\r[{'#' * filled}{'.' * (width - filled)}] {done}/{total} records, {elapsed:.0f}s, eta {eta:.0f}s",
          end="", file=sys.stderr, flush=True)


def format_table(tallies: list[EngineTally]) -> str:
    """One row per engine, then banister's ratios to each peer (below 1 = banister faster)."""
    rows = [t.summary() for t in tallies]
    cols = [
        ("engine", lambda r: r["engine"]),
        ("schemas", lambda r: r["schemas"]),
        ("passing", lambda r: r["passing"]),
        ("compile err", lambda r: r["compile_errors"]),
        ("valid rej", lambda r: r["valid_rejected"]),
        ("invalid acc", lambda r: r["invalid_accepted"]),
        ("tokens", lambda r: r["tokens"]),
    ]
    for key, label in [("ttfm_us", "ttfm"), ("mask_us", "mask")]:
        for q in (["p50", "p90", "p99"] if key == "ttfm_us" else ["p50", "p90", "p99", "p99.9", "p100"]):
            cols.append((f"{label} {q} us", lambda r, k=key, q=q: r[k].get(q)))
    lines = ["  ".join(f"{c[0]:>12}" for c in cols)]
    for r in rows:
        lines.append("  ".join(_cell(fn(r)) for _, fn in cols))
    base = rows[0]
    for other in rows[1:]:
        ratios = []
        for key, q in [("ttfm_us", "p50"), ("mask_us", "p50"), ("mask_us", "p99")]:
            a, b = base[key].get(q), other[key].get(q)
            ratios.append(f"{key.split('_')[0]} {q} {a / b:.2f}x" if a and b else f"{key} {q} n/a")
        lines.append(f"{base['engine']} / {other['engine']}: " + ", ".join(ratios)
                     + f"; passing {base['passing']} vs {other['passing']}")
    return "\n".join(lines)


def _cell(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:>12.1f}"
    return f"{value!s:>12}"


def main_maskbench(data: str, tokenizer: str, engine_names: list[str], *, limit: int | None, split: str | None,
                   json_out: str | None, show_failures: int, sample: int | None = None, seed: int = 0) -> int:
    """The `banister bench maskbench` command."""
    from banister.vocab.named import load_named

    named = load_named(tokenizer)
    vocab = named.vocab
    vocab.trie  # noqa: B018 - vocabulary-level table, built once (each peer builds its own at creation)
    engines = [make_engine(name, vocab, named.encode) for name in engine_names]
    records = list(read_records(data, split=split, limit=limit))
    if sample is not None and sample < len(records):
        records = random.Random(seed).sample(records, sample)
    tallies = run(records, engines, named.encode, vocab)
    print(format_table(tallies))
    for tally in tallies:
        for line in tally.failures[:show_failures]:
            print(f"  [{tally.name}] {line}")
    if json_out:
        with open(json_out, "w") as fh:
            json.dump({"tokenizer": tokenizer, "records": len(records), "engines": [t.summary() for t in tallies]},
                      fh, indent=1)
    return 0

