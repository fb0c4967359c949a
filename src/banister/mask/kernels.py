"""Compiled kernels of the hot path: flat arrays in, arrays out (numba, no Python objects).

The walk visits the token trie in preorder and keeps the automaton state of every open depth on a
small stack; a node whose byte leads to the dead state is skipped with its whole subtree, so the cost
is the number of *live* trie nodes, not the vocabulary size.
"""

from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True, nogil=True)
def dfa_token_walk(
    transitions: np.ndarray,
    start: int,
    dead: int,
    node_byte: np.ndarray,
    node_depth: np.ndarray,
    node_skip: np.ndarray,
    token_start: np.ndarray,
    token_ids: np.ndarray,
    max_depth: int,
    out_words: np.ndarray,
) -> int:
    """Set in ``out_words`` (uint32) the bit of every token whose bytes keep the DFA alive from ``start``.

    ``transitions`` must be complete for every state reachable from ``start``. Returns the number of
    trie nodes visited (a cost measure).
    """
    stack = np.empty(max_depth + 1, dtype=np.int32)
    stack[0] = start
    n = node_byte.shape[0]
    i = 0
    visited = 0
    while i < n:
        visited += 1
        d = node_depth[i]
        s = transitions[stack[d - 1], node_byte[i]]
        if s == dead:
            i = node_skip[i]
            continue
        stack[d] = s
        for k in range(token_start[i], token_start[i + 1]):
            t = token_ids[k]
            out_words[t >> 5] |= np.uint32(1) << np.uint32(t & 31)
        i += 1
    return visited
