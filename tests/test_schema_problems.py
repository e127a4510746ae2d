"""What an invalid input is told to fix: agentfx's own one-line problem, per kind of refusal."""

from __future__ import annotations

import datetime
import decimal
import enum
import re
import uuid
from typing import Annotated, Any, Literal, NamedTuple

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from msgspec import Meta

import agentfx
from agentfx.app import App
from agentfx.schema import InputCodec, InvalidPayload
from agentfx.testing import invalid_payloads
from agentfx.tools import reply
from examples.orders import app as orders
from tests.support import outcome_of

# msgspec's wording, which a problem never repeats.
MSGSPEC_WORDS = re.compile(r"Expected|Struct|`|\bgot\b|Invalid|enum|msgspec|regex|length [<>]")


class Colour(enum.Enum):
    RED = "red"
    BLUE = "blue"


class Level(enum.IntEnum):
    LOW = 1
    HIGH = 2


class Circle(msgspec.Struct, frozen=True, tag=True):
    radius: float


class Square(msgspec.Struct, frozen=True, tag=True):
    side: float


class Line(msgspec.Struct, frozen=True):
    sku: Annotated[str, Meta(pattern=r"^[A-Z]{3}-[0-9]{2}$")]
    quantity: Annotated[int, Meta(ge=1, le=10)]


class Point(NamedTuple):
    x: int
    y: int = 0


class Cell(msgspec.Struct, frozen=True, array_like=True):
    row: int
    col: int = 0


class Everything(msgspec.Struct, frozen=True):
    title: str = ""
    count: int = 0
    ratio: float = 0.0
    done: bool = False
    at_least: Annotated[int, Meta(ge=1)] = 1
    above: Annotated[float, Meta(gt=1.5)] = 2.0
    at_most: Annotated[int, Meta(le=10)] = 1
    below: Annotated[float, Meta(lt=3.0)] = 1.0
    step: Annotated[int, Meta(multiple_of=3)] = 3
    short: Annotated[str, Meta(max_length=2)] = ""
    long: Annotated[str, Meta(min_length=2)] = "ab"
    one: Annotated[str, Meta(min_length=1)] = "a"
    some: Annotated[list[int], Meta(min_length=1)] = msgspec.field(default_factory=lambda: [1])
    few: Annotated[list[int], Meta(max_length=1)] = msgspec.field(default_factory=lambda: list[int]())
    filled: Annotated[dict[str, int], Meta(min_length=1)] = msgspec.field(default_factory=lambda: {"a": 1})
    code: Annotated[str, Meta(pattern=r"^\d+\.x'$")] = "1.x'"
    priority: Literal["standard", "express"] = "standard"
    size: Literal[1, 2] = 1
    colour: Colour = Colour.RED
    level: Level = Level.LOW
    maybe: int | None = None
    maybe_priority: Literal["a", "b"] | None = None
    pair: tuple[int, int] = (1, 2)
    point: Point = Point(0)
    cell: Cell = Cell(0)
    shape: Circle | Square | None = None
    lines: list[Line] = msgspec.field(default_factory=lambda: list[Line]())
    by_key: dict[int, int] = msgspec.field(default_factory=lambda: dict[int, int]())
    by_index: dict[Annotated[int, Meta(ge=0)], int] = msgspec.field(default_factory=lambda: dict[int, int]())
    by_code: dict[Annotated[str, Meta(pattern="^k")], int] = msgspec.field(default_factory=lambda: dict[str, int]())
    by_short: dict[Annotated[str, Meta(max_length=3)], int] = msgspec.field(default_factory=lambda: dict[str, int]())
    by_long: dict[Annotated[str, Meta(min_length=3)], int] = msgspec.field(default_factory=lambda: dict[str, int]())
    by_choice: dict[Literal["a", "b"], int] = msgspec.field(default_factory=lambda: dict[Literal["a", "b"], int]())
    by_number: dict[Literal[1, 2], int] = msgspec.field(default_factory=lambda: dict[Literal[1, 2], int]())
    by_choice_or_none: dict[Literal["a"], int] | None = None
    by_name: dict[str, Line] = msgspec.field(default_factory=lambda: dict[str, Line]())
    ident: uuid.UUID | None = None
    when: datetime.datetime | None = None
    zoned: Annotated[datetime.datetime, Meta(tz=True)] | None = None
    day: datetime.date | None = None
    clock: datetime.time | None = None
    span: datetime.timedelta | None = None
    blob: bytes = b""
    amount: decimal.Decimal = decimal.Decimal(0)


class Required(msgspec.Struct, frozen=True):
    title: str
    line: Line | None = None


PROBLEMS: list[tuple[str, object, str, str]] = [
    # missing and unknown fields
    ("missing", {}, "$", '"title" is required'),
    ("missing nested", {"title": "t", "line": {"sku": "ABC-12"}}, "$.line", '"line.quantity" is required'),
    ("unknown", {"title": "t", "bogus": 1}, "$", '"bogus" is not a field of this input'),
    ("unknown nested", {"title": "t", "line": {"sku": "ABC-12", "quantity": 1, "x": 0}}, "$.line", '"line.x" is not a field of this input'),
    ("root a list", [], "$", "the input must be an object"),
    ("root a string", "title", "$", "the input must be an object"),
    ("root null", None, "$", "the input must be an object"),
    ("non-string key", {1: "t"}, "$", "the input's field names must be strings"),
]

EVERYTHING: list[tuple[str, dict[str, Any], str, str]] = [
    # wrong types
    ("string for int", {"count": "3"}, "$.count", '"count" must be an integer'),
    ("float for int", {"count": 1.5}, "$.count", '"count" must be an integer'),
    ("bool for int", {"count": True}, "$.count", '"count" must be an integer'),
    ("null for int", {"count": None}, "$.count", '"count" must be an integer'),
    ("string for float", {"ratio": "x"}, "$.ratio", '"ratio" must be a number'),
    ("int for string", {"title": 3}, "$.title", '"title" must be a string'),
    ("int for bool", {"done": 1}, "$.done", '"done" must be a boolean'),
    ("string for optional", {"maybe": "x"}, "$.maybe", '"maybe" must be an integer or null'),
    ("object for array", {"some": {}}, "$.some", '"some" must be an array'),
    ("int for union", {"shape": 3}, "$.shape", '"shape" must be an object or null'),
    ("int for bytes", {"blob": 3}, "$.blob", '"blob" must be a base64-encoded string'),
    ("array for decimal", {"amount": []}, "$.amount", '"amount" must be a decimal number'),
    ("int for uuid", {"ident": 3}, "$.ident", '"ident" must be a UUID or null'),
    # numeric constraints
    ("ge", {"at_least": 0}, "$.at_least", '"at_least" must be at least 1'),
    ("gt", {"above": 1.5}, "$.above", '"above" must be greater than 1.5'),
    ("le", {"at_most": 11}, "$.at_most", '"at_most" must be at most 10'),
    ("lt", {"below": 3.0}, "$.below", '"below" must be less than 3.0'),
    ("multiple_of", {"step": 4}, "$.step", '"step" must be a multiple of 3'),
    # length constraints
    ("max_length str", {"short": "abc"}, "$.short", '"short" must be at most 2 characters long'),
    ("min_length str", {"long": "a"}, "$.long", '"long" must be at least 2 characters long'),
    ("min_length 1 str", {"one": ""}, "$.one", '"one" must be at least 1 character long'),
    ("min_length list", {"some": []}, "$.some", '"some" must have at least 1 item'),
    ("max_length list", {"few": [1, 2]}, "$.few", '"few" must have at most 1 item'),
    ("min_length dict", {"filled": {}}, "$.filled", '"filled" must have at least 1 entry'),
    ("tuple length", {"pair": [1, 2, 3]}, "$.pair", '"pair" must have exactly 2 items'),
    # a record sent as an array, whose trailing fields have defaults
    ("named tuple too long", {"point": [1, 2, 3]}, "$.point", '"point" must have 1 to 2 items'),
    ("named tuple empty", {"point": []}, "$.point", '"point" must have 1 to 2 items'),
    ("array-like record too long", {"cell": [1, 2, 3]}, "$.cell", '"cell" must have at most 2 items'),
    ("array-like record empty", {"cell": []}, "$.cell", '"cell" must have at least 1 item'),
    # pattern
    ("pattern", {"code": "nope"}, "$.code", "\"code\" must match ^\\d+\\.x'$"),
    # enums and literals
    ("literal", {"priority": "rush"}, "$.priority", '"priority" must be one of "express", "standard"'),
    ("literal wrong type", {"priority": 3}, "$.priority", '"priority" must be one of "express", "standard"'),
    ("int literal", {"size": 3}, "$.size", '"size" must be one of 1, 2'),
    ("optional literal", {"maybe_priority": "c"}, "$.maybe_priority", '"maybe_priority" must be one of "a", "b"'),
    ("enum", {"colour": "green"}, "$.colour", '"colour" must be one of "blue", "red"'),
    ("int enum", {"level": 5}, "$.level", '"level" must be one of 1, 2'),
    ("tag", {"shape": {"type": "Hexagon"}}, "$.shape.type", '"shape.type" must be one of "Circle", "Square"'),
    ("missing tag", {"shape": {}}, "$.shape", '"shape.type" is required'),
    # formats
    ("uuid", {"ident": "nope"}, "$.ident", '"ident" must be a UUID'),
    ("datetime", {"when": "tomorrow"}, "$.when", '"when" must be an RFC 3339 date-time'),
    ("timezone", {"zoned": "2024-01-01T00:00:00"}, "$.zoned", '"zoned" must be a date-time with a timezone'),
    ("date", {"day": "x"}, "$.day", '"day" must be an RFC 3339 date'),
    ("time", {"clock": "x"}, "$.clock", '"clock" must be an RFC 3339 time'),
    ("duration", {"span": "x"}, "$.span", '"span" must be an ISO 8601 duration'),
    # The schema's "duration" format admits weeks, months and years; msgspec reads none.
    ("duration in weeks", {"span": "P1W"}, "$.span", '"span" must be an ISO 8601 duration in days, hours, minutes and seconds (such as P7D or PT1H30M)'),
    ("duration in years", {"span": "P1Y2M"}, "$.span", '"span" must be an ISO 8601 duration in days, hours, minutes and seconds (such as P7D or PT1H30M)'),
    ("base64", {"blob": "!!!"}, "$.blob", '"blob" must be a base64-encoded string'),
    ("decimal", {"amount": "x"}, "$.amount", '"amount" must be a decimal number'),
    # nested paths
    ("nested item", {"lines": [{"sku": "ABC-12", "quantity": 1}, {"sku": "ABC-12", "quantity": 0}]}, "$.lines[1].quantity", '"lines[1].quantity" must be at least 1'),
    ("nested pattern", {"lines": [{"sku": "abc", "quantity": 1}]}, "$.lines[0].sku", '"lines[0].sku" must match ^[A-Z]{3}-[0-9]{2}$'),
    ("nested missing", {"lines": [{"sku": "ABC-12"}]}, "$.lines[0]", '"lines[0].quantity" is required'),
    ("mapping value", {"by_name": {"k": {"sku": "ABC-12", "quantity": 11}}}, "$.by_name[...].quantity", '"by_name[...].quantity" must be at most 10'),
    ("mapping key", {"by_key": {"x": 1}}, "$.by_key", 'every key of "by_key" must be an integer'),
    ("bounded mapping key", {"by_index": {"-1": 1}}, "$.by_index", 'every key of "by_index" must be an integer at least 0'),
    ("bounded mapping key kind", {"by_index": {"x": 1}}, "$.by_index", 'every key of "by_index" must be an integer'),
    ("mapping key pattern", {"by_code": {"zzz": 1}}, "$.by_code", 'every key of "by_code" must match ^k'),
    ("mapping key longest", {"by_short": {"toolong": 1}}, "$.by_short", 'every key of "by_short" must be at most 3 characters long'),
    ("mapping key shortest", {"by_long": {"a": 1}}, "$.by_long", 'every key of "by_long" must be at least 3 characters long'),
    ("mapping key choices", {"by_choice": {"c": 1}}, "$.by_choice", 'every key of "by_choice" must be one of "a", "b"'),
    ("mapping key numbers", {"by_number": {"3": 1}}, "$.by_number", 'every key of "by_number" must be one of "1", "2"'),
    ("optional mapping key choices", {"by_choice_or_none": {"b": 1}}, "$.by_choice_or_none", 'every key of "by_choice_or_none" must be one of "a"'),
]


@pytest.mark.parametrize(("kind", "payload", "path", "problem"), PROBLEMS, ids=[row[0] for row in PROBLEMS])
def test_fields_and_the_root(kind: str, payload: object, path: str, problem: str) -> None:
    refused = InputCodec(Required).attempt(payload)
    assert isinstance(refused, InvalidPayload), kind
    assert (refused.path, refused.problem) == (path, problem)


@pytest.mark.parametrize(("kind", "payload", "path", "problem"), EVERYTHING, ids=[row[0] for row in EVERYTHING])
def test_every_kind_of_refusal_has_its_own_words(kind: str, payload: dict[str, Any], path: str, problem: str) -> None:
    refused = InputCodec(Everything).attempt(payload)
    assert isinstance(refused, InvalidPayload), kind
    assert (refused.path, refused.problem) == (path, problem)
    assert MSGSPEC_WORDS.search(problem.replace("^\\d+\\.x'$", "")) is None


def test_the_tag_key_of_a_direct_variant_is_not_an_input_field() -> None:
    refused = InputCodec(Circle).attempt({"type": "Circle", "radius": 1.0})
    assert isinstance(refused, InvalidPayload)
    assert refused.problem == '"type" is not a field of this input'


def test_a_payload_free_input_names_the_field_it_was_sent() -> None:
    class NoInput(msgspec.Struct, frozen=True):
        pass

    refused = InputCodec(NoInput).attempt({"x": 1})
    assert isinstance(refused, InvalidPayload)
    assert refused.problem == '"x" is not a field of this input'


def test_a_closed_struct_names_its_undeclared_field_too() -> None:
    class Closed(msgspec.Struct, frozen=True, forbid_unknown_fields=True, tag=True):
        title: str

    for payload, problem in [({"title": "t", "zz": 1}, '"zz" is not a field of this input'), ({"type": "Closed", "title": "t"}, '"type" is not a field of this input')]:
        refused = InputCodec(Closed).attempt(payload)
        assert isinstance(refused, InvalidPayload)
        assert (refused.path, refused.problem) == ("$", problem)


def test_an_undeclared_name_is_echoed_bounded() -> None:
    refused = InputCodec(Required).attempt({"title": "t", "x" * 10_000: 1})
    assert isinstance(refused, InvalidPayload)
    assert refused.problem == f'"{"x" * 128}…" is not a field of this input'


class Node(msgspec.Struct, frozen=True):
    children: list[Node] = msgspec.field(default_factory=lambda: [])


def test_a_too_deep_payload_says_so() -> None:
    payload: dict[str, Any] = {}
    for _ in range(50_000):
        payload = {"children": [payload]}
    refused = InputCodec(Node).attempt(payload)
    assert isinstance(refused, InvalidPayload)
    assert (refused.path, refused.problem) == ("$", "the input is nested too deeply")


# --- never the value sent -----------------------------------------------------------------------

SENT = st.text(min_size=1, max_size=40)


@settings(max_examples=60, deadline=None)
@given(SENT.filter(lambda v: v not in ("standard", "express")))
def test_a_literal_problem_never_repeats_the_value(value: str) -> None:
    refused = InputCodec(Everything).attempt({"priority": value})
    assert isinstance(refused, InvalidPayload)
    assert refused.problem == '"priority" must be one of "express", "standard"'


@settings(max_examples=60, deadline=None)
@given(SENT.filter(lambda v: re.fullmatch(r"[A-Z]{3}-[0-9]{2}", v) is None))
def test_a_pattern_problem_never_repeats_the_value(value: str) -> None:
    refused = InputCodec(Line).attempt({"sku": value, "quantity": 1})
    assert isinstance(refused, InvalidPayload)
    assert refused.problem == '"sku" must match ^[A-Z]{3}-[0-9]{2}$'


@settings(max_examples=60, deadline=None)
@given(st.one_of(SENT, st.floats(allow_nan=False), st.booleans(), st.none(), st.lists(st.integers(), max_size=3)))
def test_a_type_problem_never_repeats_the_value(value: object) -> None:
    refused = InputCodec(Line).attempt({"sku": "ABC-12", "quantity": value})
    assert isinstance(refused, InvalidPayload)
    assert refused.problem == '"quantity" must be an integer'


@settings(max_examples=60, deadline=None)
@given(st.integers().filter(lambda n: not 1 <= n <= 10))
def test_a_bound_problem_never_repeats_the_value(value: int) -> None:
    refused = InputCodec(Line).attempt({"sku": "ABC-12", "quantity": value})
    assert isinstance(refused, InvalidPayload)
    assert refused.problem in {'"quantity" must be at least 1', '"quantity" must be at most 10'}


PLACE, CANCEL, PRIORITY = (capability for capability in orders.AppAgent.capabilities)


@settings(max_examples=40, deadline=None)
@given(st.sampled_from([PLACE, CANCEL, PRIORITY]).flatmap(lambda c: st.tuples(st.just(c), invalid_payloads(c))))
def test_every_invalid_payload_of_the_orders_desk_gets_specific_words(drawn: tuple[Any, Any]) -> None:
    capability, invalid = drawn
    refused = capability.codec.attempt(invalid.payload)
    assert isinstance(refused, InvalidPayload), invalid.reason
    assert refused.problem, invalid.reason
    assert not refused.problem.endswith("is not valid"), (invalid.reason, refused.problem)
    assert MSGSPEC_WORDS.search(refused.problem.replace("^[A-Z]{3}-[0-9]{4}$", "")) is None, refused.problem


# --- through a runtime and into the reply ---------------------------------------------------------------


@pytest.mark.anyio
async def test_the_reply_text_says_what_to_fix() -> None:
    app = App(orders.AppAgent, init=orders.INITIAL, update=orders.update, principal=orders.Customer(id="ada"))
    address: dict[str, Any] = {"name": "Ada", "street": "1 Road", "city": "London", "postal_code": "SW1 4JH", "country": "GB"}
    cases: list[tuple[dict[str, Any], str]] = [
        ({"items": [{"sku": "TEA-0001", "quantity": 100}], "shipping": address}, 'Invalid input for "place_order": "items[0].quantity" must be at most 99'),
        ({"items": [{"sku": "tea", "quantity": 1}], "shipping": address}, 'Invalid input for "place_order": "items[0].sku" must match ^[A-Z]{3}-[0-9]{4}$'),
        ({"items": [], "shipping": address}, 'Invalid input for "place_order": "items" must have at least 1 item'),
        ({"items": [{"sku": "TEA-0001", "quantity": 1}]}, 'Invalid input for "place_order": "shipping" is required'),
        ({"items": [{"sku": "TEA-0001", "quantity": 1}], "shipping": address, "priority": "rush"}, 'Invalid input for "place_order": "priority" must be one of "express", "overnight", "standard"'),
        ({"items": [{"sku": "TEA-0001", "quantity": 1}], "shipping": {**address, "country": "gb"}}, 'Invalid input for "place_order": "shipping.country" must match ^[A-Z]{2}$'),
        ({"items": [{"sku": "TEA-0001", "quantity": 1}], "shipping": address, "coupon": "X"}, 'Invalid input for "place_order": "coupon" is not a field of this input'),
    ]
    async with app.run() as runtime:
        for payload, text in cases:
            outcome = await runtime.messages.dispatch("place_order", payload)
            answer = reply(outcome)
            assert answer.text == text
            assert answer.data["message"] == 'Invalid input for "place_order"'
            assert msgspec.convert(answer.data, agentfx.DispatchError) == outcome_of(outcome).failure()
