"""The expression form the GBNF and Lark readers produce, and its lowering to the rule form.

Both front ends describe a context-free grammar over characters: rules whose bodies are sequences,
alternations and repetitions of rule references and *regular* pieces (literals, character classes,
terminals). Lowering makes lexemes as large as exactness allows, because the runtime's cost grows with
the number of lexeme boundaries:

1. A rule that is not recursive and uses only such rules is regular: it is inlined, as a regex, into
   every place that uses it (within a size cap; a larger one stays a rule of its own).
2. Inside a rule, adjacent regular pieces merge into one regex, and regular alternatives into one.
3. Each remaining regular piece becomes one lexeme; a piece that can match the empty string becomes an
   optional lexeme of its non-empty part, and a piece that matches nothing drops its alternative.
4. A merged lexeme whose DFA would exceed ``max_lexeme_states`` is split back along its structure.

The lexeme boundaries change nothing in the language: the rule form lexes non-greedily, so a grammar's
language is exactly the character-level language of its rules.
"""

from __future__ import annotations

from bisect import bisect_right
from collections import Counter
from dataclasses import dataclass, field

from banister.errors import GrammarError, LimitError, RegexError
from banister.grammar.ebnf_regex import (
    NOTHING,
    alternate,
    concat,
    nullable,
    repeat,
    to_pattern,
    tree_size,
    without_empty,
)
from banister.grammar.ir import Grammar, GrammarBuilder, Lexeme, Ref, Symbol
from banister.regex import compile_regex
from banister.regex.nodes import Alternate, CharSet, Concat, Node, Repeat

INLINE_SIZE = 2_000
"""Largest regex (in tree nodes, a character set counting its ranges) merged into one lexeme."""
SHARE_STATES = 64
"""A regular rule whose DFA needs more states stays one shared lexeme instead of being copied into
its users (large Unicode classes or nested stars make DFAs that each copy would pay for again)."""
INLINE_DEPTH = 24
"""Deepest regex nesting inlined (banister's regex syntax caps group nesting at 100)."""


class GrammarSyntaxError(GrammarError):
    """A malformed GBNF or Lark grammar; ``line`` and ``column`` (1-based) locate the problem."""

    def __init__(self, message: str, line: int, column: int) -> None:
        self.line = line
        self.column = column
        super().__init__(f"line {line}, column {column}: {message}")


@dataclass(frozen=True)
class Limits:
    """Size settings shared by both front ends (see ``parse_gbnf`` for their meaning)."""

    max_rules: int
    max_repeat: int
    max_grammar_size: int
    max_lexeme_states: int


# ----------------------------------------------------------------------------------------------------
# The expression form


@dataclass(frozen=True, slots=True)
class Regular:
    """A regular piece of text: a regex node (no lookarounds)."""

    node: Node


@dataclass(frozen=True, slots=True)
class Name:
    """A reference to a rule; the position is where it was written (not part of equality)."""

    name: str
    offset: int = field(default=0, compare=False)


@dataclass(frozen=True, slots=True)
class Seq:
    items: tuple[Expr, ...]


@dataclass(frozen=True, slots=True)
class Alt:
    options: tuple[Expr, ...]


@dataclass(frozen=True, slots=True)
class Rep:
    item: Expr
    min: int
    max: int | None


Expr = Regular | Name | Seq | Alt | Rep


class Source:
    """Grammar text with 1-based line/column lookup for error messages."""

    def __init__(self, text: str) -> None:
        self.text = text
        self._starts = [0] + [i + 1 for i, ch in enumerate(text) if ch == "\n"]

    def where(self, offset: int) -> tuple[int, int]:
        line = bisect_right(self._starts, offset)
        return line, offset - self._starts[line - 1] + 1

    def error(self, message: str, offset: int) -> GrammarSyntaxError:
        return GrammarSyntaxError(message, *self.where(offset))

    def limit(self, message: str, offset: int, setting: str) -> LimitError:
        line, column = self.where(offset)
        return LimitError(f"line {line}, column {column}: {message}", setting)


def names_in(expr: Expr) -> list[Name]:
    """Every rule reference in ``expr``, in order."""
    out: list[Name] = []
    stack = [expr]
    while stack:
        e = stack.pop()
        if isinstance(e, Name):
            out.append(e)
        elif isinstance(e, Seq):
            stack.extend(reversed(e.items))
        elif isinstance(e, Alt):
            stack.extend(reversed(e.options))
        elif isinstance(e, Rep):
            stack.append(e.item)
    return out


def strongly_connected(graph: dict[str, list[str]]) -> list[list[str]]:
    """Tarjan's components of ``graph``, callees before callers (iterative: no recursion limit)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    out: list[list[str]] = []
    for root, edges in graph.items():
        if root in index:
            continue
        work = [(root, iter(edges))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            for child in children:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(graph[child])))
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    out.append(component)
    return out


def is_nothing(node: Node) -> bool:
    """Whether ``node`` matches no text at all."""
    if isinstance(node, CharSet):
        return not node.ranges
    if isinstance(node, Concat):
        return any(is_nothing(item) for item in node.items)
    if isinstance(node, Alternate):
        return all(is_nothing(option) for option in node.options)
    if isinstance(node, Repeat):
        return node.min > 0 and is_nothing(node.item)
    return False


def _depth(node: Node) -> int:
    if isinstance(node, Concat):
        return 1 + max((_depth(item) for item in node.items), default=0)
    if isinstance(node, Alternate):
        return 1 + max(_depth(option) for option in node.options)
    if isinstance(node, Repeat):
        return 1 + _depth(node.item)
    return 0


def _fits(node: Node) -> bool:
    return tree_size(node) <= INLINE_SIZE and _depth(node) <= INLINE_DEPTH


def _dfa_within(node: Node, max_states: int) -> bool:
    """Whether the DFA of ``node`` has at most ``max_states`` states."""
    try:
        dfa = compile_regex(to_pattern(node), max_states=max_states)
        dfa.expand_from(dfa.start)
    except LimitError:
        return False
    return True


# ----------------------------------------------------------------------------------------------------
# Lowering


class _Never(Exception):
    """Raised inside lowering when a sequence can match nothing (its alternative is dropped)."""


def lower(source: Source, rules: dict[str, Expr], start: str, limits: Limits) -> Grammar:
    """The rule-form grammar of ``rules`` starting at ``start``; every referenced name must be defined."""
    for body in rules.values():
        for ref in names_in(body):
            if ref.name not in rules:
                raise source.error(f"undefined rule {ref.name!r}", ref.offset)
    if start not in rules:
        raise source.error(f"no rule named {start!r} to start from", len(source.text))
    return _Lowering(rules, limits).run(start)


class _Lowering:
    def __init__(self, rules: dict[str, Expr], limits: Limits) -> None:
        self.rules = rules
        self.limits = limits
        self.builder = GrammarBuilder()
        self.inline: dict[str, Node] = {}
        self.lexemes: dict[str, Symbol] = {}
        self.spent = 0
        self.todo: list[str] = []
        self.done: set[str] = set()

    def need(self, name: str) -> Ref:
        """A reference to rule ``name``, queued for lowering."""
        if name not in self.done:
            self.done.add(name)
            self.todo.append(name)
        return Ref(name)

    def run(self, start: str) -> Grammar:
        reachable = self.reachable(start)
        graph = {name: [r.name for r in names_in(self.rules[name])] for name in reachable}
        uses = Counter(ref for refs in graph.values() for ref in refs)
        for component in strongly_connected(graph):
            name = component[0]
            if len(component) == 1 and name not in graph[name]:
                node = self.as_node(self.rules[name])
                if node is not None and _fits(node) and (uses[name] <= 1 or _dfa_within(node, SHARE_STATES)):
                    self.inline[name] = node
        self.need(start)
        while self.todo:
            name = self.todo.pop()
            body = self.simplify(self.rules[name])
            alternatives = []
            for option in body.options if isinstance(body, Alt) else (body,):
                try:
                    alternatives.extend(self.sequences(option))
                except _Never:
                    continue
            self.builder.rule(name, alternatives or [(Lexeme(to_pattern(NOTHING)),)])
        grammar = self.builder.build(start)
        if grammar.size > self.limits.max_grammar_size:
            raise LimitError(
                f"the grammar lowers to {grammar.size} symbols, above {self.limits.max_grammar_size}",
                "max_grammar_size",
            )
        return grammar

    def reachable(self, start: str) -> list[str]:
        seen, todo = {start}, [start]
        while todo:
            for ref in names_in(self.rules[todo.pop()]):
                if ref.name not in seen:
                    seen.add(ref.name)
                    todo.append(ref.name)
        return list(seen)

    def as_node(self, expr: Expr) -> Node | None:
        """``expr`` as one regex when it uses only inlined rules, else None."""
        if isinstance(expr, Regular):
            return expr.node
        if isinstance(expr, Name):
            return self.inline.get(expr.name)
        if isinstance(expr, Rep):
            item = self.as_node(expr.item)
            return None if item is None else repeat(item, expr.min, expr.max)
        parts = [self.as_node(e) for e in (expr.items if isinstance(expr, Seq) else expr.options)]
        if any(p is None for p in parts):
            return None
        return concat(parts) if isinstance(expr, Seq) else alternate(parts)  # type: ignore[arg-type]

    def simplify(self, expr: Expr) -> Expr:
        """Inline regular rules and merge adjacent regular pieces (keeping each merge within the caps)."""
        if isinstance(expr, Name):
            node = self.inline.get(expr.name)
            return expr if node is None else Regular(node)
        if isinstance(expr, Regular):
            return expr
        if isinstance(expr, Rep):
            item = self.simplify(expr.item)
            return Regular(repeat(item.node, expr.min, expr.max)) if isinstance(item, Regular) else Rep(item, expr.min, expr.max)
        flat: list[Expr] = []
        kind = Seq if isinstance(expr, Seq) else Alt
        for part in expr.items if isinstance(expr, Seq) else expr.options:
            part = self.simplify(part)
            if isinstance(part, kind):
                flat.extend(part.items if isinstance(part, Seq) else part.options)
            else:
                flat.append(part)
        merge = concat if kind is Seq else alternate
        out: list[Expr] = []
        for part in flat:
            if isinstance(part, Regular):
                if kind is Seq:
                    target = len(out) - 1 if out and isinstance(out[-1], Regular) else -1
                else:
                    target = max((i for i, o in enumerate(out) if isinstance(o, Regular)), default=-1)
                if target >= 0:
                    merged = merge((out[target].node, part.node))  # type: ignore[union-attr]
                    if _fits(merged):
                        out[target] = Regular(merged)
                        continue
            out.append(part)
        if len(out) == 1:
            return out[0]
        return Seq(tuple(out)) if kind is Seq else Alt(tuple(out))

    def sequences(self, expr: Expr) -> list[tuple[Symbol, ...]]:
        """The alternatives (symbol sequences) for one simplified option of a rule body."""
        if isinstance(expr, Regular):
            lexeme, empty = self.regular(expr.node)
            if lexeme is None:
                return [()]
            return [(lexeme,), ()] if empty else [(lexeme,)]
        items = expr.items if isinstance(expr, Seq) else (expr,)
        out: list[Symbol] = []
        for item in items:
            symbol = self.symbol(item)
            if symbol is not None:
                out.append(symbol)
        return [tuple(out)]

    def symbol(self, expr: Expr) -> Symbol | None:
        """One symbol for ``expr`` (None: it matches only the empty string; _Never: nothing)."""
        if isinstance(expr, Name):
            return self.need(expr.name)
        if isinstance(expr, Regular):
            lexeme, empty = self.regular(expr.node)
            if lexeme is None or not empty:
                return lexeme
            return self.spend(self.builder.optional(lexeme), 2)
        if isinstance(expr, Rep):
            try:
                item = self.symbol(expr.item)
            except _Never:
                if expr.min == 0:
                    return None
                raise
            if item is None:
                return None
            return self.repeat(item, expr.min, expr.max)
        alternatives: list[tuple[Symbol, ...]] = []
        for option in expr.options if isinstance(expr, Alt) else (expr,):
            try:
                alternatives.extend(self.sequences(option))
            except _Never:
                continue
        if not alternatives:
            raise _Never
        return self.spend(self.builder.choice(*alternatives), sum(len(a) + 1 for a in alternatives))

    def regular(self, node: Node) -> tuple[Symbol | None, bool]:
        """The lexeme for the non-empty texts of ``node`` (None if there are none) and whether
        ``node`` also matches the empty text; _Never if it matches nothing at all."""
        if is_nothing(node):
            raise _Never
        rest = without_empty(node)
        return (None if is_nothing(rest) else self.lexeme(rest)), nullable(node)

    def repeat(self, item: Symbol, low: int, high: int | None) -> Symbol:
        if (low, high) == (0, 1):
            return self.spend(self.builder.optional(item), 2)
        if (low, high) == (0, None):
            return self.spend(self.builder.star(item), 3)
        if (low, high) == (1, None):
            return self.spend(self.builder.plus(item), 3)
        return self.spend(self.builder.repeat(item, low, high), 3 * max(low, high or 0) + 6)

    def spend(self, symbol: Symbol, cost: int) -> Symbol:
        self.spent += cost
        if self.spent > self.limits.max_grammar_size:
            raise LimitError(
                f"the grammar lowers to more than {self.limits.max_grammar_size} symbols", "max_grammar_size"
            )
        return symbol

    def lexeme(self, node: Node) -> Symbol:
        """A symbol matching exactly ``node`` (non-nullable); split along its structure if its DFA is too large."""
        pattern = to_pattern(node)
        if pattern in self.lexemes:
            return self.lexemes[pattern]
        try:
            fits = _dfa_within(node, self.limits.max_lexeme_states)
        except RegexError as exc:  # e.g. a terminal nested deeper than the regex engine allows
            raise GrammarError(f"a lexeme the regex engine refuses ({exc}): {pattern[:200]!r}") from exc
        symbol = self.builder.lexeme(pattern) if fits else self.split(node)
        self.lexemes[pattern] = symbol
        return symbol

    def split(self, node: Node) -> Symbol:
        """``node`` as a small grammar of smaller lexemes (for a regex whose DFA is too large)."""
        if isinstance(node, CharSet):
            return self.builder.lexeme(to_pattern(node))
        if isinstance(node, Repeat):
            return self.repeat(self.lexeme(without_empty(node.item)), node.min, node.max)
        parts = node.items if isinstance(node, Concat) else node.options  # type: ignore[union-attr]
        expr = (Seq if isinstance(node, Concat) else Alt)(tuple(Regular(p) for p in parts))
        symbol = self.symbol(expr)
        if symbol is None:  # unreachable: ``node`` matches some non-empty text
            raise GrammarError(f"a non-empty regex lowered to nothing: {to_pattern(node)[:200]!r}")
        return symbol
