"""A scripted model's turns, for the framework suites: each model call takes the next one.

A turn is the text the model answers with, the tool calls it makes (in its
framework's own type), or a function called at that model call, which may
read what the earlier calls were answered (the examples read the new todo's
id from the reply). Each suite wraps these in its framework's model or API
double; what it records of each request stays its own.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Generic, TypeAlias, TypeVar

__all__ = ["Turn", "Turns"]

C = TypeVar("C")

Turn: TypeAlias = Sequence[C] | str | Callable[[], Sequence[C] | str]
"""One answer of the model: text, tool calls, or a function giving either when the model is called."""


class Turns(Generic[C]):
    """The turns a scripted model answers with, in order.

    >>> turns = Turns([["call"], lambda: "done"])
    >>> turns.next(), turns.next()
    (['call'], 'done')
    """

    def __init__(self, turns: Iterable[Turn[C]]) -> None:
        self._left = list(turns)

    def next(self) -> Sequence[C] | str:
        """The next turn; one given as a function is called now."""
        assert self._left, "the model was called more often than the script has turns"
        turn = self._left.pop(0)
        return turn() if callable(turn) else turn
