"""Keeping CPython's garbage collector out of the hot path.

Masks and compiles make many short-lived container objects, and every automatic collection rescans
the young ones, then (every tenth time) the older ones, then everything. Two measures: a compile runs
with automatic collection paused (:func:`gc_paused`), and a long-running process freezes its start-up
heap and collects its young objects less often (:func:`settle_heap`). See docs/performance.md,
"Garbage collection", for what each is worth.
"""

from __future__ import annotations

import argparse
import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager

GEN0_THRESHOLD = 50_000
"""Objects a serving process allocates (net) between two young collections; CPython's default is 700.
The older generations keep CPython's multipliers (collected every 10th time), so collections are about
70 times rarer; each young one rescans proportionally more objects, and an unreachable cycle lives a
little longer."""


def settle_heap(gen0_threshold: int = GEN0_THRESHOLD) -> tuple[int, int, int]:
    """What a long-running process does once it has loaded: collect, freeze what is alive (the model,
    the vocabulary's tables, the kernels) out of the way of every later collection, and make young
    collections rarer (``gen0_threshold``). Returns the thresholds it replaced.

    A cold mask makes a few hundred objects (parse states, their item tables, cached walks); under
    CPython's default threshold a collection falls inside about one in four of the slowest masks.
    """
    if gen0_threshold < 1:
        raise ValueError(f"gen0_threshold must be at least 1 (got {gen0_threshold})")
    previous = gc.get_threshold()
    gc.collect()
    gc.freeze()
    gc.set_threshold(gen0_threshold, previous[1], previous[2])
    return previous


def add_gc_threshold_option(parser: argparse.ArgumentParser, *, how: str = "") -> None:
    """``--gc-threshold N``, the ``gen0_threshold`` of :func:`settle_heap` (``how``: words on where it
    applies, put after the option's first words)."""
    parser.add_argument("--gc-threshold", type=whole_number_arg, default=GEN0_THRESHOLD, metavar="N",
                        help=f"objects allocated between young garbage collections{how} (default "
                             f"{GEN0_THRESHOLD}; CPython's own is 700; see docs/performance.md)")


def whole_number_arg(text: str) -> int:
    """A command-line type for counts such as ``--gc-threshold`` and ``--jobs``: a whole number of at least 1."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a whole number of at least 1, got {text!r}")
    return value


_gc_pause_lock = threading.Lock()
_gc_pauses = 0
_gc_was_enabled = False


@contextmanager
def gc_paused() -> Iterator[None]:
    """Automatic garbage collection off for the duration (see ``Compiler(pause_gc=...)``); nested and
    concurrent pauses share one, and collection comes back on only if it was on when the first began."""
    global _gc_pauses, _gc_was_enabled
    with _gc_pause_lock:
        if _gc_pauses == 0:
            _gc_was_enabled = gc.isenabled()
            gc.disable()
        _gc_pauses += 1
    try:
        yield
    finally:
        with _gc_pause_lock:
            _gc_pauses -= 1
            if _gc_pauses == 0 and _gc_was_enabled:
                gc.enable()
