"""Benchmark of the sampler (not a test): ``python -m banister.sampling.bench [--device cuda]``.

Reports the sampler's time per step at several batch sizes on a Llama-3-sized vocabulary with mixed
settings, and the cost per step of keeping penalty counts persistent (``append_tokens``) versus
rebuilding them from each request's token list.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

import numpy as np
import torch

from banister.sampling.params import SamplingParams
from banister.sampling.sampler import Sampler
from banister.sampling.state import SamplingState

MIXED = [
    SamplingParams(),
    SamplingParams(temperature=0),
    SamplingParams(temperature=0.7, top_p=0.9),
    SamplingParams(temperature=0.8, top_k=40),
    SamplingParams(min_p=0.05, seed=1),
    SamplingParams(presence_penalty=0.5, frequency_penalty=0.3, repetition_penalty=1.1, logprobs=5),
    SamplingParams(top_k=50, top_p=0.95, min_p=0.02, seed=2),
    SamplingParams(logit_bias={10: 2.0}, temperature=0.9),
]


def _timed(fn: Callable[[], object], device: torch.device, repeats: int) -> float:
    """Median seconds of ``fn`` (synchronising the device around each call)."""
    fn()
    times = []
    for _ in range(repeats):
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        start = time.perf_counter()
        fn()
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        times.append(time.perf_counter() - start)
    return float(np.median(times))


def bench_sampler(vocab: int, batches: list[int], device: torch.device, repeats: int) -> None:
    """Print the sampler's time per step for each batch size."""
    sampler = Sampler()
    for batch in batches:
        state = SamplingState(vocab, [0], device=device, capacity=batch)
        for r in range(batch):
            state.add_request(r, MIXED[r % len(MIXED)], prompt_token_ids=[1, 2, 3])
        logits = torch.randn(batch, vocab, device=device)
        seconds = _timed(lambda: sampler(logits, state).token_ids.cpu(), device, repeats)  # noqa: B023
        print(f"sampler  batch {batch:4d}  vocab {vocab}: {seconds * 1e3:8.2f} ms/step")


def bench_counts(vocab: int, batch: int, length: int, device: torch.device, repeats: int) -> None:
    """Print the per-step cost of persistent counts versus rebuilding them from token lists."""
    rng = np.random.default_rng(0)
    outputs = rng.integers(0, vocab, size=(batch, length)).tolist()
    state = SamplingState(vocab, device=device, capacity=batch)
    for r in range(batch):
        state.add_request(r, SamplingParams(presence_penalty=0.5), output_token_ids=outputs[r])
    step = torch.as_tensor(rng.integers(0, vocab, size=batch), device=device)

    def rebuild() -> torch.Tensor:
        ids = torch.as_tensor(outputs, device=device)
        counts = torch.zeros(batch, vocab, dtype=torch.int32, device=device)
        return counts.scatter_add_(1, ids, torch.ones_like(ids, dtype=torch.int32))

    persistent = _timed(lambda: state.append_tokens(step), device, repeats)
    rebuilt = _timed(rebuild, device, repeats)
    print(
        f"counts   batch {batch} x {length} tokens, vocab {vocab}: persistent {persistent * 1e3:.3f} ms/step, "
        f"rebuilt {rebuilt * 1e3:.2f} ms/step ({rebuilt / persistent:.0f}x)"
    )


def main(argv: list[str] | None = None) -> None:
    """Run both benchmarks (arguments as ``--help`` lists them)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--vocab", type=int, default=128_256)
    parser.add_argument("--batches", type=int, nargs="+", default=[1, 64, 256])
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args(argv)
    device = torch.device(args.device)
    bench_sampler(args.vocab, args.batches, device, args.repeats)
    bench_counts(args.vocab, 256, 1000, device, args.repeats)


if __name__ == "__main__":
    main()
