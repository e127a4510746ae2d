"""The application the hardening probes serve: calls that stay pending, and a journal of what happened.

``served`` is an ``agentfx serve`` target (a zero-argument callable yielding a
runtime) that appends one JSON line per event to the file
``$AGENTFX_TEST_JOURNAL`` names: ``{"observed": tag}`` for every Message the
program processed, every audit entry as the audit log encodes it, and
``{"closed": true}`` once the program has stopped. A probe in another process
reads the journal to learn what reached the host, what the audit recorded and
whether the application was closed, whatever the transport and however the
server stopped.
"""

from __future__ import annotations

import os
from collections.abc import AsyncGenerator
from contextlib import asynccontextmanager

import msgspec

import agentfx
from agentfx.app import App
from agentfx.runtime import AgentRuntime


class Model(msgspec.Struct, frozen=True):
    held: int = 0
    notes: tuple[str, ...] = ()


class Held(msgspec.Struct, frozen=True, tag=True):
    """Starts work that finishes only when someone sends Released."""


class Released(msgspec.Struct, frozen=True, tag=True):
    pass


class Noted(msgspec.Struct, frozen=True, tag=True):
    text: str


Message = Held | Released | Noted


def update(model: Model, message: Message) -> Model:
    match message:
        case Held():
            return msgspec.structs.replace(model, held=model.held + 1)
        case Released():
            return msgspec.structs.replace(model, held=0)
        case Noted(text=text):
            return msgspec.structs.replace(model, notes=(*model.notes, text))


Hardening = agentfx.for_model(Model)

definition = Hardening.define(
    messages=Hardening.expose(
        Message,
        Hardening.variant(
            Held, "Hold until released", name="hold", completion=agentfx.Completion(success=Released, timeout=60.0)
        ),
        Hardening.variant(Noted, "Note a text", name="note"),
    ),
    resources=[Hardening.resource("notes", "The notes", schema=list[str], read=lambda m: m.notes)],
)

app: App[Model, Message, None] = App(definition, Model(), update)

JOURNAL = "AGENTFX_TEST_JOURNAL"
"""The environment variable naming the file :func:`served` journals to."""


class _Journal:
    """An audit sink and a Message observer, appending each event as one JSON line."""

    def __init__(self, path: str) -> None:
        self._path = path
        self._log = agentfx.audit_log()

    def write(self, event: object) -> None:
        with open(self._path, "ab") as file:
            file.write(msgspec.json.encode(event) + b"\n")

    def record(self, record: agentfx.AuditRecord, /) -> None:
        self._log.record(record)
        self.write(self._log.entries()[-1])

    def observed(self, message: object) -> None:
        self.write({"observed": type(message).__name__})


@asynccontextmanager
async def served() -> AsyncGenerator[AgentRuntime[Model, None]]:
    """``app``, journalled to ``$AGENTFX_TEST_JOURNAL``."""
    journal = _Journal(os.environ[JOURNAL])
    async with app.run(audit=journal) as runtime:
        observe = runtime.host.observe
        assert observe is not None
        unsubscribe = observe(journal.observed)
        try:
            yield runtime
        finally:
            unsubscribe()
    journal.write({"closed": True})
