"""Keeping CPython's garbage collector out of the hot path.

Masks and compiles make many short-lived container objects, and every automatic collection rescans
the young ones, then (every tenth time) the older ones, then everything. Two measures: a compile runs
with automatic collection paused (:func:`gc_paused`), and a long-running process freezes its start-up
heap and collects its young objects less often (:func:`settle_heap`), and then freezes what each
compile leaves (:func:`after_compile`), collecting in full now and then, when idle if it can
(:func:`thaw_if_due`). See docs/performance.md, "Garbage collection", for what each
is worth.
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


THAW_EVERY = 1_000
"""Compiles between two thaws of the heap that :func:`after_compile` freezes: each thaw is a full
collection (a second or two with hundreds of grammars cached), and what became cyclic garbage while
frozen waits for it."""

_freeze_lock = threading.Lock()
_thaw_every = 0  # 0: compiles are not frozen (settle_heap was not called, or was told so)
_compiles_left = 0  # before the next thaw


def settle_heap(gen0_threshold: int = GEN0_THRESHOLD, thaw_every: int = THAW_EVERY) -> tuple[int, int, int]:
    """What a long-running process does once it has loaded: collect, freeze what is alive (the model,
    the vocabulary's tables, the kernels) out of the way of every later collection, make young
    collections rarer (``gen0_threshold``), and from now on freeze what each compile leaves, thawing
    and collecting everything every ``thaw_every`` compiles (0: compiles are not frozen; see
    :func:`after_compile`). Returns the thresholds it replaced (:func:`restore_heap` puts them back).

    A cold mask makes a few hundred objects (parse states, their item tables, cached walks); under
    CPython's default threshold a collection falls inside about one in four of the slowest masks.
    """
    global _thaw_every, _compiles_left
    if gen0_threshold < 1 or thaw_every < 0:
        raise ValueError(f"gen0_threshold must be at least 1 and thaw_every at least 0 "
                         f"(got {gen0_threshold}, {thaw_every})")
    previous = gc.get_threshold()
    gc.collect()
    gc.freeze()
    gc.set_threshold(gen0_threshold, previous[1], previous[2])
    with _freeze_lock:
        _thaw_every = _compiles_left = thaw_every
    return previous


def restore_heap(previous: tuple[int, int, int], *, unfreeze: bool) -> None:
    """Undo :func:`settle_heap` for a caller that goes on in the same process: its ``previous``
    thresholds back, compiles no longer frozen, and with ``unfreeze`` the frozen heap thawed."""
    global _thaw_every
    with _freeze_lock:
        _thaw_every = 0
    gc.set_threshold(*previous)
    if unfreeze:
        gc.unfreeze()


def after_compile() -> None:
    """Freeze the heap once a compile has finished, in a process that settled its heap.

    A compile runs with collection paused (:func:`gc_paused`), so everything the new grammar keeps is
    young when it ends: hundreds of thousands of objects after a big schema, which the next young
    collection scans, then the next collection of the middle generation again, finding nothing to
    free (a grammar is freed by reference counting; see docs/performance.md). ``gc.freeze()`` moves
    them, with whatever else is alive, out of the collector's sight at no cost. What is frozen and
    later becomes cyclic garbage (a request's objects that were alive during the compile) is not
    collected until the next thaw: every ``thaw_every`` compiles (or at an idle moment from half of
    that on: :func:`thaw_if_due`) the heap is unfrozen, collected in full and frozen again.

    :class:`~banister.compiler.Compiler` calls it at the end of each compile, before collection
    resumes: with more young objects than the threshold, the first allocation after would collect.
    """
    global _compiles_left
    if not _thaw_every:
        return
    with _freeze_lock:
        _compiles_left -= 1
        if _compiles_left <= 0:
            _collect_all()
        gc.freeze()


def thaw_if_due() -> bool:
    """Make the thaw :func:`after_compile` has coming now, if at least half of the ``thaw_every``
    compiles between two thaws have passed; returns whether it did. For a process's idle moments
    (a server's engine thread between requests), so that the full collection falls where no request
    waits for it rather than inside a compile; :func:`after_compile` still thaws a process that is
    never idle."""
    with _freeze_lock:
        if not _thaw_every or _thaw_every - _compiles_left < max(1, _thaw_every // 2):
            return False
        _collect_all()
        gc.freeze()
    return True


def _collect_all() -> None:
    """The thaw, under ``_freeze_lock``: unfreeze and collect everything, and count the next period."""
    global _compiles_left
    _compiles_left = _thaw_every
    gc.unfreeze()
    gc.collect()


def add_gc_options(parser: argparse.ArgumentParser, *, how: str = "") -> None:
    """``--gc-threshold N`` and ``--gc-thaw-every N``, the ``gen0_threshold`` and ``thaw_every`` of
    :func:`settle_heap` (``how``: words on where they apply, put after each option's first words)."""
    parser.add_argument("--gc-threshold", type=whole_number_arg, default=GEN0_THRESHOLD, metavar="N",
                        help=f"objects allocated between young garbage collections{how} (default "
                             f"{GEN0_THRESHOLD}; CPython's own is 700; see docs/performance.md)")
    parser.add_argument("--gc-thaw-every", type=count_arg, default=THAW_EVERY, metavar="N",
                        help=f"compiles between two full collections of the heap frozen after each compile{how} "
                             f"(default {THAW_EVERY}; 0: compiles are not frozen; see docs/performance.md)")


def whole_number_arg(text: str) -> int:
    """A command-line type for counts such as ``--gc-threshold`` and ``--jobs``: a whole number of at least 1."""
    return _whole_number(text, 1)


def count_arg(text: str) -> int:
    """A command-line type for counts that may be 0 (``--gc-thaw-every``)."""
    return _whole_number(text, 0)


def _whole_number(text: str, least: int) -> int:
    try:
        value = int(text)
    except ValueError:
        value = least - 1
    if value < least:
        raise argparse.ArgumentTypeError(f"must be a whole number of at least {least}, got {text!r}")
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
