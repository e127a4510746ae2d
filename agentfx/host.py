"""The host: how agentfx reaches an Elm-architecture application.

This layer owns only the *shape* of the connection between agentfx and an
application: read the current Model, send a Message into ``update``, and
(optionally) observe processed Messages and Model changes. It deliberately
knows nothing of contracts, dispatch or completion.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Generic, TypeVar

if TYPE_CHECKING:
    from .invocation import Invocation

__all__ = ["Host", "Unsubscribe"]

M = TypeVar("M")
Msg = TypeVar("Msg")
P = TypeVar("P")

Unsubscribe = Callable[[], None]
"""Calling it removes the listener it was returned for; calling it twice is harmless."""


# Not slotted: on Python 3.11 a frozen, slotted generic dataclass cannot be
# constructed with explicit type arguments (``Host[M, Msg, P](...)``).
@dataclass(frozen=True)
class Host(Generic[M, Msg, P]):
    """The callables agentfx needs from an application.

    Args:
        model: Returns the current Model. Models are immutable values: the host
            replaces the Model on every update and never mutates it.
        dispatch: Sends a Message into ``update``. May return an awaitable.
        principal: ``principal(invocation)`` says who is calling; ``None``
            means every invocation has the principal ``None``.
        observe: ``observe(listener)`` calls ``listener(message)`` for every
            processed Message, after update applied it; returns an unsubscribe.
            Required by a contract that declares a Message completion.
        subscribe: ``subscribe(listener)`` calls ``listener()`` on every Model
            change; returns an unsubscribe. Required by a contract that
            declares a state completion over the Model.

    >>> host = Host(model=lambda: 0, dispatch=lambda message: None)
    >>> host.model()
    0
    """

    model: Callable[[], M]
    dispatch: Callable[[Msg], Awaitable[object] | object]
    principal: Callable[[Invocation], P] | None = None
    observe: Callable[[Callable[[Msg], None]], Unsubscribe] | None = None
    subscribe: Callable[[Callable[[], None]], Unsubscribe] | None = None
