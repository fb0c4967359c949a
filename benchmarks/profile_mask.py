"""Where banister's MaskBench time goes: front end, automaton construction, first mask, later masks.

Runs the MaskBench protocol (banister only) over the first N dev records (or a random ``--sample``)
and splits time to first mask into the JSON Schema front end (deferring values, as ``Compiler`` does
without a warm cache), ``GrammarAutomaton`` construction and the first ``token_mask``; the later masks
into percentiles, with the slowest listed. ``--cprofile OUT`` writes a cProfile of the whole run.

    .venv/bin/python benchmarks/profile_mask.py --limit 300 [--cprofile /tmp/mb.prof] [--gc-freeze]

``--by-miss`` sorts the masks by what they had to build (nothing: a state met before; scans of the
parser; context walks; lexeme walks over the trie; a new lexer context) and prints each kind's count,
percentiles and share of the masks over p99: which caches a faster p99 has to spare the masks.

``--breakdown`` charges the p98-p99.8 masks' time to the recogniser, parser and lexer functions
(exclusive time, with timers), which is where a p99 regression shows first; ``--band 40 60`` looks at
the masks around the median instead. It times the interpreted code: where modules are compiled, it
runs itself again with ``BANISTER_INTERPRETED=1``.

``--serve`` runs as ``banister serve`` does: the start-up heap settled (frozen, young collections every
``--gc-threshold`` objects, what each compile leaves frozen too, thawed every ``--gc-thaw-every``
compiles) and every schema compiled by one ``Compiler`` that keeps its last 256 grammars, so the
garbage collector meets what a server holds (docs/performance.md, "Garbage collection").
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import os
import random
import sys
import time
from contextlib import nullcontext

import numpy as np

from banister import _build
from banister.bench.maskbench import instance_text, read_records
from banister.collector import add_gc_options, gc_paused, settle_heap, thaw_if_due
from banister.compiler import CompiledGrammar, Compiler
from banister.grammar.json_schema import json_schema_to_grammar
from banister.mask.bitmask import allocate_token_bitmask
from banister.matcher import Matcher
from banister.parser import lexer
from banister.parser.recognizer import GrammarAutomaton
from banister.vocab.named import load_named

clock = time.perf_counter


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", default="/work/shared/data/maskbench/dev.jsonl.gz")
    ap.add_argument("--tokenizer", default="llama3")
    ap.add_argument("--limit", type=int, default=300)
    ap.add_argument("--sample", type=int, help="a random sample of N records from the whole file (overrides --limit)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--cprofile")
    ap.add_argument("--only", choices=["all", "compile", "masks"], default="all",
                    help="what the cProfile covers")
    ap.add_argument("--gc-freeze", action="store_true")
    ap.add_argument("--pause-gc", action="store_true", help="collection off while compiling, as Compiler does")
    ap.add_argument("--top", type=int, default=15)
    ap.add_argument("--cpu", action="store_true", help="thread CPU time instead of wall time (less noisy)")
    ap.add_argument("--breakdown", action="store_true",
                    help="exclusive time per recogniser/parser/lexer function in the masks between p98 and "
                         "p99.8 (wraps them with timers: every mask gets slower, compare shares, not totals)")
    ap.add_argument("--band", type=float, nargs=2, default=(98.0, 99.8), metavar=("LO", "HI"),
                    help="the percentiles of the masks --breakdown looks at (default 98 99.8)")
    ap.add_argument("--by-miss", action="store_true",
                    help="sort the masks by the caches they missed (states, scans, walks, lexeme walks, contexts)")
    ap.add_argument("--serve", action="store_true",
                    help="as banister serve runs: heap settled, compiles by a Compiler that keeps 256 grammars "
                         "(the compile time is all under 'automaton')")
    ap.add_argument("--idle-thaw", action="store_true",
                    help="with --serve: idle between records, as a server's engine thread between requests, "
                         "where the collector's full collection is made when due (collector.thaw_if_due)")
    add_gc_options(ap, how=" (with --serve)")
    args = ap.parse_args()
    if args.breakdown and _build.compiled_modules():
        # A compiled class's methods cannot be replaced: time the same code interpreted.
        print("--breakdown: timing the interpreted code (BANISTER_INTERPRETED=1)", file=sys.stderr, flush=True)
        os.execve(sys.executable, [sys.executable, *sys.argv], {**os.environ, "BANISTER_INTERPRETED": "1"})

    global clock
    clock = time.thread_time if args.cpu else time.perf_counter
    excl: dict[str, float] = {}
    calls: dict[str, int] = {}
    if args.breakdown:
        _wrap_for_breakdown(excl, calls)
    named = load_named(args.tokenizer)
    vocab = named.vocab
    vocab.trie  # noqa: B018
    records = list(read_records(args.data, limit=None if args.sample else args.limit))
    if args.sample:
        records = random.Random(args.seed).sample(records, args.sample)
    encoded = [[named.encode(instance_text(t)) for t in r["tests"]] for r in records]
    compiler = Compiler(vocab) if args.serve else None
    if args.serve:
        settle_heap(args.gc_threshold, args.gc_thaw_every)
    elif args.gc_freeze:
        gc.collect()
        gc.freeze()
    gc_log: list[tuple[int, float]] = []
    gc_start = [0.0]

    def on_gc(phase: str, info: dict) -> None:
        if phase == "start":
            gc_start[0] = time.perf_counter()
        else:
            gc_log.append((info["generation"], time.perf_counter() - gc_start[0]))

    gc.callbacks.append(on_gc)
    prof = cProfile.Profile() if args.cprofile else None
    fe, ga, first, masks, slow, ttfm_by, parts = [], [], [], [], [], [], []
    misses: list[tuple[int, ...]] = []  # per mask with --by-miss: what it added to each cache
    passing = 0
    collected: list[bool] = []  # per mask: whether a garbage collection ran inside it
    bitmask = allocate_token_bitmask(1, vocab.vocab_size)
    eos = vocab.eos_token_ids[0]
    t_all = clock()
    if prof and args.only == "all":
        prof.enable()
    idle_thaws: list[float] = []
    for r, toks_list in zip(records, encoded):
        if args.idle_thaw:
            t0, logged = time.perf_counter(), len(gc_log)
            if thaw_if_due():
                idle_thaws.append(time.perf_counter() - t0)
                del gc_log[logged:]  # counted apart
        if prof and args.only == "compile":
            prof.enable()
        t0 = clock()
        try:
            if compiler is not None:
                t1 = t0
                compiled = compiler.json_schema(r["schema"])
                auto = compiled.automaton
            else:
                with gc_paused() if args.pause_gc else nullcontext():
                    g = json_schema_to_grammar(r["schema"], defer=True)  # as Compiler, with no warm cache
                    t1 = clock()
                    auto = GrammarAutomaton(g, vocab)
                compiled = CompiledGrammar(auto, "json_schema", clock() - t0)
        except Exception:  # noqa: BLE001, S112 - a refused schema is not timed (the bench counts it)
            continue
        t2 = clock()
        if prof and args.only == "compile":
            prof.disable()
        ok = True
        for i, (test, toks) in enumerate(zip(r["tests"], toks_list)):
            m = Matcher(compiled)
            accepted = True
            for j, tok in enumerate(toks):
                if prof and args.only == "masks":
                    prof.enable()
                excl.clear()
                calls.clear()
                before = _cache_sizes(auto, m) if args.by_miss else ()
                collections = len(gc_log)
                a = clock()
                m.fill_next_token_bitmask(bitmask)
                b = clock()
                collected.append(len(gc_log) > collections)
                if args.by_miss:
                    misses.append(tuple(y - x for x, y in zip(before, _cache_sizes(auto, m))))
                if prof and args.only == "masks":
                    prof.disable()
                if i == 0 and j == 0:
                    ttfm_by.append((t2 - t0 + b - a, t1 - t0, t2 - t1, b - a, r["id"]))
                    fe.append(t1 - t0)
                    ga.append(t2 - t1)
                    first.append(b - a)
                masks.append(b - a)
                if args.breakdown:
                    parts.append((b - a, dict(excl), dict(calls)))
                if b - a > 2e-4:
                    slow.append((b - a, r["id"], i, j))
                if not (int(bitmask[0, tok >> 5]) >> (tok & 31)) & 1 or not m.accept_token(tok):
                    accepted = False
                    break
            if accepted:
                m.fill_next_token_bitmask(bitmask)
                accepted = bool((int(bitmask[0, eos >> 5]) >> (eos & 31)) & 1)
            ok &= accepted == test["valid"]
        passing += ok
    if prof:
        prof.disable()
        prof.dump_stats(args.cprofile)
    total = clock() - t_all
    us = lambda xs, q: np.percentile(np.asarray(xs) * 1e6, q)
    ttfm = np.asarray(fe) + np.asarray(ga) + np.asarray(first)
    print(f"records {len(records)} passing {passing} total {total:.1f}s masks {len(masks)}")
    print(f"ttfm p50 {us(ttfm, 50):.0f} p90 {us(ttfm, 90):.0f} p99 {us(ttfm, 99):.0f} us")
    for name, xs in [("frontend", fe), ("automaton", ga), ("first mask", first)]:
        print(f"  {name:10s} p50 {us(xs, 50):8.0f} p90 {us(xs, 90):8.0f} p99 {us(xs, 99):8.0f} sum {sum(xs):.2f}s")
    print(f"mask p50 {us(masks, 50):.1f} p90 {us(masks, 90):.1f} p99 {us(masks, 99):.1f} p99.9 {us(masks, 99.9):.0f}"
          f" max {us(masks, 100):.0f} us; sum {sum(masks):.2f}s; >0.2ms: {len(slow)} ({sum(s[0] for s in slow):.2f}s)")
    for gen in range(3):
        times = [t for g, t in gc_log if g == gen]
        print(f"gc gen{gen}: {len(times)} collections, {sum(times) * 1e3:.1f} ms, max {max(times, default=0) * 1e3:.1f} ms")
    if args.idle_thaw:
        print(f"idle thaws: {len(idle_thaws)}, {sum(idle_thaws) * 1e3:.0f} ms in all (not in the timings above)")
    hit = np.asarray(collected)
    print(f"gc: {len(gc.get_objects())} objects tracked at the end, {gc.get_freeze_count()} frozen; "
          f"{hit.sum()} masks had a collection inside, {np.asarray(masks)[hit].sum() * 1e3:.0f} ms in all")
    for t in sorted(ttfm_by, reverse=True)[:5]:
        print(f"  ttfm {t[0] * 1e3:7.2f} ms = front end {t[1] * 1e3:.2f} + automaton {t[2] * 1e3:.2f}"
              f" + first mask {t[3] * 1e3:.2f}  {t[4]}")
    for s in sorted(slow, reverse=True)[: args.top]:
        print(f"  {s[0] * 1e3:7.2f} ms  {s[1]} test {s[2]} token {s[3]}")
    if misses:
        _print_by_miss(np.asarray(masks) * 1e6, np.asarray(misses))
    if parts:
        lo, hi = np.percentile([p[0] for p in parts], args.band)
        band = [p for p in parts if lo <= p[0] <= hi]
        n = len(band)
        print(f"breakdown of {n} masks between p{args.band[0]:g} and p{args.band[1]:g} (avg {sum(p[0] for p in band) / n * 1e6:.0f} us,"
              f" timers included): exclusive us/mask, calls/mask")
        names = sorted({k for p in band for k in p[1]}, key=lambda k: -sum(p[1].get(k, 0) for p in band))
        for k in names:
            t = sum(p[1].get(k, 0) for p in band)
            c = sum(p[2].get(k, 0) for p in band)
            print(f"  {k:28s} {t / n * 1e6:7.1f} us {c / n:6.1f} calls")


def _cache_sizes(auto: GrammarAutomaton, m: Matcher) -> tuple[int, ...]:
    """What the caches a mask may fill hold: whether the grammar's state memo lacks the matcher's state,
    and how many parser scans, context walks, lexeme walks (the vocabulary's) and lexer contexts there are."""
    return (int(m.state not in auto._state_masks),
            sum(len(found) for found in auto.parser.scans.values()),
            len(auto._walks), len(auto._lexeme_walks), len(lexer._context_cache))


def _print_by_miss(us: np.ndarray, added: np.ndarray) -> None:
    """The masks by the most expensive kind of thing each built (see ``--by-miss``)."""
    new_state, scans, walks, lexeme_walks, contexts = (added[:, 0] < 0, *(added[:, 1:] > 0).T)
    kinds = {
        "a state met before": ~new_state,
        "new state, every cache hit": new_state & ~scans & ~walks & ~lexeme_walks & ~contexts,
        "new state, scans": new_state & scans & ~walks & ~lexeme_walks & ~contexts,
        "new state, context walks": new_state & walks & ~lexeme_walks & ~contexts,
        "new state, lexeme walks": new_state & lexeme_walks & ~contexts,
        "new state, lexer context": new_state & contexts,
    }
    p99 = np.percentile(us, 99)
    over = us > p99
    print(f"masks by what they built (p99 {p99:.1f} us; {over.sum()} masks over it):")
    for name, kind in kinds.items():
        n = int(kind.sum())
        if not n:
            continue
        print(f"  {name:28s} {n:7d} ({100 * n / us.size:4.1f}%)  p50 {np.percentile(us[kind], 50):7.1f}"
              f"  p90 {np.percentile(us[kind], 90):7.1f} us  over p99 {int((kind & over).sum()):5d}"
              f"  per mask: scans {added[kind, 1].mean():.2f}, lexeme walks {added[kind, 3].mean():.2f}")


def _wrap_for_breakdown(excl: dict[str, float], calls: dict[str, int]) -> None:
    """Wrap the mask path's functions with timers that charge each its exclusive time."""
    from banister.parser import earley, recognizer

    stack: list[float] = []

    def wrap(name, f):
        def timed(*a, **k):
            t = clock()  # the run's clock (thread CPU time with --cpu)
            stack.append(0.0)
            try:
                return f(*a, **k)
            finally:
                elapsed = clock() - t
                inner = stack.pop()
                excl[name] = excl.get(name, 0.0) + elapsed - inner
                calls[name] = calls.get(name, 0) + 1
                if stack:
                    stack[-1] += elapsed
        return timed

    ga = recognizer.GrammarAutomaton
    for name in ["_collect", "_walk", "_walk_from_loop", "_lexeme_walk", "_scan", "context", "_branches",
                 "_parts", "fill_mask"]:
        setattr(ga, name, wrap(f"recognizer.{name}", getattr(ga, name)))
    for name in ["walk_tokens", "lexer_context", "_take", "_apply", "_union", "_few_crossing_groups", "_crossing_groups"]:
        setattr(recognizer, name, wrap(name, getattr(recognizer, name)))
    earley.EarleyParser.scan = wrap("earley.scan", earley.EarleyParser.scan)
    earley.EarleyParser._close = wrap("earley._close", earley.EarleyParser._close)


if __name__ == "__main__":
    main()
