"""The sampler's filters and penalties against transformers' logits processors (an oracle we did not write).

transformers' tie rules: top-k keeps every token whose logit is >= the k-th largest; min-p keeps
tokens whose probability is >= min_p times the top one; top-p drops a token when the ascending
cumulative probability up to it is <= 1 - top_p (ties there depend on sort order, so top-p is
checked on tie-free logits). transformers applies temperature, top-k, top-p, min-p in that order.
"""

import numpy as np
import pytest
import torch

from banister.sampling import Sampler, SamplingParams, SamplingState

tlp = pytest.importorskip("transformers.generation.logits_process")

VOCAB = 300
ROWS = 48


def _f32(x: float) -> float:
    """Values exactly representable in float32, so both sides see the same setting."""
    return float(np.float32(x))


def _random_params(rng: np.random.Generator) -> SamplingParams:
    kind = rng.integers(6)
    temperature = _f32(rng.choice([1.0, rng.uniform(0.3, 2.0)]))
    top_k = int(rng.choice([0, rng.integers(1, 40), rng.integers(1, VOCAB + 50)])) if kind in (1, 4, 5) else 0
    top_p = _f32(rng.uniform(0.05, 0.99)) if kind in (2, 4, 5) else 1.0
    min_p = _f32(rng.uniform(0.0, 0.6)) if kind in (3, 5) else 0.0
    return SamplingParams(temperature=temperature, top_k=top_k, top_p=top_p, min_p=min_p)


def _hf_chain(params: SamplingParams, row: torch.Tensor) -> torch.Tensor:
    scores = row.unsqueeze(0).clone()
    ids = torch.zeros((1, 1), dtype=torch.long)
    if params.temperature != 1.0:
        scores = tlp.TemperatureLogitsWarper(params.temperature)(ids, scores)
    if params.top_k:
        scores = tlp.TopKLogitsWarper(params.top_k)(ids, scores)
    if params.top_p < 1.0:
        scores = tlp.TopPLogitsWarper(params.top_p)(ids, scores)
    if params.min_p:
        scores = tlp.MinPLogitsWarper(params.min_p)(ids, scores)
    return scores[0]


def _assert_same_filtered(ours: torch.Tensor, theirs: torch.Tensor) -> None:
    assert torch.equal(torch.isinf(ours), torch.isinf(theirs)), "different tokens kept"
    finite = ~torch.isinf(theirs)
    torch.testing.assert_close(ours[finite], theirs[finite], rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
@pytest.mark.parametrize("seed", range(4))
def test_mixed_batch_matches_transformers_warpers(seed, dtype):
    rng = np.random.default_rng(seed)
    params = [_random_params(rng) for _ in range(ROWS)]
    state = SamplingState(VOCAB)
    for i, p in enumerate(params):
        state.add_request(i, p)
    logits = torch.from_numpy(rng.normal(0, 3, size=(ROWS, VOCAB))).to(dtype)
    ours = Sampler().filtered_logits(logits, state)
    assert ours.dtype == dtype
    for r, p in enumerate(params):
        _assert_same_filtered(ours[r], _hf_chain(p, logits[r]))


@pytest.mark.parametrize("seed", range(3))
def test_top_k_and_min_p_tie_rules_match_transformers(seed):
    # Logits on a coarse grid: many ties, including at the k-th value.
    rng = np.random.default_rng(100 + seed)
    logits = torch.from_numpy(rng.integers(-6, 6, size=(ROWS, VOCAB)) * 0.5).float()
    params = []
    for _ in range(ROWS):
        if rng.random() < 0.5:
            params.append(SamplingParams(top_k=int(rng.integers(1, 60)), temperature=_f32(rng.uniform(0.5, 1.5))))
        else:
            params.append(SamplingParams(min_p=_f32(rng.uniform(0.01, 1.0)), top_k=int(rng.integers(0, 30))))
    state = SamplingState(VOCAB)
    for i, p in enumerate(params):
        state.add_request(i, p)
    ours = Sampler().filtered_logits(logits, state)
    for r, p in enumerate(params):
        _assert_same_filtered(ours[r], _hf_chain(p, logits[r]))
        assert not torch.isinf(ours[r, logits[r].argmax()]), "the top token always survives"


def test_top_k_alone_takes_the_partial_path_and_matches():
    rng = np.random.default_rng(7)
    logits = torch.from_numpy(rng.integers(-4, 4, size=(ROWS, VOCAB)) * 1.0).float()
    params = [SamplingParams(top_k=int(k)) for k in rng.integers(0, 50, size=ROWS)]
    state = SamplingState(VOCAB)
    for i, p in enumerate(params):
        state.add_request(i, p)
    ours = Sampler().filtered_logits(logits, state)
    for r, p in enumerate(params):
        _assert_same_filtered(ours[r], _hf_chain(p, logits[r]))


@pytest.mark.parametrize("seed", range(3))
def test_repetition_penalty_matches_transformers_over_prompt_and_output(seed):
    rng = np.random.default_rng(200 + seed)
    state = SamplingState(VOCAB)
    histories = []
    penalties = [_f32(x) for x in rng.uniform(0.5, 2.0, size=ROWS)]
    for r in range(ROWS):
        prompt = rng.integers(0, VOCAB, size=rng.integers(0, 30)).tolist()
        output = rng.integers(0, VOCAB, size=rng.integers(0, 10)).tolist()
        state.add_request(r, SamplingParams(repetition_penalty=penalties[r], temperature=0), prompt, output)
        histories.append(prompt + output)
    new = rng.integers(0, VOCAB, size=ROWS)
    state.append_tokens(torch.from_numpy(new))
    logits = torch.from_numpy(rng.normal(0, 3, size=(ROWS, VOCAB))).float()
    ours = Sampler().filtered_logits(logits, state)
    for r in range(ROWS):
        ids = torch.tensor([histories[r] + [int(new[r])]])
        theirs = tlp.RepetitionPenaltyLogitsProcessor(penalties[r])(ids, logits[r : r + 1].clone())[0]
        torch.testing.assert_close(ours[r], theirs, rtol=1e-6, atol=1e-6)


def test_presence_and_frequency_follow_the_openai_formula():
    rng = np.random.default_rng(3)
    state = SamplingState(VOCAB)
    counts = np.zeros((ROWS, VOCAB))
    presence = [_f32(x) for x in rng.uniform(-2, 2, size=ROWS)]
    frequency = [_f32(x) for x in rng.uniform(-2, 2, size=ROWS)]
    for r in range(ROWS):
        prompt = rng.integers(0, VOCAB, size=20).tolist()  # the prompt does not count
        output = rng.integers(0, 40, size=rng.integers(0, 30)).tolist()
        state.add_request(
            r, SamplingParams(presence_penalty=presence[r], frequency_penalty=frequency[r]), prompt, output
        )
        np.add.at(counts[r], output, 1)
    for _ in range(5):
        step = rng.integers(0, 40, size=ROWS)
        state.append_tokens(torch.from_numpy(step))
        counts[np.arange(ROWS), step] += 1
    logits = rng.normal(0, 3, size=(ROWS, VOCAB))
    ours = Sampler().filtered_logits(torch.from_numpy(logits), state).numpy()
    pres = np.array(presence)[:, None]
    freq = np.array(frequency)[:, None]
    expected = logits - counts * freq - (counts > 0) * pres
    np.testing.assert_allclose(ours, expected, rtol=1e-12, atol=1e-12)


def test_boundary_ties_top_p_mass_and_min_p_one():
    # Four equal top tokens (probability 1/4 each, exact in binary): top_p = 0.5 keeps exactly two,
    # as transformers does; which two is order-dependent there, ours keeps the lower ids.
    logits = torch.tensor([[0.0, 5.0, 5.0, 5.0, 5.0, 0.0, 0.0, 0.0]]).double()
    logits[0, [0, 5, 6, 7]] = float("-inf")
    state = SamplingState(8)
    state.add_request("p", SamplingParams(top_p=0.5))
    ours = Sampler().filtered_logits(logits, state)[0]
    theirs = _hf_chain(state.params("p"), logits[0])
    assert int((~torch.isinf(ours)).sum()) == int((~torch.isinf(theirs)).sum()) == 2
    assert (~torch.isinf(ours)).nonzero().flatten().tolist() == [1, 2]
    # min_p = 1 keeps every token tied with the top one and nothing else.
    state = SamplingState(8)
    state.add_request("m", SamplingParams(min_p=1.0))
    logits = torch.tensor([[1.0, 3.0, 2.0, 3.0, 3.0, 0.0, -1.0, 2.9]])
    ours = Sampler().filtered_logits(logits, state)[0]
    _assert_same_filtered(ours, _hf_chain(state.params("m"), logits[0]))
    assert (~torch.isinf(ours)).nonzero().flatten().tolist() == [1, 3, 4]
