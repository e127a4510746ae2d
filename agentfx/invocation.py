"""Invocations: one agent call's identity, transport, cancellation signal and confirmation.

This layer owns invocation ids and the abort signal, and carries an adapter's
way to ask a person for confirmation (``confirm``) or its word that one already
approved the call (``confirmed``). It deliberately knows nothing of contracts or
dispatch: the pipeline asks a signal whether it is aborted and lends it the
cancel scopes that an abort must cancel, and decides when to ask ``confirm``.
"""

from __future__ import annotations

import itertools
import os
import secrets
from collections.abc import Awaitable, Callable
from threading import Lock, get_ident
from typing import TYPE_CHECKING

import anyio
import msgspec

if TYPE_CHECKING:
    from .confirm import ConfirmationRequest

__all__ = ["AbortController", "AbortSignal", "Invocation", "new_invocation_id"]

_prefix = secrets.token_hex(6)
_counter = itertools.count(1)


def _renew_prefix() -> None:
    # A forked worker would otherwise continue its parent's sequence of ids.
    global _prefix, _counter
    _prefix = secrets.token_hex(6)
    _counter = itertools.count(1)


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_renew_prefix)


def new_invocation_id() -> str:
    """Return an id no other invocation in this process has had.

    The prefix is random per process (and renewed in a forked child), so ids
    from two processes do not collide in practice either.

    >>> new_invocation_id() != new_invocation_id()
    True
    """
    return f"{_prefix}-{next(_counter)}"


class _State:
    """What a controller and its signal share: whether it aborted, why, and what to cancel (with each scope's thread)."""

    __slots__ = ("aborted", "lock", "reason", "scopes")

    def __init__(self) -> None:
        self.aborted = False
        self.reason: object = None
        self.scopes: dict[anyio.CancelScope, int] = {}
        # An abort from another thread must not interleave with an attach:
        # it would see no scope of the loop's, then cancel one from outside it.
        self.lock = Lock()


class AbortSignal:
    """The read side of an :class:`AbortController`.

    One signal may be shared by many invocations: aborting it cancels every
    pending one, and an invocation that starts with an aborted signal is
    refused before the Model is read.

    The signal holds the anyio cancel scopes of the invocations waiting on it;
    it starts no task of its own. Abort it from the event loop's thread: from
    another thread, while invocations wait on it, :meth:`AbortController.abort`
    raises ``RuntimeError`` and changes nothing (a cancel scope cannot be
    cancelled from outside its loop); hand the call to the loop instead, e.g.
    ``anyio.from_thread.run_sync(controller.abort)`` from a worker thread.
    """

    __slots__ = ("_state",)

    def __init__(self, state: _State | None = None) -> None:
        self._state = _State() if state is None else state

    @property
    def aborted(self) -> bool:
        """Whether :meth:`AbortController.abort` has been called."""
        return self._state.aborted

    @property
    def reason(self) -> object:
        """The reason given to :meth:`AbortController.abort`, if any."""
        return self._state.reason

    def attach(self, scope: anyio.CancelScope) -> None:
        """Cancel ``scope`` when this signal aborts; at once if it already has.

        Pair it with :meth:`detach` when the scope exits. An already-aborted
        signal cancels the scope on the spot, so an abort that raced the
        attach is never lost.
        """
        state = self._state
        with state.lock:
            if not state.aborted:
                state.scopes[scope] = get_ident()
                return
        scope.cancel()

    def detach(self, scope: anyio.CancelScope) -> None:
        """Stop cancelling ``scope`` on abort."""
        self._state.scopes.pop(scope, None)

    def __repr__(self) -> str:
        return f"AbortSignal(aborted={self._state.aborted!r}, reason={self._state.reason!r})"


class AbortController:
    """Creates an :class:`AbortSignal` and aborts it.

    >>> controller = AbortController()
    >>> controller.signal.aborted
    False
    >>> controller.abort("user pressed stop")
    >>> controller.signal.aborted, controller.signal.reason
    (True, 'user pressed stop')
    """

    __slots__ = ("_state", "signal")

    def __init__(self) -> None:
        self._state = _State()
        self.signal = AbortSignal(self._state)

    def abort(self, reason: object = None) -> None:
        """Abort the signal; every invocation waiting on it is cancelled. Idempotent.

        Raises:
            RuntimeError: called from a thread other than the event loop's
                while invocations wait on the signal; nothing changed.
        """
        state = self._state
        with state.lock:
            if state.aborted:
                return
            here = get_ident()
            if any(thread != here for thread in state.scopes.values()):
                raise RuntimeError(
                    "AbortController.abort() was called from another thread than the event loop's, whose "
                    "invocations wait on it; call it on the loop, e.g. anyio.from_thread.run_sync(controller.abort)"
                )
            state.aborted = True
            state.reason = reason
            scopes, state.scopes = state.scopes, {}
        # On this loop's thread (checked above), so no cancel raises.
        for scope in scopes:
            scope.cancel()


class Invocation(msgspec.Struct, frozen=True):
    """Who is calling, over what, how to cancel it, and how to ask a person.

    Missing parts are filled per dispatch: a fresh unique ``id`` each time
    unless one is supplied.

    Args:
        id: The invocation id; an adapter passes the protocol's call id.
        transport: ``"in-app"`` by default; adapters name theirs (``"mcp"``).
        signal: An :class:`AbortSignal` that cancels this invocation.
        confirm: Asks a person now, in band, when ``authorize`` answers
            :class:`~agentfx.Confirm`: ``True`` approves, ``False`` declines.
            Called at most once per invocation, raced against ``signal``.
        confirmed: The adapter already obtained a person's approval of this
            exact call out of band; a :class:`~agentfx.Confirm` answer then
            proceeds without asking. It approves nothing else: ``False`` or a
            :class:`~agentfx.Refusal` from ``authorize`` still refuses.

    >>> Invocation(id="call-1").transport
    'in-app'
    >>> Invocation(confirmed=True).filled().confirmed
    True
    """

    id: str | None = None
    transport: str = "in-app"
    signal: AbortSignal | None = None
    confirm: Callable[[ConfirmationRequest], Awaitable[bool]] | None = None
    confirmed: bool = False

    def filled(self) -> Invocation:
        """This invocation with an id, generating one if it has none.

        Every dispatch takes its invocation through here, so a field of the
        wrong type is told at the call, not as a defect deep in the pipeline
        (or as a failure whose ``invocation`` no longer decodes).

        Raises:
            TypeError: This is not an :class:`Invocation`, or a field is not of
                its type (an ``id`` that is not a string, a ``signal`` that is
                not an :class:`AbortSignal`, a ``confirm`` that is not callable).

        >>> Invocation(id=42).filled()
        Traceback (most recent call last):
        ...
        TypeError: Invocation id must be a string or None, not int
        """
        if type(self) is not Invocation:
            _check(self)  # raises for anything but a subclass whose fields are right
            return self if self.id is not None else msgspec.structs.replace(self, id=new_invocation_id())
        # Each field read once, and the copy built positionally: this runs for
        # every invocation a caller hands in (every adapter's call).
        id_, signal, confirm = self.id, self.signal, self.confirm
        if not (
            (id_ is None or type(id_) is str)
            and type(self.transport) is str
            and (signal is None or type(signal) is AbortSignal)
            and (confirm is None or callable(confirm))
            and type(self.confirmed) is bool
        ):
            _check(self)
        if id_ is not None:
            return self
        return Invocation(new_invocation_id(), self.transport, signal, confirm, self.confirmed)


def _check(invocation: object) -> None:
    """The slow half of :meth:`Invocation.filled`'s check: subclasses pass, anything else is told what is wrong."""
    if not isinstance(invocation, Invocation):
        raise TypeError(f"An invocation must be an agentfx.Invocation, not {type(invocation).__name__}")
    fields: tuple[tuple[str, type | tuple[type, ...], str], ...] = (
        ("id", (str, type(None)), "a string or None"),
        ("transport", str, "a string"),
        ("signal", (AbortSignal, type(None)), "an AbortSignal or None"),
        ("confirmed", bool, "a bool"),
    )
    for name, kinds, wanted in fields:
        # Read as a plain object: the annotation says what it should be, not what a caller passed.
        value: object = getattr(invocation, name)
        if not isinstance(value, kinds):
            raise TypeError(f"Invocation {name} must be {wanted}, not {type(value).__name__}")
    confirm: object = invocation.confirm
    if confirm is not None and not callable(confirm):
        raise TypeError(f"Invocation confirm must be a callable or None, not {type(confirm).__name__}")
