"""Typed errors: every bad specification or resource limit surfaces as one of these."""

from __future__ import annotations


class BanisterError(Exception):
    """Base class of every error banister raises on purpose."""


class VocabularyError(BanisterError, ValueError):
    """A vocabulary that cannot be built or loaded (bad ids, unreadable tokenizer file)."""


class RegexError(BanisterError, ValueError):
    """A pattern that is malformed or uses a construct that is not regular.

    ``pattern`` is the pattern text and ``position`` the 0-based character offset of the offending
    construct (``None`` where no single position applies).
    """

    def __init__(self, message: str, pattern: str | None = None, position: int | None = None) -> None:
        self.pattern = pattern
        self.position = position
        where = "" if position is None else f" at position {position}"
        shown = "" if pattern is None else f" in pattern {pattern!r}"
        super().__init__(f"{message}{where}{shown}")


class GrammarError(BanisterError, ValueError):
    """A grammar (GBNF, Lark, or the rule form) that is malformed; the message names the rule or line."""


class SchemaError(BanisterError, ValueError):
    """A JSON Schema that is invalid or uses a keyword that can't be enforced exactly.

    ``pointer`` is the JSON pointer of the offending schema location and ``keyword`` the keyword.
    """

    def __init__(self, message: str, pointer: str = "", keyword: str | None = None) -> None:
        self.message = message
        self.pointer = pointer
        self.keyword = keyword
        # A location in a resource (another document) is named by its URI, "#" and the pointer inside.
        at = pointer if pointer and not pointer.startswith("/") else f"#{pointer}"
        where = f" at {at}" if keyword is None else f" (keyword {keyword!r} at {at})"
        super().__init__(message + where)


class LimitError(BanisterError, RuntimeError):
    """A compile-time resource limit was exceeded (automaton states, grammar size, time).

    ``setting`` names the setting that raises the limit.
    """

    def __init__(self, message: str, setting: str | None = None) -> None:
        self.setting = setting
        hint = f" (raise the `{setting}` setting to allow more)" if setting else ""
        super().__init__(message + hint)
