"""Compiled kernels of the hot path: flat arrays in, arrays out (numba, no Python objects).

The walk visits the token trie in preorder and keeps the automaton state of every open depth on a
small stack; a node whose byte leads to the dead state (0) is skipped with its whole subtree, so the
cost is the number of *live* trie nodes, not the vocabulary size.
"""

from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True, nogil=True)
def token_walk(
    transitions: np.ndarray,
    accepting: np.ndarray,
    start: int,
    roots: np.ndarray,
    node_byte: np.ndarray,
    node_depth: np.ndarray,
    node_skip: np.ndarray,
    node_token: np.ndarray,
    token_start: np.ndarray,
    token_ids: np.ndarray,
    max_depth: int,
    out_words: np.ndarray,
    cross_nodes: np.ndarray,
    touched: np.ndarray,
    n_touched: np.ndarray,
    include_roots: bool,
) -> int:
    """Walk the subtrees below ``roots`` from DFA state ``start``; set the bits of tokens kept alive.

    ``roots[k] == -1`` walks the whole trie; otherwise the descendants of trie node ``roots[k]``,
    reading only their bytes past that node, or with ``include_roots`` the subtree rooted at that node,
    reading its bytes from the root's own (its depth's) on. ``transitions`` (uint8 or int32, dead
    state 0) must be complete for every reachable state. Every visited node whose state is
    ``accepting`` and that has children is a *crossing* (a lexeme may end there and the next one
    begin): it is written to ``cross_nodes``. Returns the number of crossings, or -1 when the buffer
    was too small (the caller retries with bigger ones).

    ``node_token`` (:attr:`TokenTrie.node_token`) names the one token ending at a node, so the usual
    node sets its bit (or none) without a loop whose length the branch predictor cannot guess: that
    loop was most of the time of a walk that keeps most tokens.

    Every word of ``out_words`` that goes from zero to non-zero is appended to ``touched`` (room for
    every word), at ``n_touched[0]``, which is advanced: with an all-zero ``out_words`` the caller
    learns exactly which words to read back and clear, without scanning them all.
    """
    stack = np.empty(max_depth + 1, dtype=np.int32)
    n_cross = 0
    nt = n_touched[0]
    capacity = cross_nodes.shape[0]
    for k in range(roots.shape[0]):
        r = roots[k]
        if r < 0:
            begin, end, base = 0, node_byte.shape[0], 0
        elif include_roots:
            begin, end, base = r, node_skip[r], node_depth[r] - 1
        else:
            begin, end, base = r + 1, node_skip[r], node_depth[r]
        stack[0] = start
        # Unsigned indices: numba checks every signed index for a negative one (Python's wraparound),
        # a branch per array read that cost about a third of a walk that keeps most tokens.
        i = np.uint64(begin)
        stop = np.uint64(end)
        depth_base = np.uint32(base)
        while i < stop:
            d = np.uint32(node_depth[i]) - depth_base
            s = transitions[np.uint32(stack[d - np.uint32(1)]), node_byte[i]]
            if s == 0:
                i = np.uint64(node_skip[i])
                continue
            stack[d] = s
            tok = node_token[i]
            if tok >= -1:  # no token or one: no branch on which
                w = np.uint64(tok >> 5) if tok >= 0 else np.uint64(0)
                bit = (np.uint32(1) << np.uint32(tok & 31)) if tok >= 0 else np.uint32(0)
                old = out_words[w]
                if old == 0 and bit != 0:
                    touched[nt] = w
                    nt += 1
                out_words[w] = old | bit
            else:
                for t in range(token_start[i], token_start[i + np.uint64(1)]):
                    tok = token_ids[t]
                    w = np.uint64(tok >> 5)
                    if out_words[w] == 0:
                        touched[nt] = w
                        nt += 1
                    out_words[w] |= np.uint32(1) << np.uint32(tok & 31)
            if accepting[s] and np.uint64(node_skip[i]) > i + np.uint64(1):
                if n_cross == capacity:
                    n_touched[0] = nt
                    return -1
                cross_nodes[n_cross] = i
                n_cross += 1
            i += np.uint64(1)
    n_touched[0] = nt
    return n_cross


@njit(cache=True, nogil=True)
def run_walk(
    transitions: np.ndarray,
    accepting: np.ndarray,
    loop: int,
    closing: int,
    node_byte: np.ndarray,
    node_depth: np.ndarray,
    node_skip: np.ndarray,
    token_start: np.ndarray,
    token_ids: np.ndarray,
    max_depth: int,
    token_units: np.ndarray,
    token_closes: np.ndarray,
    cross_nodes: np.ndarray,
    cross_units: np.ndarray,
) -> int:
    """Walk the whole trie through the DFA of an unbounded run of units, counting units on the way.

    ``loop`` is the state where a unit starts, the start, entered again only when a unit ends; states
    from ``closing`` on have read into the run's closing bytes. For every token left alive,
    ``token_units`` gets the units it needs (those it completes, plus the one it stops inside) and
    ``token_closes`` whether it read closing bytes (then its units are those before them); the other
    tokens are left as they were. Every visited node whose state is ``accepting`` and that has children
    is a crossing, written to ``cross_nodes`` with its units to ``cross_units`` (room for every node).
    Returns the number of crossings.
    """
    stack = np.empty(max_depth + 1, dtype=np.int32)
    units = np.zeros(max_depth + 1, dtype=np.int32)
    stack[0] = loop
    n_cross = 0
    i = 0
    stop = node_byte.shape[0]
    while i < stop:
        d = node_depth[i]
        s = transitions[stack[d - 1], node_byte[i]]
        if s == 0:
            i = node_skip[i]
            continue
        stack[d] = s
        u = units[d - 1] + (1 if s == loop else 0)
        units[d] = u
        need = u if s == loop or s >= closing else u + 1
        for t in range(token_start[i], token_start[i + 1]):
            token_units[token_ids[t]] = need
            token_closes[token_ids[t]] = s >= closing
        if accepting[s] and node_skip[i] > i + 1:
            cross_nodes[n_cross] = i
            cross_units[n_cross] = u
            n_cross += 1
        i += 1
    return n_cross


def warm_up() -> None:
    """Load (or compile) the kernels now rather than on the first mask of the process.

    The first call of a numba function loads its machine code from numba's cache (a few hundred
    milliseconds; seconds when it must compile). A server or benchmark calls this once at start-up so
    that no request's first mask pays it.
    """
    accepting = np.zeros(2, dtype=np.bool_)
    roots = np.array([-1], dtype=np.int32)
    empty_i32 = np.zeros(0, dtype=np.int32)
    for table_type in (np.uint8, np.int32):  # the two types of lexeme DFA tables
        token_walk(np.zeros((2, 256), dtype=table_type), accepting, 1, roots, np.zeros(0, dtype=np.uint8),
                   empty_i32, empty_i32, empty_i32, np.zeros(1, dtype=np.int32), empty_i32, 0,
                   np.zeros(1, dtype=np.uint32), np.zeros(1, dtype=np.int32), np.zeros(1, dtype=np.int32),
                   np.zeros(1, dtype=np.int64), False)
        run_walk(np.zeros((2, 256), dtype=table_type), accepting, 1, 2, np.zeros(0, dtype=np.uint8), empty_i32,
                 empty_i32, np.zeros(1, dtype=np.int32), empty_i32, 0, empty_i32,
                 np.zeros(0, dtype=np.bool_), empty_i32, empty_i32)
