"""A2A over HTTP: a real uvicorn server on 127.0.0.1, driven by the a2a-sdk's own clients, 1.0 and 0.3.

The server runs in a thread with its own asyncio loop: the SDK's server side
(its ``ActiveTask`` machinery, ``TaskUpdater``'s lock) is asyncio-only. The
clients are the SDK's ``JsonRpcTransport`` (A2A 1.0) and its
``CompatJsonRpcTransport`` (0.3: ``message/send``, ``tasks/get``,
``tasks/cancel``); they run on asyncio and on trio. Every JSON-RPC answer is
captured off the wire and validated: 1.0 answers parse strictly into the
SDK's proto types (no unknown field, every REQUIRED field set, and the
SDK's JSON Schema of a Task holds), 0.3 answers validate as the SDK's 0.3
pydantic response types.
"""

from __future__ import annotations

import json
import socket
import threading
import time
import uuid
from collections.abc import AsyncGenerator, Callable, Generator, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass, field
from typing import Any, TypeVar

import anyio
import httpx
import jsonschema
import mcp
import msgspec
import pytest
import uvicorn
from a2a.client import Client, ClientConfig, ClientFactory
from a2a.compat.v0_3 import types as types_v03
from a2a.helpers.proto_helpers import new_data_part, new_text_part
from a2a.server.routes._proto_schema import message_schema
from a2a.types.a2a_pb2 import (
    AgentCard,
    CancelTaskRequest,
    GetTaskRequest,
    Message,
    Role,
    SendMessageConfiguration,
    SendMessageRequest,
    SendMessageResponse,
    SubscribeToTaskRequest,
    Task,
    TaskState,
)
from a2a.utils.errors import A2AError, TaskNotFoundError, UnsupportedOperationError
from a2a.utils.proto_utils import validate_proto_required_fields
from google.protobuf import json_format
from starlette.requests import Request

import agentfx
from agentfx.a2a import MAX_CONFIRM_REASKS, NOT_WAITING, BoundedTaskStore, a2a_app, agent_card
from agentfx.app import App
from agentfx.audit import AuditRecord
from agentfx.mcp import server as mcp_server
from agentfx.program import Command

pytestmark = pytest.mark.anyio


# --- The application under test -------------------------------------------------


class User(msgspec.Struct, frozen=True):
    name: str
    admin: bool = False


class Model(msgspec.Struct, frozen=True):
    pings: int = 0
    total: int = 0
    locked: bool = True


class Pinged(msgspec.Struct, frozen=True, tag=True):
    pass


class RequestedAdd(msgspec.Struct, frozen=True, tag=True):
    amount: int


class Added(msgspec.Struct, frozen=True, tag=True):
    amount: int
    total: int


class AddFailed(msgspec.Struct, frozen=True, tag=True):
    amount: int
    reason: str


class RequestedStall(msgspec.Struct, frozen=True, tag=True):
    pass


class RequestedHang(msgspec.Struct, frozen=True, tag=True):
    pass


class Settled(msgspec.Struct, frozen=True, tag=True):
    """Never sent: what the stalling and hanging calls wait for."""


class Unlocked(msgspec.Struct, frozen=True, tag=True):
    pass


class Wiped(msgspec.Struct, frozen=True, tag=True):
    pass


class Erased(msgspec.Struct, frozen=True, tag=True):
    pass


class Pondered(msgspec.Struct, frozen=True, tag=True):
    pass


class Purged(msgspec.Struct, frozen=True, tag=True):
    pass


async def ponder(_request: object) -> bool:
    await anyio.sleep(30)
    return True


async def deliberate(_request: object) -> agentfx.Confirm:
    # Slow, each time it is asked: answers sent at once all arrive while the first is handled.
    await anyio.sleep(0.3)
    return agentfx.Confirm("Purge everything?")


Msg = (
    Pinged
    | RequestedAdd
    | Added
    | AddFailed
    | RequestedStall
    | RequestedHang
    | Settled
    | Unlocked
    | Wiped
    | Erased
    | Pondered
    | Purged
)


def update(model: Model, message: Msg) -> Model | tuple[Model, list[Command[Msg]]]:
    match message:
        case Pinged():
            return msgspec.structs.replace(model, pings=model.pings + 1)
        case RequestedAdd(amount=amount):

            async def add() -> Msg:
                if amount < 0:
                    return AddFailed(amount=amount, reason="amounts are never negative")
                return Added(amount=amount, total=model.total + amount)

            return model, [add]
        case Added(total=total):
            return msgspec.structs.replace(model, total=total)
        case Erased():
            return msgspec.structs.replace(model, total=0)
        case _:
            return model


Agent = agentfx.for_model(Model, principal=User)

CONTRACT = Agent.define(
    messages=Agent.expose(
        Msg,
        Agent.variant(Pinged, "Ping the app", name="ping"),
        Agent.variant(
            RequestedAdd,
            "Add an amount to the total",
            name="add",
            completion=agentfx.Completion(
                success=Added,
                failure=AddFailed,
                correlate=lambda request, result, call: result.amount == request.amount,
                timeout=10.0,
            ),
        ),
        Agent.variant(
            RequestedStall, "Wait for what never comes", name="stall", completion=agentfx.Completion(Settled, timeout=0.2)
        ),
        Agent.variant(
            RequestedHang, "Wait a long time", name="hang", completion=agentfx.Completion(Settled, timeout=30.0)
        ),
        Agent.variant(Unlocked, "Unlock the app", name="unlock", available=lambda model: not model.locked),
        Agent.variant(
            Wiped,
            "Wipe everything",
            name="wipe",
            authorize=lambda req: req.principal.admin or agentfx.Refusal("Only an admin may wipe"),
        ),
        Agent.variant(
            Erased,
            "Erase the total",
            name="erase",
            authorize=lambda req: agentfx.Confirm(f"Erase the total of {req.model.total}?"),
            may_confirm=True,
        ),
        Agent.variant(Pondered, "Think it over first", name="ponder", authorize=ponder),
        Agent.variant(Purged, "Purge everything, slowly", name="purge", authorize=deliberate, may_confirm=True),
    )
)

ADMIN, GUEST = User("ann", admin=True), User("gus")
TOKENS = {"ann": ADMIN, "gus": GUEST}


def authenticate(request: Request) -> User | None:
    return TOKENS.get(request.headers.get("authorization", "").removeprefix("Bearer "))


# --- The server -----------------------------------------------------------------


@dataclass
class Served:
    base: str
    card: AgentCard
    records: list[AuditRecord] = field(default_factory=lambda: [])
    lock: threading.Lock = field(default_factory=threading.Lock)
    asgi: Any = None  # the app served, once it is
    messages: list[object] = field(default_factory=lambda: [])  # every Message the host's update got

    def record(self, record: AuditRecord, /) -> None:
        with self.lock:
            self.records.append(record)

    def received(self, message: object) -> None:
        with self.lock:
            self.messages.append(message)

    def count(self, kind: type) -> int:
        """How many Messages of ``kind`` the host's update has received."""
        with self.lock:
            return sum(isinstance(m, kind) for m in self.messages)

    def audited(self, task_id: str) -> list[AuditRecord]:
        with self.lock:
            return [r for r in self.records if r.invocation.id == task_id]


@contextmanager
def serving(asgi: Any, sock: socket.socket) -> Generator[None]:
    """``asgi`` served by uvicorn, lifespan on, on ``sock`` (127.0.0.1) in a thread of its own."""
    config = uvicorn.Config(asgi, lifespan="on", log_level="warning", ws="none", http="h11")
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        assert thread.is_alive() and time.monotonic() < deadline, "the server did not start"
        time.sleep(0.01)
    try:
        yield
    finally:
        server.should_exit = True
        thread.join(10)
        assert not thread.is_alive(), "the server did not stop"


def free_socket() -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    return sock


S = TypeVar("S", bound=Served)


@contextmanager
def counter_served(
    state: Callable[[str, AgentCard], S] = Served, *, authenticate: Any = authenticate, **options: Any
) -> Generator[S]:
    """The counter contract's App behind ``a2a_app(..., authenticate=authenticate, **options)`` on a free loopback port."""
    with free_socket() as sock:
        base = f"http://127.0.0.1:{sock.getsockname()[1]}"
        card = agent_card(CONTRACT, name="counter", description="A counter", url=f"{base}/a2a", version="1.0.0")
        served = state(base, card)

        def counted(model: Model, message: Msg) -> Model | tuple[Model, list[Command[Msg]]]:
            served.received(message)
            return update(model, message)

        app = App(CONTRACT, init=Model(), update=counted, audit=served)
        served.asgi = a2a_app(app, card, authenticate=authenticate, **options)
        with serving(served.asgi, sock):
            yield served


@pytest.fixture(scope="module")
def served() -> Iterator[Served]:
    with counter_served() as state:
        yield state


@pytest.fixture
def fresh() -> Iterator[Served]:
    """A server of its own, its Model at ``init``: built outside the test's event loop, as ``served`` is."""
    with counter_served() as state:
        yield state


# --- Clients ---------------------------------------------------------------------


PROTOCOLS = pytest.mark.parametrize("protocol", ["1.0", "0.3"])

_TASK_SCHEMA_COMPONENTS: dict[str, Any] = {}
TASK_SCHEMA = {
    **message_schema(Task.DESCRIPTOR, _TASK_SCHEMA_COMPONENTS),
    "components": {"schemas": _TASK_SCHEMA_COMPONENTS},
}


def valid_task(task: Task) -> Task:
    """The SDK's own checks of a 1.0 Task: REQUIRED fields, and its JSON Schema."""
    validate_proto_required_fields(task)
    jsonschema.validate(json_format.MessageToDict(task, preserving_proto_field_name=True), TASK_SCHEMA)
    return task


def validate_wire(protocol: str, request: dict[str, Any], answer: dict[str, Any]) -> None:
    """One JSON-RPC answer, as sent, against the protocol's own types."""
    assert answer.get("jsonrpc") == "2.0" and "error" not in answer, answer
    method = request["method"]
    result = answer["result"]
    if protocol == "0.3":
        response_type: Any = {
            "message/send": types_v03.SendMessageResponse,
            "tasks/get": types_v03.GetTaskResponse,
            "tasks/cancel": types_v03.CancelTaskResponse,
        }[method]
        parsed = response_type.model_validate(answer).root
        assert isinstance(parsed.result, types_v03.Task), parsed
        return
    if method == "SendMessage":
        # Strict: an unknown field or a wrong type raises.
        valid_task(json_format.ParseDict(result, SendMessageResponse()).task)
    else:
        assert method in ("GetTask", "CancelTask"), method
        valid_task(json_format.ParseDict(result, Task()))


@dataclass
class Caller:
    protocol: str
    client: Client
    wire: list[tuple[dict[str, Any], dict[str, Any]]]

    async def send(self, *parts: Any, task_id: str = "", blocking: bool = True) -> Task:
        message = Message(message_id=uuid.uuid4().hex, role=Role.ROLE_USER, task_id=task_id, parts=list(parts))
        request = SendMessageRequest(
            message=message, configuration=SendMessageConfiguration(return_immediately=not blocking)
        )
        tasks = [response.task async for response in self.client.send_message(request)]
        assert len(tasks) == 1
        return valid_task(tasks[0])

    async def call(self, skill: object, payload: object = None, **options: Any) -> Task:
        data: dict[str, object] = {"skill": skill}
        if payload is not None:
            data["input"] = payload
        return await self.send(new_data_part(data), **options)

    async def get(self, task_id: str) -> Task:
        return valid_task(await self.client.get_task(GetTaskRequest(id=task_id)))

    async def cancel(self, task_id: str) -> Task:
        return valid_task(await self.client.cancel_task(CancelTaskRequest(id=task_id)))


@asynccontextmanager
async def caller(served: Served, protocol: str, token: str = "ann") -> AsyncGenerator[Caller]:
    wire: list[tuple[dict[str, Any], dict[str, Any]]] = []

    async def capture(response: httpx.Response) -> None:
        await response.aread()
        if response.request.method == "POST":
            wire.append((json.loads(response.request.content), response.json()))

    card = AgentCard()
    card.CopyFrom(served.card)
    # The card lists 1.0 first, then 0.3; a card with only one makes the
    # SDK's factory pick that protocol's transport.
    keep = [i for i in card.supported_interfaces if i.protocol_version == protocol]
    del card.supported_interfaces[:]
    card.supported_interfaces.extend(keep)
    async with httpx.AsyncClient(
        headers={"Authorization": f"Bearer {token}"}, event_hooks={"response": [capture]}, timeout=20
    ) as http:
        client = ClientFactory(ClientConfig(httpx_client=http, streaming=False)).create(card)
        try:
            yield Caller(protocol, client, wire)
        finally:
            await client.close()
    assert wire, "nothing went over the wire"
    for request, answer in wire:
        validate_wire(protocol, request, answer)
    expected = {"1.0": {"SendMessage", "GetTask", "CancelTask"}, "0.3": {"message/send", "tasks/get", "tasks/cancel"}}
    assert {request["method"] for request, _ in wire} <= expected[protocol]


def _exact_json(parts: Any) -> set[int]:
    """The index of each text part that follows a data part: its exact JSON."""
    return {i + 1 for i, part in enumerate(parts) if part.HasField("data")}


def texts(task: Task) -> list[str]:
    parts = task.status.message.parts
    exact = _exact_json(parts)
    return [part.text for i, part in enumerate(parts) if part.HasField("text") and i not in exact]


def exact(parts: Any) -> list[Any]:
    """The exact JSON values a list of parts carries, one per data part."""
    values: list[Any] = []
    for i in sorted(_exact_json(parts)):
        assert i < len(parts) and parts[i].HasField("text"), "a data part without its exact JSON"
        values.append(json.loads(parts[i].text))
    return values


def data(parts: Any) -> list[Any]:
    values = [json_format.MessageToDict(part.data) for part in parts if part.HasField("data")]
    # Each data part is followed by the same value as exact JSON (equal, as
    # Python compares 7 and 7.0, for the small numbers these tests use).
    assert exact(parts) == values
    return values


def artifact(task: Task) -> Any:
    (only,) = task.artifacts
    (value,) = data(only.parts)
    return value


# --- Tests -----------------------------------------------------------------------


@PROTOCOLS
async def test_a_direct_capability_completes_with_its_reply_as_the_artifact(served: Served, protocol: str) -> None:
    async with caller(served, protocol) as a2a:
        task = await a2a.call("ping", {})
    assert task.status.state == TaskState.TASK_STATE_COMPLETED
    assert texts(task) == ["Dispatched Pinged"]
    assert artifact(task) == {"capability": "ping", "tag": "Pinged"}
    assert [(r.capability, r.outcome, r.invocation.transport, r.principal) for r in served.audited(task.id)] == [
        ("ping", "dispatched", "a2a", ADMIN)
    ]


@PROTOCOLS
async def test_a_completion_that_succeeds_carries_the_completion_message(served: Served, protocol: str) -> None:
    async with caller(served, protocol) as a2a:
        task = await a2a.call("add", {"amount": 3})
    assert task.status.state == TaskState.TASK_STATE_COMPLETED
    reply = artifact(task)
    assert reply["completion"]["status"] == "completed"
    assert reply["completion"]["message"]["type"] == "Added"
    assert reply["completion"]["message"]["amount"] == 3
    # The text carries the data: a model that reads only text learns the total.
    (text,) = texts(task)
    assert text.startswith("Completed: Added\n") and json.loads(text.split("\n", 1)[1]) == json.loads(
        json.dumps(reply)
    )
    assert [r.outcome for r in served.audited(task.id)] == ["completed"]


@PROTOCOLS
async def test_the_artifact_carries_the_reply_exactly_as_mcp_structured_content(fresh: Served, protocol: str) -> None:
    # 2**53 - 1 and 2 arrive exactly (a data part's numbers are doubles, whole
    # ones exact below 2**53); their sum, the total the app computes, is no double's.
    big = 2**53 - 1
    async with caller(fresh, protocol) as a2a:
        await a2a.call("add", {"amount": big})
        task = await a2a.call("add", {"amount": 2})
    app = App(CONTRACT, init=Model(), update=update)
    async with app.program() as program, mcp.Client(mcp_server(app.bind(program, principal=ADMIN))) as client:
        await client.call_tool("add", {"amount": big})
        result = await client.call_tool("add", {"amount": 2})
    expected = result.structured_content
    assert expected is not None and expected["completion"]["message"]["total"] == big + 2
    (only,) = task.artifacts
    as_data, as_json = only.parts
    assert as_json.text == msgspec.json.encode(expected).decode()
    assert as_json.media_type == ("application/json" if protocol == "1.0" else "")  # 0.3 text has none
    value = msgspec.json.decode(as_json.text)
    assert msgspec.convert(value["completion"]["message"], Added, strict=True) == Added(amount=2, total=big + 2)
    # The data part stays, its numbers doubles: the reason for the exact one.
    rounded = json_format.MessageToDict(as_data.data)["completion"]["message"]
    assert rounded == {"type": "Added", "amount": 2.0, "total": float(big + 2)}
    assert rounded["total"] != value["completion"]["message"]["total"]


@PROTOCOLS
async def test_a_completion_that_fails_fails_the_task(served: Served, protocol: str) -> None:
    async with caller(served, protocol) as a2a:
        task = await a2a.call("add", {"amount": -2})
    assert task.status.state == TaskState.TASK_STATE_FAILED
    assert artifact(task)["completion"] == {
        "status": "failed",
        "message": {"type": "AddFailed", "amount": -2, "reason": "amounts are never negative"},
    }
    assert texts(task)[0].startswith("Failed: AddFailed\n")
    assert [r.outcome for r in served.audited(task.id)] == ["failed"]


@PROTOCOLS
async def test_a_timeout_fails_the_task_with_the_timeout_as_data(served: Served, protocol: str) -> None:
    async with caller(served, protocol) as a2a:
        task = await a2a.call("stall", {})
    assert task.status.state == TaskState.TASK_STATE_FAILED
    assert texts(task) == ['"stall" was dispatched but did not complete within 0.2s. The Message still reached update.']
    (failure,) = data(task.status.message.parts)
    assert failure["_tag"] == "AgentCompletionTimeoutError" and failure["invocation"] == task.id
    assert not task.artifacts
    assert [r.outcome for r in served.audited(task.id)] == ["timeout"]


REFUSALS = [
    pytest.param("nope", {}, "ann", "No such capability: nope", "AgentUnknownCapabilityError", id="unknown"),
    pytest.param(
        "unlock", {}, "ann", 'Capability "unlock" is not available right now', "AgentCapabilityUnavailableError",
        id="unavailable",
    ),
    pytest.param(
        "add", {"amount": "3"}, "ann", 'Invalid input for "add": "amount" must be an integer', "AgentInvalidInputError",
        id="invalid-input",
    ),
    pytest.param("add", {"amount": 1, "x": 2}, "ann", 'Invalid input for "add": "x" is not a field of this input',
                 "AgentInvalidInputError", id="unknown-field"),
    pytest.param("wipe", {}, "gus", "Only an admin may wipe", "AgentAuthorizationError", id="unauthorized"),
]


@PROTOCOLS
@pytest.mark.parametrize(("skill", "payload", "token", "text", "tag"), REFUSALS)
async def test_every_refusal_rejects_the_task_with_the_failure_as_data(
    served: Served, protocol: str, skill: str, payload: object, token: str, text: str, tag: str
) -> None:
    async with caller(served, protocol, token) as a2a:
        task = await a2a.call(skill, payload)
    assert task.status.state == TaskState.TASK_STATE_REJECTED
    assert texts(task) == [text]
    (failure,) = data(task.status.message.parts)
    assert failure["_tag"] == tag
    assert not task.artifacts
    (record,) = served.audited(task.id)
    assert (record.decision, record.outcome, record.invocation.transport) == ("refused", tag, "a2a")


@PROTOCOLS
async def test_an_authorized_principal_is_the_one_authenticated(served: Served, protocol: str) -> None:
    async with caller(served, protocol, "ann") as a2a:
        task = await a2a.call("wipe", {})
    assert task.status.state == TaskState.TASK_STATE_COMPLETED
    assert [r.principal for r in served.audited(task.id)] == [ADMIN]


MALFORMED = [
    pytest.param([new_text_part("ping please")], id="text"),
    pytest.param([new_data_part({"skill": "ping"}), new_data_part({"skill": "ping"})], id="two-parts"),
    pytest.param([new_data_part(["ping"])], id="not-an-object"),
    pytest.param([new_data_part({"name": "ping", "input": {}})], id="no-skill"),
    pytest.param([new_data_part({"skill": "ping", "input": {}, "extra": 1})], id="extra-key"),
    # A skill id is a string: anything else is no call at all, not an unknown skill.
    *(
        pytest.param([new_data_part({"skill": skill, "input": {}})], id=f"skill-{kind}")
        for kind, skill in [("null", None), ("bool", True), ("number", 5), ("list", ["ping"]), ("object", {"name": "ping"})]
    ),
]


@PROTOCOLS
@pytest.mark.parametrize("parts", MALFORMED)
async def test_a_malformed_message_is_rejected_and_dispatches_nothing(
    served: Served, protocol: str, parts: list[Any]
) -> None:
    async with caller(served, protocol) as a2a:
        task = await a2a.send(*parts)
    assert task.status.state == TaskState.TASK_STATE_REJECTED
    expected = 'A message to this agent carries one data part {"skill": <skill id>, "input": {...}}'
    assert texts(task) == [expected]
    assert data(task.status.message.parts) == [{"_tag": "MalformedMessage", "message": expected}]
    assert served.audited(task.id) == []


@PROTOCOLS
async def test_a_cancel_while_waiting_aborts_the_call_and_cancels_the_task(served: Served, protocol: str) -> None:
    async with caller(served, protocol) as a2a:
        started = await a2a.call("hang", {}, blocking=False)
        task_id = started.id
        with anyio.fail_after(10):
            while (await a2a.get(task_id)).status.state != TaskState.TASK_STATE_WORKING:
                await anyio.sleep(0.01)
        cancelled = await a2a.cancel(task_id)
        final = await a2a.get(task_id)
    assert cancelled.status.state == TaskState.TASK_STATE_CANCELED
    assert final.status.state == TaskState.TASK_STATE_CANCELED
    (text,) = texts(final)
    assert text == '"hang" was dispatched, and waiting for it to complete was cancelled. The Message still reached update.'
    (failure,) = data(final.status.message.parts)
    assert failure == {"_tag": "AgentCancelledError", "capability": "hang", "dispatched": True, "message": text}
    assert [(r.decision, r.outcome) for r in served.audited(task_id)] == [("dispatched", "AgentCancelledError")]


@PROTOCOLS
async def test_another_principal_cannot_read_or_cancel_a_task(served: Served, protocol: str) -> None:
    async with caller(served, protocol, "ann") as ann:
        task = await ann.call("ping", {})
    async with httpx.AsyncClient(headers={"Authorization": "Bearer gus"}) as http:
        method = "GetTask" if protocol == "1.0" else "tasks/get"
        answer = (
            await http.post(f"{served.base}/a2a", json={"jsonrpc": "2.0", "id": 1, "method": method, "params": {"id": task.id}},
                            headers={"A2A-Version": protocol})
        ).json()
    assert answer["error"]["code"] == -32001  # TaskNotFoundError, as for an id that never existed


async def test_an_unauthenticated_request_is_refused_401(served: Served) -> None:
    async with httpx.AsyncClient() as http:
        response = await http.post(f"{served.base}/a2a", json={"jsonrpc": "2.0", "id": 1, "method": "GetTask"})
        card = await http.get(f"{served.base}/.well-known/agent-card.json")
    assert response.status_code == 401
    assert response.headers["www-authenticate"] == "Bearer"
    # The card is public.
    assert card.status_code == 200 and card.json()["skills"][0]["id"] == "ping"


@pytest.mark.parametrize(
    ("headers", "status"),
    [
        pytest.param({"Origin": "https://evil.example"}, 403, id="foreign-origin"),
        pytest.param({"Host": "evil.example"}, 421, id="foreign-host"),
        pytest.param({"Host": "evil.example:8000"}, 421, id="foreign-host-with-port"),
        pytest.param({"Origin": "http://localhost:5173"}, 200, id="loopback-origin"),
    ],
)
async def test_host_and_origin_are_loopback_by_default(served: Served, headers: dict[str, str], status: int) -> None:
    async with httpx.AsyncClient() as http:
        response = await http.get(f"{served.base}/.well-known/agent-card.json", headers=headers)
    assert response.status_code == status


CONFIRM_SHAPE = (
    'This task waits for a person\'s answer: reply on it with one data part {"confirm": true} or {"confirm": false}'
)


async def erase_waiting(a2a: Caller, served: Served) -> Task:
    task = await a2a.call("erase", {})
    assert task.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
    (text,) = texts(task)
    prompt = text.split("needs a person to confirm: ", 1)[1].split("\n", 1)[0]
    assert text == f'"erase" needs a person to confirm: {prompt}\n{CONFIRM_SHAPE}'
    (failure,) = data(task.status.message.parts)
    assert failure["_tag"] == "AgentConfirmationRequiredError" and failure["prompt"] == prompt
    assert [(r.decision, r.outcome) for r in served.audited(task.id)] == [("refused", "AgentConfirmationRequiredError")]
    return task


@PROTOCOLS
async def test_a_confirmation_round_trip_dispatches_the_call_confirmed_on_the_same_task(
    served: Served, protocol: str
) -> None:
    async with caller(served, protocol) as a2a:
        waiting = await erase_waiting(a2a, served)
        done = await a2a.send(new_data_part({"confirm": True}), task_id=waiting.id)
        fetched = await a2a.get(waiting.id)
    assert done.id == waiting.id
    assert done.status.state == fetched.status.state == TaskState.TASK_STATE_COMPLETED
    assert texts(done) == ["Dispatched Erased"]
    assert artifact(done) == {"capability": "erase", "tag": "Erased"}
    records = served.audited(waiting.id)
    assert [(r.decision, r.outcome, r.confirmed, r.principal) for r in records] == [
        ("refused", "AgentConfirmationRequiredError", False, ADMIN),
        ("dispatched", "dispatched", True, ADMIN),
    ]
    assert {r.invocation.transport for r in records} == {"a2a"}


@PROTOCOLS
async def test_a_declined_confirmation_rejects_the_task_and_sends_nothing(served: Served, protocol: str) -> None:
    async with caller(served, protocol) as a2a:
        waiting = await erase_waiting(a2a, served)
        prompt = data(waiting.status.message.parts)[0]["prompt"]
        declined = await a2a.send(new_data_part({"confirm": False}), task_id=waiting.id)
    assert declined.status.state == TaskState.TASK_STATE_REJECTED
    assert texts(declined) == [f"Declined: {prompt}"]
    assert data(declined.status.message.parts)[0]["_tag"] == "AgentAuthorizationError"
    assert [(r.decision, r.outcome) for r in served.audited(waiting.id)][1:] == [("refused", "AgentAuthorizationError")]


@PROTOCOLS
@pytest.mark.parametrize("answer", [{"confirm": "yes"}, {"confirm": True, "also": "erase more"}], ids=["not-bool", "extra-key"])
async def test_an_answer_that_is_not_yes_or_no_asks_again(served: Served, protocol: str, answer: dict[str, object]) -> None:
    async with caller(served, protocol) as a2a:
        waiting = await erase_waiting(a2a, served)
        again = await a2a.send(new_data_part(answer), task_id=waiting.id)
        assert again.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
        # Asked again in the same words: the prompt, and what to send.
        assert texts(again) == texts(waiting)
        assert data(again.status.message.parts) == data(waiting.status.message.parts)
        # Nothing was dispatched or refused by the slip; the call still waits.
        assert len(served.audited(waiting.id)) == 1
        done = await a2a.send(new_data_part({"confirm": True}), task_id=waiting.id)
    assert done.status.state == TaskState.TASK_STATE_COMPLETED


@PROTOCOLS
async def test_a_task_waiting_for_confirmation_can_be_cancelled(served: Served, protocol: str) -> None:
    async with caller(served, protocol) as a2a:
        waiting = await erase_waiting(a2a, served)
        cancelled = await a2a.cancel(waiting.id)
    assert cancelled.status.state == TaskState.TASK_STATE_CANCELED
    assert len(served.audited(waiting.id)) == 1


@PROTOCOLS
async def test_a_subscriber_to_a_task_waiting_for_confirmation_sees_it_cancelled(served: Served, protocol: str) -> None:
    # The SDK writes a parked task's cancel once its event queue is closed,
    # which ends every subscriber's stream without the final state.
    async with caller(served, protocol) as a2a:
        waiting = await erase_waiting(a2a, served)
        card = AgentCard()
        card.CopyFrom(served.card)
        keep = [i for i in card.supported_interfaces if i.protocol_version == protocol]
        del card.supported_interfaces[:]
        card.supported_interfaces.extend(keep)
        seen: list[int] = []
        following = anyio.Event()
        cancelled: Task | None = None
        async with httpx.AsyncClient(headers={"Authorization": "Bearer ann"}, timeout=20) as http:
            stream = ClientFactory(ClientConfig(httpx_client=http, streaming=True)).create(card)

            async def follow() -> None:
                async for response in stream.subscribe(SubscribeToTaskRequest(id=waiting.id)):
                    update = response.task if response.HasField("task") else response.status_update
                    seen.append(update.status.state)
                    following.set()

            try:
                with anyio.fail_after(10):
                    async with anyio.create_task_group() as tasks:
                        tasks.start_soon(follow)
                        await following.wait()
                        cancelled = await a2a.cancel(waiting.id)
            finally:
                await stream.close()
    assert cancelled is not None and cancelled.status.state == TaskState.TASK_STATE_CANCELED
    assert seen == [TaskState.TASK_STATE_INPUT_REQUIRED, TaskState.TASK_STATE_CANCELED]
    assert len(served.audited(waiting.id)) == 1


@PROTOCOLS
async def test_a_task_whose_prompt_changes_at_every_yes_ends_after_the_cap(fresh: Served, protocol: str) -> None:
    # Each yes finds the total changed, so the call is asked about again: the
    # task's history must not grow with every round.
    async with caller(fresh, protocol) as a2a:
        waiting = await erase_waiting(a2a, fresh)
        for asked in range(MAX_CONFIRM_REASKS):
            await a2a.call("add", {"amount": 1})
            again = await a2a.send(new_data_part({"confirm": True}), task_id=waiting.id)
            assert again.status.state == TaskState.TASK_STATE_INPUT_REQUIRED, asked
            assert f"Erase the total of {asked + 1}?" in texts(again)[0]
        await a2a.call("add", {"amount": 1})
        ended = await a2a.send(new_data_part({"confirm": True}), task_id=waiting.id)
        kept = await a2a.get(waiting.id)
    assert ended.status.state == TaskState.TASK_STATE_REJECTED
    assert texts(ended) == [
        f"Asked to confirm {MAX_CONFIRM_REASKS + 1} times, the prompt changing each time: the call was not made. "
        "Start a new task to try again"
    ]
    assert data(ended.status.message.parts)[0]["_tag"] == "AgentConfirmationRequiredError"
    assert len(kept.history) <= 2 * MAX_CONFIRM_REASKS + 3
    assert fresh.count(Erased) == 0


@PROTOCOLS
async def test_another_principal_cannot_confirm_a_task(served: Served, protocol: str) -> None:
    async with caller(served, protocol, "ann") as ann:
        waiting = await erase_waiting(ann, served)
    async with caller(served, protocol, "gus") as gus:
        with pytest.raises(TaskNotFoundError):
            await gus.send(new_data_part({"confirm": True}), task_id=waiting.id)
        # The error is checked here, and the wire is then left with a result to validate.
        ((_, answer),) = gus.wire
        gus.wire.clear()
        await gus.call("ping", {})
    # As for an id that never existed: TaskNotFoundError.
    assert answer["error"]["code"] == -32001
    assert len(served.audited(waiting.id)) == 1


@PROTOCOLS
async def test_a_cancel_before_dispatch_cancels_the_task_and_sends_nothing(served: Served, protocol: str) -> None:
    async with caller(served, protocol) as a2a:
        started = await a2a.call("ponder", {}, blocking=False)
        with anyio.fail_after(10):
            while (await a2a.get(started.id)).status.state != TaskState.TASK_STATE_WORKING:
                await anyio.sleep(0.01)
        cancelled = await a2a.cancel(started.id)
    assert cancelled.status.state == TaskState.TASK_STATE_CANCELED
    assert texts(cancelled) == ['Invocation of "ponder" was cancelled before it was dispatched']
    assert data(cancelled.status.message.parts)[0]["dispatched"] is False
    assert [(r.decision, r.outcome) for r in served.audited(started.id)] == [("refused", "AgentCancelledError")]


# --- Follow-ups to a task that is not waiting for an answer ------------------------


async def attempt(a2a: Caller, *parts: Any, task_id: str = "") -> Task | A2AError:
    """The task a message is answered with, or the A2A error the client raised for its refusal."""
    try:
        return await a2a.send(*parts, task_id=task_id)
    except A2AError as error:
        return error


def refusals_on_the_wire(a2a: Caller) -> list[dict[str, Any]]:
    """The error answers captured so far, taken off the wire (which is validated as results only)."""
    errors = [answer["error"] for _, answer in a2a.wire if "error" in answer]
    a2a.wire[:] = [(request, answer) for request, answer in a2a.wire if "error" not in answer]
    return errors


def finished(task_id: str, state: str = "TASK_STATE_COMPLETED") -> str:
    """The SDK's own refusal of a message to a finished task."""
    return f"Task {task_id} is in terminal state: {state}"


@PROTOCOLS
async def test_of_yes_answers_sent_at_once_exactly_one_dispatches_the_call_and_the_others_are_refused(
    served: Served, protocol: str
) -> None:
    async with caller(served, protocol) as a2a:
        waiting = await a2a.call("purge", {})
        assert waiting.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
        purged = served.count(Purged)
        outcomes: list[Task | A2AError] = []

        async def answer() -> None:
            outcomes.append(await attempt(a2a, new_data_part({"confirm": True}), task_id=waiting.id))

        with anyio.fail_after(10):
            async with anyio.create_task_group() as group:
                for _ in range(4):
                    group.start_soon(answer)
        errors = refusals_on_the_wire(a2a)
        fetched = await a2a.get(waiting.id)
    tasks = [o for o in outcomes if isinstance(o, Task)]
    refused = [o for o in outcomes if not isinstance(o, Task)]
    assert len(tasks) == 1 and len(refused) == 3, outcomes
    assert tasks[0].status.state == fetched.status.state == TaskState.TASK_STATE_COMPLETED
    # Each other answer is told why: one is being handled, or the task has finished.
    assert all(isinstance(r, UnsupportedOperationError) for r in refused), refused
    assert {e["code"] for e in errors} == {-32004}
    assert {e["message"] for e in errors} <= {NOT_WAITING, finished(waiting.id)}
    # The host received one Purged, and the audit holds one confirmed dispatch.
    assert served.count(Purged) - purged == 1
    assert [(r.decision, r.outcome, r.confirmed) for r in served.audited(waiting.id)] == [
        ("refused", "AgentConfirmationRequiredError", False),
        ("dispatched", "dispatched", True),
    ]
    # The refused answers were not kept: the history is the call, the answer that ran, and the prompt.
    assert [m.role for m in fetched.history].count(Role.ROLE_USER) == 2


@PROTOCOLS
async def test_an_answer_to_a_task_whose_call_is_running_is_refused_and_dispatches_nothing(
    served: Served, protocol: str
) -> None:
    async with caller(served, protocol) as a2a:
        started = await a2a.call("hang", {}, blocking=False)
        with anyio.fail_after(10):
            while (await a2a.get(started.id)).status.state != TaskState.TASK_STATE_WORKING:
                await anyio.sleep(0.01)
            refused = await attempt(a2a, new_data_part({"confirm": True}), task_id=started.id)
        (error,) = refusals_on_the_wire(a2a)
        still = await a2a.get(started.id)
        cancelled = await a2a.cancel(started.id)
    assert isinstance(refused, UnsupportedOperationError)
    assert error["code"] == -32004 and error["message"] == NOT_WAITING
    # The running call is untouched by it, and the answer is not in its history.
    assert still.status.state == TaskState.TASK_STATE_WORKING
    assert [m.role for m in still.history].count(Role.ROLE_USER) == 1
    assert cancelled.status.state == TaskState.TASK_STATE_CANCELED
    assert [(r.capability, r.confirmed) for r in served.audited(started.id)] == [("hang", False)]


@pytest.fixture
def bounded() -> Iterator[tuple[Served, BoundedTaskStore]]:
    # Made outside the test's event loop: the store is the server's, used on its loop.
    store = BoundedTaskStore(100, max_bytes=400_000)
    with counter_served(task_store=store) as served:
        yield served, store


@PROTOCOLS
async def test_answers_to_a_finished_task_are_refused_in_the_sdks_words_and_leave_the_store_at_its_size(
    bounded: tuple[Served, BoundedTaskStore], protocol: str
) -> None:
    served, store = bounded
    async with caller(served, protocol) as a2a:
        waiting = await erase_waiting(a2a, served)
        done = await a2a.send(new_data_part({"confirm": True}), task_id=waiting.id)
        size = store.bytes
        pad = "x" * 100_000
        # More than the byte budget together: each is refused before it is admitted, so none takes room.
        outcomes = [
            await attempt(a2a, new_data_part({"confirm": True, "pad": pad}), task_id=waiting.id) for _ in range(6)
        ]
        errors = refusals_on_the_wire(a2a)
        fetched = await a2a.get(waiting.id)
        assert store.bytes == size
        # Room for others is still there: a new task is taken.
        other = await a2a.call("ping", {})
    assert done.status.state == TaskState.TASK_STATE_COMPLETED
    assert all(isinstance(o, UnsupportedOperationError) for o in outcomes), outcomes
    assert [(e["code"], e["message"]) for e in errors] == [(-32004, finished(waiting.id))] * 6
    assert fetched.history == done.history
    assert other.status.state == TaskState.TASK_STATE_COMPLETED
    assert served.count(Erased) == 1
    assert [r.confirmed for r in served.audited(waiting.id)] == [False, True]
    if protocol == "1.0":
        # What the store counts is the task as kept (the 0.3 answer is a conversion of it).
        assert size == fetched.ByteSize()


# --- What an error answer says ---------------------------------------------------------

SECRET = "SECRET-VALUE-123"
DEEP = json.loads("[" * 150 + "]" * 150)


def rpc(method: str, params: Any, request_id: object = 1) -> bytes:
    return json.dumps({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}).encode()


def message_1_0(*parts: Any, **fields: Any) -> dict[str, Any]:
    return {"message": {"messageId": "m", "role": "ROLE_USER", "parts": list(parts), **fields}}


def message_0_3(*parts: Any, **fields: Any) -> dict[str, Any]:
    return {"message": {"messageId": "m", "role": "user", "kind": "message", "parts": list(parts), **fields}}


PARSE = (-32700, "Parse error: the body is not JSON, or is nested too deep to read")
NOT_ONE = (-32600, "Invalid Request: the body must be one JSON-RPC 2.0 request object")
NO_ID = (-32600, "Invalid Request: an A2A request must have an id; A2A defines no notifications")
INVALID_REQUEST = (-32600, "Invalid Request: the request is not what its method takes")
INVALID_PARAMS = (-32602, "Invalid params: the params are not what the method takes")
NOT_READABLE = (
    -32602,
    "Invalid params: the message could not be read (file bytes that are not base64, data nested too deep)",
)
VERSION = (-32009, "A2A version not supported: this endpoint serves A2A 1.0 and 0.3")
VERSION_0_3 = (-32600, "Invalid Request: an A2A 0.3 method, sent with an A2A-Version header of another version")
NOT_FOUND = (-32001, "Task not found")

# name: (body, A2A-Version header, the id answered, (code, message))
MALFORMED_BODIES: dict[str, tuple[bytes, str, object, tuple[int, str]]] = {
    "not JSON": (b"{nope " + SECRET.encode(), "1.0", None, PARSE),
    "not JSON, 0.3": (b"{nope " + SECRET.encode(), "0.3", None, PARSE),
    "not UTF-8": (b'{"jsonrpc": "2.0", "id": 1, "method": "\xff\xfe"}', "1.0", None, PARSE),
    "nested past the decoder": (b"[" * 100_000 + b"]" * 100_000, "1.0", None, PARSE),
    "an array": (b"[]", "1.0", None, NOT_ONE),
    "no id": (json.dumps({"jsonrpc": "2.0", "method": "GetTask", "params": {"id": SECRET}}).encode(), "1.0", None, NO_ID),
    "no id, 0.3": (json.dumps({"jsonrpc": "2.0", "method": "tasks/get", "params": {"id": SECRET}}).encode(), "0.3", None, NO_ID),
    "a string": (json.dumps(SECRET).encode(), "0.3", None, NOT_ONE),
    "1.0, message a string": (rpc("SendMessage", {"message": SECRET}), "1.0", 1, INVALID_PARAMS),
    "1.0, role wrong": (rpc("SendMessage", {"message": {"messageId": "m", "role": SECRET, "parts": []}}), "1.0", 1, INVALID_PARAMS),
    "1.0, id an object": (rpc("GetTask", {"id": {"x": SECRET}}), "1.0", 1, INVALID_PARAMS),
    "1.0, data too deep": (rpc("SendMessage", message_1_0({"data": {"skill": "ping", "input": DEEP}})), "1.0", 1, INVALID_PARAMS),
    "1.0, an unknown task": (rpc("GetTask", {"id": SECRET}), "1.0", 1, NOT_FOUND),
    "1.0, a version of the client's": (rpc("GetTask", {"id": "t"}), SECRET, 1, VERSION),
    "1.0, sent as 0.3": (rpc("SendMessage", {"message": SECRET}), "0.3", 1, VERSION),
    "0.3, message a string": (rpc("message/send", {"message": SECRET}), "0.3", 1, INVALID_REQUEST),
    "0.3, part kind wrong": (rpc("message/send", message_0_3({"kind": SECRET})), "0.3", 1, INVALID_REQUEST),
    "0.3, role wrong": (rpc("message/send", message_0_3(role=SECRET)), "0.3", 1, INVALID_REQUEST),
    "0.3, id an object": (rpc("tasks/get", {"id": {SECRET: 1}}), "0.3", 1, INVALID_REQUEST),
    "0.3, file bytes not base64": (
        rpc("message/send", message_0_3({"kind": "file", "file": {"bytes": "!!!" + SECRET, "mimeType": "x"}}), "r1"),
        "0.3",
        "r1",
        NOT_READABLE,
    ),
    "0.3, data too deep": (
        rpc("message/send", message_0_3({"kind": "data", "data": {"skill": "ping", "input": {"a": DEEP}}})),
        "0.3",
        1,
        NOT_READABLE,
    ),
    "0.3, an unknown task": (rpc("tasks/get", {"id": SECRET}), "0.3", 1, NOT_FOUND),
    "0.3, sent as 1.0": (rpc("message/send", message_0_3({"kind": "text", "text": "hi"})), "1.0", 1, VERSION_0_3),
    "0.3, a version of the client's": (rpc("tasks/get", {"id": "t"}), SECRET, 1, VERSION_0_3),
    "an unknown method": (rpc(SECRET, {}), "1.0", 1, (-32601, "Method not found")),
}


def said_nothing_internal(text: str) -> bool:
    """No decoder, validator or exception text, and nothing the client sent: the MCP endpoint's check, and more."""
    lowered = text.lower()
    internal = ("validation", "pydantic", "input_value", "recursion", "traceback", "padding", "expecting", "parseerror")
    return SECRET.lower() not in lowered and not any(word in lowered for word in internal)


def answered_error(answer: dict[str, Any]) -> tuple[object, tuple[int, str]]:
    """An error answer's id, code and message, having checked it carries no detail."""
    assert set(answer) == {"jsonrpc", "id", "error"} and answer["jsonrpc"] == "2.0", answer
    error = answer["error"]
    assert set(error) <= {"code", "message", "data"}, error
    # 1.0's ErrorInfo keeps its reason and domain, nothing more; 0.3's data is null.
    infos: list[dict[str, Any]] = error.get("data") or []
    for info in infos:
        assert set(info) == {"@type", "reason", "domain", "metadata"} and info["metadata"] == {}, info
    return answer["id"], (error["code"], error["message"])


@pytest.mark.parametrize("name", list(MALFORMED_BODIES))
async def test_every_error_answer_is_the_endpoints_own_fixed_words_with_its_id(served: Served, name: str) -> None:
    body, version, answer_id, expected = MALFORMED_BODIES[name]
    headers = {"Content-Type": "application/json", "Authorization": "Bearer ann", "A2A-Version": version}
    async with httpx.AsyncClient(timeout=10) as http:
        response = await http.post(served.base + "/a2a", content=body, headers=headers)
    assert response.status_code == 200
    assert said_nothing_internal(response.text), response.text
    assert answered_error(response.json()) == (answer_id, expected)


async def sse_answers(http: httpx.AsyncClient, served: Served, body: bytes, version: str) -> list[dict[str, Any]]:
    headers = {"Content-Type": "application/json", "Authorization": "Bearer ann", "A2A-Version": version}
    async with http.stream("POST", served.base + "/a2a", content=body, headers=headers) as response:
        assert response.headers["content-type"].startswith("text/event-stream")
        text = (await response.aread()).decode()
    assert said_nothing_internal(text), text
    return [json.loads(line[len("data:") :]) for line in text.splitlines() if line.startswith("data:")]


async def test_an_error_in_a_stream_is_the_endpoints_own_fixed_words_too(served: Served) -> None:
    unreadable = message_0_3({"kind": "file", "file": {"bytes": "!!!" + SECRET, "mimeType": "x"}})
    async with httpx.AsyncClient(timeout=10) as http:
        (answer,) = await sse_answers(http, served, rpc("message/stream", unreadable, 5), "0.3")
        assert answered_error(answer) == (5, NOT_READABLE)
        # A good stream passes as the SDK sent it: its events, then the end.
        good = rpc("SendStreamingMessage", message_1_0({"data": {"skill": "ping"}}), 6)
        events = await sse_answers(http, served, good, "1.0")
    assert [e["id"] for e in events] == [6] * len(events) and "error" not in events[-1]
    assert events[-1]["result"]["statusUpdate"]["status"]["state"] == "TASK_STATE_COMPLETED"


async def test_a_streamed_answer_is_taken_once_and_refused_once_the_task_has_finished(served: Served) -> None:
    async with caller(served, "1.0") as a2a:
        waiting = await erase_waiting(a2a, served)
    erased = served.count(Erased)
    answer = message_1_0({"data": {"confirm": True}}, taskId=waiting.id)
    async with httpx.AsyncClient(timeout=10) as http:
        events = await sse_answers(http, served, rpc("SendStreamingMessage", answer, 8), "1.0")
        headers = {"Content-Type": "application/json", "Authorization": "Bearer ann", "A2A-Version": "1.0"}
        again = await http.post(served.base + "/a2a", content=rpc("SendStreamingMessage", answer, 9), headers=headers)
    assert events[-1]["result"]["statusUpdate"]["status"]["state"] == "TASK_STATE_COMPLETED"
    # Refused before any stream starts: a JSON answer, in the SDK's words for a finished task.
    assert answered_error(again.json()) == (9, (-32004, finished(waiting.id)))
    assert served.count(Erased) - erased == 1
    assert [r.confirmed for r in served.audited(waiting.id)] == [False, True]
