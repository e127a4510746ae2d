"""Audit: what each invocation decided, recorded after the fact.

This layer owns the audit vocabulary (:class:`AuditRecord` handed to a sink,
:class:`AuditEntry` kept by the log) and the in-memory :class:`AuditLog`, a
bounded ring buffer that applies the recording policy: principal projection,
input snapshot and redaction. It deliberately knows nothing of contracts,
hosts or the pipeline: the runtime builds one :class:`AuditRecord` per
dispatch and hands it over through :func:`safe_record`, so a sink that raises
never changes a dispatch's outcome.

What the log never keeps: the Model (by no setting; no field can hold it), the
principal without a projection (identities carry secrets), the input unless
``include_input=True``, and, with ``redact`` keys set, an input that is not an
object (``"[redacted]"`` stands for it whole).

Every entry the log keeps encodes to JSON, and none grows with what a caller
sends: the capability name, invocation id and transport are cut and have lone
surrogates replaced, as echoes are (:func:`agentfx.errors.echo`). A recorded
input or projected principal is a snapshot with non-string keys written as
their JSON text and lone surrogates replaced, kept as its JSON up to
:data:`INPUT_LIMIT` bytes (a larger one as its size alone), or as
``"[unrecordable]"`` when it still does not encode; each read of the log
decodes a fresh copy of it, so no reader can change what another reads.
"""

from __future__ import annotations

import logging
import math
import numbers
import time
import weakref
from collections import deque
from collections.abc import Callable, Iterable
from inspect import isawaitable
from types import NoneType
from typing import Any, Literal, Protocol, TypeAlias, cast

import msgspec
from msgspec import UNSET, UnsetType

from .completion import asynchronous
from .errors import ECHO_LIMIT, ContractError, echo, encodable, kind_of, shown
from .invocation import Invocation

__all__ = ["INPUT_LIMIT", "AuditEntry", "AuditLog", "AuditRecord", "AuditSink", "Decision", "audit_log"]

_logger = logging.getLogger("agentfx.audit")

Decision: TypeAlias = Literal["refused", "dispatched", "unknown"]
"""``refused``: nothing was sent; ``dispatched``: the host accepted the Message;
``unknown``: the host raised, or the invocation was aborted mid-send."""

_REDACTED = "[redacted]"
"""Replaces the value of every top-level ``redact`` key of a recorded input, and, with ``redact`` set, a whole input that is not an object."""

_UNRECORDABLE = "[unrecordable]"
"""Stands in for a recorded input that cannot be snapshotted at all (a cycle), or whose snapshot does not encode."""

INPUT_LIMIT = 64 * 1024
"""The most bytes of encoded JSON an entry keeps of one input, or of one projected principal.

A larger one is kept as a marker saying so and how large it was
(``"[too large: 4194324 bytes of JSON]"``), never any of its contents: with
``include_input=True`` a caller decides what it sends, and every refusal is
recorded too, so without a bound a log of the default capacity could be made to
hold gigabytes. With it, a full log holds at most about ``capacity`` times
twice this (a 500-entry log, some 64 MiB), however large the calls."""

# Answers that are certainly not awaitable, told apart by exact type: ``isawaitable``
# asks an ABC, which costs a plain value several times as much.
_PLAIN: frozenset[type[object]] = frozenset({str, int, bool, float, NoneType, tuple, list, dict})

_SCALARS: frozenset[type[object]] = frozenset({str, int, bool, float, NoneType})

_SHORT = (INPUT_LIMIT - 2) // 6
"""A text no longer than this is within :data:`INPUT_LIMIT` as JSON: no character takes more than six bytes."""

_ID_LIMIT = 2 * ECHO_LIMIT
"""How much of an invocation id an entry keeps: every id an adapter makes (a fresh
id, a slash, and the client's call id as an echo keeps it) is kept whole, so the
entry matches the invocation; only an in-app caller's longer one is cut."""


class AuditRecord(msgspec.Struct, frozen=True):
    """One invocation's decision, as the runtime hands it to an :class:`AuditSink`.

    It carries the raw principal and the caller's raw input; a sink decides
    what of them to keep. It never carries the Model.

    Args:
        invocation: The invocation, its ``id`` filled.
        capability: The capability name the caller asked for (as given, even
            when no such capability exists).
        tag: The Message tag, or ``None`` when the capability was not resolved.
        principal: The raw principal; ``None`` when it was not resolved.
        decision: What happened to the Message (see :data:`Decision`).
        outcome: ``dispatched``, ``completed``, ``failed``, ``timeout``, a
            failure's ``_tag``, ``interrupted`` or ``AgentDefect``.
        input: The caller's raw payload; for a sink that says
            ``records_input = True``, a deep snapshot of it taken when the
            invocation started (see ``input_snapshot``).
        principal_resolved: ``False`` when no principal was resolved (then
            ``principal`` is ``None``): a call that raised or was interrupted
            before step 6, a refusal handed to a sink that does not record
            principals, or a resolver that raised when asked for the record.
            A refusal before step 6 otherwise carries the principal, resolved
            for the record once the outcome is known.
        confirmed: ``True`` when the Message went to the host on a person's
            confirmation (``authorize`` answered ``Confirm``).
        input_snapshot: ``True`` when ``input`` is that snapshot: builtin
            types only, fresh containers, non-string keys written as their
            JSON text and lone surrogates replaced (a value it could not
            convert is named by type), so a payload the caller changed while
            the call was pending is recorded as it was sent.
    """

    invocation: Invocation
    capability: str
    tag: str | None
    principal: object
    decision: Decision
    outcome: str
    input: object
    principal_resolved: bool = True
    confirmed: bool = False
    input_snapshot: bool = False


class AuditSink(Protocol):
    """Anything that receives :class:`AuditRecord` values; :class:`AuditLog` is one.

    Pass your own to ``bind(audit=...)`` to forward records somewhere durable.
    ``record`` runs inline, once per dispatch, so it should be quick; an
    exception it raises is logged and otherwise ignored. It must answer
    synchronously: ``bind`` refuses an ``async def record``, and an awaitable
    it returns anyway is closed unawaited, its record lost, and logged.

    A sink may say ``records_principal = False`` (an attribute): the runtime
    then spares itself resolving the principal of a call refused before step
    6, which it otherwise does for the record. :class:`AuditLog` says so
    exactly when it has no principal projection.

    A sink may say ``records_input = True``: the runtime then snapshots each
    input when its invocation starts and hands that over (see
    :attr:`AuditRecord.input_snapshot`), so a caller that changes its payload
    while the call waits cannot change what is recorded. Without it the record
    carries the caller's payload itself, and nothing is copied.
    :class:`AuditLog` says so exactly when ``include_input=True``.
    """

    def record(self, record: AuditRecord, /) -> None:
        """Receive one invocation's record."""
        ...


class AuditEntry(msgspec.Struct, frozen=True, kw_only=True):
    """One recorded invocation, as :class:`AuditLog` keeps it.

    Absent keys are omitted when encoded: ``tag`` for an unknown capability,
    ``principal`` without a projection, ``input`` unless inputs are recorded.
    ``principal`` is ``None`` (encoded ``null``) when a projection is set but
    no principal was resolved (a defect before step 6, a resolver that raised).
    ``confirmed`` is present, and ``true``, only when the Message went to the
    host on a person's confirmation.

    >>> import msgspec
    >>> entry = AuditEntry(at=0.0, invocation="call-1", transport="mcp",
    ...                    capability="nope", decision="refused",
    ...                    outcome="AgentUnknownCapabilityError")
    >>> msgspec.json.encode(entry)
    b'{"at":0.0,"invocation":"call-1","transport":"mcp","capability":"nope","decision":"refused","outcome":"AgentUnknownCapabilityError"}'
    """

    at: float
    invocation: str
    transport: str
    capability: str
    tag: str | UnsetType = UNSET
    principal: Any = UNSET
    decision: Decision
    outcome: str
    confirmed: bool | UnsetType = UNSET
    input: Any = UNSET


def _unrecordable(value: object) -> str:
    # Naming the type, not calling repr: a repr may be arbitrary code and may
    # print exactly the secret the caller did not mean to record.
    return f"[unrecordable: {type(value).__name__}]"


def _key(key: object) -> str:
    # A non-string key is written as its JSON text (1 -> "1", None -> "null",
    # (1, 2) -> "[1,2]"), the way msgspec writes number keys.
    if isinstance(key, str):
        return encodable(key)
    try:
        return encodable(msgspec.json.encode(key).decode())
    except Exception:
        return _unrecordable(key)


def _encodable(value: object) -> object:
    # to_builtins leaves what JSON cannot say: keys that are not strings,
    # strings with lone surrogates. Rewritten here, so every entry encodes.
    if isinstance(value, str):
        return encodable(value)
    if isinstance(value, dict):
        items = cast("dict[object, object]", value).items()
        return {_key(key): _encodable(item) for key, item in items}
    if isinstance(value, list):
        return [_encodable(item) for item in cast("list[object]", value)]
    if isinstance(value, tuple):
        return tuple(_encodable(item) for item in cast("tuple[object, ...]", value))
    return value


def snapshot_input(value: object) -> object:
    """A deep snapshot of ``value`` in builtin types, as :attr:`AuditRecord.input_snapshot` describes; never raises.

    >>> payload = {"tags": ["a"], 1: "one"}
    >>> taken = snapshot_input(payload)
    >>> payload["tags"].append("b")
    >>> taken
    {'tags': ['a'], '1': 'one'}
    """
    # to_builtins builds fresh containers all the way down, so later mutation
    # of the caller's payload cannot reach the entry; a value it cannot
    # convert is named by type instead, and _encodable makes what is left
    # encodable. A set (a principal's roles) is put in order, not left in hash
    # order, so every process records the same call alike; a mapping's keys
    # are sorted with it.
    try:
        try:
            built = msgspec.to_builtins(value, enc_hook=_unrecordable, order="deterministic")
        except TypeError:
            # Items or keys of types that do not compare (1 and "a"): as they come.
            built = msgspec.to_builtins(value, enc_hook=_unrecordable)
        return _encodable(built)
    except Exception:  # a cycle (RecursionError) or a hook-proof oddity
        return _UNRECORDABLE


def _snapshot(value: object, redact: frozenset[str]) -> object:
    return _kept(_redacted(snapshot_input(value), redact))


def _kept(snapshot: object) -> object:
    if type(snapshot) is str and len(snapshot) <= _SHORT:
        return snapshot  # the common projected principal: encodable already, and well within the limit
    # Encoded once, to be sure: to_builtins passes some values through that
    # JSON cannot say (an Enum member whose value is an object), and the size
    # of the JSON is what the bound is on.
    try:
        encoded = msgspec.json.encode(snapshot)
    except Exception:
        return _UNRECORDABLE
    if len(encoded) > INPUT_LIMIT:
        return f"[too large: {len(encoded)} bytes of JSON]"
    # Anything but an immutable scalar is kept as its JSON, decoded afresh for
    # each reader: no reader can change what the next one reads, no copy is
    # made for an entry never read, and it takes no more memory than its JSON.
    return snapshot if type(snapshot) in _SCALARS else msgspec.Raw(encoded)


def _readable(entry: AuditEntry) -> AuditEntry:
    input, principal = entry.input, entry.principal
    if type(input) is not msgspec.Raw and type(principal) is not msgspec.Raw:
        return entry  # nothing in it a reader could change
    return msgspec.structs.replace(
        entry,
        input=msgspec.json.decode(input) if type(input) is msgspec.Raw else input,
        principal=msgspec.json.decode(principal) if type(principal) is msgspec.Raw else principal,
    )


def _bounded(text: object, limit: int) -> str:
    # The id and transport are the caller's to choose, as the capability name is.
    if type(text) is str and len(text) <= limit and text.isascii():
        return text  # the common case, an id the runtime or an adapter made: nothing to cut or replace
    if not isinstance(text, str):
        return shown(text)
    return encodable(text[:limit] + "…" if len(text) > limit else text)


def _redacted(snapshot: object, redact: frozenset[str]) -> object:
    if not redact or snapshot is _UNRECORDABLE:
        return snapshot
    if not isinstance(snapshot, dict):
        # Only an object has keys to redact: anything else (the text of
        # arguments that were not JSON, a list of objects) may hold a
        # ``redact`` key's value where no key can find it, so none of it is kept.
        return _REDACTED
    fields = cast("dict[object, object]", snapshot)
    for key in redact.intersection(fields):
        fields[key] = _REDACTED
    return fields


class AuditLog:
    """An :class:`AuditSink` keeping the latest ``capacity`` entries in memory.

    Build one with :func:`audit_log`; the arguments are the same.

    Recording never loses an entry to the log's own policy: a principal
    projection that raises records the entry without a principal, an input
    that cannot be snapshotted records a placeholder, and a clock that raises
    or answers anything but a finite number stamps the entry with
    ``time.time()`` (each cause logged once).
    """

    __slots__ = ("_clock", "_entries", "_include_input", "_principal", "_redact", "_told_awaitable", "_told_clock")

    def __init__(
        self,
        *,
        capacity: int = 500,
        principal: Callable[[Any], object] | None = None,
        include_input: bool = False,
        redact: Iterable[str] = (),
        clock: Callable[[], float] = time.time,
    ) -> None:
        if not isinstance(cast(object, capacity), int) or isinstance(capacity, bool):
            # deque(maxlen=...) would take a bool as 0 or 1 and fail on a str with a bare TypeError.
            raise ContractError(
                f'Cannot make this audit log: "capacity" must be a whole number of entries; it is {kind_of(capacity)}'
            )
        if capacity < 1:
            raise ValueError(f"audit capacity must be at least 1, got {capacity}")
        if isinstance(redact, str):
            # frozenset("token") would redact the keys "t", "o", "k", "e", "n".
            raise TypeError("redact takes a collection of key names, not a single string")
        keys = _redact_keys(redact)
        if principal is not None and not callable(principal):
            # Accepted, it would fail at every record and drop every principal.
            raise ContractError(
                'Cannot make this audit log: "principal" must be a function projecting the principal '
                f"to what may be recorded, or None; it is {kind_of(principal)}"
            )
        why = None if principal is None else asynchronous(principal)
        if why is not None:
            # Its coroutine would be recorded in place of every principal, never awaited.
            raise ContractError(f'Cannot make this audit log: "principal" must answer synchronously; {why}')
        _check_clock(clock)
        self._entries: deque[AuditEntry] = deque(maxlen=capacity)
        self._principal = principal
        self._include_input = include_input
        self._redact = keys
        self._clock = clock
        self._told_awaitable = False
        # Why the clock's answer was not used, for each cause already logged.
        self._told_clock: set[str] = set()

    @property
    def records_principal(self) -> bool:
        """Whether entries keep a principal: exactly when a projection is set."""
        return self._principal is not None

    @property
    def capacity(self) -> int:
        """How many entries the log keeps before dropping the oldest."""
        maxlen = self._entries.maxlen
        assert maxlen is not None
        return maxlen

    def record(self, record: AuditRecord, /) -> None:
        """Append one entry for ``record``, dropping the oldest when full."""
        project = self._principal
        principal: object = UNSET
        if project is not None:
            if not record.principal_resolved:
                principal = None
            else:
                try:
                    projected = project(record.principal)
                except Exception:
                    _logger.exception(
                        "audit principal projection raised; entry recorded without a principal"
                    )
                else:
                    if type(projected) not in _PLAIN and isawaitable(projected):
                        self._refuse_awaitable(projected)
                    else:
                        # Snapshotted as the input is: the entry encodes, and
                        # later changes to the caller's principal cannot reach it.
                        principal = _snapshot(projected, frozenset())
        invocation = record.invocation
        self._entries.append(
            AuditEntry(
                at=self._at(),
                # The runtime always fills the id; "" marks a record that broke that promise.
                invocation=_bounded(invocation.id, _ID_LIMIT) if invocation.id is not None else "",
                transport=_bounded(invocation.transport, ECHO_LIMIT),
                capability=echo(record.capability),
                tag=record.tag if record.tag is not None else UNSET,
                principal=principal,
                decision=record.decision,
                outcome=record.outcome,
                confirmed=True if record.confirmed else UNSET,
                input=self._input(record) if self._include_input else UNSET,
            )
        )

    @property
    def records_input(self) -> bool:
        """Whether entries keep the input: exactly when ``include_input=True``."""
        return self._include_input

    def _input(self, record: AuditRecord) -> object:
        # The runtime's snapshot is this log's alone: redacted in place, not copied again.
        taken = record.input if record.input_snapshot else snapshot_input(record.input)
        return _kept(_redacted(taken, self._redact))

    def _at(self) -> float:
        # The entry is recorded whatever the clock does: an answer that is not
        # a finite number of seconds (or a clock that raises) is replaced by
        # the wall clock's, and said once per cause, so no entry is lost to
        # the clock and none carries a timestamp that does not encode.
        try:
            at = cast(object, self._clock())  # typed a float, but any callable may be passed
        except Exception as exc:
            return self._stand_in(f"raised {type(exc).__name__}", exc)
        if type(at) is float and at - at == 0.0:  # finite: inf - inf and nan - nan are nan
            return at
        if type(at) is not bool and isinstance(at, numbers.Number):
            # Any other number of seconds (an int, a Fraction, a numpy float) is
            # kept as the float it stands for, so the entry encodes as one.
            try:
                seconds = float(cast("Any", at))
            except (TypeError, ValueError, OverflowError):
                pass
            else:
                if math.isfinite(seconds):
                    return seconds
            return self._stand_in(f"answered {kind_of(at)} that is not a finite number of seconds")
        if type(at) not in _PLAIN and isawaitable(at):
            _close(at)
            return self._stand_in(f"answered {kind_of(at)}, closed unawaited; it must answer synchronously")
        return self._stand_in(f"answered {'None' if at is None else kind_of(at)}, not a number of seconds")

    def _stand_in(self, cause: str, exc: Exception | None = None) -> float:
        if cause not in self._told_clock:
            self._told_clock.add(cause)
            _logger.error(
                "audit clock %s; entries are stamped with time.time() instead", cause, exc_info=exc
            )
        return time.time()

    def _refuse_awaitable(self, answer: object) -> None:
        _close(answer)
        if not self._told_awaitable:
            self._told_awaitable = True
            _logger.error(
                "audit principal projection returned an awaitable; it must answer synchronously. "
                "Entries are recorded without a principal"
            )

    def entries(self) -> list[AuditEntry]:
        """A copy of the kept entries, oldest first.

        Each read hands out its own copy of every recorded input and principal
        (read back from the JSON the log keeps: arrays are lists), so a reader
        that changes one changes nothing the log or another reader sees.
        """
        return [_readable(entry) for entry in self._entries]

    def clear(self) -> None:
        """Forget every entry."""
        self._entries.clear()

    def __repr__(self) -> str:
        return f"AuditLog(capacity={self.capacity}, entries={len(self._entries)})"


def _redact_keys(redact: Iterable[str]) -> frozenset[str]:
    # Every key of a recorded input is a str (a non-string key is written as
    # its JSON text), so any other entry would match nothing: refused, so no
    # one believes a field is redacted when it is not.
    if isinstance(cast(object, redact), bytes | bytearray):
        raise ContractError(
            f'Cannot make this audit log: "redact" takes a collection of key names, got {shown(redact)}'
        )
    keys: list[str] = []
    for key in redact:
        if not isinstance(cast(object, key), str):
            raise ContractError(
                f'Cannot make this audit log: "redact" takes key names as strings, got {shown(key)} '
                f"({kind_of(key)}), which matches no key of a recorded input"
            )
        # As the snapshot writes the input's keys, so a key with a lone surrogate still matches.
        keys.append(encodable(key))
    return frozenset(keys)


def _check_clock(clock: object) -> None:
    if not callable(clock):
        raise ContractError(
            f'Cannot make this audit log: "clock" must be a function answering the time in seconds; '
            f"it is {kind_of(clock)}"
        )
    why = asynchronous(clock)
    if why is not None:
        # Its coroutine would stand where every timestamp goes, never awaited.
        raise ContractError(f'Cannot make this audit log: "clock" must answer synchronously; {why}')


def audit_log(
    capacity: int = 500,
    principal: Callable[[Any], object] | None = None,
    include_input: bool = False,
    redact: Iterable[str] = (),
    clock: Callable[[], float] = time.time,
) -> AuditLog:
    """Build an in-memory audit log to pass as ``bind(audit=...)``.

    Args:
        capacity: How many entries to keep; the oldest is dropped first. At least 1.
        principal: A projection of the raw principal to what may be recorded
            (``lambda user: user.id``). Without one no principal is recorded:
            identities carry secrets. With one, a refused invocation still
            records who tried: the runtime resolves the principal for the
            record; one that never resolved (a defect before step 6, a
            resolver that raised) records ``None`` without calling the
            projection; a projection that raises records the entry without a
            principal. What it returns is kept as a snapshot, as the input is
            (builtin types that always encode, later changes not seen).
        include_input: Record the caller's input, refusals included, as a deep
            snapshot in builtin types that always encodes: non-string keys
            become their JSON text (``1`` -> ``"1"``), lone surrogates become
            U+FFFD. Off by default: it is caller-supplied and may carry
            anything. Memory: each entry then keeps up to
            :data:`INPUT_LIMIT` (64 KiB) of JSON of its input; a larger input
            is kept as ``"[too large: <n> bytes of JSON]"``, so a full log
            holds at most about ``capacity`` times that (some 32 MiB at the
            default capacity), whatever callers send.
        redact: Top-level input keys whose values are replaced by
            ``"[redacted]"``; nested keys of the same name are kept. Each is a
            string, as every key of a recorded input is (a non-string key is
            written as its JSON text: ``"1"`` redacts the key ``1``). With
            any key set, an input that is not an object (text that was not
            JSON, a list) is recorded as ``"[redacted]"`` whole: what it
            holds cannot be told apart from a redacted key's value.
        clock: Returns the ``at`` timestamp of each entry, in seconds. An
            answer that is not a finite number (a str, ``None``, a bool, NaN,
            an awaitable), or a clock that raises, still records the entry,
            stamped with ``time.time()`` instead, and is logged once per cause.

    Returns:
        An empty :class:`AuditLog`.

    Raises:
        ValueError: ``capacity`` is less than 1.
        TypeError: ``redact`` is a single string rather than a collection.
        ContractError: ``capacity`` is not an ``int`` (a bool is not taken for
            one); ``principal`` is neither ``None`` nor callable, or is
            ``async``: the projection must answer
            synchronously (one that returns an awaitable anyway has it closed
            and records no principal); a ``redact`` entry is not a string
            (``b"token"`` would match no key); ``clock`` is not callable, or
            is ``async``.

    >>> log = audit_log(principal=lambda user: user["id"], include_input=True,
    ...                 redact=["token"], clock=lambda: 0.0)
    >>> log.record(AuditRecord(
    ...     invocation=Invocation(id="call-1"), capability="delete_todo",
    ...     tag="RequestedDeleteTodo", principal={"id": "u1", "secret": "s"},
    ...     decision="refused", outcome="AgentAuthorizationError",
    ...     input={"id": "todo-1", "token": "t0k"}))
    >>> msgspec.json.encode(log.entries()[0])
    b'{"at":0.0,"invocation":"call-1","transport":"in-app","capability":"delete_todo","tag":"RequestedDeleteTodo","principal":"u1","decision":"refused","outcome":"AgentAuthorizationError","input":{"id":"todo-1","token":"[redacted]"}}'
    """
    return AuditLog(
        capacity=capacity,
        principal=principal,
        include_input=include_input,
        redact=redact,
        clock=clock,
    )


def safe_record(sink: AuditSink | None, record: AuditRecord) -> None:
    """Hand ``record`` to ``sink``; an ``Exception`` it raises is logged, never propagated.

    Accountability must not become a new way for a capability to break, so a
    failing sink never changes a dispatch's outcome. ``BaseException`` (anyio
    cancellation, ``KeyboardInterrupt``) still propagates.

    >>> class Broken:
    ...     def record(self, record: AuditRecord, /) -> None:
    ...         raise OSError("disk full")
    >>> record = AuditRecord(Invocation(id="c"), "x", None, None, "refused", "o", None)
    >>> safe_record(Broken(), record)
    """
    if sink is None:
        return
    try:
        answer: object = sink.record(record)
    except Exception:
        _logger.exception(
            "audit sink %s raised; the dispatch outcome is unchanged", type(sink).__name__
        )
        return
    if answer is not None and type(answer) not in _PLAIN and isawaitable(answer):
        _close(answer)
        if _first_awaitable_from(sink):
            _logger.error(
                "audit sink %s returned an awaitable from record; it must answer synchronously. "
                "It was closed unawaited and its records are lost",
                type(sink).__name__,
            )


def _close(answer: object) -> None:
    # Never awaited, and it must not warn that it was not; whatever it does
    # when closed is its own affair, never the dispatch's.
    close = getattr(answer, "close", None)
    if callable(close):
        try:
            close()
        except Exception as exc:
            _logger.error("closing the awaitable an audit hook returned raised %s", type(exc).__name__)


_awaitable_from: weakref.WeakSet[object] = weakref.WeakSet()
"""Sinks already logged for answering an awaitable, by weak reference; a sink that cannot be weakly referred to by its class."""


def _first_awaitable_from(sink: object) -> bool:
    try:
        if sink in _awaitable_from:
            return False
        _awaitable_from.add(sink)
    except TypeError:
        # Neither weakly referable nor hashable (a slotted class): by its class,
        # which always is, so no sink is held for as long as the process runs.
        kind = type(sink)
        if kind in _awaitable_from:
            return False
        _awaitable_from.add(kind)
    return True
