"""The vLLM structured-output backend shape: compile on arrival, fill bitmasks on the CPU, apply on device.

An engine keeps one :class:`BanisterBackend` per model and one :class:`BanisterGrammar` per
request; each step it fills one bitmask row per constrained request (CPU), copies the bitmask to
the device and applies it to the logits (:func:`banister.apply_token_bitmask_inplace`), then feeds
the sampled (or speculated) tokens back with :meth:`BanisterGrammar.accept_tokens`.
"""

from __future__ import annotations

import json
from typing import Any, Literal

import torch

from banister.compiler import CompiledGrammar, Compiler
from banister.errors import BanisterError
from banister.mask.bitmask import bitmask_words
from banister.matcher import Matcher
from banister.vocab import Vocabulary

RequestType = Literal["json", "json_object", "regex", "grammar", "choice"]


class BanisterGrammar:
    """One request's grammar state (vLLM's ``StructuredOutputGrammar``).

    Parameters
    ----------
    compiled:
        The request's compiled grammar.
    """

    def __init__(self, compiled: CompiledGrammar) -> None:
        self.compiled = compiled
        self.matcher = Matcher(compiled)
        self.num_processed_tokens = 0

    def accept_tokens(self, request_id: str, tokens: list[int]) -> bool:
        """Advance by ``tokens``; all or nothing: on a refused token nothing changes and it returns False.

        ``request_id`` is only for the caller's logs (vLLM passes it).
        """
        for i, token in enumerate(tokens):
            if not self.matcher.accept_token(token):
                self.matcher.rollback(i)
                return False
        self.num_processed_tokens += len(tokens)
        return True

    def validate_tokens(self, tokens: list[int]) -> list[int]:
        """The longest prefix of ``tokens`` the grammar accepts from here (the state is unchanged)."""
        accepted = 0
        for token in tokens:
            if not self.matcher.accept_token(token):
                break
            accepted += 1
        self.matcher.rollback(accepted)
        return tokens[:accepted]

    def rollback(self, num_tokens: int) -> None:
        """Undo the last ``num_tokens`` accepted tokens (rejected speculative tokens)."""
        self.matcher.rollback(num_tokens)
        self.num_processed_tokens -= num_tokens

    def fill_bitmask(self, bitmask: torch.Tensor, batch_index: int) -> None:
        """Write the allowed next tokens into row ``batch_index`` of a CPU int32 bitmask."""
        self.matcher.fill_next_token_bitmask(bitmask, batch_index)

    def is_terminated(self) -> bool:
        """Whether the request must stop (EOS accepted, or the grammar is complete and can't grow)."""
        return self.matcher.is_terminated()

    def find_jump_string(self) -> str | None:
        """The text the grammar forces next, or None when there is a choice."""
        return self.matcher.jump_forward_string() or None

    def reset(self) -> None:
        """Back to the start of the grammar."""
        self.matcher.reset()
        self.num_processed_tokens = 0


class BanisterBackend:
    """The engine-level backend (vLLM's ``StructuredOutputBackend``): one per model, shared by requests.

    Parameters
    ----------
    vocab:
        The model's vocabulary, ``vocab_size`` equal to its logits width.
    grammar_syntax:
        The syntax of ``"grammar"`` specifications: ``"gbnf"`` (default) or ``"lark"``.
    json_options:
        Options for ``"json"`` and ``"json_object"`` (see :meth:`banister.Compiler.json_schema`).
    """

    def __init__(
        self,
        vocab: Vocabulary,
        *,
        grammar_syntax: Literal["gbnf", "lark"] = "gbnf",
        json_options: dict[str, Any] | None = None,
    ) -> None:
        if grammar_syntax not in ("gbnf", "lark"):
            raise ValueError(f"grammar_syntax must be 'gbnf' or 'lark', got {grammar_syntax!r}")
        self.vocab = vocab
        self.vocab_size = vocab.vocab_size
        self.compiler = Compiler(vocab)
        self.grammar_syntax = grammar_syntax
        self.json_options = dict(json_options or {})

    def compile_grammar(self, request_type: RequestType, grammar_spec: str) -> BanisterGrammar:
        """Compile a request's specification (cached by text) into its grammar state.

        ``grammar_spec`` is the JSON Schema text (``"json"``), ignored (``"json_object"``), the
        pattern (``"regex"``), the grammar text (``"grammar"``) or a JSON list of strings
        (``"choice"``). Compile errors raise the compiler's typed errors.
        """
        compiler = self.compiler
        if request_type == "json":
            compiled = compiler.json_schema(grammar_spec, **self.json_options)
        elif request_type == "json_object":
            compiled = compiler.json(**self.json_options)
        elif request_type == "regex":
            compiled = compiler.regex(grammar_spec)
        elif request_type == "grammar":
            compiled = compiler.grammar(grammar_spec, syntax=self.grammar_syntax)
        elif request_type == "choice":
            try:
                choices = json.loads(grammar_spec)
            except json.JSONDecodeError as exc:
                raise BanisterError(f"choice: the specification is not a JSON list of strings ({exc})") from None
            if not isinstance(choices, list):
                raise BanisterError("choice: the specification must be a JSON list of strings")
            compiled = compiler.choice(choices)
        else:
            raise ValueError(f"unknown request_type {request_type!r}; expected json, json_object, regex, grammar or choice")
        return BanisterGrammar(compiled)

    def allocate_token_bitmask(self, max_num_seqs: int) -> torch.Tensor:
        """A CPU int32 bitmask with a row per sequence, every token allowed."""
        return torch.full((max_num_seqs, bitmask_words(self.vocab_size)), -1, dtype=torch.int32)

    def destroy(self) -> None:
        """Drop the compiled grammars."""
        self.compiler = Compiler(self.vocab)
