"""agentfx.a2a: requests a client can shape at will, in-process, as raw JSON-RPC and through the SDK's own client.

:func:`agentfx.a2a.a2a_app` is driven through httpx's ASGI transport with its
lifespan run around it, on asyncio only (the SDK's server side is built on
``asyncio.Task``; see ``tests/test_a2a.py``). The number refusals over a real
socket, on asyncio and trio, are ``tests/integration/test_a2a_numbers.py``.
"""

from __future__ import annotations

import json
import logging
import threading
import time
import uuid
from collections.abc import AsyncGenerator, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field
from typing import Any, cast

import anyio
import httpx
import msgspec
import pytest
from a2a.client import Client, ClientConfig, ClientFactory
from a2a.helpers.proto_helpers import new_data_part
from a2a.server.tasks import InMemoryTaskStore
from a2a.types.a2a_pb2 import GetTaskRequest, Message, Part, Role, SendMessageRequest, Task, TaskState
from a2a.utils.errors import TaskNotFoundError, UnsupportedOperationError
from google.protobuf import struct_pb2
from starlette.applications import Starlette
from starlette.requests import Request

import agentfx
from agentfx.a2a import BoundedTaskStore, a2a_app, agent_card
from agentfx.a2a import _app as a2a_app_module  # pyright: ignore[reportPrivateUsage]
from agentfx.a2a import _executor as a2a_executor  # pyright: ignore[reportPrivateUsage]
from agentfx.a2a._app import NOT_FINITE
from agentfx.runtime import AgentRuntime
from agentfx.testing import RecordingHost
from tests.test_exports import _run  # pyright: ignore[reportPrivateUsage]

ASYNCIO = pytest.mark.parametrize("anyio_backend", ["asyncio"])


class Model(msgspec.Struct, frozen=True):
    pings: int = 0


class Ping(msgspec.Struct, frozen=True, tag=True):
    pass


class Erased(msgspec.Struct, frozen=True, tag=True):
    pass


class Echoed(msgspec.Struct, frozen=True, tag=True):
    text: str


Msg = Ping | Erased | Echoed


def update(model: Model, message: Msg) -> Model:
    return msgspec.structs.replace(model, pings=model.pings + 1) if isinstance(message, Ping) else model


CONTRACT = agentfx.define(
    agentfx.expose(
        Msg,
        agentfx.variant(Ping, "Ping", name="ping"),
        agentfx.variant(Erased, "Erase", name="erase", authorize=lambda _: agentfx.Confirm("Erase?")),
        agentfx.variant(Echoed, "Echo", name="echo"),
    )
)
CARD = agent_card(CONTRACT, name="t", description="t", url="http://127.0.0.1/a2a", version="1")


def by_header(request: Request) -> str | None:
    return request.headers.get("x-user")


def store_of(asgi: Starlette) -> BoundedTaskStore:
    principals: Any = asgi.user_middleware[0].kwargs["principals"]
    store: BoundedTaskStore = principals._tasks
    return store


@asynccontextmanager
async def raw_client(asgi: Starlette) -> AsyncGenerator[httpx.AsyncClient]:
    async with asgi.router.lifespan_context(asgi):
        transport = httpx.ASGITransport(app=asgi)
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1", timeout=30) as http:
            yield http


async def post(http: httpx.AsyncClient, body: str, version: str = "1.0") -> dict[str, Any]:
    """``body`` as sent (a JSON text, so it may hold ``1e400``), and the JSON answer."""
    headers = {"content-type": "application/json", "A2A-Version": version}
    response = await http.post("/a2a", content=body.encode(), headers=headers)
    assert response.status_code == 200
    if response.headers["content-type"].startswith("text/event-stream"):
        # A stream served: its last event.
        events = [line[len("data:") :] for line in response.text.splitlines() if line.startswith("data:")]
        last: dict[str, Any] = json.loads(events[-1])
        return last
    answer: dict[str, Any] = response.json()
    return answer


def send(data: str, *, task_id: str = "", metadata: str = "", part_metadata: str = "", method: str = "SendMessage") -> str:
    """A 1.0 send whose one data part is the JSON text ``data``."""
    part = '{"data":%s%s}' % (data, f',"metadata":{part_metadata}' if part_metadata else "")
    extra = (f',"taskId":"{task_id}"' if task_id else "") + (f',"metadata":{metadata}' if metadata else "")
    message = '{"messageId":"%s","role":"ROLE_USER","parts":[%s]%s}' % (uuid.uuid4().hex, part, extra)
    return '{"jsonrpc":"2.0","id":7,"method":"%s","params":{"message":%s}}' % (method, message)


def send_0_3(data: str, *, metadata: str = "", method: str = "message/send") -> str:
    extra = f',"metadata":{metadata}' if metadata else ""
    message = '{"kind":"message","messageId":"%s","role":"user","parts":[{"kind":"data","data":%s}]%s}' % (
        uuid.uuid4().hex,
        data,
        extra,
    )
    return '{"jsonrpc":"2.0","id":7,"method":"%s","params":{"message":%s}}' % (method, message)


def refused_not_finite(answer: dict[str, Any]) -> bool:
    error: dict[str, Any] = answer.get("error") or {}
    return answer.get("id") == 7 and error.get("code") == -32602 and error.get("message") == NOT_FINITE


# --- 1. A number that is not finite ---------------------------------------------------

NOT_FINITE_BODIES = {
    "1.0, in the input": (send('{"skill":"echo","input":{"text":"a","x":1e400}}'), "1.0"),
    "1.0, negative, deep in the input": (send('{"skill":"echo","input":{"text":"a","x":[{"y":-1e999}]}}'), "1.0"),
    "1.0, NaN": (send('{"skill":"echo","input":{"text":"a","x":NaN}}'), "1.0"),
    "1.0, Infinity": (send('{"skill":"ping","input":{"x":Infinity}}'), "1.0"),
    "1.0, message metadata": (send('{"skill":"ping"}', metadata='{"x":1e400}'), "1.0"),
    "1.0, part metadata": (send('{"skill":"ping"}', part_metadata='{"x":-1e999}'), "1.0"),
    "1.0, streaming, message metadata": (
        send('{"skill":"ping"}', metadata='{"x":1e400}', method="SendStreamingMessage"),
        "1.0",
    ),
    "0.3, in the input": (send_0_3('{"skill":"echo","input":{"text":"a","x":1e400}}'), "0.3"),
    "0.3, message metadata": (send_0_3('{"skill":"ping"}', metadata='{"x":1e400}'), "0.3"),
    "0.3, streaming": (send_0_3('{"skill":"ping"}', metadata='{"x":1e400}', method="message/stream"), "0.3"),
}


@ASYNCIO
@pytest.mark.anyio
@pytest.mark.parametrize("name", list(NOT_FINITE_BODIES))
async def test_a_message_holding_a_number_that_is_not_finite_is_invalid_params_with_nothing_kept_or_dispatched(
    name: str,
) -> None:
    body, version = NOT_FINITE_BODIES[name]
    audit = agentfx.audit_log()
    asgi = a2a_app(agentfx.App(CONTRACT, init=Model(), update=update, audit=audit), CARD)
    async with raw_client(asgi) as http:
        answer = await post(http, body, version)
        # The same message with a finite number is served: only the number was refused.
        served = await post(http, body.replace("1e400", "1").replace("-1e999", "2").replace("NaN", "3").replace("Infinity", "4"), version)
    assert refused_not_finite(answer), answer
    assert "error" not in served, served
    assert store_of(asgi).size == 1  # the one served
    assert len(audit.entries()) == 1


@ASYNCIO
@pytest.mark.anyio
async def test_an_answer_holding_a_number_that_is_not_finite_leaves_the_waiting_task_as_it_was() -> None:
    audit = agentfx.audit_log()
    asgi = a2a_app(agentfx.App(CONTRACT, init=Model(), update=update, audit=audit), CARD)
    async with raw_client(asgi) as http:
        waiting = (await post(http, send('{"skill":"erase"}')))["result"]["task"]
        store = store_of(asgi)
        size = store.bytes
        answer = await post(http, send('{"confirm":true,"note":1e400}', task_id=waiting["id"]))
        read = await post(http, json.dumps({"jsonrpc": "2.0", "id": 8, "method": "GetTask", "params": {"id": waiting["id"]}}))
        assert store.bytes == size  # nothing of the answer kept
        done = await post(http, send('{"confirm":true}', task_id=waiting["id"]))
    assert refused_not_finite(answer), answer
    assert read["result"] == waiting
    assert done["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED"
    assert [(e.capability, e.decision) for e in audit.entries()] == [("erase", "refused"), ("erase", "dispatched")]


def test_the_executor_takes_a_data_part_that_is_not_finite_for_a_malformed_message() -> None:
    # AgentfxExecutor under a request handler of one's own, which lets such a message through.
    data = struct_pb2.Value()
    data.struct_value.fields["skill"].string_value = "echo"
    data.struct_value.fields["input"].struct_value.fields["x"].number_value = float("inf")
    message = Message(message_id="m", role=Role.ROLE_USER, parts=[Part(data=data)])
    with pytest.raises(a2a_executor._Malformed):  # pyright: ignore[reportPrivateUsage]
        a2a_executor._call(message)  # pyright: ignore[reportPrivateUsage]


# --- 2. Each request's own principal ------------------------------------------------------


@dataclass(frozen=True)
class Token:
    """A verified token's claims: equal (and owning the same tasks) by subject, whatever its scopes."""

    subject: str
    scopes: frozenset[str] = field(default=frozenset(), compare=False)


def by_token(request: Request) -> Token | None:
    subject = request.headers.get("x-user")
    if subject is None:
        return None
    return Token(subject, frozenset(s for s in request.headers.get("x-scopes", "").split(",") if s))


SEEN: list[frozenset[str]] = []


def admin_only(request: agentfx.AuthorizationRequest[Token, Any, Model]) -> bool:
    SEEN.append(request.principal.scopes)
    return "admin" in request.principal.scopes


def admin_confirms(request: agentfx.AuthorizationRequest[Token, Any, Model]) -> bool | agentfx.Confirm:
    return admin_only(request) and agentfx.Confirm("Erase?")


SCOPED = agentfx.define(
    agentfx.expose(
        Msg,
        agentfx.variant(Ping, "Ping", name="ping", authorize=admin_only),
        agentfx.variant(Erased, "Erase", name="erase", authorize=admin_confirms),
        agentfx.variant(Echoed, "Echo", name="echo"),
    )
)
SCOPED_CARD = agent_card(SCOPED, name="t", description="t", url="http://127.0.0.1/a2a", version="1")


@asynccontextmanager
async def sdk_clients(asgi: Starlette) -> AsyncGenerator[Callable[..., Client]]:
    """The SDK's client, one per set of headers, over the app's ASGI transport, its lifespan run around them."""
    async with asgi.router.lifespan_context(asgi), AsyncExitStack() as stack:

        def client(**headers: str) -> Client:
            http = httpx.AsyncClient(
                transport=httpx.ASGITransport(app=asgi),
                base_url="http://127.0.0.1",
                headers={"A2A-Version": "1.0", **headers},
            )
            stack.push_async_callback(http.aclose)
            made = ClientFactory(ClientConfig(httpx_client=http, streaming=False)).create(SCOPED_CARD)
            stack.push_async_callback(made.close)
            return made

        yield client


async def sent(client: Client, data: object, task_id: str = "") -> Task:
    message = Message(message_id=uuid.uuid4().hex, role=Role.ROLE_USER, task_id=task_id, parts=[new_data_part(data)])
    (response,) = [response async for response in client.send_message(SendMessageRequest(message=message))]
    return response.task


@ASYNCIO
@pytest.mark.anyio
async def test_authorize_sees_each_requests_own_principal_not_the_first_equal_one() -> None:
    SEEN.clear()
    audit = agentfx.audit_log(principal=lambda token: sorted(cast("Token", token).scopes))
    asgi = a2a_app(agentfx.App(SCOPED, init=Model(), update=update, audit=audit), SCOPED_CARD, authenticate=by_token)
    async with sdk_clients(asgi) as client:
        admin = client(**{"x-user": "ann", "x-scopes": "admin"})
        revoked = client(**{"x-user": "ann"})
        first = await sent(admin, {"skill": "ping"})
        second = await sent(revoked, {"skill": "ping"})
        again = await sent(admin, {"skill": "ping"})
        # Equal principals still own the same tasks.
        read = await revoked.get_task(GetTaskRequest(id=first.id))
    assert [t.status.state for t in (first, second, again)] == [
        TaskState.TASK_STATE_COMPLETED,
        TaskState.TASK_STATE_REJECTED,
        TaskState.TASK_STATE_COMPLETED,
    ]
    assert SEEN == [frozenset({"admin"}), frozenset(), frozenset({"admin"})]
    assert [e.principal for e in audit.entries()] == [["admin"], [], ["admin"]]
    assert read.id == first.id


@ASYNCIO
@pytest.mark.anyio
async def test_an_answer_is_authorized_as_the_principal_that_sent_it() -> None:
    SEEN.clear()
    audit = agentfx.audit_log()
    asgi = a2a_app(agentfx.App(SCOPED, init=Model(), update=update, audit=audit), SCOPED_CARD, authenticate=by_token)
    async with sdk_clients(asgi) as client:
        admin = client(**{"x-user": "ann", "x-scopes": "admin"})
        revoked = client(**{"x-user": "ann"})
        waiting = await sent(admin, {"skill": "erase"})
        answered = await sent(revoked, {"confirm": True}, waiting.id)
    assert waiting.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
    assert answered.status.state == TaskState.TASK_STATE_REJECTED
    assert SEEN == [frozenset({"admin"}), frozenset()]
    assert [e.decision for e in audit.entries()] == ["refused", "refused"]


@ASYNCIO
@pytest.mark.anyio
async def test_runtime_for_is_given_each_requests_own_principal() -> None:
    given: list[frozenset[str]] = []

    def runtime_for(principal: Token) -> AgentRuntime[Any, Any]:
        given.append(principal.scopes)
        return agentfx.bind(SCOPED, host=RecordingHost(Model(), principal=principal).host)

    asgi = a2a_app(runtime_for, SCOPED_CARD, authenticate=by_token)
    async with sdk_clients(asgi) as client:
        await sent(client(**{"x-user": "ann", "x-scopes": "admin"}), {"skill": "ping"})
        await sent(client(**{"x-user": "ann", "x-scopes": "other"}), {"skill": "ping"})
    assert given == [frozenset({"admin"}), frozenset({"other"})]


# --- 3. An unanswered confirmation holds its principal for PARKED_TASK_TIMEOUT at most --------


def user_client(asgi: Starlette, stack: AsyncExitStack, user: str) -> Client:
    http = httpx.AsyncClient(
        transport=httpx.ASGITransport(app=asgi), base_url="http://127.0.0.1", headers={"A2A-Version": "1.0", "x-user": user}
    )
    stack.push_async_callback(http.aclose)
    client = ClientFactory(ClientConfig(httpx_client=http, streaming=False)).create(CARD)
    stack.push_async_callback(client.close)
    return client


@ASYNCIO
@pytest.mark.anyio
@pytest.mark.parametrize("store", ["default", "sdk"], ids=["bounded-store", "any-task-store"])
async def test_a_task_left_waiting_past_the_parked_timeout_no_longer_keeps_new_principals_out(
    monkeypatch: pytest.MonkeyPatch, store: str
) -> None:
    monkeypatch.setattr(a2a_app_module, "MAX_PRINCIPALS", 2)
    monkeypatch.setattr(a2a_app_module, "PARKED_TASK_TIMEOUT", 0.5)
    audit = agentfx.audit_log()
    app = agentfx.App(CONTRACT, init=Model(), update=update, audit=audit)
    asgi = a2a_app(app, CARD, authenticate=by_header, task_store=InMemoryTaskStore() if store == "sdk" else None)
    principals: Any = asgi.user_middleware[0].kwargs["principals"]
    async with asgi.router.lifespan_context(asgi), AsyncExitStack() as stack:
        u0, u1, u2 = (user_client(asgi, stack, user) for user in ("u0", "u1", "u2"))
        forgotten = await sent(u0, {"skill": "erase"})
        await anyio.sleep(0.1)
        kept = await sent(u1, {"skill": "erase"})
        # Both wait less than the timeout: both are held, a new principal is refused.
        with pytest.raises(UnsupportedOperationError, match="too many callers"):
            await sent(u2, {"skill": "ping"})
        await anyio.sleep(0.45)  # u0's task has waited past it, u1's not yet
        done = await sent(u2, {"skill": "ping"})
        assert principals.held("u0") is None and principals.held("u1") is not None
        # u1 is still served as it was; u0 comes back as a new principal (its task gone with it).
        confirmed = await sent(u1, {"confirm": True}, kept.id)
        with pytest.raises(TaskNotFoundError):
            await user_client(asgi, stack, "u0").get_task(GetTaskRequest(id=forgotten.id))
    assert done.status.state == confirmed.status.state == TaskState.TASK_STATE_COMPLETED
    assert [e.capability for e in audit.entries() if e.decision == "dispatched"] == ["ping", "erase"]


# --- 4. An authenticate that raises TimeoutError itself ------------------------------------


def times_out_sync(_request: Request) -> str:
    raise TimeoutError("idp.example:443 read timed out")  # socket.timeout is one


async def times_out_async(_request: Request) -> str:
    raise TimeoutError("idp.example:443 read timed out")


@ASYNCIO
@pytest.mark.anyio
@pytest.mark.parametrize("hook", [times_out_sync, times_out_async], ids=["sync", "async"])
async def test_an_authenticate_raising_timeout_error_is_a_500_logged_with_its_traceback(
    hook: Callable[[Request], Any], caplog: pytest.LogCaptureFixture
) -> None:
    audit = agentfx.audit_log()
    asgi = a2a_app(agentfx.App(CONTRACT, init=Model(), update=update, audit=audit), CARD, authenticate=hook)
    async with raw_client(asgi) as http:
        with caplog.at_level(logging.ERROR, logger="agentfx.a2a"):
            response = await http.post("/a2a", content=send('{"skill":"ping"}').encode(), headers={"A2A-Version": "1.0"})
    assert response.status_code == 500 and response.json()["error"]["message"] == "Internal error"
    (record,) = [r for r in caplog.records if r.name == "agentfx.a2a"]
    assert record.getMessage() == "authenticate raised"
    assert record.exc_info is not None and record.exc_info[0] is TimeoutError
    assert audit.entries() == []


@ASYNCIO
@pytest.mark.anyio
async def test_an_authenticate_past_the_deadline_is_still_a_503(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(a2a_app_module, "AUTHENTICATE_TIMEOUT", 0.05)

    async def hangs(_request: Request) -> str:
        await anyio.sleep(10)
        return "ann"

    asgi = a2a_app(agentfx.App(CONTRACT, init=Model(), update=update), CARD, authenticate=hangs)
    async with raw_client(asgi) as http:
        with caplog.at_level(logging.ERROR, logger="agentfx.a2a"):
            response = await http.post("/a2a", content=send('{"skill":"ping"}').encode(), headers={"A2A-Version": "1.0"})
    assert response.status_code == 503
    assert [r.getMessage() for r in caplog.records if r.name == "agentfx.a2a"] == ["authenticate took longer than 0.05s"]


# --- 5. A synchronous authenticate is bounded, and holds up nothing else --------------------


@ASYNCIO
@pytest.mark.anyio
async def test_a_sync_authenticate_that_blocks_is_a_503_at_the_deadline_and_others_are_served_meanwhile(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(a2a_app_module, "AUTHENTICATE_TIMEOUT", 0.3)
    release = threading.Event()

    def blocking(request: Request) -> str | None:
        user = request.headers.get("x-user")
        if user == "slow":
            release.wait(10)  # a blocking call to an identity provider
        return user

    audit = agentfx.audit_log()
    asgi = a2a_app(agentfx.App(CONTRACT, init=Model(), update=update, audit=audit), CARD, authenticate=blocking)
    answered: dict[str, tuple[int, float]] = {}
    async with raw_client(asgi) as http:
        started = time.monotonic()

        async def ask(user: str, delay: float) -> None:
            await anyio.sleep(delay)
            headers = {"A2A-Version": "1.0", "x-user": user}
            response = await http.post("/a2a", content=send('{"skill":"ping"}').encode(), headers=headers)
            answered[user] = (response.status_code, time.monotonic() - started)

        try:
            async with anyio.create_task_group() as group:
                group.start_soon(ask, "slow", 0)
                group.start_soon(ask, "fast", 0.05)
        finally:
            release.set()
    assert answered["slow"][0] == 503 and 0.3 <= answered["slow"][1] < 2
    assert answered["fast"][0] == 200 and answered["fast"][1] < 0.3  # not held up behind the blocked hook
    assert [e.decision for e in audit.entries()] == ["dispatched"]


@ASYNCIO
@pytest.mark.anyio
async def test_sync_authenticate_calls_left_running_are_bounded(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(a2a_app_module, "AUTHENTICATE_TIMEOUT", 0.1)
    monkeypatch.setattr(a2a_app_module, "_AUTHENTICATE_THREADS", 1)
    release = threading.Event()
    calls: list[str | None] = []

    def blocking(request: Request) -> str | None:
        calls.append(request.headers.get("x-user"))
        if request.headers.get("x-user") == "slow":
            release.wait(10)
        return request.headers.get("x-user")

    asgi = a2a_app(agentfx.App(CONTRACT, init=Model(), update=update), CARD, authenticate=blocking)
    async with raw_client(asgi) as http:

        async def status(user: str) -> int:
            headers = {"A2A-Version": "1.0", "x-user": user}
            return (await http.post("/a2a", content=send('{"skill":"ping"}').encode(), headers=headers)).status_code

        try:
            assert await status("slow") == 503  # its thread still blocked
            with caplog.at_level(logging.ERROR, logger="agentfx.a2a"):
                assert await status("fast") == 503  # no thread for it: refused at once
            assert calls == ["slow"]  # the hook was not called for it
        finally:
            release.set()
        with anyio.fail_after(5):
            while await status("fast") != 200:  # once the abandoned thread has returned
                await anyio.sleep(0.01)
    assert calls[0] == "slow" and set(calls[1:]) == {"fast"}
    assert "1 authenticate calls are still running; refusing a request" in [r.getMessage() for r in caplog.records]


# --- 6. Every SDK server logger is withheld, the ones made late included --------------------


def test_a_logger_the_sdk_makes_only_when_it_first_logs_is_withheld_too() -> None:
    # A fresh interpreter: in this one another test may have made the logger already.
    out = _run(
        """
        import asyncio, io, json, logging
        import httpx
        from tests.test_a2a_hardening import CARD, CONTRACT, Model, update
        import agentfx
        from agentfx.a2a import a2a_app

        LATE = "a2a.server.request_handlers.request_handler"
        stream = io.StringIO()
        logging.basicConfig(level=logging.DEBUG, stream=stream, format="%(name)s|%(message)s")
        asgi = a2a_app(agentfx.App(CONTRACT, init=Model(), update=update), CARD)
        made_before = LATE in logging.Logger.manager.loggerDict

        async def main():
            async with asgi.router.lifespan_context(asgi):
                transport = httpx.ASGITransport(app=asgi)
                async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as http:
                    for request_id in ("SECRET-1", "SECRET-2"):
                        body = {"jsonrpc": "2.0", "id": request_id, "method": "GetTaskPushNotificationConfig",
                                "params": {"taskId": "SECRET-TASK", "id": "SECRET-CONFIG"}}
                        await http.post("/a2a", json=body, headers={"A2A-Version": "1.0"})

        asyncio.run(main())
        lines = [line for line in stream.getvalue().splitlines() if line.startswith("a2a")]
        print(json.dumps({"made_before": made_before, "lines": lines}))
        """
    )
    seen = json.loads(out.splitlines()[-1])
    assert seen["made_before"]  # the app made it, so the filter is on it
    assert "a2a.server.request_handlers.request_handler|a2a.server.request_handlers.request_handler logged at ERROR; its text is withheld" in seen["lines"]
    assert all(line.endswith("its text is withheld") for line in seen["lines"]), seen["lines"]
