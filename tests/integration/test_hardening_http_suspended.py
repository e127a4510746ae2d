"""HTTP calls without a completion that are suspended (an ``authorize`` that never answers).

A call runs inline and shielded in its request handler, so a cancellation
that arrives as a cancelled scope (the server stopping, a 2026-07-28 client
closing its response stream) must reach it as an abort of its invocation's
signal: the call is refused as cancelled, audited, never dispatched, and the
server never waits on the hook that never answers.
"""

from __future__ import annotations

import threading
from collections.abc import AsyncGenerator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import httpx
import msgspec
import pytest
from starlette.requests import Request

import agentfx
from agentfx.app import App
from agentfx.mcp import http_app
from agentfx.runtime import AgentRuntime
from tests.http_support import MODERN, LockedAudit, modern, open_session, post, serving
from tests.mcp_wire import call

pytestmark = pytest.mark.anyio

LOCAL = "http://127.0.0.1/mcp"
SHUTTING_DOWN = {"code": -32000, "message": "Server shutting down: the request was cancelled"}


class Model(msgspec.Struct, frozen=True):
    sent: int = 0


class Pondered(msgspec.Struct, frozen=True, tag=True):
    pass


class Ponders(LockedAudit):
    """``authorize`` that never answers, telling the test (in any thread) each time it is asked."""

    def __init__(self) -> None:
        super().__init__()
        self.asked = threading.Semaphore(0)

    async def authorize(self, _request: object) -> bool:
        self.asked.release()
        await anyio.sleep_forever()
        raise AssertionError  # pragma: no cover

    async def until_asked(self, times: int = 1) -> None:
        for _ in range(times):
            with anyio.fail_after(5):
                while not self.asked.acquire(blocking=False):
                    await anyio.sleep(0.01)

    def app(self) -> App[Model, Pondered, None]:
        Agent = agentfx.for_model(Model)
        contract = Agent.define(Agent.expose(Pondered, Agent.variant(Pondered, "Ponder", name="ponder", authorize=self.authorize)))
        return App(contract, Model(), lambda model, _message: Model(model.sent + 1))

    def asgi(self) -> Any:
        app = self.app()

        @asynccontextmanager
        async def make(_principal: object) -> AsyncGenerator[AgentRuntime[Model, None]]:
            async with app.run(audit=self) as runtime:
                yield runtime

        return http_app(make, authenticate=_anyone)


def _anyone(_request: Request) -> str:
    return "ann"


CANCELLED = [("ponder", "refused", "AgentCancelledError")]


async def test_stopping_aborts_a_suspended_session_call_and_answers_it() -> None:
    ponders = Ponders()
    asgi = ponders.asgi()
    answered: list[tuple[int, Any]] = []
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=asgi)) as http:
        with anyio.fail_after(10):
            async with anyio.create_task_group() as task_group, asgi.running():
                session = await open_session(http, LOCAL, "ann")

                async def call_and_wait() -> None:
                    status, answer, _ = await post(http, LOCAL, call(1, "ponder", {}), token="ann", session=session)
                    answered.append((status, answer))

                task_group.start_soon(call_and_wait)
                await ponders.until_asked()
    assert ponders.outcomes() == CANCELLED
    assert answered == [(200, {"jsonrpc": "2.0", "id": 1, "error": SHUTTING_DOWN})]


async def test_stopping_aborts_a_suspended_sessionless_call_and_answers_it() -> None:
    ponders = Ponders()
    asgi = ponders.asgi()
    answered: list[tuple[int, Any]] = []
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=asgi)) as http:
        with anyio.fail_after(10):
            async with anyio.create_task_group() as task_group, asgi.running():

                async def call_and_wait() -> None:
                    request = modern("tools/call", {"name": "ponder", "arguments": {}}, request_id=7)
                    status, answer, _ = await post(http, LOCAL, request, token="ann", version=MODERN)
                    answered.append((status, answer))

                task_group.start_soon(call_and_wait)
                await ponders.until_asked()
    assert ponders.outcomes() == CANCELLED
    assert answered == [(503, {"jsonrpc": "2.0", "id": 7, "error": SHUTTING_DOWN})]


async def test_a_sessionless_client_that_leaves_aborts_its_suspended_call_and_no_other() -> None:
    # Over a real socket: closing the response stream is this era's cancellation.
    ponders = Ponders()
    with serving(lambda _url: ponders.asgi()) as url:
        async with httpx.AsyncClient() as http:
            requests = [modern("tools/call", {"name": "ponder", "arguments": {}}, request_id=1) for _ in range(2)]
            # Two clients of one principal, using the same request id; the
            # first to call is the one that leaves, so "the newest call with
            # that id" would be the wrong one to abort.
            leaving = anyio.CancelScope()
            async with anyio.create_task_group() as clients:

                async def leave() -> None:
                    with leaving:
                        await post(http, url, requests[0], token="ann", version=MODERN)

                stayed: list[object] = []

                async def stay() -> None:
                    stayed.append(await post(http, url, requests[1], token="ann", version=MODERN))

                clients.start_soon(leave)
                await ponders.until_asked()
                clients.start_soon(stay)
                await ponders.until_asked()
                leaving.cancel()
                with anyio.fail_after(5):
                    while ponders.outcomes() != CANCELLED:
                        await anyio.sleep(0.02)
                # The call of the client that stayed is still pending: aborted only with the server.
                await anyio.sleep(0.1)
                assert ponders.outcomes() == CANCELLED
                assert stayed == [], "the client that stayed is not answered: its call was not the one aborted"
                clients.cancel_scope.cancel()
