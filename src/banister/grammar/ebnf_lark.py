"""Lark grammar text to the expression form, read as an exact context-free language over characters.

Terminals become regular pieces (their regexes read with Python's ``re`` meaning, as ``re.fullmatch``
reads them); rules stay rules. ``%ignore`` is made exact by letting every terminal occurrence in a rule
start with any run of ignored text, and the start rule end with one (see ``docs/grammars.md``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import cast

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
    strongly_connected,
)
from banister.grammar.ebnf_regex import (
    EPSILON,
    NOTHING,
    PatternError,
    chars,
    concat,
    fold_case,
    literal,
    parse_python_regex,
)
from banister.regex import charset

MAX_NESTING = 100
"""Deepest nesting of parentheses and brackets a grammar may use."""
MAX_MODULE_DEPTH = 8
"""Deepest chain of modules importing modules."""
MAX_TEMPLATE_ARGUMENT = 10_000
"""Largest template argument list (expression nodes), which bounds templates that grow their arguments."""

COMMON = r"""
// The built-in `common` module: Lark's usual terminals, each meaning the tokens Lark's lexer cuts.
DIGIT: "0".."9"
HEXDIGIT: "a".."f" | "A".."F" | DIGIT
INT: DIGIT+
SIGNED_INT: ["+" | "-"] INT
DECIMAL: INT "." INT? | "." INT
_EXP: ("e" | "E") SIGNED_INT
FLOAT: INT _EXP | DECIMAL _EXP?
SIGNED_FLOAT: ["+" | "-"] FLOAT
NUMBER: FLOAT | INT
SIGNED_NUMBER: ["+" | "-"] NUMBER
_STRING_INNER: /.*/
_STRING_ESC_INNER: /(.*[^\\\n])?(\\\\)*/
ESCAPED_STRING: "\"" /([^"\\\n]|\\.)*/ "\""
LCASE_LETTER: "a".."z"
UCASE_LETTER: "A".."Z"
LETTER: UCASE_LETTER | LCASE_LETTER
WORD: LETTER+
CNAME: ("_" | LETTER) ("_" | LETTER | DIGIT)*
WS_INLINE: (" " | /\t/)+
WS: /[ \t\f\r\n]/+
CR: /\r/
LF: /\n/
NEWLINE: (CR? LF)+
SH_COMMENT: /#[^\n]*/
CPP_COMMENT: /\/\/[^\n]*/
C_COMMENT: /\/\*([^*]|\*+[^*\/])*\*+\//
SQL_COMMENT: /--[^\n]*/
"""

_TOKEN = re.compile(
    r"""
    (?P<nl>(?:[ \t\f]*(?:\r?\n|\r))+)
  | (?P<space>[ \t\f]+)
  | (?P<comment>//[^\n]*|\#[^\n]*)
  | (?P<name>[A-Za-z_][A-Za-z0-9_]*)
  | (?P<number>-?[0-9]+)
  | (?P<directive>%[A-Za-z_]*)
  | (?P<punct>->|\.\.|[:|()\[\]{},.~+*?!])
  | (?P<string>")
  | (?P<regex>/)
    """,
    re.VERBOSE,
)
_STOP = frozenset({"|", ")", "]", "}", ",", ":", "nl", "eof", "->"})
_IGNORED = "%ignored"
"""The rule for a run of ignored text."""
_DIRECTIVES = "%ignore, %import, %declare, %override, %extend"


@dataclass(frozen=True, slots=True)
class _Token:
    kind: str  # nl, eof, name, number, directive, string, regex, or the punctuation itself
    text: str
    offset: int
    value: object = None


@dataclass(frozen=True, slots=True)
class _Use:
    """A template instantiation ``name{args}``."""

    name: str
    args: tuple[_LExpr, ...]
    offset: int = field(default=0, compare=False)


_LExpr = Expr | _Use


@dataclass
class _Definition:
    name: str
    terminal: bool
    params: tuple[str, ...]
    body: _LExpr
    offset: int


def _is_terminal(name: str) -> bool | None:
    """True for TERMINAL names, False for rule names, None for names that mix cases."""
    core = name.lstrip("_")
    if not core:
        return None
    if core[0].isupper():
        return None if any(c.islower() for c in core) else True
    return None if any(c.isupper() for c in core) else False


class LarkReader:
    """Reads one Lark grammar (or module) and assembles the rules for lowering."""

    def __init__(
        self,
        text: str,
        limits: Limits,
        modules: Mapping[str, str],
        *,
        module_name: str | None = None,
        depth: int = 0,
        cache: dict[str, LarkReader] | None = None,
    ) -> None:
        self.source = Source(text)
        self.text = text
        self.limits = limits
        self.modules = modules
        self.module_name = module_name
        self.depth = depth
        self.cache: dict[str, LarkReader] = {} if cache is None else cache
        self.tokens = self.tokenize()
        self.at = 0
        self.nesting = 0
        self.defs: dict[str, _Definition] = {}
        self.ignores: list[tuple[_LExpr, int]] = []
        self.start_rule = ""
        self.read_definitions()

    # -- errors and tokens -------------------------------------------------------------------------

    def error(self, message: str, offset: int) -> GrammarSyntaxError:
        if self.module_name is not None:
            message = f"in module {self.module_name!r}: {message}"
        return self.source.error(message, offset)

    def tokenize(self) -> list[_Token]:
        text = self.text
        out: list[_Token] = []
        pos = 0
        while pos < len(text):
            m = _TOKEN.match(text, pos)
            if m is None:
                raise self.error(f"unexpected character {text[pos]!r}", pos)
            kind = m.lastgroup or ""
            if kind == "string":
                out.append(self.string_token(pos))
                pos = out[-1].offset + len(out[-1].text)
                continue
            if kind == "regex":
                out.append(self.regex_token(pos))
                pos = out[-1].offset + len(out[-1].text)
                continue
            if kind == "nl":
                if not out or out[-1].kind != "nl":
                    out.append(_Token("nl", m.group(), m.start() + m.group().find("\n") if "\n" in m.group() else m.start()))
            elif kind == "punct":
                out.append(_Token(m.group(), m.group(), pos))
            elif kind not in ("space", "comment"):
                out.append(_Token(kind, m.group(), pos))
            pos = m.end()
        out.append(_Token("eof", "", len(text)))
        return out

    def string_token(self, start: int) -> _Token:
        text = self.text
        pos = start + 1
        chars_out: list[str] = []
        while True:
            if pos >= len(text) or text[pos] in "\r\n":
                raise self.error("string literal not closed on this line", start)
            ch = text[pos]
            if ch == '"':
                pos += 1
                break
            if ch != "\\":
                chars_out.append(ch)
                pos += 1
                continue
            code = text[pos + 1] if pos + 1 < len(text) else ""
            if code in ("\\", '"'):
                chars_out.append(code)
                pos += 2
            elif code in ("n", "f", "t", "r"):
                chars_out.append({"n": "\n", "f": "\f", "t": "\t", "r": "\r"}[code])
                pos += 2
            elif code in ("x", "u", "U"):
                digits = {"x": 2, "u": 4, "U": 8}[code]
                hex_text = text[pos + 2 : pos + 2 + digits]
                if len(hex_text) < digits or any(c not in "0123456789abcdefABCDEF" for c in hex_text):
                    raise self.error(f"expected {digits} hex digits after '\\{code}'", pos)
                value = int(hex_text, 16)
                if value > 0x10FFFF or 0xD800 <= value <= 0xDFFF:
                    raise self.error(f"'\\{code}{hex_text}' is not a Unicode scalar value", pos)
                chars_out.append(chr(value))
                pos += 2 + digits
            elif code and code not in "\r\n":
                chars_out.extend(("\\", code))  # Lark keeps other escapes as written
                pos += 2
            else:
                raise self.error("string literal not closed on this line", start)
        fold = pos < len(text) and text[pos] == "i" and not (pos + 1 < len(text) and (text[pos + 1].isalnum() or text[pos + 1] == "_"))
        end = pos + 1 if fold else pos
        return _Token("string", text[start:end], start, ("".join(chars_out), fold))

    def regex_token(self, start: int) -> _Token:
        text = self.text
        pos = start + 1
        while True:
            if pos >= len(text) or text[pos] in "\r\n":
                raise self.error("regex literal not closed on this line", start)
            if text[pos] == "\\":
                pos += 2
                continue
            if text[pos] == "/":
                break
            pos += 1
        body = text[start + 1 : pos]
        pos += 1
        flags_start = pos
        while pos < len(text) and text[pos].isalpha():
            pos += 1
        flags = text[flags_start:pos]
        if body == "":
            raise self.error("empty regex", start)
        return _Token("regex", text[start:pos], start, (body, flags))

    @property
    def token(self) -> _Token:
        return self.tokens[self.at]

    def peek_kind(self, ahead: int = 1) -> str:
        i = min(self.at + ahead, len(self.tokens) - 1)
        return self.tokens[i].kind

    def advance(self) -> _Token:
        tok = self.tokens[self.at]
        self.at = min(self.at + 1, len(self.tokens) - 1)
        return tok

    def describe(self, tok: _Token) -> str:
        if tok.kind == "eof":
            return "the end of the grammar"
        if tok.kind == "nl":
            return "the end of the line"
        if tok.kind in ("name", "number", "directive", "string", "regex"):
            return f"{tok.kind} {tok.text}"
        return repr(tok.text)

    def expect(self, kind: str, what: str) -> _Token:
        if self.token.kind != kind:
            raise self.error(f"expected {what}, found {self.describe(self.token)}", self.token.offset)
        return self.advance()

    # -- definitions and statements ----------------------------------------------------------------

    def read_definitions(self) -> None:
        while self.token.kind != "eof":
            if self.token.kind == "nl":
                self.advance()
                continue
            if self.token.kind == "directive":
                self.statement()
            else:
                self.definition(mode="define")
            if self.token.kind not in ("nl", "eof"):
                raise self.error(f"expected the end of the line, found {self.describe(self.token)}", self.token.offset)

    def definition(self, mode: str) -> None:
        while self.token.kind in ("?", "!"):
            self.advance()
        tok = self.expect("name", "a rule or terminal name")
        terminal = _is_terminal(tok.text)
        if terminal is None:
            raise self.error(f"name {tok.text!r} mixes cases: rules are lower case, terminals upper case", tok.offset)
        params: tuple[str, ...] = ()
        if self.token.kind == "{":
            self.advance()
            names = [self.expect("name", "a template parameter").text]
            while self.token.kind == ",":
                self.advance()
                names.append(self.expect("name", "a template parameter").text)
            self.expect("}", "'}' after the template parameters")
            params = tuple(names)
            if terminal:
                raise self.error("terminals cannot be templates", tok.offset)
        if self.token.kind == ".":
            self.advance()
            self.expect("number", "a priority number after '.'")
        self.expect(":", f"':' after {tok.text!r}")
        body = self.expansions(nested=False)
        self.define(_Definition(tok.text, terminal, params, body, tok.offset), mode)

    def define(self, definition: _Definition, mode: str) -> None:
        name = definition.name
        old = self.defs.get(name)
        if mode == "define" and old is not None:
            line, column = self.source.where(old.offset)
            raise self.error(f"{name!r} is defined twice (first at line {line}, column {column})", definition.offset)
        if mode != "define" and old is None:
            raise self.error(f"%{mode} of {name!r}, which is not defined yet", definition.offset)
        if mode == "extend" and old is not None:
            definition.body = Alt((old.body, definition.body))  # type: ignore[arg-type]
        self.defs[name] = definition
        if len(self.defs) > self.limits.max_rules:
            raise self.source.limit(f"more than {self.limits.max_rules} rules and terminals", definition.offset, "max_rules")

    def statement(self) -> None:
        tok = self.advance()
        if tok.text == "%ignore":
            self.ignores.append((self.expansions(nested=False), tok.offset))
        elif tok.text == "%import":
            self.import_statement(tok.offset)
        elif tok.text == "%declare":
            names = [self.expect("name", "a name to declare")]
            while self.token.kind == "name":
                names.append(self.advance())
            for name in names:
                terminal = _is_terminal(name.text)
                if terminal is None:
                    raise self.error(f"name {name.text!r} mixes cases", name.offset)
                self.define(_Definition(name.text, terminal, (), Regular(NOTHING), name.offset), "define")
        elif tok.text in ("%override", "%extend"):
            self.definition(mode=tok.text[1:])
        else:
            raise self.error(f"unknown directive {tok.text!r} (supported: {_DIRECTIVES})", tok.offset)

    def import_statement(self, offset: int) -> None:
        if self.token.kind == ".":
            self.advance()
        path = [self.expect("name", "a module path").text]
        while self.token.kind == ".":
            self.advance()
            path.append(self.expect("name", "a name after '.'").text)
        if self.token.kind == "(":
            self.advance()
            names = [self.expect("name", "a name to import").text]
            while self.token.kind == ",":
                self.advance()
                names.append(self.expect("name", "a name to import").text)
            self.expect(")", "')' after the imported names")
            module = ".".join(path)
            for name in names:
                self.import_name(module, name, name, offset)
            return
        if len(path) < 2:
            raise self.error("expected module.NAME after %import", offset)
        alias = path[-1]
        if self.token.kind == "->":
            self.advance()
            alias = self.expect("name", "a name after '->'").text
        self.import_name(".".join(path[:-1]), path[-1], alias, offset)

    def module(self, module: str, offset: int) -> LarkReader:
        if module not in self.cache:
            text = self.modules.get(module, COMMON if module == "common" else None)
            if text is None:
                raise self.error(f"unknown module {module!r} (built in: common; pass others in `modules`)", offset)
            if self.depth >= MAX_MODULE_DEPTH:
                raise self.error(f"modules import each other more than {MAX_MODULE_DEPTH} deep", offset)
            self.cache[module] = LarkReader(
                text, self.limits, self.modules, module_name=module, depth=self.depth + 1, cache=self.cache
            )
        return self.cache[module]

    def import_name(self, module: str, name: str, alias: str, offset: int) -> None:
        source = self.module(module, offset)
        if name not in source.defs:
            raise self.error(f"module {module!r} has no definition {name!r}", offset)
        if _is_terminal(alias) != source.defs[name].terminal:
            raise self.error(f"cannot import {name!r} as {alias!r}: the alias must keep its kind", offset)
        mapping = {name: alias}
        todo = [name]
        while todo:
            definition = source.defs[todo.pop()]
            for ref in _names(definition.body):
                if ref in mapping or ref in definition.params:
                    continue
                if ref not in source.defs:
                    raise self.error(f"module {module!r}: {definition.name!r} uses undefined {ref!r}", offset)
                mapping[ref] = f"{module}.{ref}"
                todo.append(ref)
        for original, renamed in mapping.items():
            if renamed != alias and renamed in self.defs:
                continue  # a dependency imported before
            definition = source.defs[original]
            body = _rename(definition.body, mapping, definition.params, offset)
            self.define(_Definition(renamed, definition.terminal, definition.params, body, offset), "define")

    # -- expressions -------------------------------------------------------------------------------

    def expansions(self, nested: bool) -> _LExpr:
        options = [self.alias(nested)]
        while True:
            if self.token.kind == "|":
                self.advance()
                options.append(self.alias(nested))
            elif self.token.kind == "nl" and self.peek_kind() == "|":
                self.advance()
            else:
                break
        return options[0] if len(options) == 1 else Alt(tuple(options))  # type: ignore[arg-type]

    def alias(self, nested: bool) -> _LExpr:
        items: list[_LExpr] = []
        while True:
            if nested and self.token.kind == "nl":
                self.advance()
                continue
            if self.token.kind in _STOP:
                break
            items.append(self.expr())
        if self.token.kind == "->":
            self.advance()
            self.expect("name", "an alias name after '->'")
        if not items:
            return Regular(EPSILON)
        return items[0] if len(items) == 1 else Seq(tuple(items))  # type: ignore[arg-type]

    def expr(self) -> _LExpr:
        atom = self.atom()
        tok = self.token
        if tok.kind in ("+", "*", "?"):
            self.advance()
            return Rep(atom, *{"+": (1, None), "*": (0, None), "?": (0, 1)}[tok.kind])  # type: ignore[arg-type]
        if tok.kind == "~":
            self.advance()
            low = int(self.expect("number", "a count after '~'").text)
            high = low
            if self.token.kind == "..":
                self.advance()
                high = int(self.expect("number", "a maximum after '..'").text)
            if low < 0 or high < low:
                raise self.error(f"bad repetition range {low}..{high}", tok.offset)
            if high > self.limits.max_repeat:
                raise self.source.limit(f"repetition bound above {self.limits.max_repeat}", tok.offset, "max_repeat")
            return Rep(atom, low, high)  # type: ignore[arg-type]
        return atom

    def atom(self) -> _LExpr:
        tok = self.token
        if tok.kind in ("(", "["):
            self.nesting += 1
            if self.nesting > MAX_NESTING:
                raise self.error(f"parentheses nested more than {MAX_NESTING} deep", tok.offset)
            self.advance()
            body = self.expansions(nested=True)
            while self.token.kind == "nl":
                self.advance()
            closing = ")" if tok.kind == "(" else "]"
            line, column = self.source.where(tok.offset)
            self.expect(closing, f"{closing!r} to close the {tok.kind!r} at line {line}, column {column}")
            self.nesting -= 1
            return body if tok.kind == "(" else Rep(body, 0, 1)  # type: ignore[arg-type]
        if tok.kind == "string":
            self.advance()
            text, fold = cast(tuple[str, bool], tok.value)
            if self.token.kind == "..":
                return self.char_range(tok)
            if fold:
                return Regular(concat(chars(fold_case(charset.single(ord(c)))) for c in text))
            return Regular(literal(text))
        if tok.kind == "regex":
            self.advance()
            pattern, flags = cast(tuple[str, str], tok.value)
            try:
                return Regular(parse_python_regex(pattern, flags, max_repeat=self.limits.max_repeat))
            except PatternError as exc:
                where = tok.offset + 1 + exc.offset if exc.offset < len(pattern) else tok.offset
                if exc.setting is not None:
                    raise self.source.limit(f"regex: {exc}", where, exc.setting) from None
                raise self.error(f"bad regex: {exc}", where) from None
        if tok.kind == "name":
            self.advance()
            if self.token.kind != "{":
                return Name(tok.text, tok.offset)
            self.advance()
            args = [self.expansions(nested=True)]
            while self.token.kind == ",":
                self.advance()
                args.append(self.expansions(nested=True))
            self.expect("}", "'}' after the template arguments")
            return _Use(tok.text, tuple(args), tok.offset)
        if tok.kind in ("+", "*", "?", "~"):
            raise self.error(f"nothing to repeat before {tok.text!r} (a second operator needs parentheses)", tok.offset)
        raise self.error(f"expected a term, found {self.describe(tok)}", tok.offset)

    def char_range(self, first: _Token) -> _LExpr:
        self.advance()
        last = self.expect("string", 'a one-character string after ".."')
        low, high = first.value[0], last.value[0]  # type: ignore[index]
        if len(low) != 1 or len(high) != 1:
            raise self.error("a range needs one-character strings on both sides", first.offset)
        if ord(low) > ord(high):
            raise self.error(f"range {first.text}..{last.text} is out of order", first.offset)
        return Regular(chars([(ord(low), ord(high))]))

    # -- assembly ----------------------------------------------------------------------------------

    def read(self, start: str) -> dict[str, Expr]:
        """The rules for lowering: terminals as regular rules, ignores folded in; sets ``start_rule``."""
        rules: dict[str, Expr] = {}
        expander = _Expander(self, rules)
        terminals = {name for name, d in self.defs.items() if d.terminal}
        for name, definition in self.defs.items():
            if not definition.params:
                rules[name] = expander.expand(definition.body, {})
        for name in terminals:
            for ref in _names(rules[name]):
                if ref in self.defs and not self.defs[ref].terminal:
                    raise self.error(f"terminal {name!r} uses the rule {ref!r} (terminals may only use terminals)", self.defs[name].offset)
        graph = {name: [r for r in _names(rules[name]) if r in terminals] for name in terminals}
        for component in strongly_connected(graph):
            if len(component) > 1 or component[0] in graph[component[0]]:
                name = min(component, key=lambda n: self.defs[n].offset)
                raise self.error(f"terminal {name!r} is defined in terms of itself", self.defs[name].offset)
        ignored = [expander.expand(e, {}) for e, _ in self.ignores]
        for expr, (_, offset) in zip(ignored, self.ignores):
            for ref in _names(expr):
                if ref in self.defs and not self.defs[ref].terminal:
                    raise self.error(f"%ignore uses the rule {ref!r}; only terminals can be ignored", offset)
        skip: Expr | None = None
        if ignored:
            skip = Name(_IGNORED)
            rules[_IGNORED] = Rep(ignored[0] if len(ignored) == 1 else Alt(tuple(ignored)), 0, None)
            terminals.add(_IGNORED)
        for name in list(rules):
            if name not in terminals:
                rules[name] = _prefix_terminals(rules[name], terminals, skip)
        self.start_rule = start
        if skip is not None and start in rules:
            self.start_rule = f"{start}%ignored"
            rules[self.start_rule] = Seq((Name(start), skip))
        return rules


class _Expander:
    """Replaces template uses by instances (one rule per distinct argument list)."""

    def __init__(self, reader: LarkReader, rules: dict[str, Expr]) -> None:
        self.reader = reader
        self.rules = rules
        self.instances: dict[tuple[str, tuple[Expr, ...]], str] = {}

    def expand(self, expr: _LExpr, env: dict[str, Expr]) -> Expr:
        defs = self.reader.defs
        if isinstance(expr, Name):
            if expr.name in env:
                return env[expr.name]
            if expr.name in defs and defs[expr.name].params:
                raise self.reader.error(f"template {expr.name!r} needs arguments: {expr.name}{{...}}", expr.offset)
            return expr
        if isinstance(expr, Regular):
            return expr
        if isinstance(expr, Rep):
            return Rep(self.expand(expr.item, env), expr.min, expr.max)
        if isinstance(expr, Seq):
            return Seq(tuple(self.expand(e, env) for e in expr.items))
        if isinstance(expr, Alt):
            return Alt(tuple(self.expand(e, env) for e in expr.options))
        template = defs.get(expr.name)
        if template is None or not template.params:
            raise self.reader.error(f"{expr.name!r} is not a template", expr.offset)
        if len(template.params) != len(expr.args):
            raise self.reader.error(
                f"template {expr.name!r} takes {len(template.params)} arguments, got {len(expr.args)}", expr.offset
            )
        args = tuple(self.expand(a, env) for a in expr.args)
        size = sum(_size(a, {}) for a in args)
        if size > MAX_TEMPLATE_ARGUMENT:
            raise self.reader.source.limit(
                f"template arguments of {size} nodes (above {MAX_TEMPLATE_ARGUMENT})", expr.offset, "max_grammar_size"
            )
        key = (expr.name, args)
        if key not in self.instances:
            name = f"{expr.name}{{{len(self.instances)}}}"
            self.instances[key] = name
            if len(self.instances) + len(defs) > self.reader.limits.max_rules:
                raise self.reader.source.limit("too many template instances", expr.offset, "max_rules")
            self.rules[name] = self.expand(template.body, dict(zip(template.params, args)))
        return Name(self.instances[key], expr.offset)


def _names(expr: _LExpr) -> list[str]:
    out: list[str] = []
    stack = [expr]
    while stack:
        e = stack.pop()
        if isinstance(e, Name):
            out.append(e.name)
        elif isinstance(e, _Use):
            out.append(e.name)
            stack.extend(e.args)
        elif isinstance(e, Seq):
            stack.extend(e.items)
        elif isinstance(e, Alt):
            stack.extend(e.options)
        elif isinstance(e, Rep):
            stack.append(e.item)
    return out


def _size(expr: _LExpr, memo: dict[int, int]) -> int:
    """Expression nodes counted as a tree (shared subexpressions each time), memoised by identity."""
    key = id(expr)
    if key not in memo:
        if isinstance(expr, Seq):
            memo[key] = 1 + sum(_size(e, memo) for e in expr.items)
        elif isinstance(expr, Alt):
            memo[key] = 1 + sum(_size(e, memo) for e in expr.options)
        elif isinstance(expr, Rep):
            memo[key] = 1 + _size(expr.item, memo)
        elif isinstance(expr, _Use):
            memo[key] = 1 + sum(_size(e, memo) for e in expr.args)
        else:
            memo[key] = 1
    return memo[key]


def _rename(expr: _LExpr, mapping: dict[str, str], params: tuple[str, ...], offset: int) -> _LExpr:
    if isinstance(expr, Name):
        if expr.name in params:
            return expr
        return Name(mapping.get(expr.name, expr.name), offset)
    if isinstance(expr, _Use):
        args = tuple(_rename(a, mapping, params, offset) for a in expr.args)
        return _Use(mapping.get(expr.name, expr.name), args, offset)
    if isinstance(expr, Seq):
        return Seq(tuple(_rename(e, mapping, params, offset) for e in expr.items))  # type: ignore[misc]
    if isinstance(expr, Alt):
        return Alt(tuple(_rename(e, mapping, params, offset) for e in expr.options))  # type: ignore[misc]
    if isinstance(expr, Rep):
        return Rep(_rename(expr.item, mapping, params, offset), expr.min, expr.max)  # type: ignore[arg-type]
    return expr


def _prefix_terminals(expr: Expr, terminals: set[str], skip: Expr | None) -> Expr:
    """A rule body in which every terminal occurrence may be preceded by ignored text."""
    if skip is None:
        return expr
    if isinstance(expr, Name):
        return Seq((skip, expr)) if expr.name in terminals else expr
    if isinstance(expr, Regular):
        return expr if expr.node == EPSILON else Seq((skip, expr))
    if isinstance(expr, Seq):
        return Seq(tuple(_prefix_terminals(e, terminals, skip) for e in expr.items))
    if isinstance(expr, Alt):
        return Alt(tuple(_prefix_terminals(e, terminals, skip) for e in expr.options))
    return Rep(_prefix_terminals(expr.item, terminals, skip), expr.min, expr.max)

