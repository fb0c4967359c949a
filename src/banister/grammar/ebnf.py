"""GBNF and Lark grammars to the rule form (:class:`~banister.grammar.ir.Grammar`).

The syntax is always stated by the caller: :func:`parse_gbnf` for llama.cpp's GBNF, :func:`parse_lark`
for Lark. Both read the grammar as an exact context-free language over characters (see
``docs/grammars.md``); malformed text raises :class:`GrammarSyntaxError` naming the line and column,
and size settings raise :class:`~banister.errors.LimitError`.
"""

from __future__ import annotations

from collections.abc import Mapping

from banister.grammar.ebnf_lark import LarkReader
from banister.grammar.ebnf_lower import (
    Alt,
    Expr,
    GrammarSyntaxError,
    Limits,
    Name,
    Regular,
    Rep,
    Seq,
    Source,
    lower,
)
from banister.grammar.ebnf_regex import ANY, chars, literal
from banister.grammar.ir import Grammar
from banister.regex import charset
from banister.regex.nodes import Node
from banister.regex.utf8 import MAX_CODE_POINT, SURROGATE_HI, SURROGATE_LO

__all__ = ["GrammarSyntaxError", "parse_gbnf", "parse_lark"]

MAX_NESTING = 100
"""Deepest nesting of groups a grammar may use."""

_GBNF_ESCAPES = {"n": "\n", "r": "\r", "t": "\t", "\\": "\\", '"': '"', "[": "[", "]": "]", "-": "-"}
_NAME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_")


def parse_gbnf(
    text: str,
    *,
    start: str = "root",
    max_rules: int = 50_000,
    max_repeat: int = 10_000,
    max_grammar_size: int = 2_000_000,
    max_lexeme_states: int = 500,
) -> Grammar:
    """The grammar of GBNF ``text`` (llama.cpp's dialect), starting at rule ``start``.

    Parameters
    ----------
    text:
        Rules ``name ::= ...``; a newline ends a rule except inside parentheses or after ``|``.
    start:
        The rule the whole output must match.
    max_rules:
        Most rules the text may define (LimitError past it, raised while reading).
    max_repeat:
        Largest bound in ``{m}``, ``{m,}``, ``{m,n}`` (LimitError past it).
    max_grammar_size:
        Most symbols of the lowered grammar (:attr:`Grammar.size`); LimitError past it.
    max_lexeme_states:
        A merged lexeme whose DFA needs more states is split into smaller lexemes instead.

    Raises :class:`GrammarSyntaxError` (with ``line`` and ``column``) for malformed text, a rule defined
    twice, an undefined rule or a missing start rule.
    """
    limits = Limits(max_rules, max_repeat, max_grammar_size, max_lexeme_states)
    reader = _GbnfReader(text, limits)
    rules = reader.read()
    return lower(reader.source, rules, start, limits)


def parse_lark(
    text: str,
    *,
    start: str = "start",
    modules: Mapping[str, str] | None = None,
    max_rules: int = 50_000,
    max_repeat: int = 10_000,
    max_grammar_size: int = 2_000_000,
    max_lexeme_states: int = 500,
) -> Grammar:
    """The grammar of Lark ``text``, starting at rule ``start``, read as an exact CFG over characters.

    ``%import common.NAME`` resolves against a built-in ``common`` module (Lark's usual terminals);
    ``modules`` maps further module names (or a replacement ``common``) to Lark source text. The
    limits mean what they mean for :func:`parse_gbnf`; ``max_repeat`` also bounds ``~ n..m`` and
    regex quantifiers.
    """
    limits = Limits(max_rules, max_repeat, max_grammar_size, max_lexeme_states)
    reader = LarkReader(text, limits, modules or {})
    rules = reader.read(start)
    return lower(reader.source, rules, reader.start_rule, limits)


class _GbnfReader:
    """Recursive descent over GBNF text; ``pos`` is the offset of the next unread character."""

    def __init__(self, text: str, limits: Limits) -> None:
        self.source = Source(text)
        self.text = text
        self.pos = 0
        self.limits = limits
        self.groups: list[int] = []
        self.positions: dict[str, int] = {}

    def error(self, message: str, offset: int | None = None) -> GrammarSyntaxError:
        return self.source.error(message, self.pos if offset is None else offset)

    def peek(self, offset: int = 0) -> str:
        i = self.pos + offset
        return self.text[i] if i < len(self.text) else ""

    def found(self) -> str:
        ch = self.peek()
        if not ch:
            return "the end of the grammar"
        return "a newline" if ch in "\r\n" else repr(ch)

    def skip(self, newlines: bool) -> None:
        """Skips blanks and ``#`` comments, and line breaks when ``newlines``."""
        text = self.text
        while self.pos < len(text):
            ch = text[self.pos]
            if ch in " \t" or (newlines and ch in "\r\n"):
                self.pos += 1
            elif ch == "#":
                while self.pos < len(text) and text[self.pos] not in "\r\n":
                    self.pos += 1
            else:
                return

    def read(self) -> dict[str, Expr]:
        rules: dict[str, Expr] = {}
        self.skip(newlines=True)
        while self.pos < len(self.text):
            name_at = self.pos
            name = self.name()
            if name is None:
                raise self.error(f"expected a rule name, found {self.found()}")
            self.skip(newlines=False)
            if not self.text.startswith("::=", self.pos):
                raise self.error(f"expected '::=' after the rule name {name!r}, found {self.found()}")
            self.pos += 3
            self.skip(newlines=True)
            body = self.alternates(nested=False)
            if self.peek() and self.peek() not in "\r\n":
                raise self.error(f"expected a term, '|' or the end of the line, found {self.found()}")
            if name in rules:
                line, column = self.source.where(self.positions[name])
                raise self.error(f"rule {name!r} is defined twice (first at line {line}, column {column})", name_at)
            rules[name] = body
            self.positions[name] = name_at
            if len(rules) > self.limits.max_rules:
                raise self.source.limit(f"more than {self.limits.max_rules} rules", name_at, "max_rules")
            self.skip(newlines=True)
        return rules

    def name(self) -> str | None:
        start = self.pos
        while self.pos < len(self.text) and self.text[self.pos] in _NAME_CHARS:
            self.pos += 1
        return self.text[start : self.pos] or None

    def alternates(self, nested: bool) -> Expr:
        options = [self.sequence(nested)]
        while True:
            if self.peek() == "|":
                self.pos += 1
                self.skip(newlines=True)
                options.append(self.sequence(nested))
                continue
            if not nested:  # a line that starts with '|' continues the rule
                saved = self.pos
                self.skip(newlines=True)
                if self.peek() == "|":
                    continue
                self.pos = saved
            break
        return options[0] if len(options) == 1 else Alt(tuple(options))

    def sequence(self, nested: bool) -> Expr:
        items: list[Expr] = []
        while True:
            term = self.term()
            if term is None:
                break
            self.skip(newlines=nested)
            while self.peek() in ("*", "+", "?", "{") and self.peek():
                term = self.quantified(term)
                self.skip(newlines=nested)
            items.append(term)
        return items[0] if len(items) == 1 else Seq(tuple(items))

    def term(self) -> Expr | None:
        ch = self.peek()
        start = self.pos
        if ch == '"':
            return Regular(literal(self.string()))
        if ch == "[":
            return Regular(self.char_class())
        if ch == ".":
            self.pos += 1
            return Regular(chars(ANY))
        if ch == "(":
            self.groups.append(start)
            if len(self.groups) > MAX_NESTING:
                raise self.error(f"groups nested more than {MAX_NESTING} deep")
            self.pos += 1
            self.skip(newlines=True)
            body = self.alternates(nested=True)
            if self.peek() != ")":
                line, column = self.source.where(start)
                raise self.error(f"expected ')' to close the group opened at line {line}, column {column}, found {self.found()}")
            self.pos += 1
            self.groups.pop()
            return body
        if ch == "<":
            raise self.error("token references (<...>) are not supported: write the text as a string")
        if ch in ("*", "+", "?", "{") and ch:
            raise self.error(f"nothing to repeat before {ch!r}")
        name = self.name()
        if name is None:
            return None
        rest = self.pos
        self.skip(newlines=True)
        if self.text.startswith("::=", self.pos):
            if self.groups:
                line, column = self.source.where(self.groups[-1])
                raise self.error(f"the group opened at line {line}, column {column} is not closed", start)
            raise self.error(f"expected the end of the line before the next rule {name!r}", start)
        self.pos = rest
        return Name(name, start)

    def quantified(self, term: Expr) -> Expr:
        start = self.pos
        ch = self.peek()
        self.pos += 1
        if ch != "{":
            return Rep(term, *{"*": (0, None), "+": (1, None), "?": (0, 1)}[ch])
        self.skip(newlines=False)
        low = self.number("a repetition count")
        self.skip(newlines=False)
        high: int | None = low
        if self.peek() == ",":
            self.pos += 1
            self.skip(newlines=False)
            high = self.number("a maximum or '}'") if self.peek().isdigit() else None
            self.skip(newlines=False)
        if self.peek() != "}":
            raise self.error(f"expected '}}' to close the repetition, found {self.found()}")
        self.pos += 1
        if high is not None and high < low:
            raise self.error(f"repetition maximum {high} is below the minimum {low}", start)
        if max(low, high or 0) > self.limits.max_repeat:
            raise self.source.limit(f"repetition bound above {self.limits.max_repeat}", start, "max_repeat")
        return Rep(term, low, high)

    def number(self, what: str) -> int:
        start = self.pos
        while self.peek().isdigit() and self.peek().isascii():
            self.pos += 1
        if start == self.pos:
            raise self.error(f"expected {what}, found {self.found()}")
        return int(self.text[start : self.pos])

    def char(self, where: str) -> int:
        """One code point of a string or class, reading an escape if one starts here."""
        start = self.pos
        ch = self.peek()
        if not ch:
            raise self.error(f"unterminated {where}")
        if ch != "\\":
            self.pos += 1
            return ord(ch)
        code = self.peek(1)
        if code in _GBNF_ESCAPES:
            self.pos += 2
            return ord(_GBNF_ESCAPES[code])
        digits = {"x": 2, "u": 4, "U": 8}.get(code)
        if digits is None:
            shown = code if code else "end of grammar"
            raise self.error(f"unknown escape '\\{shown}' (known: \\n \\r \\t \\\\ \\\" \\[ \\] \\- \\x \\u \\U)")
        hex_text = self.text[self.pos + 2 : self.pos + 2 + digits]
        if len(hex_text) < digits or any(c not in "0123456789abcdefABCDEF" for c in hex_text):
            raise self.error(f"expected {digits} hex digits after '\\{code}'")
        value = int(hex_text, 16)
        if value > MAX_CODE_POINT or SURROGATE_LO <= value <= SURROGATE_HI:
            raise self.error(f"'\\{code}{hex_text}' is not a Unicode scalar value", start)
        self.pos += 2 + digits
        return value

    def string(self) -> str:
        start = self.pos
        self.pos += 1
        out = []
        while self.peek() != '"':
            if not self.peek():
                raise self.error("unterminated string literal", start)
            out.append(chr(self.char("string literal")))
        self.pos += 1
        return "".join(out)

    def char_class(self) -> Node:
        start = self.pos
        self.pos += 1
        negated = self.peek() == "^"
        if negated:
            self.pos += 1
        ranges: list[tuple[int, int]] = []
        while self.peek() != "]":
            if not self.peek():
                raise self.error("unterminated character class", start)
            item_at = self.pos
            low = self.char("character class")
            high = low
            if self.peek() == "-" and self.peek(1) not in ("]", ""):
                self.pos += 1
                high = self.char("character class")
                if high < low:
                    raise self.error("character range out of order", item_at)
            ranges.append((low, high))
        self.pos += 1
        normal = charset.normalize(ranges)
        return chars(charset.negate(normal) if negated else normal)

