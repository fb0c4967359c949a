"""The transformers adapter's batched KV cache, checked against full forward passes of a tiny random Llama."""

import itertools
import json

import jsonschema
import pytest
import torch
from transformers import LlamaConfig, LlamaForCausalLM

from banister.engine import Engine, Feed, HFLanguageModel, ToyTokenizer
from banister.sampling import SamplingParams

TOKENIZER = ToyTokenizer()


pytestmark = pytest.mark.usefixtures("one_thread")  # tests/conftest.py


@pytest.fixture(scope="module")
def tiny():
    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=TOKENIZER.vocabulary.vocab_size, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=512, initializer_range=0.5,
    )  # fmt: skip
    return LlamaForCausalLM(config).eval()


def reference(model, tokens):
    with torch.inference_mode():
        return model(torch.tensor([tokens])).logits[0, -1].float()


def check(model, lm, feeds, histories):
    for feed, logits in zip(feeds, lm.forward(feeds)):
        histories.setdefault(feed.seq_id, []).extend(feed.token_ids)
        torch.testing.assert_close(logits[-1], reference(model, histories[feed.seq_id]), atol=2e-5, rtol=1e-5)


def test_the_batched_cache_matches_full_forward_passes(tiny):
    lm, seen = HFLanguageModel(tiny), {}
    check(tiny, lm, [Feed("a", [5, 6, 7, 8, 9])], seen)
    check(tiny, lm, [Feed("b", list(range(20, 29)))], seen)  # joins longer than a: a gets left padding
    check(tiny, lm, [Feed("a", [10]), Feed("b", [30, 31, 32])], seen)  # rows feed different counts
    lm.truncate("b", 2)
    del seen["b"][-2:]
    check(tiny, lm, [Feed("a", [11]), Feed("b", [40])], seen)
    lm.fork("a", "c")
    seen["c"] = list(seen["a"])
    check(tiny, lm, [Feed("a", [12]), Feed("b", [41]), Feed("c", [50, 51])], seen)
    lm.release("b")
    check(tiny, lm, [Feed("c", [52]), Feed("a", [13])], seen)
    assert lm.num_sequences == 2


def test_holes_are_squeezed_out_and_positions_survive(tiny):
    lm, seen = HFLanguageModel(tiny), {}
    check(tiny, lm, [Feed("a", [1, 2, 3]), Feed("b", [4, 5])], seen)
    widths = []
    for step in range(16):
        check(tiny, lm, [Feed("a", list(range(60, 68))), Feed("b", [step + 1])], seen)
        lm.truncate("a", 7)
        del seen["a"][-7:]
        widths.append(lm.cache_width)
    assert any(b < a for a, b in itertools.pairwise(widths))  # holes were squeezed out
    check(tiny, lm, [Feed("a", [9]), Feed("b", [9])], seen)


def test_all_logits_cover_every_fed_token(tiny):
    lm = HFLanguageModel(tiny)
    prompt = [3, 1, 4, 1, 5, 9, 2, 6]
    logits = lm.forward([Feed("a", prompt, all_logits=True)])[0]
    assert logits.shape == (len(prompt), tiny.config.vocab_size)
    torch.testing.assert_close(logits[3], reference(tiny, prompt[:4]), atol=2e-5, rtol=1e-5)


def test_the_engine_over_a_transformers_model(tiny):
    schema = {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"enum": ["x", "y"]}},
              "required": ["a", "b"], "additionalProperties": False}
    prompts = [f"user: case {i}\n" for i in range(8)]
    params = [SamplingParams(temperature=0.0, max_tokens=24, json_schema=schema if i % 2 else None) for i in range(8)]
    alone = [Engine(tiny, TOKENIZER).generate([p], params[i])[0] for i, p in enumerate(prompts)]
    batch = Engine(tiny, TOKENIZER).generate(prompts, params)
    assert [o.outputs[0].token_ids for o in alone] == [o.outputs[0].token_ids for o in batch]
    for out in batch[1::2]:
        if not out.outputs[0].incomplete:
            jsonschema.validate(json.loads(out.text), schema)
    assert sum(o.usage.forced_tokens for o in batch) > 0  # jump-forward ran, through truncation too
