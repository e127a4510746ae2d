"""The one place agentfx talks to ``returns`` in ways its type stubs cannot express to pyright.

``RequiresContextFutureResult.bind`` is declared through higher-kinded
emulation (``KindN``) that pyright reads as partially unknown even when every
step carries the full error union and environment type; this wrapper states
the precise signature once. :func:`as_result` is the public bridge from an
awaited dispatch (an ``IOResult``) to a ``Result`` a ``match`` can check for
exhaustiveness. This module knows nothing of dispatch itself.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar, cast

from returns.context import RequiresContextFutureResult
from returns.io import IO, IOResult
from returns.result import Failure, Result, Success
from returns.unsafe import unsafe_perform_io

__all__ = ["as_result", "bind"]

T = TypeVar("T")
U = TypeVar("U")
E = TypeVar("E")
Env = TypeVar("Env")


def bind(
    step: RequiresContextFutureResult[T, E, Env],
    function: Callable[[T], RequiresContextFutureResult[U, E, Env]],
) -> RequiresContextFutureResult[U, E, Env]:
    """``step.bind(function)``, typed."""
    return step.bind(function)  # pyright: ignore[reportUnknownMemberType]


def as_result(outcome: IOResult[T, E] | Result[T, E]) -> Success[T] | Failure[E]:
    """The ``Result`` inside an awaited dispatch, as ``Success(value) | Failure(error)``.

    ``await runtime.messages.dispatch(...)`` gives an ``IOResult``: the
    dispatch already ran (the ``IO`` marks that it had effects), and this
    unwraps the ``Result`` it ended with. The answer is typed as the union of
    the two cases, so a ``match`` with ``case Success(result)`` and
    ``case Failure(error)`` is exhaustive under a strict type checker and
    binds ``result`` as a :class:`~agentfx.DispatchResult` and ``error`` as a
    :data:`~agentfx.DispatchError`. A ``Result`` (such as
    ``runtime.resources.read(...)`` returns) is narrowed the same way.

    Args:
        outcome: An ``IOResult`` (an awaited ``FutureResult``) or a ``Result``.

    Raises:
        TypeError: ``outcome`` is neither, such as a dispatch not yet awaited.

    >>> from returns.io import IOFailure, IOSuccess
    >>> as_result(IOSuccess(1))
    <Success: 1>
    >>> match as_result(IOFailure("refused")):
    ...     case Success(value):
    ...         print("ok", value)
    ...     case Failure(error):
    ...         print("failed:", error)
    failed: refused
    """
    # returns' stubs type ``unsafe_perform_io`` over ``IO`` only, though it unwraps any of
    # its IO containers the same way; an ``IOResult`` holds exactly one ``Result``.
    result: object = unsafe_perform_io(cast(IO[Result[T, E]], outcome)) if isinstance(outcome, IOResult) else outcome
    if isinstance(result, Success):
        return result
    if isinstance(result, Failure):
        return result
    # Untyped code can pass the dispatch itself: a FutureResult is only an outcome once awaited.
    hint = "; await the dispatch first" if hasattr(result, "__await__") else ""
    raise TypeError(f"as_result() takes an IOResult or a Result, got {type(result).__name__}{hint}")
