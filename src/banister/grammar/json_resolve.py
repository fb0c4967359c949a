"""A JSON Schema document: drafts, base URIs, ``$id``/``$anchor`` resources and ``$ref`` resolution.

Every schema location is named by its JSON pointer from the document root (``""`` is the root); that
pointer is what errors report and what the compiler uses as the location's identity. References
resolve inside the document (by ``$id``, ``$anchor``, plain-name fragments or JSON pointer) and into
the *resources* the caller gives: other documents by absolute URI, whose locations are named by that
URI, ``#`` and the pointer inside (``https://example.com/a.json#/$defs/b``). Nothing is fetched: a
reference to any other document is refused.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote, urldefrag, urljoin

from banister.errors import SchemaError

DRAFTS = ("4", "6", "7", "2019-09", "2020-12")
_SCHEMA_URIS = {
    "json-schema.org/draft-04/schema": "4",
    "json-schema.org/draft-06/schema": "6",
    "json-schema.org/draft-07/schema": "7",
    "json-schema.org/draft/2019-09/schema": "2019-09",
    "json-schema.org/draft/2020-12/schema": "2020-12",
}
_ROOT_BASE = "https://banister.invalid/root.json"
_DYNAMIC_REF = {"2020-12": "$dynamicRef", "2019-09": "$recursiveRef"}
_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.\-]*:")
# Keywords whose values are schemas, lists of schemas, or maps of schemas.
_ONE = (
    "additionalItems",
    "additionalProperties",
    "contains",
    "propertyNames",
    "not",
    "if",
    "then",
    "else",
    "unevaluatedItems",
    "unevaluatedProperties",
    "contentSchema",
    "items",
)
_LIST = ("allOf", "anyOf", "oneOf", "prefixItems", "items")
_MAP = ("properties", "patternProperties", "$defs", "definitions", "dependentSchemas", "dependencies")
_ONE_KEYS, _LIST_KEYS, _MAP_KEYS = frozenset(_ONE), frozenset(_LIST), frozenset(_MAP)
_SUBSCHEMA_KEYS = _ONE_KEYS | _LIST_KEYS | _MAP_KEYS


def draft_of(schema: Any, default: str) -> str:
    """The draft a root schema declares with ``$schema`` (``default`` when absent or unknown)."""
    if isinstance(schema, dict) and isinstance(schema.get("$schema"), str):
        uri = schema["$schema"].split("://", 1)[-1].rstrip("#")
        return _SCHEMA_URIS.get(uri, default)
    return default


def escape_token(token: str) -> str:
    return token.replace("~", "~0").replace("/", "~1")


def join(base: str, ref: str) -> str:
    """Resolve ``ref`` against ``base`` (``urljoin``, plus fragment-only refs on URN bases)."""
    if ref.startswith("#"):
        return urldefrag(base).url + ref
    if _SCHEME.match(ref):
        return ref
    return urljoin(base, ref)


@dataclass(frozen=True)
class Location:
    """A schema inside the document: its value, pointer, base URI and draft."""

    schema: Any
    pointer: str
    base: str
    draft: str


class Document:
    """An indexed schema document; ``location(pointer)`` and ``resolve(ref, at)`` find schemas.

    ``resources`` maps absolute URIs (no fragment) to more schema documents that ``$ref`` may reach;
    each is indexed as if retrieved from its URI (its own ``$id`` names it too), in its own
    ``$schema``'s draft or else the root's."""

    def __init__(self, root: Any, draft: str, resources: Mapping[str, Any] | None = None) -> None:
        self.root = root
        self._mounted: dict[str, Any] = {}  # a resource's pointer prefix (its URI and "#") -> its document
        self._info: dict[str, tuple[Any, str, str]] = {}  # pointer -> (schema, base, draft), as indexed
        self._located: dict[str, Location] = {}  # what location() answered, by pointer (asked again and again)
        self._resolved: dict[tuple[str, str], Location] = {}  # what resolve() answered, by reference and base
        self._resources: dict[str, str] = {}
        self._anchors: dict[str, str] = {}
        # A $dynamicAnchor's name ("" for $recursiveAnchor: true) -> the resources defining it; where a
        # $dynamicRef (2020-12) or $recursiveRef (2019-09) is, and which.
        self._dynamic_anchors: dict[str, set[str]] = {}
        self._dynamic_refs: list[tuple[str, str]] = []
        draft = draft_of(root, draft)
        self._index(root, "", _ROOT_BASE, draft)
        for uri, document in (resources or {}).items():
            prefix = uri + "#"
            self._mounted[prefix] = document
            self._index(document, prefix, uri, draft_of(document, draft))
        for pointer, keyword in self._dynamic_refs:
            self._settle_dynamic_ref(pointer, keyword)
        self._located.clear()  # (settling resolved references, some to nodes it then rewrote)
        self._resolved.clear()

    def _index(self, root: Any, pointer: str, base: str, draft: str) -> None:
        """Walk the document ``root`` (in ``draft``, as its ``$schema`` says), mounted at ``pointer`` with
        the base URI ``base``: its locations, resources, anchors and dynamic references."""
        stack: list[tuple[Any, str, str, str]] = [(root, pointer, base, draft)]
        self._resources.setdefault(base, pointer)  # (the document's own $id wins over a resource's URI)
        while stack:
            node, pointer, base, draft = stack.pop()
            if not isinstance(node, dict):
                self._info.setdefault(pointer, (node, base, draft))
                continue
            if node is not root and isinstance(node.get("$schema"), str) and self._id_of(node, draft) is not None:
                draft = draft_of(node, draft)
            ident = self._id_of(node, draft)
            if ident is not None:
                url, fragment = urldefrag(join(base, ident))
                if fragment and draft in ("4", "6", "7"):
                    self._anchors.setdefault(f"{url}#{fragment}", pointer)
                else:
                    base = url
                    self._resources.setdefault(url, pointer)
            anchor = node.get("$anchor")
            if isinstance(anchor, str):
                self._anchors.setdefault(f"{urldefrag(base).url}#{anchor}", pointer)
            dynamic = node.get("$dynamicAnchor")
            if isinstance(dynamic, str):
                self._anchors.setdefault(f"{urldefrag(base).url}#{dynamic}", pointer)
                self._dynamic_anchors.setdefault(dynamic, set()).add(urldefrag(base).url)
            if draft == "2019-09" and node.get("$recursiveAnchor") is True and (node is root or ident is not None):
                self._dynamic_anchors.setdefault("", set()).add(urldefrag(base).url)
            keyword = _DYNAMIC_REF.get(draft)
            if keyword is not None and isinstance(node.get(keyword), str):
                self._dynamic_refs.append((pointer, keyword))
            self._info[pointer] = (node, base, draft)
            if _SUBSCHEMA_KEYS.isdisjoint(node):  # a leaf (most nodes): no keyword to look into
                continue
            # (each group's keys in a fixed order, so that the first of two equal $ids is always the same)
            for key in _ONE if not _ONE_KEYS.isdisjoint(node) else ():
                if isinstance(node.get(key), (dict, bool)):
                    stack.append((node[key], f"{pointer}/{escape_token(key)}", base, draft))
            for key in _LIST if not _LIST_KEYS.isdisjoint(node) else ():
                if isinstance(node.get(key), list):
                    for i, item in enumerate(node[key]):
                        stack.append((item, f"{pointer}/{escape_token(key)}/{i}", base, draft))
            for key in _MAP if not _MAP_KEYS.isdisjoint(node) else ():
                if isinstance(node.get(key), dict):
                    for name, item in node[key].items():
                        if isinstance(item, (dict, bool)):
                            stack.append((item, f"{pointer}/{escape_token(key)}/{escape_token(name)}", base, draft))

    def _settle_dynamic_ref(self, pointer: str, keyword: str) -> None:
        """Make the ``$dynamicRef`` (``$recursiveRef``) at ``pointer`` a ``$ref`` where every dynamic scope
        gives one target.

        A ``$dynamicRef`` resolves as a ``$ref``, then, if its target bears a ``$dynamicAnchor`` of the
        fragment's name, to the outermost resource of the dynamic scope defining that anchor (a
        ``$recursiveRef`` likewise, with ``$recursiveAnchor: true`` at resource roots). Where one resource
        alone defines it, that is the target's own resource: the ``$ref``'s target. Where the root's
        resource (the outermost of every scope) defines it, it is the root's. Elsewhere (or beside a
        ``$ref``, or where it does not resolve) it is left, and refused."""
        node, base, draft = self._info[pointer]
        ref = node[keyword]
        if "$ref" in node:
            return
        try:
            target = self._resolve(ref, Location(node, pointer, base, draft)).schema
        except SchemaError:
            return
        if keyword == "$recursiveRef":
            name, bears = "", isinstance(target, dict) and target.get("$recursiveAnchor") is True
        else:
            name = unquote(urldefrag(join(base, ref)).fragment)
            bears = isinstance(target, dict) and target.get("$dynamicAnchor") == name
        if bears and len(self._dynamic_anchors[name]) > 1:
            root = urldefrag(self._info[""][1]).url
            if root not in self._dynamic_anchors[name]:
                return
            ref = f"{root}#{name}" if name else root
        rewritten = {k: v for k, v in node.items() if k != keyword}
        self._info[pointer] = ({**rewritten, "$ref": ref}, base, draft)

    @staticmethod
    def _id_of(node: dict, draft: str) -> str | None:
        key = "id" if draft == "4" else "$id"
        value = node.get(key)
        if not isinstance(value, str):
            return None
        if "$ref" in node and draft in ("4", "6", "7"):
            return None  # $ref siblings are ignored before 2019-09, $id included
        return value

    def location(self, pointer: str) -> Location:
        """The schema at ``pointer`` (SchemaError if there is none)."""
        located = self._located.get(pointer)
        if located is None:
            located = self._located[pointer] = self._locate(pointer)
        return located

    def _locate(self, pointer: str) -> Location:
        found = self._info.get(pointer)
        if found is not None:
            return Location(found[0], pointer, found[1], found[2])
        node, inside = self.root, pointer
        if pointer and not pointer.startswith("/"):  # in a resource: its URI, "#", then the pointer inside
            prefix, inside = pointer.split("#", 1)
            node = self._mounted[prefix + "#"]
        tokens = inside.split("/")[1:] if inside else []
        for i, raw in enumerate(tokens):
            token = raw.replace("~1", "/").replace("~0", "~")
            if isinstance(node, dict) and token in node:
                node = node[token]
            elif isinstance(node, list) and token.isdigit() and int(token) < len(node):
                node = node[int(token)]
            else:
                where = pointer[: len(pointer) - len(inside)] + "".join("/" + t for t in tokens[:i])
                raise SchemaError(f"$ref target {pointer!r} does not exist", where, "$ref")
        # A location the index did not walk (under an unknown keyword): inherit from the nearest parent.
        parent = pointer
        while found is None and parent:
            parent = parent.rsplit("/", 1)[0]
            found = self._info.get(parent)
        _, base, draft = found or (None, _ROOT_BASE, "2020-12")
        return Location(node, pointer, base, draft)

    def resolve(self, ref: str, at: Location) -> Location:
        """The target of ``$ref`` (or ``$dynamicRef`` resolved statically) written at ``at`` (memoised by
        reference and base: the expansion and the property order both follow each one)."""
        key = (ref, at.base)
        found = self._resolved.get(key)
        if found is None:
            found = self._resolved[key] = self._resolve(ref, at)
        return found

    def _resolve(self, ref: str, at: Location) -> Location:
        if ref.startswith("#"):  # within the base's resource, the commonest reference: no URL parsing
            url, fragment = urldefrag(at.base).url if "#" in at.base else at.base, ref[1:]
        else:
            url, fragment = urldefrag(join(at.base, ref))
        if "%" in fragment:
            fragment = unquote(fragment)
        if fragment and not fragment.startswith("/"):
            target = self._anchors.get(f"{url}#{fragment}")
            if target is None:
                raise SchemaError(f"$ref {ref!r}: no anchor {fragment!r} in this document", at.pointer, "$ref")
            return self.location(target)
        resource = self._resources.get(url)
        if resource is None:
            raise SchemaError(
                f"$ref {ref!r} points outside this document and the resources given (nothing is fetched: "
                f"pass the document it names as resources={{{url!r}: ...}})",
                at.pointer,
                "$ref",
            )
        tokens = [escape_token(t.replace("~1", "/").replace("~0", "~")) for t in fragment.split("/")[1:]]
        return self.location(resource + "".join("/" + t for t in tokens))
