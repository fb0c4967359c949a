"""Beam search driven from outside the decoding loop, one model step per generated token."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

import torch

StepFn = Callable[[list[list[int]]], torch.Tensor]


@dataclass(frozen=True)
class BeamHypothesis:
    """A finished beam.

    ``token_ids`` are the generated tokens (the EOS that ended it included); ``score`` is
    ``cumulative_logprob / len(token_ids) ** length_penalty``.
    """

    token_ids: tuple[int, ...]
    cumulative_logprob: float
    score: float
    ended_with_eos: bool


def beam_search(
    step: StepFn,
    prompt_token_ids: Sequence[int],
    *,
    beam_width: int,
    max_tokens: int,
    eos_token_ids: Iterable[int] = (),
    length_penalty: float = 1.0,
) -> list[BeamHypothesis]:
    """Beam search; returns up to ``beam_width`` finished beams, best score first.

    Each step calls ``step`` once with the full sequence (prompt + generated) of every live beam and
    expects ``(len(sequences), vocab)`` logits. Every beam proposes its top ``2 * beam_width``
    continuations by cumulative logprob; of the best ``2 * beam_width`` overall, those ending in EOS
    become finished beams and the best ``beam_width`` others stay live. At ``max_tokens`` the live
    beams finish too. The search stops early only when no live beam can still beat the
    ``beam_width`` best finished ones, so early stopping never changes the result.

    Parameters
    ----------
    step:
        The model: sequences in, next-token logits out (raw logits; log-softmax is applied here).
    prompt_token_ids:
        The prompt every beam starts from.
    beam_width:
        Number of beams kept (>= 1).
    max_tokens:
        Most tokens to generate (>= 1).
    eos_token_ids:
        Ids that finish a beam (default none).
    length_penalty:
        Exponent of the length normalisation (default 1.0; 0 ranks by cumulative logprob).
    """
    if isinstance(beam_width, bool) or not isinstance(beam_width, int) or beam_width < 1:
        raise ValueError(f"beam_width must be an integer >= 1, got {beam_width!r}")
    if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1:
        raise ValueError(f"max_tokens must be an integer >= 1, got {max_tokens!r}")
    if not math.isfinite(length_penalty):
        raise ValueError(f"length_penalty must be finite, got {length_penalty!r}")
    eos = frozenset(eos_token_ids)
    prompt = list(prompt_token_ids)
    width = beam_width
    live: list[tuple[tuple[int, ...], float]] = [((), 0.0)]
    finished: list[BeamHypothesis] = []

    def hypothesis(tokens: tuple[int, ...], logprob: float) -> BeamHypothesis:
        score = logprob / len(tokens) ** length_penalty
        return BeamHypothesis(tokens, logprob, score, tokens[-1] in eos)

    for length in range(1, max_tokens + 1):
        logits = step([prompt + list(tokens) for tokens, _ in live])
        if logits.dim() != 2 or logits.shape[0] != len(live):
            raise ValueError(f"step returned logits of shape {tuple(logits.shape)} for {len(live)} sequences")
        cumulative = torch.tensor([lp for _, lp in live], dtype=torch.float64, device=logits.device)
        total = torch.log_softmax(logits.to(torch.float64), dim=-1) + cumulative.unsqueeze(1)
        values, token_ids = total.topk(min(2 * width, total.shape[1]), dim=-1)
        candidates = sorted(
            (
                (-value, beam, token)
                for beam, (row_values, row_ids) in enumerate(zip(values.tolist(), token_ids.tolist(), strict=True))
                for value, token in zip(row_values, row_ids, strict=True)
                if value > -math.inf
            )
        )[: 2 * width]
        next_live: list[tuple[tuple[int, ...], float]] = []
        for neg_value, beam, token in candidates:
            tokens = live[beam][0] + (token,)
            if token in eos or length == max_tokens:
                finished.append(hypothesis(tokens, -neg_value))
            elif len(next_live) < width:
                next_live.append((tokens, -neg_value))
        finished = sorted(finished, key=lambda h: -h.score)[:width]
        live = next_live
        if not live or (
            len(finished) == width and finished[-1].score >= _best_reachable(live, length, max_tokens, length_penalty)
        ):
            break
    return finished


def _best_reachable(
    live: list[tuple[tuple[int, ...], float]], length: int, max_tokens: int, length_penalty: float
) -> float:
    """An upper bound on the score any live beam can still finish with (logprobs only fall)."""
    final_length = max_tokens if length_penalty > 0 else length + 1
    return max(lp for _, lp in live) / math.pow(final_length, length_penalty)
