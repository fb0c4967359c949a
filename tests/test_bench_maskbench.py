"""The MaskBench protocol on a fixed sample, through the real Matcher and the Llama-3 vocabulary.

Each instance's verdict (walked token by token through the masks) must equal the slow Earley oracle's
on the same grammar, and no instance that `jsonschema` calls invalid may be accepted.
"""

import collections
import gc
import itertools
import json
import random

import jsonschema
import numpy as np
import pytest
from shared_data import MASKBENCH_DEV

from banister.bench.maskbench import EngineTally, read_records, run_record
from banister.bench.peers import BanisterEngine
from banister.errors import BanisterError
from banister.grammar.json_schema import json_schema_to_grammar
from banister.grammar.reference import matches
from banister.vocab.named import load_named

SAMPLE = 25


@pytest.fixture(scope="module")
def sample():
    if not MASKBENCH_DEV.exists():
        pytest.skip("MaskBench data not present")
    records = list(read_records(str(MASKBENCH_DEV)))
    return random.Random(7).sample(records, SAMPLE)


def test_protocol_agrees_with_the_oracle_and_accepts_nothing_invalid(sample):
    named = load_named("llama3")
    engine = BanisterEngine(named.vocab, named.encode)
    tally = EngineTally("banister")
    checked = 0
    for record in sample:
        before = (tally.valid_rejected, tally.invalid_accepted)
        run_record(engine, record, named.encode, named.vocab, tally)
        try:
            grammar = json_schema_to_grammar(record["schema"])
        except BanisterError:
            continue  # counted by run_record as a compile error
        expected_wrong = 0
        for test in record["tests"]:
            text = json.dumps(test["data"], ensure_ascii=False)
            accepted = matches(grammar, text)
            expected_wrong += accepted != test["valid"]
            if accepted and not test["valid"]:
                jsonschema.validate(test["data"], record["schema"])  # the label would be wrong: fail loudly
            checked += 1
        after = (tally.valid_rejected, tally.invalid_accepted)
        assert sum(after) - sum(before) == expected_wrong, record["id"]
    assert tally.invalid_accepted == 0, tally.failures
    assert checked > 0 and tally.schemas == SAMPLE
    print(f"\nMaskBench sample: {tally.passing}/{tally.schemas} passing, {tally.compile_errors} compile errors, "
          f"{tally.valid_rejected} valid rejected, {tally.invalid_accepted} invalid accepted")


def test_table_json_and_extras_on_gpt2(sample, tmp_path):
    """The table's columns, banister's extras (jump-forward share, memory per grammar) and the JSON file."""
    from banister.bench.maskbench import format_table, main_maskbench, ratios, run

    named = load_named("gpt2")
    records = sample[:3]
    tallies = run(records, [BanisterEngine(named.vocab, named.encode), BanisterEngine(named.vocab, named.encode)],
                  named.encode, named.vocab, progress=False)
    a, b = (t.summary() for t in tallies)
    assert a["passing"] == b["passing"] and a["tokens"] == b["tokens"] > 0
    assert set(a["mask_us"]) == {"p50", "p90", "p99", "p99.9", "p100"} and set(a["ttfm_us"]) == {"p50", "p90", "p99"}
    assert set(a["accept_us"]) == {"p50", "p99"} and 0 < a["accept_us"]["p50"] <= a["accept_us"]["p99"]
    assert len(tallies[0].accept_us) <= tallies[0].tokens  # one per allowed token
    jf = a["jump_forward"]
    assert 0 <= jf["forced"] <= jf["tokens"] and 0 <= jf["share"] <= 1 and jf["forced"] > 0  # JSON forces keys
    mem = a["memory_kib"]
    assert 0 < mem["grammars"] <= tallies[0].schemas - tallies[0].compile_errors  # records with tests
    assert 0 < mem["retained"]["p50"] <= mem["peak"]["p100"]
    table = format_table(tallies)
    for column in ("ttfm p99 us", "mask p99.9 us", "mask max us", "accept p99 us", "compile err", "valid rej",
                   "invalid acc"):
        assert column in table
    assert "banister / banister: ttfm p50" in table and "jump-forward" in table and "memory per compiled" in table
    assert set(ratios(tallies)["banister"]) == {f"{k} {q}" for k, q in
                                                [("ttfm_us", "p50"), ("ttfm_us", "p90"), ("ttfm_us", "p99"),
                                                 ("mask_us", "p50"), ("mask_us", "p90"), ("mask_us", "p99"),
                                                 ("mask_us", "p99.9"), ("mask_us", "p100"), ("accept_us", "p50"),
                                                 ("accept_us", "p99")]}
    out = tmp_path / "out.json"
    thresholds, frozen = gc.get_threshold(), gc.get_freeze_count()
    assert main_maskbench(str(MASKBENCH_DEV), "gpt2", ["banister"], limit=2, split=None, json_out=str(out),
                          show_failures=0, extras=False, gc_threshold=12_345) == 0
    assert gc.get_threshold() == thresholds  # the run's setting does not outlive it,
    assert gc.get_freeze_count() == frozen  # nor its frozen heap (the tests after it collect as usual)
    data = json.loads(out.read_text())
    assert data["tokenizer"] == "gpt2" and data["records"] == 2 and "jump_forward" not in data["engines"][0]
    assert data["gc_threshold"] == 12_345


def test_jump_forward_counts_only_instances_the_grammar_accepts_whole():
    """The extras pass counts forced tokens of a valid instance only when banister accepts all of it,
    as the timed pass's verdict would (every token allowed, then EOS)."""
    named = load_named("gpt2")
    engine = BanisterEngine(named.vocab, named.encode)
    compiled = engine.compile_json_schema({"type": "object", "properties": {"name": {"type": "string"}},
                                           "required": ["name"], "additionalProperties": False})
    whole = named.encode('{"name": "Ada"}')
    forced = engine.forced_token_count(compiled, whole)
    assert forced is not None and 0 < forced < len(whole)  # the key is forced, the value is not
    assert engine.forced_token_count(compiled, whole[:-1]) is None  # a valid prefix, not complete
    assert engine.forced_token_count(compiled, named.encode('{"nom": "Ada"}')) is None  # refused on the way


def test_timings_give_the_garbage_collector_nothing_to_walk():
    """A run keeps millions of timings; the collector must not visit them one by one in every full
    collection (those pauses would land in the timed masks)."""
    from banister.bench.maskbench import EngineTally

    tally = EngineTally("banister")
    for t in range(10_000):
        tally.mask_us.append(float(t))
        tally.accept_us.append(float(t))
    assert len(gc.get_referents(tally.mask_us)) <= 1 and len(gc.get_referents(tally.accept_us)) <= 1  # its type at most
    assert tally.summary()["mask_us"]["p50"] == pytest.approx(4999.5)


def test_time_to_first_mask_is_also_compared_on_the_records_both_engines_compiled():
    """An engine that refuses the slow schemas has a lower p50 of its own; the common-record ratio
    compares the same schemas."""
    from banister.bench.maskbench import EngineTally, common_ttfm

    mine, theirs = EngineTally("banister"), EngineTally("peer")
    mine.ttfm_by_record = {"a": 100.0, "b": 200.0, "hard": 10_000.0}
    theirs.ttfm_by_record = {"a": 50.0, "b": 100.0}
    common = common_ttfm([mine, theirs])["peer"]
    assert common["records"] == 2
    assert common["ttfm_us p50"] == pytest.approx(150.0 / 75.0)


def test_the_better_peer_is_chosen_per_measure():
    """The speed bar is the better peer at each measure, which need not be one peer for all: the ratio
    to the better peer is banister's time over the lowest peer time, measure by measure."""
    from banister.bench.maskbench import best_peer, format_table

    def tally(name: str, ttfm: list[float], masks: list[float]) -> EngineTally:
        t = EngineTally(name)
        t.ttfm_us.extend(ttfm)
        t.mask_us.extend(masks)
        return t

    mine = tally("banister", [1000.0], [2.0] * 98 + [200.0] * 2)
    fast_compile = tally("compiles-fast", [800.0], [10.0] * 98 + [300.0] * 2)
    fast_masks = tally("masks-fast", [500_000.0], [1.0] * 98 + [60.0] * 2)
    nothing = EngineTally("compiled-nothing")  # no figures: passed over, not a zero
    best = best_peer([mine, fast_compile, fast_masks, nothing])
    assert best["ttfm_us p50"] == {"peer": "compiles-fast", "ratio": pytest.approx(1000 / 800)}
    assert best["mask_us p50"] == {"peer": "masks-fast", "ratio": pytest.approx(2.0)}
    expected_p99 = np.percentile([2.0] * 98 + [200.0] * 2, 99) / np.percentile([1.0] * 98 + [60.0] * 2, 99)
    assert best["mask_us p99"]["peer"] == "masks-fast"
    assert best["mask_us p99"]["ratio"] == pytest.approx(expected_p99)
    assert "accept_us p50" not in best  # no engine timed an accept
    line = next(ln for ln in format_table([mine, fast_compile, fast_masks]).splitlines() if "better peer" in ln)
    assert "ttfm p50 1.25x (compiles-fast)" in line and "mask p50 2x (masks-fast)" in line
    assert "better peer" not in format_table([mine, fast_compile])  # one peer: its own line says it all


class _Wrapped:
    """Banister under another ``name``; subclasses step in before each compile."""

    def __init__(self, name: str, engine: BanisterEngine) -> None:
        self.name, self._engine = name, engine

    def compile_json_schema(self, schema: dict):
        return self._engine.compile_json_schema(schema)

    def matcher(self, compiled):
        return self._engine.matcher(compiled)


class _StoppedAt(_Wrapped):
    """An engine that is banister until Ctrl-C is pressed while it compiles ``schema``."""

    def __init__(self, engine: BanisterEngine, schema: dict) -> None:
        super().__init__(engine.name, engine)
        self._schema = schema

    def compile_json_schema(self, schema: dict):
        if schema is self._schema:
            raise KeyboardInterrupt
        return super().compile_json_schema(schema)


class _Logged(_Wrapped):
    """An engine that is banister and writes its name in ``log`` at each compile."""

    def __init__(self, name: str, engine: BanisterEngine, log: list) -> None:
        super().__init__(name, engine)
        self._log = log

    def compile_json_schema(self, schema: dict):
        self._log.append(self.name)
        return super().compile_json_schema(schema)


def test_each_engine_runs_after_each_other_equally_often(sample):
    """Records take the engines' orders in turn: over six records, three engines run in all six orders,
    so no engine always follows the one whose compile flushed the caches (and results stay per engine)."""
    from banister.bench.maskbench import run

    named = load_named("gpt2")
    engine = BanisterEngine(named.vocab, named.encode)
    log: list[str] = []
    records = sample[:6]
    tallies = run(records, [_Logged(name, engine, log) for name in "abc"], named.encode, named.vocab,
                  progress=False, extras=False)
    orders = [tuple(log[i:i + 3]) for i in range(0, len(log), 3)]
    assert sorted(orders) == sorted(itertools.permutations("abc"))
    after = collections.Counter(pair for order in orders for pair in zip(order, order[1:]))
    assert set(after.values()) == {2} and len(after) == 6
    assert [t.name for t in tallies] == ["a", "b", "c"]
    assert len({(t.passing, t.tokens) for t in tallies}) == 1  # the same engine: the same counts in any order


def test_a_checkpointed_run_goes_on_where_it_stopped(sample, tmp_path):
    """A run stopped with Ctrl-C returns the records its checkpoint holds; run again, it replays them and
    times the rest (a last line cut short, as a kill leaves it, is timed again), and the counts are
    those of a run in one go. A file from another run, or a damaged line, is refused, naming the line."""
    from banister.bench.maskbench import Checkpoint, CheckpointError, run

    named = load_named("gpt2")
    records = sample[:4]
    ids = [r["id"] for r in records]
    header = {"run": "test", "records": ids}
    engine = BanisterEngine(named.vocab, named.encode)
    (whole,) = run(records, [engine], named.encode, named.vocab, progress=False, extras=False,
                   checkpoint=Checkpoint(str(tmp_path / "whole.jsonl"), header), by_split=True)

    path = tmp_path / "run.jsonl"
    first = Checkpoint(str(path), header)
    (stopped,) = run(records, [_StoppedAt(engine, records[2]["schema"])], named.encode, named.vocab,
                     progress=False, checkpoint=first)
    assert first.held == 2 and stopped.schemas == 2 and not stopped.memory_peak_kib  # no extras either
    lines = path.read_text().splitlines()
    assert len(lines) == 3
    kept = json.loads(lines[2])["tallies"][0]
    path.write_text(path.read_text() + lines[2][: len(lines[2]) // 2])  # a kill while saving record 3

    again = Checkpoint(str(path), header)
    (resumed,) = run(records, [engine], named.encode, named.vocab, progress=False, extras=False, checkpoint=again)
    assert (again.held, again.sittings) == (4, 2) and len(path.read_text().splitlines()) == 1 + len(records)
    counts = ("schemas", "passing", "compile_errors", "valid_rejected", "invalid_accepted", "tokens")
    assert [getattr(resumed, c) for c in counts] == [getattr(whole, c) for c in counts]
    assert len(resumed.mask_us) == len(whole.mask_us) and set(resumed.ttfm_by_record) == set(whole.ttfm_by_record)
    assert list(resumed.mask_us[len(stopped.mask_us) - len(kept["mask_us"]) : len(stopped.mask_us)]) == kept["mask_us"]
    assert resumed.ttfm_by_record[ids[1]] == kept["ttfm_us"][0]
    assert not resumed.by_split  # kept only when asked for

    with pytest.raises(CheckpointError, match="another run.*records"):
        run(records[:3], [engine], named.encode, named.vocab, progress=False, extras=False,
            checkpoint=Checkpoint(str(path), {"run": "test", "records": ids[:3]}))
    lines = path.read_text().splitlines()
    lines[2] = lines[2][:-1]
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(CheckpointError, match="line 3 is not JSON"):
        run(records, [engine], named.encode, named.vocab, progress=False, extras=False,
            checkpoint=Checkpoint(str(path), header))
    lines[2] = json.dumps({"id": ids[0], "sitting": 1, "tallies": []})
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(CheckpointError, match="line 3 is not the run's record 2"):
        run(records, [engine], named.encode, named.vocab, progress=False, extras=False,
            checkpoint=Checkpoint(str(path), header))


def test_results_by_split_add_up_to_the_whole(sample, tmp_path):
    """``by_split`` files every record's results under its split, timed now or replayed from a
    checkpoint: the splits' counts and timings add up to the whole, and each gets one line."""
    from banister.bench.maskbench import Checkpoint, format_splits, run, split_tallies

    named = load_named("gpt2")
    by_split: dict[str, list] = {}
    for record in sample:
        by_split.setdefault(record["split"], []).append(record)
    records = [r for group in list(by_split.values())[:3] for r in group[:2]]
    engines = [BanisterEngine(named.vocab, named.encode), BanisterEngine(named.vocab, named.encode)]
    path = str(tmp_path / "run.jsonl")
    timed = run(records, engines, named.encode, named.vocab, progress=False, extras=False, by_split=True,
                checkpoint=Checkpoint(path, {"run": "splits"}))
    replayed = run(records, engines, named.encode, named.vocab, progress=False, extras=False, by_split=True,
                   checkpoint=Checkpoint(path, {"run": "splits"}))
    for tallies in (timed, replayed):
        groups = split_tallies(tallies)
        assert list(groups) == sorted({r["split"] for r in records}) and len(groups) > 1
        for k, whole in enumerate(tallies):
            parts = [subs[k] for subs in groups.values()]
            assert sum(p.schemas for p in parts) == whole.schemas == len(records)
            assert sum(p.tokens for p in parts) == whole.tokens
            assert sorted(t for p in parts for t in p.mask_us) == sorted(whole.mask_us)
            assert {rid for p in parts for rid in p.ttfm_by_record} == set(whole.ttfm_by_record)
        lines = format_splits(tallies).splitlines()
        assert [line.split(":")[0] for line in lines] == list(groups)
        assert any("the better peer: ttfm p50" in line for line in lines)  # (a split of refusals has none)
    assert list(replayed[0].mask_us) == [round(t, 3) for t in timed[0].mask_us]


def _run_benchmark(script: str, *args: str) -> str:
    """The standard output of ``benchmarks/<script>`` run on the MaskBench dev data with ``args`` (it
    must exit 0); the test is skipped without the data."""
    import subprocess
    import sys
    from pathlib import Path

    if not MASKBENCH_DEV.exists():
        pytest.skip("MaskBench data not present")
    path = Path(__file__).parent.parent / "benchmarks" / script
    done = subprocess.run([sys.executable, str(path), "--data", str(MASKBENCH_DEV), *args],
                          capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


def test_profile_mask_breakdown_times_the_mask_path():
    """benchmarks/profile_mask.py --breakdown wraps the recogniser's methods by name: it runs, and
    charges time to them (a renamed method would fail it at start)."""
    out = _run_benchmark("profile_mask.py", "--limit", "4", "--breakdown")
    assert "records 4 passing 4" in out
    assert "recognizer._collect" in out and "walk_tokens" in out


def test_profile_mask_by_miss_sorts_every_mask_once():
    """benchmarks/profile_mask.py --by-miss reads the recogniser's caches by name: it runs, and its
    kinds of masks count every mask once (the kinds are disjoint and cover them all)."""
    out = _run_benchmark("profile_mask.py", "--limit", "6", "--by-miss")
    total = int(out.split(" masks ")[1].split()[0])
    lines = out.split("masks by what they built")[1].splitlines()[1:]
    counts = {line[:30].strip(): int(line[30:].split()[0]) for line in lines if line.startswith("  ")}
    assert "a state met before" in counts
    assert sum(counts.values()) == total


def test_profile_mask_serve_compiles_through_a_caching_compiler():
    """benchmarks/profile_mask.py --serve (a Compiler keeping its grammars, the heap settled) runs the
    same matchers: the same records pass as without it, and the collector's line says what it cost."""
    records = ("--sample", "6", "--seed", "4")
    plain = _run_benchmark("profile_mask.py", *records).splitlines()[0]
    served = _run_benchmark("profile_mask.py", *records, "--serve")
    assert served.splitlines()[0].split(" total ")[0] == plain.split(" total ")[0]  # "records 6 passing N"
    assert "masks had a collection inside" in served


def test_cold_caches_pairs_every_record_flushed_and_not():
    """benchmarks/cold_caches.py times each record in two processes, flushed in one of them: it runs,
    pairs the records both compiled and prints a positive ratio for each phase."""
    lines = _run_benchmark("cold_caches.py", "--sample", "6", "--flush-mib", "1").splitlines()
    assert 1 <= int(lines[0].split()[0]) <= 6, lines[0]  # (a refused schema is left out)
    ratios = {line.split("flushed")[0].strip(): float(line.split("records ")[1].split()[0]) for line in lines[1:]}
    assert list(ratios) == ["front end", "automaton", "first mask", "time to first mask"]
    assert all(r > 0 for r in ratios.values())


def test_llguidance_peer_reports_a_refused_schema_as_a_compile_error():
    """llguidance compiles when its matcher is made (no separate validation pass that would compile
    twice inside the timed window); a schema it refuses must still count as a compile error."""
    pytest.importorskip("llguidance")
    from banister.bench.peers import LLGuidanceEngine

    named = load_named("gpt2")
    engine = LLGuidanceEngine(named.vocab, named.encode)
    tally = EngineTally("llguidance")
    good = {"id": "good", "schema": {"type": "object", "properties": {"a": {"type": "integer"}}},
            "tests": [{"data": {"a": 1}, "valid": True}, {"data": {"a": "x"}, "valid": False}]}
    bad = {"id": "bad", "schema": {"$ref": "#/nowhere"}, "tests": [{"data": 1, "valid": True}]}
    for record in (good, bad):
        run_record(engine, record, named.encode, named.vocab, tally)
    assert (tally.schemas, tally.passing, tally.compile_errors) == (2, 1, 1)
    assert tally.failures[0].startswith("bad: compile:")
