"""The interfaces the engine drives: a language model with a per-sequence KV cache, and a tokenizer."""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from banister.errors import BanisterError

if TYPE_CHECKING:
    import torch

    from banister.vocab import Vocabulary


class EngineError(BanisterError, RuntimeError):
    """A model, tokenizer or request the engine cannot work with; the message says what and why."""


@dataclass(frozen=True)
class Feed:
    """Tokens to append to one sequence in a forward pass.

    Parameters
    ----------
    seq_id:
        The sequence; an id the model has not seen starts a new sequence (its prompt).
    token_ids:
        At least one token.
    all_logits:
        Return the logits after every fed token (for prompt logprobs), not only after the last.
    """

    seq_id: Hashable
    token_ids: Sequence[int]
    all_logits: bool = False


@runtime_checkable
class LanguageModel(Protocol):
    """A causal language model that keeps the state (KV cache) of many sequences between calls.

    The engine calls :meth:`forward` once per step with every running sequence, so an
    implementation can run them in one batched pass. Sequences join (a new ``seq_id``) and leave
    (:meth:`release`) between calls.
    """

    vocab_size: int
    """Width of the logits rows (the output layer; may exceed the tokenizer's vocabulary)."""

    max_length: int | None
    """Most tokens (prompt and output) one sequence may hold; None when unbounded."""

    device: torch.device
    """Where the logits come back."""

    def forward(self, feeds: Sequence[Feed]) -> list[torch.Tensor]:
        """Append each feed's tokens to its sequence; return float32 logits per feed, in order.

        A feed's logits have shape ``(len(token_ids), vocab_size)`` when ``all_logits`` is set,
        else ``(1, vocab_size)``: row ``i`` predicts the token after ``token_ids[i]``.
        """

    def truncate(self, seq_id: Hashable, num_tokens: int) -> None:
        """Forget the last ``num_tokens`` tokens of a sequence (they are fed again, or others)."""

    def fork(self, seq_id: Hashable, new_seq_id: Hashable) -> None:
        """Start ``new_seq_id`` as a copy of ``seq_id`` (n > 1 samples share their prompt)."""

    def release(self, seq_id: Hashable) -> None:
        """Drop a sequence and its cache."""


@runtime_checkable
class TextTokenizer(Protocol):
    """Text to token ids for one model, with the model's vocabulary as banister sees it."""

    vocabulary: Vocabulary
    """Token id -> bytes, EOS and special ids; ``vocabulary.vocab_size`` equals the model's logits width."""

    def encode(self, text: str) -> list[int]:
        """Token ids of ``text`` in the middle of a sequence: no special tokens added, and text that
        looks like a special token stays text."""

    def encode_prompt(self, text: str) -> list[int]:
        """Token ids of a raw prompt, with the special tokens the model expects at the start (BOS)."""

    def chat_prompt(self, messages: Sequence[Mapping[str, Any]], **template_kwargs: Any) -> list[int]:
        """Token ids of a conversation through the model's chat template, ready for the assistant's turn.

        Raises :class:`EngineError` when the tokenizer has no chat template.
        """
