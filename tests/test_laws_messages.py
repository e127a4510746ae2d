"""The law suite finds a ``to_message`` that builds a Message the Message union's codec does not carry."""
# pyright: reportPrivateUsage=false
# (these tests look at internals on purpose)

from __future__ import annotations

import re
from typing import Annotated, Any

import msgspec
import pytest

import agentfx
from agentfx.contract import define, expose, variant
from agentfx.errors import AgentAuthorizationError
from agentfx.invocation import Invocation
from agentfx.pipeline import DispatchResult
from agentfx.testing import check_contract, laws
from agentfx.testing.laws import LAWS, MESSAGE_ROUND_TRIP, REACHES_HOST, Law, LawViolation

FEW = 25


def _violation(law: Law, capability: str) -> Any:
    return pytest.raises(LawViolation, match=re.escape(f'Capability "{capability}" breaks the law "{law.key}"'))


class Change(msgspec.Struct, frozen=True):
    by: int


class Stocked(msgspec.Struct, frozen=True, tag=True):
    quantity: Annotated[int, msgspec.Meta(ge=0)]


class Cleared(msgspec.Struct, frozen=True, tag=True):
    pass


class Labelled(msgspec.Struct, frozen=True, tag=True):
    labels: tuple[str, ...]


class Noted(msgspec.Struct, frozen=True, tag=True):
    note: object


class Opaque:
    """A value JSON cannot say."""


def test_the_law_is_judged_after_the_message_reached_the_host() -> None:
    assert LAWS.index(MESSAGE_ROUND_TRIP) == LAWS.index(REACHES_HOST) + 1


def test_a_message_breaking_its_field_constraints_is_caught() -> None:
    # The runtime checks the class; the value inside it is what this law sees.
    contract = define(
        expose(
            Stocked | Cleared,
            variant(Stocked, "Restock", name="restock", input=Change, to_message=lambda c, ctx: Stocked(quantity=c.by)),
            variant(Cleared, "Clear", name="clear"),
        )
    )
    with _violation(MESSAGE_ROUND_TRIP, "restock") as caught:
        check_contract(contract, models=[None], principals=[None], max_examples=FEW)
    text = str(caught.value)
    # Shrunk to the boundary, and said what it sent and why it does not come back.
    assert "dispatching {'by': -1} sent Stocked(quantity=-1)" in text
    assert "which the Message union does not decode back" in text
    assert "Expected `int` >= 0 - at `$.quantity`" in text
    assert caught.value.law is MESSAGE_ROUND_TRIP
    assert caught.value.capability == "restock"


def test_a_message_with_a_field_of_the_wrong_type_is_caught() -> None:
    def to_message(change: Change, ctx: agentfx.InvocationContext[Any, Any]) -> Stocked:
        return Stocked(quantity=str(change.by) if change.by > 5 else abs(change.by))  # pyright: ignore[reportArgumentType]

    contract = define(expose(Stocked, variant(Stocked, "Restock", name="restock", input=Change, to_message=to_message)))
    with _violation(MESSAGE_ROUND_TRIP, "restock") as caught:
        check_contract(contract, models=[None], principals=[None], max_examples=FEW)
    assert "Stocked(quantity='6')" in str(caught.value)
    assert "Expected `int`, got `str`" in str(caught.value)


def test_a_message_that_does_not_encode_is_caught() -> None:
    contract = define(
        expose(Noted, variant(Noted, "Note", name="note", input=Change, to_message=lambda c, ctx: Noted(note=Opaque())))
    )
    with _violation(MESSAGE_ROUND_TRIP, "note") as caught:
        check_contract(contract, models=[None], principals=[None], max_examples=5)
    assert "which does not encode to JSON: TypeError" in str(caught.value)


def test_a_message_that_comes_back_as_another_value_is_caught() -> None:
    # A list where a tuple is declared: another process would get a different Message.
    contract = define(
        expose(
            Labelled,
            variant(
                Labelled, "Label", name="label", input=Change, to_message=lambda c, ctx: Labelled(labels=["x"] * abs(c.by))  # pyright: ignore[reportArgumentType]
            ),
        )
    )
    with _violation(MESSAGE_ROUND_TRIP, "label") as caught:
        check_contract(contract, models=[None], principals=[None], max_examples=FEW)
    assert "sent Labelled(labels=[]), which came back from JSON as Labelled(labels=())" in str(caught.value)


class Point(msgspec.Struct, frozen=True, tag=True, eq=False):
    x: int


class Untagged(msgspec.Struct, frozen=True):
    n: Annotated[int, msgspec.Meta(ge=0)]


class AlsoUntagged(msgspec.Struct, frozen=True):
    name: str


def test_sound_messages_keep_the_law_eq_false_and_direct_variants_included() -> None:
    # Point equals nothing but itself (eq=False): its JSON is what must come back.
    contract = define(
        expose(
            Point | Stocked,
            variant(Point, "Point", name="point", input=Change, to_message=lambda c, ctx: Point(x=c.by)),
            variant(Stocked, "Restock", name="restock", input=Change, to_message=lambda c, ctx: Stocked(abs(c.by))),
        )
    )
    check_contract(contract, models=[None], principals=[None], max_examples=FEW)
    check_contract(define(expose(Stocked, variant(Stocked, "Restock"))), models=[None], principals=[None], max_examples=FEW)


def _untagged(count: Any) -> agentfx.Definition[Any, Any]:
    """A contract over a union msgspec cannot decode, built by hand: ``expose`` refuses one."""
    return agentfx.Definition(
        Untagged | AlsoUntagged,
        (*expose(Untagged, count).capabilities, *expose(AlsoUntagged, variant(AlsoUntagged, "Name", name="name")).capabilities),
    )


def test_a_union_without_a_decoder_is_judged_one_class_at_a_time() -> None:
    # Two untagged Structs: msgspec cannot decode the union (expose refuses it),
    # but a contract built by hand still has a codec for each class.
    with pytest.raises(TypeError):
        msgspec.json.Decoder(Untagged | AlsoUntagged)
    with pytest.raises(agentfx.ContractError, match="not tagged"):
        expose(Untagged | AlsoUntagged, variant(Untagged, "Count", name="count"))
    sound = _untagged(variant(Untagged, "Count", name="count", input=Change, to_message=lambda c, ctx: Untagged(n=abs(c.by))))
    check_contract(sound, models=[None], principals=[None], max_examples=FEW)
    broken = _untagged(variant(Untagged, "Count", name="count", input=Change, to_message=lambda c, ctx: Untagged(n=c.by)))
    with _violation(MESSAGE_ROUND_TRIP, "count"):
        check_contract(broken, models=[None], principals=[None], max_examples=FEW)


[RESTOCK] = expose(
    Stocked, variant(Stocked, "Restock", name="restock", input=Change, to_message=lambda c, ctx: Stocked(c.by))
).capabilities


def _observation(outcome: DispatchResult | agentfx.DispatchError) -> laws._Observation:
    return laws._Observation(RESTOCK, "valid", {"by": -1}, outcome, (), None, True, ())


def test_only_a_sent_message_is_judged_and_only_where_there_is_a_codec() -> None:
    decoder = laws._message_decoder(Stocked, Stocked)
    assert decoder is not None
    bad = DispatchResult("restock", "Stocked", Stocked(quantity=-1), Invocation("i-1"))
    with _violation(MESSAGE_ROUND_TRIP, "restock"):
        laws._judge_message(_observation(bad), decoder)
    laws._judge_message(_observation(bad), None)
    laws._judge_message(_observation(AgentAuthorizationError.of("restock", "Stocked")), decoder)
    good = DispatchResult("restock", "Stocked", Stocked(quantity=1), Invocation("i-1"))
    laws._judge_message(_observation(good), decoder)


class Holder(msgspec.Struct, frozen=True, tag=True):
    """A Message declared to carry a value of the application's own: JSON carries it only through hooks."""

    opaque: Opaque
    others: tuple[Opaque, ...] = ()


class Tree(msgspec.Struct, frozen=True, tag=True):
    children: tuple[Tree, ...] = ()
    size: Annotated[int, msgspec.Meta(ge=0)] = 0


def test_a_message_declaring_a_field_json_cannot_carry_has_no_codec_to_judge_by() -> None:
    assert laws._message_decoder(Holder, Holder) is None
    assert laws._message_decoder(Stocked | Holder, Stocked) is not None
    assert laws._message_decoder(Tree, Tree) is not None  # a recursive type is walked once
    contract = define(
        expose(Holder, variant(Holder, "Hold", name="hold", input=Change, to_message=lambda c, ctx: Holder(Opaque())))
    )
    check_contract(contract, models=[None], principals=[None], max_examples=5)


def test_a_recursive_message_is_judged_all_the_way_down() -> None:
    def to_message(change: Change, ctx: agentfx.InvocationContext[Any, Any]) -> Tree:
        return Tree(children=(Tree(size=change.by),))

    contract = define(expose(Tree, variant(Tree, "Grow", name="grow", input=Change, to_message=to_message)))
    with _violation(MESSAGE_ROUND_TRIP, "grow") as caught:
        check_contract(contract, models=[None], principals=[None], max_examples=FEW)
    assert "Expected `int` >= 0 - at `$.children[0].size`" in str(caught.value)


class Shelved(msgspec.Struct, frozen=True, tag=True):
    """A Message with a constrained field beside one of the application's own type."""

    quantity: Annotated[int, msgspec.Meta(ge=0)]
    where: Opaque | None = None
    weight: float = 0.0
    seen: int | msgspec.UnsetType = msgspec.UNSET


def test_a_field_json_cannot_carry_leaves_the_other_fields_judged() -> None:
    def to_message(change: Change, ctx: agentfx.InvocationContext[Any, Any]) -> Shelved:
        return Shelved(quantity=change.by, where=Opaque())

    contract = define(expose(Shelved, variant(Shelved, "Shelve", name="shelve", input=Change, to_message=to_message)))
    with _violation(MESSAGE_ROUND_TRIP, "shelve") as caught:
        check_contract(contract, models=[None], principals=[None], max_examples=FEW)
    text = str(caught.value)
    assert "whose field `quantity` holds -1, which its declared type does not decode back" in text
    assert "Expected `int` >= 0" in text


def test_the_judged_fields_of_a_sound_message_keep_the_law() -> None:
    # An int in a float field comes back a float, and equal: no violation.
    def to_message(change: Change, ctx: agentfx.InvocationContext[Any, Any]) -> Shelved:
        return Shelved(quantity=abs(change.by), where=Opaque(), weight=abs(change.by) % 1000)

    contract = define(expose(Shelved, variant(Shelved, "Shelve", name="shelve", input=Change, to_message=to_message)))
    check_contract(contract, models=[None], principals=[None], max_examples=FEW)


def _sent(message: Shelved) -> laws._Observation:
    return _observation(DispatchResult("restock", "Shelved", message, Invocation("i-1")))


def test_each_field_json_carries_is_judged_and_an_unset_one_skipped() -> None:
    judged = laws._message_decoder(Shelved, Shelved)
    assert isinstance(judged, laws._FieldDecoders)
    assert [name for name, _, _ in judged.fields] == ["quantity", "weight", "seen"]
    assert judged.skipped == ("where",)
    laws._judge_message(_sent(Shelved(quantity=1, where=Opaque())), judged)
    laws._judge_message(_sent(Shelved(quantity=1, weight=2, seen=3)), judged)
    with _violation(MESSAGE_ROUND_TRIP, "restock") as caught:
        laws._judge_message(_sent(Shelved(quantity=1, seen="3")), judged)  # pyright: ignore[reportArgumentType]
    assert "whose field `seen` holds '3'" in str(caught.value)
