"""JSON Schema's regular expressions (ECMA-262) read by Python's ``re``: a pattern translated, or refused.

An input's ``pattern`` is advertised as the application wrote it, and a JSON
Schema validator matches it as ECMA-262 does, with the ``u`` flag; msgspec
matches it with Python's ``re``, which reads several constructs otherwise
(``$``, ``\\d``, ``\\w``, ``.``). This module owns the translation of such
a pattern into the Python pattern that matches exactly what the advertised
one does, and the refusal of what cannot be translated: syntax only Python
has, syntax an ECMA-262 reader cannot compile (which no validator could
match), and what the two readings match differently (some backreferences, a
surrogate pair's escapes). It deliberately knows nothing of types, schemas or
decoding: :mod:`agentfx.schema` decides where a pattern is matched, and names
a refused one as its schema declares it.
"""

from __future__ import annotations

import dataclasses
import re

__all__ = ["ecma_pattern"]

# ECMA-262's classes, for a regular expression with the ``u`` flag and no
# other, which is how JSON Schema validators read a ``pattern``: ASCII digits
# and word characters, its own list of white space, and four line ends ``.``
# does not match.
_ECMA_CLASSES = {
    "d": "0-9",
    "w": "A-Za-z0-9_",
    "s": "\\t\\n\\v\\f\\r \\u00a0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000\\ufeff",
}
_ECMA_DOT = "(?a:[^\\n\\r\\u2028\\u2029])"
_ECMA_GROUPS = ("(?:", "(?=", "(?!", "(?<=", "(?<!")
_QUANTIFIER = re.compile(r"[*+?]|\{[0-9]+(,[0-9]*)?\}")
# With the ``u`` flag an escaped character stands for itself only if it is
# one of these (and "-" in a class): "\-", "\_" or "\#" do not compile.
_SYNTAX = frozenset("^$\\.*+?()[]{}|/")
_CONTROLS = frozenset("fnrtv")
_HEX_ESCAPE = re.compile(r"\\x[0-9A-Fa-f]{2}|\\u[0-9A-Fa-f]{4}")
_SURROGATE_PAIR = re.compile(r"\\u(D[89AB][0-9A-F]{2})\\u(D[C-F][0-9A-F]{2})", re.IGNORECASE)
_BACKREFERENCE = re.compile(r"\\([0-9]+)")
_LONE = {"{": "a { that opens no quantifier", "}": "a } that closes no quantifier", "]": "a ] that closes no class"}


def ecma_pattern(pattern: str) -> str:
    r"""The Python pattern that matches what ``pattern`` matches as a JSON Schema (ECMA-262) pattern.

    msgspec matches a pattern with Python's ``re``, where ``$`` also matches
    before a final newline, ``\d`` and ``\w`` take every script's digits and
    letters, and ``.`` matches a carriage return; a JSON Schema validator
    matches it as ECMA-262 does (with the ``u`` flag: characters are code
    points, as in a Python ``str``). The constructs the two read alike are
    kept; those they read differently are rewritten to ECMA-262's meaning
    (every rewriting holds ``(?a:`` or ``\Z``, which no accepted pattern
    does). Refused: Python-only syntax, which an ECMA-262 reader rejects or
    reads as something else; syntax an ECMA-262 reader with the ``u`` flag
    cannot compile, such as an escaped character that is not syntax (``\-``
    outside a class, ``\_``, ``\"``), a ``{``, ``}`` or ``]`` that is no
    quantifier or class, or a quantified lookaround; a surrogate pair's
    escapes (``\uD83D\uDE00``, one character to ECMA-262, two lone
    surrogates no text holds to Python: the character itself is taken); and
    a backreference the two readings may match differently (see below).

    The application's own type still matches the pattern as Python reads it,
    so a value is taken only when both readings match. Where Python's reading
    takes more (``$``, ``.``, ``\d``, ``\w``), that is exactly ECMA's; where
    ECMA's takes a character Python's does not, such a value is refused,
    though an ECMA reader takes it: the decoder may be stricter than the
    schema there, never looser. These places are ``\D``, ``\W``, ``\S``,
    ``\s`` with U+FEFF, ``\b`` beside a non-ASCII letter, ``\B`` in an empty
    string (where Python's, before 3.14, never matches), and anything inside
    a negative lookaround (where Python's taking more, as in ``(?!$)``,
    ``(?!.)``, ``(?!\d)`` or ``(?<!\w)``, refuses more).

    A backreference (``\1``) is kept only where both readings give it the
    same text, its group having matched exactly once before it in every
    match that reaches it: the group closed earlier in an alternative the
    backreference is in, neither it nor a group between them is quantified
    or a lookaround, none between holds a ``|``, and the backreference is in
    no lookbehind (which ECMA-262 matches from right to left). Elsewhere
    ECMA-262 clears a group's capture on each new iteration of the
    quantifier around it, and matches the empty string for a group that did
    not take part, where Python keeps the last capture and fails.

    >>> ecma_pattern(r"^[A-Z]{3}-\d{2}$")
    '^[A-Z]{3}-(?a:[0-9]){2}\\Z'
    >>> ecma_pattern(r"^(\d)\1$")
    '^((?a:[0-9]))\\1\\Z'
    >>> ecma_pattern(r"^(?P<x>a)$")
    Traceback (most recent call last):
    ...
    TypeError: the pattern '^(?P<x>a)$' uses (?P, which JSON Schema's regular expressions (ECMA-262) do not have; write it with the syntax both share
    """
    out: list[str] = []
    groups = [_Group()]  # the pattern itself, then each group open where the scan is
    numbered = 0
    repeats: str | None = None  # None where a quantifier may come; else what precedes, which ECMA-262 does not repeat
    i, end = 0, len(pattern)
    while i < end:
        char = pattern[i]
        term = "a character"
        if char == "\\" and pattern[i + 1 : i + 2] in tuple("123456789"):
            token = _backreference(pattern, i, groups)
            out.append(token)
            i += len(token)
        elif char == "\\":
            token, i = _ecma_escape(pattern, i, in_class=False)
            out.append(token)
            if token.startswith("(?a:\\b") or token.startswith("(?a:\\B"):
                term = "an assertion"
        elif char == "[":
            token, i = _ecma_class(pattern, i)
            out.append(token)
        elif char in "^$":
            out.append("^" if char == "^" else "\\Z")
            i += 1
            term = "an assertion"
        elif char == ".":
            out.append(_ECMA_DOT)
            i += 1
        elif char == "(":
            if pattern.startswith("(?", i):
                opening = next((group for group in _ECMA_GROUPS if pattern.startswith(group, i)), None)
                if opening is None:
                    raise _not_ecma(pattern, pattern[i : i + 3])
                groups.append(_Group(around=opening != "(?:", behind=opening.startswith("(?<")))
            else:
                numbered += 1
                opening = "("
                groups.append(_Group(number=numbered))
            out.append(opening)
            i += len(opening)
            term = "nothing"
        elif char == ")":
            if len(groups) == 1:
                raise _not_ecma(pattern, "an unmatched )")
            closed = groups.pop()
            out.append(")")
            i += 1
            _closed(closed, groups[-1], quantified=_QUANTIFIER.match(pattern, i) is not None)
            if closed.around:
                term = "a lookaround"
        elif char == "|":
            groups[-1].alternated = True
            groups[-1].matched.clear()  # what the alternative before matched, this one need not have
            out.append(char)
            i += 1
            term = "nothing"
        elif (quantity := _QUANTIFIER.match(pattern, i)) is not None:
            if repeats is not None:
                raise _not_ecma(pattern, f"a quantifier after {repeats}")
            out.append(quantity.group())
            i = quantity.end()
            if i < end and pattern[i] == "?":
                out.append("?")  # lazy, in both
                i += 1
            elif i < end and pattern[i] == "+":
                raise _not_ecma(pattern, "a possessive quantifier")
            term = "a quantifier"
        elif pattern.startswith("{,", i):
            raise _not_ecma(pattern, "{,")
        elif char in "{}]":
            # Python takes each for itself; with the u flag ECMA-262 compiles
            # none outside a quantifier or class ("x{y}", "a{1, 2}", "a]").
            raise _not_ecma(pattern, _LONE[char])
        else:
            out.append(char)
            i += 1
        repeats = None if term == "a character" else term
    if len(groups) > 1:
        raise _not_ecma(pattern, "an unclosed (")
    return "".join(out)


@dataclasses.dataclass
class _Group:
    """A group open where :func:`ecma_pattern` reads, or the pattern itself: what a backreference in it may name.

    Attributes:
        number: A capturing group's number; ``None`` for any other group.
        around: Whether it is a lookaround (what it captures is not counted on outside it).
        behind: Whether it is a lookbehind, which ECMA-262 matches from right to left.
        alternated: Whether it holds a ``|`` of its own (which alternative matched is unknown outside).
        matched: The capturing groups matched, exactly once, before the scan's place in this group's current alternative.
    """

    number: int | None = None
    around: bool = False
    behind: bool = False
    alternated: bool = False
    matched: set[int] = dataclasses.field(default_factory=set[int])


def _closed(group: _Group, parent: _Group, *, quantified: bool) -> None:
    """Tell ``parent`` which groups are matched exactly once wherever ``group``, just closed, has matched."""
    if quantified or group.around:
        # Repeated, or perhaps not matched: ECMA-262 may clear or never set
        # a capture Python keeps, so no backreference after it may name it.
        return
    if not group.alternated:  # else which alternative's groups matched is unknown
        parent.matched |= group.matched
    if group.number is not None:
        parent.matched.add(group.number)


def _backreference(pattern: str, at: int, groups: list[_Group]) -> str:
    """The backreference at ``pattern[at]``, when both readings give it its group's one capture; else refused."""
    digits = _BACKREFERENCE.match(pattern, at)
    assert digits is not None  # the caller saw a digit after the backslash
    if len(digits.group(1)) > 2:
        # Python reads "\123" as an octal escape and "\128" as group 12 then
        # "8"; ECMA-262 reads either as one group's number.
        raise _not_ecma(pattern, digits.group())
    number = int(digits.group(1))
    if any(group.behind for group in groups):
        raise _read_otherwise(pattern, f"a backreference ({digits.group()}) in a lookbehind")
    if not any(number in group.matched for group in groups):
        raise _read_otherwise(pattern, f"a backreference ({digits.group()}) to a group not matched exactly once before it")
    return digits.group()


def _ecma_escape(pattern: str, at: int, *, in_class: bool) -> tuple[str, int]:
    """The translation of the escape at ``pattern[at]`` and where it ends; a class escape (``\\d``) only outside a class."""
    escaped = pattern[at + 1 : at + 2]
    pair = _SURROGATE_PAIR.match(pattern, at)
    if pair is not None:
        # With the u flag a high then a low surrogate escaped are the one code
        # point they encode; Python's re reads two lone surrogates, which no
        # decoded text holds, so the application's own type would refuse every
        # value the schema promises there.
        point = 0x10000 + ((int(pair.group(1), 16) - 0xD800) << 10) + int(pair.group(2), 16) - 0xDC00
        raise TypeError(
            f"the pattern {pattern!r} uses {pair.group()}, a surrogate pair's escapes, which JSON Schema's regular "
            f"expressions (ECMA-262) read as one character (U+{point:04X}) and Python's re as two lone surrogates; "
            "write the character itself"
        )
    hexed = _HEX_ESCAPE.match(pattern, at)
    if hexed is not None:
        # A lone surrogate is that code point in both, as in a JSON string decoded.
        return hexed.group(), hexed.end()
    if escaped in _ECMA_CLASSES and not in_class:
        return f"(?a:[{_ECMA_CLASSES[escaped]}])", at + 2
    if escaped.lower() in _ECMA_CLASSES and not in_class:
        return f"(?a:[^{_ECMA_CLASSES[escaped.lower()]}])", at + 2
    if escaped in ("b", "B") and not in_class:
        # A word boundary of ASCII word characters, as ECMA's.
        return f"(?a:\\{escaped})", at + 2
    following = pattern[at + 2 : at + 3]
    # "\0" then an ASCII digit is an octal escape in Python, and no syntax in ECMA-262.
    if escaped in _SYNTAX or escaped in _CONTROLS or (escaped == "0" and not ("0" <= following <= "9" and following)):
        return pattern[at : at + 2], at + 2
    if in_class and escaped in ("-", "b"):  # "b" is a backspace in a class, in both
        return pattern[at : at + 2], at + 2
    # Python's own (\A, \Z, \a, \N{...}, \U..., octal), or an escaped character
    # ECMA-262 with the u flag does not compile (\-, \_, \", \é).
    raise _not_ecma(pattern, pattern[at : at + (3 if escaped == "0" else 2)])


def _ecma_class(pattern: str, at: int) -> tuple[str, int]:
    """The translation of the character class opening at ``pattern[at]``, and where it ends."""
    i = at + 1
    negated = pattern.startswith("^", i)
    i += negated
    if pattern.startswith("]", i):
        # Python reads "[]a]" as "]" or "a"; ECMA-262 as a class of nothing then "a]".
        raise _not_ecma(pattern, "a class opening with ]")
    members: list[str] = []
    excluded: list[str] = []  # the classes a negated escape (\D, \W, \S) takes the complement of
    while i < len(pattern) and pattern[i] != "]":
        char = pattern[i]
        if char == "\\":
            escaped = pattern[i + 1 : i + 2]
            if escaped in _ECMA_CLASSES:
                members.append(_ECMA_CLASSES[escaped])
                i += 2
            elif escaped.lower() in _ECMA_CLASSES:
                excluded.append(_ECMA_CLASSES[escaped.lower()])
                i += 2
            else:
                token, i = _ecma_escape(pattern, i, in_class=True)
                members.append(token)
        else:
            # "[" and "^" are themselves in a class in both; escaped, Python warns of neither.
            members.append("\\" + char if char in "[^" else char)
            i += 1
    if i >= len(pattern):
        raise _not_ecma(pattern, "an unclosed [")
    source = pattern[at : i + 1]
    body = "".join(members)
    if not excluded:
        if body == source[1 + negated : -1]:
            return source, i + 1
        return f"(?a:[{'^' if negated else ''}{body}])", i + 1
    # A character no member is, inside every excluded class: what the
    # negated class takes, and what the plain one leaves out. Lookaheads and
    # one class, never an alternation: "(?:[a]|[^0-9])+" could match a run
    # of letters in exponentially many ways, and fail that many times.
    parts = ([f"(?![{body}])"] if body else []) + [f"(?=[{left_out}])" for left_out in excluded[:-1]]
    left = f"{''.join(parts)}[{excluded[-1]}]"
    if negated:
        return f"(?a:{left})", i + 1
    return f"(?a:(?!{left})[\\s\\S])", i + 1


def _not_ecma(pattern: str, construct: str) -> TypeError:
    return TypeError(
        f"the pattern {pattern!r} uses {construct}, which JSON Schema's regular expressions (ECMA-262) do not have; "
        "write it with the syntax both share"
    )


def _read_otherwise(pattern: str, construct: str) -> TypeError:
    return TypeError(
        f"the pattern {pattern!r} uses {construct}, which JSON Schema's regular expressions (ECMA-262) and Python's re "
        "match differently; write it with the syntax both read alike"
    )
