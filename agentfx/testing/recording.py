"""An in-memory host that records what it is sent, for testing contracts without an application.

It owns a Model cell, the list of dispatched Messages, observe/subscribe
listener sets with counts (so tests can assert nothing leaked), and optional
scripted responses. It deliberately knows nothing of contracts or dispatch.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any, Generic, TypeVar, cast

import anyio.lowlevel

from ..host import Host, Unsubscribe
from ..invocation import Invocation

__all__ = ["RecordingHost"]

M = TypeVar("M")
Msg = TypeVar("Msg")
P = TypeVar("P")

Responses = Mapping[type[Any], Iterable[Any] | Callable[[Any], Iterable[Any]]]


class RecordingHost(Generic[M, Msg, P]):
    """A host over a settable Model that records every dispatched Message.

    Args:
        model: The initial Model.
        principal: The principal of every invocation, or a resolver
            ``principal(invocation)``; ``None`` when omitted.
        responses: Maps a Message class to the Messages to emit (to observers,
            as if update had processed them) after one of that class is
            dispatched: a fixed iterable, or a function of the dispatched Message.
        update: ``update(model, message) -> model`` applied to every dispatched
            and emitted Message; subscribers are told when the Model changes.
        async_dispatch: Make ``dispatch`` a coroutine that yields once before
            recording (and once more before emitting responses).

    >>> recorder = RecordingHost(0, update=lambda model, message: model + message)
    >>> recorder.host.dispatch(2)
    >>> recorder.dispatched, recorder.model()
    ([2], 2)
    """

    def __init__(
        self,
        model: M,
        *,
        principal: P | Callable[[Invocation], P] | None = None,
        responses: Responses | None = None,
        update: Callable[[M, Any], M] | None = None,
        async_dispatch: bool = False,
    ) -> None:
        self._model = model
        self._principal = principal
        self._responses: Responses = responses or {}
        self._update = update
        self._async = async_dispatch
        self.dispatched: list[Msg] = []
        self.model_reads = 0
        self.principal_calls = 0
        self._observers: dict[int, Callable[[Msg], None]] = {}
        self._subscribers: dict[int, Callable[[], None]] = {}
        self._next = 0

    def model(self) -> M:
        """The current Model (each call is counted in :attr:`model_reads`)."""
        self.model_reads += 1
        return self._model

    def set_model(self, model: M) -> None:
        """Replace the Model and notify subscribers."""
        self._model = model
        for listener in tuple(self._subscribers.values()):
            listener()

    def emit(self, message: Msg) -> None:
        """Process ``message`` as update would: apply ``update``, then tell observers."""
        if self._update is not None:
            new = self._update(self._model, message)
            if new is not self._model:
                self.set_model(new)
        for listener in tuple(self._observers.values()):
            listener(message)

    @property
    def listener_count(self) -> int:
        """Observers plus subscribers currently attached."""
        return len(self._observers) + len(self._subscribers)

    def observe(self, listener: Callable[[Msg], None]) -> Unsubscribe:
        """Call ``listener(message)`` for every processed Message."""
        return self._add(self._observers, listener)

    def subscribe(self, listener: Callable[[], None]) -> Unsubscribe:
        """Call ``listener()`` on every Model change."""
        return self._add(self._subscribers, listener)

    def _add(self, listeners: dict[int, Any], listener: Any) -> Unsubscribe:
        self._next += 1
        key = self._next
        listeners[key] = listener

        def unsubscribe() -> None:
            listeners.pop(key, None)

        return unsubscribe

    def _respond(self, message: Msg) -> None:
        scripted = self._responses.get(type(message))
        if scripted is None:
            return
        for response in scripted(message) if callable(scripted) else scripted:
            self.emit(response)

    def dispatch(self, message: Msg) -> None:
        """Record ``message``, process it, then emit its scripted responses."""
        self.dispatched.append(message)
        self.emit(message)
        self._respond(message)

    async def dispatch_async(self, message: Msg) -> None:
        """:meth:`dispatch` with a checkpoint before recording and before responding."""
        await anyio.lowlevel.checkpoint()
        self.dispatched.append(message)
        self.emit(message)
        await anyio.lowlevel.checkpoint()
        self._respond(message)

    def principal(self, invocation: Invocation) -> P:
        """The configured principal (counted in :attr:`principal_calls`)."""
        self.principal_calls += 1
        resolver: Any = self._principal
        return cast("P", resolver(invocation) if callable(resolver) else resolver)

    @property
    def host(self) -> Host[M, Msg, P]:
        """This recorder as an :class:`agentfx.Host`."""
        return Host(
            model=self.model,
            dispatch=self.dispatch_async if self._async else self.dispatch,
            principal=self.principal,
            observe=self.observe,
            subscribe=self.subscribe,
        )
