"""The MaskBench protocol, run for several engines in one process over the same records.

For each record and engine: compile the schema (a failure counts as a compile error and the schema
does not pass); for each test instance, the text is ``json.dumps(data, ensure_ascii=False)`` tokenised
without special tokens; before each token the engine fills a mask, the token must be allowed, then it
is accepted (both timed: a token costs a mask and an accept). A valid instance must get through every
token and end complete (EOS allowed); an invalid one must be refused somewhere (a token outside the
mask, or an incomplete end). A schema passes when all its instances are classified right.

Two measurements are made for banister only, in a pass of their own after the timed one (between
timed records they would warm banister's caches for the next instance, and a traced compile evicts
the CPU caches the next engine's timings start from): the jump-forward share (of the tokens of the
valid instances it accepts, how many lie entirely inside bytes the grammar forces at that point, so
an engine could append them without a forward pass), and memory per compiled grammar (``tracemalloc``
over one more compile of the schema plus the masks of its first instance: the peak, and what stays
allocated while the compiled grammar and its matcher are alive; vocabulary-level tables and caches
shared across grammars were already built by the timed pass, so this is what one more grammar costs
a warm process).
"""

from __future__ import annotations

import gc
import gzip
import json
import random
import sys
import time
import tracemalloc
from array import array
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from banister.bench.peers import Engine, make_engine
from banister.collector import GEN0_THRESHOLD, settle_heap
from banister.mask.bitmask import allocate_token_bitmask
from banister.vocab import Vocabulary


def instance_text(test: dict[str, Any]) -> str:
    """The text of a test instance, as the protocol writes it: ``json.dumps(data, ensure_ascii=False)``
    (default separators, non-ASCII characters as themselves)."""
    return json.dumps(test["data"], ensure_ascii=False)


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


def _doubles() -> array[float]:
    """A growing list of floats (timings, shares, sizes) held as raw doubles. The garbage collector
    would visit every element of a Python list of millions of timings in each full collection, and
    those pauses land in the timed masks of whichever engine allocates when one falls due (banister's:
    a peer in Rust makes no Python objects), so the bench would time its own bookkeeping."""
    return array("d")


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
    mask_us: array[float] = field(default_factory=_doubles)
    accept_us: array[float] = field(default_factory=_doubles)  # accepting an allowed token
    ttfm_us: array[float] = field(default_factory=_doubles)
    ttfm_by_record: dict[str, float] = field(default_factory=dict)  # the same, by record id (see common_ttfm)
    compile_us: array[float] = field(default_factory=_doubles)
    failures: list[str] = field(default_factory=list)
    forced_tokens: int = 0  # tokens of valid instances lying entirely inside forced bytes
    forced_total: int = 0  # tokens of the valid instances that were checked for forcing
    forced_shares: array[float] = field(default_factory=_doubles)  # per instance
    memory_peak_kib: array[float] = field(default_factory=_doubles)  # per compiled grammar
    memory_retained_kib: array[float] = field(default_factory=_doubles)

    def summary(self) -> dict[str, Any]:
        extra: dict[str, Any] = {}
        if self.forced_total:
            extra["jump_forward"] = {
                "tokens": self.forced_total,
                "forced": self.forced_tokens,
                "share": self.forced_tokens / self.forced_total,
                "instance_share": _percentiles(self.forced_shares, (50, 90)),
            }
        if self.memory_peak_kib:
            extra["memory_kib"] = {
                "grammars": len(self.memory_peak_kib),
                "retained": _percentiles(self.memory_retained_kib, (50, 90, 100)),
                "peak": _percentiles(self.memory_peak_kib, (50, 90, 100)),
            }
        return {
            "engine": self.name,
            "schemas": self.schemas,
            "passing": self.passing,
            "compile_errors": self.compile_errors,
            "valid_rejected": self.valid_rejected,
            "invalid_accepted": self.invalid_accepted,
            "tokens": self.tokens,
            "mask_us": _percentiles(self.mask_us, (50, 90, 99, 99.9, 100)),
            "accept_us": _percentiles(self.accept_us, (50, 99)),
            "ttfm_us": _percentiles(self.ttfm_us, (50, 90, 99)),
            "compile_us": _percentiles(self.compile_us, (50, 90, 99)),
            **extra,
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
    """Run one record through one engine (the timed pass), adding to ``tally``."""
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
        text = instance_text(test)
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
                tally.ttfm_by_record[record["id"]] = tally.ttfm_us[-1]
            tally.tokens += 1
            if not _bit(bitmask, token):
                accepted = False
                break
            t2 = time.perf_counter()
            taken = matcher.accept(token)
            tally.accept_us.append((time.perf_counter() - t2) * 1e6)
            if not taken:
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


def measure_extras(engine: Engine, record: dict[str, Any], encode: Callable[[str], list[int]], vocab: Vocabulary,
                   tally: EngineTally) -> None:
    """The untimed extras of one record, for an engine that supports them (banister): the jump-forward
    share of the valid instances it accepts, and the memory of one more compile. A schema the engine
    refuses adds nothing."""
    if not hasattr(engine, "forced_token_count") or not record["tests"]:
        return
    try:
        compiled = engine.compile_json_schema(record["schema"])
    except Exception:  # noqa: BLE001 - the timed pass counted the refusal
        return
    for test in record["tests"]:
        if not test["valid"]:
            continue
        tokens = encode(instance_text(test))
        forced = engine.forced_token_count(compiled, tokens)
        if forced is not None:
            tally.forced_tokens += forced
            tally.forced_total += len(tokens)
            tally.forced_shares.append(forced / max(len(tokens), 1))
    first = encode(instance_text(record["tests"][0]))
    measured = measure_memory(engine, record["schema"], first, vocab)
    if measured is not None:
        tally.memory_peak_kib.append(measured[0] / 1024)
        tally.memory_retained_kib.append(measured[1] / 1024)


def measure_memory(engine: Engine, schema: Any, tokens: list[int], vocab: Vocabulary) -> tuple[int, int] | None:
    """(peak, retained) bytes allocated by compiling ``schema`` and masking along ``tokens`` (None on failure).

    Retained is what is still allocated while the compiled grammar and its matcher are alive. Only
    allocations Python and numpy report to ``tracemalloc`` count (all of banister's).
    """
    bitmask = allocate_token_bitmask(1, vocab.vocab_size)
    was_tracing = tracemalloc.is_tracing()
    if not was_tracing:
        tracemalloc.start()
    tracemalloc.reset_peak()
    base = tracemalloc.get_traced_memory()[0]
    compiled = matcher = None
    try:
        compiled = engine.compile_json_schema(schema)
        matcher = engine.matcher(compiled)
        for token in tokens:
            matcher.fill(bitmask)
            if not _bit(bitmask, token) or not matcher.accept(token):
                break
        current, peak = tracemalloc.get_traced_memory()
    except Exception:  # noqa: BLE001 - the timed pass counted any failure; here it only means no measurement
        return None
    finally:
        if not was_tracing:
            tracemalloc.stop()
    del compiled, matcher
    return peak - base, current - base


def run(records: list[dict[str, Any]], engines: list[Engine], encode: Callable[[str], list[int]],
        vocab: Vocabulary, *, progress: bool = True, extras: bool = True) -> list[EngineTally]:
    """Every record through every engine, record by record (so the engines see the same order); then,
    with ``extras``, the untimed extras of every record (:func:`measure_extras`)."""
    tallies = [EngineTally(e.name) for e in engines]
    passes = [("timed", run_record)] + ([("extras", measure_extras)] if extras else [])
    for label, measure in passes:
        started = time.perf_counter()
        for n, record in enumerate(records, 1):
            for engine, tally in zip(engines, tallies):
                measure(engine, record, encode, vocab, tally)
            if progress:
                _progress(label, n, len(records), started)
        if progress:
            print(file=sys.stderr)
    return tallies


def _progress(label: str, done: int, total: int, started: float) -> None:
    width = 30
    filled = width * done // max(total, 1)
    elapsed = time.perf_counter() - started
    eta = elapsed / done * (total - done)
    print(f"\r{label} [{'#' * filled}{'.' * (width - filled)}] {done}/{total} records, {elapsed:.0f}s, "
          f"eta {eta:.0f}s", end="", file=sys.stderr, flush=True)


def format_table(tallies: list[EngineTally]) -> str:
    """One row per engine, then banister's ratios to each peer (below 1 = banister faster) and, with two
    peers or more, to the better peer at each ``HEADLINE`` measure."""
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
    shown = [("ttfm_us", "ttfm", ["p50", "p90", "p99"]), ("mask_us", "mask", ["p50", "p90", "p99", "p99.9", "p100"]),
             ("accept_us", "accept", ["p50", "p99"])]
    for key, label, qs in shown:
        for q in qs:
            cols.append((f"{label} {q if q != 'p100' else 'max'} us", lambda r, k=key, q=q: r[k].get(q)))
    lines = ["  ".join(f"{c[0]:>12}" for c in cols)]
    for r in rows:
        lines.append("  ".join(_cell(fn(r)) for _, fn in cols))
    base = rows[0]
    for other in rows[1:]:
        ratios = [f"{key.split('_')[0]} {'max' if q == 'p100' else q} {_ratio(base[key].get(q), other[key].get(q))}"
                  for key, q in RATIOS]
        lines.append(f"{base['engine']} / {other['engine']}: " + ", ".join(ratios)
                     + f"; passing {base['passing']} vs {other['passing']}")
    if len(rows) > 2:
        best = best_peer(tallies)
        lines.append(f"{base['engine']} / the better peer at each: " + ", ".join(
            f"{key.split('_')[0]} {q} {_times(best[f'{key} {q}']['ratio'])} ({best[f'{key} {q}']['peer']})"
            for key, q in HEADLINE if f"{key} {q}" in best))
    for name, common in common_ttfm(tallies).items():
        lines.append(f"{base['engine']} / {name} on the {common['records']} records both compiled: "
                     + ", ".join(f"ttfm {q} {_times(common[f'ttfm_us {q}'])}" for q in ("p50", "p90", "p99")))
    for r in rows:
        jf, mem = r.get("jump_forward"), r.get("memory_kib")
        if jf:
            lines.append(f"{r['engine']} jump-forward: {jf['forced']}/{jf['tokens']} tokens of valid instances forced "
                         f"({100 * jf['share']:.1f}%; per instance p50 {100 * jf['instance_share']['p50']:.1f}%, "
                         f"p90 {100 * jf['instance_share']['p90']:.1f}%)")
        if mem:
            lines.append(f"{r['engine']} memory per compiled grammar ({mem['grammars']} grammars, compile + first "
                         f"instance's masks): retained p50 {mem['retained']['p50']:.0f} KiB, max "
                         f"{mem['retained']['p100']:.0f} KiB; peak p50 {mem['peak']['p50']:.0f} KiB, max "
                         f"{mem['peak']['p100']:.0f} KiB")
    return "\n".join(lines)


RATIOS = [("ttfm_us", "p50"), ("ttfm_us", "p90"), ("ttfm_us", "p99"), ("mask_us", "p50"), ("mask_us", "p90"),
          ("mask_us", "p99"), ("mask_us", "p99.9"), ("mask_us", "p100"), ("accept_us", "p50"), ("accept_us", "p99")]
"""The (measure, percentile) pairs whose banister / peer ratio the table prints (below 1: banister faster)."""


def ratios(tallies: list[EngineTally]) -> dict[str, dict[str, float | None]]:
    """banister's (the first engine's) time over each peer's, per measure: ``{peer: {"mask_us p50": r}}``."""
    rows = [t.summary() for t in tallies]
    out: dict[str, dict[str, float | None]] = {}
    for other in rows[1:]:
        out[other["engine"]] = {}
        for key, q in RATIOS:
            out[other["engine"]][f"{key} {q}"] = _over(rows[0][key].get(q), other[key].get(q))
    return out


HEADLINE = [("ttfm_us", "p50"), ("mask_us", "p50"), ("mask_us", "p99")]
"""The measures the speed bar is set on: banister's at most the better peer's in the same run."""


def best_peer(tallies: list[EngineTally]) -> dict[str, dict[str, Any]]:
    """For each measure of ``RATIOS``, the fastest peer and banister's (the first engine's) ratio to it:
    ``{"mask_us p99": {"peer": "llguidance", "ratio": 0.7}}``. The fastest peer is the one banister's
    ratio is highest to; a peer with no figure (it compiled nothing) is passed over, and a measure with
    no ratio at all is left out."""
    out: dict[str, dict[str, Any]] = {}
    for peer, by_measure in ratios(tallies).items():
        for measure, ratio in by_measure.items():
            if ratio is not None and (measure not in out or ratio > out[measure]["ratio"]):
                out[measure] = {"peer": peer, "ratio": ratio}
    return out


def common_ttfm(tallies: list[EngineTally]) -> dict[str, dict[str, float | None]]:
    """banister's (the first engine's) time to first mask over each peer's on the records both compiled:
    ``{peer: {"records": n, "ttfm_us p50": ratio, ...}}``. Each engine's own percentiles are over the
    records *it* compiled, so an engine that refuses the harder schemas looks faster there; this
    compares the same schemas."""
    base = tallies[0].ttfm_by_record
    out: dict[str, dict[str, float | None]] = {}
    for other in tallies[1:]:
        shared = [rid for rid in base if rid in other.ttfm_by_record]
        mine = _percentiles([base[rid] for rid in shared], (50, 90, 99))
        theirs = _percentiles([other.ttfm_by_record[rid] for rid in shared], (50, 90, 99))
        out[other.name] = {"records": len(shared)}
        for q in ("p50", "p90", "p99"):
            out[other.name][f"ttfm_us {q}"] = _over(mine.get(q), theirs.get(q))
    return out


def _over(a: float | None, b: float | None) -> float | None:
    """``a / b``, or None when either is missing or zero."""
    return a / b if a and b else None


def _ratio(a: float | None, b: float | None) -> str:
    return _times(_over(a, b))


def _times(ratio: float | None) -> str:
    return "n/a" if ratio is None else f"{ratio:.3g}x"


def _cell(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:>12.1f}"
    return f"{value!s:>12}"


def main_maskbench(data: str, tokenizer: str, engine_names: list[str], *, limit: int | None, split: str | None,
                   json_out: str | None, show_failures: int, sample: int | None = None, seed: int = 0,
                   extras: bool = True, gc_threshold: int = GEN0_THRESHOLD) -> int:
    """The `banister bench maskbench` command. The heap is settled as `banister serve` settles it
    (:func:`banister.collector.settle_heap` with ``gc_threshold``); after the run its thresholds are restored,
    and the heap unfrozen unless it was frozen before."""
    from banister.vocab.named import load_named

    named = load_named(tokenizer)
    vocab = named.vocab
    vocab.trie  # noqa: B018 - vocabulary-level table, built once (each peer builds its own at creation)
    engines = [make_engine(name, vocab, named.encode) for name in engine_names]
    records = list(read_records(data, split=split, limit=limit))
    if sample is not None and sample < len(records):
        records = random.Random(seed).sample(records, sample)
    frozen_before = gc.get_freeze_count()
    previous = settle_heap(gc_threshold)
    try:
        tallies = run(records, engines, named.encode, vocab, extras=extras)
    finally:
        gc.set_threshold(*previous)
        if not frozen_before:  # a caller in the same process gets its heap back as it was
            gc.unfreeze()
    print(f"garbage collection: young every {gc_threshold} objects, start-up heap frozen")
    print(format_table(tallies))
    for tally in tallies:
        for line in tally.failures[:show_failures]:
            print(f"  [{tally.name}] {line}")
    if json_out:
        with open(json_out, "w") as fh:
            json.dump({"tokenizer": tokenizer, "data": data, "split": split, "limit": limit, "sample": sample,
                       "seed": seed, "records": len(records), "gc_threshold": gc_threshold,
                       "engines": [t.summary() for t in tallies], "ratios": ratios(tallies),
                       "ratios_to_best_peer": best_peer(tallies),
                       "ttfm_on_common_records": common_ttfm(tallies)}, fh, indent=1)
    return 0

