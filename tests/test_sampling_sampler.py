"""The batched sampler and its persistent state: seeds, greedy, processors, logprobs, continuous batching."""

import numpy as np
import pytest
import torch

from banister.sampling import (
    Sampler,
    SamplingParams,
    SamplingState,
    compute_logprobs,
    expand_n,
    prompt_logprobs,
)

VOCAB = 64
EOS = 0


class ToyModel:
    """Logits depend on the last token only: a fixed random table, deterministic across batches."""

    def __init__(self, vocab: int = VOCAB, seed: int = 0) -> None:
        self.table = torch.randn(vocab, vocab, generator=torch.Generator().manual_seed(seed)) * 2

    def logits(self, histories: list[list[int]]) -> torch.Tensor:
        return self.table[[h[-1] for h in histories]]


def _mixed_params(rng: np.random.Generator, i: int) -> SamplingParams:
    kind = i % 8
    seed = int(rng.integers(1000)) if rng.random() < 0.4 else None
    return [
        SamplingParams(seed=seed),
        SamplingParams(temperature=0),
        SamplingParams(temperature=0.6, top_k=5, seed=seed),
        SamplingParams(top_p=0.8, presence_penalty=1.0, frequency_penalty=0.5, seed=seed),
        SamplingParams(min_p=0.1, repetition_penalty=1.3, logprobs=3),
        SamplingParams(logit_bias={3: 5.0}, allowed_token_ids=list(range(1, 40)), seed=seed),
        SamplingParams(min_tokens=5, stop_token_ids=[7], temperature=1.3),
        SamplingParams(temperature=0, repetition_penalty=2.0, logprobs=5),
    ][kind]


def _run(model, state, histories, sampler, steps, bitmask_for=None, churn=None):
    """Decode ``steps`` steps; ``churn(step, state, histories)`` may add or remove rows between steps."""
    for step in range(steps):
        ids = state.request_ids
        logits = model.logits([histories[r] for r in ids])
        bitmask = None if bitmask_for is None else bitmask_for(ids)
        tokens = sampler(logits, state, bitmask).token_ids
        state.append_tokens(tokens)
        for r, t in zip(ids, tokens.tolist(), strict=True):
            histories[r].append(t)
        if churn is not None:
            churn(step, state, histories)


def test_seeded_request_draws_the_same_tokens_alone_and_in_a_batch_of_32():
    model = ToyModel()
    target = SamplingParams(temperature=0.8, top_k=20, top_p=0.9, min_p=0.02, presence_penalty=0.3, seed=77)
    prompt = [5, 9, 11]

    alone = SamplingState(VOCAB, [EOS])
    alone.add_request("S", target, prompt)
    solo = {"S": list(prompt)}
    _run(model, alone, solo, Sampler(), 30)

    rng = np.random.default_rng(1)
    batch = SamplingState(VOCAB, [EOS], capacity=4)
    histories: dict[object, list[int]] = {}
    for i in range(20):
        other_prompt = [int(rng.integers(1, VOCAB))]
        batch.add_request(i, _mixed_params(rng, i), other_prompt)
        histories[i] = list(other_prompt)
    batch.add_request("twin", target, prompt)  # same seed, same prompt: same tokens
    batch.add_request("S", target, prompt)
    histories["S"], histories["twin"] = list(prompt), list(prompt)
    for i in range(20, 30):
        batch.add_request(i, _mixed_params(rng, i), [1])
        histories[i] = [1]
    assert len(batch) == 32
    words = (VOCAB + 31) // 32

    def bitmask_for(ids):
        mask = np.full((len(ids), words), -1, dtype=np.int32)
        for row, r in enumerate(ids):
            if isinstance(r, int) and r % 3 == 0:
                mask[row, 0] = 0x0F0F0F0F  # other requests run under a grammar
        return mask

    next_id = [100]

    def churn(step, state, hist):
        if step == 6:  # make S the last row, so that the next removal moves it
            for r in state.request_ids[state.row("S") + 1 :]:
                state.remove_request(r)
        if step % 4 == 1 or step == 6:
            victim = state.request_ids[0] if state.request_ids[0] not in ("S", "twin") else state.request_ids[1]
            state.remove_request(victim)
            state.add_request(next_id[0], _mixed_params(rng, next_id[0]), [2, 3])
            hist[next_id[0]] = [2, 3]
            next_id[0] += 1

    start_row = batch.row("S")
    _run(model, batch, histories, Sampler(), 30, bitmask_for, churn)
    assert batch.row("S") != start_row, "the request should have moved rows"
    assert histories["S"] == solo["S"]
    assert histories["twin"] == solo["S"]


def test_child_zero_of_n_samples_like_the_single_request():
    model = ToyModel(seed=3)
    parent = SamplingParams(n=3, seed=10, temperature=1.2)
    single = SamplingState(VOCAB)
    single.add_request("one", SamplingParams(seed=10, temperature=1.2), [4])
    hist_single = {"one": [4]}
    _run(model, single, hist_single, Sampler(), 12)
    state = SamplingState(VOCAB)
    hist = {}
    for i, child in enumerate(expand_n(parent)):
        state.add_request(i, child, [4])
        hist[i] = [4]
    _run(model, state, hist, Sampler(), 12)
    assert hist[0] == hist_single["one"]
    assert hist[1] != hist[0] and hist[2] != hist[1]


def test_greedy_rows_take_the_argmax_first_index_among_ties():
    rng = np.random.default_rng(2)
    logits = torch.from_numpy(rng.integers(-3, 3, size=(40, VOCAB)).astype(np.float32))
    state = SamplingState(VOCAB)
    for r in range(40):
        state.add_request(r, SamplingParams(temperature=0.0 if r % 2 == 0 else 1.0, top_k=3))
    tokens = Sampler()(logits, state).token_ids
    expected = logits.argmax(dim=-1)
    assert torch.equal(tokens[::2], expected[::2])
    for r in range(0, 40, 2):
        assert tokens[r] == int(np.flatnonzero(logits[r].numpy() == logits[r].max().item())[0])
    # Every row greedy takes the shortcut and gives the same answer.
    all_greedy = SamplingState(VOCAB)
    for r in range(40):
        all_greedy.add_request(r, SamplingParams(temperature=0))
    assert torch.equal(Sampler()(logits, all_greedy).token_ids, expected)


def test_processors_allowed_ids_bias_and_min_tokens():
    state = SamplingState(VOCAB, [EOS])
    state.add_request("allowed", SamplingParams(temperature=0, allowed_token_ids=[10, 20]))
    state.add_request("bias", SamplingParams(logit_bias={33: 100.0}))
    state.add_request("min", SamplingParams(temperature=0, min_tokens=2, stop_token_ids=[8]))
    state.add_request("min-ignore", SamplingParams(temperature=0, min_tokens=2, ignore_eos=True))
    logits = torch.zeros(4, VOCAB)
    logits[:, EOS] = 50.0
    logits[:, 8] = 40.0
    logits[0, 20] = 1.0
    sampler = Sampler()
    out = sampler(logits, state).token_ids.tolist()
    assert out[0] == 20 and out[1] == 33
    assert out[2] not in (EOS, 8)  # both held back until two tokens exist
    assert out[3] == EOS  # ignore_eos: EOS is an ordinary token, not masked
    state.append_tokens(torch.tensor(out))
    assert sampler(logits, state).token_ids.tolist()[2] not in (EOS, 8)
    state.append_tokens(torch.tensor(out))
    assert sampler(logits, state).token_ids.tolist()[2] == EOS


def test_a_row_with_every_token_forbidden_gives_minus_one_and_is_skipped_by_the_counts():
    state = SamplingState(40)
    state.add_request("a", SamplingParams(presence_penalty=1.0))
    state.add_request("b", SamplingParams(temperature=0, repetition_penalty=1.5))
    bitmask = np.zeros((2, 2), dtype=np.int32)
    bitmask[1] = -1
    out = Sampler()(torch.randn(2, 40), state, bitmask)
    assert out.token_ids[0].item() == -1 and out.token_ids[1].item() >= 0
    state.append_tokens(out.token_ids)
    assert state.output_counts is not None and state.output_counts[0].sum().item() == 0
    assert state.seen is not None and state.seen[0].sum().item() == 0


def test_bitmask_rows_apply_to_the_listed_logits_rows():
    state = SamplingState(40)
    for r in range(3):
        state.add_request(r, SamplingParams(temperature=0))
    logits = torch.zeros(3, 40)
    logits[:, 7] = 10.0
    only_3 = np.zeros((1, 2), dtype=np.int32)
    only_3[0, 0] = 1 << 3
    assert Sampler()(logits, state, only_3, bitmask_rows=[1]).token_ids.tolist() == [7, 3, 7]


def test_logits_are_not_modified_and_bad_shapes_name_logits():
    state = SamplingState(VOCAB)
    state.add_request("a", SamplingParams(temperature=0.5, top_p=0.5, presence_penalty=1.0))
    logits = torch.randn(1, VOCAB)
    before = logits.clone()
    Sampler()(logits, state)
    assert torch.equal(logits, before)
    with pytest.raises(ValueError, match="logits"):
        Sampler()(torch.randn(2, VOCAB), state)
    with pytest.raises(ValueError, match="logits"):
        Sampler()(torch.randn(1, VOCAB + 1), state)


def test_logprobs_are_log_softmax_of_the_raw_logits_with_tie_aware_ranks():
    rng = np.random.default_rng(4)
    rows = 24
    raw = torch.from_numpy(rng.integers(-4, 4, size=(rows, VOCAB)).astype(np.float32))
    state = SamplingState(VOCAB)
    asked = []
    for r in range(rows):
        n = [None, 0, 1, 5, 20][r % 5]
        asked.append(n)
        state.add_request(
            r,
            SamplingParams(
                logprobs=n, temperature=[0.0, 0.7, 1.5][r % 3], logit_bias={1: 3.0}, presence_penalty=0.5, top_k=10
            ),
        )
    out = Sampler()(raw, state)
    per_row = out.logprobs_per_row()
    reference = torch.log_softmax(raw.double(), dim=-1).numpy()
    for r, (n, got) in enumerate(zip(asked, per_row, strict=True)):
        if n is None:
            assert got is None
            continue
        token = out.token_ids[r].item()
        assert got.token_id == token
        assert got.logprob == pytest.approx(reference[r, token], abs=1e-5)
        assert got.rank == 1 + int((raw[r].numpy() > raw[r, token].item()).sum())
        assert len(got.top) == n
        values = [v for _, v in got.top]
        np.testing.assert_allclose(values, np.sort(reference[r])[::-1][:n], atol=1e-5)
        for tid, v in got.top:
            assert v == pytest.approx(reference[r, tid], abs=1e-5)


def test_compute_logprobs_ranks_with_explicit_ties():
    logits = torch.tensor([[2.0, 5.0, 5.0, 1.0, 5.0, 2.0]])
    for token, rank in [(1, 1), (2, 1), (4, 1), (0, 4), (5, 4), (3, 6)]:
        got = compute_logprobs(logits, torch.tensor([token]), 2).to_lists(2)[0]
        assert got is not None and got.rank == rank
        assert {t for t, _ in got.top} <= {1, 2, 4}


def test_prompt_logprobs_score_every_prompt_token_after_the_first():
    rng = np.random.default_rng(5)
    prompt = rng.integers(0, VOCAB, size=9).tolist()
    logits = torch.from_numpy(rng.normal(size=(9, VOCAB))).float()
    result = prompt_logprobs(logits, prompt, 4).to_lists(4)
    assert len(result) == 8
    reference = torch.log_softmax(logits.double(), dim=-1).numpy()
    for i, entry in enumerate(result):
        assert entry is not None and entry.token_id == prompt[i + 1]
        assert entry.logprob == pytest.approx(reference[i, prompt[i + 1]], abs=1e-5)
        assert entry.rank == 1 + int((reference[i] > reference[i, prompt[i + 1]]).sum())
        assert [t for t, _ in entry.top] == np.argsort(-reference[i])[:4].tolist()
    with pytest.raises(ValueError, match="logits"):
        prompt_logprobs(logits[:5], prompt, 1)


def test_persistent_counts_match_rebuilt_ones_under_continuous_batching():
    rng = np.random.default_rng(6)
    state = SamplingState(VOCAB, capacity=2)
    prompts: dict[int, list[int]] = {}
    outputs: dict[int, list[int]] = {}
    next_id = 0
    for _ in range(60):
        if len(state) < 12 and rng.random() < 0.5:
            p = SamplingParams(
                presence_penalty=float(rng.choice([0.0, 0.5])), repetition_penalty=float(rng.choice([1.0, 1.2]))
            )
            prompts[next_id] = rng.integers(0, VOCAB, size=rng.integers(0, 6)).tolist()
            outputs[next_id] = rng.integers(0, VOCAB, size=rng.integers(0, 3)).tolist()
            state.add_request(next_id, p, prompts[next_id], outputs[next_id])
            next_id += 1
        if len(state) > 1 and rng.random() < 0.3:
            state.remove_request(state.request_ids[int(rng.integers(len(state)))])
        tokens = rng.integers(0, VOCAB, size=len(state))
        state.append_tokens(torch.from_numpy(tokens))
        for r, t in zip(state.request_ids, tokens.tolist(), strict=True):
            outputs[r].append(t)
    assert state.output_counts is not None and state.seen is not None
    for row, r in enumerate(state.request_ids):
        assert state.output_length(r) == len(outputs[r])
        np.testing.assert_array_equal(
            state.output_counts[row].numpy(), np.bincount(outputs[r], minlength=VOCAB).astype(np.int32)
        )
        seen = np.zeros(VOCAB, dtype=bool)
        seen[prompts[r] + outputs[r]] = True
        np.testing.assert_array_equal(state.seen[row].numpy(), seen)


def test_no_host_sync_the_whole_pass_runs_on_the_meta_device():
    # Meta tensors hold no data: anything that reads values on the host (.item(), .tolist(), bool())
    # raises, so a full pass here proves the sampler never waits for the device.
    state = SamplingState(VOCAB, [EOS], device="meta")
    state.add_request("a", SamplingParams(temperature=0.7, top_k=8, top_p=0.9, min_p=0.1, logprobs=4), [1, 2])
    state.add_request("b", SamplingParams(temperature=0, presence_penalty=0.5, repetition_penalty=1.2), [3])
    state.add_request("c", SamplingParams(logit_bias={4: 1.0}, allowed_token_ids=[4, 5], min_tokens=3))
    state.add_request("d", SamplingParams(top_k=3))
    logits = torch.empty(4, VOCAB, device="meta")
    out = Sampler()(logits, state, np.full((4, 2), -1, dtype=np.int32))
    assert out.token_ids.device.type == "meta" and out.logprobs is not None
    state.append_tokens(out.token_ids)
    state.remove_request("a")
    out = Sampler()(torch.empty(3, VOCAB, device="meta"), state)
    assert out.token_ids.shape == (3,)
