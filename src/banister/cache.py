"""Warm starts: what is expensive and deterministic to rebuild, kept in a directory across processes.

A :class:`WarmCache` holds two kinds of entries under its root:

- ``tables/``: vocabulary-level tables, keyed by the vocabulary's content hash
  (:attr:`Vocabulary.fingerprint`): today the token trie, which costs about 0.6 s to build for
  Llama-3 and about 5 ms to read back.
- ``grammars/``: compiled specifications, keyed by a hash of (kind, source text or canonical JSON,
  options, DFA state limit, banister version, and a hash of the compiler's own source files, so a
  changed front end never reads an old entry). What is stored is the output of the front end: the
  Grammar IR of a JSON Schema, JSON mode or GBNF/Lark grammar (as JSON), and the fully built DFA of a
  regex or choice list. The token automaton is rebuilt from it through its public constructor, and the
  lazy runtime caches (masks, trie walks) are never written: they fill again as a process runs.
  Neither entry depends on the vocabulary, so one entry serves every vocabulary.

Every file is ``magic, JSON header line, payload``; the header names the format, the key and a
checksum of the payload. A file that is missing, truncated, corrupt, from another version or for
another key is ignored (and replaced on the next write): a cache never makes compilation fail. Writes
go to a temporary file in the same directory, then ``os.replace``, so readers never see half a file and
concurrent writers don't clash. When the entries exceed ``max_bytes``, the least recently used files
are deleted (reads refresh a file's modification time).

Regex DFAs are stored with :mod:`pickle`: only point a cache at a directory that you trust (one that
only you can write), as with any code cache.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import pickle
import tempfile
import threading
from collections.abc import Callable
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np

if TYPE_CHECKING:
    from banister.grammar.ir import Grammar
    from banister.regex import RegexDFA
    from banister.vocab.trie import TokenTrie
    from banister.vocab.vocabulary import Vocabulary

T = TypeVar("T")

FORMAT = 1
"""Version of the file layout; bump it when the payloads change shape."""

DEFAULT_MAX_BYTES = 256 * 1024 * 1024
"""Default size bound of a cache's entries (256 MiB)."""

MAX_GRAMMAR_ENTRY_BYTES = 4 * 1024 * 1024
"""Largest Grammar IR entry stored (measured on MaskBench: the median IR is about 40 kB and reads back in
about 2 ms against 23 ms for the front end; an 18 MB one reads back in 5.6 s against 6.6 s)."""

_MAGIC = b"banister-cache\n"


def default_cache_dir() -> Path:
    """``$BANISTER_CACHE_DIR``, else ``~/.cache/banister`` (the directory the named vocabularies use too)."""
    root = os.environ.get("BANISTER_CACHE_DIR")
    return Path(root) if root else Path.home() / ".cache" / "banister"


@cache
def code_hash() -> str:
    """A hash of the source files whose output the grammar entries hold (front ends, regex, IR).

    Part of every grammar key, so an edited compiler (same version number, new code) misses instead of
    reading what the old code produced.
    """
    import banister

    pkg = Path(banister.__file__).parent
    h = hashlib.blake2b(digest_size=8)
    h.update(banister.__version__.encode())
    files = sorted([*pkg.joinpath("grammar").glob("*.py"), *pkg.joinpath("regex").glob("*.py"),
                    pkg / "compiler.py", pkg / "cache.py"])
    for path in files:
        try:
            h.update(path.name.encode() + b"\0" + path.read_bytes())
        except OSError:
            h.update(path.name.encode() + b"\0?")
    return h.hexdigest()


class WarmCache:
    """A directory of warm-start entries (see the module docstring). Safe to share between threads
    and processes.

    Parameters
    ----------
    root:
        The directory (created on first write). ``None`` means :func:`default_cache_dir`.
    max_bytes:
        Size bound of the entries; past it the least recently used files are deleted. Default 256 MiB.
    """

    def __init__(self, root: str | os.PathLike[str] | None = None, *, max_bytes: int = DEFAULT_MAX_BYTES) -> None:
        if max_bytes < 0:
            raise ValueError(f"max_bytes must be >= 0, got {max_bytes}")
        self.root = Path(root) if root is not None else default_cache_dir()
        self.max_bytes = max_bytes
        self._lock = threading.Lock()
        self.stats = {"hits": 0, "misses": 0, "writes": 0, "rejected": 0}

    def __repr__(self) -> str:
        return f"WarmCache({str(self.root)!r}, max_bytes={self.max_bytes})"

    # -- vocabulary tables --------------------------------------------------------------------------------

    def trie(self, vocab: Vocabulary) -> TokenTrie:
        """The token trie of ``vocab``: read from the cache when a valid copy is there, else built and stored."""
        from banister.vocab.trie import TokenTrie

        path = self.root / "tables" / f"trie-{vocab.fingerprint}.bin"
        key = f"trie:{vocab.fingerprint}"
        def decode(payload: bytes) -> TokenTrie:
            with np.load(io.BytesIO(payload), allow_pickle=False) as arrays:
                return TokenTrie.from_arrays(dict(arrays))

        found = self._load(path, key, decode)
        if found is not None:
            return found
        trie = TokenTrie.build(vocab.tokens, vocab.special_token_ids)
        buf = io.BytesIO()
        np.savez(buf, **trie.to_arrays())  # type: ignore[arg-type]
        self._write(path, key, buf.getvalue())
        return trie

    # -- compiled grammars --------------------------------------------------------------------------------

    def grammar_key(self, kind: str, source: str, max_states: int) -> str:
        """The hash that names a grammar entry: kind, source (with options), limits and code version."""
        h = hashlib.blake2b(digest_size=16)
        for part in (kind, source, str(max_states), code_hash(), str(FORMAT)):
            h.update(part.encode("utf-8", "surrogatepass") + b"\0")
        return h.hexdigest()

    def load_grammar(self, key: str) -> Grammar | None:
        """The Grammar IR stored under ``key``, or None."""
        return self._load(self.root / "grammars" / f"ir-{key}.bin", key, lambda p: grammar_from_json(json.loads(p)))

    def store_grammar(self, key: str, grammar: Grammar) -> None:
        """Store ``grammar`` under ``key`` (best effort: an unwritable cache is skipped).

        Grammars whose IR exceeds :data:`MAX_GRAMMAR_ENTRY_BYTES` are not stored: reading a huge IR
        back costs about as much as the front end that made it.
        """
        data = json.dumps(grammar_to_json(grammar), separators=(",", ":"))  # ASCII: lone surrogates survive
        if len(data) > MAX_GRAMMAR_ENTRY_BYTES:
            return
        self._write(self.root / "grammars" / f"ir-{key}.bin", key, data.encode())

    def load_dfa(self, key: str) -> RegexDFA | None:
        """The regex DFA stored under ``key``, or None."""
        from banister.regex import RegexDFA

        def decode(payload: bytes) -> RegexDFA:
            dfa = pickle.loads(payload)  # the docs say: point the cache only at a directory you trust
            if not isinstance(dfa, RegexDFA):
                raise TypeError(f"not a RegexDFA: {type(dfa).__name__}")
            return dfa

        return self._load(self.root / "grammars" / f"dfa-{key}.bin", key, decode)

    def store_dfa(self, key: str, dfa: RegexDFA) -> None:
        """Store a (fully built) regex DFA under ``key``."""
        self._write(self.root / "grammars" / f"dfa-{key}.bin", key, pickle.dumps(dfa, pickle.HIGHEST_PROTOCOL))

    # -- housekeeping -------------------------------------------------------------------------------------

    def entries(self) -> list[Path]:
        """The entry files, oldest use first."""
        files: list[os.DirEntry[str]] = []
        for sub in ("tables", "grammars"):
            try:
                files.extend(e for e in os.scandir(self.root / sub) if e.is_file() and e.name.endswith(".bin"))
            except OSError:
                continue
        files.sort(key=lambda e: e.stat().st_mtime)
        return [Path(e.path) for e in files]

    def size(self) -> int:
        """Bytes held by the entries."""
        total = 0
        for path in self.entries():
            try:
                total += path.stat().st_size
            except OSError:
                pass
        return total

    def clear(self) -> None:
        """Delete every entry."""
        for path in self.entries():
            path.unlink(missing_ok=True)

    # -- the file format ----------------------------------------------------------------------------------

    def _read(self, path: Path, key: str) -> bytes | None:
        try:
            data = path.read_bytes()
        except OSError:
            self.stats["misses"] += 1
            return None
        payload = _unpack(data, key)
        if payload is None:
            self._reject(path)
            return None
        try:
            os.utime(path)  # least recently used goes first
        except OSError:
            pass
        self.stats["hits"] += 1
        return payload

    def _load(self, path: Path, key: str, decode: Callable[[bytes], T]) -> T | None:
        """The entry at ``path`` decoded, or None; an entry that fails to decode is a miss, never an
        error (checksummed, so only a format change or a foreign file lands there), and is deleted."""
        payload = self._read(path, key)
        if payload is None:
            return None
        try:
            return decode(payload)
        except Exception:  # noqa: BLE001
            self._reject(path)
            return None

    def _reject(self, path: Path) -> None:
        self.stats["rejected"] += 1
        self.stats["misses"] += 1
        try:
            path.unlink(missing_ok=True)
        except OSError:
            pass

    def _write(self, path: Path, key: str, payload: bytes) -> None:
        header = {"format": FORMAT, "key": key, "size": len(payload),
                  "checksum": hashlib.blake2b(payload, digest_size=16).hexdigest()}
        data = _MAGIC + json.dumps(header).encode() + b"\n" + payload
        if len(data) > self.max_bytes:
            return
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-", suffix=path.suffix + ".part")
            try:
                with os.fdopen(fd, "wb") as fh:
                    fh.write(data)
                os.replace(tmp, path)
            except BaseException:
                Path(tmp).unlink(missing_ok=True)
                raise
        except OSError:
            return
        self.stats["writes"] += 1
        self._evict()

    def _evict(self) -> None:
        with self._lock:
            sized = []
            for path in self.entries():
                try:
                    sized.append((path, path.stat().st_size))
                except OSError:
                    continue
            total = sum(s for _, s in sized)
            for path, s in sized:  # oldest use first
                if total <= self.max_bytes:
                    break
                try:
                    path.unlink()
                except OSError:
                    continue
                total -= s


def _unpack(data: bytes, key: str) -> bytes | None:
    """The payload of a cache file written for ``key``, or None when the file is not exactly that."""
    if not data.startswith(_MAGIC):
        return None
    end = data.find(b"\n", len(_MAGIC))
    if end < 0:
        return None
    try:
        header = json.loads(data[len(_MAGIC) : end])
        if not isinstance(header, dict) or header.get("format") != FORMAT or header.get("key") != key:
            return None
        payload = data[end + 1 :]
        if len(payload) != header.get("size"):
            return None
        if hashlib.blake2b(payload, digest_size=16).hexdigest() != header.get("checksum"):
            return None
        return payload
    except ValueError:
        return None


def grammar_to_json(grammar: Grammar) -> dict[str, Any]:
    """A Grammar as plain JSON: a lexeme is ``[pattern]``, a rule reference its name (ValueError for one
    with pending rules: not whole)."""
    from banister.grammar.ir import Lexeme

    if grammar.pending:
        raise ValueError("the grammar has pending rules (compiled with defer): it is not whole")

    rules = {
        name: [[[sym.pattern] if isinstance(sym, Lexeme) else sym.name for sym in alt] for alt in alts]
        for name, alts in grammar.rules.items()
    }
    return {"start": grammar.start, "rules": rules, "trimmed": grammar.trimmed,
            "distinct_items": grammar.distinct_items, "free_text_triggers": list(grammar.free_text_triggers)}


def grammar_from_json(data: dict[str, Any]) -> Grammar:
    """The inverse of :func:`grammar_to_json` (the Grammar constructor checks the references)."""
    from banister.grammar.ir import Grammar, Lexeme, Ref

    def symbol(s: Any) -> Lexeme | Ref:
        if isinstance(s, str):
            return Ref(s)
        if isinstance(s, list) and len(s) == 1 and isinstance(s[0], str):
            return Lexeme(s[0])
        raise ValueError(f"not a grammar symbol: {s!r}")

    rules = {name: tuple(tuple(symbol(s) for s in alt) for alt in alts) for name, alts in data["rules"].items()}
    triggers = data.get("free_text_triggers", [])
    if not isinstance(triggers, list) or not all(isinstance(t, str) for t in triggers):
        raise ValueError(f"not a list of triggers: {triggers!r}")
    return Grammar(rules, data["start"], trimmed=data.get("trimmed") is True,
                   distinct_items=data.get("distinct_items") is True, free_text_triggers=tuple(triggers))
