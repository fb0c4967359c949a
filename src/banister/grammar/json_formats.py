"""The string formats enforced exactly, as whole-match regexes over the decoded string.

Each regex accepts a subset of what the format's RFC allows and of what the ``jsonschema`` package's
format checker accepts; where the two differ or a rule is not regular, the narrower reading is taken
(the notes say where).
"""

from __future__ import annotations

from dataclasses import dataclass

_HEX = "[0-9A-Fa-f]"
_YEAR = "(?:[1-9][0-9]{3}|0[1-9][0-9]{2}|00[1-9][0-9]|000[1-9])"
_LEAP_YEAR = "(?:[0-9]{2}(?:0[48]|[2468][048]|[13579][26])|(?:0[48]|[2468][048]|[13579][26])00)"
_DATE = (
    f"(?:{_YEAR}-(?:(?:0[13578]|1[02])-(?:0[1-9]|[12][0-9]|3[01])|(?:0[469]|11)-(?:0[1-9]|[12][0-9]|30)"
    f"|02-(?:0[1-9]|1[0-9]|2[0-8]))|{_LEAP_YEAR}-02-29)"
)
_TIME = r"(?:[01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](?:\.[0-9]+)?(?:[Zz]|[+\-](?:[01][0-9]|2[0-3]):[0-5][0-9])"
_OCTET = "(?:25[0-5]|2[0-4][0-9]|1[0-9]{2}|[1-9]?[0-9])"
_IPV4 = rf"{_OCTET}(?:\.{_OCTET}){{3}}"


def _ipv6() -> str:
    h = f"{_HEX}{{1,4}}"

    def groups(count: int) -> str:
        return "" if count == 0 else h if count == 1 else f"{h}(?::{h}){{{count - 1}}}"

    def upto(count: int) -> str:
        return "" if count <= 0 else f"(?:{h}(?::{h}){{0,{count - 1}}})?"

    forms = [f"{groups(7)}:{h}", f"{groups(6)}:{_IPV4}"]
    for left in range(8):
        room = 7 - left
        right = [upto(room)]
        if room >= 2:
            right.append(f"(?:{h}:){{0,{room - 2}}}{_IPV4}")
        forms.append(f"{groups(left)}::(?:{'|'.join(right)})" if len(right) > 1 else f"{groups(left)}::{right[0]}")
    return "(?:" + "|".join(forms) + ")"


_IPV6 = _ipv6()


def _label(n: int) -> str:
    """A hostname label of 1..n letters, digits, hyphens; no hyphen first or last, and no ``--`` in
    positions 3-4 (those are IDNA labels, whose validity a regex can't check)."""
    a, h = "[A-Za-z0-9]", "[A-Za-z0-9-]"
    if n <= 3:
        return [a, f"{a}{a}?", f"{a}(?:{a}|{h}{a})?"][n - 1]
    dash = f"-{a}(?:{h}{{0,{n - 5}}}{a})?" if n >= 5 else f"-{a}"
    return f"{a}(?:{a}|{h}(?:{a}(?:{h}{{0,{n - 4}}}{a})?|{dash}))?"


def _hostname(total: int) -> str:
    """Hostnames of at most ``total`` characters, guaranteed by shape: 1-3, 4 or 5-8 labels, each group
    with the longest label (63 at most) that keeps the total within bounds (a group split per label
    count when that bound would be 0)."""
    shapes = []
    for low, high in ((1, 3), (4, 4), (5, 8)):
        for lo_k, hi_k in (
            [(low, high)] if (total - (high - 1)) // high >= 1 else [(k, k) for k in range(low, high + 1)]
        ):
            n = min(63, (total - (hi_k - 1)) // hi_k)
            if n >= 1:
                shapes.append(f"{_label(n)}(?:\\.{_label(n)}){{{lo_k - 1},{hi_k - 1}}}")
    return "(?:" + "|".join(shapes) + ")" if shapes else "[]"


_ATEXT = r"[A-Za-z0-9!#$%&'*+\-/=?\^_`{|}~]"


def _local(total: int) -> str:
    """An email local part of at most ``total`` (<= 64, RFC 5321) characters, by shape: one to four
    dot-separated atoms (more dots are not accepted), or a quoted string."""
    shapes = []
    for atoms in (1, 2, 3, 4):
        n = (total - (atoms - 1)) // atoms
        if n >= 1:
            more = f"(?:\\.{_ATEXT}{{1,{n}}}){{{atoms - 1}}}" if atoms > 1 else ""
            shapes.append(f"{_ATEXT}{{1,{n}}}{more}")
    if total >= 2:
        shapes.append(r'"(?:[ !#-\[\]-~]|\\[ -~]){0,' + str((total - 2) // 2) + '}"')
    return "(?:" + "|".join(shapes) + ")"


def _email(total: int) -> str:
    """Mailboxes of at most ``total`` characters: the local part gets at most half (64 at most)."""
    local = min(64, (total - 1) // 2)
    domain = total - 1 - local
    hosts = [_hostname(min(253, domain))]
    if domain >= 17:
        hosts.append(rf"\[{_IPV4}\]")
    if domain >= 52:
        hosts.append(rf"\[IPv6:{_IPV6}\]")
    return f"{_local(local)}@(?:{'|'.join(hosts)})"


_HOSTNAME = _hostname(253)
_EMAIL_MAX = 64 + 1 + 253
_EMAIL = _email(2 * 64 + 1 + 253)  # local part 64, domain 253 (and the IP literals)
_UNRESERVED = r"[A-Za-z0-9\-._~]"
_PCT = f"%{_HEX}{_HEX}"
_SUB_DELIMS = r"[!$&'()*+,;=]"
_PCHAR = f"(?:{_UNRESERVED}|{_PCT}|{_SUB_DELIMS}|[:@])"
_SEGMENT = f"{_PCHAR}*"
_SEGMENT_NZ = f"{_PCHAR}+"
_SEGMENT_NZ_NC = f"(?:{_UNRESERVED}|{_PCT}|{_SUB_DELIMS}|@)+"
_IP_LITERAL = rf"\[(?:{_IPV6}|v{_HEX}+\.(?:{_UNRESERVED}|{_SUB_DELIMS}|:)+)\]"
_REG_NAME = f"(?:{_UNRESERVED}|{_PCT}|{_SUB_DELIMS})*"
_PATH_ABEMPTY = f"(?:/{_SEGMENT})*"
_PATH_ABSOLUTE = f"/(?:{_SEGMENT_NZ}(?:/{_SEGMENT})*)?"
_QUERY = rf"(?:\?(?:{_PCHAR}|[/?])*)?"
_FRAGMENT = f"(?:#(?:{_PCHAR}|[/?])*)?"
_SCHEME = "[A-Za-z][A-Za-z0-9+\\-.]*:"


def _uri(host: str) -> tuple[str, str]:
    """The regexes of an RFC 3986 URI and relative reference whose authority's host is ``host``."""
    authority = f"(?:(?:{_UNRESERVED}|{_PCT}|{_SUB_DELIMS}|:)*@)?{host}(?::[0-9]*)?"
    uri = (
        f"{_SCHEME}(?://{authority}{_PATH_ABEMPTY}|{_PATH_ABSOLUTE}"
        f"|{_SEGMENT_NZ}(?:/{_SEGMENT})*)?{_QUERY}{_FRAGMENT}"
    )
    relative = (
        f"(?://{authority}{_PATH_ABEMPTY}|{_PATH_ABSOLUTE}|{_SEGMENT_NZ_NC}(?:/{_SEGMENT})*)?{_QUERY}{_FRAGMENT}"
    )
    return uri, relative


_URI, _RELATIVE_REF = _uri(f"(?:{_IP_LITERAL}|{_REG_NAME})")
_IRI, _RELATIVE_IRI = _uri(_REG_NAME)  # no IP literal: the checker here (rfc3987-syntax) refuses `[::]`
_DURATION = (
    "P(?:(?:[0-9]+D|[0-9]+M(?:[0-9]+D)?|[0-9]+Y(?:[0-9]+M(?:[0-9]+D)?)?)"
    "(?:T(?:[0-9]+H(?:[0-9]+M(?:[0-9]+S)?)?|[0-9]+M(?:[0-9]+S)?|[0-9]+S))?"
    "|T(?:[0-9]+H(?:[0-9]+M(?:[0-9]+S)?)?|[0-9]+M(?:[0-9]+S)?|[0-9]+S)|[0-9]+W)"
)
_JSON_POINTER = "(?:/(?:[^~/]|~[01])*)*"
# RFC 6570 level 4: literals (the apostrophe too, as the JSON-Schema-Test-Suite reads it) and expressions;
# a name starts with a plain character and a prefix has at most three digits (the checker here,
# uri_template, refuses a leading `%` and longer prefixes).
_UCSCHAR = "".join(f"{chr(lo)}-{chr(hi)}" for lo, hi in [
    (0xA0, 0xD7FF), (0xE000, 0xFDCF), (0xFDF0, 0xFFEF),  # ucschar and iprivate (RFC 3987)
    *((plane << 16, (plane << 16) + 0xFFFD) for plane in range(1, 14)), (0xE1000, 0xEFFFD), (0xF0000, 0xFFFFD),
    (0x100000, 0x10FFFD),
])
_VARSPEC = rf"[A-Za-z0-9_](?:\.?(?:[A-Za-z0-9_]|{_PCT}))*(?::[1-9][0-9]{{0,2}}|\*)?"
_URI_TEMPLATE = rf"(?:[!#$&-;=?-Z\[\]_a-z~{_UCSCHAR}]|{_PCT}|\{{[+#./;?&]?{_VARSPEC}(?:,{_VARSPEC})*\}})*"
_TIME_SHAPE = r"[0-9]{2}:[0-9]{2}:[0-9]{2}(?:\.[0-9]+)?(?:[Zz]|[+\-][0-9]{2}:[0-9]{2})"
_URI_CHARS = r"[A-Za-z0-9\-._~:/?#\[\]@!$&'()*+,;=%]"
_SCHEME_FIRST = f"^{_SCHEME}"
_HOST_CHARS = r"^[^\x00-,/:-@\[-`{-\x7f]*\n?$"
_IRI_CHARS = r"^[^\x00- \"<>\\^`{-}\x7f]*\n?$"


def _regex(depth: int) -> str:
    """Regexes (the ``regex`` format) in a regular subset that ECMA-262 and Python's ``re`` (the
    ``jsonschema`` checker) both read: literals; escapes of metacharacters, ``/`` and ``\\d \\w \\s \\n
    \\t \\r`` and capitals; ``.``; classes of literals, those escapes and ascending ranges within the
    digits, the lower or the upper letters, a ``-`` last; one quantifier per atom (``* + ? {n} {n,}
    {n,m}``, ``m`` of two digits or no less than ``n``), lazy or not; groups ``(...)``, ``(?:...)``
    nested at most ``depth`` deep; alternatives, each with ``^`` first and ``$`` last or not."""
    literal = r"[^\\^$.|?*+()\[\]{}\x00-\x1f]"
    escape = r"\\[\\^$.|?*+()\[\]{}/dDwWsSntr]"
    ranges = "|".join(
        f"{a}-[{a}-{last}]" for first, last in (("0", "9"), ("a", "z"), ("A", "Z"))
        for a in map(chr, range(ord(first), ord(last) + 1))
    )
    # No ``[ & ~ |`` in a class: Python warns of nested sets and set operations there.
    member = rf"(?:{ranges}|[^\\\]\[^\-&~|\x00-\x1f]|\\[\\\]\[^\-.dDwWsSntr])"
    klass = rf"\[\^?{member}+-?\]"
    count = "|".join(f"{n},[{n}-9]" for n in range(10))
    quantifier = rf"(?:(?:[*+?]|\{{[0-9]{{1,4}},?\}}|\{{(?:{count}|[0-9],[1-9][0-9])\}})\??)"
    atom = f"(?:{literal}|{escape}|\\.|{klass})"
    for _ in range(depth):
        sequence = f"(?:{atom}{quantifier}?)*"
        atom = f"(?:{literal}|{escape}|\\.|{klass}|\\((?:\\?:)?{sequence}(?:\\|{sequence})*\\))"
    sequence = f"\\^?(?:{atom}{quantifier}?)*\\$?"
    return f"{sequence}(?:\\|{sequence})*"


_REGEX = _regex(2)


@dataclass(frozen=True)
class Format:
    """A supported ``format``: the regex for strings, or a numeric range for numbers."""

    name: str
    regex: str | None
    note: str
    integer_range: tuple[int, int] | None = None
    exact: bool = False
    """Whether the regex is the whole format, no narrowing (``not: {format: ...}`` is then its complement)."""
    outer: str | None = None
    """For a format narrowed here: an anchored pattern (ECMA-262) that every string of the format
    matches, by the RFC and by the ``jsonschema`` package's checker alike (which reads ``$`` before a
    final newline as the end): ``not: {format: ...}`` is then enforced as "does not match it", a
    narrower complement that is never wrong. None: that ``not`` is refused."""


FORMATS: dict[str, Format] = {
    f.name: f
    for f in [
        Format("date", _DATE, "RFC 3339 full-date; days per month and leap years checked; year 0000 refused"),
        Format("time", _TIME, "RFC 3339 full-time (offset required); leap second 60 not accepted",
               outer=f"^{_TIME_SHAPE}\\n?$"),
        Format("date-time", f"{_DATE}[Tt]{_TIME}", "RFC 3339 date-time; `t`/`z` accepted; no leap second",
               outer=f"^[0-9]{{4}}-[0-9]{{2}}-[0-9]{{2}}[Tt]{_TIME_SHAPE}\\n?$"),
        Format("duration", _DURATION, "RFC 3339 appendix A ABNF (no fractions, weeks alone)"),
        Format(
            "email",
            _EMAIL,
            "RFC 5321 mailbox: a local part of at most 64 by shape (at most four dot-separated atoms, or a "
            "quoted string), then a hostname or an IP literal",
            outer="@",
        ),
        Format("idn-email", _EMAIL, "RFC 6531: the ASCII mailboxes of `email` (narrower)", outer="@"),
        Format(
            "hostname",
            _HOSTNAME,
            "RFC 1123 labels; total <= 253 by shape (<= 4 labels of <= 62, or 5-8 of <= 30); no `xn--`-style labels",
            outer=_HOST_CHARS,
        ),
        Format("idn-hostname", _HOSTNAME, "RFC 5890: the ASCII hostnames of `hostname` (narrower)",
               outer=_HOST_CHARS),
        Format("ipv4", _IPV4, "dotted quad, no leading zeros", exact=True),
        Format("ipv6", _IPV6, "RFC 4291 text forms incl. `::` and an IPv4 tail; no zone id", outer="^[0-9A-Fa-f:.]*$"),
        Format("uri", _URI, "RFC 3986 URI (ASCII)", outer=_SCHEME_FIRST),
        Format("uri-reference", f"(?:{_URI}|{_RELATIVE_REF})", "RFC 3986 URI-reference (ASCII)",
               outer=f"^{_URI_CHARS}*\\n?$"),
        Format("iri", _IRI, "RFC 3987: the ASCII IRIs of `uri` without an IP literal host (narrower)",
               outer=_SCHEME_FIRST),
        Format("iri-reference", f"(?:{_IRI}|{_RELATIVE_IRI})",
               "RFC 3987: the ASCII IRI-references of `uri-reference` without an IP literal host (narrower)",
               outer=_IRI_CHARS),
        Format(
            "uuid",
            f"{_HEX}{{8}}-{_HEX}{{4}}-{_HEX}{{4}}-{_HEX}{{4}}-{_HEX}{{12}}",
            "RFC 9562 hyphenated form",
            exact=True,
        ),
        Format("uri-template", _URI_TEMPLATE, "RFC 6570 (level 4), an apostrophe allowed in literals; a variable "
               "name starts with a letter, digit or `_` and a prefix has at most 3 digits (narrower: the "
               "jsonschema checker refuses the others)"),
        Format("json-pointer", _JSON_POINTER, "RFC 6901", exact=True),
        Format(
            "relative-json-pointer",
            f"(?:0|[1-9]+0?)(?:#|{_JSON_POINTER})",
            "draft-handrews-relative-json-pointer; no digit after a 0 in the prefix (`100` refused: the "
            "jsonschema checker rejects it)",
        ),
        Format("regex", _REGEX, "ECMA-262 regexes Python's `re` reads alike, in a regular subset: literals, escapes, "
               "`.`, classes, one quantifier per atom, groups nested at most two deep, alternatives, `^` and `$` "
               "around each (narrower)"),
        Format("int32", None, "OpenAPI: integer in [-2^31, 2^31-1] (numbers only)", (-(2**31), 2**31 - 1)),
        Format("int64", None, "OpenAPI: integer in [-2^63, 2^63-1] (numbers only)", (-(2**63), 2**63 - 1)),
    ]
}


#: Every format name the JSON Schema specification (2020-12 and earlier drafts) defines: one that
#: :data:`FORMATS` lacked would be refused unless ``unsupported_formats="ignore"`` (none does); other names are not
#: formats a validator can check, and are annotations unless ``unknown_formats="error"``.
SPEC_FORMATS = frozenset({
    "date-time", "date", "time", "duration", "email", "idn-email", "hostname", "idn-hostname", "ipv4", "ipv6",
    "uri", "uri-reference", "iri", "iri-reference", "uuid", "uri-template", "json-pointer",
    "relative-json-pointer", "regex",
})  # fmt: skip

#: OpenAPI's number formats that bound nothing a JSON number can write (always annotations).
OPENAPI_NUMBER_FORMATS = frozenset({"float", "double"})


def format_regex(name: str, max_len: int | None = None) -> str:
    """The regex of a string format, narrowed by shape to at most ``max_len`` characters where the
    format's own bound is larger (email, hostname), so that ``maxLength`` is implied by the regex."""
    if name in ("hostname", "idn-hostname") and max_len is not None and max_len < 253:
        return _hostname(max_len)
    if name in ("email", "idn-email") and max_len is not None and max_len < _EMAIL_MAX:
        return _email(max_len)
    return FORMATS[name].regex or ""
