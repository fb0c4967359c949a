"""No repeated items or keys where JSON Schema counts them: array items under ``uniqueItems``, keys of
objects under ``minProperties``. A token automaton over a grammar that marks where repeats are refused.

Duplicate-free sequences are not context-free, so no grammar holds them. A grammar marked
``distinct_items`` (see :data:`banister.grammar.ir.DISTINCT`) follows such items with marked lexemes:
the separators and closing bracket of an array whose items (strings, objects) must differ, the colon
after an object's other keys where a count needs them distinct. :class:`DistinctItems` wraps its
:class:`~banister.parser.recognizer.GrammarAutomaton` and reads the text alongside: for each open
container, the items seen (an array's strings and the values of its container items, an object's
keys), the raw bytes of the string being written, and the text of the container items being written.
Where an item closes equal to one seen, every hypothesis that would go on with a marked lexeme may go
on only with the others; a branch that allows the repeat keeps the text.

Masks are the grammar's, less the tokens that would close a repeat: those are found by what the text
before a token's quote decodes to (the rest of a string seen), or are among the few tokens that hold a
whole string, close more than one, or hold a closing bracket where an open array holds a container
item, and each is checked by advancing over it. The front end marks only items whose every prefix has
endless completions (strings, objects open to other keys), so refusing a closing quote or bracket never
leaves an item with no way to end.
"""

from __future__ import annotations

import json
import re
import weakref
from collections.abc import Iterable, Sequence
from decimal import Decimal
from typing import NamedTuple

import numpy as np

from banister.grammar.ir import DISTINCT, Grammar
from banister.parser.recognizer import GrammarAutomaton, GrammarState
from banister.vocab import Vocabulary

_QUOTE, _BACKSLASH = 0x22, 0x5C
_OPENING, _CLOSING = frozenset(b"[{"), frozenset(b"]}")

Frame = tuple[frozenset[object], bool, bool, "int | None"]
"""An open container: the items seen (an array's string items and container items, these in the form
of :func:`_canonical`; an object's keys), whether it is an object, whether a string there now is a key
(an object's, after ``{`` or ``,``), and, where it is an array's item, where its text starts in
:attr:`Items.text`."""


class Items(NamedTuple):
    """What the text says: ``frames``, the open containers, innermost last; ``raw``, the bytes of the
    string being written where it is an item or a key (None elsewhere); ``in_string`` and ``escaped``,
    where the text is in any string; ``text``, the bytes since the outermost open container that is an
    array's item began (None when none is open); ``free``, whether the text is free text around
    structural tags (not read as JSON), and ``tail``, its last bytes, which may begin a trigger."""

    frames: tuple[Frame, ...] = ()
    raw: bytes | None = None
    in_string: bool = False
    escaped: bool = False
    text: bytes | None = None
    free: bool = False
    tail: bytes = b""


DistinctState = tuple[GrammarState, Items]


class DistinctItems:
    """The token automaton of a ``distinct_items`` grammar (the TokenAutomaton interface): its states
    are ``(grammar state, Items)``. With ``triggers`` (a grammar of structural tags whose tags
    :func:`reads_tags` accepts) the text starts free and is read as JSON from each trigger on."""

    def __init__(self, automaton: GrammarAutomaton, triggers: Sequence[str] = ()) -> None:
        self.automaton = automaton
        self.vocab = automaton.vocab
        self._triggers = tuple(t.encode("utf-8") for t in triggers)
        self.initial: DistinctState = (automaton.initial, Items(free=bool(triggers)))
        self._closers = _closers(automaton.vocab)
        self._marked: tuple[int, frozenset[int]] = (-1, frozenset())

    # -- the TokenAutomaton interface -------------------------------------------------------------------

    def advance(self, state: DistinctState, data: bytes) -> DistinctState | None:
        inner, items = state
        items, repeats = _read(items, data, self._triggers)
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
        """``state`` just after a repeated item's closing quote or bracket: each hypothesis whose lexeme
        ends there and whose parse would go on with marked lexemes goes on with its other lexemes only."""
        auto = self.automaton
        out = set()
        for hyp in state:
            parse, ctx, lex = hyp
            after = None if ctx is None else auto.end_lexeme(parse, ctx, lex)
            marked = frozenset() if after is None else self._marked_ids() & after.expected
            if after is None or not marked:
                out.add(hyp)
                continue
            # The hypothesis's lexeme (a JSON string, or the punctuation ending in ``}`` or ``]``) can't go
            # on past that byte, so only the lexeme boundary is kept.
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
        candidates = closers.multiple.allowed(row)
        if any(_HOLDS_CONTAINERS in frame[0] for frame in items.frames):
            candidates += (closers.brackets_in_string if items.in_string else closers.brackets).allowed(row)
        if items.frames and not (items.in_string and items.raw is None):
            seen = [v for v in items.frames[-1][0] if isinstance(v, str)]
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
        if items.free:  # in free text only a token that completes a trigger may go on to a repeat
            candidates = [t for t in candidates if any(m in items.tail + tokens[t] for m in self._triggers)]
        n = row.shape[0]
        for t in candidates:
            word = t >> 5
            if (word < n and row[word] >> (t & 31) & 1 and _read(items, tokens[t], self._triggers)[1]
                    and self.advance(state, tokens[t]) is None):
                row[word] &= ~np.uint32(1 << (t & 31))


def grammar_automaton(grammar: Grammar, vocab: Vocabulary, *, max_states: int = 10_000
                      ) -> GrammarAutomaton | DistinctItems:
    """The token automaton of ``grammar``: its ``GrammarAutomaton``, wrapped in :class:`DistinctItems`
    when the grammar is marked ``distinct_items``."""
    automaton = GrammarAutomaton(grammar, vocab, max_states=max_states)
    return DistinctItems(automaton, grammar.free_text_triggers) if grammar.distinct_items else automaton


def reads_tags(tags: Iterable[tuple[str, str]], triggers: Sequence[str]) -> bool:
    """Whether :class:`DistinctItems` with ``triggers`` reads structural tags right, each given as (its
    begin, its end) around a JSON body: the begin, read as JSON from its trigger on, opens a container
    outside any string, the end closes it (the text is free from there), and the rest of the end neither
    holds a trigger nor ends in the start of one (the grammar looks for triggers afresh after a tag)."""
    marks = tuple(t.encode("utf-8") for t in triggers)
    for begin, end in tags:
        items, _ = _read(Items(), begin.encode("utf-8"), marks)
        if items.free or not items.frames or items.in_string:
            return False
        closing = end.encode("utf-8")
        items, at = _read_json(items, closing, 0, [], True)
        rest = closing[at:]
        if not items.free or any(t in rest or any(rest.endswith(t[:j]) for j in range(1, len(t))) for t in marks):
            return False
    return True


def _read(items: Items, data: bytes, triggers: tuple[bytes, ...] = ()) -> tuple[Items, list[int]]:
    """``items`` after the text ``data``, and where in ``data`` items close (just past their closing quote
    or bracket) that repeat one their container has seen. With ``triggers`` (structural tags), free
    text is skipped up to each trigger and read as JSON from there until the containers opened close."""
    repeats: list[int] = []
    at = 0
    while at < len(data):
        if items.free:
            items, at = _skip_free_text(items, data, at, triggers)
        else:
            items, at = _read_json(items, data, at, repeats, bool(triggers))
    return items, repeats


def _skip_free_text(items: Items, data: bytes, at: int, triggers: tuple[bytes, ...]) -> tuple[Items, int]:
    """Free text from ``data[at]`` on: where the first trigger ends (JSON is read from the trigger on, as
    the start of a tag's begin), or the end of ``data`` (the tail that may begin a trigger is kept)."""
    text = items.tail + data[at:]
    ends = [(found + len(t), t) for t in triggers if (found := text.find(t)) >= 0]
    if ends:
        end, trigger = min(ends)
        return _read_json(Items(), trigger, 0, [], True)[0], at + end - len(items.tail)
    keep = max(map(len, triggers)) - 1
    return Items(free=True, tail=text[len(text) - keep:] if keep else b""), len(data)


def _read_json(items: Items, data: bytes, at: int, repeats: list[int], leave: bool) -> tuple[Items, int]:
    """JSON text from ``data[at]`` on, adding to ``repeats`` where repeated items close: to the end of
    ``data``, or (``leave``) to the bracket that closes the last open container, after which the text is
    free."""
    frames, raw, in_string, escaped, text = items.frames, items.raw, items.in_string, items.escaped, items.text
    written = at  # data[written:] is yet to be appended to ``text`` (while a container item is open)
    for i in range(at, len(data)):
        b = data[i]
        if in_string:
            if escaped:
                escaped = False
            elif b == _BACKSLASH:
                escaped = True
            elif b == _QUOTE:
                in_string = False
                value = None if raw is None else _decoded(raw)
                if value is not None:  # (always: the grammar writes JSON strings)
                    seen, is_object, at_key, start = frames[-1]
                    if value in seen:
                        repeats.append(i + 1)
                    frames = (*frames[:-1], (seen | {value}, is_object, at_key, start))
                raw = None
                continue
            if raw is not None:
                raw += data[i:i + 1]
        elif b == _QUOTE:
            in_string = True
            raw = b"" if frames and (not frames[-1][1] or frames[-1][2]) else None
        elif b in _OPENING:
            start = None
            if frames and not frames[-1][1]:  # an array's item: its text is kept until it closes
                if text is None:
                    text, written = b"", i
                start = len(text) + i - written
            frames = (*frames, (frozenset(), b == 0x7B, True, start))
        elif b in _CLOSING:
            start = frames[-1][3] if frames else None
            frames = frames[:-1]
            if start is not None and text is not None:
                text, written = text + data[written:i + 1], i + 1
                item = _canonical(text[start:])
                if item is not None:
                    seen, is_object, at_key, start = frames[-1]
                    if item in seen:
                        repeats.append(i + 1)
                    frames = (*frames[:-1], (seen | {item, _HOLDS_CONTAINERS}, is_object, at_key, start))
                if all(frame[3] is None for frame in frames):
                    text = None
            if leave and not frames:
                return Items(free=True), i + 1
        elif (b == 0x3A or b == 0x2C) and frames and frames[-1][1]:  # an object's ':' or ','
            seen, _, _, start = frames[-1]
            frames = (*frames[:-1], (seen, True, b == 0x2C, start))
    if text is not None:
        text += data[written:]
    return Items(frames, raw, in_string, escaped, text), len(data)


_HOLDS_CONTAINERS = object()
"""Put among an array's items seen once it holds a container item: a mask then checks the tokens that
hold a closing bracket (:attr:`_Closers.brackets`)."""


def _canonical(text: bytes) -> object | None:
    """A container item's value, in a form whose equality is JSON Schema's (key order aside, 1 and 1.0
    equal, ``true`` and 1 not), or None when the text is not JSON (a token the grammar will refuse)."""
    try:
        return _tagged(json.loads(text, parse_float=Decimal, parse_int=Decimal))
    except (ValueError, RecursionError):
        return None


def _tagged(value: object) -> object:
    if isinstance(value, dict):
        return ("object", frozenset((k, _tagged(v)) for k, v in value.items()))
    if isinstance(value, list):
        return ("array", tuple(map(_tagged, value)))
    if isinstance(value, Decimal):
        return ("number", value)
    return ("literal", value) if value is None or isinstance(value, bool) else value


class _TokenSet:
    """Tokens a mask checks: which of them a row allows, read bit by bit where they are few and with
    numpy where they are many (a handful of numpy calls costs what a hundred bit reads do)."""

    _FEW = 32

    def __init__(self, tokens: list[int]) -> None:
        ordered = sorted(tokens)
        self.ids = np.array(ordered, dtype=np.int64)
        self.words = self.ids >> 5
        self.bits = np.uint32(1) << (self.ids & 31).astype(np.uint32)
        self.few = tuple((t, t >> 5, 1 << (t & 31)) for t in ordered) if len(ordered) <= self._FEW else None

    def allowed(self, row: np.ndarray) -> list[int]:
        n = row.shape[0]
        if self.few is not None:
            return [t for t, word, bit in self.few if word < n and row[word] & bit]
        ids, words, bits = self.ids, self.words, self.bits
        if words.size and words[-1] >= n:  # a row narrower than the vocabulary
            inside = words < n
            ids, words, bits = ids[inside], words[inside], bits[inside]
        return ids[row.take(words) & bits != 0].tolist()


class _Closers(NamedTuple):
    """A vocabulary's tokens that may close a string item, by what decides the item's value.

    ``by_rest``: read from inside a string (not in an escape), the tokens that close it, by what the
    text before their closing quote decodes to (UTF-8). ``closing``: every token that closes a string
    read so. ``whole``: read outside strings, the tokens holding one whole string, by its value.
    ``multiple``: the tokens checked at every mask: those that may close
    two strings (three quotes or more), close a container before a whole string (which the string's
    container then holds), or hold one that does not decode alone. ``brackets``: the tokens that may
    close a container item (``}`` or ``]``), checked where an open array holds one;
    ``brackets_in_string``: those that may do so read from inside a string (after a closing quote)."""

    by_rest: dict[bytes, tuple[int, ...]]
    closing: tuple[int, ...]
    whole: dict[str, tuple[int, ...]]
    multiple: _TokenSet
    brackets: _TokenSet
    brackets_in_string: _TokenSet


_CLOSERS: weakref.WeakKeyDictionary[Vocabulary, _Closers] = weakref.WeakKeyDictionary()


def _closers(vocab: Vocabulary) -> _Closers:
    found = _CLOSERS.get(vocab)
    if found is not None:
        return found
    by_rest: dict[bytes, list[int]] = {}
    whole: dict[str, list[int]] = {}
    closing, multiple, brackets, brackets_in_string = [], [], [], []
    for t, text in enumerate(vocab.tokens):
        if _CLOSING.intersection(text):
            brackets.append(t)
        quotes = text.count(b'"')
        if not quotes:
            continue
        close = _closing_quote(text)
        if close is not None:
            closing.append(t)
            if _CLOSING.intersection(text[close:]):
                brackets_in_string.append(t)
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
    found = _CLOSERS[vocab] = _Closers(
        {k: tuple(v) for k, v in by_rest.items()}, tuple(closing), {k: tuple(v) for k, v in whole.items()},
        _TokenSet(multiple), _TokenSet(brackets), _TokenSet(brackets_in_string),
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
