"""Hypothesis strategies for the payloads an agent may send to a capability.

This layer owns one translation: from a capability's input type, as
``msgspec.inspect.type_info`` describes it, to hypothesis strategies of
JSON-like builtins (``dict``, ``list``, ``str``, ``int``, ``float``, ``bool``,
``None``) -- the values an agent puts on the wire. :func:`valid_payloads` draws
payloads the strict input decoder must accept; :func:`invalid_payloads` draws
payloads it must refuse, each labelled with the reason and the JSON path of
the problem.

It mirrors the decoding rule of the contract without importing it: a payload
is an object; unknown keys are refused at every nesting level, the root
Struct's own tag key included; types are strict (``"3"`` is not an int, ``1``
is a float); datetimes, dates, times, durations, UUIDs, decimals and bytes
travel as their JSON strings; object keys are strings; a ``pattern`` holds
when both JSON Schema's reading (ECMA-262, translated by :mod:`agentfx._patterns`,
the one piece of the contract it shares) and Python's match. It deliberately knows
nothing of variants and capabilities beyond their ``input_type`` attribute,
of JSON Schema, or of the runtime.
"""

from __future__ import annotations

import base64
import datetime as dt
import decimal
import math
import re
import uuid
from collections.abc import Callable, Generator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Annotated, Any, Literal, NamedTuple, Protocol, TypeAlias, Union, cast

import msgspec
import msgspec.inspect as mi

try:
    from hypothesis import strategies as st
    from hypothesis.strategies import SearchStrategy
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise ImportError("agentfx.testing needs hypothesis: pip install 'agentfx[testing]'") from exc

from .._patterns import ecma_pattern

__all__ = ["HasInputType", "InvalidPayload", "invalid_payloads", "valid_payloads"]


@dataclass(frozen=True, slots=True)
class InvalidPayload:
    """A payload the input decoder must refuse, and why.

    Attributes:
        payload: The JSON-like value an agent would send.
        reason: The JSON path of the problem (msgspec notation, ``$`` for the
            root) followed by what is wrong there.
    """

    payload: object
    reason: str


class HasInputType(Protocol):
    """Anything carrying the Struct type its payloads decode to: a variant or a capability."""

    @property
    def input_type(self) -> type[Any]: ...


_Kind: TypeAlias = Literal["null", "bool", "int", "float", "str", "array", "object"]
_KINDS: tuple[_Kind, ...] = ("null", "bool", "int", "float", "str", "array", "object")

_Strategy: TypeAlias = SearchStrategy[Any]
_Bad: TypeAlias = SearchStrategy[tuple[object, str]]

# Sizes stay small so properties over nested inputs remain fast.
_MAX_ITEMS = 5
_MAX_TEXT = 20
# Length violations past this many items or characters are skipped: drawing them is slow.
_MAX_VIOLATION_SIZE = 256
# How often a Struct may appear on one path before recursion is cut off.
_MAX_RECURSION = 2
_INT_MIN = -(2**63)
_INT_MAX = 2**63 - 1
_EXACT_FLOAT_INT = 2**53
# Stands for a list index inside a reason until the index is drawn.
_INDEX = "[\ue000]"

_TEXT = st.characters(codec="utf-8")
_KEY_TEXT = st.text(st.characters(min_codepoint=ord("a"), max_codepoint=ord("z")), min_size=1, max_size=8)


class _Unsatisfiable(Exception):
    """No valid value exists here (infeasible constraints or endless recursion)."""


def valid_payloads(target: type[Any] | HasInputType) -> SearchStrategy[dict[str, Any]]:
    """Payloads the strict input decoder of ``target`` accepts.

    Each payload is a ``dict`` of JSON-like builtins keyed by the fields'
    encode names, without the Struct's own tag key. msgspec constraints
    (``Meta`` bounds, ``multiple_of``, lengths, ``pattern``), ``Literal``,
    ``Enum``, unions, nested Structs and collections are honoured.

    Args:
        target: A variant (what ``variant(...)`` or ``action(...)`` returns),
            a capability (an entry of a definition's ``capabilities``), or a
            msgspec Struct type: anything with an ``input_type`` naming the
            Struct its payloads decode to. A direct variant's payload is its
            Message without the tag; a mapped one's is its ``input``.

    Returns:
        A hypothesis strategy of payloads.

    Raises:
        TypeError: ``target`` is not a Struct, or a field has a type that
            cannot travel as JSON (the message names the field).
        ValueError: A required field's constraints admit no value.

    >>> import msgspec
    >>> from typing import Annotated
    >>> from hypothesis import find, settings
    >>> class Rate(msgspec.Struct):
    ...     stars: Annotated[int, msgspec.Meta(ge=1, le=5)]
    >>> find(valid_payloads(Rate), lambda p: True, settings=settings(database=None))
    {'stars': 1}
    """
    return _Deriver(_input_struct(target)).root_valid()


def invalid_payloads(target: type[Any] | HasInputType) -> SearchStrategy[InvalidPayload]:
    """Payloads the strict input decoder of ``target`` refuses, each with its reason.

    Covers non-objects, missing required fields, unknown keys at the root
    (the tag key included) and in nested objects, values of a type outside
    every member of their union, constraint violations, malformed strings
    for datetimes, UUIDs and the like, and unknown tag values.

    Args:
        target: A variant, a capability or a msgspec Struct type, as for
            :func:`valid_payloads`.

    Returns:
        A hypothesis strategy of :class:`InvalidPayload`.

    Raises:
        TypeError: As for :func:`valid_payloads`.

    >>> import msgspec
    >>> from hypothesis import find, settings
    >>> class Ping(msgspec.Struct):
    ...     pass
    >>> find(invalid_payloads(Ping), lambda i: isinstance(i.payload, list), settings=settings(database=None))
    InvalidPayload(payload=[], reason='$: expected an object, got array')
    """
    return _Deriver(_input_struct(target)).root_invalid()


def _input_struct(target: type[Any] | HasInputType) -> mi.StructType:
    cls: object = target if isinstance(target, type) else getattr(target, "input_type", target)
    info = mi.type_info(cls) if isinstance(cls, type) and issubclass(cls, msgspec.Struct) else None
    if not isinstance(info, mi.StructType):
        raise TypeError(f"Payload strategies need a variant, a capability or a msgspec Struct type, got {cls!r}")
    if info.array_like:
        raise TypeError(f"Cannot derive payloads for {info.cls.__qualname__}: array_like Structs are not JSON objects")
    return info


def _is_any(t: mi.Type) -> bool:
    # msgspec decodes a field annotated ``object`` exactly like ``Any``.
    return isinstance(t, mi.CustomType) and t.cls is object


def _kind_of(value: object) -> _Kind:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "int"
    if isinstance(value, float):
        return "float"
    if isinstance(value, str):
        return "str"
    if isinstance(value, list):
        return "array"
    return "object"


def _strategy_of_kind(kind: _Kind) -> _Strategy:
    """Small values of one JSON kind, used where that kind is the wrong one."""
    if kind == "null":
        return st.none()
    if kind == "bool":
        return st.booleans()
    if kind == "int":
        return st.integers(-1000, 1000)
    if kind == "float":
        # A fractional part keeps these out of int fields even when decoding were lax.
        return st.integers(-1000, 1000).map(lambda i: i + 0.5)
    if kind == "str":
        return st.text(_TEXT, max_size=8)
    if kind == "array":
        return st.lists(st.integers(0, 9), max_size=3)
    return st.dictionaries(_KEY_TEXT, st.integers(0, 9), max_size=2)


def _describe(t: mi.Type) -> str:
    if isinstance(t, mi.UnionType):
        return " | ".join(_describe(m) for m in t.types)
    if isinstance(t, mi.LiteralType):
        return "one of " + ", ".join(repr(v) for v in t.values)
    if isinstance(t, mi.EnumType):
        return t.cls.__qualname__
    if isinstance(t, mi.StructType | mi.DataclassType | mi.TypedDictType):
        return f"{t.cls.__qualname__} object"
    if isinstance(t, mi.CustomType):
        return t.cls.__qualname__
    return type(t).__name__.removesuffix("Type").lower()


def _accepts(value: object, tp: object, *, str_keys: bool = False) -> bool:
    try:
        msgspec.convert(value, tp, strict=True, str_keys=str_keys)
    except msgspec.ValidationError:
        return False
    return True


# Key types a field's valid values already spell as a key (once numbers are written as text).
_KEY_TYPES = (
    mi.StrType,
    mi.IntType,
    mi.FloatType,
    mi.DecimalType,
    mi.UUIDType,
    mi.DateTimeType,
    mi.DateType,
    mi.TimeType,
    mi.TimeDeltaType,
    mi.BytesType,
)


def _key_text(value: object) -> str:
    """A valid value as an object key: numbers in their JSON spelling, strings as they are."""
    return value if isinstance(value, str) else msgspec.json.encode(value).decode()


def _mappings(
    key_type: mi.Type, keys: SearchStrategy[str], values: SearchStrategy[Any], min_size: int, max_size: int
) -> SearchStrategy[dict[str, Any]]:
    """Objects of ``min_size`` to ``max_size`` entries whose keys the codec reads as that many keys.

    Two spellings of one key (``"1"`` and ``"1.0"`` of a float, ``"1.0"`` and
    ``"1.00"`` of a decimal) are two keys on the wire but one in the decoded
    mapping, which would then be shorter than drawn: past a ``max_length``
    a payload drawn as too long would decode as valid.
    """
    identity = _key_identity(key_type)
    entries = st.lists(st.tuples(keys, values), min_size=min_size, max_size=max_size, unique_by=lambda entry: identity(entry[0]))
    return entries.map(dict)


def _key_identity(t: mi.Type) -> Callable[[str], object]:
    """What the codec reads an object key as, for keys of type ``t``: the key itself when it is not known.

    >>> read = _key_identity(mi.type_info(float))
    >>> read("1") == read("1.0"), read("x")
    (True, 'x')
    """
    annotation = _key_annotation(t)
    if annotation is None:
        return lambda text: text
    keyed = dict[annotation, int]

    def identity(text: str) -> object:
        try:
            return next(iter(msgspec.convert({text: 0}, keyed, str_keys=True)))
        except msgspec.ValidationError:
            return text

    return identity


def _key_annotation(t: mi.Type) -> object | None:
    """The annotation ``t`` was read from, for the types a mapping key may have; ``None`` for others.

    >>> _key_annotation(mi.type_info(Annotated[int, msgspec.Meta(ge=1)] | uuid.UUID))
    typing.Union[typing.Annotated[int, msgspec.Meta(ge=1)], uuid.UUID]
    """
    if isinstance(t, mi.Metadata):
        return _key_annotation(t.type)
    if isinstance(t, mi.StrType):
        return Annotated[str, msgspec.Meta(min_length=t.min_length, max_length=t.max_length, pattern=t.pattern)]
    if isinstance(t, mi.IntType | mi.FloatType):
        bounds: dict[str, Any] = {"ge": t.ge, "gt": t.gt, "le": t.le, "lt": t.lt, "multiple_of": t.multiple_of}
        number = int if isinstance(t, mi.IntType) else float
        return Annotated[number, msgspec.Meta(**{k: v for k, v in bounds.items() if v is not None})]
    if isinstance(t, mi.BytesType):
        return Annotated[bytes, msgspec.Meta(min_length=t.min_length, max_length=t.max_length)]
    if isinstance(t, mi.DateTimeType | mi.TimeType):
        return Annotated[dt.datetime if isinstance(t, mi.DateTimeType) else dt.time, msgspec.Meta(tz=t.tz)]
    plain: dict[type[mi.Type], object] = {
        mi.DateType: dt.date,
        mi.TimeDeltaType: dt.timedelta,
        mi.UUIDType: uuid.UUID,
        mi.DecimalType: decimal.Decimal,
        mi.NoneType: type(None),
    }
    if type(t) in plain:
        return plain[type(t)]
    if isinstance(t, mi.EnumType):
        return t.cls
    if isinstance(t, mi.LiteralType):
        return cast("Any", Literal)[tuple(t.values)]
    if isinstance(t, mi.UnionType):
        members = [_key_annotation(m) for m in t.types]
        return None if None in members else cast("Any", Union)[tuple(members)]
    return None


def _bad(strategy: _Strategy, reason: str) -> _Bad:
    return strategy.map(lambda v: (v, reason))


def _with_index(reason: str, index: int) -> str:
    head, _, tail = reason.rpartition(_INDEX)
    return f"{head}[{index}]{tail}"


def _int_bounds(t: mi.IntType) -> tuple[int, int]:
    lo = t.ge if t.ge is not None else t.gt + 1 if t.gt is not None else _INT_MIN
    hi = t.le if t.le is not None else t.lt - 1 if t.lt is not None else _INT_MAX
    return max(lo, _INT_MIN), min(hi, _INT_MAX)


def _in_float_bounds(t: mi.FloatType, v: float) -> bool:
    return (
        (t.ge is None or v >= t.ge)
        and (t.gt is None or v > t.gt)
        and (t.le is None or v <= t.le)
        and (t.lt is None or v < t.lt)
    )


def _fixed_dict(required: dict[str, _Strategy], optional: dict[str, _Strategy]) -> SearchStrategy[dict[str, Any]]:
    return st.fixed_dictionaries(required, optional=optional)


_ANY_JSON: SearchStrategy[Any] = st.recursive(
    st.one_of(
        st.none(),
        st.booleans(),
        st.integers(-1000, 1000),
        st.floats(allow_nan=False, allow_infinity=False),
        st.text(_TEXT, max_size=8),
    ),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(_TEXT, max_size=4), inner, max_size=3),
    max_leaves=6,
)
"""Any JSON value, for a field typed ``Any``: every shape such a field takes (a float, an array, an object), small."""

# Malformed strings for types that travel as strings; each is checked against
# msgspec before use, so a candidate that happens to parse is simply dropped.
_MALFORMED: dict[type[mi.Type], tuple[type[Any], tuple[str, ...]]] = {
    mi.DateTimeType: (dt.datetime, ("", "now", "2020-13-01T00:00:00Z", "2020-01-01T25:00:00", "1/2/2020")),
    mi.DateType: (dt.date, ("", "today", "2020-02-30", "2020-1-1", "01/02/2020")),
    mi.TimeType: (dt.time, ("", "noon", "25:00:00", "12:60", "1pm")),
    mi.TimeDeltaType: (dt.timedelta, ("", "P", "1 day", "PT1X", "10s")),
    mi.UUIDType: (uuid.UUID, ("", "not-a-uuid", "1234", "g" * 32)),
    mi.DecimalType: (decimal.Decimal, ("", "one", "1.2.3", "0x10", "1e")),
    mi.BytesType: (bytes, ("!", "abc", "@@@@", "a===")),
    mi.ByteArrayType: (bytearray, ("!", "abc", "@@@@", "a===")),
}
_NOT_MATCHING = ("", "a", "Z", "0", "9", " ", "_", "-", ".", "!", "aa", "a0", "0a", "é", "\n", "A-Z", "xyz_123")


# A pattern read piece by piece: one character (a class, an escape, "." or a
# plain character), then an optional greedy quantifier. Anything else (groups,
# alternation, lazy quantifiers, word boundaries, inline flags) is not read.
_PATTERN_PIECE = re.compile(
    r"(\[\^?\]?(?:\\.|[^\]\\])*\]|\\[dDwWsSnrtfv]|\\x[0-9a-fA-F]{2}|\\u[0-9a-fA-F]{4}|\\[^0-9A-Za-z]|\.|[^\\\[\](){}|*+?^$.])"
    r"([*+?]|\{\d+(?:,\d*)?\})?"
)


class _Piece(NamedTuple):
    """One character of a pattern repeated ``low`` to ``high`` (``None``: unbounded) times."""

    atom: str
    low: int
    high: int | None


def _pieces(pattern: str) -> tuple[str, list[_Piece], str] | None:
    """``pattern`` as its start anchor, its pieces and its end anchor, or ``None`` when it is not that simple.

    >>> _pieces("^[a-z][a-z0-9-]*$")
    ('^', [_Piece(atom='[a-z]', low=1, high=1), _Piece(atom='[a-z0-9-]', low=0, high=None)], '$')
    >>> _pieces("(ab)+") is None
    True
    """
    start = next((a for a in ("^", "\\A") if pattern.startswith(a)), "")
    position, pieces = len(start), list[_Piece]()
    while position < len(pattern):
        if pattern[position:] in ("$", "\\Z"):
            return start, pieces, pattern[position:]
        piece = _PATTERN_PIECE.match(pattern, position)
        if piece is None:
            return None
        atom, quantifier = piece.group(1), piece.group(2)
        if quantifier is None:
            low, high = 1, 1
        elif quantifier in ("*", "+", "?"):
            low, high = {"*": (0, None), "+": (1, None), "?": (0, 1)}[quantifier]
        else:
            first, comma, last = quantifier[1:-1].partition(",")
            low = int(first)
            high = low if not comma else int(last) if last else None
            if high is not None and high < low:
                return None
        pieces.append(_Piece(atom, low, high))
        position = piece.end()
    return start, pieces, ""


def _matching_of_length(pattern: str, min_size: int, max_size: int | None) -> SearchStrategy[str] | str | None:
    """Strings matching ``pattern`` (anywhere) with a length in bounds, drawn without filtering.

    Each piece is read as JSON Schema (ECMA-262) reads it, as the decoder
    matches it too (``\\d`` takes ASCII digits only, ``$`` is the end of
    the text), so a string drawn here is one the advertised schema allows.

    Each piece's repetitions are narrowed so that the whole match has a
    length in bounds; a match that cannot reach ``min_size`` is padded with
    any text on a side the pattern does not anchor. Returns ``None`` for a
    pattern too complex to read this way, and ``""`` when no string of such a
    length matches. Several unbounded pieces may still overshoot ``max_size``
    together, which the caller's length check catches.

    >>> _matching_of_length("^[0-9]+$", 8, 8)
    from_regex('^[0-9]{8,8}$', fullmatch=True, alphabet=characters(codec='utf-8'))
    >>> _matching_of_length("^[0-9]{3}$", 5, None)
    ''
    """
    read = _pieces(pattern)
    if read is None:
        return None
    start, pieces, end = read
    shortest = sum(p.low for p in pieces)
    if max_size is not None and shortest > max_size:
        return ""  # every match is longer, and a matching string holds one
    lows: list[int] = []
    missing = max(min_size - shortest, 0)
    for p in pieces:
        grow = missing if p.high is None else min(missing, p.high - p.low)
        lows.append(p.low + grow)
        missing -= grow
    total = sum(lows)
    narrowed: list[str] = []
    for p, low in zip(pieces, lows, strict=True):
        high = p.high
        if max_size is not None:
            # The other pieces take at least their share; this one may have the rest.
            room = max_size - (total - low)
            high = room if high is None else min(high, room)
        narrowed.append(f"{ecma_pattern(p.atom)}{{{low},{'' if high is None else high}}}")
    matches = st.from_regex(start + "".join(narrowed) + end, fullmatch=True, alphabet=_TEXT)
    if not missing:
        return matches
    # Even the longest match is too short: text beside it keeps the string a
    # match, where the pattern does not anchor that side. (Python's "$" also
    # matches before a final newline; JSON Schema's, and the decoder's, do not.)
    if start and end:
        return ""
    upper = max_size if max_size is not None else min_size + _MAX_TEXT
    return matches.flatmap(_padded(min_size, upper, before=not start, after=not end))


def _padded(min_size: int, max_size: int, *, before: bool, after: bool) -> Callable[[str], SearchStrategy[str]]:
    """Pad a match with any text, before and/or after it, to a length in ``[min_size, max_size]``."""

    def pad(match: str) -> SearchStrategy[str]:
        def around(extra: int) -> SearchStrategy[str]:
            head = st.integers(0, extra) if before and after else st.just(extra if before else 0)
            return head.flatmap(
                lambda n: st.tuples(_text_of_length(n), _text_of_length(extra - n)).map(lambda ht: ht[0] + match + ht[1])
            )

        return st.integers(min_size - len(match), max_size - len(match)).flatmap(around)

    return pad


class _Deriver:
    """Builds the strategies for one root Struct, tracking recursion and field names."""

    def __init__(self, root: mi.StructType) -> None:
        self._root = root
        self._stack: list[type[Any]] = []
        self._field = root.cls.__qualname__

    # -- shared ------------------------------------------------------------

    def _unsupported(self, what: str) -> TypeError:
        return TypeError(f"Cannot derive payloads for {self._field}: {what} is not supported")

    @contextmanager
    def _entering(self, cls: type[Any]) -> Generator[None]:
        if self._stack.count(cls) >= _MAX_RECURSION:
            raise _Unsatisfiable(f"{cls.__qualname__} nests itself with no way to stop")
        self._stack.append(cls)
        try:
            yield
        finally:
            self._stack.pop()

    @contextmanager
    def _in_field(self, label: str) -> Generator[None]:
        outer, self._field = self._field, label
        try:
            yield
        finally:
            self._field = outer

    def _optional_valid(self, t: mi.Type) -> _Strategy | None:
        try:
            return self.valid(t)
        except _Unsatisfiable:
            return None

    def accepted(self, t: mi.Type) -> frozenset[_Kind]:
        """The JSON kinds a decoder of ``t`` looks at (not that every such value is valid)."""
        if _is_any(t):
            t = mi.AnyType()
        if isinstance(t, mi.Metadata):
            return self.accepted(t.type)
        if isinstance(t, mi.AnyType):
            return frozenset(_KINDS)
        if isinstance(t, mi.NoneType):
            return frozenset({"null"})
        if isinstance(t, mi.BoolType):
            return frozenset({"bool"})
        if isinstance(t, mi.IntType):
            return frozenset({"int"})
        if isinstance(t, mi.FloatType):
            return frozenset({"int", "float"})
        if isinstance(t, mi.DecimalType):
            return frozenset({"int", "float", "str"})
        if isinstance(
            t,
            mi.StrType | mi.BytesType | mi.ByteArrayType | mi.DateTimeType | mi.DateType | mi.TimeType | mi.TimeDeltaType | mi.UUIDType,
        ):
            return frozenset({"str"})
        if isinstance(t, mi.EnumType):
            return frozenset(_kind_of(m.value) for m in t.cls)
        if isinstance(t, mi.LiteralType):
            return frozenset(_kind_of(v) for v in t.values)
        if isinstance(t, mi.StructType | mi.DataclassType | mi.TypedDictType | mi.DictType):
            return frozenset({"object"})
        if isinstance(t, mi.CollectionType | mi.TupleType | mi.NamedTupleType):
            return frozenset({"array"})
        if isinstance(t, mi.UnionType):
            return frozenset[_Kind]().union(*(self.accepted(m) for m in t.types))
        raise self._unsupported(f"the type {_describe(t)}")

    # -- valid ---------------------------------------------------------------

    def root_valid(self) -> SearchStrategy[dict[str, Any]]:
        try:
            return self._object_valid(self._root, root=True)
        except _Unsatisfiable as exc:
            raise ValueError(f"No valid payload exists for {self._root.cls.__qualname__}: {exc}") from None

    def valid(self, t: mi.Type) -> _Strategy:
        """Valid values of ``t``; raises ``_Unsatisfiable`` when there are none."""
        if _is_any(t):
            t = mi.AnyType()
        if isinstance(t, mi.Metadata):
            return self.valid(t.type)
        if isinstance(t, mi.AnyType):
            return _ANY_JSON
        if isinstance(t, mi.NoneType):
            return st.none()
        if isinstance(t, mi.BoolType):
            return st.booleans()
        if isinstance(t, mi.IntType):
            return self._int_valid(t)
        if isinstance(t, mi.FloatType):
            return self._float_valid(t)
        if isinstance(t, mi.StrType):
            return self._str_valid(t)
        if isinstance(t, mi.BytesType | mi.ByteArrayType):
            return st.binary(min_size=t.min_length or 0, max_size=self._cap(t.min_length, t.max_length, _MAX_TEXT)).map(
                lambda b: base64.b64encode(b).decode()
            )
        if isinstance(t, mi.DateTimeType):
            return st.datetimes(timezones=self._timezones(t.tz)).map(msgspec.to_builtins)
        if isinstance(t, mi.TimeType):
            return st.times(timezones=self._timezones(t.tz)).map(msgspec.to_builtins)
        if isinstance(t, mi.DateType):
            return st.dates().map(msgspec.to_builtins)
        if isinstance(t, mi.TimeDeltaType):
            return st.timedeltas(dt.timedelta(days=-1000), dt.timedelta(days=1000)).map(msgspec.to_builtins)
        if isinstance(t, mi.UUIDType):
            return st.uuids().map(str)
        if isinstance(t, mi.DecimalType):
            return st.decimals(allow_nan=False, allow_infinity=False, places=4, min_value=-(10**9), max_value=10**9).map(str)
        if isinstance(t, mi.EnumType):
            values = [m.value for m in t.cls]
            if not values:
                raise _Unsatisfiable(f"{t.cls.__qualname__} has no members")
            return st.sampled_from(values)
        if isinstance(t, mi.LiteralType):
            return st.sampled_from(t.values)
        if isinstance(t, mi.StructType | mi.DataclassType | mi.TypedDictType):
            return self._object_valid(t, root=False)
        if isinstance(t, mi.CollectionType):
            # Sets advertise uniqueItems, so their payloads repeat nothing.
            unique = isinstance(t, mi.SetType | mi.FrozenSetType)
            return self._items_valid(t.item_type, t.min_length, t.max_length, unique=unique)
        if isinstance(t, mi.TupleType):
            return st.tuples(*(self.valid(i) for i in t.item_types)).map(list)
        if isinstance(t, mi.NamedTupleType):
            return st.tuples(*(self.valid(f.type) for f in t.fields)).map(list)
        if isinstance(t, mi.DictType):
            return self._dict_valid(t)
        if isinstance(t, mi.UnionType):
            members = [s for s in (self._optional_valid(m) for m in t.types) if s is not None]
            if not members:
                raise _Unsatisfiable(f"no member of {_describe(t)} has a valid value")
            return st.one_of(*members)
        raise self._unsupported(f"the type {_describe(t)}")

    @staticmethod
    def _cap(min_length: int | None, max_length: int | None, default: int) -> int:
        upper = max(min_length or 0, default)
        return upper if max_length is None else min(max_length, upper)

    @staticmethod
    def _timezones(tz: bool | None) -> SearchStrategy[dt.tzinfo | None]:
        # Whole-minute fixed offsets: exactly what an ISO 8601 string can carry.
        aware = st.integers(-(24 * 60 - 1), 24 * 60 - 1).map(lambda m: dt.timezone(dt.timedelta(minutes=m)))
        if tz is None:
            return st.one_of(st.none(), aware)
        return aware if tz else st.none()

    def _int_valid(self, t: mi.IntType) -> _Strategy:
        lo, hi = _int_bounds(t)
        m = t.multiple_of
        if m is None:
            if lo > hi:
                raise _Unsatisfiable(f"no int lies within the bounds of {self._field}")
            return st.integers(lo, hi)
        k_lo, k_hi = -((-lo) // m), hi // m
        if k_lo > k_hi:
            raise _Unsatisfiable(f"no multiple of {m} lies within the bounds of {self._field}")
        return st.integers(k_lo, k_hi).map(lambda k: k * m)

    def _float_valid(self, t: mi.FloatType) -> _Strategy:
        lo = t.ge if t.ge is not None else t.gt
        hi = t.le if t.le is not None else t.lt
        if t.multiple_of is not None:
            candidates = self._float_multiples(t, lo, hi)
            if not candidates:
                raise _Unsatisfiable(f"no multiple of {t.multiple_of} lies within the bounds of {self._field}")
            return st.sampled_from(candidates)
        if lo is not None and hi is not None and (lo > hi or (lo == hi and (t.gt is not None or t.lt is not None))):
            raise _Unsatisfiable(f"no float lies within the bounds of {self._field}")
        floats = st.floats(
            min_value=lo,
            max_value=hi,
            exclude_min=t.gt is not None,
            exclude_max=t.lt is not None,
            allow_nan=False,
            allow_infinity=False,
        )
        # Agents send whole numbers for float fields too; the decoder accepts them.
        i_lo = -_EXACT_FLOAT_INT if lo is None else max(math.floor(lo) + 1 if t.gt is not None else math.ceil(lo), -_EXACT_FLOAT_INT)
        i_hi = _EXACT_FLOAT_INT if hi is None else min(math.ceil(hi) - 1 if t.lt is not None else math.floor(hi), _EXACT_FLOAT_INT)
        return st.one_of(floats, st.integers(i_lo, i_hi)) if i_lo <= i_hi else floats

    @staticmethod
    def _float_multiples(t: mi.FloatType, lo: float | None, hi: float | None) -> list[float]:
        m = t.multiple_of
        assert m is not None
        if lo is not None and hi is not None and lo > hi:
            return []
        k_lo = math.ceil(lo / m) if lo is not None else -20
        k_hi = math.floor(hi / m) if hi is not None else 20
        if lo is not None and hi is None:
            k_hi = k_lo + 40
        elif hi is not None and lo is None:
            k_lo = k_hi - 40
        # Rounding decides whether k * m passes msgspec's check, so ask msgspec.
        multiple = Annotated[float, msgspec.Meta(multiple_of=m)]
        values = (k * m for k in range(k_lo, min(k_hi, k_lo + 40) + 1))
        return [v for v in values if math.isfinite(v) and _in_float_bounds(t, v) and _accepts(v, multiple)]

    def _str_valid(self, t: mi.StrType) -> _Strategy:
        min_size = t.min_length or 0
        max_size = self._cap(t.min_length, t.max_length, _MAX_TEXT)
        if min_size > max_size:
            raise _Unsatisfiable(f"no string length fits the bounds of {self._field}")
        if t.pattern is None:
            return st.text(_TEXT, min_size=min_size, max_size=max_size)
        upper = t.max_length
        matching = _matching_of_length(t.pattern, min_size, upper)
        if matching is None:
            matching = st.from_regex(ecma_pattern(t.pattern), fullmatch=True, alphabet=_TEXT)
        elif isinstance(matching, str):
            raise _Unsatisfiable(f"no string of a length within the bounds of {self._field} matches {t.pattern!r}")
        # The decoder takes a string only when both readings of the pattern
        # match it: drawn by ECMA-262's, it is kept when Python's matches too
        # (they differ only where ECMA's takes more: \D, \S, \W, U+FEFF as
        # white space). The length check is exact for the patterns
        # _matching_of_length reads; a safety net, and the only length rule,
        # for the others.
        python = re.compile(t.pattern)
        return matching.filter(
            lambda s: len(s) >= min_size and (upper is None or len(s) <= upper) and python.search(s) is not None
        )

    def _items_valid(self, item: mi.Type, min_length: int | None, max_length: int | None, *, unique: bool) -> _Strategy:
        min_size = min_length or 0
        max_size = self._cap(min_length, max_length, _MAX_ITEMS)
        if min_size > max_size:
            raise _Unsatisfiable(f"no length fits the bounds of {self._field}")
        try:
            items = self.valid(item)
        except _Unsatisfiable:
            if min_size:
                raise
            return st.just([])
        return st.lists(items, min_size=min_size, max_size=max_size, unique_by=_json_identity if unique else None)

    def _key_valid(self, t: mi.Type) -> SearchStrategy[str]:
        """Object keys are strings on the wire; msgspec parses them into the key type."""
        if isinstance(t, mi.Metadata):
            return self._key_valid(t.type)
        if isinstance(t, _KEY_TYPES):
            # The same values as a field's, spelled as keys: numbers as JSON writes them.
            return self.valid(t).map(_key_text)
        if isinstance(t, mi.EnumType | mi.LiteralType) and self.accepted(t) <= {"str", "int"}:
            return self.valid(t).map(str)
        if isinstance(t, mi.UnionType):
            return self._union_key_valid(t)
        raise self._unsupported(f"a dict keyed by {_describe(t)}")

    def _union_key_valid(self, t: mi.UnionType) -> SearchStrategy[str]:
        """Keys of the members, kept when the union takes them: a member may claim another's spelling."""
        annotation = _key_annotation(t)
        if annotation is None:
            raise self._unsupported(f"a dict keyed by {_describe(t)}")
        # msgspec reads every key as the str member when there is one.
        text = [m for m in t.types if isinstance(m, mi.StrType)]
        members: list[SearchStrategy[str]] = []
        for member in text or t.types:
            try:
                members.append(self._key_valid(member))
            except (TypeError, _Unsatisfiable):
                continue  # no key is read as this member (None, say): the others may still be
        if not members:
            raise self._unsupported(f"a dict keyed by {_describe(t)}")
        keyed = dict[annotation, int]
        return st.one_of(*members).filter(lambda key: _accepts({key: 0}, keyed, str_keys=True))

    def _dict_valid(self, t: mi.DictType) -> _Strategy:
        keys = self._key_valid(t.key_type)
        min_size = t.min_length or 0
        max_size = self._cap(t.min_length, t.max_length, _MAX_ITEMS)
        if min_size > max_size:
            raise _Unsatisfiable(f"no size fits the bounds of {self._field}")
        try:
            values = self.valid(t.value_type)
        except _Unsatisfiable:
            if min_size:
                raise
            return st.just({})
        return _mappings(t.key_type, keys, values, min_size, max_size)

    def _fields(
        self, t: mi.StructType | mi.DataclassType | mi.TypedDictType
    ) -> tuple[dict[str, _Strategy], dict[str, _Strategy]]:
        """Valid strategies of the required and the optional fields, by encode name."""
        required: dict[str, _Strategy] = {}
        optional: dict[str, _Strategy] = {}
        for f in t.fields:
            with self._in_field(f"{t.cls.__qualname__}.{f.name}"):
                if f.required:
                    required[f.encode_name] = self.valid(f.type)
                else:
                    strategy = self._optional_valid(f.type)
                    if strategy is not None:
                        optional[f.encode_name] = strategy
        return required, optional

    def _tag(self, t: mi.Type, root: bool) -> tuple[str, str | int] | None:
        if root or not isinstance(t, mi.StructType) or t.tag_field is None or t.tag is None:
            return None
        return t.tag_field, t.tag

    def _object_valid(self, t: mi.StructType | mi.DataclassType | mi.TypedDictType, *, root: bool) -> SearchStrategy[dict[str, Any]]:
        if isinstance(t, mi.StructType) and t.array_like:
            raise self._unsupported(f"the array_like Struct {t.cls.__qualname__}")
        with self._entering(t.cls):
            required, optional = self._fields(t)
        tag = self._tag(t, root)
        if tag is not None:
            # A nested tagged Struct carries its tag: a union needs it to pick the member.
            required[tag[0]] = st.just(tag[1])
        return _fixed_dict(required, optional)

    # -- invalid ---------------------------------------------------------------
    #
    # Invalid values are built as parts: the JSON kind shared by every value of
    # the part, and its strategy. A union keeps only the parts of a kind that
    # no other member takes, which it decides without drawing anything.

    def root_invalid(self) -> SearchStrategy[InvalidPayload]:
        parts = [_wrong_kind(kind, "$", "an object") for kind in _KINDS if kind != "object"]
        try:
            parts += self._object_invalid(self._root, "$", root=True, other_tags=frozenset())
        except _Unsatisfiable:
            pass
        return _combine(parts).map(lambda pair: InvalidPayload(pair[0], pair[1]))

    def invalid(self, t: mi.Type, path: str) -> list[_Part]:
        """Invalid values of ``t`` at ``path``, by kind; empty when ``t`` takes anything."""
        if _is_any(t):
            t = mi.AnyType()
        if isinstance(t, mi.Metadata):
            return self.invalid(t.type, path)
        if isinstance(t, mi.AnyType):
            return []
        accepted = self.accepted(t)
        parts = [_wrong_kind(kind, path, _describe(t)) for kind in _KINDS if kind not in accepted]
        if isinstance(t, mi.UnionType):
            return parts + self._union_invalid(t, path)
        return parts + self._same_kind_invalid(t, path)

    def _same_kind_invalid(self, t: mi.Type, path: str) -> list[_Part]:
        """Values of a kind ``t`` accepts that still break it."""
        if isinstance(t, mi.IntType):
            return self._int_invalid(t, path)
        if isinstance(t, mi.FloatType):
            return self._float_invalid(t, path)
        if isinstance(t, mi.StrType):
            return self._str_invalid(t, path)
        if isinstance(t, mi.EnumType | mi.LiteralType):
            return self._choice_invalid(t, path)
        if isinstance(t, mi.DateTimeType | mi.TimeType):
            return self._temporal_invalid(t, path)
        if isinstance(t, mi.BytesType | mi.ByteArrayType):
            return self._malformed(t, path) + self._bytes_length_invalid(t, path)
        if isinstance(t, mi.DateType | mi.TimeDeltaType | mi.UUIDType | mi.DecimalType):
            return self._malformed(t, path)
        if isinstance(t, mi.StructType | mi.DataclassType | mi.TypedDictType):
            return self._nested_object_invalid(t, path, frozenset())
        if isinstance(t, mi.CollectionType):
            unique = isinstance(t, mi.SetType | mi.FrozenSetType)
            return self._items_invalid(t.item_type, t.min_length, t.max_length, path, unique=unique)
        if isinstance(t, mi.TupleType):
            return self._tuple_invalid(list(t.item_types), path)
        if isinstance(t, mi.NamedTupleType):
            return self._tuple_invalid([f.type for f in t.fields], path)
        if isinstance(t, mi.DictType):
            return self._dict_invalid(t, path)
        return []

    def _int_invalid(self, t: mi.IntType, path: str) -> list[_Part]:
        parts: list[_Part] = []
        lo, hi = _int_bounds(t)
        if (t.ge is not None or t.gt is not None) and lo - 1 >= _INT_MIN:
            bound = f"ge={t.ge}" if t.ge is not None else f"gt={t.gt}"
            parts.append(_Part("int", _bad(st.integers(max(lo - 100, _INT_MIN), lo - 1), f"{path}: below the minimum ({bound})")))
        if (t.le is not None or t.lt is not None) and hi + 1 <= _INT_MAX:
            bound = f"le={t.le}" if t.le is not None else f"lt={t.lt}"
            parts.append(_Part("int", _bad(st.integers(hi + 1, min(hi + 100, _INT_MAX)), f"{path}: above the maximum ({bound})")))
        m = t.multiple_of
        if m is not None and m > 1:
            k_lo, k_hi = max(lo // m, -1000), min(hi // m, 1000)
            if k_lo <= k_hi:
                off = st.tuples(st.integers(k_lo, k_hi), st.integers(1, m - 1)).map(lambda kr: kr[0] * m + kr[1])
                parts.append(_Part("int", _bad(off, f"{path}: not a multiple of {m}")))
        return parts

    def _float_invalid(self, t: mi.FloatType, path: str) -> list[_Part]:
        bounds: list[_Bad] = []
        if t.ge is not None and math.isfinite(t.ge):
            below = st.floats(max_value=t.ge, exclude_max=True, allow_nan=False, allow_infinity=False)
            bounds.append(_bad(below, f"{path}: below the minimum (ge={t.ge})"))
        if t.gt is not None and math.isfinite(t.gt):
            at_most = st.floats(max_value=t.gt, allow_nan=False, allow_infinity=False)
            bounds.append(_bad(at_most, f"{path}: not above the bound (gt={t.gt})"))
        if t.le is not None and math.isfinite(t.le):
            above = st.floats(min_value=t.le, exclude_min=True, allow_nan=False, allow_infinity=False)
            bounds.append(_bad(above, f"{path}: above the maximum (le={t.le})"))
        if t.lt is not None and math.isfinite(t.lt):
            at_least = st.floats(min_value=t.lt, allow_nan=False, allow_infinity=False)
            bounds.append(_bad(at_least, f"{path}: not below the bound (lt={t.lt})"))
        m = t.multiple_of
        if m is not None:
            only_multiple = Annotated[float, msgspec.Meta(multiple_of=m)]
            halves = ((k + 0.5) * m for k in range(-3, 4))
            off = [v for v in halves if math.isfinite(v) and not _accepts(v, only_multiple)]
            if off:
                bounds.append(_bad(st.sampled_from(off), f"{path}: not a multiple of {m}"))
        return [_Part("float", b) for b in bounds]

    def _str_invalid(self, t: mi.StrType, path: str) -> list[_Part]:
        parts: list[_Part] = []
        if t.min_length:
            parts.append(_Part("str", _bad(_text_of_length(t.min_length - 1), f"{path}: shorter than min_length={t.min_length}")))
        if t.max_length is not None and t.max_length < _MAX_VIOLATION_SIZE:
            parts.append(_Part("str", _bad(_text_of_length(t.max_length + 1), f"{path}: longer than max_length={t.max_length}")))
        if t.pattern is not None:
            compiled = re.compile(t.pattern)
            # A pattern every candidate matches (".*") has no cheap counterexample: skip it.
            misses = [s for s in _NOT_MATCHING if compiled.search(s) is None]
            if misses:
                parts.append(_Part("str", _bad(st.sampled_from(misses), f"{path}: does not match the pattern {t.pattern!r}")))
        return parts

    def _choice_invalid(self, t: mi.EnumType | mi.LiteralType, path: str) -> list[_Part]:
        values: list[object] = [m.value for m in t.cls] if isinstance(t, mi.EnumType) else list(t.values)
        reason = f"{path}: not {_describe(t)}"
        parts: list[_Part] = []
        strings = {v for v in values if isinstance(v, str)}
        if strings:
            parts.append(_Part("str", _bad(st.text(_TEXT, max_size=8).filter(lambda s: s not in strings), reason)))
        ints = {v for v in values if isinstance(v, int) and not isinstance(v, bool)}
        if ints:
            parts.append(_Part("int", _bad(st.integers(-1000, 1000).filter(lambda i: i not in ints), reason)))
        if any(isinstance(v, bool) for v in values):
            others = [b for b in (False, True) if not any(v is b for v in values)]
            if others:
                parts.append(_Part("bool", _bad(st.sampled_from(others), reason)))
        return parts

    def _malformed(self, t: mi.Type, path: str) -> list[_Part]:
        python_type, candidates = _MALFORMED[type(t)]
        bad = [c for c in candidates if not _accepts(c, python_type)]
        return [_Part("str", _bad(st.sampled_from(bad), f"{path}: not a valid {_describe(t)} string"))] if bad else []

    def _temporal_invalid(self, t: mi.DateTimeType | mi.TimeType, path: str) -> list[_Part]:
        parts = self._malformed(t, path)
        if t.tz is not None:
            wrong = mi.DateTimeType(tz=not t.tz) if isinstance(t, mi.DateTimeType) else mi.TimeType(tz=not t.tz)
            why = "has no timezone but needs one" if t.tz else "has a timezone but must be naive"
            parts.append(_Part("str", _bad(self.valid(wrong), f"{path}: {_describe(t)} {why}")))
        return parts

    def _bytes_length_invalid(self, t: mi.BytesType | mi.ByteArrayType, path: str) -> list[_Part]:
        parts: list[_Part] = []
        if t.min_length:
            parts.append(_Part("str", _bad(_base64_of_length(t.min_length - 1), f"{path}: shorter than min_length={t.min_length}")))
        if t.max_length is not None and t.max_length < _MAX_VIOLATION_SIZE:
            parts.append(_Part("str", _bad(_base64_of_length(t.max_length + 1), f"{path}: longer than max_length={t.max_length}")))
        return parts

    def _items_invalid(
        self, item: mi.Type, min_length: int | None, max_length: int | None, path: str, *, unique: bool
    ) -> list[_Part]:
        parts: list[_Part] = []
        try:
            items = self.valid(item)
        except _Unsatisfiable:
            return parts
        bad_items = self.invalid(item, path + _INDEX)
        if bad_items:
            # The other items keep the length within bounds once the bad one joins them,
            # so the bad item is the only problem.
            low = max((min_length or 0) - 1, 0)
            high = max(self._cap(min_length, max_length, _MAX_ITEMS) - 1, low)
            others = st.lists(items, min_size=low, max_size=high, unique_by=_json_identity if unique else None)
            bad = _combine(bad_items)
            parts.append(_Part("array", st.tuples(others, bad, st.integers(0, _MAX_ITEMS)).map(_insert_item)))
        if min_length:
            short = st.lists(items, min_size=min_length - 1, max_size=min_length - 1)
            parts.append(_Part("array", _bad(short, f"{path}: fewer than min_length={min_length} items")))
        if max_length is not None and max_length < _MAX_VIOLATION_SIZE:
            long = st.lists(items, min_size=max_length + 1, max_size=max_length + 1)
            parts.append(_Part("array", _bad(long, f"{path}: more than max_length={max_length} items")))
        return parts

    def _tuple_invalid(self, items: list[mi.Type], path: str) -> list[_Part]:
        try:
            whole = st.tuples(*(self.valid(i) for i in items)).map(list)
        except _Unsatisfiable:
            return []
        n = len(items)
        parts: list[_Part] = [_Part("array", _bad(whole.map(_append_zero), f"{path}: expected {n} items, got {n + 1}"))]
        if n:
            parts.append(_Part("array", _bad(whole.map(_drop_last), f"{path}: expected {n} items, got {n - 1}")))
        for i, item in enumerate(items):
            bad = self.invalid(item, f"{path}[{i}]")
            if bad:
                parts.append(_Part("array", st.tuples(whole, _combine(bad)).map(_replace_item(i))))
        return parts

    def _dict_invalid(self, t: mi.DictType, path: str) -> list[_Part]:
        parts: list[_Part] = []
        keys = self._key_valid(t.key_type)
        try:
            values = self.valid(t.value_type)
        except _Unsatisfiable:
            return parts
        min_length, max_length = t.min_length, t.max_length
        low = max((min_length or 0) - 1, 0)
        high = max(self._cap(min_length, max_length, _MAX_ITEMS) - 1, low)
        others = _mappings(t.key_type, keys, values, low, high)
        bad_values = self.invalid(t.value_type, f"{path}[...]")
        if bad_values:
            bad = _combine(bad_values)
            parts.append(_Part("object", st.tuples(others, keys, bad).map(_set_entry)))
        bad_keys = self._key_invalid(t.key_type, f"{path} key")
        if bad_keys is not None:
            parts.append(_Part("object", st.tuples(others, bad_keys, values).map(_set_key)))
        if min_length:
            short = _mappings(t.key_type, keys, values, min_length - 1, min_length - 1)
            parts.append(_Part("object", _bad(short, f"{path}: fewer than min_length={min_length} entries")))
        if max_length is not None and max_length < _MAX_VIOLATION_SIZE:
            long = _mappings(t.key_type, keys, values, max_length + 1, max_length + 1)
            parts.append(_Part("object", _bad(long, f"{path}: more than max_length={max_length} entries")))
        return parts

    def _key_invalid(self, t: mi.Type, path: str) -> _Bad | None:
        """Strings that do not parse as the key type (object keys are always strings)."""
        if isinstance(t, mi.Metadata):
            return self._key_invalid(t.type, path)
        if isinstance(t, mi.StrType):
            strings = [p.bad for p in self._str_invalid(t, path) if p.kind == "str"]
            return st.one_of(*strings) if strings else None
        if isinstance(t, mi.IntType):
            numbers = [p.bad.map(_stringify_value) for p in self._int_invalid(t, path)]
            return st.one_of(_bad(st.sampled_from(["x", "1.5", "", "one"]), f"{path}: not an integer"), *numbers)
        if isinstance(t, mi.FloatType):
            numbers = [p.bad.map(_stringify_value) for p in self._float_invalid(t, path)]
            return st.one_of(_bad(st.sampled_from(["x", "", "one", "1.2.3"]), f"{path}: not a number"), *numbers)
        if isinstance(t, mi.EnumType | mi.LiteralType):
            allowed = {str(v) for v in (m.value for m in t.cls)} if isinstance(t, mi.EnumType) else {str(v) for v in t.values}
            return _bad(_KEY_TEXT.filter(lambda k: k not in allowed), f"{path}: not {_describe(t)}")
        strings = [p.bad for p in self._same_kind_invalid(t, path) if p.kind == "str"]
        return st.one_of(*strings) if strings else None

    def _union_invalid(self, t: mi.UnionType, path: str) -> list[_Part]:
        owners: dict[_Kind, list[mi.Type]] = {}
        for member in t.types:
            for kind in self.accepted(member):
                owners.setdefault(kind, []).append(member)
        objects = owners.get("object", [])
        structs = [m for m in objects if isinstance(m, mi.StructType) and m.tag_field is not None]
        # Several tagged Structs share the object kind: the tag picks the member.
        tagged = len(structs) > 1 and len(structs) == len(objects)
        tags = frozenset(s.tag for s in structs if s.tag is not None)
        parts: list[_Part] = []
        for member in t.types:
            if tagged and isinstance(member, mi.StructType):
                parts += self._nested_object_invalid(member, path, tags)
                continue
            # A value of a kind another member takes is no counterexample for the union.
            own = {kind for kind, ms in owners.items() if ms == [member]}
            parts.extend(part for part in self.invalid(member, path) if part.kind in own)
        return parts

    def _nested_object_invalid(
        self, t: mi.StructType | mi.DataclassType | mi.TypedDictType, path: str, other_tags: frozenset[str | int]
    ) -> list[_Part]:
        if isinstance(t, mi.StructType) and t.array_like:
            raise self._unsupported(f"the array_like Struct {t.cls.__qualname__}")
        try:
            return self._object_invalid(t, path, root=False, other_tags=other_tags)
        except _Unsatisfiable:
            return []

    def _object_invalid(
        self,
        t: mi.StructType | mi.DataclassType | mi.TypedDictType,
        path: str,
        *,
        root: bool,
        other_tags: frozenset[str | int],
    ) -> list[_Part]:
        """Objects with one missing, unknown, tag or invalid field; raises if ``t`` has no valid value."""
        with self._entering(t.cls):
            required, optional = self._fields(t)
            tag = self._tag(t, root)
            if tag is not None:
                required[tag[0]] = st.just(tag[1])
            whole = _fixed_dict(required, optional)
            bads: list[_Bad] = []
            for f in t.fields:
                name = f.encode_name
                rest = _fixed_dict(
                    {k: v for k, v in required.items() if k != name}, {k: v for k, v in optional.items() if k != name}
                )
                if f.required:
                    bads.append(_bad(rest, f"{path}: missing the required field {name!r}"))
                with self._in_field(f"{t.cls.__qualname__}.{f.name}"):
                    try:
                        field_bads = self.invalid(f.type, f"{path}.{name}")
                    except _Unsatisfiable:
                        field_bads = []
                if field_bads:
                    bads.append(st.tuples(rest, _combine(field_bads)).map(_set_field(name)))
            known: set[str] = {f.encode_name for f in t.fields} | ({tag[0]} if tag is not None else set())
            unknown = _KEY_TEXT.filter(lambda k: k not in known)
            bads.append(st.tuples(whole, unknown).map(_add_unknown(path)))
            if root and isinstance(t, mi.StructType) and t.tag_field is not None and t.tag is not None:
                bads.append(
                    _bad(whole.map(_with(t.tag_field, t.tag)), f"{path}: the tag field {t.tag_field!r} is not an input field")
                )
            if tag is not None:
                wrong = _wrong_tag(tag[1], other_tags)
                bads.append(_bad(whole.map(_with(tag[0], wrong)), f"{path}.{tag[0]}: unknown tag value {wrong!r}"))
                # Required as its schema says, alone as much as in a union, where it picks the member.
                bads.append(_bad(whole.map(_without(tag[0])), f"{path}: missing the tag field {tag[0]!r}"))
            return [_Part("object", b) for b in bads]


class _Part(NamedTuple):
    """Invalid values sharing one JSON kind; ``wrong_kind`` when that kind is the whole problem."""

    kind: _Kind
    bad: _Bad
    wrong_kind: bool = False


def _combine(parts: list[_Part]) -> _Bad:
    """One strategy over ``parts`` in which all wrong kinds together weigh as much as one other problem."""
    wrong = [p.bad for p in parts if p.wrong_kind]
    branches = [p.bad for p in parts if not p.wrong_kind]
    if wrong:
        branches.append(st.one_of(*wrong))
    return st.one_of(*branches)


def _json_identity(value: object) -> object:
    """A hashable stand-in equal for values JSON Schema's ``uniqueItems`` treats as equal."""
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return value
    if isinstance(value, int | float):
        return ("number", float(value))
    if isinstance(value, list):
        return tuple(_json_identity(v) for v in cast("list[object]", value))
    if isinstance(value, dict):
        return frozenset((k, _json_identity(v)) for k, v in cast("dict[str, object]", value).items())
    return value


def _wrong_kind(kind: _Kind, path: str, expected: str) -> _Part:
    return _Part(kind, _bad(_strategy_of_kind(kind), f"{path}: expected {expected}, got {kind}"), wrong_kind=True)


def _text_of_length(n: int) -> SearchStrategy[str]:
    return st.text(_TEXT, min_size=n, max_size=n)


def _base64_of_length(n: int) -> SearchStrategy[str]:
    return st.binary(min_size=n, max_size=n).map(lambda b: base64.b64encode(b).decode())


def _wrong_tag(tag: str | int, taken: frozenset[str | int]) -> str | int:
    if isinstance(tag, int):
        return max([tag, *(v for v in taken if isinstance(v, int))]) + 1
    wrong = tag + "~"
    while wrong in taken:
        wrong += "~"
    return wrong


def _insert_item(drawn: tuple[list[Any], tuple[object, str], int]) -> tuple[object, str]:
    items, (value, reason), n = drawn
    i = n % (len(items) + 1)
    return [*items[:i], value, *items[i:]], _with_index(reason, i)


def _append_zero(items: list[Any]) -> list[Any]:
    return [*items, 0]


def _drop_last(items: list[Any]) -> list[Any]:
    return items[:-1]


def _replace_item(i: int) -> Callable[[tuple[list[Any], tuple[object, str]]], tuple[object, str]]:
    def replace(drawn: tuple[list[Any], tuple[object, str]]) -> tuple[object, str]:
        items, (value, reason) = drawn
        return [*items[:i], value, *items[i + 1 :]], reason

    return replace


def _set_entry(drawn: tuple[dict[str, Any], str, tuple[object, str]]) -> tuple[object, str]:
    entries, key, (value, reason) = drawn
    return {**entries, key: value}, reason


def _set_key(drawn: tuple[dict[str, Any], tuple[object, str], object]) -> tuple[object, str]:
    entries, (key, reason), value = drawn
    return {**entries, str(key): value}, reason


def _stringify_value(pair: tuple[object, str]) -> tuple[object, str]:
    return str(pair[0]), pair[1]


def _set_field(name: str) -> Callable[[tuple[dict[str, Any], tuple[object, str]]], tuple[object, str]]:
    def set_field(drawn: tuple[dict[str, Any], tuple[object, str]]) -> tuple[object, str]:
        fields, (value, reason) = drawn
        return {**fields, name: value}, reason

    return set_field


def _add_unknown(path: str) -> Callable[[tuple[dict[str, Any], str]], tuple[object, str]]:
    def add(drawn: tuple[dict[str, Any], str]) -> tuple[object, str]:
        fields, key = drawn
        return {**fields, key: 0}, f"{path}: unknown field {key!r}"

    return add


def _with(key: str, value: object) -> Callable[[dict[str, Any]], dict[str, Any]]:
    def add(fields: dict[str, Any]) -> dict[str, Any]:
        return {**fields, key: value}

    return add


def _without(key: str) -> Callable[[dict[str, Any]], dict[str, Any]]:
    def drop(fields: dict[str, Any]) -> dict[str, Any]:
        return {k: v for k, v in fields.items() if k != key}

    return drop
