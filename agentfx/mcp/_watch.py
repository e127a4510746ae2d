"""Noticing Model changes for MCP clients: one debounced watcher per runtime, fanned out to who listens.

This layer owns *when* the available set and the subscribed resources are
compared, and against what. A :class:`Watcher` belongs to one runtime's
server and is shared by all of its connections: while at least one
connection listens it holds one subscription to the runtime and one task; the
first Model change of a burst opens a window of :data:`LIST_CHANGED_DEBOUNCE`
seconds, after which the available names (and each subscribed resource) are
read once and every listening connection compares them with what it last
told its client. Each listening connection is told in a task of its own
(under the watcher's), and the watcher never waits for one: a connection
still being told of an earlier burst is told of the newest one when it is
done, so a client that reads nothing holds up nobody else's news and piles
up at most one burst. A connection that is not listening is not in the
fan-out: a Model change costs it nothing. Each connection keeps its own baseline
(:class:`ListWatch`) and its own subscribed values (:class:`ResourceWatch`),
so what one client was told never decides what another is.

It deliberately knows nothing of MCP's types, sessions, eras or transports:
a listener is anything with an ``async notice(burst)``, and what an
announcement sends is the listener's business.
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import AsyncGenerator, Awaitable, Callable, Iterable, Sequence
from contextlib import asynccontextmanager
from typing import Protocol

import anyio
from anyio.abc import TaskGroup

__all__ = ["LIST_CHANGED_DEBOUNCE", "NOTICE_WAIT", "Burst", "Listener", "ListWatch", "ResourceWatch", "Watcher"]

_logger = logging.getLogger("agentfx.mcp")
# One wording per failure, whichever path read it (a burst's shared read or one connection's check).
_NAMES_UNREADABLE = "reading the available capabilities failed; the tool list was not re-checked"
_RESOURCE_UNREADABLE = "reading the resource %r for its subscribers failed"

LIST_CHANGED_DEBOUNCE = 0.05
"""Seconds a burst of Model changes is collected before the available set (and subscribed resources) are compared once."""

NOTICE_WAIT = 10.0
"""At most this long one connection's announcements of a burst may take; a client that reads nothing is given up on, and nobody else waits for it."""


class _Unreadable(Exception):
    """A value a burst could not read (logged once, where it was read)."""


_clock = itertools.count(1)
"""Orders bursts and baselines: a burst compares a baseline only when it was made after that baseline was set."""


class Burst:
    """What one burst of Model changes reads, each at most once, for the listening connections told of it at once.

    A connection still busy with an earlier burst is told of a fresh one when
    it is free (so N slow connections cost N reads); one whose baseline is
    newer than the burst reads for itself (:attr:`made`).

    Args:
        names: The names available right now, in declaration order.
        resource: The encoded value at a URI, or ``None`` when it names nothing.

    >>> reads = []
    >>> burst = Burst(lambda: reads.append("names") or ["a"], lambda uri: reads.append(uri) or b"1")
    >>> burst.names(), burst.names(), burst.resource("app://x"), burst.resource("app://x")
    (('a',), ('a',), b'1', b'1')
    >>> reads
    ['names', 'app://x']
    """

    __slots__ = ("_names", "_read_names", "_read_resource", "_values", "made")

    def __init__(self, names: Callable[[], Sequence[str]], resource: Callable[[str], bytes | None]) -> None:
        # When it was made, on the clock baselines are stamped by: a baseline
        # stamped later may be newer than what this burst reads (its reads are
        # shared, and made once, by whichever listener asks first).
        self.made = next(_clock)
        self._read_names = names
        self._read_resource = resource
        self._names: tuple[str, ...] | None | _Unreadable = None
        self._values: dict[str, bytes | None | _Unreadable] = {}

    def names(self) -> tuple[str, ...] | None:
        """The available names, or ``None`` when they could not be read (logged once)."""
        names = self._names
        if names is None:
            try:
                names = tuple(self._read_names())
            except Exception:
                _logger.exception(_NAMES_UNREADABLE)
                names = _Unreadable()
            self._names = names
        return None if isinstance(names, _Unreadable) else names

    def resource(self, uri: str) -> bytes | None:
        """The encoded value at ``uri``; raises :class:`_Unreadable` when its projection raised (logged once)."""
        if uri in self._values:
            value = self._values[uri]
        else:
            try:
                value = self._read_resource(uri)
            except Exception:
                # A projection that breaks is the application's bug, logged
                # here; a subscriber is told only of values that could be read.
                _logger.exception(_RESOURCE_UNREADABLE, uri)
                value = _Unreadable()
            self._values[uri] = value
        if isinstance(value, _Unreadable):
            raise value
        return value


class ListWatch:
    """What one connection's client was last told of the tool list, and telling it of a difference, once.

    The client's first listing is where the comparison starts: before it there
    is nothing to contradict, so nothing is sent. Later listings, while the
    client hears of changes, change nothing: a client SDK lists on its own
    (to validate a result, say), so such a listing says nothing about what
    the client's code was shown, and comparing against it would swallow the
    very change that listing happened to see. While the client hears nothing
    (no stream can carry a notification), no announcement can keep the
    baseline current, so what it is shown then, or can fetch when it starts
    hearing again, is the baseline (:meth:`reset`). Whichever check sees a
    difference (:meth:`check` after a call, or :meth:`update` with a burst's
    names) makes the names it saw the baseline, so a change is announced once.

    Args:
        read: The names available right now, in declaration order.
        announce: Sends the notification.
    """

    __slots__ = ("_announce", "_at", "_last", "_read")

    def __init__(self, read: Callable[[], Sequence[str]], announce: Callable[[], Awaitable[object]]) -> None:
        self._read = read
        self._announce = announce
        self._last: tuple[str, ...] | None = None
        # When the baseline was last set (on the bursts' clock).
        self._at = 0

    @property
    def last(self) -> tuple[str, ...] | None:
        """The names as of the previous check (or the first listing); ``None`` before the client listed."""
        return self._last

    def listed(self, names: Sequence[str]) -> None:
        """The client, hearing of changes, has just been shown ``names``; only the first listing counts."""
        if self._last is None:
            self._last = tuple(names)
            self._at = next(_clock)

    def reset(self, names: Sequence[str]) -> None:
        """The client, hearing of no change, has just been shown (or can fetch) ``names``: compare against them from now on.

        >>> async def announce() -> None: ...
        >>> watch = ListWatch(lambda: ("b",), announce)
        >>> watch.listed(("a",)); watch.listed(("b",)); watch.last
        ('a',)
        >>> watch.reset(("b",)); watch.last
        ('b',)
        """
        self._last = tuple(names)
        self._at = next(_clock)

    async def notice(self, burst: Burst) -> None:
        """Announce a difference from ``burst``'s names, or from names read now when the baseline is newer than the burst."""
        if self._last is None:
            return
        if burst.made > self._at:
            await self.update(burst.names())
        else:
            await self.check()

    async def check(self, announce: Callable[[], Awaitable[object]] | None = None) -> None:
        """Read the names now and announce a difference (through ``announce`` when given)."""
        if self._last is None:
            return
        try:
            names = tuple(self._read())
        except Exception:
            _logger.exception(_NAMES_UNREADABLE)
            return
        await self.update(names, announce)

    async def update(self, names: tuple[str, ...] | None, announce: Callable[[], Awaitable[object]] | None = None) -> None:
        """Announce that the names are now ``names`` when they differ (``None``: they could not be read).

        The baseline moves before the notice is sent, so a check running
        meanwhile does not send it twice; a notice that fails or is cut off
        (its wait ran out, or its connection is closing) puts the baseline
        back, so the next check tells it again rather than never.
        """
        previous, since = self._last, self._at
        if previous is None or names is None or names == previous:
            return
        self._last, self._at = names, next(_clock)
        told = False
        try:
            await (announce or self._announce)()
            told = True
        except Exception:
            _logger.exception("announcing a tool list change failed")
        finally:
            if not told and self._last == names:
                self._last, self._at = previous, since


class ResourceWatch:
    """What one connection's client was told of the resources it subscribed to, diffed on the encoded value.

    A resource's value is its JSON encoding, read when it is first subscribed
    and again after each burst of Model changes; only a different encoding is
    announced, so a Model change the projection does not show is no news.
    While the client hears nothing of a URI (no stream can carry the
    notification), no announcement can keep its value current, so what a read
    serves it then is the value changes are measured from (:meth:`reset`),
    and so is its first read once it hears again (:meth:`resume`), until a
    burst compares it.
    Subscriptions are counted (a URI may be subscribed on several streams) and
    only URIs naming a resource of the contract are kept, so the watch is
    bounded by the contract.

    Args:
        read: The encoded value at a URI, or ``None`` when it names nothing.
        announce: Sends ``notifications/resources/updated`` for a URI.
    """

    __slots__ = ("_announce", "_at", "_last", "_read", "_resumed", "_subscribers")

    def __init__(self, read: Callable[[str], bytes | None], announce: Callable[[str], Awaitable[object]]) -> None:
        self._read = read
        self._announce = announce
        self._subscribers: dict[str, int] = {}
        self._last: dict[str, bytes | None] = {}
        # When each baseline was last set (on the bursts' clock).
        self._at: dict[str, int] = {}
        # Subscribed URIs the client hears again after hearing nothing, and
        # that no burst has compared since: their next read is the baseline.
        self._resumed: set[str] = set()

    @property
    def subscribed(self) -> frozenset[str]:
        """The URIs someone listens to."""
        return frozenset(self._subscribers)

    def subscribe(self, uri: str) -> None:
        """Count one more subscriber of ``uri``; the first one fixes the value changes are measured from."""
        count = self._subscribers.get(uri, 0)
        if count == 0:
            self._set(uri, self._value(uri, self._read))
        self._subscribers[uri] = count + 1

    def _set(self, uri: str, value: bytes | None) -> None:
        self._last[uri] = value
        self._at[uri] = next(_clock)

    def reset(self, uri: str, value: bytes | None) -> None:
        """The client, hearing of no change to ``uri``, has just been served ``value``: compare against it from now on.

        A URI nobody subscribes to is not kept, so this changes nothing for it.

        >>> async def announce(uri: str) -> None: ...
        >>> watch = ResourceWatch(lambda uri: b"[]", announce)
        >>> watch.subscribe("app://items"); watch.reset("app://items", b'["x"]')
        >>> watch.reset("app://other", b"1"); watch.last("app://items"), watch.last("app://other")
        (b'["x"]', None)
        """
        if uri in self._subscribers:
            self._set(uri, value)
        self._resumed.discard(uri)

    def resume(self, uris: Iterable[str]) -> None:
        """The client hears again of ``uris`` after hearing nothing: the next read of one, before a burst compares it, is its baseline.

        Whatever changed while it heard nothing was never announced; a client
        that reads on hearing again holds that value, and telling it of the
        difference afterwards would be no news.
        """
        self._resumed.update(uri for uri in uris if uri in self._subscribers)

    def resuming(self, uri: str) -> bool:
        """Whether ``uri`` is heard again and no burst has compared it since."""
        return uri in self._resumed

    def last(self, uri: str) -> bytes | None:
        """The encoded value changes to ``uri`` are measured from (``None`` when unsubscribed, or it names nothing)."""
        return self._last.get(uri)

    def unsubscribe(self, uri: str) -> None:
        """Count one subscriber fewer; the last one forgets the URI."""
        count = self._subscribers.get(uri, 0)
        if count <= 1:
            self._subscribers.pop(uri, None)
            self._last.pop(uri, None)
            self._at.pop(uri, None)
            self._resumed.discard(uri)
        else:
            self._subscribers[uri] = count - 1

    async def check(self, read: Callable[[str], bytes | None] | None = None) -> None:
        """Read every subscribed resource (through ``read``, a burst's, when given) and announce those whose encoding changed."""
        for uri in list(self._subscribers):
            await self._compare(uri, read or self._read)

    async def notice(self, burst: Burst) -> None:
        """:meth:`check` with ``burst``'s reads, each read now instead where its baseline is newer than the burst."""
        for uri in list(self._subscribers):
            await self._compare(uri, burst.resource if burst.made > self._at.get(uri, 0) else self._read)

    async def _compare(self, uri: str, read: Callable[[str], bytes | None]) -> None:
        value = self._value(uri, read)
        # Compared now: what the client is shown from here on is told.
        self._resumed.discard(uri)
        previous, since = self._last.get(uri), self._at.get(uri, 0)
        if uri not in self._subscribers or value == previous:
            return
        self._set(uri, value)
        told = False
        try:
            await self._announce(uri)
            told = True
        except Exception:
            _logger.exception("announcing a change of %r failed", uri)
        finally:
            # Not told: the next burst tells it again (as for the tool list).
            if not told and uri in self._subscribers and self._last.get(uri) == value:
                self._last[uri], self._at[uri] = previous, since

    def _value(self, uri: str, read: Callable[[str], bytes | None]) -> bytes | None:
        try:
            return read(uri)
        except _Unreadable:
            return self._last.get(uri)
        except Exception:
            _logger.exception(_RESOURCE_UNREADABLE, uri)
            return self._last.get(uri)


class Listener(Protocol):
    """A connection in a watcher's fan-out."""

    async def notice(self, burst: Burst) -> None:
        """Compare what the client was told with ``burst`` and announce the differences."""
        ...


class Watcher:
    """One runtime's Model changes, debounced once and fanned out to the connections that listen.

    A connection :meth:`join` s when it starts listening and :meth:`leave` s
    when it stops (or closes). The watcher holds its one subscription to the
    runtime, and its one task, exactly while someone listens and a task group
    is lent to it by :meth:`hosting` (a connection's lifespan, or a server
    holding many connections): the first listener subscribes and starts the
    task, the last one (or the last host leaving) unsubscribes and ends it,
    so with nobody listening a Model change calls nothing here and no task
    waits. When the task's host goes while connections of another still
    listen, the task moves there.

    Each burst is told to each listener in a task of its own, at most one per
    listener at a time and each bounded by :data:`NOTICE_WAIT`; a burst that
    finds its listener still busy replaces whichever one waited for it. A
    listener that leaves mid-notice has its task cancelled.

    Args:
        subscribe: ``subscribe(listener)`` calls ``listener()`` on every Model
            change and returns the function that stops it (the runtime's).
        names: The names available right now, in declaration order.
        resource: The encoded value at a URI, or ``None`` when it names nothing.
        delay: The debounce window in seconds.
    """

    def __init__(
        self,
        subscribe: Callable[[Callable[[], None]], Callable[[], None]],
        names: Callable[[], Sequence[str]],
        resource: Callable[[str], bytes | None],
        *,
        delay: float = LIST_CHANGED_DEBOUNCE,
    ) -> None:
        self._subscribe = subscribe
        self._names = names
        self._resource = resource
        self._delay = delay
        self._listeners: dict[Listener, _Slot] = {}
        self._unsubscribe: Callable[[], None] | None = None
        self._hosts: list[TaskGroup] = []
        self._host: TaskGroup | None = None
        self._scope: anyio.CancelScope | None = None
        self._dirty: anyio.Event | None = None
        self._tasks = 0

    @property
    def listening(self) -> int:
        """How many connections are in the fan-out."""
        return len(self._listeners)

    @property
    def subscribed(self) -> bool:
        """Whether the watcher holds its subscription to the runtime."""
        return self._unsubscribe is not None

    @property
    def tasks(self) -> int:
        """The watcher's tasks alive right now: one while someone listens and a host is lent, and one per listener being told of a burst."""
        return self._tasks

    def join(self, listener: Listener) -> None:
        """``listener`` is told of every burst from now on (joining twice is joining once).

        A listener that joins is told of a burst at the end of the next window
        even if the Model does not change again: what changed while it heard
        nothing, and still holds, is news its client was never sent (a 2025
        GET stream that reconnects, say); where nothing did, the burst finds
        no difference and sends nothing.
        """
        if listener not in self._listeners:
            self._listeners[listener] = _Slot()
            self._settle()
            self._changed()

    def leave(self, listener: Listener) -> None:
        """``listener`` is told of nothing more; the last one stops the watcher."""
        slot = self._listeners.pop(listener, None)
        if slot is not None:
            if slot.scope is not None:
                # A connection that closes mid-notice is told no more of it.
                slot.scope.cancel()
            self._settle()

    @asynccontextmanager
    async def hosting(self) -> AsyncGenerator[None]:
        """Lend a task group to the watcher's task for the duration of the block."""
        async with anyio.create_task_group() as task_group:
            self._hosts.append(task_group)
            try:
                self._settle()
                yield
            finally:
                self._hosts.remove(task_group)
                if self._host is task_group:
                    # Connections of other hosts may still listen: carry on there.
                    self._end_task()
                self._settle()
                task_group.cancel_scope.cancel()

    def _changed(self) -> None:
        # Called synchronously on every Model change: one flag, whoever listens.
        if self._dirty is not None:
            self._dirty.set()

    def _settle(self) -> None:
        """Subscribed, with the task running, exactly while someone listens and a host is lent."""
        if not (self._listeners and self._hosts):
            self._stop()
            return
        if self._unsubscribe is None:
            try:
                self._unsubscribe = self._subscribe(self._changed)
            except Exception:
                # The host's bug, logged; the next listener to come tries again.
                _logger.exception("subscribing to the runtime's Model changes failed; no change will be announced")
                return
            self._dirty = anyio.Event()
        if self._scope is None:
            host = self._host = self._hosts[0]
            scope = self._scope = anyio.CancelScope()
            host.start_soon(self._run, scope)

    def _stop(self) -> None:
        unsubscribe, self._unsubscribe = self._unsubscribe, None
        self._dirty = None
        self._end_task()
        if unsubscribe is not None:
            try:
                unsubscribe()
            except Exception:
                _logger.exception("unsubscribing from the runtime's Model changes failed")

    def _end_task(self) -> None:
        scope, self._scope, self._host = self._scope, None, None
        if scope is not None:
            scope.cancel()

    async def _run(self, scope: anyio.CancelScope) -> None:
        self._tasks += 1
        try:
            with scope:
                # The listeners' tasks live under this one: when it ends (nobody
                # listens, or its host went) they end with it, never outliving it.
                async with anyio.create_task_group() as telling:
                    while True:
                        dirty = self._dirty
                        if dirty is None:
                            return
                        await dirty.wait()
                        await anyio.sleep(self._delay)
                        # A change after this reset starts the next window, so none is lost.
                        self._dirty = anyio.Event()
                        self._fan_out(telling)
        finally:
            self._tasks -= 1

    def _fan_out(self, telling: TaskGroup) -> None:
        # Never waits on a listener: one client that reads nothing must not
        # hold up the others' news, this burst's or the next one's. A listener
        # still being told of an earlier burst is told of the newest one when
        # it is done (the one it waits for is replaced, never queued behind),
        # read afresh then: by that time it may have moved its baselines (it
        # subscribed, listed, or heard a call's own change) past what this
        # burst read now, and an older read would announce a change it knows.
        burst = Burst(self._names, self._resource)
        for listener, slot in list(self._listeners.items()):
            if slot.scope is not None:
                slot.pending = True
            else:
                self._start(telling, listener, slot, burst)

    def _start(self, telling: TaskGroup, listener: Listener, slot: _Slot, burst: Burst) -> None:
        slot.pending = False
        # Taken now, not when the task first runs: a burst coming before it
        # does must wait for it, not start a second one.
        slot.scope = anyio.CancelScope()
        telling.start_soon(self._tell, listener, slot, burst)

    async def _tell(self, listener: Listener, slot: _Slot, burst: Burst | None) -> None:
        self._tasks += 1
        scope = slot.scope
        assert scope is not None
        try:
            with scope:
                while burst is not None and self._listeners.get(listener) is slot:
                    with anyio.move_on_after(NOTICE_WAIT):
                        try:
                            await listener.notice(burst)
                        except Exception:
                            _logger.exception("announcing a Model change failed")
                    burst = Burst(self._names, self._resource) if slot.pending else None
                    slot.pending = False
        finally:
            slot.scope = None
            self._tasks -= 1
            if slot.pending and self._listeners.get(listener) is slot and self._dirty is not None:
                # Cancelled with a burst still waiting (its host went, and the
                # watcher's task moved): the next burst, wherever it runs, tells it.
                self._dirty.set()


class _Slot:
    """One listener's place in the fan-out: the task telling it (while one does), and whether a burst waits for it."""

    __slots__ = ("pending", "scope")

    def __init__(self) -> None:
        self.scope: anyio.CancelScope | None = None
        self.pending = False
