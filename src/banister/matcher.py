"""The per-request cursor over a CompiledGrammar: fill the mask, accept, roll back, jump forward."""

from __future__ import annotations

import os
import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Hashable, Literal

import numpy as np

from banister.compiler import CompiledGrammar

Status = Literal["open", "dead", "complete"]


class Matcher:
    """Tracks one generation against a compiled grammar.

    A matcher is cheap (a list of automaton states); make one per request. It is not thread-safe;
    the compiled grammar it reads is.

    The history keeps one entry per accepted token (or per ``accept_string`` call), so
    ``rollback(n)`` undoes the last ``n`` of them exactly.
    """

    def __init__(self, compiled: CompiledGrammar) -> None:
        self.compiled = compiled
        self._automaton = compiled.automaton
        self._vocab = compiled.vocab
        self._eos = frozenset(self._vocab.eos_token_ids)
        self._states: list[Hashable] = [self._automaton.initial]
        self._fill_mask = getattr(self._automaton, "fill_mask", None)  # grammars write their sets directly
        self._eos_accepted = False
        self._last_row: tuple[np.ndarray, int, np.ndarray] | None = None  # see fill_next_token_bitmask

    # -- reading (none of these change the matcher) -------------------------------------------------

    @property
    def state(self) -> Hashable:
        """The current automaton state (an opaque, hashable value)."""
        return self._states[-1]

    def is_accepting(self) -> bool:
        """Whether the output so far is a complete match (EOS would be accepted)."""
        return not self._eos_accepted and self._automaton.is_accepting(self.state)

    def is_terminated(self) -> bool:
        """Whether generation must stop: EOS was accepted, or the match is complete and can't grow."""
        return self._eos_accepted or self._automaton.is_final(self.state)

    def status(self, text: str | bytes) -> Status:
        """What ``text`` would do from the current state, without changing it.

        ``"dead"``: no continuation can make it match; ``"complete"``: a full match (may stop here);
        ``"open"``: a valid prefix that needs more.
        """
        if self._eos_accepted:
            return "dead" if _as_bytes(text) else "complete"
        nxt = self._automaton.advance(self.state, _as_bytes(text))
        if nxt is None:
            return "dead"
        return "complete" if self._automaton.is_accepting(nxt) else "open"

    def dead_offset(self, text: str) -> int | None:
        """Index of the first character of ``text`` at which it stops being a valid prefix, or None."""
        state = self.state
        for i, ch in enumerate(text):
            nxt = self._automaton.advance(state, ch.encode("utf-8"))
            if nxt is None:
                return i
            state = nxt
        return None

    def jump_forward_bytes(self) -> bytes:
        """The bytes the grammar forces next (``b""`` when there is a choice or after EOS)."""
        return b"" if self._eos_accepted else self._automaton.forced_bytes(self.state)

    def jump_forward_string(self) -> str:
        """The text the grammar forces next, cut to whole UTF-8 characters."""
        forced = self.jump_forward_bytes()
        for cut in range(len(forced), max(len(forced) - 4, -1), -1):
            try:
                return forced[:cut].decode("utf-8")
            except UnicodeDecodeError:
                continue
        return ""

    def fill_next_token_bitmask(self, bitmask: Any, index: int = 0) -> None:
        """Write the allowed next tokens into row ``index`` of ``bitmask`` (numpy or CPU torch int32).

        EOS is set exactly when the output is complete. After EOS has been accepted only EOS is set,
        so a loop that keeps sampling pads with EOS. Words past the vocabulary are zeroed.
        """
        # The row's view is kept for the next call with the same numpy array and index (a generation
        # loop fills one buffer again and again): checking and slicing it again cost a third of a mask
        # the memo already holds (0.34 of 1.03 µs). A numpy array with views can't be resized in place.
        last = self._last_row
        if last is not None and last[0] is bitmask and last[1] == index:
            row = last[2]
        else:
            row = _bitmask_row(bitmask, index)
            if type(bitmask) is np.ndarray:
                self._last_row = (bitmask, index, row)
        accepting = self._eos_accepted
        fill = None if accepting else self._fill_mask
        if fill is not None:  # a grammar: writes its cached token sets straight into the row
            accepting = fill(self._states[-1], row)
        else:
            row[:] = 0
            if not accepting:
                mask = self._automaton.token_mask(self.state)
                n = min(mask.shape[0], row.shape[0])
                row[:n] = mask[:n]
                accepting = self._automaton.is_accepting(self.state)
        if accepting:
            for t in self._eos:
                if (t >> 5) < row.shape[0]:
                    row[t >> 5] |= np.uint32(1) << np.uint32(t & 31)

    # -- changing the state ----------------------------------------------------------------------------

    def accept_token(self, token_id: int) -> bool:
        """Advance by one token. Returns False, leaving the matcher unchanged, when it is not allowed."""
        if self._eos_accepted:
            return False
        if token_id in self._eos:
            if not self._automaton.is_accepting(self.state):
                return False
            self._states.append(self.state)
            self._eos_accepted = True
            return True
        if not (0 <= token_id < self._vocab.vocab_size) or not self._vocab.is_matchable(token_id):
            return False
        return self._push(self._vocab.tokens[token_id])

    def accept_string(self, text: str | bytes) -> bool:
        """Advance by text (one history entry). False, leaving the matcher unchanged, when not allowed."""
        return not self._eos_accepted and self._push(_as_bytes(text))

    def rollback(self, n: int = 1) -> None:
        """Undo the last ``n`` accepted tokens (or accept_string calls)."""
        if not 0 <= n < len(self._states):
            raise ValueError(f"cannot roll back {n} steps: {len(self._states) - 1} accepted")
        if n:
            del self._states[-n:]
            self._eos_accepted = False

    def reset(self) -> None:
        """Back to the start, as a new matcher."""
        del self._states[1:]
        self._eos_accepted = False

    def copy(self) -> Matcher:
        """An independent matcher in the same state (for beams and speculation)."""
        twin = Matcher.__new__(Matcher)
        twin.__dict__.update(self.__dict__)
        twin._states = list(self._states)
        return twin

    @property
    def num_accepted(self) -> int:
        """How many steps (tokens or strings) can be rolled back."""
        return len(self._states) - 1

    def _push(self, data: bytes) -> bool:
        nxt = self._automaton.advance(self.state, data)
        if nxt is None:
            return False
        self._states.append(nxt)
        return True


def fill_next_token_bitmask_batch(
    matchers: Sequence[Matcher],
    bitmask: Any,
    indices: Sequence[int] | None = None,
    *,
    threads: int = 1,
) -> None:
    """Fill the rows of many matchers at once: row ``indices[i]`` (default ``i``) from ``matchers[i]``.

    Each row is exactly what ``matchers[i].fill_next_token_bitmask(bitmask, indices[i])`` writes; rows
    not named are left as they are. With ``threads > 1`` the matchers are split into that many
    contiguous chunks (at most one per matcher), filled on a shared thread pool and the calling thread;
    ``threads=None`` means one per CPU, at most 8. The trie walk that computes a new mask is compiled
    with ``nogil`` and numpy releases the GIL while it copies masks, so threads can overlap there; but
    the per-matcher Python work (state lookup, parser steps at lexeme boundaries, cache hits) holds the
    GIL, and on MaskBench it dominates: measured on two shared cores, two threads were slower than one
    for cold and cached masks alike (``benchmarks/bench_batch.py``), hence the default of 1, which
    is a plain loop in the calling thread.

    The matchers must be distinct (a matcher is not thread-safe); several may share a compiled grammar.
    Does not change the matchers' states.
    """
    n = len(matchers)
    rows = list(range(n)) if indices is None else [int(i) for i in indices]
    if len(rows) != n:
        raise ValueError(f"got {n} matchers but {len(rows)} indices")
    if type(bitmask).__module__.startswith("torch"):
        if bitmask.device.type != "cpu":
            raise ValueError("fill a CPU bitmask and copy it to the device (non-blocking) before applying it")
        bitmask = bitmask.numpy()
    if getattr(bitmask, "ndim", 0) != 2:
        raise ValueError("a batch bitmask is 2-D: (batch, words)")
    for r in rows:
        if not -bitmask.shape[0] <= r < bitmask.shape[0]:
            raise IndexError(f"row {r} is outside a bitmask of {bitmask.shape[0]} rows")
    if threads is None:
        threads = min(os.cpu_count() or 1, 8)
    if threads < 1:
        raise ValueError(f"threads must be >= 1, got {threads}")
    threads = min(threads, n)
    if threads <= 1:
        for m, r in zip(matchers, rows):
            m.fill_next_token_bitmask(bitmask, r)
        return

    def fill(lo: int, hi: int) -> None:
        for k in range(lo, hi):
            matchers[k].fill_next_token_bitmask(bitmask, rows[k])

    bounds = [n * k // threads for k in range(threads + 1)]
    pool = _pool(threads)
    futures = [pool.submit(fill, bounds[k], bounds[k + 1]) for k in range(1, threads)]
    try:
        fill(bounds[0], bounds[1])  # the calling thread takes the first chunk
    finally:
        for f in futures:  # wait for every chunk before returning (or raising the first error)
            f.result()


_pools: dict[int, ThreadPoolExecutor] = {}
_pools_lock = threading.Lock()


def _pool(threads: int) -> ThreadPoolExecutor:
    """A process-wide pool with ``threads - 1`` workers (the caller is the other one)."""
    with _pools_lock:
        pool = _pools.get(threads)
        if pool is None:
            pool = _pools[threads] = ThreadPoolExecutor(threads - 1, thread_name_prefix="banister-fill")
        return pool


def _as_bytes(text: str | bytes) -> bytes:
    return text.encode("utf-8") if isinstance(text, str) else bytes(text)


def _bitmask_row(bitmask: Any, index: int) -> np.ndarray:
    """Row ``index`` of ``bitmask`` as uint32 words (checked; it runs before every mask, so the common
    case, a numpy int32 array, takes the cheapest tests)."""
    if type(bitmask) is not np.ndarray and type(bitmask).__module__.startswith("torch"):
        if bitmask.device.type != "cpu":
            raise ValueError("fill a CPU bitmask and copy it to the device (non-blocking) before applying it")
        bitmask = bitmask.numpy()
    dtype = bitmask.dtype
    if dtype is not _INT32 and dtype != _INT32:
        raise TypeError(f"bitmask must be int32, got {dtype}")
    row = bitmask[index] if bitmask.ndim == 2 else bitmask
    if not row.flags.c_contiguous:
        raise ValueError("bitmask rows must be contiguous")
    return row.view(_UINT32)


_INT32 = np.dtype(np.int32)
_UINT32 = np.dtype(np.uint32)
