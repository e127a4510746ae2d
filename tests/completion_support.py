"""The application the completion tests share: a create request answered by a result Message, and a rename.

``Create`` carries the invocation id in ``request`` (a mapped variant puts it there), so
``Created`` and ``CreateFailed`` can be matched back to the call that caused them, either by
``correlate`` (:func:`by_request`) or by key (:func:`request_key`, :func:`result_key`).
``Rename`` is the request a state completion watches ``Model.name`` for.

Each test module builds its own Message union and contract from these, adding the Messages
only it needs; hooks that misbehave on purpose stay in the module that tests them.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Any

import anyio
import msgspec

import agentfx
from agentfx import CallInfo, Completion, Variant


class Model(msgspec.Struct, frozen=True):
    name: str = ""
    count: int = 0


class Create(msgspec.Struct, frozen=True, tag=True):
    title: str
    request: str = ""


class Created(msgspec.Struct, frozen=True, tag=True):
    title: str
    request: str = ""


class CreateFailed(msgspec.Struct, frozen=True, tag=True):
    title: str
    request: str = ""


class Rename(msgspec.Struct, frozen=True, tag=True):
    name: str


class TitleInput(msgspec.Struct, frozen=True):
    title: str


A = agentfx.for_model(Model)


def create_variant(
    completion: Completion[TitleInput, Any] | None, description: str = "Create", *, name: str | None = None
) -> Variant[Model, Any, Create, TitleInput]:
    """``Create`` as a mapped variant whose Message carries the invocation id in ``request``.

    Calls with the same input differ only in that id, so results can be matched to their call.
    """
    return A.variant(
        Create,
        description,
        name=name,
        input=TitleInput,
        to_message=lambda i, ctx: Create(i.title, ctx.invocation.id or ""),
        completion=completion,
    )


def by_request(request: TitleInput, result: Created | CreateFailed, call: CallInfo) -> bool:
    """A result belongs to the call whose Message carried the same ``request``."""
    return result.request == call.message.request


def request_key(request: TitleInput, call: CallInfo) -> Hashable:
    return call.message.request


def result_key(result: Created | CreateFailed) -> Hashable:
    return result.request


async def until(condition: Callable[[], bool]) -> None:
    """Let other tasks run until ``condition`` holds (a bounded number of scheduling rounds)."""
    for _ in range(1000):
        if condition():
            return
        await anyio.sleep(0)
    raise AssertionError("condition never held")
