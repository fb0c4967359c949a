"""The token trie as flat arrays in preorder, the shape the mask kernels walk.

Node ``i`` (preorder, the root left out) carries one byte ``byte[i]`` at depth ``depth[i]`` (1 for a
child of the root). ``skip[i]`` is the index of the first node after ``i``'s subtree, so a walk that
finds a dead state at node ``i`` jumps to ``skip[i]`` and never visits the tokens below it. The tokens
whose bytes end at node ``i`` are ``token_ids[token_start[i]:token_start[i + 1]]`` (several ids may
share one byte string).
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from functools import cached_property

import numpy as np


@dataclass(frozen=True)
class TokenTrie:
    byte: np.ndarray  # uint8[n_nodes]
    depth: np.ndarray  # int32[n_nodes]
    skip: np.ndarray  # int32[n_nodes]
    token_start: np.ndarray  # int32[n_nodes + 1]
    token_ids: np.ndarray  # int32[n_tokens_in_trie]
    max_depth: int

    @property
    def n_nodes(self) -> int:
        return int(self.byte.shape[0])

    @cached_property
    def node_token(self) -> np.ndarray:
        """int32[n_nodes]: the token whose bytes end at each node, -1 when none, -2 when several (then
        read ``token_ids``). Derived, not stored: what the walk kernel reads for most nodes."""
        counts = np.diff(self.token_start)
        out = np.where(counts == 0, -1, -2).astype(np.int32)
        one = counts == 1
        out[one] = self.token_ids[self.token_start[:-1][one]]
        return out

    def to_arrays(self) -> dict[str, np.ndarray]:
        """The trie as named arrays (for ``np.savez``); :meth:`from_arrays` reads them back."""
        return {"byte": self.byte, "depth": self.depth, "skip": self.skip, "token_start": self.token_start,
                "token_ids": self.token_ids, "max_depth": np.asarray(self.max_depth, dtype=np.int64)}

    @classmethod
    def from_arrays(cls, arrays: dict[str, np.ndarray]) -> TokenTrie:
        """A trie from :meth:`to_arrays`' output; raises ValueError when the arrays don't fit together."""
        try:
            trie = cls(
                byte=np.ascontiguousarray(arrays["byte"], dtype=np.uint8),
                depth=np.ascontiguousarray(arrays["depth"], dtype=np.int32),
                skip=np.ascontiguousarray(arrays["skip"], dtype=np.int32),
                token_start=np.ascontiguousarray(arrays["token_start"], dtype=np.int32),
                token_ids=np.ascontiguousarray(arrays["token_ids"], dtype=np.int32),
                max_depth=int(arrays["max_depth"]),
            )
        except (KeyError, TypeError) as exc:
            raise ValueError(f"not a token trie: {exc}") from None
        n = trie.n_nodes
        if (trie.byte.ndim != 1 or trie.depth.shape != (n,) or trie.skip.shape != (n,)
                or trie.token_start.shape != (n + 1,) or trie.token_ids.shape != (int(trie.token_start[-1]),)
                or trie.max_depth != (int(trie.depth.max()) if n else 0)):
            raise ValueError("token trie arrays have inconsistent shapes")
        return trie

    @classmethod
    def build(cls, tokens: Sequence[bytes], excluded: Collection[int] = ()) -> TokenTrie:
        """Build the trie of every non-empty token whose id is not in ``excluded``."""
        by_bytes: dict[bytes, list[int]] = {}
        for tid, tb in enumerate(tokens):
            if tb and tid not in excluded:
                by_bytes.setdefault(tb, []).append(tid)
        keys = sorted(by_bytes)
        node_byte: list[int] = []
        node_depth: list[int] = []
        ends: list[list[int]] = []
        prev = b""
        for key in keys:
            lcp = 0
            limit = min(len(prev), len(key))
            while lcp < limit and prev[lcp] == key[lcp]:
                lcp += 1
            # Sorted order with lcp == len(key) can only happen for a duplicate, which dict keys exclude.
            for d in range(lcp, len(key)):
                node_byte.append(key[d])
                node_depth.append(d + 1)
                ends.append([])
            ends[-1].extend(by_bytes[key])
            prev = key
        n = len(node_byte)
        depth = np.asarray(node_depth, dtype=np.int32)
        skip = np.full(n, n, dtype=np.int32)
        open_at: list[int] = []  # open_at[d - 1] = index of the open node at depth d
        for i, d in enumerate(node_depth):
            while len(open_at) >= d:
                skip[open_at.pop()] = i
            open_at.append(i)
        counts = np.fromiter((len(e) for e in ends), dtype=np.int32, count=n)
        token_start = np.zeros(n + 1, dtype=np.int32)
        np.cumsum(counts, out=token_start[1:])
        token_ids = np.fromiter((t for e in ends for t in e), dtype=np.int32, count=int(token_start[-1]))
        return cls(
            byte=np.asarray(node_byte, dtype=np.uint8),
            depth=depth,
            skip=skip,
            token_start=token_start,
            token_ids=token_ids,
            max_depth=int(depth.max()) if n else 0,
        )
