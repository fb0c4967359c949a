"""The MaskBench protocol, run for several engines in one process over the same records.

For each record and engine: compile the schema (a failure counts as a compile error and the schema
does not pass); for each test instance, the text is ``json.dumps(data, ensure_ascii=False)`` tokenised
without special tokens; before each token the engine fills a mask, the token must be allowed, then it
is accepted (both timed: a token costs a mask and an accept). A valid instance must get through every
token and end complete (EOS allowed); an invalid one must be refused somewhere (a token outside the
mask, or an incomplete end). A schema passes when all its instances are classified right. Each record
takes the next of the engines' orders, so that no engine always runs after the same one (see
:func:`run`).

Two measurements are made for banister only, in a pass of their own after the timed one (between
timed records they would warm banister's caches for the next instance, and a traced compile evicts
the CPU caches the next engine's timings start from): the jump-forward share (of the tokens of the
valid instances it accepts, how many lie entirely inside bytes the grammar forces at that point, so
an engine could append them without a forward pass), and memory per compiled grammar (``tracemalloc``
over one more compile of the schema plus the masks of its first instance: the peak, and what stays
allocated while the compiled grammar and its matcher are alive; vocabulary-level tables and caches
shared across grammars were already built by the timed pass, so this is what one more grammar costs
a warm process).

A run can be spread over several sittings with a checkpoint file (:class:`Checkpoint`): each timed
record's results are appended to it as the record finishes, and a later run of the same command picks
up after the last one. XGrammar compiles the whole dev split in five to seven hours on a two-core
machine, longer than one sitting; :func:`run_in_workers` spreads the records over several processes.
"""

from __future__ import annotations

import contextlib
import gc
import gzip
import hashlib
import itertools
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import threading
import time
import tracemalloc
from array import array
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from banister import _build
from banister.bench.peers import Engine, engine_versions, make_engine
from banister.collector import GEN0_THRESHOLD, THAW_EVERY, restore_heap, settle_heap
from banister.errors import BanisterError
from banister.mask.bitmask import allocate_token_bitmask
from banister.vocab import Vocabulary

if TYPE_CHECKING:
    from banister.vocab.named import NamedTokenizer


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
    by_split: dict[str, EngineTally] = field(default_factory=dict)  # the timed pass's results per split, if kept

    def mark(self) -> tuple[int, ...]:
        """Where the tally stands now, for :meth:`since`: its counts and how long its lists are."""
        return (*(getattr(self, name) for name in COUNTS), *(len(getattr(self, name)) for name in TIMINGS),
                len(self.failures))

    def since(self, mark: tuple[int, ...]) -> dict[str, Any]:
        """What the timed pass added after ``mark``: one record's results, as a checkpoint keeps them."""
        counts, lengths = mark[: len(COUNTS)], mark[len(COUNTS) : -1]
        added: dict[str, Any] = {name: getattr(self, name) - before for name, before in zip(COUNTS, counts)}
        for name, before in zip(TIMINGS, lengths):
            added[name] = getattr(self, name)[before:].tolist()
        added["failures"] = self.failures[mark[-1]:]
        return added

    def add(self, record_id: str, added: dict[str, Any]) -> None:
        """Add one record's results, as :meth:`since` gave them."""
        for name in COUNTS:
            setattr(self, name, getattr(self, name) + added[name])
        for name in TIMINGS:
            getattr(self, name).extend(added[name])
        if added["ttfm_us"]:
            self.ttfm_by_record[record_id] = added["ttfm_us"][0]
        self.failures.extend(added["failures"])

    def add_to_split(self, split: str, record_id: str, added: dict[str, Any]) -> None:
        """File one record's results (as :meth:`since` gave them) under its split in ``by_split``."""
        sub = self.by_split.get(split)
        if sub is None:
            sub = self.by_split[split] = EngineTally(self.name)
        sub.add(record_id, added)

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


COUNTS = ("schemas", "passing", "compile_errors", "valid_rejected", "invalid_accepted", "tokens")
TIMINGS = ("mask_us", "accept_us", "ttfm_us", "compile_us")
"""The counts and timings of :class:`EngineTally` the timed pass adds to (a record's time to first
mask is the first of its ``ttfm_us``)."""


class CheckpointError(BanisterError, ValueError):
    """A checkpoint file that does not belong to this run or cannot be read; the message says which."""


class WorkerError(BanisterError, RuntimeError):
    """A worker process of a run spread over several (``--jobs``) failed; its own error is on stderr."""


class Checkpoint:
    """The timed records of a run, kept in a file as they finish, so that the run can stop and go on.

    The file is JSON lines: a header naming the run (data, tokenizer, engines and their versions,
    banister's by a digest of its sources, the records' ids in order, and every setting that changes
    what is timed), then one line per record with what each engine's tally gained
    (:meth:`EngineTally.since`) and the sitting it was timed in. A run given a file that another run
    made, or other code, is refused; a last line cut short by a killed process is dropped, and that
    record is timed again. Records are timed in order, so those done are always a prefix.

    Each sitting is a new process: banister's caches (and the CPU's) start cold there, as they do
    after a server restart, which only counts against banister.
    """

    def __init__(self, path: str, header: dict[str, Any]) -> None:
        self.path = path
        self.header = {"checkpoint": 2, **header}  # 2: each record in the next of the engines' orders
        self.sitting = 1  # this process's
        self.sittings = 0  # the sittings the file's records were timed in
        self.held = 0  # the records the file holds

    def restore(self, record_ids: list[str], tallies: list[EngineTally], splits: list[str] | None = None, *,
                read_only: bool = False) -> int:
        """Replay the file into ``tallies`` (and, given the records' ``splits``, into their ``by_split``) and
        return how many records it holds (0 for a new file). ``read_only``: a look at a file that a run
        may still be writing: a missing file is an error, and a last line being written is left as is."""
        if not os.path.exists(self.path) or not os.path.getsize(self.path):
            if read_only:
                raise CheckpointError(f"no checkpoint at {self.path}")
            self._write(self.header, "w")
            return 0
        with open(self.path, encoding="utf-8") as fh:
            lines = fh.read().splitlines()
        header = self._entry(lines, 1, read_only)
        if header != self.header:
            differing = sorted(k for k in self.header if not isinstance(header, dict) or header.get(k) != self.header[k])
            raise CheckpointError(f"checkpoint {self.path} belongs to another run (it differs in "
                                  f"{', '.join(differing) or 'its header'}); give a new file or rerun the command "
                                  "that made it")
        self.held = 0
        for number in range(2, len(lines) + 1):  # each line replayed as it is read: a whole split is big
            entry = self._entry(lines, number, read_only)
            if entry is None:
                break
            expected = record_ids[number - 2] if number - 2 < len(record_ids) else None
            if expected is None or not isinstance(entry, dict) or entry.get("id") != expected:
                raise CheckpointError(f"checkpoint {self.path} line {number} is not the run's record {number - 1}")
            try:
                for tally, added in zip(tallies, entry["tallies"], strict=True):
                    tally.add(expected, added)
                    if splits is not None:
                        tally.add_to_split(splits[number - 2], expected, added)
                self.sittings = max(self.sittings, int(entry["sitting"]))
            except (KeyError, TypeError, ValueError) as exc:
                raise CheckpointError(f"checkpoint {self.path} line {number} is not a timed record "
                                      f"({type(exc).__name__}: {exc})") from None
            self.held += 1
        self.sitting = self.sittings + 1
        return self.held

    def _entry(self, lines: list[str], number: int, read_only: bool = False) -> Any:
        """Line ``number`` (from 1) parsed; None for a last record line cut short by a killed process,
        which is dropped from the file (its record is timed again), or, ``read_only``, still being written."""
        try:
            return json.loads(lines[number - 1])
        except json.JSONDecodeError:
            if number == len(lines) > 1:
                if not read_only:
                    with open(self.path, "w", encoding="utf-8") as fh:
                        fh.write("".join(line + "\n" for line in lines[:-1]))
                return None
            raise CheckpointError(f"checkpoint {self.path} line {number} is not JSON") from None

    def save(self, record_id: str, added: list[dict[str, Any]]) -> None:
        """Append one timed record's results, timings to the nanosecond (flushed at once: the process
        may be stopped any time)."""
        kept = [{name: [round(t, 3) for t in value] if name in TIMINGS else value for name, value in part.items()}
                for part in added]
        self._write({"id": record_id, "sitting": self.sitting, "tallies": kept}, "a")
        self.sittings = self.sitting
        self.held += 1

    def _write(self, entry: dict[str, Any], mode: str) -> None:
        with open(self.path, mode, encoding="utf-8") as fh:
            fh.write(json.dumps(entry, separators=(",", ":")) + "\n")


def record_ids_digest(records: list[dict[str, Any]]) -> str:
    """A short digest of the records' ids in order: two runs over the same records agree on it."""
    return hashlib.sha256("\n".join(str(r["id"]) for r in records).encode()).hexdigest()[:16]


def _percentiles(values: Sequence[float], qs: tuple[float, ...]) -> dict[str, float]:
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
        vocab: Vocabulary, *, progress: bool = True, extras: bool = True,
        checkpoint: Checkpoint | None = None, by_split: bool = False) -> list[EngineTally]:
    """Every record through every engine, record by record (so the engines see the same records in the
    same order), each record in the next of the engines' orders (all of them, in turn), so that each
    engine runs equally often after each other one. An engine run after XGrammar's compile meets
    caches it has flushed: measured on 240 GPT-2 records, banister's time to first mask was 1.6x its
    time in a run without XGrammar when it ran straight after it (1.6x after a 50 ms pause too), 1.1x
    after llguidance; a fixed order would charge that to whichever engine followed XGrammar. Then,
    with ``extras``, the untimed extras of every record (:func:`measure_extras`). With ``by_split``,
    each tally's ``by_split`` gets the timed results of every split too. With a ``checkpoint``, the
    records it holds are replayed instead of timed, and each record timed is saved to it; a run
    stopped with Ctrl-C then returns the tallies of the records the file holds, without extras."""
    tallies = [EngineTally(e.name) for e in engines]
    orders = [[(engines[i], tallies[i]) for i in order] for order in itertools.permutations(range(len(engines)))]
    ids = [r["id"] for r in records]
    splits = [str(r.get("split")) for r in records] if by_split else None
    done = checkpoint.restore(ids, tallies, splits) if checkpoint else 0
    started = time.perf_counter()
    try:
        for n, record in enumerate(records[done:], done + 1):
            marks = [tally.mark() for tally in tallies]
            for engine, tally in orders[(n - 1) % len(orders)]:
                run_record(engine, record, encode, vocab, tally)
            if checkpoint or splits:
                added = [tally.since(mark) for tally, mark in zip(tallies, marks)]
                if checkpoint:
                    checkpoint.save(record["id"], added)
                if splits:
                    for tally, gained in zip(tallies, added):
                        tally.add_to_split(splits[n - 1], record["id"], gained)
            if progress:
                _progress("timed", n, len(records), started, resumed_at=done)
    except KeyboardInterrupt:
        if checkpoint is None:
            raise
        tallies = [EngineTally(e.name) for e in engines]  # the record cut off is dropped: timed next sitting
        checkpoint.restore(ids, tallies, splits)
        return tallies
    finally:
        if progress:
            print(file=sys.stderr)
    if extras:
        run_extras(records, engines, encode, vocab, tallies, progress=progress)
    return tallies


def run_extras(records: list[dict[str, Any]], engines: list[Engine], encode: Callable[[str], list[int]],
               vocab: Vocabulary, tallies: list[EngineTally], *, progress: bool = True) -> None:
    """The untimed extras of every record (:func:`measure_extras`), after the timed pass."""
    started = time.perf_counter()
    for n, record in enumerate(records, 1):
        for engine, tally in zip(engines, tallies):
            measure_extras(engine, record, encode, vocab, tally)
        if progress:
            _progress("extras", n, len(records), started)
    if progress:
        print(file=sys.stderr)


def _progress(label: str, at: int, of: int, started: float, *, resumed_at: int = 0) -> None:
    """A progress bar at record ``at`` of ``of``; the time left is reckoned from the records this process
    ran (``resumed_at`` were replayed from a checkpoint)."""
    width = 30
    filled = width * at // max(of, 1)
    elapsed = time.perf_counter() - started
    eta = elapsed / max(at - resumed_at, 1) * (of - at)
    print(f"\r{label} [{'#' * filled}{'.' * (width - filled)}] {at}/{of} records, {elapsed:.0f}s, "
          f"eta {eta:.0f}s", end="", file=sys.stderr, flush=True)


def format_table(tallies: list[EngineTally]) -> str:
    """One row per engine, then banister's ratios to each peer (below 1 = banister faster) and, with two
    peers or more, to the better peer at each ``HEADLINE`` measure."""
    rows = [t.summary() for t in tallies]
    cols: list[tuple[str, Callable[[dict[str, Any]], Any]]] = [
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
            cols.append((f"{label} {q if q != 'p100' else 'max'} us", _percentile_cell(key, q)))
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
        lines.append(f"{base['engine']} / the better peer at each: {_headline(tallies)}")
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


def _percentile_cell(key: str, q: str) -> Callable[[dict[str, Any]], Any]:
    """A table column: percentile ``q`` of timing ``key`` in an engine's summary."""
    return lambda row: row[key].get(q)


def split_tallies(tallies: list[EngineTally]) -> dict[str, list[EngineTally]]:
    """Each split's tallies (from ``by_split``), one per engine in the engines' order; splits sorted."""
    return {split: [t.by_split.get(split, EngineTally(t.name)) for t in tallies]
            for split in sorted(tallies[0].by_split)}


def format_splits(tallies: list[EngineTally]) -> str:
    """One line per split (of ``by_split``): records, each engine's schemas passing, and banister's ratio
    to the better peer at each ``HEADLINE`` measure over that split's records."""
    lines = []
    for split, subs in split_tallies(tallies).items():
        passing = " / ".join(f"{t.name} {t.passing}" for t in subs)
        lines.append(f"{split}: {subs[0].schemas} records, passing {passing}; "
                     f"{tallies[0].name} / the better peer: {_headline(subs) or 'n/a'}")
    return "\n".join(lines)


def _headline(tallies: list[EngineTally]) -> str:
    """banister's ratio to the better peer at each ``HEADLINE`` measure, and that peer, as one phrase."""
    best = best_peer(tallies)
    return ", ".join(f"{key.split('_')[0]} {q} {_times(best[f'{key} {q}']['ratio'])} ({best[f'{key} {q}']['peer']})"
                     for key, q in HEADLINE if f"{key} {q}" in best)


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


def _splits_json(tallies: list[EngineTally]) -> dict[str, Any]:
    """``{"by_split": {split: {"engines": [summary], "ratios_to_best_peer": ...}}}`` when splits were kept."""
    if not tallies[0].by_split:
        return {}
    return {"by_split": {split: {"engines": [t.summary() for t in subs], "ratios_to_best_peer": best_peer(subs)}
                         for split, subs in split_tallies(tallies).items()}}


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
                   extras: bool = True, gc_threshold: int = GEN0_THRESHOLD, gc_thaw_every: int = THAW_EVERY,
                   checkpoint: str | None = None, by_split: bool = False, jobs: int = 1,
                   shard: tuple[int, int] | None = None, report: bool = False) -> int:
    """The `banister bench maskbench` command. The heap is settled as `banister serve` settles it
    (:func:`banister.collector.settle_heap` with ``gc_threshold`` and ``gc_thaw_every``); after the run
    its thresholds are restored, compiles no longer frozen, and the heap unfrozen unless it was frozen
    before. With ``checkpoint`` (a file), the run goes on from the records the file holds
    (:class:`Checkpoint`); with ``by_split``, one more line per split (:func:`format_splits`). With
    ``jobs`` above 1 the records are timed by that many worker processes (:func:`run_in_workers`); a
    worker is this command with ``shard`` ``(k, n)``: every n-th record from the k-th (from 1), no
    progress bar and no extras. With ``report``, nothing is timed: the table is that of the records the
    checkpoint (or, with ``jobs``, the workers' checkpoints) holds, read as a run that is still going may
    be writing it."""
    if jobs < 1 or (jobs > 1 and shard is not None):
        raise ValueError(f"jobs must be at least 1, and 1 for a worker's shard (jobs {jobs}, shard {shard})")
    if report and (checkpoint is None or shard is not None):
        raise CheckpointError("--report reads the table from a run's checkpoint: give --checkpoint FILE")
    if shard is not None:  # a worker stops on its parent's SIGINT, even when started where SIGINT is ignored
        signal.signal(signal.SIGINT, signal.default_int_handler)
    records = list(read_records(data, split=split, limit=limit))
    if sample is not None:  # a sample as big as the selection is all of it, in a random order
        records = random.Random(seed).sample(records, min(sample, len(records)))
    build, versions = _build.describe(), engine_versions(engine_names)
    run_settings = {"tokenizer": tokenizer, "data": os.path.basename(data), "split": split, "limit": limit,
                    "sample": sample, "seed": seed, "engine_names": engine_names, "gc_threshold": gc_threshold,
                    "gc_thaw_every": gc_thaw_every,
                    "records": len(records), "record_ids": record_ids_digest(records), "build": build,
                    "versions": versions}
    frozen_before = gc.get_freeze_count()
    previous = settle_heap(gc_threshold, gc_thaw_every)
    try:
        if report and checkpoint is not None:
            paths = shard_paths(checkpoint, jobs) if jobs > 1 else [checkpoint]
            tallies, held, sittings = read_checkpoints(records, run_settings, paths, by_split=by_split,
                                                       read_only=True)
        elif jobs > 1:
            tallies, held, sittings = run_in_workers(records, run_settings, data, jobs, checkpoint=checkpoint,
                                                     by_split=by_split)
            if extras and held == len(records):
                named, engines = _engines(tokenizer, engine_names)
                run_extras(records, engines, named.encode, named.vocab, tallies)
        else:
            if shard is not None:
                records = shard_of(records, shard)
                run_settings = shard_settings(run_settings, records, shard)
            kept = Checkpoint(checkpoint, run_settings) if checkpoint else None
            named, engines = _engines(tokenizer, engine_names)
            with _stopping_cleanly() if kept else contextlib.nullcontext():
                tallies = run(records, engines, named.encode, named.vocab, extras=extras and shard is None,
                              checkpoint=kept, by_split=by_split, progress=shard is None)
            held, sittings = (kept.held, kept.sittings) if kept else (len(records), 1)
    finally:  # a caller in the same process gets its heap back as it was
        restore_heap(previous, unfreeze=not frozen_before)
    print(f"banister build: {build}")
    print("engines: " + ", ".join(f"{name} {version}" for name, version in versions.items()))
    print(f"garbage collection: young every {gc_threshold} objects, start-up heap frozen, "
          + (f"what each compile leaves frozen too (thawed every {gc_thaw_every} compiles)" if gc_thaw_every
             else "compiles not frozen"))
    complete = held == len(records)
    if report:
        print(f"the checkpoint holds {held} of {len(records)} records: the table is theirs (nothing was timed)")
    elif not complete:
        print(f"stopped after {held} of {len(records)} records: the table is theirs; the same command goes on")
    if jobs > 1:
        print(f"timed by {jobs} single-threaded worker processes at once (worker k: records k, k+{jobs}, ...)")
    if sittings > 1:
        print(f"timed in {sittings} sittings (checkpoint {checkpoint}); each began with cold caches")
    print(format_table(tallies))
    if by_split:
        print(format_splits(tallies))
    for tally in tallies:
        for line in tally.failures[:show_failures]:
            print(f"  [{tally.name}] {line}")
    if json_out:
        with open(json_out, "w") as fh:
            json.dump({**run_settings, "data": data, "complete": complete, "sittings": sittings, "jobs": jobs,
                       "engines": [t.summary() for t in tallies], "ratios": ratios(tallies),
                       "ratios_to_best_peer": best_peer(tallies),
                       "ttfm_on_common_records": common_ttfm(tallies), **_splits_json(tallies)}, fh, indent=1)
    return 0


def _engines(tokenizer: str, engine_names: list[str]) -> tuple[NamedTokenizer, list[Engine]]:
    """The named vocabulary and the engines made on it, its vocabulary-level table built first (each peer
    builds its own at creation)."""
    from banister.vocab.named import load_named

    named = load_named(tokenizer)
    named.vocab.trie  # noqa: B018
    return named, [make_engine(name, named.vocab, named.encode) for name in engine_names]


def shard_of(records: list[dict[str, Any]], shard: tuple[int, int]) -> list[dict[str, Any]]:
    """Worker k's records of n (``shard`` ``(k, n)``, k from 1): every n-th from the k-th."""
    return records[shard[0] - 1::shard[1]]


def shard_settings(run_settings: dict[str, Any], records: list[dict[str, Any]],
                   shard: tuple[int, int]) -> dict[str, Any]:
    """The settings of one worker's run (its checkpoint's header): the whole run's, for its own records."""
    return {**run_settings, "shard": f"{shard[0]}/{shard[1]}", "records": len(records),
            "record_ids": record_ids_digest(records)}


def run_in_workers(records: list[dict[str, Any]], settings: dict[str, Any], data: str, jobs: int, *,
                   checkpoint: str | None, by_split: bool) -> tuple[list[EngineTally], int, int]:
    """Time ``records`` in ``jobs`` worker processes at once (``banister bench maskbench --shard k/jobs``),
    worker k taking every ``jobs``-th record from the k-th, each keeping its own checkpoint (with
    ``checkpoint`` FILE, ``FILE.k-of-jobs``, so the same command goes on after a stop; without, a
    temporary one). Every engine runs in every worker, so the workers' competition for the CPU's
    caches and memory weighs on all of them; each engine is single-threaded as before. Returns the
    merged tallies, the records timed and the sittings. Ctrl-C stops the workers (each keeps what it
    timed) and merges what they hold."""
    shards = [(k, jobs) for k in range(1, jobs + 1)]
    with tempfile.TemporaryDirectory(prefix="maskbench-") as scratch:
        paths = shard_paths(checkpoint or os.path.join(scratch, "run"), jobs)
        argv = [sys.executable, "-m", "banister.cli", "bench", "maskbench", "--data", data,
                "--tokenizer", settings["tokenizer"], "--engines", ",".join(settings["engine_names"]),
                "--seed", str(settings["seed"]), "--gc-threshold", str(settings["gc_threshold"]),
                "--gc-thaw-every", str(settings["gc_thaw_every"]), "--no-extras"]
        for option in ("limit", "split", "sample"):
            if settings[option] is not None:
                argv += [f"--{option}", str(settings[option])]
        # each in a session of its own: a Ctrl-C reaches them once, from here
        workers = [subprocess.Popen([*argv, "--shard", f"{k}/{n}", "--checkpoint", path],
                                    stdout=subprocess.DEVNULL, start_new_session=True)
                   for (k, n), path in zip(shards, paths)]
        held_now = _RecordsHeld(paths)
        started, resumed_at, interrupted = time.perf_counter(), held_now(), False
        try:
            with _stopping_cleanly():  # a kill stops the workers too, as Ctrl-C does
                while any(w.poll() is None for w in workers):
                    _progress("timed", held_now(), len(records), started, resumed_at=resumed_at)
                    time.sleep(1.0)
        except KeyboardInterrupt:
            interrupted = True
            for worker in workers:
                worker.send_signal(signal.SIGINT)
        finally:
            for worker in workers:
                worker.wait()
            print(file=sys.stderr)
        failed = [f"worker {k} exited with {w.returncode}" for (k, _), w in zip(shards, workers) if w.returncode]
        if failed and not interrupted:
            raise WorkerError(f"maskbench workers failed ({'; '.join(failed)}); their errors are above")
        return read_checkpoints(records, settings, paths, by_split=by_split)


def shard_paths(checkpoint: str, jobs: int) -> list[str]:
    """The checkpoint files of a run in ``jobs`` workers with ``--checkpoint`` ``checkpoint``."""
    return [f"{checkpoint}.{k}-of-{jobs}" for k in range(1, jobs + 1)]


def read_checkpoints(records: list[dict[str, Any]], settings: dict[str, Any], paths: list[str], *, by_split: bool,
                     read_only: bool = False) -> tuple[list[EngineTally], int, int]:
    """The merged tallies of what a run's checkpoints ``paths`` hold (one process's, or worker k's at
    ``paths[k - 1]``), the records they hold and their sittings (``read_only``: see
    :meth:`Checkpoint.restore`)."""
    tallies = [EngineTally(name) for name in settings["engine_names"]]
    held = sittings = 0
    for k, path in enumerate(paths, 1):
        shard = (k, len(paths))
        part = shard_of(records, shard)
        kept = Checkpoint(path, shard_settings(settings, part, shard) if len(paths) > 1 else settings)
        held += kept.restore([r["id"] for r in part], tallies,
                             [str(r.get("split")) for r in part] if by_split else None, read_only=read_only)
        sittings = max(sittings, kept.sittings)
    return tallies, held, sittings


@contextlib.contextmanager
def _stopping_cleanly() -> Iterator[None]:
    """SIGTERM and SIGINT raise KeyboardInterrupt for the duration, as Ctrl-C does in a terminal, so that a
    run with a checkpoint stops cleanly however it is stopped: by a kill, or by SIGINT where a start in
    the background (``&`` in a script) left SIGINT ignored."""
    if threading.current_thread() is not threading.main_thread():  # (only the main thread takes signals)
        yield
        return
    previous = signal.signal(signal.SIGTERM, _stop), signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous[0])
        signal.signal(signal.SIGINT, previous[1])


def _stop(signum: int, frame: object) -> None:
    """SIGTERM taken as Ctrl-C (see :func:`_stopping_cleanly`)."""
    raise KeyboardInterrupt


class _RecordsHeld:
    """How many timed records growing checkpoint files hold (their lines after the header), reading only
    what was appended since the last look: a whole split's files run to tens of megabytes."""

    def __init__(self, paths: list[str]) -> None:
        self.read = dict.fromkeys(paths, 0)  # bytes read so far
        self.lines = dict.fromkeys(paths, 0)

    def __call__(self) -> int:
        for path, offset in self.read.items():
            try:
                with open(path, "rb") as fh:
                    fh.seek(offset)
                    appended = fh.read()
            except FileNotFoundError:
                continue
            whole = appended[: appended.rfind(b"\n") + 1]  # a line still being written waits for the next look
            self.read[path] += len(whole)
            self.lines[path] += whole.count(b"\n")
        return sum(max(n - 1, 0) for n in self.lines.values())
