"""The registry of JSON Schema keywords the compiler knows, and the tables docs/json-schema.md shows.

Every keyword is ``enforced`` (exactly, or refused with a SchemaError where the notes say), an
``annotation`` (no assertion; ignored by the specification's own rules), or ``refused``. Keywords that
are in no draft's vocabulary are ignored, as validators do.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Keyword:
    name: str
    status: str
    enforces: str
    notes: str = ""


KEYWORDS: tuple[Keyword, ...] = (
    Keyword(
        "type",
        "enforced",
        "JSON type, one name or a list",
        "`integer` accepts `1`, `1.0` and exponent forms that are integers by shape (`1e+16`, exponent at most 307)",
    ),
    Keyword(
        "enum",
        "enforced",
        "one of the listed values",
        "strings in every accepted escaping; numbers in plain decimal form (`1.50` for 1.5) and in the "
        "exponent form Python's json writes; objects in their written key order",
    ),
    Keyword("const", "enforced", "exactly this value", "as `enum` with one value"),
    Keyword("nullable", "enforced", "OpenAPI 3.0: `true` adds `null` to `type`", "only with `type` in the same schema"),
    Keyword("properties", "enforced", "values of the named properties", "key order: see the `key_order` option"),
    Keyword("required", "enforced", "the named properties are present", ""),
    Keyword(
        "additionalProperties",
        "enforced",
        "values (or absence, `false`) of the other keys",
        "duplicate keys among additional properties are not detected",
    ),
    Keyword(
        "patternProperties",
        "enforced",
        "values of keys matching a pattern (anywhere in the key)",
        "keys are split into regions by which patterns they match",
    ),
    Keyword("propertyNames", "enforced", "every key is valid under a string schema", ""),
    Keyword("minProperties", "enforced", "at least n members",
            "counts members; through `Compiler.json_schema`, keys no name covers do not repeat where "
            "n >= 2 (unless their key language can run out)"),
    Keyword("maxProperties", "enforced", "at most n members", ""),
    Keyword("dependentRequired", "enforced", "a present key requires others", ""),
    Keyword("dependentSchemas", "enforced", "a present key requires the object to match a schema", ""),
    Keyword("dependencies", "enforced", "draft 4-7 form of both of the above", ""),
    Keyword(
        "items", "enforced", "items after `prefixItems` (a schema) or by position (an array, drafts <= 2019-09)", ""
    ),
    Keyword("prefixItems", "enforced", "items by position", ""),
    Keyword("additionalItems", "enforced", "items after an array-form `items`", ""),
    Keyword("minItems", "enforced", "at least n items", ""),
    Keyword("maxItems", "enforced", "at most n items", ""),
    Keyword("contains", "enforced", "some items match a schema", "at most three `contains` on one array"),
    Keyword("minContains", "enforced", "at least n matching items", ""),
    Keyword("maxContains", "enforced", "at most n matching items", "needs the complement of the `contains` schema"),
    Keyword(
        "uniqueItems",
        "enforced",
        "no two equal items",
        "only when items come from a few values (`max_unique_values`), are strings or objects whose every prefix "
        "has endless completions (through `Compiler.json_schema`, whose recognizer tracks the items), or "
        "`maxItems <= 1`; else refused",
    ),
    Keyword("minLength", "enforced", "at least n code points (an escape is one character)", ""),
    Keyword("maxLength", "enforced", "at most n code points",
            "a long bound is lexemes of 32 characters counted by rules that halve the count (a few dozen rules "
            "for a million characters), and so is a long run of one character class in a `pattern` of fixed "
            "text around it (`^https?://.+$`); beside another `pattern` or a `format` the combined "
            "automaton (about the pattern's states times n) must fit in `max_string_states`"),
    Keyword(
        "pattern",
        "enforced",
        "ECMA-262 regex matching anywhere unless anchored",
        "banister regex syntax (docs/regex.md); lookaheads only right after a leading `^`, other "
        "lookaround, backreferences and `\\b` are refused",
    ),
    Keyword(
        "format",
        "enforced",
        "the formats below, for strings (int32/int64 for numbers)",
        "every format of the specification is enforced; names it does not define are annotations "
        "(`unknown_formats`)",
    ),
    Keyword(
        "minimum",
        "enforced",
        "exact, for integers and decimals",
        "plain decimal notation, plus exponent forms whose magnitude alone puts them in range; any form for "
        "bounds at 0",
    ),
    Keyword("maximum", "enforced", "exact, for integers and decimals", "as `minimum`"),
    Keyword("exclusiveMinimum", "enforced", "exact; the draft 4 boolean form too", "as `minimum`"),
    Keyword("exclusiveMaximum", "enforced", "exact; the draft 4 boolean form too", "as `minimum`"),
    Keyword(
        "multipleOf",
        "enforced",
        "exact decimal arithmetic (0.3 is a multiple of 0.1)",
        "plain decimal notation only; large moduli become rules",
    ),
    Keyword("allOf", "enforced", "intersection, type by type", ""),
    Keyword("anyOf", "enforced", "union", "at most `max_alternatives` after distributing `allOf`"),
    Keyword(
        "oneOf",
        "enforced",
        "exactly one branch",
        "as anyOf when the branches are provably disjoint; else each branch minus the others (refused when a "
        "branch has no complement here)",
    ),
    Keyword(
        "not",
        "enforced",
        "complement",
        "the complement of a rule over matching keys (`additionalProperties`...) is 'some such key breaks it', "
        "at most two per object once those a required key or the object's only possible key meets are "
        "settled; of an enum of arrays or objects, 'a count or set of keys no value has, or the "
        "first item or key (keys in sorted order) where the instance leaves the values'; refused for "
        "`uniqueItems` and the narrowed formats the formats table lists as refused",
    ),
    Keyword("if", "enforced", "`(if and then) or (not if and else)`", "needs the complement of `if`"),
    Keyword("then", "enforced", "see `if`", ""),
    Keyword("else", "enforced", "see `if`", ""),
    Keyword(
        "$ref",
        "enforced",
        "the referenced schema, recursion included",
        "JSON pointers, `$id`, `$anchor` and plain-name fragments, inside the document and in the documents "
        "given as `resources` (nothing is fetched: other remote refs refused); siblings ignored before 2019-09",
    ),
    Keyword("$defs", "annotation", "holds schemas for `$ref`", ""),
    Keyword("definitions", "annotation", "holds schemas for `$ref`", ""),
    Keyword("$id", "annotation", "base URI of a schema resource", "`id` in draft 4"),
    Keyword("id", "annotation", "draft 4 `$id`", ""),
    Keyword("$anchor", "annotation", "a plain-name fragment for `$ref`", ""),
    Keyword("$schema", "annotation", "picks the draft", ""),
    Keyword(
        "unevaluatedProperties",
        "enforced",
        "keys no `properties`, `patternProperties` or `additionalProperties` in place evaluated",
        "annotations of `$ref`/`allOf` exact; of `anyOf`/`oneOf`/`if`/`dependentSchemas` from the branch "
        "taken only (narrower where branches overlap; then its complement is refused)",
    ),
    Keyword(
        "unevaluatedItems",
        "enforced",
        "items after those `prefixItems`/`items` in place evaluated",
        "as `unevaluatedProperties`; items matched by `contains` count as unevaluated (narrower)",
    ),
    Keyword(
        "$dynamicRef",
        "enforced",
        "the referenced schema, where every dynamic scope gives the same one",
        "as `$ref`, or to the root's `$dynamicAnchor` of the name where the root's resource defines one "
        "(as an extending schema does); refused (dynamic scoping) where the anchor is in two resources or "
        "more and not the root's, or beside a `$ref`",
    ),
    Keyword(
        "$recursiveRef",
        "enforced",
        "as `$dynamicRef`, with `$recursiveAnchor: true`",
        "refused (dynamic scoping) where two resources or more carry the anchor and the root does not",
    ),
    *(
        Keyword(name, "annotation", "no assertion", "")
        for name in (
            "title",
            "description",
            "default",
            "examples",
            "example",
            "$comment",
            "deprecated",
            "readOnly",
            "writeOnly",
            "contentMediaType",
            "contentEncoding",
            "contentSchema",
            "$dynamicAnchor",
            "$recursiveAnchor",
            "$vocabulary",
            "discriminator",
            "xml",
            "externalDocs",
        )
    ),
)

REFUSED = frozenset(k.name for k in KEYWORDS if k.status == "refused") | {"$dynamicRef", "$recursiveRef"}
"""Keywords a schema may not hold where it is expanded: ``$dynamicRef`` and ``$recursiveRef`` are ones
because the document (``json_resolve.Document``) turns each into a ``$ref`` wherever dynamic scope
cannot change its target."""

_LATER = {
    "dependentRequired",
    "dependentSchemas",
    "unevaluatedItems",
    "unevaluatedProperties",
    "minContains",
    "maxContains",
    "prefixItems",
    "$dynamicRef",
    "$recursiveRef",
}
FOREIGN: dict[str, frozenset[str]] = {
    "4": frozenset(_LATER | {"const", "contains", "propertyNames", "if", "then", "else"}),
    "6": frozenset(_LATER | {"if", "then", "else"}),
    "7": frozenset(_LATER),
    "2019-09": frozenset({"dependencies", "prefixItems", "$dynamicRef"}),
    "2020-12": frozenset({"dependencies", "$recursiveRef"}),
}
"""Keywords of other drafts, per draft: in a schema of that draft they are not keywords and are ignored,
as the specification (and validators) do."""


@dataclass(frozen=True)
class Option:
    name: str
    default: str
    effect: str


OPTIONS: tuple[Option, ...] = (
    Option(
        "strict",
        "False",
        "close every object that declares `properties`, `patternProperties`, `required` or `type: object` "
        "(`additionalProperties: false` unless given), as OpenAI's strict mode",
    ),
    Option(
        "key_order",
        '"schema"',
        '`"schema"`: declared properties (required and optional) in schema order, other keys after them in '
        "any order; an object of at most `max_reordered_names` names also in its branch's own order and "
        'inherited first; `"any"`: any order, no duplicates among named keys (2^n states: `max_object_states`)',
    ),
    Option(
        "whitespace",
        '"flexible"',
        '`"flexible"`: JSON whitespace runs of at most `max_whitespace` between tokens; `"compact"`: none; '
        '`"pretty"`: exactly one space after `:` and `,` (what `json.dumps` writes by default)',
    ),
    Option("max_whitespace", "20", "longest whitespace run in flexible mode"),
    Option("max_nesting", "None", "deepest nesting of arrays and objects inside a free-form value (`{}`, `true`); "
           "None: any depth"),
    Option("draft", "None", 'draft when `$schema` does not say: "4", "6", "7", "2019-09" or "2020-12" (default)'),
    Option(
        "unsupported_formats",
        '"error"',
        '`"ignore"`: treat the formats JSON Schema defines but banister cannot enforce as annotations (none '
        'at present: banister enforces them all)',
    ),
    Option(
        "unknown_formats",
        '"ignore"',
        "format names JSON Schema does not define (`semver`, `path`...) are annotations, as validators treat "
        'them; `"error"` refuses them',
    ),
    Option("resources", "None", "absolute URI to schema document: the documents a `$ref` outside the schema may "
           "name (a registry: nothing is fetched), each in its `$schema`'s draft or else the schema's; errors "
           "there name the URI and the pointer inside"),
    Option("settings", "SchemaSettings()", "limits, below"),
)


SETTINGS: dict[str, str] = {
    "max_enum_values": "Values of one enum (strings, numbers...) compiled into one lexeme.",
    "max_alternatives": "Alternatives (anyOf/oneOf branches after distributing allOf) for one schema location.",
    "max_depth": "Nesting of in-place applicators (allOf, anyOf, $ref chains...) expanded at once.",
    "max_object_states": "States of one object's member sequence (count and presence tracking, any key order).",
    "max_reordered_names": "Objects of at most this many possible named keys are also accepted in two more key "
    "orders (see `key_order`), each a copy of the member sequence; larger ones in schema order only.",
    "max_array_states": "States of one array's item sequence (positions, counts, contains).",
    "max_unique_values": "uniqueItems is enforced when items come from at most this many values.",
    "max_string_states": "Automaton states when string constraints are combined (pattern with length, keys left over).",
    "max_number_states": "Automaton states of one number constraint (bounds with multipleOf...).",
    "max_regex_length": "Characters of a regex made from an automaton; larger ones become an automaton lexeme instead.",
    "max_automaton_lexeme_states": "Byte-level states of an automaton kept as one lexeme when its regex is too long "
    "(counted before it is built); larger ones become one rule per state (slower masks: each character is a lexeme).",
    "max_lexeme_repeat": "Longest counted run of string characters in one lexeme; longer lengths are split into rules.",
    "max_nfa_states": "NFA states of one lexeme's regex.",
    "max_grammar_size": "Symbols over all alternatives of the grammar.",
    "max_inline_regex_length": "Characters of the regex json_schema_to_regex returns.",
    "time_limit_s": "Wall-clock limit for one compilation.",
}
"""What each :class:`SchemaSettings` field limits."""


def _drafts(name: str) -> str:
    drafts = [d for d, foreign in FOREIGN.items() if name not in foreign]
    return "all" if len(drafts) == len(FOREIGN) else ", ".join(drafts)


def _row(*cells: str) -> str:
    return "| " + " | ".join(c.replace("|", "\\|").replace("\n", " ") for c in cells) + " |"


def reference_tables() -> str:
    """The generated part of docs/json-schema.md: keywords, formats, options and settings tables."""
    from dataclasses import fields

    from banister.grammar.json_build import SchemaSettings
    from banister.grammar.json_formats import FORMATS

    lines = ["### Keywords", "", _row("keyword", "drafts", "status", "enforces", "notes"), _row(*["---"] * 5)]
    lines += [_row(f"`{k.name}`", _drafts(k.name), k.status, k.enforces, k.notes) for k in KEYWORDS]
    lines += ["", "### Formats", "", _row("format", "accepts", "`not` enforced"), _row("---", "---", "---")]
    lines += [
        _row(f"`{f.name}`", f.note,
             "yes" if f.exact else "refused" if f.outer is None else f"as not matching `` {f.outer} `` (narrower)")
        for f in FORMATS.values()
    ]
    lines += ["", "### Options", "", _row("option", "default", "effect"), _row("---", "---", "---")]
    lines += [_row(f"`{o.name}`", f"`{o.default}`", o.effect) for o in OPTIONS]
    lines += [
        "",
        "### Settings (`SchemaSettings`)",
        "",
        _row("setting", "default", "limits"),
        _row("---", "---", "---"),
    ]
    lines += [_row(f"`{f.name}`", f"`{f.default}`", SETTINGS[f.name]) for f in fields(SchemaSettings)]
    return "\n".join(lines) + "\n"
