"""A grammar without recursion through the middle of a rule, as one regex (``json_schema_to_regex``).

Strongly connected groups of rules are solved bottom-up: a rule outside any cycle is the alternation of
its alternatives; a cycle whose references all sit at the end of alternatives (right-linear: member
sequences, repeated blocks) or all at the start (left-linear: lists) is an automaton, solved by state
elimination. Any other cycle is real recursion (a recursive schema) and has no regex.
"""

from __future__ import annotations

from banister.errors import LimitError, SchemaError
from banister.grammar.ebnf_lower import strongly_connected
from banister.grammar.ir import Grammar, Lexeme, Ref, Symbol
from banister.grammar.json_automata import EPS, Rx, alt, cat, star


def grammar_to_regex(grammar: Grammar, *, max_length: int) -> str:
    """One regex for the language of ``grammar``; SchemaError for recursion, LimitError past ``max_length``."""
    solved: dict[str, Rx | None] = {}
    outside: dict[str, set[str]] = {}
    for name, alternatives in grammar.rules.items():
        for a in alternatives:
            for s in a:
                if isinstance(s, Ref):
                    outside.setdefault(s.name, set()).add(name)
    plans = []
    for component in _components(grammar):
        members = set(component)
        positions = [
            (i, len(a))
            for n in component
            for a in grammar.rules[n]
            for i, s in enumerate(a)
            if isinstance(s, Ref) and s.name in members
        ]
        right = all(i == n - 1 for i, n in positions)
        if not right and not all(i == 0 for i, _ in positions):
            raise SchemaError("a recursive schema has no regex", "", "$ref")
        plans.append((component, members, bool(positions), right))
    for component, members, cyclic, right in plans:
        if not cyclic:
            solved[component[0]] = _alternation(grammar, component[0], solved, max_length)
            continue
        for name in component:
            entry = name == grammar.start or bool(outside.get(name, set()) - members)
            solved[name] = (
                _solve_cycle(grammar, component, name, solved, right=right, max_length=max_length) if entry else None
            )
    result = solved[grammar.start]
    return "[]" if result is None else result.text


def _symbol(sym: Symbol, solved: dict[str, Rx | None]) -> Rx | None:
    if isinstance(sym, Lexeme):
        return Rx("(?:" + sym.pattern + ")", atom=True, depth=1)
    return solved[sym.name]


def _sequence(symbols: tuple[Symbol, ...], solved: dict[str, Rx | None]) -> Rx | None:
    out = EPS
    for sym in symbols:
        part = _symbol(sym, solved)
        if part is None:
            return None
        out = cat(out, part)
    return out


def _check(rx: Rx | None, max_length: int) -> Rx | None:
    if rx is not None and len(rx.text) > max_length:
        raise LimitError(f"the regex would be longer than {max_length} characters", setting="max_inline_regex_length")
    return rx


def _alternation(grammar: Grammar, name: str, solved: dict[str, Rx | None], max_length: int) -> Rx | None:
    options = [r for r in (_sequence(a, solved) for a in grammar.rules[name]) if r is not None]
    return _check(alt(options), max_length) if options else None


def _solve_cycle(
    grammar: Grammar, component: list[str], target: str, solved: dict[str, Rx | None], *, right: bool, max_length: int
) -> Rx | None:
    """State elimination over the rules of one cycle. Right-linear: paths from ``target`` to the end;
    left-linear: paths from the start to ``target`` (``R -> T x`` is an edge ``T -> R`` labelled x)."""
    members = set(component)
    source, sink = "<source>", "<sink>"
    edges: dict[str, dict[str, Rx]] = {n: {} for n in [*component, source, sink]}

    def add(a: str, b: str, label: Rx) -> None:
        old = edges[a].get(b)
        edges[a][b] = label if old is None else alt([old, label])

    for name in component:
        for alternative in grammar.rules[name]:
            if right:
                last = alternative[-1] if alternative else None
                inner = isinstance(last, Ref) and last.name in members
                label = _sequence(alternative[:-1] if inner else alternative, solved)
                if label is not None:
                    add(name, last.name if inner else sink, label)  # type: ignore[union-attr]
            else:
                first = alternative[0] if alternative else None
                inner = isinstance(first, Ref) and first.name in members
                label = _sequence(alternative[1:] if inner else alternative, solved)
                if label is not None:
                    add(first.name if inner else source, name, label)  # type: ignore[union-attr]
    if right:
        add(source, target, EPS)
    else:
        add(target, sink, EPS)
    for k in component:
        loop = edges[k].pop(k, None)
        middle = star(loop) if loop is not None else EPS
        incoming = [p for p in edges if k in edges[p]]
        for p in incoming:
            a = edges[p].pop(k)
            for q, b in edges[k].items():
                add(p, q, _check(cat(cat(a, middle), b), max_length))  # type: ignore[arg-type]
        edges[k] = {}
    return edges[source].get(sink)


def _components(grammar: Grammar) -> list[list[str]]:
    """Strongly connected components, dependencies first."""
    graph = {name: [s.name for alt in alts for s in alt if isinstance(s, Ref)] for name, alts in grammar.rules.items()}
    return strongly_connected(graph)
