"""The transformers logits processor (with model.generate) and the vLLM-shaped backend."""

import json

import jsonschema
import pytest
import torch
from transformers import LlamaConfig, LlamaForCausalLM, LogitsProcessorList

from banister import Compiler
from banister.engine import ToyTokenizer
from banister.errors import BanisterError
from banister.integrations.backend import BanisterBackend
from banister.integrations.transformers import GrammarLogitsProcessor

TOKENIZER = ToyTokenizer()
VOCAB = TOKENIZER.vocabulary
EOS = VOCAB.eos_token_ids[0]
SCHEMA = {
    "type": "object",
    "properties": {"name": {"type": "string", "maxLength": 8}, "tags": {"type": "array", "items": {"enum": ["a", "b"]}}},
    "required": ["name", "tags"],
    "additionalProperties": False,
}


pytestmark = pytest.mark.usefixtures("one_thread")  # tests/conftest.py


@pytest.fixture(scope="module")
def tiny():
    torch.manual_seed(1)
    config = LlamaConfig(
        vocab_size=VOCAB.vocab_size, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, initializer_range=0.5, eos_token_id=EOS, pad_token_id=EOS,
    )  # fmt: skip
    return LlamaForCausalLM(config).eval()


def answers(model, prompt_ids, processor, **generate_kwargs):
    out = model.generate(
        torch.tensor(prompt_ids), max_new_tokens=48, logits_processor=LogitsProcessorList([processor]),
        pad_token_id=EOS, eos_token_id=EOS, **generate_kwargs,
    )  # fmt: skip
    texts = []
    for row in out[:, len(prompt_ids[0]) :].tolist():
        ended = EOS in row
        texts.append((VOCAB.decode(row).decode(), ended))
    return texts


@pytest.mark.parametrize(
    "kwargs",
    [{"do_sample": False}, {"do_sample": True, "num_return_sequences": 4}, {"num_beams": 3, "num_return_sequences": 2}],
    ids=["greedy", "sampling", "beams"],
)
def test_logits_processor_constrains_generate(tiny, kwargs):
    torch.manual_seed(0)
    compiled = Compiler(VOCAB).json_schema(SCHEMA, whitespace="compact")
    prompts = [TOKENIZER.encode("user: a person\n"), TOKENIZER.encode("user: hi\n")]
    width = max(map(len, prompts))
    batch = [[EOS] * (width - len(p)) + p for p in prompts]  # left padding
    results = answers(tiny, batch, GrammarLogitsProcessor(compiled), attention_mask=torch.tensor(
        [[0] * (width - len(p)) + [1] * len(p) for p in prompts]), **kwargs)
    finished = [text for text, ended in results if ended]
    assert finished, results
    for text in finished:
        jsonschema.validate(json.loads(text), SCHEMA)


def test_one_grammar_per_prompt(tiny):
    compiler = Compiler(VOCAB)
    grammars = [compiler.regex("[0-9]{3}"), compiler.choice(["yes", "no"])]
    prompts = [TOKENIZER.encode("user: n\n"), TOKENIZER.encode("user: y\n")]
    results = answers(tiny, prompts, GrammarLogitsProcessor(grammars), do_sample=True, num_return_sequences=2)
    assert [len(t) == 3 and t.isdigit() for t, _ in results[:2]] == [True, True]
    assert all(t in ("yes", "no") for t, _ in results[2:])
    with pytest.raises(ValueError):
        GrammarLogitsProcessor([])


def test_backend_drives_a_request_like_vllm():
    backend = BanisterBackend(VOCAB)
    grammar = backend.compile_grammar("json", json.dumps(SCHEMA))
    bitmask = backend.allocate_token_bitmask(4)
    assert bitmask.shape == (4, (VOCAB.vocab_size + 31) // 32) and bitmask.dtype == torch.int32
    tokens = TOKENIZER.encode('{"name": "Ada", "tags": ["a"]}')
    assert grammar.validate_tokens(tokens + [EOS, EOS]) == tokens + [EOS]
    assert grammar.num_processed_tokens == 0
    assert grammar.accept_tokens("r1", tokens[:3])
    assert not grammar.accept_tokens("r1", [tokens[3], EOS])  # all or nothing: EOS mid-string is refused
    assert grammar.num_processed_tokens == 3 and grammar.accept_tokens("r1", tokens[3:])
    grammar.fill_bitmask(bitmask, 2)
    assert bitmask[2, EOS // 32] & (1 << (EOS % 32))
    assert grammar.is_terminated()  # complete and unable to grow
    assert grammar.accept_tokens("r1", [EOS]) and grammar.is_terminated()
    grammar.rollback(len(tokens) + 1)
    assert grammar.num_processed_tokens == 0 and grammar.find_jump_string() == '{'
    grammar.accept_tokens("r1", tokens[:1])
    assert grammar.find_jump_string() == 'name"'
    grammar.reset()
    assert grammar.num_processed_tokens == 0


@pytest.mark.parametrize(
    "kind, spec, text",
    [
        ("regex", "[a-z]+@[a-z]+[.]com", "bob@example.com"),
        ("choice", '["red", "green"]', "green"),
        ("json_object", "", '{"x": [1, 2]}'),
        ("grammar", 'root ::= "a" [0-9]+', "a42"),
    ],
)
def test_backend_request_types(kind, spec, text):
    grammar = BanisterBackend(VOCAB).compile_grammar(kind, spec)
    assert grammar.accept_tokens("r", TOKENIZER.encode(text) + [EOS]) and grammar.is_terminated()


def test_backend_errors():
    backend = BanisterBackend(VOCAB)
    with pytest.raises(BanisterError):
        backend.compile_grammar("choice", "red")
    with pytest.raises(ValueError):
        backend.compile_grammar("xml", "<a/>")
    with pytest.raises(ValueError):
        BanisterBackend(VOCAB, grammar_syntax="ebnf")
