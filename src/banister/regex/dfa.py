"""Lazily determinised byte-level DFA with exact liveness.

Each DFA state is a set of NFA states that still have a byte edge into a *co-reachable* NFA state (one
that can reach acceptance), plus whether the text read so far is accepted. Pruning the rest makes every
state other than :data:`DEAD` able to reach acceptance, so a dead end is detected on the very byte that
causes it. Rows of the transition table are computed on first use, per byte equivalence class.
"""

from __future__ import annotations

import numpy as np
from mypy_extensions import mypyc_attr

from banister.errors import LimitError
from banister.regex.nfa import NFA

DEAD = 0
"""The dead state: no continuation is accepted; every byte leads back to it."""

_Key = tuple[frozenset[int], bool]


# Compiled (setup.py), a class is picklable when unpickling may make an instance without calling its
# __init__, as the warm cache's entries are read back: mypyc allows that only with this attribute
# (``serializable=True`` would too, but then mypyc 2.4 skips __init__ when the class is called).
@mypyc_attr(allow_interpreted_subclasses=True)
class RegexDFA:
    """A byte-level DFA built on demand from an NFA; see :func:`banister.regex.compile_regex`.

    ``transitions`` and ``accepting`` are views of arrays that are reallocated as states are added:
    take them again after anything that may create states (``step``, ``walk``, ``expand_from``...).
    """

    def __init__(self, nfa: NFA, *, max_states: int) -> None:
        if max_states < 1:
            raise ValueError(f"max_states must be positive, got {max_states}")
        # Only what expanding states reads is kept, as tuples of ints (the collector stops scanning those
        # after a collection or two; the NFA's lists, a few per state, would be scanned by every full collection
        # for as long as a cache holds this DFA).
        self._nfa_states = nfa.n_states
        self._universal = nfa.universal
        self._eps: tuple[tuple[int, ...], ...] = tuple(map(tuple, nfa.eps))
        self._max_states = max_states
        self._ends_here, co_reachable = _liveness(nfa)
        self._live_edges = tuple(tuple(e for e in edges if co_reachable[e[2]]) for edges in nfa.byte_edges)
        marks = np.zeros(257, dtype=np.int32)
        for edges in self._live_edges:
            for lo, hi, _ in edges:
                marks[lo] = marks[hi + 1] = 1
        marks[0] = 0
        self._byte_class = np.cumsum(marks[:256]).astype(np.intp)
        self._n_classes = int(self._byte_class[-1]) + 1
        self._class_masks: dict[int, dict[int, int]] = {}
        self._successors: dict[frozenset[int], int] = {}  # by the NFA states a byte moves to
        self._closures: dict[int, frozenset[int]] = {}
        self._ids: dict[_Key, int] = {}
        self._subsets: list[frozenset[int]] = []
        self._table = np.full((16, 256), -1, dtype=np.int32)
        self._accepting = np.zeros(16, dtype=bool)
        self.n_states = 0
        self._add_state((frozenset(), False))
        self._table[DEAD] = DEAD
        self.start = self._add_state(self._start_key(nfa))

    @property
    def transitions(self) -> np.ndarray:
        """int32 ``(n_states, 256)`` table; -1 marks a transition not computed yet."""
        return self._table[: self.n_states]

    @property
    def max_states(self) -> int:
        """The most states this DFA may materialise (LimitError past it)."""
        return self._max_states

    @property
    def nfa_states(self) -> int:
        """States of the NFA it is determinised from."""
        return self._nfa_states

    @property
    def accepting(self) -> np.ndarray:
        """bool ``(n_states,)``: whether each state accepts the text read so far."""
        return self._accepting[: self.n_states]

    def is_accepting(self, state: int) -> bool:
        """Whether ``state`` accepts the text read so far."""
        return bool(self._accepting[state])

    def is_final(self, state: int) -> bool:
        """Accepting, and no byte leads to a live state (the match cannot be extended)."""
        return bool(self._accepting[state]) and not self._subsets[state]

    def step(self, state: int, byte: int) -> int:
        """The state after reading ``byte`` in ``state`` (computing the row if needed)."""
        target = int(self._table[state, byte])
        if target < 0:
            self._expand(state)
            target = int(self._table[state, byte])
        return target

    def walk(self, state: int, data: bytes) -> int:
        """The state after reading ``data``; :data:`DEAD` as soon as it dies."""
        for byte in data:
            state = self.step(state, byte)
            if state == DEAD:
                break
        return state

    def matches(self, data: bytes) -> bool:
        """Whether the whole of ``data`` is accepted."""
        return self.is_accepting(self.walk(self.start, data))

    def expand_from(self, state: int) -> None:
        """Compute the rows of every state reachable from ``state`` (LimitError over ``max_states``)."""
        seen = {state}
        todo = [state]
        while todo:
            current = todo.pop()
            if self._table[current, 0] < 0:
                self._expand(current)
            for nxt in np.unique(self._table[current]).tolist():
                if nxt not in seen:
                    seen.add(nxt)
                    todo.append(nxt)

    def forced_bytes(self, state: int, limit: int = 4096) -> bytes:
        """Bytes every continuation from ``state`` must start with (at most ``limit`` of them).

        While the state is not accepting and exactly one byte value leads to a live state, that byte is
        appended and followed.
        """
        out = bytearray()
        seen: set[int] = set()
        while state != DEAD and not self._accepting[state] and state not in seen and len(out) < limit:
            seen.add(state)
            if self._table[state, 0] < 0:
                self._expand(state)
            live = np.flatnonzero(self._table[state])
            if len(live) != 1:
                break
            out.append(int(live[0]))
            state = int(self._table[state, live[0]])
        return bytes(out)

    def _start_key(self, nfa: NFA) -> _Key:
        """Closure of the NFA start at offset 0, where ``^`` edges hold and ``$`` edges mean empty text."""
        subset: set[int] = set()
        accepts = False
        seen = {(nfa.start, False)}
        todo = [(nfa.start, False)]
        while todo:
            state, after_end = todo.pop()
            if state == nfa.accept:
                accepts = True
            if not after_end and self._live_edges[state]:
                subset.add(state)
            for nxt in (
                *((t, after_end) for t in nfa.eps[state]),
                *((t, after_end) for t in nfa.bol[state]),
                *((t, True) for t in nfa.eol[state]),
            ):
                if nxt not in seen:
                    seen.add(nxt)
                    todo.append(nxt)
        return self._canonical(frozenset(subset), accepts)

    def _canonical(self, subset: frozenset[int], accepts: bool) -> _Key:
        """Search mode: a subset holding the any-text loop accepts every text, so it is just that loop."""
        universal = self._universal
        if universal >= 0 and universal in subset:
            return frozenset((universal,)), True
        return subset, accepts

    def _closure(self, state: int) -> frozenset[int]:
        """NFA states with live byte edges reachable from ``state`` by plain epsilon edges."""
        found = self._closures.get(state)
        if found is not None:
            return found
        eps = self._eps
        live = self._live_edges
        seen = {state}
        todo = [state]
        subset = []
        while todo:
            current = todo.pop()
            if live[current]:
                subset.append(current)
            for nxt in eps[current]:
                if nxt not in seen:
                    seen.add(nxt)
                    todo.append(nxt)
        found = self._closures[state] = frozenset(subset)
        return found

    def _targets(self, state: int) -> dict[int, int]:
        """The live byte edges of NFA ``state`` as ``{target: the byte classes leading there, as the bits
        of an int}``."""
        found = self._class_masks.get(state)
        if found is None:
            classes = self._byte_class
            found = self._class_masks[state] = {}
            for lo, hi, t in self._live_edges[state]:
                bits = (2 << int(classes[hi])) - (1 << int(classes[lo]))  # classes lo..hi
                found[t] = found.get(t, 0) | bits
        return found

    def _expand(self, state: int) -> None:
        """Compute the full row of ``state``.

        Each NFA target is reached on a set of byte classes (an int's bits); splitting the classes by
        every target's set in turn leaves blocks of classes that move to the same targets, one DFA
        successor each: a few big-int operations per target, not a dict operation per class and edge.
        """
        reach: dict[int, int] = {}
        for nfa_state in self._subsets[state]:
            for target, bits in self._targets(nfa_state).items():
                reach[target] = reach.get(target, 0) | bits
        blocks: list[tuple[int, tuple[int, ...]]] = [((1 << self._n_classes) - 1, ())]
        for target, bits in reach.items():
            split = []
            for block, targets in blocks:
                inside = block & bits
                if inside:
                    split.append((inside, (*targets, target)))
                    block ^= inside
                if block:
                    split.append((block, targets))
            blocks = split
        class_row = [DEAD] * self._n_classes
        successors = self._successors
        for block, targets in blocks:
            if not targets:
                continue
            key = frozenset(targets)
            found = successors.get(key)
            if found is None:
                found = successors[key] = self._successor(key)
            while block:
                low = block & -block
                class_row[low.bit_length() - 1] = found
                block ^= low
        self._table[state] = np.array(class_row, dtype=np.int32)[self._byte_class]

    def _successor(self, targets: frozenset[int]) -> int:
        """The state reached when the NFA has just moved to ``targets``."""
        accepts = any(self._ends_here[t] for t in targets)
        if len(targets) == 1:
            subset = self._closure(next(iter(targets)))
        else:
            subset = frozenset().union(*(self._closure(t) for t in targets))
        return self._add_state(self._canonical(subset, accepts))

    def _add_state(self, key: _Key) -> int:
        found = self._ids.get(key)
        if found is not None:
            return found
        if self.n_states >= self._max_states:
            raise LimitError(
                f"the regex DFA needs more than max_states={self._max_states} states", setting="max_states"
            )
        state = self.n_states
        if state == len(self._table):
            table = np.full((2 * state, 256), -1, dtype=np.int32)
            table[:state] = self._table
            accepting = np.zeros(2 * state, dtype=bool)
            accepting[:state] = self._accepting
            self._table, self._accepting = table, accepting
        self._ids[key] = state
        self._subsets.append(key[0])
        self._accepting[state] = key[1]
        self.n_states = state + 1
        return state


def _liveness(nfa: NFA) -> tuple[bytearray, bytearray]:
    """(``ends_here``, ``co_reachable``) per NFA state.

    ``ends_here``: acceptance is reachable without reading a byte (plain and ``$`` edges).
    ``co_reachable``: acceptance is reachable at all once past offset 0 (``^`` edges never hold there).
    """
    n = nfa.n_states
    back_free: list[list[int]] = [[] for _ in range(n)]
    back_end: list[list[int]] = [[] for _ in range(n)]
    back_byte: list[list[int]] = [[] for _ in range(n)]
    for state in range(n):
        for t in nfa.eps[state]:
            back_free[t].append(state)
        for t in nfa.eol[state]:
            back_end[t].append(state)
        for _, _, t in nfa.byte_edges[state]:
            back_byte[t].append(state)
    ends_here = _reach_back([nfa.accept], n, back_free, back_end)
    co_reachable = _reach_back([s for s in range(n) if ends_here[s]], n, back_free, back_byte)
    return ends_here, co_reachable


def _reach_back(roots: list[int], n: int, *backward: list[list[int]]) -> bytearray:
    """States from which one of ``roots`` is reachable along the edges listed in ``backward``."""
    mark = bytearray(n)
    for root in roots:
        mark[root] = 1
    todo = list(roots)
    while todo:
        state = todo.pop()
        for edges in backward:
            for prev in edges[state]:
                if not mark[prev]:
                    mark[prev] = 1
                    todo.append(prev)
    return mark
