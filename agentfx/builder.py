"""The typed builder: :func:`for_model` and :class:`AgentBuilder`.

This layer owns one thing: fixing a contract's Model and principal types once,
so that every inline hook of every declaration, and the host it is bound to,
is checked against them. Its methods are the declarations of
:mod:`agentfx.contract` plus :meth:`AgentBuilder.bind` from
:mod:`agentfx.runtime`; it sits above both, so the contract layer never
imports the runtime. It deliberately adds no behaviour of its own: every
check runs where the method it calls is defined.
"""

from __future__ import annotations

import dataclasses
from typing import Any, TypeVar, cast, overload

import msgspec

from .audit import AuditSink
from .contract import Declarations, Definition
from .errors import ContractError
from .host import Host
from .runtime import AgentRuntime, bind

__all__ = ["AgentBuilder", "for_model"]

M = TypeVar("M")
P = TypeVar("P")


class AgentBuilder(Declarations[M, P]):
    """Declares and binds contracts with the Model and principal types bound, so inline lambdas are checked.

    Build one with :func:`for_model`. ``variant``, ``action``, ``expose``,
    ``resource``, ``projection`` and ``define`` are those of
    :class:`~agentfx.contract.Declarations`; :meth:`bind` is
    :func:`agentfx.bind` for a contract and host of these types.
    """

    __slots__ = ()

    def bind(
        self,
        definition: Definition[M, P],
        *,
        host: Host[M, Any, P],
        audit: AuditSink | None = None,
        tracer: object | None = None,
    ) -> AgentRuntime[M, P]:
        """Bind a contract to a host, checking that the host can report every declared completion.

        Args:
            definition: The contract, from ``define``.
            host: The application's :class:`~agentfx.Host`, over the same Model and principal.
            audit: Receives one :class:`~agentfx.AuditRecord` per dispatch; a sink
                that raises never changes an outcome.
            tracer: An OpenTelemetry tracer; by default the configured global
                provider's, and no span work at all when none is configured.

        Raises:
            ContractError: A Message completion without ``host.observe``, or a
                Model state completion without ``host.subscribe``.

        >>> import msgspec, agentfx
        >>> class Model(msgspec.Struct):
        ...     pings: int = 0
        >>> class Ping(msgspec.Struct, tag=True):
        ...     pass
        >>> App = for_model(Model)
        >>> runtime = App.bind(
        ...     App.define(App.expose(Ping, App.variant(Ping, "Ping the app"))),
        ...     host=agentfx.Host(model=Model, dispatch=lambda message: None),
        ... )
        >>> [d.name for d in runtime.messages.list()]
        ['ping']
        """
        return bind(definition, host=host, audit=audit, tracer=tracer)


@overload
def for_model(model: type[M]) -> AgentBuilder[M, Any]: ...
@overload
def for_model(model: type[M], *, principal: type[P]) -> AgentBuilder[M, P]: ...
def for_model(model: type[Any], *, principal: type[Any] | None = None) -> AgentBuilder[Any, Any]:
    """A builder whose methods know the Model and principal types.

    The types guide the type checker. At runtime only a principal class whose
    instances cannot be hashed is refused: principals key the caches of the
    HTTP and A2A adapters, so each of its requests would fail. Without
    ``principal`` the principal is ``Any``, as for the module-level functions.

    Args:
        model: The application's Model class.
        principal: The class of what ``host.principal`` resolves.

    Raises:
        ContractError: ``principal`` is a class whose instances are not
            hashable (a msgspec Struct or dataclass that is not frozen).

    >>> import msgspec
    >>> class Model(msgspec.Struct):
    ...     count: int = 0
    >>> Counter = for_model(Model, principal=str)
    >>> isinstance(Counter, AgentBuilder)
    True
    """
    if principal is not None:
        _check_hashable(principal)
    return AgentBuilder()


def _check_hashable(principal: object) -> None:
    """Refuse a principal class whose instances are unhashable; typing constructs it cannot judge pass.

    >>> import msgspec
    >>> class User(msgspec.Struct):
    ...     id: str
    >>> _check_hashable(User)
    Traceback (most recent call last):
    ...
    agentfx.ContractError: for_model() takes a hashable principal class, and User instances are not hashable (principals key the adapters' caches of runtimes and sessions): make it frozen, class User(msgspec.Struct, frozen=True)
    """
    if not isinstance(principal, type) or getattr(principal, "_is_protocol", False):
        return  # A typing construct, or a Protocol: what implements it decides.
    cls = cast("type[Any]", principal)
    if issubclass(cls, msgspec.Struct):
        # A Struct's __hash__ is always there, and raises unless it is frozen
        # (or compares by identity, eq=False).
        config = cls.__struct_config__
        if config.frozen or not config.eq:
            return
    elif getattr(cls, "__hash__", None) is not None:
        return
    name = cls.__qualname__
    if issubclass(cls, msgspec.Struct):
        fix = f"make it frozen, class {name}(msgspec.Struct, frozen=True)"
    elif dataclasses.is_dataclass(cls):
        fix = f"make it frozen, @dataclass(frozen=True) class {name}"
    else:
        fix = "use a hashable class (a frozen msgspec Struct or dataclass, a str, ...)"
    raise ContractError(
        f"for_model() takes a hashable principal class, and {name} instances are not hashable "
        f"(principals key the adapters' caches of runtimes and sessions): {fix}"
    )
