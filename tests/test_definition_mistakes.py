"""Newcomer mistakes refused where the contract is written, not at the first call."""

from __future__ import annotations

import dataclasses
import re
from typing import Any, Protocol

import msgspec
import pytest

import agentfx
from agentfx import ContractError


def raises(message: str) -> pytest.RaisesExc[ContractError]:
    """Expect a ContractError whose message is exactly ``message``."""
    return pytest.raises(ContractError, match=f"^{re.escape(message)}$")


class Model(msgspec.Struct, frozen=True):
    items: tuple[str, ...] = ()


class AddedItem(msgspec.Struct, frozen=True):
    name: str


class RemovedItem(msgspec.Struct, frozen=True):
    name: str


class Cleared(msgspec.Struct, frozen=True, tag=True):
    pass


class Emptied(msgspec.Struct, frozen=True, tag="Cleared"):
    pass


class Kinded(msgspec.Struct, frozen=True, tag=True, tag_field="kind"):
    pass


# --- a Message union msgspec cannot decode ---------------------------------------------------


def test_a_union_of_untagged_structs_is_refused_naming_them_and_tag_true() -> None:
    with raises(
        "Cannot expose the Message union AddedItem | RemovedItem: AddedItem and RemovedItem are not tagged, "
        "and msgspec decodes a union of Structs only by their tags. "
        "Declare every Message of a union with tag=True: class AddedItem(msgspec.Struct, tag=True)"
    ):
        agentfx.expose(AddedItem | RemovedItem, agentfx.variant(AddedItem, "Add"))


def test_one_untagged_struct_among_tagged_ones_is_named_alone() -> None:
    with raises(
        "Cannot expose the Message union Cleared | RemovedItem: RemovedItem is not tagged, "
        "and msgspec decodes a union of Structs only by their tags. "
        "Declare every Message of a union with tag=True: class RemovedItem(msgspec.Struct, tag=True)"
    ):
        agentfx.expose(Cleared | RemovedItem, agentfx.variant(Cleared, "Clear"))


def test_the_typed_builder_refuses_it_too() -> None:
    shop = agentfx.for_model(Model)
    with pytest.raises(ContractError, match="tag=True"):
        shop.expose(AddedItem | RemovedItem)


def test_two_messages_sharing_a_tag_are_refused() -> None:
    with raises("Cannot expose the Message union Cleared | Emptied: Cleared and Emptied share the tag 'Cleared'. Give each Message its own tag"):
        agentfx.expose(Cleared | Emptied, agentfx.variant(Cleared, "Clear"))


def test_messages_tagged_by_different_fields_are_refused() -> None:
    with raises(
        'Cannot expose the Message union Cleared | Kinded: its Messages are tagged by different tag fields '
        '(Cleared by "type"; Kinded by "kind"). Use one tag_field for them all'
    ):
        agentfx.expose(Cleared | Kinded)


def test_a_member_that_is_not_a_struct_is_refused() -> None:
    with raises(
        "expose() needs a Message class or a union of Message classes, and int in Cleared | int "
        "is not a Message: a Message is a msgspec.Struct class"
    ):
        agentfx.expose(Cleared | int, agentfx.variant(Cleared, "Clear"))
    with raises(
        "expose() needs a Message class or a union of Message classes, and None in Cleared | None "
        "is not a Message: a Message is a msgspec.Struct class"
    ):
        agentfx.expose(Cleared | None)


def test_a_single_untagged_class_needs_no_tag() -> None:
    exposed = agentfx.expose(AddedItem, agentfx.variant(AddedItem, "Add"))
    assert [c.tag for c in exposed.capabilities] == ["AddedItem"]


def test_an_accepted_union_decodes_with_msgspec() -> None:
    class Added(msgspec.Struct, frozen=True, tag=True):
        name: str

    union: Any = Added | Cleared
    agentfx.expose(union, agentfx.variant(Added, "Add"), agentfx.variant(Cleared, "Clear"))
    assert msgspec.json.decode(msgspec.json.encode(Added(name="x")), type=union) == Added(name="x")


# --- a principal class whose instances cannot be hashed --------------------------------------


class MutableUser(msgspec.Struct):
    id: str


@dataclasses.dataclass
class DataUser:
    id: str


class EqUser(Protocol):
    def __eq__(self, other: object) -> bool: ...


def test_an_unhashable_struct_principal_is_refused_saying_frozen() -> None:
    with raises(
        "for_model() takes a hashable principal class, and MutableUser instances are not hashable "
        "(principals key the adapters' caches of runtimes and sessions): "
        "make it frozen, class MutableUser(msgspec.Struct, frozen=True)"
    ):
        agentfx.for_model(Model, principal=MutableUser)


def test_an_unhashable_dataclass_or_builtin_principal_is_refused() -> None:
    with pytest.raises(ContractError, match=re.escape("make it frozen, @dataclass(frozen=True) class DataUser")):
        agentfx.for_model(Model, principal=DataUser)
    with pytest.raises(ContractError, match="and dict instances are not hashable"):
        agentfx.for_model(Model, principal=dict)


def test_principals_it_cannot_judge_or_that_hash_are_accepted() -> None:
    class User(msgspec.Struct, frozen=True):
        id: str

    class IdentityUser(msgspec.Struct, eq=False):
        id: str

    untyped: Any = User | None
    for principal in (User, IdentityUser, str, object, untyped, EqUser):
        assert isinstance(agentfx.for_model(Model, principal=principal), agentfx.AgentBuilder)


class User(msgspec.Struct, frozen=True):
    id: str
    admin: bool = False


class Added(msgspec.Struct, frozen=True, tag=True):
    name: str


def add(model: Model, message: Added) -> Model:
    return Model(items=(*model.items, message.name))


Shop = agentfx.for_model(Model, principal=User)
shop = Shop.define(Shop.expose(Added, Shop.variant(Added, "Add", authorize=lambda req: req.principal.admin)))

# --- a function given an App where it takes its contract -------------------------------------


def test_documenting_an_app_points_at_app_definition() -> None:
    app = agentfx.App(shop, init=Model(), update=add, principal=User("ann"))
    for where, call in (
        ("to_manifest()", agentfx.to_manifest),
        ("to_markdown()", agentfx.to_markdown),
        ("messages()", agentfx.messages),
        ("schema()", agentfx.schema),
    ):
        with raises(f'{where} takes the result of define(...) as "definition", got an App; pass its contract, app.definition'):
            call(app)  # pyright: ignore[reportArgumentType]
    assert agentfx.to_manifest(app.definition) == agentfx.to_manifest(shop)
