"""agentfx.a2a: the principals an A2A app holds are bounded, in-process, through the SDK's own client.

:func:`agentfx.a2a.a2a_app` is driven through httpx's ASGI transport with its
lifespan run around it, on asyncio only (the SDK's server side is built on
``asyncio.Task``; see ``tests/test_a2a.py``). ``MAX_PRINCIPALS`` is patched
small before each app is built. The same behaviour over a real socket, on
asyncio and trio, is ``tests/integration/test_a2a_bounds_http.py``.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncGenerator, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import anyio
import httpx
import msgspec
import pytest
from a2a.client import Client, ClientConfig, ClientFactory
from a2a.helpers.proto_helpers import new_data_part
from a2a.types.a2a_pb2 import AgentCard, CancelTaskRequest, Message, Role, SendMessageRequest, Task, TaskState
from a2a.utils.errors import TaskNotFoundError, UnsupportedOperationError
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from starlette.applications import Starlette
from starlette.requests import Request

import agentfx
from agentfx.a2a import MAX_CONFIRM_REASKS, a2a_app, agent_card
from agentfx.a2a import _app as a2a_app_module  # pyright: ignore[reportPrivateUsage]
from agentfx.a2a._app import PRINCIPALS_AT_CAPACITY
from agentfx.runtime import AgentRuntime
from agentfx.testing import RecordingHost


class Model(msgspec.Struct, frozen=True):
    pings: int = 0


class Ping(msgspec.Struct, frozen=True, tag=True):
    pass


class Erased(msgspec.Struct, frozen=True, tag=True):
    pass


Msg = Ping | Erased


def update(model: Model, message: Msg) -> Model:
    return msgspec.structs.replace(model, pings=model.pings + 1) if isinstance(message, Ping) else model


CONTRACT = agentfx.define(
    agentfx.expose(
        Msg,
        agentfx.variant(Ping, "Ping", name="ping"),
        agentfx.variant(Erased, "Erase", name="erase", authorize=lambda _: agentfx.Confirm("Erase?")),
    )
)
CARD = agent_card(CONTRACT, name="t", description="t", url="http://127.0.0.1/a2a", version="1")
USERS = [f"u{i}" for i in range(4)]


def by_header(request: Request) -> str | None:
    return request.headers.get("x-user")


def principals_of(asgi: Starlette) -> Any:
    return asgi.user_middleware[0].kwargs["principals"]


def held(asgi: Starlette) -> set[str]:
    principals = principals_of(asgi)
    return {user for user in USERS if principals.held(user) is not None}


@asynccontextmanager
async def clients(asgi: Starlette, card: AgentCard = CARD) -> AsyncGenerator[Callable[[str], Client]]:
    """One SDK client per user, made on first use, over the app's ASGI transport, its lifespan run around them."""
    async with asgi.router.lifespan_context(asgi), AsyncExitStack() as stack:
        made: dict[str, Client] = {}

        def client(user: str) -> Client:
            if user not in made:
                http = httpx.AsyncClient(
                    transport=httpx.ASGITransport(app=asgi),
                    base_url="http://127.0.0.1",
                    headers={"A2A-Version": "1.0", "x-user": user},
                )
                stack.push_async_callback(http.aclose)
                made[user] = ClientFactory(ClientConfig(httpx_client=http, streaming=False)).create(card)
                stack.push_async_callback(made[user].close)
            return made[user]

        yield client


def request(data: object, task_id: str = "") -> SendMessageRequest:
    return SendMessageRequest(
        message=Message(message_id=uuid.uuid4().hex, role=Role.ROLE_USER, task_id=task_id, parts=[new_data_part(data)])
    )


async def sent(client: Client, data: object, task_id: str = "") -> Task:
    (response,) = [response async for response in client.send_message(request(data, task_id))]
    return response.task


def app_on(host_audit: agentfx.AuditLog) -> agentfx.App[Model, Msg, Any]:
    return agentfx.App(CONTRACT, init=Model(), update=update, audit=host_audit)


# --- A sequence of calls against a model of the rule ----------------------------------


@dataclass
class Rule:
    """What the app should hold: principals least recently seen first, and each one's tasks waiting for an answer."""

    bound: int
    held: list[str] = field(default_factory=lambda: [])
    waiting: dict[str, list[str]] = field(default_factory=lambda: {})
    slips: dict[str, int] = field(default_factory=lambda: {})

    def admit(self, user: str) -> bool:
        if user in self.held:
            self.held.remove(user)
        elif len(self.held) >= self.bound:
            idle = next((u for u in self.held if not self.waiting.get(u)), None)
            if idle is None:
                return False
            self.held.remove(idle)
        self.held.append(user)
        return True


OPS = st.lists(
    st.tuples(st.sampled_from(USERS), st.sampled_from(["ping", "erase", "yes", "no", "slip", "cancel"])),
    min_size=1,
    max_size=14,
)


async def run_ops(ops: list[tuple[str, str]]) -> None:
    bound = 2
    a2a_app_module.MAX_PRINCIPALS = bound
    audit = agentfx.audit_log()
    asgi = a2a_app(app_on(audit), CARD, authenticate=by_header)
    rule = Rule(bound)
    dispatched = 0
    async with clients(asgi) as client:
        for user, op in ops:
            waiting = rule.waiting.setdefault(user, [])
            if op in ("yes", "no", "slip", "cancel") and not waiting:
                op = "ping"  # nothing of this user's to answer: a new call instead
            expected = rule.admit(user)
            calls_before = len(audit.entries())
            try:
                if op in ("ping", "erase"):
                    task = await sent(client(user), {"skill": op})
                elif op == "cancel":
                    task = await client(user).cancel_task(CancelTaskRequest(id=waiting[0]))
                else:
                    answer = {"yes": {"confirm": True}, "no": {"confirm": False}, "slip": {"confirm": "?"}}[op]
                    task = await sent(client(user), answer, waiting[0])
            except UnsupportedOperationError as refused:
                assert not expected, (user, op, rule)
                event("a new principal refused")
                assert PRINCIPALS_AT_CAPACITY in str(refused)
                assert len(audit.entries()) == calls_before  # nothing ran for it
                continue
            assert expected, (user, op, rule)
            state = task.status.state
            if op == "erase":
                assert state == TaskState.TASK_STATE_INPUT_REQUIRED
                waiting.append(task.id)
            elif op == "slip":
                rule.slips[task.id] = rule.slips.get(task.id, 0) + 1
                if rule.slips[task.id] <= MAX_CONFIRM_REASKS:
                    assert state == TaskState.TASK_STATE_INPUT_REQUIRED
                else:
                    assert state == TaskState.TASK_STATE_REJECTED
                    waiting.pop(0)
            elif op in ("yes", "no", "cancel"):
                waiting.pop(0)
                finished = {"yes": TaskState.TASK_STATE_COMPLETED, "no": TaskState.TASK_STATE_REJECTED}
                assert state == finished.get(op, TaskState.TASK_STATE_CANCELED)
            else:
                assert state == TaskState.TASK_STATE_COMPLETED
            dispatched += op in ("ping", "yes")
            # The structure never passes its bound, and holds exactly whom the rule says.
            assert len(principals_of(asgi)) <= bound
            assert held(asgi) == set(rule.held)
    assert [e.decision for e in audit.entries()].count("dispatched") == dispatched


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(OPS)
def test_any_sequence_of_calls_holds_at_most_the_bound_and_refuses_only_when_every_slot_is_live(
    ops: list[tuple[str, str]],
) -> None:
    saved = a2a_app_module.MAX_PRINCIPALS
    try:
        asyncio.run(run_ops(ops))
    finally:
        a2a_app_module.MAX_PRINCIPALS = saved


# --- Edges ------------------------------------------------------------------------------

ASYNCIO = pytest.mark.parametrize("anyio_backend", ["asyncio"])


@ASYNCIO
@pytest.mark.anyio
async def test_concurrent_new_principals_never_pass_the_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(a2a_app_module, "MAX_PRINCIPALS", 2)
    seen: list[int] = []
    asgi: Starlette

    async def slow(request: Request) -> str | None:
        seen.append(len(principals_of(asgi)))
        await anyio.sleep(0)
        return request.headers.get("x-user")

    audit = agentfx.audit_log()
    asgi = a2a_app(app_on(audit), CARD, authenticate=slow)
    outcomes: list[str] = []
    async with clients(asgi) as client:
        first = await sent(client("u0"), {"skill": "erase"})  # u0 stays live throughout

        async def ping(user: str) -> None:
            try:
                task = await sent(client(user), {"skill": "ping"})
                outcomes.append(TaskState.Name(task.status.state))
            except UnsupportedOperationError:
                outcomes.append("refused")

        async with anyio.create_task_group() as group:
            for user in USERS[1:] * 3:
                group.start_soon(ping, user)
        seen.append(len(principals_of(asgi)))
        answered = await sent(client("u0"), {"confirm": True}, first.id)
    assert max(seen) <= 2
    assert "TASK_STATE_COMPLETED" in outcomes
    assert set(outcomes) <= {"TASK_STATE_COMPLETED", "refused"}
    assert [e.decision for e in audit.entries()].count("dispatched") == outcomes.count("TASK_STATE_COMPLETED") + 1
    assert answered.status.state == TaskState.TASK_STATE_COMPLETED


@ASYNCIO
@pytest.mark.anyio
async def test_a_waiting_task_parked_past_the_timeout_holds_no_principal_and_the_store_evicts_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(a2a_app_module, "MAX_PRINCIPALS", 2)
    monkeypatch.setattr(a2a_app_module, "PARKED_TASK_TIMEOUT", 0.05)
    asgi = a2a_app(app_on(agentfx.audit_log()), CARD, authenticate=by_header, max_tasks=2)
    async with clients(asgi) as client:
        first = await sent(client("u0"), {"skill": "erase"})
        await sent(client("u1"), {"skill": "erase"})
        with pytest.raises(UnsupportedOperationError, match="too many callers"):
            await sent(client("u2"), {"skill": "ping"})
        await anyio.sleep(0.1)
        # Parked past the timeout, neither waiting task holds its principal; u2's
        # task takes the room of the oldest, which the store evicts.
        done = await sent(client("u2"), {"skill": "ping"})
        assert done.status.state == TaskState.TASK_STATE_COMPLETED
        assert "u2" in held(asgi) and "u0" not in held(asgi)
        # u0's evicted task can no longer be answered.
        with pytest.raises(TaskNotFoundError):
            await sent(client("u0"), {"confirm": True}, first.id)


@ASYNCIO
@pytest.mark.anyio
async def test_a_refused_principal_never_reaches_runtime_for(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(a2a_app_module, "MAX_PRINCIPALS", 1)
    seen: list[object] = []
    hosts: list[RecordingHost[None, Any, Any]] = []

    def runtime_for(principal: object) -> AgentRuntime[Any, Any]:
        seen.append(principal)
        hosts.append(RecordingHost(None, principal=principal))
        return agentfx.bind(CONTRACT, host=hosts[-1].host)

    asgi = a2a_app(runtime_for, CARD, authenticate=by_header)
    async with clients(asgi) as client:
        waiting = await sent(client("u0"), {"skill": "erase"})
        with pytest.raises(UnsupportedOperationError, match="too many callers"):
            await sent(client("u1"), {"skill": "ping"})
        await sent(client("u0"), {"confirm": False}, waiting.id)
        done = await sent(client("u1"), {"skill": "ping"})
    assert done.status.state == TaskState.TASK_STATE_COMPLETED
    assert seen == ["u0", "u0", "u1"]  # the call, its answer, then u1's one served call: the refused reached nothing
    assert [h.dispatched for h in hosts] == [[], [], [Ping()]]


@ASYNCIO
@pytest.mark.anyio
async def test_a_released_principal_takes_its_runtime_with_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(a2a_app_module, "MAX_PRINCIPALS", 1)
    asgi = a2a_app(app_on(agentfx.audit_log()), CARD, authenticate=by_header)
    principals = principals_of(asgi)
    async with clients(asgi) as client:
        await sent(client("u0"), {"skill": "ping"})
        u0 = principals.held("u0")
        assert u0 is not None and u0.runtime is not None
        await sent(client("u1"), {"skill": "ping"})
        assert principals.held("u0") is None and principals.held("u1").runtime is not None
        await sent(client("u0"), {"skill": "ping"})
        # A new tenant, with a runtime and an owner of its own.
        assert principals.held("u0") is not u0 and principals.held("u0").owner != u0.owner
    assert len(principals) == 1


@ASYNCIO
@pytest.mark.anyio
async def test_without_authenticate_nothing_is_held() -> None:
    asgi = a2a_app(app_on(agentfx.audit_log()), CARD)
    async with clients(asgi) as client:
        for user in USERS:
            await sent(client(user), {"skill": "ping"})
    assert len(principals_of(asgi)) == 0


@ASYNCIO
@pytest.mark.anyio
@pytest.mark.parametrize("store", ["default", "sdk"], ids=["bounded-store", "any-task-store"])
async def test_liveness_is_read_from_the_task_store_whichever_it_is(monkeypatch: pytest.MonkeyPatch, store: str) -> None:
    from a2a.server.tasks import InMemoryTaskStore

    monkeypatch.setattr(a2a_app_module, "MAX_PRINCIPALS", 2)
    audit = agentfx.audit_log()
    given_store = InMemoryTaskStore() if store == "sdk" else None
    asgi = a2a_app(app_on(audit), CARD, authenticate=by_header, task_store=given_store)
    async with clients(asgi) as client:
        waiting = await sent(client("u0"), {"skill": "erase"})
        await sent(client("u1"), {"skill": "ping"})
        await sent(client("u2"), {"skill": "ping"})
        assert held(asgi) == {"u0", "u2"}  # u1 was idle; u0's task waits
        also = await sent(client("u2"), {"skill": "erase"})
        with pytest.raises(UnsupportedOperationError, match="too many callers"):
            await sent(client("u3"), {"skill": "ping"})
        done = await sent(client("u0"), {"confirm": True}, waiting.id)
        late = await sent(client("u3"), {"skill": "ping"})
    assert also.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
    assert done.status.state == late.status.state == TaskState.TASK_STATE_COMPLETED
    assert held(asgi) == {"u2", "u3"}
    assert [e.capability for e in audit.entries() if e.decision == "dispatched"] == ["ping", "ping", "erase", "ping"]


@ASYNCIO
@pytest.mark.anyio
async def test_an_unhashable_principal_is_a_500_and_holds_nothing() -> None:
    def unhashable(_request: Request) -> list[str]:
        return ["u0"]

    asgi = a2a_app(app_on(agentfx.audit_log()), CARD, authenticate=unhashable)
    async with asgi.router.lifespan_context(asgi):
        transport = httpx.ASGITransport(app=asgi)
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as http:
            body = {"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": "t"}}
            answer = await http.post("/a2a", json=body, headers={"A2A-Version": "1.0"})
    assert answer.status_code == 500 and answer.json()["error"]["message"] == "Internal error"
    assert len(principals_of(asgi)) == 0
