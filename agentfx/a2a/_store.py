"""The task store: the SDK's in-memory store, bounded in tasks and bytes, evicting finished tasks first.

This layer owns how many A2A tasks a server keeps, how many bytes they may
take, how many of them one owner may have in progress, and which go when
room is needed. Tasks themselves are kept by the SDK's own
``InMemoryTaskStore`` (owner-scoped, copied on the way in and out, listed
and paged as the SDK does); this store wraps it and keeps, beside it, one
small record per task: its owner, its id, whether it is live or finished,
since when, and its size (the task's protobuf encoded size, ``ByteSize()``,
read at each save). Room is made, until both ``max_tasks`` and
``max_bytes`` hold, by one rule:

1. a finished task (``completed``, ``failed``, ``canceled``, ``rejected``)
   goes first, the one that finished longest ago before any other;
2. then a task parked waiting for input (``input-required``,
   ``auth-required``) for longer than ``waiting_timeout``, the longest
   parked first;
3. a task that is working, or has waited less than ``waiting_timeout``, is
   never evicted: a request that would need its room is refused, with the
   SDK's ``UnsupportedOperationError`` (``-32004``) saying the agent is
   busy (:data:`AT_CAPACITY`), before anything is dispatched, and nothing
   in the store changes. A request no eviction could ever make room for (a
   new task's larger than ``max_bytes``, a follow-up that would take its own
   task past it) is refused the same way with :data:`TOO_LARGE`.

Beside that global rule, one owner may have at most ``max_live_per_owner``
tasks in progress (working or waiting, and admitted ones not saved yet),
and those may take at most ``max_live_bytes_per_owner`` bytes (a tenth of
the default budget): a request past either is refused (:data:`OWNER_AT_CAPACITY`)
whatever the room, so one caller cannot fill the store with tasks it may
not lose, by their number or by their size.

An evicted task is gone: ``GetTask`` answers ``TaskNotFoundError`` as for an
id that never existed. Room is taken when the request is read, before the
SDK runs anything for it (:meth:`BoundedTaskStore.admit` for a new task,
:meth:`BoundedTaskStore.admit_follow_up` for a message to one already
kept): the request's own encoded size is reserved on the task's record
until the next save replaces it with the task's real size. So the store
never holds more tasks than its bound, even under concurrent requests, and
never more bytes than its budget but for what the agent's replies add
beyond the requests (counted at their save, made room for at the next
admission; a save of a task already kept is never refused).

It deliberately knows nothing of HTTP, principals or dispatch: owners are
whatever the SDK's ``OwnerResolver`` makes of a call context, and a task's
state is the SDK's.
"""

from __future__ import annotations

import time
from collections import Counter, OrderedDict
from collections.abc import AsyncGenerator, Callable, Iterator
from contextlib import asynccontextmanager
from typing import Final

import anyio
from a2a.server.context import ServerCallContext
from a2a.server.owner_resolver import OwnerResolver, resolve_user_scope
from a2a.server.tasks import InMemoryTaskStore, TaskStore
from a2a.types.a2a_pb2 import ListTasksRequest, ListTasksResponse, Task, TaskState
from a2a.utils.errors import TaskNotFoundError, UnsupportedOperationError

from ..errors import ContractError

__all__ = [
    "AT_CAPACITY",
    "FINISHED",
    "MAX_LIVE_TASKS_PER_OWNER",
    "MAX_LIVE_TASK_BYTES_PER_OWNER",
    "MAX_TASKS",
    "MAX_TASK_BYTES",
    "OWNER_AT_CAPACITY",
    "TOO_LARGE",
    "WAITING_TIMEOUT",
    "BoundedTaskStore",
]

MAX_TASKS = 10_000
"""How many tasks :func:`~agentfx.a2a.a2a_app`'s default store keeps, live and finished together."""

MAX_TASK_BYTES = 256 * 1024 * 1024
"""Bytes (tasks' protobuf encoded size) :func:`~agentfx.a2a.a2a_app`'s default store keeps, 256 MiB.

The count alone does not bound memory: a request body may carry 4 MiB
(``MAX_REQUEST_BODY``) and a task's history keeps every message it was
sent, so :data:`MAX_TASKS` tasks could hold tens of GiB. 256 MiB still
keeps 64 tasks of the largest request each, and all :data:`MAX_TASKS`
tasks when they average under 26 KiB, far more than a skill call's
arguments and reply usually take: for ordinary traffic the count binds
first, and the byte budget only when callers send large payloads. The
memory the kept tasks take is a small multiple of their encoded size.
"""

MAX_LIVE_TASKS_PER_OWNER = 1_000
"""Tasks one owner may have in progress at once in the default store: a tenth of :data:`MAX_TASKS`.

In progress: working, waiting for input, or admitted and not saved yet.
Those are the tasks the store may not evict (a waiting one for
``waiting_timeout``), so without this bound one caller could fill the store
with them and every other caller would be refused. Ten owners at their
bound fill it. Without ``authenticate`` every caller of
:func:`~agentfx.a2a.a2a_app` is one owner: this then bounds the whole
server's tasks in progress.
"""

MAX_LIVE_TASK_BYTES_PER_OWNER = MAX_TASK_BYTES // 10
"""Bytes one owner's tasks in progress may take in the default store: a tenth of :data:`MAX_TASK_BYTES`.

The count of :data:`MAX_LIVE_TASKS_PER_OWNER` alone does not keep one
caller from the whole budget: a few dozen tasks of the largest request each,
left waiting for input, are never evicted for ``waiting_timeout``. Six such
tasks fill an owner's share.
"""

WAITING_TIMEOUT = 30 * 60.0
"""Seconds a task waiting for input is protected from eviction, by default.

:func:`~agentfx.a2a.a2a_app` uses its ``PARKED_TASK_TIMEOUT`` (the same, by
default): a task waiting longer has had its running machinery released and
can still be answered, as long as its room was not needed.
"""

AT_CAPACITY = "The agent is busy: too many tasks are in progress. Try again later, or answer or cancel a task waiting for input"
"""The message of the ``UnsupportedOperationError`` that refuses a request when no room can be made for it."""

TOO_LARGE = "The request is too large for the agent to keep: send a smaller one"
"""The message of the ``UnsupportedOperationError`` that refuses a request no room could ever be made for.

A new task's request larger than ``max_bytes``, or a follow-up that would
take its task past it (a task is never evicted for its own message):
waiting would not help, so it is not :data:`AT_CAPACITY`'s "try again later".
"""

OWNER_AT_CAPACITY = "Too many of your tasks are in progress. Answer, cancel or wait for one of them, then try again"
"""The message of the ``UnsupportedOperationError`` that refuses a new task of an owner at ``max_live_per_owner``."""

_PENDING_TIMEOUT: Final = 60.0
"""Seconds an admitted task's room is held for its first save.

The SDK saves a task moments after its request is read; a room held this
long belongs to a request that went away before its task was created: it
is taken back at the next admission or save, before the owner's bound is
read, and whenever room is needed.
"""

FINISHED: Final = frozenset(
    {
        TaskState.TASK_STATE_COMPLETED,
        TaskState.TASK_STATE_FAILED,
        TaskState.TASK_STATE_CANCELED,
        TaskState.TASK_STATE_REJECTED,
    }
)
"""The states a task never leaves: the store keeps it as finished, and the executor takes no answer to it."""

_WAITING: Final = frozenset({TaskState.TASK_STATE_INPUT_REQUIRED, TaskState.TASK_STATE_AUTH_REQUIRED})

# The wrapped store scopes by the owner this store resolved, carried in a
# context of its own: eviction deletes a task with no request at hand.
_OWNER_KEY: Final = "agentfx.a2a.store.owner"

_Key = tuple[str, str]  # (owner, task id)


def _scoped_owner(context: ServerCallContext) -> str:
    owner: str = context.state[_OWNER_KEY]
    return owner


def _scope(owner: str) -> ServerCallContext:
    return ServerCallContext(state={_OWNER_KEY: owner})


def _check_bound(name: str, value: object, *, optional: bool) -> None:
    if value is None and optional:
        return
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        more = ", or None" if optional else ""
        raise ContractError(f"BoundedTaskStore({name}={value!r}): the bound is a whole number of at least 1{more}")


class BoundedTaskStore(TaskStore):
    """An in-memory ``TaskStore`` bounded in tasks, bytes and tasks in progress per owner, evicting finished ones first.

    Args:
        max_tasks: How many tasks are kept, live and finished together
            (at least 1). :data:`MAX_TASKS` by default.
        max_bytes: How many bytes the kept tasks may take, each counted as
            its protobuf encoded size (``task.ByteSize()``) at its last save,
            plus the requests admitted for it since (at least 1, or ``None``
            for no byte bound). :data:`MAX_TASK_BYTES` by default.
        max_live_per_owner: How many tasks one owner may have in progress
            (working, waiting for input, or admitted and not saved yet): at
            least 1, or ``None`` for no such bound.
            :data:`MAX_LIVE_TASKS_PER_OWNER` by default.
        max_live_bytes_per_owner: How many bytes one owner's tasks in
            progress may take, counted as ``max_bytes`` counts them: at least
            1, or ``None`` for no such bound (one at or above ``max_bytes``
            is none either). :data:`MAX_LIVE_TASK_BYTES_PER_OWNER` by default.
        waiting_timeout: Seconds a task waiting for input
            (``input-required``, ``auth-required``) is never evicted; after
            that it may be, once no finished task is left to evict.
            ``None`` never evicts one (a store full of unanswered tasks then
            refuses new ones until they are answered or cancelled).
            :data:`WAITING_TIMEOUT` by default.
        terminal_ttl: Seconds a finished task is kept at most, whatever the
            room; ``None`` (the default) keeps it until its room is needed.
        owner_resolver: The owner scope of a call context, as for the SDK's
            ``InMemoryTaskStore`` (the user's name by default).
        timer: The clock the timeouts are read on, in seconds.

    Raises:
        ContractError: A bound below 1 or not a whole number, or a timeout
            that is not positive.

    A request is refused with the SDK's ``UnsupportedOperationError`` and
    :data:`AT_CAPACITY` when the store is full (in tasks or bytes) of tasks
    it may not evict, and a new task with :data:`OWNER_AT_CAPACITY` when
    its owner has ``max_live_per_owner`` tasks in progress.
    :func:`~agentfx.a2a.a2a_app` admits each request (:meth:`admit`,
    :meth:`admit_follow_up`) before anything runs for it, so a refusal
    reaches the client as a JSON-RPC error and nothing is dispatched.

    Like the SDK's server it is used from one event loop (asyncio or trio).

    >>> store = BoundedTaskStore(2, max_bytes=1024)
    >>> store.max_tasks, store.max_bytes, store.size, store.bytes
    (2, 1024, 0, 0)
    """

    def __init__(
        self,
        max_tasks: int = MAX_TASKS,
        *,
        max_bytes: int | None = MAX_TASK_BYTES,
        max_live_per_owner: int | None = MAX_LIVE_TASKS_PER_OWNER,
        max_live_bytes_per_owner: int | None = MAX_LIVE_TASK_BYTES_PER_OWNER,
        waiting_timeout: float | None = WAITING_TIMEOUT,
        terminal_ttl: float | None = None,
        owner_resolver: OwnerResolver = resolve_user_scope,
        timer: Callable[[], float] = time.monotonic,
    ) -> None:
        _check_bound("max_tasks", max_tasks, optional=False)
        _check_bound("max_bytes", max_bytes, optional=True)
        _check_bound("max_live_per_owner", max_live_per_owner, optional=True)
        _check_bound("max_live_bytes_per_owner", max_live_bytes_per_owner, optional=True)
        for name, value in (("waiting_timeout", waiting_timeout), ("terminal_ttl", terminal_ttl)):
            if value is not None and not value > 0:
                raise ContractError(f"BoundedTaskStore({name}={value!r}): a timeout is a positive number of seconds, or None")
        self._max = max_tasks
        self._max_bytes = max_bytes
        self._max_live = max_live_per_owner
        self._max_live_bytes_given = max_live_bytes_per_owner
        # None when it is the whole budget or more: the global bound says it.
        self._max_live_bytes = (
            None
            if max_live_bytes_per_owner is None or (max_bytes is not None and max_live_bytes_per_owner >= max_bytes)
            else max_live_bytes_per_owner
        )
        self._waiting_timeout = waiting_timeout
        self._terminal_ttl = terminal_ttl
        self._owner = owner_resolver
        self._timer = timer
        self._tasks = InMemoryTaskStore(owner_resolver=_scoped_owner)
        # Each task is in exactly one of these, with the time it got there;
        # the ordered ones oldest first (a held room too: admissions come in
        # the clock's order).
        self._finished: OrderedDict[_Key, float] = OrderedDict()
        self._waiting: OrderedDict[_Key, float] = OrderedDict()
        self._working: set[_Key] = set()
        self._pending: OrderedDict[_Key, float] = OrderedDict()
        # Every record's bytes (its last save's size plus what was reserved
        # since), and their sum.
        self._sizes: dict[_Key, int] = {}
        self._bytes = 0
        # Of each record's bytes, what follow-ups reserved since its last
        # save: what :meth:`release_follow_up` may give back.
        self._reserved: dict[_Key, int] = {}
        # How many working or waiting tasks each owner has: :meth:`has_live`
        # answers without reading (or copying) a single task. And how many
        # rooms each owner has held, for ``max_live_per_owner``.
        self._live: Counter[str] = Counter()
        self._held: Counter[str] = Counter()
        # The bytes of each owner's records in progress (working, waiting or held).
        self._live_bytes: Counter[str] = Counter()
        # Bookkeeping is changed without suspending; the lock keeps each
        # change and the wrapped store's matching writes in one piece (so a
        # task evicted cannot be saved again between the two).
        self._lock = anyio.Lock()

    @property
    def max_tasks(self) -> int:
        """How many tasks this store keeps at most."""
        return self._max

    @property
    def max_bytes(self) -> int | None:
        """How many bytes the kept tasks may take, or ``None`` for no byte bound."""
        return self._max_bytes

    @property
    def max_live_per_owner(self) -> int | None:
        """How many tasks one owner may have in progress, or ``None`` for no such bound."""
        return self._max_live

    @property
    def max_live_bytes_per_owner(self) -> int | None:
        """How many bytes one owner's tasks in progress may take, as given, or ``None`` for no such bound."""
        return self._max_live_bytes_given

    @property
    def size(self) -> int:
        """How many tasks are kept (or have their room held for), live and finished."""
        return len(self._finished) + len(self._waiting) + len(self._working) + len(self._pending)

    @property
    def bytes(self) -> int:
        """The bytes counted for the kept tasks: each one's size at its last save, plus the requests reserved since."""
        return self._bytes

    def _expired(self, key: _Key, now: float) -> bool:
        finished = self._finished.get(key)
        return finished is not None and self._terminal_ttl is not None and now - finished >= self._terminal_ttl

    def _stored(self, key: _Key) -> bool:
        return key in self._working or key in self._waiting or key in self._finished

    def _known(self, key: _Key) -> bool:
        return self._stored(key) or key in self._pending

    def _in_progress(self, key: _Key) -> bool:
        return key in self._working or key in self._waiting or key in self._pending

    def _resize(self, key: _Key, size: int) -> None:
        # After the record is placed: its bytes count as in progress only if it is.
        change = size - self._sizes.get(key, 0)
        self._bytes += change
        self._sizes[key] = size
        if change and self._in_progress(key):
            self._live_bytes[key[0]] += change
            if not self._live_bytes[key[0]]:
                del self._live_bytes[key[0]]

    @staticmethod
    def _drop(counter: Counter[str], owner: str) -> None:
        counter[owner] -= 1
        if not counter[owner]:
            del counter[owner]

    def _forget(self, key: _Key) -> bool:
        """Drop ``key``'s record wherever it is; whether there was one."""
        known = self._known(key)
        if self._in_progress(key) and self._sizes.get(key, 0):
            self._live_bytes[key[0]] -= self._sizes[key]
            if not self._live_bytes[key[0]]:
                del self._live_bytes[key[0]]
        if key in self._working or key in self._waiting:
            self._drop(self._live, key[0])
        if key in self._pending:
            self._drop(self._held, key[0])
        self._working.discard(key)
        self._waiting.pop(key, None)
        self._finished.pop(key, None)
        self._pending.pop(key, None)
        self._reserved.pop(key, None)
        self._bytes -= self._sizes.pop(key, 0)
        return known

    def _outlived(self, now: float) -> list[_Key]:
        """The finished tasks past ``terminal_ttl``, dropped from the records."""
        gone: list[_Key] = []
        if self._terminal_ttl is None:
            return gone
        while self._finished:
            key, finished = next(iter(self._finished.items()))
            if now - finished < self._terminal_ttl:
                break
            self._forget(key)
            gone.append(key)
        return gone

    def _release_abandoned(self, now: float) -> None:
        """Take back the rooms held past ``_PENDING_TIMEOUT``: nothing is stored for them."""
        while self._pending:
            key, held = next(iter(self._pending.items()))
            if now - held < _PENDING_TIMEOUT:
                break
            self._forget(key)

    def _at_owner_bound(self, owner: str) -> bool:
        return self._max_live is not None and self._live[owner] + self._held[owner] >= self._max_live

    def _past_owner_share(self, owner: str, request_bytes: int) -> bool:
        """Whether ``request_bytes`` more in progress take ``owner`` past its share of the bytes."""
        return self._max_live_bytes is not None and self._live_bytes[owner] + request_bytes > self._max_live_bytes

    def _candidates(self, now: float, keep: _Key) -> Iterator[_Key]:
        """The records room may be made from, in the order the rule takes them."""
        yield from (key for key, held in self._pending.items() if now - held >= _PENDING_TIMEOUT)
        yield from (key for key in self._finished if key != keep)
        if self._waiting_timeout is not None:
            for key, since in self._waiting.items():
                if now - since < self._waiting_timeout:
                    return  # oldest first: every later one has waited less
                if key != keep:
                    yield key

    def _make_room(self, now: float, keep: _Key, tasks: int, extra: int) -> list[_Key] | None:
        """Drop records until at most ``tasks`` are kept and ``extra`` more bytes fit, giving the stored tasks to delete.

        ``None``, and nothing dropped, if that cannot be.
        """
        tasks_over = self.size - tasks
        bytes_over = 0 if self._max_bytes is None else self._bytes + extra - self._max_bytes
        victims: list[_Key] = []
        if tasks_over > 0 or bytes_over > 0:
            for key in self._candidates(now, keep):
                victims.append(key)
                tasks_over -= 1
                bytes_over -= self._sizes[key]
                if tasks_over <= 0 and bytes_over <= 0:
                    break
            else:
                return None
        stored = [victim for victim in victims if victim not in self._pending]  # a held room has nothing stored
        for victim in victims:
            self._forget(victim)
        return stored

    @asynccontextmanager
    async def _locked(self) -> AsyncGenerator[None]:
        # Uncontended in practice (the wrapped store never suspends), so taken
        # without the checkpoint a plain acquire() makes on every save.
        try:
            self._lock.acquire_nowait()
        except anyio.WouldBlock:
            await self._lock.acquire()
        try:
            yield
        finally:
            self._lock.release()

    async def _delete(self, keys: list[_Key]) -> None:
        for owner, task_id in keys:
            await self._tasks.delete(task_id, _scope(owner))

    async def admit(self, task_id: str, context: ServerCallContext, request_bytes: int = 0) -> None:
        """Take the room of a new task before it is created, evicting what the rule allows.

        Args:
            task_id: The new task's id.
            context: The call context, whose owner the task will be.
            request_bytes: The encoded size of the request that creates it
                (``SendMessageRequest.ByteSize()``), reserved until its
                first save.

        Raises:
            UnsupportedOperationError: The owner has ``max_live_per_owner``
                tasks in progress (:data:`OWNER_AT_CAPACITY`), the request
                alone is larger than ``max_bytes`` (:data:`TOO_LARGE`), or
                the store is full, in tasks or bytes, of tasks it may not
                evict (:data:`AT_CAPACITY`); nothing is changed.
            ValueError: ``request_bytes`` is negative.
        """
        if request_bytes < 0:
            raise ValueError(f"admit(request_bytes={request_bytes!r}): a size is not negative")
        owner = self._owner(context)
        key = (owner, task_id)
        async with self._locked():
            now = self._timer()
            if self._known(key):
                return
            self._release_abandoned(now)
            # What the records dropped leaves the wrapped store too, whether or not this is refused.
            gone = self._outlived(now)
            try:
                if self._at_owner_bound(owner):
                    raise UnsupportedOperationError(message=OWNER_AT_CAPACITY)
                if self._max_bytes is not None and request_bytes > self._max_bytes:
                    raise UnsupportedOperationError(message=TOO_LARGE)
                if self._past_owner_share(owner, request_bytes):
                    raise UnsupportedOperationError(message=OWNER_AT_CAPACITY)
                victims = self._make_room(now, key, self._max - 1, request_bytes)
                if victims is None:
                    raise UnsupportedOperationError(message=AT_CAPACITY)
                gone += victims
                self._pending[key] = now
                self._held[owner] += 1
                self._resize(key, request_bytes)
            finally:
                await self._delete(gone)

    async def admit_follow_up(self, task_id: str, context: ServerCallContext, request_bytes: int) -> None:
        """Take the room a message to a kept task will grow it by, before it is run, evicting what the rule allows.

        The request's bytes are reserved on the task's record until its next
        save counts the task as it is. A task waiting for input starts its
        ``waiting_timeout`` again: it is being answered, and its room must
        not go before that answer is saved.

        Args:
            task_id: The task the message is sent to.
            context: The call context, whose owner the task must be.
            request_bytes: The encoded size of the request
                (``SendMessageRequest.ByteSize()``).

        Raises:
            TaskNotFoundError: The owner has no such task here (never
                created, another owner's, or evicted); no record is made.
            UnsupportedOperationError: The task with the request would be
                larger than ``max_bytes`` (:data:`TOO_LARGE`), or the store is
                full, in bytes, of tasks it may not evict
                (:data:`AT_CAPACITY`); nothing is changed.
            ValueError: ``request_bytes`` is negative.
        """
        if request_bytes < 0:
            raise ValueError(f"admit_follow_up(request_bytes={request_bytes!r}): a size is not negative")
        owner = self._owner(context)
        key = (owner, task_id)
        async with self._locked():
            now = self._timer()
            gone = self._outlived(now)
            try:
                if not self._stored(key):
                    raise TaskNotFoundError
                if self._max_bytes is not None and self._sizes[key] + request_bytes > self._max_bytes:
                    # The task itself is never evicted for its own message: no room can ever be made.
                    raise UnsupportedOperationError(message=TOO_LARGE)
                if self._in_progress(key) and self._past_owner_share(owner, request_bytes):
                    raise UnsupportedOperationError(message=OWNER_AT_CAPACITY)
                victims = self._make_room(now, key, self._max, request_bytes)
                if victims is None:
                    raise UnsupportedOperationError(message=AT_CAPACITY)
                gone += victims
                self._resize(key, self._sizes[key] + request_bytes)
                self._reserved[key] = self._reserved.get(key, 0) + request_bytes
                if key in self._waiting:
                    del self._waiting[key]
                    self._waiting[key] = now
            finally:
                await self._delete(gone)

    async def release_follow_up(self, task_id: str, context: ServerCallContext, request_bytes: int) -> None:
        """Give back the room :meth:`admit_follow_up` reserved for a message that was not run.

        A follow-up the SDK refuses after it was admitted (its task finished
        meanwhile, say) is never saved, so nothing would replace its
        reservation with the task's real size. What was reserved since the
        task's last save is given back, ``request_bytes`` at most; after a
        save there is nothing left to give (it counted the task as it is).

        Args:
            task_id: The task the message was sent to.
            context: The call context, whose owner the task is.
            request_bytes: What was admitted for the message.

        >>> import asyncio
        >>> store = BoundedTaskStore(2)
        >>> asyncio.run(store.release_follow_up("unknown", ServerCallContext(), 10))
        >>> store.bytes
        0
        """
        key = (self._owner(context), task_id)
        async with self._locked():
            reserved = self._reserved.get(key, 0)
            given = min(max(request_bytes, 0), reserved)
            if not given:
                return
            if reserved == given:
                del self._reserved[key]
            else:
                self._reserved[key] = reserved - given
            self._resize(key, self._sizes[key] - given)

    async def save(self, task: Task, context: ServerCallContext) -> None:
        """Save or update a task for the context's owner, counting its bytes; a new one is made room for by the rule.

        A task already kept (or admitted) is never refused here: it takes
        its real size, which replaces what was reserved for it, and room for
        any growth past that is made at the next admission.

        Raises:
            UnsupportedOperationError: A new task, not admitted first, whose
                owner is at ``max_live_per_owner`` (:data:`OWNER_AT_CAPACITY`,
                if it is in progress) or for which no room can be made
                (:data:`AT_CAPACITY`); nothing is changed.
        """
        owner = self._owner(context)
        key = (owner, task.id)
        size = task.ByteSize()
        async with self._locked():
            now = self._timer()
            known = self._forget(key)
            # As at admission: a room abandoned long ago no longer counts against its owner.
            self._release_abandoned(now)
            gone = self._outlived(now)
            state = task.status.state
            try:
                if not known and state not in FINISHED and (self._at_owner_bound(owner) or self._past_owner_share(owner, size)):
                    raise UnsupportedOperationError(message=OWNER_AT_CAPACITY)
                if state in FINISHED:
                    self._finished[key] = now
                elif state in _WAITING:
                    self._waiting[key] = now
                    self._live[owner] += 1
                else:
                    self._working.add(key)
                    self._live[owner] += 1
                self._resize(key, size)
                if not known:
                    victims = self._make_room(now, key, self._max, 0)
                    if victims is None:
                        self._forget(key)
                        raise UnsupportedOperationError(message=AT_CAPACITY)
                    gone += victims
            finally:
                await self._delete(gone)
            await self._tasks.save(task, _scope(owner))

    def has_live(self, context: ServerCallContext) -> bool:
        """Whether the context's owner has a task kept here that is working or waiting for input.

        A task admitted but not saved yet is not counted: its request is
        still being read. A waiting task stops counting once evicted.

        >>> BoundedTaskStore(2).has_live(ServerCallContext())
        False
        """
        return self._owner(context) in self._live

    def live_owners(self, waited_less_than: float | None = None) -> set[str]:
        """The owners with a task kept here that is working or waiting for input, at once for all of them.

        Args:
            waited_less_than: If given, a task waiting for input counts only
                while it has waited less than this many seconds (since it
                was saved waiting, or last taken an answer).

        >>> BoundedTaskStore(2).live_owners(60.0)
        set()
        """
        owners = {owner for owner, _ in self._working}
        now = self._timer()
        # Oldest first: from the newest back, until one has waited too long.
        for (owner, _), since in reversed(self._waiting.items()):
            if waited_less_than is not None and now - since >= waited_less_than:
                break
            owners.add(owner)
        return owners

    async def get(self, task_id: str, context: ServerCallContext) -> Task | None:
        """The context's owner's task, or ``None`` (unknown, another owner's, evicted, or past ``terminal_ttl``)."""
        owner = self._owner(context)
        if self._expired((owner, task_id), self._timer()):
            return None
        return await self._tasks.get(task_id, _scope(owner))

    async def list(self, params: ListTasksRequest, context: ServerCallContext) -> ListTasksResponse:
        """The context's owner's tasks, filtered and paged as the SDK's in-memory store does."""
        owner = self._owner(context)
        async with self._locked():
            await self._delete(self._outlived(self._timer()))
        return await self._tasks.list(params, _scope(owner))

    async def delete(self, task_id: str, context: ServerCallContext) -> None:
        """Delete the context's owner's task, if there is one."""
        owner = self._owner(context)
        async with self._locked():
            self._forget((owner, task_id))
            await self._tasks.delete(task_id, _scope(owner))
