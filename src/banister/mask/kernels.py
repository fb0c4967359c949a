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
    token_start: np.ndarray,
    token_ids: np.ndarray,
    max_depth: int,
    out_words: np.ndarray,
    cross_nodes: np.ndarray,
    cross_states: np.ndarray,
) -> int:
    """Walk the subtrees below ``roots`` from DFA state ``start``; set the bits of tokens kept alive.

    ``roots[k] == -1`` walks the whole trie; otherwise the descendants of trie node ``roots[k]``,
    reading only their bytes past that node. ``transitions`` (int32, dead state 0) must be complete
    for every reachable state. Every visited node whose state is ``accepting`` and that has children
    is a *crossing* (a lexeme may end there and the next one begin): it is written to
    ``cross_nodes``/``cross_states``. Returns the number of crossings, or -1 when the buffers were
    too small (the caller retries with bigger ones).
    """
    stack = np.empty(max_depth + 1, dtype=np.int32)
    n_cross = 0
    capacity = cross_nodes.shape[0]
    for k in range(roots.shape[0]):
        r = roots[k]
        if r < 0:
            begin, end, base = 0, node_byte.shape[0], 0
        else:
            begin, end, base = r + 1, node_skip[r], node_depth[r]
        stack[0] = start
        i = begin
        while i < end:
            d = node_depth[i] - base
            s = transitions[stack[d - 1], node_byte[i]]
            if s == 0:
                i = node_skip[i]
                continue
            stack[d] = s
            for t in range(token_start[i], token_start[i + 1]):
                tok = token_ids[t]
                out_words[tok >> 5] |= np.uint32(1) << np.uint32(tok & 31)
            if accepting[s] and node_skip[i] > i + 1:
                if n_cross == capacity:
                    return -1
                cross_nodes[n_cross] = i
                cross_states[n_cross] = s
                n_cross += 1
            i += 1
    return n_cross
