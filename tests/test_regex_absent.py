"""banister's ``(?~...)`` regex construct (texts avoiding literal strings), against Python's `re`.

The oracle writes the same languages with lookahead: no string starts at any position of the text.
"""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from banister.errors import RegexError, SchemaError
from banister.grammar.json_schema import json_schema_to_grammar
from banister.regex import compile_regex, parse_regex
from banister.regex.nfa import build_nfa, nfa_size

ALPHABET = "ab<é日"
STRING_SETS = st.lists(st.text(ALPHABET, min_size=1, max_size=4), min_size=1, max_size=3, unique=True).filter(
    lambda ss: not any(u != v and u in v for u in ss for v in ss)
)


def _escape(text: str) -> str:
    return "".join(f"\\u{{{ord(c):x}}}" for c in text)


def _oracle(strings: list[str], mode: str) -> re.Pattern[str]:
    avoid = "(?:(?!" + "|".join(re.escape(s) for s in strings) + ")[\\s\\S])"
    if mode == ">":
        return re.compile(avoid + "*" + re.escape(strings[0]))
    return re.compile(avoid + ("+" if mode == "+" else "*"))


@settings(max_examples=80, deadline=None)
@given(strings=STRING_SETS, mode=st.sampled_from(["", "+", ">"]),
       texts=st.lists(st.text(ALPHABET + "x\n", max_size=10), min_size=25, max_size=25))
def test_membership_matches_re(strings, mode, texts):
    pattern = "(?~" + mode + "|".join(_escape(s) for s in strings) + ")"
    dfa = compile_regex(pattern)
    oracle = _oracle(strings, mode)
    for text in texts + [s + t for s in strings for t in strings]:
        assert dfa.matches(text.encode()) == (oracle.fullmatch(text) is not None), (strings, mode, text)
    node = parse_regex(pattern, extensions=True)
    assert build_nfa(node, search=False, max_nfa_states=10**6).n_states == nfa_size(node) + 1


def test_inside_a_larger_pattern_and_search_mode():
    dfa = compile_regex(r"<a>(?~</a>)</a>")
    assert dfa.matches(b"<a>x < y</a>") and not dfa.matches(b"<a>x</a> y</a>")
    found = compile_regex("(?~+ab)", search=True)
    assert found.matches(b"abab")  # search mode: some non-empty piece avoids "ab"
    until = compile_regex(r"(?~>\u{3e}\u{3e}|\u{2b})")  # escapes for a leading ">" or "+"
    assert until.matches(b"x>>") and not until.matches(b"+>>") and not until.matches(b"x>>y")
    assert compile_regex(r"(?~\+|\>)").matches(b"ab") and not compile_regex(r"(?~\+|\>)").matches(b"a+")


MALFORMED_MACHINES = ["(?@[0, [0]])", '(?@[0, [0], [[0, "(", 1]]])', '(?@[0, [0], [[0, "a", -1]]])',
                      '(?@[0, [0], [[0, 7, 1]]])', "(?@[0,[0],[]]", "(?@{})", "(?i)(?@[0, [0], []])"]


@pytest.mark.parametrize("bad", ["(?~)", "(?~a|)", "(?~a*)", "(?~ab|b)", "(?~a|a)", "(?~[ab])", "(?i)(?~a)", "(?~a",
                                 "(?\\a|b*)", "(?\\a|[ab])", "(?i)(?\\a|b)", "(?\\a|b", *MALFORMED_MACHINES])
def test_malformed_extension_groups_raise(bad):
    """banister's own constructs: ``(?~...)``, the difference ``(?\\...)`` and the automaton ``(?@...)``."""
    with pytest.raises(RegexError):
        compile_regex(bad)


@pytest.mark.parametrize("extension", ["(?~a)", "(?\\a*|a)", '(?@[0, [0], [[0, "a", 0]]])'])
def test_ecma_patterns_refuse_the_extensions(extension):
    with pytest.raises(RegexError):
        parse_regex(extension)
    with pytest.raises(SchemaError):
        json_schema_to_grammar({"type": "string", "pattern": extension})
