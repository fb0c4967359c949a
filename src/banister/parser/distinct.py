"""``uniqueItems`` over strings: a token automaton that ends no array item equal to one before it.

A grammar marked ``distinct_items`` (see :data:`banister.grammar.ir.DISTINCT`) separates and closes the
items of each such array with marked lexemes. :class:`DistinctItems` wraps its
:class:`~banister.parser.recognizer.GrammarAutomaton` and reads the text alongside: the decoded strings
of the innermost array while its items are all strings, and the raw bytes of the string being written
there. Where a string item closes equal to an earlier one, every hypothesis that would go on with a
marked lexeme may go on only with the others; an array whose items need not differ keeps the text.

Masks are the grammar's, less the tokens that would close a repeated item: those are found by the bytes
before a token's first quote (the rest of an earlier item), or are among the few tokens that close a
string after a backslash or close more than one, and each is checked by advancing over it. The front end
takes only items whose every prefix has endless completions, so refusing a closing quote never leaves
a string with no way to end.
"""

from __future__ import annotations

import json
import re
import weakref
from typing import NamedTuple

import numpy as np

from banister.grammar.ir import DISTINCT, Grammar
from banister.parser.recognizer import GrammarAutomaton, GrammarState
from banister.vocab import Vocabulary

_QUOTE, _BACKSLASH = 0x22, 0x5C
_BETWEEN_ITEMS = frozenset(b" \t\n\r,")


class Items(NamedTuple):
    """What the text says of the innermost array: ``seen``, its items' decoded values while they are all
    strings (None otherwise, or outside arrays); ``raw``, the bytes of the string item being written
    (None when the text is not inside one); ``in_string`` and ``escaped``, where the text is in any string."""

    seen: frozenset[str] | None = None
    raw: bytes | None = None
    in_string: bool = False
    escaped: bool = False


DistinctState = tuple[GrammarState, Items]


class DistinctItems:
    """The token automaton of a ``distinct_items`` grammar (the TokenAutomaton interface): its states
    are ``(grammar state, Items)``."""

    def __init__(self, automaton: GrammarAutomaton) -> None:
        self.automaton = automaton
        self.vocab = automaton.vocab
        self.initial: DistinctState = (automaton.initial, Items())
        self._closers = _closers(automaton.vocab)
        self._marked: tuple[int, frozenset[int]] = (-1, frozenset())

    # -- the TokenAutomaton interface -------------------------------------------------------------------

    def advance(self, state: DistinctState, data: bytes) -> DistinctState | None:
        inner, items = state
        items, repeats = _read(items, data)
        done = 0
        for end in repeats:  # the grammar advances to each repeated item's quote, refusing marked lexemes there
            found = self.automaton.advance(inner, data[done:end])
            if found is None:
                return None
            found = self._refuse_marked(found)
            if found is None:
                return None
            inner, done = found, end
        if done < len(data):
            found = self.automaton.advance(inner, data[done:])
            if found is None:
                return None
            inner = found
        return inner, items

    def is_accepting(self, state: DistinctState) -> bool:
        return self.automaton.is_accepting(state[0])

    def is_final(self, state: DistinctState) -> bool:
        return self.automaton.is_final(state[0])

    def forced_bytes(self, state: DistinctState, limit: int = 1024) -> bytes:
        forced = self.automaton.forced_bytes(state[0], limit)
        while forced and self.advance(state, forced) is None:  # a repeated item the grammar alone forces
            forced = forced[:-1]
        return forced

    def token_mask(self, state: DistinctState) -> np.ndarray:
        mask = np.array(self.automaton.token_mask(state[0]))
        self._drop_repeats(state, mask)
        return mask

    def fill_mask(self, state: DistinctState, row: np.ndarray) -> bool:
        accepting = self.automaton.fill_mask(state[0], row)
        self._drop_repeats(state, row)
        return accepting

    # -- internals --------------------------------------------------------------------------------------

    def _refuse_marked(self, state: GrammarState) -> GrammarState | None:
        """``state`` just after a repeated string item's closing quote: each hypothesis whose lexeme ends
        there and whose parse would go on with marked lexemes goes on with its other lexemes only."""
        auto = self.automaton
        out = set()
        for hyp in state:
            parse, ctx, lex = hyp
            after = None if ctx is None else auto.end_lexeme(parse, ctx, lex)
            marked = frozenset() if after is None else self._marked_ids() & after.expected
            if after is None or not marked:
                out.add(hyp)
                continue
            # The hypothesis's lexeme (a JSON string) can't go on past its closing quote, so only the
            # lexeme boundary is kept.
            rest = after.expected - marked
            if rest:
                ctx2 = auto.context_of(rest)
                out.add((after, ctx2, ctx2.start))
        return frozenset(out) or None

    def _marked_ids(self) -> frozenset[int]:
        count, ids = self._marked
        known = len(self.automaton.tables.lexemes)
        if count != known:
            ids = self.automaton.lexemes_marked(DISTINCT)
            self._marked = (known, ids)
        return ids

    def _drop_repeats(self, state: DistinctState, row: np.ndarray) -> None:
        """Clear from ``row`` the tokens that the grammar allows but that would close a repeated item."""
        items = state[1]
        seen, raw = items.seen, items.raw
        if seen is None or (items.in_string and raw is None):
            return
        closers = self._closers
        candidates = list(closers.multiple)
        if not items.in_string:
            candidates += (t for v in seen for t in closers.whole.get(v, ()))
        else:
            prefix = None if items.escaped else _decoded_prefix(raw)  # type: ignore[arg-type]
            if prefix is None:  # inside an escape: any token that closes the string
                candidates += closers.closing
            else:
                for v in seen:
                    b = v.encode("utf-8", "surrogatepass")
                    if b.startswith(prefix):
                        candidates += closers.by_rest.get(b[len(prefix):], ())
        n, tokens = row.shape[0], self.vocab.tokens
        for t in candidates:
            word = t >> 5
            if (word < n and row[word] >> (t & 31) & 1 and _read(items, tokens[t])[1]
                    and self.advance(state, tokens[t]) is None):
                row[word] &= ~np.uint32(1 << (t & 31))


def grammar_automaton(grammar: Grammar, vocab: Vocabulary, *, max_states: int = 10_000
                      ) -> GrammarAutomaton | DistinctItems:
    """The token automaton of ``grammar``: its ``GrammarAutomaton``, wrapped in :class:`DistinctItems`
    when the grammar is marked ``distinct_items``."""
    automaton = GrammarAutomaton(grammar, vocab, max_states=max_states)
    return DistinctItems(automaton) if grammar.distinct_items else automaton


def _read(items: Items, data: bytes) -> tuple[Items, list[int]]:
    """``items`` after the text ``data``, and where in ``data`` string items close (just past their
    quotes) equal to an earlier item of their array."""
    seen, raw, in_string, escaped = items
    repeats = []
    for i, b in enumerate(data):
        if in_string:
            if escaped:
                escaped = False
            elif b == _BACKSLASH:
                escaped = True
            elif b == _QUOTE:
                in_string = False
                value = None if raw is None else _decoded(raw)
                if value is not None and seen is not None:  # a string item (the grammar writes JSON strings)
                    if value in seen:
                        repeats.append(i + 1)
                    seen = seen | {value}
                raw = None
                continue
            if raw is not None:
                raw += data[i:i + 1]
        elif b == _QUOTE:
            in_string = True
            raw = b"" if seen is not None else None
        elif b == 0x5B:  # [
            seen = frozenset()
        elif b not in _BETWEEN_ITEMS:
            seen = None
    return Items(seen, raw, in_string, escaped), repeats


class _Closers(NamedTuple):
    """A vocabulary's tokens that may close a string item, by what decides the item's value.

    ``by_rest``: read from inside a string (not in an escape), the tokens that close it, by what the
    text before their closing quote decodes to (UTF-8). ``closing``: every token that closes a string
    read so. ``whole``: read outside strings, the tokens holding one whole string, by its value.
    ``multiple``: the tokens that may close two strings (three quotes or more), or whose one string
    does not decode alone."""

    by_rest: dict[bytes, tuple[int, ...]]
    closing: tuple[int, ...]
    whole: dict[str, tuple[int, ...]]
    multiple: tuple[int, ...]


_CLOSERS: weakref.WeakKeyDictionary[Vocabulary, _Closers] = weakref.WeakKeyDictionary()


def _closers(vocab: Vocabulary) -> _Closers:
    found = _CLOSERS.get(vocab)
    if found is not None:
        return found
    by_rest: dict[bytes, list[int]] = {}
    whole: dict[str, list[int]] = {}
    closing, multiple = [], []
    for t, text in enumerate(vocab.tokens):
        quotes = text.count(b'"')
        if not quotes:
            continue
        close = _closing_quote(text)
        if close is not None:
            closing.append(t)
            rest = _decoded_prefix(text[:close])
            if rest is not None:
                by_rest.setdefault(rest, []).append(t)
        if quotes >= 3:
            multiple.append(t)
        elif quotes == 2:
            first = text.index(b'"')
            value = _decoded(text[first + 1:text.index(b'"', first + 1)])
            if value is not None:
                whole.setdefault(value, []).append(t)
            else:
                multiple.append(t)
    found = _CLOSERS[vocab] = _Closers(
        {k: tuple(v) for k, v in by_rest.items()}, tuple(closing), {k: tuple(v) for k, v in whole.items()},
        tuple(multiple),
    )
    return found


def _decoded(raw: bytes) -> str | None:
    """The value of a JSON string's raw content, or None when it is not one (cut in an escape, say)."""
    try:
        value = json.loads(b'"' + raw + b'"')
    except ValueError:
        return None
    return value if isinstance(value, str) else None


def _closing_quote(text: bytes) -> int | None:
    """Where ``text``, read from inside a string (not in an escape), closes it; None if it does not."""
    escaped = False
    for i, b in enumerate(text):
        if escaped:
            escaped = False
        elif b == _BACKSLASH:
            escaped = True
        elif b == _QUOTE:
            return i
    return None


_ESCAPES = re.compile(rb'(?:\\(?:u[0-9a-fA-F]{4}|["\\/bfnrt]))+')


def _decoded_prefix(raw: bytes) -> bytes | None:
    """What a string's raw text so far decodes to, as UTF-8 bytes (a character cut in its bytes stays
    cut); None while an escape is unfinished or a high surrogate's escape may still get its pair."""
    if b"\\" not in raw:
        return raw
    out, at, value = bytearray(), 0, ""
    for run in _ESCAPES.finditer(raw):
        if b"\\" in raw[at:run.start()]:
            return None
        value = json.loads(b'"' + run.group() + b'"')
        out += raw[at:run.start()] + value.encode("utf-8", "surrogatepass")
        at = run.end()
    if b"\\" in raw[at:] or (at == len(raw) and 0xD800 <= ord(value[-1]) <= 0xDBFF):
        return None
    return bytes(out + raw[at:])
