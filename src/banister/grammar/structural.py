"""Free text around structure: structural tags (XGrammar) / lazy grammars (llguidance).

The output is free text in which writing a *trigger* (say ``<tool_call>``) enters a *tag*: the text
from the trigger on must be one tag's ``begin`` (which starts with that trigger), then a value of the
tag's body (JSON under its schema, any JSON, or a rule-form grammar), then the tag's ``end``; then free
text again. The front end produces one rule-form grammar, so the usual Matcher works unchanged:

    root    ::= SEGMENT* FREE?          (SEGMENT+ with ``at_least_one``; one SEGMENT or FREE? with
    SEGMENT ::= UNTIL_t REST_t             ``stop_after_first``)
    REST_t  ::= begin[len(t):] BODY end  (one alternative per tag whose begin starts with trigger t)

``FREE`` is one lexeme: non-empty text that contains no trigger. ``UNTIL_t`` is one lexeme: text whose
first trigger occurrence is ``t``, at its very end (the free text and the trigger in one piece). So the
free-text lexeme can only be left where a trigger completes, which keeps the lexeme-crossing tokens of
the mask walk few (only tokens that complete a trigger consult the parser), and a trigger split
across tokens, or starting inside a token that begins with ordinary text (``" <tool"`` then
``"_call>"``), is seen like any other text: the automata run over bytes.

Both lexemes use the regex layer's ``(?~...)`` construct (:func:`banister.regex.parse_regex`), whose
automaton is the Aho-Corasick automaton of the triggers, so the lexeme DFAs are about as small as that
automaton (``<tool_call>``: 20 states).

Rules (checked, :class:`StructuralTagError` otherwise): at least one tag; triggers non-empty and
distinct, and none occurs inside another (the shorter would always fire first, and "the first trigger
in the text" is then unambiguous); every tag's begin starts with a trigger; no duplicate tags. A
trigger that no tag begins with is allowed and simply never appears in the output. Repeats in
JSON bodies (``uniqueItems``) are kept out by :class:`~banister.parser.distinct.DistinctItems` where
it can tell the tags from the free text (:func:`~banister.parser.distinct.reads_tags`: every body is
JSON, every begin opens a container that its end closes), and refused elsewhere. Free
text is any valid UTF-8 text (every code point but the surrogates, newlines included): a token that
is not valid UTF-8 on its own is allowed only where it continues or starts a character. Trigger
detection restarts after each tag's end: text before a tag never combines with text after it.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from banister.errors import GrammarError
from banister.grammar.ir import Grammar, GrammarBuilder, Ref, Symbol
from banister.parser.distinct import reads_tags

__all__ = ["StructuralTagError", "Tag", "free_text_regex", "structural_tag_grammar", "until_trigger_regex"]


class StructuralTagError(GrammarError):
    """Bad arguments to :func:`structural_tag_grammar` / ``Compiler.structural_tag``."""


@dataclass(frozen=True, eq=False)
class Tag:
    """One constrained part: ``begin``, then a body, then ``end``.

    The body is JSON valid under ``schema`` (a dict, a boolean, or JSON text; ``None`` with no
    ``grammar``: any JSON value), or the text of ``grammar`` (a rule-form
    :class:`~banister.grammar.ir.Grammar`, e.g. from :func:`~banister.grammar.ebnf.parse_gbnf`).
    Give at most one of ``schema`` and ``grammar``. The JSON options of ``Compiler.structural_tag``
    apply to both JSON forms, except ``strict``, ``draft``, ``unsupported_formats``,
    ``unknown_formats`` and ``resources``, which only mean something for a schema (``None`` stays any
    JSON value).
    """

    begin: str
    end: str
    schema: Mapping[str, Any] | bool | str | None = None
    grammar: Grammar | None = None

    def key(self) -> str:
        """A canonical text of the tag (for duplicate checks and the compiler's cache)."""
        return json.dumps([self.begin, self.end, self.body_key()])

    def body_key(self) -> str:
        """A canonical text of the body alone (tags with the same body share its rules)."""
        if self.grammar is not None:
            return "grammar:" + repr(self.grammar)
        if isinstance(self.schema, str):
            return "schema-text:" + self.schema
        from banister.grammar.json_schema import schema_text

        return "schema:" + schema_text(self.schema, default=repr)  # in key order: it orders the output

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Tag) and self.key() == other.key()

    def __hash__(self) -> int:
        return hash(self.key())


def structural_tag_grammar(
    tags: Sequence[Tag],
    triggers: Sequence[str] | None = None,
    *,
    at_least_one: bool = False,
    stop_after_first: bool = False,
    json_options: Mapping[str, Any] | None = None,
) -> Grammar:
    """The grammar of free text with tags (module docstring); raises StructuralTagError,
    SchemaError (a tag's schema, with ``json_options`` passed to the JSON Schema front end) or
    LimitError."""
    tags = _check_tags(tags)
    trigger_list = _check_triggers([t.begin for t in tags] if triggers is None else triggers, triggers is None)
    options = dict(json_options or {})
    by_trigger: dict[str, list[tuple[int, Tag]]] = {t: [] for t in trigger_list}
    for i, tag in enumerate(tags):
        owners = [t for t in trigger_list if tag.begin.startswith(t)]
        if not owners:
            raise StructuralTagError(f"tag {i} begins with {tag.begin!r}, which starts with no trigger "
                                     f"(triggers: {trigger_list!r})")
        by_trigger[owners[0]].append((i, tag))  # unique: triggers never contain one another
    # Repeats (uniqueItems) are kept out of JSON bodies where the reader of repeats can tell the tags
    # from the free text around them (parser/distinct.py); elsewhere a body that needs it is refused.
    tracked = all(tag.grammar is None for tag in tags) and reads_tags([(t.begin, t.end) for t in tags], trigger_list)
    b = GrammarBuilder()
    bodies: dict[str, Symbol] = {}
    distinct = False
    segment_alts: list[tuple[Symbol, ...]] = []
    for trigger, owned in by_trigger.items():
        if not owned:
            continue  # a trigger no tag begins with: it is simply forbidden in the output
        until = b.lexeme(until_trigger_regex(trigger, trigger_list))
        for i, tag in owned:
            body_key = tag.body_key()
            body = bodies.get(body_key)
            if body is None:
                grammar = _body_grammar(tag, options, tracked)
                distinct = distinct or grammar.distinct_items
                body = bodies[body_key] = _embed(b, grammar, f"tag{i}")
            rest: list[Symbol] = [until]
            if len(tag.begin) > len(trigger):
                rest.append(b.literal(tag.begin[len(trigger):]))
            rest.append(body)
            if tag.end:
                rest.append(b.literal(tag.end))
            segment_alts.append(tuple(rest))
    segment = b.rule(b.fresh("segment"), segment_alts)
    free = b.lexeme(free_text_regex(trigger_list))
    if stop_after_first:
        alternatives: list[tuple[Symbol, ...]] = [(segment,)]
        if not at_least_one:
            alternatives += [(free,), ()]
        root = b.rule("structural", alternatives)
    else:
        segments = b.plus(segment) if at_least_one else b.star(segment)
        root = b.rule("structural", [(segments, b.optional(free))])
    return b.build(root, distinct_items=distinct, free_text_triggers=tuple(trigger_list) if distinct else ())


# -- arguments -------------------------------------------------------------------------------------------


def _check_tags(tags: Sequence[Tag]) -> list[Tag]:
    if isinstance(tags, (Tag, str)) or not isinstance(tags, Iterable):
        raise TypeError("tags must be a sequence of Tag")
    tags = list(tags)
    if not tags:
        raise StructuralTagError("structural_tag needs at least one tag")
    seen: dict[str, int] = {}
    for i, tag in enumerate(tags):
        if not isinstance(tag, Tag):
            raise TypeError(f"tag {i} is a {type(tag).__name__}, not a Tag")
        if not isinstance(tag.begin, str) or not isinstance(tag.end, str):
            raise TypeError(f"tag {i}: begin and end must be str")
        if not tag.begin:
            raise StructuralTagError(f"tag {i} has an empty begin")
        if tag.grammar is not None and tag.schema is not None:
            raise StructuralTagError(f"tag {i} gives both a schema and a grammar; give at most one")
        if tag.grammar is not None and not isinstance(tag.grammar, Grammar):
            raise TypeError(f"tag {i}: grammar must be a banister.grammar.ir.Grammar")
        key = tag.key()
        if key in seen:
            raise StructuralTagError(f"tag {i} duplicates tag {seen[key]} (same begin, body and end)")
        seen[key] = i
    return tags


def _check_triggers(triggers: Sequence[str], from_begins: bool) -> list[str]:
    if isinstance(triggers, str) or not isinstance(triggers, Iterable):
        raise TypeError("triggers must be a sequence of str (or None: every tag's begin)")
    out: list[str] = []
    for i, t in enumerate(triggers):
        if not isinstance(t, str):
            raise TypeError(f"trigger {i} is a {type(t).__name__}, not a str")
        if not t:
            raise StructuralTagError(f"trigger {i} is empty")
        if t in out:
            if from_begins:
                continue  # several tags may share a begin
            raise StructuralTagError(f"trigger {t!r} is given twice")
        out.append(t)
    if not out:
        raise StructuralTagError("structural_tag needs at least one trigger")
    for u in out:
        for v in out:
            if u != v and u in v:
                hint = " (the default triggers are the tags' begins: pass shorter triggers)" if from_begins else ""
                raise StructuralTagError(
                    f"trigger {u!r} occurs inside trigger {v!r}, so {v!r} could never fire first{hint}"
                )
    return out


def _body_grammar(tag: Tag, options: Mapping[str, Any], distinct_items: bool) -> Grammar:
    if tag.grammar is not None:
        return tag.grammar
    from banister.grammar.json_schema import json_grammar, json_schema_to_grammar

    if tag.schema is None:
        schema_only = ("strict", "draft", "unsupported_formats", "unknown_formats", "resources")
        json_only = {k: v for k, v in options.items() if k not in schema_only}
        return json_grammar(**json_only)
    return json_schema_to_grammar(tag.schema, **{**options, "distinct_items": distinct_items})


def _embed(b: GrammarBuilder, grammar: Grammar, prefix: str) -> Ref:
    """Copy ``grammar``'s rules into ``b`` under fresh names; returns its start."""
    names = {name: f"{prefix}/{name}" for name in grammar.rules}

    def sym(s: Symbol) -> Symbol:
        return Ref(names[s.name]) if isinstance(s, Ref) else s

    for name, alternatives in grammar.rules.items():
        b.rule(names[name], [tuple(sym(s) for s in alt) for alt in alternatives])
    return Ref(names[grammar.start])


# -- the trigger regexes ---------------------------------------------------------------------------------


def free_text_regex(triggers: Sequence[str]) -> str:
    """A regex (banister syntax) for the non-empty texts that contain none of ``triggers``.

    ``triggers`` must be non-empty strings none of which occurs inside another. Uses the regex
    layer's ``(?~+...)``, whose automaton is the Aho-Corasick automaton of the triggers.
    """
    return "(?~+" + "|".join(_literal(t) for t in triggers) + ")"


def until_trigger_regex(trigger: str, triggers: Sequence[str]) -> str:
    """A regex for the texts whose first occurrence of any of ``triggers`` is ``trigger``, at the end."""
    if trigger not in triggers:
        raise ValueError(f"{trigger!r} is not one of the triggers")
    return "(?~>" + "|".join(_literal(t) for t in [trigger, *(t for t in triggers if t != trigger)]) + ")"


def _literal(text: str) -> str:
    return "".join(c if c.isascii() and c.isalnum() else f"\\u{{{ord(c):x}}}" for c in text)
