"""Laws of the payload strategies over a broad set of input types.

Every valid payload is JSON, decodes, and survives a re-encode; every invalid
payload is refused and says why. The decoder here is the input rule itself: a
closed JSON Schema (every object ``additionalProperties: false``, the root's
tag removed) and msgspec's strict conversion of the wire form.
"""

from __future__ import annotations

import copy
import dataclasses
import datetime as dt
import decimal
import enum
import functools
import uuid
from typing import Annotated, Any, Literal, Protocol, TypedDict, cast

import jsonschema
import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentfx.schema import InputCodec
from agentfx.schema import InvalidPayload as Refused
from agentfx.testing import InvalidPayload, invalid_payloads, valid_payloads

PROPERTY = settings(max_examples=30, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])


# --- input types -----------------------------------------------------------------


class Priority(enum.Enum):
    LOW = "low"
    HIGH = "high"


class Level(enum.IntEnum):
    ONE = 1
    TWO = 2


class Flat(msgspec.Struct):
    title: str
    count: int
    ratio: float
    done: bool


class Constrained(msgspec.Struct):
    stars: Annotated[int, msgspec.Meta(ge=1, le=5)]
    above: Annotated[int, msgspec.Meta(gt=-3, lt=1000)]
    step: Annotated[int, msgspec.Meta(multiple_of=7, ge=0)]
    share: Annotated[float, msgspec.Meta(ge=0.0, le=1.0)]
    open_range: Annotated[float, msgspec.Meta(gt=-1.5, lt=2.5)]
    quarter: Annotated[float, msgspec.Meta(multiple_of=0.25)]
    name: Annotated[str, msgspec.Meta(min_length=2, max_length=6)]
    slug: Annotated[str, msgspec.Meta(pattern="^[a-z][a-z0-9-]{0,10}$")]
    code: Annotated[str, msgspec.Meta(pattern="[0-9]{3}", max_length=8)]


class Patterned(msgspec.Struct):
    pin: Annotated[str, msgspec.Meta(pattern="^[0-9]+$", min_length=8, max_length=8)]
    slug: Annotated[str, msgspec.Meta(pattern="^[a-z][a-z0-9-]*$", min_length=3, max_length=20)]
    padded: Annotated[str, msgspec.Meta(pattern="[0-9]{2}", min_length=6, max_length=9)]
    split: Annotated[str, msgspec.Meta(pattern="^[a-z]+[0-9]+$", min_length=8, max_length=10)]
    grouped: Annotated[str, msgspec.Meta(pattern="^(ab|cd)+$", min_length=4, max_length=6)]


class Choices(msgspec.Struct):
    mode: Literal["fast", "slow"]
    number: Literal[1, 2, 3]
    mixed: Literal["auto", 0]
    priority: Priority
    level: Level


class Optionals(msgspec.Struct):
    maybe_int: int | None
    maybe_text: Annotated[str, msgspec.Meta(min_length=1)] | None
    either: str | int
    numeric: int | float
    maybe_list: list[int] | None = None
    maybe_choice: Literal["a", "b"] | None = None


class Todo(msgspec.Struct):
    title: Annotated[str, msgspec.Meta(min_length=1, max_length=20)]
    done: bool = False


class Nested(msgspec.Struct):
    todo: Todo
    maybe: Todo | None


class Collections(msgspec.Struct):
    todos: list[Todo]
    by_name: dict[str, Todo]
    pair: tuple[Todo, int]
    tags: set[str]
    frozen: frozenset[int]
    history: tuple[int, ...]
    bounded: Annotated[list[int], msgspec.Meta(min_length=1, max_length=3)]
    sized: Annotated[dict[str, int], msgspec.Meta(min_length=1, max_length=2)]
    matrix: list[list[Annotated[int, msgspec.Meta(ge=0)]]]


class Temporal(msgspec.Struct):
    at: dt.datetime
    aware: Annotated[dt.datetime, msgspec.Meta(tz=True)]
    naive: Annotated[dt.datetime, msgspec.Meta(tz=False)]
    day: dt.date
    time: dt.time
    wait: dt.timedelta
    id: uuid.UUID
    amount: decimal.Decimal
    blob: bytes


class Renamed(msgspec.Struct, rename="camel"):
    due_date: dt.date
    is_urgent: bool
    owner_id: int = msgspec.field(name="owner")


class Defaults(msgspec.Struct, omit_defaults=True):
    title: str
    done: bool = False
    tags: list[str] = msgspec.field(default_factory=list[str])
    note: str | None = None
    limit: Annotated[int, msgspec.Meta(ge=0)] = 10


class RequestedCreateTodo(msgspec.Struct, tag=True):
    title: str
    due: dt.date | None = None


class SetLevel(msgspec.Struct, tag_field="kind", tag=7):
    level: Level


class ClearedSelection(msgspec.Struct, tag=True):
    pass


class Empty(msgspec.Struct):
    pass


class Cat(msgspec.Struct, tag=True):
    lives: Annotated[int, msgspec.Meta(ge=0, le=9)]


class Dog(msgspec.Struct, tag=True):
    name: str
    good: bool = True


class Adopted(msgspec.Struct, tag=True):
    pet: Cat | Dog
    others: list[Cat | Dog] = []
    inner: Cat | None = None


class Stop(msgspec.Struct):
    name: str
    at: dt.datetime


class Route(msgspec.Struct, tag=True):
    first: Stop
    stops: list[Stop]
    by_name: dict[str, Stop]
    ends: tuple[Stop, Stop]


class Tree(msgspec.Struct):
    value: int
    children: list[Tree] = []


@dataclasses.dataclass
class Point:
    x: int
    y: int = 0


class Label(TypedDict):
    text: str
    color: Literal["red", "green"]


class Records(msgspec.Struct):
    point: Point
    label: Label


class Keys(msgspec.Struct):
    by_id: dict[int, str]
    by_uuid: dict[uuid.UUID, bool]
    by_level: dict[Level, int]
    by_mode: dict[Literal["a", "b"], int]
    by_code: dict[Annotated[str, msgspec.Meta(pattern="^[A-Z]{2}$")], int]


class MoreKeys(msgspec.Struct):
    by_threshold: dict[float, int]
    by_share: dict[Annotated[float, msgspec.Meta(ge=0.0, lt=1.0)], int]
    by_amount: dict[decimal.Decimal, int]
    by_wait: dict[dt.timedelta, int]
    by_blob: dict[Annotated[bytes, msgspec.Meta(min_length=1, max_length=4)], int]
    by_day: dict[dt.date, int]
    by_moment: dict[Annotated[dt.datetime, msgspec.Meta(tz=True)], int]
    by_either: dict[Annotated[int, msgspec.Meta(ge=10)] | uuid.UUID, int]
    by_any_text: dict[int | Annotated[str, msgspec.Meta(pattern="^x")], int]


class Anything(msgspec.Struct):
    value: Any
    payload: dict[str, Any]
    items: list[Any]


INPUT_TYPES: list[type[msgspec.Struct]] = [
    Flat,
    Constrained,
    Patterned,
    Choices,
    Optionals,
    Nested,
    Collections,
    Temporal,
    Renamed,
    Defaults,
    RequestedCreateTodo,
    SetLevel,
    ClearedSelection,
    Empty,
    Adopted,
    Route,
    Tree,
    Records,
    Keys,
    MoreKeys,
    Anything,
]

# Types whose payloads are already in the encoder's canonical form when every
# field is present: re-encoding the decoded value gives the payload back.
CANONICAL: list[type[msgspec.Struct]] = [Flat, Choices, Temporal, Renamed, SetLevel, Route]


# --- the input rule ------------------------------------------------------------------


def _close(node: object) -> None:
    """Marks every object schema with declared properties as closed."""
    if isinstance(node, dict):
        schema = cast("dict[str, object]", node)
        if "properties" in schema:
            schema["additionalProperties"] = False
        for value in schema.values():
            _close(value)
    elif isinstance(node, list):
        for value in cast("list[object]", node):
            _close(value)


class _Validator(Protocol):
    def is_valid(self, instance: object) -> bool: ...


@functools.cache
def _validator(tp: type[msgspec.Struct]) -> _Validator:
    raw = msgspec.json.schema(tp)
    defs: dict[str, Any] = raw.get("$defs", {})
    _close(defs)
    root = copy.deepcopy(defs[raw["$ref"].removeprefix("#/$defs/")])
    config = tp.__struct_config__
    if config.tag_field is not None:
        # The root's own tag is no input field: the capability already names the Message.
        del root["properties"][config.tag_field]
        root["required"] = [name for name in root.get("required", []) if name != config.tag_field]
    root["$defs"] = defs
    return cast(_Validator, jsonschema.Draft202012Validator(root))


CODEC_TYPES = INPUT_TYPES


@functools.cache
def codec_of(tp: type[msgspec.Struct]) -> InputCodec[msgspec.Struct]:
    return InputCodec(tp)


@functools.cache
def valid_of(tp: type[msgspec.Struct]) -> st.SearchStrategy[dict[str, Any]]:
    return valid_payloads(tp)


@functools.cache
def invalid_of(tp: type[msgspec.Struct]) -> st.SearchStrategy[InvalidPayload]:
    return invalid_payloads(tp)


def accepts(tp: type[msgspec.Struct], payload: object) -> bool:
    """Whether the input rule takes ``payload``: a closed object that converts strictly."""
    if not isinstance(payload, dict):
        return False
    if not _validator(tp).is_valid(cast("dict[str, Any]", payload)):
        return False
    try:
        msgspec.convert(payload, tp, strict=True, str_keys=True)
    except msgspec.ValidationError:
        return False
    return True


def decode(tp: type[msgspec.Struct], payload: object) -> msgspec.Struct:
    assert accepts(tp, payload), payload
    return msgspec.convert(payload, tp, strict=True, str_keys=True)


def reencode(value: msgspec.Struct) -> dict[str, Any]:
    """The wire form of a decoded input: builtins without the root tag."""
    wire = msgspec.json.decode(msgspec.json.encode(value), type=dict[str, Any])
    tag_field = value.__struct_config__.tag_field
    return {k: v for k, v in wire.items() if k != tag_field}


def _max_depth_sizes(value: object) -> tuple[int, int]:
    """The longest list or object and the longest string anywhere in ``value``."""
    if isinstance(value, str):
        return 0, len(value)
    if isinstance(value, dict):
        children = list(cast("dict[str, object]", value).values())
    elif isinstance(value, list):
        children = cast("list[object]", value)
    else:
        return 0, 0
    inner = [_max_depth_sizes(child) for child in children]
    return max([len(children), *(i[0] for i in inner)]), max([0, *(i[1] for i in inner)])


# --- laws -----------------------------------------------------------------------------


@pytest.mark.parametrize("tp", INPUT_TYPES, ids=lambda t: t.__name__)
@PROPERTY
@given(data=st.data())
def test_every_valid_payload_is_small_json_and_decodes(tp: type[msgspec.Struct], data: st.DataObject) -> None:
    payload = data.draw(valid_of(tp))
    assert msgspec.json.decode(msgspec.json.encode(payload)) == payload
    longest_collection, longest_string = _max_depth_sizes(payload)
    # Objects count their fields too (no input type here has more than nine);
    # free text stays within 20 characters, a UUID string is 36.
    assert longest_collection <= 9
    assert longest_string <= 36
    value = decode(tp, payload)
    # The wire form of the decoded value is itself a valid payload for the same value.
    assert decode(tp, reencode(value)) == value


@pytest.mark.parametrize("tp", CODEC_TYPES, ids=lambda t: t.__name__)
@PROPERTY
@given(data=st.data())
def test_the_input_codec_decodes_every_valid_payload(tp: type[msgspec.Struct], data: st.DataObject) -> None:
    payload = data.draw(valid_of(tp))
    assert codec_of(tp).decode(payload) == decode(tp, payload)


@pytest.mark.parametrize("tp", INPUT_TYPES, ids=lambda t: t.__name__)
@PROPERTY
@given(data=st.data())
def test_the_input_codec_refuses_every_invalid_payload(tp: type[msgspec.Struct], data: st.DataObject) -> None:
    invalid = data.draw(invalid_of(tp))
    with pytest.raises(Refused):
        codec_of(tp).decode(invalid.payload)


def test_the_input_codec_reads_object_keys_as_the_wire_sends_them() -> None:
    class ById(msgspec.Struct):
        names: dict[int, str]

    assert InputCodec(ById).decode({"names": {"1": "one"}}) == ById({1: "one"})


@pytest.mark.parametrize("tp", CANONICAL, ids=lambda t: t.__name__)
@PROPERTY
@given(data=st.data())
def test_canonical_payloads_reencode_equal(tp: type[msgspec.Struct], data: st.DataObject) -> None:
    payload = data.draw(valid_of(tp))
    assert reencode(decode(tp, payload)) == payload


@pytest.mark.parametrize("tp", INPUT_TYPES, ids=lambda t: t.__name__)
@PROPERTY
@given(data=st.data())
def test_every_invalid_payload_is_refused_with_a_reason(tp: type[msgspec.Struct], data: st.DataObject) -> None:
    invalid = data.draw(invalid_of(tp))
    assert not accepts(tp, invalid.payload), invalid
    path, _, why = invalid.reason.partition(": ")
    assert path.startswith("$") and why, invalid.reason
