"""Helpers shared by the JSON Schema tests: a cached oracle and the schema-order key reordering."""

from __future__ import annotations

import functools
import re
from typing import Any
from urllib.parse import unquote, urldefrag, urljoin

import banister.grammar.reference as reference
from banister.regex import compile_regex

# The reference oracle compiles every lexeme on each call; lexeme DFAs are deterministic, so share them.
reference.compile_regex = functools.lru_cache(maxsize=20_000)(compile_regex)
matches = reference.matches

_LEGACY = ("http://json-schema.org/draft-04/", "http://json-schema.org/draft-06/", "http://json-schema.org/draft-07/")


class Reorder:
    """Reorders an instance's keys to the schema order the grammar expects (key_order="schema").

    Independent of the compiler: names come from a depth-first walk over the schemas that apply to a
    value (own properties, required, dependency names, then $ref, allOf, anyOf, oneOf, not, if, then,
    else, dependentSchemas/dependencies); the names declared in properties go first in that order, then
    the names only required or named by dependencies, then the other keys.
    """

    def __init__(self, schema: Any, legacy: bool | None = None) -> None:
        self.root = schema
        if legacy is None:
            legacy = isinstance(schema, dict) and str(schema.get("$schema", "")).startswith(_LEGACY)
        self.legacy = legacy
        self.ids: dict[str, Any] = {}
        self.bases: dict[int, str] = {}
        self._index(schema, "https://banister.invalid/root.json")

    def _index(self, node: Any, base: str) -> None:
        if isinstance(node, dict):
            ident = node.get("$id", node.get("id"))
            if isinstance(ident, str) and not (self.legacy and "$ref" in node):
                url, frag = urldefrag(urljoin(base, ident) if not ident.startswith("#") else base + ident)
                if frag:
                    self.ids[f"{url}#{frag}"] = node
                else:
                    base = url
                    self.ids[url] = node
            if isinstance(node.get("$anchor"), str):
                self.ids[f"{urldefrag(base).url}#{node['$anchor']}"] = node
            self.bases.setdefault(id(node), base)
            for k, v in node.items():
                if k not in ("enum", "const", "examples", "default"):
                    self._index(v, base)
        elif isinstance(node, list):
            for v in node:
                self._index(v, base)

    def _resolve(self, node: dict) -> Any:
        base = self.bases.get(id(node), "https://banister.invalid/root.json")
        ref = node["$ref"]
        full = urldefrag(base).url + ref if ref.startswith("#") else urljoin(base, ref)
        url, frag = urldefrag(full)
        frag = unquote(frag)
        if frag and not frag.startswith("/"):
            return self.ids.get(f"{url}#{frag}")
        target = self.ids.get(url, self.root if url == "https://banister.invalid/root.json" else None)
        for token in frag.split("/")[1:]:
            token = token.replace("~1", "/").replace("~0", "~")
            if isinstance(target, dict):
                target = target.get(token)
            elif isinstance(target, list) and token.isdigit() and int(token) < len(target):
                target = target[int(token)]
            else:
                return None
        return target

    def closure(self, schemas: list[Any]) -> tuple[list[dict], list[str]]:
        """The schemas reached in place (DFS order) and the property names in schema order."""
        out: list[dict] = []
        names: dict[str, None] = {}  # declared in properties
        mentioned: dict[str, None] = {}  # in required or dependencies: after the declared names
        seen: set[int] = set()
        stack = list(reversed(schemas))
        while stack:
            s = stack.pop()
            if not isinstance(s, dict) or id(s) in seen:
                continue
            seen.add(id(s))
            beside_apply = not (self.legacy and "$ref" in s)  # beside a legacy $ref nothing applies
            if beside_apply:
                out.append(s)
                if isinstance(s.get("properties"), dict):
                    names.update(dict.fromkeys(s["properties"]))
                if isinstance(s.get("required"), list):
                    mentioned.update(dict.fromkeys(r for r in s["required"] if isinstance(r, str)))
                for key in ("dependentRequired", "dependencies"):
                    if isinstance(s.get(key), dict):
                        for name, needed in s[key].items():
                            if isinstance(needed, list):
                                mentioned[name] = None
                                mentioned.update(dict.fromkeys(n for n in needed if isinstance(n, str)))
            subs: list[Any] = []
            if isinstance(s.get("$ref"), str):
                subs.append(self._resolve(s))
            if beside_apply:
                for key in ("allOf", "anyOf", "oneOf"):
                    if isinstance(s.get(key), list):
                        subs.extend(s[key])
                for key in ("not", "if", "then", "else"):
                    if key in s:
                        subs.append(s[key])
                for key in ("dependentSchemas", "dependencies"):
                    if isinstance(s.get(key), dict):
                        subs.extend(v for v in s[key].values() if isinstance(v, (dict, bool)))
            stack.extend(reversed(subs))
        return out, list({**names, **mentioned})

    def __call__(self, value: Any, schemas: list[Any] | None = None) -> Any:
        schemas = [self.root] if schemas is None else schemas
        closure, names = self.closure(schemas)
        if isinstance(value, dict):
            ordered = [k for k in names if k in value] + [k for k in value if k not in names]
            out = {}
            for key in ordered:
                subs = []
                for s in closure:
                    props = s.get("properties") if isinstance(s.get("properties"), dict) else {}
                    pats = s.get("patternProperties") if isinstance(s.get("patternProperties"), dict) else {}
                    hit = False
                    if key in props:
                        subs.append(props[key])
                        hit = True
                    for p, sub in pats.items():
                        try:
                            if re.search(p, key):
                                subs.append(sub)
                                hit = True
                        except re.error:
                            pass
                    if not hit and "additionalProperties" in s:
                        subs.append(s["additionalProperties"])
                out[key] = self(value[key], subs)
            return out
        if isinstance(value, list):
            out_list = []
            for i, item in enumerate(value):
                subs = []
                for s in closure:
                    items = s.get("items")
                    prefix = s.get("prefixItems") if isinstance(s.get("prefixItems"), list) else []
                    if i < len(prefix):
                        subs.append(prefix[i])
                    elif isinstance(items, list):
                        subs.append(items[i] if i < len(items) else s.get("additionalItems", True))
                    elif items is not None:
                        subs.append(items)
                    if "contains" in s:
                        subs.append(s["contains"])
                out_list.append(self(item, subs))
            return out_list
        return value


def test_productive_rules_match_the_plain_fixpoint():
    """The builder's passes in reverse order, and the worklist they fall back on, against the textbook
    fixpoint, on random grammars with cycles, undefined-free references and empty rules (up to 40
    rules, so that some need more passes than the builder makes before the worklist takes over)."""
    import random

    from banister.grammar.ir import Lexeme, Ref
    from banister.grammar.json_build import _productive, _productive_worklist

    def fixpoint(rules: dict) -> tuple[set[str], bool]:
        found: set[str] = set()
        grew = True
        while grew:
            grew = False
            for name, alts in rules.items():
                if name not in found and any(all(type(s) is Lexeme or s.name in found for s in a) for a in alts):
                    found.add(name)
                    grew = True
        return found, len(found) == len(rules)

    rng = random.Random(0)
    for _ in range(5000):
        names = [f"r{i}" for i in range(rng.randint(1, rng.choice([6, 40])))]
        rules = {
            name: [tuple(rng.choice([Lexeme("a"), Ref(rng.choice(names))]) for _ in range(rng.randint(0, 3)))
                   for _ in range(rng.randint(0, 3))]
            for name in names
        }
        expected = fixpoint(rules)
        assert _productive(rules) == expected, rules
        assert _productive_worklist(rules) == expected, rules
    # A chain defined from its base up: the reverse passes settle one rule each, so the worklist ends it.
    chain = {f"c{i}": [(Ref(f"c{i - 1}"),) if i else (Lexeme("a"),)] for i in range(30)}
    chain["loop"] = [(Ref("loop"), Lexeme("a"))]
    assert _productive(chain) == fixpoint(chain) == (set(chain) - {"loop"}, False)
