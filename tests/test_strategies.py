"""The payload strategies: what they refuse to derive, and the shape of what they draw."""

from __future__ import annotations

import dataclasses
import datetime as dt
import decimal
import enum
import re
import uuid
from typing import Annotated, Any, Literal, cast

import msgspec
import pytest
from hypothesis import HealthCheck, Phase, find, given, settings

import agentfx
from agentfx.schema import NUMBER_KEY, InvalidPayload as CodecRefusal
from agentfx.testing import InvalidPayload, check_contract, invalid_payloads, valid_payloads

FEW = settings(max_examples=30, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])
SEARCH = settings(max_examples=2000, database=None, suppress_health_check=[HealthCheck.too_slow])
# Finding is the point here, not a minimal example: shrinking only costs time.
FIRST = settings(SEARCH, phases=[Phase.generate])


class Todo(msgspec.Struct):
    title: Annotated[str, msgspec.Meta(min_length=1, max_length=10)]
    done: bool = False


class Board(msgspec.Struct):
    todo: Todo
    scores: list[Annotated[int, msgspec.Meta(ge=0)]]
    limit: int | None
    ratio: float
    anything: Any = None


class RequestedCreateTodo(msgspec.Struct, tag=True):
    title: str


class ClearedSelection(msgspec.Struct, tag=True):
    pass


class Cat(msgspec.Struct, tag=True):
    lives: int


class Dog(msgspec.Struct, tag=True):
    name: str


class Adopted(msgspec.Struct):
    pet: Cat | Dog


@dataclasses.dataclass(frozen=True)
class FakeCapability:
    input_type: type[Any]


def as_object(value: object) -> dict[str, Any]:
    assert isinstance(value, dict)
    return cast("dict[str, Any]", value)


def find_invalid(target: type[Any], reason: str, search: settings = FIRST) -> InvalidPayload:
    return find(invalid_payloads(target), lambda i: re.search(reason, i.reason) is not None, settings=search)


# --- what cannot be derived ---------------------------------------------------------


@pytest.mark.parametrize("target", [int, dict[str, int], FakeCapability(int), object()])
def test_a_target_that_is_no_struct_is_refused(target: Any) -> None:
    with pytest.raises(TypeError, match="msgspec Struct type"):
        valid_payloads(target)
    with pytest.raises(TypeError, match="msgspec Struct type"):
        invalid_payloads(target)


def test_an_array_like_root_is_refused() -> None:
    class Pair(msgspec.Struct, array_like=True):
        a: int

    with pytest.raises(TypeError, match="Pair: array_like"):
        valid_payloads(Pair)


class Inner(msgspec.Struct):
    value: complex


class Holder(msgspec.Struct):
    name: str
    inner: list[Inner]


class ByPair(msgspec.Struct):
    scores: dict[tuple[int, int], int]


def test_an_unsupported_field_type_is_named() -> None:
    with pytest.raises(TypeError, match=r"Inner\.value: the type complex is not supported"):
        valid_payloads(Holder)
    with pytest.raises(TypeError, match=r"Inner\.value: the type complex is not supported"):
        invalid_payloads(Holder)
    # No JSON object key is read as a tuple.
    with pytest.raises(TypeError, match=r"ByPair\.scores: a dict keyed by tuple is not supported"):
        valid_payloads(ByPair)


class Impossible(msgspec.Struct):
    stars: Annotated[int, msgspec.Meta(ge=5, le=1)]


class ImpossibleButOptional(msgspec.Struct):
    title: str
    stars: Annotated[int, msgspec.Meta(ge=5, le=1)] | None = None
    steps: Annotated[float, msgspec.Meta(multiple_of=10.0, gt=1.0, lt=2.0)] = 0.0


class Loop(msgspec.Struct):
    next: Loop


def test_a_required_field_no_value_satisfies_is_reported() -> None:
    with pytest.raises(ValueError, match=r"Impossible: no int lies within the bounds of Impossible\.stars"):
        valid_payloads(Impossible)
    with pytest.raises(ValueError, match="Loop nests itself"):
        valid_payloads(Loop)


@FEW
@given(valid_payloads(ImpossibleButOptional))
def test_an_unsatisfiable_optional_field_is_left_out_or_null(payload: dict[str, Any]) -> None:
    assert payload.get("stars") is None
    assert "steps" not in payload


# --- targets -------------------------------------------------------------------------------


@FEW
@given(valid_payloads(FakeCapability(Todo)), invalid_payloads(FakeCapability(Todo)))
def test_a_capability_is_read_through_its_input_type(payload: dict[str, Any], invalid: InvalidPayload) -> None:
    assert isinstance(msgspec.convert(payload, Todo, strict=True), Todo)
    assert invalid.reason.startswith("$")


class RenameInput(msgspec.Struct):
    new_title: Annotated[str, msgspec.Meta(min_length=1)]


DIRECT = agentfx.variant(RequestedCreateTodo, "Create")
MAPPED = agentfx.variant(
    RequestedCreateTodo, "Create", name="create_named", input=RenameInput, to_message=lambda i, ctx: RequestedCreateTodo(title=i.new_title)
)
ACTION = agentfx.action(
    agentfx.Action("rename", "Rename", RenameInput, lambda i, ctx: RequestedCreateTodo(title=i.new_title), message=RequestedCreateTodo)
)
[CAPABILITY] = agentfx.expose(RequestedCreateTodo, MAPPED).capabilities


@pytest.mark.parametrize(
    ("target", "decodes_to"),
    [(DIRECT, RequestedCreateTodo), (MAPPED, RenameInput), (ACTION, RenameInput), (CAPABILITY, RenameInput), (RenameInput, RenameInput)],
    ids=["direct-variant", "mapped-variant", "action", "capability", "struct"],
)
def test_a_variant_a_capability_or_a_struct_is_a_target(target: Any, decodes_to: type[Any]) -> None:
    @FEW
    @given(valid_payloads(target), invalid_payloads(target))
    def check(payload: dict[str, Any], invalid: InvalidPayload) -> None:
        # A direct variant's payload is its Message's fields, without the tag key.
        assert "type" not in payload
        assert isinstance(msgspec.convert(payload, decodes_to, strict=True), decodes_to)
        assert invalid.reason.startswith("$")

    check()
    # Each target has one required field, so the empty object is among its invalid payloads.
    assert find(invalid_payloads(target), lambda i: i.payload == {}, settings=FIRST).payload == {}


def test_invalid_payload_is_a_frozen_value() -> None:
    invalid = InvalidPayload([], "$: expected an object, got array")
    with pytest.raises(dataclasses.FrozenInstanceError):
        invalid.reason = "changed"  # pyright: ignore[reportAttributeAccessIssue]
    assert invalid == InvalidPayload([], "$: expected an object, got array")


# --- shapes of valid payloads ------------------------------------------------------------


@FEW
@given(valid_payloads(ClearedSelection))
def test_a_payload_free_input_takes_exactly_the_empty_object(payload: dict[str, Any]) -> None:
    assert payload == {}


@pytest.mark.parametrize(
    ("payload", "reason"),
    [
        ([], r"^\$: expected an object, got array$"),
        ("", r"^\$: expected an object, got str$"),
        (None, r"^\$: expected an object, got null$"),
    ],
)
def test_a_payload_free_input_refuses_non_objects(payload: object, reason: str) -> None:
    found = find(invalid_payloads(ClearedSelection), lambda i: i.payload == payload, settings=FIRST)
    assert re.search(reason, found.reason)


def test_a_payload_free_input_refuses_any_key() -> None:
    found = find_invalid(ClearedSelection, "unknown field")
    assert len(as_object(found.payload)) == 1
    tagged = find_invalid(ClearedSelection, "tag field", SEARCH)
    assert tagged == InvalidPayload({"type": "ClearedSelection"}, "$: the tag field 'type' is not an input field")


@FEW
@given(valid_payloads(RequestedCreateTodo))
def test_the_root_tag_never_appears_in_a_valid_payload(payload: dict[str, Any]) -> None:
    assert set(payload) == {"title"}


def test_the_root_tag_key_is_an_unknown_field() -> None:
    found = find_invalid(RequestedCreateTodo, "tag field", SEARCH)
    assert found.payload == {"title": "", "type": "RequestedCreateTodo"}
    assert found.reason == "$: the tag field 'type' is not an input field"


@FEW
@given(valid_payloads(Adopted))
def test_a_nested_tagged_struct_carries_its_tag(payload: dict[str, Any]) -> None:
    pet = payload["pet"]
    assert pet["type"] in {"Cat", "Dog"}
    assert set(pet) == ({"type", "lives"} if pet["type"] == "Cat" else {"type", "name"})


def test_a_nested_tagged_union_refuses_a_missing_or_unknown_tag() -> None:
    missing = find_invalid(Adopted, "missing the tag field")
    assert missing.reason == "$.pet: missing the tag field 'type'"
    assert "type" not in as_object(as_object(missing.payload)["pet"])
    unknown = find_invalid(Adopted, "unknown tag value")
    assert as_object(as_object(unknown.payload)["pet"])["type"] not in {"Cat", "Dog"}


class Housed(msgspec.Struct):
    cat: Cat
    dog: Dog | None = None


def test_a_nested_tagged_struct_outside_a_union_refuses_a_missing_tag_too() -> None:
    # msgspec itself would read one without its tag; the codec, as the schema says, does not.
    [capability] = agentfx.define(agentfx.expose(Housed, agentfx.variant(Housed, "Housed"))).capabilities
    for field in ("cat", "dog"):
        missing = find_invalid(Housed, rf"^\$\.{field}: missing the tag field")
        assert missing.reason == f"$.{field}: missing the tag field 'type'"
        assert "type" not in as_object(as_object(missing.payload)[field])
        refused = capability.codec.attempt(missing.payload)
        assert isinstance(refused, CodecRefusal), refused
        assert refused.problem == f'"{field}.type" is required'


def test_float_fields_also_get_whole_numbers() -> None:
    payload = find(valid_payloads(Board), lambda p: type(p["ratio"]) is int, settings=FIRST)
    assert msgspec.convert(payload, Board, strict=True).ratio == float(payload["ratio"])


class Keyed(msgspec.Struct):
    by_id: Annotated[dict[int, str], msgspec.Meta(min_length=1)]
    tags: Annotated[set[float], msgspec.Meta(min_length=3)]


@FEW
@given(valid_payloads(Keyed))
def test_object_keys_are_strings_and_set_items_are_distinct(payload: dict[str, Any]) -> None:
    assert all(isinstance(k, str) and int(k) == int(k) for k in payload["by_id"])
    assert len({float(x) for x in payload["tags"]}) == len(payload["tags"])


class Tree(msgspec.Struct):
    value: int
    children: list[Tree] = []


def _depth(tree: dict[str, Any]) -> int:
    return 1 + max((_depth(child) for child in tree.get("children", [])), default=0)


@FEW
@given(valid_payloads(Tree))
def test_a_recursive_input_nests_a_bounded_number_of_times(payload: dict[str, Any]) -> None:
    assert _depth(payload) <= 2
    assert isinstance(msgspec.convert(payload, Tree, strict=True), Tree)


def test_a_recursive_input_still_nests() -> None:
    find(valid_payloads(Tree), lambda p: _depth(p) == 2, settings=FIRST)


# --- invalid payloads and their reasons ---------------------------------------------------


class Priority(enum.Enum):
    LOW = "low"
    HIGH = "high"


PROBLEMS: list[tuple[object, str]] = [
    (str, r"^\$: expected an object, got (null|bool|int|float|str|array)$"),
    (str, r"^\$: missing the required field 'v'$"),
    (str, r"^\$: unknown field '[a-z]+'$"),
    (int, r"^\$\.v: expected int, got (null|bool|float|str|array|object)$"),
    (Annotated[int, msgspec.Meta(ge=1, le=9, multiple_of=2)], r"^\$\.v: below the minimum \(ge=1\)$"),
    (Annotated[int, msgspec.Meta(ge=1, le=9, multiple_of=2)], r"^\$\.v: above the maximum \(le=9\)$"),
    (Annotated[int, msgspec.Meta(ge=1, le=9, multiple_of=2)], r"^\$\.v: not a multiple of 2$"),
    (Annotated[float, msgspec.Meta(gt=0.0, lt=1.0)], r"^\$\.v: not above the bound \(gt=0\.0\)$"),
    (Annotated[float, msgspec.Meta(gt=0.0, lt=1.0)], r"^\$\.v: not below the bound \(lt=1\.0\)$"),
    (Annotated[float, msgspec.Meta(multiple_of=0.5)], r"^\$\.v: not a multiple of 0\.5$"),
    (Annotated[str, msgspec.Meta(min_length=2, max_length=4)], r"^\$\.v: shorter than min_length=2$"),
    (Annotated[str, msgspec.Meta(min_length=2, max_length=4)], r"^\$\.v: longer than max_length=4$"),
    (Annotated[str, msgspec.Meta(pattern="^[a-z]+$")], r"^\$\.v: does not match the pattern '\^\[a-z\]\+\$'$"),
    (Literal["a", "b"], r"^\$\.v: not one of 'a', 'b'$"),
    (Priority, r"^\$\.v: not Priority$"),
    (dt.datetime, r"^\$\.v: not a valid datetime string$"),
    (Annotated[dt.datetime, msgspec.Meta(tz=True)], r"^\$\.v: datetime has no timezone but needs one$"),
    (Annotated[dt.time, msgspec.Meta(tz=False)], r"^\$\.v: time has a timezone but must be naive$"),
    (uuid.UUID, r"^\$\.v: not a valid uuid string$"),
    (bytes, r"^\$\.v: not a valid bytes string$"),
    (decimal.Decimal, r"^\$\.v: expected decimal, got (null|bool|array|object)$"),
    (Annotated[list[int], msgspec.Meta(min_length=1, max_length=2)], r"^\$\.v: fewer than min_length=1 items$"),
    (Annotated[list[int], msgspec.Meta(min_length=1, max_length=2)], r"^\$\.v: more than max_length=2 items$"),
    (list[int], r"^\$\.v\[\d\]: expected int, got"),
    (tuple[int, str], r"^\$\.v: expected 2 items, got 1$"),
    (tuple[int, str], r"^\$\.v\[1\]: expected str, got"),
    (dict[str, int], r"^\$\.v\[\.\.\.\]: expected int, got"),
    (dict[int, str], r"^\$\.v key: not an integer$"),
    (Annotated[dict[str, int], msgspec.Meta(max_length=1)], r"^\$\.v: more than max_length=1 entries$"),
    (Todo | None, r"^\$\.v: expected Todo object \| none, got (bool|int|float|str|array)$"),
    (Todo | None, r"^\$\.v: unknown field '[a-z]+'$"),
    (Todo | None, r"^\$\.v: missing the required field 'title'$"),
    (Todo | None, r"^\$\.v\.title: shorter than min_length=1$"),
]


@pytest.mark.parametrize(("annotation", "reason"), PROBLEMS, ids=[reason for _, reason in PROBLEMS])
def test_every_kind_of_problem_is_drawn_and_labelled(annotation: object, reason: str) -> None:
    probe = msgspec.defstruct("Probe", [("v", annotation)])
    found = find_invalid(probe, reason)
    if "unknown field" in found.reason:
        # msgspec ignores unknown keys on its own; the input rule does not.
        as_object(found.payload)
        return
    with pytest.raises(msgspec.ValidationError):
        msgspec.convert(found.payload, probe, strict=True, str_keys=True)


_INDEXED = re.compile(r"^\$\.scores\[(\d+)\]: ")


@settings(max_examples=50, deadline=None, database=None)
@given(invalid_payloads(Board))
def test_an_item_reason_points_at_the_only_bad_item(invalid: InvalidPayload) -> None:
    match = _INDEXED.match(invalid.reason)
    if match is None:
        return
    scores = cast("list[object]", as_object(invalid.payload)["scores"])
    bad = [i for i, s in enumerate(scores) if not (type(s) is int and s >= 0)]
    assert bad == [int(match.group(1))]


def test_an_item_reason_is_drawn() -> None:
    find_invalid(Board, _INDEXED.pattern)


@settings(max_examples=50, deadline=None, database=None)
@given(invalid_payloads(Board))
def test_a_wrong_type_lies_outside_every_member_and_any_takes_everything(invalid: InvalidPayload) -> None:
    assert not invalid.reason.startswith("$.anything")
    if invalid.reason.startswith("$.limit:"):
        limit = as_object(invalid.payload)["limit"]
        assert limit is not None and type(limit) is not int


class Anything(msgspec.Struct):
    text: Annotated[str, msgspec.Meta(pattern=".*")]


@FEW
@given(invalid_payloads(Anything))
def test_a_pattern_every_string_matches_has_no_counterexample(invalid: InvalidPayload) -> None:
    assert "pattern" not in invalid.reason


# --- patterns with length bounds -----------------------------------------------------------


BOUNDED_PATTERNS: list[tuple[str, int, int | None]] = [
    ("^[0-9]+$", 8, 8),
    ("^[a-z][a-z0-9-]*$", 3, 32),
    (r"^\d{3,}$", 12, None),
    ("^[a-z]+[0-9]+$", 8, 10),
    ("[0-9]{2}", 6, 9),
    ("^[A-Z]{2}", 5, None),
    ("[a-z]{3}$", 5, 6),
]


@pytest.mark.parametrize(("pattern", "low", "high"), BOUNDED_PATTERNS, ids=[p for p, _, _ in BOUNDED_PATTERNS])
def test_a_pattern_with_length_bounds_is_drawn_without_mass_filtering(pattern: str, low: int, high: int | None) -> None:
    # Hypothesis's health checks are on here: drawing matches and discarding
    # those of the wrong length trips them for a fixed-length id.
    meta = msgspec.Meta(pattern=pattern, min_length=low, max_length=high)
    probe = msgspec.defstruct("Probe", [("v", Annotated[str, meta])])

    @FEW
    @given(valid_payloads(probe))
    def drawn(payload: dict[str, Any]) -> None:
        value = msgspec.convert(payload, probe, strict=True)
        text = cast("str", getattr(value, "v"))
        assert re.search(pattern, text)
        assert low <= len(text) and (high is None or len(text) <= high)

    drawn()


@pytest.mark.parametrize(
    ("pattern", "low", "high"),
    # "$" is the end of the text, as JSON Schema and the decoder read it: Python's "$" would take "123\n".
    [("^[0-9]{3}$", 5, None), ("^[0-9]{3}$", 4, 4), ("^[0-9]{3}\\Z", 4, None), ("[0-9]{4,}", 0, 3)],
)
def test_a_pattern_no_string_of_a_bounded_length_matches_is_reported(pattern: str, low: int, high: int | None) -> None:
    meta = msgspec.Meta(pattern=pattern, min_length=low, max_length=high)
    probe = msgspec.defstruct("Probe", [("v", Annotated[str, meta])])
    with pytest.raises(ValueError, match=r"No valid payload exists for Probe: no string of a length within the bounds"):
        valid_payloads(probe)


class Coded(msgspec.Struct):
    code: Annotated[str, msgspec.Meta(pattern="^[0-9]{3}$", min_length=5)] | None = None


@FEW
@given(valid_payloads(Coded))
def test_an_optional_pattern_no_bounded_string_matches_is_left_out_or_null(payload: dict[str, Any]) -> None:
    assert payload.get("code") is None


# --- mapping keys ----------------------------------------------------------------------------


KEY_TYPES: list[object] = [
    float,
    Annotated[float, msgspec.Meta(gt=-1.0, le=1.0)],
    decimal.Decimal,
    dt.timedelta,
    bytes,
    Annotated[bytes, msgspec.Meta(min_length=2)],
    dt.time,
    Annotated[int, msgspec.Meta(ge=10)] | uuid.UUID,
    int | str,
]


@pytest.mark.parametrize("key", KEY_TYPES, ids=repr)
def test_a_mapping_is_drawn_with_the_keys_the_codec_reads(key: object) -> None:
    probe = msgspec.defstruct("Probe", [("v", dict[key, int])], tag=True)
    [capability] = agentfx.define(agentfx.expose(probe, agentfx.variant(probe, "Probe"))).capabilities
    payload = find(valid_payloads(capability), lambda p: len(p["v"]) >= 2, settings=FIRST)
    assert all(isinstance(k, str) for k in payload["v"])
    decoded = capability.codec.attempt(payload)
    assert isinstance(decoded, probe), decoded
    assert len(cast("dict[object, int]", getattr(decoded, "v"))) == len(payload["v"])


READ_OTHERWISE = [r"^\d{5}$", r"^\w+$", r"^\s*x$", r"^a.b$", r"^[a-z]{3}$", r"^[\d-]{3,}$", r"(\d\d|x)$", r"\S"]
"""Patterns Python's ``re`` and JSON Schema's ECMA-262 read differently (digits, word and space characters, ``.``, ``$``)."""


@pytest.mark.parametrize("pattern", READ_OTHERWISE)
def test_every_string_drawn_for_a_pattern_is_one_the_codec_takes(pattern: str) -> None:
    # Python's reading would draw "0000٠" for ^\d{5}$, "a\rb" for ^a.b$ or
    # "abc\n" for ^[a-z]{3}$: strings the codec refuses, as the schema does.
    probe = msgspec.defstruct("Probe", [("v", Annotated[str, msgspec.Meta(pattern=pattern)])], tag=True)
    [capability] = agentfx.define(agentfx.expose(probe, agentfx.variant(probe, "Probe"))).capabilities

    @settings(max_examples=300, deadline=None, database=None)
    @given(valid_payloads(capability))
    def drawn(payload: dict[str, Any]) -> None:
        assert isinstance(capability.codec.attempt(payload), probe), payload

    drawn()


@pytest.mark.parametrize("shape", [float, list, dict], ids=lambda shape: shape.__name__)
def test_a_field_typed_any_is_drawn_in_every_json_shape_the_codec_takes(shape: type) -> None:
    probe = msgspec.defstruct("Probe", [("v", Any)], tag=True)
    [capability] = agentfx.define(agentfx.expose(probe, agentfx.variant(probe, "Probe"))).capabilities
    payload = find(valid_payloads(capability), lambda p: type(p["v"]) is shape, settings=FIRST)
    assert isinstance(capability.codec.attempt(payload), probe)


SPELLED_TWICE = [float, decimal.Decimal, Annotated[float, msgspec.Meta(ge=0.0)]]
"""Key types with two spellings of one key: ``"1"`` and ``"1.0"``, ``"1.0"`` and ``"1.00"``."""


@pytest.mark.parametrize("key", SPELLED_TWICE, ids=repr)
def test_no_two_keys_of_a_drawn_mapping_are_one_key_to_the_codec(key: object) -> None:
    # Decoded, two spellings of one key are one entry: a valid payload would
    # decode shorter than drawn, and one drawn too long could decode as valid.
    probe = msgspec.defstruct("Probe", [("v", Annotated[dict[key, int], msgspec.Meta(max_length=2)])], tag=True)
    [capability] = agentfx.define(agentfx.expose(probe, agentfx.variant(probe, "Probe"))).capabilities

    @settings(max_examples=300, deadline=None, database=None)
    @given(valid_payloads(capability), invalid_payloads(capability))
    def check(payload: dict[str, Any], invalid: InvalidPayload) -> None:
        decoded = capability.codec.attempt(payload)
        assert isinstance(decoded, probe), decoded
        assert len(cast("dict[object, int]", getattr(decoded, "v"))) == len(payload["v"])
        assert not isinstance(capability.codec.attempt(invalid.payload), probe), invalid

    check()


@pytest.mark.parametrize("key", KEY_TYPES, ids=repr)
def test_a_mapping_key_the_codec_refuses_is_drawn_as_invalid(key: object) -> None:
    probe = msgspec.defstruct("Probe", [("v", dict[key, int])], tag=True)
    [capability] = agentfx.define(agentfx.expose(probe, agentfx.variant(probe, "Probe"))).capabilities

    @FEW
    @given(invalid_payloads(capability))
    def refused(invalid: InvalidPayload) -> None:
        assert not isinstance(capability.codec.attempt(invalid.payload), probe), invalid

    refused()


def test_float_keys_are_spelled_as_json_numbers() -> None:
    probe = msgspec.defstruct("Probe", [("v", dict[float, int])])
    found = find(valid_payloads(probe), lambda p: any("e" in k or "." in k for k in p["v"]), settings=FIRST)
    assert all(re.fullmatch(NUMBER_KEY, k) for k in found["v"]), found


def test_the_contract_suite_runs_over_mappings_keyed_by_numbers_durations_and_bytes() -> None:
    class Weigh(msgspec.Struct, frozen=True, tag=True):
        by_threshold: dict[float, int]
        by_amount: dict[decimal.Decimal, int]
        by_wait: dict[dt.timedelta, int]
        by_blob: dict[bytes, int]

    contract = agentfx.define(agentfx.expose(Weigh, agentfx.variant(Weigh, "Weigh")))
    check_contract(contract, models=[None], principals=[None], max_examples=10)
