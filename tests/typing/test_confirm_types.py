"""What pyright accepts and refuses for confirmation: ``Confirm`` answers, ``may_confirm``, confirmers.

Checked by pyright in strict mode with the rest of ``tests``, and run under
pytest so the hooks agree with their static types. Negative checks are pinned
with ``# pyright: ignore[<rule>]`` under ``reportUnnecessaryTypeIgnoreComment``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import assert_type

import msgspec
import pytest

import agentfx
from agentfx import AuthorizationRequest, Confirm, ConfirmationRequest, Invocation, Refusal, Variant


class Model(msgspec.Struct, frozen=True):
    selected: str | None = None


class User(msgspec.Struct, frozen=True):
    can_delete: bool = False


class RequestedDeleteTodo(msgspec.Struct, frozen=True, tag=True):
    id: str


class NoInput(msgspec.Struct, frozen=True):
    pass


TodoAgent = agentfx.for_model(Model, principal=User)
MODEL = Model(selected="t1")


def test_an_inline_authorize_may_answer_confirm_on_every_kind_of_variant() -> None:
    direct = TodoAgent.variant(
        RequestedDeleteTodo,
        "Delete a todo",
        authorize=lambda req: Confirm(f"Delete {assert_type(req.input, RequestedDeleteTodo).id}?"),
        may_confirm=True,
    )
    assert_type(direct, Variant[Model, User, RequestedDeleteTodo, RequestedDeleteTodo])
    mapped = TodoAgent.variant(
        RequestedDeleteTodo,
        "Delete the selected todo",
        input=NoInput,
        to_message=lambda _, ctx: RequestedDeleteTodo(id=ctx.model.selected or ""),
        authorize=lambda req: Confirm("Delete it?") if req.principal.can_delete else Refusal("no"),
        may_confirm=True,
    )
    assert_type(mapped, Variant[Model, User, RequestedDeleteTodo, NoInput])
    untyped = agentfx.variant(RequestedDeleteTodo, "Delete", authorize=lambda req: Confirm("Delete?"), may_confirm=True)
    for v in (direct, mapped, untyped):
        assert v.may_confirm is True
        assert v.authorize is not None
    assert mapped.authorize is not None
    asked = mapped.authorize(AuthorizationRequest(User(can_delete=True), NoInput(), MODEL, "in-app"))
    assert asked == Confirm("Delete it?")


async def _approve(request: ConfirmationRequest) -> bool:
    return request.prompt != ""


def test_an_invocation_takes_an_async_confirmer() -> None:
    invocation = Invocation(confirm=_approve, confirmed=False)
    assert_type(invocation.confirm, Callable[[ConfirmationRequest], Awaitable[bool]] | None)
    assert invocation.confirm is _approve


def test_what_pyright_refuses() -> None:
    # may_confirm is a flag, not a prompt.
    agentfx.variant(RequestedDeleteTodo, "Delete", may_confirm="yes")  # pyright: ignore[reportArgumentType, reportCallIssue]
    # A confirmer answers an awaitable bool, not a bare one.
    Invocation(confirm=lambda request: True)  # pyright: ignore[reportArgumentType]
    # A Confirm carries a prompt.
    with pytest.raises(TypeError):
        Confirm()  # pyright: ignore[reportCallIssue]
