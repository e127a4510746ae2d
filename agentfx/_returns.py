"""The one place agentfx talks to ``returns`` in ways its type stubs cannot express to pyright.

``RequiresContextFutureResult.bind`` is declared through higher-kinded
emulation (``KindN``) that pyright reads as partially unknown even when every
step carries the full error union and environment type; this wrapper states
the precise signature once. :func:`as_result` is the public bridge from an
awaited dispatch (an ``IOResult``) to a ``Result`` a ``match`` can check for
exhaustiveness. :func:`success`, :func:`failure` and :func:`future_result` build those
containers as their constructors do, without the constructors' Python frames. This module knows nothing of
dispatch itself.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Coroutine, Generator
from typing import Any, TypeVar, cast

from returns.context import RequiresContextFutureResult
from returns.future import FutureResult
from returns.io import IO, IOFailure, IOResult, IOSuccess
from returns.primitives.container import BaseContainer
from returns.primitives.reawaitable import ReAwaitable
from returns.result import Failure, Result, Success
from returns.unsafe import unsafe_perform_io

__all__ = ["as_result", "bind", "failure", "future_result", "success"]

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


# --- two containers built without their constructors' frames ---------------------------------
#
# ``Success(value)`` runs two Python ``__init__`` frames, ``Failure(error)`` two and its
# trace hook, ``FutureResult(awaitable)`` three (with its ``ReAwaitable``), to store one
# value in the one slot every returns container has: 0.29, 0.38 and 0.36 µs, each as
# much as a pipeline step, and a dispatch through a ``FutureResult`` pays two of them. Setting the slot directly builds the same
# container in a third of the time. Whether it does is checked once, at import,
# against the constructors themselves; a returns release that stores its value
# elsewhere gets the constructors.

_new: Callable[[type[object]], Any] = object.__new__
_slot: object = getattr(BaseContainer, "_inner_value", None)


def _no_slot(container: object, value: object) -> None:  # pragma: no cover - never chosen, see below
    raise TypeError("this returns release keeps a container's value elsewhere")


_set_inner: Callable[[object, object], None] = getattr(_slot, "__set__", None) or _no_slot
_trace_slot: object = getattr(Result, "_trace", None)
_set_trace: Callable[[object, object], None] = getattr(_trace_slot, "__set__", None) or _no_slot


def _fast_success(value: T) -> Success[T]:
    """``Success(value)``, built as its constructor builds it.

    >>> success(3) == Success(3), type(success(3)).__name__
    (True, 'Success')
    """
    # No cast() here or below: it is a call, and these exist to save calls.
    made: Success[T] = _new(Success)
    _set_inner(made, value)
    return made


def _fast_failure(error: E) -> Failure[E]:
    """``Failure(error)``, built as its constructor builds it, its trace hook included.

    >>> failure("no") == Failure("no"), type(failure("no")).__name__
    (True, 'Failure')
    """
    made: Failure[E] = _new(Failure)
    _set_inner(made, error)
    # Called from here, as from Failure.__init__, one frame below the caller:
    # returns' collect_traces records the same stack either way.
    _set_trace(made, made._get_trace())  # pyright: ignore[reportPrivateUsage]
    return made


class _FutureResult(FutureResult[T, E]):  # pyright: ignore[reportGeneralTypeIssues]
    """A ``FutureResult`` whose ``await`` wraps the ``Result`` it ends with for less.

    Awaiting a ``FutureResult`` runs ``awaitable()``, a coroutine of its own,
    then ``IOResult.from_result``: an ``isinstance`` against the ABC
    ``Success`` (which costs a refusal 0.16 µs when it fails) and a fresh
    ``IOSuccess`` or ``IOFailure`` through three constructors, rebuilding the
    ``Result`` it was handed (``Failure`` recording its trace again). Together
    they cost more than the dispatch they wrap. This subclass, which returns
    marks final for its type checker only, wraps that same ``Result`` in the
    ``IOResult`` slot directly (containers are immutable, so sharing it changes
    nothing a caller can see). Everything else is inherited: ``map``, ``bind``
    and the rest build plain ``FutureResult`` values from the same re-awaitable
    inner value, and its ``repr`` is a ``FutureResult``'s (returns strips the
    underscore). Its behaviour is checked against returns' own at import.
    """

    __slots__ = ()

    def __await__(self) -> Generator[Any, Any, IOResult[T, E]]:
        return _wrapped(self._inner_value).__await__()

    def awaitable(self) -> Coroutine[Any, Any, IOResult[T, E]]:  # pyright: ignore[reportIncompatibleMethodOverride]
        return _wrapped(self._inner_value)


async def _wrapped(inner: Awaitable[Result[T, E]]) -> IOResult[T, E]:
    result = await inner
    # The exact class: a Success never subclasses, and an isinstance against the ABC that fails is slow.
    succeeded: bool = type(result) is Success
    made: IOResult[T, E] = _new(IOSuccess if succeeded else IOFailure)
    _set_inner(made, result)
    return made


def _fast_future_result(awaitable: Awaitable[Result[T, E]]) -> FutureResult[T, E]:
    """``FutureResult(awaitable)``, built as its constructor builds it: nothing runs until it is awaited."""
    made: FutureResult[T, E] = _new(_FutureResult)
    _set_inner(made, ReAwaitable(awaitable))
    return made


def _plain_success(value: T) -> Success[T]:
    return Success(value)


def _plain_failure(error: E) -> Failure[E]:
    return Failure(error)


def _plain_future_result(awaitable: Awaitable[Result[T, E]]) -> FutureResult[T, E]:
    return FutureResult(awaitable)


async def _returned(result: Result[int, int]) -> Result[int, int]:
    return result


def _ran(running: Coroutine[Any, Any, T]) -> T | None:
    # Run to its end by hand: nothing in it suspends, and no event loop runs at import.
    try:
        running.send(None)
    except StopIteration as done:
        return cast("T", done.value)
    running.close()  # pragma: no cover - it never suspends
    return None  # pragma: no cover


def _builds_containers() -> bool:
    if _slot is None or _trace_slot is None:
        return False
    try:
        made = _fast_success(3)
        if not (type(made) is Success and made == Success(3) and repr(made) == repr(Success(3))):
            return False
        failed = _fast_failure(3)
        if not (type(failed) is Failure and failed == Failure(3) and failed.trace == Failure(3).trace):
            return False
        # The awaited value, wrapped here and by returns itself, for a success and a failure.
        for result in (Success(1), Failure(1)):
            wrapped = _ran(_fast_future_result(_returned(result)).awaitable())
            expected = _ran(FutureResult(_returned(result)).awaitable())
            if not (type(wrapped) is type(expected) and wrapped == expected and repr(wrapped) == repr(expected)):
                return False
        return True
    except Exception:  # pragma: no cover - only with a returns release that differs
        return False


if _builds_containers():
    success = _fast_success
    """``Success(value)``: the same container, about 0.1 µs where the constructor takes 0.3."""
    failure = _fast_failure
    """``Failure(error)``: the same container, about 0.13 µs where the constructor takes 0.38."""
    future_result = _fast_future_result
    """``FutureResult(awaitable)``: the same container, about 0.2 µs where the constructor takes 0.36."""
else:  # pragma: no cover - only with a returns release that stores its value elsewhere
    success = _plain_success
    failure = _plain_failure
    future_result = _plain_future_result


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
