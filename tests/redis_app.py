"""The application the Redis tests share across processes: a tally of keyed additions.

``Added(key, n)`` is applied as it comes; ``Requested(key)`` asks a command
(run on whichever process holds the writer lease) to answer ``Confirmed(key,
by)``, which is what the ``request`` capability's completion waits for; the
shop opens and closes, and ``withdraw`` exists only while it is open.

``python -m tests.redis_app URL NAMESPACE LEASE NAME COUNT`` runs a worker
for the failover test: it sends ``COUNT`` keyed additions and prints ``acked
KEY`` once each was applied, ``writer`` whenever it holds the lease.
"""

from __future__ import annotations

import os
import sys

from contextlib import AbstractAsyncContextManager

import anyio
import msgspec

from agentfx.app import App
from agentfx.completion import CallInfo, Completion
from agentfx.builder import for_model
from agentfx.program import Command
from agentfx.runtime import AgentRuntime

__all__ = [
    "Added",
    "Boom",
    "Closed",
    "Confirmed",
    "Model",
    "Message",
    "Opened",
    "Request",
    "Requested",
    "Withdrew",
    "app",
    "fold",
    "runtime_factory",
    "update",
]


class Model(msgspec.Struct, frozen=True):
    keys: tuple[str, ...] = ()
    total: int = 0
    open: bool = False
    confirmed: tuple[str, ...] = ()


class Added(msgspec.Struct, frozen=True, tag=True):
    """Add ``n`` under ``key``."""

    key: str
    n: int = 1


class Requested(msgspec.Struct, frozen=True, tag=True):
    key: str
    delay: float = 0.0


class Confirmed(msgspec.Struct, frozen=True, tag=True):
    key: str
    by: int


class Opened(msgspec.Struct, frozen=True, tag=True):
    """Open the shop."""


class Closed(msgspec.Struct, frozen=True, tag=True):
    """Close the shop."""


class Withdrew(msgspec.Struct, frozen=True, tag=True):
    """Withdraw ``n`` from the total."""

    n: int


class Boom(msgspec.Struct, frozen=True, tag=True):
    """Makes update raise."""


Message = Added | Requested | Confirmed | Opened | Closed | Withdrew | Boom


def _confirm(key: str, delay: float) -> Command[Message]:
    async def confirm() -> Message:
        await anyio.sleep(delay)
        return Confirmed(key=key, by=os.getpid())

    return confirm


def update(model: Model, message: Message) -> Model | tuple[Model, list[Command[Message]]]:
    match message:
        case Added(key=key, n=n):
            return msgspec.structs.replace(model, keys=(*model.keys, key), total=model.total + n)
        case Requested(key=key, delay=delay):
            return model, [_confirm(key, delay)]
        case Confirmed(key=key):
            return msgspec.structs.replace(model, confirmed=(*model.confirmed, key))
        case Opened():
            return model if model.open else msgspec.structs.replace(model, open=True)
        case Closed():
            return msgspec.structs.replace(model, open=False) if model.open else model
        case Withdrew(n=n):
            return msgspec.structs.replace(model, total=model.total - n)
        case Boom():
            raise ValueError("update refuses Boom")


def fold(messages: list[Message], model: Model | None = None) -> Model:
    """The Model ``messages`` make, one by one, ignoring commands and updates that raise."""
    current = Model() if model is None else model
    for message in messages:
        try:
            result = update(current, message)
        except ValueError:
            continue
        current = result[0] if isinstance(result, tuple) else result
    return current


class Request(msgspec.Struct, frozen=True):
    """What to request."""

    key: str
    delay: float = 0.0


def _request_key(request: Request, _call: CallInfo) -> str:
    return request.key


def _result_key(result: Confirmed) -> str:
    return result.key


Tally = for_model(Model)

contract = Tally.define(
    messages=Tally.expose(
        Message,
        Tally.variant(Added, "Add to the tally", name="add"),
        Tally.variant(
            Requested,
            "Request a confirmation",
            name="request",
            input=Request,
            to_message=lambda request, _ctx: Requested(key=request.key, delay=request.delay),
            completion=Completion(success=Confirmed, correlate_key=(_request_key, _result_key), timeout=2.0),
        ),
        Tally.variant(Opened, "Open the shop", name="open", available=lambda m: not m.open),
        Tally.variant(Closed, "Close the shop", name="close", available=lambda m: m.open),
        Tally.variant(Withdrew, "Withdraw", name="withdraw", available=lambda m: m.open),
    ),
    resources=[Tally.resource("total", "The total", schema=int, read=lambda m: m.total)],
)

app = App(contract, init=Model(), update=update)
"""Served by ``agentfx serve tests.redis_app:app --redis URL``."""


def runtime_factory() -> AbstractAsyncContextManager[AgentRuntime[Model, None]]:
    """A runtime factory target, which ``--redis`` refuses: it runs a program of its own."""
    return app.run()


async def _worker(url: str, namespace: str, lease: float, name: str, count: int) -> None:
    from agentfx.redis import RedisProgramError, run_program

    async with run_program(url, namespace=namespace, init=Model(), update=update, message_type=Message, lease=lease) as program:
        print("ready", flush=True)
        for index in range(count):
            key = f"{name}-{index}"
            try:
                await program.send(Added(key=key))
            except RedisProgramError:
                print(f"failed {key}", flush=True)
                continue
            print(f"acked {key}{' writer' if program.is_writer else ''}", flush=True)
            await anyio.sleep(0.002)
        print("done", flush=True)
        # Stay up (and able to take the lease) until the test stops this process.
        await anyio.sleep_forever()


if __name__ == "__main__":
    _url, _namespace, _lease, _name, _count = sys.argv[1:6]
    anyio.run(_worker, _url, _namespace, float(_lease), _name, int(_count))
