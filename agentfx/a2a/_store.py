"""The task store: the SDK's in-memory store, bounded, evicting finished tasks first.

This layer owns how many A2A tasks a server keeps and which go when room is
needed. Tasks themselves are kept by the SDK's own ``InMemoryTaskStore``
(owner-scoped, copied on the way in and out, listed and paged as the SDK
does); this store wraps it and keeps, beside it, one small record per task:
its owner, its id, whether it is live or finished, and since when. The rule:

1. a finished task (``completed``, ``failed``, ``canceled``, ``rejected``)
   goes first, the one that finished longest ago before any other;
2. then a task parked waiting for input (``input-required``,
   ``auth-required``) for longer than ``waiting_timeout``, the longest
   parked first;
3. a task that is working, or has waited less than ``waiting_timeout``, is
   never evicted: a new task that would need its room is refused, with the
   SDK's ``UnsupportedOperationError`` (``-32004``) saying the agent is
   busy, before anything is dispatched.

An evicted task is gone: ``GetTask`` answers ``TaskNotFoundError`` as for an
id that never existed. A new task is admitted (its room taken) when the
request that starts it is read, before the SDK runs anything for it, so
the store never holds more than its bound, even under concurrent requests.

It deliberately knows nothing of HTTP, principals or dispatch: owners are
whatever the SDK's ``OwnerResolver`` makes of a call context, and a task's
state is the SDK's.
"""

from __future__ import annotations

import itertools
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
from a2a.utils.errors import UnsupportedOperationError

from ..errors import ContractError

__all__ = ["AT_CAPACITY", "MAX_TASKS", "WAITING_TIMEOUT", "BoundedTaskStore"]

MAX_TASKS = 10_000
"""How many tasks :func:`~agentfx.a2a.a2a_app`'s default store keeps, live and finished together."""

WAITING_TIMEOUT = 30 * 60.0
"""Seconds a task waiting for input is protected from eviction, by default.

:func:`~agentfx.a2a.a2a_app` uses its ``PARKED_TASK_TIMEOUT`` (the same, by
default): a task waiting longer has had its running machinery released and
can still be answered, as long as its room was not needed.
"""

AT_CAPACITY = "The agent is busy: too many tasks are in progress. Try again later, or answer or cancel a task waiting for input"
"""The message of the ``UnsupportedOperationError`` that refuses a new task when no room can be made."""

_PENDING_TIMEOUT: Final = 60.0
"""Seconds an admitted task's room is held for its first save.

The SDK saves a task moments after its request is read; a room held this
long belongs to a request that went away before its task was created, and
is taken back when room is needed.
"""

_FINISHED: Final = frozenset(
    {
        TaskState.TASK_STATE_COMPLETED,
        TaskState.TASK_STATE_FAILED,
        TaskState.TASK_STATE_CANCELED,
        TaskState.TASK_STATE_REJECTED,
    }
)
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


class BoundedTaskStore(TaskStore):
    """An in-memory ``TaskStore`` that keeps at most ``max_tasks`` tasks, evicting finished ones first.

    Args:
        max_tasks: How many tasks are kept, live and finished together
            (at least 1). :data:`MAX_TASKS` by default.
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
        ContractError: A bound below 1, or a timeout that is not positive.

    A new task is refused with the SDK's ``UnsupportedOperationError`` and
    :data:`AT_CAPACITY` when the store is full of tasks it may not evict.
    :func:`~agentfx.a2a.a2a_app` admits each new task (:meth:`admit`) before
    anything runs for it, so that refusal reaches the client as a JSON-RPC
    error and nothing is dispatched.

    Like the SDK's server it is used from one event loop (asyncio or trio).

    >>> store = BoundedTaskStore(2)
    >>> store.max_tasks, store.size
    (2, 0)
    """

    def __init__(
        self,
        max_tasks: int = MAX_TASKS,
        *,
        waiting_timeout: float | None = WAITING_TIMEOUT,
        terminal_ttl: float | None = None,
        owner_resolver: OwnerResolver = resolve_user_scope,
        timer: Callable[[], float] = time.monotonic,
    ) -> None:
        if isinstance(max_tasks, bool) or not isinstance(max_tasks, int) or max_tasks < 1:  # pyright: ignore[reportUnnecessaryIsInstance]
            raise ContractError(f"BoundedTaskStore(max_tasks={max_tasks!r}): the bound is a whole number of at least 1")
        for name, value in (("waiting_timeout", waiting_timeout), ("terminal_ttl", terminal_ttl)):
            if value is not None and not value > 0:
                raise ContractError(f"BoundedTaskStore({name}={value!r}): a timeout is a positive number of seconds, or None")
        self._max = max_tasks
        self._waiting_timeout = waiting_timeout
        self._terminal_ttl = terminal_ttl
        self._owner = owner_resolver
        self._timer = timer
        self._tasks = InMemoryTaskStore(owner_resolver=_scoped_owner)
        # Each task is in exactly one of these, with the time it got there;
        # the ordered ones oldest first.
        self._finished: OrderedDict[_Key, float] = OrderedDict()
        self._waiting: OrderedDict[_Key, float] = OrderedDict()
        self._working: set[_Key] = set()
        self._pending: dict[_Key, float] = {}
        # How many working or waiting tasks each owner has: :meth:`has_live`
        # answers without reading (or copying) a single task.
        self._live: Counter[str] = Counter()
        # Bookkeeping is changed without suspending; the lock keeps each
        # change and the wrapped store's matching writes in one piece (so a
        # task evicted cannot be saved again between the two).
        self._lock = anyio.Lock()

    @property
    def max_tasks(self) -> int:
        """How many tasks this store keeps at most."""
        return self._max

    @property
    def size(self) -> int:
        """How many tasks are kept (or have their room held for), live and finished."""
        return len(self._finished) + len(self._waiting) + len(self._working) + len(self._pending)

    def _expired(self, key: _Key, now: float) -> bool:
        finished = self._finished.get(key)
        return finished is not None and self._terminal_ttl is not None and now - finished >= self._terminal_ttl

    def _known(self, key: _Key) -> bool:
        return key in self._working or key in self._waiting or key in self._finished or key in self._pending

    def _forget(self, key: _Key) -> bool:
        """Drop ``key``'s record wherever it is; whether there was one."""
        known = self._known(key)
        if key in self._working or key in self._waiting:
            owner = key[0]
            self._live[owner] -= 1
            if not self._live[owner]:
                del self._live[owner]
        self._working.discard(key)
        self._waiting.pop(key, None)
        self._finished.pop(key, None)
        self._pending.pop(key, None)
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
            del self._finished[key]
            gone.append(key)
        return gone

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

    def _make_room(self, now: float, keep: _Key, limit: int) -> list[_Key] | None:
        """Drop records until at most ``limit`` are kept, giving the stored tasks to delete; ``None``, and nothing dropped, if that cannot be."""
        needed = self.size - limit
        if needed <= 0:
            return []
        victims = list(itertools.islice(self._candidates(now, keep), needed))
        if len(victims) < needed:
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

    async def admit(self, task_id: str, context: ServerCallContext) -> None:
        """Take the room of a new task before it is created, evicting what the rule allows.

        Raises:
            UnsupportedOperationError: The store is full of tasks it may not
                evict (:data:`AT_CAPACITY`); nothing is changed.
        """
        key = (self._owner(context), task_id)
        async with self._locked():
            now = self._timer()
            if self._known(key):
                return
            gone = self._outlived(now)
            victims = self._make_room(now, key, self._max - 1)
            if victims is None:
                await self._delete(gone)
                raise UnsupportedOperationError(message=AT_CAPACITY)
            self._pending[key] = now
            await self._delete(gone + victims)

    async def save(self, task: Task, context: ServerCallContext) -> None:
        """Save or update a task for the context's owner, evicting by the rule if it is new and room is short.

        Raises:
            UnsupportedOperationError: A new task, not admitted first, for
                which no room can be made (:data:`AT_CAPACITY`); nothing is
                changed.
        """
        owner = self._owner(context)
        key = (owner, task.id)
        async with self._locked():
            now = self._timer()
            known = self._forget(key)
            gone = self._outlived(now)
            state = task.status.state
            if state in _FINISHED:
                self._finished[key] = now
            elif state in _WAITING:
                self._waiting[key] = now
                self._live[owner] += 1
            else:
                self._working.add(key)
                self._live[owner] += 1
            victims: list[_Key] = []
            if not known:
                made = self._make_room(now, key, self._max)
                if made is None:
                    self._forget(key)
                    await self._delete(gone)
                    raise UnsupportedOperationError(message=AT_CAPACITY)
                victims = made
            await self._delete(gone + victims)
            await self._tasks.save(task, _scope(owner))

    def has_live(self, context: ServerCallContext) -> bool:
        """Whether the context's owner has a task kept here that is working or waiting for input.

        A task admitted but not saved yet is not counted: its request is
        still being read. A waiting task stops counting once evicted.

        >>> BoundedTaskStore(2).has_live(ServerCallContext())
        False
        """
        return self._owner(context) in self._live

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
