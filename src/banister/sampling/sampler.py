"""The batched sampler: one pass over a batch of requests with different settings."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from banister.mask.bitmask import apply_token_bitmask_inplace
from banister.sampling.logprobs import LogprobsTensors, TokenLogprobs, compute_logprobs
from banister.sampling.penalties import apply_presence_frequency_penalties_, apply_repetition_penalty_
from banister.sampling.state import SamplingState, _Plan, _Rows, _to_device

_NEG_INF = float("-inf")


@dataclass(frozen=True)
class SamplerOutput:
    """One step's result, still on the logits' device.

    ``token_ids`` has shape ``(rows,)``; -1 marks a row in which every token was forbidden.
    ``logprobs`` is None unless some row asked for logprobs (then it covers every row, computed from
    the raw logits); ``num_logprobs`` is each row's requested count.
    """

    token_ids: torch.Tensor
    logprobs: LogprobsTensors | None
    num_logprobs: tuple[int | None, ...]

    def logprobs_per_row(self) -> list[TokenLogprobs | None]:
        """Per-row logprobs as Python values, None for rows that did not ask (syncs with the device)."""
        if self.logprobs is None:
            return [None] * len(self.num_logprobs)
        return self.logprobs.to_lists(self.num_logprobs)


class Sampler:
    """Picks the next token of every row of a batch, each row with its own settings.

    The steps, in order (each skipped when no row needs it):

    1. logprobs of the raw logits, kept for the rows that ask;
    2. processors: ``allowed_token_ids``, ``logit_bias``, ``min_tokens`` (EOS and stop tokens
       forbidden until enough tokens exist), the grammar bitmask;
    3. penalties: repetition (HF/CTRL, over prompt and output), presence and frequency (OpenAI,
       over the output), from the state's persistent tensors;
    4. greedy rows take the argmax (first index among ties);
    5. temperature, then top-k and top-p from one descending sort (a partial top-k when no row
       asks for top-p), then min-p as ``logit >= max logit + log(min_p)``; the top token always
       survives, and tokens tied with the k-th or with the top token stay;
    6. the draw: the exponential race ``argmax(p / E)``, ``E ~ Exp(1)``, computed as
       ``argmax(log p - log E)``. A seeded request draws its noise from its own generator, so it
       gets the same tokens alone or in any batch.

    Nothing waits for the device until the caller reads the tokens.

    Parameters
    ----------
    generator:
        Generator for the noise of unseeded rows (default None: torch's global generator).
    """

    def __init__(self, generator: torch.Generator | None = None) -> None:
        self.generator = generator

    def __call__(
        self,
        logits: torch.Tensor,
        state: SamplingState,
        bitmask: Any = None,
        bitmask_rows: Sequence[int] | None = None,
    ) -> SamplerOutput:
        """Sample one token per row.

        Parameters
        ----------
        logits:
            ``(len(state), state.vocab_size)`` raw logits in the state's row order; not modified.
        state:
            The batch's settings and counts; not modified (call ``state.append_tokens`` after).
        bitmask:
            Optional int32 token bitmask (numpy or torch), shape ``(rows, ceil(vocab / 32))``.
        bitmask_rows:
            Logits rows the bitmask rows apply to (default: bitmask row i to logits row i).
        """
        plan = state._plan()
        x = self._processed(logits, state, plan, bitmask, bitmask_rows)
        if plan.all_greedy:
            token_ids = _argmax_or_none(x)
        else:
            greedy_ids = _argmax_or_none(x) if plan.any_greedy else None
            self._filter(x, state, plan)
            token_ids = self._draw(x, plan)
            if greedy_ids is not None:
                token_ids = torch.where(state.greedy[: len(state)], greedy_ids, token_ids)
        logprobs = None
        if plan.max_logprobs is not None:
            logprobs = compute_logprobs(logits, token_ids, plan.max_logprobs)
        return SamplerOutput(token_ids, logprobs, plan.num_logprobs)

    def filtered_logits(
        self,
        logits: torch.Tensor,
        state: SamplingState,
        bitmask: Any = None,
        bitmask_rows: Sequence[int] | None = None,
    ) -> torch.Tensor:
        """The logits the draw samples from, as a new tensor (arguments as for calling the sampler).

        Sampling rows come back processed, penalised, divided by the temperature and filtered
        (dropped tokens are ``-inf``); greedy rows come back processed and penalised only.
        """
        plan = state._plan()
        x = self._processed(logits, state, plan, bitmask, bitmask_rows)
        if not plan.all_greedy:
            self._filter(x, state, plan)
        return x

    def _processed(
        self,
        logits: torch.Tensor,
        state: SamplingState,
        plan: _Plan,
        bitmask: Any,
        bitmask_rows: Sequence[int] | None,
    ) -> torch.Tensor:
        b = len(state)
        if logits.dim() != 2 or tuple(logits.shape) != (b, state.vocab_size):
            raise ValueError(f"logits must have shape ({b}, {state.vocab_size}), got {tuple(logits.shape)}")
        if logits.device != state.device:
            raise ValueError(f"logits are on {logits.device} but the state is on {state.device}")
        x = logits.to(torch.promote_types(logits.dtype, torch.float32), copy=True)
        if plan.any_allowed and state.allowed is not None:
            x.masked_fill_(~state.allowed[:b], _NEG_INF)
        if plan.bias is not None:
            rows, cols, values = plan.bias
            x.index_put_((rows, cols), values.to(x.dtype), accumulate=True)
        rows_list, cols_list = state._min_tokens_index(plan)
        if rows_list:
            index = _to_device(rows_list + cols_list, torch.int64, x.device).view(2, -1)
            x[index[0], index[1]] = _NEG_INF
        if bitmask is not None:
            if not isinstance(bitmask, torch.Tensor):
                bitmask = torch.from_numpy(np.ascontiguousarray(bitmask, dtype=np.int32))
            apply_token_bitmask_inplace(x, bitmask.to(x.device, non_blocking=True), bitmask_rows)
        seen, counts = state.seen, state.output_counts
        if plan.repetition is not None and seen is not None:
            _on_rows(
                x,
                plan.repetition,
                lambda part, i: apply_repetition_penalty_(part, seen[i], state.repetition_penalty[i]),
            )
        if plan.presence_frequency is not None and counts is not None:
            _on_rows(
                x,
                plan.presence_frequency,
                lambda part, i: apply_presence_frequency_penalties_(
                    part, counts[i], state.presence_penalty[i], state.frequency_penalty[i]
                ),
            )
        return x

    @staticmethod
    def _filter(x: torch.Tensor, state: SamplingState, plan: _Plan) -> None:
        """Temperature, then top-k, top-p and min-p, in place (greedy rows carry neutral settings)."""
        b = len(state)
        if plan.any_temperature:
            x.div_(state.temperature[:b].to(x.dtype).unsqueeze(1))
        use_top_k = plan.top_k_max is not None
        if plan.top_p is not None:  # rows without top-p skip the sort; top-k below covers them
            _on_rows(
                x, plan.top_p, lambda part, i: _sorted_top_k_top_p_(part, state.top_k[i], state.top_p[i], use_top_k)
            )
        if plan.top_k_max is not None and (plan.top_p is None or plan.top_p.index is not None):
            top_k = state.top_k[:b]
            values = x.topk(plan.top_k_max, dim=-1).values
            kth = values.gather(1, (top_k.clamp(max=plan.top_k_max) - 1).unsqueeze(1))
            kth.masked_fill_((top_k > plan.top_k_max).unsqueeze(1), _NEG_INF)
            x.masked_fill_(x < kth, _NEG_INF)
        if plan.any_min_p:
            # p < min_p * p_max  <=>  logit < max logit + log(min_p): no sort and no softmax needed.
            floor = x.max(dim=-1, keepdim=True).values + state.min_p[:b].to(x.dtype).log().unsqueeze(1)
            x.masked_fill_(x < floor, _NEG_INF)

    def _draw(self, x: torch.Tensor, plan: _Plan) -> torch.Tensor:
        # Greedy rows' noise is left unset: their draw is discarded.
        noise = torch.empty_like(x)
        shared = plan.shared_noise
        if shared is not None and shared.index is None:
            noise.exponential_(generator=self.generator)
        elif shared is not None and shared.index is not None:
            part = torch.empty((shared.index.shape[0], x.shape[1]), dtype=x.dtype, device=x.device)
            noise.index_copy_(0, shared.index, part.exponential_(generator=self.generator))
        for row, generator in plan.seeded:
            noise[row].exponential_(generator=generator)
        # E == 0 would turn a forbidden token's -inf into nan; the clamp keeps -log E finite.
        noise.clamp_(min=torch.finfo(x.dtype).tiny).log_()
        return _argmax_or_none(x.sub_(noise))


def _sorted_top_k_top_p_(x: torch.Tensor, top_k: torch.Tensor, top_p: torch.Tensor, use_top_k: bool) -> None:
    """Top-k, then top-p over the renormalised top-k, from one stable descending sort, into ``x``.

    Ties: top-k keeps every token tied with the k-th; top-p keeps a token when the mass ranked before
    it (higher logit first, then lower id) is below ``top_p``, so the top token always survives.
    ``top_k`` holds the vocabulary size and ``top_p`` infinity where a row does not filter.
    """
    values, order = torch.sort(x, dim=-1, descending=True, stable=True)
    if use_top_k:
        kth = values.gather(1, (top_k - 1).unsqueeze(1))
        values.masked_fill_(values < kth, _NEG_INF)
    probs = values.softmax(dim=-1)
    mass_before = probs.cumsum(dim=-1).sub_(probs)
    values.masked_fill_(mass_before >= top_p.to(x.dtype).unsqueeze(1), _NEG_INF)
    x.scatter_(1, order, values)


def _on_rows(x: torch.Tensor, rows: _Rows, fn: Callable[[torch.Tensor, slice | torch.Tensor], object]) -> None:
    """Run ``fn(part, index)`` in place on every row of ``x``, or on the listed rows only."""
    if rows.index is None:
        fn(x, slice(0, x.shape[0]))
        return
    part = x.index_select(0, rows.index)
    fn(part, rows.index)
    x.index_copy_(0, rows.index, part)


def _argmax_or_none(x: torch.Tensor) -> torch.Tensor:
    """Row-wise argmax (first index among ties), or -1 where every entry is -inf."""
    best, index = x.max(dim=-1)
    return index.masked_fill_(best == _NEG_INF, -1)
