"""The order Messages are processed and heard in, shared by the reference program and the recording host.

This layer owns two things: the listener set (subscription order, O(1)
subscribe and unsubscribe, a snapshot per notification in which a listener
removed meanwhile is skipped) and the :class:`Sequencer`, which processes one
item at a time and queues one sent while another is processed, as Elm does,
within :data:`NESTED_MAX` and :data:`QUEUED_MAX`. It deliberately knows
nothing of Models, Messages or ``update``: what processing an item means is
the owner's function.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Callable
from typing import Generic, TypeVar

from .host import Unsubscribe

__all__ = ["NESTED_MAX", "QUEUED_MAX", "Listener", "Listeners", "Sequencer"]

T = TypeVar("T")

NESTED_MAX = 10_000
"""How long a chain of reactions may grow: Messages sent while processing one sent while processing one, and so on.

A listener that sends a Message on every change never lets its first send
return; past this depth that send raises instead. A fan-out (one Message
answered by many) is one level deep, whatever its size.
"""

QUEUED_MAX = 1_000_000
"""Messages waiting at once to be processed, past which a send made while processing raises."""


def _ignore(*_: object) -> None:
    return None


class Listener:
    """One subscription. Unsubscribing swaps ``call`` for a no-op, so a
    notification already iterating a snapshot skips it without a check."""

    __slots__ = ("call",)

    def __init__(self, call: Callable[..., object]) -> None:
        self.call = call


class Listeners:
    """Listeners in subscription order, iterated as a tuple snapshot.

    Subscribing and unsubscribing are O(1) and only drop the cached tuple; the
    next notification rebuilds it once. So a burst of waiters that subscribe
    (or settle and unsubscribe) together costs O(n), not O(n²), and a message
    with no listener change iterates the cached tuple with no copy.
    """

    __slots__ = ("_entries", "_snapshot")

    def __init__(self) -> None:
        self._entries: dict[Listener, None] = {}
        self._snapshot: tuple[Listener, ...] | None = ()

    def __len__(self) -> int:
        return len(self._entries)

    def add(self, call: Callable[..., object]) -> Unsubscribe:
        entry = Listener(call)
        self._entries[entry] = None
        self._snapshot = None

        def unsubscribe() -> None:
            if entry in self._entries:
                del self._entries[entry]
                entry.call = _ignore
                self._snapshot = None

        return unsubscribe

    def snapshot(self) -> tuple[Listener, ...]:
        snapshot = self._snapshot
        if snapshot is None:
            snapshot = self._snapshot = tuple(self._entries)
        return snapshot


class Sequencer(Generic[T]):
    """Processes items one at a time, in the order sent: one sent while another is processed waits its turn.

    Processed at once, an item sent from a listener would reach ``update``,
    and its listeners, before the listeners of the one being processed had all
    heard it. So it is queued, and processed once that one is done; the outer
    :meth:`process` returns once the queue is empty. Every queued item is
    processed even when processing one raised; the first exception then
    propagates, the others are logged. An interrupt (not an ``Exception``)
    stops it at once and drops what is queued.

    Args:
        apply: Processes one item.
        logger: Where the failures that cannot propagate are logged.
        owner: What never settles when a chain of reactions grows too deep
            ("program", "host"), for the refusal's words.

    >>> done: list[int] = []
    >>> def apply(item: int) -> None:
    ...     done.append(item)
    ...     if item == 1:
    ...         sequencer.process(2, "2")  # sent while 1 is processed: queued
    ...         done.append(-1)
    >>> sequencer = Sequencer(apply, logging.getLogger("example"), "example")
    >>> sequencer.process(1, "1")
    >>> done
    [1, -1, 2]
    """

    __slots__ = ("_apply", "_depth", "_logger", "_owner", "_queue")

    def __init__(self, apply: Callable[[T], object], logger: logging.Logger, owner: str) -> None:
        self._apply = apply
        self._logger = logger
        self._owner = owner
        # How deep in a chain of reactions the item being processed is (0:
        # none is), and the items sent meanwhile, each with its own depth.
        self._depth = 0
        self._queue: deque[tuple[T, int]] = deque()

    @property
    def depth(self) -> int:
        """How deep in a chain of reactions the item being processed is; 0 when none is."""
        return self._depth

    def process(self, item: T, named: object) -> None:
        """Process ``item`` now, or queue it when another is being processed.

        Raises:
            RuntimeError: queued, it would make a chain of reactions deeper
                than :data:`NESTED_MAX` or the queue longer than
                :data:`QUEUED_MAX` (``named`` is what the refusal names).
        """
        depth = self._depth
        if depth:
            self.enqueue(item, depth, named)
            return
        self._depth = 1
        try:
            self._apply(item)
            if self._queue:
                self._drain(raising=True)
        except Exception:
            if self._queue:
                self._drain(raising=False)
            raise
        finally:
            self._depth = 0
            if self._queue:
                # Only past an interrupt (KeyboardInterrupt, say): nothing is processed after it.
                self._queue.clear()

    def enqueue(self, item: T, depth: int, named: object) -> None:
        """Queue ``item``, a reaction at ``depth``, behind what is queued."""
        if depth >= NESTED_MAX:
            raise RuntimeError(
                f"Cannot send {named!r}: it would be the reaction to {NESTED_MAX} reactions in a row; "
                f"a listener that sends a Message on every change never lets the {self._owner} settle"
            )
        if len(self._queue) >= QUEUED_MAX:
            raise RuntimeError(f"Cannot send {named!r}: {QUEUED_MAX} Messages are already waiting to be processed")
        self._queue.append((item, depth + 1))

    def _drain(self, *, raising: bool) -> None:
        """Process every queued item, in order, even past one that raised.

        Each was accepted by the send that queued it, so each is processed.
        The first failure is raised once the queue is empty when ``raising``;
        any other is logged, as only one exception can propagate.
        """
        queue = self._queue
        first: Exception | None = None
        while queue:
            item, self._depth = queue.popleft()
            try:
                self._apply(item)
            except Exception as exc:
                if raising and first is None:
                    first = exc
                else:
                    self._logger.error("a listener raised while a queued Message was processed", exc_info=exc)
        if first is not None:
            try:
                raise first
            finally:
                del first
