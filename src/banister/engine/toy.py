"""The lesson's toy model: a pretend language model that mostly copies a reference answer.

It runs through the same engine, Matcher and Sampler as real models (it implements
:class:`~banister.engine.model.LanguageModel`), so it shows what constraints do without a real
model: it tends to open with chatter ("Sure! Here is the answer: "), prefers longer pieces, and
has noise on every logit, so sampling sometimes wanders off and has to find its way back.

Its logits after the output so far ``O``: every token that continues the text it is aiming for
gets ``copy_strength + length_bonus * (len(token) - 1)``, every other token 0, and each logit gets
Gaussian noise. It aims for ``chatter + reference`` while ``O`` is a prefix of it (the chatter
path scores ``chatter_bias`` higher), else for ``reference``: where ``O`` has left the reference,
it continues after the longest end of ``O`` found in the reference. Once the aim is written out,
EOS scores ``copy_strength``. The noise is drawn from a generator seeded by ``seed`` and the whole
context, so the same context always gives the same logits, alone or in any batch.
"""

from __future__ import annotations

import zlib
from collections.abc import Hashable, Mapping, Sequence
from typing import Any

import numpy as np
import torch

from banister.engine.model import EngineError, Feed
from banister.vocab import Vocabulary

DEFAULT_REFERENCE = '{"name": "Ada", "age": 42}'
DEFAULT_CHATTER = "Sure! Here is the answer: "
DEFAULT_PIECES = (
    '{"', '"}', '": ', '": "', '", "', ', "', '"', "name", "age", "Ada", "42", "Sure", "! ", " Here",
    " is", " the", " answer", ": ", "true", "false", "null", "[", "]", "user: ", "assistant: ",
)  # fmt: skip
EOS_TEXT = "</s>"


class ToyTokenizer:
    """The toy vocabulary: printable ASCII, newline and tab, whole pieces, and EOS (the last id).

    Text is encoded greedily, longest piece first; a character outside the vocabulary raises
    :class:`~banister.engine.model.EngineError`.

    Parameters
    ----------
    pieces:
        Multi-character tokens (default :data:`DEFAULT_PIECES`).
    """

    def __init__(self, pieces: Sequence[str] = DEFAULT_PIECES) -> None:
        singles = [chr(c) for c in range(32, 127)] + ["\n", "\t"]
        texts = list(dict.fromkeys([*singles, *pieces]))
        tokens = [t.encode() for t in texts] + [EOS_TEXT.encode()]
        self.vocabulary = Vocabulary(tokens, eos_token_ids=[len(tokens) - 1])
        self._ids = {t: i for i, t in enumerate(tokens[:-1])}
        self._longest = max(len(t) for t in tokens[:-1])

    @property
    def eos_token_id(self) -> int:
        return self.vocabulary.eos_token_ids[0]

    def encode(self, text: str) -> list[int]:
        """Greedy longest-match ids of ``text``."""
        data, ids, i = text.encode(), [], 0
        while i < len(data):
            for size in range(min(self._longest, len(data) - i), 0, -1):
                token = self._ids.get(data[i : i + size])
                if token is not None:
                    ids.append(token)
                    i += size
                    break
            else:
                char = data[i:].decode(errors="replace")[:1]
                raise EngineError(f"the toy vocabulary has no token for {char!r} (offset {i} of {text!r})")
        return ids

    def encode_prompt(self, text: str) -> list[int]:
        """Same as :meth:`encode` (the toy has no BOS)."""
        return self.encode(text)

    def chat_prompt(self, messages: Sequence[Mapping[str, Any]], **template_kwargs: Any) -> list[int]:
        """``role: content`` lines, then ``assistant: `` (``template_kwargs`` are ignored)."""
        lines = "".join(f"{m['role']}: {m['content']}\n" for m in messages)
        return self.encode(lines + "assistant: ")


class ToyModel:
    """A pretend causal LM over a :class:`ToyTokenizer` vocabulary (see the module docstring).

    Parameters
    ----------
    reference:
        The answer it copies (default :data:`DEFAULT_REFERENCE`).
    chatter:
        What it likes to say first (default :data:`DEFAULT_CHATTER`; ``""`` for none).
    seed:
        Seeds the noise (default 0).
    noise:
        Standard deviation of the noise on every logit (default 1.0).
    copy_strength:
        Logit of a token that continues the aim (default 8.0).
    length_bonus:
        Extra logit per additional byte of such a token (default 1.0).
    chatter_bias:
        How much more the chatter path scores (default 1.0: greedy decoding chatters).
    tokenizer:
        The vocabulary (default ``ToyTokenizer()``).
    """

    def __init__(
        self,
        reference: str = DEFAULT_REFERENCE,
        *,
        chatter: str = DEFAULT_CHATTER,
        seed: int = 0,
        noise: float = 1.0,
        copy_strength: float = 8.0,
        length_bonus: float = 1.0,
        chatter_bias: float = 1.0,
        tokenizer: ToyTokenizer | None = None,
    ) -> None:
        if noise < 0:
            raise ValueError(f"noise must be >= 0, got {noise}")
        self.tokenizer = tokenizer or ToyTokenizer()
        self.reference = reference.encode()
        self.chatter = chatter.encode()
        self.seed = seed
        self.noise = noise
        self.copy_strength = copy_strength
        self.length_bonus = length_bonus
        self.chatter_bias = chatter_bias
        vocab = self.tokenizer.vocabulary
        self.vocab_size: int = vocab.vocab_size
        self.max_length: int | None = 4096
        self.device = torch.device("cpu")
        self._eos = vocab.eos_token_ids[0]
        self._token_bytes = [vocab.token_bytes(t) if t != self._eos else b"" for t in range(self.vocab_size)]
        self._lengths = np.array([len(b) for b in self._token_bytes], dtype=np.float64)
        self._seqs: dict[Hashable, tuple[int, list[int]]] = {}  # seq_id -> (prompt length, tokens)

    # -- the LanguageModel interface ------------------------------------------------------------------

    def forward(self, feeds: Sequence[Feed]) -> list[torch.Tensor]:
        """Append the tokens and return the logits (each row computed on its own context)."""
        out = []
        for feed in feeds:
            if not feed.token_ids:
                raise ValueError(f"sequence {feed.seq_id!r}: a feed needs at least one token")
            if feed.seq_id not in self._seqs:
                self._seqs[feed.seq_id] = (len(feed.token_ids), [])
            prompt_length, tokens = self._seqs[feed.seq_id]
            start = len(tokens)
            tokens.extend(int(t) for t in feed.token_ids)
            first = start if feed.all_logits else len(tokens) - 1
            rows = [self.logits_for(tokens[: i + 1], prompt_length) for i in range(first, len(tokens))]
            out.append(torch.from_numpy(np.stack(rows)).float())
        return out

    def truncate(self, seq_id: Hashable, num_tokens: int) -> None:
        tokens = self._seqs[seq_id][1]
        if not 0 <= num_tokens <= len(tokens) - 1:
            raise ValueError(f"cannot truncate {num_tokens} of the {len(tokens)} tokens of {seq_id!r}")
        del tokens[len(tokens) - num_tokens :]

    def fork(self, seq_id: Hashable, new_seq_id: Hashable) -> None:
        if new_seq_id in self._seqs:
            raise ValueError(f"sequence {new_seq_id!r} already exists")
        prompt_length, tokens = self._seqs[seq_id]
        self._seqs[new_seq_id] = (prompt_length, list(tokens))

    def release(self, seq_id: Hashable) -> None:
        del self._seqs[seq_id]

    @property
    def num_sequences(self) -> int:
        """How many sequences it holds."""
        return len(self._seqs)

    # -- the pretend model --------------------------------------------------------------------------------

    def logits_for(self, context: Sequence[int], prompt_length: int) -> np.ndarray:
        """The logits after ``context`` whose first ``prompt_length`` tokens are the prompt (read-only)."""
        output = b"".join(self._token_bytes[t] for t in context[prompt_length:])
        scores = np.zeros(self.vocab_size)
        talk = self.chatter + self.reference
        aims: list[tuple[bytes, float]] = []
        if self.chatter and talk.startswith(output):
            aims.append((talk[len(output) :], self.chatter_bias))
        if self.reference.startswith(output):
            aims.append((self.reference[len(output) :], 0.0))
        elif not aims:
            aims.append((self.reference[self._resume_at(output) :], 0.0))
        for rest, bias in aims:
            if not rest:
                scores[self._eos] = max(scores[self._eos], self.copy_strength + bias)
                continue
            fits = np.array([bool(b) and rest.startswith(b) for b in self._token_bytes])
            value = self.copy_strength + bias + self.length_bonus * (self._lengths - 1)
            scores = np.where(fits, np.maximum(scores, value), scores)
        if self.noise:
            digest = zlib.crc32(np.asarray(context, dtype=np.int64).tobytes())
            scores += np.random.default_rng([self.seed, prompt_length, digest]).normal(0.0, self.noise, self.vocab_size)
        return scores

    def _resume_at(self, output: bytes) -> int:
        """Where to continue the reference: after the longest end of ``output`` found in it (else 0)."""
        for size in range(min(len(output), len(self.reference)), 0, -1):
            at = self.reference.find(output[-size:])
            if at >= 0:
                return at + size
        return 0
