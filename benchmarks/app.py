"""The application every dispatch benchmark drives, and the host that keeps nothing.

One capability, ``create_todo``: a direct variant with ``available`` and
``authorize``, no completion. The two predicates are plain functions so the
hand-written floor calls exactly the same code the contract does.

The host answers from fixed values and drops every Message it is sent. A host
that appended each Message to a list would make the heap grow with every
call, and the collections that growth triggers would be timed as if agentfx
caused them.
"""

from __future__ import annotations

import msgspec
from typing_extensions import TypedDict

import agentfx
from agentfx import Invocation

__all__ = [
    "CONTRACT",
    "Agent",
    "CreateTodo",
    "Dispatched",
    "KeepNothingHost",
    "Model",
    "User",
    "by_hand",
    "dispatched",
    "is_open",
    "may_write",
]


class Model(msgspec.Struct, frozen=True):
    open: bool = True


class User(msgspec.Struct, frozen=True):
    id: str
    can_write: bool = True


class CreateTodo(msgspec.Struct, frozen=True, tag=True):
    title: str
    priority: int = 0


class Dispatched(TypedDict):
    """The structured content agentfx answers a dispatched ``create_todo`` with; each peer's tool answers it too.

    ``typing_extensions``' TypedDict: pydantic (FastMCP's output schema) takes no other on Python < 3.12.
    """

    capability: str
    tag: str


def dispatched() -> Dispatched:
    """What every contender's ``create_todo`` answers as structured content."""
    return {"capability": "create_todo", "tag": "CreateTodo"}


def by_hand(host: KeepNothingHost, title: str, priority: int) -> str | None:
    """What a hand-written ``create_todo`` tool does: the predicates, then the host.

    The reason it refuses, or ``None`` once the host was sent the Message; each
    contender raises the refusal its own framework expects.
    """
    if not is_open(host.model()):
        return "Not available"
    if not may_write(host.principal(None)):
        return "Not authorized"
    host.dispatch(CreateTodo(title, priority))
    return None


def is_open(model: Model) -> bool:
    """The ``available`` predicate."""
    return model.open


def may_write(user: User) -> bool:
    """The ``authorize`` predicate."""
    return user.can_write


Agent = agentfx.for_model(Model, principal=User)

CONTRACT = Agent.define(
    Agent.expose(
        CreateTodo,
        Agent.variant(
            CreateTodo,
            "Create a todo",
            name="create_todo",
            available=is_open,
            authorize=lambda request: may_write(request.principal),
        ),
    )
)


class KeepNothingHost:
    """A host over a fixed Model and principal that counts what it is sent and keeps none of it.

    >>> host = KeepNothingHost(Model(), User("u1"))
    >>> host.dispatch(CreateTodo("milk"))
    >>> host.sent
    1
    """

    __slots__ = ("_model", "_user", "sent")

    def __init__(self, model: Model, user: User) -> None:
        self._model = model
        self._user = user
        self.sent = 0

    def model(self) -> Model:
        return self._model

    def principal(self, invocation: Invocation | None) -> User:
        return self._user

    def dispatch(self, message: object) -> None:
        self.sent += 1

    @property
    def host(self) -> agentfx.Host[Model, CreateTodo, User]:
        """The :class:`agentfx.Host` over this object."""
        return agentfx.Host(model=self.model, dispatch=self.dispatch, principal=self.principal)
