"""Build hook: compile the modules that dominate compile time and mask time with mypyc.

banister is plain, typed Python; compiling those modules to C is an optimisation only (the same code,
its annotations checked at run time). ``BANISTER_PURE=1`` installs the package uncompiled, and
``BANISTER_INTERPRETED=1`` runs an installed compiled package from its sources (see banister/_build.py).
"""

import os
import sys

from setuptools import setup

# The JSON Schema front end (schema to grammar, with its string and number automata), the regex
# compiler (lexemes' DFAs), the token automaton's walk and the parser: Earley over lexemes, the lexer's
# contexts and the recogniser that fills masks. (The Makefile reads this list: editing one of these
# files rebuilds the install.) Not regex/nodes.py: the EBNF front end keeps lookarounds inside node
# trees until it removes them, and compiled node classes check their fields' declared types. Not
# grammar/ir.py: Grammar.from_trimmed makes instances with object.__new__, which a compiled class
# refuses.
COMPILED = [
    "src/banister/grammar/json_schema.py",
    "src/banister/grammar/json_resolve.py",
    "src/banister/grammar/json_logic.py",
    "src/banister/grammar/json_build.py",
    "src/banister/grammar/json_text.py",
    "src/banister/grammar/json_bytes.py",
    "src/banister/grammar/json_strings.py",
    "src/banister/grammar/json_automata.py",
    "src/banister/grammar/regex_text.py",
    "src/banister/regex/charset.py",
    "src/banister/regex/parser.py",
    "src/banister/regex/utf8.py",
    "src/banister/regex/nfa.py",
    "src/banister/regex/dfa.py",
    "src/banister/parser/earley.py",
    "src/banister/parser/lexer.py",
    "src/banister/parser/recognizer.py",
    "src/banister/automaton.py",
]


def ext_modules() -> list:
    commands = [arg for arg in sys.argv[1:] if not arg.startswith("-")]
    if commands[:1] in (["egg_info"], ["dist_info"]):
        return []  # a metadata step of pip's build (it runs this file for each): nothing to compile
    if os.environ.get("BANISTER_PURE", "") not in ("", "0"):
        return []
    from mypyc.build import mypycify

    return mypycify(COMPILED, opt_level="3", group_name="banister")


setup(ext_modules=ext_modules())
