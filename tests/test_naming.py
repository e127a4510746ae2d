"""Message tags, default capability names and name validation."""

from __future__ import annotations

from typing import Any, cast

import msgspec
import pytest

from agentfx.errors import ContractError
from agentfx.naming import check_name, default_name, message_tag


class Tagged(msgspec.Struct, tag=True):
    pass


class Renamed(msgspec.Struct, tag="renamed_message"):
    pass


class Numbered(msgspec.Struct, tag=7):
    pass


class Untagged(msgspec.Struct):
    pass


class NotAStruct:
    pass


class TaggedChild(Tagged, tag="child"):
    pass


@pytest.mark.parametrize(
    ("cls", "tag"),
    [
        (Tagged, "Tagged"),
        (Renamed, "renamed_message"),
        (Numbered, "7"),
        (Untagged, "Untagged"),
        (NotAStruct, "NotAStruct"),
        (TaggedChild, "child"),
    ],
)
def test_message_tag(cls: type, tag: str) -> None:
    assert message_tag(cls) == tag


@pytest.mark.parametrize(
    ("tag", "name"),
    [
        ("RequestedDeleteTodo", "requested_delete_todo"),
        ("ClearedSelection", "cleared_selection"),
        ("A", "a"),
        ("Load2Todos", "load2_todos"),
        ("LoadedHTTPCache", "loaded_h_t_t_p_cache"),
        ("requested_delete_todo", "requested_delete_todo"),
        ("Foo_Bar", "foo_bar"),
        ("Foo-Bar", "foo-bar"),
        ("renamed_message", "renamed_message"),
        ("7", "7"),
    ],
)
def test_default_name(tag: str, name: str) -> None:
    assert default_name(tag) == name


def test_default_name_is_idempotent_on_its_output() -> None:
    once = default_name("LoadedHTTPCache")
    assert default_name(once) == once


@pytest.mark.parametrize(
    "name",
    ["a", "create_todo", "delete-todo", "Todo2", "_", "-", "x" * 128, "aZ09_-"],
)
def test_check_name_accepts_valid_names(name: str) -> None:
    assert check_name("RequestedCreateTodo", name) == name


@pytest.mark.parametrize(
    "name",
    [
        pytest.param("", id="empty"),
        pytest.param("x" * 129, id="129-chars"),
        pytest.param("create todo", id="space"),
        pytest.param("create.todo", id="dot"),
        pytest.param("créer", id="unicode"),
        pytest.param("create_todo\n", id="trailing-newline"),
        pytest.param("\ncreate_todo", id="leading-newline"),
        pytest.param("todo/create", id="slash"),
    ],
)
def test_check_name_rejects_invalid_names(name: str) -> None:
    with pytest.raises(ContractError) as info:
        check_name("RequestedCreateTodo", name)
    # A name past 128 characters is shown cut there, as every echo of a caller's text is.
    named = name if len(name) <= 128 else name[:128] + "…"
    assert str(info.value) == (
        f'Cannot expose "RequestedCreateTodo": "{named}" is not a valid capability name. '
        "Use 1-128 characters of [a-zA-Z0-9_-]."
    )


def test_a_long_invalid_name_is_shown_bounded() -> None:
    with pytest.raises(ContractError) as info:
        check_name("RequestedCreateTodo", "x y" * 100_000)
    assert len(str(info.value)) < 300
    with pytest.raises(ContractError) as info:
        check_name("RequestedCreateTodo", cast(Any, ["create_todo"] * 100_000))
    assert len(str(info.value)) < 500


class _Unprintable:
    def __repr__(self) -> str:
        raise RuntimeError("the name's own secret")


def test_a_name_whose_repr_raises_is_still_a_contract_error() -> None:
    with pytest.raises(ContractError) as info:
        check_name("RequestedCreateTodo", cast(Any, _Unprintable()))
    assert str(info.value) == (
        'Cannot expose "RequestedCreateTodo": <_Unprintable> is not a valid capability name. '
        "Use a string of 1-128 characters of [a-zA-Z0-9_-]."
    )


@pytest.mark.parametrize("name", [1, None, b"create_todo", ["create_todo"]])
def test_check_name_rejects_a_name_that_is_not_a_string(name: object) -> None:
    with pytest.raises(ContractError) as info:
        check_name("RequestedCreateTodo", cast(Any, name))
    assert str(info.value) == (
        f'Cannot expose "RequestedCreateTodo": {name!r} is not a valid capability name. '
        "Use a string of 1-128 characters of [a-zA-Z0-9_-]."
    )


def test_contract_error_is_a_value_error() -> None:
    with pytest.raises(ValueError, match="not a valid capability name"):
        check_name("T", "")
