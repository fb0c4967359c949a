"""Compile a specification once into an immutable CompiledGrammar; the Compiler caches by specification."""

from __future__ import annotations

import json
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal
from dataclasses import dataclass, field

from banister.automaton import RegexAutomaton, TokenAutomaton
from banister.errors import BanisterError
from banister.grammar.ir import Grammar
from banister.parser.recognizer import GrammarAutomaton
from banister.regex import compile_regex
from banister.vocab import Vocabulary

_REGEX_META = frozenset("\\^$.|?*+()[]{}/-")


def escape_regex(text: str) -> str:
    """A pattern that matches exactly ``text`` (every metacharacter escaped)."""
    return "".join("\\" + c if c in _REGEX_META else c for c in text)


@dataclass(frozen=True)
class CompiledGrammar:
    """A specification compiled against one vocabulary: immutable, shareable across threads.

    Create matchers from it with ``Matcher(compiled)``; each is cheap.
    """

    automaton: TokenAutomaton = field(repr=False)
    kind: str
    source: str
    compile_seconds: float

    @property
    def vocab(self) -> Vocabulary:
        return self.automaton.vocab


class Compiler:
    """Compiles regexes and choices (and, through the grammar front ends, richer specifications).

    Parameters
    ----------
    vocab:
        The model's vocabulary.
    max_states:
        Most DFA states one pattern may build before compilation fails with ``LimitError``.
    cache_size:
        How many compiled grammars to keep (least recently used are dropped). 0 disables the cache.
    """

    def __init__(self, vocab: Vocabulary, *, max_states: int = 10_000, cache_size: int = 256) -> None:
        if max_states < 1 or cache_size < 0:
            raise ValueError(f"max_states must be >= 1 and cache_size >= 0 (got {max_states}, {cache_size})")
        self.vocab = vocab
        self.max_states = max_states
        self.cache_size = cache_size
        self._cache: OrderedDict[tuple[str, str], CompiledGrammar] = OrderedDict()
        self._lock = threading.Lock()

    def regex(self, pattern: str) -> CompiledGrammar:
        """Compile a regex that the whole output must match (``^``/``$`` at the ends are optional)."""
        if not isinstance(pattern, str):
            raise TypeError(f"pattern must be a str, got {type(pattern).__name__}")
        return self._cached("regex", pattern, lambda: self._regex_automaton(pattern))

    def choice(self, choices: Sequence[str]) -> CompiledGrammar:
        """Compile a list of literal strings: the output must be exactly one of them."""
        if isinstance(choices, str) or not all(isinstance(c, str) for c in choices):
            raise TypeError("choices must be a sequence of str")
        if not choices:
            raise BanisterError("choice needs at least one string")
        unique = list(dict.fromkeys(choices))
        pattern = "|".join(f"(?:{escape_regex(c)})" for c in unique)
        return self._cached("choice", "\x00".join(unique), lambda: self._regex_automaton(pattern))

    def json_schema(self, schema: Mapping[str, Any] | bool | str, **options: Any) -> CompiledGrammar:
        """Compile a JSON Schema (a dict, a boolean, or its JSON text); the output is JSON valid under it.

        ``options`` are those of :func:`banister.grammar.json_schema.json_schema_to_grammar`:
        ``strict``, ``key_order`` ("schema" or "any"), ``whitespace`` ("flexible", "compact",
        "pretty"), ``max_whitespace``, ``max_nesting``, ``draft``, ``unsupported_formats``.
        Raises ``SchemaError`` naming the keyword and its JSON pointer, or ``LimitError``.
        """
        from banister.grammar.json_schema import json_schema_to_grammar

        text = schema if isinstance(schema, str) else json.dumps(schema, sort_keys=True)
        key = text + "\x00" + json.dumps(options, sort_keys=True, default=repr)
        return self._cached("json_schema", key, lambda: self._grammar_automaton(json_schema_to_grammar(schema, **options)))

    def json(self, **options: Any) -> CompiledGrammar:
        """Compile JSON mode: any JSON value (the schema ``{}``), nested at most ``max_nesting`` deep."""
        from banister.grammar.json_schema import json_grammar

        key = json.dumps(options, sort_keys=True, default=repr)
        return self._cached("json", key, lambda: self._grammar_automaton(json_grammar(**options)))

    def grammar(self, text: str, syntax: Literal["gbnf", "lark"], **options: Any) -> CompiledGrammar:
        """Compile a grammar written in ``syntax`` (stated, never guessed): GBNF or Lark.

        ``options`` go to :func:`~banister.grammar.ebnf.parse_gbnf` / :func:`~banister.grammar.ebnf.parse_lark`
        (``start`` and size limits). Raises ``GrammarError`` naming the line and column.
        """
        from banister.grammar.ebnf import parse_gbnf, parse_lark

        parsers = {"gbnf": parse_gbnf, "lark": parse_lark}
        if syntax not in parsers:
            raise ValueError(f"syntax must be 'gbnf' or 'lark', got {syntax!r}")
        key = syntax + "\x00" + text + "\x00" + json.dumps(options, sort_keys=True, default=repr)
        return self._cached("grammar", key, lambda: self._grammar_automaton(parsers[syntax](text, **options)))

    def grammar_ir(self, grammar: Grammar) -> CompiledGrammar:
        """Compile a grammar already in the rule form (what every grammar front end produces)."""
        return self._cached("ir", repr(grammar), lambda: self._grammar_automaton(grammar))

    def cache_info(self) -> dict[str, int]:
        """Entries held and the cache's capacity."""
        return {"entries": len(self._cache), "capacity": self.cache_size}

    def _regex_automaton(self, pattern: str) -> RegexAutomaton:
        return RegexAutomaton(compile_regex(pattern, max_states=self.max_states), self.vocab)

    def _grammar_automaton(self, grammar: Grammar) -> GrammarAutomaton:
        return GrammarAutomaton(grammar, self.vocab, max_states=self.max_states)

    def _cached(self, kind: str, key: str, build: Callable[[], TokenAutomaton]) -> CompiledGrammar:
        with self._lock:
            hit = self._cache.get((kind, key))
            if hit is not None:
                self._cache.move_to_end((kind, key))
                return hit
        start = time.perf_counter()
        automaton = build()
        compiled = CompiledGrammar(automaton, kind, key, time.perf_counter() - start)
        if self.cache_size:
            with self._lock:
                self._cache[(kind, key)] = compiled
                while len(self._cache) > self.cache_size:
                    self._cache.popitem(last=False)
        return compiled
