"""JSON Schema to grammar: the front end behind ``Compiler.json_schema`` and ``Compiler.json``.

The pipeline, in order:

1. Parse and index the document (:mod:`json_resolve`): draft, ``$id``/``$anchor`` resources, ``$ref``.
2. Expand each schema location into shapes, one constraint term per JSON type (:mod:`json_logic`):
   ``allOf`` intersects, ``anyOf``/``oneOf`` unite, ``not``/``if`` complement; sub-values stay nodes.
3. Build rules per node from a work list (:mod:`json_build`): numbers and strings become lexemes
   (:mod:`json_numbers`, :mod:`json_strings`, :mod:`json_text`, :mod:`json_formats`), arrays and objects
   become member sequences; rules that derive nothing are removed.

Every keyword is enforced exactly or refused with :class:`~banister.errors.SchemaError` (message, JSON
pointer, keyword); size limits raise :class:`~banister.errors.LimitError` naming their setting. The
table of keywords in docs/json-schema.md is generated from :data:`KEYWORDS`.
"""

from __future__ import annotations

import json
import math
import re
import time
from collections.abc import Mapping
from typing import Any, Literal
from urllib.parse import urldefrag, urlsplit

from banister.errors import LimitError, SchemaError
from banister.grammar.ir import Grammar
from banister.grammar.json_build import BuildOptions, JsonGrammarBuilder, SchemaSettings
from banister.grammar.json_keywords import KEYWORDS, OPTIONS, Keyword, reference_tables
from banister.grammar.json_logic import Logic, LogicOptions, loc_node
from banister.grammar.json_regex import grammar_to_regex
from banister.grammar.json_resolve import DRAFTS, Document

__all__ = [
    "KEYWORDS",
    "OPTIONS",
    "Keyword",
    "SchemaSettings",
    "json_grammar",
    "json_schema_to_grammar",
    "json_schema_to_regex",
    "reference_tables",
]

KeyOrder = Literal["schema", "any"]
Whitespace = Literal["flexible", "compact", "pretty"]


_DEFAULT_SETTINGS = SchemaSettings()
"""The settings when none are given: one object, which the memos keyed by settings match at once."""


def json_schema_to_grammar(
    schema: Mapping[str, Any] | bool | str,
    *,
    strict: bool = False,
    key_order: KeyOrder = "schema",
    whitespace: Whitespace = "flexible",
    max_whitespace: int = 20,
    max_nesting: int | None = None,
    draft: str | None = None,
    unsupported_formats: Literal["error", "ignore"] = "error",
    unknown_formats: Literal["error", "ignore"] = "ignore",
    settings: SchemaSettings | None = None,
    defer: bool = False,
    distinct_items: bool = False,
    resources: Mapping[str, Mapping[str, Any] | bool | str] | None = None,
) -> Grammar:
    """The grammar of the JSON texts valid under ``schema`` (a dict, a boolean, or JSON text).

    Options (see docs/json-schema.md): ``strict`` closes objects as OpenAI's strict mode;
    ``key_order`` is ``"schema"`` (declared properties in schema order, a small object's also in its
    branch's own order and inherited first; other keys after them) or ``"any"``; ``whitespace`` is
    ``"flexible"`` (runs of at most ``max_whitespace``), ``"compact"`` or ``"pretty"`` (``json.dumps``'
    default separators); ``max_nesting`` caps the depth of free-form values (None, the default: any
    depth, as in JSON itself); ``draft`` applies when ``$schema`` does not say (default 2020-12);
    ``unsupported_formats`` ``"ignore"`` treats the formats the specification defines but banister
    cannot enforce as annotations; ``unknown_formats`` (default ``"ignore"``, as validators do) says the same of format
    names the specification does not define; ``resources`` maps absolute URIs to the schema documents
    (dicts, booleans or JSON text) that a ``$ref`` outside ``schema`` may name, as a registry does:
    nothing is fetched. Raises SchemaError or LimitError.

    ``defer`` leaves property values proved safe (``Logic.deferrable``) pending in the grammar,
    built when a parser first needs one, all at once (``Grammar.expander``; with ``key_order="schema"``):
    a schema's compile then builds what its first values need, and a document that reaches no such value
    never builds them.
    Such a grammar is for a parser (``GrammarAutomaton``), not whole for anything else.

    ``distinct_items`` enforces ``uniqueItems`` on arrays of strings and objects (those whose every prefix
    has endless completions) as well as on items from a few values, and keeps the keys that no name covers
    from repeating where ``minProperties`` counts them: the grammar is then marked ``distinct_items``, for
    a recognizer that tracks the items (``banister.parser.distinct.DistinctItems``, which
    :meth:`banister.Compiler.json_schema` uses). Without it such arrays are refused.
    """
    settings = settings or _DEFAULT_SETTINGS
    _check_options(key_order, whitespace, max_whitespace, max_nesting, draft, unsupported_formats, unknown_formats)
    root = _load(schema)
    documents = _load_resources(resources)
    deadline = time.monotonic() + settings.time_limit_s
    document = Document(root, draft or "2020-12", documents)
    logic = Logic(
        document,
        LogicOptions(
            strict=strict,
            unsupported_formats=unsupported_formats,
            unknown_formats=unknown_formats,
            max_alternatives=settings.max_alternatives,
            max_depth=settings.max_depth,
            deadline=deadline,
        ),
    )
    builder = JsonGrammarBuilder(
        logic,
        BuildOptions(
            key_order=key_order,
            whitespace=whitespace,
            max_whitespace=max_whitespace,
            max_nesting=max_nesting,
            settings=settings,
            deadline=deadline,
            defer=defer and key_order == "schema",  # (any order may refuse an object: compile it now)
            distinct_items=distinct_items and any(map(_counts_repeats, [root, *documents.values()])),
        ),
    )
    return builder.build(loc_node(""))


def _counts_repeats(value: Any) -> bool:
    """Whether ``uniqueItems: true`` or ``minProperties`` of two or more appears in a schema document."""
    todo = [value]
    while todo:
        v = todo.pop()
        if isinstance(v, dict):
            least = v.get("minProperties")
            if v.get("uniqueItems") is True or (isinstance(least, (int, float)) and least >= 2):
                return True
            todo.extend(v.values())
        elif isinstance(v, list):
            todo.extend(v)
    return False


def json_grammar(
    *,
    key_order: KeyOrder = "schema",
    whitespace: Whitespace = "flexible",
    max_whitespace: int = 20,
    max_nesting: int | None = None,
    settings: SchemaSettings | None = None,
) -> Grammar:
    """Any JSON value (the schema ``{}``), arrays and objects nested at most ``max_nesting`` deep (None: any)."""
    return json_schema_to_grammar(
        {},
        key_order=key_order,
        whitespace=whitespace,
        max_whitespace=max_whitespace,
        max_nesting=max_nesting,
        settings=settings,
    )


def json_schema_to_regex(schema: Mapping[str, Any] | bool | str, **options: Any) -> str:
    """One regex (banister syntax, whole match) for a non-recursive schema; same options as
    :func:`json_schema_to_grammar`. Raises SchemaError for recursion, LimitError when too large
    (``settings.max_inline_regex_length``; free-form values unroll ``max_nesting`` levels, 32 unless
    given, so keep it small)."""
    options.setdefault("max_nesting", 32)
    grammar = json_schema_to_grammar(schema, **options)
    settings = options.get("settings") or _DEFAULT_SETTINGS
    return grammar_to_regex(grammar, max_length=settings.max_inline_regex_length)


def _check_options(
    key_order: str,
    whitespace: str,
    max_whitespace: int,
    max_nesting: int | None,
    draft: str | None,
    unsupported_formats: str,
    unknown_formats: str,
) -> None:
    if key_order not in ("schema", "any"):
        raise ValueError(f"key_order must be 'schema' or 'any', not {key_order!r}")
    if whitespace not in ("flexible", "compact", "pretty"):
        raise ValueError(f"whitespace must be 'flexible', 'compact' or 'pretty', not {whitespace!r}")
    if not isinstance(max_whitespace, int) or max_whitespace < 0:
        raise ValueError(f"max_whitespace must be a non-negative integer, not {max_whitespace!r}")
    if max_nesting is not None and (not isinstance(max_nesting, int) or max_nesting < 0):
        raise ValueError(f"max_nesting must be None or a non-negative integer, not {max_nesting!r}")
    if draft is not None and draft not in DRAFTS:
        raise ValueError(f"draft must be one of {', '.join(DRAFTS)}, not {draft!r}")
    for name, value in (("unsupported_formats", unsupported_formats), ("unknown_formats", unknown_formats)):
        if value not in ("error", "ignore"):
            raise ValueError(f"{name} must be 'error' or 'ignore', not {value!r}")


def _load(schema: Any) -> Any:
    """The schema as plain JSON data (SchemaError for malformed JSON text or non-JSON values)."""
    if isinstance(schema, (str, bytes)):
        try:
            schema = json.loads(schema)
        except ValueError as err:
            raise SchemaError(f"the schema is not valid JSON: {err}", "") from err
        except RecursionError as err:
            raise LimitError("the schema is nested too deeply to parse", setting="max_depth") from err
    if isinstance(schema, Mapping) and not isinstance(schema, dict):
        schema = dict(schema)
    if not isinstance(schema, (dict, bool)):
        raise SchemaError(f"a schema must be an object or a boolean, not {type(schema).__name__}", "")
    _check_json(schema)
    return schema


def _load_resources(resources: Any) -> dict[str, Any]:
    """The documents of ``resources`` by absolute URI (a final empty fragment dropped), each loaded as a
    schema; TypeError for no mapping, ValueError for a key that is not such a URI, SchemaError naming the
    resource's URI. (``Any``: the caller's keys are checked here, not by the compiled signature.)"""
    if resources is None:
        return {}
    if not isinstance(resources, Mapping):
        raise TypeError(f"resources must map absolute URIs to schemas, not {type(resources).__name__}")
    documents = {}
    for uri, document in resources.items():
        if not isinstance(uri, str) or not urlsplit(uri).scheme or urldefrag(uri).fragment:
            raise ValueError(f"resources: {uri!r} is not an absolute URI without a fragment")
        uri = urldefrag(uri).url
        try:
            documents[uri] = _load(document)
        except SchemaError as err:
            raise SchemaError(f"the resource is not a schema: {err.message}", uri + "#") from err
    return documents


def schema_text(schema: Any, **dumps: Any) -> str:
    """``schema`` as JSON text in its own key order (``json.dumps`` with ``dumps``), which caches key it
    by; SchemaError, naming what is wrong, when it is not JSON data (a dict holding itself, a set)."""
    if isinstance(schema, Mapping) and not isinstance(schema, dict):
        schema = dict(schema)
    try:
        return json.dumps(schema, **dumps)
    except (TypeError, ValueError):
        _check_json(schema)
        raise


_SURROGATE = re.compile(r"[\ud800-\udfff]")


def _check_text(text: str) -> None:
    if not text.isascii() and _SURROGATE.search(text):
        raise SchemaError(f"the schema holds the string {text[:60]!r} with a lone surrogate, which JSON text "
                          "written as UTF-8 cannot hold", "")


def _check_json(root: Any) -> None:
    """SchemaError unless ``root`` is JSON data: dicts with string keys, lists, strings, finite numbers,
    booleans, None, and no container inside itself (checked without recursion). Strings holding a lone
    surrogate (which ``json.loads`` reads from ``"\\ud800"``) are refused too: the text policy never
    writes one, so a name or value holding one could not be produced."""
    if not isinstance(root, (dict, list)):
        _check_leaf(root)
        return
    on_path: set[int] = set()
    stack: list[tuple[Any, bool]] = [(root, False)]  # containers only: leaves are checked where they are met
    while stack:
        value, leaving = stack.pop()
        if leaving:
            on_path.discard(id(value))
            continue
        if id(value) in on_path:
            raise SchemaError("the schema contains itself (not JSON data)", "")
        on_path.add(id(value))
        stack.append((value, True))
        if isinstance(value, dict):
            for k in value:
                if not isinstance(k, str):
                    raise SchemaError("the schema has a non-string object key (not JSON data)", "")
                if not k.isascii():
                    _check_text(k)
            items: Any = value.values()
        else:
            items = value
        for item in items:
            if isinstance(item, (dict, list)):
                stack.append((item, False))
            elif type(item) is str:
                if not item.isascii():
                    _check_text(item)
            else:
                _check_leaf(item)


def _check_leaf(value: Any) -> None:
    """SchemaError unless ``value`` is a JSON string, finite number, boolean or null."""
    if isinstance(value, str):
        _check_text(value)
    elif isinstance(value, float) and not math.isfinite(value):
        raise SchemaError(f"the schema holds {value!r}, which is not a JSON number", "")
    elif not (value is None or isinstance(value, (bool, int, float))):
        raise SchemaError(f"the schema holds a {type(value).__name__}, which is not JSON data", "")
