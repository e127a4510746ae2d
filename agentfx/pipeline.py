"""The dispatch pipeline: one agent call, step by step, over one Model snapshot.

Every step is a pure function returning
``RequiresContextFutureResult[Next, DispatchError, InvocationEnv]``; :func:`dispatch` is
their composition, in the order of the design's table:

1. resolve the capability  2. refuse an aborted signal  3. read the Model once
4. ``available``  5. decode the payload  6. resolve the principal  7. ``authorize``
(and, when it answers :class:`~agentfx.Confirm`, the invocation's confirmation)
8. refuse a signal aborted meanwhile  9. build the Message  10–12. subscribe
completion listeners, send, wait.

Each step's logic lives in one plain function (``*_step``) that both this
composition and the runtime's direct execution call, so the two cannot drift;
a property test checks they agree. This layer deliberately knows nothing of
audit, tracing or transports: the runtime wraps it, adapters call the runtime.

Compose steps of your own with :func:`bind`: ``bind(step, next_step)`` is
``step.bind(next_step)`` with every type kept (the container's own ``.bind``
is partially unknown to pyright in strict mode). :func:`dispatch` is::

    from agentfx import pipeline as p

    def my_dispatch() -> p.Step[p.DispatchResult]:
        step = p.bind(p.bind(p.resolve(), p.check_not_aborted), p.snapshot)
        decoded = p.bind(p.bind(step, p.check_available), p.decode)
        decoded = p.bind(p.bind(decoded, p.resolve_principal), p.authorize)
        decoded = p.bind(decoded, p.check_still_not_aborted)
        return p.bind(p.bind(decoded, p.construct), p.send)
"""

from __future__ import annotations

from asyncio import CancelledError, Future, current_task, isfuture
from inspect import isawaitable
from collections.abc import Awaitable, Callable, Coroutine
from types import CoroutineType
from typing import TYPE_CHECKING, Any, Final, Generic, TypeAlias, TypeVar, cast

import anyio
import msgspec
from returns.context import RequiresContextFutureResult
from returns.future import FutureResult
from returns.result import Failure, Result, Success

from ._returns import bind
from .completion import (
    CallInfo,
    Completion,
    CompletionOutcome,
    MessageHub,
    Pending,
    StateCompletion,
    StateWaiter,
    truth,
)
from .confirm import Confirm, ConfirmationRequest
from .contract import AuthorizationRequest, Capability, InvocationContext
from .errors import (
    AgentAuthorizationError,
    AgentCancelledError,
    AgentCapabilityUnavailableError,
    AgentCompletionTimeoutError,
    AgentConfirmationRequiredError,
    AgentInvalidInputError,
    AgentUnknownCapabilityError,
    ContractError,
    DispatchError,
    Refusal,
    is_failure,
)
from .host import Host
from .invocation import AbortSignal, Invocation
from .naming import message_tag
from .schema import InvalidPayload


__all__ = [
    "ASKED_MAX",
    "ASKED_PROMPT_MAX",
    "INVALID_MAX",
    "Bound",
    "Decoded",
    "DispatchResult",
    "InvocationEnv",
    "Prepared",
    "Step",
    "authorize",
    "authorize_begin",
    "authorize_finish",
    "bind",
    "check_available",
    "check_not_aborted",
    "check_still_not_aborted",
    "confirm_begin",
    "confirm_settle",
    "construct",
    "construct_message",
    "decode",
    "dispatch",
    "fail",
    "ok",
    "resolve",
    "resolve_principal",
    "run_declined",
    "run_direct",
    "send",
    "send_begin",
    "send_wait",
    "snapshot",
    "waited",
]

T = TypeVar("T")
M = TypeVar("M")
P = TypeVar("P")

ASKED_MAX = 256
"""The confirmation refusals (declined, nobody to ask) one runtime keeps for reuse."""

ASKED_PROMPT_MAX = 200
"""The longest prompt whose confirmation refusals are kept."""

INVALID_MAX = 256
"""The invalid-input refusals one runtime keeps for reuse."""

_Asked: TypeAlias = "AgentAuthorizationError | AgentConfirmationRequiredError"
"""A confirmation refusal: declined, or nobody to ask."""

# Where the Message is, for audit and for the cancellation messages.
NOT_SENT: Final = 0
SENDING: Final = 1
SENT: Final = 2


class DispatchResult(msgspec.Struct, frozen=True):
    """A successful dispatch: the capability, the Message sent, and how its completion ended.

    ``completion`` is ``None`` without a completion contract.
    """

    name: str
    tag: str
    message: Any
    invocation: Invocation
    completion: CompletionOutcome | None = None


class Bound(Generic[M, P]):
    """What a bound runtime holds for every invocation: the host and the capability tables."""

    __slots__ = (
        "_asked",
        "by_class",
        "by_name",
        "by_target",
        "declined",
        "host",
        "hub",
        "invalid",
        "refused",
        "told",
        "unasked",
        "unauthorized",
        "unavailable",
    )

    def __init__(self, capabilities: tuple[Capability[M, P], ...], host: Host[M, Any, P]) -> None:
        self.host = host
        # Set on an invocation's own copy (an adapter's watched host): what to
        # call, once, when the host has accepted the Message.
        self.told: Callable[[], None] | None = None
        self.by_name: dict[str, Capability[M, P]] = {c.name: c for c in capabilities}
        self.by_class: dict[type[Any], Capability[M, P]] = {c.message: c for c in capabilities}
        # Both at once, for step 1's single lookup: a name is a str and a class
        # is a type, so no key of one can equal a key of the other.
        self.by_target: dict[object, Capability[M, P]] = {**self.by_name, **self.by_class}
        # The refusals that say nothing but the capability, built once: they are
        # frozen values, and a refusal must not cost more than a dispatch.
        self.unavailable = {c.name: AgentCapabilityUnavailableError.of(c.name, c.tag) for c in capabilities}
        self.unauthorized = {c.name: AgentAuthorizationError.of(c.name, c.tag) for c in capabilities}
        # Their ``Failure`` containers too, by the refusal's identity: returns'
        # containers are immutable, and building one costs as much as a step.
        prebuilt = (*self.unavailable.values(), *self.unauthorized.values())
        self.refused: dict[int, Failure[DispatchError]] = {id(error): Failure(error) for error in prebuilt}
        # Confirmation refusals name the call's prompt, so they are made on
        # first use and kept, boundedly, never evicted: an entry's identity
        # stays its own for as long as ``refused`` may hand out its container.
        # Per capability, by prompt: ``declined`` (the person said no) and
        # ``unasked`` (nobody to ask), read straight from :func:`confirm_step`.
        self.declined: dict[str, dict[str, _Asked]] = {c.name: {} for c in capabilities}
        self.unasked: dict[str, dict[str, _Asked]] = {c.name: {} for c in capabilities}
        # A count in a cell, not an int: every per-invocation copy of this
        # Bound (an adapter's watched host) shares the tables it counts.
        self._asked = [0]
        # Invalid-input refusals likewise, by the codec's refusal: a codec hands
        # out one InvalidPayload for every repeat of a mistake it remembers. The
        # keys are held, so no identity is ever reused while its entry stands.
        self.invalid: dict[InvalidPayload, AgentInvalidInputError] = {}

        self.hub = MessageHub(host.observe)
        for c in capabilities:
            if isinstance(c.completion, Completion):
                self.hub.declare(c, c.completion)

    def keep_invalid_input(self, capability: Capability[M, P], invalid: InvalidPayload) -> AgentInvalidInputError:
        """The refusal of a payload the codec rejected, kept (in :attr:`invalid`) when the codec repeats it.

        Agents repeat their mistakes, and the codec answers a repeat it
        remembers with the same :class:`~agentfx.schema.InvalidPayload`: the
        refusals of up to :data:`INVALID_MAX` of those are kept with their
        containers. Any other (a problem the codec found itself, a long
        decoder text) is built each time.
        """
        refusal = AgentInvalidInputError.of(
            capability.name, capability.tag, invalid.path, invalid.cause or invalid, problem=invalid.problem
        )
        if len(self.invalid) < INVALID_MAX and capability.codec.remembers(invalid):
            self.invalid[invalid] = refusal
            self.refused[id(refusal)] = Failure(refusal)
        return refusal

    def keep_confirmation_refusal(self, capability: Capability[M, P], prompt: str, *, declined: bool) -> _Asked:
        """``Declined: <prompt>`` (``declined``) or "needs a person to confirm", kept in :attr:`declined` or :attr:`unasked`.

        Agents repeat a call, and a prompt is often the capability's own
        constant: up to :data:`ASKED_MAX` refusals of prompts of at most
        :data:`ASKED_PROMPT_MAX` characters are kept, with their containers.
        """
        if declined:
            refusal: _Asked = AgentAuthorizationError.declined(capability.name, capability.tag, prompt)
        else:
            refusal = AgentConfirmationRequiredError.of(capability.name, capability.tag, prompt)
        asked = self._asked
        if asked[0] < ASKED_MAX and len(prompt) <= ASKED_PROMPT_MAX:
            (self.declined if declined else self.unasked)[capability.name][prompt] = refusal
            asked[0] += 1
            self.refused[id(refusal)] = Failure(refusal)
        return refusal


class InvocationEnv(msgspec.Struct, Generic[M, P]):
    """One invocation's environment: its request, and the Model snapshot once step 3 took it.

    ``model`` is read from the host exactly once, at step 3; every later step
    reads this snapshot, so a Model change while ``authorize`` is pending does
    not retarget the invocation. The remaining fields record progress, which the
    runtime's audit and tracing read whichever way the steps ran: ``confirmed``
    is set when step 7 let the call through on a person's approval.
    """

    bound: Bound[M, P]
    target: object
    payload: object
    invocation: Invocation
    if TYPE_CHECKING:
        capability: Capability[M, P] | None = None
    else:
        # msgspec cannot describe a Capability (a dataclass holding a union of
        # dataclasses), and an exported Struct must still build a Decoder.
        capability: Any = None
    # Set at steps 3 and 6, before any step reads them.
    model: M = cast("M", None)
    principal: P = cast("P", None)
    principal_resolved: bool = False
    confirmed: bool = False
    stage: int = NOT_SENT


Env: TypeAlias = InvocationEnv[Any, Any]
Outcome: TypeAlias = "DispatchResult | DispatchError"
Later: TypeAlias = "Coroutine[Any, Any, Outcome]"
"""What a direct run gives: the outcome now (:data:`Outcome`), or the coroutine that gives it."""
Step: TypeAlias = RequiresContextFutureResult[T, DispatchError, Env]


class Decoded(msgspec.Struct, frozen=True):
    """A capability with its decoded input (steps 5–8)."""

    capability: Capability[Any, Any]
    input: Any


class Prepared(msgspec.Struct, frozen=True):
    """A capability, its input and the Message built from them (steps 9–12)."""

    capability: Capability[Any, Any]
    input: Any
    message: Any


def ok(value: T) -> Step[T]:
    """A step that succeeds with ``value``.

    A step is a function of the invocation's environment; awaiting what it
    returns gives an ``IOResult``:

    >>> import anyio
    >>> async def main():
    ...     return await ok(3)(None)
    >>> anyio.run(main)
    <IOResult: <Success: 3>>
    """
    return RequiresContextFutureResult.from_value(value)


def fail(error: DispatchError) -> Step[Any]:
    """A step that refuses with ``error``."""
    return RequiresContextFutureResult.from_failure(error)


def _from_async(run: Callable[[Env], Any]) -> Step[Any]:
    async def result(env: Env) -> Result[Any, DispatchError]:
        outcome = await run(env)
        return Failure(outcome) if is_failure(outcome) else Success(outcome)

    return RequiresContextFutureResult(lambda env: FutureResult(result(env)))


# --- step logic, shared by the composition and the runtime's direct run ----------------------------


def resolve_step(env: Env) -> Capability[Any, Any] | DispatchError:
    target = env.target
    try:
        capability = env.bound.by_target.get(target)
    except Exception:  # unhashable (or a hash that fails): neither a name nor a class
        capability = None
    if capability is None:
        return _unknown(target)
    env.capability = capability
    return capability


def _unknown(target: object) -> AgentUnknownCapabilityError:
    if isinstance(target, str):
        return AgentUnknownCapabilityError.of(target)
    if isinstance(target, type):
        return AgentUnknownCapabilityError.of(message_tag(target))
    return AgentUnknownCapabilityError.of(str(target))


def aborted_step(env: Env, capability: Capability[Any, Any]) -> AgentCancelledError | None:
    signal = env.invocation.signal
    if signal is not None and signal.aborted:
        return AgentCancelledError.before_dispatch(capability.name)
    return None


def snapshot_step(env: Env) -> None:
    env.model = env.bound.host.model()


def available_step(env: Env, capability: Capability[Any, Any]) -> AgentCapabilityUnavailableError | None:
    available = capability.available
    if available is None:
        return None
    answer = available(env.model)
    if answer is not True and (answer is False or not truth(answer, "available")):
        return env.bound.unavailable[capability.name]
    return None


def decode_step(env: Env, capability: Capability[Any, Any]) -> Any:
    decoded = capability.codec.attempt(env.payload)
    if type(decoded) is not InvalidPayload:
        return decoded
    bound = env.bound
    # A repeated mistake is looked up here, without a call: a refusal must not cost more than a dispatch.
    refusal = bound.invalid.get(decoded)
    return bound.keep_invalid_input(capability, decoded) if refusal is None else refusal


def principal_step(env: Env) -> None:
    resolver = env.bound.host.principal
    env.principal = resolver(env.invocation) if resolver is not None else None
    env.principal_resolved = True


def _verdict(env: Env, capability: Capability[Any, Any], verdict: object) -> AgentAuthorizationError | None:
    if verdict is True:
        return None
    if verdict is False:
        return env.bound.unauthorized[capability.name]
    if isinstance(verdict, Refusal):
        return AgentAuthorizationError.of(capability.name, capability.tag, verdict.reason)
    raise ContractError(
        f'"authorize" of "{capability.name}" returned {type(verdict).__name__}; return a bool, a Refusal or a Confirm'
    )


COROUTINE: Any = CoroutineType
"""What a direct run hands back when the call must wait. Typed ``Any``: a check against
``CoroutineType`` itself would narrow an outcome typed ``Any`` to a coroutine of unknown
result, and ``cast()``, which would say otherwise, is a call on every dispatch."""

_Unsettled = object()
"""What a raced await gives when the invocation's signal cut it short."""


def waited(pending: Awaitable[T], role: str = "the host or a hook") -> Awaitable[T]:
    """What to await for a hook's or the host's awaitable: a future shielded, anything else itself.

    On asyncio a task cancelled while it awaits a future cancels that future
    too. A future a hook or host hands out may be shared (one batch flush for
    every Message, one cached permission check), so an invocation's abort or
    deadline would cancel it for every other invocation waiting on it: the
    wait alone is cancelled instead. A coroutine is this call's own, and
    awaited as it is (through :func:`_owned`).

    The other way round, such a future (or a coroutine's ``CancelledError``)
    that ``role`` (``"host.dispatch"``, ``"authorize"``, ``"confirm"``) cancels itself, while nothing cancelled
    the invocation, is a defect of ``role``: it raises :class:`RuntimeError`,
    never the future's ``CancelledError``, which would pass for the caller's
    own cancellation (audited ``interrupted``, and silently ending a task
    group's child that nobody cancelled).
    """
    if type(pending) is not COROUTINE and isfuture(pending):
        return _shielded(pending, role)
    return _owned(pending, role)


async def _owned(pending: Awaitable[T], role: str) -> T:
    """``await pending``; an asyncio ``CancelledError`` out of it that cancelled nothing here is ``role``'s defect.

    A coroutine that awaited a task someone else cancelled raises that task's
    ``CancelledError`` as its own. A cancellation of this task (a scope, the
    invocation's abort, its deadline) is counted by ``Task.cancelling()``;
    anything else, and any asyncio ``CancelledError`` on trio, is not one.
    """
    try:
        return await pending
    except CancelledError:
        if _cancelling():
            raise
        raise RuntimeError(_cancelled_by(role, "awaitable")) from None


def _cancelling() -> bool:
    try:
        task = current_task()
    except RuntimeError:  # no asyncio loop: trio, whose cancellation is not this exception
        return False
    return task is not None and task.cancelling() > 0


def _shielded(inner: Future[T], role: str) -> Future[T]:
    """``inner``'s outcome in a future of this wait's own; ``inner`` cancelled is ``role``'s defect.

    ``asyncio.shield``, but for cancellation: the shield's outer future is
    cancelled when its inner one is, and so the two cancellations could not be
    told apart. Here the outer future is cancelled only by the task awaiting
    it, which leaves ``inner`` alone.
    """
    if inner.done() and not inner.cancelled():
        return inner
    outer: Future[T] = inner.get_loop().create_future()

    def relay(_: object) -> None:
        if outer.cancelled():
            # This wait was cancelled first; the outcome belongs to the future's other
            # waiters, and an exception in it is marked retrieved, as the shield does.
            if not inner.cancelled():
                inner.exception()
            return
        if inner.cancelled():
            outer.set_exception(RuntimeError(_cancelled_by(role)))
            return
        exc = inner.exception()
        if exc is not None:
            outer.set_exception(exc)
        else:
            outer.set_result(inner.result())

    def forget(_: object) -> None:
        # Outer done first (this wait cancelled): a long-lived shared future keeps no callback per wait.
        if not inner.done():
            inner.remove_done_callback(relay)

    if inner.done():
        relay(inner)
    else:
        inner.add_done_callback(relay)
        outer.add_done_callback(forget)
    return outer


def _cancelled_by(role: str, noun: str = "future") -> str:
    """The defect of a future (or another awaitable) ``role`` handed out and then cancelled itself.

    >>> _cancelled_by("host.dispatch")
    'A future that "host.dispatch" handed out was cancelled while an invocation awaited it, though nothing cancelled the invocation: such a future must end with a result or an exception'
    """
    article = "an" if noun[0] in "aeiou" else "a"
    return (
        f'{article.capitalize()} {noun} that "{role}" handed out was cancelled while an invocation awaited it, '
        f"though nothing cancelled the invocation: such {article} {noun} must end with a result or an exception"
    )


def _raced(env: Env, pending: Awaitable[Any], role: str) -> Awaitable[Any]:
    """What to await for ``pending``, cut short by the invocation's signal (then :data:`_Unsettled`).

    Without a signal there is nothing to race: ``pending`` itself (shielded
    if it is a future, see :func:`waited`, which names ``role`` if it ends
    cancelled), so the wait costs no coroutine frame of its own.
    """
    signal = env.invocation.signal
    pending = waited(pending, role)
    return pending if signal is None else _race(pending, signal)


async def _race(pending: Awaitable[Any], signal: AbortSignal) -> Any:
    with anyio.CancelScope() as scope:
        signal.attach(scope)
        try:
            return await pending
        finally:
            signal.detach(scope)
    # Only reached when the scope swallowed the signal's cancellation.
    return _Unsettled


def authorize_begin(
    env: Env, capability: Capability[Any, Any], value: Any
) -> AgentAuthorizationError | Awaitable[object] | Confirm | None:
    """Ask ``authorize``: its refusal, ``None`` to go on, or what :func:`authorize_finish` must wait on.

    The synchronous half of step 7, so a synchronous ``authorize`` is answered
    without a coroutine of its own; an async verdict or a
    :class:`~agentfx.Confirm` is handed back for the second half.
    """
    check = capability.authorize
    if check is None:
        return None
    verdict = check(AuthorizationRequest(env.principal, value, env.model, env.invocation.transport))
    if verdict is True:
        return None
    if verdict is False:
        return env.bound.unauthorized[capability.name]
    # A Confirm before the awaitable check: ``isawaitable`` asks an ABC, which
    # costs a plain value several times what an isinstance does.
    if isinstance(verdict, Confirm):
        return verdict
    if isawaitable(verdict):
        return cast("Awaitable[object]", verdict)
    return _verdict(env, capability, verdict)


def authorize_finish(
    env: Env, capability: Capability[Any, Any], begun: Awaitable[object] | Confirm
) -> Awaitable[AgentAuthorizationError | AgentCancelledError | AgentConfirmationRequiredError | None]:
    """Step 7's rest, to await: an async verdict (raced against the signal), then a confirmation.

    Not a coroutine itself: a :class:`~agentfx.Confirm` goes straight to
    :func:`confirm_step`, one frame fewer.
    """
    if isinstance(begun, Confirm):
        return confirm_step(env, capability, begun)
    return _verdict_later(env, capability, begun)


async def _verdict_later(
    env: Env, capability: Capability[Any, Any], pending: Awaitable[object]
) -> AgentAuthorizationError | AgentCancelledError | AgentConfirmationRequiredError | None:
    verdict = await _raced(env, pending, "authorize")
    if verdict is _Unsettled:
        return AgentCancelledError.before_dispatch(capability.name)
    if isinstance(verdict, Confirm):
        return await confirm_step(env, capability, verdict)
    return _verdict(env, capability, verdict)


async def authorize_step(
    env: Env, decoded: Decoded
) -> AgentAuthorizationError | AgentCancelledError | AgentConfirmationRequiredError | None:
    """Run ``authorize``; an async one is raced against the invocation's signal.

    A :class:`~agentfx.Confirm` answer goes on to :func:`confirm_step`, so
    confirmation is part of step 7 whichever way the steps run.
    """
    begun = authorize_begin(env, decoded.capability, decoded.input)
    if begun is None or is_failure(begun):
        return begun
    return await authorize_finish(env, decoded.capability, begun)


async def confirm_step(
    env: Env, capability: Capability[Any, Any], request: Confirm
) -> AgentAuthorizationError | AgentCancelledError | AgentConfirmationRequiredError | None:
    """Step 7's second half: ``authorize`` allows the call once a person confirms.

    A ``confirmed`` invocation proceeds; else its ``confirm`` is asked, once,
    raced against the signal, while the invocation keeps its one snapshot (a
    Model change meanwhile does not retarget the call): ``True`` proceeds,
    ``False`` is ``Declined: <prompt>``. An invocation with neither is refused
    with :class:`~agentfx.AgentConfirmationRequiredError`. Nothing is sent on
    any refusal, and an abort that lands after the answer is step 8's.

    Raises:
        ContractError: ``confirm`` answered something other than a bool.
    """
    begun = confirm_begin(env, capability, request)
    if begun is None or type(begun) is AgentAuthorizationError or type(begun) is AgentConfirmationRequiredError:
        return begun
    return confirm_settle(env, capability, request, await _raced(env, cast("Awaitable[object]", begun), "confirm"))


def confirm_begin(
    env: Env, capability: Capability[Any, Any], request: Confirm
) -> _Asked | AgentCancelledError | Awaitable[object] | None:
    """The synchronous half of :func:`confirm_step`: ``None`` to go on, its refusal, or the answer to await.

    A ``confirmed`` invocation, and a ``confirm`` that answers a bool at once,
    are settled here without a coroutine; an awaitable answer is handed back,
    for :func:`confirm_settle` once it is known.
    """
    invocation = env.invocation
    if invocation.confirmed:
        env.confirmed = True
        return None
    ask = invocation.confirm
    if ask is None:
        # The kept refusal is looked up here, without a call, as for a decline below.
        refusal = env.bound.unasked[capability.name].get(request.prompt)
        return env.bound.keep_confirmation_refusal(capability, request.prompt, declined=False) if refusal is None else refusal
    # Typed to answer an awaitable bool; an adapter may answer a plain one, or break the promise.
    # (Any, not cast(): a cast is a call, and this runs for every call a person is asked about.)
    answer: Any = ask(ConfirmationRequest(capability.name, capability.tag, request.prompt, invocation))
    # A coroutine, what an async ``confirm`` answers, by its exact type first: ``isawaitable`` is a call.
    if answer is not True and answer is not False and (type(answer) is COROUTINE or isawaitable(answer)):
        return answer
    return confirm_settle(env, capability, request, answer)


def confirm_settle(
    env: Env, capability: Capability[Any, Any], request: Confirm, answer: object
) -> _Asked | AgentCancelledError | None:
    """What a person's answer means: ``True`` goes on, ``False`` is ``Declined: <prompt>``.

    Raises:
        ContractError: ``confirm`` answered something other than a bool.
    """
    if answer is True:
        env.confirmed = True
        return None
    if answer is False:
        refusal = env.bound.declined[capability.name].get(request.prompt)
        return env.bound.keep_confirmation_refusal(capability, request.prompt, declined=True) if refusal is None else refusal
    if answer is _Unsettled:
        return AgentCancelledError.before_dispatch(capability.name)
    raise ContractError(f'The confirmation of "{capability.name}" answered {type(answer).__name__}; answer a bool')


def construct_step(env: Env, decoded: Decoded) -> Prepared:
    return Prepared(decoded.capability, decoded.input, construct_message(env, decoded.capability, decoded.input))


def construct_message(env: Env, capability: Capability[Any, Any], value: Any) -> Any:
    """Step 9's logic: the Message, built by ``to_message`` over the snapshot (the input itself if direct)."""
    to_message = capability.to_message
    if to_message is None:
        return value
    message = to_message(value, InvocationContext(env.model, env.principal, env.invocation))
    if type(message) is not capability.message:
        # A subclass is still another Message when it carries its own tag (a
        # tagged subclass is a variant of its own), so the tag decides too.
        made = message_tag(_type_of(message))
        if made != capability.tag or not isinstance(message, capability.message):
            raise ContractError(f'"{capability.name}" made a "{made}" Message, but is exposed as "{capability.tag}"')
    return message


def _type_of(value: object) -> type[object]:
    return type(value)


def send_begin(env: Env, capability: Capability[Any, Any], message: Any) -> DispatchResult | Awaitable[object]:
    """Send the Message of a capability without completion: the result, or an async host's awaitable.

    The synchronous half of steps 10–12 without completion, so a synchronous
    host is answered without a coroutine of its own; :func:`send_wait` awaits
    the rest.
    """
    env.stage = SENDING
    sent = env.bound.host.dispatch(message)
    if sent is not None and isawaitable(sent):
        return cast("Awaitable[object]", sent)
    env.stage = SENT
    return DispatchResult(capability.name, capability.tag, message, env.invocation)


async def send_wait(
    env: Env, capability: Capability[Any, Any], message: Any, sent: Awaitable[object]
) -> DispatchResult | DispatchError:
    """Await an async host's dispatch (no completion), raced against the invocation's signal."""
    if await _raced(env, sent, "host.dispatch") is _Unsettled:
        return AgentCancelledError.while_sending(capability.name)
    env.stage = SENT
    return DispatchResult(capability.name, capability.tag, message, env.invocation)


async def send_step(env: Env, prepared: Prepared) -> DispatchResult | DispatchError:
    """Subscribe completion listeners, send the Message, wait for its completion.

    Ordering hazards: listeners subscribe *before* the host is called, because
    update may answer synchronously inside ``host.dispatch``; the deadline runs
    from the moment ``host.dispatch`` is called, so a host that never returns is
    bounded by the same budget; listeners are released on every exit path.
    """
    capability = prepared.capability
    completion = capability.completion
    host = env.bound.host
    signal = env.invocation.signal
    if completion is None:
        sent = send_begin(env, capability, prepared.message)
        if type(sent) is DispatchResult:
            return sent
        return await send_wait(env, capability, prepared.message, cast("Awaitable[object]", sent))

    pending = Pending(prepared.input, CallInfo(env.invocation, prepared.message))
    hub = env.bound.hub
    state: StateWaiter | None = None
    if isinstance(completion, Completion):
        hub.register(capability, pending)
    else:
        subscribe = host.subscribe
        state = StateWaiter(completion, pending, host.model, subscribe if subscribe is not None else _never)
    try:
        with anyio.CancelScope(deadline=anyio.current_time() + completion.timeout) as scope:
            if signal is not None:
                signal.attach(scope)
            try:
                env.stage = SENDING
                sent = host.dispatch(prepared.message)
                if sent is not None and isawaitable(sent):
                    await waited(sent, "host.dispatch")
                env.stage = SENT
                if state is not None:
                    state.check()
                waiter = pending.waiter()
                if waiter is not None:
                    await waiter
            finally:
                if signal is not None:
                    signal.detach(scope)
        if pending.defect is not None:
            # A hook that failed while matching is a defect even if the wait was cut short.
            raise pending.defect
        if pending.settled and (env.stage == SENT or _ties_to_this_call(completion)):
            # Settled first: a deadline or abort that lands afterwards changes nothing.
            # While the host is still dispatching, only a correlated completion proves
            # that *this* Message reached update: an uncorrelated or state completion
            # may have been met by another invocation.
            if env.stage != SENT:
                # Accepted, as the completion proves, though its dispatch never
                # finished: whoever waits to hear so hears it now.
                env.stage = SENT
                told = env.bound.told
                if told is not None:
                    told()
            return DispatchResult(capability.name, capability.tag, prepared.message, env.invocation, pending.result())
        invocation_id = env.invocation.id or ""
        # Not settled, so the scope was cancelled: by the signal, or by the deadline.
        if signal is not None and signal.aborted:
            if env.stage == SENDING:
                return AgentCancelledError.while_sending(capability.name)
            return AgentCancelledError.while_waiting(capability.name)
        if env.stage == SENDING:
            return AgentCompletionTimeoutError.while_sending(capability.name, invocation_id, completion.timeout)
        return AgentCompletionTimeoutError.while_waiting(capability.name, invocation_id, completion.timeout)
    finally:
        if state is not None:
            state.release()
        else:
            hub.release(capability, pending)


def _ties_to_this_call(completion: Completion[Any, Any] | StateCompletion[Any, Any, Any]) -> bool:
    if isinstance(completion, StateCompletion):
        return False
    return completion.correlate is not None or completion.correlate_key is not None


def _never(_: Callable[[], None]) -> Callable[[], None]:
    # bind refuses a Model state completion without host.subscribe; a Source brings its own.
    return lambda: None


# --- the steps, as RequiresContextFutureResult ------------------------------------------------------


def resolve() -> Step[Capability[Any, Any]]:
    """Step 1: find the capability by Message class or protocol name. Never reads the Model."""
    return RequiresContextFutureResult(lambda env: FutureResult.from_result(_as_result(resolve_step(env))))


def check_not_aborted(capability: Capability[Any, Any]) -> Step[Capability[Any, Any]]:
    """Step 2: refuse an invocation whose signal is already aborted. Never reads the Model."""
    return RequiresContextFutureResult(lambda env: _future(aborted_step(env, capability), capability))


def snapshot(capability: Capability[Any, Any]) -> Step[Capability[Any, Any]]:
    """Step 3: read the Model once; every later step reads this snapshot."""

    def run(env: Env) -> FutureResult[Capability[Any, Any], DispatchError]:
        snapshot_step(env)
        return FutureResult.from_value(capability)

    return RequiresContextFutureResult(run)


def check_available(capability: Capability[Any, Any]) -> Step[Capability[Any, Any]]:
    """Step 4: refuse a capability the snapshot does not offer, before looking at the payload."""
    return RequiresContextFutureResult(lambda env: _future(available_step(env, capability), capability))


def decode(capability: Capability[Any, Any]) -> Step[Decoded]:
    """Step 5: decode the payload strictly through the capability's input codec."""

    def run(env: Env) -> FutureResult[Decoded, DispatchError]:
        decoded = decode_step(env, capability)
        if type(decoded) is AgentInvalidInputError:
            return FutureResult.from_failure(decoded)
        return FutureResult.from_value(Decoded(capability, decoded))

    return RequiresContextFutureResult(run)


def resolve_principal(decoded: Decoded) -> Step[Decoded]:
    """Step 6: resolve the principal, exactly once, even without ``authorize``."""

    def run(env: Env) -> FutureResult[Decoded, DispatchError]:
        principal_step(env)
        return FutureResult.from_value(decoded)

    return RequiresContextFutureResult(run)


def authorize(decoded: Decoded) -> Step[Decoded]:
    """Step 7: ask ``authorize`` (possibly async) about the principal, input and snapshot.

    When it answers :class:`~agentfx.Confirm`, the invocation's confirmation
    decides (:func:`confirm_step`).
    """

    async def run(env: Env) -> Decoded | DispatchError:
        refusal = await authorize_step(env, decoded)
        return decoded if refusal is None else refusal

    return _from_async(run)


def check_still_not_aborted(decoded: Decoded) -> Step[Decoded]:
    """Step 8: refuse an invocation aborted while decoding or authorizing."""
    return RequiresContextFutureResult(lambda env: _future(aborted_step(env, decoded.capability), decoded))


def construct(decoded: Decoded) -> Step[Prepared]:
    """Step 9: build the Message with ``to_message`` over the same snapshot."""
    return RequiresContextFutureResult(lambda env: FutureResult.from_value(construct_step(env, decoded)))


def send(prepared: Prepared) -> Step[DispatchResult]:
    """Steps 10–12: subscribe completion listeners, send the Message, wait for completion."""

    async def run(env: Env) -> DispatchResult | DispatchError:
        return await send_step(env, prepared)

    return _from_async(run)


def dispatch() -> Step[DispatchResult]:
    """The whole pipeline, composed from the steps above in order.

    Run it with an environment: ``await dispatch()(env)`` gives an ``IOResult``.
    """
    composed = bind(resolve(), check_not_aborted)
    composed = bind(composed, snapshot)
    composed = bind(composed, check_available)
    decoded = bind(composed, decode)
    decoded = bind(decoded, resolve_principal)
    decoded = bind(decoded, authorize)
    decoded = bind(decoded, check_still_not_aborted)
    return bind(bind(decoded, construct), send)


def _as_result(outcome: T | DispatchError) -> Result[T, DispatchError]:
    if is_failure(outcome):
        return Failure(outcome)
    return Success(outcome)


def _future(refusal: DispatchError | None, value: T) -> FutureResult[T, DispatchError]:
    return FutureResult.from_value(value) if refusal is None else FutureResult.from_failure(refusal)


Authorized: TypeAlias = "Callable[[Env, Capability[Any, Any], Any], Outcome | Later]"
"""What a direct run does once step 7 let the call go on: the capability and its decoded input."""


def _direct(authorized: Authorized, name: str) -> Callable[[Env], Outcome | Later]:
    """Steps 1–7 called directly, then ``authorized``: :func:`run_direct` and :func:`run_declined`.

    One sequence for both, so a call a person declined cannot skip a step the
    call itself runs. ``authorized`` is a closure's free variable, not an
    argument: the fast path pays nothing for it.
    """

    def run(env: Env) -> Outcome | Later:
        capability = resolve_step(env)
        if not isinstance(capability, Capability):
            return capability
        # The guards below only skip calling a step that has nothing to do (no
        # signal, no ``available``); each step's logic stays in its function.
        refusal: DispatchError | None
        if env.invocation.signal is not None:
            refusal = aborted_step(env, capability)
            if refusal is not None:
                return refusal
        snapshot_step(env)
        if capability.available is not None:
            refusal = available_step(env, capability)
            if refusal is not None:
                return refusal
        value = decode_step(env, capability)
        # The exact class decode_step refuses with: an isinstance against a Struct
        # class that fails walks its MRO, several times the cost of this check.
        if type(value) is AgentInvalidInputError:
            return value
        principal_step(env)
        # No Decoded or Prepared values here: the composition needs them to carry
        # a step's result to the next bind, this straight-line run does not.
        if capability.authorize is not None:
            # authorize_step's halves, so a synchronous authorize costs no coroutine.
            # Any, not the union: the casts that would narrow it are calls.
            begun: Any = authorize_begin(env, capability, value)
            if begun is not None:
                # The exact class authorize_begin refuses with (an isinstance that fails costs more).
                if type(begun) is AgentAuthorizationError:
                    return begun
                if not isinstance(begun, Confirm):
                    return _authorized_later(env, capability, value, begun, None, authorized)
                # confirm_step's halves likewise: confirmed out of band, or answered at once, costs no coroutine.
                asked: Any = confirm_begin(env, capability, begun)
                if asked is not None:
                    if type(asked) is AgentAuthorizationError or type(asked) is AgentConfirmationRequiredError:
                        return asked
                    return _authorized_later(env, capability, value, asked, begun, authorized)
        return authorized(env, capability, value)

    run.__name__ = run.__qualname__ = name
    return run


async def _authorized_later(
    env: Env,
    capability: Capability[Any, Any],
    value: Any,
    waiting: Awaitable[object],
    request: Confirm | None,
    authorized: Authorized,
) -> DispatchResult | DispatchError:
    """Steps 7–12 of a direct run once step 7 must wait: for an async verdict, or for a person's answer."""
    if request is None:
        refusal = await _verdict_later(env, capability, waiting)
    else:
        refusal = confirm_settle(env, capability, request, await _raced(env, waiting, "confirm"))
    if refusal is not None:
        return refusal
    # Any, not the union: cast() is a call, and the answer to a person's yes is timed.
    rest: Any = authorized(env, capability, value)
    return await rest if type(rest) is COROUTINE else rest


def _run_rest(env: Env, capability: Capability[Any, Any], value: Any) -> Outcome | Later:
    """Steps 8–12 of :func:`run_direct`, once the call is authorized."""
    if env.invocation.signal is not None:
        refusal = aborted_step(env, capability)
        if refusal is not None:
            return refusal
    message = value if capability.to_message is None else construct_message(env, capability, value)
    if capability.completion is None:
        # send_step's halves without completion, likewise for a synchronous host.
        sent = send_begin(env, capability, message)
        if type(sent) is DispatchResult:
            return sent
        return send_wait(env, capability, message, cast("Awaitable[object]", sent))
    return send_step(env, Prepared(capability, value, message))


run_direct: Callable[[Env], Outcome | Later] = _direct(_run_rest, "run_direct")
"""The same steps, in the same order, called directly: the runtime's fast path.

A plain function for as long as nothing must be awaited: it answers a call
whose ``authorize`` and host answer synchronously (and that waits for no
completion) with the outcome itself, and any other call with the coroutine
that runs the rest, which the caller awaits.
"""


def run_declined(prompt: str) -> Callable[[Env], Outcome | Later]:
    """A direct run for a call a person already declined, ``prompt`` being what they were shown.

    For an answer that arrives after the call that asked has ended (an A2A
    task's "no", an MCP retry that declines): the call runs steps 1–7 on the
    Model as it is now, so it is audited and its principal resolved as any
    call is, and then, wherever it would go on, it is refused
    ``Declined: <prompt>``. It never builds or sends a Message, even when
    ``authorize`` no longer asks: a person's "no" is never turned into a "yes"
    by a Model that changed meanwhile. A refusal of its own (unavailable,
    invalid, unauthorized, a different prompt declined by the invocation's
    ``confirm``) is answered as it is.
    """

    def declined(env: Env, capability: Capability[Any, Any], value: Any) -> Outcome:
        kept = env.bound.declined[capability.name].get(prompt)
        return env.bound.keep_confirmation_refusal(capability, prompt, declined=True) if kept is None else kept

    return _direct(declined, "run_declined")
