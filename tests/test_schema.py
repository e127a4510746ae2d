"""JSON Schema generation, strict input codecs and schema projections."""

from __future__ import annotations

import collections
import dataclasses
import datetime
import decimal
import enum
import importlib
import json
import re
import uuid
from collections.abc import Callable, Iterator
from typing import Annotated, Any, Literal, NamedTuple, NotRequired, TypedDict, cast

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator, ValidationError, validators

from agentfx.errors import AgentProjectionError
from agentfx.schema import InputCodec, InvalidPayload, json_schema, project

# --- the types under test -------------------------------------------------------


class Todo(msgspec.Struct, frozen=True):
    """A single todo."""

    id: str
    title: str
    completed: bool = False


class Model(msgspec.Struct, frozen=True):
    todos: tuple[Todo, ...] = ()
    selected_todo_id: str | None = None


class RequestedCreateTodo(msgspec.Struct, frozen=True, tag=True):
    title: str


class ClearedSelection(msgspec.Struct, frozen=True, tag=True):
    pass


class NoInput(msgspec.Struct, frozen=True):
    """Nothing to say."""


class ReplacedTodos(msgspec.Struct, frozen=True, tag="replaced", tag_field="kind"):
    todos: list[Todo]
    note: Annotated[str, msgspec.Meta(max_length=10, description="A short note")] = ""


class Scheduled(msgspec.Struct, frozen=True, rename="camel"):
    due_at: datetime.datetime
    priority: Literal["low", "high"] = "low"
    owner_id: int | None = None
    labels: list[str] = []


class Closed(msgspec.Struct, frozen=True, forbid_unknown_fields=True, tag=True):
    todo: Todo
    count: int = 0


class ClosedFlat(msgspec.Struct, frozen=True, forbid_unknown_fields=True, tag=True):
    count: int


class Comment(msgspec.Struct, frozen=True):
    text: str
    replies: list[Comment] = []


@dataclasses.dataclass(frozen=True)
class Point:
    x: int
    y: int = 0


class Extra(TypedDict):
    colour: str
    size: NotRequired[int]


class Pair(NamedTuple):
    todo: Todo
    rank: int = 0


class Everything(msgspec.Struct, frozen=True):
    point: Point | None = None
    extra: Extra | None = None
    pair: Pair | None = None
    by_id: dict[str, Todo] = {}


class Item(msgspec.Struct, frozen=True):
    title: str
    secret: str = "hidden"


class Title(msgspec.Struct):
    title: str


@dataclasses.dataclass
class TodoRecord:
    id: str
    title: str
    completed: bool
    owner: str


def object_schemas(node: object) -> list[dict[str, Any]]:
    """Every schema in ``node`` that describes a JSON object with properties."""
    found: list[dict[str, Any]] = []
    if isinstance(node, dict):
        schema = cast("dict[str, Any]", node)
        if schema.get("type") == "object" and "properties" in schema:
            found.append(schema)
        for value in schema.values():
            found.extend(object_schemas(value))
    elif isinstance(node, list):
        for value in cast("list[object]", node):
            found.extend(object_schemas(value))
    return found


def invalid(codec: InputCodec[Any], payload: object) -> InvalidPayload:
    with pytest.raises(InvalidPayload) as info:
        codec.decode(payload)
    return info.value


# --- json_schema ---------------------------------------------------------------------


def test_json_schema_inlines_the_root_and_keeps_nested_definitions() -> None:
    schema = json_schema(Model)
    assert "$ref" not in schema
    assert schema["type"] == "object"
    assert schema["title"] == "Model"
    assert schema["properties"]["todos"] == {"type": "array", "items": {"$ref": "#/$defs/Todo"}, "default": []}
    assert list(schema["$defs"]) == ["Todo"]
    assert schema["$defs"]["Todo"]["description"] == "A single todo."


def test_json_schema_holds_only_json_types() -> None:
    schema = json_schema(Model)
    assert schema["properties"]["todos"]["default"] == []
    assert type(schema["properties"]["todos"]["default"]) is list


def test_json_schema_drops_empty_defs() -> None:
    assert json_schema(Todo) == {
        "title": "Todo",
        "description": "A single todo.",
        "type": "object",
        "properties": {
            "id": {"type": "string"},
            "title": {"type": "string"},
            "completed": {"type": "boolean", "default": False},
        },
        "required": ["id", "title"],
    }


def test_json_schema_leaves_a_non_ref_root_alone() -> None:
    assert json_schema(list[Todo]) == msgspec.json.schema(list[Todo])
    assert json_schema(int) == {"type": "integer"}


def test_json_schema_keeps_a_recursive_root_definition() -> None:
    schema = json_schema(Comment)
    assert schema["type"] == "object"
    assert schema["properties"]["replies"]["items"] == {"$ref": "#/$defs/Comment"}
    assert schema["$defs"]["Comment"]["title"] == "Comment"
    # A tree, not a cycle: the root is a copy of the definition it keeps.
    assert json.loads(json.dumps(schema)) == schema
    Draft202012Validator.check_schema(schema)
    assert cast(Any, Draft202012Validator(schema)).is_valid({"text": "a", "replies": [{"text": "b", "replies": []}]})


def test_json_schema_merges_root_metadata() -> None:
    schema = json_schema(Annotated[Todo, msgspec.Meta(description="The selected todo")])
    assert schema["description"] == "The selected todo"
    assert schema["type"] == "object"
    assert "$defs" not in schema


def test_json_schema_is_deterministic() -> None:
    first = json.dumps(json_schema(Model))
    assert all(json.dumps(json_schema(Model)) == first for _ in range(3))


# --- InputCodec: schema ---------------------------------------------------------------


def test_input_schema_is_closed_at_every_level() -> None:
    schema = InputCodec(Everything).schema
    objects = object_schemas(schema)
    assert {o["title"] for o in objects} == {"Everything", "Point", "Extra", "Todo"}
    assert all(o["additionalProperties"] is False for o in objects)
    assert schema["$defs"]["Pair"]["maxItems"] == 2


def test_input_schema_inlines_the_root_and_keeps_nested_definitions() -> None:
    schema = InputCodec(ReplacedTodos).schema
    assert "$ref" not in schema
    assert schema["type"] == "object"
    assert schema["properties"]["todos"] == {"type": "array", "items": {"$ref": "#/$defs/Todo"}}
    assert list(schema["$defs"]) == ["Todo"]
    assert schema["$defs"]["Todo"]["additionalProperties"] is False
    assert schema["$defs"]["Todo"]["description"] == "A single todo."


def test_input_schema_never_shows_the_tag() -> None:
    schema = InputCodec(ReplacedTodos).schema
    assert schema == {
        "title": "ReplacedTodos",
        "type": "object",
        "properties": {
            "todos": {"type": "array", "items": {"$ref": "#/$defs/Todo"}},
            "note": {"description": "A short note", "type": "string", "maxLength": 10, "default": ""},
        },
        "required": ["todos"],
        "additionalProperties": False,
        "$defs": {"Todo": json_schema(Todo) | {"additionalProperties": False}},
    }
    assert "kind" not in json.dumps(schema)
    assert InputCodec(RequestedCreateTodo).schema == {
        "title": "RequestedCreateTodo",
        "type": "object",
        "properties": {"title": {"type": "string"}},
        "required": ["title"],
        "additionalProperties": False,
    }


def test_input_schema_of_a_field_less_struct_is_the_closed_empty_object() -> None:
    expected: dict[str, object] = {"type": "object", "properties": {}, "required": [], "additionalProperties": False}
    assert InputCodec(NoInput).schema == expected
    assert InputCodec(ClearedSelection).schema == expected


def test_input_schema_uses_encode_names() -> None:
    schema = InputCodec(Scheduled).schema
    assert list(schema["properties"]) == ["dueAt", "priority", "ownerId", "labels"]
    assert schema["required"] == ["dueAt"]
    assert schema["properties"]["priority"] == {"enum": ["high", "low"], "default": "low"}


def test_input_schema_of_a_recursive_type_is_closed() -> None:
    schema = InputCodec(Comment).schema
    assert schema["additionalProperties"] is False
    assert schema["properties"]["replies"]["items"] == {"$ref": "#/$defs/Comment"}
    assert schema["$defs"]["Comment"]["additionalProperties"] is False
    assert json.loads(json.dumps(schema)) == schema
    Draft202012Validator.check_schema(schema)
    assert not cast(Any, Draft202012Validator(schema)).is_valid({"text": "a", "replies": [{"text": "b", "extra": 1}]})


def test_input_schema_is_deterministic() -> None:
    first = json.dumps(InputCodec(Everything).schema)
    assert json.dumps(InputCodec(Everything).schema) == first


def test_input_schema_does_not_change_the_applications_types() -> None:
    InputCodec(ReplacedTodos)
    assert "additionalProperties" not in json_schema(Todo)
    assert "kind" in json.dumps(msgspec.json.schema(ReplacedTodos))


@pytest.mark.parametrize("tp", [int, dict, Todo(id="1", title="t"), list[Todo], "Todo", Point])
def test_codec_refuses_non_struct_types(tp: Any) -> None:
    with pytest.raises(TypeError):
        InputCodec(tp)


def test_codec_refuses_array_like_structs() -> None:
    class Row(msgspec.Struct, array_like=True):
        a: int

    with pytest.raises(TypeError, match="array_like"):
        InputCodec(Row)


# --- InputCodec: decoding -----------------------------------------------------------


def test_decode_returns_the_original_type() -> None:
    payload = {"todos": [{"id": "1", "title": "Buy milk"}], "note": "n"}
    decoded = InputCodec(ReplacedTodos).decode(payload)
    assert type(decoded) is ReplacedTodos
    assert type(decoded.todos[0]) is Todo
    assert decoded == msgspec.convert(payload, ReplacedTodos)
    assert decoded == ReplacedTodos(todos=[Todo("1", "Buy milk")], note="n")


def test_decode_is_strict() -> None:
    codec = InputCodec(Todo)
    assert invalid(codec, {"id": 3, "title": "t"}).path == "$.id"
    assert invalid(codec, {"id": "1", "title": "t", "completed": "true"}).path == "$.completed"
    assert invalid(codec, {"id": "1", "title": "t", "completed": 1}).path == "$.completed"
    numbers = InputCodec(Closed)
    assert invalid(numbers, {"todo": {"id": "1", "title": "t"}, "count": "3"}).path == "$.count"
    assert invalid(numbers, {"todo": {"id": "1", "title": "t"}, "count": True}).path == "$.count"


@pytest.mark.parametrize("payload", [[], (), "x", "", None, 0, 1.5, b"{}", {"x": 1}, {"type": "ClearedSelection"}])
def test_payload_free_codec_accepts_only_the_empty_object(payload: object) -> None:
    codec = InputCodec(ClearedSelection)
    assert codec.decode({}) == ClearedSelection()
    error = invalid(codec, payload)
    assert error.path == "$"
    assert error.cause is None


def test_decode_requires_exactly_a_dict() -> None:
    codec = InputCodec(RequestedCreateTodo)
    assert invalid(codec, collections.OrderedDict[str, str](title="t")).path == "$"
    assert invalid(codec, [("title", "t")]).path == "$"
    assert invalid(codec, RequestedCreateTodo(title="t")).path == "$"


def test_decode_rejects_unknown_top_level_keys() -> None:
    codec = InputCodec(RequestedCreateTodo)
    error = invalid(codec, {"title": "t", "priority": 1})
    assert (error.path, error.cause) == ("$", None)


@pytest.mark.parametrize(
    ("tp", "payload"),
    [
        (RequestedCreateTodo, {"title": "t", "type": "RequestedCreateTodo"}),
        (ReplacedTodos, {"todos": [], "kind": "replaced"}),
        (ClosedFlat, {"count": 1, "type": "ClosedFlat"}),
        (Closed, {"todo": {"id": "1", "title": "t"}, "type": "Closed"}),
    ],
)
def test_decode_rejects_the_messages_own_tag_key(tp: type[Any], payload: dict[str, Any]) -> None:
    error = invalid(InputCodec(tp), payload)
    assert error.path == "$"


def test_decode_rejects_unknown_keys_in_nested_structs() -> None:
    codec = InputCodec(ReplacedTodos)
    error = invalid(codec, {"todos": [{"id": "1", "title": "t"}, {"id": "2", "title": "u", "due": 1}]})
    assert error.path == "$.todos[1]"
    assert isinstance(error.cause, msgspec.ValidationError)
    assert "due" in str(error.cause)


def test_decode_rejects_unknown_keys_under_a_closed_root() -> None:
    codec = InputCodec(Closed)
    assert invalid(codec, {"todo": {"id": "1", "title": "t", "x": 0}}).path == "$.todo"
    assert invalid(codec, {"todo": {"id": "1", "title": "t"}, "x": 0}).path == "$"
    assert codec.decode({"todo": {"id": "1", "title": "t"}}) == Closed(Todo("1", "t"))
    assert InputCodec(ClosedFlat).decode({"count": 2}) == ClosedFlat(2)
    assert invalid(InputCodec(ClosedFlat), {"count": 2, "x": 0}).path == "$"


def test_decode_rejects_unknown_keys_in_other_nested_records() -> None:
    codec = InputCodec(Everything)
    assert codec.decode({"point": {"x": 1}}) == Everything(point=Point(1))
    assert invalid(codec, {"point": {"x": 1, "z": 2}}).path == "$.point"
    assert codec.decode({"extra": {"colour": "red"}}) == Everything(extra={"colour": "red"})
    assert invalid(codec, {"extra": {"colour": "red", "weight": 2}}).path == "$.extra"
    assert codec.decode({"pair": [{"id": "1", "title": "t"}]}) == Everything(pair=Pair(Todo("1", "t")))
    assert invalid(codec, {"pair": [{"id": "1", "title": "t", "z": 0}]}).path == "$.pair[0]"
    assert invalid(codec, {"pair": [{"id": "1", "title": "t"}, 1, 2]}).path == "$.pair"
    assert invalid(codec, {"by_id": {"a": {"id": "1", "title": "t", "z": 0}}}).path.startswith("$.by_id")


def test_decode_rejects_unknown_keys_in_recursive_types() -> None:
    codec = InputCodec(Comment)
    payload = {"text": "a", "replies": [{"text": "b", "replies": [{"text": "c"}]}]}
    assert codec.decode(payload) == Comment("a", [Comment("b", [Comment("c")])])
    liked = {"text": "a", "replies": [{"text": "b", "replies": [{"text": "c", "likes": 3}]}]}
    assert invalid(codec, liked).path == "$.replies[0].replies[0]"


def test_decode_paths() -> None:
    codec = InputCodec(ReplacedTodos)
    assert invalid(codec, {"todos": [{"id": "1", "title": 2}]}).path == "$.todos[0].title"
    assert invalid(codec, {"todos": "none"}).path == "$.todos"
    assert invalid(codec, {"todos": [], "note": "x" * 11}).path == "$.note"
    missing = invalid(codec, {})
    assert missing.path == "$"
    assert isinstance(missing.cause, msgspec.ValidationError)
    assert invalid(codec, {"todos": [{"id": "1"}]}).path == "$.todos[0]"
    assert invalid(InputCodec(RequestedCreateTodo), {"title": None}).path == "$.title"


def test_decode_uses_renamed_fields_and_defaults() -> None:
    codec = InputCodec(Scheduled)
    decoded = codec.decode({"dueAt": "2024-05-01T09:30:00Z"})
    assert decoded == Scheduled(due_at=datetime.datetime(2024, 5, 1, 9, 30, tzinfo=datetime.timezone.utc))
    assert (decoded.priority, decoded.owner_id, decoded.labels) == ("low", None, [])
    assert invalid(codec, {"due_at": "2024-05-01T09:30:00Z"}).path == "$"


def test_decode_optional_literal_and_datetime() -> None:
    codec = InputCodec(Scheduled)
    payload = {"dueAt": "2024-05-01T09:30:00+02:00", "priority": "high", "ownerId": 7, "labels": ["a"]}
    decoded = codec.decode(payload)
    assert decoded == msgspec.convert(payload, Scheduled)
    assert decoded.due_at.utcoffset() == datetime.timedelta(hours=2)
    assert codec.decode({"dueAt": "2024-05-01T09:30:00Z", "ownerId": None}).owner_id is None
    assert invalid(codec, {"dueAt": "2024-05-01T09:30:00Z", "priority": "urgent"}).path == "$.priority"
    assert invalid(codec, {"dueAt": "tomorrow"}).path == "$.dueAt"
    assert invalid(codec, {"dueAt": "2024-05-01T09:30:00Z", "ownerId": "7"}).path == "$.ownerId"


def test_invalid_payload_message_names_only_the_path() -> None:
    error = invalid(InputCodec(RequestedCreateTodo), {"title": "t", "SECRET": "value"})
    assert str(error) == "Invalid payload at $"
    error = invalid(InputCodec(RequestedCreateTodo), {"title": 12345})
    assert str(error) == "Invalid payload at $.title"
    assert error.__cause__ is error.cause


# --- project ------------------------------------------------------------------------------


def test_project_drops_undeclared_fields() -> None:
    items = (Item("a", "s1"), Item("b", "s2"))
    assert project(list[Title], items, "x") == [{"title": "a"}, {"title": "b"}]
    assert project(Title, {"title": "a", "secret": "s"}, "x") == {"title": "a"}


@pytest.mark.parametrize(
    "value",
    [
        Todo("1", "t"),
        {"id": "1", "title": "t", "owner": "o"},
        TodoRecord("1", "t", False, "o"),
    ],
    ids=["struct", "dict", "dataclass"],
)
def test_project_accepts_structs_dicts_and_objects(value: object) -> None:
    assert project(Todo, value, "x") == {"id": "1", "title": "t", "completed": False}


def test_project_accepts_plain_objects_with_attributes() -> None:
    class Plain:
        def __init__(self) -> None:
            self.id = "1"
            self.title = "t"
            self.completed = True

    assert project(Todo, Plain(), "x") == {"id": "1", "title": "t", "completed": True}


def test_project_encodes_a_model_through_its_schema() -> None:
    model = Model(todos=(Todo("1", "Buy milk"),), selected_todo_id="1")
    assert project(list[Todo], model.todos, "x") == [{"id": "1", "title": "Buy milk", "completed": False}]
    assert project(Model, model, "x") == {
        "todos": [{"id": "1", "title": "Buy milk", "completed": False}],
        "selected_todo_id": "1",
    }
    assert type(cast("dict[str, Any]", project(Model, model, "x"))["todos"]) is list
    assert project(dict[int, tuple[int, int]], {1: (2, 3)}, "x") == {"1": [2, 3]}
    assert project(dict[int, list[int]], {1: [2, 3]}, "x") == {"1": [2, 3]}
    when = datetime.datetime(2024, 1, 2, 3, 4, 5, tzinfo=datetime.timezone.utc)
    assert project(datetime.datetime, when, "x") == "2024-01-02T03:04:05Z"


@pytest.mark.parametrize(
    ("schema", "value"),
    [
        (list[Todo], [{"id": 1, "title": "SECRET-VALUE"}]),
        (Todo, {"title": "SECRET-VALUE"}),
        (Todo, [Todo("1", "SECRET-VALUE")]),
        (Todo, None),
    ],
    ids=["wrong-field-type", "missing-field", "wrong-shape", "none"],
)
def test_project_raises_without_the_value(schema: object, value: object) -> None:
    what = 'The resource "todos" projection does not match its declared schema'
    with pytest.raises(AgentProjectionError) as info:
        project(schema, value, what)
    error = info.value
    assert str(error) == what
    assert error.__cause__ is None
    assert error.__context__ is None
    assert error.__suppress_context__
    assert "SECRET" not in repr(error)


def test_project_raises_on_unencodable_values() -> None:
    what = "The context projection does not match its declared schema"
    with pytest.raises(AgentProjectionError, match="^The context projection does not match its declared schema$"):
        project(dict[str, Any], {"x": object()}, what)


def test_a_set_default_is_listed_in_the_same_order_in_every_process() -> None:
    program = (
        "import msgspec\n"
        "from typing import Annotated\n"
        "from agentfx.schema import InputCodec\n"
        "class Inner(msgspec.Struct, frozen=True):\n"
        "    marks: frozenset[str] = frozenset({'m1', 'm2', 'm3', 'm4', 'm5'})\n"
        "class T(msgspec.Struct):\n"
        "    tags: frozenset[str] = frozenset({'alpha', 'beta', 'gamma', 'delta', 'epsilon', 'zeta'})\n"
        "    groups: tuple[frozenset[str], ...] = (frozenset({'w', 'x', 'y', 'z'}),)\n"
        "    inner: Inner = Inner()\n"
        "    maybe: frozenset[str] | None = frozenset({'n1', 'n2', 'n3', 'n4', 'n5'})\n"
        "    maybe_inner: Inner | None = Inner(frozenset({'o1', 'o2', 'o3', 'o4', 'o5'}))\n"
        "    shown: Annotated[frozenset[str], msgspec.Meta(examples=[frozenset({'p1', 'p2', 'p3', 'p4'})])] = frozenset()\n"
        "print(msgspec.json.encode(InputCodec(T).schema).decode())\n"
    )
    schema = _printed_alike_under_hash_seeds(program, 4)
    assert '"default":["alpha","beta","delta","epsilon","gamma","zeta"]' in schema
    assert '"default":[["w","x","y","z"]]' in schema
    assert '"default":{"marks":["m1","m2","m3","m4","m5"]}' in schema
    # Beside a null (an Optional's anyOf), and in an example: the set's own branch says it is one.
    assert '"default":["n1","n2","n3","n4","n5"]' in schema
    assert '"default":{"marks":["o1","o2","o3","o4","o5"]}' in schema
    assert '"examples":[["p1","p2","p3","p4"]]' in schema


def _printed_alike_under_hash_seeds(program: str, seeds: int) -> str:
    """What ``program`` prints in a fresh interpreter, the same under each of the hash seeds 1 to ``seeds``."""
    import os
    import subprocess
    import sys

    outputs = {
        subprocess.run(
            [sys.executable, "-c", program],
            capture_output=True,
            text=True,
            check=True,
            env={**os.environ, "PYTHONHASHSEED": str(seed)},
        ).stdout
        for seed in range(1, seeds + 1)
    }
    assert len(outputs) == 1
    return outputs.pop()


def test_a_set_the_schema_says_nothing_of_is_listed_in_the_same_order_in_every_process() -> None:
    # An Any field's default, an example, a record's default in a resource
    # schema: no uniqueItems says these lists were sets.
    program = (
        "import msgspec\n"
        "from typing import Annotated, Any, NamedTuple\n"
        "from agentfx.schema import InputCodec, json_schema, json_schema_components\n"
        "class Pair(NamedTuple):\n"
        "    left: int = 0\n"
        "    right: Any = frozenset({'r1', 'r2', 'r3', 'r4', 'r5'})\n"
        "class Inner(msgspec.Struct, frozen=True):\n"
        "    marks: Any = frozenset({'m1', 'm2', 'm3', 'm4', 'm5'})\n"
        "class T(msgspec.Struct, tag=True):\n"
        "    anything: Any = frozenset({'alpha', 'beta', 'gamma', 'delta', 'epsilon'})\n"
        "    mixed: Any = frozenset({'x', 'y', 3, 1, 2.5, None})\n"
        "    nested: Any = ({'k': {'v1', 'v2', 'v3', 'v4'}},)\n"
        "    inner: Any = Inner()\n"
        "    pair: Pair = Pair()\n"
        "    shown: Annotated[Any, msgspec.Meta(examples=[frozenset({'p1', 'p2', 'p3', 'p4', 'p5'})])] = None\n"
        "    hinted: Annotated[str, msgspec.Meta(title='h', extra_json_schema={'x-hints': {'s1', 's2', 's3', 's4', 's5'}})] = ''\n"
        "print(msgspec.json.encode(InputCodec(T).schema).decode())\n"
        "print(msgspec.json.encode(json_schema(list[T])).decode())\n"
        "print(msgspec.json.encode(json_schema_components((T,))).decode())\n"
    )
    schemas = _printed_alike_under_hash_seeds(program, 5).splitlines()
    assert len(schemas) == 3
    for schema in schemas:
        assert '"default":["alpha","beta","delta","epsilon","gamma"]' in schema
        # A set in the application's own keywords, with the rest of its Meta kept.
        assert '"title":"h","x-hints":["s1","s2","s3","s4","s5"]' in schema
        # Mixed kinds are ordered by their JSON encoding.
        assert '"default":["x","y",1,2.5,3,null]' in schema
        assert '"default":[{"k":["v1","v2","v3","v4"]}]' in schema
        assert '"default":{"marks":["m1","m2","m3","m4","m5"]}' in schema
        assert '"default":["r1","r2","r3","r4","r5"]' in schema
        assert '"examples":[["p1","p2","p3","p4","p5"]]' in schema


def test_a_list_default_keeps_its_own_order() -> None:
    class Listed(msgspec.Struct):
        order: Any = ("b", "a")
        chosen: Any = frozenset({"b"})

    properties = InputCodec(Listed).schema["properties"]
    assert properties["order"]["default"] == ["b", "a"]
    assert properties["chosen"]["default"] == ["b"]


def test_payload_free_schemas_share_no_containers() -> None:
    class First(msgspec.Struct):
        pass

    class Second(msgspec.Struct):
        pass

    first, second = InputCodec(First).schema, InputCodec(Second).schema
    first["properties"]["x"] = {}
    first["required"].append("x")
    assert second == {"type": "object", "properties": {}, "required": [], "additionalProperties": False}


class _ScoresById(msgspec.Struct, frozen=True, tag=True):
    scores: dict[int, str]
    nested: list[dict[int, int]] = []


class _ScoresByName(msgspec.Struct, frozen=True, tag=True):
    scores: dict[str, int]


def test_integer_keys_decode_from_the_strings_json_spells_them_as() -> None:
    # Only a type with a non-str mapping key pays for msgspec's str_keys; the others must
    # decode exactly as before, and both must still refuse what does not fit.
    by_id = InputCodec(_ScoresById)
    by_name = InputCodec(_ScoresByName)

    assert by_id.decode({"scores": {"1": "a"}, "nested": [{"2": 3}]}) == _ScoresById({1: "a"}, [{2: 3}])
    assert isinstance(by_id.attempt({"scores": {"x": "a"}}), InvalidPayload)
    assert by_name.decode({"scores": {"a": 1}}) == _ScoresByName({"a": 1})
    assert isinstance(by_name.attempt({"scores": {"a": "1"}}), InvalidPayload)


class _Level(enum.IntEnum):
    LOW = 1
    HIGH = -2


class _Keyed(msgspec.Struct, frozen=True, tag=True):
    by_id: dict[int, str] = {}
    by_uuid: dict[uuid.UUID, str] = {}
    deep: list[dict[int, dict[uuid.UUID, int]]] = []
    by_level: dict[_Level, int] = {}
    by_code: dict[Literal[3, 1], int] = {}
    by_name: dict[str, int] = {}
    by_slot: dict[Literal[2, 0], int] = {}
    by_index: dict[Annotated[int, msgspec.Meta(ge=0)], str] = {}
    by_rank: dict[Annotated[int, msgspec.Meta(gt=0)], str] = {}
    by_debt: dict[Annotated[int, msgspec.Meta(le=-1)], str] = {}
    by_month: dict[Annotated[int, msgspec.Meta(gt=0, lt=13)], str] = {}


_INTEGER_NAMES = {"type": "string", "pattern": "^-?(0|[1-9][0-9]*)$"}
_UUID_NAMES = {"type": "string", "format": "uuid"}
_BOUNDED_FIELDS = ["by_slot", "by_index", "by_rank", "by_debt", "by_month"]


def test_a_mapping_with_integer_or_uuid_keys_says_which_keys_it_takes_at_every_depth() -> None:
    properties = InputCodec(_Keyed).schema["properties"]
    assert properties["by_id"]["propertyNames"] == _INTEGER_NAMES
    assert properties["by_uuid"]["propertyNames"] == _UUID_NAMES
    outer = properties["deep"]["items"]
    assert outer["propertyNames"] == _INTEGER_NAMES
    assert outer["additionalProperties"]["propertyNames"] == _UUID_NAMES
    assert properties["by_level"]["propertyNames"] == {"enum": ["-2", "1"]}
    assert properties["by_code"]["propertyNames"] == {"enum": ["1", "3"]}
    assert "propertyNames" not in properties["by_name"]
    Draft202012Validator.check_schema(InputCodec(_Keyed).schema)


def test_a_bounded_integer_key_advertises_only_the_keys_its_bounds_admit() -> None:
    properties = InputCodec(_Keyed).schema["properties"]
    # msgspec reads "-0" as the key 0, so it is one of 0's spellings.
    assert properties["by_slot"]["propertyNames"] == {"enum": ["-0", "0", "2"]}
    assert properties["by_index"]["propertyNames"] == {"type": "string", "pattern": "^(-?0|[1-9][0-9]*)$"}
    assert properties["by_rank"]["propertyNames"] == {"type": "string", "pattern": "^[1-9][0-9]*$"}
    assert properties["by_debt"]["propertyNames"] == {"type": "string", "pattern": "^-[1-9][0-9]*$"}
    assert properties["by_month"]["propertyNames"] == {"type": "string", "pattern": "^([1-9]|1[0-2])$"}


def test_an_integer_key_that_must_be_a_multiple_is_refused_where_the_input_is_declared() -> None:
    # No pattern says it plainly, and a wider or narrower one would mislead.
    class Steps(msgspec.Struct):
        by_step: dict[Annotated[int, msgspec.Meta(multiple_of=3)], str]

    class Ones(msgspec.Struct):
        by_one: dict[Annotated[int, msgspec.Meta(multiple_of=1, ge=0)], str]

    with pytest.raises(TypeError, match=r"^a mapping key that must be a multiple of 3 cannot be described"):
        InputCodec(Steps)
    assert InputCodec(Ones).schema["properties"]["by_one"]["propertyNames"]["pattern"] == "^(-?0|[1-9][0-9]*)$"


def test_a_mapping_keyed_by_bool_is_refused_where_the_input_is_declared() -> None:
    # msgspec decodes no key string as a bool ("true" included): such a mapping could only be sent empty.
    class Flags(msgspec.Struct):
        by_flag: dict[bool, str]

    class Truths(msgspec.Struct):
        by_truth: list[dict[Literal[True], int]]

    for refused in (Flags, Truths):
        with pytest.raises(TypeError, match=r"^a mapping keyed by bool cannot be sent as JSON"):
            InputCodec(refused)
    with pytest.raises(msgspec.ValidationError):
        msgspec.convert({"by_flag": {"true": "x"}}, Flags, str_keys=True)


@pytest.mark.parametrize(
    "union",
    [
        Literal["s", "m"] | Annotated[str, msgspec.Meta(min_length=3)],
        Literal["ab"] | Annotated[str, msgspec.Meta(pattern="^x")],
        Literal[1, 2] | Annotated[int, msgspec.Meta(ge=10)],
        Literal[1, 2] | float,
        list[Literal[1, 2] | Annotated[float, msgspec.Meta(ge=10)]],
    ],
    ids=["str with a length", "str with a pattern", "int with a bound", "float", "nested"],
)
def test_a_literal_beside_a_type_of_its_kind_that_decides_instead_is_refused_where_declared(union: Any) -> None:
    # msgspec decodes such a union by the kind of the value, not by its value:
    # the schema would offer values the decoder refuses ("s", 1, 12).
    shape = msgspec.defstruct("Shape", [("v", union)])
    with pytest.raises(TypeError, match=r"^a union of Literal\[.*cannot be described in an input schema: msgspec reads every"):
        InputCodec(shape)


@pytest.mark.parametrize(
    ("union", "values"),
    [
        (Literal["auto", "fast"] | str, ["auto", "fast", "anything"]),
        (Literal[1, 2] | int, [1, 2, 12]),
        (Literal["a"] | None, ["a", None]),
        (Literal[1] | str, [1, "one"]),
    ],
    ids=["suggested strings", "suggested integers", "optional", "other kinds"],
)
def test_a_literal_beside_an_unconstrained_type_is_described_as_it_decodes(union: Any, values: list[object]) -> None:
    codec = InputCodec(msgspec.defstruct("Shape", [("v", union)]))
    for value in values:
        _EcmaValidator(codec.schema).validate({"v": value})
        assert codec.decode({"v": value}).v == value  # pyright: ignore[reportAttributeAccessIssue, reportUnknownMemberType]


def _ecma_pattern(validator: Any, pattern: str, instance: object, schema: object) -> Iterator[ValidationError]:
    # JSON Schema patterns are ECMA-262, whose ``$`` is the end of the string;
    # Python's also matches before a final newline, which no JSON validator does.
    if isinstance(instance, str) and re.search(pattern.removesuffix("$") + r"\Z", instance) is None:
        yield ValidationError(f"{instance!r} does not match {pattern!r}")


_EcmaValidator: Any = cast(Any, validators).extend(Draft202012Validator, {"pattern": _ecma_pattern})

_KEYS = st.one_of(
    st.text(max_size=6),
    st.from_regex(r"[-+ 0]?[0-9]{1,3}[ \n]?", fullmatch=True),
    st.integers().map(str),
    st.uuids().map(str),
    st.uuids().map(lambda u: u.hex),
    st.sampled_from(["1", "3", "-2", "01", "+1", "-0", "2"]),
    st.integers(-15, 15).map(str),
    st.sampled_from(["0", "-00", "00", "12", "13", "-1", "010"]),
)


@settings(max_examples=400, deadline=None)
@given(key=_KEYS, field=st.sampled_from(["by_id", "by_uuid", "deep", "by_level", "by_code", *_BOUNDED_FIELDS]))
def test_the_advertised_schema_admits_only_keys_the_decoder_takes(key: str, field: str) -> None:
    codec = InputCodec(_Keyed)
    validator: Any = _EcmaValidator(codec.schema, format_checker=Draft202012Validator.FORMAT_CHECKER)
    payload: dict[str, Any] = {field: [{"7": {key: 1}}, {key: {}}] if field == "deep" else {key: 1}}
    decoded = not isinstance(codec.attempt(payload), InvalidPayload)
    advertised = validator.is_valid(payload)
    if field == "by_uuid":
        # A UUID's format is its hyphenated form; msgspec also reads 32 bare hex digits.
        assert decoded or not advertised, payload
    else:
        assert advertised == decoded, payload


# msgspec takes integer bounds that fit an int64 (a strict one a step inside).
_BOUND = st.one_of(st.integers(-120, 120), st.integers(-(2**63) + 1, 2**63 - 2))


@settings(max_examples=300, deadline=None)
@given(
    lower=st.none() | st.tuples(st.sampled_from(["ge", "gt"]), _BOUND),
    upper=st.none() | st.tuples(st.sampled_from(["le", "lt"]), _BOUND),
    data=st.data(),
)
def test_any_integer_key_bounds_are_advertised_exactly_as_the_decoder_applies_them(
    lower: tuple[str, int] | None, upper: tuple[str, int] | None, data: st.DataObject
) -> None:
    bounds: dict[str, Any] = dict(bound for bound in (lower, upper) if bound is not None)
    key_type: Any = Annotated[int, msgspec.Meta(**bounds)]
    keyed: Any = msgspec.defstruct("Keyed", [("by_key", dict[key_type, int])])
    codec = InputCodec(keyed)
    Draft202012Validator.check_schema(codec.schema)
    near = st.sampled_from(sorted(bounds.values()) or [0]).flatmap(lambda b: st.integers(b - 12, b + 12))
    key = data.draw(st.one_of(near.map(str), _KEYS, near.map(lambda n: f"0{n}"), near.map(lambda n: f"-{n}")))
    payload = {"by_key": {key: 1}}
    validator: Any = _EcmaValidator(codec.schema)
    assert validator.is_valid(payload) == (not isinstance(codec.attempt(payload), InvalidPayload)), (bounds, key)


class _Priority(msgspec.Struct, frozen=True, tag=True):
    level: Literal["low", "high"]


def test_a_refusal_seen_before_is_worded_the_same_as_the_first_time() -> None:
    # The wording of a msgspec text is remembered per codec; a text that quotes a
    # long value sent is worded afresh each time, and both read the same.
    codec = InputCodec(_Priority)
    first = codec.attempt({"level": "urgent"})
    again = codec.attempt({"level": "urgent"})
    long = codec.attempt({"level": "x" * 500})
    long_again = codec.attempt({"level": "x" * 500})

    assert isinstance(first, InvalidPayload) and isinstance(again, InvalidPayload)
    assert first.problem == again.problem == '"level" must be one of "high", "low"'
    assert isinstance(long, InvalidPayload) and isinstance(long_again, InvalidPayload)
    assert long.problem == long_again.problem == first.problem


class _Counted(msgspec.Struct):
    count: int


class _Outer(msgspec.Struct):
    inner: _Counted


def test_a_remembered_refusal_is_the_same_instance_and_keeps_no_frames(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # ``agentfx.schema`` is the function; the module is reached by its full name.
    schema_module = importlib.import_module("agentfx.schema")
    read: list[str] = []
    path_of: Callable[[str], str] = schema_module._error_path

    def counted(text: str) -> str:
        read.append(text)
        return path_of(text)

    monkeypatch.setattr(schema_module, "_error_path", counted)
    codec = InputCodec(_Outer)
    first = codec.attempt({"inner": {"count": "one"}})
    again = codec.attempt({"inner": {"count": "one"}})

    assert len(read) == 1, "the second refusal of the same text is remembered, not read again"
    assert isinstance(first, InvalidPayload) and again is first
    assert first.path == "$.inner.count"
    # What is kept must not keep the frame that decoded, nor the payload it held.
    assert isinstance(first.cause, msgspec.ValidationError) and first.cause.__traceback__ is None
    # A text that quotes a long value sent is not kept: each call gets its own.
    quoting = InputCodec(_Priority)
    long = quoting.attempt({"level": "x" * 500})
    assert isinstance(long, InvalidPayload) and quoting.attempt({"level": "x" * 500}) is not long
    assert codec.remembers(first) and not quoting.remembers(long)
    assert not codec.remembers(InvalidPayload(first.path, first.cause, first.problem)), "that very refusal, no copy"


def test_decode_raises_a_copy_of_a_remembered_refusal() -> None:
    codec = InputCodec(_Counted)
    kept = codec.attempt({"count": "one"})
    assert isinstance(kept, InvalidPayload)
    with pytest.raises(InvalidPayload) as raised:
        codec.decode({"count": "one"})

    assert raised.value is not kept and (raised.value.path, raised.value.problem) == (kept.path, kept.problem)
    assert raised.value.__cause__ is kept.cause
    assert kept.__traceback__ is None, "raising must not give the kept refusal a traceback"
    assert codec.attempt({"count": "one"}) is kept


def test_an_invalid_payload_survives_a_copy_and_a_pickle() -> None:
    import copy
    import pickle

    refused = InputCodec(_Priority).attempt({"level": "urgent"})
    assert isinstance(refused, InvalidPayload)
    for twin in (copy.copy(refused), pickle.loads(pickle.dumps(refused))):
        assert isinstance(twin, InvalidPayload)
        assert (twin.path, twin.problem, str(twin)) == (refused.path, refused.problem, str(refused))


class Permission(enum.Flag):
    READ = 1
    WRITE = 2


class Granted(msgspec.Struct):
    permission: Permission


class GrantedMany(msgspec.Struct):
    permissions: list[Permission | None]


@pytest.mark.parametrize("tp", [Granted, GrantedMany])
def test_an_input_with_a_flag_enum_is_refused_as_its_schema_cannot_say_what_decodes(tp: type[msgspec.Struct]) -> None:
    # msgspec decodes any combination of the members (READ|WRITE, or none),
    # while the schema would list the members alone.
    assert msgspec.convert({"permission": 3}, Granted).permission == Permission.READ | Permission.WRITE
    with pytest.raises(TypeError, match="Permission is an enum.Flag"):
        InputCodec(tp)


class _OpenTag(msgspec.Struct):
    name: str


class _ClosedTag(msgspec.Struct, frozen=True):
    name: str


@dataclasses.dataclass
class _OpenLabel:
    name: str


@dataclasses.dataclass(frozen=True)
class _ClosedLabel:
    name: str


@pytest.mark.parametrize(
    ("field", "shown", "fix"),
    [
        (set[_OpenTag], "_OpenTag", "declare _OpenTag with frozen=True, or take a list"),
        (frozenset[_OpenLabel], "_OpenLabel", "declare _OpenLabel with @dataclass(frozen=True), or take a list"),
        (set[list[int]], "list[int]", "take a tuple or a frozen record for each item, or a list instead of the set"),
        (set[tuple[int, dict[str, int]]], "dict[str, int]", "take a tuple or a frozen record for each item, or a list instead of the set"),
        (frozenset[Annotated[_OpenTag, msgspec.Meta(title="t")] | None], "_OpenTag", "declare _OpenTag with frozen=True, or take a list"),
    ],
    ids=["struct", "dataclass", "list", "dict-in-tuple", "annotated-optional"],
)
def test_a_set_of_values_msgspec_cannot_hash_is_refused_as_none_of_them_decodes(field: Any, shown: str, fix: str) -> None:
    # Advertised as an array of its items, while every value but [] was refused.
    probe = msgspec.defstruct("Probe", [("items", field)])
    with pytest.raises(TypeError, match=f"cannot hold {re.escape(shown)}: its values are not hashable, so no set of them can be decoded; {re.escape(fix)}$"):
        InputCodec(probe)


class _Flag(msgspec.Struct, frozen=True):
    on: int | bool


@dataclasses.dataclass(frozen=True)
class _Switch:
    on: tuple[int | bool, ...]


@pytest.mark.parametrize(
    "field",
    [
        frozenset[int | bool],
        set[float | bool],
        set[Annotated[bool, msgspec.Meta(title="b")] | decimal.Decimal],
        frozenset[Literal[1, True]],
        frozenset[Literal[0] | bool],
        set[tuple[str, int | bool]],
        frozenset[_Flag],
        frozenset[_Switch],
        frozenset[int | bool] | None,
    ],
    ids=["int-bool", "float-bool", "annotated-decimal", "literal", "literal-and-bool", "in-tuple", "in-record", "in-dataclass", "optional-set"],
)
def test_a_set_whose_items_may_be_both_a_boolean_and_a_number_is_refused(field: Any) -> None:
    # The schema allows [1, true] (two distinct JSON items) while Python counts True and 1 as one item,
    # so the decoder refused such a set as repeated.
    probe = msgspec.defstruct("Probe", [("items", field)])
    with pytest.raises(TypeError, match=r"cannot hold both true and 1 \(or false and 0\) as two items"):
        InputCodec(probe)


def test_a_set_keeping_booleans_and_numbers_apart_still_decodes_both() -> None:
    probe = msgspec.defstruct("Probe", [("pairs", set[tuple[int, bool]]), ("flags", frozenset[bool]), ("numbers", set[int | float])])
    decoded = InputCodec(probe).attempt({"pairs": [[1, True], [1, False]], "flags": [True, False], "numbers": [1, 2.5]})
    assert decoded == probe(pairs={(1, True), (1, False)}, flags=frozenset({True, False}), numbers={1, 2.5})


def test_a_set_of_frozen_records_and_tuples_still_decodes() -> None:
    probe = msgspec.defstruct(
        "Probe", [("tags", set[_ClosedTag]), ("labels", frozenset[_ClosedLabel]), ("pairs", set[tuple[int, str]])]
    )
    decoded = InputCodec(probe).attempt({"tags": [{"name": "a"}], "labels": [{"name": "b"}], "pairs": [[1, "x"]]})
    assert decoded == probe(tags={_ClosedTag("a")}, labels=frozenset({_ClosedLabel("b")}), pairs={(1, "x")})


def test_a_raw_field_is_refused_as_no_tool_call_can_send_one() -> None:
    probe = msgspec.defstruct("Probe", [("document", msgspec.Raw)])
    with pytest.raises(TypeError, match="^msgspec.Raw cannot be read from a tool call's arguments"):
        InputCodec(probe)


class _Grade(enum.Enum):
    LOW = "low"


@dataclasses.dataclass
class _Note:
    text: Annotated[str, msgspec.Meta(max_length=3)] = "too long"


class _Point(NamedTuple):
    x: int
    y: Annotated[int, msgspec.Meta(ge=0)] = -1


class _Pair(NamedTuple):
    x: int
    y: Annotated[int, msgspec.Meta(ge=0)] = 0


@pytest.mark.parametrize(
    ("field", "default", "shown", "why"),
    [
        (Annotated[int, msgspec.Meta(ge=1)], 0, "0", "Expected `int` >= 1"),
        (int, None, "None", "Expected `int`, got `null`"),
        (tuple[Annotated[int, msgspec.Meta(le=9)], ...], (1, 10), "(1, 10)", "Expected `int` <= 9 - at `$[1]`"),
        (Annotated[str, msgspec.Meta(pattern="^[a-z]+$")], "Milk", "'Milk'", "Expected `str` matching regex '^[a-z]+$'"),
        (Literal["a", "b"], "c", "'c'", "Invalid enum value 'c'"),
        (int, 1.0, "1.0", "Expected `int`, got `float`"),
    ],
    ids=["bound", "none", "item", "pattern", "literal", "float-for-int"],
)
def test_a_default_its_own_field_refuses_is_refused_as_leaving_it_out_would_send_what_no_agent_could(
    field: Any, default: object, shown: str, why: str
) -> None:
    # Before, the schema said {"minimum": 1, "default": 0} and a call without
    # the field handed update a priority of 0 that every agent was refused.
    probe = msgspec.defstruct("Probe", [("title", str), ("value", field, default)])
    with pytest.raises(TypeError) as raised:
        InputCodec(probe)
    assert str(raised.value) == (
        f"the default of Probe.value, {shown}, is not a value the field takes ({why}); change the default or the field's type"
    )


@pytest.mark.parametrize(
    ("record", "message"),
    [
        (_Note, "the default of _Note.text, 'too long', is not a value the field takes (Expected `str` of length <= 3)"),
        (_Point, "the default of _Point.y, -1, is not a value the field takes (Expected `int` >= 0)"),
    ],
    ids=["dataclass", "namedtuple"],
)
def test_a_nested_records_default_is_checked_as_the_inputs_own(record: type, message: str) -> None:
    probe = msgspec.defstruct("Probe", [("inner", record | None, None)])
    with pytest.raises(TypeError, match=f"^{re.escape(message)}"):
        InputCodec(probe)


_WHEN = datetime.datetime(2026, 1, 2, 3, 4, tzinfo=datetime.UTC)


class _Defaulted(msgspec.Struct):
    priority: Annotated[int, msgspec.Meta(ge=1)] = 1
    note: Annotated[str, msgspec.Meta(max_length=3)] | None = None
    tags: frozenset[str] = frozenset({"b", "a"})
    grade: _Grade = _Grade.LOW
    at: datetime.datetime = _WHEN
    blob: bytes = b"\x00\xff"
    pair: _Pair = _Pair(1)
    later: int | msgspec.UnsetType = msgspec.UNSET
    # A factory is not called at expose, so its value is not checked.
    items: Annotated[list[int], msgspec.Meta(min_length=1)] = msgspec.field(default_factory=list[int])


def test_defaults_the_field_takes_are_kept_and_decoded_when_left_out() -> None:
    codec = InputCodec(_Defaulted)
    assert codec.schema["properties"]["priority"]["default"] == 1
    assert codec.decode({}) == _Defaulted()
    assert codec.decode({"pair": [2]}).pair == _Pair(2, 0)


class _Tenths(msgspec.Struct):
    amount: Annotated[float, msgspec.Meta(multiple_of=0.1)]


class _TenthsInList(msgspec.Struct):
    amounts: list[Annotated[float, msgspec.Meta(ge=0, multiple_of=0.3)]]


class _Quarters(msgspec.Struct):
    amount: Annotated[float, msgspec.Meta(multiple_of=0.25)]


@pytest.mark.parametrize("tp", [_Tenths, _TenthsInList])
def test_a_float_step_with_no_exact_binary_value_is_refused_as_the_decoder_would_refuse_its_multiples(
    tp: type[msgspec.Struct],
) -> None:
    with pytest.raises(msgspec.ValidationError):
        msgspec.convert({"amount": 1.0}, _Tenths)  # what an agent would be told, for a multiple of 0.1
    with pytest.raises(TypeError, match=r"multiple_of=0\.[13] has no exact binary value"):
        InputCodec(tp)


def test_a_float_step_spelled_exactly_is_kept_and_checked_as_the_schema_says() -> None:
    codec = InputCodec(_Quarters)
    assert codec.schema["properties"]["amount"]["multipleOf"] == 0.25
    assert [codec.decode({"amount": value}).amount for value in (1.5, 0.75, 100.25)] == [1.5, 0.75, 100.25]
    with pytest.raises(InvalidPayload):
        codec.decode({"amount": 0.3})


class _FloatKeyed(msgspec.Struct):
    by_threshold: dict[float, int]


_FLOAT_EDGES = {"nan", "inf", "infinity"}
"""Key spellings msgspec reads as a float that are not offered: no JSON number spells them."""


@settings(max_examples=400, deadline=None)
@given(
    key=st.one_of(
        _KEYS,
        st.floats(allow_nan=False, allow_infinity=False).map(repr),
        st.floats(allow_nan=False, allow_infinity=False).map(lambda x: f"{x:e}"),
        st.from_regex(r"-?[0-9]{1,3}(\.[0-9]{0,2})?([eE][-+]?[0-9]{1,3})?", fullmatch=True),
        st.sampled_from(["nan", "NaN", "inf", "-inf", "Infinity", ".5", "5.", "1e", "-"]),
    )
)
def test_a_float_key_is_offered_as_a_json_number_which_the_decoder_takes(key: str) -> None:
    codec = InputCodec(_FloatKeyed)
    validator: Any = _EcmaValidator(codec.schema)
    payload = {"by_threshold": {key: 1}}
    decoded = not isinstance(codec.attempt(payload), InvalidPayload)
    advertised = validator.is_valid(payload)
    if advertised:
        # Offered: taken, unless it is past the largest double (which no pattern can say well).
        assert decoded or float(key) in (float("inf"), float("-inf")), key
    if decoded:
        assert advertised or key.lstrip("-").lower() in _FLOAT_EDGES, key


_OFFSET_OPTIONAL = "An RFC 3339 date-time, such as 2024-05-01T09:30:00Z; the UTC offset may be left out"


@pytest.mark.parametrize(
    ("field", "described", "taken"),
    [
        (datetime.datetime, {"description": _OFFSET_OPTIONAL, "type": "string"}, ["2024-05-01T09:30:00Z", "2024-05-01T09:30:00"]),
        (
            datetime.time,
            {"description": "An RFC 3339 time, such as 09:30:00; the UTC offset may be left out", "type": "string"},
            ["09:30:00", "09:30:00+02:00"],
        ),
        (
            Annotated[datetime.datetime, msgspec.Meta(tz=False)],
            {"description": "An RFC 3339 date-time without a UTC offset, such as 2024-05-01T09:30:00", "type": "string"},
            ["2024-05-01T09:30:00"],
        ),
        (Annotated[datetime.datetime, msgspec.Meta(tz=True)], {"type": "string", "format": "date-time"}, ["2024-05-01T09:30:00Z"]),
        (Annotated[datetime.time, msgspec.Meta(tz=False)], {"type": "string", "format": "partial-time"}, ["09:30:00"]),
        (Annotated[datetime.datetime, msgspec.Meta(description="When to ring")], {"description": "When to ring", "type": "string"}, ["2024-05-01T09:30:00"]),
        (
            datetime.datetime | None,
            {"anyOf": [{"description": _OFFSET_OPTIONAL, "type": "string"}, {"type": "null"}]},
            ["2024-05-01T09:30:00Z", None],
        ),
    ],
    ids=["datetime", "time", "naive-datetime", "aware-datetime", "naive-time", "own-description", "optional"],
)
def test_a_date_time_msgspec_gives_no_format_says_what_it_takes(field: Any, described: dict[str, Any], taken: list[object]) -> None:
    # Advertised as a bare string, an agent had to guess the spelling the strict decoder reads.
    probe = msgspec.defstruct("Probe", [("at", field)])
    codec = InputCodec(probe)
    assert codec.schema["properties"]["at"] == described
    for value in taken:
        assert not isinstance(codec.attempt({"at": value}), InvalidPayload), value
