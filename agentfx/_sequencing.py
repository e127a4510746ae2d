"""Listener sets: subscribe, unsubscribe during a notification, iterate a snapshot.

This layer owns the one listener set the reference program and the testing
kit's recording host both notify through: subscription order, O(1) subscribe
and unsubscribe, and a snapshot per notification in which a listener removed
meanwhile is skipped. It deliberately knows nothing of Models or Messages.
"""

from __future__ import annotations

from collections.abc import Callable

from .host import Unsubscribe

__all__ = ["Listener", "Listeners"]


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
