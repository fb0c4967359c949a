"""The code-point DFAs behind combined string and number constraints: minimisation, and the digit
automaton of number ranges."""

from __future__ import annotations

import random
from fractions import Fraction
from itertools import pairwise

import pytest

from banister.grammar import json_automata, json_numbers
from banister.grammar.json_automata import CharDFA, minimize

POINTS = [0, 45, 46, 48, 49, 53, 57, 101, 0x10FFFF]  # cut points of the random edges' ranges


def _random_dfa(rng: random.Random, n: int) -> CharDFA:
    """A DFA of ``n`` states whose rows cover random unions of the ranges between ``POINTS``, listed
    in a shuffled order (as the number automata list theirs: digits before the dot)."""
    edges = []
    for _ in range(n):
        row = []
        for lo, hi in pairwise(POINTS):
            if rng.random() < 0.5:
                row.append((lo, hi - 1, rng.randrange(n)))
        rng.shuffle(row)
        edges.append(row)
    return CharDFA(edges, [rng.random() < 0.3 for _ in range(n)])


def _step(dfa: CharDFA, state: int, cp: int) -> int:
    """The next state, or -1 (dead), read from rows in any order (``CharDFA.step`` needs them sorted)."""
    return -1 if state < 0 else next((t for lo, hi, t in dfa.edges[state] if lo <= cp <= hi), -1)


def _run(dfa: CharDFA, word: list[int]) -> bool:
    state = 0
    for cp in word:
        state = _step(dfa, state, cp)
    return state >= 0 and dfa.accepting[state]


def _equivalent_pairs(dfa: CharDFA) -> set[tuple[int, int]]:
    """Pairs of distinct states no word tells apart: the complement of the distinguishable pairs, found
    by the textbook fixpoint over pairs (the dead state, -1, included)."""
    states = [*range(dfa.n_states), -1]
    accepts = {s: s >= 0 and dfa.accepting[s] for s in states}
    apart = {(p, q) for p in states for q in states if accepts[p] != accepts[q]}
    changed = True
    while changed:
        changed = False
        for p in states:
            for q in states:
                if p != q and (p, q) not in apart and any((_step(dfa, p, cp), _step(dfa, q, cp)) in apart for cp in POINTS[:-1]):
                    apart.add((p, q))
                    changed = True
    return {(p, q) for p in states for q in states if p < q and (p, q) not in apart}


@pytest.mark.parametrize("seed", range(40))
def test_minimize_keeps_the_language_and_merges_every_equivalent_state(seed, monkeypatch):
    rng = random.Random(seed)
    dfa = _random_dfa(rng, rng.randint(1, 30))
    monkeypatch.setattr(json_automata, "MOORE_STATES", 1 << 20)
    moore = minimize(dfa)
    monkeypatch.setattr(json_automata, "MOORE_STATES", 0)
    hopcroft = minimize(dfa)
    assert (moore.edges, moore.accepting) == (hopcroft.edges, hopcroft.accepting)
    empty = (moore.edges, moore.accepting) == (((),), (False,))  # the empty language keeps a start
    assert not _equivalent_pairs(moore) or empty
    for row in moore.edges:  # sorted, disjoint, adjacent ranges to one target joined
        assert all(a[1] < b[0] and not (a[1] + 1 == b[0] and a[2] == b[2]) for a, b in pairwise(row))
    letters = POINTS[:-1] + [p - 1 for p in POINTS[1:]]
    for _ in range(300):
        word = [rng.choice(letters) for _ in range(rng.randint(0, 8))]
        assert _run(moore, word) is _run(dfa, word), word


@pytest.mark.parametrize("seed", range(6))
def test_a_number_automaton_stepping_runs_of_digits_is_the_one_stepping_every_digit(seed, monkeypatch):
    """The digit automaton steps once per run of digits its state treats alike; stepping each of the
    ten digits instead must build the same minimal DFA, for bounds, multiples and excluded values."""
    rng = random.Random(seed)
    values = [Fraction(v) for v in ("0", "1", "-1", "7.5", "-2.25", "100", "0.125", "-300", "65535", "0.07", "1e-3")]
    explore = json_numbers._explore
    cases = []
    for _ in range(40):
        lo, hi = (rng.choice([None, *values]) for _ in range(2))
        if lo is not None and hi is not None and lo > hi:
            lo, hi = hi, lo
        integer = rng.random() < 0.4
        cases.append(((lo, rng.random() < 0.3, hi, rng.random() < 0.3), {
            "integer": integer, "nonint": not integer and rng.random() < 0.1,
            "fraction": rng.choice([None, None, "forbid", "require"]),
            "mult": tuple(rng.sample([Fraction(2), Fraction(1, 4), Fraction(7, 10)], rng.choice([0, 0, 1]))),
            "nonmult": tuple(rng.sample([Fraction(5), Fraction(1, 2)], rng.choice([0, 0, 1]))),
            "excluded": frozenset(rng.sample(values, rng.choice([0, 1]))), "max_states": 20_000}))
    runs = [json_numbers.number_dfa(*args, **options) for args, options in cases]
    monkeypatch.setattr(json_numbers, "_explore", lambda start, step, accepting, _cuts, limit: explore(
        start, step, accepting, lambda _state: tuple(range(10)), limit))
    for (args, options), dfa in zip(cases, runs):
        every = json_numbers.number_dfa(*args, **options)
        assert (dfa.edges, dfa.accepting) == (every.edges, every.accepting), (args, options)


@pytest.mark.parametrize("seed", range(30))
def test_a_product_accepts_what_its_components_accept_together(seed):
    """A product, pruned where a component it needs dies, against its components run one by one: for
    intersections with complements (as string constraints combine), unions, and complements."""
    rng = random.Random(seed)
    dfas = [_random_dfa(rng, rng.randint(1, 8)) for _ in range(rng.randint(1, 4))]
    dfas = [CharDFA([sorted(row) for row in dfa.edges], dfa.accepting) for dfa in dfas]
    signs = [rng.random() < 0.7 for _ in dfas]
    for accept in (lambda flags: all(f == s for f, s in zip(flags, signs)), any, lambda flags: not any(flags)):
        both = json_automata.product(dfas, accept, max_states=10_000)
        letters = POINTS[:-1] + [p - 1 for p in POINTS[1:]]
        for _ in range(200):
            word = [rng.choice(letters) for _ in range(rng.randint(0, 8))]
            assert _run(both, word) is accept(tuple(_run(dfa, word) for dfa in dfas)), word


def test_a_product_does_not_explore_what_a_needed_component_rejected():
    """A length bound intersected with a pattern: past the pattern's first wrong character nothing can
    be accepted, so those texts are not counted on to the bound (``^https?://.+$`` with
    ``maxLength: 1024``, a MaskBench schema, needed more than ``max_string_states`` states)."""
    pattern = json_automata.from_pattern("^https?://.+$")
    length = json_automata.length(0, 1024, max_states=2000)
    both = json_automata.product([pattern, length], all, max_states=2000)
    assert both.n_states < 1100
    for text, ok in [("http://a", True), ("https://" + "x" * 1016, True), ("https://" + "x" * 1017, False),
                     ("ftp://a", False), ("http://", False)]:
        assert both.matches(text) is ok, text
