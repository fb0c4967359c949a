"""Malformed GBNF and Lark grammars raise GrammarSyntaxError at the right line and column; size settings
raise LimitError; huge grammars finish within a stated bound."""

from __future__ import annotations

import time

import pytest

from banister.errors import GrammarError, LimitError
from banister.grammar.ebnf import GrammarSyntaxError, parse_gbnf, parse_lark

GBNF_CASES = [
    # (grammar, line, column, words of the message)
    ('root ::= "abc', 1, 10, "unterminated string"),
    ("root ::= [a-z", 1, 10, "unterminated character class"),
    ("root ::= foo", 1, 10, "undefined rule 'foo'"),
    ('root ::= "a"\nroot ::= "b"', 2, 1, "defined twice (first at line 1, column 1)"),
    ('root = "a"', 1, 6, "expected '::='"),
    ('root ::= ("a" | "b"', 1, 20, "expected ')' to close the group opened at line 1, column 10"),
    ('root ::= "a" )', 1, 14, "expected a term, '|' or the end of the line, found ')'"),
    ('root ::= "\\q"', 1, 11, "unknown escape '\\q'"),
    ("root ::= [z-a]", 1, 11, "character range out of order"),
    ('root ::= "a"{2,1}', 1, 13, "maximum 1 is below the minimum 2"),
    ('root ::= *"a"', 1, 10, "nothing to repeat"),
    ('root ::= "a"{x}', 1, 14, "expected a repetition count, found 'x'"),
    ('root ::= "\\x4"', 1, 11, "expected 2 hex digits"),
    ('other ::= "a"', 1, 14, "no rule named 'root'"),
    ('root ::= "a" other ::= "b"', 1, 14, "expected the end of the line before the next rule 'other'"),
    ('::= "a"', 1, 1, "expected a rule name"),
    ("root ::= <think>", 1, 10, "token references"),
    ('root ::= "\\uD800"', 1, 11, "not a Unicode scalar value"),
    ('root ::= ("a"\nnext ::= "b"', 2, 1, "the group opened at line 1, column 10 is not closed"),
    ('# grammar\nroot ::= a\n\na ::= "x" |\n  b', 5, 3, "undefined rule 'b'"),
    ('root ::= "a"{1,2', 1, 17, "expected '}'"),
]

LARK_CASES = [
    ("start: (a", 1, 10, "expected ')' to close the '(' at line 1, column 8"),
    ("start a", 1, 7, "expected ':' after 'start'"),
    ('start: "abc', 1, 8, "string literal not closed"),
    ("start: /abc", 1, 8, "regex literal not closed"),
    ("start: a", 1, 8, "undefined rule 'a'"),
    ('start: "a"\nstart: "b"', 2, 1, "'start' is defined twice (first at line 1, column 1)"),
    ("start: /a(?P=x)/", 1, 10, "backreferences are not regular"),
    ('start: "b".."a"', 1, 8, "out of order"),
    ('start: "ab".."c"', 1, 8, "one-character strings"),
    ('Start: "a"', 1, 1, "mixes cases"),
    ("start: A\nA: start", 2, 1, "terminal 'A' uses the rule 'start'"),
    ('start: A\nA: "a" A', 2, 1, "terminal 'A' is defined in terms of itself"),
    ('start: "a"~3..1', 1, 11, "bad repetition range 3..1"),
    ("%foo bar", 1, 1, "unknown directive '%foo'"),
    ("start: A\n%import nowhere.A", 2, 1, "unknown module 'nowhere'"),
    ("start: A\n%import common.NOPE", 2, 1, "module 'common' has no definition 'NOPE'"),
    ("start: a\na{x}: x", 1, 8, "template 'a' needs arguments"),
    ('start: b{"x"}\nb: "y"', 1, 8, "'b' is not a template"),
    ('start: "a" +*', 1, 13, "nothing to repeat before '*'"),
    ('start: "a" $', 1, 12, "unexpected character '$'"),
    ("start: /a/z", 1, 8, "unsupported regex flag 'z'"),
    ("start: /(?<=a+)b/", 1, 9, "fixed length"),
    ('start: "a"\n%ignore start', 2, 1, "%ignore uses the rule 'start'"),
    ('start: "a"\n%override other: "b"', 2, 11, "%override of 'other', which is not defined yet"),
    ("start: x\n  | y z\nx: \"x\"\ny: \"y\"", 2, 7, "undefined rule 'z'"),
    ('start: "a" "b"\n  "c"', 2, 3, "expected a rule or terminal name, found string \"c\""),
    ("start: [a\n\nb: c]", 3, 2, "expected ']' to close the '[' at line 1, column 8, found ':'"),
]


@pytest.mark.parametrize(("text", "line", "column", "words"), GBNF_CASES)
def test_gbnf_errors_name_line_and_column(text: str, line: int, column: int, words: str) -> None:
    with pytest.raises(GrammarSyntaxError) as info:
        parse_gbnf(text)
    error = info.value
    assert isinstance(error, GrammarError)
    assert (error.line, error.column) == (line, column), str(error)
    assert words in str(error) and str(error).startswith(f"line {line}, column {column}: ")


@pytest.mark.parametrize(("text", "line", "column", "words"), LARK_CASES)
def test_lark_errors_name_line_and_column(text: str, line: int, column: int, words: str) -> None:
    with pytest.raises(GrammarSyntaxError) as info:
        parse_lark(text)
    assert (info.value.line, info.value.column) == (line, column), str(info.value)
    assert words in str(info.value)


def test_nesting_is_bounded() -> None:
    with pytest.raises(GrammarSyntaxError, match="nested more than 100 deep"):
        parse_gbnf("root ::= " + "(" * 150 + '"a"' + ")" * 150)
    with pytest.raises(GrammarSyntaxError, match="nested more than 100 deep"):
        parse_lark("start: " + "(" * 150 + '"a"' + ")" * 150)
    with pytest.raises(GrammarSyntaxError, match="nested more than 100 deep"):
        parse_lark("start: /" + "(" * 150 + "a" + ")" * 150 + "/")
    # within the bound, deep nesting works
    grammar = parse_gbnf("root ::= " + "(" * 90 + '"a"' + ")" * 90)
    assert grammar.lexemes


# --- limits ----------------------------------------------------------------------------------------------


def test_max_repeat() -> None:
    with pytest.raises(LimitError, match="max_repeat") as info:
        parse_gbnf('root ::= "a"{2000}', max_repeat=1000)
    assert info.value.setting == "max_repeat" and "line 1, column 13" in str(info.value)
    with pytest.raises(LimitError, match="max_repeat"):
        parse_lark('start: "a"~5..20000')
    with pytest.raises(LimitError, match="max_repeat") as info:
        parse_lark("start: /a{20000}/")
    assert "line 1, column 10" in str(info.value)
    assert parse_gbnf('root ::= "a"{2000}', max_repeat=2000).lexemes


def test_max_rules() -> None:
    text = "\n".join(f'r{i} ::= "a" r{i + 1}' for i in range(100)) + '\nr100 ::= "b"'
    with pytest.raises(LimitError, match="max_rules") as info:
        parse_gbnf(text, start="r0", max_rules=50)
    assert info.value.setting == "max_rules" and "line 51" in str(info.value)
    with pytest.raises(LimitError, match="max_rules"):
        parse_lark(text.replace("::=", ":"), start="r0", max_rules=50)


def test_max_grammar_size() -> None:
    text = 'root ::= item{5000}\nitem ::= "(" item ")" | "x"'
    with pytest.raises(LimitError, match="max_grammar_size"):
        parse_gbnf(text, max_grammar_size=1000)
    assert parse_gbnf(text).size > 1000


def test_large_lexemes_are_split_not_refused() -> None:
    """A merged regex whose DFA would be huge becomes several smaller lexemes (same language)."""
    grammar = parse_gbnf('root ::= [ab]* "a" [ab]{14}', max_lexeme_states=200)
    assert len(grammar.lexemes) > 1
    from banister.grammar.reference import matches

    assert matches(grammar, "bbab" + "a" + "b" * 14) and not matches(grammar, "b" * 20)


def _chain(n: int) -> str:
    return "\n".join(f'r{i} ::= "a" r{i + 1} | "b"' for i in range(n)) + f'\nr{n} ::= "c"'


def _cycles(n: int) -> str:
    return "\n".join(f'r{i} ::= "a" r{(i + 1) % n} | "b" r{(i * 7) % n} | "c"' for i in range(n))


@pytest.mark.parametrize("make", [_chain, _cycles])
def test_five_thousand_rules_in_bounded_time(make) -> None:  # type: ignore[no-untyped-def]
    text = make(5000)
    started = time.perf_counter()
    grammar = parse_gbnf(text, start="r0")
    assert time.perf_counter() - started < 15
    assert len(grammar.rules) > 1000
    lark_text = "\n".join(line.replace("::=", ":") for line in text.splitlines())
    started = time.perf_counter()
    assert parse_lark(lark_text, start="r0").rules
    assert time.perf_counter() - started < 15


def test_huge_grammar_over_the_rule_limit_fails_fast() -> None:
    started = time.perf_counter()
    with pytest.raises(LimitError):
        parse_gbnf(_cycles(100_000), start="r0")
    assert time.perf_counter() - started < 15
