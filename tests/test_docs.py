"""Every ```python block of the user guide runs (blocks of one page share a namespace, in order)."""

import re
from pathlib import Path

import pytest

DOCS = sorted((Path(__file__).parent.parent / "docs").glob("*.md")) + [Path(__file__).parent.parent / "README.md"]
BLOCK = re.compile(r"```python\n(.*?)```", re.S)


@pytest.mark.parametrize("page", [p for p in DOCS if BLOCK.search(p.read_text())], ids=lambda p: p.name)
def test_examples_run(page):
    namespace: dict = {"__name__": f"docs_{page.stem}"}
    for i, block in enumerate(BLOCK.findall(page.read_text())):
        exec(compile(block, f"{page.name}[block {i}]", "exec"), namespace)
