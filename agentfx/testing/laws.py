"""The law suite: properties every contract and the runtime dispatching it must keep.

This layer owns :func:`check_contract`, the :class:`Law` values it checks and
the :class:`LawViolation` it raises. Each law is a property of one invocation
(or of the contract's availability as a whole) that hypothesis checks against
Models, principals and payloads it draws: schema-valid payloads from
:func:`~agentfx.testing.valid_payloads`, schema-invalid ones from
:func:`~agentfx.testing.invalid_payloads`, and valid ones with an unknown key.
A capability with ``authorize`` also gets the valid payload once more on a
``confirmed`` invocation, so both paths of a :class:`~agentfx.Confirm` answer
are judged: a refusal on an ordinary invocation, a dispatch on a confirmed one.

The suite observes dispatch from outside, through the public runtime: it binds
a copy of the contract whose hooks (``available``, the input decoder,
``authorize``, ``to_message``) log each call, over a
:class:`~agentfx.testing.RecordingHost` whose Model reads, principal
resolutions and dispatches log too, and judges the log, the outcome and what
reached the host, down to whether the Message sent survives the Message
union's JSON codec (the runtime checks its class, not the values inside it).
It deliberately knows nothing of the pipeline's internals or of any wire
protocol.

A capability whose examples never reach the host is reported, not passed
(:data:`HOST_REACHED`): the laws of the dispatched path would hold for it
vacuously.

Completion contracts are left out of the instrumented copy: waiting for the
Message or Model state that finishes the work is the completion layer's
business and its own tests', while the laws are about what happens before and
at the moment the host is called. Without them a dispatch settles when the host
accepts the Message, so every example runs in microseconds.
"""

from __future__ import annotations

import asyncio
import copy
import dataclasses
import threading
import time
from collections.abc import Awaitable, Callable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from functools import partial
from inspect import isawaitable
from typing import Any, Final, Literal, TypeAlias, TypeVar, cast

import anyio
from anyio.from_thread import BlockingPortal
import msgspec

from ..completion import truth
from ..confirm import Confirm
from ..contract import AuthorizationRequest, Capability, Definition, InvocationContext, available_in, check_definition
from ..errors import (
    AgentAuthorizationError,
    AgentCapabilityUnavailableError,
    AgentConfirmationRequiredError,
    AgentInvalidInputError,
    DispatchError,
    DispatchFailed,
)
from ..host import Host
from ..invocation import Invocation
from ..pipeline import DispatchResult
from ..runtime import bind
from .recording import RecordingHost
from .strategies import invalid_payloads, valid_payloads

try:
    from hypothesis import HealthCheck, Phase, given, reject, settings
    from hypothesis import strategies as st
    from hypothesis.errors import FlakyFailure, Unsatisfiable
    from hypothesis.strategies import SearchStrategy
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise ImportError("agentfx.testing needs hypothesis: pip install 'agentfx[testing]'") from exc

__all__ = [
    "AVAILABLE_FIRST",
    "AVAILABLE_IS_PURE",
    "AVAILABLE_LISTING",
    "CONFIRM_UNLESS_CONFIRMED",
    "FAILURE_ROUND_TRIP",
    "HOST_REACHED",
    "INVALID_PAYLOAD_REFUSED",
    "LAWS",
    "MESSAGE_ROUND_TRIP",
    "MODEL_READ_ONCE",
    "PIPELINE_ORDER",
    "REACHES_HOST",
    "REFUSAL_NEVER_REACHES_HOST",
    "SETTLES",
    "UNKNOWN_KEY_REFUSED",
    "VALID_PAYLOAD_DECODES",
    "Law",
    "LawViolation",
    "check_contract",
]

M = TypeVar("M")
P = TypeVar("P")
T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Law:
    """One law of the suite.

    Attributes:
        key: A short stable name, quoted by every violation.
        statement: What the law demands, in one sentence.
    """

    key: str
    statement: str


SETTLES: Final = Law(
    "settles",
    "every invocation settles as a success or a typed failure: no hook raises and nothing hangs",
)
MODEL_READ_ONCE: Final = Law("model-read-once", "the Model is read exactly once per invocation")
AVAILABLE_FIRST: Final = Law(
    "available-first",
    "`available` runs before decoding and `authorize`: an unavailable capability is refused as unavailable "
    "whatever the payload, and `authorize` is never called",
)
PIPELINE_ORDER: Final = Law(
    "pipeline-order",
    "the Model is read, then `available`, decoding, the principal, `authorize`, `to_message` and the host's "
    "dispatch run in that order, each at most once, stopping at the first refusal",
)
REFUSAL_NEVER_REACHES_HOST: Final = Law("refusal-never-reaches-host", "a refusal never reaches the host")
CONFIRM_UNLESS_CONFIRMED: Final = Law(
    "confirm-unless-confirmed",
    "an `authorize` answering `Confirm` refuses with AgentConfirmationRequiredError and its prompt unless the "
    "invocation is confirmed, and proceeds when it is; `confirmed` turns no other refusal into a dispatch",
)
FAILURE_ROUND_TRIP: Final = Law(
    "failure-round-trip", "every failure encodes to JSON and decodes back to an equal value of the same class"
)
VALID_PAYLOAD_DECODES: Final = Law(
    "valid-payload-decodes", "a schema-valid payload decodes: it is never refused as invalid input"
)
UNKNOWN_KEY_REFUSED: Final = Law(
    "unknown-key-refused",
    "a valid payload plus an unknown key is refused as invalid input when the capability is available",
)
INVALID_PAYLOAD_REFUSED: Final = Law(
    "invalid-payload-refused",
    "a payload outside the input schema is refused as invalid input when the capability is available",
)
REACHES_HOST: Final = Law(
    "reaches-host",
    "a valid payload for an available, authorized capability reaches the host as exactly one Message "
    "of the capability's class",
)
MESSAGE_ROUND_TRIP: Final = Law(
    "message-round-trip",
    "the Message that reaches the host is one the Message union's codec carries: it encodes to JSON and "
    "decodes through the union back to an equal value of the capability's class; of a Message declaring a "
    "field JSON carries only through the application's own hooks, each other field does so against its "
    "declared type and constraints",
)
AVAILABLE_LISTING: Final = Law(
    "available-listing",
    "`available()` lists exactly the capabilities whose `available` holds, in declaration order, "
    "reading the Model once",
)
AVAILABLE_IS_PURE: Final = Law(
    "available-is-pure",
    "`available` is a function of the Model: equal Models get the same answer, "
    "also after other capabilities were dispatched",
)
HOST_REACHED: Final = Law(
    "host-reached",
    "some drawn Model and principal let a valid payload reach the host, so the laws of the dispatched path "
    "are checked at all",
)

# The laws that say something only once `available` held, and once `authorize` let the payload through.
_AFTER_AVAILABLE: Final = (VALID_PAYLOAD_DECODES, UNKNOWN_KEY_REFUSED, INVALID_PAYLOAD_REFUSED, REACHES_HOST, MESSAGE_ROUND_TRIP)
_AFTER_AUTHORIZE: Final = (REACHES_HOST, MESSAGE_ROUND_TRIP)

LAWS: Final[tuple[Law, ...]] = (
    SETTLES,
    MODEL_READ_ONCE,
    AVAILABLE_FIRST,
    PIPELINE_ORDER,
    REFUSAL_NEVER_REACHES_HOST,
    CONFIRM_UNLESS_CONFIRMED,
    FAILURE_ROUND_TRIP,
    VALID_PAYLOAD_DECODES,
    UNKNOWN_KEY_REFUSED,
    INVALID_PAYLOAD_REFUSED,
    REACHES_HOST,
    MESSAGE_ROUND_TRIP,
    AVAILABLE_LISTING,
    AVAILABLE_IS_PURE,
    HOST_REACHED,
)
"""Every law :func:`check_contract` checks, in the order it judges them."""


class LawViolation(AssertionError):
    """A law of the suite does not hold.

    Attributes:
        law: The law broken.
        capability: The capability that broke it, or ``None`` for the contract as a whole.
        detail: What was observed.
    """

    def __init__(self, law: Law, capability: str | None, detail: str) -> None:
        who = "The contract" if capability is None else f'Capability "{capability}"'
        super().__init__(f'{who} breaks the law "{law.key}" ({law.statement}): {detail}')
        self.law = law
        self.capability = capability
        self.detail = detail


PayloadKind: TypeAlias = Literal["valid", "unknown-key", "invalid"]
Event: TypeAlias = Literal["model", "available", "decode", "principal", "authorize", "to_message", "dispatch"]

# Everything the pipeline may do once ``available`` said yes.
_LATER: Final[frozenset[Event]] = frozenset({"decode", "principal", "authorize", "to_message", "dispatch"})
# A hook that never returns is a hang, reported instead of waited out. Both are
# read when used, so a test may patch them rather than wait ten seconds.
_SETTLE_WITHIN: Final = 10.0
# How much longer an invocation blocking the event loop (a synchronous hook
# stuck: a deadlock, a blocking read) is waited for before its loop is abandoned.
_ABANDON_AFTER: Final = 10.0
_EVERY_HEALTH_CHECK: Final = cast("tuple[HealthCheck, ...]", tuple(HealthCheck))


class _NotAsked:
    """``authorize`` was never called in this invocation."""

    def __repr__(self) -> str:
        return "NOT_ASKED"


_NOT_ASKED: Final = _NotAsked()


class _Probe:
    """The call log one invocation writes, through the instrumented hooks and host.

    Only the thread of the invocation being observed writes to it: an
    invocation abandoned while a hook blocked its event loop may go on once
    the hook returns, on its own thread, and must not write into a later one's log.
    """

    __slots__ = ("available", "events", "owner", "verdict")

    def __init__(self) -> None:
        self.events: list[Event] = []
        self.available: bool | None = None
        self.verdict: object = _NOT_ASKED
        self.owner: int | None = None

    def reset(self) -> None:
        """Start the log of an invocation running on the calling thread."""
        self.events = []
        self.available = None
        self.verdict = _NOT_ASKED
        self.owner = threading.get_ident()

    def _observing(self) -> bool:
        return self.owner is None or self.owner == threading.get_ident()

    def log(self, event: Event) -> None:
        if self._observing():
            self.events.append(event)

    def saw_available(self, answer: bool) -> None:
        if self._observing():
            self.available = answer

    def saw_verdict(self, verdict: object) -> None:
        if self._observing():
            self.verdict = verdict


class _Unsettled(Exception):
    """An invocation that did not settle in time, judged as its outcome.

    Attributes:
        limit: The limit it went past, in seconds.
        elapsed: How long it took, when it did settle (a hook blocked the
            event loop), or ``None`` when it was cut short (an awaiting hook)
            or abandoned (a synchronous hook that never returned).
        abandoned: Its event loop was left to the blocked hook.
    """

    def __init__(self, limit: float, elapsed: float | None = None, *, abandoned: bool = False) -> None:
        super().__init__(limit, elapsed, abandoned)
        self.limit = limit
        self.elapsed = elapsed
        self.abandoned = abandoned

    def __str__(self) -> str:
        said = f"nothing: it did not settle within {self.limit:g}s"
        if self.abandoned:
            return f"{said}, and was abandoned, still blocked (a synchronous hook never returned)"
        if self.elapsed is not None:
            return f"{said}: it took {self.elapsed:.2f}s (a hook blocked the event loop)"
        return said


class _Loop:
    """An asyncio event loop in a daemon thread, behind an anyio portal."""

    __slots__ = ("_loop", "_portal", "_thread")

    def __init__(self) -> None:
        started: Future[tuple[BlockingPortal, asyncio.AbstractEventLoop]] = Future()

        async def serve() -> None:
            async with BlockingPortal() as portal:
                started.set_result((portal, asyncio.get_running_loop()))
                await portal.sleep_until_stopped()

        def run() -> None:
            try:
                anyio.run(serve)
            except BaseException as exc:  # reported to the thread waiting to start
                if not started.done():
                    started.set_exception(exc)

        # A daemon thread, so one left to a hook that never returns does not keep the process alive.
        self._thread = threading.Thread(target=run, name="agentfx-check-contract", daemon=True)
        self._thread.start()
        self._portal, self._loop = started.result()

    def submit(self, func: Callable[[], Awaitable[T]]) -> Future[T]:
        return self._portal.start_task_soon(func)

    def stop(self) -> None:
        self._portal.call(self._portal.stop)
        self._thread.join()

    def abandon(self) -> None:
        """Let the loop end once whatever blocks it returns, without waiting for that.

        Nothing that waits on the loop (the portal's own calls) may be used:
        it is blocked. ``call_soon_threadsafe`` only queues a callback.
        """
        portal = self._portal

        def stop_when_free() -> None:
            asyncio.ensure_future(portal.stop(cancel_remaining=True))

        self._loop.call_soon_threadsafe(stop_when_free)


class _Worker:
    """Where check_contract's dispatches run: one event loop for every example, off the caller's thread.

    Starting a loop per example would cost more than the example, and the
    caller may be running a loop of its own. A synchronous hook blocks the
    loop, where no timeout can interrupt it, so the caller waits on each
    invocation with a timeout of its own; past it, the loop is abandoned to
    the hook (its thread ends if the hook ever returns) and the next
    invocation gets a new one.
    """

    __slots__ = ("_loop",)

    def __init__(self) -> None:
        self._loop: _Loop | None = None

    def call(self, func: Callable[[], Awaitable[T]], within: float) -> T:
        """``await func()`` on the loop, within ``within`` seconds.

        Raises:
            TimeoutError: It did not return in time, and its loop was abandoned.
        """
        if self._loop is None:
            self._loop = _Loop()
        future = self._loop.submit(func)
        try:
            return future.result(timeout=within)
        except TimeoutError:
            self._loop.abandon()
            self._loop = None
            raise

    def close(self) -> None:
        if self._loop is not None:
            self._loop.stop()
            self._loop = None


@dataclass(slots=True)
class _Tally:
    """What one capability's examples came to, for :func:`_judge_reached` to judge once they all ran.

    Attributes:
        examples: Examples judged in full.
        available: Of those, the ones whose Model the capability was available in.
        authorized: Of those, the ones where a valid payload got past ``authorize``.
        reached: Valid payloads that reached the host, over all examples.
        refusals: What ``authorize`` answered when it did not let a payload through,
            a few distinct answers, for the report.
    """

    examples: int = 0
    available: int = 0
    authorized: int = 0
    reached: int = 0
    refusals: list[str] = dataclasses.field(default_factory=lambda: [])

    def count(self, available: bool, observations: Sequence[_Observation]) -> None:
        """Count one example, judged in full: whether it was available, authorized, reached."""
        self.examples += 1
        self.available += available
        valid = [o for o in observations if o.kind == "valid"]
        if any(_authorized(o) for o in valid):
            self.authorized += 1
        self.reached += sum(isinstance(o.outcome, DispatchResult) for o in valid)
        for o in valid:
            shown = repr(o.verdict)
            if "authorize" in o.events and not _authorized(o) and shown not in self.refusals and len(self.refusals) < 3:
                self.refusals.append(shown)


@dataclass(frozen=True, slots=True)
class _Observation:
    """One invocation as the suite saw it; :func:`_judge` checks it against the laws.

    Attributes:
        capability: The capability as declared (not its instrumented copy).
        kind: Which payload strategy drew ``payload``.
        payload: What was dispatched.
        outcome: The success or failure value, or the exception dispatch raised
            (``TimeoutError`` when it did not settle in time).
        events: The calls the invocation made, in order.
        available: What ``available`` answered; ``None`` when it was not
            declared, not called, or raised.
        verdict: What ``authorize`` answered (awaited), or ``_NOT_ASKED``.
        dispatched: The Messages that reached the host.
        confirmed: Whether the invocation was ``confirmed`` (approved out of band).
    """

    capability: Capability[Any, Any]
    kind: PayloadKind
    payload: object
    outcome: DispatchResult | DispatchError | Exception
    events: tuple[Event, ...]
    available: bool | None
    verdict: object
    dispatched: tuple[object, ...]
    confirmed: bool = False


def _strategy(values: SearchStrategy[T] | Sequence[T], what: str) -> SearchStrategy[T]:
    if isinstance(values, SearchStrategy):
        return values
    # A string is a sequence of its characters; sampling those is never meant.
    if not isinstance(cast(object, values), Sequence) or isinstance(values, str | bytes | bytearray):
        raise TypeError(
            f"check_contract() takes {what} as a hypothesis strategy or a sequence of them, "
            f"not {type(values).__name__}"
        )
    options = list(values)
    if not options:
        raise ValueError(f"check_contract needs at least one of {what}")
    return st.sampled_from(options)


def check_contract(
    definition: Definition[M, P],
    *,
    models: SearchStrategy[M] | Sequence[M],
    principals: SearchStrategy[P] | Sequence[P],
    max_examples: int = 100,
) -> None:
    """Check every capability of a contract against the law suite (:data:`LAWS`).

    For each capability, hypothesis draws a Model, a principal and three
    payloads (a schema-valid one, the same plus an unknown key, and a
    schema-invalid one), dispatches each through a freshly bound runtime over a
    :class:`~agentfx.testing.RecordingHost`, and judges what happened. A plain
    synchronous function, callable from any test: the dispatches run on an
    asyncio event loop of its own, in a worker thread, so hooks run there too.

    Hypothesis runs with ``deadline=None`` (the first example pays for schema
    set-up), without its ``explain`` phase (which reruns a failing example many
    times; the violation already says what the invocation did), with no health
    check (they judge how hard values are to draw, not the contract), and
    otherwise with the active settings profile, so ``derandomize``, the example
    database and verbosity follow the project's configuration. Completion
    contracts are not exercised (see the module docstring).

    Most laws of a dispatch only say something about an example whose Model
    the capability is available in and whose principal ``authorize`` lets
    through; a capability no drawn example lets reach the host would pass them
    all unchecked, so that is a violation (:data:`HOST_REACHED`). Before
    reporting it, the suite draws more examples (a few hundred at most)
    looking for one that reaches the host, so an example that is merely rare
    among those drawn is found rather than failed on by chance. The law
    :data:`MESSAGE_ROUND_TRIP` judges a Message declaring a field of the
    application's own type (one JSON carries only through hooks) field by
    field: each other field's value against its declared type and
    constraints; the custom field itself, and a ``__post_init__`` over the
    whole Message, go unjudged. An invocation must settle within 10 seconds
    (:data:`SETTLES`): an awaiting hook is cut short there; one blocking the
    event loop is timed, and past another 10 seconds its loop is abandoned
    to it (a daemon thread, ending if the hook ever returns) and reported.

    Args:
        definition: The contract, from ``define``.
        models: A hypothesis strategy of Models, or a sequence of them to sample.
        principals: A strategy of principals, or a sequence of them to sample.
            Use ``[None]`` for a contract whose host resolves no principal.
        max_examples: Hypothesis examples per capability.

    Raises:
        LawViolation: An ``AssertionError`` naming the capability and the law,
            on the first violation hypothesis finds (after shrinking it); of
            :data:`HOST_REACHED` when no example reached the host, saying
            whether to add a Model the capability is available in or a
            principal ``authorize`` accepts.
        ContractError: ``definition`` is not the result of ``define``.
        ValueError: ``models`` or ``principals`` is an empty sequence, or no
            example at all could be drawn for a capability (its strategies
            rejected every attempt).
        TypeError: ``models`` or ``principals`` is neither a strategy nor a
            sequence (a string is not taken for one), or a capability's input
            type cannot be drawn from (see :func:`~agentfx.testing.valid_payloads`).

    >>> import msgspec
    >>> from agentfx.contract import define, expose, variant
    >>> class Ping(msgspec.Struct, tag=True):
    ...     times: int
    >>> contract = define(expose(Ping, variant(Ping, "Ping the app")))
    >>> check_contract(contract, models=[None], principals=[None], max_examples=5)
    """
    definition = check_definition("check_contract()", definition)
    model_strategy = _strategy(models, "models")
    principal_strategy = _strategy(principals, "principals")
    probe = _Probe()
    observed = dataclasses.replace(
        definition, capabilities=tuple(_observed(c, probe) for c in definition.capabilities)
    )
    worker = _Worker()
    try:
        for index in range(len(definition.capabilities)):
            name = definition.capabilities[index].name
            tally = _Tally()
            args = (definition, observed, index, probe, model_strategy, principal_strategy, max_examples, worker, tally)
            _run(name, _law_suite(*args))
            if tally.examples and not tally.reached:
                # Examples that reach the host may just be rare among those drawn
                # (one Model in six, say): look for one on purpose before saying
                # there is none, so a sound run does not fail by chance.
                _run(name, _law_suite(*args, seeking=True), seeking=True)
                _judge_reached(name, tally)
    finally:
        worker.close()


def _run(capability: str, test: Callable[[], None], *, seeking: bool = False) -> None:
    """Run one capability's law suite, turning hypothesis's verdicts on the run into the suite's.

    Args:
        capability: The capability's name, for the errors.
        test: The suite, from :func:`_law_suite`.
        seeking: It is the pass that looks for an example reaching the host,
            so finding none is :func:`_judge_reached`'s to report, not a
            failure to draw.
    """
    try:
        test()
    except Unsatisfiable as exc:
        if seeking:
            return
        # Health checks are off, so this is hypothesis finding no example at all to run.
        raise ValueError(
            f'check_contract could not draw a single example for capability "{capability}": '
            "the models, principals or payloads it draws from rejected every attempt"
        ) from exc
    except FlakyFailure as flaky:
        # A law broken once and not again on replay is still broken; the
        # violation says which, the flakiness is context.
        violation = next((e for e in flaky.exceptions if isinstance(e, LawViolation)), None)
        if violation is None:
            raise
        raise violation from flaky


def _judge_reached(capability: str, tally: _Tally) -> None:
    """Refuse a run in which no valid payload reached the host.

    Most laws of a dispatch (``valid-payload-decodes``, ``reaches-host``,
    ``message-round-trip``...) only say something once ``available`` held and
    ``authorize`` let the payload through: when the drawn Models and
    principals never allow that, they hold vacuously, and a ``to_message``
    that raises for every input would pass. So that is reported, not passed.

    Raises:
        LawViolation: :data:`HOST_REACHED`, saying how far the examples got
            and which Model or principal to add.
    """
    if tally.reached or not tally.examples:
        return
    of = f"in {tally.examples} example{'s' if tally.examples != 1 else ''}"
    if not tally.available:
        detail = (
            f"{of}, `available` held for none of the drawn Models, so nothing was decoded, authorized or "
            f"dispatched and the laws {_keys(_AFTER_AVAILABLE)} were never checked; "
            "give check_contract `models` that include one where the capability is available"
        )
    else:
        answers = f" (it answered {', '.join(tally.refusals)})" if tally.refusals else ""
        detail = (
            f"{of}, the capability was available in {tally.available}, but `authorize` let no valid payload "
            f"through for any drawn principal{answers}, so the laws {_keys(_AFTER_AUTHORIZE)} were never "
            "checked; give check_contract `principals` that include one `authorize` accepts"
        )
    raise LawViolation(HOST_REACHED, capability, detail)


def _keys(laws: Sequence[Law]) -> str:
    return ", ".join(f'"{law.key}"' for law in laws)


def _law_suite(
    definition: Definition[Any, Any],
    observed: Definition[Any, Any],
    index: int,
    probe: _Probe,
    models: SearchStrategy[Any],
    principals: SearchStrategy[Any],
    max_examples: int,
    worker: _Worker,
    tally: _Tally,
    *,
    seeking: bool = False,
) -> Callable[[], None]:
    """One capability's law suite, as a hypothesis test that counts what it saw in ``tally``.

    With ``seeking``, it is the pass looking for an example that reaches the
    host: every example is judged as usual, and one that does not reach it is
    rejected (``hypothesis.reject``), so the pass stops at the first that
    does, or once hypothesis gives up (a few hundred rejections).
    """
    capability = definition.capabilities[index]
    messages = _message_decoder(definition.union, capability.message)
    valid = valid_payloads(capability)
    invalid = invalid_payloads(capability)
    known = frozenset(f.encode_name for f in msgspec.structs.fields(capability.input_type))
    unknown_keys = st.text(min_size=1, max_size=12).filter(lambda key: key not in known)
    extra_values = st.one_of(st.none(), st.integers(-9, 9), st.text(max_size=4))

    def law_suite(data: st.DataObject) -> None:
        model = data.draw(models, label="model")
        principal = data.draw(principals, label="principal")
        payload = data.draw(valid, label="valid payload")
        key = data.draw(unknown_keys, label="unknown key")
        extended = {**payload, key: data.draw(extra_values, label="its value")}
        bad = data.draw(invalid, label="invalid payload").payload

        before = _verdicts(definition.capabilities, _twin(model))
        if seeking and not before[index]:
            # Cannot reach the host, and the first pass already judged Models like it.
            tally.count(False, ())
            reject()
        recorder: RecordingHost[Any, Any, Any] = RecordingHost(model, principal=lambda _: principal)
        runtime = bind(observed, host=_logged_host(recorder, probe))
        listed = [d.name for d in runtime.messages.available()]
        _judge_listing(definition.capabilities, before, listed, recorder.model_reads)

        def seen(
            kind: PayloadKind, sent: object, confirmed: bool, outcome: DispatchResult | DispatchError | Exception
        ) -> _Observation:
            return _Observation(
                capability,
                kind,
                sent,
                outcome,
                tuple(probe.events),
                probe.available,
                probe.verdict,
                tuple(recorder.dispatched),
                confirmed,
            )

        async def invoke(kind: PayloadKind, sent: object, confirmed: bool) -> _Observation:
            probe.reset()
            recorder.dispatched.clear()
            limit = _SETTLE_WITHIN
            # The deadline cuts short a hook that awaits; one that blocks the loop
            # cannot be cut short, only timed.
            scope = anyio.CancelScope(deadline=anyio.current_time() + limit)
            outcome: DispatchResult | DispatchError | Exception = _Unsettled(limit)
            started = time.monotonic()
            with scope:
                try:
                    outcome = await runtime.messages.call(capability.name, sent, Invocation(confirmed=confirmed))
                except DispatchFailed as failed:
                    outcome = failed.error
                except Exception as exc:  # a defect: judged as an outcome
                    outcome = exc
            elapsed = time.monotonic() - started
            if scope.cancelled_caught:
                outcome = _Unsettled(limit)
            elif elapsed > limit:
                outcome = _Unsettled(limit, elapsed)
            return seen(kind, sent, confirmed, outcome)

        sends: list[tuple[PayloadKind, object, bool]] = [
            ("valid", payload, False),
            ("unknown-key", extended, False),
            ("invalid", bad, False),
        ]
        if capability.authorize is not None:
            # The other path of a Confirm answer: a person approved this call out of band.
            sends.append(("valid", payload, True))
        observations: list[_Observation] = []
        for kind, sent, confirmed in sends:
            try:
                observations.append(
                    worker.call(partial(invoke, kind, sent, confirmed), within=_SETTLE_WITHIN + _ABANDON_AFTER)
                )
            except TimeoutError:
                # Its loop is left to the hook blocking it; what it logged so far is what there is.
                observations.append(seen(kind, sent, confirmed, _Unsettled(_SETTLE_WITHIN, abandoned=True)))
                break
        for observation in observations:
            _judge(observation)
            _judge_message(observation, messages)
            if observation.available is not None and observation.available != before[index]:
                raise LawViolation(
                    AVAILABLE_IS_PURE,
                    capability.name,
                    f"`available` answered {before[index]} for a Model and {observation.available} "
                    "for an equal one within the same example",
                )
        after = _verdicts(definition.capabilities, _twin(model))
        _judge_purity(definition.capabilities, before, after, capability.name)
        tally.count(before[index], observations)
        if seeking and not any(o.kind == "valid" and isinstance(o.outcome, DispatchResult) for o in observations):
            reject()

    # The example database keys on the test function, and this one function serves
    # every capability of every contract: the extra digest (the hook hypothesis's own
    # parametrize support uses) says which, so a saved failure replays where it failed.
    contract = ",".join(c.name for c in definition.capabilities)
    digest = f"{contract}:{capability.name}{':seeking' if seeking else ''}"
    setattr(law_suite, "_hypothesis_internal_add_digest", digest.encode())
    return settings(
        # Seeking, one example reaching the host is all that is wanted.
        max_examples=1 if seeking else max_examples,
        deadline=None,
        # One violation, the first found and shrunk, named as a plain AssertionError.
        report_multiple_bugs=False,
        # Explaining reruns each failing example many times over; the violation
        # already says what the invocation did.
        phases=[phase for phase in settings().phases if phase is not Phase.explain],
        # A health check judges the drawing, not the contract: a field whose
        # values are slow or hard to draw (a pattern and a length together) or
        # a call from inside another hypothesis test is no law broken.
        suppress_health_check=_EVERY_HEALTH_CHECK,
    )(given(st.data())(law_suite))


def _twin(model: T) -> T:
    """An equal, separate copy of ``model`` where one can be made, so equality is what is tested."""
    try:
        twin = copy.deepcopy(model)
    except Exception:
        return model
    return twin if twin == model else model


def _verdicts(capabilities: Sequence[Capability[Any, Any]], model: object) -> list[bool]:
    verdicts: list[bool] = []
    for c in capabilities:
        try:
            # The runtime's own reading of an answer: an awaitable one is a defect, never a yes.
            verdicts.append(available_in(c, model))
        except Exception as exc:
            raise LawViolation(SETTLES, c.name, f"`available` raised {_describe(exc)}") from exc
    return verdicts


def _logged_host(recorder: RecordingHost[Any, Any, Any], probe: _Probe) -> Host[Any, Any, Any]:
    def model() -> object:
        probe.log("model")
        return recorder.model()

    def dispatch(message: object) -> None:
        probe.log("dispatch")
        recorder.dispatch(message)

    def principal(invocation: Invocation) -> object:
        probe.log("principal")
        return recorder.principal(invocation)

    return Host(
        model=model,
        dispatch=dispatch,
        principal=principal,
        observe=recorder.observe,
        subscribe=recorder.subscribe,
    )


def _observed(capability: Capability[Any, Any], probe: _Probe) -> Capability[Any, Any]:
    """A copy of ``capability`` whose hooks log their calls into ``probe``, without its completion."""
    available = capability.available
    authorize = capability.authorize
    to_message = capability.to_message
    attempt = capability.codec.attempt

    def observed_available(model: Any) -> bool:
        probe.log("available")
        # Read as the runtime reads it, so an answer it refuses (an awaitable) is refused here too.
        answer = truth(available(model), "available") if available is not None else True
        probe.saw_available(answer)
        return answer

    def observed_attempt(payload: object) -> Any:
        probe.log("decode")
        return attempt(payload)

    def observed_authorize(request: AuthorizationRequest[Any, Any, Any]) -> Any:
        probe.log("authorize")
        verdict = authorize(request) if authorize is not None else True
        if isawaitable(verdict):
            pending = verdict

            async def settled() -> object:
                answer = await pending
                probe.saw_verdict(answer)
                return answer

            return settled()
        probe.saw_verdict(verdict)
        return verdict

    def observed_to_message(value: Any, context: InvocationContext[Any, Any]) -> Any:
        probe.log("to_message")
        return to_message(value, context) if to_message is not None else value

    codec = copy.copy(capability.codec)
    codec.attempt = observed_attempt
    return dataclasses.replace(
        capability,
        available=observed_available if available is not None else None,
        authorize=observed_authorize if authorize is not None else None,
        to_message=observed_to_message if to_message is not None else None,
        codec=codec,
        completion=None,
    )


def _describe(exc: BaseException) -> str:
    if isinstance(exc, _Unsettled):
        return str(exc)
    return f"{type(exc).__name__}: {exc}"


def _expected_events(capability: Capability[Any, Any], outcome: object) -> tuple[Event, ...] | None:
    """The calls an invocation ending in ``outcome`` makes, or ``None`` when no invocation ends so.

    >>> import msgspec
    >>> from agentfx.contract import expose, variant
    >>> class Ping(msgspec.Struct, tag=True):
    ...     pass
    >>> [ping] = expose(Ping, variant(Ping, "Ping")).capabilities
    >>> _expected_events(ping, AgentInvalidInputError.of("ping", "Ping", "$"))
    ('model', 'decode')
    """
    events: list[Event] = ["model"]
    if capability.available is not None:
        events.append("available")
    if isinstance(outcome, AgentCapabilityUnavailableError):
        return tuple(events) if capability.available is not None else None
    events.append("decode")
    if isinstance(outcome, AgentInvalidInputError):
        return tuple(events)
    events.append("principal")
    if capability.authorize is not None:
        events.append("authorize")
    if isinstance(outcome, AgentAuthorizationError | AgentConfirmationRequiredError):
        return tuple(events) if capability.authorize is not None else None
    if isinstance(outcome, DispatchResult):
        if capability.to_message is not None:
            events.append("to_message")
        events.append("dispatch")
        return tuple(events)
    # Cancellation needs a signal and a timeout a completion; these invocations have neither.
    return None


def _authorized(o: _Observation) -> bool:
    """Whether the invocation got past ``authorize`` (or, without one, reached it)."""
    if o.capability.authorize is None:
        return "principal" in o.events
    return o.verdict is True or (isinstance(o.verdict, Confirm) and o.confirmed)


def _judge(o: _Observation) -> None:
    """Check one invocation against the per-invocation laws, most specific first.

    Raises:
        LawViolation: The first law the observation breaks.
    """
    c = o.capability
    outcome = o.outcome
    available = o.available if c.available is not None else True
    authorized = _authorized(o)
    if isinstance(outcome, _Unsettled):
        # Whatever the payload: a valid one that hangs breaks no law of what reaches the host first.
        raise LawViolation(SETTLES, c.name, f"dispatching {o.payload!r} gave {outcome}")
    if isinstance(outcome, Exception):
        law = REACHES_HOST if o.kind == "valid" and available is True and authorized else SETTLES
        raise LawViolation(law, c.name, f"dispatching {o.payload!r} raised {_describe(outcome)}")
    if o.events.count("model") != 1:
        raise LawViolation(MODEL_READ_ONCE, c.name, f"the Model was read {o.events.count('model')} times")
    if available is False and (
        not isinstance(outcome, AgentCapabilityUnavailableError) or _LATER.intersection(o.events)
    ):
        raise LawViolation(
            AVAILABLE_FIRST,
            c.name,
            f"`available` said no, then {o.events[2:]} ran and the outcome was {_show(outcome)}",
        )
    if not isinstance(outcome, DispatchResult):
        if o.dispatched or "dispatch" in o.events or "to_message" in o.events:
            raise LawViolation(
                REFUSAL_NEVER_REACHES_HOST, c.name, f"refused with {_show(outcome)}, yet the host got {o.dispatched!r}"
            )
        _judge_round_trip(c, outcome)
    _judge_confirmation(o)
    expected = _expected_events(c, outcome)
    if expected is None or o.events != expected:
        raise LawViolation(
            PIPELINE_ORDER, c.name, f"the calls were {list(o.events)} for the outcome {_show(outcome)}"
        )
    if available:
        refused_as_invalid = isinstance(outcome, AgentInvalidInputError)
        if o.kind == "valid" and refused_as_invalid:
            raise LawViolation(VALID_PAYLOAD_DECODES, c.name, f"{o.payload!r} was refused as {_show(outcome)}")
        if o.kind == "unknown-key" and not refused_as_invalid:
            raise LawViolation(UNKNOWN_KEY_REFUSED, c.name, f"{o.payload!r} ended in {_show(outcome)}")
        if o.kind == "invalid" and not refused_as_invalid:
            raise LawViolation(INVALID_PAYLOAD_REFUSED, c.name, f"{o.payload!r} ended in {_show(outcome)}")
    reached = isinstance(outcome, DispatchResult) and len(o.dispatched) == 1 and o.dispatched[0] is outcome.message
    if isinstance(outcome, DispatchResult) and not (reached and type(outcome.message) is c.message):
        raise LawViolation(
            REACHES_HOST, c.name, f"the result's Message was {outcome.message!r}, the host got {o.dispatched!r}"
        )
    if o.kind == "valid" and available and authorized and not reached:
        raise LawViolation(REACHES_HOST, c.name, f"{o.payload!r} ended in {_show(outcome)}")


@dataclass(frozen=True, slots=True)
class _FieldDecoders:
    """How a Message with a field JSON cannot carry is judged: its other fields, one at a time.

    Attributes:
        fields: Each field JSON carries, as its attribute name, its JSON name
            and a decoder for its declared type (constraints included).
        skipped: The attribute names of the fields left unjudged.
    """

    fields: tuple[tuple[str, str, msgspec.json.Decoder[Any]], ...]
    skipped: tuple[str, ...]


def _message_decoder(union: object, message: type[Any]) -> msgspec.json.Decoder[Any] | _FieldDecoders | None:
    """What a Message of class ``message`` must survive: the union's decoder, else its class's own.

    A union of untagged Structs has no decoder, so its members are decoded one
    class at a time. When the class declares a field JSON cannot carry (a type
    of the application's own, which msgspec encodes and decodes only through
    hooks), the Message as a whole has no codec to be in range of, but its
    other fields still have types and constraints another process would hold
    it to: they are judged one at a time (:class:`_FieldDecoders`). ``None``
    when no field is left to judge, or msgspec cannot read the class at all.
    """
    try:
        info = msgspec.inspect.type_info(cast("Any", message))
    except Exception:  # an annotation msgspec cannot read at all
        return None
    if _carried(info, set()):
        for target in (union, message):
            try:
                return msgspec.json.Decoder(cast("Any", target))
            except Exception:  # msgspec says TypeError; an odd annotation may say anything
                continue
        return None
    if not isinstance(info, msgspec.inspect.StructType):
        return None
    # ``type_info`` says what JSON carries; ``structs.fields`` gives the annotation
    # (``Annotated`` constraints and all) to build each field's own decoder from.
    declared = {f.name: f.type for f in msgspec.structs.fields(message)}
    fields: list[tuple[str, str, msgspec.json.Decoder[Any]]] = []
    skipped: list[str] = []
    for field in info.fields:
        if _carried(field.type, set()):
            try:
                fields.append((field.name, field.encode_name, msgspec.json.Decoder(declared[field.name])))
                continue
            except Exception:  # as above: no decoder, nothing to judge this field by
                pass
        skipped.append(field.name)
    return _FieldDecoders(tuple(fields), tuple(skipped)) if fields else None


def _carried(info: msgspec.inspect.Type, seen: set[int]) -> bool:
    """Whether JSON carries every value of ``info`` without hooks: no custom type anywhere inside it."""
    if isinstance(info, msgspec.inspect.ExtType):
        return False
    if isinstance(info, msgspec.inspect.CustomType):
        return info.cls is object  # decoded as any JSON value, as Any is
    if id(info) in seen:  # a recursive type, already being walked
        return True
    seen.add(id(info))
    for name in info.__struct_fields__:
        value: object = getattr(info, name)
        for part in cast("tuple[object, ...]", value) if isinstance(value, tuple) else (value,):
            inner = part.type if isinstance(part, msgspec.inspect.Field) else part
            if isinstance(inner, msgspec.inspect.Type) and not _carried(inner, seen):
                return False
    return True


def _judge_message(o: _Observation, decoder: msgspec.json.Decoder[Any] | _FieldDecoders | None) -> None:
    """Check that the Message a successful invocation sent survives the Message union's codec.

    The runtime refuses a Message of another class (a defect), but it cannot
    see inside one of the right class: ``to_message`` may fill a field with a
    value its type or constraints refuse (``Added(quantity=-1)`` for a
    ``quantity`` that must be ``>= 0``, a str for an int), or with one JSON
    cannot say. Such a Message reaches update in this process and cannot be
    carried to another, so it is out of range for the contract. Of a Message
    with a field JSON cannot carry, each other field is judged so on its own
    (see :func:`_message_decoder`).

    Raises:
        LawViolation: :data:`MESSAGE_ROUND_TRIP`, saying what the Message was
            and how it failed to come back.
    """
    outcome = o.outcome
    if decoder is None or not isinstance(outcome, DispatchResult):
        return
    c = o.capability
    message: object = outcome.message
    made = f"dispatching {o.payload!r} sent {_safe_repr(message)}"
    if isinstance(decoder, _FieldDecoders):
        for name, encode_name, field_decoder in decoder.fields:
            value: object = getattr(message, name)
            if value is msgspec.UNSET:  # left out of the JSON altogether
                continue
            said = f"{made}, whose field `{encode_name}` holds {_safe_repr(value)}"
            # A field's value need only come back equal: a float field may hold an int.
            _judge_value(c, said, value, field_decoder, "its declared type", same_class=False)
        return
    _judge_value(c, made, message, decoder, "the Message union", same_class=True)


def _judge_value(
    c: Capability[Any, Any],
    made: str,
    value: object,
    decoder: msgspec.json.Decoder[Any],
    by: str,
    *,
    same_class: bool,
) -> None:
    """Check that ``value`` encodes to JSON and ``decoder`` (``by``) brings back an equal value.

    Args:
        c: The capability, for the violation.
        made: What was sent, for the violation.
        value: The Message, or one field's value.
        decoder: What must decode it back.
        by: What ``decoder`` is, for the violation.
        same_class: The value must also come back of the very same class.

    Raises:
        LawViolation: :data:`MESSAGE_ROUND_TRIP`, ``made`` saying what was sent.
    """
    try:
        encoded = msgspec.json.encode(value)
    except Exception as exc:
        raise LawViolation(MESSAGE_ROUND_TRIP, c.name, f"{made}, which does not encode to JSON: {_describe(exc)}") from exc
    try:
        back: object = decoder.decode(encoded)
    except Exception as exc:
        raise LawViolation(
            MESSAGE_ROUND_TRIP,
            c.name,
            f"{made}, which {by} does not decode back ({_describe(exc)}); its JSON is {encoded!r}",
        ) from exc
    config = getattr(type(value), "__struct_config__", None)
    compares = getattr(config, "eq", True) is not False
    # A Struct with eq=False equals nothing but itself: its JSON is what must come back.
    same = back == value if compares else msgspec.json.encode(back) == encoded
    if (same_class and type(back) is not type(value)) or not same:
        raise LawViolation(MESSAGE_ROUND_TRIP, c.name, f"{made}, which came back from JSON as {_safe_repr(back)}")


def _safe_repr(value: object) -> str:
    try:
        return repr(value)
    except Exception:
        return f"a {type(value).__name__} whose repr raises"


def _judge_confirmation(o: _Observation) -> None:
    """Check that a ``Confirm`` answer refuses exactly when the invocation is not confirmed.

    Raises:
        LawViolation: :data:`CONFIRM_UNLESS_CONFIRMED`, when the outcome does
            not follow from ``authorize``'s answer and the invocation's ``confirmed``.
    """
    c = o.capability
    outcome = o.outcome
    verdict = o.verdict
    wanted = isinstance(outcome, AgentConfirmationRequiredError)
    if isinstance(verdict, Confirm):
        if o.confirmed:
            if wanted:
                raise LawViolation(
                    CONFIRM_UNLESS_CONFIRMED, c.name, f"a confirmed invocation was refused with {_show(outcome)}"
                )
            return
        if not (
            wanted
            and outcome.prompt == verdict.prompt
            and outcome.capability == c.name
            and outcome.tag == c.tag
        ):
            raise LawViolation(
                CONFIRM_UNLESS_CONFIRMED,
                c.name,
                f"`authorize` answered {verdict!r} on an unconfirmed invocation, and the outcome was {_show(outcome)}",
            )
        return
    if wanted:
        raise LawViolation(
            CONFIRM_UNLESS_CONFIRMED, c.name, f"`authorize` answered {verdict!r}, yet the outcome was {_show(outcome)}"
        )
    if o.confirmed and verdict is not _NOT_ASKED and verdict is not True and isinstance(outcome, DispatchResult):
        raise LawViolation(
            CONFIRM_UNLESS_CONFIRMED,
            c.name,
            f"`authorize` answered {verdict!r} on a confirmed invocation, and the host got {o.dispatched!r}",
        )


def _judge_round_trip(c: Capability[Any, Any], failure: DispatchError) -> None:
    try:
        back = msgspec.json.decode(msgspec.json.encode(failure), type=DispatchError)
    except (msgspec.MsgspecError, TypeError, ValueError) as exc:
        raise LawViolation(FAILURE_ROUND_TRIP, c.name, f"{failure!r} did not survive JSON: {_describe(exc)}") from exc
    if type(back) is not type(failure) or back != failure:
        raise LawViolation(FAILURE_ROUND_TRIP, c.name, f"{failure!r} came back from JSON as {back!r}")


def _judge_listing(
    capabilities: Sequence[Capability[Any, Any]], verdicts: Sequence[bool], listed: Sequence[str], model_reads: int
) -> None:
    """Check ``available()`` against the predicates' verdicts for the same Model.

    Raises:
        LawViolation: The listing differs, naming the first capability it gets wrong.
    """
    expected = [c.name for c, holds in zip(capabilities, verdicts, strict=True) if holds]
    if list(listed) != expected:
        wrong = next((n for n in (c.name for c in capabilities) if (n in listed) != (n in expected)), None)
        raise LawViolation(AVAILABLE_LISTING, wrong, f"`available()` listed {list(listed)}, the predicates hold for {expected}")
    if model_reads != 1:
        raise LawViolation(AVAILABLE_LISTING, None, f"`available()` read the Model {model_reads} times")


def _judge_purity(
    capabilities: Sequence[Capability[Any, Any]], before: Sequence[bool], after: Sequence[bool], dispatched: str
) -> None:
    """Check that every ``available`` answered an equal Model the same before and after a dispatch.

    Raises:
        LawViolation: Naming the first capability whose answer changed.
    """
    for c, was, now in zip(capabilities, before, after, strict=True):
        if was != now:
            raise LawViolation(
                AVAILABLE_IS_PURE,
                c.name,
                f"`available` answered {was} for a Model, then {now} for an equal Model "
                f'after "{dispatched}" was dispatched',
            )


def _show(outcome: object) -> str:
    if isinstance(outcome, DispatchResult):
        return f"a success sending {outcome.message!r}"
    return repr(outcome)
