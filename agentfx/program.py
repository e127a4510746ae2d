"""The reference host: a small anyio-based Elm runtime.

This layer owns one running application: the current Model, the ``update``
that replaces it, the commands ``update`` asks for, and the listeners told
about processed Messages and Model changes. It exists so that examples, tests
and the demo run with nothing else, and it is lean because benchmarks use it
as their host.

It deliberately knows nothing of contracts, dispatch, completion or agents:
:meth:`Program.host` only packs its own methods into a :class:`~agentfx.host.Host`.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncGenerator, Awaitable, Callable
from contextlib import asynccontextmanager
from inspect import isawaitable
from typing import TYPE_CHECKING, Any, Generic, NoReturn, TypeAlias, TypeVar, cast, overload

import anyio
from anyio.lowlevel import checkpoint

from ._sequencing import NESTED_MAX, QUEUED_MAX, Listeners, Sequencer
from .host import Host, Unsubscribe

if TYPE_CHECKING:
    from anyio.abc import TaskGroup

    from .invocation import Invocation

__all__ = ["NESTED_MAX", "QUEUED_MAX", "Command", "Commands", "Program", "run_program"]

M = TypeVar("M")
Msg = TypeVar("Msg")
P = TypeVar("P")

Command: TypeAlias = Callable[[], Awaitable[Msg | None]]
"""An effect ``update`` asks for: ``async () -> Message | None``.

A non-``None`` result is sent back into the program like any other Message.
"""

Commands: TypeAlias = list[Command[Msg]] | tuple[Command[Msg], ...]
"""The commands half of an ``update`` result: a ``list`` or ``tuple`` of commands."""


_logger = logging.getLogger("agentfx.program")


def _raise_bare(lone: BaseException) -> NoReturn:
    """Raise ``lone``, the one failure a task group wrapped, keeping its own chain.

    Raising sets ``__context__`` to whatever is being handled around the
    block (the group, a cancellation); the failure's own is put back.
    """
    context, suppress = lone.__context__, lone.__suppress_context__
    try:
        raise lone
    finally:
        lone.__context__, lone.__suppress_context__ = context, suppress
        del lone, context


def _as_pair(result: object) -> tuple[Any, Commands[Any]] | None:
    """``(model, commands)`` if ``result``, a built-in tuple, is that pair; ``None`` if it is the Model.

    Raises:
        TypeError: the second item holds an awaitable: a command called
            (``fetch()``) where it should have been named (``fetch``).
    """
    # A Model may itself be a tuple, so only a 2-tuple whose second item is a
    # list or tuple of callables is read as (Model, commands); see run_program.
    result = cast("tuple[object, ...]", result)
    if len(result) == 2:
        commands = result[1]
        if type(commands) is list or type(commands) is tuple:
            items = cast("list[object] | tuple[object, ...]", commands)
            if all(map(callable, items)):
                return cast("tuple[Any, Commands[Any]]", result)
            # By the rule, a Model; but no Model holds a coroutine where commands go, and
            # read as one the mistake would only show updates later, far from its cause.
            called: list[object] = [item for item in items if isawaitable(item)]
            if called:
                _refuse_called(called)
    return None


def _refuse_called(called: list[object]) -> NoReturn:
    for item in called:
        close = getattr(item, "close", None)
        if callable(close):
            close()  # never awaited, and it must not warn that it was not
    first = called[0]
    name = getattr(first, "__name__", None)
    if isinstance(name, str) and name.isidentifier():
        what, hint = f"{name}()", f": write [{name}], not [{name}()]"
    else:
        what, hint = f"an awaitable ({type(first).__name__})", ""
    raise TypeError(
        f"update returned (model, commands) with {what} among the commands; a command is the async "
        f"function itself, which the program calls, not what calling it returns{hint}"
    )


class Program(Generic[M, Msg]):
    """A running Elm program; obtain one from :func:`run_program`.

    :meth:`send` applies ``update`` synchronously, so Messages never interleave:
    each is fully applied, and its listeners notified, before the next one is
    processed. After ``update`` has replaced the Model, the notification order is:

    1. subscribers (``listener()``), only if the Model changed (``new is not old``);
    2. observers (``listener(message)``), for every processed Message.

    So by the time an observer hears a Message, every subscriber has already
    seen the Model it produced. A listener may subscribe or unsubscribe (itself
    or another) while being notified: one removed mid-notification is not called
    again, one added mid-notification first hears the next notification. An
    exception raised by a listener propagates out of :meth:`send`; the Model has
    already been replaced and later listeners miss that notification.

    A Message sent while another is being processed (a listener reacting
    through ``host.dispatch``) is queued, as in Elm, and processed once the
    current Message's listeners have all been notified, in the order sent; so
    observers hear every Message in processing order. Such a send returns
    before its Message is applied (so an exception its Message causes comes
    out of the outer send, not out of it), and the outer send returns once the
    queue is empty. Every queued Message is processed even when a listener
    raised; the first exception then propagates. A send that would make a
    chain of reactions deeper than :data:`NESTED_MAX`, or the queue longer
    than :data:`QUEUED_MAX`, raises ``RuntimeError``.
    """

    __slots__ = ("_model", "_observers", "_sequencer", "_subscribers", "_task_group", "_update")

    def __init__(
        self,
        model: M,
        update: Callable[[M, Msg], M | tuple[M, Commands[Msg]]],
        task_group: TaskGroup,
    ) -> None:
        self._model = model
        self._update = update
        self._task_group = task_group
        self._observers = Listeners()
        self._subscribers = Listeners()
        self._sequencer: Sequencer[Msg] = Sequencer(self._apply, _logger, "program")

    @property
    def model(self) -> M:
        """The current Model."""
        return self._model

    @property
    def listener_count(self) -> int:
        """Observers plus subscribers currently attached."""
        return len(self._observers) + len(self._subscribers)

    async def send(self, message: Msg) -> None:
        """Process ``message``: apply ``update``, start its commands, notify listeners.

        Returns once ``update`` has applied the Message and every listener has
        been notified; the commands it asked for run afterwards, concurrently.

        It is a checkpoint, as an awaited call is to anyio and trio: it first
        lets other tasks run (the commands already started, a deadline that has
        passed), so a loop of sends neither starves them nor outlives its cancel
        scope. A cancelled send raises before its Message is processed, so a
        cancellation never hides a Message that reached ``update``. The host's
        ``dispatch`` (see :meth:`host`) stays synchronous.

        Raises:
            RuntimeError: the program has stopped (its ``run_program`` block exited).

        >>> async def main() -> None:
        ...     async with run_program(init=0, update=lambda n, k: n + k) as program:
        ...         await program.send(2)
        ...         print(program.model)
        >>> anyio.run(main)
        2
        """
        # Before processing, not after: after, a cancellation would be raised
        # for a Message update had already applied, and its commands might
        # already have run by the time the send returns.
        await checkpoint()
        self._deliver(message)

    def _host_dispatch(self) -> Callable[[Msg], object]:
        """What :meth:`host` dispatches through: :meth:`_deliver`, as nothing here awaits.

        A program that sends elsewhere (the Redis one) hands its own, awaitable, ``send``.
        """
        return self._deliver

    def _deliver(self, message: Msg) -> None:
        """:meth:`send`, synchronously: the host's ``dispatch`` (``update`` runs at once, or, from a listener, queued)."""
        if self._closed:
            raise RuntimeError(
                f"Cannot send {message!r}: the program has stopped "
                "(its run_program block has exited)"
            )
        self._sequencer.process(message, message)

    def _apply(self, message: Msg) -> None:
        old = self._model
        result = self._update(old, message)
        # The common case, a bare Model, costs one type check.
        if result.__class__ is tuple and (pair := _as_pair(result)) is not None:
            new, commands = pair
            self._model = new
            start = self._task_group.start_soon
            for command in commands:
                start(self._run_command, command)
        else:
            new = cast(M, result)
            self._model = new
        if new is not old:
            for entry in self._subscribers.snapshot():
                entry.call()
        for entry in self._observers.snapshot():
            entry.call(message)

    async def _run_command(self, command: Command[Msg]) -> None:
        result = await command()
        # A command cancelled on exit may still have finished its last await;
        # its result is dropped rather than sent into a stopped program.
        if result is not None and not self._closed:
            self._sequencer.process(result, result)

    def observe(self, listener: Callable[[Msg], object]) -> Unsubscribe:
        """Call ``listener(message)`` for every processed Message, after ``update`` applied it.

        Returns:
            An idempotent unsubscribe.

        >>> async def main() -> None:
        ...     async with run_program(init=0, update=lambda n, k: n + k) as program:
        ...         unsubscribe = program.observe(lambda message: print("saw", message))
        ...         await program.send(1)
        ...         unsubscribe()
        ...         await program.send(1)
        >>> anyio.run(main)
        saw 1
        """
        return self._observers.add(listener)

    def subscribe(self, listener: Callable[[], object]) -> Unsubscribe:
        """Call ``listener()`` whenever a processed Message replaced the Model.

        "Replaced" means ``update`` returned a different object (``new is not old``);
        an ``update`` that returns the Model it was given notifies nobody.

        Returns:
            An idempotent unsubscribe.

        >>> async def main() -> None:
        ...     async with run_program(init=0, update=lambda n, k: n + k) as program:
        ...         program.subscribe(lambda: print("model is", program.model))
        ...         await program.send(5)
        >>> anyio.run(main)
        model is 5
        """
        return self._subscribers.add(listener)

    def _current_model(self) -> M:
        return self._model

    @overload
    def host(self, principal: None = None) -> Host[M, Msg, None]: ...
    @overload
    def host(self, principal: Callable[[Invocation], P]) -> Host[M, Msg, P]: ...
    def host(self, principal: Callable[[Invocation], P] | None = None) -> Host[M, Msg, P] | Host[M, Msg, None]:
        """This program as an agentfx :class:`~agentfx.host.Host`.

        Args:
            principal: ``principal(invocation)`` says who is calling; ``None``
                gives every invocation the principal ``None``.

        Its ``dispatch`` is synchronous: ``update`` runs at once, so the
        runtime has nothing to await for it (an awaitable dispatch costs a
        call a coroutine, and a cancel scope raced against its signal).

        >>> async def main() -> None:
        ...     async with run_program(init=0, update=lambda n, k: n + k) as program:
        ...         host = program.host()
        ...         host.dispatch(3)
        ...         print(host.model())
        >>> anyio.run(main)
        3
        """
        return Host(
            model=self._current_model,
            dispatch=self._host_dispatch(),
            principal=principal,
            observe=self.observe,
            subscribe=self.subscribe,
        )

    @property
    def _closed(self) -> bool:
        # run_program cancels the task group as its block exits, whichever way.
        return self._task_group.cancel_scope.cancel_called

    def __repr__(self) -> str:
        state = "stopped" if self._closed else "running"
        return f"<Program {state} model={self._model!r} listeners={self.listener_count}>"


@asynccontextmanager
async def run_program(
    *,
    init: M,
    update: Callable[[M, Msg], M | tuple[M, Commands[Msg]]],
) -> AsyncGenerator[Program[M, Msg]]:
    """Run an Elm program for the duration of an ``async with`` block.

    ``update(model, message)`` returns the next Model, or ``(model, commands)``.
    The rule that tells them apart: a result that is exactly a built-in ``tuple``
    (not a subclass such as a NamedTuple) of length 2 whose second item is a
    ``list`` or ``tuple`` of callables is ``(model, commands)``; anything else is
    the Model. If your Model is itself a plain tuple, always return the pair
    form (``(model, ())`` when there is nothing to run) so no Model is mistaken
    for a pair. A list or tuple there holding an awaitable is neither: it is a
    command called (``[fetch()]``) instead of named (``[fetch]``), and ``send``
    raises ``TypeError``, keeping the Model, as for an ``update`` that raises.

    Each command is started in the program's task group; a non-``None`` result
    is sent back in and processed like any other Message. Leaving the block
    stops the program: :meth:`Program.send` raises from then on and pending
    commands are cancelled. A command that raises stops the program and its
    exception propagates out of the block (two or more failing at once
    propagate together as a ``BaseExceptionGroup``).

    Args:
        init: The initial Model.
        update: ``update(model, message)``; synchronous and pure.

    >>> async def main() -> None:
    ...     async def fetch() -> str:
    ...         return "loaded"
    ...     def update(log: tuple[str, ...], message: str) -> tuple[tuple[str, ...], Commands[str]]:
    ...         return (*log, message), [fetch] if message == "load" else []
    ...     async with run_program(init=(), update=update) as program:
    ...         await program.send("load")
    ...         await anyio.wait_all_tasks_blocked()
    ...         print(program.model)
    >>> anyio.run(main)
    ('load', 'loaded')
    """
    lone: BaseException | None = None
    try:
        async with anyio.create_task_group() as task_group:
            program = Program(init, update, task_group)
            try:
                yield program
            finally:
                task_group.cancel_scope.cancel()
    except BaseExceptionGroup as group:
        # The task group wraps even a lone failure (the block's own or one
        # command's); hand it back bare so callers can catch what was raised.
        if len(group.exceptions) != 1:
            raise
        lone = group.exceptions[0]
    if lone is not None:
        try:
            _raise_bare(lone)
        finally:
            del lone
