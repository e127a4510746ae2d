"""Completion contracts: which later Message, or which state, finishes a capability's work.

This module owns the declarations (:class:`Completion`, :func:`when`,
:class:`Source`) and the waiting machinery the runtime uses after a Message is
sent. It deliberately knows nothing of transports, audit or decoding: it is
handed a decoded request, the dispatched Message and the host's listener hooks.
"""

from __future__ import annotations

import asyncio
import decimal
import inspect
import math
import numbers
import sys
from collections.abc import Awaitable, Callable, Hashable
from dataclasses import dataclass, field
from datetime import timedelta
from inspect import isawaitable
from types import NoneType
from typing import Any, Generic, Literal, NoReturn, TypeAlias, cast

import anyio
import msgspec

# ``TypeVar(default=...)`` (PEP 696) is in ``typing`` from Python 3.13 only.
from typing_extensions import TypeVar

from .errors import ContractError, kind_of
from .host import Unsubscribe
from .invocation import Invocation

__all__ = [
    "CallInfo",
    "Completion",
    "CompletionOutcome",
    "MessageHub",
    "Pending",
    "Source",
    "StateCompletion",
    "StateWaiter",
    "when",
]

# These default to ``Any`` so a completion built outside ``variant(...)``, with nothing to
# infer its request type from, is ``Completion[Any, Res]`` rather than partially unknown;
# written inline, the variant still infers them.
Req = TypeVar("Req", default=Any)
Res = TypeVar("Res", default=Any)
V = TypeVar("V", default=Any)
M = TypeVar("M", default=Any)
# The dispatched Message; it defaults to ``Any`` so ``CallInfo`` and ``Completion[Req, Res]``
# written without it keep their meaning.
Sent = TypeVar("Sent", default=Any)

_DEFAULT_TIMEOUT = 30.0


def _seconds(timeout: float | timedelta) -> float:
    """``timeout`` in seconds, refusing what is not a positive, finite duration.

    >>> _seconds(timedelta(milliseconds=50))
    0.05
    >>> _seconds("10")
    Traceback (most recent call last):
    ...
    agentfx.ContractError: A completion timeout must be seconds (a real number: an int or a float) or a datetime.timedelta; it is a str
    >>> _seconds(10**400)
    Traceback (most recent call last):
    ...
    agentfx.ContractError: A completion timeout must be a positive, finite duration, got inf
    """
    value = cast(object, timeout)
    # ``float("10")`` would quietly accept a string, and a bool is an int to Python.
    if isinstance(value, timedelta):
        seconds = value.total_seconds()
    elif not isinstance(value, bool) and isinstance(value, numbers.Real | decimal.Decimal):
        # Any real number (a Fraction, a Decimal, a NumPy integer) is seconds.
        try:
            seconds = float(value)
        except OverflowError:  # an int or a Fraction past a float's range
            seconds = math.inf if cast(float, value) > 0 else -math.inf
        except ValueError:  # a signalling NaN Decimal
            seconds = math.nan
    else:
        raise ContractError(
            "A completion timeout must be seconds (a real number: an int or a float) or a datetime.timedelta; "
            f"it is {kind_of(value)}"
        )
    # Waiting always has a deadline: an infinite (or NaN) one would be none at all.
    if not 0 < seconds < math.inf:
        shown = f"{seconds:g}s" if math.isfinite(seconds) else f"{seconds:g}"
        raise ContractError(f"A completion timeout must be a positive, finite duration, got {shown}")
    return seconds


class CallInfo(msgspec.Struct, Generic[Sent], frozen=True):
    """What ``correlate`` learns about the call: its invocation and the Message it dispatched.

    Inside a ``variant(...)`` call, ``message`` is typed as the variant's Message class.
    """

    invocation: Invocation
    message: Sent


def _classes(value: object, role: str) -> tuple[type[Any], ...]:
    items = cast("tuple[object, ...]", value) if isinstance(value, tuple) else (value,)
    classes: list[type[Any]] = []
    for cls in items:
        if not isinstance(cls, type):
            raise ContractError(f"A completion's {role} must be a Message class or a tuple of them, got {cls!r}")
        classes.append(cls)
    return tuple(classes)


def truth(answer: object, role: str) -> bool:
    """A hook's answer as a bool, refusing an awaitable one.

    A coroutine is truthy, so an ``async`` hook that slipped past
    :func:`check_synchronous` (a lambda or a plain function returning one)
    would pass every check without running; it is a defect instead.
    """
    if answer is True or answer is False:
        return answer
    if isawaitable(answer):
        refuse_awaitable(answer, role)
    return bool(answer)


# What a projection, a Source or a key function usually answers, none of them awaitable: an
# exact-type lookup spares them ``isawaitable``, which asks an ABC and costs a plain value
# several times as much (a msgspec Struct is spared by one isinstance after it).
_PLAIN: frozenset[type[object]] = frozenset({str, int, bool, float, NoneType, tuple, list, dict, frozenset, bytes})


def check_plain(value: V, role: str) -> V:
    """``value``, unless it is awaitable: then the defect of ``role`` answering it (:func:`refuse_awaitable`).

    >>> check_plain(3, "projection")
    3
    """
    if value.__class__ not in _PLAIN and not isinstance(value, msgspec.Struct) and isawaitable(value):
        refuse_awaitable(value, role)
    return value


def refuse_awaitable(answer: object, role: str) -> NoReturn:
    """Raise the defect of a hook that answered ``answer``, an awaitable, where a plain value is needed.

    >>> async def later() -> int:
    ...     return 1
    >>> refuse_awaitable(later(), "projection")
    Traceback (most recent call last):
    ...
    agentfx.ContractError: "projection" returned an awaitable; it must answer synchronously
    """
    raise awaitable_defect(answer, role)


def awaitable_defect(answer: object, role: str) -> ContractError:
    """The defect :func:`refuse_awaitable` raises, closing ``answer`` so it never warns it was not awaited."""
    close = getattr(answer, "close", None)
    if callable(close):
        close()  # never awaited, and it must not warn that it was not
    return ContractError(f'"{role}" returned an awaitable; it must answer synchronously')


def unsubscribe_defect(answer: object, role: str) -> ContractError:
    """The defect of a subscription (``role``) that answered ``answer``, which cannot be called.

    Whatever a subscription returns is called to remove its listener once the
    call is over: anything else would leave the listener behind on every call
    (``None``) or fail only after the Message was sent (an Rx-style
    ``Disposable``), so it is refused before anything is sent. An awaitable
    (the subscription never ran) is the defect of :func:`refuse_awaitable`.
    Callers test ``callable(answer)`` first, so an answer that is fine costs
    no call.

    >>> unsubscribe_defect(None, "host.observe")
    ContractError('"host.observe" returned None; it must return a function that removes its listener')
    """
    if isawaitable(answer):
        return awaitable_defect(answer, role)
    it = "None" if answer is None else kind_of(answer)
    return ContractError(f'"{role}" returned {it}; it must return a function that removes its listener')


def check_synchronous(hook: object, role: str) -> None:
    """Refuse a coroutine function where a plain answer is needed.

    A coroutine object is truthy: an ``async`` predicate would pass every check
    without ever running, so it is refused where it is declared, and so is a
    callable object whose ``__call__`` is ``async def``. (A plain function that
    returns an awaitable cannot be seen here; :func:`truth` refuses its answer.)

    >>> class Gate:
    ...     async def __call__(self, model: object) -> bool:
    ...         return True
    >>> check_synchronous(Gate(), "available")
    Traceback (most recent call last):
    ...
    agentfx.ContractError: "available" must answer synchronously; its __call__ is a coroutine function
    """
    why = asynchronous(hook)
    if why is not None:
        raise ContractError(f'"{role}" must answer synchronously; {why}')


def asynchronous(hook: object) -> str | None:
    """Why ``hook`` answers with an awaitable, as the end of a sentence, or ``None`` if it visibly does not.

    >>> async def later() -> bool:
    ...     return True
    >>> asynchronous(later), asynchronous(len)
    ('it is a coroutine function', None)
    """
    if inspect.iscoroutinefunction(hook):
        return "it is a coroutine function"
    # ``iscoroutinefunction`` looks through functions, methods and partials, but not
    # through an instance to its class's ``__call__``.
    if not inspect.isroutine(hook) and not isinstance(hook, type):
        if inspect.iscoroutinefunction(getattr(type(hook), "__call__", None)):
            return "its __call__ is a coroutine function"
    return None


# No slots on the generic declarations: ``Completion[Req, Res](...)`` sets ``__orig_class__``,
# which a slotted frozen dataclass refuses with a TypeError instead of the expected AttributeError.
@dataclass(frozen=True, init=False)
class Completion(Generic[Req, Res, Sent]):
    """A Message completion: the capability's work is done when one of these Messages is processed.

    ``Completion[Req, Res, Sent]``: ``correlate`` sees the decoded input
    (``Req``), a success or failure Message (``Res``) and the dispatched
    Message as ``call.message`` (``Sent``, ``Any`` when not given). Written
    inline in ``variant(...)``, all three are inferred from the variant.

    Args:
        success: The Message class (or classes) that complete the work.
        failure: The Message class (or classes) that report it failed; a
            declared failure is still a *successful* dispatch, with
            ``status="failed"``.
        correlate: ``correlate(request, result, call) -> bool`` picks this
            call's result among concurrent ones; without it (and without
            ``correlate_key``) the first matching Message wins, whichever
            invocation caused it, and settles every pending invocation of
            the capability at once.
        correlate_key: ``(request_key, result_key)``: ``request_key(request,
            call)`` and ``result_key(result)`` return hashable keys; a result
            settles the pending invocations with an equal key by dictionary
            lookup, so matching costs O(1) however many calls are pending.
        timeout: Seconds or a ``timedelta``; waiting always has a deadline,
            which runs from the moment the host's dispatch is called.

    >>> class Done: ...
    >>> Completion(success=Done, timeout=10).timeout
    10.0
    """

    success: tuple[type[Res], ...]
    failure: tuple[type[Res], ...]
    correlate: Callable[[Req, Res, CallInfo[Sent]], bool] | None
    correlate_key: tuple[Callable[[Req, CallInfo[Sent]], Hashable], Callable[[Res], Hashable]] | None
    timeout: float

    def __init__(
        self,
        success: type[Res] | tuple[type[Res], ...],
        failure: type[Res] | tuple[type[Res], ...] = (),
        correlate: Callable[[Req, Res, CallInfo[Sent]], bool] | None = None,
        timeout: float | timedelta = _DEFAULT_TIMEOUT,
        *,
        correlate_key: tuple[Callable[[Req, CallInfo[Sent]], Hashable], Callable[[Res], Hashable]] | None = None,
    ) -> None:
        if correlate is not None and correlate_key is not None:
            raise ContractError('Give a completion either "correlate" or "correlate_key", not both')
        check_synchronous(correlate, "correlate")
        if correlate_key is not None:
            _check_pair(correlate_key)
            check_synchronous(correlate_key[0], "correlate_key")
            check_synchronous(correlate_key[1], "correlate_key")
        object.__setattr__(self, "success", _classes(success, "success"))
        object.__setattr__(self, "failure", _classes(failure, "failure"))
        object.__setattr__(self, "correlate", correlate)
        object.__setattr__(self, "correlate_key", correlate_key)
        object.__setattr__(self, "timeout", _seconds(timeout))


@dataclass(frozen=True)
class Source(Generic[V]):
    """A value outside the Model: ``get()`` reads it, ``subscribe(listener)`` reports changes.

    A source may mutate in place, so its predicate is re-evaluated on every
    notification.
    """

    get: Callable[[], V]
    subscribe: Callable[[Callable[[], None]], Unsubscribe]


def _check_pair(correlate_key: object) -> None:
    """Refuse a ``correlate_key`` that is not the pair ``(request_key, result_key)``.

    >>> _check_pair(lambda result: result)
    Traceback (most recent call last):
    ...
    agentfx.ContractError: A completion's "correlate_key" must be a pair (request_key, result_key); it is a function. Write correlate_key=(lambda request, call: ..., lambda result: ...), each returning a hashable key
    """
    if isinstance(correlate_key, tuple) and len(cast("tuple[object, ...]", correlate_key)) == 2:
        return
    it = (
        f"a tuple of {len(cast('tuple[object, ...]', correlate_key))}"
        if isinstance(correlate_key, tuple)
        else kind_of(correlate_key)
    )
    raise ContractError(
        f'A completion\'s "correlate_key" must be a pair (request_key, result_key); it is {it}. '
        "Write correlate_key=(lambda request, call: ..., lambda result: ...), each returning a hashable key"
    )


@dataclass(frozen=True)
class StateCompletion(Generic[M, V, Req]):
    """A state completion, built by :func:`when`."""

    predicate: Callable[[V, Req], bool]
    timeout: float
    projection: Callable[[M], V] | None = None
    source: Source[V] | None = field(default=None)


def when(
    *,
    predicate: Callable[[V, Req], bool],
    projection: Callable[[M], V] | None = None,
    source: Source[V] | None = None,
    timeout: float | timedelta = _DEFAULT_TIMEOUT,
) -> StateCompletion[M, V, Req]:
    """Complete when ``predicate(projection(model), request)`` holds.

    Level-triggered: the runtime subscribes before dispatch, evaluates the
    predicate synchronously inside every notification, and once more when the
    wait begins, so a state that already holds completes at once. A Model
    projection whose value a notification left unchanged (``==``) is not
    evaluated again; a :class:`Source` is re-evaluated on every notification.

    Args:
        predicate: ``predicate(value, request) -> bool``.
        projection: Reads the value from the Model (needs ``host.subscribe``).
        source: Reads the value from outside the Model instead.
        timeout: Seconds or a ``timedelta``.

    >>> done = when(projection=lambda model: model, predicate=lambda value, request: value == request)
    >>> done.timeout
    30.0
    """
    if (projection is None) == (source is None):
        raise ContractError('A state completion needs exactly one of "projection" or "source"')
    check_synchronous(predicate, "predicate")
    check_synchronous(projection, "projection")
    # Anything else given as a source is refused where the contract is exposed, naming the capability.
    if isinstance(cast(object, source), Source):
        assert source is not None
        check_synchronous(source.get, "Source.get")
        check_synchronous(source.subscribe, "Source.subscribe")
    return StateCompletion(predicate=predicate, timeout=_seconds(timeout), projection=projection, source=source)


# --- waiting -------------------------------------------------------------------------------------
#
# Message completions share one ``host.observe`` listener per runtime (a hub), so a processed
# Message costs a dictionary lookup by class, plus one by key for ``correlate_key``, however many
# invocations are pending. The hub subscribes when its first invocation registers and
# unsubscribes when its last one is released, so no listener outlives the calls that needed it.
#
# Matching is per pending invocation: each takes the first matching Message processed after it
# registered (just before its own Message is sent). Without ``correlate``/``correlate_key`` every
# Message of a declared class matches, so one processed Message settles *every* uncorrelated
# pending invocation of the capability, whichever invocation caused it, and a Message produced by
# an earlier call can settle a later one. Concurrent invocations need a correlation.


class CompletionOutcome(msgspec.Struct, frozen=True):
    """How a completion contract ended: ``status`` and the Message (``None`` for a state completion)."""

    status: Literal["completed", "failed"]
    message: Any = None


class Pending:
    """One invocation waiting for its completion. Settled at most once."""

    __slots__ = ("_event", "call", "defect", "key", "outcome", "request")

    def __init__(self, request: object, call: CallInfo[Any]) -> None:
        self.request: object = request
        self.call: CallInfo[Any] = call
        self.outcome: CompletionOutcome | None = None
        self.defect: BaseException | None = None
        self.key: Hashable = None
        # Created only if the wait actually has to suspend: a completion that update
        # answers synchronously inside dispatch never allocates a waiter. A list
        # only once a second wait joins the first (see :meth:`waiter`).
        self._event: _Waiter | list[_Waiter] | None = None

    @property
    def settled(self) -> bool:
        return self.outcome is not None or self.defect is not None

    def settle(self, outcome: CompletionOutcome) -> None:
        if not self.settled:
            self.outcome = outcome
            self._wake()

    def fail(self, defect: BaseException) -> None:
        if not self.settled:
            self.defect = defect
            self._wake()

    def _wake(self) -> None:
        waiter = self._event
        if waiter is None:
            return
        if isinstance(waiter, list):
            for one in waiter:
                _wake(one)
        else:
            _wake(waiter)

    def waiter(self) -> Awaitable[object] | None:
        """What to await until this is settled; ``None`` once it is.

        Awaited by the caller itself, not inside a coroutine of this class:
        thousands of invocations may be pending, each holding its frames.
        Every wait begun before the settlement is woken by it, however many
        there are.
        """
        if self.settled:
            return None
        current = self._event
        loop = _running_asyncio_loop()
        if loop is not None:
            # On asyncio, one bare future: what anyio.Event would wrap in an
            # asyncio.Event, a waiter deque and that same future, a third of
            # a pending invocation's memory. Cancelling the waiting task (the
            # deadline's or the signal's scope) cancels the future, as it
            # would cancel the Event's; so a second wait gets a future of its
            # own, never the first one's, which one wait's cancellation would
            # cancel for both.
            future: asyncio.Future[None] = loop.create_future()
            self._event = future if current is None else _joined(current, future)
            return future
        if isinstance(current, anyio.Event):
            # An Event wakes every wait on it, and a cancelled wait leaves the others waiting.
            return current.wait()
        event = anyio.Event()
        self._event = event if current is None else _joined(current, event)
        return event.wait()

    def result(self) -> CompletionOutcome:
        """The outcome once settled; raises the defect of a hook that failed while matching."""
        if self.defect is not None:
            raise self.defect
        assert self.outcome is not None
        return self.outcome

    async def wait(self) -> CompletionOutcome:
        """The outcome; raises the defect of a hook that failed while matching."""
        waiter = self.waiter()
        if waiter is not None:
            await waiter
        return self.result()


_Waiter: TypeAlias = "asyncio.Future[None] | anyio.Event"
"""What one suspended wait of a :class:`Pending` is woken by."""


def _wake(waiter: _Waiter) -> None:
    if isinstance(waiter, anyio.Event):
        waiter.set()
    elif not waiter.done():  # a wait cancelled meanwhile cancelled its future
        waiter.set_result(None)


def _joined(current: _Waiter | list[_Waiter], waiter: _Waiter) -> _Waiter | list[_Waiter]:
    """``waiter`` beside the waits of ``current`` that still wait.

    A future that is done belongs to a wait that was cancelled (its task is
    gone): it is dropped, so waiting again and again after a cancellation
    does not grow the list.
    """
    waiting = current if isinstance(current, list) else (current,)
    kept = [one for one in waiting if isinstance(one, anyio.Event) or not one.done()]
    if not kept:
        return waiter
    kept.append(waiter)
    return kept


def _running_asyncio_loop() -> asyncio.AbstractEventLoop | None:
    """The asyncio loop the current task runs on, or ``None`` (then an anyio.Event is waited on).

    No exception on trio, where no asyncio loop runs in this thread. Trio in
    guest mode (``trio.lowlevel.start_guest_run``) runs its tasks on top of a
    running asyncio loop, which ``_get_running_loop`` finds all the same: a
    future made there would be yielded to trio, which refuses it. Trio is
    asked only when it is already imported, so asyncio never pays to import it.
    """
    loop = asyncio.events._get_running_loop()
    if loop is None:
        return None
    trio: Any = sys.modules.get("trio")
    if trio is not None and trio.lowlevel.in_trio_task():
        return None
    return loop


class _Group:
    """The pending invocations of one capability with a Message completion."""

    __slots__ = ("completion", "keyed", "unkeyed", "success")

    def __init__(self, completion: Completion[Any, Any]) -> None:
        self.completion = completion
        self.success = frozenset(completion.success)
        # One pending invocation per key is the rule, so it is held alone; a
        # list only when several wait on the same key (a list per invocation
        # would be a good part of what a pending one costs).
        self.keyed: dict[Hashable, Pending | list[Pending]] = {}
        self.unkeyed: dict[Pending, None] = {}  # insertion-ordered set

    def add(self, pending: Pending) -> None:
        key_fns = self.completion.correlate_key
        if key_fns is None:
            self.unkeyed[pending] = None
        else:
            key = key_fns[0](pending.request, pending.call)
            # A coroutine is hashable: as a key it would never equal a result's, and the call would time out.
            check_plain(key, "request_key")
            pending.key = key
            waiting = self.keyed.get(key)
            if waiting is None:
                self.keyed[key] = pending
            elif isinstance(waiting, list):
                waiting.append(pending)
            else:
                self.keyed[key] = [waiting, pending]

    def remove(self, pending: Pending) -> None:
        if self.completion.correlate_key is None:
            self.unkeyed.pop(pending, None)
            return
        waiting = self.keyed.get(pending.key)
        if waiting is pending:
            del self.keyed[pending.key]
        elif isinstance(waiting, list):
            try:
                waiting.remove(pending)
            except ValueError:
                pass
            if not waiting:
                del self.keyed[pending.key]

    def offer(self, message: object) -> None:
        """Settle the pending invocations ``message`` completes; never raises into the notifier."""
        outcome = CompletionOutcome("completed" if type(message) in self.success else "failed", message)
        key_fns = self.completion.correlate_key
        if key_fns is not None:
            try:
                key = key_fns[1](message)
                check_plain(key, "result_key")
                # An unhashable key fails in ``pop``, so the lookup is guarded too.
                settled = self.keyed.pop(key, ())
                if isinstance(settled, Pending):
                    settled = (settled,)
            except Exception as defect:
                # Without the key no invocation can be told apart from another: each
                # pending one fails as a defect rather than the host's notifier raising.
                waiting = [
                    pending
                    for group in self.keyed.values()
                    for pending in (group if isinstance(group, list) else (group,))
                ]
                self.keyed.clear()
                for pending in waiting:
                    pending.fail(defect)
                return
            for pending in settled:
                pending.settle(outcome)
            return
        # Snapshots below: a hook may re-enter the host, which may offer another Message
        # to this group while the first is still being matched.
        correlate = self.completion.correlate
        if correlate is None:
            waiting = tuple(self.unkeyed)
            self.unkeyed.clear()
            for pending in waiting:
                pending.settle(outcome)
            return
        for pending in tuple(self.unkeyed):
            try:
                matched = truth(correlate(pending.request, message, pending.call), "correlate")
            except Exception as defect:
                self.unkeyed.pop(pending, None)
                pending.fail(defect)
                continue
            if matched:
                self.unkeyed.pop(pending, None)
                pending.settle(outcome)


class MessageHub:
    """Routes processed Messages to the invocations waiting for them, through one observer."""

    __slots__ = ("_by_class", "_count", "_groups", "_observe", "_refused", "_unsubscribe")

    def __init__(self, observe: Callable[[Callable[[Any], None]], Unsubscribe] | None) -> None:
        self._observe = observe
        self._groups: dict[object, _Group] = {}
        self._by_class: dict[type[Any], tuple[_Group, ...]] = {}
        self._count = 0
        self._unsubscribe: Unsubscribe | None = None
        # Why ``host.observe`` is refused, once it has answered something that cannot remove the
        # listener it registered (see :meth:`_subscribe`).
        self._refused: str | None = None

    def declare(self, owner: object, completion: Completion[Any, Any]) -> None:
        group = _Group(completion)
        self._groups[owner] = group
        for cls in (*completion.success, *completion.failure):
            self._by_class[cls] = (*self._by_class.get(cls, ()), group)

    def register(self, owner: object, pending: Pending) -> None:
        """Start matching Messages for ``pending``. Call before the Message is sent.

        On success, :meth:`release` must follow exactly once; if this raises
        (a ``request_key`` or ``host.observe`` that fails, or that answers
        something other than an unsubscribe), nothing is left registered and
        there is nothing to release.

        Raises:
            ContractError: ``host.observe`` answered something other than a
                function that removes its listener, now or on an earlier call.
        """
        group = self._groups[owner]
        group.add(pending)
        if self._count == 0:
            try:
                self._subscribe()
            except BaseException:
                group.remove(pending)
                raise
        self._count += 1

    def _subscribe(self) -> None:
        """Subscribe the hub's one listener with ``host.observe``, refusing an answer that cannot remove it."""
        if self._refused is not None:
            raise ContractError(self._refused)
        assert self._observe is not None
        answer = self._observe(self._on_message)
        if callable(answer):
            self._unsubscribe = answer
            return
        defect = unsubscribe_defect(answer, "host.observe")
        if not isawaitable(answer):
            # The host now holds a listener nothing can remove: subscribing again on each call
            # would add one more every time, so every later call is refused without asking.
            # That one listener settles nothing, since no invocation is ever registered again.
            self._refused = str(defect)
        raise defect

    def release(self, owner: object, pending: Pending) -> None:
        """Stop matching for ``pending``; on every exit path, exactly once per register."""
        self._groups[owner].remove(pending)
        self._count -= 1
        if self._count == 0 and self._unsubscribe is not None:
            unsubscribe, self._unsubscribe = self._unsubscribe, None
            unsubscribe()

    def _on_message(self, message: object) -> None:
        for group in self._by_class.get(type(message), ()):
            group.offer(message)


_UNSET: Any = object()


class StateWaiter:
    """Level-triggered wait for ``predicate(value, request)`` over the Model or a Source."""

    __slots__ = ("_completion", "_last", "_model", "_unsubscribe", "pending")

    def __init__(
        self,
        completion: StateCompletion[Any, Any, Any],
        pending: Pending,
        model: Callable[[], Any],
        subscribe: Callable[[Callable[[], None]], Unsubscribe],
    ) -> None:
        self._completion = completion
        self._model = model
        self.pending = pending
        self._last: Any = _UNSET
        source = completion.source
        answer = (source.subscribe if source is not None else subscribe)(self.check)
        # An awaitable is a subscription that never ran: no notification would ever come. Anything
        # else that cannot be called could not remove the listener once the call is over.
        if not callable(answer):
            defect = unsubscribe_defect(answer, "Source.subscribe" if source is not None else "host.subscribe")
            # The listener, if one was registered, cannot be removed: settling the invocation
            # makes each later notification return at once, never evaluating the predicate.
            pending.fail(defect)
            raise defect
        self._unsubscribe: Unsubscribe | None = answer

    def check(self) -> None:
        """Evaluate once; called inside each notification and when the wait begins."""
        pending = self.pending
        if pending.settled:
            return
        completion = self._completion
        try:
            # A coroutine is truthy and never equal to the last value: unchecked, it would
            # complete a truthiness predicate at once and fail an equality one until the deadline.
            if completion.source is not None:
                value = completion.source.get()
                check_plain(value, "Source.get")
            else:
                assert completion.projection is not None
                value = completion.projection(self._model())
                check_plain(value, "projection")
                if self._last is not _UNSET and value == self._last:
                    return
                self._last = value
            if truth(completion.predicate(value, pending.request), "predicate"):
                pending.settle(CompletionOutcome("completed"))
        except Exception as defect:
            # Never raise into the host's notifier: the defect belongs to this invocation.
            pending.fail(defect)

    def release(self) -> None:
        if self._unsubscribe is not None:
            unsubscribe, self._unsubscribe = self._unsubscribe, None
            unsubscribe()
