"""The model's vocabulary as the automata see it: token id -> bytes, plus EOS and special ids."""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from functools import cached_property
from typing import Any

from banister.errors import VocabularyError
from banister.vocab.trie import TokenTrie


class Vocabulary:
    """Token id -> byte string, with the ids that end generation and the ids that are special.

    Parameters
    ----------
    tokens:
        ``tokens[i]`` is the byte string token ``i`` stands for. Special tokens keep their text here
        (for display) but never match a pattern.
    eos_token_ids:
        Ids that end generation. They are allowed exactly when the output so far is complete.
    special_token_ids:
        Ids that never match any pattern (control tokens, padding, reserved ids). EOS ids are special
        implicitly.
    vocab_size:
        Width of the model's output layer; may exceed ``len(tokens)`` (padded embeddings). Ids in
        ``[len(tokens), vocab_size)`` are never allowed. Defaults to ``len(tokens)``.
    """

    def __init__(
        self,
        tokens: Sequence[bytes],
        eos_token_ids: Iterable[int],
        special_token_ids: Iterable[int] = (),
        vocab_size: int | None = None,
    ) -> None:
        self._tokens: tuple[bytes, ...] = tuple(bytes(t) for t in tokens)
        n = len(self._tokens)
        self._vocab_size = n if vocab_size is None else int(vocab_size)
        if self._vocab_size < n:
            raise VocabularyError(f"vocab_size {self._vocab_size} is smaller than the {n} tokens given")
        self._eos = tuple(dict.fromkeys(int(i) for i in eos_token_ids))
        if not self._eos:
            raise VocabularyError("a vocabulary needs at least one EOS token id")
        special = frozenset(int(i) for i in special_token_ids) | frozenset(self._eos)
        for name, ids in (("eos_token_ids", self._eos), ("special_token_ids", special)):
            bad = [i for i in ids if not 0 <= i < self._vocab_size]
            if bad:
                raise VocabularyError(f"{name} has ids outside [0, {self._vocab_size}): {sorted(bad)[:5]}")
        self._special = special

    # --- constructors from tokenizer files and objects (implemented in banister.vocab.loaders) ---

    @classmethod
    def from_hf_tokenizer(
        cls,
        tokenizer: Any,
        *,
        eos_token_ids: Iterable[int] | None = None,
        vocab_size: int | None = None,
    ) -> Vocabulary:
        """From a ``transformers`` tokenizer object (fast, or SentencePiece-based).

        EOS is the tokenizer's ``eos_token_id`` plus ``eos_token_ids`` (e.g. a generation config's
        extra stop ids). Special added tokens are special; other added tokens keep their text.
        """
        from banister.vocab.loaders import load_hf_tokenizer

        return load_hf_tokenizer(tokenizer, eos_token_ids=eos_token_ids, vocab_size=vocab_size)

    @classmethod
    def from_tokenizer_json(
        cls,
        path_or_dict: str | os.PathLike[str] | Mapping[str, Any],
        *,
        eos_token_ids: Iterable[int] | None = None,
        vocab_size: int | None = None,
    ) -> Vocabulary:
        """From a Hugging Face tokenizer.json (path or parsed object); its decoder section decides bytes.

        Without ``eos_token_ids``, EOS is guessed: every special token named ``</s>``,
        ``<|endoftext|>``, ``<|im_end|>``, ``<|eot_id|>``, ``<|end_of_text|>`` or ``<eos>``.
        """
        from banister.vocab.loaders import load_tokenizer_json

        return load_tokenizer_json(path_or_dict, eos_token_ids=eos_token_ids, vocab_size=vocab_size)

    @classmethod
    def from_tiktoken(
        cls,
        path: str | os.PathLike[str],
        *,
        special_tokens: dict[str, int] | None = None,
        eos_token_ids: Iterable[int] | None = None,
        vocab_size: int | None = None,
    ) -> Vocabulary:
        """From a tiktoken BPE file (``<base64 token> <rank>`` lines) plus its special tokens.

        Without ``eos_token_ids``, EOS is guessed from the special-token names, as in
        :meth:`from_tokenizer_json`.
        """
        from banister.vocab.loaders import load_tiktoken

        return load_tiktoken(
            path, special_tokens=special_tokens, eos_token_ids=eos_token_ids, vocab_size=vocab_size
        )

    @classmethod
    def from_sentencepiece(
        cls, path: str | os.PathLike[str], *, eos_token_ids: Iterable[int] | None = None
    ) -> Vocabulary:
        """From a SentencePiece ``.model`` file; EOS defaults to the model's eos piece."""
        from banister.vocab.loaders import load_sentencepiece

        return load_sentencepiece(path, eos_token_ids=eos_token_ids)

    @classmethod
    def from_gguf(cls, path: str | os.PathLike[str]) -> Vocabulary:
        """From the tokenizer metadata of a GGUF file (``tokenizer.ggml.*``); EOS is its eos (and eot) id."""
        from banister.vocab.loaders import load_gguf

        return load_gguf(path)

    @property
    def tokens(self) -> tuple[bytes, ...]:
        """Byte string of every real token, indexed by id."""
        return self._tokens

    @property
    def eos_token_ids(self) -> tuple[int, ...]:
        return self._eos

    @property
    def special_token_ids(self) -> frozenset[int]:
        """Ids that never match a pattern (EOS included)."""
        return self._special

    @property
    def vocab_size(self) -> int:
        """Width of the logits row; the bitmask has ``ceil(vocab_size / 32)`` words."""
        return self._vocab_size

    def __len__(self) -> int:
        return self._vocab_size

    def __repr__(self) -> str:
        return (
            f"Vocabulary({len(self._tokens)} tokens, vocab_size={self._vocab_size}, "
            f"eos={list(self._eos)}, {len(self._special)} special)"
        )

    def token_bytes(self, token_id: int) -> bytes:
        """The bytes of one token (``b""`` for ids past the real tokens)."""
        return self._tokens[token_id] if token_id < len(self._tokens) else b""

    def decode(self, token_ids: Iterable[int]) -> bytes:
        """Concatenate the bytes of the non-special tokens given."""
        return b"".join(self.token_bytes(t) for t in token_ids if t not in self._special)

    def is_matchable(self, token_id: int) -> bool:
        """Whether the token can ever be part of a match: a real, non-special, non-empty token."""
        return token_id < len(self._tokens) and token_id not in self._special and bool(self._tokens[token_id])

    @cached_property
    def trie(self) -> TokenTrie:
        """The trie of all matchable tokens, as flat arrays for the mask kernels (built once)."""
        return TokenTrie.build(self._tokens, self._special)

    def load_trie(self, cache_dir: Any = None) -> TokenTrie:
        """The trie (:attr:`trie`), read from a warm-start cache instead of built when a valid copy is there.

        ``cache_dir`` is a directory, a :class:`~banister.cache.WarmCache`, or None for
        :func:`~banister.cache.default_cache_dir`. A trie built here is stored there for the next
        process. Does nothing when the trie is already built.
        """
        if "trie" not in self.__dict__:
            from banister.cache import WarmCache

            cache = cache_dir if isinstance(cache_dir, WarmCache) else WarmCache(cache_dir)
            self.__dict__["trie"] = cache.trie(self)  # what the cached property would have stored
        return self.trie

    @cached_property
    def fingerprint(self) -> str:
        """A short hash identifying the vocabulary's content (for caches keyed across processes)."""
        import hashlib

        h = hashlib.blake2b(digest_size=12)
        h.update(repr((self._vocab_size, self._eos, sorted(self._special))).encode())
        for t in self._tokens:
            h.update(len(t).to_bytes(4, "little"))
            h.update(t)
        return h.hexdigest()
