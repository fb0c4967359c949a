"""JSON Schema as logic: each schema becomes a disjunction of *shapes*, one conjunctive term per JSON type.

A shape lists the JSON types it admits and, for each, the constraints on values of that type (numbers,
strings, arrays, objects); a schema is the union of its shapes. ``allOf`` intersects shapes type by type,
``anyOf`` concatenates the lists, ``not`` complements constraint by constraint (and refuses what has no
finite complement here, e.g. ``uniqueItems``), ``oneOf`` is ``anyOf`` once its branches are proved
disjoint (else each branch is intersected with the complement of the others), ``if``/``then``/``else``
is ``(if and then) or (not if and else)``. Sub-values (property values, items) are never expanded here:
they stay *nodes*, tuples of references to schema locations (possibly negated), which the grammar
builder compiles on its own, so recursive schemas terminate.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field, replace
from fractions import Fraction
from functools import lru_cache
from typing import Any

from banister.errors import BanisterError, LimitError, RegexError, SchemaError
from banister.grammar import json_automata
from banister.grammar.json_formats import FORMATS, OPENAPI_NUMBER_FORMATS, SPEC_FORMATS, format_regex
from banister.grammar.json_keywords import FOREIGN, KEYWORDS, REFUSED
from banister.grammar.json_resolve import Document, Location, escape_token
from banister.regex import Lookahead, RegexDFA, compile_regex, parse_pattern
from banister.regex.nodes import Node as RegexNode

TYPES = ("null", "boolean", "object", "array", "number", "string")
ALL_TYPES = frozenset(TYPES)
_TYPE_NAMES = frozenset(TYPES) | {"integer"}

# A node is a conjunction of items: ("loc", pointer), ("values", texts), ("not", node) or ("false",).
# ("values", texts) admits exactly the JSON values of ``texts`` (what complements of enums of arrays
# and objects say of their items and members).
Item = tuple
Node = tuple[Item, ...]
TRUE: Node = ()
FALSE: Node = (("false",),)


def node_and(*nodes: Node) -> Node:
    """The conjunction of nodes (items deduplicated, order kept)."""
    out: dict[Item, None] = {}
    for n in nodes:
        if n == FALSE:
            return FALSE
        for item in n:
            out.setdefault(item)
    return tuple(out)


def node_not(node: Node) -> Node:
    if node == TRUE:
        return FALSE
    if node == FALSE:
        return TRUE
    if len(node) == 1 and node[0][0] == "not":
        return node[0][1]
    return (("not", node),)


def loc_node(pointer: str) -> Node:
    return (("loc", pointer),)


def values_node(values: Iterable[Any]) -> Node:
    """The node admitting exactly the JSON ``values``."""
    return (("values", _texts(list(values))),)


def to_fraction(value: Any) -> Fraction:
    """The exact value of a JSON number (floats by their shortest decimal text)."""
    if isinstance(value, bool):
        raise TypeError("a boolean is not a number")
    if isinstance(value, int):
        return Fraction(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError("not a finite number")
        return Fraction(repr(value))
    raise TypeError("not a number")


def json_type(value: Any) -> str:
    """The JSON type name of a Python JSON value (``number`` for int and float)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    if isinstance(value, dict):
        return "object"
    raise TypeError(f"not a JSON value: {type(value).__name__}")


def canon(value: Any) -> Any:
    """A hashable key equal for JSON-equal values (``1 == 1.0``, key order ignored, ``true != 1``)."""
    kind = json_type(value)
    if kind == "number":
        return ("n", to_fraction(value))
    if kind == "array":
        return ("a", tuple(canon(v) for v in value))
    if kind == "object":
        return ("o", frozenset((k, canon(v)) for k, v in value.items()))
    return (kind[0], value)


def _hash_once(cls: type) -> type:
    """Remember a frozen dataclass's hash on the instance: shapes and terms key the memos of emptiness
    and expansion, and a shape's generated hash would rehash its four terms, field by field, each time.
    Equality then answers from identity, or from two remembered hashes that differ, before it compares
    field by field (equal values hash alike)."""
    # The class's own functions (getattr: typed as unbound, which they are).
    computed_hash: Callable[[Any], int] = getattr(cls, "__hash__")
    computed_eq: Callable[[Any, Any], Any] = getattr(cls, "__eq__")

    def __hash__(self: Any) -> int:
        found = self.__dict__.get("_hash")
        if found is None:
            found = computed_hash(self)
            object.__setattr__(self, "_hash", found)
        return found

    def __eq__(self: Any, other: Any) -> Any:
        if self is other:
            return True
        mine = self.__dict__.get("_hash")
        if mine is not None and other.__class__ is self.__class__:
            theirs = other.__dict__.get("_hash")
            if theirs is not None and theirs != mine:
                return False
        return computed_eq(self, other)

    cls.__hash__ = __hash__  # type: ignore[assignment]
    cls.__eq__ = __eq__  # type: ignore[assignment]
    return cls


@_hash_once
@dataclass(frozen=True)
class NumTerm:
    """Constraints on a number: integer or not, bounds, multiples, a finite set of values or exclusions.

    ``plain``/``nonplain``: written without / with a fraction or exponent (draft 4's ``integer`` is a
    property of the text: ``1.0`` is not one there)."""

    integer: bool = False
    nonint: bool = False
    lo: Fraction | None = None
    lo_x: bool = False
    hi: Fraction | None = None
    hi_x: bool = False
    mult: tuple[Fraction, ...] = ()
    nonmult: tuple[Fraction, ...] = ()
    values: frozenset[Fraction] | None = None
    excluded: frozenset[Fraction] = frozenset()
    plain: bool = False
    nonplain: bool = False

    def admits(self, v: Fraction) -> bool:
        if (self.integer and v.denominator != 1) or (self.nonint and v.denominator == 1):
            return False
        if self.lo is not None and (v < self.lo or (self.lo_x and v == self.lo)):
            return False
        if self.hi is not None and (v > self.hi or (self.hi_x and v == self.hi)):
            return False
        if (self.values is not None and v not in self.values) or v in self.excluded:
            return False
        if self.mult and any((v / m).denominator != 1 for m in self.mult):
            return False
        return not (self.nonmult and any((v / m).denominator == 1 for m in self.nonmult))


@_hash_once
@dataclass(frozen=True)
class StrTerm:
    """Constraints on a string; patterns and formats carry the pointer of their keyword."""

    min_len: int = 0
    max_len: int | None = None
    patterns: tuple[tuple[str, str], ...] = ()
    neg_patterns: tuple[tuple[str, str], ...] = ()
    formats: tuple[tuple[str, str], ...] = ()
    neg_formats: tuple[tuple[str, str], ...] = ()
    values: frozenset[str] | None = None
    excluded: frozenset[str] = frozenset()

    def admits(self, s: str) -> bool:
        if len(s) < self.min_len or (self.max_len is not None and len(s) > self.max_len):
            return False
        if (self.values is not None and s not in self.values) or s in self.excluded:
            return False
        if not (self.patterns or self.neg_patterns or self.formats or self.neg_formats):
            return True
        if not all(pattern_matches(p, s) for p, _ in self.patterns):
            return False
        if any(pattern_matches(p, s) for p, _ in self.neg_patterns):
            return False
        if not all(format_matches(f, s) for f, _ in self.formats):
            return False
        return not any(format_matches(f, s) for f, _ in self.neg_formats)

    def unplaced(self) -> StrTerm:
        """The same constraints without their keywords' pointers: what the process-wide memos of string
        plans and DFAs are keyed by (they read no pointer, and a format or pattern recurs across
        schemas, and within one, at other pointers)."""
        if not (self.patterns or self.neg_patterns or self.formats or self.neg_formats):
            return self
        return StrTerm(self.min_len, self.max_len, _unplaced(self.patterns), _unplaced(self.neg_patterns),
                       _unplaced(self.formats), _unplaced(self.neg_formats), self.values, self.excluded)


def _unplaced(items: tuple[tuple[str, str], ...]) -> tuple[tuple[str, str], ...]:
    return tuple(dict.fromkeys((text, "") for text, _ in items))


@dataclass(frozen=True)
class Contains:
    """Between ``min`` and ``max`` items at positions ``>= start`` satisfy ``node``."""

    node: Node
    min: int
    max: int | None
    start: int
    where: str


@_hash_once
@dataclass(frozen=True)
class ArrTerm:
    min_items: int = 0
    max_items: int | None = None
    at: tuple[tuple[int, Node], ...] = ()
    rest: tuple[tuple[int, Node], ...] = ()
    contains: tuple[Contains, ...] = ()
    unique: str | None = None
    values: tuple[str, ...] | None = None
    evaluated: int | None = field(default=0, compare=False)
    """Annotation for ``unevaluatedItems``: the leading items evaluated whenever the term holds (None:
    all). An under-approximation (``contains`` is not counted), so using it only narrows."""


# Key sets for object rules: ("pattern", p) keys matching p; ("other", names, patterns) keys in neither;
# ("unnamed", node) keys that are not valid under the string schema ``node`` (from propertyNames).
KeySet = tuple


@_hash_once
@dataclass(frozen=True)
class ObjTerm:
    props: tuple[tuple[str, Node], ...] = ()
    rules: tuple[tuple[KeySet, Node, str], ...] = ()
    required: frozenset[str] = frozenset()
    min_props: int = 0
    max_props: int | None = None
    deps: tuple[tuple[str, tuple[str, ...]], ...] = ()
    values: tuple[str, ...] | None = None
    exists: tuple[tuple[KeySet, Node, str], ...] = ()
    """Some key in the set has a value valid under the node (the complement of a rule)."""
    evaluated: tuple[frozenset[str], frozenset[str]] | None = field(
        default=(frozenset(), frozenset()), compare=False
    )
    """Annotation for ``unevaluatedProperties``: (names, patterns) of the keys evaluated whenever the
    term holds (None: every key). An under-approximation: it only comes from schemas that must hold
    (own keywords, ``$ref``, ``allOf``, the branch of ``anyOf``/``oneOf``/``if`` this shape stands for),
    never from ``not``."""


_TERM_TYPES = {"number": NumTerm, "string": StrTerm, "array": ArrTerm, "object": ObjTerm}
_DEFAULT_TERMS = {kind: cls() for kind, cls in _TERM_TYPES.items()}
_ARRAY_KEYWORDS = frozenset(
    ("minItems", "maxItems", "prefixItems", "items", "additionalItems", "unevaluatedItems", "contains", "uniqueItems")
)
"""The keywords :meth:`Logic._array_term` reads (``minContains``/``maxContains`` only with ``contains``)."""
_IN_PLACE_KEYWORDS = frozenset((
    "$ref", "allOf", "anyOf", "oneOf", "not", "if", "dependentSchemas", "dependencies", "unevaluatedProperties",
    "unevaluatedItems",
))
"""The keywords :meth:`Logic._expand` reads past the schema's own shape (a schema with none of them is
that shape)."""
_NUMBER_KEYWORDS = frozenset(("minimum", "exclusiveMinimum", "maximum", "exclusiveMaximum", "multipleOf", "format"))
_STRING_KEYWORDS = frozenset(("minLength", "maxLength", "pattern", "format"))
_OBJECT_KEYWORDS = frozenset((
    "properties", "patternProperties", "additionalProperties", "unevaluatedProperties", "propertyNames", "required",
    "dependentRequired", "dependencies", "minProperties", "maxProperties",
))
"""The keywords :meth:`Logic._number_term`, ``_string_term`` and ``_object_term`` read: a schema with none
of them gets the shared unconstrained term."""
_LEAF_KEYWORDS = {"string": _STRING_KEYWORDS, "number": _NUMBER_KEYWORDS, "integer": _NUMBER_KEYWORDS}
"""The keywords a schema of one of these types may hold for :meth:`Logic.plain_leaf` (besides annotations)."""
_DEFAULT_NUM, _DEFAULT_STR, _DEFAULT_ARR, _DEFAULT_OBJ = (
    _DEFAULT_TERMS["number"],
    _DEFAULT_TERMS["string"],
    _DEFAULT_TERMS["array"],
    _DEFAULT_TERMS["object"],
)
"""One shared unconstrained term per type (terms are immutable), so most checks are by identity."""


@_hash_once
@dataclass(frozen=True)
class Shape:
    """A union over ``types`` of one constraint term per type (null has none)."""

    types: frozenset[str]
    boolean: frozenset[bool] = frozenset({True, False})
    number: NumTerm = _DEFAULT_NUM
    string: StrTerm = _DEFAULT_STR
    array: ArrTerm = _DEFAULT_ARR
    object: ObjTerm = _DEFAULT_OBJ
    narrowed: str | None = field(default=None, compare=False)
    """Pointer of an ``unevaluated*`` keyword applied with under-approximated annotations: the shape may
    be narrower than the schema, so it has no complement here."""

    def free(self, kind: str) -> bool:
        """Whether values of type ``kind`` are unconstrained here."""
        if kind == "null":
            return True
        if kind == "boolean":
            return len(self.boolean) == 2
        term, default = getattr(self, kind), _DEFAULT_TERMS[kind]
        return term is default or term == default

    def only(self, kinds: Iterable[str]) -> Shape:
        # As dataclasses.replace(self, types=...), without its per-call field walk; itself (its hash
        # remembered) when no type goes.
        types = self.types & frozenset(kinds)
        if types == self.types:
            return self
        return Shape(types, self.boolean, self.number, self.string, self.array, self.object, self.narrowed)


ANY = Shape(ALL_TYPES)
DNF = list[Shape]


@lru_cache(maxsize=4096)
def _search_dfas(pattern: str) -> tuple[RegexDFA, tuple[tuple[bool, RegexDFA], ...]]:
    """The search DFA of a pattern without its leading lookaheads, and theirs (whether negative, DFA)."""
    core, looks = schema_regex(pattern)
    return compile_regex(core, search=True), tuple((look.negative, compile_regex(look.anchored, search=True))
                                                    for look in looks)


@lru_cache(maxsize=64)
def _format_dfa(name: str) -> Any:
    regex = FORMATS[name].regex
    return None if regex is None else compile_regex(regex)


def pattern_matches(pattern: str, s: str) -> bool:
    try:
        data = s.encode("utf-8")
    except UnicodeEncodeError:
        return False
    core, looks = _search_dfas(pattern)
    return core.matches(data) and all(dfa.matches(data) != negative for negative, dfa in looks)


def format_matches(name: str, s: str) -> bool:
    dfa = _format_dfa(name)
    if dfa is None:
        return True
    try:
        return dfa.matches(s.encode("utf-8"))
    except UnicodeEncodeError:
        return False


# ---------------------------------------------------------------------------------------------- merging


def _tighter_lo(a: tuple[Fraction | None, bool], b: tuple[Fraction | None, bool]) -> tuple[Fraction | None, bool]:
    if a[0] is None:
        return b
    if b[0] is None or a[0] > b[0]:
        return a
    if b[0] > a[0]:
        return b
    return a[0], a[1] or b[1]


def _tighter_hi(a: tuple[Fraction | None, bool], b: tuple[Fraction | None, bool]) -> tuple[Fraction | None, bool]:
    if a[0] is None:
        return b
    if b[0] is None or a[0] < b[0]:
        return a
    if b[0] < a[0]:
        return b
    return a[0], a[1] or b[1]


def _meet_values(a: Any, b: Any) -> Any:
    if a is None:
        return b
    if b is None:
        return a
    if isinstance(a, frozenset):
        return a & b
    keys = {canon(json.loads(v)) for v in b}
    return tuple(v for v in a if canon(json.loads(v)) in keys)


def _uniq(items: Iterable[Any]) -> tuple:
    return tuple(dict.fromkeys(items))


def merge_num(a: NumTerm, b: NumTerm) -> NumTerm:
    if b is _DEFAULT_NUM or b is a:
        return a
    if a is _DEFAULT_NUM:
        return b
    lo, lo_x = _tighter_lo((a.lo, a.lo_x), (b.lo, b.lo_x))
    hi, hi_x = _tighter_hi((a.hi, a.hi_x), (b.hi, b.hi_x))
    return NumTerm(
        integer=a.integer or b.integer,
        nonint=a.nonint or b.nonint,
        lo=lo,
        lo_x=lo_x,
        hi=hi,
        hi_x=hi_x,
        mult=_uniq(a.mult + b.mult),
        nonmult=_uniq(a.nonmult + b.nonmult),
        values=_meet_values(a.values, b.values),
        excluded=a.excluded | b.excluded,
        plain=a.plain or b.plain,
        nonplain=a.nonplain or b.nonplain,
    )


def merge_str(a: StrTerm, b: StrTerm) -> StrTerm:
    if b is _DEFAULT_STR or b is a:
        return a
    if a is _DEFAULT_STR:
        return b
    hi = a.max_len if b.max_len is None else b.max_len if a.max_len is None else min(a.max_len, b.max_len)
    return StrTerm(
        max(a.min_len, b.min_len),
        hi,
        _uniq(a.patterns + b.patterns),
        _uniq(a.neg_patterns + b.neg_patterns),
        _uniq(a.formats + b.formats),
        _uniq(a.neg_formats + b.neg_formats),
        _meet_values(a.values, b.values),
        a.excluded | b.excluded,
    )


def merge_arr(a: ArrTerm, b: ArrTerm) -> ArrTerm:
    if b is _DEFAULT_ARR or b is a:
        return a
    if a is _DEFAULT_ARR:
        return b
    hi = a.max_items if b.max_items is None else b.max_items if a.max_items is None else min(a.max_items, b.max_items)
    return ArrTerm(
        max(a.min_items, b.min_items),
        hi,
        _uniq(a.at + b.at),
        _uniq(a.rest + b.rest),
        _uniq(a.contains + b.contains),
        a.unique or b.unique,
        _meet_values(a.values, b.values),
        None if a.evaluated is None or b.evaluated is None else max(a.evaluated, b.evaluated),
    )


def merge_obj(a: ObjTerm, b: ObjTerm) -> ObjTerm:
    if b is _DEFAULT_OBJ or b is a:
        return a
    if a is _DEFAULT_OBJ:
        return b
    hi = a.max_props if b.max_props is None else b.max_props if a.max_props is None else min(a.max_props, b.max_props)
    return ObjTerm(
        _uniq(a.props + b.props),
        _uniq(a.rules + b.rules),
        a.required | b.required,
        max(a.min_props, b.min_props),
        hi,
        _uniq(a.deps + b.deps),
        _meet_values(a.values, b.values),
        _uniq(a.exists + b.exists),
        None
        if a.evaluated is None or b.evaluated is None
        else (a.evaluated[0] | b.evaluated[0], a.evaluated[1] | b.evaluated[1]),
    )


def merge(a: Shape, b: Shape) -> Shape:
    """The intersection of two shapes (the other one itself when a side is ``ANY`` or both are the same;
    the ``merge_*`` of terms do the same with the unconstrained terms)."""
    if b is ANY or b is a:
        return a
    if a is ANY:
        return b
    return Shape(
        a.types & b.types,
        a.boolean & b.boolean,
        merge_num(a.number, b.number),
        merge_str(a.string, b.string),
        merge_arr(a.array, b.array),
        merge_obj(a.object, b.object),
        a.narrowed or b.narrowed,
    )


def compact(dnf: Iterable[Shape]) -> DNF:
    """Drop shapes without types, types another shape admits unconstrained, and duplicates; then merge
    shapes whose type sets are disjoint (their union is one shape)."""
    shapes = [s for s in dnf if s.types]
    free: set[str] = set()
    for s in shapes:
        free.update(t for t in s.types if s.free(t))
    out: list[Shape] = []
    for s in shapes:
        kinds = frozenset(t for t in s.types if t not in free or s.free(t))
        if kinds:
            out.append(s.only(kinds))
    # Free types once, in a single shape.
    cleaned: list[Shape] = []
    seen_free: set[str] = set()
    for s in out:
        kinds = frozenset(t for t in s.types if not (s.free(t) and t in seen_free))
        seen_free.update(t for t in s.types if s.free(t))
        if kinds:
            cleaned.append(s.only(kinds))
    merged: list[Shape] = []
    for s in dict.fromkeys(cleaned):
        for i, m in enumerate(merged):
            if not (m.types & s.types):
                merged[i] = _union_disjoint(m, s)
                break
        else:
            merged.append(s)
    return merged


def _union_disjoint(a: Shape, b: Shape) -> Shape:
    pick = {t: (a if t in a.types else b) for t in a.types | b.types}
    return Shape(
        a.types | b.types,
        pick["boolean"].boolean if "boolean" in pick else frozenset({True, False}),
        pick["number"].number if "number" in pick else _DEFAULT_NUM,
        pick["string"].string if "string" in pick else _DEFAULT_STR,
        pick["array"].array if "array" in pick else _DEFAULT_ARR,
        pick["object"].object if "object" in pick else _DEFAULT_OBJ,
        a.narrowed or b.narrowed,
    )


# ------------------------------------------------------------------------------------------ the logic


@dataclass(frozen=True)
class LogicOptions:
    strict: bool
    unsupported_formats: str
    unknown_formats: str
    max_alternatives: int
    max_depth: int
    deadline: float


_SCALAR_TYPES = frozenset({"string", "number", "integer", "boolean", "null"})
_CONSTRAINING = frozenset(k.name for k in KEYWORDS if k.status != "annotation") - {"type"}
"""The keywords the shortcuts (``Logic.pure_ref``, ``Logic.plain_*``) look for: all that the compiler
reads but ``type`` and annotations. Keywords no draft defines are ignored, as annotations are, and so
are those of the document (definitions, identifiers, ``$schema``), which constrain nothing where they
stand: the document's index has read them into each location."""
_PLAIN_OBJECT_KEYS = frozenset(("properties", "required", "additionalProperties"))
"""Those of them a schema :meth:`Logic.plain_object` takes may hold."""
_PLAIN_ARRAY_KEYS = frozenset(("items", "minItems", "maxItems"))
"""Those a schema :meth:`Logic.plain_array` takes may hold."""
_PLAIN_ARRAY_COUNTS = 64
"""The largest ``minItems`` and ``maxItems`` it takes (each count past the first is a rule)."""
_APPLICATORS = frozenset(("anyOf", "oneOf"))
"""Those a schema :meth:`Logic.plain_branches` takes (one of them)."""


class Logic:
    """Expands schema locations of one document into shapes, with negation, emptiness and membership."""

    def __init__(self, document: Document, options: LogicOptions) -> None:
        self.doc = document
        self.opts = options
        self._expanded: dict[str, DNF] = {}
        self._active: list[str] = []
        self._dnf: dict[Node, DNF] = {}
        self._depth = 0
        self._probing = 0
        self._pruned: dict[tuple[Shape, int], frozenset[str]] = {}
        self._empty: dict[tuple[Node, int], bool] = {}
        self._ranks: dict[tuple[Node, bool], dict[str, int]] = {}
        self._ranks_differ: set[Node] = set()  # nodes whose two walk orders can differ (see rank)
        self._plain_objects: dict[Node, ObjTerm | None] = {}  # see plain_object
        self._one_schemas: dict[Node, tuple[Location, frozenset[str]] | None] = {}  # see _one_schema
        self._deferrable: dict[str, bool] = {}  # see _deferrable_at

    # -- public entry points

    def dnf(self, node: Node) -> DNF:
        """The shapes of a node (memoised)."""
        found = self._dnf.get(node)
        if found is not None:
            return found
        try:
            self._enter("")
            result: DNF = [ANY]
            for item in node:
                if item[0] == "false":
                    result = []
                elif item[0] == "loc":
                    result = self.conj(result, self.expand(item[1]), "")
                elif item[0] == "values":
                    result = self.conj(result, [_values_shape([json.loads(text) for text in item[1]])], "")
                else:
                    result = self.conj(result, self.negate(self.dnf(item[1]), ""), "")
                if not result:
                    break
        finally:
            self._depth -= 1
        self._dnf[node] = result
        return result

    def expand(self, pointer: str) -> DNF:
        """The shapes of the schema at ``pointer`` (``$ref`` followed in place)."""
        found = self._expanded.get(pointer)
        if found is not None:
            return found
        if pointer in self._active:
            if self._probing:
                raise _Reentry
            raise SchemaError("$ref cycle that never reaches a schema (infinite recursion)", pointer, "$ref")
        self._active.append(pointer)
        try:
            self._enter(pointer)
            result = self._expand(self.doc.location(pointer))
        finally:
            self._active.pop()
            self._depth -= 1
        self._expanded[pointer] = result
        return result

    def conj(self, a: DNF, b: DNF, where: str) -> DNF:
        if not a or not b:
            return []
        if time.monotonic() > self.opts.deadline:
            raise LimitError("compiling the schema took too long", setting="time_limit_s")
        if len(a) == 1 and _plain_any(a[0]):
            return b
        if len(b) == 1 and _plain_any(b[0]):
            return a
        if len(a) * len(b) > self.opts.max_alternatives * 4:
            raise LimitError(f"intersecting {len(a)} by {len(b)} alternatives at #{where}", setting="max_alternatives")
        out = compact(self.prune(self._settle(merge(s, t))) for s in a for t in b)
        if len(out) > self.opts.max_alternatives:
            raise LimitError(
                f"more than {self.opts.max_alternatives} alternatives at #{where}", setting="max_alternatives"
            )
        return out

    def _settle(self, shape: Shape) -> Shape:
        """``shape`` with the object's "some key" obligations that any value meets (what ``not`` makes of
        ``additionalProperties: false``) settled by the keys the term allows: met by a required key of
        the set; where the term admits only named keys (``additionalProperties: false`` of its own), the
        set's one such name becomes required, and with none the object is impossible. So the branches of
        a ``oneOf`` of closed objects come out as one term each, not a product of complements."""
        t = shape.object
        if not t.exists or "object" not in shape.types:
            return shape
        closed: set[str] | None = None
        for keys, node, _ in t.rules:
            if keys[0] == "pattern" and node != FALSE:
                closed = None
                break
            if keys[0] == "other" and node == FALSE:
                closed = set(keys[1]) if closed is None else closed & set(keys[1])
        required, kept = set(t.required), []
        for obligation in t.exists:
            keys, witness, _ = obligation
            if witness != TRUE:
                kept.append(obligation)
                continue
            if any(self.key_in(keys, name) for name in required):
                continue
            names = None if closed is None else [name for name in closed if self.key_in(keys, name)]
            if names is None or len(names) > 1:
                kept.append(obligation)
            elif names:
                required.add(names[0])
            else:
                return shape.only(shape.types - {"object"})
        if len(kept) == len(t.exists):
            return shape
        term = replace(t, required=frozenset(required), exists=tuple(kept))
        return Shape(shape.types, shape.boolean, shape.number, shape.string, shape.array, term, shape.narrowed)

    def disj(self, *dnfs: DNF) -> DNF:
        out = compact(s for d in dnfs for s in d)
        if len(out) > self.opts.max_alternatives:
            raise LimitError(f"more than {self.opts.max_alternatives} alternatives", setting="max_alternatives")
        return out

    def negate(self, dnf: DNF, where: str) -> DNF:
        """The complement (refuses constraints without a complement here, naming them)."""
        result: DNF = [ANY]
        for shape in dnf:
            result = self.conj(result, self._negate_shape(shape, where), where)
            if not result:
                break
        return result

    # -- expansion of one schema object

    def _enter(self, pointer: str) -> None:
        self._depth += 1
        if self._depth > self.opts.max_depth:
            raise LimitError(f"schema nested deeper than {self.opts.max_depth} at #{pointer}", setting="max_depth")
        if time.monotonic() > self.opts.deadline:
            raise LimitError("compiling the schema took too long", setting="time_limit_s")

    def _expand(self, loc: Location) -> DNF:
        if isinstance(loc.schema, dict) and not FOREIGN[loc.draft].isdisjoint(loc.schema):
            loc = replace(loc, schema={k: v for k, v in loc.schema.items() if k not in FOREIGN[loc.draft]})
        schema, p = loc.schema, loc.pointer
        if schema is True:
            return [ANY]
        if schema is False:
            return []
        if not isinstance(schema, dict):
            raise SchemaError(f"a schema must be an object or a boolean, not {type(schema).__name__}", p)
        if "$ref" in schema and loc.draft in ("4", "6", "7"):
            return self.expand(self._ref(loc, "$ref").pointer)
        for key in REFUSED:
            if key in schema:
                raise SchemaError(f"{key} (dynamic scoping) is not supported", p, key)
        result = [self._local_shape(loc)]
        if schema.keys().isdisjoint(_IN_PLACE_KEYWORDS):
            return result if result[0].types else []
        if "$ref" in schema:
            result = self.conj(result, self.expand(self._ref(loc, "$ref").pointer), p)
        if "allOf" in schema:
            for i, _ in enumerate(self._schema_list(loc, "allOf")):
                result = self.conj(result, self.expand(f"{p}/allOf/{i}"), p)
        if "anyOf" in schema:
            branches = [self.expand(f"{p}/anyOf/{i}") for i, _ in enumerate(self._schema_list(loc, "anyOf"))]
            result = self.conj(result, self.disj(*branches), p)
        if "oneOf" in schema:
            result = self._one_of(loc, result)
        if "not" in schema:
            self._check_schema(schema["not"], f"{p}/not", "not")
            result = self.conj(result, self.negate(self.expand(f"{p}/not"), f"{p}/not"), p)
        if "if" in schema and ("then" in schema or "else" in schema):
            result = self.conj(result, self._if_then_else(loc), p)
        for key in ("dependentSchemas", "dependencies"):
            value = schema.get(key)
            if value is None:
                continue
            if not isinstance(value, dict):
                raise SchemaError(f"{key} must be an object", p, key)
            for name, sub in value.items():
                if isinstance(sub, (dict, bool)):
                    absent = Shape(frozenset({"object"}), object=ObjTerm(props=((name, FALSE),)))
                    present = Shape(frozenset({"object"}), object=ObjTerm(required=frozenset({name})))
                    others = Shape(ALL_TYPES - {"object"})
                    # "present and sub" rather than "sub": the same set, and the sub-schema's
                    # annotations (for unevaluated*) only count where it applies.
                    sub_dnf = self.conj([present], self.expand(f"{p}/{key}/{escape_token(name)}"), p)
                    result = self.conj(result, self.disj([others, absent], sub_dnf), p)
                elif key == "dependentSchemas":
                    raise SchemaError("dependentSchemas values must be schemas", f"{p}/{key}", key)
        if _has_applicators(schema, "unevaluatedProperties") or _has_applicators(schema, "unevaluatedItems"):
            result = self._unevaluated(loc, result)
        return [s for s in result if s.types]

    def _unevaluated(self, loc: Location, result: DNF) -> DNF:
        """``unevaluatedProperties`` / ``unevaluatedItems`` next to in-place applicators: per shape, the
        keys (items) its own annotations don't cover must be valid under the schema. The annotations are
        an under-approximation (see :attr:`ObjTerm.evaluated`), so this is exact or narrower; where they
        may miss some (branches), the shape is marked narrowed and has no complement."""
        schema, p = loc.schema, loc.pointer
        branching = self._branching(loc, set())
        out = []
        for shape in result:
            for key, kind in (("unevaluatedProperties", "object"), ("unevaluatedItems", "array")):
                if not _has_applicators(schema, key):
                    continue
                self._check_schema(schema[key], f"{p}/{key}", key)
                node = FALSE if schema[key] is False else loc_node(f"{p}/{key}")
                term = getattr(shape, kind)
                if kind not in shape.types or term.evaluated is None:
                    continue
                if kind == "object":
                    keys = ("other", tuple(sorted(term.evaluated[0])), tuple(sorted(term.evaluated[1])))
                    term = replace(term, rules=_uniq((*term.rules, (keys, node, f"{p}/{key}"))), evaluated=None)
                else:
                    term = replace(term, rest=_uniq((*term.rest, (term.evaluated, node))), evaluated=None)
                shape = replace(shape, **{kind: term})
                if branching:
                    shape = replace(shape, narrowed=shape.narrowed or f"{p}/{key}")
            out.append(shape)
        return compact(self.prune(s) for s in out)

    def _branching(self, loc: Location, seen: set[str]) -> bool:
        """Whether annotations in the in-place closure (``$ref``, ``allOf``) may depend on which
        branch validates (``anyOf``, ``oneOf``, ``if``, ``dependentSchemas``, ``contains``): then the
        per-shape annotations may miss some, and the result is narrowed."""
        if loc.pointer in seen or not isinstance(loc.schema, dict):
            return False
        seen.add(loc.pointer)
        s = loc.schema
        if {"anyOf", "oneOf", "if", "dependentSchemas", "dependencies", "contains"} & s.keys():
            return True
        if isinstance(s.get("$ref"), str) and self._branching(self._ref(loc, "$ref"), seen):
            return True
        subs = s.get("allOf")
        count = len(subs) if isinstance(subs, list) else 0
        return any(self._branching(self.doc.location(f"{loc.pointer}/allOf/{i}"), seen) for i in range(count))

    def _ref(self, loc: Location, key: str) -> Location:
        ref = loc.schema[key]
        if not isinstance(ref, str):
            raise SchemaError(f"{key} must be a string", loc.pointer, key)
        return self.doc.resolve(ref, loc)

    def _schema_list(self, loc: Location, key: str) -> list:
        value = loc.schema[key]
        if not isinstance(value, list) or not value:
            raise SchemaError(f"{key} must be a non-empty array of schemas", loc.pointer, key)
        for i, sub in enumerate(value):
            self._check_schema(sub, f"{loc.pointer}/{key}/{i}", key)
        return value

    @staticmethod
    def _check_schema(value: Any, pointer: str, key: str) -> None:
        if not isinstance(value, (dict, bool)):
            raise SchemaError(f"{key} must hold schemas (objects or booleans)", pointer, key)

    def _one_of(self, loc: Location, context: DNF) -> DNF:
        """``context`` and exactly one branch. Branches are intersected with the context first, so
        ``type: object`` next to ``oneOf`` makes branches that differ only on objects disjoint; when they
        still overlap, each is intersected with the complements of the other (raw) branches."""
        p = loc.pointer
        raw = [self.expand(f"{p}/oneOf/{i}") for i, _ in enumerate(self._schema_list(loc, "oneOf"))]
        branches = [self.conj(context, b, p) for b in raw]
        if all(
            self.disjoint(branches[i], branches[j]) for i in range(len(branches)) for j in range(i + 1, len(branches))
        ):
            return self.disj(*branches)
        where = f"{p}/oneOf"
        try:
            negs = [self.negate(b, where) for b in raw]
        except SchemaError as err:
            raise SchemaError(
                f"oneOf branches may overlap and one of them has no complement here ({err})", p, "oneOf"
            ) from err
        out = []
        for i, b in enumerate(branches):
            part = b
            for j, n in enumerate(negs):
                if j != i:
                    part = self.conj(part, n, where)
            out.append(part)
        return self.disj(*out)

    def _if_then_else(self, loc: Location) -> DNF:
        p, schema = loc.pointer, loc.schema
        for key in ("if", "then", "else"):
            if key in schema:
                self._check_schema(schema[key], f"{p}/{key}", key)
        cond = self.expand(f"{p}/if")
        then = self.expand(f"{p}/then") if "then" in schema else [ANY]
        other = self.expand(f"{p}/else") if "else" in schema else [ANY]
        try:
            neg = self.negate(cond, f"{p}/if")
        except SchemaError as err:
            raise SchemaError(f"if has no complement here ({err})", p, "if") from err
        # "(if and then) or not if" rather than "not if or then" (the same set): the annotations of
        # `if` (for unevaluated*) only count where it holds.
        if "else" not in schema:
            return self.disj(neg, self.conj(cond, then, p))
        if "then" not in schema:
            return self.disj(cond, self.conj(neg, other, p))
        return self.disj(self.conj(cond, then, p), self.conj(neg, other, p))

    # -- the schema object's own keywords

    def _local_shape(self, loc: Location) -> Shape:
        s, p = loc.schema, loc.pointer
        kinds = ALL_TYPES
        integer = plain = False
        if "type" in s:
            names = _type_names(s["type"])
            if names is None:
                raise SchemaError("type must be a type name or a list of them", p, "type")
            bad = [t for t in names if t not in _TYPE_NAMES]
            if bad:
                raise SchemaError(f"unknown type {bad[0]!r}", p, "type")
            types = {"number" if t == "integer" else t for t in names}
            integer = "integer" in names and "number" not in names
            plain = integer and loc.draft == "4"  # draft 4: an integer is written without fraction
            if s.get("nullable") is True:
                types.add("null")
            kinds = frozenset(types)
        number = NumTerm(integer=True, plain=plain) if integer else _DEFAULT_NUM
        if "enum" in s or "const" in s:
            shape = merge(Shape(kinds, number=number), self._enum_shape(loc))
            return Shape(  # as dataclasses.replace(shape, ...), without its per-call field walk
                shape.types,
                shape.boolean,
                merge_num(shape.number, self._number_term(loc)),
                merge_str(shape.string, self._string_term(loc)),
                merge_arr(shape.array, self._array_term(loc)),
                merge_obj(shape.object, self._object_term(loc)),
                shape.narrowed,
            )
        # The terms start out fresh (no duplicates, defaults elsewhere): merging in a term with no
        # constraint (all fields, annotations too, equal to the default's) gives the start term back.
        num, string, array, obj = (
            self._number_term(loc),
            self._string_term(loc),
            self._array_term(loc),
            self._object_term(loc),
        )
        return Shape(
            kinds,
            number=merge_num(number, num),  # _number_term gives the shared unconstrained term or a constraint
            string=_DEFAULT_STR if string is _DEFAULT_STR or string == _DEFAULT_STR else merge_str(_DEFAULT_STR, string),
            array=_DEFAULT_ARR
            if array == _DEFAULT_ARR and array.evaluated == _DEFAULT_ARR.evaluated
            else merge_arr(_DEFAULT_ARR, array),
            object=_DEFAULT_OBJ
            if obj == _DEFAULT_OBJ and obj.evaluated == _DEFAULT_OBJ.evaluated
            else merge_obj(_DEFAULT_OBJ, obj),
        )

    def _enum_shape(self, loc: Location) -> Shape:
        s, p = loc.schema, loc.pointer
        shape = ANY
        for key in ("enum", "const"):
            if key not in s:
                continue
            values = s[key] if key == "enum" else [s[key]]
            if key == "enum" and not isinstance(values, list):
                raise SchemaError("enum must be an array", p, key)
            try:
                shape = merge(shape, _values_shape(values))
            except (TypeError, ValueError) as err:
                raise SchemaError(f"{key} holds a value that is not JSON ({err})", p, key) from err
        return shape

    def _number_term(self, loc: Location) -> NumTerm:
        s, p = loc.schema, loc.pointer
        if s.keys().isdisjoint(_NUMBER_KEYWORDS):
            return _DEFAULT_NUM
        low: tuple[Fraction | None, bool] = (None, False)
        high: tuple[Fraction | None, bool] = (None, False)

        def num(key: str) -> Fraction:
            try:
                return to_fraction(s[key])
            except (TypeError, ValueError) as err:
                raise SchemaError(f"{key} must be a finite number", p, key) from err

        for key in ("minimum", "exclusiveMinimum", "maximum", "exclusiveMaximum"):
            if key not in s:
                continue
            if isinstance(s[key], bool):
                if key.startswith("exclusive"):
                    continue  # draft 4: a flag on minimum/maximum, read below
                raise SchemaError(f"{key} must be a number", p, key)
            value = num(key)
            if key == "minimum":
                low = _tighter_lo(low, (value, s.get("exclusiveMinimum") is True))
            elif key == "maximum":
                high = _tighter_hi(high, (value, s.get("exclusiveMaximum") is True))
            elif key == "exclusiveMinimum":
                low = _tighter_lo(low, (value, True))
            else:
                high = _tighter_hi(high, (value, True))
        mult: tuple[Fraction, ...] = ()
        if "multipleOf" in s:
            m = num("multipleOf")
            if m <= 0:
                raise SchemaError("multipleOf must be greater than 0", p, "multipleOf")
            mult = (m,)
        integer = False
        fmt = s.get("format")
        if isinstance(fmt, str) and fmt in FORMATS and FORMATS[fmt].integer_range is not None:
            lo, hi = FORMATS[fmt].integer_range  # type: ignore[misc]
            integer = True
            low = _tighter_lo(low, (Fraction(lo), False))
            high = _tighter_hi(high, (Fraction(hi), False))
        if not integer and not mult and low[0] is None and high[0] is None:
            return _DEFAULT_NUM
        return NumTerm(integer=integer, lo=low[0], lo_x=low[1], hi=high[0], hi_x=high[1], mult=mult)

    def _string_term(self, loc: Location) -> StrTerm:
        s, p = loc.schema, loc.pointer
        if s.keys().isdisjoint(_STRING_KEYWORDS):
            return _DEFAULT_STR
        term = StrTerm(min_len=_count(s, "minLength", p), max_len=_count(s, "maxLength", p, None))
        if "pattern" in s:
            pattern = s["pattern"]
            if not isinstance(pattern, str):
                raise SchemaError("pattern must be a string", p, "pattern")
            try:
                schema_regex(pattern)
            except RegexError as err:
                raise SchemaError(f"pattern is not a supported regex: {err}", f"{p}/pattern", "pattern") from err
            term = replace(term, patterns=((pattern, f"{p}/pattern"),))
        if "format" in s:
            fmt = s["format"]
            if not isinstance(fmt, str):
                raise SchemaError("format must be a string", p, "format")
            known = FORMATS.get(fmt)
            if known is not None and known.regex is not None:
                term = replace(term, formats=((fmt, f"{p}/format"),))
            elif known is None and fmt in SPEC_FORMATS and self.opts.unsupported_formats == "error":
                raise SchemaError(
                    f"format {fmt!r} is not supported (pass unsupported_formats='ignore' to treat it as an annotation)",
                    f"{p}/format",
                    "format",
                )
            elif known is None and fmt not in SPEC_FORMATS | OPENAPI_NUMBER_FORMATS \
                    and self.opts.unknown_formats == "error":
                raise SchemaError(
                    f"format {fmt!r} is not defined by JSON Schema (unknown_formats='error')", f"{p}/format", "format"
                )
        return term

    def _array_term(self, loc: Location) -> ArrTerm:
        s, p = loc.schema, loc.pointer
        if s.keys().isdisjoint(_ARRAY_KEYWORDS):
            return _DEFAULT_ARR  # what the code below gives: no bounds, items, contains; 0 items evaluated
        min_items, max_items = _count(s, "minItems", p), _count(s, "maxItems", p, None)
        contains: tuple[Contains, ...] = ()
        unique = None
        at: list[tuple[int, Node]] = []
        rest: list[tuple[int, Node]] = []
        prefix = 0
        if "prefixItems" in s:
            prefix_items = self._schema_list(loc, "prefixItems")
            at.extend((i, loc_node(f"{p}/prefixItems/{i}")) for i in range(len(prefix_items)))
            prefix = len(prefix_items)
        items = s.get("items")
        if isinstance(items, list):
            for i, sub in enumerate(items):
                self._check_schema(sub, f"{p}/items/{i}", "items")
                at.append((i, loc_node(f"{p}/items/{i}")))
            if "additionalItems" in s:
                self._check_schema(s["additionalItems"], f"{p}/additionalItems", "additionalItems")
                rest.append((len(items), loc_node(f"{p}/additionalItems")))
        elif items is not None:
            self._check_schema(items, f"{p}/items", "items")
            rest.append((prefix, loc_node(f"{p}/items")))
        if (
            "unevaluatedItems" in s
            and not (items is not None and not isinstance(items, list))
            and not ("additionalItems" in s and isinstance(items, list))
            and not _has_applicators(s, "unevaluatedItems")
        ):
            self._check_schema(s["unevaluatedItems"], f"{p}/unevaluatedItems", "unevaluatedItems")
            if s["unevaluatedItems"] is not True:
                start = max(prefix, len(items) if isinstance(items, list) else 0)
                rest.append((start, loc_node(f"{p}/unevaluatedItems")))
        if "contains" in s:
            self._check_schema(s["contains"], f"{p}/contains", "contains")
            low = _count(s, "minContains", p, 1)
            high = _count(s, "maxContains", p, None)
            contains = (Contains(loc_node(f"{p}/contains"), low, high, 0, f"{p}/contains"),)
        if s.get("uniqueItems") is True:
            unique = f"{p}/uniqueItems"
        elif "uniqueItems" in s and not isinstance(s["uniqueItems"], bool):
            raise SchemaError("uniqueItems must be a boolean", p, "uniqueItems")
        evaluated: int | None = max(prefix, len(items) if isinstance(items, list) else 0)
        if (items is not None and not isinstance(items, list)) or "additionalItems" in s and isinstance(items, list):
            evaluated = None
        elif "unevaluatedItems" in s and not _has_applicators(s, "unevaluatedItems"):
            evaluated = None  # own unevaluatedItems: every item is evaluated here
        return ArrTerm(min_items, max_items, tuple(at), tuple(rest), contains, unique, evaluated=evaluated)

    def _object_term(self, loc: Location) -> ObjTerm:
        s, p = loc.schema, loc.pointer
        if s.keys().isdisjoint(_OBJECT_KEYWORDS) and not (self.opts.strict and _declares_object(s.get("type"))):
            return _DEFAULT_OBJ  # what the code below gives: open, nothing required, no key evaluated
        props: list[tuple[str, Node]] = []
        rules: list[tuple[KeySet, Node, str]] = []
        names: list[str] = []
        patterns: list[str] = []
        if "properties" in s:
            if not isinstance(s["properties"], dict):
                raise SchemaError("properties must be an object", p, "properties")
            for name, sub in s["properties"].items():
                where = f"{p}/properties/{escape_token(name)}"
                self._check_schema(sub, where, "properties")
                props.append((name, loc_node(where)))
                names.append(name)
        if "patternProperties" in s:
            if not isinstance(s["patternProperties"], dict):
                raise SchemaError("patternProperties must be an object", p, "patternProperties")
            for pattern, sub in s["patternProperties"].items():
                where = f"{p}/patternProperties/{escape_token(pattern)}"
                self._check_schema(sub, where, "patternProperties")
                try:
                    schema_regex(pattern)
                except RegexError as err:
                    raise SchemaError(f"not a supported regex: {err}", where, "patternProperties") from err
                rules.append((("pattern", pattern), loc_node(where), where))
                patterns.append(pattern)
        closed = self.opts.strict and (
            "properties" in s or "patternProperties" in s or "required" in s or _declares_object(s.get("type"))
        )
        key = "additionalProperties"
        if key not in s and "unevaluatedProperties" in s and not _has_applicators(s, "unevaluatedProperties"):
            key = "unevaluatedProperties"
        every_key = key in s or closed
        if key in s or closed:
            extra = s.get(key, False)
            self._check_schema(extra, f"{p}/{key}", key)
            node = FALSE if extra is False else TRUE if extra is True else loc_node(f"{p}/{key}")
            if node != TRUE:
                rules.append((("other", tuple(names), tuple(patterns)), node, f"{p}/{key}"))
        if "propertyNames" in s:
            self._check_schema(s["propertyNames"], f"{p}/propertyNames", "propertyNames")
            if s["propertyNames"] is not True:
                rules.append((("unnamed", loc_node(f"{p}/propertyNames")), FALSE, f"{p}/propertyNames"))
        required = s.get("required", [])
        if not isinstance(required, list) or not all(isinstance(r, str) for r in required):
            raise SchemaError("required must be an array of strings", p, "required")
        deps: list[tuple[str, tuple[str, ...]]] = []
        for key in ("dependentRequired", "dependencies"):
            value = s.get(key)
            if not isinstance(value, dict):
                if value is not None:
                    raise SchemaError(f"{key} must be an object", p, key)
                continue
            for name, needed in value.items():
                if isinstance(needed, list):
                    if not all(isinstance(n, str) for n in needed):
                        raise SchemaError(f"{key} lists must hold strings", p, key)
                    if needed:
                        deps.append((name, tuple(needed)))
                elif key == "dependentRequired":
                    raise SchemaError("dependentRequired values must be arrays of strings", p, key)
        return ObjTerm(
            props=tuple(props),
            rules=tuple(rules),
            required=frozenset(required),
            min_props=_count(s, "minProperties", p),
            max_props=_count(s, "maxProperties", p, None),
            deps=tuple(deps),
            evaluated=None if every_key else (frozenset(names), frozenset(patterns)),
        )

    # -- complements

    def _negate_shape(self, shape: Shape, where: str) -> DNF:
        if shape.narrowed:
            key = shape.narrowed.rsplit("/", 1)[-1]
            raise SchemaError(
                f"the complement of {key} whose annotations come from anyOf, oneOf, if, dependentSchemas or "
                "contains can't be enforced",
                shape.narrowed,
                key,
            )
        out: DNF = []
        others = ALL_TYPES - shape.types
        if others:
            out.append(Shape(others))
        for kind in sorted(shape.types):
            if kind == "boolean" and len(shape.boolean) < 2:
                rest = frozenset({True, False}) - shape.boolean
                out.append(Shape(frozenset({"boolean"}), boolean=rest))
            elif kind == "number":
                out.extend(Shape(frozenset({kind}), number=n) for n in self._negate_number(shape.number, where))
            elif kind == "string":
                out.extend(Shape(frozenset({kind}), string=n) for n in self._negate_string(shape.string, where))
            elif kind == "array":
                out.extend(Shape(frozenset({kind}), array=n) for n in self._negate_array(shape.array, where))
            elif kind == "object":
                out.extend(Shape(frozenset({kind}), object=n) for n in self._negate_object(shape.object, where))
        return compact(out)

    @staticmethod
    def _negate_number(t: NumTerm, where: str) -> list[NumTerm]:
        out = []
        if t.integer:
            out.append(NumTerm(nonint=True))
        if t.nonint:
            out.append(NumTerm(integer=True))
        if t.plain:
            out.append(NumTerm(nonplain=True))
        if t.nonplain:
            out.append(NumTerm(plain=True))
        if t.lo is not None:
            out.append(NumTerm(hi=t.lo, hi_x=not t.lo_x))
        if t.hi is not None:
            out.append(NumTerm(lo=t.hi, lo_x=not t.hi_x))
        out.extend(NumTerm(nonmult=(m,)) for m in t.mult)
        out.extend(NumTerm(mult=(m,)) for m in t.nonmult)
        if t.values is not None:
            out.append(NumTerm(excluded=t.values))
        if t.excluded:
            out.append(NumTerm(values=t.excluded))
        return out

    @staticmethod
    def _negate_string(t: StrTerm, where: str) -> list[StrTerm]:
        out = []
        if t.min_len > 0:
            out.append(StrTerm(max_len=t.min_len - 1))
        if t.max_len is not None:
            out.append(StrTerm(min_len=t.max_len + 1))
        out.extend(StrTerm(neg_patterns=(p,)) for p in t.patterns)
        out.extend(StrTerm(patterns=(p,)) for p in t.neg_patterns)
        for name, at in t.formats:
            known = FORMATS[name]
            if known.exact:
                out.append(StrTerm(neg_formats=((name, at),)))
            elif known.outer is not None:
                out.append(StrTerm(neg_patterns=((known.outer, at),)))
            else:
                raise SchemaError(
                    f"the complement of format {name!r} can't be enforced (the format is narrowed here)", at, "format"
                )
        out.extend(StrTerm(formats=(f,)) for f in t.neg_formats)
        if t.values is not None:
            out.append(StrTerm(excluded=t.values))
        if t.excluded:
            out.append(StrTerm(values=t.excluded))
        return out

    @staticmethod
    def _negate_array(t: ArrTerm, where: str) -> list[ArrTerm]:
        out = []
        if t.min_items > 0:
            out.append(ArrTerm(max_items=t.min_items - 1))
        if t.max_items is not None:
            out.append(ArrTerm(min_items=t.max_items + 1))
        for i, node in t.at:
            out.append(ArrTerm(min_items=i + 1, at=((i, node_not(node)),)))
        for start, node in t.rest:
            out.append(ArrTerm(contains=(Contains(node_not(node), 1, None, start, where),)))
        for c in t.contains:
            if c.min > 0:
                out.append(ArrTerm(contains=(replace(c, min=0, max=c.min - 1),)))
            if c.max is not None:
                out.append(ArrTerm(contains=(replace(c, min=c.max + 1, max=None),)))
        if t.unique:
            raise SchemaError("the complement of uniqueItems can't be enforced", t.unique, "uniqueItems")
        if t.values is not None:
            out.extend(_arrays_outside([json.loads(text) for text in t.values]))
        return out

    def _negate_object(self, t: ObjTerm, where: str) -> list[ObjTerm]:
        out = []
        for name, node in t.props:
            if node != TRUE:
                out.append(ObjTerm(props=((name, node_not(node)),), required=frozenset({name})))
        for keys, node, at in t.rules:
            if node != TRUE:
                out.append(ObjTerm(exists=((keys, node_not(node), at),)))
        for keys, node, at in t.exists:
            out.append(ObjTerm(rules=((keys, node_not(node), at),)))
        for name in sorted(t.required):
            out.append(ObjTerm(props=((name, FALSE),)))
        if t.min_props > 0:
            out.append(ObjTerm(max_props=t.min_props - 1))
        if t.max_props is not None:
            out.append(ObjTerm(min_props=t.max_props + 1))
        for name, needed in t.deps:
            for other in needed:
                out.append(ObjTerm(props=((other, FALSE),), required=frozenset({name})))
        if t.values is not None:
            out.extend(self._objects_outside([json.loads(text) for text in t.values], where))
        return out

    def _objects_outside(self, values: list[dict], where: str) -> list[ObjTerm]:
        """Objects equal to none of ``values``, as a union: a set of keys none of them has (for each
        value's set: one of its keys missing, or all of them and more members), or one of their sets of
        keys with the members' values leaving the values' trie, in the keys' sorted order, at one key.
        The keys of a set are always required where it counts, so a named key is never repeated to
        make up a count."""
        by_keys: dict[tuple[str, ...], list[dict]] = {}
        for v in values:
            by_keys.setdefault(tuple(sorted(v)), []).append(v)
        other_keys: DNF = [Shape(frozenset({"object"}))]
        for keys in by_keys:
            not_these = [ObjTerm(props=((k, FALSE),)) for k in keys]
            not_these.append(ObjTerm(required=frozenset(keys), min_props=len(keys) + 1))
            other_keys = self.conj(other_keys, [Shape(frozenset({"object"}), object=o) for o in not_these], where)
        out = [s.object for s in other_keys]
        for keys, group in by_keys.items():
            for prefix, nexts in _trie_branches([[v[k] for k in keys] for v in group]):
                members = (*(values_node([x]) for x in prefix), node_not(values_node(nexts)))
                out.append(ObjTerm(props=tuple(zip(keys, members)), required=frozenset(keys), max_props=len(keys)))
        return out

    def _one_schema(self, node: Node) -> tuple[Location, frozenset[str]] | None:
        """The location of ``node`` when it is one schema object (no conjunction, negation or boolean
        schema), with the keywords it holds besides ``type``, annotations and those that only shape
        the document (``_CONSTRAINING``): what the shortcuts below (``plain_*``) look at, each in turn,
        so found once per node."""
        if node in self._one_schemas:
            return self._one_schemas[node]
        found = None
        if len(node) == 1 and node[0][0] == "loc":
            loc = self.doc.location(node[0][1])
            if type(loc.schema) is dict:
                found = loc, _CONSTRAINING.intersection(loc.schema)
        self._one_schemas[node] = found
        return found

    def deferrable(self, node: Node) -> bool:
        """Whether ``node`` (a reference to one, followed) is one schema of an object with properties or
        an array of items that can be compiled when a parser first needs it: it admits some value and
        compiling it raises nothing, so nothing the grammar allows before it is a dead end. That is
        proved keyword by keyword (:meth:`_deferrable_at`), for schemas that say only ``type``,
        ``properties``, ``required`` (of names they declare), ``additionalProperties``, ``items``,
        ``enum`` or ``const`` (scalars of their types), item counts, string lengths, ``format``,
        numeric bounds, a ``$ref`` alone and keywords that constrain nothing (see
        :meth:`_leaf_admits`), all the way down, within ``_DEFERRED_SIZE``."""
        one = self._one_schema(self.pure_ref(node) or node)
        if one is None:
            return False
        loc = one[0]
        schema = loc.schema
        nested = not _NESTED_TYPES.isdisjoint(_type_names(schema.get("type")) or ())
        return nested and bool(schema.get("properties") or schema.get("items")) and self._deferrable_at(loc.pointer, 0)

    def _deferrable_at(self, pointer: str, depth: int) -> bool:
        """The test of :meth:`deferrable` on the schema at ``pointer`` and everything under it. Memoised
        by pointer; a reference back to a schema under test, or nesting past ``_DEFERRED_SIZE``, is a no
        (which is never wrong: the value is compiled at once)."""
        found = self._deferrable.get(pointer)
        if found is None:
            self._deferrable[pointer] = False
            found = self._deferrable[pointer] = depth <= _DEFERRED_SIZE and self._deferrable_schema(pointer, depth)
        return found

    def _deferrable_schema(self, pointer: str, depth: int) -> bool:
        """:meth:`_deferrable_at`'s test, not memoised: a schema that constrains nothing, a ``$ref`` alone
        to a deferrable schema, or the keywords of ``_DEFERRED_KEYS`` that :meth:`_leaf_admits` proves
        with properties, ``additionalProperties`` and ``items`` that are deferrable."""
        loc = self.doc.location(pointer)
        s = loc.schema
        if s is True or (type(s) is dict and "type" not in s and s.keys().isdisjoint(_CONSTRAINING)):
            return True
        if type(s) is not dict:
            return False
        if "$ref" in s:
            try:
                target = self.pure_ref(loc_node(pointer))
            except SchemaError:  # (compiled at once, it reports the error)
                return False
            return target is not None and self._deferrable_at(target[0][1], depth + 1)
        kinds = _type_names(s["type"]) if "type" in s else list(_TYPE_NAMES)
        if not kinds or not _TYPE_NAMES.issuperset(kinds) or not _DEFERRED_KEYS.issuperset(_CONSTRAINING.intersection(s)):
            return False
        properties = s.get("properties", {})
        required = s.get("required", [])
        extra = s.get("additionalProperties", True)
        return (
            type(properties) is dict
            and len(properties) <= _DEFERRED_SIZE
            and type(required) is list
            and all(type(name) is str and name in properties for name in required)
            and self._leaf_admits(loc, kinds)
            and (type(extra) is bool or self._deferrable_at(f"{pointer}/additionalProperties", depth + 1))
            and ("items" not in s or self._deferrable_at(f"{pointer}/items", depth + 1))
            and all(self._deferrable_at(f"{pointer}/properties/{escape_token(name)}", depth + 1) for name in properties)
        )

    def _leaf_admits(self, loc: Location, kinds: list[str]) -> bool:
        """Whether the leaf keywords of the schema at ``loc``, of types ``kinds``, are well formed (read
        as the compile reads them: ``_count``, :meth:`_string_term`, :meth:`_number_term`), stay far
        inside the limits that could refuse them and leave some value of one of ``kinds`` (a number's
        bounds judged by the compile's own ``_num_empty``; properties and items aside:
        :meth:`_deferrable_schema` tests them). An ``enum`` or ``const`` comes alone, of
        scalars of those types; a ``format`` comes without lengths; counts, lengths and bounds stay
        within ``_DEFERRED_SIZE``, ``_DEFERRED_LENGTH``, ``_DEFERRED_MAGNITUDE`` and
        ``_DEFERRED_DENOMINATOR``."""
        s = loc.schema
        if "enum" in s or "const" in s:
            values = s["enum"] if "enum" in s else [s["const"]]
            return (
                type(values) is list
                and 0 < len(values) <= _DEFERRED_SIZE
                and all(_enum_value_fits(v, kinds) for v in values)
                and s.keys().isdisjoint(("format", *_COUNTS, *_BOUNDS))
                and not ("enum" in s and "const" in s)
            )
        try:
            low_items, high_items = _count(s, "minItems", loc.pointer, None), _count(s, "maxItems", loc.pointer, None)
            string, number = self._string_term(loc), self._number_term(loc)
        except SchemaError:  # (compiled at once, it reports the error)
            return False
        if (
            max(low_items or 0, high_items or 0) > _DEFERRED_SIZE
            or max(string.min_len, string.max_len or 0) > _DEFERRED_LENGTH
            or (string.formats and (string.min_len or string.max_len is not None))
            or not all(bound is None or (abs(bound) < _DEFERRED_MAGNITUDE and bound.denominator <= _DEFERRED_DENOMINATOR)
                       for bound in (number.lo, number.hi))
        ):
            return False
        for kind in kinds:
            if kind in ("null", "boolean", "object"):
                return True
            if kind == "array" and (low_items is None or high_items is None or low_items <= high_items):
                return True
            if kind == "string" and (string.max_len is None or string.min_len <= string.max_len):
                return True
            if kind in ("number", "integer") and not _num_empty(
                replace(number, integer=True) if kind == "integer" and not number.integer else number
            ):
                return True
        return False

    def plain_any(self, node: Node) -> bool:
        """Whether ``node`` is one schema that says nothing about its value: no ``type`` and no keyword
        but annotations (``{"description": ...}``); it admits any JSON value."""
        one = self._one_schema(node)
        return one is not None and not one[1] and "type" not in one[0].schema

    def plain_scalar(self, node: Node) -> tuple[str | frozenset[str], str] | None:
        """``(types, draft)`` when ``node`` is one schema that says only which scalar types it admits,
        besides annotations and keywords no draft defines: ``{"type": "string", "description": ...}``
        (the commonest property schema; ``types`` is then the name), a list of such types, or an
        ``anyOf`` of schemas that each say only one (an optional field). What it admits, and so its
        grammar, depends on nothing else."""
        one = self._one_schema(node)
        if one is None:
            return None
        loc, keys = one
        schema = loc.schema
        if not keys:
            kind = schema.get("type")
            if type(kind) is str:
                return (kind, loc.draft) if kind in _SCALAR_TYPES else None
            names = _type_names(kind) or []
        elif keys == {"anyOf"} and "type" not in schema:
            branches = schema["anyOf"]
            if type(branches) is not list or not all(
                type(b) is dict and _CONSTRAINING.isdisjoint(b) and type(b.get("type")) is str for b in branches
            ):
                return None
            names = [b["type"] for b in branches]
        else:
            return None
        if not names or not _SCALAR_TYPES.issuperset(names):
            return None  # (an empty or a bad list: the full expansion says what is wrong)
        kinds = frozenset(names)
        return (next(iter(kinds)) if len(kinds) == 1 else kinds, loc.draft)

    def plain_strings(self, node: Node) -> frozenset[str] | None:
        """The strings when ``node`` is one schema that says only that its value is one of them: an
        ``enum`` of strings or a string ``const``, with ``"type": "string"`` or no type, besides
        annotations (``{"enum": ["low", "high"], "description": ...}``). Its grammar is that of the
        string term of those values alone, with no shape to work out."""
        one = self._one_schema(node)
        if one is None:
            return None
        loc, keys = one
        schema = loc.schema
        if schema.get("type", "string") != "string":
            return None
        if keys == {"enum"}:
            values = schema["enum"]
            if type(values) is not list:
                return None  # (the full expansion says what is wrong)
        elif keys == {"const"}:
            values = [schema["const"]]
        else:
            return None
        return frozenset(values) if all(type(v) is str for v in values) else None

    def plain_array(self, node: Node) -> tuple[Node, int, int | None] | None:
        """``(items, min, max)`` when ``node`` is one schema that says only that its value is an array of
        ``min`` to ``max`` (None: any number of) items all valid under one schema, itself not an array
        (``{"type": "array", "items": {...}, "minItems": 1}``, besides annotations; no ``items`` or
        ``true``: any items, ``false``: none), with counts up to ``_PLAIN_ARRAY_COUNTS``. An array of
        arrays, nested as deep as a schema likes, takes the general way, which needs no recursion."""
        one = self._one_schema(node)
        if one is None:
            return None
        loc, keys = one
        schema = loc.schema
        if schema.get("type") != "array" or not _PLAIN_ARRAY_KEYS.issuperset(keys):
            return None
        low, high = schema.get("minItems", 0), schema.get("maxItems")
        if not (type(low) is int and 0 <= low <= _PLAIN_ARRAY_COUNTS) or not (
            high is None or (type(high) is int and 0 <= high <= _PLAIN_ARRAY_COUNTS)
        ):
            return None  # (past the counts, or not a count: the full expansion says what is wrong)
        items = schema.get("items", True)
        if items is True or items is False:
            return TRUE if items else FALSE, low, high
        if type(items) is not dict or items.get("type") == "array":
            return None
        return loc_node(f"{loc.pointer}/items"), low, high

    def pure_ref(self, node: Node) -> Node | None:
        """The node a reference stands for when ``node`` is one schema that says only ``$ref`` (besides
        annotations and definitions; before draft 2019-09, whatever it says beside it), following a
        chain of such schemas to its end. None for any other node, and for a chain that comes back on
        itself (the full expansion reports it)."""
        if len(node) != 1 or node[0][0] != "loc":
            return None
        pointer = node[0][1]
        seen = set()
        while True:
            loc = self.doc.location(pointer)
            s = loc.schema
            if type(s) is not dict or type(s.get("$ref")) is not str:
                break
            if loc.draft not in ("4", "6", "7") and ("type" in s or _CONSTRAINING.intersection(s) != {"$ref"}):
                break
            if pointer in seen:
                return None
            seen.add(pointer)
            pointer = self._ref(loc, "$ref").pointer
        return None if pointer == node[0][1] else loc_node(pointer)

    def plain_leaf(self, node: Node) -> tuple | None:
        """A key naming what ``node`` admits when it is one schema of scalar types that says only some of
        the string, number or integer types' own constraints (``{"type": "integer", "minimum": 0}``,
        ``{"type": ["string", "null"], "maxLength": 255}``): its types, those keywords with their values
        (and the values' Python types, so ``1`` and ``true`` differ), the draft and the format options.
        Equal keys admit the same values in any document; None for any other node."""
        one = self._one_schema(node)
        if one is None:
            return None
        loc, keys = one
        schema = loc.schema
        kinds = tuple(sorted(set(_type_names(schema.get("type")) or ())))
        if not keys or not _SCALAR_TYPES.issuperset(kinds):
            return None
        if not keys.issubset(frozenset().union(*(_LEAF_KEYWORDS.get(k, ()) for k in kinds))):
            return None
        values = tuple((k, type(schema[k]).__name__, schema[k]) for k in sorted(keys))
        if not all(type(v) in (str, int, float, bool) for _, _, v in values):
            return None  # (the full expansion says what is wrong)
        return kinds, values, loc.draft, self.opts.unsupported_formats, self.opts.unknown_formats

    def plain_object(self, node: Node) -> ObjTerm | None:
        """The object term when ``node`` is one schema that says only that its value is an object with
        ``properties``, ``required`` and ``additionalProperties`` (and keywords of the document, which
        constrain nothing here: ``$schema``, definitions, identifiers): its one shape is that term,
        with nothing to intersect or prune. (A required property that admits nothing leaves the object
        without text; the grammar's trimming finds it.) Memoised by node."""
        if node in self._plain_objects:
            return self._plain_objects[node]
        one = self._one_schema(node)
        term = None
        if one is not None and one[0].schema.get("type") == "object" and _PLAIN_OBJECT_KEYS.issuperset(one[1]):
            term = self._object_term(one[0])
        self._plain_objects[node] = term
        return term

    def plain_branches(self, node: Node) -> list[Node] | None:
        """The branches' nodes when ``node`` is one schema that says only ``anyOf`` or only ``oneOf``
        (besides annotations and keywords of the document) and each branch, compiled alone, admits what
        it admits inside it: then the node's grammar is the union of its branches' (an optional
        reference ``[{"$ref": ...}, {"type": "null"}]``, the calls of one of several tools). A ``oneOf``
        qualifies when its branches' types say that no value is valid under two of them.

        What could differ is property order: inside the applicator an object takes the names of every
        branch in their schema order. So the branches that mention property names are one, or are
        closed objects of properties alone (directly or through references) with no name in common.
        A branch that is itself an ``anyOf`` or ``oneOf`` takes the general way (no recursion to bound
        here)."""
        one = self._one_schema(node)
        if one is None:
            return None
        loc, keys = one
        schema = loc.schema
        if "type" in schema or len(keys) != 1 or not _APPLICATORS.issuperset(keys):
            return None
        applicator = "anyOf" if "anyOf" in keys else "oneOf"
        branches = schema[applicator]
        if type(branches) is not list or not branches or not all(
            type(b) is bool or (type(b) is dict and _APPLICATORS.isdisjoint(b)) for b in branches
        ):
            return None  # (the full expansion says what is wrong)
        nodes = [loc_node(f"{loc.pointer}/{applicator}/{i}") for i in range(len(branches))]
        if applicator == "oneOf" and not self._types_apart(nodes):
            return None
        named = [(n, names) for n in nodes if (names := self.rank(n))]
        if len(named) > 1:
            seen: set[str] = set()
            for n, names in named:
                if not seen.isdisjoint(names) or not self._closed_plain_object(n):
                    return None
                seen.update(names)
        return nodes

    def _types_apart(self, nodes: list[Node]) -> bool:
        """Whether the ``type`` keywords of ``nodes`` (or of what each refers to) share no type, so that
        no value is valid under two of them (``integer`` counts as ``number``)."""
        seen: set[str] = set()
        for node in nodes:
            schema = self.doc.location((self.pure_ref(node) or node)[0][1]).schema
            listed = _type_names(schema.get("type")) if type(schema) is dict else None
            if not listed:
                return False
            kinds = {"number" if k == "integer" else k for k in listed}
            if not seen.isdisjoint(kinds):
                return False
            seen.update(kinds)
        return True

    def _closed_plain_object(self, node: Node) -> bool:
        """Whether ``node`` (or what it refers to) is a plain object (:meth:`plain_object`) that admits
        no property it does not declare."""
        node = self.pure_ref(node) or node
        return self.plain_object(node) is not None and self.doc.location(node[0][1]).schema.get(
            "additionalProperties") is False

    # -- emptiness (sound: True only when provably empty)

    def prune(self, shape: Shape) -> Shape:
        """``shape`` without the types whose terms are provably empty."""
        # Cached by shape and probing depth (a deeper probe proves less); the cache keeps the types only,
        # as equal shapes may differ in annotations (``evaluated``, ``narrowed``).
        key = (shape, self._probing)
        kinds = self._pruned.get(key)
        if kinds is None:
            kinds = self._pruned[key] = self._prune(shape).types
        return shape if kinds == shape.types else shape.only(kinds)

    def _prune(self, shape: Shape) -> Shape:
        kinds = set(shape.types)
        if "boolean" in kinds and not shape.boolean:
            kinds.discard("boolean")
        if "number" in kinds and _num_empty(shape.number):
            kinds.discard("number")
        if "string" in kinds and self._str_empty(shape.string):
            kinds.discard("string")
        if "array" in kinds and self._arr_empty(shape.array):
            kinds.discard("array")
        if "object" in kinds and self._obj_empty(shape.object):
            kinds.discard("object")
        return shape if len(kinds) == len(shape.types) else shape.only(kinds)

    def node_empty(self, node: Node) -> bool:
        """Whether ``node`` provably admits nothing (looks at most two nodes deep)."""
        if node == FALSE:
            return True
        if self._probing >= 2:
            return False
        # Cached: True is a proof wherever it was found; False (also from a cycle being expanded at the
        # time) only prunes less.
        key = (node, self._probing)
        found = self._empty.get(key)
        if found is not None:
            return found
        if self.plain_scalar(node) is not None:  # a type alone admits values: nothing to expand
            self._empty[key] = False
            return False
        self._probing += 1
        try:
            found = not [s for s in self.dnf(node) if self.prune(s).types]
        except (_Reentry, BanisterError):
            found = False
        finally:
            self._probing -= 1
        self._empty[key] = found
        return found

    @staticmethod
    def _str_empty(t: StrTerm) -> bool:
        if t.max_len is not None and t.min_len > t.max_len:
            return True
        if t.values is not None:
            return not any(t.admits(v) for v in t.values)
        # One constraint alone is taken to admit strings: a pattern matching nothing, or a length it
        # cannot meet, is found when its lexeme is made. Building its DFA here as well cost a
        # pattern's schema a second regex compile (the main part of its time to first mask).
        constraints = len(t.patterns) + len(t.formats) + len(t.neg_patterns) + len(t.neg_formats)
        if constraints == 0 or constraints > 4 or (constraints == 1 and not t.excluded):
            return False
        return _string_term_empty(t.unplaced())

    def _arr_empty(self, t: ArrTerm) -> bool:
        if t.max_items is not None and t.min_items > t.max_items:
            return True
        if t.values is not None:
            return not t.values
        need = t.min_items
        for c in t.contains:
            if c.max is not None and c.min > c.max:
                return True
            need = max(need, c.start + c.min)
        if t.max_items is not None and need > t.max_items:
            return True
        return any(i < t.min_items and self.node_empty(n) for i, n in t.at)

    def _obj_empty(self, t: ObjTerm) -> bool:
        if t.max_props is not None and (t.min_props > t.max_props or len(t.required) > t.max_props):
            return True
        if t.values is not None:
            return not t.values
        for name in t.required:
            node = node_and(*(n for k, n in t.props if k == name))
            try:
                node = node_and(node, *(n for keys, n, _ in t.rules if self.key_in(keys, name)))
            except (_Reentry, BanisterError):
                pass
            if self.node_empty(node):
                return True
        return False

    def disjoint(self, a: DNF, b: DNF) -> bool:
        """Whether no value satisfies both (sound: False when unsure)."""
        return all(not self.prune(merge(s, t)).types for s in a for t in b)

    # -- membership of concrete values

    def admits(self, node: Node, value: Any) -> bool:
        """Whether the JSON ``value`` is valid under ``node`` (exact, by the same semantics)."""
        return any(self.shape_admits(s, value) for s in self.dnf(node))

    def shape_admits(self, shape: Shape, value: Any) -> bool:
        kind = json_type(value)
        if kind not in shape.types:
            return False
        if kind == "boolean":
            return value in shape.boolean
        if kind == "number":
            term = shape.number
            if (term.plain and isinstance(value, float)) or (term.nonplain and isinstance(value, int)):
                return False
            return term.admits(to_fraction(value))
        if kind == "string":
            return shape.string.admits(value)
        if kind == "array":
            return self._array_admits(shape.array, value)
        if kind == "object":
            return self._object_admits(shape.object, value)
        return True

    def _array_admits(self, t: ArrTerm, value: list) -> bool:
        n = len(value)
        if n < t.min_items or (t.max_items is not None and n > t.max_items):
            return False
        key = canon(value)
        if t.values is not None and key not in text_keys(t.values):
            return False
        if t.unique and len({canon(v) for v in value}) != n:
            return False
        for i, node in t.at:
            if i < n and not self.admits(node, value[i]):
                return False
        for start, node in t.rest:
            if not all(self.admits(node, v) for v in value[start:]):
                return False
        for c in t.contains:
            hits = sum(1 for v in value[c.start :] if self.admits(c.node, v))
            if hits < c.min or (c.max is not None and hits > c.max):
                return False
        return True

    def _object_admits(self, t: ObjTerm, value: dict) -> bool:
        n = len(value)
        if n < t.min_props or (t.max_props is not None and n > t.max_props):
            return False
        key = canon(value)
        if t.values is not None and key not in text_keys(t.values):
            return False
        if not t.required <= value.keys():
            return False
        for name, needed in t.deps:
            if name in value and not set(needed) <= value.keys():
                return False
        for name, node in t.props:
            if name in value and not self.admits(node, value[name]):
                return False
        for keys, node, _ in t.rules:
            for name, v in value.items():
                if self.key_in(keys, name) and not self.admits(node, v):
                    return False
        return all(
            any(self.key_in(keys, name) and self.admits(node, v) for name, v in value.items())
            for keys, node, _ in t.exists
        )

    def key_in(self, keys: KeySet, name: str) -> bool:
        if keys[0] == "pattern":
            return pattern_matches(keys[1], name)
        if keys[0] == "other":
            return name not in keys[1] and not any(pattern_matches(p, name) for p in keys[2])
        return not self.admits(keys[1], name)

    # -- property order

    def rank(self, node: Node, own_first: bool = True) -> dict[str, int]:
        """Property names in schema order: a depth-first walk of the node's schemas (own ``properties``,
        then ``$ref``, ``allOf``, ``anyOf``, ``oneOf``, ``not``, ``if``, ``then``, ``else``,
        ``dependentSchemas``/``dependencies`` in that order); the names only ``required`` or dependencies
        mention come after every declared one. ``own_first=False``: each schema's own names after those
        of the schemas it applies (inherited first). Beside a ``$ref`` of drafts 4 to 7 nothing applies."""
        key = (node, own_first)
        found = self._ranks.get(key)
        if found is None:
            if not own_first and (node, True) in self._ranks and node not in self._ranks_differ:
                return self._ranks[(node, True)]  # no schema had names of its own and of others to apply
            found = self._ranks[key] = {}
            seen: set[str] = set()
            mentioned: list[str] = []
            for name, declared in _walk_names(self, node, seen, own_first, self._ranks_differ):
                if declared:
                    found.setdefault(name, len(found))
                else:
                    mentioned.append(name)
            for name in mentioned:
                found.setdefault(name, len(found))
        return found


def _walk_names(logic: Logic, node: Node, seen: set[str], own_first: bool, differ: set[Node]
                ) -> Iterator[tuple[str, bool]]:
    """``(name, declared in properties)`` in walk order; ``node`` goes into ``differ`` when some schema
    has names of its own and schemas to apply (the two walk orders can then differ)."""
    stack: list[Any] = list(reversed(node))
    while stack:
        item = stack.pop()
        if item[0] == "names":
            yield from item[1]
            continue
        if item[0] == "not":
            stack.extend(reversed(item[1]))
            continue
        if item[0] != "loc" or item[1] in seen:
            continue
        seen.add(item[1])
        loc = logic.doc.location(item[1])
        s, p = loc.schema, loc.pointer
        if not isinstance(s, dict):
            continue
        legacy_ref = "$ref" in s and loc.draft in ("4", "6", "7")
        own: list[tuple[str, bool]] = []
        if not legacy_ref:
            if isinstance(s.get("properties"), dict):
                own.extend((name, True) for name in s["properties"])
            if isinstance(s.get("required"), list):
                own.extend((r, False) for r in s["required"] if isinstance(r, str))
            for key in ("dependentRequired", "dependencies"):
                if isinstance(s.get(key), dict):
                    for name, needed in s[key].items():
                        if isinstance(needed, list):
                            own.append((name, False))
                            own.extend((n, False) for n in needed if isinstance(n, str))
        subs: list[Any] = []
        if isinstance(s.get("$ref"), str):
            try:
                subs.append(("loc", logic.doc.resolve(s["$ref"], loc).pointer))
            except SchemaError:
                pass
        if not legacy_ref:
            for key in ("allOf", "anyOf", "oneOf"):
                if isinstance(s.get(key), list):
                    subs.extend(("loc", f"{p}/{key}/{i}") for i in range(len(s[key])))
            for key in ("not", "if", "then", "else"):
                if key in s:
                    subs.append(("loc", f"{p}/{key}"))
            for key in ("dependentSchemas", "dependencies"):
                if isinstance(s.get(key), dict):
                    subs.extend(
                        ("loc", f"{p}/{key}/{escape_token(k)}")
                        for k, v in s[key].items()
                        if isinstance(v, (dict, bool))
                    )
        if own and subs:
            differ.add(node)
        if own_first:
            yield from own
        else:
            stack.append(("names", own))  # yielded once the schemas it applies are walked
        stack.extend(reversed(subs))


class _Reentry(Exception):
    """A probe (emptiness check) reached a location still being expanded."""


@lru_cache(maxsize=1024)
def _string_term_empty(t: StrTerm) -> bool:
    try:
        return json_automata.is_empty(string_dfa(t, max_states=2000, minimal=False))
    except BanisterError:
        return False


def _num_empty(t: NumTerm) -> bool:
    if (t.integer and t.nonint) or (t.plain and (t.nonplain or t.nonint)):
        return True
    if t.values is not None:
        return not any(t.admits(v) for v in t.values)
    if t.lo is None or t.hi is None:
        return False
    if t.lo > t.hi or (t.lo == t.hi and (t.lo_x or t.hi_x)):
        return True
    if t.lo == t.hi:
        return not t.admits(t.lo)
    if t.integer:
        first = math.floor(t.lo) + 1 if (t.lo_x or t.lo.denominator != 1) else int(t.lo)
        last = math.ceil(t.hi) - 1 if (t.hi_x or t.hi.denominator != 1) else int(t.hi)
        return first > last
    return False


def _plain_any(shape: Shape) -> bool:
    """``ANY`` without annotations (a shortcut in ``conj`` would drop them)."""
    return shape == ANY and shape.object.evaluated == ANY.object.evaluated and shape.array.evaluated == 0


def _has_applicators(schema: dict, key: str) -> bool:
    """Whether ``unevaluated*`` is present, constrains something, and depends on more than the
    schema's own keywords (then it is applied per shape by ``Logic._unevaluated``)."""
    if schema.get(key, True) is True:
        return False
    items = schema.get("items")
    if key == "unevaluatedProperties" and "additionalProperties" in schema:
        return False
    if key == "unevaluatedItems" and (
        (items is not None and not isinstance(items, list)) or ("additionalItems" in schema and isinstance(items, list))
    ):
        return False
    applicators = {"$ref", "allOf", "anyOf", "oneOf", "not", "if", "dependentSchemas", "dependencies"}
    if key == "unevaluatedItems":
        applicators.add("contains")
    return bool(applicators & schema.keys())


def _type_names(raw: Any) -> list[str] | None:
    """The names a ``type`` keyword lists (one name, or a list of them); None when it is neither."""
    names = [raw] if isinstance(raw, str) else raw
    return names if isinstance(names, list) and all(isinstance(t, str) for t in names) else None


def _declares_object(t: Any) -> bool:
    return t == "object" or (isinstance(t, list) and "object" in t)


def _count(s: dict, key: str, p: str, default: int | None = 0) -> Any:
    if key not in s:
        return default
    value = s[key]
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise SchemaError(f"{key} must be a non-negative integer", p, key)
    return value


def _values_shape(values: list) -> Shape:
    """The shape admitting exactly the JSON ``values``."""
    kinds: dict[str, list] = {t: [] for t in TYPES}
    for v in values:
        kinds[json_type(v)].append(v)
    return Shape(
        frozenset(t for t, vs in kinds.items() if vs),
        boolean=frozenset(kinds["boolean"]),
        number=NumTerm(values=frozenset(to_fraction(v) for v in kinds["number"])),
        string=StrTerm(values=frozenset(kinds["string"])),
        array=ArrTerm(values=_texts(kinds["array"])),
        object=ObjTerm(values=_texts(kinds["object"])),
    )


def _arrays_outside(values: list[list]) -> list[ArrTerm]:
    """Arrays equal to none of ``values``, as a union: a length none has, or one of their lengths with
    the items leaving the values' trie at one position."""
    if not values:
        return [_DEFAULT_ARR]
    lengths = sorted({len(v) for v in values})
    out = [ArrTerm(min_items=lo, max_items=hi - 1) for lo, hi in zip([0, *(n + 1 for n in lengths)], lengths) if lo < hi]
    out.append(ArrTerm(min_items=lengths[-1] + 1))
    for n in lengths:
        out.extend(
            ArrTerm(min_items=n, max_items=n,
                    at=(*((i, values_node([x])) for i, x in enumerate(prefix)), (len(prefix), node_not(values_node(nexts)))))
            for prefix, nexts in _trie_branches([v for v in values if len(v) == n])
        )
    return out


def _trie_branches(rows: list[list]) -> list[tuple[list, list]]:
    """For each prefix of the ``rows`` (lists of one length) short of their end, in JSON equality: the
    prefix and the values that follow it in the rows. A list of that length differs from every row
    exactly when, after one of these prefixes, its next value is none of those that follow."""
    groups: dict[Any, tuple[list, list]] = {}
    for row in rows:
        for j in range(len(row)):
            groups.setdefault(canon(row[:j]), (row[:j], []))[1].append(row[j])
    return list(groups.values())


def _texts(values: list) -> tuple[str, ...]:
    """JSON texts of ``values``, one per JSON-equal group."""
    seen: dict[Any, str] = {}
    for v in values:
        seen.setdefault(canon(v), dumps(v))
    return tuple(seen.values())


def text_keys(texts: Iterable[str]) -> set:
    return {canon(json.loads(t)) for t in texts}


@lru_cache(maxsize=2048)
def schema_regex(pattern: str) -> tuple[RegexNode, tuple[Lookahead, ...]]:
    """The syntax tree of a JSON Schema regex (``pattern``, a ``patternProperties`` name; no banister
    extensions) and its leading lookaheads (:func:`~banister.regex.parser.parse_pattern`): it is
    checked where the keyword is read, then split and planned where its string is built
    (:mod:`json_strings`). RegexError when banister does not support it."""
    return parse_pattern(pattern)


@lru_cache(maxsize=4096)
def string_dfa(term: StrTerm, *, max_states: int, minimal: bool = True) -> json_automata.CharDFA:
    """The DFA (trimmed; ``minimal`` also minimised) of the strings a term admits."""
    parts: list[json_automata.CharDFA] = []
    signs: list[bool] = []
    for pattern, _ in term.patterns:
        parts.append(json_automata.from_pattern(pattern, max_states=max_states))
        signs.append(True)
    for pattern, _ in term.neg_patterns:
        parts.append(json_automata.from_pattern(pattern, max_states=max_states))
        signs.append(False)
    for name, _ in term.formats:
        regex = format_regex(name, term.max_len)
        parts.append(json_automata.from_pattern(regex, search=False, max_states=max_states))
        signs.append(True)
    for name, _ in term.neg_formats:
        parts.append(json_automata.from_pattern(FORMATS[name].regex or "", search=False, max_states=max_states))
        signs.append(False)
    if term.min_len or term.max_len is not None:
        parts.append(json_automata.length(term.min_len, term.max_len, max_states=max_states))
        signs.append(True)
    if term.excluded:
        parts.append(json_automata.literals(term.excluded))
        signs.append(False)
    if term.values is not None:
        parts.append(json_automata.literals(term.values))
        signs.append(True)
    if not parts:
        parts.append(json_automata.length(0, None, max_states=max_states))
        signs.append(True)

    def accept(flags: tuple[bool, ...]) -> bool:
        return all(f == s for f, s in zip(flags, signs))

    dfa = json_automata.product(parts, accept, max_states=max_states)
    return json_automata.minimize(dfa) if minimal else dfa


def dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


_COUNTS = ("minItems", "maxItems", "minLength", "maxLength")
_BOUNDS = ("minimum", "exclusiveMinimum", "maximum", "exclusiveMaximum")
_DEFERRED_KEYS = frozenset(("properties", "required", "additionalProperties", "items", "enum", "const", "format",
                            *_COUNTS, *_BOUNDS))
"""The keywords that constrain something which :meth:`Logic.deferrable` takes (``type`` besides)."""
_DEFERRED_SIZE = 64
"""Most properties, enum values, items counted and levels of nesting of a schema :meth:`Logic.deferrable`
accepts (each limit of the compiler is far above them)."""
_DEFERRED_LENGTH = 65_536
"""Longest string length bound :meth:`Logic.deferrable` accepts (alone, a length compiles to blocks of
counted characters, far inside ``max_grammar_size``)."""
_DEFERRED_MAGNITUDE = 10**15
_DEFERRED_DENOMINATOR = 10**6
"""Numeric bounds :meth:`Logic.deferrable` accepts are below ``_DEFERRED_MAGNITUDE`` with at most six
decimals: far inside ``max_number_states``."""
_NESTED_TYPES = frozenset(("object", "array"))


def _enum_value_fits(value: Any, kinds: list[str]) -> bool:
    """Whether a scalar enum value is valid under one of the type names ``kinds`` (a float is never taken
    for an integer: drafts disagree on ``1.0``)."""
    kind = json_type(value)
    return kind not in _NESTED_TYPES and (kind in kinds or (kind == "number" and type(value) is int and "integer" in kinds))
