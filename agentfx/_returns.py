"""The one place agentfx talks to ``returns`` in ways its type stubs cannot express to pyright.

``RequiresContextFutureResult.bind`` is declared through higher-kinded
emulation (``KindN``) that pyright reads as partially unknown even when every
step carries the full error union and environment type; this wrapper states
the precise signature once.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from returns.context import RequiresContextFutureResult

T = TypeVar("T")
U = TypeVar("U")
E = TypeVar("E")
Env = TypeVar("Env")


def bind(
    step: RequiresContextFutureResult[T, E, Env],
    function: Callable[[T], RequiresContextFutureResult[U, E, Env]],
) -> RequiresContextFutureResult[U, E, Env]:
    """``step.bind(function)``, typed."""
    return step.bind(function)  # pyright: ignore[reportUnknownMemberType]
