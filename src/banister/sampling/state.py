"""Persistent per-request sampling state for a continuously batched decoding loop."""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Sequence
from dataclasses import dataclass

import torch

from banister.sampling.params import SamplingParams, SamplingParamsError


def _to_device(values: Sequence[int] | Sequence[float], dtype: torch.dtype, device: torch.device) -> torch.Tensor:
    """Host values copied to ``device`` asynchronously (a blocking copy would wait for queued work)."""
    return torch.tensor(values, dtype=dtype).to(device, non_blocking=True)


@dataclass(frozen=True)
class _Rows:
    """Some rows of the batch: every row when ``index`` is None, else the listed ones."""

    index: torch.Tensor | None


@dataclass(frozen=True)
class _Plan:
    """What the sampler has to do for the current rows, decided on the host once per change of rows.

    A ``_Rows`` field is None when no row needs that step.
    """

    all_greedy: bool
    any_greedy: bool
    any_temperature: bool
    top_k_max: int | None
    top_p: _Rows | None
    any_min_p: bool
    repetition: _Rows | None
    presence_frequency: _Rows | None
    shared_noise: _Rows | None
    any_allowed: bool
    bias: tuple[torch.Tensor, torch.Tensor, torch.Tensor] | None
    seeded: tuple[tuple[int, torch.Generator], ...]
    min_tokens: tuple[tuple[int, int, tuple[int, ...]], ...]
    max_logprobs: int | None
    num_logprobs: tuple[int | None, ...]


class SamplingState:
    """Sampling settings and token counts of the requests in a running batch, one row per request.

    Settings live in per-row device tensors written once when a request joins; token counts (for
    presence/frequency) and the prompt-or-output presence mask (for the repetition penalty) live in
    ``(rows, vocab_size)`` tensors updated in place by :meth:`append_tokens`, never rebuilt from lists.
    Rows are dense: removing a request moves the last row into its place, so the logits given to the
    sampler must follow :attr:`request_ids`.

    Parameters
    ----------
    vocab_size:
        Width of the logits rows (the model's output layer).
    eos_token_ids:
        Ids that end generation; ``min_tokens`` masks them (unless the request ignores EOS).
    device:
        Device of the tensors; the logits given to the sampler must be on it (default ``"cpu"``).
    capacity:
        Rows allocated up front (default 8); storage doubles when more requests join.

    Attributes
    ----------
    temperature, greedy, top_k, top_p, min_p, presence_penalty, frequency_penalty, repetition_penalty:
        Per-row settings, shape ``(capacity,)``; rows ``[0, len(state))`` are live. Rows that do not
        filter hold neutral values (``top_k = vocab_size``, ``top_p = inf``, ``min_p = 0``); greedy
        rows hold temperature 1.
    output_counts:
        ``(capacity, vocab_size)`` int32 count of each token in each row's output, or None until a
        request with a presence or frequency penalty joins.
    seen:
        ``(capacity, vocab_size)`` bool, the tokens of each row's prompt or output, or None until a
        request with a repetition penalty joins.
    allowed:
        ``(capacity, vocab_size)`` bool from ``allowed_token_ids``, or None until such a request joins.
    """

    def __init__(
        self,
        vocab_size: int,
        eos_token_ids: Iterable[int] = (),
        *,
        device: torch.device | str = "cpu",
        capacity: int = 8,
    ) -> None:
        if isinstance(vocab_size, bool) or not isinstance(vocab_size, int) or vocab_size < 1:
            raise ValueError(f"vocab_size must be a positive integer, got {vocab_size!r}")
        if isinstance(capacity, bool) or not isinstance(capacity, int) or capacity < 1:
            raise ValueError(f"capacity must be a positive integer, got {capacity!r}")
        self.vocab_size = vocab_size
        self.eos_token_ids = tuple(int(t) for t in eos_token_ids)
        bad = [t for t in self.eos_token_ids if not 0 <= t < vocab_size]
        if bad:
            raise ValueError(f"eos_token_ids has ids outside [0, {vocab_size}): {bad}")
        self.device = torch.device(device)
        self._capacity = capacity
        self._ids: list[Hashable] = []
        self._index: dict[Hashable, int] = {}
        self._params: list[SamplingParams] = []
        self._generators: list[torch.Generator | None] = []
        self._lengths: list[int] = []
        self._plan_cache: _Plan | None = None
        f32, dev = torch.float32, self.device
        self.temperature = torch.ones(capacity, dtype=f32, device=dev)
        self.greedy = torch.zeros(capacity, dtype=torch.bool, device=dev)
        self.top_k = torch.full((capacity,), vocab_size, dtype=torch.int64, device=dev)
        self.top_p = torch.full((capacity,), float("inf"), dtype=f32, device=dev)
        self.min_p = torch.zeros(capacity, dtype=f32, device=dev)
        self.presence_penalty = torch.zeros(capacity, dtype=f32, device=dev)
        self.frequency_penalty = torch.zeros(capacity, dtype=f32, device=dev)
        self.repetition_penalty = torch.ones(capacity, dtype=f32, device=dev)
        # Allocated when the first request that needs them joins.
        self.output_counts: torch.Tensor | None = None
        self.seen: torch.Tensor | None = None
        self.allowed: torch.Tensor | None = None

    def __len__(self) -> int:
        return len(self._ids)

    @property
    def request_ids(self) -> tuple[Hashable, ...]:
        """Request ids in row order (the order of the logits rows)."""
        return tuple(self._ids)

    def row(self, request_id: Hashable) -> int:
        """The row of a request (read-only)."""
        return self._index[request_id]

    def params(self, request_id: Hashable) -> SamplingParams:
        """The settings a request joined with (read-only)."""
        return self._params[self._index[request_id]]

    def output_length(self, request_id: Hashable) -> int:
        """How many output tokens the request has so far (read-only)."""
        return self._lengths[self._index[request_id]]

    def add_request(
        self,
        request_id: Hashable,
        params: SamplingParams,
        prompt_token_ids: Sequence[int] = (),
        output_token_ids: Sequence[int] = (),
    ) -> int:
        """Add a request as the last row and return that row.

        ``output_token_ids`` resumes a request that already generated tokens (they count for the
        penalties and ``min_tokens``). A request with ``n > 1`` must be expanded first
        (:func:`expand_n`). Raises :class:`SamplingParamsError` naming the field when a token id is
        outside the vocabulary.
        """
        if request_id in self._index:
            raise ValueError(f"request_id {request_id!r} is already in the batch")
        if params.n != 1:
            raise SamplingParamsError("n", f"expand a request with n={params.n} into children with expand_n first")
        v = self.vocab_size
        checks: list[tuple[str, Sequence[int]]] = [
            ("prompt_token_ids", prompt_token_ids),
            ("output_token_ids", output_token_ids),
            ("stop_token_ids", params.stop_token_ids or ()),
            ("allowed_token_ids", params.allowed_token_ids or ()),
            ("logit_bias", tuple(params.logit_bias or ())),
        ]
        for name, ids in checks:
            bad = [t for t in ids if not 0 <= t < v]
            if bad:
                raise SamplingParamsError(name, f"token ids outside the vocabulary [0, {v}): {bad[:5]}")
        if len(self._ids) == self._capacity:
            self._grow(2 * self._capacity)
        row = len(self._ids)
        self._ids.append(request_id)
        self._index[request_id] = row
        self._params.append(params)
        self._lengths.append(len(output_token_ids))
        seed = None if params.greedy else params.seed
        self._generators.append(None if seed is None else torch.Generator(device=self.device).manual_seed(seed))
        self._plan_cache = None

        sampling = not params.greedy
        self.temperature[row] = params.temperature if sampling else 1.0
        self.greedy[row] = params.greedy
        self.top_k[row] = min(params.top_k, v) if sampling and params.top_k > 0 else v
        self.top_p[row] = params.top_p if sampling and params.top_p < 1.0 else float("inf")
        self.min_p[row] = params.min_p if sampling else 0.0
        self.presence_penalty[row] = params.presence_penalty
        self.frequency_penalty[row] = params.frequency_penalty
        self.repetition_penalty[row] = params.repetition_penalty
        output = _to_device(list(output_token_ids), torch.int64, self.device)
        if params.presence_penalty or params.frequency_penalty or self.output_counts is not None:
            counts = self._table("output_counts", torch.int32, 0)
            counts[row] = 0
            counts[row].index_add_(0, output, torch.ones_like(output, dtype=torch.int32))
        if params.repetition_penalty != 1.0 or self.seen is not None:
            seen = self._table("seen", torch.bool, False)
            seen[row] = False
            prompt = _to_device(list(prompt_token_ids), torch.int64, self.device)
            seen[row, prompt] = True
            seen[row, output] = True
        if params.allowed_token_ids is not None or self.allowed is not None:
            allowed = self._table("allowed", torch.bool, True)
            if params.allowed_token_ids is None:
                allowed[row] = True
            else:
                allowed[row] = False
                allowed[row, _to_device(list(params.allowed_token_ids), torch.int64, self.device)] = True
        return row

    def remove_request(self, request_id: Hashable) -> None:
        """Remove a request; the last row moves into its row (see :attr:`request_ids`)."""
        row = self._index.pop(request_id)
        last = len(self._ids) - 1
        if row != last:
            for t in self._row_tensors():
                t[row] = t[last]
            self._ids[row] = self._ids[last]
            self._params[row] = self._params[last]
            self._generators[row] = self._generators[last]
            self._lengths[row] = self._lengths[last]
            self._index[self._ids[row]] = row
        self._ids.pop()
        self._params.pop()
        self._generators.pop()
        self._lengths.pop()
        self._plan_cache = None

    def append_tokens(self, token_ids: torch.Tensor | Sequence[int]) -> None:
        """Record one new token per row (in row order), updating the counts in place.

        Token id -1 (a row with no allowed token) is skipped by the counts. No host sync.
        """
        if isinstance(token_ids, torch.Tensor):
            tokens = token_ids.to(self.device, torch.int64)
        else:
            tokens = _to_device(list(token_ids), torch.int64, self.device)
        if tokens.shape != (len(self._ids),):
            raise ValueError(f"token_ids must have shape ({len(self._ids)},), got {tuple(tokens.shape)}")
        self._lengths = [n + 1 for n in self._lengths]
        if self.output_counts is None and self.seen is None:
            return
        b = len(self._ids)
        valid = (tokens >= 0).unsqueeze(1)
        index = tokens.clamp(min=0).unsqueeze(1)
        if self.output_counts is not None:
            self.output_counts[:b].scatter_add_(1, index, valid.to(torch.int32))
        if self.seen is not None:
            seen = self.seen[:b]
            seen.scatter_(1, index, seen.gather(1, index) | valid)

    def _table(self, name: str, dtype: torch.dtype, fill: int | bool) -> torch.Tensor:
        table: torch.Tensor | None = getattr(self, name)
        if table is None:
            table = torch.full((self._capacity, self.vocab_size), fill, dtype=dtype, device=self.device)
            setattr(self, name, table)
        return table

    def _row_tensors(self) -> list[torch.Tensor]:
        tensors = [
            self.temperature,
            self.greedy,
            self.top_k,
            self.top_p,
            self.min_p,
            self.presence_penalty,
            self.frequency_penalty,
            self.repetition_penalty,
        ]
        return tensors + [t for t in (self.output_counts, self.seen, self.allowed) if t is not None]

    def _grow(self, capacity: int) -> None:
        defaults = {
            "temperature": 1.0,
            "greedy": False,
            "top_k": self.vocab_size,
            "top_p": float("inf"),
            "min_p": 0.0,
            "presence_penalty": 0.0,
            "frequency_penalty": 0.0,
            "repetition_penalty": 1.0,
            "output_counts": 0,
            "seen": False,
            "allowed": True,
        }
        for name, fill in defaults.items():
            old = getattr(self, name)
            if old is None:
                continue
            new = torch.full((capacity, *old.shape[1:]), fill, dtype=old.dtype, device=self.device)
            new[: self._capacity] = old
            setattr(self, name, new)
        self._capacity = capacity

    def _plan(self) -> _Plan:
        """The host-side plan for the current rows (cached until rows change; read-only)."""
        if self._plan_cache is not None:
            return self._plan_cache
        params = self._params
        sampling = [p for p in params if not p.greedy]
        ks = [min(p.top_k, self.vocab_size) for p in sampling if p.top_k > 0]
        bias_rows: list[int] = []
        bias_cols: list[int] = []
        bias_vals: list[float] = []
        for row, p in enumerate(params):
            for token, value in (p.logit_bias or {}).items():
                bias_rows.append(row)
                bias_cols.append(token)
                bias_vals.append(value)
        bias = None
        if bias_rows:
            bias = (
                _to_device(bias_rows, torch.int64, self.device),
                _to_device(bias_cols, torch.int64, self.device),
                _to_device(bias_vals, torch.float32, self.device),
            )
        min_tokens = tuple(
            (row, p.min_tokens, (*(p.stop_token_ids or ()), *(() if p.ignore_eos else self.eos_token_ids)))
            for row, p in enumerate(params)
            if p.min_tokens > 0
        )
        seeded = tuple((row, g) for row, g in enumerate(self._generators) if g is not None)
        wanted = [p.logprobs for p in params if p.logprobs is not None]
        self._plan_cache = _Plan(
            all_greedy=not sampling,
            any_greedy=len(sampling) < len(params),
            any_temperature=any(p.temperature != 1.0 for p in sampling),
            top_k_max=max(ks) if ks else None,
            top_p=self._rows([not p.greedy and p.top_p < 1.0 for p in params]),
            any_min_p=any(p.min_p > 0.0 for p in sampling),
            repetition=self._rows([p.repetition_penalty != 1.0 for p in params]),
            presence_frequency=self._rows([bool(p.presence_penalty or p.frequency_penalty) for p in params]),
            # Without seeded rows one draw covers the batch; with them only the unseeded rows need it.
            shared_noise=(
                _Rows(None)
                if not seeded
                else self._rows([not p.greedy and g is None for p, g in zip(params, self._generators, strict=True)])
            ),
            any_allowed=any(p.allowed_token_ids is not None for p in params),
            bias=bias,
            seeded=seeded,
            min_tokens=min_tokens,
            max_logprobs=max(wanted) if wanted else None,
            num_logprobs=tuple(p.logprobs for p in params),
        )
        return self._plan_cache

    def _rows(self, wanted: list[bool]) -> _Rows | None:
        rows = [row for row, w in enumerate(wanted) if w]
        if not rows:
            return None
        return _Rows(None if len(rows) == len(wanted) else _to_device(rows, torch.int64, self.device))

    def _min_tokens_index(self, plan: _Plan) -> tuple[list[int], list[int]]:
        """(rows, token ids) to forbid this step: stop and EOS ids of rows still short of min_tokens."""
        rows: list[int] = []
        cols: list[int] = []
        for row, minimum, ids in plan.min_tokens:
            if self._lengths[row] < minimum:
                rows.extend([row] * len(ids))
                cols.extend(ids)
        return rows, cols
