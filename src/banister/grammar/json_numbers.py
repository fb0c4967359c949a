"""Numbers under bounds, ``multipleOf``, integer-ness and excluded values, as exact automata.

The automaton reads the JSON number text ``-?(0|[1-9][0-9]*)(\\.[0-9]+)?`` left to right and compares it
with each bound digit by digit (how many integer digits were read, and whether the digits so far are
below, equal to or above the bound's), tracks the remainder of ``|x| * 10^s`` modulo ``c`` for each
``multipleOf`` ``c / 10^s`` (a JSON number is a finite decimal, so every ``multipleOf`` has this form),
and whether a non-zero fraction digit was seen. Exponent notation is not read here: a bounded number or a
``multipleOf`` is accepted only in plain decimal notation (documented narrowing).

A text with a fraction part is read as a double by most parsers (Python's ``json`` included), so where
that reading would change the answer the automaton also counts digits: with no upper bound on ``|x|``,
integer-ness and ``multipleOf`` allow a fraction only after at most ``MAX_FRACTION_INT_DIGITS`` integer
digits (else the double may be ``inf``); where 0 is not allowed, ``0.`` is followed by at most
``MAX_FRACTION_ZEROS`` zeros before a non-zero digit (else the double is 0).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction

from banister.grammar.json_automata import CharDFA, intern_state, minimize
from banister.grammar.json_text import (
    MAX_EXPONENT,
    MAX_FRACTION_INT_DIGITS,
    MAX_FRACTION_ZEROS,
    MAX_NEGATIVE_EXPONENT,
    decimal_text,
    digit_range_regex,
)


@dataclass(frozen=True)
class Bound:
    """``|x|`` compared with ``value`` (>= 0): ``side`` is ``"lo"``, ``"hi"`` or ``"ne"`` (not equal)."""

    value: Fraction
    side: str
    exclusive: bool = False


_LESS, _EQUAL, _GREATER = -1, 0, 1


def _digits(value: Fraction) -> tuple[str, str]:
    parts = decimal_text(value)
    if parts is None:
        raise ValueError(f"{value} is not a finite decimal")
    return parts


def _ok(bound: Bound, status: int) -> bool:
    if bound.side == "ne":
        return status != _EQUAL
    if status == _EQUAL:
        return not bound.exclusive
    return status == (_GREATER if bound.side == "lo" else _LESS)


def magnitude_dfa(
    bounds: list[Bound],
    moduli: list[tuple[int, int, bool]],
    *,
    integer: bool,
    nonint: bool,
    fraction: str | None,
    max_states: int,
    max_int_digits: int | None = None,
    max_zeros: int | None = None,
) -> CharDFA:
    """The DFA of unsigned decimal texts ``(0|[1-9][0-9]*)(\\.[0-9]+)?`` whose value ``y`` meets every
    bound, is (``True``) or is not (``False``) a multiple of ``c / 10^s`` for each ``(c, s, flag)`` in
    ``moduli``, has no non-zero fraction digit (``integer``) or has one (``nonint``), and is written
    without (``fraction="forbid"``) or with (``"require"``) a fraction part. ``max_int_digits``: a
    fraction part only after at most that many integer digits; ``max_zeros``: at most that many zeros
    between ``0.`` and the first non-zero digit."""
    base = _magnitude_dfa(bounds, moduli, integer=integer, nonint=nonint, fraction=fraction)
    if max_int_digits is None and max_zeros is None:
        return _explore(*base, max_states)
    start, step, accepting, cuts = base

    # Extra counter: integer digits (phase "i"), or the run of zeros after "0." (phases "d"/"f" after
    # "z"); -1 once it no longer matters.
    def step2(state: tuple, ch: str) -> tuple | None:
        inner, count = state
        phase = inner[0]
        nxt = step(inner, ch)
        if nxt is None:
            return None
        if ch == ".":
            if phase == "i":
                if max_int_digits is not None and count > max_int_digits:
                    return None
                return (nxt, -1)
            return (nxt, 0 if max_zeros is not None else -1)
        if nxt[0] == "i":
            return (nxt, min(count + 1, max_int_digits + 1) if max_int_digits is not None else -1)
        if nxt[0] == "f" and count >= 0:
            if ch != "0":
                return None if max_zeros is not None and count > max_zeros else (nxt, -1)
            return (nxt, min(count + 1, max_zeros + 1) if max_zeros is not None else -1)
        return (nxt, count if nxt[0] == "z" else -1)

    return _explore((start, 0), step2, lambda st: accepting(st[0]), lambda st: cuts(st[0]), max_states)


def _magnitude_dfa(
    bounds: list[Bound],
    moduli: list[tuple[int, int, bool]],
    *,
    integer: bool,
    nonint: bool,
    fraction: str | None,
) -> tuple[tuple, Callable[[tuple, str], tuple | None], Callable[[tuple], bool], Callable[[tuple], tuple[int, ...]]]:
    """Start state, step, acceptance and digit runs (see :func:`_explore`) of :func:`magnitude_dfa`
    without the digit counters."""
    digits = [_digits(b.value) for b in bounds]

    # State: (phase, per-bound comparator, per-modulus (remainder, fraction digits, nonzero beyond s),
    # nonzero fraction digit seen). phase: "s" start, "z" integer part is 0, "i" integer digits, "d" after
    # the dot, "f" fraction digits.
    def start() -> tuple:
        return ("s", tuple((0, _EQUAL) for _ in bounds), tuple((0, 0, False) for _ in moduli), False)

    def int_digit(state: tuple, d: int) -> tuple:
        _, cmps, mods, seen = state
        new_cmps = []
        for (whole, _frac), (k, rel) in zip(digits, cmps):
            if k < len(whole):
                if rel == _EQUAL:
                    rel = (d > int(whole[k])) - (d < int(whole[k]))
                new_cmps.append((k + 1, rel))
            else:
                new_cmps.append((len(whole) + 1, _GREATER))
        new_mods = tuple(((r * 10 + d) % c, 0, False) for (c, _s, _f), (r, _, _) in zip(moduli, mods))
        return ("i", tuple(new_cmps), new_mods, seen)

    def end_int(cmps: tuple) -> tuple:
        out = []
        for (whole, _frac), (k, rel) in zip(digits, cmps):
            status = _LESS if k < len(whole) else _GREATER if k > len(whole) else rel
            out.append((status, 0))
        return tuple(out)

    def frac_digit(state: tuple, d: int) -> tuple:
        _, cmps, mods, seen = state
        new_cmps = []
        for (_whole, frac), (status, j) in zip(digits, cmps):
            if status == _EQUAL:
                ref = int(frac[j]) if j < len(frac) else 0
                status = (d > ref) - (d < ref)
                j = min(j + 1, len(frac))
            new_cmps.append((status, j))
        new_mods = []
        for (c, s, _f), (r, j, beyond) in zip(moduli, mods):
            if j < s:
                new_mods.append(((r * 10 + d) % c, j + 1, beyond))
            else:
                new_mods.append((r, j, beyond or d != 0))
        return ("f", tuple(new_cmps), tuple(new_mods), seen or d != 0)

    def accepting(state: tuple) -> bool:
        phase, cmps, mods, seen = state
        if phase in ("s", "d") or (fraction == "require" and phase in ("z", "i")):
            return False
        finals = end_int(cmps) if phase in ("z", "i") else cmps
        # Equal so far, but the bound has non-zero digits left: the number is below it.
        statuses = [
            _LESS if st == _EQUAL and frac[j:].strip("0") else st for (_w, frac), (st, j) in zip(digits, finals)
        ]
        if not all(_ok(b, st) for b, st in zip(bounds, statuses)):
            return False
        for (c, s, flag), (r, j, beyond) in zip(moduli, mods):
            multiple = not beyond and (r * pow(10, s - j, c)) % c == 0
            if multiple != flag:
                return False
        return not (integer and seen) and not (nonint and not seen)

    def raw_step(state: tuple, ch: str) -> tuple | None:
        phase, cmps, mods, seen = state
        if ch == ".":
            return ("d", end_int(cmps), mods, seen) if phase in ("z", "i") and fraction != "forbid" else None
        d = ord(ch) - 48
        if phase == "s":
            return ("z", *int_digit(state, 0)[1:]) if d == 0 else int_digit(state, d)
        if phase == "i":
            return int_digit(state, d)
        if phase in ("d", "f"):
            return frac_digit(state, d)
        return None

    def dead(state: tuple) -> bool:
        """Already past an upper bound (or, in the fraction, below a lower one) for good."""
        phase, cmps = state[0], state[1]
        for bound, (whole, _frac), cmp in zip(bounds, digits, cmps):
            if phase in ("z", "i"):
                k, rel = cmp
                past = k > len(whole) or (k == len(whole) and rel == _GREATER)
                if bound.side == "hi" and past:
                    return True
            elif bound.side == "hi" and cmp[0] == _GREATER or bound.side == "lo" and cmp[0] == _LESS:
                return True
        return False

    def step(state: tuple, ch: str) -> tuple | None:
        nxt = raw_step(state, ch)
        return None if nxt is None or dead(nxt) else nxt

    every = tuple(range(10))

    def cuts(state: tuple) -> tuple[int, ...]:
        """The digits where a run of digits alike in ``state`` starts: each bound still equal so far
        parts its next digit from those below and above it; 0 is apart from 1-9 (the zero phase, a
        non-zero fraction digit); a modulus parts every digit, except past its scale."""
        phase, cmps, mods, _ = state
        if mods and (phase in ("s", "i") or any(j < s for (_c, s, _f), (_r, j, _b) in zip(moduli, mods))):
            return every
        points = {0, 1}
        if phase in ("s", "i"):
            for (whole, _frac), (k, rel) in zip(digits, cmps):
                if rel == _EQUAL and k < len(whole):
                    points.add(int(whole[k]))
                    points.add(int(whole[k]) + 1)
        elif phase in ("d", "f"):
            for (_whole, frac), (status, j) in zip(digits, cmps):
                if status == _EQUAL:
                    ref = int(frac[j]) if j < len(frac) else 0
                    points.add(ref)
                    points.add(ref + 1)
        points.discard(10)
        return tuple(sorted(points))

    return start(), step, accepting, cuts


def _explore(
    start: tuple,
    step: Callable[[tuple, str], tuple | None],
    accepting: Callable[[tuple], bool],
    cuts: Callable[[tuple], tuple[int, ...]],
    max_states: int,
) -> CharDFA:
    """The DFA reachable from ``start`` over the digits and ``.``. ``cuts(state)`` lists the digits
    that start a run of digits ``step`` treats alike (0 first): each run is stepped once, on its first
    digit, and becomes one edge (most states read 2 to 4 runs, not 10 digits)."""
    index = {start: 0}
    order = [start]
    edges: list[list[tuple[int, int, int]]] = []
    for state in order:
        row = []
        points = cuts(state)
        for lo, hi in zip(points, (*points[1:], 10)):
            nxt = step(state, _DIGITS[lo])
            if nxt is not None:
                found = intern_state(index, order, nxt, max_states, "a number constraint", "max_number_states")
                row.append((48 + lo, 47 + hi, found))
        nxt = step(state, ".")
        if nxt is not None:
            row.append((46, 46, intern_state(index, order, nxt, max_states, "a number constraint", "max_number_states")))
        edges.append(row)
    return CharDFA(edges, [accepting(s) for s in order])


_DIGITS = "0123456789"


def signed_parts(
    lo: Fraction | None, lo_x: bool, hi: Fraction | None, hi_x: bool, excluded: frozenset[Fraction]
) -> list[tuple[bool, list[Bound]]]:
    """For each sign (False: ``x >= 0`` written without ``-``, True: ``-y``), the bounds on ``y = |x|``;
    a sign whose range is empty is left out."""
    out = []
    for negative in (False, True):
        bounds: list[Bound] = []
        low, low_x = (lo, lo_x) if not negative else ((-hi, hi_x) if hi is not None else (None, False))
        high, high_x = (hi, hi_x) if not negative else ((-lo, lo_x) if lo is not None else (None, False))
        if high is not None and (high < 0 or (high == 0 and high_x)):
            continue
        if low is not None and (low > 0 or (low == 0 and low_x)):
            bounds.append(Bound(low, "lo", low_x))
        if high is not None:
            bounds.append(Bound(high, "hi", high_x))
        for e in excluded:
            y = -e if negative else e
            if y >= 0:
                bounds.append(Bound(y, "ne"))
        out.append((negative, bounds))
    return out


def number_dfa(
    lo: Fraction | None,
    lo_x: bool,
    hi: Fraction | None,
    hi_x: bool,
    *,
    integer: bool,
    nonint: bool,
    fraction: str | None,
    mult: tuple[Fraction, ...],
    nonmult: tuple[Fraction, ...],
    excluded: frozenset[Fraction],
    max_states: int,
) -> CharDFA:
    """The minimal DFA of the plain decimal JSON numbers meeting all the constraints (sign included)."""
    moduli = [(*_modulus(m), True) for m in mult] + [(*_modulus(m), False) for m in nonmult]
    parts = []
    for negative, bounds in signed_parts(lo, lo_x, hi, hi_x, excluded):
        open_above = not any(b.side == "hi" for b in bounds)
        overflow = open_above and fraction != "forbid" and (integer or any(flag for _c, _s, flag in moduli))
        zero_excluded = any(b.value == 0 and (b.side == "ne" or b.exclusive) for b in bounds)
        underflow = fraction != "forbid" and (zero_excluded or nonint or any(not f for _c, _s, f in moduli))
        dfa = magnitude_dfa(
            bounds,
            moduli,
            integer=integer,
            nonint=nonint,
            fraction=fraction,
            max_states=max_states,
            max_int_digits=MAX_FRACTION_INT_DIGITS if overflow else None,
            max_zeros=MAX_FRACTION_ZEROS if underflow else None,
        )
        parts.append((negative, dfa))
    # Join: state 0 reads an optional '-' then continues as the matching magnitude DFA.
    edges: list[list[tuple[int, int, int]]] = [[]]
    accepting = [False]
    for negative, dfa in parts:
        offset = len(edges)
        edges.extend([(lo_, hi_, t + offset) for lo_, hi_, t in row] for row in dfa.edges)
        accepting.extend(dfa.accepting)
        if negative:
            edges[0].append((ord("-"), ord("-"), offset))
        else:
            edges[0].extend((lo_, hi_, t + offset) for lo_, hi_, t in dfa.edges[0])
            accepting[0] = accepting[0] or dfa.accepting[0]
    edges[0].sort()
    return minimize(CharDFA(edges, accepting))


def _modulus(m: Fraction) -> tuple[int, int]:
    """``(c, s)`` with ``m == c / 10^s``."""
    whole, frac = _digits(m)
    return int(whole + frac), len(frac)


def exponent_forms(lo: Fraction | None, lo_x: bool, hi: Fraction | None, hi_x: bool, *, integer: bool) -> str | None:
    """Exponent-notation numbers (``[1-9](.d+)?e±E``, as ``json.dumps`` writes large and small floats)
    whose magnitude alone puts them in range: a subset of the valid ones, exact where it accepts.

    Large ones (``1e+16``) when there is no bound on their side, small ones (``5e-07``) when 0 is
    within or at the edge of the range; integers only large, with at most as many mantissa fraction
    digits as the exponent's least value. A double parser reads neither ``inf`` for an integer (its
    exponent is at most ``MAX_EXPONENT``, 307) nor 0 where 0 is excluded (a negative exponent is at
    most ``MAX_NEGATIVE_EXPONENT``, 323, there); elsewhere ``inf`` and 0 are in range too.
    """

    def above(p: int, limit: Fraction | None, exclusive: bool) -> int:
        while limit is not None and (Fraction(10) ** p < limit or (Fraction(10) ** p == limit and exclusive)):
            p += 1
        return p

    alts = []
    for sign, bound, bx, open_side in (("", lo, lo_x, hi), ("-", None if hi is None else -hi, hi_x, lo)):
        if open_side is not None:
            continue
        p = above(0, bound, bx)
        if integer and p > MAX_EXPONENT:
            continue
        fraction = (r"(?:\.[0-9]{1," + str(p) + "})?" if p else "") if integer else r"(?:\.[0-9]+)?"
        mantissa = "[1-9]" + fraction
        alts.append(sign + mantissa + r"[eE]\+?" + digit_range_regex(p, MAX_EXPONENT if integer else None))
    if not integer:
        sides = (("", lo, lo_x, hi), ("-", None if hi is None else -hi, hi_x, None if lo is None else -lo))
        for sign, near, near_x, far in sides:
            # |x| < 10^(1-q) and x on this side of 0: valid when 0 is in or at the edge of the range.
            if (near is not None and near > 0) or (far is not None and far <= 0):
                continue
            q = 1
            while far is not None and Fraction(10) ** (1 - q) > far:
                q += 1
            # 0 excluded: a magnitude a double reads as 0 would break the bound.
            top = MAX_NEGATIVE_EXPONENT if near == 0 and near_x else None
            if top is None or q <= top:
                alts.append(sign + r"[1-9](?:\.[0-9]+)?[eE]-" + digit_range_regex(q, top))
    return "|".join(alts) if alts else None
