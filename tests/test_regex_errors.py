"""Malformed and unsupported patterns raise RegexError pointing at the offending construct; limits are fast."""

from __future__ import annotations

import time

import pytest

from banister.collector import gc_paused
from banister.errors import LimitError, RegexError
from banister.regex import compile_regex, parse_regex

# (pattern, expected position, a word the message must contain)
BAD = [
    ("(ab", 0, "missing ')'"),
    ("a(b(c)", 1, "missing ')'"),
    ("(?:a", 0, "missing ')'"),
    ("ab)", 2, "unbalanced ')'"),
    ("(a|b))", 5, "unbalanced ')'"),
    ("[z-a]", 1, "out of order"),
    ("a[b-a]", 2, "out of order"),
    ("*a", 0, "nothing to repeat"),
    ("a|*b", 2, "nothing to repeat"),
    ("a**", 2, "nothing to repeat"),
    ("a+*", 2, "nothing to repeat"),
    ("a{2}{3}", 4, "nothing to repeat"),
    ("a*??", 3, "nothing to repeat"),
    ("{3}", 0, "nothing to repeat"),
    ("(+a)", 1, "nothing to repeat"),
    ("^*", 1, "nothing to repeat"),
    ("a$+", 2, "nothing to repeat"),
    ("a{3,2}", 1, "out of order"),
    ("abc\\", 3, "trailing backslash"),
    ("[a\\", 2, "trailing backslash"),
    ("[abc", 0, "unterminated character class"),
    ("x[^", 1, "unterminated character class"),
    ("\\q", 0, "bad escape"),
    ("ab\\k", 2, "bad escape"),
    ("[\\B]", 1, "bad escape"),
    ("\\xZ1", 0, "\\x"),
    ("\\u12", 0, "\\u"),
    ("\\u{110000}", 0, "U+10FFFF"),
    ("\\uD800", 0, "surrogate"),
    ("a\\uDC00x", 1, "surrogate"),
    ("\\u{D800}", 0, "surrogate"),
    ("a|\ud800", 2, "surrogate"),
    ("[\\d-z]", 1, "range"),
    ("\\c1", 0, "\\c"),
    ("\\01", 0, "octal"),
    ("(?<1a>x)", 3, "group name"),
    ("(?<a>x)(?<a>y)", 10, "duplicate"),
    ("(?x)", 0, "(?x"),
    ("a(?i)b", 1, "(?i)"),
    # regular but unsupported, or not regular at all
    ("\\1", 0, "backreference"),
    ("(a)\\1", 3, "backreference"),
    ("(?<x>a)\\k<x>", 7, "backreference"),
    ("(?P<x>a)(?P=x)", 8, "backreference"),
    ("[\\1]", 1, "bad escape"),
    ("(?=a)", 0, "lookahead"),
    ("a(?!b)", 1, "lookahead"),
    ("(?<=a)b", 0, "lookbehind"),
    ("x(?<!a)b", 1, "lookbehind"),
    ("\\bfoo", 0, "\\b"),
    ("a\\B", 1, "\\B"),
    ("\\p{L}", 0, "property"),
    ("[\\P{L}]", 1, "property"),
]


@pytest.mark.parametrize(("pattern", "position", "word"), BAD)
def test_bad_pattern(pattern: str, position: int, word: str) -> None:
    with pytest.raises(RegexError) as info:
        compile_regex(pattern)
    err = info.value
    assert err.position == position, str(err)
    assert err.pattern == pattern
    assert word in str(err)


def test_deep_nesting_is_an_error_not_a_crash() -> None:
    with pytest.raises(RegexError) as info:
        parse_regex("(" * 500 + ")" * 500)
    assert info.value.position == 100


@pytest.mark.parametrize(
    "pattern",
    ["a{", "a{1", "a{1,2", "x{a}", "a{,3}", "}", "]", "a]b", "[[]", "[a-]", "[-a]", "\\/", "\\-", "[\\-]", "\\@"],
)
def test_literal_braces_and_brackets_parse(pattern: str) -> None:
    compile_regex(pattern)


def test_state_limit_fails_fast() -> None:
    dfa = compile_regex("(a|b)*a(a|b){30}")  # lazy: compiling is cheap
    assert dfa.matches(b"a" * 31)
    # CPU time, and no collection of the suite's big heap inside: a busy machine's other work doesn't count.
    with gc_paused():
        start = time.thread_time()
        with pytest.raises(LimitError) as info:
            dfa.expand_from(dfa.start)
        elapsed = time.thread_time() - start
    assert elapsed < 1.0, elapsed  # about 0.1 s; exploring the 2^30 states would take hours
    assert info.value.setting == "max_states"
    assert "max_states" in str(info.value)


def test_state_limit_is_configurable() -> None:
    small = compile_regex("(a|b)*a(a|b){8}", max_states=100)
    with pytest.raises(LimitError):
        small.expand_from(small.start)
    dfa = compile_regex("(a|b)*a(a|b){8}", max_states=1000)
    dfa.expand_from(dfa.start)
    assert 512 <= dfa.n_states <= 1000


@pytest.mark.parametrize(
    "pattern", ["a{100000}", "(a{1000}){1000}", "((a{1000}){1000}){1000}", ".{0,99999}", "[^a]{1,50000}x"]
)
def test_nfa_limit_fails_fast(pattern: str) -> None:
    start = time.thread_time()
    with pytest.raises(LimitError) as info:
        compile_regex(pattern)
    assert time.thread_time() - start < 0.5
    assert info.value.setting == "max_nfa_states"
    assert "max_nfa_states" in str(info.value)


def test_repeated_empty_groups_are_cheap() -> None:
    start = time.thread_time()
    dfa = compile_regex("((?:){1000000}){1000000}x")
    assert time.thread_time() - start < 0.5
    assert dfa.matches(b"x") and not dfa.matches(b"")


def test_nfa_limit_is_configurable() -> None:
    with pytest.raises(LimitError):
        compile_regex("a{1000}", max_nfa_states=500)
    assert compile_regex("a{1000}").matches(b"a" * 1000)
