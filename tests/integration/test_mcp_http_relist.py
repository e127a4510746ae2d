"""Over HTTP (2025-11-25): what a session's client fetched while its GET stream was closed is what later changes are measured from, and what changed meanwhile is told when it reopens."""

from __future__ import annotations

from collections.abc import AsyncGenerator, Callable
from contextlib import asynccontextmanager
from typing import Any

import anyio
import httpx
import pytest

from agentfx.mcp import HttpApp
from agentfx.mcp._server import LIST_CHANGED_DEBOUNCE
from agentfx.testing import RecordingHost
from tests.http_support import open_session
from tests.integration.test_mcp_http import LIST, get_stream, in_process, list_changes, recorded_app, result
from tests.mcp_app import Model, User

pytestmark = pytest.mark.anyio


@asynccontextmanager
async def one_session() -> AsyncGenerator[tuple[RecordingHost[Model, Any, User], HttpApp[Any], httpx.AsyncClient, str]]:
    """One 2025-11-25 session, in process, on a runtime whose Model the test sets; its GET stream closed."""
    recording, asgi = recorded_app()
    async with in_process(asgi) as http:
        yield recording, asgi, http, await open_session(http, "http://127.0.0.1/mcp", "anyone")


def names(listing: Any) -> set[str]:
    return {tool["name"] for tool in listing["tools"]}


async def heard(stream: list[dict[str, Any]], told: Callable[[list[dict[str, Any]]], int], times: int = 1) -> None:
    """Wait (boundedly) until the GET stream has carried ``times`` notices that ``told`` counts."""
    with anyio.fail_after(5):
        while told(stream) < times:
            await anyio.sleep(0.01)


@pytest.mark.parametrize("relisted", [True, False], ids=["relisted", "not-relisted"])
async def test_a_reconnected_get_stream_compares_with_what_the_client_last_fetched(relisted: bool) -> None:
    async with one_session() as (recording, asgi, http, session):
        async with get_stream(asgi, session):
            assert "clear" not in names(await result(http, session, LIST))
        await anyio.sleep(0)
        assert recording.listener_count == 0, "no stream: nobody hears"
        recording.set_model(Model(items=("milk",), selected="milk"))  # heard by nobody
        if relisted:
            # The client fetches the list while it hears nothing: that is what it now believes.
            assert "clear" in names(await result(http, session, LIST))
        async with get_stream(asgi, session) as stream:
            recording.set_model(Model(items=("milk",)))  # back to the set first listed
            await anyio.sleep(LIST_CHANGED_DEBOUNCE * 4)
            if relisted:
                await heard(stream, list_changes)
            # Not re-listed, the client still believes the first set: no news.
            assert list_changes(stream) == (1 if relisted else 0)


ITEMS = "app://items"
SUBSCRIBE = {"jsonrpc": "2.0", "id": 1, "method": "resources/subscribe", "params": {"uri": ITEMS}}


def read_items(request_id: int) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "method": "resources/read", "params": {"uri": ITEMS}}


def resource_updates(messages: list[dict[str, Any]]) -> int:
    return sum(
        message.get("method") == "notifications/resources/updated" and message["params"]["uri"] == ITEMS
        for message in messages
    )


@pytest.mark.parametrize("reread", [True, False], ids=["reread", "not-reread"])
async def test_a_reconnected_get_stream_measures_a_subscription_from_what_the_client_last_read(reread: bool) -> None:
    async with one_session() as (recording, asgi, http, session):
        async with get_stream(asgi, session):
            await result(http, session, SUBSCRIBE)  # subscribed at "[]"
            assert (await result(http, session, read_items(2)))["contents"][0]["text"] == "[]"
        await anyio.sleep(0)
        assert recording.listener_count == 0, "no stream: nobody hears"
        recording.set_model(Model(items=("milk",)))  # heard by nobody
        if reread:
            # The client reads while it hears nothing: that is what it now holds.
            assert (await result(http, session, read_items(3)))["contents"][0]["text"] == '["milk"]'
        async with get_stream(asgi, session) as stream:
            recording.set_model(Model())  # back to the value first subscribed at
            await anyio.sleep(LIST_CHANGED_DEBOUNCE * 4)
            if reread:
                await heard(stream, resource_updates)
            # Not re-read, the client still holds "[]": no news.
            assert resource_updates(stream) == (1 if reread else 0)
            if reread:
                # The change was told once: a Model change the resource does not show is no news.
                recording.set_model(Model(selected="nothing"))
                await anyio.sleep(LIST_CHANGED_DEBOUNCE * 4)
                assert resource_updates(stream) == 1


@pytest.mark.parametrize("reread", [True, False], ids=["reread", "not-reread"])
async def test_a_read_on_reconnecting_is_what_a_subscription_is_measured_from(reread: bool) -> None:
    async with one_session() as (recording, asgi, http, session):
        await result(http, session, SUBSCRIBE)  # subscribed at "[]", with no stream
        recording.set_model(Model(items=("milk",)))  # heard by nobody
        async with get_stream(asgi, session) as stream:
            if reread:
                # Reading on hearing again: the client holds what changed meanwhile.
                assert (await result(http, session, read_items(2)))["contents"][0]["text"] == '["milk"]'
            recording.set_model(Model(items=("milk",), selected="milk"))  # the resource does not show it
            await anyio.sleep(LIST_CHANGED_DEBOUNCE * 4)
            if not reread:
                # The change made while it heard nothing is news to a client that did not read.
                await heard(stream, resource_updates)
            assert resource_updates(stream) == (0 if reread else 1)
            # Reads once compared are a client's own business again: a later change is told.
            assert (await result(http, session, read_items(3)))["contents"][0]["text"] == '["milk"]'
            recording.set_model(Model(items=("milk", "eggs")))
            await heard(stream, resource_updates, 1 if reread else 2)
            await anyio.sleep(LIST_CHANGED_DEBOUNCE * 4)
            assert resource_updates(stream) == (1 if reread else 2)


@pytest.mark.parametrize("tools", [True, False], ids=["tool-list", "subscribed-resource"])
async def test_a_change_made_while_the_get_stream_was_closed_is_told_when_it_reopens(tools: bool) -> None:
    told = list_changes if tools else resource_updates
    async with one_session() as (recording, asgi, http, session):
        async with get_stream(asgi, session):
            if tools:
                assert "clear" not in names(await result(http, session, LIST))
            else:
                await result(http, session, SUBSCRIBE)  # subscribed at "[]"
        await anyio.sleep(0)
        # Heard by nobody, and it holds.
        recording.set_model(Model(items=("milk",), selected="milk") if tools else Model(items=("milk",)))
        async with get_stream(asgi, session) as stream:
            # No further change: reopening is enough for the client to hear of it, once.
            await heard(stream, told)
            await anyio.sleep(LIST_CHANGED_DEBOUNCE * 4)
            assert told(stream) == 1
