"""banister: structured generation for language models.

Compile a regex, a list of choices (and, through the grammar front ends, JSON Schemas and grammars)
once against the model's vocabulary, then drive any decoding loop with one cheap Matcher per request.
"""

from banister import _build  # first: it may switch compiled modules to their sources
from banister.compiler import CompiledGrammar, Compiler
from banister.errors import BanisterError, LimitError, RegexError, VocabularyError
from banister.grammar.structural import StructuralTagError, Tag
from banister.mask.bitmask import allocate_token_bitmask, apply_token_bitmask_inplace
from banister.cache import WarmCache
from banister.matcher import Matcher, fill_next_token_bitmask_batch
from banister.vocab import Vocabulary

__all__ = [
    "BanisterError",
    "CompiledGrammar",
    "Compiler",
    "LimitError",
    "Matcher",
    "RegexError",
    "StructuralTagError",
    "Tag",
    "Vocabulary",
    "VocabularyError",
    "WarmCache",
    "allocate_token_bitmask",
    "apply_token_bitmask_inplace",
    "fill_next_token_bitmask_batch",
]
__version__ = "0.1.0"
