"""GBNF front end: every llama.cpp grammar in the data compiles, and accepts exactly its language.

Oracles: Python's ``json`` for the JSON grammars, Python's ``ast`` (plus the grammar's documented
whitespace rule) for arithmetic, Python ``re`` restatements for the regular grammars, an enumeration
for the finite SQL grammar, and the documented intent for the C subset.
"""

from __future__ import annotations

import ast
import itertools
import json
import random
import re
import string

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_ebnf_support import (  # noqa: F401
    DATA,
    accepts,
    cached_dfas,
    gbnf,
    mutants,
    needs_data,
    sample,
)

from banister.grammar.ebnf import parse_gbnf
from banister.grammar.ir import Lexeme

pytestmark = needs_data
SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
GBNF_FILES = sorted(p.relative_to(DATA).as_posix() for p in DATA.glob("gbnf/**/*.gbnf")) if DATA.is_dir() else []


@pytest.mark.parametrize("relative", GBNF_FILES)
def test_every_gbnf_file_compiles(relative: str) -> None:
    grammar = gbnf(relative)
    assert grammar.start == "root" and grammar.lexemes


# --- constructs ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("source", "accepted", "rejected"),
    [
        ('root ::= "a\\n\\t\\r\\\\\\"\\x41\\u00e9\\U0001F600"', ['a\n\t\r\\"Aé😀'], ["a"]),
        ("root ::= [a-c0-2_] [^a-z\\]] [\\x30-\\x39]", ["a_0", "2Z5"], ["aa0", "a]0", "dA0"]),
        ('root ::= [-+*/]+ "." .', ["+-*/.x", "-.\n", "*.😀"], ["+.", "a.x", "+.xx"]),
        ('root ::= "x"{3} "y"{2,} "z"{0,2}', ["xxxyy", "xxxyyyyzz"], ["xxyy", "xxxy", "xxxyyzzz"]),
        ('root ::= ("ab" | "c")* "!"?', ["", "abcab!", "c"], ["a", "!!", "abc!c"]),
        ("root ::= my-rule+\nmy-rule ::= [0-9] # a digit\n# comment line\n", ["42"], ["", "4a"]),
        ('root ::= "a" (\n  "b" |\n  "c"\n) "d"', ["abd", "acd"], ["ad", "abcd"]),
        ('root ::= "x"\n   | "y"\n', ["x", "y"], ["xy", ""]),
        ('root ::= | "x"', ["", "x"], ["xx"]),
        ('root ::= ""', [""], ["a"]),
        ('root ::= [] | "a"', ["a"], ["", "b"]),
        ("root ::= root \"a\" | \"b\"", ["b", "baaa"], ["", "ab"]),  # left recursion is fine
        ('root ::= "(" root ")" | ""', ["", "(())"], ["(()", ")("]),
        ("root ::= [ぁ-ゟ]+", ["ひらがな"], ["カ", ""]),
    ],
)
def test_constructs(source: str, accepted: list[str], rejected: list[str]) -> None:
    grammar = parse_gbnf(source)
    for text in accepted:
        assert accepts(grammar, text), text
    for text in rejected:
        assert not accepts(grammar, text), text


def test_regular_rules_become_one_lexeme() -> None:
    grammar = parse_gbnf('root ::= num ("," num)*\nnum ::= "-"? [0-9]+ ("." [0-9]+)?\n')
    assert grammar.rules["root"] == ((grammar.lexemes[0],),)
    assert len(grammar.lexemes) == 1


def test_adjacent_terminals_merge_around_recursion() -> None:
    grammar = parse_gbnf('root ::= "[" ws (root ("," ws root)*)? "]" ws | "x" ws\nws ::= [ ]*')
    patterns = [lex.pattern for lex in grammar.lexemes]
    assert all(isinstance(lex, Lexeme) for lex in grammar.lexemes)
    assert len(patterns) == 4  # "[" ws, "," ws, "]" ws, "x" ws
    for text in ["x", "[ x , [ ]]", "[x,x]  "]:
        assert accepts(grammar, text)


def test_start_rule_is_configurable() -> None:
    grammar = parse_gbnf('root ::= "a"\nother ::= "b"', start="other")
    assert accepts(grammar, "b") and not accepts(grammar, "a")


# --- json.gbnf: Python's json is the oracle -----------------------------------------------------------

# The grammar's own limits: integers of at most 16 digits, no DEL (0x7F) inside strings, exponents
# whose digits after the first are 1-9, whitespace of one space or a newline and at most 20 blanks.
# Python's float repr uses an exponent only outside [1e-4, 1e16), so floats are drawn inside it.
_floats = st.floats(min_value=1e-4, max_value=1e15) | st.floats(min_value=-1e15, max_value=-1e-4)
_scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(10**15), max_value=10**15)
    | _floats
    | st.text(st.characters(exclude_characters="\x7f", exclude_categories=("Cs",)), max_size=8)
)
_keys = st.text(st.characters(exclude_characters="\x7f", exclude_categories=("Cs",)), max_size=6)
_json = st.recursive(_scalars, lambda kids: st.lists(kids, max_size=3) | st.dictionaries(_keys, kids, max_size=3), max_leaves=8)
_dumps = st.sampled_from(
    [
        lambda v: json.dumps(v),
        lambda v: json.dumps(v, separators=(",", ":")),
        lambda v: json.dumps(v, indent=2),
        lambda v: json.dumps(v, ensure_ascii=False),
    ]
)


@SETTINGS
@given(value=st.dictionaries(_keys, _json, max_size=4), dump=_dumps)
def test_json_gbnf_accepts_json_dumps(value: dict, dump) -> None:  # type: ignore[no-untyped-def]
    text = dump(value)
    assert json.loads(text) == value
    assert accepts(gbnf("gbnf/llama.cpp/json.gbnf"), text)


@SETTINGS
@given(value=st.dictionaries(_keys, _json, min_size=1, max_size=4), seed=st.integers(0, 2**16))
def test_json_gbnf_rejects_what_json_rejects(value: dict, seed: int) -> None:
    text = json.dumps(value)
    rng = random.Random(seed)
    for mutant in mutants(text, rng, 6, '{}[]",:0123456789.eE-+ \\u'):
        try:
            json.loads(mutant)
        except ValueError:
            assert not accepts(gbnf("gbnf/llama.cpp/json.gbnf"), mutant), mutant


def test_json_gbnf_examples() -> None:
    grammar = gbnf("gbnf/llama.cpp/json.gbnf")
    for text in ['{"a": [1, -2.5e-3, "\\u00e9\\n", true, null]}', "{}", '{"k":{"k":[]}}\n ']:
        assert accepts(grammar, text) and isinstance(json.loads(text), dict)
    for text in ['{"a": 1,}', '{"a": 01}', '{"a": "\x01"}', "[1, 2]", '{"a" 1}', '{"a": tru}', '{"a": 1e20}', '{"x": "\x7f"}']:
        assert not accepts(grammar, text), text
    # the last three are JSON but outside the grammar: a top-level array, exponent digit 0 after the
    # first, and DEL inside a string (documented quirks of this grammar)
    assert json.loads("[1, 2]") and json.loads('{"a": 1e20}') and json.loads('{"x": "\x7f"}')


def _json_arr(values: list) -> str:
    return "[\n" + ",\n".join(json.dumps(v) for v in values) + "]"


@SETTINGS
@given(values=st.lists(_json, max_size=4), seed=st.integers(0, 2**16))
def test_json_arr_gbnf(values: list, seed: int) -> None:
    grammar = gbnf("gbnf/llama.cpp/json_arr.gbnf")
    text = _json_arr(values)
    assert json.loads(text) == values
    assert accepts(grammar, text)
    for mutant in mutants(text, random.Random(seed), 4, '{}[]",:0123456789.-\n '):
        try:
            json.loads(mutant)
        except ValueError:
            assert not accepts(grammar, mutant), mutant


# --- arithmetic.gbnf: Python's ast is the oracle ------------------------------------------------------

_atoms = st.from_regex(r"[a-z][a-z0-9_]{0,3}", fullmatch=True) | st.from_regex(r"[1-9][0-9]{0,3}|0", fullmatch=True)
_blank = st.sampled_from(["", " ", "\t", "  "])


@st.composite
def _term(draw, depth: int = 2):  # type: ignore[no-untyped-def]
    if depth and draw(st.booleans()):
        return f"({draw(_blank)}{draw(_expr(depth - 1))}){draw(_blank)}"
    return draw(_atoms) + draw(_blank)


@st.composite
def _expr(draw, depth: int = 2):  # type: ignore[no-untyped-def]
    parts = [draw(_term(depth))]
    for _ in range(draw(st.integers(0, 3))):
        parts += [draw(st.sampled_from("+-*/")), draw(_term(depth))]
    return "".join(parts)


_ALLOWED = (ast.Expression, ast.Compare, ast.Eq, ast.BinOp, ast.Add, ast.Sub, ast.Mult, ast.Div, ast.Name, ast.Load, ast.Constant)


def _python_ok(line: str) -> bool:
    """Whether ``lhs = rhs`` parses as a Python comparison of +-*/ expressions over names and ints."""
    renamed = re.sub(r"[a-z][a-z0-9_]*", lambda m: m.group() + "_", line)  # no keywords
    renamed = re.sub(r"(?<![\w.])0+(?=\d)", "", renamed)  # the grammar allows leading zeros
    try:
        tree = ast.parse(renamed.replace("=", "=="), mode="eval")
    except SyntaxError:
        return False
    return all(isinstance(node, _ALLOWED) for node in ast.walk(tree))


def _one_group(text: str) -> bool:
    """Whether ``text`` is one parenthesised group (its first '(' closes at its last character)."""
    depth = 0
    for i, ch in enumerate(text):
        depth += {"(": 1, ")": -1}.get(ch, 0)
        if depth == 0:
            return i == len(text) - 1
    return False


def arithmetic_oracle(text: str) -> bool | None:
    """Valid per Python's ast and the grammar's documented shape; None where it cannot tell."""
    if not text.endswith("\n") or "\n" in text[:-1]:
        return None
    line = text[:-1]
    if line.count("=") != 1 or not re.fullmatch(r"[a-z0-9_+\-*/()= \t]*", line):
        return False
    rhs = line.split("=")[1].strip(" \t")
    rhs_ok = _one_group(rhs) or re.fullmatch(r"[a-z][a-z0-9_]*|[0-9]+", rhs) is not None
    # the grammar's whitespace rule: blanks follow a term, '(' or '=', never an operator or the start
    layout_ok = not re.search(r"(^|[-+*/])[ \t]", line)
    # its words: names start with a letter, numbers are plain digits (Python also takes _a and 1_0)
    words_ok = all(re.fullmatch(r"[a-z][a-z0-9_]*|[0-9]+", w) for w in re.findall(r"[a-z0-9_]+", line))
    return rhs_ok and layout_ok and words_ok and _python_ok(line)


@SETTINGS
@given(equations=st.lists(st.tuples(_expr(), _term()), min_size=1, max_size=3), blank=_blank)
def test_arithmetic_gbnf_accepts_generated_expressions(equations: list[tuple[str, str]], blank: str) -> None:
    text = "".join(f"{lhs}={blank}{rhs}\n" for lhs, rhs in equations)
    for lhs, rhs in equations:
        assert arithmetic_oracle(f"{lhs}={blank}{rhs}\n")
    assert accepts(gbnf("gbnf/llama.cpp/arithmetic.gbnf"), text)


@SETTINGS
@given(equation=st.tuples(_expr(), _term()), seed=st.integers(0, 2**16))
def test_arithmetic_gbnf_agrees_with_ast_on_mutants(equation: tuple[str, str], seed: int) -> None:
    grammar = gbnf("gbnf/llama.cpp/arithmetic.gbnf")
    text = f"{equation[0]}={equation[1]}\n"
    for mutant in mutants(text, random.Random(seed), 6, "ab1+-*/()= "):
        expected = arithmetic_oracle(mutant)
        if expected is not None:
            assert accepts(grammar, mutant) == expected, mutant


def test_arithmetic_gbnf_examples() -> None:
    grammar = gbnf("gbnf/llama.cpp/arithmetic.gbnf")
    for text in ["1+2=3\n", "a*(b+c)= x\n", "( x1 )/y_2=(z)\nq=0\n"]:
        assert arithmetic_oracle(text.split("\n")[0] + "\n") and accepts(grammar, text)
    for text in ["1+=2\n", "1=2", "-1=2\n", "a=b+c\n", "1 2=3\n", "(a=b\n"]:
        assert not accepts(grammar, text), text
        assert arithmetic_oracle(text) in (False, None)


# --- regular grammars: a Python ``re`` restatement is the oracle ----------------------------------------

_MOVE = r"(?:(?:[a-h]x)?[a-h][1-8](?:=[NBKQR])?|[NBKQR][a-h]?[1-8]?x?[a-h][1-8]|O-O(?:-O)?)[+#]?"
_PUNCT = re.escape(string.punctuation)
REGULAR = {
    "gbnf/llama.cpp/chess.gbnf": (
        rf"1\. {_MOVE} {_MOVE}\n(?:[1-9][0-9]?\. {_MOVE} {_MOVE}\n)+",
        ["1. e4 e5\n2. Nf3 Nc6\n", "1. O-O-O# exd8=Q+\n10. Qxh7 Rd1\n"],
        ["1. e4 e5\n", "1. e9 e5\n2. a1 a2\n", "1. e4 e5\n0. a1 a2\n", "1. Px4 e5\n2. a1 a2\n"],
        "12345678abcdehNBKQRxO-=+#. \n",
    ),
    "gbnf/llama.cpp/english.gbnf": (
        rf"[A-Za-z0-9{_PUNCT}]+(?:[ \t\n][A-Za-z0-9{_PUNCT}]+)*",
        ["Hello, world!", "a\tb\nc", "[x]{y}~`\\"],
        ["", " lead", "trail ", "two  spaces", "é"],
        "ab1 \t\n,.!\\]é",
    ),
    "gbnf/llama.cpp/japanese.gbnf": (
        r"[ぁ-ゟァ-ヿ、-〾一-鿿]+(?:[ \t\n][ぁ-ゟァ-ヿ、-〾一-鿿]+)*",
        ["こんにちは", "カタカナ\t漢字。", "あ ア"],
        ["", "abc", "あ  ア", "あ "],
        "あア漢。 \ta",
    ),
    "gbnf/llama.cpp/list.gbnf": (
        r"(?:- [^\r\n\x0b\x0c\x85\u2028\u2029]+\n)+",
        ["- one\n", "- a\n- b c\n"],
        ["", "- \n", "-one\n", "- a\r\n", "- a\u2028b\n"],
        "- ab\n\r\u2028",
    ),
}


@pytest.mark.parametrize("relative", sorted(REGULAR))
def test_regular_gbnf_agrees_with_re(relative: str) -> None:
    pattern, accepted, rejected, alphabet = REGULAR[relative]
    oracle = re.compile(pattern)
    grammar = gbnf(relative)
    for text in accepted:
        assert oracle.fullmatch(text) and accepts(grammar, text), text
    for text in rejected:
        assert not oracle.fullmatch(text) and not accepts(grammar, text), text
    rng = random.Random(relative)
    for _ in range(25):
        text = sample(grammar, rng)
        assert oracle.fullmatch(text), text
        for mutant in mutants(text, rng, 3, alphabet):
            assert accepts(grammar, mutant) == bool(oracle.fullmatch(mutant)), mutant


def test_vllm_sql_is_its_finite_language() -> None:
    grammar = gbnf("gbnf/llama.cpp/vllm-sql.gbnf")
    language = {
        f"SELECT{c1}from{t}where{c2}={n}"
        for c1, t, c2, n in itertools.product(["col_1", "col_2"], ["table_1", "table_2"], ["col_1", "col_2"], "12")
    }
    assert all(accepts(grammar, text) for text in language)
    for text in ["SELECT col_1 from table_1 where col_1=1", "SELECTcol_3fromtable_1wherecol_1=1", "SELECTcol_1fromtable_1wherecol_1=3", ""]:
        assert text not in language and not accepts(grammar, text)


# --- c.gbnf: the documented intent (a C subset: declarations of functions with statements) --------------


def test_c_gbnf_examples() -> None:
    grammar = gbnf("gbnf/llama.cpp/c.gbnf")
    accepted = [
        "int main(){return 0;}",
        "int f(int x){int y = x*2;while(y<10){y = y+1;}return y;}",
        "float g(){// note\n/* block * comment */if(a==b){h (a, b);}else{}}",  # calls need a blank
        "",
    ]
    rejected = [
        "int main(){return 0}",  # missing ';'
        "intmain(){}",  # a data type needs whitespace after it
        "int main({}",
        "int main(){/* unclosed }",
        "char c(){x = ;}",
    ]
    for text in accepted:
        assert accepts(grammar, text), text
    for text in rejected:
        assert not accepts(grammar, text), text
