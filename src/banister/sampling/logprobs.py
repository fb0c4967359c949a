"""Log-probabilities of chosen tokens and their top alternatives, from the model's raw logits."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class TokenLogprobs:
    """One position's log-probabilities (plain Python values).

    ``rank`` is 1 + the number of tokens strictly more likely than ``token_id`` (tied tokens share a
    rank); ``top`` holds the requested alternatives as ``(token_id, logprob)``, most likely first.
    """

    token_id: int
    logprob: float
    rank: int
    top: tuple[tuple[int, float], ...]


@dataclass(frozen=True)
class LogprobsTensors:
    """Log-probabilities for a batch of positions, still on the logits' device.

    ``token_ids`` and ``logprobs`` have shape ``(rows, 1 + k)``: column 0 is the chosen (or prompt)
    token, columns ``1..k`` the top-k alternatives, most likely first. ``ranks`` has shape ``(rows,)``.
    """

    token_ids: torch.Tensor
    logprobs: torch.Tensor
    ranks: torch.Tensor

    def to_lists(self, num_logprobs: int | Sequence[int | None] | None) -> list[TokenLogprobs | None]:
        """Per-row Python values (syncs with the device).

        ``num_logprobs`` is one count for all rows or one per row; a row with ``None`` gives ``None``
        and a count above the computed ``k`` raises ``ValueError``.
        """
        rows = self.token_ids.shape[0]
        counts = [num_logprobs] * rows if num_logprobs is None or isinstance(num_logprobs, int) else list(num_logprobs)
        if len(counts) != rows:
            raise ValueError(f"num_logprobs has {len(counts)} entries for {rows} rows")
        k = self.token_ids.shape[1] - 1
        if any(c is not None and c > k for c in counts):
            raise ValueError(f"num_logprobs asks for more than the {k} alternatives computed")
        ids = self.token_ids.tolist()
        values = self.logprobs.tolist()
        ranks = self.ranks.tolist()
        out: list[TokenLogprobs | None] = []
        for r, c in enumerate(counts):
            if c is None:
                out.append(None)
                continue
            top = tuple(zip(ids[r][1 : 1 + c], values[r][1 : 1 + c], strict=True))
            out.append(TokenLogprobs(ids[r][0], values[r][0], ranks[r], top))
        return out


def compute_logprobs(logits: torch.Tensor, token_ids: torch.Tensor, num_logprobs: int) -> LogprobsTensors:
    """Logprob and rank of ``token_ids[r]`` under ``log_softmax(logits[r])``, plus the top alternatives.

    Parameters
    ----------
    logits:
        ``(rows, vocab)`` raw logits (before any processor); not modified. Computed in float32 or wider.
    token_ids:
        ``(rows,)`` ids to score. An id outside the vocabulary (such as -1) keeps its id in the result
        but gets token 0's logprob and rank.
    num_logprobs:
        How many alternatives to return per row (``k >= 0``, clipped to the vocabulary).
    """
    if num_logprobs < 0:
        raise ValueError(f"num_logprobs must be >= 0, got {num_logprobs}")
    logprobs = torch.log_softmax(logits.to(torch.promote_types(logits.dtype, torch.float32)), dim=-1)
    ids = token_ids.to(torch.int64).unsqueeze(1)
    chosen = logprobs.gather(1, ids.clamp(0, logits.shape[-1] - 1))
    ranks = (logprobs > chosen).sum(dim=-1) + 1
    k = min(num_logprobs, logits.shape[-1])
    if k == 0:
        return LogprobsTensors(ids, chosen, ranks)
    top_values, top_ids = logprobs.topk(k, dim=-1)
    return LogprobsTensors(torch.cat([ids, top_ids], dim=1), torch.cat([chosen, top_values], dim=1), ranks)


def prompt_logprobs(
    logits: torch.Tensor, prompt_token_ids: torch.Tensor | Sequence[int], num_logprobs: int
) -> LogprobsTensors:
    """Logprobs of every prompt token after the first, from the model's logits at each prompt position.

    ``logits[i]`` (shape ``(len(prompt), vocab)``) is the prediction after prompt token ``i``, so row
    ``i`` of the result scores prompt token ``i + 1``; the first prompt token has no logprob. A request
    that asks for prompt logprobs needs every position computed, so it must skip prefix-cache hits.
    """
    ids = torch.as_tensor(prompt_token_ids, dtype=torch.int64, device=logits.device)
    if logits.dim() != 2 or logits.shape[0] != ids.shape[0]:
        raise ValueError(f"logits must have shape ({ids.shape[0]}, vocab), got {tuple(logits.shape)}")
    return compute_logprobs(logits[:-1], ids[1:], num_logprobs)
