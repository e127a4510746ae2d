"""JSON Schema's regular expressions (ECMA-262) read by Python's ``re``: a pattern translated, or refused.

An input's ``pattern`` is advertised as the application wrote it, and a JSON
Schema validator matches it as ECMA-262 does; msgspec matches it with
Python's ``re``, which reads several constructs otherwise (``$``, ``\\d``,
``\\w``, ``.``). This module owns the translation of such a pattern into the
Python pattern that matches exactly what the advertised one does, the refusal
and the refusal of syntax only Python has. It deliberately knows nothing of
types, schemas or decoding: :mod:`agentfx.schema` decides where a pattern is
matched, and names a refused one as its schema declares it.
"""

from __future__ import annotations

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
_QUANTITY = re.compile(r"\{[0-9]+(,[0-9]*)?\}")


def ecma_pattern(pattern: str) -> str:
    r"""The Python pattern that matches what ``pattern`` matches as a JSON Schema (ECMA-262) pattern.

    msgspec matches a pattern with Python's ``re``, where ``$`` also matches
    before a final newline, ``\d`` and ``\w`` take every script's digits and
    letters, and ``.`` matches a carriage return; a JSON Schema validator
    matches it as ECMA-262 does (with the ``u`` flag: characters are code
    points, as in a Python ``str``). The constructs the two read alike are
    kept; those they read differently are rewritten to ECMA-262's meaning
    (every rewriting holds ``(?a:`` or ``\Z``, which no accepted pattern
    does). Python-only syntax, which an ECMA-262 reader rejects or reads as
    something else, is refused.

    The application's own type still matches the pattern as Python reads it,
    so a value is taken only when both readings match. Where Python's reading
    takes more (``$``, ``.``, ``\d``, ``\w``), that is exactly ECMA's; where
    ECMA's takes a character Python's does not (``\D``, ``\W``, ``\S``, ``\s``
    with U+FEFF, ``\b`` beside a non-ASCII letter), such a value is refused,
    though an ECMA reader takes it: the decoder may be stricter than the
    schema there, never looser.

    >>> ecma_pattern(r"^[A-Z]{3}-\d{2}$")
    '^[A-Z]{3}-(?a:[0-9]){2}\\Z'
    >>> ecma_pattern(r"^(?P<x>a)$")
    Traceback (most recent call last):
    ...
    TypeError: the pattern '^(?P<x>a)$' uses (?P, which JSON Schema's regular expressions (ECMA-262) do not have; write it with the syntax both share
    """
    out: list[str] = []
    i, end = 0, len(pattern)
    while i < end:
        char = pattern[i]
        if char == "\\":
            token = _ecma_escape(pattern, i, in_class=False)
            out.append(token)
            i += 2
        elif char == "[":
            token, i = _ecma_class(pattern, i)
            out.append(token)
        elif char == "$":
            out.append("\\Z")
            i += 1
        elif char == ".":
            out.append(_ECMA_DOT)
            i += 1
        elif char == "(" and pattern.startswith("(?", i):
            group = next((group for group in _ECMA_GROUPS if pattern.startswith(group, i)), None)
            if group is None:
                raise _not_ecma(pattern, pattern[i : i + 3])
            out.append(group)
            i += len(group)
        elif char in "*+?" or (char == "{" and _QUANTITY.match(pattern, i)):
            quantity = _QUANTITY.match(pattern, i) if char == "{" else None
            token = quantity.group() if quantity is not None else char
            out.append(token)
            i += len(token)
            if i < end and pattern[i] == "?":
                out.append("?")  # lazy, in both
                i += 1
            elif i < end and pattern[i] == "+":
                raise _not_ecma(pattern, "a possessive quantifier")
        elif char == "{" and pattern.startswith("{,", i):
            raise _not_ecma(pattern, "{,")
        else:
            out.append(char)
            i += 1
    return "".join(out)


def _ecma_escape(pattern: str, at: int, *, in_class: bool) -> str:
    """The translation of the escape at ``pattern[at]``, outside a character class (inside one, see ``_ecma_class``)."""
    escaped = pattern[at + 1 : at + 2]
    following = pattern[at + 2 : at + 3]
    if escaped in _ECMA_CLASSES:
        return f"(?a:[{_ECMA_CLASSES[escaped]}])"
    if escaped.lower() in _ECMA_CLASSES:
        return f"(?a:[^{_ECMA_CLASSES[escaped.lower()]}])"
    if escaped in ("b", "B") and not in_class:
        # A word boundary of ASCII word characters, as ECMA's.
        return f"(?a:\\{escaped})"
    if escaped in ("A", "Z", "a", "U", "N") or (escaped.isdigit() and following.isdigit()) or (in_class and escaped.isdigit() and escaped != "0"):
        raise _not_ecma(pattern, pattern[at : at + 2])
    return pattern[at : at + 2]


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
            elif escaped.lower() in _ECMA_CLASSES:
                excluded.append(_ECMA_CLASSES[escaped.lower()])
            else:
                members.append(_ecma_escape(pattern, i, in_class=True))
            i += 2
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
