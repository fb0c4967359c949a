"""The token bitmask contract shared with XGrammar, llguidance and vLLM.

A bitmask is an int32 array of shape ``(batch, ceil(vocab_size / 32))``; token ``t`` is allowed in row
``r`` when bit ``t % 32`` of word ``t // 32`` is 1. Logit columns that the bitmask does not cover
(a padded output layer wider than the vocabulary) are forbidden.
"""

from __future__ import annotations

from typing import Any, TypeVar

import numpy as np

Logits = TypeVar("Logits")

_SHIFTS = np.arange(32, dtype=np.int32)


def bitmask_words(vocab_size: int) -> int:
    """Number of int32 words that cover ``vocab_size`` tokens."""
    return (int(vocab_size) + 31) // 32


def allocate_token_bitmask(batch: int, vocab_size: int) -> np.ndarray:
    """A ``(batch, ceil(vocab_size / 32))`` int32 bitmask with every token allowed (all bits set).

    Wrap it with ``torch.from_numpy`` to share the memory with torch code.
    """
    if batch < 1 or vocab_size < 1:
        raise ValueError(f"batch and vocab_size must be positive, got batch={batch}, vocab_size={vocab_size}")
    return np.full((int(batch), bitmask_words(vocab_size)), -1, dtype=np.int32)


def unpack_bitmask(bitmask: Any, width: int) -> Any:
    """Boolean ``allowed`` array of shape ``(batch, width)`` from a bitmask (numpy or torch, on its device).

    Columns past ``32 * words`` come out False.
    """
    if _is_torch(bitmask):
        import torch

        shifts = torch.as_tensor(_SHIFTS, device=bitmask.device)
        bits = ((bitmask.unsqueeze(-1) >> shifts) & 1).bool().reshape(bitmask.shape[0], -1)
        if bits.shape[1] >= width:
            return bits[:, :width]
        pad = torch.zeros((bits.shape[0], width - bits.shape[1]), dtype=torch.bool, device=bits.device)
        return torch.cat([bits, pad], dim=1)
    bits = ((np.asarray(bitmask)[..., None] >> _SHIFTS) & 1).astype(bool).reshape(bitmask.shape[0], -1)
    if bits.shape[1] >= width:
        return bits[:, :width]
    return np.pad(bits, ((0, 0), (0, width - bits.shape[1])))


def apply_token_bitmask_inplace(logits: Logits, bitmask: Any, indices: Any = None) -> Logits:
    """Set every forbidden logit to ``-inf``, in place, and return ``logits``.

    Parameters
    ----------
    logits:
        numpy array or torch tensor, shape ``(batch, width)`` or ``(width,)``. ``width`` may exceed the
        bitmask's coverage; the extra columns are forbidden.
    bitmask:
        int32 bitmask, shape ``(rows, words)`` or ``(words,)``, numpy or torch (moved to the logits'
        device when they differ).
    indices:
        Optional sequence of logits rows to mask, one per bitmask row; rows not listed are untouched.
        Default: bitmask row ``i`` masks logits row ``i``.
    """
    array: Any = logits  # numpy or torch: the operations below are the ones both have
    rows = array[None, :] if len(array.shape) == 1 else array
    mask: Any
    if _is_torch(rows):
        import torch

        mask = torch.as_tensor(bitmask, device=rows.device)
    else:
        mask = np.asarray(bitmask)
    if len(mask.shape) == 1:
        mask = mask[None, :]
    allowed = unpack_bitmask(mask, rows.shape[1])
    if indices is None:
        if mask.shape[0] < rows.shape[0]:
            raise ValueError(f"bitmask has {mask.shape[0]} rows for {rows.shape[0]} rows of logits")
        target = rows
        allowed = allowed[: rows.shape[0]]
    else:
        idx = list(indices)
        if len(idx) > mask.shape[0]:
            raise ValueError(f"{len(idx)} indices for a bitmask of {mask.shape[0]} rows")
        target = rows[idx]
        allowed = allowed[: len(idx)]
    masked = target.masked_fill(~allowed, float("-inf")) if _is_torch(rows) else np.where(allowed, target, -np.inf)
    if indices is None:
        rows[...] = masked
    else:
        rows[idx] = masked
    return logits


def _is_torch(x: Any) -> bool:
    return type(x).__module__.startswith("torch")
