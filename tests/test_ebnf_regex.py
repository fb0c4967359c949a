"""The regex layer of the EBNF front ends agrees with Python's ``re.fullmatch``.

Lark terminals are Python regexes: :func:`parse_python_regex` must accept exactly what
``re.fullmatch(pattern, text, flags)`` accepts (lazy quantifiers included, since a whole match does
not depend on laziness), with lookarounds and anchors removed by construction. The printed pattern is
compiled by banister's own regex engine, so each check covers reading, lookaround removal, printing
and the engine together.
"""

from __future__ import annotations

import random
import re
from functools import cache

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from banister.grammar.ebnf_regex import (
    EPSILON,
    PatternError,
    fold_case,
    nullable,
    parse_python_regex,
    python_class,
    to_pattern,
    without_empty,
)
from banister.regex import charset, compile_regex

FLAGS = {"i": re.IGNORECASE, "s": re.DOTALL, "m": re.MULTILINE, "x": re.VERBOSE}


@cache
def ours(pattern: str, flags: str = ""):  # type: ignore[no-untyped-def]
    return compile_regex(to_pattern(parse_python_regex(pattern, flags)))


def python(pattern: str, flags: str = "") -> re.Pattern[str]:
    value = 0
    for letter in flags:
        value |= FLAGS[letter]
    return re.compile(pattern, value)


def agree(pattern: str, flags: str, texts: list[str]) -> None:
    dfa, oracle = ours(pattern, flags), python(pattern, flags)
    for text in texts:
        assert dfa.matches(text.encode()) == (oracle.fullmatch(text) is not None), (pattern, flags, text)


def all_strings(alphabet: str, longest: int) -> list[str]:
    out = [""]
    for _ in range(longest):
        out += [s + c for s in out if len(s) == len(out[-1]) for c in alphabet]
    return out


CURATED = [
    (r'"(?!"").*?(?<!\\)(\\\\)*?"', "", 'a"\\'),
    (r"\/\*(\*(?!\/)|[^*])*\*\/", "", "/*a"),
    (r"[+*]|[?](?![a-z])", "", "+?a"),
    (r"\/(?!\/)(\\\/|\\\\|[^\/])*?\/[imslux]*", "", "/\\ai"),
    (r"0(?![1-9])", "", "01"),
    (r"[^\W\d]\w*", "", "a1_é٣ "),
    (r"([ubf]?r?|r[ubf])(\"(?!\"\").*?(?<!\\)(\\\\)*?\"|'(?!'').*?(?<!\\)(\\\\)*?')", "i", "\"'\\Rb"),
    (r"a$", "", "a\n"),
    (r"^ab$", "m", "ab\n"),
    (r"a\b", "", "a "),
    (r"\bab\B", "", "ab "),
    (r"x{,2}y", "", "xy"),
    (r"(?i)abc", "", "aBc"),
    (r"a(?i:b)c", "", "abBC"),
    (r"a(?=bc)..", "", "abc"),
    (r"(?<=a)b|(?<!a)c", "", "abc"),
    (r"(a(?=b)|b)*", "", "ab"),
    (r"\Aa+\Z", "", "a\n"),
    (r".+", "s", "a\n"),
    (r".+", "", "a\n\r"),
    (r" a b # c", "x", "ab #"),
    (r"[]a]", "", "]a"),
    (r"[^]a]+", "", "]ab"),
    (r"\x41\u0042\101\0\N{LATIN SMALL LETTER E WITH ACUTE}", "", "AB\x41\0é"),
    (r"a{2,3}?b", "", "ab"),
    (r"(?P<n>a)+(?#comment)", "", "a"),
    (r"[a-z]+", "i", "aZK\u212a"),
    (r"[^a-z]", "i", "aZ1"),
    (r"(?<![ab]{2})c", "", "abc"),
    (r"(?!ab|c)..", "", "abc"),
    (r"(?=a|bb)\w+", "", "ab"),
    (r"(?:(?=a))+a|(?=b)*b{2}|(?:^)*", "", "ab"),
    (r"\B", "", "a "),
]


@pytest.mark.parametrize(("pattern", "flags", "alphabet"), CURATED)
def test_curated_patterns_agree_with_re(pattern: str, flags: str, alphabet: str) -> None:
    agree(pattern, flags, all_strings(alphabet, 5 if len(alphabet) <= 4 else 4))


# --- generated patterns -----------------------------------------------------------------------------------

ALPHABET = "ab\n"
_atom = st.sampled_from(["a", "b", ".", "[ab]", "[^a]", "\\n", "\\w", "\\s"])
_look_body = st.sampled_from(["a", "b", "ab", "[ab]b", "a|bb", "\\n", "."])


@st.composite
def regexes(draw, depth: int = 3) -> str:  # type: ignore[no-untyped-def]
    kind = draw(st.integers(0, 7 if depth else 0))
    if kind == 0:
        return draw(_atom)
    if kind == 1:
        return draw(regexes(depth - 1)) + draw(regexes(depth - 1))
    if kind == 2:
        return f"(?:{draw(regexes(depth - 1))}|{draw(regexes(depth - 1))})"
    if kind == 3:
        quantifier = draw(st.sampled_from(["*", "+", "?", "{2}", "{1,2}", "*?", "{0,}"]))
        return f"(?:{draw(regexes(depth - 1))}){quantifier}"
    if kind == 4:
        look = draw(st.sampled_from(["(?=", "(?!", "(?<=", "(?<!"]))
        return f"{look}{draw(_look_body)})"
    if kind == 5:
        return draw(st.sampled_from(["^", "$", "\\b", "\\B", "\\A", "\\Z"]))
    return draw(regexes(depth - 1)) + draw(regexes(depth - 1)) + draw(regexes(depth - 1))


TEXTS = all_strings(ALPHABET, 4)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(pattern=regexes(), flags=st.sampled_from(["", "s", "m", "i"]))
def test_generated_patterns_agree_with_re(pattern: str, flags: str) -> None:
    try:
        python(pattern, flags)
    except re.error:
        return  # e.g. a quantified lookaround: Python refuses it too
    try:
        agree(pattern, flags, TEXTS)
    except PatternError as exc:  # a stated limit (a starred word boundary intersects into a huge tree)
        assert "too large" in str(exc), (pattern, exc)


@settings(max_examples=100, deadline=None)
@given(pattern=regexes())
def test_without_empty_removes_only_the_empty_string(pattern: str) -> None:
    try:
        python(pattern)
    except re.error:
        return
    try:
        node = parse_python_regex(pattern)
    except PatternError as exc:  # a stated limit, as above
        assert "too large" in str(exc), (pattern, exc)
        return
    rest = without_empty(node)
    whole, less = compile_regex(to_pattern(node)), compile_regex(to_pattern(rest))
    assert not nullable(rest)
    assert nullable(node) == whole.matches(b"")
    for text in TEXTS[1:]:
        assert whole.matches(text.encode()) == less.matches(text.encode())


# --- classes and case folding -----------------------------------------------------------------------------


@pytest.mark.parametrize("letter", ["d", "w", "s", "D", "W", "S"])
@pytest.mark.parametrize("ascii_only", [False, True])
def test_python_classes(letter: str, ascii_only: bool) -> None:
    ranges = python_class(letter, ascii_only)
    oracle = re.compile(f"\\{letter}", re.ASCII if ascii_only else 0)
    rng = random.Random(letter)
    points = list(range(0x250)) + [rng.randrange(0x110000) for _ in range(3000)]
    for c in points:
        if 0xD800 <= c <= 0xDFFF:
            continue
        inside = any(lo <= c <= hi for lo, hi in ranges)
        assert inside == (oracle.fullmatch(chr(c)) is not None), hex(c)


def test_fold_case_is_pythons_ignorecase() -> None:
    for text in ["k", "s", "ß", "Σ", "i", "ǅ", "µ"]:
        folded = fold_case(charset.single(ord(text)))
        oracle = re.compile(re.escape(text), re.IGNORECASE)
        for c in range(0x3000):
            inside = any(lo <= c <= hi for lo, hi in folded)
            assert inside == (oracle.fullmatch(chr(c)) is not None), (text, hex(c))


# --- refusals ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("pattern", "flags", "offset", "words"),
    [
        (r"(a)\1", "", 3, "backreferences"),
        (r"(?P<x>a)(?P=x)", "", 8, "backreferences"),
        (r"(?>a)", "", 0, "atomic"),
        (r"a*+", "", 2, "possessive"),
        (r"(?(1)a|b)", "", 0, "conditional"),
        (r"(?<=a+)b", "", 0, "fixed length"),
        (r"(?=(?=a))a", "", 0, "nested"),
        (r"a**", "", 0, "multiple repeat"),
        (r"*a", "", 0, "nothing to repeat"),
        (r"^*", "", 0, "nothing to repeat"),
        (r"[z-a]", "", 1, "bad character range"),
        (r"(ab", "", 0, "missing )"),
        (r"ab)", "", 2, "unbalanced"),
        (r"\q", "", 0, "bad escape"),
        (r"a(?i)b", "", 1, "global flags"),
        (r"a", "L", 1, "unsupported regex flag"),
        (r"\N{NOT A NAME}", "", 0, "undefined character name"),
    ],
)
def test_refusals(pattern: str, flags: str, offset: int, words: str) -> None:
    with pytest.raises(PatternError, match=re.escape(words)) as info:
        parse_python_regex(pattern, flags)
    assert info.value.offset == offset


def test_printer_escapes_everything_it_must() -> None:
    node = parse_python_regex(r"[\]\[\\^\-]|[.*{}()?+|]|/|\x00|\u2028| ")
    assert compile_regex(to_pattern(node)).matches(b"]") and to_pattern(EPSILON) == "(?:)"
    for c in "][\\^-.*{}()?+|/\x00\u2028 ":
        assert compile_regex(to_pattern(node)).matches(c.encode())
    assert not compile_regex(to_pattern(node)).matches(b"a")


def test_a_mirror_image_keeps_shared_subtrees_shared():
    """The lookahead pass shares subtrees; mirroring its graph for the lookbehind pass must not unfold
    it into the tree it prints as (2^19 nodes here, where the graph has 21)."""
    from banister.grammar.ebnf_regex import _reverse, tree_size
    from banister.regex.nodes import CharSet, Concat

    node = Concat((CharSet(((97, 97),)), CharSet(((98, 98),))))
    for _ in range(18):
        node = Concat((node, node))
    mirrored = _reverse(node)
    assert tree_size(mirrored) == tree_size(node) > 2**19
    seen: set[int] = set()
    stack = [mirrored]
    while stack:
        current = stack.pop()
        if id(current) not in seen:
            seen.add(id(current))
            stack.extend(getattr(current, "items", ()))
    assert len(seen) <= 25
    assert to_pattern(_reverse(Concat((CharSet(((97, 97),)), CharSet(((98, 98),)))))) == "ba"
