"""What cold CPU caches cost banister's time to first mask, phase by phase.

In ``bench maskbench`` banister compiles each schema after the other engines' compiles and masks, which
leave the CPU's caches full of their own data (so does a model's forward pass in a server). This
script measures that effect on banister alone. It times a random sample of MaskBench records in two
fresh processes; before every other record it writes to random places in a buffer of ``--flush-mib``
MiB, which evicts what the caches held. The flushed records alternate between the two processes, so
every record is timed once flushed and once not. It prints, for each phase (the JSON Schema front end,
the automaton, the first mask, and the three together) the median over records of the flushed time
over the unflushed one::

    .venv/bin/python benchmarks/cold_caches.py --tokenizer gpt2 --sample 300 --seed 1 [--flush-mib 64]

The compile is the benchmark's: ``json_schema_to_grammar(schema, defer=True)``, ``GrammarAutomaton`` and
one ``fill_next_token_bitmask``, with collection paused while it compiles and the heap frozen after
loading. A record that a run refuses is left out.
"""

from __future__ import annotations

import argparse
import gc
import json
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

PHASES = ("front end", "automaton", "first mask", "time to first mask")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", default="/work/shared/data/maskbench/dev.jsonl.gz")
    ap.add_argument("--tokenizer", default="gpt2")
    ap.add_argument("--sample", type=int, default=300)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--flush-mib", type=int, default=64, help="the buffer written to before a flushed record")
    ap.add_argument("--child", type=int, choices=(0, 1), help=argparse.SUPPRESS)
    ap.add_argument("--out", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child is not None:
        _child(args)
        return
    runs = []
    for parity in (0, 1):
        with tempfile.NamedTemporaryFile(suffix=".json") as out:
            subprocess.run([sys.executable, __file__, *sys.argv[1:], "--child", str(parity), "--out", out.name],
                           check=True)
            runs.append(json.loads(Path(out.name).read_text()))
    common = sorted(set(runs[0]).intersection(runs[1]))
    pairs = [(a, b) if a[0] else (b, a) for a, b in ((runs[0][rid], runs[1][rid]) for rid in common)]
    print(f"{len(pairs)} records, {args.tokenizer}, {args.flush_mib} MiB written to before the flushed ones")
    for i, phase in enumerate(PHASES, 1):
        ratio = statistics.median(flushed[i] / clean[i] for flushed, clean in pairs)
        clean_median = statistics.median(clean[i] for _, clean in pairs)
        print(f"  {phase:19s} flushed / not flushed: median over records {ratio:.2f}"
              f" (not flushed: median {clean_median * 1e6:.0f} us)")


def _child(args: argparse.Namespace) -> None:
    """Time every record's phases, flushing before those whose place in the sample has ``args.child``'s parity."""
    from banister.bench.maskbench import read_records
    from banister.collector import gc_paused
    from banister.compiler import CompiledGrammar
    from banister.grammar.json_schema import json_schema_to_grammar
    from banister.mask.bitmask import allocate_token_bitmask
    from banister.matcher import Matcher
    from banister.parser.recognizer import GrammarAutomaton
    from banister.vocab.named import load_named

    vocab = load_named(args.tokenizer).vocab
    vocab.trie  # noqa: B018 - built before the clock starts
    records = random.Random(args.seed).sample(list(read_records(args.data)), args.sample)
    bitmask = allocate_token_bitmask(1, vocab.vocab_size)
    buffer = np.ones(args.flush_mib * 2**20 // 8)
    places = np.random.default_rng(0).permutation(buffer.size)[: buffer.size // 8]
    gc.collect()
    gc.freeze()
    times: dict[str, tuple[bool, float, float, float, float]] = {}
    for n, record in enumerate(records):
        flushed = (n + args.child) % 2 == 1
        if flushed:
            buffer[places] += 1.0
        start = time.perf_counter()
        try:
            with gc_paused():
                grammar = json_schema_to_grammar(record["schema"], defer=True)
                built = time.perf_counter()
                automaton = GrammarAutomaton(grammar, vocab)
            ready = time.perf_counter()
            Matcher(CompiledGrammar(automaton, "json_schema", ready - start)).fill_next_token_bitmask(bitmask)
        except Exception:  # noqa: BLE001, S112 - a refused schema is left out
            continue
        end = time.perf_counter()
        times[record["id"]] = (flushed, built - start, ready - built, end - ready, end - start)
    with open(args.out, "w") as f:
        json.dump(times, f)


if __name__ == "__main__":
    main()
