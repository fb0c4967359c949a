"""What a Matcher drives: a token-level automaton over a vocabulary.

Every kind of specification (regex, choice, and the grammars built on lexemes) compiles to an object
with this interface. States are immutable values, so a matcher keeps its history as a plain list and
rollback is a pop. The allowed-token mask of a state is computed once, by a compiled walk of the token
trie, and cached on the automaton (shared by every matcher of the compiled grammar).
"""

from __future__ import annotations

import threading
from typing import Hashable, Protocol, TypeVar

import numpy as np

from banister.mask.bitmask import bitmask_words
from banister.mask.kernels import token_walk
from banister.regex import DEAD, RegexDFA
from banister.vocab import Vocabulary


_WHOLE_TRIE = np.array([-1], dtype=np.int32)


def walk_tokens(
    vocab: Vocabulary,
    transitions: np.ndarray,
    accepting: np.ndarray,
    start: int,
    roots: np.ndarray,
    out_words: np.ndarray,
    *,
    include_roots: bool = False,
) -> tuple[np.ndarray, np.ndarray]:
    """Run the trie-walk kernel over ``vocab``; returns the crossings (trie nodes) it found and the
    indices of the words of ``out_words`` that were zero and now have bits set. ``roots`` and
    ``include_roots``: as the kernel's (:func:`banister.mask.kernels.token_walk`).

    The crossings are a fresh array; the word indices are a view of this thread's scratch buffer, valid
    until its next call (read them, or copy them, before walking again).
    """
    trie = vocab.trie
    buffers = getattr(_walk_buffers, "by_size", None)
    if buffers is None:
        buffers = _walk_buffers.by_size = {}
    n_words = out_words.shape[0]
    found = buffers.get(n_words)
    if found is None:
        found = buffers[n_words] = (np.empty(n_words, dtype=np.int32), np.zeros(1, dtype=np.int64),
                                    np.empty(256, dtype=np.int32))
    touched, n_touched, nodes = found
    n_touched[0] = 0
    while True:
        n = token_walk(transitions, accepting, start, roots, trie.byte, trie.depth, trie.skip, trie.node_token,
                       trie.token_start, trie.token_ids, trie.max_depth, out_words, nodes,
                       touched, n_touched, include_roots)
        if n >= 0:
            return nodes[:n].copy(), touched[: int(n_touched[0])]
        nodes = np.empty(nodes.shape[0] * 8, dtype=np.int32)  # walk again: the bits set so far stay set
        buffers[n_words] = (touched, n_touched, nodes)


_walk_buffers = threading.local()


StateT = TypeVar("StateT", bound=Hashable)


class TokenAutomaton(Protocol[StateT]):
    """The interface every compiled specification offers the Matcher, over its own kind of state
    (a DFA state number, a set of parse positions); a bare ``TokenAutomaton`` is any of them."""

    vocab: Vocabulary
    initial: StateT

    def advance(self, state: StateT, data: bytes) -> StateT | None:
        """The state after ``data``, or ``None`` when no continuation can complete a match."""

    def is_accepting(self, state: StateT) -> bool:
        """Whether the text so far is a complete match (EOS allowed)."""

    def is_final(self, state: StateT) -> bool:
        """Whether the match is complete and nothing more can follow."""

    def token_mask(self, state: StateT) -> np.ndarray:
        """uint32 words with the bits of the matchable tokens allowed next (EOS not included).

        The array is cached and shared: callers copy it, never write to it.
        """

    def forced_bytes(self, state: StateT) -> bytes:
        """Bytes that every valid continuation starts with (``b""`` when there is a choice)."""


class RegexAutomaton:
    """A byte-level DFA lifted to tokens: a token is allowed when its bytes keep the DFA alive.

    The DFA is materialised from its start state here, at compile time: a pattern that blows the
    state limit fails now rather than mid-generation, and afterwards the automaton never changes, so
    matchers on many threads can share it.
    """

    def __init__(self, dfa: RegexDFA, vocab: Vocabulary) -> None:
        dfa.expand_from(dfa.start)
        self.dfa = dfa
        self._never_crossing = np.zeros(dfa.n_states, dtype=np.bool_)
        self.vocab = vocab
        self.initial: int = dfa.start
        self._masks: dict[int, np.ndarray] = {}
        self._lock = threading.Lock()

    def advance(self, state: int, data: bytes) -> int | None:
        nxt = self.dfa.walk(state, data)
        return None if nxt == DEAD else nxt

    def is_accepting(self, state: int) -> bool:
        return self.dfa.is_accepting(state)

    def is_final(self, state: int) -> bool:
        return self.dfa.is_final(state)

    def forced_bytes(self, state: int) -> bytes:
        return self.dfa.forced_bytes(state)

    def token_mask(self, state: int) -> np.ndarray:
        mask = self._masks.get(state)
        if mask is None:
            with self._lock:
                mask = self._masks.get(state)
                if mask is None:
                    mask = self._compute_mask(state)
                    mask.setflags(write=False)
                    self._masks[state] = mask
        return mask

    @property
    def cached_masks(self) -> int:
        """How many states have their mask cached."""
        return len(self._masks)

    def _compute_mask(self, state: int) -> np.ndarray:
        words = np.zeros(bitmask_words(self.vocab.vocab_size), dtype=np.uint32)
        if state != DEAD:
            walk_tokens(self.vocab, self.dfa.transitions, self._never_crossing, state, _WHOLE_TRIE, words)
        return words
