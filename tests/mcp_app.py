"""The application the MCP adapter tests serve: one capability for every way a call can end.

A small list of items with a selection. Besides the ordinary paths (a direct
variant, a mapped one with a completion that can succeed or fail, an
availability rule and an authorization rule), it has a call that waits until
cancelled, one whose completion times out, and hooks that raise
:data:`SECRET` so the tests can prove that no defect text reaches a client.

``app`` is served by ``agentfx serve tests.mcp_app:app`` in the integration tests.
"""

from __future__ import annotations

import os
from collections.abc import AsyncGenerator
from contextlib import asynccontextmanager

import msgspec

import agentfx
from agentfx.app import App
from agentfx.program import Command
from agentfx.runtime import AgentRuntime

SECRET = "s3cr3t-do-not-leak-7f2c"
"""Raised by the hooks of ``explode``, ``fragile`` and the ``fragile`` resource."""


class Model(msgspec.Struct, frozen=True):
    items: tuple[str, ...] = ()
    selected: str | None = None
    broken: bool = False
    waiting: bool = False


class User(msgspec.Struct, frozen=True):
    name: str
    admin: bool = False


class Added(msgspec.Struct, frozen=True, tag=True):
    """Add an item."""

    title: str


class Selected(msgspec.Struct, frozen=True, tag=True):
    """Select an item; one that does not exist selects nothing."""

    item: str


class Cleared(msgspec.Struct, frozen=True, tag=True):
    """Clear the selection."""


class RequestedRemove(msgspec.Struct, frozen=True, tag=True):
    item: str


class Removed(msgspec.Struct, frozen=True, tag=True):
    item: str


class RemoveFailed(msgspec.Struct, frozen=True, tag=True):
    item: str
    reason: str


class Waited(msgspec.Struct, frozen=True, tag=True):
    """Starts work that finishes only when someone sends Finished."""


class Stalled(msgspec.Struct, frozen=True, tag=True):
    """Starts work that never finishes in time."""


class Finished(msgspec.Struct, frozen=True, tag=True):
    pass


class Exploded(msgspec.Struct, frozen=True, tag=True):
    """Its authorization check raises."""


class Broke(msgspec.Struct, frozen=True, tag=True):
    """Makes the availability rule of ``fragile`` raise from now on."""


class Fragile(msgspec.Struct, frozen=True, tag=True):
    pass


class NoInput(msgspec.Struct, frozen=True):
    """Takes no payload."""


Message = (
    Added
    | Selected
    | Cleared
    | RequestedRemove
    | Removed
    | RemoveFailed
    | Waited
    | Stalled
    | Finished
    | Exploded
    | Broke
    | Fragile
)

ADMIN = User("ann", admin=True)
GUEST = User("gus")


def _remove(item: str) -> Command[Message]:
    async def remove() -> Message:
        if item == "locked":
            return RemoveFailed(item, "This item is locked")
        return Removed(item)

    return remove


def update(model: Model, message: Message) -> Model | tuple[Model, list[Command[Message]]]:
    match message:
        case Added(title=title):
            return msgspec.structs.replace(model, items=(*model.items, title))
        case Selected(item=item):
            return msgspec.structs.replace(model, selected=item) if item in model.items else model
        case Cleared():
            return msgspec.structs.replace(model, selected=None)
        case RequestedRemove(item=item):
            return model, [_remove(item)]
        case Removed(item=item):
            items = tuple(i for i in model.items if i != item)
            return Model(items=items, selected=None if model.selected == item else model.selected)
        case Broke():
            return msgspec.structs.replace(model, broken=True)
        case Waited():
            return msgspec.structs.replace(model, waiting=True)
        case Finished():
            return msgspec.structs.replace(model, waiting=False)
        case _:
            return model


def _explode(_request: object) -> bool:
    raise RuntimeError(f"authorization backend said {SECRET}")


def _fragile(model: Model) -> bool:
    if model.broken:
        raise RuntimeError(f"availability rule said {SECRET}")
    return True


def _leak(_model: Model) -> object:
    raise RuntimeError(f"resource projection said {SECRET}")


def _admins_only(request: agentfx.AuthorizationRequest[User, NoInput, Model]) -> bool | agentfx.Refusal:
    return True if request.principal.admin else agentfx.Refusal("Only admins may remove items")


Items = agentfx.for_model(Model, principal=User)

definition = Items.define(
    messages=Items.expose(
        Message,
        Items.variant(Added, "Add an item", name="add"),
        Items.variant(Selected, "Select an item", name="select"),
        Items.variant(Cleared, "Clear the selection", name="clear", available=lambda m: m.selected is not None),
        Items.variant(
            RequestedRemove,
            "Remove the selected item",
            name="remove_selected",
            available=lambda m: m.selected is not None,
            input=NoInput,
            to_message=lambda _, ctx: RequestedRemove(ctx.model.selected or ""),
            authorize=_admins_only,
            completion=agentfx.Completion(
                success=Removed,
                failure=RemoveFailed,
                correlate=lambda _request, result, call: result.item == call.message.item,
                timeout=5.0,
            ),
        ),
        Items.variant(Waited, "Wait for the work", name="wait", completion=agentfx.Completion(success=Finished)),
        Items.variant(
            Stalled,
            "Start work that times out",
            name="stall",
            completion=agentfx.Completion(success=Finished, timeout=0.05),
        ),
        Items.variant(Exploded, "Always fails unexpectedly", name="explode", authorize=_explode),
        Items.variant(Broke, "Break the fragile capability", name="break"),
        Items.variant(Fragile, "Available until broken", name="fragile", available=_fragile),
    ),
    resources=[
        Items.resource("items", "The items", schema=list[str], read=lambda m: m.items),
        Items.resource("fragile", "A projection that fails", schema=list[str], read=_leak),
    ],
    context=Items.projection(Model, lambda m: m),
)

app: App[Model, Message, User] = App(definition, Model(), update, principal=ADMIN)


class _FileAudit:
    """An audit sink appending each entry, as one JSON line, to a file (read by the subprocess tests)."""

    def __init__(self, path: str) -> None:
        self._path = path
        self._log = agentfx.audit_log(principal=lambda user: user.name)

    def record(self, record: agentfx.AuditRecord, /) -> None:
        self._log.record(record)
        with open(self._path, "ab") as file:
            file.write(msgspec.json.encode(self._log.entries()[-1]) + b"\n")


AUDIT_FILE = "AGENTFX_TEST_AUDIT_FILE"
"""The environment variable naming the file :func:`audited` writes its audit entries to."""


@asynccontextmanager
async def audited() -> AsyncGenerator[AgentRuntime[Model, User]]:
    """``app`` with its audit entries appended to the file ``$AGENTFX_TEST_AUDIT_FILE`` names.

    A zero-argument callable returning an async context manager that yields a
    runtime: the other kind of target ``agentfx serve`` accepts.
    """
    async with app.run(audit=_FileAudit(os.environ[AUDIT_FILE])) as runtime:
        yield runtime
