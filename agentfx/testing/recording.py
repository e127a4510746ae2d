"""An in-memory host that records what it is sent, for testing contracts without an application.

It owns a Model cell, the list of dispatched Messages, observe/subscribe
listener sets with counts (so tests can assert nothing leaked), and optional
scripted responses. It processes Messages in the reference program's order
(:class:`agentfx.program.Program`): one sent while another is being processed
is queued, so every listener hears every Message in processing order. It
deliberately knows nothing of contracts or dispatch.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Generic, cast, overload

import anyio.lowlevel

# ``TypeVar(default=...)`` (PEP 696) is in ``typing`` from Python 3.13 only.
from typing_extensions import TypeVar

from .._sequencing import Listeners, Sequencer
from ..host import Host, Unsubscribe
from ..invocation import Invocation

# The reference program's own reading of an update result, so the two never disagree
# on which results are ``(Model, commands)``; a private helper of the core, used here
# on purpose (the testing kit depends on the core, never the other way round).
from ..program import Command, Commands
from ..program import _as_pair  # pyright: ignore[reportPrivateUsage]

__all__ = ["RecordingHost"]

M = TypeVar("M")
# Inferred from ``update``; ``Any`` without one (or an annotation saying which).
Msg = TypeVar("Msg", default=Any)
P = TypeVar("P", default=Any)
# The constructor's own: its overloads are on ``__new__``, whose result fixes the class's
# variables (``__init__`` overloads annotating ``self`` lose an annotated target's types).
_M = TypeVar("_M")
_Msg = TypeVar("_Msg", default=Any)
_P = TypeVar("_P")

Responses = Mapping[type[Any], Iterable[Any] | Callable[[Any], Iterable[Any]]]

_logger = logging.getLogger("agentfx.testing")


class RecordingHost(Generic[M, Msg, P]):
    """A host over a settable Model that records every dispatched Message.

    Messages are processed as the reference program processes them
    (:class:`agentfx.program.Program`): applying ``update``, then telling
    subscribers (when the Model changed) and observers. One dispatched or
    emitted while another is being processed (a listener reacting) is queued,
    and processed once every listener of the current one was told, in the
    order sent; the outer call returns once the queue is empty. A listener
    unsubscribed during a notification is not called again; one subscribed
    during it first hears the next one. Every queued Message is processed even
    when a listener raised; the first exception then propagates. A chain of
    reactions deeper than :data:`agentfx.program.NESTED_MAX`, or a queue longer
    than :data:`agentfx.program.QUEUED_MAX`, raises ``RuntimeError``.

    Args:
        model: The initial Model.
        principal: The principal of every invocation, or a resolver
            ``principal(invocation)``; ``None`` when omitted, and the recorder
            is then a ``RecordingHost[M, Msg, None]``, whose host a contract
            declaring a principal type refuses (a type error). Any callable is
            taken for a resolver and called with each invocation, so a
            principal that is itself callable (a mock, an object with
            ``__call__``) is given wrapped: ``principal=lambda _: service``.
        responses: Maps a Message class to the Messages to emit (to observers,
            as if update had processed them) after one of that class is
            dispatched: an iterable, read once here (a generator is spent at
            construction, and its Messages emitted after every such
            dispatch), or a function of the dispatched Message, called per
            dispatch. They are emitted once every listener of the dispatched
            Message was told, as a listener reacting to it would send them.
        update: ``update(model, message)`` applied to every dispatched and
            emitted Message, returning the next Model or ``(model, commands)``
            as the reference program's does (:func:`agentfx.run_program`, whose
            rule tells the two apart; a command called where it should be
            named is a ``TypeError`` there and here). Subscribers are told when
            the Model changes (``new is not old``). Commands are not run: the
            recorder has no task group to run them in and dispatches
            synchronously, so they are appended to :attr:`commands`, in the
            order returned, for a test to run and :meth:`emit` the result of,
            or to stand for with ``responses``. The recorder's Message type is
            its ``message``'s (``Any`` without ``update``).
        async_dispatch: Make ``dispatch`` a coroutine that yields once before
            recording, and once more before emitting responses (as a command
            sending them would).

    Attributes:
        dispatched: Every Message dispatched through the host, in order
            (emitted ones and scripted responses are not).
        commands: Every command ``update`` returned, in order, not run.
        model_reads: How many times :meth:`model` was called.
        principal_calls: How many times :meth:`principal` was called.

    >>> recorder = RecordingHost(0, update=lambda model, message: model + message)
    >>> recorder.host.dispatch(2)
    >>> recorder.dispatched, recorder.model()
    ([2], 2)

    An update returning ``(model, commands)`` sets the Model; its commands are kept, not run:

    >>> async def save() -> None: ...
    >>> saving = RecordingHost(0, update=lambda model, message: (model + message, [save]))
    >>> saving.host.dispatch(3)
    >>> saving.model(), saving.commands == [save]
    (3, True)

    A Message sent from a listener waits for the current one's listeners:

    >>> heard: list[tuple[str, int]] = []
    >>> def first(message: int) -> None:
    ...     heard.append(("first", message))
    ...     if message == 1:
    ...         recorder.host.dispatch(10)
    >>> _ = recorder.observe(first)
    >>> _ = recorder.observe(lambda message: heard.append(("second", message)))
    >>> recorder.host.dispatch(1)
    >>> heard
    [('first', 1), ('second', 1), ('first', 10), ('second', 10)]
    """

    @overload
    def __new__(
        cls,
        model: _M,
        *,
        principal: _P | Callable[[Invocation], _P],
        responses: Responses | None = None,
        update: Callable[[_M, _Msg], _M | tuple[_M, Commands[_Msg]]] | None = None,
        async_dispatch: bool = False,
    ) -> RecordingHost[_M, _Msg, _P]: ...
    # Without a principal every invocation's is ``None``: such a recorder is a
    # ``RecordingHost[M, Msg, None]``, so a contract wanting a principal refuses its host.
    @overload
    def __new__(
        cls,
        model: _M,
        *,
        principal: None = None,
        responses: Responses | None = None,
        update: Callable[[_M, _Msg], _M | tuple[_M, Commands[_Msg]]] | None = None,
        async_dispatch: bool = False,
    ) -> RecordingHost[_M, _Msg, None]: ...
    def __new__(
        cls,
        model: Any,
        *,
        principal: Any = None,
        responses: Responses | None = None,
        update: Callable[[Any, Any], Any] | None = None,
        async_dispatch: bool = False,
    ) -> RecordingHost[Any, Any, Any]:
        return super().__new__(cls)

    def __init__(
        self,
        model: M,
        *,
        principal: P | Callable[[Invocation], P] | None = None,
        responses: Responses | None = None,
        update: Callable[[M, Msg], M | tuple[M, Commands[Msg]]] | None = None,
        async_dispatch: bool = False,
    ) -> None:
        self._model = model
        self._principal = principal
        # A one-shot iterable (a generator) would be spent by the first
        # dispatch and leave every later one unanswered.
        self._responses: dict[type[Any], tuple[Any, ...] | Callable[[Any], Iterable[Any]]] = {
            kind: scripted if callable(scripted) else tuple(scripted) for kind, scripted in (responses or {}).items()
        }
        self._update = update
        self._async = async_dispatch
        self.dispatched: list[Msg] = []
        self.commands: list[Command[Msg]] = []
        self.model_reads = 0
        self.principal_calls = 0
        self._observers = Listeners()
        self._subscribers = Listeners()
        # Each Message with whether its scripted responses follow it.
        self._sequencer: Sequencer[tuple[Msg, bool]] = Sequencer(self._apply, _logger, "host")

    def model(self) -> M:
        """The current Model (each call is counted in :attr:`model_reads`)."""
        self.model_reads += 1
        return self._model

    def set_model(self, model: M) -> None:
        """Replace the Model and notify subscribers, at once (also from a listener)."""
        self._model = model
        for entry in self._subscribers.snapshot():
            entry.call()

    def emit(self, message: Msg) -> None:
        """Process ``message`` as update would: apply ``update``, then tell listeners.

        From a listener, the Message is queued and processed once the current
        one's listeners were all told; :meth:`emit` then returns before it is.
        """
        self._process(message, respond=False)

    @property
    def listener_count(self) -> int:
        """Observers plus subscribers currently attached."""
        return len(self._observers) + len(self._subscribers)

    def observe(self, listener: Callable[[Msg], object]) -> Unsubscribe:
        """Call ``listener(message)`` for every processed Message."""
        return self._observers.add(listener)

    def subscribe(self, listener: Callable[[], object]) -> Unsubscribe:
        """Call ``listener()`` on every Model change."""
        return self._subscribers.add(listener)

    def _responses_to(self, message: Msg) -> Iterable[Msg]:
        scripted = self._responses.get(type(message))
        if scripted is None:
            return ()
        return scripted(message) if callable(scripted) else scripted

    def _process(self, message: Msg, *, respond: bool) -> None:
        self._sequencer.process((message, respond), message)

    def _apply(self, item: tuple[Msg, bool]) -> None:
        message, respond = item
        old = self._model
        if self._update is not None:
            result = self._update(old, message)
            # Exactly the reference program's test (a built-in tuple read by _as_pair).
            if result.__class__ is tuple and (pair := _as_pair(result)) is not None:
                self._model, commands = pair
                self.commands.extend(commands)
            else:
                self._model = cast(M, result)
        if self._model is not old:
            for entry in self._subscribers.snapshot():
                entry.call()
        for entry in self._observers.snapshot():
            entry.call(message)
        if respond:
            # Queued behind whatever the listeners sent, as a listener reacting last would.
            depth = self._sequencer.depth
            for response in self._responses_to(message):
                self._sequencer.enqueue((response, False), depth, response)

    def dispatch(self, message: Msg) -> None:
        """Record ``message``, process it, then emit its scripted responses."""
        self.dispatched.append(message)
        self._process(message, respond=True)

    async def dispatch_async(self, message: Msg) -> None:
        """:meth:`dispatch` with a checkpoint before recording and before responding."""
        await anyio.lowlevel.checkpoint()
        self.dispatched.append(message)
        self._process(message, respond=False)
        await anyio.lowlevel.checkpoint()
        for response in tuple(self._responses_to(message)):
            self._process(response, respond=False)

    def principal(self, invocation: Invocation) -> P:
        """The configured principal, or the resolver's answer (counted in :attr:`principal_calls`)."""
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
