"""Binding a contract to a host, and the runtime agents call through.

This layer owns :func:`bind` (with its bind-time checks), :class:`AgentRuntime`
and everything wrapped around each run of the pipeline: filling the
invocation, audit records and tracing spans. Neither changes what a
dispatch does or returns: a sink or a tracer that raises is logged, and the
dispatch runs on as without it. The steps themselves live in
:mod:`agentfx.pipeline`; this layer deliberately knows nothing of any wire
protocol.
"""

from __future__ import annotations

import copy
import dataclasses
import logging
from collections.abc import Awaitable, Callable
from inspect import isawaitable
from typing import Any, Generic, TypeAlias, TypeVar, cast

from returns.future import FutureResult
from returns.io import IOSuccess
from returns.result import Failure, Result, Success
from returns.unsafe import unsafe_perform_io

from ._returns import failure, future_result, success
from ._tracing import ERROR_STATUS, active_tracer, span_failed
from .audit import AuditLog, AuditRecord, AuditSink, safe_record, snapshot_input
from .completion import Completion, StateCompletion, unsubscribe_defect
from .contract import Definition, available_in, check_definition, check_hook
from .docs import MessageDescriptor, ResourceDescriptor, describe, resources
from .errors import (
    AgentCompletionTimeoutError,
    AgentResourceError,
    AgentUnknownCapabilityError,
    ContractError,
    DispatchError,
    DispatchFailed,
    echo,
    shown,
)
from .host import Host, Unsubscribe
from .invocation import Invocation, new_invocation_id
from .naming import message_tag
from .pipeline import (
    COROUTINE,
    NOT_SENT,
    Bound,
    DispatchResult,
    InvocationEnv,
    Later,
    Outcome,
    dispatch,
    is_failure,
    run_declined,
    run_direct,
    waited,
)

__all__ = ["AgentRuntime", "Messages", "Resources", "bind"]

M = TypeVar("M")
P = TypeVar("P")

_DECISIONS = ("refused", "unknown", "dispatched")  # indexed by the pipeline's stage

_logger = logging.getLogger("agentfx.runtime")

Runner: TypeAlias = "Callable[[InvocationEnv[Any, Any]], Outcome | Later]"
"""A way of running the pipeline: the outcome now, or the coroutine that gives it."""


_HOST_HOOKS = (
    # (field, what it is called with, whether its answer is used at once)
    ("model", (), True),
    ("dispatch", ("the Message",), False),
    ("principal", ("the Invocation",), True),
    ("observe", ("listener",), True),
    ("subscribe", ("listener",), True),
)


def _check_host(definition: Definition[Any, Any], host: Host[Any, Any, Any]) -> None:
    # The annotation promises a Host, but untyped callers can pass anything.
    if not isinstance(cast(object, host), Host):
        raise ContractError(f"bind(host=...) takes an agentfx.Host(model=..., dispatch=...); got {_kind(host)}")
    # Host is a plain dataclass, so nothing checked its fields when it was
    # made; a value where a function belongs would fail every call instead.
    for field, takes, synchronous in _HOST_HOOKS:
        hook: object = getattr(host, field)
        if hook is not None or field in ("model", "dispatch"):
            check_hook("Cannot bind this host", f"host.{field}", hook, takes, synchronous=synchronous)
    observing = [c.name for c in definition.capabilities if isinstance(c.completion, Completion)]
    if observing and host.observe is None:
        names = ", ".join(f'"{n}"' for n in observing)
        raise ContractError(
            f"This host cannot observe Messages, which {names} needs to report completion. Supply host.observe."
        )
    subscribing = [
        c.name
        for c in definition.capabilities
        if isinstance(c.completion, StateCompletion) and c.completion.source is None
    ]
    if subscribing and host.subscribe is None:
        names = ", ".join(f'"{n}"' for n in subscribing)
        raise ContractError(
            f"This host cannot subscribe to Model changes, which {names} needs to report completion. "
            "Supply host.subscribe."
        )


def bind(
    definition: Definition[M, P],
    *,
    host: Host[M, Any, P],
    audit: AuditSink | None = None,
    tracer: object | None = None,
) -> AgentRuntime[M, P]:
    """Bind a contract to a host, checking that the host can report every declared completion.

    Args:
        definition: The contract, from ``define``.
        host: The application's :class:`~agentfx.Host`.
        audit: Receives one :class:`~agentfx.AuditRecord` per dispatch; a sink
            that raises never changes an outcome.
        tracer: An OpenTelemetry tracer; by default the configured global
            provider's, and no span work at all when none is configured. A
            tracer, span or span processor that raises is logged and never
            changes an outcome: the dispatch runs and returns as untraced.

    Raises:
        ContractError: ``definition`` is not a ``Definition``; ``host`` is
            not a ``Host``, or one of its functions is missing, not callable
            or not callable with what it is given; a Message
            completion without ``host.observe``, or a
            Model state completion without ``host.subscribe``; an ``audit``
            without a ``record`` method, or one that is ``async`` or cannot
            take the record; a ``tracer`` without ``start_as_current_span``.

    >>> import msgspec, agentfx
    >>> class Ping(msgspec.Struct, tag=True):
    ...     pass
    >>> sent = []
    >>> runtime = bind(
    ...     agentfx.define(agentfx.expose(Ping, agentfx.variant(Ping, "Ping the app"))),
    ...     host=agentfx.Host(model=lambda: None, dispatch=sent.append),
    ... )
    >>> [d.name for d in runtime.messages.list()]
    ['ping']
    """
    check_definition("bind()", definition)
    _check_host(definition, host)
    # Each would fail every dispatch, so they are refused here, once. A class
    # has its methods too, but calling one on the class fails every record.
    if audit is not None and (isinstance(audit, type) or not callable(getattr(audit, "record", None))):
        raise ContractError(
            f"bind(audit=...) takes an AuditSink, an object with a record(AuditRecord) method; got {_kind(audit)}"
        )
    if audit is not None:
        # An async record would be called and never awaited: every record lost.
        check_hook("Cannot bind this audit sink", "audit.record", audit.record, ("the AuditRecord",), synchronous=True)
    if tracer is not None and (isinstance(tracer, type) or not callable(getattr(tracer, "start_as_current_span", None))):
        raise ContractError(
            f"bind(tracer=...) takes an OpenTelemetry Tracer (trace.get_tracer(...)); got {_kind(tracer)}"
        )
    return AgentRuntime(definition, host, audit, tracer)


def _kind(value: object) -> str:
    """What ``bind`` was given instead: a type's name, or a class named as one, with what makes an instance.

    >>> from agentfx.audit import AuditLog
    >>> _kind(3), _kind(AuditLog)
    ('int', 'the class AuditLog, not an instance of it (agentfx.audit_log() makes one)')
    """
    if not isinstance(value, type):
        return type(value).__name__
    if issubclass(value, AuditLog):
        return f"the class {value.__name__}, not an instance of it (agentfx.audit_log() makes one)"
    return f"the class {value.__name__}, not an instance of it"


def _outcome_label(outcome: DispatchResult | DispatchError) -> str:
    if isinstance(outcome, DispatchResult):
        return "dispatched" if outcome.completion is None else outcome.completion.status
    if isinstance(outcome, AgentCompletionTimeoutError):
        return "timeout"
    return type(outcome).__name__


class Messages(Generic[M, P]):
    """``runtime.messages``: dispatch capabilities and list them.

    A dispatch whose ``authorize`` and host answer at once, and that waits for
    no completion, never suspends: it is not a checkpoint, so the in-process
    path costs microseconds, not an event-loop turn. A cancel scope cancelled
    before it is awaited is not seen by it, and a loop of such dispatches that
    must stay cancellable, or let other tasks run, awaits
    ``anyio.lowlevel.checkpoint()`` itself. Whatever does suspend (an async
    hook or host, a completion wait) hears an outer cancellation there, audited ``interrupted``.
    """

    __slots__ = ("_descriptors", "_executor", "_runtime")

    def __init__(self, runtime: AgentRuntime[M, P], executor: _Executor) -> None:
        self._runtime = runtime
        self._executor = executor
        self._descriptors = tuple(describe(c) for c in runtime.definition.capabilities)

    def dispatch(
        self,
        target: type[Any] | str,
        payload: object,
        invocation: Invocation | None = None,
        *,
        on_dispatched: Callable[[], None] | None = None,
    ) -> FutureResult[DispatchResult, DispatchError]:
        """Dispatch one invocation of a capability, named by Message class (preferred) or name.

        Nothing runs until the returned ``FutureResult`` is awaited, and each
        call builds a fresh one: await it once. ``on_dispatched`` is as for
        :meth:`dispatch_unknown`.

        >>> import anyio, msgspec, agentfx
        >>> class Ping(msgspec.Struct, tag=True):
        ...     pass
        >>> sent = []
        >>> runtime = agentfx.bind(
        ...     agentfx.define(agentfx.expose(Ping, agentfx.variant(Ping, "Ping the app"))),
        ...     host=agentfx.Host(model=lambda: None, dispatch=sent.append),
        ... )
        >>> async def main():
        ...     return await runtime.messages.dispatch(Ping, {})
        >>> outcome = anyio.run(main)
        >>> sent, outcome.map(lambda result: result.tag)
        ([Ping()], <IOResult: <Success: Ping>>)
        """
        return future_result(self._executor.run(target, payload, invocation, run_direct, on_dispatched))

    def dispatch_unknown(
        self,
        name: str,
        payload: object,
        invocation: Invocation | None = None,
        *,
        on_dispatched: Callable[[], None] | None = None,
    ) -> FutureResult[DispatchResult, DispatchError]:
        """The wire path: an unchecked name and payload, exactly as an adapter read them.

        ``on_dispatched()`` is called once, synchronously, the moment the host
        has accepted the Message (its ``dispatch`` returned, or its awaitable
        finished), before any completion wait: an adapter's cue to tell its
        client the work is under way. Never called for a refusal or when the
        host raised; an exception it raises is logged and ignored.
        """
        return future_result(self._executor.run(_wire_name(name), payload, invocation, run_direct, on_dispatched))

    def attempt(
        self,
        name: str,
        payload: object,
        invocation: Invocation | None = None,
        *,
        on_dispatched: Callable[[], None] | None = None,
        declined: str | None = None,
    ) -> Awaitable[DispatchResult | DispatchError]:
        """:meth:`dispatch_unknown` without containers: await it for the result or the failure value itself.

        For an adapter that maps every outcome itself (``agentfx.tools.reply``
        takes either): the same pipeline, audit and tracing, minus the
        ``FutureResult``/``IOResult`` wrapping, which costs about as much as
        the rest of a dispatch. Like ``dispatch``, it raises only a defect.

        ``declined`` is the prompt a person already said no to, for an answer
        that arrives after the call that asked has ended (an A2A task's "no",
        an MCP retry that declines): the call runs steps 1–7 on the Model as it
        is now, so it is audited and its principal resolved, and is refused
        ``Declined: <prompt>`` wherever it would go on. It is never sent, even
        when ``authorize`` no longer asks.

        >>> import anyio, msgspec, agentfx
        >>> class Ping(msgspec.Struct, tag=True):
        ...     pass
        >>> runtime = agentfx.bind(
        ...     agentfx.define(agentfx.expose(Ping, agentfx.variant(Ping, "Ping the app"))),
        ...     host=agentfx.Host(model=lambda: None, dispatch=lambda message: None),
        ... )
        >>> async def main():
        ...     done = await runtime.messages.attempt("ping", {})
        ...     refused = await runtime.messages.attempt("pong", {})
        ...     return done.tag, refused.message
        >>> anyio.run(main)
        ('Ping', 'No such capability: pong')
        """
        runner = run_direct if declined is None else run_declined(declined)
        return self._executor.later(_wire_name(name), payload, invocation, runner, on_dispatched)

    async def call(self, target: type[Any] | str, payload: object, invocation: Invocation | None = None) -> DispatchResult:
        """Raise-style :meth:`dispatch`: the result, or :class:`~agentfx.DispatchFailed`."""
        # Any, not the union: cast() is a call, and this path counts calls.
        outcome: Any = self._executor.execute(target, payload, invocation, run_direct)
        if type(outcome) is DispatchResult:
            return outcome
        if type(outcome) is COROUTINE:
            outcome = await outcome
            if type(outcome) is DispatchResult:
                return outcome
        raise DispatchFailed(outcome)

    def list(self) -> list[MessageDescriptor]:
        """Every capability of the contract, in declaration order. Never reads the Model.

        The descriptors are built once, at bind, and shared between calls: treat
        their schemas as read-only (``agentfx.to_manifest`` hands out copies).
        """
        return list(self._descriptors)

    def available(self) -> list[MessageDescriptor]:
        """The capabilities whose ``available`` holds in the current Model (read once)."""
        model = self._runtime.host.model()
        return [
            d
            for c, d in zip(self._runtime.definition.capabilities, self._descriptors, strict=True)
            if available_in(c, model)
        ]


class Resources(Generic[M, P]):
    """``runtime.resources``: read the contract's named Model projections."""

    __slots__ = ("_by_name", "_descriptors", "_runtime")

    def __init__(self, runtime: AgentRuntime[M, P]) -> None:
        self._runtime = runtime
        self._by_name = {r.name: r for r in runtime.definition.resources}
        self._descriptors = tuple(resources(runtime.definition))

    def list(self) -> list[ResourceDescriptor]:
        """Every resource of the contract. Never reads the Model."""
        return list(self._descriptors)

    def read(self, name: str) -> Result[object, AgentResourceError]:
        """The resource's current value, encoded to builtins.

        Raises:
            AgentProjectionError: The projection does not match its schema (an application bug).
        """
        # A name off the wire may be anything; only a string can name a resource.
        known = isinstance(cast(object, name), str)
        resource = self._by_name.get(str.__str__(name)) if known else None
        if resource is None:
            return Failure(AgentResourceError.of(str.__str__(name) if known else shown(name)))
        return Success(resource.encode(self._runtime.host.model()))


class AgentRuntime(Generic[M, P]):
    """A contract bound to a host. Build it with :func:`bind`."""

    __slots__ = ("_executor", "definition", "host", "messages", "resources")

    def __init__(
        self, definition: Definition[M, P], host: Host[M, Any, P], audit: AuditSink | None, tracer: object | None
    ) -> None:
        self.definition: Definition[M, P] = definition
        self.host: Host[M, Any, P] = host
        self._executor = _Executor(Bound(definition.capabilities, host), audit, tracer)
        self.messages: Messages[M, P] = Messages(self, self._executor)
        self.resources: Resources[M, P] = Resources(self)

    @property
    def has_context(self) -> bool:
        """Whether the contract projects a Model context."""
        return self.definition.context is not None

    def context(self) -> object | None:
        """The context projection of the current Model, encoded to builtins; ``None`` without one."""
        context = self.definition.context
        return None if context is None else context.encode(self.host.model())

    def subscribe(self, listener: Callable[[], None]) -> Unsubscribe:
        """Call ``listener()`` on every Model change (every processed Message if the host can only observe).

        Raises:
            ContractError: the host's ``subscribe`` (or ``observe``) answered
                something other than a function that removes the listener.
        """
        host = self.host
        if host.subscribe is not None:
            role, answer = "host.subscribe", cast(object, host.subscribe(listener))
        elif host.observe is not None:
            role, answer = "host.observe", cast(object, host.observe(lambda _message: listener()))
        else:
            return _no_op
        if not callable(answer):
            # Refused now, not when the caller is done listening: a watcher that
            # stops would meet the bare TypeError then, and one that keeps its
            # answer to know it is subscribed would subscribe again and again.
            raise unsubscribe_defect(answer, role)
        return cast("Unsubscribe", answer)

    async def _dispatch_composed(
        self, target: type[Any] | str, payload: object, invocation: Invocation | None = None
    ) -> Result[DispatchResult, DispatchError]:
        """Run the pure composed-RCFR pipeline, audited and traced like :meth:`Messages.dispatch`.

        Used to prove the direct run and the composition agree, and to measure the difference.
        """
        return await self._executor.run(target, payload, invocation, _run_composed)


class _Executor:
    """Runs one invocation of the pipeline with the runtime's audit and tracing around it."""

    __slots__ = ("audit", "bound", "container_of", "snapshots_input", "tracer", "who_tried")

    def __init__(self, bound: Bound[Any, Any], audit: AuditSink | None, tracer: object | None) -> None:
        self.bound = bound
        # The container of a refusal built at bind, by the refusal's identity
        # (the table grows as refusals are kept, and is shared, never copied).
        self.container_of = bound.refused.get
        self.audit = audit
        self.tracer: Any = tracer
        # Resolve the principal of a refusal for its record only when the sink
        # keeps principals and the host can name one.
        self.who_tried = (
            audit is not None and bound.host.principal is not None and getattr(audit, "records_principal", True) is not False
        )
        # Snapshot the input when the invocation starts only for a sink that keeps inputs.
        self.snapshots_input = audit is not None and getattr(audit, "records_input", False) is True

    async def run(
        self,
        target: object,
        payload: object,
        invocation: Invocation | None,
        runner: Runner,
        on_dispatched: Callable[[], None] | None = None,
    ) -> Result[DispatchResult, DispatchError]:
        outcome: Any = self.execute(target, payload, invocation, runner, on_dispatched)
        if type(outcome) is DispatchResult:
            return success(outcome)
        if type(outcome) is COROUTINE:
            outcome = await outcome
            if type(outcome) is DispatchResult:
                return success(outcome)
        # A refusal built at bind comes with its container (held as long as it is).
        failed = self.container_of(id(outcome))
        return failure(outcome) if failed is None else failed

    async def later(
        self,
        target: object,
        payload: object,
        invocation: Invocation | None,
        runner: Runner,
        on_dispatched: Callable[[], None] | None = None,
    ) -> Outcome:
        """:meth:`execute` as one coroutine: nothing runs until it is awaited."""
        outcome: Any = self.execute(target, payload, invocation, runner, on_dispatched)
        return await outcome if type(outcome) is COROUTINE else outcome

    def execute(
        self,
        target: object,
        payload: object,
        invocation: Invocation | None,
        runner: Runner,
        on_dispatched: Callable[[], None] | None = None,
    ) -> Outcome | Later:
        """One invocation, audited and traced as configured: the outcome, or the coroutine to await for it.

        Not a coroutine itself, so a call that nothing suspends costs no
        coroutine of its own here or in :func:`~agentfx.pipeline.run_direct`;
        one that must wait hands back the runner's coroutine (or the audit's,
        or the span's), one frame fewer, in time and in the memory a pending
        completion holds. It runs the pipeline at once: every public entry
        point calls it from inside its own coroutine.
        """
        # Through the class: a value that is not an Invocation is refused there, not an AttributeError here.
        invocation = Invocation(new_invocation_id()) if invocation is None else Invocation.filled(invocation)
        bound = self.bound if on_dispatched is None else _watched(self.bound, on_dispatched)
        env = InvocationEnv(bound, target, payload, invocation)
        tracer = self.tracer if self.tracer is not None else active_tracer()
        if tracer is not None:
            return self.traced(env, runner, tracer)
        if self.audit is not None:
            return self.audited(env, runner)
        return runner(env)

    async def audited(self, env: InvocationEnv[Any, Any], runner: Runner) -> Outcome:
        # Taken before anything can wait: an in-app caller may change its
        # payload while the call is pending, and the record must say what was sent.
        payload = snapshot_input(env.payload) if self.snapshots_input else env.payload
        try:
            outcome: Any = runner(env)
            if type(outcome) is COROUTINE:
                outcome = await outcome
        except BaseException as exc:
            self.record(env, payload, _raised_label(exc))
            raise
        self.record(env, payload, _outcome_label(outcome), outcome)
        return outcome

    async def traced(self, env: InvocationEnv[Any, Any], runner: Runner, tracer: Any) -> Outcome:
        # Tracing is shielded as audit is: a tracer, span or processor that
        # raises is logged and never changes what the dispatch does or returns.
        # Entered and left by hand, not with ``with``, so that a span that fails
        # to end cannot raise out of a dispatch already sent and audited.
        invocation = env.invocation
        try:
            scope: Any = tracer.start_as_current_span(
                "Agent.dispatch", record_exception=False, set_status_on_exception=False
            )
            span: Any = scope.__enter__()
        except Exception as exc:
            span_failed("start", exc)
            outcome: Any = self.audited(env, runner) if self.audit is not None else runner(env)
            return await outcome if type(outcome) is COROUTINE else outcome
        try:
            span.set_attribute("agent.transport", invocation.transport)
            span.set_attribute("agent.invocation", invocation.id)
            span.set_attribute("gen_ai.operation.name", "execute_tool")
            span.set_attribute("gen_ai.tool.call.id", invocation.id)
        except Exception as exc:
            span_failed("annotate", exc)
        try:
            outcome = self.audited(env, runner) if self.audit is not None else runner(env)
            if type(outcome) is COROUTINE:
                outcome = await outcome
        except BaseException as exc:
            try:
                _name_span(span, env)
                span.set_attribute("error.type", _raised_label(exc))
                _set_error_status(span)
            except Exception as failed:
                span_failed("annotate", failed)
            try:
                scope.__exit__(type(exc), exc, exc.__traceback__)
            except Exception as failed:
                if failed is not exc:
                    span_failed("end", failed)
            raise
        try:
            _name_span(span, env, outcome)
            if is_failure(outcome):
                span.set_attribute("error.type", type(outcome).__name__)
                _set_error_status(span)
        except Exception as exc:
            span_failed("annotate", exc)
        try:
            scope.__exit__(None, None, None)
        except Exception as exc:
            span_failed("end", exc)
        return outcome

    def record(self, env: InvocationEnv[Any, Any], payload: object, label: str, outcome: object = None) -> None:
        capability = env.capability
        if capability is not None:
            name, tag = capability.name, capability.tag
        else:
            name = outcome.capability if isinstance(outcome, AgentUnknownCapabilityError) else echo(str(env.target))
            tag = None
        resolved = env.principal_resolved
        principal: object = env.principal if resolved else None
        if not resolved and self.who_tried and is_failure(outcome):
            # A refusal before step 6: who tried is what an audit most needs.
            # Resolved here, once, after the outcome is known, so the pipeline
            # never resolves it earlier than step 6 and never for a Model read.
            principal, resolved = _principal_for_record(env)
        safe_record(
            self.audit,
            AuditRecord(
                invocation=env.invocation,
                capability=name,
                tag=tag,
                principal=principal,
                decision=_DECISIONS[env.stage],
                outcome=label,
                input=payload,
                input_snapshot=self.snapshots_input,
                principal_resolved=resolved,
                # Approval is worth recording only for a Message the host was handed.
                confirmed=env.confirmed and env.stage != NOT_SENT,
            ),
        )


def _wire_name(name: object) -> object:
    # A name off the wire is only ever looked up by name, never taken for a class.
    # ``str.__str__`` is the plain text of a str subclass (an enum member, say).
    return str.__str__(name) if isinstance(name, str) else _NotAName(name)


def _watched(bound: Bound[Any, Any], on_dispatched: Callable[[], None]) -> Bound[Any, Any]:
    """``bound`` for one invocation whose host tells ``on_dispatched`` when it accepted the Message.

    The capability tables and the completion hub are shared, not copied: only
    the host's ``dispatch`` is wrapped, so the pipeline runs exactly as it does
    without a watcher.
    """
    original = bound.host.dispatch
    unheard = [True]

    def told() -> None:
        # Once: the pipeline also tells, when a correlated completion proves the
        # Message reached update while the host's dispatch had not finished.
        if not unheard:
            return
        unheard.clear()
        try:
            on_dispatched()
        except Exception:
            _logger.exception("an on_dispatched callback raised; the dispatch is unaffected")

    async def then(sent: Awaitable[object]) -> None:
        await waited(sent, "host.dispatch")
        told()

    def dispatch(message: Any) -> Any:
        sent = original(message)
        if sent is not None and isawaitable(sent):
            return then(cast("Awaitable[object]", sent))
        told()
        return sent

    watched = copy.copy(bound)
    watched.host = dataclasses.replace(bound.host, dispatch=dispatch)
    watched.told = told
    return watched


def _principal_for_record(env: InvocationEnv[Any, Any]) -> tuple[object, bool]:
    resolver = env.bound.host.principal
    if resolver is None:  # pragma: no cover - who_tried is off without one
        return None, False
    try:
        return resolver(env.invocation), True
    except Exception:
        # The refusal stands and is recorded; only its principal is missing.
        _logger.exception("host.principal raised while resolving the principal of a refused call for audit")
        return None, False


async def _run_composed(env: InvocationEnv[Any, Any]) -> DispatchResult | DispatchError:
    outcome = await dispatch()(env)
    if isinstance(outcome, IOSuccess):
        return unsafe_perform_io(outcome.unwrap())
    return unsafe_perform_io(outcome.failure())


def _raised_label(exc: BaseException) -> str:
    # Audit and span agree: an Exception is a defect; cancellation, KeyboardInterrupt
    # and the like interrupted the dispatch.
    return "AgentDefect" if isinstance(exc, Exception) else "interrupted"


def _name_span(span: Any, env: InvocationEnv[Any, Any], outcome: object = None) -> None:
    capability = env.capability
    if capability is not None:
        name = capability.name
    elif isinstance(outcome, AgentUnknownCapabilityError):
        name = outcome.capability
    else:
        name = echo(str(env.target))
    span.set_attribute("agent.capability", name)
    span.set_attribute("gen_ai.tool.name", name)


def _set_error_status(span: Any) -> None:
    # Without opentelemetry-api (a duck-typed tracer) there is no status to set.
    if ERROR_STATUS is not None:
        span.set_status(ERROR_STATUS)


class _NotAName:
    """A non-string off the wire: refused as an unknown capability named by its (bounded) repr.

    The repr is taken here, once, and never raises: a name whose ``repr``
    raises is named by its type instead. A class (a caller that passed a
    Message class where the wire path takes a name) is named by its tag, as
    ``dispatch`` names a class it does not know.
    """

    __slots__ = ("_text",)

    def __init__(self, value: object) -> None:
        self._text = message_tag(value) if isinstance(value, type) else shown(value)

    def __str__(self) -> str:
        return self._text


def _no_op() -> None:
    return None
