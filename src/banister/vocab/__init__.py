"""Vocabularies: token id -> bytes for every tokenizer family, and the token trie."""

from banister.vocab.named import NAMES, NamedTokenizer, load_named
from banister.vocab.trie import TokenTrie
from banister.vocab.vocabulary import Vocabulary

__all__ = ["NAMES", "NamedTokenizer", "TokenTrie", "Vocabulary", "load_named"]
