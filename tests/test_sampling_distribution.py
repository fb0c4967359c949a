"""The draw matches softmax of the filtered logits, row by row in a mixed batch (chi-square tests).

Every test is seeded, so it passes or fails deterministically. Each row's chi-square test is run at
significance ALPHA = 0.001 (Bonferroni over the rows of a test keeps the family-wise rate near 1%).
The expected distributions come from an oracle: the penalties written out by hand, the bitmask
unpacked by hand and transformers' warpers (when installed; otherwise the hand-written filters below).
"""

import dataclasses
import math

import numpy as np
import pytest
import torch

from banister.sampling import Sampler, SamplingParams, SamplingState

ALPHA = 1e-3
VOCAB = 12


def chi2_sf(x: float, df: int) -> float:
    """P(X >= x) for a chi-square variable with ``df`` degrees of freedom (regularised gamma series)."""
    a, z = df / 2.0, x / 2.0
    if z <= 0:
        return 1.0
    term = total = 1.0 / a
    n = 0
    while term > total * 1e-15:
        n += 1
        term *= z / (a + n)
        total += term
    lower = math.exp(a * math.log(z) - z - math.lgamma(a)) * total
    return max(0.0, 1.0 - lower)


def test_chi2_sf_against_the_textbook_table():
    # Critical values at 0.001 from standard tables.
    for df, critical in [(1, 10.828), (2, 13.816), (5, 20.515), (10, 29.588), (11, 31.264), (20, 45.315)]:
        assert chi2_sf(critical, df) == pytest.approx(1e-3, rel=2e-3)
    assert chi2_sf(0.0, 3) == 1.0


def chi2_pvalue(observed: np.ndarray, probs: np.ndarray) -> float:
    """Goodness of fit; bins expected to hold fewer than 5 draws are pooled. Impossible tokens must not occur."""
    total = observed.sum()
    assert observed[probs == 0].sum() == 0, "drew a token of probability 0"
    expected = probs * total
    big = expected >= 5
    small = (expected > 0) & ~big
    obs = list(observed[big]) + ([observed[small].sum()] if small.any() else [])
    exp = list(expected[big]) + ([expected[small].sum()] if small.any() else [])
    obs_a, exp_a = np.array(obs, dtype=float), np.array(exp)
    if len(obs_a) < 2:
        return 1.0
    stat = float(((obs_a - exp_a) ** 2 / exp_a).sum())
    return chi2_sf(stat, len(obs_a) - 1)


def _filters(params: SamplingParams, row: np.ndarray) -> np.ndarray:
    """temperature -> top-k -> top-p -> min-p, by transformers when installed, else by the obvious loops."""
    try:
        from transformers.generation import logits_process as tlp
    except ImportError:
        tlp = None
    if tlp is not None:
        ids = torch.zeros((1, 1), dtype=torch.long)
        scores = torch.from_numpy(row).unsqueeze(0)
        scores = tlp.TemperatureLogitsWarper(params.temperature)(ids, scores)
        if params.top_k:
            scores = tlp.TopKLogitsWarper(params.top_k)(ids, scores)
        if params.top_p < 1:
            scores = tlp.TopPLogitsWarper(params.top_p)(ids, scores)
        if params.min_p:
            scores = tlp.MinPLogitsWarper(params.min_p)(ids, scores)
        return scores[0].numpy()
    x = row / params.temperature
    if params.top_k:
        x = np.where(x < np.sort(x)[::-1][params.top_k - 1], -np.inf, x)
    if params.top_p < 1:
        p = np.exp(x - x.max())
        p /= p.sum()
        order = np.argsort(-x, kind="stable")
        before = np.cumsum(p[order]) - p[order]
        drop = np.zeros_like(x, dtype=bool)
        drop[order] = before >= params.top_p
        x = np.where(drop, -np.inf, x)
    if params.min_p:
        p = np.exp(x - x.max())
        x = np.where(p < params.min_p, -np.inf, x)
    return x


def _softmax(x: np.ndarray) -> np.ndarray:
    p = np.exp(x - x.max())
    return p / p.sum()


def _pack(allowed: np.ndarray) -> np.ndarray:
    words = np.zeros((allowed.shape[0], (allowed.shape[1] + 31) // 32), dtype=np.int64)
    for r, t in zip(*np.nonzero(allowed), strict=True):
        words[r, t // 32] |= 1 << (t % 32)
    return words.astype(np.uint32).view(np.int32)


# (params, prompt, output, allowed-by-bitmask or None)
CONFIGS = [
    (SamplingParams(), [], [], None),
    (SamplingParams(temperature=0.5), [], [], None),
    (SamplingParams(temperature=1.75, top_k=4), [], [], None),
    (SamplingParams(top_p=0.75), [], [], None),
    (SamplingParams(min_p=0.25, temperature=1.25), [], [], None),
    (SamplingParams(top_k=7, top_p=0.875, min_p=0.0625, temperature=0.75), [], [], None),
    (
        SamplingParams(presence_penalty=0.5, frequency_penalty=0.25, repetition_penalty=1.5),
        [0, 5, 7],
        [5, 5, 2, 9],
        None,
    ),
    (SamplingParams(logit_bias={3: 2.0, 11: -1.0}, temperature=0.8), [], [], [1, 3, 4, 6, 8, 9, 11]),
    (SamplingParams(allowed_token_ids=[0, 2, 3, 4, 10], top_p=0.9375), [], [], [0, 2, 4, 5, 10]),
    (SamplingParams(seed=123, temperature=1.5, min_p=0.05), [], [], [2, 3, 4, 5, 6, 7]),
    (SamplingParams(min_tokens=2, stop_token_ids=[4], temperature=0.9), [], [7], None),
]
EOS = 0


def _expected(logits: np.ndarray, params: SamplingParams, prompt, output, allowed) -> np.ndarray:
    x = logits.astype(np.float64).copy()
    if params.allowed_token_ids is not None:
        keep = np.zeros(VOCAB, dtype=bool)
        keep[list(params.allowed_token_ids)] = True
        x[~keep] = -np.inf
    if len(output) < params.min_tokens:
        x[[*params.stop_token_ids, EOS]] = -np.inf
    for token, bias in (params.logit_bias or {}).items():
        x[token] += bias
    if allowed is not None:
        keep = np.zeros(VOCAB, dtype=bool)
        keep[allowed] = True
        x[~keep] = -np.inf
    seen = np.zeros(VOCAB, dtype=bool)
    seen[prompt + output] = True
    rp = params.repetition_penalty
    x = np.where(seen, np.where(x < 0, x * rp, x / rp), x)
    counts = np.bincount(np.array(output, dtype=int), minlength=VOCAB)
    x = x - counts * params.frequency_penalty - (counts > 0) * params.presence_penalty
    return _softmax(_filters(params, x))


def test_draw_matches_filtered_softmax_per_row_in_a_mixed_batch():
    rng = np.random.default_rng(11)
    logits_row = rng.normal(0, 1.5, size=VOCAB).astype(np.float32)
    reps, steps = 400, 25
    state = SamplingState(VOCAB, eos_token_ids=[EOS])
    allowed = np.ones((len(CONFIGS) * reps, VOCAB), dtype=bool)
    kinds = []
    for rep in range(reps):
        for k, (params, prompt, output, allow) in enumerate(CONFIGS):
            seeded = params if params.seed is None else dataclasses.replace(params, seed=params.seed + rep)
            row = state.add_request((rep, k), seeded, prompt, output)
            kinds.append(k)
            if allow is not None:
                allowed[row] = False
                allowed[row, allow] = True
    bitmask = _pack(allowed)
    kinds = np.array(kinds)
    logits = torch.from_numpy(np.tile(logits_row, (len(kinds), 1)))
    sampler = Sampler(generator=torch.Generator().manual_seed(5))
    counts = np.zeros((len(CONFIGS), VOCAB), dtype=np.int64)
    for _ in range(steps):
        tokens = sampler(logits, state, bitmask).token_ids.numpy()
        assert allowed[np.arange(len(tokens)), tokens].all(), "a token forbidden by the bitmask was drawn"
        np.add.at(counts, (kinds, tokens), 1)
    for k, (params, prompt, output, allow) in enumerate(CONFIGS):
        probs = _expected(logits_row, params, prompt, output, allow)
        p = chi2_pvalue(counts[k], probs)
        assert p > ALPHA, f"CONFIGS[{k}]: chi-square p = {p:.2e}"


def test_bitmask_never_lets_a_forbidden_token_through_and_renormalises():
    vocab = 70
    rng = np.random.default_rng(21)
    rows = 400
    allowed = rng.random((rows, vocab)) < 0.15
    allowed[:, 5] = True  # token 5 is allowed everywhere; with the rest it carries the test's mass
    logits = torch.from_numpy(rng.normal(0, 2, size=(1, vocab)).astype(np.float32)).repeat(rows, 1)
    state = SamplingState(vocab)
    for r in range(rows):
        state.add_request(r, SamplingParams(temperature=1.0, top_p=0.99 if r % 2 else 1.0))
    sampler = Sampler(generator=torch.Generator().manual_seed(0))
    bitmask = _pack(allowed)
    # A single fixed allowed set for the distribution part: rows 0.. share mask row 0's set.
    shared = np.tile(allowed[:1], (rows, 1))
    shared_mask = _pack(shared)
    counts = np.zeros(vocab, dtype=np.int64)
    for _ in range(10):
        tokens = sampler(logits, state, bitmask).token_ids.numpy()
        assert allowed[np.arange(rows), tokens].all()
        tokens = sampler(logits, state, shared_mask).token_ids.numpy()
        assert shared[0, tokens].all()
        np.add.at(counts, tokens[::2], 1)  # the top_p = 1 rows
    raw = logits[0].double().numpy()
    probs = np.where(shared[0], np.exp(raw - raw.max()), 0.0)
    probs /= probs.sum()
    assert chi2_pvalue(counts, probs) > ALPHA
