"""Compile a specification once into an immutable CompiledGrammar; the Compiler caches by specification."""

from __future__ import annotations

import json
import os
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from contextlib import nullcontext
from typing import Any, Literal
from dataclasses import dataclass, field

from banister.automaton import RegexAutomaton, TokenAutomaton
from banister.cache import WarmCache
from banister.collector import after_compile, gc_paused
from banister.errors import BanisterError
from banister.grammar.ir import Grammar
from banister.parser.distinct import DistinctItems, grammar_automaton
from banister.parser.recognizer import GrammarAutomaton
from banister.regex import compile_regex
from banister.vocab import Vocabulary

_DFA_KINDS = frozenset({"regex", "choice"})  # kinds the warm cache stores as a DFA (the others as Grammar IR)
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
    cache_dir:
        A warm-start cache (a directory or a :class:`~banister.cache.WarmCache`), off by default. With
        one, the vocabulary's token trie is read from it now (or built and stored), and each compile
        first looks there for the front end's output (Grammar IR, regex DFA) and stores it after a
        miss, so a new process does not pay them again. Unreadable entries are ignored and rewritten.
    pause_gc:
        Turn Python's automatic garbage collection off while a specification compiles (on again
        after; nested and concurrent compiles share one pause). A big schema builds hundreds of
        thousands of objects, and collections that rescan them as they pile up cost about a third
        of the compile time on MaskBench; what compiling leaves unreachable is collected afterwards.
        In a process that settled its heap (:func:`banister.collector.settle_heap`, as ``banister
        serve`` does), each compile ends by freezing it (:func:`banister.collector.after_compile`), so
        what the new grammar keeps is never scanned by the collector.
    """

    def __init__(self, vocab: Vocabulary, *, max_states: int = 10_000, cache_size: int = 256,
                 cache_dir: str | os.PathLike[str] | WarmCache | None = None, pause_gc: bool = True) -> None:
        if max_states < 1 or cache_size < 0:
            raise ValueError(f"max_states must be >= 1 and cache_size >= 0 (got {max_states}, {cache_size})")
        self.vocab = vocab
        self.max_states = max_states
        self.cache_size = cache_size
        self.pause_gc = pause_gc
        self._cache: OrderedDict[tuple[str, str], CompiledGrammar] = OrderedDict()
        self._lock = threading.Lock()
        self.warm_cache = None if cache_dir is None else cache_dir if isinstance(cache_dir, WarmCache) \
            else WarmCache(cache_dir)
        self._storing = threading.local()  # the warm-cache key of the entry being built on this thread
        if self.warm_cache is not None:
            vocab.load_trie(self.warm_cache)

    def regex(self, pattern: str) -> CompiledGrammar:
        """Compile a regex that the whole output must match (``^``/``$`` at the ends are optional)."""
        if not isinstance(pattern, str):
            raise TypeError(f"pattern must be a str, got {type(pattern).__name__}")
        return self._cached("regex", lambda: pattern, lambda: self._regex_automaton(pattern))

    def choice(self, choices: Sequence[str]) -> CompiledGrammar:
        """Compile a list of literal strings: the output must be exactly one of them."""
        if isinstance(choices, str) or not all(isinstance(c, str) for c in choices):
            raise TypeError("choices must be a sequence of str")
        if not choices:
            raise BanisterError("choice needs at least one string")
        unique = list(dict.fromkeys(choices))
        pattern = "|".join(f"(?:{escape_regex(c)})" for c in unique)
        return self._cached("choice", lambda: "\x00".join(unique), lambda: self._regex_automaton(pattern))

    def json_schema(self, schema: Mapping[str, Any] | bool | str, **options: Any) -> CompiledGrammar:
        """Compile a JSON Schema (a dict, a boolean, or its JSON text); the output is JSON valid under it.

        ``options`` are those of :func:`banister.grammar.json_schema.json_schema_to_grammar`:
        ``strict``, ``key_order`` ("schema" or "any"), ``whitespace`` ("flexible", "compact",
        "pretty"), ``max_whitespace``, ``max_nesting``, ``draft``, ``unsupported_formats``,
        ``unknown_formats``, ``distinct_items`` (True here: repeated items and keys are kept out, see
        :mod:`banister.parser.distinct`), ``resources`` (the documents a ``$ref`` may name by URI).
        Raises ``SchemaError`` naming the keyword and its JSON pointer, or ``LimitError``.
        """
        from banister.grammar.json_schema import json_schema_to_grammar, schema_text

        def key() -> str:
            # Not sort_keys: the order of a schema's properties is the order the output writes them.
            text = schema if isinstance(schema, str) else schema_text(schema)
            return text + "\x00" + _options_key(options)

        # Nested parts are left for the first masks that need them, unless the grammar is stored whole
        # in the warm cache.
        defer = self.warm_cache is None
        return self._cached("json_schema", key, lambda: self._grammar_automaton(
            json_schema_to_grammar(schema, defer=defer, **{"distinct_items": True, **options})))

    def json(self, **options: Any) -> CompiledGrammar:
        """Compile JSON mode: any JSON value (the schema ``{}``), nested to any depth (or at most ``max_nesting``)."""
        from banister.grammar.json_schema import json_grammar

        return self._cached("json", lambda: json.dumps(options, sort_keys=True, default=repr),
                            lambda: self._grammar_automaton(json_grammar(**options)))

    def grammar(self, text: str, syntax: Literal["gbnf", "lark"], **options: Any) -> CompiledGrammar:
        """Compile a grammar written in ``syntax`` (stated, never guessed): GBNF or Lark.

        ``options`` go to :func:`~banister.grammar.ebnf.parse_gbnf` / :func:`~banister.grammar.ebnf.parse_lark`
        (``start`` and size limits). Raises ``GrammarError`` naming the line and column.
        """
        from banister.grammar.ebnf import parse_gbnf, parse_lark

        parsers = {"gbnf": parse_gbnf, "lark": parse_lark}
        if syntax not in parsers:
            raise ValueError(f"syntax must be 'gbnf' or 'lark', got {syntax!r}")

        def key() -> str:
            return syntax + "\x00" + text + "\x00" + json.dumps(options, sort_keys=True, default=repr)

        return self._cached("grammar", key, lambda: self._grammar_automaton(parsers[syntax](text, **options)))

    def structural_tag(
        self,
        tags: Sequence[Any],
        triggers: Sequence[str] | None = None,
        at_least_one: bool = False,
        stop_after_first: bool = False,
        json_options: Mapping[str, Any] | None = None,
    ) -> CompiledGrammar:
        """Compile free text with tags (structural tags / lazy grammars): see docs/grammars.md.

        Outside tags any text is allowed, except that writing one of ``triggers`` (default: every
        tag's ``begin``) enters a tag: the text from the trigger on must be the begin of a
        :class:`~banister.grammar.structural.Tag` that starts with that trigger, then its body (JSON
        under its ``schema``, any JSON when the schema is None, or its ``grammar``), then its ``end``;
        then free text again. ``at_least_one``: EOS only after a tag. ``stop_after_first``: the output
        ends with the first tag's end. ``json_options`` go to the JSON Schema compile of the tags'
        schemas (``strict``, ``whitespace``, ...). Raises ``StructuralTagError`` (a ``GrammarError``)
        for bad arguments, ``SchemaError`` or ``LimitError``.
        """
        from banister.grammar.structural import _check_tags, _check_triggers, structural_tag_grammar

        tag_list = _check_tags(tags)
        trigger_list = None if triggers is None else _check_triggers(triggers, from_begins=False)

        def key() -> str:
            return json.dumps(
                [[t.key() for t in tag_list], trigger_list, bool(at_least_one), bool(stop_after_first),
                 _options_key(json_options or {})],
                sort_keys=True,
                default=repr,
            )

        return self._cached(
            "structural_tag",
            key,
            lambda: self._grammar_automaton(
                structural_tag_grammar(tag_list, trigger_list, at_least_one=at_least_one,
                                       stop_after_first=stop_after_first, json_options=json_options)
            ),
        )

    def grammar_ir(self, grammar: Grammar) -> CompiledGrammar:
        """Compile a grammar already in the rule form (what every grammar front end produces)."""
        return self._cached("ir", lambda: repr(grammar), lambda: self._grammar_automaton(grammar))

    def cache_info(self) -> dict[str, int]:
        """Entries held and the cache's capacity."""
        return {"entries": len(self._cache), "capacity": self.cache_size}

    def _regex_automaton(self, pattern: str) -> RegexAutomaton:
        automaton = RegexAutomaton(compile_regex(pattern, max_states=self.max_states), self.vocab)
        disk_key = getattr(self._storing, "key", None)
        if disk_key is not None:
            self.warm_cache.store_dfa(disk_key, automaton.dfa)  # type: ignore[union-attr]
        return automaton

    def _grammar_automaton(self, grammar: Grammar) -> GrammarAutomaton | DistinctItems:
        automaton = grammar_automaton(grammar, self.vocab, max_states=self.max_states)
        disk_key = getattr(self._storing, "key", None)
        if disk_key is not None:
            self.warm_cache.store_grammar(disk_key, grammar)  # type: ignore[union-attr]
        return automaton

    def _warm(self, kind: str, disk_key: str) -> TokenAutomaton | None:
        """The automaton rebuilt from the warm cache's entry, or None (absent, unreadable, or failing)."""
        cache = self.warm_cache
        if cache is None:
            return None
        try:
            if kind in _DFA_KINDS:
                dfa = cache.load_dfa(disk_key)
                return None if dfa is None else RegexAutomaton(dfa, self.vocab)  # type: ignore[return-value]
            grammar = cache.load_grammar(disk_key)
            if grammar is None:
                return None
            return grammar_automaton(grammar, self.vocab, max_states=self.max_states)  # type: ignore[return-value]
        except Exception:  # noqa: BLE001 - never trust a cache over a cold compile, which raises the real error
            return None

    def _cached(self, kind: str, spec: Callable[[], str], build: Callable[[], TokenAutomaton]) -> CompiledGrammar:
        """The grammar ``build`` makes, from the caches when they hold it. ``spec`` writes the text that
        keys it (the specification and its options), asked for only when there is a cache to look in."""
        key = spec() if self.cache_size or self.warm_cache is not None else ""
        if self.cache_size:
            with self._lock:
                hit = self._cache.get((kind, key))
                if hit is not None:
                    self._cache.move_to_end((kind, key))
                    return hit
        start = time.perf_counter()
        automaton = None
        disk_key = None
        with gc_paused() if self.pause_gc else nullcontext():
            if self.warm_cache is not None and kind != "ir":  # "ir" has no front end to skip
                disk_key = self.warm_cache.grammar_key(kind, key, self.max_states)
                automaton = self._warm(kind, disk_key)
            if automaton is None:
                self._storing.key = disk_key
                try:
                    automaton = build()
                finally:
                    self._storing.key = None
            after_compile()  # while collection is still paused: the first allocation after would collect
        compiled = CompiledGrammar(automaton, kind, time.perf_counter() - start)
        if self.cache_size:
            with self._lock:
                self._cache[(kind, key)] = compiled
                while len(self._cache) > self.cache_size:
                    self._cache.popitem(last=False)
        return compiled


def _options_key(options: Mapping[str, Any]) -> str:
    """JSON Schema compile options as cache-key text, by name, with each resource in its own key order
    (the order its objects' properties are written in)."""
    from banister.grammar.json_schema import schema_text

    rest = {name: value for name, value in options.items() if name != "resources"}
    resources = options.get("resources")
    return json.dumps(rest, sort_keys=True, default=repr) + ("\x00" + schema_text(resources) if resources else "")
