"""Beam search against exhaustive search on tiny models whose best sequences brute force can list."""

import itertools
import math
import zlib

import pytest
import torch

from banister.sampling import beam_search

PROMPT = [7, 7]


class HistoryModel:
    """Logits a fixed pseudo-random function of the whole history; counts its calls."""

    def __init__(self, vocab: int, seed: int) -> None:
        self.vocab, self.seed, self.calls = vocab, seed, 0

    def row(self, history: list[int]) -> torch.Tensor:
        key = zlib.crc32(bytes(history) + bytes([self.seed]))
        return torch.randn(self.vocab, generator=torch.Generator().manual_seed(key), dtype=torch.float64) * 2

    def __call__(self, sequences: list[list[int]]) -> torch.Tensor:
        self.calls += 1
        return torch.stack([self.row(s) for s in sequences])


class PositionModel(HistoryModel):
    """Logits that depend on the position only: the best sequences extend the best prefixes."""

    def row(self, history: list[int]) -> torch.Tensor:
        return super().row([len(history)])


def exhaustive(model, vocab, max_tokens, eos, length_penalty, width):
    """Every sequence the search could return, ranked by length-normalised score."""
    done = []
    frontier = [((), 0.0)]
    while frontier:
        tokens, logprob = frontier.pop()
        lp = torch.log_softmax(model.row(PROMPT + list(tokens)), dim=-1).tolist()
        for t in range(vocab):
            seq, total = (*tokens, t), logprob + lp[t]
            if t in eos or len(seq) == max_tokens:
                done.append((total / len(seq) ** length_penalty, seq, total))
            else:
                frontier.append((seq, total))
    done.sort(key=lambda d: -d[0])
    return done[:width]


def _check(model, vocab, max_tokens, eos, length_penalty, width):
    beams = beam_search(
        model, PROMPT, beam_width=width, max_tokens=max_tokens, eos_token_ids=eos, length_penalty=length_penalty
    )
    expected = exhaustive(model, vocab, max_tokens, eos, length_penalty, width)
    assert [b.token_ids for b in beams] == [seq for _, seq, _ in expected]
    for beam, (score, _, total) in zip(beams, expected, strict=True):
        assert beam.score == pytest.approx(score, abs=1e-9)
        assert beam.cumulative_logprob == pytest.approx(total, abs=1e-9)
        assert beam.ended_with_eos == (beam.token_ids[-1] in eos)
    assert model.calls <= max_tokens


# (vocab, max_tokens, eos): beam search is exact when the width covers every live prefix, that is
# width >= (vocab - len(eos)) ** (max_tokens - 1); each case below is run at every such width in 1..4.
EXACT_CASES = [(2, 6, (0,)), (3, 2, (0,)), (3, 3, (0,)), (5, 2, (0, 1)), (4, 1, ())]


@pytest.mark.parametrize("width", [1, 2, 3, 4])
@pytest.mark.parametrize("length_penalty", [0.0, 1.0, 2.0, -0.5])
def test_beam_search_equals_exhaustive_search_when_the_width_covers_the_tree(width, length_penalty):
    ran = 0
    for vocab, max_tokens, eos in EXACT_CASES:
        if width < (vocab - len(eos)) ** (max_tokens - 1):
            continue
        for seed in range(6):
            _check(HistoryModel(vocab, seed), vocab, max_tokens, eos, length_penalty, width)
            ran += 1
    assert ran >= 12


@pytest.mark.parametrize("width", [1, 2, 3, 4])
def test_beam_search_equals_exhaustive_search_on_a_position_only_model(width):
    # Without EOS every sequence has the same length and the top-width sequences only extend
    # top-width prefixes, so any width is exact.
    for seed in range(8):
        _check(PositionModel(4, seed), 4, 3, (), 1.0, width)


def test_wider_beams_find_what_greedy_misses():
    table = {
        (): [0.6, 0.4],
        (0,): [0.5, 0.5],
        (1,): [0.95, 0.05],
    }

    def step(sequences):
        return torch.log(torch.tensor([table[tuple(s[len(PROMPT) :])] for s in sequences]))

    greedy = beam_search(step, PROMPT, beam_width=1, max_tokens=2, length_penalty=0.0)
    wide = beam_search(step, PROMPT, beam_width=2, max_tokens=2, length_penalty=0.0)
    assert greedy[0].token_ids == (0, 0) and wide[0].token_ids == (1, 0)
    assert wide[0].cumulative_logprob == pytest.approx(math.log(0.4 * 0.95))
    assert [b.token_ids for b in wide] == [(1, 0), (0, 0)]


def test_early_stop_when_no_live_beam_can_win():
    # EOS is almost certain at the first step: both finished beams beat anything still live.
    calls = []

    def step(sequences):
        calls.append(len(sequences))
        logits = torch.full((len(sequences), 4), -30.0, dtype=torch.float64)
        logits[:, 0] = 0.0
        logits[:, 1] = 0.0
        return logits

    beams = beam_search(step, PROMPT, beam_width=2, max_tokens=10, eos_token_ids=[0, 1], length_penalty=1.0)
    assert {b.token_ids for b in beams} == {(0,), (1,)} and calls == [1]


def test_arguments_are_checked():
    model = HistoryModel(3, 0)
    for kwargs, name in [
        ({"beam_width": 0, "max_tokens": 2}, "beam_width"),
        ({"beam_width": 2, "max_tokens": 0}, "max_tokens"),
        ({"beam_width": 2, "max_tokens": 2, "length_penalty": math.nan}, "length_penalty"),
    ]:
        with pytest.raises(ValueError, match=name):
            beam_search(model, PROMPT, **kwargs)
    with pytest.raises(ValueError, match="shape"):
        beam_search(lambda seqs: torch.zeros(5, 3), PROMPT, beam_width=2, max_tokens=2)


def test_exhaustive_helper_lists_every_sequence():
    model = HistoryModel(3, 1)
    everything = exhaustive(model, 3, 3, (0,), 0.0, 100)
    sequences = {seq for _, seq, _ in everything}
    expected = {(0,)} | {(a, 0) for a in (1, 2)} | set(itertools.product((1, 2), (1, 2), (0, 1, 2)))
    assert sequences == expected
