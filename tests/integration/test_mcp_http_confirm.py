"""A 2026-07-28 confirmation over Streamable HTTP, asked by one server and answered at another.

The ``requestState`` of an ``InputRequiredResult`` is sealed under the
``request_state_security`` an app is given: two apps (two processes behind one
address, say) given the same key redeem each other's states, each bound to the
principal it was sealed for. Driven with the SDK's own client negotiating
2026-07-28, against two apps served on 127.0.0.1, each with a program (a Model) of its own.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import AsyncGenerator, Generator
from contextlib import ExitStack, asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx
import mcp
import mcp_types as types
import pytest
from mcp.server.request_state import RequestStateSecurity
from starlette.requests import Request

import agentfx
from agentfx.app import App
from agentfx.cli import REQUEST_STATE_KEYS
from agentfx.mcp import HttpApp, http_app
from agentfx.mcp import _http as http_module  # pyright: ignore[reportPrivateUsage]
from tests.http_support import JSON_AND_SSE, MODERN, modern, open_session, post, sdk_client, serving
from tests.test_mcp_confirm import APPROVE, INVALID_STATE, Contract, Model, Person, User, update

pytestmark = pytest.mark.anyio

# The SDK's Streamable HTTP client leaves its SSE readers unfinished on trio
# (see test_mcp_http_sessionless), so these tests run on asyncio.
SDK_CLIENT = pytest.mark.parametrize("anyio_backend", ["asyncio"])
ROOT = Path(__file__).resolve().parents[2]
KEY = "a-shared-request-state-key-of-32-bytes+"
USERS = {"ann": User("ann"), "bea": User("bea")}


def authenticate(request: Request) -> User | None:
    return USERS.get(request.headers.get("authorization", "").removeprefix("Bearer "))


class Served:
    """One app with a program of its own, and an audit of the calls it served."""

    def __init__(self, security: RequestStateSecurity | None) -> None:
        self.log = agentfx.audit_log(principal=lambda user: user.name)
        self.app = App(Contract, init=Model(), update=update, principal=User("nobody"), audit=self.log)
        self.asgi: HttpApp[User] = http_app(self.app, authenticate=authenticate, request_state_security=security)
        self.url = ""

    def confirmed(self) -> list[tuple[str, str, str]]:
        return [(e.capability, str(e.principal), e.outcome) for e in self.log.entries() if e.confirmed]


@asynccontextmanager
async def client(served: Served, token: str) -> AsyncGenerator[mcp.Client]:
    async with sdk_client(served.url, token, mode="auto", elicitation_callback=Person()) as session:
        assert session.protocol_version == "2026-07-28"
        yield session


async def ask(served: Served, token: str, item: str) -> str:
    """The first round at ``served``: the sealed state of an ``InputRequiredResult``."""
    async with client(served, token) as session:
        first = await session.session.call_tool("remove", {"item": item}, allow_input_required=True)
    assert isinstance(first, types.InputRequiredResult) and first.request_state is not None, first
    return first.request_state


async def answer(served: Served, token: str, item: str, state: str) -> Any:
    """The retry at ``served`` with the person's approval: its result, or the error refusing it."""
    async with client(served, token) as session:
        try:
            return await session.session.call_tool(
                "remove", {"item": item}, input_responses=APPROVE, request_state=state, allow_input_required=True
            )
        except mcp.MCPError as refused:
            return refused.error


@contextmanager
def two(security: RequestStateSecurity | None) -> Generator[tuple[Served, Served]]:
    one, other = Served(security), Served(security)
    with ExitStack() as stack:
        for served in (one, other):
            served.url = stack.enter_context(serving(lambda _url, asgi=served.asgi: asgi))
        yield one, other


@SDK_CLIENT
async def test_with_a_shared_key_a_retry_sealed_by_one_app_is_redeemed_once_at_another() -> None:
    with two(RequestStateSecurity(keys=[KEY])) as (one, other):
        state = await ask(one, "ann", "milk")
        approved = await answer(other, "ann", "milk", state)
        assert isinstance(approved, types.CallToolResult) and not approved.is_error, approved
        assert other.confirmed() == [("remove", "ann", "dispatched")]
        assert one.confirmed() == []
        # Single use where it was redeemed.
        replayed = await answer(other, "ann", "milk", state)
        assert isinstance(replayed, types.ErrorData) and replayed.message == INVALID_STATE
        assert len(other.confirmed()) == 1


@SDK_CLIENT
async def test_a_state_sealed_for_one_principal_is_refused_for_another_even_with_the_key() -> None:
    with two(RequestStateSecurity(keys=[KEY])) as (one, other):
        state = await ask(one, "ann", "milk")
        for served in (one, other):
            refused = await answer(served, "bea", "milk", state)
            assert isinstance(refused, types.ErrorData) and refused.message == INVALID_STATE
            assert served.confirmed() == []
        # Still unused: ann redeems it.
        approved = await answer(other, "ann", "milk", state)
        assert isinstance(approved, types.CallToolResult) and not approved.is_error


@SDK_CLIENT
async def test_without_a_shared_key_a_retry_must_return_to_the_app_that_asked() -> None:
    with two(None) as (one, other):
        state = await ask(one, "ann", "milk")
        refused = await answer(other, "ann", "milk", state)
        assert isinstance(refused, types.ErrorData) and refused.message == INVALID_STATE
        assert other.confirmed() == []
        approved = await answer(one, "ann", "milk", state)
        assert isinstance(approved, types.CallToolResult) and not approved.is_error
        assert one.confirmed() == [("remove", "ann", "dispatched")]


# --- agentfx serve: the key ring from the environment -------------------------------------


@asynccontextmanager
async def agentfx_serve(environ: dict[str, str]) -> AsyncGenerator[str]:
    """``agentfx serve examples.todo.app:app --transport http`` on a free port, with ``environ``; its URL."""
    command = [sys.executable, "-m", "agentfx", "serve", "examples.todo.app:app", "--transport", "http", "--port", "0"]
    async with await anyio.open_process(command, cwd=ROOT, env={**os.environ, **environ}) as process:
        try:
            assert process.stderr is not None
            line = b""
            with anyio.fail_after(20):
                while not line.startswith(b"Serving"):
                    line = b""
                    while not line.endswith(b"\n"):
                        line += await process.stderr.receive(1)
            yield line.decode().split()[-1]
        finally:
            process.terminate()
            with anyio.fail_after(10):
                await process.wait()


async def tool(http: httpx.AsyncClient, url: str, name: str, **params: Any) -> Any:
    """One raw 2026-07-28 ``tools/call`` from a client that can elicit: its result."""
    body = modern("tools/call", {"name": name, "arguments": {}, **params})
    body["params"]["_meta"]["io.modelcontextprotocol/clientCapabilities"] = {"elicitation": {"form": {}}}
    status, answer, _ = await post(http, url, body, version=MODERN)
    assert status == 200 and "result" in answer, answer
    return answer["result"]


async def test_agentfx_serve_processes_given_one_key_ring_redeem_each_others_confirmations() -> None:
    ring = {REQUEST_STATE_KEYS: f"{'r' * 40}, {'s' * 40}"}
    async with agentfx_serve(ring) as one, agentfx_serve(ring) as other, httpx.AsyncClient() as http:
        # Two processes, each with its own Model (no --redis): the todo is selected in both.
        for url in (one, other):
            await tool(http, url, "select_todo", arguments={"id": "todo-1"})
        asked = await tool(http, one, "delete_selected_todo")
        state = asked["requestState"]
        assert asked["inputRequests"]["confirm"]["params"]["message"] == 'Delete the todo "Buy milk" (todo-1)?'
        approval = {"confirm": {"action": "accept", "content": {"confirm": True}}}
        deleted = await tool(http, other, "delete_selected_todo", inputResponses=approval, requestState=state)
        assert not deleted.get("isError") and "DeletedTodo" in deleted["content"][0]["text"], deleted


def test_agentfx_serve_refuses_a_short_key_in_a_line_that_names_the_variable() -> None:
    command = [sys.executable, "-m", "agentfx", "serve", "examples.todo.app:app", "--transport", "http", "--port", "0"]
    environ = {**os.environ, REQUEST_STATE_KEYS: "too-short"}
    done = subprocess.run(command, cwd=ROOT, env=environ, capture_output=True, text=True, timeout=30, check=False)
    assert done.returncode == 2
    assert REQUEST_STATE_KEYS in done.stderr and "at least 32 bytes" in done.stderr
    assert "too-short" not in done.stderr and "Traceback" not in done.stderr


PRINCIPAL_TEXTS = """
from mcp.server.auth.provider import AccessToken
from agentfx.mcp._auth import token_identity
from agentfx.mcp._http import _principal_text
from tests.test_mcp_confirm import User
token = AccessToken(token="t", client_id="app", scopes=["a", "b", "c", "d"], subject="ann")
print(_principal_text(token_identity(token)), _principal_text(User("ann")), _principal_text(User("bea")))
"""


def test_a_principal_binds_to_the_same_text_in_every_process() -> None:
    # A token's identity holds its scopes as a set, whose order varies with
    # the process's hash seed; the binding must not.
    texts = [
        subprocess.run(
            [sys.executable, "-c", PRINCIPAL_TEXTS],
            cwd=ROOT,
            env={**os.environ, "PYTHONHASHSEED": seed},
            capture_output=True,
            text=True,
            timeout=30,
            check=True,
        ).stdout.split()
        for seed in ("1", "2")
    ]
    assert texts[0] == texts[1]
    token, ann, bea = texts[0]
    assert len({token, ann, bea}) == 3


@SDK_CLIENT
@pytest.mark.parametrize("shared", [True, False], ids=["shared key", "default key"])
async def test_a_state_outlives_its_principals_server_and_is_still_redeemed_once(
    monkeypatch: pytest.MonkeyPatch, shared: bool
) -> None:
    # A principal waiting on a person holds no request, so its server may be
    # ended to make room for another's: the app's key and single-use ledger
    # outlive it, so the answer is still taken, and a replay still is not.
    monkeypatch.setattr(http_module, "MAX_PRINCIPALS", 1)
    served = Served(RequestStateSecurity(keys=[KEY]) if shared else None)
    with serving(lambda _url: served.asgi) as served.url:

        async def another_principal_calls() -> None:
            async with client(served, "bea") as session:
                assert not (await session.call_tool("select", {"item": "tea"})).is_error
            assert served.asgi.principal_count == 1

        state = await ask(served, "ann", "milk")
        await another_principal_calls()
        approved = await answer(served, "ann", "milk", state)
        assert isinstance(approved, types.CallToolResult) and not approved.is_error, approved
        await another_principal_calls()
        replayed = await answer(served, "ann", "milk", state)
        assert isinstance(replayed, types.ErrorData) and replayed.message == INVALID_STATE
        assert served.confirmed() == [("remove", "ann", "dispatched")]


@pytest.mark.parametrize(
    "answered",
    [
        {"result": {"action": "maybe"}},
        {"result": {"content": {"confirm": True}}},
        # Not even a JSON-RPC answer: the SDK's parser never hands it to the
        # session, which must still hear that its question was answered.
        {"result": []},
        {"result": "yes"},
        {"error": {"code": 1}},
    ],
    ids=str,
)
async def test_an_elicitation_answered_with_something_that_is_not_an_answer_declines(answered: dict[str, object]) -> None:
    # The SDK's own client checks its answer before sending it; another may not.
    log = agentfx.audit_log(principal=lambda user: user.name)
    app = App(Contract, init=Model(), update=update, principal=User("nobody"), audit=log)
    initialize: dict[str, Any] = {
        "jsonrpc": "2.0",
        "id": 0,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-11-25",
            "capabilities": {"elicitation": {"form": {}}},
            "clientInfo": {"name": "raw", "version": "1"},
        },
    }
    call = {"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": "remove", "arguments": {"item": "milk"}}}
    with serving(lambda _url: http_app(app, authenticate=authenticate)) as url:
        async with httpx.AsyncClient(timeout=10, headers={"Authorization": "Bearer ann"}) as http:
            opened = await http.post(url, json=initialize, headers=JSON_AND_SSE)
            session = {**JSON_AND_SSE, "Mcp-Session-Id": opened.headers["mcp-session-id"], "Mcp-Protocol-Version": "2025-11-25"}
            await http.post(url, json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=session)
            asked: list[str] = []
            answer: dict[str, Any] = {}
            with anyio.fail_after(10):
                async with http.stream("POST", url, json=call, headers=session) as response:
                    async for line in response.aiter_lines():
                        if not line.startswith("data: "):
                            continue
                        message = json.loads(line.removeprefix("data: "))
                        if message.get("method") == "elicitation/create":
                            asked.append(message["params"]["message"])
                            reply = {"jsonrpc": "2.0", "id": message["id"], **answered}
                            assert (await http.post(url, json=reply, headers=session)).status_code == 202
                        elif message.get("id") == 7:
                            answer = message["result"]  # the last event: the stream ends after it
    assert asked == ['Remove "milk"?']
    assert answer["isError"] and answer["content"][0]["text"] == 'Declined: Remove "milk"?'
    assert [(e.decision, e.outcome) for e in log.entries()] == [("refused", "AgentAuthorizationError")]


async def test_a_request_that_lost_its_method_is_refused_with_its_id_not_taken_for_an_answer() -> None:
    # Only what has a result or an error is an answer; without either it is
    # the request it meant to be, and is refused as one, in a session or not.
    app = App(Contract, init=Model(), update=update, principal=User("nobody"))
    asgi = http_app(app, authenticate=authenticate)
    url = "http://127.0.0.1/mcp"
    bad = {"jsonrpc": "2.0", "id": 7, "params": {"name": "remove"}}
    async with asgi.running(), httpx.AsyncClient(transport=httpx.ASGITransport(app=asgi), headers={"Authorization": "Bearer ann"}) as http:
        session = await open_session(http, url)
        for headers in ({"session": session}, {"version": MODERN}):
            status, answer, _ = await post(http, url, bad, **headers)
            assert (status, answer["id"], answer["error"]["code"]) == (400, 7, types.INVALID_REQUEST)


@SDK_CLIENT
async def test_a_principal_that_fills_its_ledger_has_only_its_own_retries_refused() -> None:
    served = Served(None)
    served.asgi._approvals._capacity = 1  # pyright: ignore[reportPrivateUsage]  # for LEDGER_CAPACITY
    with serving(lambda _url: served.asgi) as served.url:
        approved = await answer(served, "ann", "milk", await ask(served, "ann", "milk"))
        assert isinstance(approved, types.CallToolResult) and not approved.is_error
        refused = await answer(served, "ann", "tea", await ask(served, "ann", "tea"))
        assert isinstance(refused, types.ErrorData) and refused.message == INVALID_STATE
        # Another principal's ledger is its own.
        approved = await answer(served, "bea", "tea", await ask(served, "bea", "tea"))
        assert isinstance(approved, types.CallToolResult) and not approved.is_error, approved
    assert served.confirmed() == [("remove", "ann", "dispatched"), ("remove", "bea", "dispatched")]
