"""Readers that turn tokenizer files and objects into a :class:`Vocabulary`.

Each reader takes the byte string of every token from the tokenizer's own description (the decoder
section of a tokenizer.json, the piece types of a SentencePiece model, the token types and model kind of
a GGUF file), never by guessing from the token text. The :class:`Vocabulary` classmethods call these.
"""

from __future__ import annotations

import base64
import binascii
import importlib
import json
import os
import re
from collections.abc import Callable, Iterable, Mapping
from functools import cache
from pathlib import Path
from types import ModuleType
from typing import Any

from banister.errors import VocabularyError
from banister.vocab.vocabulary import Vocabulary

PathLike = str | os.PathLike[str]

EOS_NAMES: tuple[str, ...] = ("</s>", "<|endoftext|>", "<|im_end|>", "<|eot_id|>", "<|end_of_text|>", "<eos>")
"""Special-token names taken as EOS when no EOS ids are given (every one present counts)."""

_SPACE_MARKER = "\u2581"
_BYTE_PIECE = re.compile(r"<0x([0-9A-Fa-f]{2})>")

# GGUF token types (llama.cpp's llama_token_type).
_GGUF_NORMAL, _GGUF_USER_DEFINED, _GGUF_BYTE = 1, 4, 6


@cache
def _byte_level_table() -> dict[str, int]:
    """GPT-2's byte-level alphabet inverted: the printable character standing for each byte -> byte.

    Printable Latin-1 bytes stand for themselves; the others (controls, space, 0x7F-0xA0, 0xAD) are
    given the characters from U+0100 up, in byte order.
    """
    printable = [*range(0x21, 0x7F), *range(0xA1, 0xAD), *range(0xAE, 0x100)]
    table = {chr(b): b for b in printable}
    rest = sorted(set(range(256)) - set(printable))
    table.update((chr(0x100 + k), b) for k, b in enumerate(rest))
    return table


def byte_level_bytes(text: str) -> bytes:
    """The bytes a byte-level BPE token stands for.

    Text with a character outside the byte-level alphabet is kept as its UTF-8, as the Hugging Face
    ByteLevel decoder does (added tokens such as ``"<think>"`` or ``"a b"``).
    """
    table = _byte_level_table()
    try:
        return bytes([table[c] for c in text])
    except KeyError:
        return text.encode()


def _byte_piece(piece: str) -> bytes | None:
    """The byte of a ``<0xXX>`` byte-fallback piece, or None for any other piece."""
    m = _BYTE_PIECE.fullmatch(piece)
    return bytes([int(m[1], 16)]) if m else None


def _require(module: str, pip_name: str, what: str) -> ModuleType:
    """Import an optional dependency, or say which pip package provides it."""
    try:
        return importlib.import_module(module)
    except ImportError:
        raise VocabularyError(f"{what} needs the `{pip_name}` package: pip install {pip_name}") from None


def _read_bytes(path: PathLike, what: str) -> bytes:
    try:
        return Path(path).read_bytes()
    except FileNotFoundError:
        raise VocabularyError(f"{what} not found: {path}") from None
    except OSError as e:
        raise VocabularyError(f"cannot read {what} {path}: {e.strerror or e}") from None


def _build(
    pieces: Mapping[int, bytes],
    special: Iterable[int],
    eos: Iterable[int],
    vocab_size: int | None,
    source: str,
) -> Vocabulary:
    """Lay the pieces out by id; ids no piece claims become empty special tokens."""
    if not pieces:
        raise VocabularyError(f"{source}: no tokens")
    if min(pieces) < 0:
        raise VocabularyError(f"{source}: negative token id {min(pieces)}")
    tokens = [b""] * (max(pieces) + 1)
    for i, piece in pieces.items():
        tokens[i] = piece
    holes = [i for i in range(len(tokens)) if i not in pieces]
    try:
        return Vocabulary(tokens, eos, [*special, *holes], vocab_size)
    except VocabularyError as e:
        raise VocabularyError(f"{source}: {e}") from None


def _resolve_eos(eos_token_ids: Iterable[int] | None, specials: Mapping[str, int], source: str) -> list[int]:
    """The EOS ids given, or else every special token named like an EOS (see ``EOS_NAMES``)."""
    if eos_token_ids is not None:
        return [int(i) for i in eos_token_ids]
    found = [specials[name] for name in EOS_NAMES if name in specials]
    if not found:
        raise VocabularyError(
            f"{source}: no eos_token_ids given and no special token is named like an EOS "
            f"({', '.join(EOS_NAMES)}); pass eos_token_ids"
        )
    return found


# --- tiktoken -----------------------------------------------------------------------------------


def load_tiktoken(
    path: PathLike,
    *,
    special_tokens: Mapping[str, int] | None = None,
    eos_token_ids: Iterable[int] | None = None,
    vocab_size: int | None = None,
) -> Vocabulary:
    """Read a tiktoken BPE file: one ``<base64 token> <rank>`` line per token, the rank being its id.

    ``special_tokens`` (text -> id) are added as special tokens; their ids must not be ranks. EOS:
    ``eos_token_ids``, or else the special tokens named like an EOS (``EOS_NAMES``).
    """
    pieces: dict[int, bytes] = {}
    for lineno, line in enumerate(_read_bytes(path, "tiktoken file").splitlines(), 1):
        if not line.strip():
            continue
        fields = line.split()
        try:
            if len(fields) != 2:
                raise ValueError
            token, rank = base64.b64decode(fields[0], validate=True), int(fields[1])
        except (ValueError, binascii.Error):
            raise VocabularyError(
                f"{path}:{lineno}: expected '<base64 token> <rank>', got {line[:80].decode(errors='replace')!r}"
            ) from None
        if rank < 0 or rank in pieces:
            raise VocabularyError(f"{path}:{lineno}: rank {rank} is negative or used twice")
        pieces[rank] = token
    specials = dict(special_tokens or {})
    for text, i in specials.items():
        if i in pieces:
            raise VocabularyError(f"{path}: special token {text!r} has id {i}, already the rank of a token")
        pieces[i] = text.encode()
    eos = _resolve_eos(eos_token_ids, specials, str(path))
    return _build(pieces, specials.values(), eos, vocab_size, str(path))


# --- SentencePiece ------------------------------------------------------------------------------


def _sentencepiece_pieces(sp: Any) -> tuple[dict[int, bytes], set[int]]:
    """Bytes of every piece of a loaded SentencePieceProcessor, and the special (control, unknown,
    unused) ids. Byte pieces ``<0xXX>`` are that byte; U+2581 stands for a space."""
    pieces: dict[int, bytes] = {}
    special: set[int] = set()
    for i in range(sp.get_piece_size()):
        piece = sp.id_to_piece(i)
        if sp.is_control(i) or sp.is_unknown(i) or sp.is_unused(i):
            special.add(i)
            pieces[i] = piece.encode()
        elif sp.is_byte(i):
            byte = _byte_piece(piece)
            if byte is None:
                raise VocabularyError(f"SentencePiece byte piece {i} is {piece!r}, not of the form <0xXX>")
            pieces[i] = byte
        else:
            pieces[i] = piece.replace(_SPACE_MARKER, " ").encode()
    return pieces, special


def load_sentencepiece(path: PathLike, *, eos_token_ids: Iterable[int] | None = None) -> Vocabulary:
    """Read a SentencePiece ``.model`` file with the ``sentencepiece`` package.

    Control, unknown and unused pieces are special. EOS: ``eos_token_ids``, or else the model's eos id.
    """
    spm = _require("sentencepiece", "sentencepiece", "reading a SentencePiece model")
    data = _read_bytes(path, "SentencePiece model")
    sp = spm.SentencePieceProcessor()
    try:
        sp.LoadFromSerializedProto(data)
    except (RuntimeError, OSError) as e:
        raise VocabularyError(f"{path}: not a SentencePiece model ({e})") from None
    pieces, special = _sentencepiece_pieces(sp)
    if eos_token_ids is None:
        if sp.eos_id() < 0:
            raise VocabularyError(f"{path}: the model defines no eos piece; pass eos_token_ids")
        eos_token_ids = [sp.eos_id()]
    return _build(pieces, special, eos_token_ids, None, str(path))


# --- tokenizer.json (Hugging Face tokenizers) -------------------------------------------------


def _decoder_steps(spec: Any, source: str) -> list[Mapping[str, Any]]:
    """The decoder section as a flat list of steps (nested Sequence decoders unrolled)."""
    if spec is None:
        return []
    if not isinstance(spec, Mapping):
        raise VocabularyError(f"{source}: field 'decoder' must be an object")
    if spec.get("type") == "Sequence":
        return [step for inner in spec.get("decoders") or [] for step in _decoder_steps(inner, source)]
    return [spec]


def _token_decoder(spec: Any, source: str) -> Callable[[str], bytes]:
    """Per-token text -> bytes, following the tokenizer.json decoder steps in order.

    Replace/Metaspace rewrite the text (U+2581 -> space), ByteFallback turns ``<0xXX>`` into its byte,
    ByteLevel inverts GPT-2's byte alphabet. Steps from Fuse on act on the joined text, not on one
    token (Strip removes the sequence's leading space), so they are skipped.
    """
    ops: list[tuple[str, str, str]] = []
    for step in _decoder_steps(spec, source):
        kind = step.get("type")
        if kind == "Fuse":
            break
        if kind in ("ByteLevel", "ByteFallback"):
            ops.append((kind, "", ""))
        elif kind == "Metaspace":
            ops.append(("Replace", step.get("replacement") or _SPACE_MARKER, " "))
        elif kind == "Replace" and isinstance(step.get("pattern"), Mapping) and "String" in step["pattern"]:
            ops.append(("Replace", step["pattern"]["String"], step.get("content") or ""))
        else:
            raise VocabularyError(
                f"{source}: decoder step {kind!r} is not supported (supported: ByteLevel, ByteFallback, "
                "Metaspace, Replace with a string pattern, Fuse, and anything after Fuse)"
            )
    if not ops:
        raise VocabularyError(f"{source}: the 'decoder' section is missing or empty, so token bytes are unknown")

    def decode(text: str) -> bytes:
        for kind, old, new in ops:
            if kind == "Replace":
                text = text.replace(old, new)
            elif kind == "ByteFallback":
                byte = _byte_piece(text)
                if byte is not None:
                    return byte
            else:
                return byte_level_bytes(text)
        return text.encode()

    return decode


def _checked_id(value: Any, where: str) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise VocabularyError(f"{where} must be a non-negative integer, got {value!r}")
    return value


def _tokenizer_json_pieces(data: Mapping[str, Any], source: str) -> tuple[dict[int, bytes], set[int], dict[str, int]]:
    """Pieces, special ids and special names (text -> id) of a parsed tokenizer.json."""
    model = data.get("model")
    if not isinstance(model, Mapping):
        raise VocabularyError(f"{source}: field 'model' is missing")
    kind, vocab = model.get("type"), model.get("vocab")
    special: set[int] = set()
    if kind == "BPE" and isinstance(vocab, Mapping):
        entries = [(text, _checked_id(i, f"{source}: model.vocab[{text!r}]")) for text, i in vocab.items()]
        if isinstance(model.get("unk_token"), str) and model["unk_token"] in vocab:
            special.add(vocab[model["unk_token"]])
    elif kind == "Unigram" and isinstance(vocab, list):
        try:
            entries = [(str(entry[0]), i) for i, entry in enumerate(vocab)]
        except (TypeError, IndexError, KeyError):
            raise VocabularyError(f"{source}: model.vocab must be a list of [piece, score] pairs") from None
        if isinstance(model.get("unk_id"), int):
            special.add(model["unk_id"])
    else:
        raise VocabularyError(
            f"{source}: model.type {kind!r} with this model.vocab is not supported "
            "(supported: BPE with a token -> id object, Unigram with a list of [piece, score])"
        )
    decode = _token_decoder(data.get("decoder"), source)
    pieces = {i: decode(text) for text, i in entries}
    names: dict[str, int] = {}
    added = data.get("added_tokens") or []
    if not isinstance(added, list):
        raise VocabularyError(f"{source}: field 'added_tokens' must be a list")
    for k, token in enumerate(added):
        where = f"{source}: added_tokens[{k}]"
        if not isinstance(token, Mapping) or not isinstance(token.get("content"), str):
            raise VocabularyError(f"{where} must be an object with a string 'content'")
        i, content = _checked_id(token.get("id"), f"{where}.id"), token["content"]
        if token.get("special"):
            pieces[i] = content.encode()
            special.add(i)
            names[content] = i
        else:
            pieces[i] = decode(content)
            special.discard(i)
    return pieces, special, names


def load_tokenizer_json(
    source: PathLike | Mapping[str, Any],
    *,
    eos_token_ids: Iterable[int] | None = None,
    vocab_size: int | None = None,
) -> Vocabulary:
    """Read a Hugging Face tokenizer.json (a path, or the parsed object).

    Supports model.type BPE and Unigram; the decoder section says how a token maps to bytes (see
    :func:`_token_decoder`). Special added tokens are special; other added tokens go through the decoder
    as the tokenizer would emit them. EOS: ``eos_token_ids``, or else every special token named like an
    EOS (``EOS_NAMES``: ``</s>``, ``<|endoftext|>``, ``<|im_end|>``, ``<|eot_id|>``, ``<|end_of_text|>``,
    ``<eos>``).
    """
    if isinstance(source, Mapping):
        data, name = source, "tokenizer.json object"
    else:
        name = str(source)
        try:
            data = json.loads(_read_bytes(source, "tokenizer.json file"))
        except ValueError as e:
            raise VocabularyError(f"{name}: not valid JSON ({e})") from None
        if not isinstance(data, dict):
            raise VocabularyError(f"{name}: expected a JSON object at the top level")
    pieces, special, names = _tokenizer_json_pieces(data, name)
    return _build(pieces, special, _resolve_eos(eos_token_ids, names, name), vocab_size, name)


# --- transformers tokenizer objects -----------------------------------------------------------


def load_hf_tokenizer(
    tokenizer: Any,
    *,
    eos_token_ids: Iterable[int] | None = None,
    vocab_size: int | None = None,
) -> Vocabulary:
    """Read a ``transformers`` tokenizer object.

    A fast tokenizer (one with ``backend_tokenizer``) is read through its tokenizer.json; a SentencePiece
    one (with ``sp_model``) through its pieces plus ``added_tokens_decoder``. EOS: the tokenizer's
    ``eos_token_id`` followed by ``eos_token_ids`` (e.g. a generation config's extra stop ids).
    """
    name = type(tokenizer).__name__
    backend, sp = getattr(tokenizer, "backend_tokenizer", None), getattr(tokenizer, "sp_model", None)
    if backend is not None:
        pieces, special, _ = _tokenizer_json_pieces(json.loads(backend.to_str()), name)
    elif sp is not None:
        pieces, special = _sentencepiece_pieces(sp)
        for i, added in tokenizer.added_tokens_decoder.items():
            pieces[i] = added.content.encode()
            (special.add if added.special else special.discard)(i)
    else:
        raise VocabularyError(
            f"{name}: unsupported tokenizer; expected a fast tokenizer (backend_tokenizer) "
            "or a SentencePiece one (sp_model)"
        )
    eos_id = getattr(tokenizer, "eos_token_id", None)
    eos = [] if eos_id is None else [int(eos_id)]
    eos += [int(i) for i in eos_token_ids or ()]
    if not eos:
        raise VocabularyError(f"{name}: the tokenizer has no eos_token_id; pass eos_token_ids")
    return _build(pieces, special, eos, vocab_size, name)


# --- GGUF -------------------------------------------------------------------------------------


def load_gguf(path: PathLike) -> Vocabulary:
    """Read the vocabulary stored in a GGUF file (read with the ``gguf`` package's GGUFReader).

    ``tokenizer.ggml.model`` "gpt2" means byte-level BPE text, "llama" SentencePiece text (U+2581 for a
    space). By ``tokenizer.ggml.token_type``: normal tokens map as their model says, byte tokens
    ``<0xXX>`` are that byte, user-defined tokens are their text as UTF-8, and every other type
    (control, unknown, unused) is special. EOS: ``tokenizer.ggml.eos_token_id``, plus
    ``tokenizer.ggml.eot_token_id`` when present.
    """
    gguf = _require("gguf", "gguf", "reading a GGUF file")
    if not Path(path).is_file():
        raise VocabularyError(f"GGUF file not found: {path}")
    try:
        fields = gguf.GGUFReader(path).fields
    except (ValueError, OSError) as e:
        raise VocabularyError(f"{path}: not a readable GGUF file ({e})") from None
    keys = gguf.Keys.Tokenizer

    def field(key: str) -> Any:
        if key not in fields:
            raise VocabularyError(f"{path}: GGUF field {key} is missing")
        return fields[key]

    model = field(keys.MODEL).contents()
    if model not in ("gpt2", "llama"):
        raise VocabularyError(
            f"{path}: GGUF field {keys.MODEL} is {model!r}; supported: 'gpt2' (byte-level BPE), 'llama' (SentencePiece)"
        )
    listing = field(keys.LIST)
    try:
        texts = [bytes(listing.parts[k]).decode() for k in listing.data]
    except UnicodeDecodeError:
        raise VocabularyError(f"{path}: GGUF field {keys.LIST} holds text that is not UTF-8") from None
    types = fields[keys.TOKEN_TYPE].contents() if keys.TOKEN_TYPE in fields else [_GGUF_NORMAL] * len(texts)
    if len(types) != len(texts):
        raise VocabularyError(f"{path}: {len(texts)} tokens but {len(types)} entries in {keys.TOKEN_TYPE}")
    normal = byte_level_bytes if model == "gpt2" else (lambda t: t.replace(_SPACE_MARKER, " ").encode())
    pieces: dict[int, bytes] = {}
    special: set[int] = set()
    for i, (text, kind) in enumerate(zip(texts, types)):
        if kind == _GGUF_NORMAL:
            pieces[i] = normal(text)
        elif kind == _GGUF_USER_DEFINED:
            pieces[i] = text.encode()
        elif kind == _GGUF_BYTE:
            byte = _byte_piece(text)
            if byte is None:
                raise VocabularyError(f"{path}: byte token {i} is {text!r}, not of the form <0xXX>")
            pieces[i] = byte
        else:
            pieces[i] = text.encode()
            special.add(i)
    eos = [int(field(keys.EOS_ID).contents())]
    if keys.EOT_ID in fields:
        eos.append(int(fields[keys.EOT_ID].contents()))
    return _build(pieces, special, eos, None, str(path))
