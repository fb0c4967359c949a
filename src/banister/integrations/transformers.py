"""A transformers ``LogitsProcessor`` that constrains ``model.generate`` with a CompiledGrammar."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
from transformers import LogitsProcessor

from banister.compiler import CompiledGrammar
from banister.mask.bitmask import apply_token_bitmask_inplace, bitmask_words
from banister.matcher import Matcher


class GrammarLogitsProcessor(LogitsProcessor):
    """Masks every token that could not lead to an output the grammar accepts.

    Pass it to ``model.generate(..., logits_processor=LogitsProcessorList([processor]))``. The
    output is the text after the prompt; EOS is allowed exactly when it is complete, and once the
    grammar is done only EOS is. Rows are followed by their generated tokens, not by position, so
    sampling, ``num_return_sequences`` and beam search (which reorders rows) all work. Use a new
    processor for each ``generate`` call.

    Parameters
    ----------
    grammars:
        One compiled grammar for every row, or one per prompt of the batch (rows are expanded
        prompt by prompt, as ``num_return_sequences`` and ``num_beams`` do). Compile against the
        model's vocabulary, e.g. ``Compiler(Vocabulary.from_hf_tokenizer(tokenizer, vocab_size=...))``.
    """

    def __init__(self, grammars: CompiledGrammar | Sequence[CompiledGrammar]) -> None:
        self.grammars = [grammars] if isinstance(grammars, CompiledGrammar) else list(grammars)
        if not self.grammars:
            raise ValueError("grammars must not be empty")
        vocab = self.grammars[0].vocab
        if any(g.vocab is not vocab for g in self.grammars):
            raise ValueError("all grammars must be compiled against the same vocabulary")
        self._eos = vocab.eos_token_ids
        self._words = bitmask_words(vocab.vocab_size)
        self._prompt_length: int | None = None
        self._matchers: dict[tuple[int, tuple[int, ...]], Matcher | None] = {}

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> torch.FloatTensor:
        """Set the scores of forbidden tokens to ``-inf`` (in place) and return them."""
        rows = input_ids.shape[0]
        if rows % len(self.grammars):
            raise ValueError(f"{rows} rows do not split evenly over {len(self.grammars)} grammars")
        per_grammar = rows // len(self.grammars)
        if self._prompt_length is None:
            self._prompt_length = input_ids.shape[1]
        generated = input_ids[:, self._prompt_length :].tolist()
        bitmask = np.zeros((rows, self._words), dtype=np.int32)
        current: dict[tuple[int, tuple[int, ...]], Matcher | None] = {}
        for row, tokens in enumerate(generated):
            key = (row // per_grammar, tuple(tokens))
            if key not in current:
                current[key] = self._matcher(key)
            matcher = current[key]
            if matcher is None:  # the row left the grammar (another processor forced a token): end it
                words = bitmask[row].view(np.uint32)
                for t in self._eos:
                    words[t >> 5] |= np.uint32(1) << np.uint32(t & 31)
            else:
                matcher.fill_next_token_bitmask(bitmask, row)
        self._matchers = current
        apply_token_bitmask_inplace(scores, torch.from_numpy(bitmask).to(scores.device))
        return scores

    def _matcher(self, key: tuple[int, tuple[int, ...]]) -> Matcher | None:
        """The matcher after a row's tokens: the previous step's for its prefix, one token further."""
        grammar, tokens = key
        if key in self._matchers:
            return self._matchers[key]
        parent_key = (grammar, tokens[:-1])
        if tokens and parent_key in self._matchers:
            parent = self._matchers[parent_key]
            if parent is None:
                return None
            matcher = parent.copy()
            last = [tokens[-1]]
        else:
            matcher = Matcher(self.grammars[grammar])
            last = list(tokens)
        for token in last:
            if matcher.is_terminated():
                continue  # generate pads finished rows
            if not matcher.accept_token(token):
                return None
        return matcher
