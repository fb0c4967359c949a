"""AST -> byte-level NFA over UTF-8.

States are integers. A state may carry byte edges ``(lo, hi, target)``, plain epsilon edges, and two
kinds of conditional epsilon edges: ``bol`` edges (``^``, usable only at offset 0) and ``eol`` edges
(``$``, usable only when no byte follows). Character sets become small DAGs of byte edges that share
common prefixes and suffixes, so ``[^"\\\\]`` costs about ten states whatever the size of the set.
"""

from __future__ import annotations

from functools import lru_cache

from banister.errors import LimitError
from banister.regex import charset
from banister.regex.charset import Ranges
from banister.regex.nodes import Absent, Alternate, Anchor, CharSet, Concat, Difference, Machine, Node, Repeat
from banister.regex.utf8 import ByteRange, utf8_sequences

Sequence = tuple[ByteRange, ...]


class NFA:
    """The automaton; ``universal`` is the search-mode trailing any-text loop (-1 in whole-match mode)."""

    def __init__(self) -> None:
        self.byte_edges: list[list[tuple[int, int, int]]] = []
        self.eps: list[list[int]] = []
        self.bol: list[list[int]] = []
        self.eol: list[list[int]] = []
        self.start = -1
        self.accept = -1
        self.universal = -1

    @property
    def n_states(self) -> int:
        return len(self.eps)

    def add_state(self) -> int:
        self.byte_edges.append([])
        self.eps.append([])
        self.bol.append([])
        self.eol.append([])
        return len(self.eps) - 1

    def add_char_set(self, source: int, ranges: Ranges, target: int) -> None:
        """Byte edges from ``source`` that reach ``target`` by exactly one code point of ``ranges``."""
        plan = _char_set_plan(ranges)
        base = len(self.eps) - 1
        for _ in range(len(plan) - 1):
            self.add_state()
        for node, edges in enumerate(plan):
            state = source if node == 0 else base + node
            self.byte_edges[state].extend((lo, hi, target if child < 0 else base + child) for lo, hi, child in edges)


Plan = tuple[tuple[tuple[int, int, int], ...], ...]


@lru_cache(maxsize=1024)
def _char_set_plan(ranges: Ranges) -> Plan:
    """The byte-edge DAG of a code-point set: node 0 is the source, child -1 the target.

    Sequences are grouped by their first byte range (shared prefixes) and identical groups of tails
    become one node (shared suffixes).
    """
    nodes: list[tuple[tuple[int, int, int], ...]] = [()]
    sequences = tuple(tuple(seq) for lo, hi in ranges for seq in utf8_sequences(lo, hi))
    if sequences:
        nodes[0] = _plan_edges(sequences, nodes, {})
    return tuple(nodes)


def _plan_edges(tails: tuple[Sequence, ...], nodes: list, made: dict[tuple[Sequence, ...], int]
                ) -> tuple[tuple[int, int, int], ...]:
    """The edges of the plan node reading ``tails`` (numbering new nodes in ``nodes``; ``made``: the
    nodes by their tails). Plain functions, not closures: a recursive closure is a reference cycle,
    left for the garbage collector at every call."""
    groups: dict[ByteRange, list[Sequence]] = {}
    for tail in tails:
        groups.setdefault(tail[0], []).append(tail[1:])
    return tuple((lo, hi, _plan_child(tuple(rests), nodes, made)) for (lo, hi), rests in groups.items())


def _plan_child(tails: tuple[Sequence, ...], nodes: list, made: dict[tuple[Sequence, ...], int]) -> int:
    if not tails[0]:
        return -1
    node = made.get(tails)
    if node is None:
        node = made[tails] = len(nodes)
        nodes.append(())
        nodes[node] = _plan_edges(tails, nodes, made)
    return node


@lru_cache(maxsize=64)
def _aho_corasick(strings: frozenset[str]) -> tuple[tuple[str, ...], tuple[str, ...], dict[tuple[str, str], str]]:
    """(proper prefixes by length, alphabet, moves): ``moves[(p, c)]`` is the longest suffix of
    ``p + c`` that is a proper prefix or a whole string (absent: the empty prefix)."""
    prefixes = tuple(sorted({s[:k] for s in strings for k in range(len(s))}, key=lambda p: (len(p), p)))
    known = set(prefixes) | strings
    alphabet = tuple(sorted({c for s in strings for c in s}))
    fail: dict[str, str] = {}
    moves: dict[tuple[str, str], str] = {}
    for p in prefixes:  # by length: a failure link is set before any longer prefix needs it
        if len(p) > 1:
            fail[p] = moves.get((fail[p[:-1]], p[-1]), "")
        else:
            fail[p] = ""
        for c in alphabet:
            if p + c in known:
                moves[(p, c)] = p + c
            elif p:
                target = moves.get((fail[p], c), "")
                if target:
                    moves[(p, c)] = target
    return prefixes, alphabet, moves


@lru_cache(maxsize=256)
def _absent_plan(node: Absent) -> tuple[int, tuple[tuple[int, Ranges, int], ...], Ranges]:
    """The Aho-Corasick automaton of ``node.strings`` over code points, for :meth:`_Builder.absent`.

    States ``0..n-1`` are the proper prefixes of the strings (0: the empty one); a state is the
    longest suffix of the text read that is such a prefix (exact because no string occurs inside
    another). Returns ``n``, the edges ``(state, code points, target)`` for characters of the strings'
    alphabet (target -1: ``stop`` completed; completing another string has no edge), and the
    alphabet, whose complement leads every state back to state 0.
    """
    prefixes, alphabet, moves = _aho_corasick(frozenset(node.strings))
    index = {p: i for i, p in enumerate(prefixes)}
    edges: list[tuple[int, Ranges, int]] = []
    for p in prefixes:
        by_target: dict[int, list[tuple[int, int]]] = {}
        for c in alphabet:
            q = moves.get((p, c), "")
            if q in index:
                by_target.setdefault(index[q], []).append((ord(c), ord(c)))
            elif q == node.stop:
                by_target.setdefault(-1, []).append((ord(c), ord(c)))
        edges.extend((index[p], charset.normalize(r), t) for t, r in by_target.items())
    return len(prefixes), tuple(edges), charset.normalize((ord(c), ord(c)) for c in alphabet)


@lru_cache(maxsize=64)
def _byte_trie(strings: tuple[str, ...]) -> tuple[tuple[dict[int, int], ...], frozenset[int]]:
    """The trie of the strings' UTF-8 bytes: each node's branches by byte (node 0 is the root), and the
    nodes that end a string."""
    children: list[dict[int, int]] = [{}]
    ends = set()
    for text in strings:
        node = 0
        for byte in text.encode("utf-8"):
            child = children[node].get(byte)
            if child is None:
                child = children[node][byte] = len(children)
                children.append({})
            node = child
        ends.add(node)
    return tuple(children), frozenset(ends)


@lru_cache(maxsize=64)
def _difference_plan(node: Difference) -> tuple[NFA, tuple[int, ...]]:
    """The NFA of ``node`` on its own, for :meth:`_Builder.difference`, and its final states (which lead
    on to what follows). It is the product of the base's NFA with the strings' byte trie: a state is a
    base state and the trie node of the text read so far, or none once the text has left the trie (only
    the states reachable from the start are made). A final state is the base's end at anything but the
    end of a string."""
    inner = NFA()
    inner.accept = inner.add_state()
    entry = _Builder(inner).build(node.base, inner.accept)
    children, ends = _byte_trie(node.strings)
    left = len(children)  # the text has left the trie
    product = NFA()
    index: dict[tuple[int, int], int] = {}
    todo: list[tuple[int, int]] = []

    def reach(state: int, trie: int) -> int:
        found = index.get((state, trie))
        if found is None:
            found = index[(state, trie)] = product.add_state()
            todo.append((state, trie))
        return found

    product.start = reach(entry, 0)
    finals = []
    while todo:
        state, trie = todo.pop()
        here = index[(state, trie)]
        product.eps[here].extend([reach(t, trie) for t in inner.eps[state]])
        product.bol[here].extend([reach(t, trie) for t in inner.bol[state]])
        product.eol[here].extend([reach(t, trie) for t in inner.eol[state]])
        branches = children[trie] if trie < left else {}
        edges = product.byte_edges[here]
        for lo, hi, t in inner.byte_edges[state]:
            for byte in sorted(b for b in branches if lo <= b <= hi):
                if lo < byte:
                    edges.append((lo, byte - 1, reach(t, left)))
                edges.append((byte, byte, reach(t, branches[byte])))
                lo = byte + 1
            if lo <= hi:
                edges.append((lo, hi, reach(t, left)))
        if state == inner.accept and trie not in ends:
            finals.append(here)
    return product, tuple(finals)


_EXPLORE_BOUND = 1 << 20
"""A difference's product is built (to count its states exactly) only when at most this many states
could be reachable; past it, :func:`nfa_size` reports that bound, more than any workable NFA limit."""


def nfa_size(node: Node) -> int:
    """The number of states :func:`build_nfa` creates for ``node`` (checked before building)."""
    if isinstance(node, Absent):
        n, edges, alphabet = _absent_plan(node)
        plans = sum(len(_char_set_plan(r)) - 1 for source, r, _ in edges for _ in range(1 + (node.nonempty and source == 0)))
        return n + 1 + node.nonempty + plans + len(_char_set_plan(charset.negate(alphabet))) - 1
    if isinstance(node, CharSet):
        return len(_char_set_plan(node.ranges))
    if isinstance(node, Difference):
        bound = (nfa_size(node.base) + 1) * (len(_byte_trie(node.strings)[0]) + 1)
        return bound if bound > _EXPLORE_BOUND else _difference_plan(node)[0].n_states
    if isinstance(node, Machine):
        return node.n_states + sum(nfa_size(label) for _, label, _ in node.edges)
    if isinstance(node, Concat):
        return sum(nfa_size(item) for item in node.items)
    if isinstance(node, Alternate):
        return 1 + sum(nfa_size(option) for option in node.options)
    if isinstance(node, Anchor):
        return 1
    item = nfa_size(node.item)
    if node.max is None:
        return 1 + item * max(node.min, 1)
    return node.max * item + (node.max - node.min)


def build_nfa(node: Node, *, search: bool, max_nfa_states: int) -> NFA:
    """The NFA of ``node``: whole-match, or (``search``) matching anywhere unless anchored."""
    needed = nfa_size(node) + (2 * len(_char_set_plan(charset.ANY)) + 1 if search else 1)
    if needed > max_nfa_states:
        raise LimitError(
            f"the regex needs about {needed} NFA states, more than max_nfa_states={max_nfa_states}",
            setting="max_nfa_states",
        )
    nfa = NFA()
    nfa.accept = nfa.add_state()
    end = nfa.accept
    if search:
        end = nfa.universal = nfa.add_state()
        nfa.add_char_set(end, charset.ANY, end)
        nfa.eps[end].append(nfa.accept)
    entry = _Builder(nfa).build(node, end)
    if search:
        loop = nfa.add_state()
        nfa.add_char_set(loop, charset.ANY, loop)
        nfa.eps[loop].append(entry)
        entry = loop
    nfa.start = entry
    return nfa


class _Builder:
    """Thompson construction, right to left: ``build(node, nxt)`` returns the entry state of ``node``."""

    def __init__(self, nfa: NFA) -> None:
        self.nfa = nfa

    def build(self, node: Node, nxt: int) -> int:
        nfa = self.nfa
        if isinstance(node, CharSet):
            state = nfa.add_state()
            nfa.add_char_set(state, node.ranges, nxt)
            return state
        if isinstance(node, Concat):
            for item in reversed(node.items):
                nxt = self.build(item, nxt)
            return nxt
        if isinstance(node, Alternate):
            state = nfa.add_state()
            nfa.eps[state].extend(self.build(option, nxt) for option in node.options)
            return state
        if isinstance(node, Anchor):
            state = nfa.add_state()
            (nfa.bol if node.kind == "start" else nfa.eol)[state].append(nxt)
            return state
        if isinstance(node, Absent):
            return self.absent(node, nxt)
        if isinstance(node, Machine):
            return self.machine(node, nxt)
        if isinstance(node, Difference):
            return self.difference(node, nxt)
        return self.repeat(node, nxt)

    def machine(self, node: Machine, nxt: int) -> int:
        """One hub state per automaton state; each edge is its label built into the target's hub, once
        per label and target: edges that read the same into the same state share their states, so the
        DFA reached through them is shared too (every state of a key automaton reads its escapes and
        non-ASCII characters alike; built per edge, each state had its own copy of those paths)."""
        nfa = self.nfa
        hubs = [nfa.add_state() for _ in range(node.n_states)]
        built: dict[tuple[Node, int], int] = {}
        for source, label, target in node.edges:
            entry = built.get((label, target))
            if entry is None:
                entry = built[label, target] = self.build(label, hubs[target])
            nfa.eps[hubs[source]].append(entry)
        for state in node.accepting:
            nfa.eps[hubs[state]].append(nxt)
        return hubs[node.start]

    def difference(self, node: Difference, nxt: int) -> int:
        """The product automaton of :func:`_difference_plan`, copied in; its final states lead to ``nxt``."""
        nfa = self.nfa
        plan, finals = _difference_plan(node)
        base = nfa.n_states
        for state in range(plan.n_states):
            nfa.add_state()
            nfa.byte_edges[base + state].extend((lo, hi, base + t) for lo, hi, t in plan.byte_edges[state])
            nfa.eps[base + state].extend(base + t for t in plan.eps[state])
            nfa.bol[base + state].extend(base + t for t in plan.bol[state])
            nfa.eol[base + state].extend(base + t for t in plan.eol[state])
        for state in finals:
            nfa.eps[base + state].append(nxt)
        return base + plan.start

    def absent(self, node: Absent, nxt: int) -> int:
        """The Aho-Corasick automaton itself: one NFA state per prefix, and one shared hub reading the
        characters outside the alphabet (so their UTF-8 byte states are shared by every prefix)."""
        nfa = self.nfa
        n, edges, alphabet = _absent_plan(node)
        states = [nfa.add_state() for _ in range(n)]
        hub = nfa.add_state()
        nfa.add_char_set(hub, charset.negate(alphabet), states[0])
        for source, ranges, target in edges:
            nfa.add_char_set(states[source], ranges, nxt if target < 0 else states[target])
        for state in states:
            nfa.eps[state].append(hub)
            if node.stop is None:
                nfa.eps[state].append(nxt)
        if not node.nonempty:
            return states[0]
        entry = nfa.add_state()  # state 0's edges without its empty match
        nfa.eps[entry].append(hub)
        for source, ranges, target in edges:
            if source == 0:
                nfa.add_char_set(entry, ranges, nxt if target < 0 else states[target])
        return entry

    def repeat(self, node: Repeat, nxt: int) -> int:
        nfa = self.nfa
        if nfa_size(node.item) == 0:  # builds no state: matches only the empty string, so does any repeat
            return nxt
        if node.max is None:
            loop = nfa.add_state()
            body = self.build(node.item, loop)
            nfa.eps[loop].extend((body, nxt))
            entry = loop if node.min == 0 else body
            mandatory = max(node.min - 1, 0)
        else:
            entry = nxt
            for _ in range(node.max - node.min):
                optional = nfa.add_state()
                nfa.eps[optional].extend((self.build(node.item, entry), nxt))
                entry = optional
            mandatory = node.min
        for _ in range(mandatory):
            entry = self.build(node.item, entry)
        return entry
