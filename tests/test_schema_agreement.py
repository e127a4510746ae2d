"""The advertised input schema and the decoder agree: what one refuses, the other refuses."""

from __future__ import annotations

import dataclasses
import decimal
import itertools
import json
import re
import subprocess
import types
import typing
import uuid
import warnings
from collections.abc import Iterator
from typing import Annotated, Any, NewType, Union, cast

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator, FormatChecker, ValidationError, validators

from agentfx._patterns import ecma_pattern
from agentfx.schema import InputCodec, InvalidPayload

Amount = NewType("Amount", decimal.Decimal)


def _agree(tp: type[Any], payload: dict[str, Any]) -> bool:
    """Whether the payload decodes; asserts the advertised schema says the same of it."""
    codec = InputCodec(tp)
    validator: Any = Draft202012Validator(codec.schema, format_checker=FormatChecker())
    advertised = validator.is_valid(payload)
    decoded = not isinstance(codec.attempt(payload), InvalidPayload)
    assert advertised == decoded, (payload, codec.schema)
    return decoded


# --- Decimal: a string in the schema, so a string on the wire -----------------------


class _Priced(msgspec.Struct, tag=True):
    amount: decimal.Decimal
    fee: decimal.Decimal | None = None
    rates: dict[str, list[decimal.Decimal]] = {}
    total: Amount = Amount(decimal.Decimal(0))


@pytest.mark.parametrize(
    ("payload", "accepted"),
    [
        ({"amount": "12.5"}, True),
        ({"amount": "1e5"}, True),
        ({"amount": 12.5}, False),
        ({"amount": 1}, False),
        ({"amount": "1", "fee": None}, True),
        ({"amount": "1", "fee": 2}, False),
        ({"amount": "1", "rates": {"k": ["1", 2]}}, False),
        ({"amount": "1", "total": 3}, False),
        ({"amount": "1", "total": "3"}, True),
    ],
)
def test_a_decimal_is_decoded_only_from_the_string_its_schema_says(payload: dict[str, Any], accepted: bool) -> None:
    assert _agree(_Priced, payload) is accepted


# --- a nested tagged record: its tag is required, as its schema says ---------------------------
#
# msgspec requires a record's tag only to tell a union's records apart: alone,
# or beside None, it reads the record without one, where the schema says the
# tag is required.


class _Shape(msgspec.Struct, frozen=True, tag=True):
    sides: int


class _Numbered(msgspec.Struct, frozen=True, tag=7):
    n: int


class _Circle(msgspec.Struct, frozen=True, tag=True):
    radius: float


class _Twig(msgspec.Struct, frozen=True, tag=True):
    kids: list[_Twig] = []


class _Drawn(msgspec.Struct, tag=True):
    shape: _Shape
    maybe: _Shape | None = None
    shapes: list[_Shape] = []
    unique: frozenset[_Shape] = frozenset()
    numbered: _Numbered | None = None
    either: _Shape | _Circle | None = None
    tree: _Twig | None = None
    named: dict[str, _Shape] = {}


_SQUARE = {"type": "_Shape", "sides": 4}


_TAGGED: list[tuple[dict[str, Any], bool]] = [
    ({"shape": _SQUARE}, True),
    ({"shape": {"sides": 4}}, False),
    ({"shape": _SQUARE, "maybe": None}, True),
    ({"shape": _SQUARE, "maybe": {"sides": 3}}, False),
    ({"shape": _SQUARE, "shapes": [_SQUARE, {"sides": 3}]}, False),
    ({"shape": _SQUARE, "unique": [_SQUARE]}, True),
    ({"shape": _SQUARE, "unique": [{"sides": 3}]}, False),
    ({"shape": _SQUARE, "numbered": {"type": 7, "n": 1}}, True),
    ({"shape": _SQUARE, "numbered": {"n": 1}}, False),
    ({"shape": _SQUARE, "either": {"type": "_Circle", "radius": 1.0}}, True),
    ({"shape": _SQUARE, "either": {"radius": 1.0}}, False),
    ({"shape": _SQUARE, "tree": {"type": "_Twig", "kids": [{"type": "_Twig"}]}}, True),
    ({"shape": _SQUARE, "tree": {"type": "_Twig", "kids": [{"kids": []}]}}, False),
    ({"shape": _SQUARE, "named": {"a": {"sides": 3}}}, False),
    ({"shape": {"type": "\x00agentfx: a tag no client sends"}}, False),
]


@pytest.mark.parametrize(("payload", "accepted"), _TAGGED)
def test_a_nested_tagged_record_is_decoded_only_with_its_tag(payload: dict[str, Any], accepted: bool) -> None:
    assert _agree(_Drawn, payload) is accepted


def test_a_nested_record_sent_without_its_tag_is_told_the_tag_is_required() -> None:
    untagged: dict[str, Any] = {"kids": []}
    refused = InputCodec(_Drawn).attempt({"shape": _SQUARE, "tree": {"type": "_Twig", "kids": [untagged]}})
    assert isinstance(refused, InvalidPayload)
    assert (refused.path, refused.problem) == ("$.tree.kids[0]", '"tree.kids[0].type" is required')
    decoded = InputCodec(_Drawn).attempt({"shape": _SQUARE, "unique": [_SQUARE], "tree": {"type": "_Twig"}})
    assert decoded == _Drawn(_Shape(4), unique=frozenset({_Shape(4)}), tree=_Twig())


# --- a UUID: hyphenated, as its schema's format says ----------------------------------------

_ID = "3b241101-e2bb-4255-8caf-4136c566a962"


class _Identified(msgspec.Struct, tag=True):
    id: uuid.UUID
    owners: dict[uuid.UUID, str] = {}
    parent: uuid.UUID | None = None


@pytest.mark.parametrize(
    ("payload", "accepted"),
    [
        ({"id": _ID}, True),
        ({"id": _ID.upper()}, True),
        ({"id": _ID.replace("-", "")}, False),
        ({"id": "{" + _ID + "}"}, False),
        ({"id": "urn:uuid:" + _ID}, False),
        ({"id": _ID, "owners": {_ID: "a"}}, True),
        ({"id": _ID, "owners": {_ID.replace("-", ""): "a"}}, False),
        ({"id": _ID, "parent": _ID.replace("-", "")}, False),
    ],
)
def test_a_uuid_is_decoded_only_as_its_schema_writes_one(payload: dict[str, Any], accepted: bool) -> None:
    assert _agree(_Identified, payload) is accepted


def test_a_uuid_sent_as_bare_hex_digits_is_told_to_be_hyphenated() -> None:
    refused = InputCodec(_Identified).attempt({"id": _ID.replace("-", "")})
    assert isinstance(refused, InvalidPayload)
    assert (refused.path, refused.problem) == ("$.id", '"id" must be a UUID written with hyphens (8-4-4-4-12 hex digits)')
    assert InputCodec(_Identified).attempt({"id": _ID}) == _Identified(uuid.UUID(_ID))


def test_a_decimal_sent_as_a_number_is_told_to_be_a_string() -> None:
    codec = InputCodec(_Priced)
    refused = codec.attempt({"amount": 12.5})
    assert isinstance(refused, InvalidPayload)
    assert (refused.path, refused.problem) == ("$.amount", '"amount" must be a string')
    refused = codec.attempt({"amount": []})
    assert isinstance(refused, InvalidPayload)
    assert refused.problem == '"amount" must be a decimal number'
    refused = codec.attempt({"amount": "1", "fee": 2})
    assert isinstance(refused, InvalidPayload)
    assert (refused.path, refused.problem) == ("$.fee", '"fee" must be a string or null')
    # The decimal's own syntax is still the application type's to check.
    refused = codec.attempt({"amount": "twelve"})
    assert isinstance(refused, InvalidPayload)
    assert refused.problem == '"amount" must be a decimal number'
    assert codec.decode({"amount": "12.5"}) == _Priced(decimal.Decimal("12.5"))


# --- patterns: matched as the schema's ECMA-262 reader matches them ------------------

_Sku = Annotated[str, msgspec.Meta(pattern=r"^[A-Z]{3}-[0-9]{2}$")]
_Digits = Annotated[str, msgspec.Meta(pattern=r"^\d{3}$")]


class _Node(msgspec.Struct):
    sku: _Sku
    below: list[_Node] = []


class _Patterned(msgspec.Struct, tag=True):
    sku: _Sku = "ABC-12"
    code: _Digits = "123"
    word: Annotated[str, msgspec.Meta(pattern=r"^\w+$", max_length=8)] = "w"
    line: Annotated[str, msgspec.Meta(pattern=r"^a.b$")] = "a-b"
    codes: list[_Digits] = []
    by_code: dict[Annotated[str, msgspec.Meta(pattern=r"^k\d$")], _Digits] = {}
    maybe: _Digits | None = None
    deep: list[dict[str, _Node]] = []


_PATTERN_CASES: list[tuple[dict[str, Any], bool]] = [
    ({"sku": "ABC-12"}, True),
    ({"sku": "ABC-12\n"}, False),
    ({"code": "123"}, True),
    ({"code": "\u0661\u0662\u0663"}, False),
    ({"code": "123\n"}, False),
    ({"word": "snake_1"}, True),
    ({"word": "caf\u00e9"}, False),
    ({"line": "a\rb"}, False),
    ({"line": "a\u2028b"}, False),
    ({"codes": ["123", "12\u0663"]}, False),
    ({"by_code": {"k1": "123"}}, True),
    ({"by_code": {"k\u0661": "123"}}, False),
    ({"by_code": {"k1": "123\n"}}, False),
    ({"maybe": "\u0661\u0662\u0663"}, False),
    ({"maybe": None}, True),
    ({"deep": [{"x": {"sku": "ABC-12", "below": [{"sku": "ABC-12\n"}]}}]}, False),
    ({"deep": [{"x": {"sku": "ABC-12", "below": [{"sku": "ABC-12"}]}}]}, True),
]


def _ecma_accepts(pattern: str, values: list[str]) -> list[bool]:
    program = f"console.log(JSON.stringify({json.dumps(values)}.map(v => new RegExp({json.dumps(pattern)}, 'u').test(v))))"
    out = subprocess.run(["node", "-e", program], capture_output=True, text=True, check=True).stdout
    return cast("list[bool]", json.loads(out))


def _ecma_pattern(validator: Any, pattern: str, instance: object, schema: object) -> Iterator[ValidationError]:
    # JSON Schema patterns are ECMA-262 regular expressions; jsonschema
    # matches them with Python's re, so node's RegExp says what they match.
    if isinstance(instance, str) and not _ecma_accepts(pattern, [instance])[0]:
        yield ValidationError(f"{instance!r} does not match {pattern!r}")


_EcmaValidator: Any = cast(Any, validators).extend(Draft202012Validator, {"pattern": _ecma_pattern})

@pytest.mark.parametrize(("payload", "accepted"), _PATTERN_CASES)
def test_a_pattern_is_matched_as_the_advertised_schema_reads_it(payload: dict[str, Any], accepted: bool) -> None:
    codec = InputCodec(_Patterned)
    assert _EcmaValidator(codec.schema).is_valid(payload) is accepted
    assert (not isinstance(codec.attempt(payload), InvalidPayload)) is accepted


@pytest.mark.parametrize(("payload", "accepted"), _PATTERN_CASES)
def test_a_pattern_refuses_what_ecma_262_refuses(payload: dict[str, Any], accepted: bool) -> None:
    assert (not isinstance(InputCodec(_Patterned).attempt(payload), InvalidPayload)) is accepted


_PATTERNS = [
    r"^[A-Z]{3}-[0-9]{2}$",
    r"^\d{3}$",
    r"^\w+$",
    r"\bcat\b",
    r"^\s*$",
    r"^\S+$",
    r"^[\s\S]{2}$",
    r"^[^\d]+$",
    r"^[^\D]+$",
    r"^[\w-]+$",
    r"^[^\W\d]+$",
    r"^[\Da]+\d$",
    r"^[\D\S]$",
    r"^[a\W_]+$",
    r"^.$",
    r"^[\d.]+$",
    r"^(?=a)\w$",
    r"x\B",
    r"^[a^b]$",
    r"^\$\d$",
    r"^a{2,}?$",
    r"^(a)\1$",
    r"^(a|b)\1$",
    r"^(?:(a)\1)+$",
    r"^(\d)(?:x|\1)$",
    r"^[\-a]+$",
    r"^\/\.\{\}\]\$$",
    r"^[\b\0]$",
    r"^\x61\u0062$",
    r"^\uD83D?$",
]
_VALUES = ["ABC-12", "ABC-12\n", "123", "\u0661\u0662\u0663", "abc", "\u00e9a", "a b", "cat", "a cat!", "\u00e9cat", "", " ",
           "\n", "\u00a0", "\ufeff", "\x1c", "ab", "a\rb", "a\u2028b", "aa", "aaa", "x", "x\u00e9", "xa", "^", "$1", "a\n",
           "\U0001f600", "1.2", "a-b", "a1", "\u0661a1", "\u00e9_"]  # fmt: skip


@pytest.mark.parametrize("pattern", _PATTERNS)
def test_the_decoder_never_takes_a_value_the_patterns_ecma_262_reading_refuses(pattern: str) -> None:
    shape: Any = msgspec.defstruct("Shape", [("v", Annotated[str, msgspec.Meta(pattern=pattern)])])
    codec = InputCodec(shape)
    assert codec.schema["properties"]["v"]["pattern"] == pattern  # advertised as written
    for value, ecma in zip(_VALUES, _ecma_accepts(pattern, _VALUES), strict=True):
        decoded = not isinstance(codec.attempt({"v": value}), InvalidPayload)
        # Python's own reading is matched too (the application's type keeps
        # its pattern), so where it is narrower the decoder may refuse more.
        assert decoded == (ecma and re.search(pattern, value) is not None), (pattern, value)


@pytest.mark.parametrize("pattern", _PATTERNS)
def test_a_translated_pattern_adds_no_alternation(pattern: str) -> None:
    # An alternation inside a repeated class ("(?:[a]|[^0-9])+") matches a
    # run in exponentially many ways: a translation adds lookaheads, never "|".
    assert ecma_pattern(pattern).count("|") == pattern.count("|")


def test_a_pattern_refusal_names_the_pattern_as_advertised() -> None:
    codec = InputCodec(_Patterned)
    refused = codec.attempt({"code": "123\n"})
    assert isinstance(refused, InvalidPayload)
    assert (refused.path, refused.problem) == ("$.code", '"code" must match ^\\d{3}$')
    refused = codec.attempt({"by_code": {"k\u0661": "123"}})
    assert isinstance(refused, InvalidPayload)
    assert refused.problem == 'every key of "by_code" must match ^k\\d$'
    refused = codec.attempt({"word": "abcdefghij"})
    assert isinstance(refused, InvalidPayload)
    assert refused.problem == '"word" must be at most 8 characters long'


class _SharingTranslation(msgspec.Struct, tag=True):
    # Two patterns ECMA-262 reads alike translate to one Python pattern.
    plain: Annotated[str, msgspec.Meta(pattern=r"^\d$")] = "1"
    classed: Annotated[str, msgspec.Meta(pattern=r"^[\d]$")] = "1"
    keyed: dict[Annotated[str, msgspec.Meta(pattern=r"^[\d]$")], int] = {}
    keyed_plain: dict[Annotated[str, msgspec.Meta(pattern=r"^\d$")], int] = {}


@pytest.mark.parametrize(
    ("payload", "problem"),
    [
        ({"plain": "\u0661"}, '"plain" must match ^\\d$'),
        ({"classed": "\u0661"}, '"classed" must match ^[\\d]$'),
        ({"keyed": {"\u0661": 1}}, 'every key of "keyed" must match ^[\\d]$'),
        ({"keyed_plain": {"\u0661": 1}}, 'every key of "keyed_plain" must match ^\\d$'),
    ],
)
def test_patterns_sharing_a_translation_are_each_named_as_declared(payload: dict[str, Any], problem: str) -> None:
    # A name remembered from the first translation made would misname the other field's.
    refused = InputCodec(_SharingTranslation).attempt(payload)
    assert isinstance(refused, InvalidPayload)
    assert refused.problem == problem


@pytest.mark.parametrize(
    ("pattern", "construct"),
    [
        (r"^(?P<x>a)$", "(?P"),
        (r"(?i)^a$", "(?i"),
        (r"^a\Z", r"\Z"),
        (r"\Aa", r"\A"),
        (r"^a*+$", "a possessive quantifier"),
        (r"^[]a]$", "a class opening with ]"),
        (r"^a{,2}$", "{,"),
    ],
)
def test_a_pattern_in_python_only_syntax_is_refused_where_the_input_is_declared(pattern: str, construct: str) -> None:
    shape: Any = msgspec.defstruct("Shape", [("v", Annotated[str, msgspec.Meta(pattern=pattern)])])
    with pytest.raises(TypeError, match=f"^the pattern .* uses {re.escape(construct)}, which JSON Schema's regular expressions"):
        InputCodec(shape)


def _ecma_reads(patterns: list[str], values: list[str]) -> list[list[bool] | None]:
    """For each pattern, which of ``values`` node's RegExp matches with the ``u`` flag; ``None`` where it cannot compile it."""
    program = (
        "const {ps, vs} = JSON.parse(require('fs').readFileSync(0, 'utf8'));"
        "console.log(JSON.stringify(ps.map(p => { let r; try { r = new RegExp(p, 'u'); } catch { return null; }"
        " return vs.map(v => r.test(v)); })));"
    )
    # json.dumps writes a lone surrogate as an escape, which JSON.parse reads back as one.
    sent = json.dumps({"ps": patterns, "vs": values})
    out = subprocess.run(["node", "-e", program], input=sent, capture_output=True, text=True, check=True).stdout
    return cast("list[list[bool] | None]", json.loads(out))


def _python_compiles(pattern: str) -> bool:
    """Whether Python's ``re`` compiles ``pattern`` without a warning, as msgspec's ``Meta`` must before agentfx sees it."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        try:
            re.compile(pattern)
        except (re.error, FutureWarning, DeprecationWarning):
            return False
    return True


def _shape(pattern: str) -> Any:
    return msgspec.defstruct("Shape", [("v", Annotated[str, msgspec.Meta(pattern=pattern)])])


@pytest.mark.parametrize(
    ("pattern", "construct"),
    [
        (r"^a\-b$", r"\-"),
        (r"^a\_b$", r"\_"),
        (r"^\"q\"$", r"\""),
        (r"^a\ b$", "\\ "),
        (r"^[\"']$", r"\""),
        (r"^[\_a]$", r"\_"),
        (r"^\#\d$", r"\#"),
        (r"^\é$", "\\é"),
        (r"^x{y}$", "a { that opens no quantifier"),
        (r"^a{1, 2}$", "a { that opens no quantifier"),
        (r"^a{$", "a { that opens no quantifier"),
        (r"^a}$", "a } that closes no quantifier"),
        (r"^a]$", "a ] that closes no class"),
        (r"^[[:alpha:]]+$", "a ] that closes no class"),
        (r"^(?=a)*a$", "a quantifier after a lookaround"),
        (r"^(?<=a)?a$", "a quantifier after a lookaround"),
        (r"^(?!a){2}b$", "a quantifier after a lookaround"),
    ],
)
def test_a_pattern_ecma_262_cannot_compile_is_refused_where_the_input_is_declared(pattern: str, construct: str) -> None:
    # Python compiles each (with a FutureWarning for "[[:alpha:]]"); no
    # validator could, so advertising it would break every client's schema.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        re.compile(pattern)
    assert _ecma_reads([pattern], []) == [None]
    refusal = f"^the pattern .* uses {re.escape(construct)}, which JSON Schema's regular expressions"
    with pytest.raises(TypeError, match=refusal):
        ecma_pattern(pattern)
    if _python_compiles(pattern):  # else msgspec's Meta (under this suite's warnings as errors) refuses it first
        with pytest.raises(TypeError, match=refusal):
            InputCodec(_shape(pattern))


_FRAGMENTS = [
    "a", "b", "1", "-", "_", '"', " ", ",", "#", "/", "{", "}", "[", "]", "(", ")", "(?:", "(?=", "(?!", "(?<=", "(?<!",
    "|", "*", "+", "?", "{2}", "{1,}", "{0,2}", "^", "$", ".", "\\", "\\-", "\\_", "\\.", "\\/", "\\]", "\\[", "\\{", "\\}",
    "\\b", "\\B", "\\d", "\\D", "\\w", "\\s", "\\S", "\\1", "\\0", "\\n", "\\v", "\\x41", "\\u0061", "\\uD83D", "\\uDE00",
    "\\uD83D\\uDE00", "\\é", "\u00e9", "\\|", "\\^", "\\$", "\\?", "\\(", "\\)", "\\\\", "\\ ", "\\#", "\\,", "\\=", "\\<", "\\:",
]  # fmt: skip
_FRAGMENT_VALUES = ["", "a", "b", "ab", "aa", "a\n", "1", "\u0661", "_", "-", "a-b", "\u00e9", " ", "\r", "\U0001f600", "a\ud83d",
                    "\ud83d", '"a"', "{", "}", "]", "[", "/", "a,b", "\x00", "\x0b", "A", "aA"]  # fmt: skip


@settings(max_examples=30, deadline=None)
@given(st.lists(st.lists(st.sampled_from(_FRAGMENTS), min_size=1, max_size=7).map("".join), min_size=60, max_size=60))
def test_a_pattern_is_refused_where_ecma_262_cannot_compile_it_and_never_decodes_looser(drawn: list[str]) -> None:
    patterns = [pattern for pattern in drawn if _python_compiles(pattern)]  # what msgspec's Meta takes
    for pattern, read in zip(patterns, _ecma_reads(patterns, _FRAGMENT_VALUES), strict=True):
        try:
            codec = InputCodec(_shape(pattern))
        except TypeError as refused:
            # Refused: what no validator compiles, or what the two readings match differently.
            assert read is None or "uses a backreference" in str(refused) or "surrogate pair" in str(refused), pattern
            continue
        assert read is not None, pattern  # advertised, so a validator must compile it
        assert codec.schema["properties"]["v"]["pattern"] == pattern
        for value, ecma in zip(_FRAGMENT_VALUES, read, strict=True):
            assert ecma or isinstance(codec.attempt({"v": value}), InvalidPayload), (pattern, value)


@pytest.mark.parametrize(
    "pattern",
    [
        r"^(?:(a)|b)*\1$",  # ECMA clears \1 on each iteration: "ab" matches, "aba" does not; Python's reading, the other way
        "^(?:(['\"])?\\w+,)*\\1$",
        r"^(a)*\1$",
        r"^(?:(a)|b)\1$",  # a group that did not take part: ECMA's \1 matches "", Python's fails
        r"^(?:(a)\1)*\1$",
        r"^(?=(a))\1",
        r"^(a)(?<=\1)",  # a lookbehind, which ECMA-262 matches from right to left
    ],
)
def test_a_backreference_the_two_readings_may_match_differently_is_refused(pattern: str) -> None:
    assert _python_compiles(pattern)
    assert _ecma_reads([pattern], []) != [None]  # ECMA-262 has it: refused for the readings, not the syntax
    with pytest.raises(TypeError, match=r"^the pattern .* uses a backreference \(\\1\).* match differently"):
        InputCodec(_shape(pattern))


_ATOMS = st.sampled_from(["a", "b", "", ".", "\\1", "\\1", "\\2", "(a)", "(b)", "(a|b)", "(a|)"])


def _groups_of(terms: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    alternatives = st.lists(st.lists(terms, min_size=1, max_size=3).map("".join), min_size=1, max_size=2).map("|".join)
    repeated = st.tuples(st.sampled_from(["(", "(?:"]), alternatives, st.sampled_from(["", "", "*", "?", "+", "{2}"]))
    looking = st.tuples(st.sampled_from(["(?=", "(?!", "(?<=", "(?<!"]), alternatives)
    return st.one_of(repeated.map(lambda g: f"{g[0]}{g[1]}){g[2]}"), looking.map(lambda g: f"{g[0]}{g[1]})"))


def _has_backreference(pattern: str) -> bool:
    return re.search(r"\\[1-9]", pattern) is not None and _python_compiles(pattern)


_GROUPED = st.lists(st.recursive(_ATOMS, _groups_of, max_leaves=8), min_size=2, max_size=4).map(lambda terms: f"^{''.join(terms)}$")
_AB = ["".join(letters) for size in range(5) for letters in itertools.product("ab", repeat=size)]


@settings(max_examples=60, deadline=None)
@given(st.lists(_GROUPED, min_size=15, max_size=15))
def test_a_backreference_kept_matches_what_ecma_262_matches(drawn: list[str]) -> None:
    patterns = [pattern for pattern in drawn if _has_backreference(pattern)]
    for pattern, read in zip(patterns, _ecma_reads(patterns, _AB), strict=True):
        assert read is not None, pattern
        try:
            translated = re.compile(ecma_pattern(pattern))
        except TypeError as refused:
            assert "uses a backreference" in str(refused), pattern
            continue
        # Kept only where Python's reading of it is ECMA's: the translation alone matches exactly as node does.
        assert [translated.search(value) is not None for value in _AB] == read, pattern


@settings(max_examples=5, deadline=None)
@given(st.lists(st.integers(0x10000, 0x10FFFF), min_size=12, max_size=12), st.booleans())
def test_a_surrogate_pair_escape_is_refused_and_a_lone_one_matches_as_ecma_262_does(points: list[int], lower: bool) -> None:
    patterns: list[str] = []
    values = ["", "a", "x"]
    for point in points:
        high, low = 0xD800 + ((point - 0x10000) >> 10), 0xDC00 + ((point - 0x10000) & 0x3FF)
        pair = f"\\u{high:04X}\\u{low:04X}"
        pair = pair.lower() if lower else pair
        # One character to ECMA-262, two lone surrogates to Python: the application's
        # own type would refuse every value the schema promises there.
        for refused in (f"^{pair}$", f"^[x{pair}]$", f"^a{pair}?$"):
            with pytest.raises(TypeError, match=f"surrogate pair's escapes.*U\\+{point:04X}.*write the character itself"):
                InputCodec(_shape(refused))
        # Each half alone is the lone surrogate it names, in both.
        patterns += [f"^a\\u{high:04X}", f"^\\u{low:04X}$", f"^[\\u{high:04X}]$", f"^{chr(point)}$"]
        values += [chr(point), f"a{chr(point)}", chr(high), f"a{chr(high)}", chr(low), f"x{chr(low)}"]
    for pattern, read in zip(patterns, _ecma_reads(patterns, values), strict=True):
        assert read is not None
        translated = re.compile(ecma_pattern(pattern))
        assert [translated.search(value) is not None for value in values] == read, pattern
        codec = InputCodec(_shape(pattern))
        for value, ecma in zip(values, read, strict=True):
            assert ecma == (not isinstance(codec.attempt({"v": value}), InvalidPayload)), (pattern, value)


@pytest.mark.parametrize(
    ("pattern", "value", "named"),
    [
        (r"^\D$", "\u0661", r"``\D``"),
        (r"^\s$", "\ufeff", r"``\s`` with U+FEFF"),
        (r"^\S$", "\u001c", r"``\S``"),
        (r"^\W$", "\u00e9", r"``\W``"),
        (r"\bid", "\u00e9id", r"``\b`` beside a non-ASCII letter"),
        (r"^\B$", "", r"``\B`` in an empty string"),
        (r"^ab(?!$)", "ab\n", "inside a negative lookaround"),
        (r"^[a-z]+(?!.)", "ab\r", "inside a negative lookaround"),
        (r"^(?!\d)[^ ]+$", "\u0661x", "inside a negative lookaround"),
        (r"(?<!\w)id$", "\u00e9id", "inside a negative lookaround"),
    ],
)
def test_where_the_decoder_is_stricter_than_the_schema_the_translation_says_so(pattern: str, value: str, named: str) -> None:
    assert _ecma_accepts(pattern, [value]) == [True]
    assert isinstance(InputCodec(_shape(pattern)).attempt({"v": value}), InvalidPayload)
    assert named in " ".join((ecma_pattern.__doc__ or "").split())


# --- sets: uniqueItems, so no repeated item -------------------------------------------


class _Tagged(msgspec.Struct):
    tags: set[str] = set()


class _Tree(msgspec.Struct):
    marks: frozenset[int] = frozenset()
    kids: list[_Tree] = []


class _Labelled(msgspec.Struct, tag=True):
    labels: set[str] = set()
    maybe: frozenset[int] | None = None
    inner: list[_Tagged] = []
    by_id: dict[int, set[str]] = {}
    tree: _Tree | None = None
    groups: set[frozenset[int]] = set()
    pair: tuple[set[int], int] | None = None
    anything: Any = None


@pytest.mark.parametrize(
    ("payload", "where"),
    [
        ({"labels": ["urgent", "home"]}, None),
        ({"labels": ["urgent", "urgent"]}, "$.labels"),
        ({"maybe": [1, 1]}, "$.maybe"),
        ({"maybe": None}, None),
        ({"inner": [{"tags": ["a"]}, {"tags": ["b", "b"]}]}, "$.inner[1].tags"),
        ({"by_id": {"1": ["a"], "2": ["b", "b"]}}, "$.by_id[...]"),
        ({"tree": {"kids": [{"kids": [{"marks": [1, 1]}]}]}}, "$.tree.kids[0].kids[0].marks"),
        ({"tree": {"kids": [{"kids": [{"marks": [1, 2]}]}]}}, None),
        ({"groups": [[1, 2], [3, 3]]}, "$.groups[1]"),
        ({"groups": [[1, 2], [2, 1]]}, "$.groups"),
        ({"pair": [[1, 1], 2]}, "$.pair[0]"),
        ({"anything": [1, 1]}, None),
    ],
)
def test_a_set_sent_with_a_repeated_item_is_refused_as_its_schema_refuses_it(payload: dict[str, Any], where: str | None) -> None:
    codec = InputCodec(_Labelled)
    decoded = codec.attempt(payload)
    if where is None:
        assert not isinstance(decoded, InvalidPayload)
    else:
        assert isinstance(decoded, InvalidPayload)
        assert decoded.path == where
    # [1, 2] and [2, 1] are one set: the items of "groups" repeat, though the arrays differ.
    if payload.get("groups") != [[1, 2], [2, 1]]:
        assert _agree(_Labelled, payload) is (where is None)


def test_a_repeated_item_is_worded_as_a_rule_of_the_set() -> None:
    codec = InputCodec(_Labelled)
    refused = codec.attempt({"labels": ["urgent", "urgent"]})
    assert isinstance(refused, InvalidPayload)
    assert (refused.path, refused.problem, refused.cause) == ("$.labels", 'the items of "labels" must be unique', None)
    with pytest.raises(InvalidPayload) as raised:
        codec.decode({"inner": [{"tags": ["b", "b"]}]})
    assert raised.value.problem == 'the items of "inner[0].tags" must be unique'
    assert codec.decode({"labels": ["a", "b"]}).labels == {"a", "b"}



class _Price(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    amount: decimal.Decimal


class _Code(msgspec.Struct, frozen=True):
    code: Annotated[str, msgspec.Meta(pattern=r"^\d+$")]


class _Basket(msgspec.Struct):
    prices: frozenset[_Price]
    codes: frozenset[_Code]


def test_a_set_of_frozen_records_needing_a_second_pass_decodes() -> None:
    decoded = InputCodec(_Basket).attempt({"prices": [{"amount": "1.50"}], "codes": [{"code": "12"}]})
    assert decoded == _Basket(frozenset({_Price(decimal.Decimal("1.50"))}), frozenset({_Code("12")}))


# --- sets inside sets: each item decoded once, at any depth --------------------------


class _Leaf(msgspec.Struct, frozen=True, tag="leaf"):
    marks: frozenset[int] = frozenset()


class _Branch(msgspec.Struct, frozen=True, tag="branch"):
    kids: frozenset[_Leaf | _Branch] = frozenset()
    named: tuple[tuple[str, frozenset[int]], ...] = ()
    by_key: frozenset[_Keyed] = frozenset()
    maybe: frozenset[int] | None = None


class _Keyed(msgspec.Struct, frozen=True, array_like=True, tag=1):
    marks: frozenset[int]


class _Forest(msgspec.Struct):
    trees: frozenset[_Leaf | _Branch] = frozenset()


def _first_repeat(sent: Any, tp: Any, path: str) -> str | None:
    """The reference: the first set with a repeat, each set's items decoded on their own (outer before inner)."""
    shape = typing.get_origin(tp) or tp
    args = typing.get_args(tp)
    if tp in (_Leaf, _Branch, _Keyed):
        hints = typing.get_type_hints(tp)
        names = [f.name for f in msgspec.structs.fields(tp)]
        if tp is _Keyed:
            return _first_repeat(sent[1], hints["marks"], f"{path}[1]") if len(sent) > 1 else None
        for name in names:
            if name in sent:
                found = _first_repeat(sent[name], hints[name], f"{path}.{name}")
                if found is not None:
                    return found
        return None
    if shape in (Union, types.UnionType):
        if sent is None:
            return None
        member = next(m for m in args if m is not type(None) and (not isinstance(sent, dict) or m.__struct_config__.tag == sent["type"]))
        return _first_repeat(sent, member, path)
    if shape is frozenset:
        if len(msgspec.convert(sent, tp)) != len(sent):
            return path
        return next((f for i, item in enumerate(sent) if (f := _first_repeat(item, args[0], f"{path}[{i}]"))), None)
    if shape is tuple:
        items = zip(sent, itertools.repeat(args[0])) if args[-1] is Ellipsis else zip(sent, args)
        return next((f for i, (item, t) in enumerate(items) if (f := _first_repeat(item, t, f"{path}[{i}]"))), None)
    return None


_marks = st.lists(st.integers(0, 2), max_size=3)
_leaves: st.SearchStrategy[Any] = st.fixed_dictionaries({"type": st.just("leaf")}, optional={"marks": _marks})
_keyed = st.tuples(st.just(1), _marks).map(list)


def _branches(kids: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    optional: dict[str, st.SearchStrategy[Any]] = {
        "kids": st.lists(kids, max_size=3),
        "named": st.lists(st.tuples(st.sampled_from("ab"), _marks).map(list), max_size=2),
        "by_key": st.lists(_keyed, max_size=2),
        "maybe": st.none() | _marks,
    }
    return st.fixed_dictionaries({"type": st.just("branch")}, optional=optional)


_trees = st.recursive(_leaves, _branches, max_leaves=12)


@settings(max_examples=300, deadline=None)
@given(st.lists(_trees, max_size=3))
def test_a_repeat_in_sets_nested_in_sets_is_found_where_each_set_decoded_alone_finds_it(trees: list[Any]) -> None:
    refused = InputCodec(_Forest).attempt({"trees": trees})
    expected = _first_repeat(trees, frozenset[_Leaf | _Branch], "$.trees")
    assert (refused.path if isinstance(refused, InvalidPayload) else None) == expected


def _nested(depth: int, bottom: list[int]) -> dict[str, Any]:
    tree: dict[str, Any] = {"type": "leaf", "marks": bottom}
    for _ in range(depth):
        tree = {"type": "branch", "kids": [tree]}
    return tree


def test_sets_nested_as_deeply_as_the_decoder_goes_are_checked() -> None:
    # As deep as msgspec decodes a payload of this shape: deeper than the checker's recursion would reach.
    depth = 300
    assert isinstance(msgspec.convert(_nested(depth, [1]), _Leaf | _Branch), _Branch)
    assert not isinstance(InputCodec(_Forest).attempt({"trees": [_nested(depth, [1, 2])]}), InvalidPayload)
    refused = InputCodec(_Forest).attempt({"trees": [_nested(depth, [1, 1])]})
    assert isinstance(refused, InvalidPayload)
    assert refused.path == "$.trees[0]" + ".kids[0]" * depth + ".marks"


def test_each_item_of_sets_nested_in_sets_is_decoded_once(monkeypatch: pytest.MonkeyPatch) -> None:
    codec = InputCodec(_Forest)
    depth, width = 60, 50
    payload = {"trees": [_nested(depth, list(range(width)))]}
    assert not isinstance(codec.attempt(payload), InvalidPayload)
    converted = 0
    convert = msgspec.convert

    def counting(obj: Any, *args: Any, **kwargs: Any) -> Any:
        nonlocal converted
        # JSON values the call decodes: what it takes as already decoded is not counted.
        pending = [obj]
        while pending:
            value = pending.pop()
            if isinstance(value, dict):
                pending.extend(cast("dict[str, Any]", value).values())
            elif isinstance(value, list):
                pending.extend(cast("list[Any]", value))
            converted += 1
        return convert(obj, *args, **kwargs)

    monkeypatch.setattr(msgspec, "convert", counting)
    assert not isinstance(codec.attempt(payload), InvalidPayload)
    sent = depth * 3 + width + 3
    # Decoding each item again at every level of sets would be ~depth * (depth + width) values.
    assert converted <= 4 * sent, (converted, sent)


@dataclasses.dataclass(frozen=True)
class _Marked:
    marks: frozenset[int]


class _MarkedRow(typing.NamedTuple):
    marks: frozenset[int]


class _Held(msgspec.Struct):
    by_number: dict[int, frozenset[frozenset[int]]] = {}
    marked: frozenset[_Marked] = frozenset()
    rows: frozenset[_MarkedRow] = frozenset()


@pytest.mark.parametrize(
    ("payload", "where"),
    [
        # "0" and "-0" decode to one key: the values are paired with nothing and rebuilt.
        ({"by_number": {"0": [[1, 2]], "-0": [[3, 3]]}}, "$.by_number[...][0]"),
        ({"by_number": {"0": [[1]], "-0": [[3]]}}, None),
        ({"marked": [{"marks": [1]}, {"marks": [2, 2]}]}, "$.marked[1].marks"),
        ({"marked": [{"marks": [1, 2]}, {"marks": [2, 1]}]}, "$.marked"),
        ({"rows": [[[1]], [[2, 2]]]}, "$.rows[1][0]"),
        ({"rows": [[[1]], [[2]]]}, None),
    ],
)
def test_records_and_mappings_inside_sets_are_checked_as_decoded(payload: dict[str, Any], where: str | None) -> None:
    decoded = InputCodec(_Held).attempt(payload)
    assert (decoded.path if isinstance(decoded, InvalidPayload) else None) == where
