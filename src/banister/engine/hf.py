"""Hugging Face transformers models and tokenizers behind the engine's interfaces.

The model keeps one batched KV cache for every running sequence. Its rows are sequences and its
columns cache slots; a ``valid`` table says which slots of a row hold that row's tokens, so a row
may have holes: left padding where it joined shorter than the others, slots of tokens it dropped
(:meth:`HFLanguageModel.truncate`), and padding where it fed fewer tokens than another row in the
same step. Positions are tracked per row, so a hole never shifts a token's position, and a 4D
attention mask built from ``valid`` hides every hole. A new sequence is prefilled alone and then
merged into the batch; rows that leave are cut out, and holes are squeezed out once they fill
more than half of the cache.
"""

from __future__ import annotations

import inspect
from collections.abc import Hashable, Mapping, Sequence
from typing import Any

import torch

from banister.engine.model import EngineError, Feed
from banister.vocab import Vocabulary

# Compact the cache once holes are more than this share of its slots (and it is this wide).
_HOLE_SHARE = 0.5
_MIN_COMPACT_WIDTH = 64


class HFLanguageModel:
    """A transformers causal LM (``AutoModelForCausalLM``) as a :class:`~banister.engine.model.LanguageModel`.

    Every layer of the model's cache must be a plain full-attention ``DynamicLayer`` (Llama,
    Qwen2, Mistral without a sliding window, GPT-2, ...); other layouts raise
    :class:`~banister.engine.model.EngineError` on the first forward pass.

    Parameters
    ----------
    model:
        The model, already on its device and dtype; put in eval mode here.
    """

    def __init__(self, model: Any) -> None:
        from transformers import DynamicCache

        self.model = model.eval()
        config = model.config.get_text_config() if hasattr(model.config, "get_text_config") else model.config
        self.config = config
        output = model.get_output_embeddings()
        self.vocab_size: int = int(output.weight.shape[0]) if output is not None else int(config.vocab_size)
        self.max_length: int | None = getattr(config, "max_position_embeddings", None)
        self.device: torch.device = model.device
        self._dtype = model.dtype
        self._cache_kwarg = "cache" if "cache" in inspect.signature(model.forward).parameters else "past_key_values"
        self._new_cache = lambda: DynamicCache(config=model.config)
        self._cache: Any = None
        self._valid = torch.zeros((0, 0), dtype=torch.bool, device=self.device)
        self._ids: list[Hashable] = []
        self._row: dict[Hashable, int] = {}
        self._lengths: list[int] = []

    # -- the LanguageModel interface ------------------------------------------------------------------

    @torch.inference_mode()
    def forward(self, feeds: Sequence[Feed]) -> list[torch.Tensor]:
        """Prefill new sequences one at a time, then run every known sequence in one batched pass.

        Sequences not fed in this call take part as padding and keep their state.
        """
        results: dict[int, torch.Tensor] = {}
        decode: list[tuple[int, Feed]] = []
        for i, feed in enumerate(feeds):
            if not feed.token_ids:
                raise ValueError(f"sequence {feed.seq_id!r}: a feed needs at least one token")
            if feed.seq_id in self._row:
                decode.append((i, feed))
            else:
                results[i] = self._prefill(feed)
        if decode:
            for i, logits in zip([i for i, _ in decode], self._decode([f for _, f in decode]), strict=True):
                results[i] = logits
        return [results[i] for i in range(len(feeds))]

    @torch.inference_mode()
    def truncate(self, seq_id: Hashable, num_tokens: int) -> None:
        """Forget the last ``num_tokens`` tokens of a sequence (their slots become holes)."""
        row = self._row[seq_id]
        if not 0 <= num_tokens <= self._lengths[row] - 1:
            raise ValueError(f"cannot truncate {num_tokens} of the {self._lengths[row]} tokens of {seq_id!r}")
        if num_tokens:
            slots = self._valid[row].nonzero().squeeze(1)[-num_tokens:]
            self._valid[row, slots] = False
            self._lengths[row] -= num_tokens

    @torch.inference_mode()
    def fork(self, seq_id: Hashable, new_seq_id: Hashable) -> None:
        """Copy a sequence's row of the cache into a new row."""
        if new_seq_id in self._row:
            raise ValueError(f"sequence {new_seq_id!r} already exists")
        row = self._row[seq_id]
        index = torch.tensor([row], device=self.device)
        for layer in self._cache.layers:
            layer.keys = torch.cat([layer.keys, layer.keys.index_select(0, index)])
            layer.values = torch.cat([layer.values, layer.values.index_select(0, index)])
        self._valid = torch.cat([self._valid, self._valid[row : row + 1]])
        self._add_row(new_seq_id, self._lengths[row])

    @torch.inference_mode()
    def release(self, seq_id: Hashable) -> None:
        """Cut a sequence's row out of the cache."""
        row = self._row.pop(seq_id)
        del self._ids[row]
        del self._lengths[row]
        self._row = {s: r for r, s in enumerate(self._ids)}
        if not self._ids:
            self._cache = None
            self._valid = self._valid[:0, :0]
            return
        keep = torch.tensor([r for r in range(len(self._ids) + 1) if r != row], device=self.device)
        self._select(keep)

    @property
    def num_sequences(self) -> int:
        """How many sequences the cache holds."""
        return len(self._ids)

    @property
    def cache_width(self) -> int:
        """Slots per row of the batched cache (tokens of the longest row plus holes)."""
        return int(self._valid.shape[1])

    # -- internals ----------------------------------------------------------------------------------------

    def _call(self, input_ids: torch.Tensor, position_ids: torch.Tensor, mask: torch.Tensor | None,
              cache: Any, all_logits: bool) -> torch.Tensor:
        out = self.model(
            input_ids=input_ids,
            position_ids=position_ids,
            attention_mask=mask,
            use_cache=True,
            logits_to_keep=0 if all_logits else 1,
            **{self._cache_kwarg: cache},
        )
        return out.logits.float()

    def _prefill(self, feed: Feed) -> torch.Tensor:
        ids = torch.tensor([list(feed.token_ids)], dtype=torch.long, device=self.device)
        positions = torch.arange(ids.shape[1], device=self.device).unsqueeze(0)
        cache = self._new_cache()
        logits = self._call(ids, positions, None, cache, feed.all_logits)[0]
        self._check_layers(cache)
        self._merge(feed.seq_id, cache, ids.shape[1])
        return logits

    def _check_layers(self, cache: Any) -> None:
        from transformers.cache_utils import DynamicLayer

        odd = sorted({type(layer).__name__ for layer in cache.layers if type(layer) is not DynamicLayer})
        if odd:
            raise EngineError(
                f"{type(self.model).__name__}: batched decoding needs full-attention cache layers, got {odd}; "
                "sliding-window and linear-attention layers are not supported"
            )

    def _merge(self, seq_id: Hashable, cache: Any, length: int) -> None:
        """Add a prefilled single-row cache as the last row, aligning slot columns on the right."""
        if self._cache is None:
            self._cache = cache
            self._valid = torch.ones((1, length), dtype=torch.bool, device=self.device)
        else:
            width = self.cache_width
            if length > width:
                self._pad_left(length - width)
                width = length
            for mine, theirs in zip(self._cache.layers, cache.layers, strict=True):
                mine.keys = torch.cat([mine.keys, _pad_slots(theirs.keys, width - length)])
                mine.values = torch.cat([mine.values, _pad_slots(theirs.values, width - length)])
            row = torch.zeros((1, width), dtype=torch.bool, device=self.device)
            row[0, width - length :] = True
            self._valid = torch.cat([self._valid, row])
        self._add_row(seq_id, length)

    def _add_row(self, seq_id: Hashable, length: int) -> None:
        self._row[seq_id] = len(self._ids)
        self._ids.append(seq_id)
        self._lengths.append(length)

    def _pad_left(self, slots: int) -> None:
        for layer in self._cache.layers:
            layer.keys = _pad_slots(layer.keys, slots)
            layer.values = _pad_slots(layer.values, slots)
        pad = torch.zeros((self._valid.shape[0], slots), dtype=torch.bool, device=self.device)
        self._valid = torch.cat([pad, self._valid], dim=1)

    def _select(self, rows: torch.Tensor) -> None:
        """Keep these rows, then drop leading slots that no row uses."""
        valid = self._valid.index_select(0, rows)
        used = valid.any(dim=0).nonzero()
        first = int(used[0]) if used.numel() else valid.shape[1]
        for layer in self._cache.layers:
            layer.keys = layer.keys.index_select(0, rows)[:, :, first:]
            layer.values = layer.values.index_select(0, rows)[:, :, first:]
        self._valid = valid[:, first:]

    def _decode(self, feeds: Sequence[Feed]) -> list[torch.Tensor]:
        b, past = len(self._ids), self.cache_width
        width = max(len(f.token_ids) for f in feeds)
        ids = torch.zeros((b, width), dtype=torch.long)
        new_valid = torch.zeros((b, width), dtype=torch.bool)
        lengths = torch.tensor(self._lengths, dtype=torch.long)
        positions = lengths.unsqueeze(1).repeat(1, width)
        fed = {self._row[f.seq_id]: f for f in feeds}
        for row, feed in fed.items():
            k = len(feed.token_ids)
            ids[row, width - k :] = torch.tensor(list(feed.token_ids), dtype=torch.long)
            new_valid[row, width - k :] = True
            positions[row, width - k :] = torch.arange(self._lengths[row], self._lengths[row] + k)
        valid = torch.cat([self._valid, new_valid.to(self.device)], dim=1)
        # Query j (slot past + j) sees the valid slots up to its own; a padding query sees only the
        # row's past, which is never empty, so no softmax row is all -inf.
        causal = torch.ones((width, past + width), dtype=torch.bool, device=self.device).tril(past)
        allowed = valid[:, None, None, :] & causal[None, None]
        mask = torch.zeros(allowed.shape, dtype=self._dtype, device=self.device)
        mask.masked_fill_(~allowed, torch.finfo(self._dtype).min)
        all_logits = any(f.all_logits for f in feeds)
        logits = self._call(ids.to(self.device), positions.to(self.device), mask, self._cache, all_logits)
        self._valid = valid
        for row, feed in fed.items():
            self._lengths[row] += len(feed.token_ids)
        self._maybe_compact()
        out = []
        for feed in feeds:
            row = self._row[feed.seq_id]
            k = len(feed.token_ids)
            out.append(logits[row, width - k :] if feed.all_logits else logits[row, -1:])
        return out

    def _maybe_compact(self) -> None:
        """Squeeze holes out (each row's tokens right-aligned) once they fill most of the cache."""
        width = self.cache_width
        if width < _MIN_COMPACT_WIDTH or sum(self._lengths) > (1 - _HOLE_SHARE) * width * len(self._ids):
            return
        new_width = max(self._lengths)
        # Stable sort puts each row's holes first and its tokens after, in order.
        order = torch.sort(self._valid.to(torch.int8), dim=1, stable=True).indices[:, width - new_width :]
        for layer in self._cache.layers:
            index = order[:, None, :, None].expand(-1, layer.keys.shape[1], -1, layer.keys.shape[3])
            layer.keys = layer.keys.gather(2, index)
            layer.values = layer.values.gather(2, index)
        self._valid = self._valid.gather(1, order)


def _pad_slots(x: torch.Tensor, slots: int) -> torch.Tensor:
    """``x`` of shape (rows, heads, slots, dim) with ``slots`` zero slots added on the left."""
    if slots == 0:
        return x
    return torch.cat([x.new_zeros((x.shape[0], x.shape[1], slots, x.shape[3])), x], dim=2)


class HFTokenizer:
    """A transformers tokenizer as a :class:`~banister.engine.model.TextTokenizer`.

    Parameters
    ----------
    tokenizer:
        A fast or SentencePiece transformers tokenizer.
    vocab_size:
        The model's logits width (default: the tokenizer's length).
    eos_token_ids:
        Extra ids that end generation besides the tokenizer's EOS (e.g. a generation config's).
    """

    def __init__(self, tokenizer: Any, *, vocab_size: int | None = None, eos_token_ids: Sequence[int] = ()) -> None:
        self.tokenizer = tokenizer
        size = max(vocab_size or 0, len(tokenizer))
        self.vocabulary = Vocabulary.from_hf_tokenizer(tokenizer, eos_token_ids=eos_token_ids, vocab_size=size)

    def encode(self, text: str) -> list[int]:
        """Ids of ``text`` as plain text (no special tokens added; special-token text stays text)."""
        return list(self.tokenizer.encode(text, add_special_tokens=False, split_special_tokens=True))

    def encode_prompt(self, text: str) -> list[int]:
        """Ids of a raw prompt with the tokenizer's own special tokens (BOS where the model uses one)."""
        return list(self.tokenizer.encode(text, add_special_tokens=True))

    def chat_prompt(self, messages: Sequence[Mapping[str, Any]], **template_kwargs: Any) -> list[int]:
        """Ids of ``messages`` through the tokenizer's chat template, with the assistant's turn opened."""
        if not getattr(self.tokenizer, "chat_template", None):
            raise EngineError(f"{type(self.tokenizer).__name__} has no chat template; pass a raw prompt instead")
        encoded = self.tokenizer.apply_chat_template(
            list(messages), add_generation_prompt=True, tokenize=True, **template_kwargs
        )
        ids = encoded["input_ids"] if isinstance(encoded, Mapping) else encoded
        return [int(i) for i in ids]
