"""Helpers shared by the GBNF/Lark tests: the data folder, a cached membership oracle, a sampler of
texts from a lowered grammar, and a mutator. The tests at the bottom check the helpers themselves."""

from __future__ import annotations

import random
from functools import cache, lru_cache

import pytest

from banister.grammar import reference
from banister.grammar.ebnf import parse_gbnf, parse_lark
from banister.grammar.ir import Grammar, Ref
from banister.regex import DEAD, compile_regex

from shared_data import GRAMMARS as DATA

needs_data = pytest.mark.skipif(not DATA.is_dir(), reason="shared grammar data not present")

_compile = lru_cache(maxsize=None)(compile_regex)


@pytest.fixture(autouse=True)
def cached_dfas(monkeypatch: pytest.MonkeyPatch) -> None:
    """The reference oracle recompiles every lexeme on every call; share the (immutable-language) DFAs."""
    monkeypatch.setattr(reference, "compile_regex", _compile)


def accepts(grammar: Grammar, text: str) -> bool:
    """Membership by the slow exact Earley oracle."""
    return reference.matches(grammar, text)


def read(relative: str) -> str:
    return (DATA / relative).read_text(encoding="utf-8")


@cache
def gbnf(relative: str) -> Grammar:
    return parse_gbnf(read(relative))


@cache
def lark_grammar(relative: str, start: str = "start", common: str | None = None) -> Grammar:
    modules = {} if common is None else {"common": read(common)}
    return parse_lark(read(relative), start=start, modules=modules)


def sample_lexeme(pattern: str, rng: random.Random, stop: float = 0.35, limit: int = 12) -> str:
    """A random member of ``pattern``: a walk on its DFA, mostly over ASCII bytes; past ``limit``
    bytes it takes a shortest way to acceptance."""
    dfa = _compile(pattern)
    state, out = dfa.start, bytearray()
    while len(out) < limit:
        live = [b for b in range(256) if dfa.step(state, b) != DEAD]
        if dfa.is_accepting(state) and (not live or rng.random() < stop):
            return out.decode()
        ascii_live = [b for b in live if b < 0x80]
        byte = rng.choice(ascii_live if ascii_live and rng.random() < 0.9 else live)
        out.append(byte)
        state = dfa.step(state, byte)
    return (out + _shortest_finish(dfa, state)).decode()


def _shortest_finish(dfa, state: int) -> bytes:  # type: ignore[no-untyped-def]
    """The shortest bytes from ``state`` to acceptance (breadth-first; ASCII preferred)."""
    paths = {state: b""}
    todo = [state]
    while todo:
        nxt = []
        for current in todo:
            if dfa.is_accepting(current):
                return paths[current]
            for byte in range(256):
                target = dfa.step(current, byte)
                if target != DEAD and target not in paths:
                    paths[target] = paths[current] + bytes([byte])
                    nxt.append(target)
        todo = nxt
    raise AssertionError("every live DFA state reaches acceptance")


def _heights(grammar: Grammar) -> dict[str, float]:
    """The least derivation height of each rule (to steer sampling towards termination)."""
    height = {name: float("inf") for name in grammar.rules}
    dead = {lex for lex in grammar.lexemes if _compile(lex.pattern).start == DEAD}
    changed = True
    while changed:
        changed = False
        for name, alternatives in grammar.rules.items():
            for alt in alternatives:
                if any(s in dead for s in alt):
                    continue
                h = 1 + max((height[s.name] if isinstance(s, Ref) else 0 for s in alt), default=0)
                if h < height[name]:
                    height[name], changed = h, True
    return height


def sample(grammar: Grammar, rng: random.Random, budget: int = 14) -> str:
    """A random text of the grammar's language (random derivation, cut short past ``budget``)."""
    height = _heights(grammar)
    out: list[str] = []
    todo: list[tuple[str | object, int]] = [(Ref(grammar.start), budget)]
    while todo:
        symbol, left = todo.pop()
        if not isinstance(symbol, Ref):
            out.append(sample_lexeme(symbol.pattern, rng))  # type: ignore[attr-defined]
            continue
        alternatives = grammar.rules[symbol.name]

        def alt_height(alt: tuple) -> float:
            if any(_compile(s.pattern).start == DEAD for s in alt if not isinstance(s, Ref)):
                return float("inf")
            return max((height[s.name] if isinstance(s, Ref) else 0 for s in alt), default=0)

        fitting = [a for a in alternatives if alt_height(a) < left]
        alt = rng.choice(fitting) if fitting else min(alternatives, key=alt_height)
        todo.extend((s, left - 1) for s in reversed(alt))
    return "".join(out)


def mutants(text: str, rng: random.Random, count: int, alphabet: str) -> list[str]:
    """Small random edits of ``text``: deletions, insertions, replacements, swaps and truncations."""
    out = []
    for _ in range(count):
        kind = rng.randrange(5)
        i = rng.randrange(len(text) + 1)
        j = min(len(text), i + 1)
        if kind == 0 and text:
            out.append(text[:i] + text[j:])
        elif kind == 1:
            out.append(text[:i] + rng.choice(alphabet) + text[i:])
        elif kind == 2 and text:
            out.append(text[:i] + rng.choice(alphabet) + text[j:])
        elif kind == 3 and len(text) > 1:
            i = rng.randrange(len(text) - 1)
            out.append(text[:i] + text[i + 1] + text[i] + text[i + 2 :])
        else:
            out.append(text[:i])
    return out


def test_sampler_stays_inside_the_language() -> None:
    grammar = parse_gbnf('root ::= "(" root ")" root | [a-c]{1,3} | ""')
    rng = random.Random(3)
    for _ in range(30):
        assert accepts(grammar, sample(grammar, rng))


def test_mutants_edit_the_text() -> None:
    rng = random.Random(0)
    edits = mutants("abc", rng, 50, "xyz")
    assert any(len(m) == 2 for m in edits) and any(len(m) == 4 for m in edits)
    assert any(m != "abc" and len(m) == 3 for m in edits)
