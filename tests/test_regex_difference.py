"""banister's ``(?\\...)`` regex construct (a base's texts other than some literal strings), against
Python's `re`: a text is in the difference when the base matches it in full and it is none of them."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from banister.errors import LimitError
from banister.regex import compile_regex, parse_regex
from banister.regex.nfa import build_nfa, nfa_size

ALPHABET = "ab<é日"
BASES = [r"[ab<é日]*", r"(?:a|bé)+", r"a*b?日{0,2}", r"(?:<[a-z]*>)*", r"é|ab|", r"(?:a|b){2,3}<?"]


def _escape(text: str) -> str:
    return "".join(f"\\u{{{ord(c):x}}}" for c in text)


@settings(max_examples=80, deadline=None)
@given(base=st.sampled_from(BASES), strings=st.lists(st.text(ALPHABET, max_size=4), max_size=4, unique=True),
       texts=st.lists(st.text(ALPHABET + "x", max_size=6), min_size=25, max_size=25))
def test_membership_matches_re(base, strings, texts):
    pattern = "(?\\(?:" + base + ")" + "".join("|" + _escape(s) for s in strings) + ")"
    dfa = compile_regex(pattern)
    oracle = re.compile(base)
    near = [s + c for s in strings for c in ALPHABET] + [s[:-1] for s in strings]
    for text in texts + strings + near:
        expected = oracle.fullmatch(text) is not None and text not in strings
        assert dfa.matches(text.encode()) == expected, (pattern, text)
    node = parse_regex(pattern, extensions=True)
    assert build_nfa(node, search=False, max_nfa_states=10**6).n_states == nfa_size(node) + 1


def test_inside_a_larger_pattern_in_search_mode_and_with_anchors():
    keys = compile_regex(r'"(?\[a-z]*|name|names|)":')
    assert keys.matches(b'"nam":') and keys.matches(b'"namesake":') and not keys.matches(b'"names":')
    assert not keys.matches(b'"":')
    found = compile_regex(r"(?\[a-z]+|ab)", search=True)
    assert found.matches(b"ab")  # search mode: "a" alone is a match
    pinned = compile_regex(r"(?\^[a-z]+$|ab)", search=True)
    assert pinned.matches(b"abc") and not pinned.matches(b"ab") and not pinned.matches(b"ab ")


def test_the_nfa_limit_counts_the_states_the_product_reaches():
    """Only reachable pairs of base state and trie node are made, and counted: the key exclusion of
    300 names (3,300 bytes) fits the default limit, which the every-pair bound (about 180,000) would
    not. A product whose bound is too big even to explore is refused."""
    from banister.grammar.json_text import json_keys_except

    names = [f"property_{i:03d}" for i in range(300)]
    keys = compile_regex(json_keys_except(names))
    assert not keys.matches(b'"property_123"') and keys.matches(b'"property_1234"') and keys.matches(b'"prop"')
    too_big = r"(?\(?:[a-z0-9]{40}){80}|" + "|".join(names) + ")"
    with pytest.raises(LimitError):
        compile_regex(too_big, max_nfa_states=100_000)
