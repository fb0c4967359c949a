"""Repetition, presence and frequency penalties over whole batches (in place, no host sync)."""

from __future__ import annotations

import torch


def apply_repetition_penalty_(logits: torch.Tensor, seen: torch.Tensor, penalty: torch.Tensor) -> torch.Tensor:
    """HF/CTRL repetition penalty, in place; returns ``logits``.

    Where ``seen`` is True a negative logit is multiplied by the row's penalty and any other logit
    divided by it (as transformers' ``RepetitionPenaltyLogitsProcessor``).

    Parameters
    ----------
    logits:
        ``(rows, vocab)`` floating tensor, modified in place.
    seen:
        ``(rows, vocab)`` bool: the tokens in the row's prompt or output.
    penalty:
        ``(rows,)`` penalties > 0; 1 leaves the row unchanged.
    """
    p = penalty.to(logits.dtype).unsqueeze(1)
    penalised = torch.where(logits < 0, logits * p, logits / p)
    return logits.copy_(torch.where(seen, penalised, logits))


def apply_presence_frequency_penalties_(
    logits: torch.Tensor, counts: torch.Tensor, presence: torch.Tensor, frequency: torch.Tensor
) -> torch.Tensor:
    """OpenAI penalties, in place: ``logit - count * frequency - (count > 0) * presence``; returns ``logits``.

    Parameters
    ----------
    logits:
        ``(rows, vocab)`` floating tensor, modified in place.
    counts:
        ``(rows, vocab)`` integer tensor: how often each token occurs in the row's output so far.
    presence, frequency:
        ``(rows,)`` penalties; 0 leaves the row unchanged.
    """
    dtype = logits.dtype
    penalty = counts.to(dtype) * frequency.to(dtype).unsqueeze(1)
    penalty += (counts > 0).to(dtype) * presence.to(dtype).unsqueeze(1)
    return logits.sub_(penalty)
