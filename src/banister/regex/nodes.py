"""The regex AST: only what decides the language (groups, names and laziness are gone after parsing)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from banister.regex.charset import Ranges


@dataclass(frozen=True, slots=True)
class CharSet:
    """One code point from ``ranges`` (normalized; empty matches nothing)."""

    ranges: Ranges


@dataclass(frozen=True, slots=True)
class Concat:
    """The items one after another; no items matches the empty string."""

    items: tuple[Node, ...]


@dataclass(frozen=True, slots=True)
class Alternate:
    """Any one of the options."""

    options: tuple[Node, ...]


@dataclass(frozen=True, slots=True)
class Repeat:
    """``item`` repeated ``min`` to ``max`` times (``max`` None: unbounded)."""

    item: Node
    min: int
    max: int | None


@dataclass(frozen=True, slots=True)
class Anchor:
    """``^`` (``kind == "start"``: only at offset 0) or ``$`` (``"end"``: only at the end of the text)."""

    kind: Literal["start", "end"]


@dataclass(frozen=True, slots=True)
class Absent:
    """Text in which none of ``strings`` occurs (banister's ``(?~...)``, after Onigmo's absent operator).

    ``stop`` None: any such text (``nonempty``: but not the empty one). ``stop`` one of ``strings``
    (``(?~>...)``): text whose first occurrence of any of ``strings`` is ``stop``, at its very end. The
    strings are non-empty and none occurs inside another (the parser checks).
    """

    strings: tuple[str, ...]
    stop: str | None = None
    nonempty: bool = False


@dataclass(frozen=True, slots=True)
class Difference:
    """The texts ``base`` matches other than the literal ``strings`` (banister's ``(?\\...)``): "any key
    but these names" stays one short regex however many names there are."""

    base: Node
    strings: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Machine:
    """An automaton whose edges read regexes (banister's ``(?@...)``): a text matches when it leads from
    ``start`` to a state in ``accepting`` along ``edges`` ``(source, label, target)``, each step a match
    of its label. A DFA over characters stays one lexeme this way, however long its regex would be."""

    n_states: int
    start: int
    accepting: tuple[int, ...]
    edges: tuple[tuple[int, Node, int], ...]


Node = CharSet | Concat | Alternate | Repeat | Anchor | Absent | Difference | Machine


@dataclass(frozen=True, slots=True)
class Lookahead:
    """A lookahead at the start of a pattern (``^(?=...)``, ``^(?!...)``, see
    :func:`~banister.regex.parser.parse_pattern`): a text must have (``negative``: must not have) a
    match of ``anchored``, the lookahead's body after ``^``, read in search mode."""

    negative: bool
    anchored: Node
