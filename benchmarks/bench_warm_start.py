"""Cold vs warm start: a fresh process loads a vocabulary, compiles its first schema, fills its first mask.

Each measurement is a new Python process (nothing shared but the disk), in three modes, interleaved
round by round so a busy machine hurts them alike:

- ``off``:  no warm cache (the library's default);
- ``cold``: a warm cache directory that is empty (pays the work, plus writing the entries);
- ``warm``: the same directory afterwards (reads the trie and the grammar IR back).

The named vocabulary's own token list is cached on disk by ``load_named`` in every mode (that cache
predates this one), so "vocab" is the same in all three. Usage::

    python benchmarks/bench_warm_start.py [--vocab llama3] [--rounds 5] [--schemas 3] [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

CHILD = r"""
import json, sys, time
t0 = time.perf_counter()
from banister import Compiler, Matcher, allocate_token_bitmask
from banister.vocab.named import load_named
t1 = time.perf_counter()
vocab = load_named(sys.argv[1]).vocab
t2 = time.perf_counter()
cache_dir = None if sys.argv[2] == "-" else sys.argv[2]
compiler = Compiler(vocab, cache_dir=cache_dir)
vocab.trie
t3 = time.perf_counter()
schemas = json.loads(sys.argv[3])
compiled = compiler.json_schema(schemas[0])
t4 = time.perf_counter()
bitmask = allocate_token_bitmask(1, vocab.vocab_size)
Matcher(compiled).fill_next_token_bitmask(bitmask)
t5 = time.perf_counter()
rest = []
for schema in schemas[1:]:
    a = time.perf_counter()
    Matcher(compiler.json_schema(schema)).fill_next_token_bitmask(bitmask)
    rest.append(time.perf_counter() - a)
print(json.dumps({"import": t1 - t0, "vocab": t2 - t1, "trie": t3 - t2, "first_compile": t4 - t3,
                  "first_mask": t5 - t4, "total": t5 - t0, "next_schemas": sum(rest)}))
"""

PHASES = ["import", "vocab", "trie", "first_compile", "first_mask", "total", "next_schemas"]


def pick_schemas(data: str, n: int, seed: int) -> list:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
    from banister.bench.maskbench import read_records
    from banister.compiler import Compiler
    from banister.vocab import Vocabulary

    records = list(read_records(data))
    random.Random(seed).shuffle(records)
    byte_vocab = Vocabulary([bytes([b]) for b in range(256)] + [b"</s>"], eos_token_ids=[256])
    out = []
    for record in records:  # schemas that compile (a refused one measures nothing)
        try:
            Compiler(byte_vocab).json_schema(record["schema"])
        except Exception:
            continue
        out.append(record["schema"])
        if len(out) == n:
            break
    return out


def child(vocab: str, cache_dir: str | None, schemas: list) -> dict:
    env = dict(os.environ)
    out = subprocess.run([sys.executable, "-c", CHILD, vocab, cache_dir or "-", json.dumps(schemas)],
                         capture_output=True, text=True, env=env, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--vocab", default="llama3")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--schemas", type=int, default=3, help="schemas compiled per process (first one timed alone)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--data", default=str(Path(__file__).resolve().parents[2] / "shared/data/maskbench/dev.jsonl.gz"))
    parser.add_argument("--json", metavar="OUT")
    args = parser.parse_args()
    results: dict[str, list[dict]] = {"off": [], "cold": [], "warm": []}
    child(args.vocab, None, [{"type": "object"}])  # the vocabulary's own disk cache and numba's, filled once
    for r in range(args.rounds):
        schemas = pick_schemas(args.data, args.schemas, args.seed + r)
        with tempfile.TemporaryDirectory() as tmp:
            results["off"].append(child(args.vocab, None, schemas))
            results["cold"].append(child(args.vocab, tmp, schemas))
            results["warm"].append(child(args.vocab, tmp, schemas))
        print(f"round {r + 1}/{args.rounds}: total off {results['off'][-1]['total']:.3f}s, "
              f"cold {results['cold'][-1]['total']:.3f}s, warm {results['warm'][-1]['total']:.3f}s", file=sys.stderr)
    summary = {mode: {p: statistics.median(x[p] for x in runs) for p in PHASES} for mode, runs in results.items()}
    print(f"{args.vocab}, median of {args.rounds} fresh processes per mode (seconds); "
          f"next_schemas = {args.schemas - 1} more schemas compiled + first mask")
    print(f"{'mode':>6} " + " ".join(f"{p:>14}" for p in PHASES))
    for mode, row in summary.items():
        print(f"{mode:>6} " + " ".join(f"{row[p]:>14.3f}" for p in PHASES))
    if args.json:
        Path(args.json).write_text(json.dumps({"vocab": args.vocab, "rounds": args.rounds, "median_s": summary,
                                               "runs": results}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
