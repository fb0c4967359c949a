"""Build hook: compile the modules that dominate compile time and mask time with mypyc.

banister is plain, typed Python; compiling those modules to C is an optimisation only (the same code,
its annotations checked at run time). ``BANISTER_PURE=1`` installs the package uncompiled, and
``BANISTER_INTERPRETED=1`` runs an installed compiled package from its sources (see banister/_build.py).
"""

import os

from setuptools import setup

# The JSON Schema front end (schema to grammar) and the Earley parser under every mask.
# (The Makefile reads this list: editing one of these files rebuilds the install.)
COMPILED = [
    "src/banister/grammar/json_schema.py",
    "src/banister/grammar/json_resolve.py",
    "src/banister/grammar/json_logic.py",
    "src/banister/grammar/json_build.py",
    "src/banister/parser/earley.py",
]


def ext_modules() -> list:
    if os.environ.get("BANISTER_PURE", "") not in ("", "0"):
        return []
    from mypyc.build import mypycify

    return mypycify(COMPILED, opt_level="3", group_name="banister")


setup(ext_modules=ext_modules())
