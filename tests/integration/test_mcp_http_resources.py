"""Subscribed resources over Streamable HTTP: a change is announced to its own principal's streams only.

The SDK's own client, on a real uvicorn server on 127.0.0.1: on 2026-07-28 a
``subscriptions/listen`` stream naming ``app://items``, on 2025-11-25 a
session's ``resources/subscribe``. Each principal (a bearer token) runs its
own program, so one principal's change is no news to another.
"""

from __future__ import annotations

import threading
from collections.abc import AsyncGenerator, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp.shared.subscriptions import ResourceUpdated
from starlette.requests import Request

from agentfx.mcp import http_app
from agentfx.runtime import AgentRuntime
from tests.http_support import MODERN, sdk_client, serving
from tests.mcp_app import ADMIN, GUEST, Model, User, app

pytestmark = pytest.mark.anyio

# The SDK's Streamable HTTP client leaves its SSE readers unfinished on trio
# (see test_mcp_http_sessionless), so these tests run on asyncio.
SDK_CLIENT = pytest.mark.parametrize("anyio_backend", ["asyncio"])
TOKENS = {"ann": ADMIN, "gus": GUEST}
ITEMS = "app://items"


def authenticate(request: Request) -> User | None:
    return TOKENS.get(request.headers.get("authorization", "").removeprefix("Bearer "))


@dataclass
class Runtimes:
    """One program per principal."""

    url: str = ""
    lock: threading.Lock = field(default_factory=threading.Lock)

    @asynccontextmanager
    async def make(self, principal: User) -> AsyncGenerator[AgentRuntime[Model, User]]:
        async with app.run(principal=principal) as runtime:
            yield runtime


@pytest.fixture
def per_principal() -> Iterator[str]:
    runtimes = Runtimes()
    with serving(lambda _url: http_app(runtimes.make, authenticate=authenticate)) as url:
        yield url


@SDK_CLIENT
async def test_a_2026_listen_stream_hears_its_own_principals_resource_change_only(per_principal: str) -> None:
    async with sdk_client(per_principal, "ann") as ann, sdk_client(per_principal, "gus") as gus:
        assert ann.protocol_version == gus.protocol_version == MODERN
        async with (
            ann.listen(resource_subscriptions=[ITEMS]) as ann_events,
            gus.listen(resource_subscriptions=[ITEMS]) as gus_events,
        ):
            await gus.call_tool("add", {"title": "gus's"})
            with anyio.fail_after(5):
                assert await anext(gus_events) == ResourceUpdated(uri=ITEMS)
            # ann's program did not change: ann hears nothing.
            with anyio.move_on_after(0.3) as quiet:
                await anext(ann_events)
            assert quiet.cancelled_caught
            # A change the resource does not show is no news either.
            await gus.call_tool("select", {"item": "gus's"})
            with anyio.move_on_after(0.3) as quiet:
                await anext(gus_events)
            assert quiet.cancelled_caught
            await ann.call_tool("add", {"title": "ann's"})
            with anyio.fail_after(5):
                assert await anext(ann_events) == ResourceUpdated(uri=ITEMS)


@SDK_CLIENT
async def test_a_2025_session_subscription_hears_its_own_principals_resource_change_only(per_principal: str) -> None:
    heard: dict[str, list[str]] = {"ann": [], "gus": []}
    news = {"ann": anyio.Event(), "gus": anyio.Event()}

    def handler(name: str) -> Any:
        async def handle(message: types.ServerNotification | Exception) -> None:
            if isinstance(message, types.ResourceUpdatedNotification):
                heard[name].append(message.params.uri)
                news[name].set()

        return handle

    async with (
        sdk_client(per_principal, "ann", mode="legacy", message_handler=handler("ann")) as ann,
        sdk_client(per_principal, "gus", mode="legacy", message_handler=handler("gus")) as gus,
    ):
        assert ann.protocol_version == gus.protocol_version == "2025-11-25"
        for session in (ann, gus):
            # The request itself: the client's own method warns that 2026-07-28 removed it.
            await session.session.send_request(
                types.SubscribeRequest(params=types.SubscribeRequestParams(uri=ITEMS)), types.EmptyResult
            )
        await gus.call_tool("add", {"title": "gus's"})
        with anyio.fail_after(5):
            await news["gus"].wait()
        await anyio.sleep(0.3)
        assert heard == {"ann": [], "gus": [ITEMS]}
        await ann.call_tool("add", {"title": "ann's"})
        with anyio.fail_after(5):
            await news["ann"].wait()
        await anyio.sleep(0.3)
        assert heard == {"ann": [ITEMS], "gus": [ITEMS]}
