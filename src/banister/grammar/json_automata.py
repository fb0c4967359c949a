"""Small DFAs over code points, for the string (and number) constraints a single regex can't combine.

JSON Schema puts several independent constraints on one string (``pattern`` twice through ``allOf``,
``pattern`` with ``maxLength``, ``format``, the keys ``additionalProperties`` leaves over). banister's
regexes have no intersection or complement, so these are combined here on DFAs whose edges are
code-point ranges, then turned back into a regex (state elimination) or, when that regex would be too
large, into grammar rules by the caller.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Hashable, Iterable, Sequence
from functools import lru_cache
from itertools import pairwise

from banister.errors import LimitError
from banister.regex import DEAD, Node, compile_regex, parse_pattern
from banister.regex.charset import Ranges, normalize

MAX_CP = 0x10FFFF
Edge = tuple[int, int, int]


class CharDFA:
    """A DFA over code points: ``edges[s]`` holds sorted, disjoint ``(lo, hi, target)``; a missing code
    point leads to the implicit dead state. State 0 is the start.

    Held as tuples: the process-wide caches keep thousands of these DFAs (patterns, number ranges),
    and the garbage collector stops scanning a tuple of ints after one look, a list never."""

    __slots__ = ("accepting", "edges")

    def __init__(self, edges: Sequence[Sequence[Edge]], accepting: Sequence[bool]) -> None:
        self.edges: tuple[tuple[Edge, ...], ...] = tuple(map(tuple, edges))
        self.accepting: tuple[bool, ...] = tuple(accepting)

    @property
    def n_states(self) -> int:
        return len(self.edges)

    def step(self, state: int, cp: int) -> int:
        """The next state, or -1 (dead)."""
        for lo, hi, target in self.edges[state]:
            if lo <= cp <= hi:
                return target
            if lo > cp:
                break
        return -1

    def matches(self, text: str) -> bool:
        state = 0
        for ch in text:
            state = self.step(state, ord(ch))
            if state < 0:
                return False
        return self.accepting[state]


def _merge(items: Iterable[Edge]) -> list[Edge]:
    out: list[Edge] = []
    for lo, hi, target in sorted(items):
        if out and out[-1][2] == target and out[-1][1] + 1 == lo:
            out[-1] = (out[-1][0], hi, target)
        else:
            out.append((lo, hi, target))
    return out


@lru_cache(maxsize=2048)
def from_pattern(pattern: str, *, search: bool = True, max_states: int = 10_000) -> CharDFA:
    """The code-point DFA of a regex (banister syntax; ``search`` as in :func:`compile_regex`), its
    leading lookaheads included (:func:`~banister.regex.parser.parse_pattern`: the product of the
    rest with each lookahead, or its complement). Memoised across schemas: the result is shared, so
    callers must not change it (none do)."""
    core, looks = parse_pattern(pattern, extensions=True)
    dfa = _code_points(core, search, max_states)
    if not looks:
        return dfa
    parts = [dfa] + [_code_points(look.anchored, True, max_states) for look in looks]
    wanted = (True, *(not look.negative for look in looks))
    return minimize(product(parts, lambda flags: flags == wanted, max_states=max_states))


_BYTE_STATES_PER_CHARACTER = 16
"""Byte-level states a regex may take per code-point state: ``.`` is one code-point state and nine
more in the middle of its UTF-8 forms, so ``^.{1,255}$`` (2,561 byte states) fits where 300
code-point states do."""


def _code_points(node: Node, search: bool, max_states: int) -> CharDFA:
    """The code-point DFA of a regex AST (determinised over bytes, then read back by code point)."""
    too_many = LimitError(f"a pattern needs more than {max_states} automaton states", setting="max_string_states")
    try:
        dfa = compile_regex(node, search=search, max_states=max_states * _BYTE_STATES_PER_CHARACTER)
        dfa.expand_from(dfa.start)
    except LimitError as err:
        raise too_many from err
    table = dfa.transitions.tolist()
    memo: dict[tuple[int, int], list[Edge]] = {}
    index = {dfa.start: 0}
    order = [dfa.start]
    edges: list[list[Edge]] = []
    for state in order:
        row = table[state]
        raw: list[Edge] = [(b, b, row[b]) for b in range(0x80) if row[b] != DEAD]
        for leads, k, mask in (
            (range(0xC2, 0xE0), 1, 0x1F),
            (range(0xE0, 0xF0), 2, 0x0F),
            (range(0xF0, 0xF5), 3, 0x07),
        ):
            for lead in leads:
                s1 = row[lead]
                if s1 != DEAD:
                    base = (lead & mask) << (6 * k)
                    raw.extend((base + lo, base + hi, t) for lo, hi, t in _tails(table, memo, s1, k))
        out = []
        for lo, hi, t in _merge(raw):
            if t not in index:
                if len(order) == max_states:
                    raise too_many
                index[t] = len(order)
                order.append(t)
            out.append((lo, hi, index[t]))
        edges.append(_merge(out))
    return CharDFA(edges, [dfa.is_accepting(s) for s in order])


def _tails(table: list[list[int]], memo: dict[tuple[int, int], list[Edge]], state: int, k: int) -> list[Edge]:
    """The code-point edges (of the low ``6 * k`` bits) that ``k`` continuation bytes from ``state``
    spell, with the states they reach (memoised in ``memo``; a plain function, as a recursive closure
    would be a reference cycle for the garbage collector)."""
    found = memo.get((state, k))
    if found is not None:
        return found
    out: list[Edge] = []
    row = table[state]
    for b in range(0x80, 0xC0):
        t = row[b]
        if t == DEAD:
            continue
        base = (b & 0x3F) << (6 * (k - 1))
        if k == 1:
            out.append((base, base, t))
        else:
            out.extend((base + lo, base + hi, tt) for lo, hi, tt in _tails(table, memo, t, k - 1))
    found = memo[(state, k)] = _merge(out)
    return found


def literals(strings: Iterable[str]) -> CharDFA:
    """The DFA of a finite set of strings (a trie)."""
    edges: list[dict[int, int]] = [{}]
    accepting = [False]
    for text in strings:
        state = 0
        for ch in text:
            nxt = edges[state].get(ord(ch))
            if nxt is None:
                nxt = edges[state][ord(ch)] = len(edges)
                edges.append({})
                accepting.append(False)
            state = nxt
        accepting[state] = True
    return CharDFA([[(cp, cp, t) for cp, t in sorted(e.items())] for e in edges], accepting)


def length(min_len: int, max_len: int | None, *, max_states: int) -> CharDFA:
    """Strings of ``min_len`` to ``max_len`` (None: unbounded) code points; LimitError when that needs
    more than ``max_states`` states (one per character counted)."""
    top = max_len if max_len is not None else min_len
    if top >= max_states:
        raise LimitError(f"a string length of {top} needs more than {max_states} automaton states",
                         setting="max_string_states")
    edges = [[(0, MAX_CP, i + 1)] for i in range(top)]
    edges.append([(0, MAX_CP, top)] if max_len is None else [])
    return CharDFA(edges, [i >= min_len for i in range(top + 1)])


def product_states(dfas: Sequence[CharDFA], *, max_states: int, what: str = "combining string constraints",
                   setting: str = "max_string_states", needed: Sequence[bool] = ()
                   ) -> tuple[CharDFA, list[tuple[int, ...]]]:
    """All of ``dfas`` run side by side: the (untrimmed, all-accepting) product and, per product state,
    the tuple of component states (-1: that component is dead; dead components are real absorbing
    states here, so complements work). A component marked in ``needed`` must stay alive: where it dies,
    the product does too (an intersection with ``maxLength: 1024`` would otherwise count on through
    every text the pattern already rejected). Past ``max_states``, a LimitError says that ``what``
    needs more and names ``setting``."""
    must_live = [i for i, flag in enumerate(needed) if flag]
    start = tuple(0 for _ in dfas)
    index = {start: 0}
    order = [start]
    edges: list[list[Edge]] = []
    for combo in order:
        points = {0, MAX_CP + 1}
        for dfa, s in zip(dfas, combo):
            if s >= 0:
                for lo, hi, _ in dfa.edges[s]:
                    points.add(lo)
                    points.add(hi + 1)
        cuts = sorted(points)
        pointers = [0] * len(dfas)
        out: list[Edge] = []
        for lo, nxt in pairwise(cuts):
            targets = []
            for i, (dfa, s) in enumerate(zip(dfas, combo)):
                t = -1
                if s >= 0:
                    row = dfa.edges[s]
                    p = pointers[i]
                    while p < len(row) and row[p][1] < lo:
                        p += 1
                    pointers[i] = p
                    if p < len(row) and row[p][0] <= lo:
                        t = row[p][2]
                targets.append(t)
            if any(targets[i] < 0 for i in must_live):
                continue
            found = intern_state(index, order, tuple(targets), max_states, what, setting)
            out.append((lo, nxt - 1, found))
        edges.append(_merge(out))
    return CharDFA(edges, [True] * len(order)), order


def intern_state(index: dict, order: list, key: Hashable, max_states: int, what: str, setting: str) -> int:
    """The number of state ``key`` of an automaton being explored, numbering it next if it is new
    (``order`` lists the states by number); LimitError when ``what`` needs more than ``max_states``."""
    found = index.get(key)
    if found is None:
        if len(order) >= max_states:
            raise LimitError(f"{what} needs more than {max_states} automaton states", setting=setting)
        found = index[key] = len(order)
        order.append(key)
    return found


def flags(dfas: Sequence[CharDFA], combo: tuple[int, ...]) -> tuple[bool, ...]:
    """Which components accept in a product state."""
    return tuple(s >= 0 and dfa.accepting[s] for dfa, s in zip(dfas, combo))


def product(dfas: Sequence[CharDFA], accept: Callable[[tuple[bool, ...]], bool], *, max_states: int,
            what: str = "combining string constraints", setting: str = "max_string_states") -> CharDFA:
    """The trimmed product of ``dfas`` accepting where ``accept(their acceptances)``;
    ``product([d], lambda a: not a[0])`` is the complement of ``d``. ``what`` and ``setting``: as
    :func:`product_states`'s."""
    both, combos = product_states(dfas, max_states=max_states, what=what, setting=setting,
                                  needed=_needed(accept, len(dfas)))
    return trim(CharDFA(both.edges, [accept(flags(dfas, c)) for c in combos]))


_MAX_NEEDED_COMPONENTS = 8
"""Products of more components are explored without :func:`_needed`'s pruning (it tries every
combination of their acceptances)."""


def _needed(accept: Callable[[tuple[bool, ...]], bool], n: int) -> tuple[bool, ...]:
    """Which of ``n`` components ``accept`` can never do without: those accepting in every combination
    of acceptances that ``accept`` takes (a dead component never accepts again, so nothing can)."""
    if n > _MAX_NEEDED_COMPONENTS:
        return ()
    taken = [flags for flags in itertools.product((False, True), repeat=n) if accept(flags)]
    return tuple(all(flags[i] for flags in taken) for i in range(n))


def trim(dfa: CharDFA) -> CharDFA:
    """Keep the states reachable from the start that can reach acceptance (renumbered, start first)."""
    n = dfa.n_states
    back: list[list[int]] = [[] for _ in range(n)]
    for s, row in enumerate(dfa.edges):
        for _, _, t in row:
            back[t].append(s)
    alive = [False] * n
    todo = [s for s in range(n) if dfa.accepting[s]]
    for s in todo:
        alive[s] = True
    while todo:
        s = todo.pop()
        for p in back[s]:
            if not alive[p]:
                alive[p] = True
                todo.append(p)
    if not alive[0]:
        return CharDFA([[]], [False])
    index = {0: 0}
    order = [0]
    for s in order:
        for _, _, t in dfa.edges[s]:
            if alive[t] and t not in index:
                index[t] = len(order)
                order.append(t)
    edges = [_merge((lo, hi, index[t]) for lo, hi, t in dfa.edges[s] if alive[t]) for s in order]
    return CharDFA(edges, [dfa.accepting[s] for s in order])


def is_empty(dfa: CharDFA) -> bool:
    """Whether no string is accepted (``dfa`` trimmed)."""
    return not dfa.accepting[0] and not dfa.edges[0]


def is_endless(dfa: CharDFA) -> bool:
    """Whether ``dfa`` (trimmed) accepts some string and endless strings continue each prefix of one:
    every state reaches a cycle. The states that reach none are found from the edgeless ones back."""
    if is_empty(dfa):
        return False
    back: list[list[int]] = [[] for _ in range(dfa.n_states)]
    left = [len(row) for row in dfa.edges]  # edges to states not (yet) known to reach no cycle
    for s, row in enumerate(dfa.edges):
        for _, _, t in row:
            back[t].append(s)
    todo = [s for s, n in enumerate(left) if n == 0]
    for s in todo:
        for p in back[s]:
            left[p] -= 1
            if left[p] == 0:
                todo.append(p)
    return not todo


MOORE_STATES = 48
"""Automata of at most this many states are minimised by Moore's rounds (each a list comprehension,
the fastest in Python for the number ranges and short strings most schemas hold), larger ones by
Hopcroft's refinement (a counting automaton may need as many of Moore's rounds as it has states)."""


def minimize(dfa: CharDFA) -> CharDFA:
    """The minimal trimmed DFA of the same language: states that accept the same strings are merged
    (those that accept none with the dead state), and the rest are numbered breadth-first from the
    start. The partition is refined over the intervals the edges cut, intervals that every state
    treats alike read as one letter."""
    n = dfa.n_states
    points = {0, MAX_CP + 1}
    for row in dfa.edges:
        for lo, hi, _ in row:
            points.add(lo)
            points.add(hi + 1)
    cuts = sorted(points)
    at = {p: i for i, p in enumerate(cuts)}
    dead = [n] * (len(cuts) - 1)  # state n: an explicit sink makes the automaton complete
    table = []
    for row in dfa.edges:
        targets = dead.copy()
        for lo, hi, t in row:
            for c in range(at[lo], at[hi + 1]):
                targets[c] = t
        table.append(targets)
    table.append(dead)
    letters = [*{*zip(*table)}]  # each letter: every state's target on it
    initial = [*map(int, dfa.accepting), 0]
    block = _moore(initial, letters) if n <= MOORE_STATES else _hopcroft(initial, letters)
    return _quotient(dfa, block)


def _moore(block: list[int], letters: list[tuple[int, ...]]) -> list[int]:
    """The coarsest partition refining ``block`` that the letters respect: each round numbers the
    states by their block and their targets' blocks, until no block splits."""
    rows = list(zip(*letters)) if letters else [()] * len(block)
    count = len(set(block))
    while True:
        get = block.__getitem__
        numbers: dict[tuple[int, ...], int] = {}
        block = [numbers.setdefault((b, *map(get, row)), len(numbers)) for b, row in zip(block, rows)]
        if len(numbers) == count:
            return block
        count = len(numbers)


def _hopcroft(initial: list[int], letters: list[tuple[int, ...]]) -> list[int]:
    """The partition :func:`_moore` finds, by Hopcroft's refinement (splitting by the smaller half)."""
    states = len(initial)
    inverse = []
    for targets in letters:
        sources: list[list[int]] = [[] for _ in range(states)]
        for s, t in enumerate(targets):
            sources[t].append(s)
        inverse.append(sources)
    blocks = [b for b in ([s for s in range(states) if initial[s]], [s for s in range(states) if not initial[s]]) if b]
    block_of = [0] * states
    for b, members in enumerate(blocks):
        for s in members:
            block_of[s] = b
    work: set[tuple[int, int]] = set()
    if len(blocks) == 2:
        smaller = 0 if len(blocks[0]) <= len(blocks[1]) else 1
        work = {(smaller, c) for c in range(len(inverse))}
    while work:
        a, c = work.pop()
        sources_of = inverse[c]
        touched: dict[int, list[int]] = {}
        for t in blocks[a]:
            for s in sources_of[t]:
                touched.setdefault(block_of[s], []).append(s)
        for b, hit in touched.items():
            if len(hit) == len(blocks[b]):
                continue
            hits = set(hit)
            blocks[b] = [s for s in blocks[b] if s not in hits]
            new = len(blocks)
            blocks.append(hit)
            for s in hit:
                block_of[s] = new
            small = new if len(hit) <= len(blocks[b]) else b
            for cc in range(len(inverse)):
                work.add((new, cc) if (b, cc) in work else (small, cc))
    return block_of


def _quotient(dfa: CharDFA, block: list[int]) -> CharDFA:
    """``dfa``'s states merged by ``block`` (the dead state's block, numbered last, dropped), the
    blocks reachable from the start numbered breadth-first."""
    dead = block[-1]
    if block[0] == dead:
        return CharDFA([[]], [False])
    number = {block[0]: 0}
    order = [0]
    for s in order:
        for _, _, t in dfa.edges[s]:
            b = block[t]
            if b != dead and b not in number:
                number[b] = len(order)
                order.append(t)
    edges: list[list[Edge]] = []
    for s in order:
        row: list[Edge] = []
        for lo, hi, t in sorted(dfa.edges[s]):
            if block[t] == dead:
                continue
            target = number[block[t]]
            if row and row[-1][2] == target and row[-1][1] + 1 == lo:
                row[-1] = (row[-1][0], hi, target)
            else:
                row.append((lo, hi, target))
        edges.append(row)
    return CharDFA(edges, [dfa.accepting[s] for s in order])


class Rx:
    """A regex under construction: text, whether it is one unit (safe to quantify), whether it has a
    top-level ``|``, and its group nesting depth."""

    __slots__ = ("alt", "atom", "depth", "text")

    def __init__(self, text: str, *, atom: bool, alt: bool = False, depth: int = 0) -> None:
        self.text, self.atom, self.alt, self.depth = text, atom, alt, depth


EPS = Rx("", atom=True)
"""The empty string."""


def group(x: Rx) -> Rx:
    """``x`` as one unit."""
    return x if x.atom else Rx("(?:" + x.text + ")", atom=True, depth=x.depth + 1)


def cat(a: Rx, b: Rx) -> Rx:
    """``a`` then ``b``."""
    if not a.text:
        return b
    if not b.text:
        return a
    a = group(a) if a.alt else a
    b = group(b) if b.alt else b
    return Rx(a.text + b.text, atom=False, depth=max(a.depth, b.depth))


def alt(options: list[Rx]) -> Rx:
    """Any of ``options`` (duplicates dropped; an empty option makes the rest optional)."""
    seen: dict[str, Rx] = {}
    for o in options:
        seen.setdefault(o.text, o)
    opts = list(seen.values())
    if len(opts) == 1:
        return opts[0]
    if "" in seen:
        rest = [o for o in opts if o.text]
        body = rest[0] if len(rest) == 1 else alt(rest)
        g = group(body)
        return Rx(g.text + "?", atom=False, depth=g.depth)
    return Rx("|".join(o.text for o in opts), atom=False, alt=True, depth=max(o.depth for o in opts))


def star(x: Rx) -> Rx:
    """Zero or more ``x``."""
    if not x.text:
        return x
    g = group(x)
    return Rx(g.text + "*", atom=False, depth=g.depth)


def to_regex(dfa: CharDFA, label: Callable[[Ranges], str], *, max_length: int, max_depth: int = 80) -> str | None:
    """A regex (safe to concatenate) for the language of the trimmed, non-empty ``dfa``, by state
    elimination.

    ``label(ranges)`` renders one edge (it must return a single unit). None when the regex would be
    longer than ``max_length`` characters or nest groups deeper than ``max_depth``.
    """
    n = dfa.n_states
    init, final = n, n + 1
    out: dict[int, dict[int, Rx]] = {s: {} for s in range(n + 2)}
    inc: dict[int, set[int]] = {s: set() for s in range(n + 2)}
    for s, row in enumerate(dfa.edges):
        by_target: dict[int, list[tuple[int, int]]] = {}
        for lo, hi, t in row:
            by_target.setdefault(t, []).append((lo, hi))
        for t, ranges in by_target.items():
            usable = normalize(ranges)  # surrogates never occur in text
            if usable:
                out[s][t] = Rx(label(usable), atom=True)
                inc[t].add(s)
        if dfa.accepting[s]:
            out[s][final] = EPS
            inc[final].add(s)
    out[init][0] = EPS
    inc[0].add(init)
    remaining = set(range(n))
    while remaining:
        k = min(remaining, key=lambda s: ((len(inc[s]) - (s in inc[s])) * (len(out[s]) - (s in out[s])), s))
        remaining.discard(k)
        loop = out[k].pop(k, None)
        inc[k].discard(k)
        middle = star(loop) if loop is not None else EPS
        for p in inc[k]:
            a = out[p].pop(k)
            for q, b in out[k].items():
                piece = cat(cat(a, middle), b)
                old = out[p].get(q)
                new = piece if old is None else alt([old, piece])
                if len(new.text) > max_length or new.depth > max_depth:
                    return None
                out[p][q] = new
                inc[q].add(p)
        for q in out[k]:
            inc[q].discard(k)
        out[k] = {}
        inc[k] = set()
    result = out[init].get(final)
    if result is None:
        return None
    return group(result).text if result.alt else result.text
