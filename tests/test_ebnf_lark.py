"""Lark front end: every Lark grammar in the data compiles and accepts exactly its language.

Oracles: Python's ``json`` and ``ast``; the ``lark`` package itself (its LALR parser with its greedy,
contextual lexer) wherever the grammar is LALR(1); Python ``re.fullmatch`` for terminals. Our reading is
the exact CFG language: everything Lark accepts must be accepted; where a greedy lexer would cut
differently (a keyword glued to a name), we accept more, and ``test_documented_greedy_differences``
pins those cases down.
"""

from __future__ import annotations

import ast
import json
import random
import re
from functools import cache
from xml.etree import ElementTree

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_ebnf_support import (  # noqa: F401
    DATA,
    accepts,
    cached_dfas,
    lark_grammar,
    mutants,
    needs_data,
    read,
    sample,
)

from banister.errors import LimitError
from banister.grammar.ebnf import GrammarSyntaxError, parse_lark
from banister.grammar.ebnf_lark import COMMON

lark = pytest.importorskip("lark")

pytestmark = needs_data
SETTINGS = settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])
OUTLINES_COMMON = "lark/outlines/common.lark"

# file -> (start rule, the `common` module it is written against)
GRAMMARS = {
    "lark/outlines/json.lark": ("start", OUTLINES_COMMON),
    "lark/outlines/arithmetic.lark": ("start", OUTLINES_COMMON),
    "lark/lark-parser/json.lark": ("start", None),
    "lark/lark-parser/csv.lark": ("start", None),
    "lark/lark-parser/lark.lark": ("start", None),
    "lark/lark-parser/verilog.lark": ("start", None),
    "lark/lark-parser/python.lark": ("file_input", None),
    "lark/llguidance/lark.lark": ("start", None),
    "lark/llguidance/rfc.lark": ("start", None),
}
MODULES = ["lark/lark-parser/common.lark", "lark/lark-parser/unicode.lark", OUTLINES_COMMON]


def grammar(relative: str):  # type: ignore[no-untyped-def]
    start, common = GRAMMARS[relative]
    return lark_grammar(relative, start, common)


@cache
def lark_parser(relative: str):  # type: ignore[no-untyped-def]
    start, common = GRAMMARS[relative]
    paths = [str((DATA / common).parent)] if common else []
    return lark.Lark(read(relative), parser="lalr", start=start, import_paths=paths)


def lark_accepts(parser, text: str) -> bool:  # type: ignore[no-untyped-def]
    try:
        parser.parse(text)
    except lark.exceptions.LarkError:
        return False
    return True


def test_the_data_is_all_covered() -> None:
    files = {p.relative_to(DATA).as_posix() for p in DATA.glob("lark/**/*.lark")}
    assert files == set(GRAMMARS) | set(MODULES)


@pytest.mark.parametrize("relative", sorted(GRAMMARS))
def test_every_lark_grammar_compiles(relative: str) -> None:
    assert grammar(relative).lexemes


@pytest.mark.parametrize("relative", MODULES)
def test_every_terminal_of_the_modules_compiles(relative: str) -> None:
    text = read(relative)
    names = re.findall(r"^([A-Z_][A-Z0-9_]*)\s*:", text, re.MULTILINE)
    assert names
    for name in names:
        parsed = parse_lark(f"start: {name}\n%import common.{name}", modules={"common": text})
        assert parsed.lexemes


# --- agreement with the lark package on samples and mutants ----------------------------------------------

LALR_AGREES = ["lark/outlines/json.lark", "lark/outlines/arithmetic.lark", "lark/lark-parser/json.lark", "lark/lark-parser/csv.lark"]
LALR_SUBSET = ["lark/lark-parser/verilog.lark", "lark/lark-parser/lark.lark", "lark/llguidance/lark.lark"]


@pytest.mark.parametrize("relative", LALR_AGREES)
def test_same_language_as_lark(relative: str) -> None:
    """For these grammars the greedy lexer never cuts differently: both readings agree exactly."""
    ours, theirs = grammar(relative), lark_parser(relative)
    rng = random.Random(relative)
    for _ in range(40):
        text = sample(ours, rng)
        assert lark_accepts(theirs, text), text
        for mutant in mutants(text, rng, 3, 'ab1 "\n\t(){}[],:=+-*/_.\\eE'):
            assert accepts(ours, mutant) == lark_accepts(theirs, mutant), mutant


@pytest.mark.parametrize("relative", LALR_SUBSET)
def test_everything_lark_accepts_is_accepted(relative: str) -> None:
    ours, theirs = grammar(relative), lark_parser(relative)
    rng = random.Random(relative)
    for _ in range(15):
        text = sample(ours, rng, budget=8)
        for mutant in [text, *mutants(text, rng, 2, 'ab1 \n;(),"/*')]:
            if lark_accepts(theirs, mutant):
                assert accepts(ours, mutant), mutant


@pytest.mark.parametrize(
    ("relative", "text"),
    [
        ("lark/lark-parser/verilog.lark", "module m(a);\noutputa;\nendmodule"),  # keyword 'output' + name 'a'
        ("lark/lark-parser/python.lark", "x = lambdax: x\n"),  # keyword 'lambda' + name 'x'
        ("lark/lark-parser/python.lark", "x = 1.e\n"),  # '1' '.' 'e' (attribute), where Lark cuts '1.'
        ("lark/lark-parser/python.lark", 'x = "a"b"\n'),  # lazy /".*?"/ read as a whole match
        ("lark/lark-parser/lark.lark", "%import#L"),  # an empty comment "#", then the name L
    ],
)
def test_documented_greedy_differences(relative: str, text: str) -> None:
    """Texts in the exact CFG language that Lark's greedy lexer cuts differently (docs/grammars.md)."""
    assert accepts(grammar(relative), text)
    assert not lark_accepts(lark_parser(relative), text)


# --- JSON grammars: Python's json ------------------------------------------------------------------------

_scalars = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=6)
_json = st.recursive(_scalars, lambda kids: st.lists(kids, max_size=3) | st.dictionaries(st.text(max_size=4), kids, max_size=3), max_leaves=8)


@SETTINGS
@given(value=_json, indent=st.sampled_from([None, 2]), ascii_only=st.booleans())
def test_json_lark_accepts_json_dumps(value: object, indent: int | None, ascii_only: bool) -> None:
    text = json.dumps(value, indent=indent, ensure_ascii=ascii_only)
    assert accepts(grammar("lark/lark-parser/json.lark"), text)
    # outlines' ESCAPED_STRING refuses DEL and the C1 controls (U+007F..U+009F) that JSON allows raw
    if ascii_only or not re.search("[\x7f-\x9f]", text):
        assert accepts(grammar("lark/outlines/json.lark"), text)


def test_json_lark_examples() -> None:
    for relative in ["lark/lark-parser/json.lark", "lark/outlines/json.lark"]:
        g = grammar(relative)
        for text in ['{"a": [1, -2.5e3, "x\\"y", true, null]}', " [ ] ", '"\\u00e9"']:
            json.loads(text)
            assert accepts(g, text), text
        for text in ["[1, 2,]", '{"a" 1}', "[tru]", '"unterminated', "{1: 2}", ""]:
            with pytest.raises(ValueError):
                json.loads(text)
            assert not accepts(g, text), text


# --- arithmetic.lark: Python's ast ------------------------------------------------------------------------

_ARITH_NODES = (ast.Expression, ast.BinOp, ast.UnaryOp, ast.USub, ast.Add, ast.Sub, ast.Mult, ast.Div, ast.Constant)


def arithmetic_oracle(text: str) -> bool:
    """A Python expression of + - * / over unsigned numbers, unary minus and parentheses."""
    if not re.fullmatch(r"[0-9.eE+\-*/() \t]*", text):
        return False
    normalized = re.sub(r"(?<![\d.eE])0+(?=\d)", "", text)  # Lark's INT allows leading zeros
    try:
        tree = ast.parse(normalized.strip(" \t"), mode="eval")
    except SyntaxError:
        return False
    return all(isinstance(node, _ARITH_NODES) for node in ast.walk(tree))


@st.composite
def _arith(draw, depth: int = 3) -> str:  # type: ignore[no-untyped-def]
    blank = draw(st.sampled_from(["", " ", "\t "]))
    if depth == 0 or draw(st.integers(0, 2)) == 0:
        return blank + draw(st.from_regex(r"[1-9][0-9]{0,3}(\.[0-9]{1,2})?([eE][+-]?[1-9])?|0|\.5", fullmatch=True))
    kind = draw(st.integers(0, 2))
    if kind == 0:
        return f"{blank}-{draw(_arith(depth - 1))}"
    if kind == 1:
        return f"({draw(_arith(depth - 1))}){blank}"
    return f"{draw(_arith(depth - 1))}{blank}{draw(st.sampled_from('+-*/'))}{draw(_arith(depth - 1))}"


@SETTINGS
@given(text=_arith(), seed=st.integers(0, 2**16))
def test_arithmetic_lark_agrees_with_ast(text: str, seed: int) -> None:
    g = grammar("lark/outlines/arithmetic.lark")
    assert arithmetic_oracle(text) and accepts(g, text)
    for mutant in mutants(text, random.Random(seed), 4, "1.e+-*/() "):
        assert accepts(g, mutant) == arithmetic_oracle(mutant), mutant


# --- the other grammars: examples from their intent, checked against lark where it applies ----------------

EXAMPLES = {
    "lark/lark-parser/csv.lark": (
        ["# a b\n1,2\n", "#x,y\nab 1.5e3\n-2.0\t+3e1\n"],
        ["", "1,2\n", "# a\n", "# a\n1,2"],
    ),
    "lark/lark-parser/verilog.lark": (
        ["module m(a, b);\ninput a;\noutput b;\nassign b = ~a;\nendmodule", "// c\nmodule top;\nwire w;\nendmodule\n", ""],
        ["module m(a)\nendmodule", "module m; input ; endmodule", "module m;\nassign b = a &;\nendmodule"],
    ),
    "lark/lark-parser/lark.lark": (
        ["start: a+ b?\n", '?x: "a".."z" -> y\n| /b/i\n', "%import common.WS\n%ignore WS\n", ""],
        ["start: (a\n", "start a\n", "x: a |\n| b c)\n"],
    ),
    "lark/llguidance/lark.lark": (
        ["start: a+ b?\n", 'A.2: "a"~3\n', "%ignore /[ ]/\n"],
        ["start: (a\n", "start a\n", "x: ]\n"],
    ),
    "lark/lark-parser/python.lark": (
        ["x = 1\n", "def f(a, b=2, *c, **d): return a + b\n", "print([i ** 2 for i in range(10) if i % 2])\n", "from . import (a, b as c)\n"],
        ["x = = 1\n", "def f(:\n", "x = (1\n", "return\n1 +\n", "lambda: (yield)\n)"],
    ),
}


@pytest.mark.parametrize("relative", sorted(EXAMPLES))
def test_grammar_examples(relative: str) -> None:
    accepted, rejected = EXAMPLES[relative]
    g, parser = grammar(relative), lark_parser(relative)
    for text in accepted:
        assert accepts(g, text), text
        assert lark_accepts(parser, text), text
    for text in rejected:
        assert not accepts(g, text), text
        assert not lark_accepts(parser, text), text


def test_python_examples_agree_with_ast() -> None:
    accepted, rejected = EXAMPLES["lark/lark-parser/python.lark"]
    for text in accepted:
        ast.parse(text)
    for text in rejected:
        with pytest.raises(SyntaxError):
            ast.parse(text)


def test_python_blocks_need_the_postlexer() -> None:
    """_INDENT/_DEDENT are %declare'd (made by Lark's postlexer), so they match nothing here."""
    g = grammar("lark/lark-parser/python.lark")
    ast.parse("if x:\n    pass\n")
    assert not accepts(g, "if x:\n    pass\n")
    assert accepts(g, "if x: pass\n")


@pytest.mark.parametrize("relative", ["lark/lark-parser/csv.lark", "lark/lark-parser/json.lark", "lark/outlines/arithmetic.lark", "lark/lark-parser/lark.lark"])
def test_lark_grammars_accept_the_data_files(relative: str) -> None:
    """lark.lark (both versions) accepts real Lark grammars: ones the lark package itself loads."""
    text = read(relative)
    lark.Lark(text, start=GRAMMARS[relative][0], import_paths=[str(DATA / "lark/outlines")])
    assert accepts(grammar("lark/lark-parser/lark.lark"), text)
    assert accepts(grammar("lark/llguidance/lark.lark"), text)


def test_rfc_lark_accepts_its_sample_and_rejects_broken_xml() -> None:
    g = grammar("lark/llguidance/rfc.lark")
    document = read("lark/llguidance/rfc.xml")
    ElementTree.fromstring(document)
    assert accepts(g, document)
    rng = random.Random(7)
    rejected = 0
    for mutant in mutants(document, rng, 12, "<>/\"=ab \n"):
        try:
            ElementTree.fromstring(mutant)
        except ElementTree.ParseError:
            assert not accepts(g, mutant), mutant
            rejected += 1
    assert rejected >= 3
    for text in ["<rfc>\n</rfc>", "<rfc>\n<front>\n</front>\n<middle>\n</middle>\n</rfc>"]:
        ElementTree.fromstring(text)
        assert not accepts(g, text)  # well-formed, but <front> needs a <title> and an <author>...


# --- constructs -------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("source", "accepted", "rejected"),
    [
        ('start: "a" B\nB: "b"+\n%ignore " "', ["ab", " a bb ", "a  b"], ["a b b", "a_b", ""]),
        ('start: AB\nAB: "a" "b"\n%ignore " "', ["ab", " ab "], ["a b"]),  # no ignore inside a terminal
        ("start: x*\nx: A | B\nA: /a+/\nB: /b+/\n%ignore /;/", ["", ";", "aab;b", "a;a"], ["c"]),
        ('start: "if"i NAME\nNAME: /[a-z]+/', ["IFx", "iFab"], ["IF", "ifX"]),
        ('start: "a".."c"~2..3 "d"~1', ["abd", "cccd"], ["ad", "abcad"]),
        ("start: [a] b\na: \"x\"\nb: \"y\"", ["xy", "y"], ["x"]),
        ("?start: a\n!a: _b\n_b: \"z\" -> zed", ["z"], [""]),
        ('start: list{"x", ","}\nlist{item, sep}: item (sep item)*', ["x", "x,x,x"], ["x,", ""]),
        ("start: A\nA.2: B C\nB: /b/\nC: /c/", ["bc"], ["b"]),
        ("start: X\n%declare X", [], ["", "X"]),
        ('start: "a"\n%override start: "b"', ["b"], ["a"]),
        ('start: "a"\n%extend start: "b"', ["a", "b"], ["ab"]),
        ("start: NUMBER\n%import common (NUMBER, WS)\n%ignore WS", [" 1.5e3 ", "7"], ["1.5.3"]),
        ("start: N\n%import common.SIGNED_NUMBER -> N", ["-2", "+.5"], ["--2"]),
        ('start: STR\n%import common.ESCAPED_STRING -> STR', ['"a\\"b"', '""'], ['"a"b"', '"a\nb"']),
        ("start: C\n%import common.C_COMMENT -> C", ["/* a * b */", "/***/"], ["/* a */ b */", "/*/"]),
        ("start: /a(?=b)./ /[^\\W\\d]\\w*/", ["abé1"], ["ac_", "ab1"]),
        ("start: /(?i)ab/ /./s /x  y # note/x", ["aB\nxy"], ["ab\nx y"]),
        ('start: ""', [""], ["a"]),
    ],
)
def test_constructs(source: str, accepted: list[str], rejected: list[str]) -> None:
    g = parse_lark(source)
    for text in accepted:
        assert accepts(g, text), text
    for text in rejected:
        assert not accepts(g, text), text


def test_ignore_is_exact() -> None:
    """The ignored text may come before, between and after the tokens, and nowhere else."""
    g = parse_lark('start: "(" start ")" | "x"\n%ignore /[ \\t]+/\n%ignore /#[^\\n]*\\n/')
    for text in ["x", " ( x ) ", "(#c\n(x)\t)", "#only comment\n(x)"]:
        assert accepts(g, text), text
    for text in ["(x", "# c (x)", "( x ) )", " "]:
        assert not accepts(g, text), text


def test_terminals_merge_into_few_lexemes() -> None:
    g = parse_lark('start: "[" NUMBER ("," NUMBER)* "]"\n%import common.NUMBER\n%import common.WS\n%ignore WS')
    assert len(g.lexemes) <= 2  # the whole (regular) rule, then the trailing whitespace


def test_modules_replace_common_and_add_new_ones() -> None:
    g = parse_lark("start: X Y\n%import common.X\n%import my.Y", modules={"common": 'X: "x"', "my": 'Y: Z "!"\nZ: "y"'})
    assert accepts(g, "xy!") and not accepts(g, "x")
    assert "X: " not in COMMON  # the test's X really came from the replacement module


def test_terminal_priority_and_rule_priority_do_not_change_the_language() -> None:
    g = parse_lark('start.3: A | B\nA.5: "a"\nB.-1: "b"')
    assert accepts(g, "a") and accepts(g, "b")


def test_template_instances_are_bounded() -> None:
    with pytest.raises(LimitError, match="max_grammar_size"):  # arguments that double at each level
        parse_lark('start: t{A}\nt{x}: x | t{(x x)}\nA: "a"')
    with pytest.raises(LimitError, match="max_rules"):  # arguments that grow by one at each level
        parse_lark('start: t{A}\nt{x}: x | t{(x A)}\nA: "a"', max_rules=50)


def test_errors_inside_modules_name_the_module() -> None:
    with pytest.raises(GrammarSyntaxError, match="in module 'm'") as info:
        parse_lark("start: X\n%import m.X", modules={"m": "X: (\n"})
    assert (info.value.line, info.value.column) == (2, 1)
