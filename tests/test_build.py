"""The compiled build (setup.py, mypyc) against the same code interpreted: what is installed compiled is
what setup.py lists, and the two forms give the same grammars' masks, bit for bit, on MaskBench records."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from shared_data import MASKBENCH_DEV

from banister import _build

ROOT = Path(__file__).resolve().parents[1]

# Compiles a sample of MaskBench records against GPT-2's vocabulary, runs every instance through a
# matcher, and prints where the modules came from and a digest of every mask, acceptance and refusal.
_CHILD = r"""
import gzip, hashlib, json, random, sys
import numpy as np
from banister import Compiler, Matcher, allocate_token_bitmask
from banister.errors import BanisterError
from banister.vocab.named import load_named

named = load_named("gpt2")
compiler = Compiler(named.vocab)
with gzip.open(sys.argv[1], "rt") as fh:
    records = random.Random(7).sample([json.loads(line) for line in fh], int(sys.argv[2]))
digest, compiled, masks = hashlib.sha256(), 0, 0
bitmask = allocate_token_bitmask(1, named.vocab.vocab_size)
for record in records:
    try:
        grammar = compiler.json_schema(record["schema"])
    except BanisterError as exc:
        digest.update(f"{record['id']} {type(exc).__name__}".encode())
        continue
    compiled += 1
    for test in record["tests"]:
        matcher = Matcher(grammar)
        for token in named.encode(json.dumps(test["data"], ensure_ascii=False)):
            matcher.fill_next_token_bitmask(bitmask)
            digest.update(np.asarray(bitmask).tobytes())
            masks += 1
            if not matcher.accept_token(token):
                break
        digest.update(str(matcher.is_accepting()).encode())
files = {n: m.__file__ for n, m in sys.modules.items() if n.startswith("banister.")}
print(json.dumps({"digest": digest.hexdigest(), "compiled": compiled, "masks": masks, "files": files}))
"""


def _setup_list() -> set[str]:
    tree = ast.parse((ROOT / "setup.py").read_text())
    listed = next(node.value for node in ast.walk(tree) if isinstance(node, ast.Assign)
                  and any(isinstance(t, ast.Name) and t.id == "COMPILED" for t in node.targets))
    return {".".join(Path(ast.literal_eval(e)).relative_to("src").with_suffix("").parts) for e in listed.elts}


def _run(interpreted: bool) -> dict:
    env = {**os.environ, "BANISTER_INTERPRETED": "1" if interpreted else ""}
    out = subprocess.run([sys.executable, "-c", _CHILD, str(MASKBENCH_DEV), "25"], env=env, capture_output=True,
                         text=True, timeout=600, check=True)
    return json.loads(out.stdout)


needs_compiled = pytest.mark.skipif(not _build.installed_compiled(), reason="a pure-Python install (BANISTER_PURE)")


@needs_compiled
def test_installed_compiled_modules_are_the_ones_setup_lists():
    assert set(_build.installed_compiled()) == _setup_list()
    assert _build.stale_compiled() == ()
    assert "mypyc" in _build.describe() or _build.interpreted()


@needs_compiled
@pytest.mark.skipif(not MASKBENCH_DEV.exists(), reason="MaskBench data not found")
def test_compiled_and_interpreted_give_the_same_masks():
    compiled, interpreted = _run(False), _run(True)
    for name in _setup_list():
        assert not compiled["files"][name].endswith(".py"), name
        assert interpreted["files"][name].endswith(".py"), name
    assert compiled["compiled"] >= 20 and compiled["masks"] > 1000  # the sample is not vacuous
    assert (compiled["compiled"], compiled["masks"], compiled["digest"]) == (
        interpreted["compiled"], interpreted["masks"], interpreted["digest"])


def test_the_source_digest_names_the_code_and_only_the_code(tmp_path, monkeypatch):
    """Two trees with the same sources have the same digest; a changed line, a renamed module or an added
    one changes it; files that are not Python sources (a compiled extension, a cache) do not."""
    tree = tmp_path / "banister"
    (tree / "parser").mkdir(parents=True)
    (tree / "__init__.py").write_text("")
    (tree / "parser" / "earley.py").write_text("X = 1\n")
    monkeypatch.setattr(_build, "_PACKAGE", tree)
    first = _build.source_digest()
    assert len(first) == 16 and _build.source_digest() == first
    (tree / "parser" / "earley.cpython-311-x86_64-linux-gnu.so").write_bytes(b"\0ELF")
    (tree / "parser" / "__pycache__").mkdir()
    (tree / "parser" / "__pycache__" / "earley.cpython-311.pyc").write_bytes(b"\0")
    assert _build.source_digest() == first
    (tree / "parser" / "earley.py").write_text("X = 2\n")
    changed = _build.source_digest()
    (tree / "parser" / "earley.py").rename(tree / "parser" / "lexer.py")
    renamed = _build.source_digest()
    (tree / "extra.py").write_text("")
    assert len({first, changed, renamed, _build.source_digest()}) == 4
