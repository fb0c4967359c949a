"""No repeated strings where JSON Schema counts them: array items under ``uniqueItems``, keys of objects
under ``minProperties``. A token automaton over a grammar that marks where repeats are refused.

Duplicate-free sequences are not context-free, so no grammar holds them. A grammar marked
``distinct_items`` (see :data:`banister.grammar.ir.DISTINCT`) follows such strings with marked lexemes:
the separators and closing bracket of an array whose string items must differ, the colon after an
object's other keys where a count needs them distinct. :class:`DistinctItems` wraps its
:class:`~banister.parser.recognizer.GrammarAutomaton` and reads the text alongside: for each open
container, the decoded strings seen (an array's string items, an object's keys), and the raw bytes of
the string being written. Where such a string closes equal to one seen, every hypothesis that would go
on with a marked lexeme may go on only with the others; a branch that allows the repeat keeps the text.

Masks are the grammar's, less the tokens that would close a repeat: those are found by what the text
before a token's quote decodes to (the rest of a string seen), or are among the few tokens that hold a
whole string or close more than one, and each is checked by advancing over it. The front end marks
only strings whose every prefix has endless completions, so refusing a closing quote never leaves a
string with no way to end.
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
_OPENING, _CLOSING = frozenset(b"[{"), frozenset(b"]}")

Frame = tuple[frozenset[str], bool, bool]
"""An open container: the strings seen (an array's string items, an object's keys), whether it is an
object, and whether a string there now is a key (an object's, after ``{`` or ``,``)."""


class Items(NamedTuple):
    """What the text says: ``frames``, the open containers, innermost last; ``raw``, the bytes of the
    string being written where it is an item or a key (None elsewhere); ``in_string`` and ``escaped``,
    where the text is in any string."""

    frames: tuple[Frame, ...] = ()
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
        """Clear from ``row`` the tokens that the grammar allows but that would close a repeat."""
        items = state[1]
        closers = self._closers
        ids, words, bits = closers.multiple
        n = row.shape[0]
        inside = words < n
        candidates = ids[inside][(row[words[inside]] & bits[inside]) != 0].tolist()
        if items.frames and not (items.in_string and items.raw is None):
            seen = items.frames[-1][0]
            if not items.in_string:
                candidates += (t for v in seen for t in closers.whole.get(v, ()))
            else:
                prefix = None if items.escaped else _decoded_prefix(items.raw)  # type: ignore[arg-type]
                if prefix is None:  # inside an escape: any token that closes the string
                    candidates += closers.closing
                else:
                    for v in seen:
                        b = v.encode("utf-8", "surrogatepass")
                        if b.startswith(prefix):
                            candidates += closers.by_rest.get(b[len(prefix):], ())
        tokens = self.vocab.tokens
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
    """``items`` after the text ``data``, and where in ``data`` strings close (just past their quotes)
    that repeat one their container has seen."""
    frames, raw, in_string, escaped = items
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
                if value is not None:  # (always: the grammar writes JSON strings)
                    seen, is_object, at_key = frames[-1]
                    if value in seen:
                        repeats.append(i + 1)
                    frames = (*frames[:-1], (seen | {value}, is_object, at_key))
                raw = None
                continue
            if raw is not None:
                raw += data[i:i + 1]
        elif b == _QUOTE:
            in_string = True
            raw = b"" if frames and (not frames[-1][1] or frames[-1][2]) else None
        elif b in _OPENING:
            frames = (*frames, (frozenset(), b == 0x7B, True))
        elif b in _CLOSING:
            frames = frames[:-1]
        elif (b == 0x3A or b == 0x2C) and frames and frames[-1][1]:  # an object's ':' or ','
            frames = (*frames[:-1], (frames[-1][0], True, b == 0x2C))
    return Items(frames, raw, in_string, escaped), repeats


class _Closers(NamedTuple):
    """A vocabulary's tokens that may close a string item, by what decides the item's value.

    ``by_rest``: read from inside a string (not in an escape), the tokens that close it, by what the
    text before their closing quote decodes to (UTF-8). ``closing``: every token that closes a string
    read so. ``whole``: read outside strings, the tokens holding one whole string, by its value.
    ``multiple``: the tokens checked at every mask, as ids, bitmask words and bits: those that may close
    two strings (three quotes or more), close a container before a whole string (which the string's
    container then holds), or hold one that does not decode alone."""

    by_rest: dict[bytes, tuple[int, ...]]
    closing: tuple[int, ...]
    whole: dict[str, tuple[int, ...]]
    multiple: tuple[np.ndarray, np.ndarray, np.ndarray]


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
        if quotes == 2:
            first = text.index(b'"')
            value = _decoded(text[first + 1:text.index(b'"', first + 1)])
            if value is not None and not _CLOSING.intersection(text[:first]):
                whole.setdefault(value, []).append(t)
                continue
        if quotes >= 2:
            multiple.append(t)
    ids = np.array(multiple, dtype=np.int64)
    found = _CLOSERS[vocab] = _Closers(
        {k: tuple(v) for k, v in by_rest.items()}, tuple(closing), {k: tuple(v) for k, v in whole.items()},
        (ids, ids >> 5, (np.uint32(1) << (ids & 31).astype(np.uint32))),
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
