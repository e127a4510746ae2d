"""An application packaged with its contract: what the CLI serves.

This layer owns :class:`App`, a contract together with the ``init`` and
``update`` of the reference program (:mod:`agentfx.program`) and the
principal its agents act as. ``async with app.run() as runtime`` starts the
program and binds the runtime; nothing else is needed to serve it. Any
:data:`ProgramFactory` may run the program instead of the in-process one
(``agentfx.redis.program`` shares one Model across processes).

It deliberately knows nothing of transports (adapters take the runtime it
yields) and imports no program but the in-process one: a factory is passed in.
"""

from __future__ import annotations

import inspect
from collections.abc import AsyncGenerator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import TYPE_CHECKING, Any, Generic, TypeAlias, TypeVar, cast

from .contract import check_definition, check_hook
from .program import Commands, Program, run_program
from .runtime import AgentRuntime, bind

if TYPE_CHECKING:
    from .audit import AuditSink
    from .contract import Definition
    from .invocation import Invocation

__all__ = ["App", "ProgramFactory"]

M = TypeVar("M")
Msg = TypeVar("Msg")
P = TypeVar("P")

ProgramFactory: TypeAlias = Callable[[Any, Any], AbstractAsyncContextManager[Program[Any, Any]]]
"""``factory(init, update)`` -> an async context manager running the program.

:func:`agentfx.run_program` (keyword arguments) is the default;
``agentfx.redis.program(url, namespace=..., message_type=...)`` returns one
whose Model lives in Redis.
"""


def _in_process(init: Any, update: Any) -> AbstractAsyncContextManager[Program[Any, Any]]:
    return run_program(init=init, update=update)


class _Keep:
    def __repr__(self) -> str:
        return "<the app's principal>"


_KEEP: Any = _Keep()


class App(Generic[M, Msg, P]):
    """A contract served over the reference program.

    Args:
        definition: The contract, from ``define``.
        init: The initial Model.
        update: ``update(model, message)``, returning the next Model or
            ``(model, commands)`` (see :func:`agentfx.run_program`).
        principal: Who the agents act as: a constant, or a resolver
            ``principal(invocation)`` called once per invocation. Anything
            callable is taken for a resolver, so a principal that is itself
            callable is passed as ``lambda _: principal``. ``None`` (the
            default) gives every invocation the principal ``None``.
        audit: Receives one record per dispatch of every runtime the app binds.
        program: Runs the program, ``factory(init, update)``; the in-process
            :func:`agentfx.run_program` by default. :meth:`program`,
            :meth:`run` and every server given this App use it.

    Raises:
        ContractError: ``definition`` is not a ``Definition`` (say, an
            ``expose(...)`` that was never passed to ``define``), ``update`` is
            not a synchronous function of a Model and a Message, or
            ``program`` is not a function of ``init`` and ``update``.

    >>> import anyio, msgspec, agentfx
    >>> class Bumped(msgspec.Struct, frozen=True, tag=True):
    ...     by: int
    >>> counter = agentfx.define(agentfx.expose(Bumped, agentfx.variant(Bumped, "Bump the counter")))
    >>> app = App(counter, init=0, update=lambda n, m: n + m.by)
    >>> async def main() -> None:
    ...     async with app.run() as runtime:
    ...         await runtime.messages.call(Bumped, {"by": 2})
    ...         print(runtime.host.model())
    >>> anyio.run(main)
    2
    """

    __slots__ = ("_programs", "audit", "definition", "init", "principal", "update")

    def __init__(
        self,
        definition: Definition[M, P],
        init: M,
        update: Callable[[M, Msg], M | tuple[M, Commands[Msg]]],
        principal: P | Callable[[Invocation], P] | None = None,
        *,
        audit: AuditSink | None = None,
        program: ProgramFactory | None = None,
    ) -> None:
        # Checked here, not at the first run: the CLI and servers read the
        # contract of an App long before, or without, binding it.
        self.definition: Definition[M, P] = check_definition("App()", definition)
        # Likewise: a wrong update would pass every check and list every tool,
        # then fail each call once its Message reached the program.
        check_hook("App()", "update", update, ("the Model", "a Message"), synchronous=True)
        self.init = init
        self.update = update
        self.principal = principal
        self.audit = audit
        self._programs: ProgramFactory = _in_process if program is None else _factory("App()", program)

    def program(self, factory: ProgramFactory | None = None) -> AbstractAsyncContextManager[Program[M, Msg]]:
        """Start the program alone, for binding several runtimes to one running application.

        Args:
            factory: Runs it instead of the app's own program factory.
        """
        return (self._programs if factory is None else _factory("App.program()", factory))(self.init, self.update)

    def bind(
        self,
        program: Program[M, Msg],
        *,
        principal: P | Callable[[Invocation], P] | None = _KEEP,
        audit: AuditSink | None = None,
    ) -> AgentRuntime[M, P]:
        """Bind the contract to a running program.

        Args:
            program: The running program, from :meth:`program`.
            principal: Overrides the app's principal for this runtime (a
                constant or a resolver, as in the constructor). Omitted, the
                app's own is kept; ``None`` is an override like any other,
                giving every invocation the principal ``None``.
            audit: Overrides the app's audit sink for this runtime.
        """
        chosen = self.principal if principal is _KEEP else principal
        host = program.host(principal=_resolver(chosen))
        return bind(self.definition, host=cast("Any", host), audit=self.audit if audit is None else audit)

    @asynccontextmanager
    async def run(
        self,
        *,
        principal: P | Callable[[Invocation], P] | None = _KEEP,
        audit: AuditSink | None = None,
        program: ProgramFactory | None = None,
    ) -> AsyncGenerator[AgentRuntime[M, P]]:
        """Start the program and bind the runtime for the duration of an ``async with`` block.

        Args:
            principal: Overrides the app's principal for this run (a constant
                or a resolver, as in the constructor). Omitted, the app's own
                is kept; ``None`` is an override like any other, giving every
                invocation the principal ``None``.
            audit: Overrides the app's audit sink for this run.
            program: Runs the program for this run, ``factory(init, update)``
                (see :data:`ProgramFactory`); the app's own by default.
        """
        async with self.program(program) as running:
            yield self.bind(running, principal=principal, audit=audit)

    def __repr__(self) -> str:
        names = ", ".join(c.name for c in self.definition.capabilities)
        return f"<App capabilities=[{names}]>"


def _factory(where: str, program: object) -> ProgramFactory:
    """``program``, once it is known to take ``init`` and ``update`` as a :data:`ProgramFactory` is called."""
    # Positionally, as it is called: run_program itself takes keywords only,
    # and is passed as ``lambda init, update: run_program(init=init, update=update)``.
    takes = ("the initial Model", "update")
    check_hook(where, "program", program, takes)
    wrapped = getattr(program, "__wrapped__", None)
    if wrapped is not None and _passes_everything(program):
        # An asynccontextmanager (run_program is one) hands everything to the
        # function it wraps: that one's signature is what the call must fit.
        check_hook(where, "program", wrapped, takes)
    return cast("ProgramFactory", program)


def _passes_everything(function: object) -> bool:
    """Whether ``function``'s own signature is ``(*args, **kwargs)`` and nothing else."""
    try:
        parameters = list(inspect.signature(cast("Callable[..., object]", function), follow_wrapped=False).parameters.values())
    except (TypeError, ValueError):
        return False
    kinds = [parameter.kind for parameter in parameters]
    return kinds == [inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD]


def _resolver(principal: object) -> Callable[[Invocation], Any] | None:
    if principal is None:
        return None
    if callable(principal):
        return cast("Callable[[Invocation], Any]", principal)
    return lambda _invocation: principal
