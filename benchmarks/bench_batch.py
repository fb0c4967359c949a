"""Batched mask filling: masks per second at batch 1, 16 and 64, with 1 and 2 threads, over MaskBench.

Each configuration runs in a fresh process (so vocabulary-level walk caches start empty for each):
``--records`` MaskBench schemas are compiled, and ``batch`` matchers walk their valid instances in
lockstep (a matcher that reaches the end of its instance starts the next one). Every step fills all
rows with :func:`banister.fill_next_token_bitmask_batch`, then accepts each row's token; only the fills
are timed. Every configuration walks the same instances to their ends, so all of them fill exactly the
same masks; only the grouping into batches differs.

- cold: the first pass meets new grammars and states (new masks are computed: trie walks). One
  fresh process per (batch, threads, round); the median over ``--rounds``.
- cached: the same walk repeated with every mask cached, alternating 1 and 2 threads inside one
  process (``--rounds`` times each), so a busy machine hurts both alike; the median.

Usage::

    python benchmarks/bench_batch.py [--vocab llama3] [--records 20] [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import subprocess
import sys
from pathlib import Path

CHILD = r"""
import json, random, sys, time
from banister import Compiler, Matcher, allocate_token_bitmask, fill_next_token_bitmask_batch
from banister.bench.maskbench import instance_text, read_records
from banister.vocab.named import load_named

vocab_name, data, n_records, batch, threads, steps, seed = sys.argv[1:8]
n_records, batch, threads, steps, seed = int(n_records), int(batch), int(threads), int(steps), int(seed)
named = load_named(vocab_name)
vocab = named.vocab
vocab.trie
records = list(read_records(data))
random.Random(seed).shuffle(records)
compiler = Compiler(vocab)
jobs = []  # (compiled, tokens) per valid instance
for record in records:
    try:
        compiled = compiler.json_schema(record["schema"])
    except Exception:
        continue
    for test in record["tests"]:
        if test["valid"]:
            jobs.append((compiled, named.encode(instance_text(test))))
    if len({id(c) for c, _ in jobs}) >= n_records:
        break
bitmask = allocate_token_bitmask(batch, vocab.vocab_size)
Matcher(compiler.regex("warm-up")).fill_next_token_bitmask(bitmask, 0)  # loads the compiled kernel (untimed)
out = {}
def walk(threads):
    # every job's instance walked to its end by `batch` lanes in lockstep; masks per second of the fills
    queue = iter(jobs)
    lanes = []
    for _ in range(batch):
        job = next(queue, None)
        if job is not None:
            lanes.append([Matcher(job[0]), job[1], 0])
    masks, spent = 0, 0.0
    while lanes:
        matchers = [lane[0] for lane in lanes]
        t0 = time.perf_counter()
        fill_next_token_bitmask_batch(matchers, bitmask, threads=threads)
        spent += time.perf_counter() - t0
        masks += len(lanes)
        for k, lane in enumerate(lanes):
            m, tokens, pos = lane
            if pos < len(tokens) and m.accept_token(tokens[pos]) and pos + 1 < len(tokens):
                lane[2] = pos + 1
                continue
            job = next(queue, None)
            lanes[k] = None if job is None else [Matcher(job[0]), job[1], 0]
        lanes = [lane for lane in lanes if lane is not None]
    return masks / spent
out["cold"] = walk(threads)
cached = {1: [], 2: []}
for _ in range(int(sys.argv[8])):
    for t in (1, 2):
        cached[t].append(walk(t))
out["cached_1"] = sorted(cached[1])[len(cached[1]) // 2]
out["cached_2"] = sorted(cached[2])[len(cached[2]) // 2]
print(json.dumps(out))
"""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--vocab", default="llama3")
    parser.add_argument("--records", type=int, default=20, help="MaskBench schemas whose valid instances are walked")
    parser.add_argument("--batches", default="1,16,64")
    parser.add_argument("--threads", default="1,2")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--data", default=str(Path(__file__).resolve().parents[2] / "shared/data/maskbench/dev.jsonl.gz"))
    parser.add_argument("--json", metavar="OUT")
    args = parser.parse_args()
    runs: dict[tuple[int, int], list[dict]] = {}
    batches = [int(b) for b in args.batches.split(",")]
    thread_counts = [int(t) for t in args.threads.split(",")]
    for r in range(args.rounds):
        for batch in batches:
            for threads in thread_counts:
                proc = subprocess.run([sys.executable, "-c", CHILD, args.vocab, args.data, str(args.records),
                                       str(batch), str(threads), "0", str(args.seed),
                                       str(args.rounds)], capture_output=True, text=True, check=True)
                runs.setdefault((batch, threads), []).append(json.loads(proc.stdout.strip().splitlines()[-1]))
        print(f"round {r + 1}/{args.rounds} done", file=sys.stderr, flush=True)
    results = []
    print(f"{args.vocab}: masks/s, median; cold = first pass (new masks), cached = every mask cached")
    print(f"{'batch':>6} {'threads':>8} {'cold':>10} {'cached':>10}")
    for batch in batches:
        for threads in thread_counts:
            rows = runs[(batch, threads)]
            row = {"batch": batch, "threads": threads,
                   "cold": statistics.median(x["cold"] for x in rows),
                   "cached": statistics.median(x[f"cached_{threads}"] for x in rows)}
            results.append(row)
            print(f"{batch:>6} {threads:>8} {row['cold']:>10.0f} {row['cached']:>10.0f}")
    if args.json:
        Path(args.json).write_text(json.dumps({"vocab": args.vocab, "records": args.records, "masks": "all tokens of the valid instances",
                                               "results": results}, indent=1))
    return 0


if __name__ == "__main__":
    random.seed(0)
    sys.exit(main())
