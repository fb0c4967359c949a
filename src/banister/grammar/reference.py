"""A slow, obviously exact membership check for the rule form: Earley over the whole text.

It exists as an oracle for the fast recogniser and for front ends' tests: scanning a lexeme at
position ``i`` runs its DFA over the rest of the text and adds an item at every end where it accepts.
"""

from __future__ import annotations

from banister.grammar.ir import Grammar, Lexeme, Ref
from banister.regex import DEAD, compile_regex


def nullable_rules(grammar: Grammar) -> frozenset[str]:
    """Nonterminals that derive the empty string (lexemes never do)."""
    nullable: set[str] = set()
    changed = True
    while changed:
        changed = False
        for name, alternatives in grammar.rules.items():
            if name not in nullable and any(
                all(isinstance(s, Ref) and s.name in nullable for s in alt) for alt in alternatives
            ):
                nullable.add(name)
                changed = True
    return frozenset(nullable)


def matches(grammar: Grammar, text: str | bytes) -> bool:
    """Whether the whole ``text`` is in the grammar's language."""
    data = text.encode("utf-8") if isinstance(text, str) else text
    nullable = nullable_rules(grammar)
    dfas = {lex: compile_regex(lex.pattern) for lex in grammar.lexemes}
    n = len(data)
    charts: list[set[tuple[str, int, int, int]]] = [set() for _ in range(n + 1)]
    charts[0] = {(grammar.start, a, 0, 0) for a in range(len(grammar.rules[grammar.start]))}
    for i in range(n + 1):
        agenda = list(charts[i])
        while agenda:
            name, a, dot, origin = agenda.pop()
            alt = grammar.rules[name][a]
            if dot == len(alt):  # complete: advance every item at `origin` waiting for `name`
                for (pn, pa, pd, po) in list(charts[origin]):
                    palt = grammar.rules[pn][pa]
                    if pd < len(palt) and palt[pd] == Ref(name):
                        _add(charts[i], agenda, (pn, pa, pd + 1, po))
                continue
            sym = alt[dot]
            if isinstance(sym, Ref):
                for b in range(len(grammar.rules[sym.name])):
                    _add(charts[i], agenda, (sym.name, b, 0, i))
                if sym.name in nullable:
                    _add(charts[i], agenda, (name, a, dot + 1, origin))
            elif isinstance(sym, Lexeme):
                dfa, state = dfas[sym], dfas[sym].start
                for j in range(i, n):
                    state = dfa.step(state, data[j])
                    if state == DEAD:
                        break
                    if dfa.is_accepting(state):
                        charts[j + 1].add((name, a, dot + 1, origin))
    return any(
        name == grammar.start and origin == 0 and dot == len(grammar.rules[name][a])
        for (name, a, dot, origin) in charts[n]
    )


def _add(chart: set, agenda: list, item: tuple[str, int, int, int]) -> None:
    if item not in chart:
        chart.add(item)
        agenda.append(item)
