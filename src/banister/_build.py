"""Which of banister's modules run compiled, and a switch that runs them from their sources instead.

An install compiles a few hot modules to C extensions with mypyc (see setup.py); each keeps its ``.py``
source beside it. ``BANISTER_INTERPRETED=1`` in the environment when banister is first imported loads
every such module from that source: for tracebacks and debuggers, for profilers that wrap methods
(a compiled class's methods cannot be replaced), and to measure what compiling gains.
"""

from __future__ import annotations

import hashlib
import importlib.abc
import importlib.machinery
import importlib.util
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType

_PACKAGE = Path(__file__).parent
_EXTENSIONS = tuple(importlib.machinery.EXTENSION_SUFFIXES)


def interpreted() -> bool:
    """Whether ``BANISTER_INTERPRETED`` asked for the sources (read at first import; fixed after)."""
    return _SWITCHED


def _extensions() -> dict[str, tuple[Path, Path]]:
    """Module name -> (compiled extension, its source), for each module installed compiled."""
    found = {}
    for path in _PACKAGE.rglob("*"):
        suffix = next((s for s in _EXTENSIONS if path.name.endswith(s)), None)
        source = path.with_name(path.name[: -len(suffix)] + ".py") if suffix else None
        if source is not None and source.is_file():
            found[".".join(source.relative_to(_PACKAGE.parent).with_suffix("").parts)] = (path, source)
    return found


def installed_compiled() -> tuple[str, ...]:
    """The modules installed as compiled extensions (none for a pure-Python install)."""
    return tuple(sorted(_extensions()))


def stale_compiled() -> tuple[str, ...]:
    """Compiled modules whose source was changed after they were built: a checkout that needs a rebuild
    (``make`` does it), since Python imports the extension before the source."""
    return tuple(sorted(n for n, (ext, src) in _extensions().items() if src.stat().st_mtime > ext.stat().st_mtime))


def compiled_modules() -> tuple[str, ...]:
    """The modules that run compiled in this process."""
    return () if _SWITCHED else installed_compiled()


def describe() -> str:
    """One line for benchmark headers and ``--version``: what ran, compiled or interpreted."""
    installed = installed_compiled()
    if not installed:
        return "pure Python (no compiled modules installed)"
    if _SWITCHED:
        return f"interpreted ({len(installed)} compiled modules installed, BANISTER_INTERPRETED set)"
    return f"mypyc: {len(installed)} modules compiled ({', '.join(n.rpartition('.')[2] for n in installed)})"


def source_digest() -> str:
    """A short digest of every Python source of the package: two runs of a benchmark whose digests
    differ timed different code (a checkpoint made by one is refused by the other)."""
    digest = hashlib.sha256()
    for path in sorted(_PACKAGE.rglob("*.py")):
        digest.update(path.relative_to(_PACKAGE).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()[:16]


class _SourcesFirst(importlib.abc.MetaPathFinder):
    """Finds a banister module that has a compiled extension at its ``.py`` source instead."""

    def find_spec(self, fullname: str, path: Sequence[str] | None,
                  target: ModuleType | None = None) -> importlib.machinery.ModuleSpec | None:
        if not fullname.startswith("banister.") or not path:
            return None
        name = fullname.rpartition(".")[2]
        for entry in path:
            source = Path(entry, name + ".py")
            if source.is_file() and any(Path(entry, name + s).is_file() for s in _EXTENSIONS):
                return importlib.util.spec_from_file_location(fullname, source)
        return None


_SWITCHED = os.environ.get("BANISTER_INTERPRETED", "") not in ("", "0")
if _SWITCHED and not any(isinstance(f, _SourcesFirst) for f in sys.meta_path):
    sys.meta_path.insert(0, _SourcesFirst())
