"""Regex compile and mask cost on a real vocabulary, banister side by side with the peers, one process.

    python benchmarks/bench_regex.py [--vocab llama3] [--engines banister,llguidance,xgrammar] [--json OUT]

For each pattern and engine: compile time (up to a ready matcher), the first mask (cold: the mask walk
of the start state), the same mask again (cached), and the mean mask time along the tokenisation of a
sample member.
Ratios are banister's time over the peer's (below 1 = banister faster).
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import numpy as np

from banister.bench.peers import make_engine
from banister.mask.bitmask import allocate_token_bitmask
from banister.vocab.named import load_named

# (pattern, a member used for the walk)
CASES = [
    (r"[0-9]{4}-[0-9]{2}-[0-9]{2}", "2024-11-30"),
    (r"[A-Za-z0-9._%+-]{1,64}@[a-z0-9-]{1,63}(\.[a-z0-9-]{1,63})*\.[a-z]{2,12}", "jane.doe+tag@mail.example.org"),
    (r"(\+|-)?(0|[1-9][0-9]*)(\.[0-9]+)?([eE](\+|-)?[0-9]+)?", "-12.5e+3"),
    (r"\"([^\"\\\x00-\x1f]|\\[\"\\/bfnrt]|\\u[0-9a-fA-F]{4})*\"", '"hello, w\\u00f6rld: \\"quoted\\""'),
    (r"(https?)://[a-z0-9.-]+(:[0-9]{1,5})?(/[A-Za-z0-9._~%-]*)*", "https://example.com:8080/a/b/c.html"),
    (r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", "123e4567-e89b-12d3-a456-426614174000"),
    (r"(yes|no|maybe|definitely not)", "definitely not"),
    (r"\{\"name\": \"[A-Z][a-z]{1,20}\", \"age\": [0-9]{1,3}\}", '{"name": "Ada", "age": 36}'),
    (r"([A-Z][a-z]+ ){2,5}[A-Z][a-z]+\.", "The Quick Brown Fox."),
    (r"(0|[1-9][0-9]*)(, (0|[1-9][0-9]*)){0,15}", "1, 22, 333, 4444"),
]


def _time(fn, repeat: int = 1) -> float:
    start = time.perf_counter()
    for _ in range(repeat):
        fn()
    return (time.perf_counter() - start) / repeat


def run(vocab_name: str, engine_names: list[str]) -> list[dict]:
    named = load_named(vocab_name)
    vocab = named.vocab
    vocab.trie  # noqa: B018 - vocabulary-level table, built once per vocabulary (as peers build theirs)
    engines = [make_engine(name, vocab, named.encode) for name in engine_names]
    for engine in engines:  # load compiled kernels (numba's on-disk cache) before anything is timed
        engine.matcher(engine.compile_regex("warm-up")).fill(allocate_token_bitmask(1, vocab.vocab_size))
    rows = []
    for pattern, member in CASES:
        tokens = named.encode(member)
        for engine in engines:
            bitmask = allocate_token_bitmask(1, vocab.vocab_size)
            try:
                start = time.perf_counter()  # llguidance compiles when its matcher is made: time both
                matcher = engine.matcher(engine.compile_regex(pattern))
                compile_s = time.perf_counter() - start
            except Exception as exc:  # a peer refusing a pattern is a result, not a crash
                rows.append({"pattern": pattern, "engine": engine.name, "error": str(exc)[:120]})
                continue
            first_s = _time(lambda: matcher.fill(bitmask))
            cached_s = _time(lambda: matcher.fill(bitmask), repeat=50)
            walk = []
            for token in tokens:
                walk.append(_time(lambda: matcher.fill(bitmask)))
                if not matcher.accept(token):
                    break
            rows.append({
                "pattern": pattern, "engine": engine.name, "compile_ms": compile_s * 1e3,
                "first_mask_us": first_s * 1e6, "cached_mask_us": cached_s * 1e6,
                "walk_mean_us": statistics.mean(walk) * 1e6, "accepted_member": len(walk) == len(tokens)
                and bool(np.any(bitmask)),
            })
    return rows


def report(rows: list[dict], engine_names: list[str]) -> None:
    metrics = ["compile_ms", "first_mask_us", "cached_mask_us", "walk_mean_us"]
    header = f"{'pattern':<34}" + "".join(f"{e[:12]:>14}" for e in engine_names)
    for metric in metrics:
        print(f"\n== {metric} ==")
        print(header + "".join(f"{'ratio/' + e[:8]:>16}" for e in engine_names[1:]))
        for pattern, _ in CASES:
            by = {r["engine"]: r for r in rows if r["pattern"] == pattern}
            cells = [by.get(e, {}).get(metric) for e in engine_names]
            line = f"{pattern[:33]:<34}" + "".join(f"{c:>14.1f}" if c is not None else f"{'refused':>14}" for c in cells)
            base = cells[0]
            line += "".join(f"{base / c:>16.2f}" if base and c else f"{'-':>16}" for c in cells[1:])
            print(line)
    for name in engine_names:
        for metric in metrics:
            vals = [r[metric] for r in rows if r["engine"] == name and metric in r]
            if vals:
                print(f"{name:>14} {metric:>16}: median {statistics.median(vals):10.1f}  max {max(vals):10.1f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--vocab", default="llama3")
    parser.add_argument("--engines", default="banister,llguidance,xgrammar")
    parser.add_argument("--json", help="write the rows to this file")
    args = parser.parse_args()
    names = args.engines.split(",")
    rows = run(args.vocab, names)
    report(rows, names)
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(rows, fh, indent=1)


if __name__ == "__main__":
    main()
