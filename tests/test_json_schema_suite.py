"""The official JSON-Schema-Test-Suite, drafts 2020-12 and 7 (required tests plus optional/format).

Each group is compiled with the suite's remote documents as ``resources`` (a SchemaError or
LimitError refuses the group, counted); each test's ``json.dumps(data)``, keys reordered to schema
order, must be accepted exactly when it is valid.
False accepts must be 0. Known false rejects come from documented narrowings (asserted formats,
no leap seconds, no IDNA labels, const objects in their written key order).
"""

from __future__ import annotations

import collections
import json
from pathlib import Path

import pytest
from test_json_schema_helpers import Reorder, matches

from banister.errors import LimitError, SchemaError
from banister.grammar.json_schema import json_schema_to_grammar

SUITE = Path(__file__).parent.parent.parent / "shared" / "data" / "json-schema-test-suite" / "tests"
if not SUITE.exists():
    SUITE = Path("/work/shared/data/json-schema-test-suite/tests")


def _remotes() -> dict[str, object]:
    """The suite's remote documents, by the URIs its tests name them with (served at localhost:1234)."""
    root = SUITE.parent / "remotes"
    return {f"http://localhost:1234/{path.relative_to(root).as_posix()}": json.loads(path.read_text())
            for path in sorted(root.rglob("*.json"))}


def _files(draft: str) -> list[Path]:
    root = SUITE / draft
    return sorted(root.glob("*.json")) + sorted((root / "optional" / "format").glob("*.json"))


def run_suite(draft: str) -> tuple[collections.Counter, list[str]]:
    stats: collections.Counter = collections.Counter()
    false_accepts: list[str] = []
    remotes = _remotes()
    for path in _files(draft):
        for group in json.loads(path.read_text()):
            try:
                grammar = json_schema_to_grammar(group["schema"], draft="7" if draft == "draft7" else "2020-12",
                                                 resources=remotes)
            except (SchemaError, LimitError):
                stats["groups refused"] += 1
                stats["tests in refused groups"] += len(group["tests"])
                continue
            stats["groups compiled"] += 1
            reorder = Reorder(group["schema"], legacy=draft == "draft7")
            for test in group["tests"]:
                accepted = matches(grammar, json.dumps(reorder(test["data"])))
                if accepted == test["valid"]:
                    stats["tests right"] += 1
                elif accepted:
                    stats["false accepts"] += 1
                    false_accepts.append(f"{path.name}: {group['description']} / {test['description']}")
                else:
                    stats["false rejects"] += 1
    return stats, false_accepts


@pytest.mark.skipif(not SUITE.exists(), reason="JSON-Schema-Test-Suite data not found")
@pytest.mark.parametrize("draft,min_right", [("draft2020-12", 1860), ("draft7", 1470)])
def test_json_schema_test_suite(draft, min_right):
    stats, false_accepts = run_suite(draft)
    print(f"\n{draft}: " + ", ".join(f"{k} {v}" for k, v in sorted(stats.items())))
    assert stats["false accepts"] == 0, false_accepts
    assert stats["tests right"] >= min_right
