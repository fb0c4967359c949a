"""Drive the toy model through banister's Matcher and Sampler, one answer at a time."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from banister import CompiledGrammar, Matcher, allocate_token_bitmask
from banister.engine.toy import ToyModel
from banister.sampling import Sampler, SamplingParams, SamplingState


@dataclass(frozen=True)
class Answer:
    """One generated answer: its text and whether it ended with EOS (False: cut off by the budget)."""

    text: str
    finished: bool


def first_step_logits(model: ToyModel, prompt: str = "") -> np.ndarray:
    """The model's logits for the first answer token after ``prompt``."""
    ids = model.tokenizer.encode(prompt)
    return model.logits_for(ids, len(ids))


def generate(
    model: ToyModel,
    grammar: CompiledGrammar | None,
    *,
    seed: int,
    prompt: str = "",
    max_tokens: int = 48,
    temperature: float = 1.0,
) -> Answer:
    """Sample one answer, masked by ``grammar`` when given (None: the model alone)."""
    tokenizer = model.tokenizer
    vocab = tokenizer.vocabulary
    eos = tokenizer.eos_token_id
    prompt_ids = tokenizer.encode(prompt)
    state = SamplingState(model.vocab_size, vocab.eos_token_ids)
    state.add_request(0, SamplingParams(temperature=temperature, seed=seed, max_tokens=max_tokens), prompt_ids)
    sampler = Sampler()
    matcher = Matcher(grammar) if grammar is not None else None
    bitmask = allocate_token_bitmask(1, model.vocab_size) if matcher is not None else None
    context, output = list(prompt_ids), bytearray()
    for _ in range(max_tokens):
        logits = torch.from_numpy(model.logits_for(context, len(prompt_ids))).float()[None]
        if matcher is not None:
            matcher.fill_next_token_bitmask(bitmask)
        token = int(sampler(logits, state, bitmask).token_ids[0])
        if token == eos:
            return Answer(output.decode(errors="replace"), True)
        if matcher is not None and not matcher.accept_token(token):
            raise RuntimeError(f"the sampler drew token {token}, which the mask forbids")
        state.append_tokens([token])
        context.append(token)
        output += vocab.token_bytes(token)
        if matcher is not None and matcher.is_terminated():
            return Answer(output.decode(errors="replace"), True)
    return Answer(output.decode(errors="replace"), False)


def generate_many(
    model: ToyModel,
    grammar: CompiledGrammar | None,
    n: int,
    *,
    seed: int = 0,
    prompt: str = "",
    max_tokens: int = 48,
) -> list[Answer]:
    """``n`` answers with seeds ``seed, seed + 1, ...``."""
    return [generate(model, grammar, seed=seed + i, prompt=prompt, max_tokens=max_tokens) for i in range(n)]
