"""Regular expressions (the ECMA-262 syntax of JSON Schema ``pattern``) as lazily built byte-level DFAs.

``compile_regex`` goes text -> AST (:func:`parse_regex`) -> UTF-8 byte NFA -> :class:`RegexDFA`, whose
states other than :data:`DEAD` can all still reach acceptance.
"""

from __future__ import annotations

from banister.regex.dfa import DEAD, RegexDFA
from banister.regex.nfa import build_nfa
from banister.regex.nodes import Absent, Alternate, Anchor, CharSet, Concat, Difference, Lookahead, Machine, Node, Repeat
from banister.regex.parser import parse_pattern, parse_regex
from banister.regex.utf8 import utf8_sequences

__all__ = [
    "DEAD",
    "Absent",
    "Alternate",
    "Anchor",
    "CharSet",
    "Concat",
    "Difference",
    "Lookahead",
    "Machine",
    "Node",
    "RegexDFA",
    "Repeat",
    "compile_regex",
    "parse_pattern",
    "parse_regex",
    "utf8_sequences",
]


def compile_regex(
    pattern: str | Node, *, search: bool = False, max_states: int = 10_000, max_nfa_states: int = 100_000
) -> RegexDFA:
    """The DFA of ``pattern`` (its text, or its AST already parsed) over UTF-8 bytes.

    ``search=False``: accepts exactly the texts the pattern matches as a whole (``^``/``$`` at the ends
    change nothing). ``search=True``: JSON Schema semantics, accepts the texts with a match anywhere;
    ``^`` and ``$`` pin a match to the start or the end. Reads banister's ``(?~...)``, ``(?\\...)`` and
    ``(?@...)`` constructs too (:func:`parse_regex` with ``extensions=True``). Raises
    :class:`~banister.errors.RegexError` for bad or unsupported patterns and
    :class:`~banister.errors.LimitError` past ``max_nfa_states`` NFA states (while compiling) or
    ``max_states`` DFA states (as states are materialised).
    """
    node = parse_regex(pattern, extensions=True) if isinstance(pattern, str) else pattern
    nfa = build_nfa(node, search=search, max_nfa_states=max_nfa_states)
    return RegexDFA(nfa, max_states=max_states)
