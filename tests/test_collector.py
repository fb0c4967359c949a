"""The garbage-collector settings of a long-running process (banister.collector)."""

import gc
import weakref
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from banister.cli import build_parser
from banister.collector import (
    GEN0_THRESHOLD,
    THAW_EVERY,
    count_arg,
    restore_heap,
    settle_heap,
    thaw_if_due,
    whole_number_arg,
)
from banister.compiler import Compiler


def test_settle_heap_freezes_the_live_heap_and_raises_the_young_threshold():
    previous = gc.get_threshold()
    try:
        assert settle_heap(20_000) == previous
        assert gc.get_threshold() == (20_000, previous[1], previous[2])  # older generations as they were
        assert gc.get_freeze_count() > 0
        assert gc.get_count()[0] < 100  # nothing young left over: the collection ran, then the freeze
    finally:
        restore_heap(previous, unfreeze=True)
    assert gc.get_threshold() == previous and gc.get_freeze_count() == 0


class Cycle:
    """Garbage only the collector frees: it refers to itself."""

    def __init__(self) -> None:
        self.me = self


@contextmanager
def settled(**settings: int) -> Iterator[None]:
    """The heap settled with ``settings`` for the duration, then restored and thawed."""
    previous = settle_heap(**settings)
    try:
        yield
    finally:
        restore_heap(previous, unfreeze=True)


def _tracked(obj: object) -> bool:
    """Whether the collector's generations hold ``obj`` (frozen objects are in none of them)."""
    return any(found is obj for found in gc.get_objects())


def test_a_settled_heap_freezes_what_each_compile_leaves_and_thaws_every_few_compiles(gpt2):
    compiler = Compiler(gpt2.vocab, cache_size=0)
    with settled(thaw_every=2):
        cycle = Cycle()
        alive = weakref.ref(cycle)
        first = compiler.json_schema({"type": "object", "properties": {"a": {"type": "integer"}}})
        assert not _tracked(first.automaton) and not _tracked(first.automaton.parser)  # frozen with the heap
        del cycle
        gc.collect()
        assert alive() is not None  # cyclic garbage that was alive at a freeze waits for the thaw...
        second = compiler.regex("[a-z]+")
        assert alive() is None  # ...which the second compile made: unfrozen, collected, frozen again
        assert not _tracked(second.automaton) and not _tracked(first.automaton)
    third = compiler.regex("[0-9]+")
    assert _tracked(third.automaton) and gc.get_freeze_count() == 0  # restored: compiles no longer frozen


def test_no_collection_scans_what_a_compile_leaves_before_it_is_frozen(gpt2):
    """The freeze comes before collection resumes: the first allocation after a compile that left more
    young objects than the threshold would otherwise collect them all (a third of a second after a
    big schema)."""
    compiler = Compiler(gpt2.vocab, cache_size=0)
    collections: list[int] = []

    def count(phase: str, info: dict) -> None:
        if phase == "start":
            collections.append(info["generation"])

    schema = {"type": "object", "properties": {f"p{i}": {"type": "string", "maxLength": i} for i in range(20)}}
    with settled(gen0_threshold=100):
        gc.callbacks.append(count)
        try:
            compiled = compiler.json_schema(schema)
        finally:
            gc.callbacks.remove(count)
        assert collections == [] and not _tracked(compiled.automaton)


def test_an_idle_moment_thaws_from_half_the_period_on(gpt2):
    compiler = Compiler(gpt2.vocab, cache_size=0)
    with settled(thaw_every=4):
        cycle = Cycle()
        alive = weakref.ref(cycle)
        compiler.regex("[a-z]+")
        assert not thaw_if_due()  # one compile of four: not yet
        compiler.regex("[0-9]+")
        del cycle
        gc.collect()
        assert alive() is not None
        assert thaw_if_due() and alive() is None  # two of four: thawed and collected
        assert not thaw_if_due()  # a new period began
        cycle = Cycle()
        alive = weakref.ref(cycle)
        for pattern in ("a", "b", "c"):
            compiler.regex(pattern)
        del cycle
        compiler.regex("d")
        assert alive() is None  # the fourth compile since the idle thaw thawed again
    assert not thaw_if_due()  # restored: nothing is frozen, nothing to thaw


def test_thaw_every_zero_leaves_compiles_to_the_collector(gpt2):
    compiler = Compiler(gpt2.vocab, cache_size=0)
    with settled(thaw_every=0):
        frozen = gc.get_freeze_count()
        compiled = compiler.regex("[a-z]+")
        assert _tracked(compiled.automaton) and gc.get_freeze_count() == frozen


@pytest.mark.parametrize("bad", [{"gen0_threshold": 0}, {"gen0_threshold": -5}, {"thaw_every": -1}])
def test_settle_heap_refuses_a_threshold_that_would_stop_collection(bad):
    previous = gc.get_threshold()
    with pytest.raises(ValueError, match="gen0_threshold must be at least 1 and thaw_every at least 0"):
        settle_heap(**bad)
    assert gc.get_threshold() == previous and gc.get_freeze_count() == 0


def test_the_command_line_option_takes_a_positive_whole_number():
    assert whole_number_arg("700") == 700
    for bad in ("0", "-1", "1.5", "many"):
        with pytest.raises(Exception, match="at least 1"):
            whole_number_arg(bad)
    parser = build_parser()
    assert parser.parse_args(["serve"]).gc_threshold == GEN0_THRESHOLD
    assert parser.parse_args(["bench", "maskbench", "--data", "x", "--gc-threshold", "700"]).gc_threshold == 700
    with pytest.raises(SystemExit):
        parser.parse_args(["serve", "--gc-threshold", "0"])
    assert count_arg("0") == 0
    with pytest.raises(Exception, match="at least 0"):
        count_arg("-1")
    assert parser.parse_args(["serve"]).gc_thaw_every == THAW_EVERY
    assert parser.parse_args(["bench", "maskbench", "--data", "x", "--gc-thaw-every", "0"]).gc_thaw_every == 0
