"""Compile time alone, per record, for comparing two checkouts on a noisy machine.

``run`` compiles every MaskBench record in order in one cold process (``Compiler.json_schema``: front
end, automaton and first mask, caches warming as they would in a server) and writes each record's
thread CPU time to a JSON file. ``compare`` reads several runs per label and prints percentiles of
each record's *minimum* over its label's runs, which removes most of a busy machine's noise::

    PYTHONPATH=../base/src python benchmarks/bench_compile.py run --out base1.json
    python benchmarks/bench_compile.py run --out head1.json          # and again: base2, head2
    python benchmarks/bench_compile.py compare base=base1.json,base2.json head=head1.json,head2.json

Only records every run compiled are compared; a refused schema is not timed.
"""

from __future__ import annotations

import argparse
import json
import random
import time

import numpy as np

from banister.bench.maskbench import read_records
from banister.compiler import Compiler
from banister.vocab.named import load_named


def run(args: argparse.Namespace) -> None:
    vocab = load_named(args.tokenizer).vocab
    vocab.trie  # noqa: B018 - built before the clock starts, as a server has it
    records = list(read_records(args.data))
    if args.sample:
        records = random.Random(args.seed).sample(records, args.sample)
    compiler = Compiler(vocab, cache_size=0)
    times: dict[str, float] = {}
    for record in records:
        start = time.thread_time()
        try:
            compiler.json_schema(record["schema"])
        except Exception:  # noqa: BLE001, S112 - a refused schema is not timed
            continue
        times[record["id"]] = time.thread_time() - start
    with open(args.out, "w") as f:
        json.dump(times, f)


def compare(args: argparse.Namespace) -> None:
    labelled = {}
    for item in args.runs:
        label, _, files = item.partition("=")
        labelled[label] = [_read(path) for path in files.split(",")]
    common = set.intersection(*(set(r) for runs in labelled.values() for r in runs))
    print(f"{len(common)} records compiled in every run; per record, the minimum over its label's runs (ms):")
    print(f"{'label':>10} {'p50':>9} {'p90':>9} {'p99':>9} {'sum s':>9}")
    for label, runs in labelled.items():
        best = np.array([min(r[key] for r in runs) for key in sorted(common)]) * 1e3
        p50, p90, p99 = np.percentile(best, [50, 90, 99])
        print(f"{label:>10} {p50:9.3f} {p90:9.2f} {p99:9.1f} {best.sum() / 1e3:9.1f}")


def _read(path: str) -> dict[str, float]:
    with open(path) as f:
        return json.load(f)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    r = sub.add_parser("run", help="time every record's compile in one cold process")
    r.add_argument("--data", default="../shared/data/maskbench/dev.jsonl.gz")
    r.add_argument("--tokenizer", default="llama3")
    r.add_argument("--sample", type=int, default=0, help="a random sample of N records (default: all, in order)")
    r.add_argument("--seed", type=int, default=0)
    r.add_argument("--out", required=True)
    c = sub.add_parser("compare", help="percentiles of per-record minimum times, per label")
    c.add_argument("runs", nargs="+", help="LABEL=run1.json,run2.json,...")
    args = parser.parse_args()
    if args.command == "run":
        run(args)
    else:
        compare(args)


if __name__ == "__main__":
    main()
