"""agentfx.a2a: the card as a pure function of the contract, and the server's edges in-process.

The in-process tests drive :func:`agentfx.a2a.a2a_app` through httpx's ASGI
transport, with the app's lifespan run around them, on asyncio only: the
SDK's server side is built on ``asyncio.Task`` and ``asyncio.Lock``
(``ActiveTask``, ``TaskUpdater``), so it cannot run on trio. The real-socket
tests, with the SDK's clients on both backends, are in
``tests/integration/test_a2a_http.py``.
"""

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import AsyncGenerator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, cast

import httpx
import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from a2a.client import ClientConfig, ClientFactory
from a2a.compat.v0_3 import types as types_v03
from a2a.server.agent_execution import RequestContext
from a2a.server.context import ServerCallContext
from a2a.server.events.event_queue_v2 import EventQueueSource
from a2a.helpers.proto_helpers import new_data_part
from a2a.types.a2a_pb2 import (
    AgentCard,
    Message,
    Role,
    SendMessageRequest,
    SendMessageResponse,
    StreamResponse,
    Task,
    TaskState,
    TaskStatus,
)
from a2a.utils.errors import UnsupportedOperationError
from a2a.utils.proto_utils import validate_proto_required_fields
from google.protobuf import json_format
from starlette.applications import Starlette
from starlette.requests import Request

import agentfx
import agentfx.a2a
from agentfx.a2a import SKILL_INPUT_SCHEMA_EXTENSION, BoundedTaskStore, a2a_app, agent_card, card_json
from agentfx.a2a import _answers as a2a_answers
from agentfx.a2a import _app as a2a_app_module  # pyright: ignore[reportPrivateUsage]
from agentfx._logs import Withheld
from agentfx.docs import messages
from agentfx.errors import ContractError
from agentfx.runtime import AgentRuntime
from agentfx.testing import RecordingHost
from examples.todo.app import AppAgent
from tests.test_exports import _core_modules, _run  # pyright: ignore[reportPrivateUsage]

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "todo" / "agent-card.json"
CARD_ARGS: dict[str, str] = {
    "name": "todo",
    "description": "Create, select and delete todos",
    "url": "http://127.0.0.1:8000/a2a",
    "version": "1.0.0",
}
REGENERATE = (
    "python -c 'import json; from examples.todo.app import AppAgent; "
    "from agentfx.a2a import agent_card, card_json; "
    'card = agent_card(AppAgent, name="todo", description="Create, select and delete todos", '
    'url="http://127.0.0.1:8000/a2a", version="1.0.0"); '
    'open("examples/todo/agent-card.json", "w").write(json.dumps(card_json(card), indent=2, sort_keys=True) + "\\n")\''
)


def _encoded(card: AgentCard) -> str:
    return json.dumps(card_json(card), indent=2, sort_keys=True) + "\n"


# --- The card ---------------------------------------------------------------------


def test_an_agent_card_of_what_expose_made_without_define_is_a_contract_error_naming_it() -> None:
    class Pinged(msgspec.Struct, tag=True):
        pass

    exposed = agentfx.expose(Pinged, agentfx.variant(Pinged, "Ping the app"))
    with pytest.raises(ContractError, match=r"^agent_card\(\) takes the result of define"):
        agent_card(exposed, **CARD_ARGS)  # pyright: ignore[reportArgumentType]


def test_the_committed_agent_card_matches_the_contract() -> None:
    committed = EXAMPLE.read_text() if EXAMPLE.exists() else ""
    assert committed == _encoded(agent_card(AppAgent, **CARD_ARGS)), (
        f"examples/todo/agent-card.json no longer matches AppAgent. Regenerate it from the repository root with:\n"
        f"  {REGENERATE}"
    )


def test_the_card_is_the_same_on_every_build() -> None:
    assert _encoded(agent_card(AppAgent, **CARD_ARGS)) == _encoded(agent_card(AppAgent, **CARD_ARGS))


def test_one_skill_per_capability_with_its_tags_in_declaration_order() -> None:
    card = agent_card(AppAgent, **CARD_ARGS)
    assert [(s.id, s.name, s.description, list(s.tags)) for s in card.skills] == [
        ("create_todo", "Create todo", "Create a new todo", ["RequestedCreateTodo"]),
        (
            "delete_selected_todo",
            "Delete selected todo",
            "Delete the currently selected todo",
            ["RequestedDeleteTodo", "model-dependent", "authorized", "may-confirm"],
        ),
        ("select_todo", "Select todo", "Select a todo by its id", ["SelectedTodo"]),
        ("cleared_selection", "Clear selection", "Clear the current selection", ["ClearedSelection", "model-dependent"]),
    ]


def test_the_input_schemas_travel_in_the_card_extension() -> None:
    card = agent_card(AppAgent, **CARD_ARGS)
    (extension,) = card.capabilities.extensions
    assert extension.uri == SKILL_INPUT_SCHEMA_EXTENSION == "urn:agentfx:a2a:skill-input-schema:v1"
    assert not extension.required
    params: Any = json_format.MessageToDict(extension.params)
    assert params == {"skills": {d.name: d.input_schema for d in messages(AppAgent)}}


def test_the_card_lists_one_endpoint_for_1_0_and_0_3_and_is_spec_compliant() -> None:
    card = agent_card(AppAgent, **CARD_ARGS)
    assert [(i.url, i.protocol_binding, i.protocol_version) for i in card.supported_interfaces] == [
        ("http://127.0.0.1:8000/a2a", "JSONRPC", "1.0"),
        ("http://127.0.0.1:8000/a2a", "JSONRPC", "0.3"),
    ]
    validate_proto_required_fields(card)
    # The served JSON also reads as a 0.3 card.
    types_v03.AgentCard.model_validate(card_json(card))
    assert card.capabilities.streaming and not card.capabilities.push_notifications


def test_an_empty_contract_has_no_skills_and_an_empty_schema_map() -> None:
    card = agent_card(agentfx.define(agentfx.expose(Ping)), **CARD_ARGS)
    assert list(card.skills) == []
    assert json_format.MessageToDict(card.capabilities.extensions[0].params) == {"skills": {}}


def test_the_package_exports_exactly_its_all() -> None:
    public = {n for n in vars(agentfx.a2a) if not n.startswith("_") and n not in {"annotations", "importlib"}}
    assert set(agentfx.a2a.__all__) == public
    assert sorted(agentfx.a2a.__all__) == list(agentfx.a2a.__all__)


def test_no_core_module_imports_the_a2a_sdk() -> None:
    out = _run(
        f"""
        import importlib, sys
        import agentfx
        for name in {_core_modules()!r}:
            importlib.import_module(name)
        print(sorted(m for m in sys.modules if m == "a2a" or m.startswith(("a2a.", "agentfx.a2a"))))
        """
    )
    assert out == "[]"


# --- The server, in-process -------------------------------------------------------


class Ping(msgspec.Struct, frozen=True, tag=True):
    pass


class Boom(msgspec.Struct, frozen=True, tag=True):
    pass


class Count(msgspec.Struct, frozen=True, tag=True):
    n: int
    ratio: float = 0.5


Msg = Ping | Boom | Count


def _exploding(_request: object) -> bool:
    raise RuntimeError("secret internals")


CONTRACT = agentfx.define(
    agentfx.expose(
        Msg,
        agentfx.variant(Ping, "Ping", name="ping", authorize=lambda req: req.principal != "mallory"),
        agentfx.variant(Boom, "Explode", name="boom", authorize=_exploding),
        agentfx.variant(Count, "Count", name="count"),
    )
)
CARD = agent_card(CONTRACT, name="t", description="t", url="http://127.0.0.1/a2a", version="1")


Host = RecordingHost[None, Msg, Any]


def _host() -> Host:
    return RecordingHost(None)


def _runtime(host: Host, audit: agentfx.AuditLog | None = None) -> AgentRuntime[Any, Any]:
    return agentfx.bind(CONTRACT, host=host.host, audit=audit)


@asynccontextmanager
async def _http(asgi: Starlette, **headers: str) -> AsyncGenerator[httpx.AsyncClient]:
    async with asgi.router.lifespan_context(asgi):
        transport = httpx.ASGITransport(app=asgi)
        # Without the header the SDK takes a request for 0.3.
        headers = {"A2A-Version": "1.0", **headers}
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1", headers=headers) as http:
            yield http


def _send(skill: str, payload: object, *, method: str = "SendMessage") -> dict[str, Any]:
    message = {"messageId": uuid.uuid4().hex, "role": "ROLE_USER", "parts": [{"data": {"skill": skill, "input": payload}}]}
    return {"jsonrpc": "2.0", "id": 1, "method": method, "params": {"message": message}}


async def _task(http: httpx.AsyncClient, skill: str, payload: object) -> Task:
    answer = (await http.post("/a2a", json=_send(skill, payload), headers={"A2A-Version": "1.0"})).json()
    return json_format.ParseDict(answer["result"], SendMessageResponse()).task


def _text(task: Task) -> str:
    return task.status.message.parts[0].text


# The SDK's server runs on asyncio only (see the module docstring).
ASYNCIO = pytest.mark.parametrize("anyio_backend", ["asyncio"])


@ASYNCIO
@pytest.mark.anyio
async def test_a_hook_that_raises_fails_the_task_and_nothing_internal_leaks(caplog: pytest.LogCaptureFixture) -> None:
    audit = agentfx.audit_log()
    async with _http(a2a_app(_runtime(_host(), audit), CARD)) as http:
        with caplog.at_level(logging.ERROR, logger="agentfx.a2a"):
            response = await http.post("/a2a", json=_send("boom", {}), headers={"A2A-Version": "1.0"})
    assert "secret internals" not in response.text
    task = json_format.ParseDict(response.json()["result"], SendMessageResponse()).task
    assert task.status.state == TaskState.TASK_STATE_FAILED
    assert _text(task) == 'Capability "boom" failed unexpectedly'
    assert json_format.MessageToDict(task.status.message.parts[1].data) == {
        "_tag": "AgentDefect",
        "capability": "boom",
        "message": 'Capability "boom" failed unexpectedly',
    }
    # The traceback is the application's, in its log.
    assert "secret internals" in caplog.text
    assert [(e.capability, e.outcome, e.transport, e.invocation) for e in audit.entries()] == [
        ("boom", "AgentDefect", "a2a", task.id)
    ]


@ASYNCIO
@pytest.mark.anyio
async def test_runtime_for_that_raises_is_a_defect_too() -> None:
    def broken(_principal: object) -> AgentRuntime[Any, Any]:
        raise RuntimeError("secret internals")

    async with _http(a2a_app(broken, CARD)) as http:
        task = await _task(http, "ping", {})
    assert task.status.state == TaskState.TASK_STATE_FAILED
    assert _text(task) == 'Capability "ping" failed unexpectedly'


@ASYNCIO
@pytest.mark.anyio
async def test_whole_numbers_arrive_as_integers_and_fractions_stay_floats() -> None:
    # A protobuf Value keeps every number as a double.
    host = _host()
    async with _http(a2a_app(_runtime(host), CARD)) as http:
        whole = await _task(http, "count", {"n": 3, "ratio": 1})
        fraction = await _task(http, "count", {"n": 2.5})
    assert whole.status.state == TaskState.TASK_STATE_COMPLETED
    assert host.dispatched == [Count(n=3, ratio=1)]
    assert fraction.status.state == TaskState.TASK_STATE_REJECTED
    assert _text(fraction) == 'Invalid input for "count": "n" must be an integer'


_EXACT_INTEGERS_TEXT = (
    "A data part carries numbers as doubles, exact only below 2**53: send a larger integer "
    "in a call as JSON text, in one text part of media type application/json"
)


@ASYNCIO
@pytest.mark.anyio
@pytest.mark.parametrize("n", [1e300, 2**53 + 1, 2**53, -(2**53)], ids=["1e300", "2**53+1", "2**53", "-2**53"])
async def test_a_whole_double_past_2_53_in_a_data_part_is_refused_for_an_int_field_and_steers_to_json_text(
    n: float,
) -> None:
    # 2**53 + 1 arrives as the double 2**53, which 2**53 itself also is: neither is known to be what was sent.
    host = _host()
    audit = agentfx.audit_log()
    async with _http(a2a_app(_runtime(host, audit), CARD)) as http:
        refused = await _task(http, "count", {"n": n})
        # Below 2**53 a whole double is the one integer it was sent as; a float field takes any.
        edge = await _task(http, "count", {"n": 2**53 - 1, "ratio": n})
        negative = await _task(http, "count", {"n": -(2**53 - 1)})
        # Refused for something else, the same number in a float field: nothing to steer.
        unrelated = await _task(http, "count", {"ratio": n})
    assert _text(unrelated) == 'Invalid input for "count": "n" is required'
    assert refused.status.state == TaskState.TASK_STATE_REJECTED
    assert _text(refused) == f'Invalid input for "count": "n" must be an integer\n{_EXACT_INTEGERS_TEXT}'
    failure = json_format.MessageToDict(refused.status.message.parts[1].data)
    assert failure["_tag"] == "AgentInvalidInputError" and failure["path"] == "$.n"
    assert edge.status.state == negative.status.state == TaskState.TASK_STATE_COMPLETED
    assert host.dispatched == [Count(n=2**53 - 1, ratio=float(n)), Count(n=-(2**53 - 1))]
    assert [(e.decision, e.outcome) for e in audit.entries()] == [
        ("refused", "AgentInvalidInputError"),
        ("dispatched", "dispatched"),
        ("dispatched", "dispatched"),
        ("refused", "AgentInvalidInputError"),
    ]


@ASYNCIO
@pytest.mark.anyio
async def test_an_absent_input_is_the_payload_free_call() -> None:
    host = _host()
    message = {"messageId": "m", "role": "ROLE_USER", "parts": [{"data": {"skill": "ping"}}]}
    async with _http(a2a_app(_runtime(host), CARD)) as http:
        answer = await http.post(
            "/a2a", json={"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": message}}
        )
    task = json_format.ParseDict(answer.json()["result"], SendMessageResponse()).task
    assert task.status.state == TaskState.TASK_STATE_COMPLETED
    assert host.dispatched == [Ping()]


@ASYNCIO
@pytest.mark.anyio
async def test_a_raw_0_3_message_send_is_answered_in_0_3() -> None:
    host = _host()
    message = {
        "kind": "message",
        "messageId": "m1",
        "role": "user",
        "parts": [{"kind": "data", "data": {"skill": "count", "input": {"n": 4}}}],
    }
    async with _http(a2a_app(_runtime(host), CARD)) as http:
        answer = (
            await http.post(
                "/a2a",
                json={"jsonrpc": "2.0", "id": 7, "method": "message/send", "params": {"message": message}},
                headers={"A2A-Version": "0.3"},
            )
        ).json()
    parsed = types_v03.SendMessageResponse.model_validate(answer).root
    assert isinstance(parsed, types_v03.SendMessageSuccessResponse)
    task = parsed.result
    assert isinstance(task, types_v03.Task)
    assert task.status.state == types_v03.TaskState.completed
    assert task.artifacts is not None
    assert task.artifacts[0].parts[0].root == types_v03.DataPart(data={"capability": "count", "tag": "Count"})
    assert host.dispatched == [Count(n=4)]


_COUNT_0_3 = {
    "kind": "message",
    "messageId": "m1",
    "role": "user",
    "parts": [{"kind": "data", "data": {"skill": "count", "input": {"n": 4}}}],
}


@ASYNCIO
@pytest.mark.anyio
@pytest.mark.parametrize(
    ("version", "method", "params"),
    [
        ("1.0", "SendMessage", _send("count", {"n": 4})["params"]),
        ("1.0", "SendStreamingMessage", _send("count", {"n": 4})["params"]),
        ("0.3", "message/send", {"message": _COUNT_0_3}),
    ],
)
async def test_a_request_without_an_id_is_refused_and_dispatches_nothing(version: str, method: str, params: object) -> None:
    # JSON-RPC would call it a notification; A2A defines none, and a call
    # whose outcome nobody hears must not run. The same request with an id runs.
    host = _host()
    notification = {"jsonrpc": "2.0", "method": method, "params": params}
    async with _http(a2a_app(_runtime(host), CARD)) as http:
        refused = await http.post("/a2a", json=notification, headers={"A2A-Version": version})
        assert host.dispatched == []
        with_id = await http.post("/a2a", json={**notification, "id": 7}, headers={"A2A-Version": version})
    assert refused.status_code == 200
    assert refused.json() == {"jsonrpc": "2.0", "id": None, "error": {"code": -32600, "message": a2a_answers.NO_ID}}
    assert with_id.status_code == 200 and "error" not in with_id.text
    assert host.dispatched == [Count(n=4)]


@ASYNCIO
@pytest.mark.anyio
async def test_a_1_0_request_whose_id_is_null_is_still_a_request() -> None:
    # JSON-RPC discourages a null id but allows it; only an absent one makes a notification.
    host = _host()
    async with _http(a2a_app(_runtime(host), CARD)) as http:
        answer = await http.post("/a2a", json={**_send("count", {"n": 4}), "id": None})
    assert answer.json()["id"] is None and "result" in answer.json()
    assert host.dispatched == [Count(n=4)]


@ASYNCIO
@pytest.mark.anyio
async def test_streaming_sends_the_task_then_working_the_artifact_and_completed() -> None:
    host = _host()
    async with _http(a2a_app(_runtime(host), CARD)) as http:
        client = ClientFactory(ClientConfig(httpx_client=http, streaming=True)).create(CARD)
        request = SendMessageRequest(
            message=Message(message_id="s1", role=Role.ROLE_USER, parts=[new_data_part({"skill": "ping", "input": {}})])
        )
        events: list[StreamResponse] = [event async for event in client.send_message(request)]
    kinds = [event.WhichOneof("payload") for event in events]
    assert kinds == ["task", "status_update", "artifact_update", "status_update"]
    assert events[0].task.status.state == TaskState.TASK_STATE_SUBMITTED
    assert events[1].status_update.status.state == TaskState.TASK_STATE_WORKING
    assert events[3].status_update.status.state == TaskState.TASK_STATE_COMPLETED
    assert host.dispatched == [Ping()]


def test_authenticate_with_a_bound_runtime_is_a_contract_error() -> None:
    with pytest.raises(ContractError, match="needs an App or runtime_for"):
        a2a_app(_runtime(_host()), CARD, authenticate=lambda _request: "ann")  # pyright: ignore[reportCallIssue, reportArgumentType, reportUnknownLambdaType]


def _runtime_for(seen: list[object]) -> Callable[[object], AgentRuntime[Any, Any]]:
    def runtime_for(principal: object) -> AgentRuntime[Any, Any]:
        seen.append(principal)
        recording: Host = RecordingHost(None, principal=principal)
        return agentfx.bind(CONTRACT, host=recording.host)

    return runtime_for


@ASYNCIO
@pytest.mark.anyio
async def test_an_async_authenticate_gives_each_call_its_principal() -> None:
    seen: list[object] = []

    async def authenticate(request: Request) -> str | None:
        return request.headers.get("x-user")

    asgi = a2a_app(_runtime_for(seen), CARD, authenticate=authenticate)
    async with _http(asgi) as http:
        allowed = await _task_as(http, "ann")
        refused = await _task_as(http, "mallory")
        nobody = await http.post("/a2a", json=_send("ping", {}))
    assert allowed.status.state == TaskState.TASK_STATE_COMPLETED
    assert refused.status.state == TaskState.TASK_STATE_REJECTED
    assert _text(refused) == 'Not authorized to invoke "ping"'
    assert seen == ["ann", "mallory"]
    assert nobody.status_code == 401


@ASYNCIO
@pytest.mark.anyio
async def test_an_authenticate_that_reads_the_body_leaves_it_for_the_call() -> None:
    async def signed(request: Request) -> str | None:
        # A signature over the body, say: the hook reads it all.
        return "ann" if (await request.json())["id"] == 1 else None

    seen: list[object] = []
    async with _http(a2a_app(_runtime_for(seen), CARD, authenticate=signed)) as http:
        task = await _task(http, "ping", {})
    assert task.status.state == TaskState.TASK_STATE_COMPLETED
    assert seen == ["ann"]


async def _task_as(http: httpx.AsyncClient, user: str) -> Task:
    answer = (await http.post("/a2a", json=_send("ping", {}), headers={"x-user": user})).json()
    return json_format.ParseDict(answer["result"], SendMessageResponse()).task


def _unhashable(_request: Request) -> list[str]:
    return ["unhashable"]


@ASYNCIO
@pytest.mark.anyio
@pytest.mark.parametrize(
    "authenticate",
    [
        pytest.param(_exploding, id="raises"),
        pytest.param(_unhashable, id="unhashable"),
    ],
)
async def test_an_authenticate_that_fails_is_a_500_that_says_nothing(
    authenticate: Callable[[Request], object], caplog: pytest.LogCaptureFixture
) -> None:
    asgi = a2a_app(_runtime_for([]), CARD, authenticate=authenticate)
    async with _http(asgi) as http:
        with caplog.at_level(logging.ERROR, logger="agentfx.a2a"):
            response = await http.post("/a2a", json=_send("ping", {}))
    assert response.status_code == 500
    assert response.json()["error"]["message"] == "Internal error"
    assert "secret" not in response.text and "unhashable" not in response.text
    assert caplog.records


@ASYNCIO
@pytest.mark.anyio
async def test_an_authenticate_that_hangs_is_a_503(monkeypatch: pytest.MonkeyPatch) -> None:
    import anyio

    monkeypatch.setattr(a2a_app_module, "AUTHENTICATE_TIMEOUT", 0.05)

    async def hangs(_request: Request) -> str:
        await anyio.sleep(10)
        return "ann"

    async with _http(a2a_app(_runtime_for([]), CARD, authenticate=hangs)) as http:
        response = await http.post("/a2a", json=_send("ping", {}))
    assert response.status_code == 503


@ASYNCIO
@pytest.mark.anyio
async def test_a_body_over_the_limit_is_413_and_dispatches_nothing() -> None:
    host = _host()
    big = json.dumps(_send("count", {"n": 1, "pad": "x" * a2a_app_module.MAX_REQUEST_BODY}))
    async with _http(a2a_app(_runtime(host), CARD)) as http:
        response = await http.post("/a2a", content=big, headers={"Content-Type": "application/json"})
    assert response.status_code == 413
    assert host.dispatched == []


@ASYNCIO
@pytest.mark.anyio
async def test_a_streamed_body_over_the_limit_is_cut_and_dispatches_nothing() -> None:
    host = _host()
    body = json.dumps(_send("count", {"n": 1, "pad": "x" * a2a_app_module.MAX_REQUEST_BODY})).encode()

    async def chunks() -> AsyncGenerator[bytes]:
        # No Content-Length: only counting what arrives can bound it.
        for start in range(0, len(body), 64 * 1024):
            yield body[start : start + 64 * 1024]

    async with _http(a2a_app(_runtime(host), CARD)) as http:
        response = await http.post("/a2a", content=chunks(), headers={"Content-Type": "application/json"})
    assert response.status_code == 413
    assert host.dispatched == []


@ASYNCIO
@pytest.mark.anyio
async def test_listed_origins_and_hosts_replace_the_loopback_defaults() -> None:
    asgi = a2a_app(
        _runtime(_host()),
        CARD,
        allowed_origins=["https://console.example"],
        allowed_hosts=["agent.example"],
    )
    async with _http(asgi) as http:
        listed = await http.get("/.well-known/agent-card.json", headers={"Host": "agent.example", "Origin": "https://console.example"})
        loopback_origin = await http.get(
            "/.well-known/agent-card.json", headers={"Host": "agent.example", "Origin": "http://localhost"}
        )
        loopback_host = await http.get("/.well-known/agent-card.json")
    assert listed.status_code == 200
    assert listed.json()["skills"][0]["id"] == "ping"
    assert loopback_origin.status_code == 403
    assert loopback_host.status_code == 421


def test_the_readme_a2a_example_builds_the_committed_card_and_an_app() -> None:
    import re

    text = (Path(__file__).resolve().parent.parent / "README.md").read_text()
    section = text.split("## Serving over A2A", 1)[1].split("\n## ", 1)[0]
    (block,) = re.findall(r"```python\n(.*?)```", section, re.DOTALL)
    namespace: dict[str, Any] = {"__name__": "readme"}
    exec(compile(block, "README.md", "exec"), namespace)
    assert isinstance(namespace["asgi"], Starlette)
    assert _encoded(namespace["card"]) == EXAMPLE.read_text()


class Erased(msgspec.Struct, frozen=True, tag=True):
    pass


@ASYNCIO
@pytest.mark.anyio
async def test_an_answer_after_the_parked_task_was_released_still_confirms(monkeypatch: pytest.MonkeyPatch) -> None:
    import anyio

    monkeypatch.setattr(a2a_app_module, "PARKED_TASK_TIMEOUT", 0.05)
    contract = agentfx.define(
        agentfx.expose(Erased, agentfx.variant(Erased, "Erase", name="erase", authorize=lambda _: agentfx.Confirm("Erase?")))
    )
    host: RecordingHost[None, Erased, Any] = RecordingHost(None)
    card = agent_card(contract, name="t", description="t", url="http://127.0.0.1/a2a", version="1")
    async with _http(a2a_app(agentfx.bind(contract, host=host.host), card)) as http:
        waiting = await _task(http, "erase", {})
        assert waiting.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
        await anyio.sleep(0.3)  # released by now: nothing of the task is running
        message = {"messageId": "a1", "role": "ROLE_USER", "taskId": waiting.id, "parts": [{"data": {"confirm": True}}]}
        answer = (
            await http.post("/a2a", json={"jsonrpc": "2.0", "id": 2, "method": "SendMessage", "params": {"message": message}})
        ).json()
    done = json_format.ParseDict(answer["result"], SendMessageResponse()).task
    assert done.status.state == TaskState.TASK_STATE_COMPLETED
    assert host.dispatched == [Erased()]


def _nested(inner: st.SearchStrategy[object]) -> st.SearchStrategy[object]:
    return st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3)


_SCALARS: st.SearchStrategy[object] = (
    st.none()
    | st.booleans()
    | st.integers(-(2**40), 2**40)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=8)
)
_JSON: st.SearchStrategy[object] = st.recursive(_SCALARS, _nested, max_leaves=8)
_NUMBERS: st.SearchStrategy[object] = st.integers(-(2**40), 2**40) | _JSON
_INPUTS: st.SearchStrategy[object] = st.fixed_dictionaries({}, optional={"n": _NUMBERS, "ratio": _NUMBERS}) | _JSON
_SKILLS: st.SearchStrategy[object] = st.sampled_from(["count", "ping", "nope"]) | st.sampled_from(["count"]) | _JSON
_CALL: st.SearchStrategy[dict[str, object]] = st.fixed_dictionaries(
    {"skill": _SKILLS}, optional={"input": _INPUTS}
)
# Mostly calls shaped right, so the property sees dispatches as well as refusals.
_CALLS: st.SearchStrategy[object] = st.one_of(_JSON, _CALL.map(lambda call: {**call, "extra": None}), _CALL, _CALL)
_CALL_SHAPE_TEXT = 'A message to this agent carries one data part {"skill": <skill id>, "input": {...}}'
_KNOWN_TAGS = {
    "MalformedMessage",
    "AgentUnknownCapabilityError",
    "AgentInvalidInputError",
    "AgentAuthorizationError",
}


async def _one_call(data: object) -> tuple[Task, list[object]]:
    from a2a.server.context import ServerCallContext
    from a2a.server.request_handlers import DefaultRequestHandler
    from a2a.server.tasks import InMemoryTaskStore

    from agentfx.a2a import AgentfxExecutor

    host = _host()
    handler = DefaultRequestHandler(
        agent_executor=AgentfxExecutor(_runtime(host)), task_store=InMemoryTaskStore(), agent_card=CARD
    )
    try:
        message = Message(message_id="p", role=Role.ROLE_USER, parts=[new_data_part(data)])
        # The SDK's decorator leaves the method untyped.
        send: Any = handler.on_message_send  # pyright: ignore[reportUnknownMemberType, reportUnknownVariableType]
        result: object = await send(SendMessageRequest(message=message), ServerCallContext())
    finally:
        await handler.aclose()
    assert isinstance(result, Task)
    return result, list(host.dispatched)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_CALLS)
def test_any_data_part_is_either_one_call_or_a_clean_rejection(data: object) -> None:
    import asyncio

    task, dispatched = asyncio.run(_one_call(data))
    validate_proto_required_fields(task)
    parts = task.status.message.parts
    if task.status.state == TaskState.TASK_STATE_COMPLETED:
        assert len(dispatched) == 1 and isinstance(dispatched[0], Ping | Count)
        return
    # Anything else is refused before anything is sent, in agentfx's words.
    assert task.status.state == TaskState.TASK_STATE_REJECTED, task
    assert dispatched == []
    failure = json_format.MessageToDict(parts[1].data)
    assert failure["_tag"] in _KNOWN_TAGS
    assert parts[2].media_type == "application/json" and json.loads(parts[2].text) == failure
    if not isinstance(data, dict) or not isinstance(cast("dict[str, object]", data).get("skill"), str):
        # A skill that is not a string is no call: not an unknown capability.
        assert failure == {"_tag": "MalformedMessage", "message": _CALL_SHAPE_TEXT}
    assert parts[0].text.startswith(failure["message"])
    assert "Traceback" not in parts[0].text and "msgspec" not in parts[0].text.lower()


# --- The default task store is bounded ----------------------------------------------


@pytest.mark.parametrize("name", ["max_tasks", "max_task_bytes", "max_live_tasks_per_owner"])
def test_a_bound_of_the_default_store_only_bounds_the_default_store_and_is_at_least_one(name: str) -> None:
    from a2a.server.tasks import InMemoryTaskStore

    from agentfx.a2a import BoundedTaskStore

    options: dict[str, Any] = {name: 5}
    for store in (InMemoryTaskStore(), BoundedTaskStore()):
        with pytest.raises(ContractError, match=f"a2a_app\\({name}=\\.\\.\\.\\) bounds the default task store"):
            a2a_app(_runtime(_host()), CARD, task_store=store, **options)
    options[name] = 0
    with pytest.raises(ContractError, match="at least 1"):
        a2a_app(_runtime(_host()), CARD, **options)


def _erase_contract() -> tuple[Any, AgentCard]:
    contract = agentfx.define(
        agentfx.expose(
            Erased | Ping,
            agentfx.variant(Erased, "Erase", name="erase", authorize=lambda _: agentfx.Confirm("Erase?")),
            agentfx.variant(Ping, "Ping", name="ping"),
        )
    )
    return contract, agent_card(contract, name="t", description="t", url="http://127.0.0.1/a2a", version="1")


def _request(skill: str, task_id: str = "", data: object = None) -> SendMessageRequest:
    part = new_data_part({"skill": skill, "input": {}} if data is None else data)
    return SendMessageRequest(message=Message(message_id=uuid.uuid4().hex, role=Role.ROLE_USER, task_id=task_id, parts=[part]))


async def _sent(client: Any, request: SendMessageRequest) -> Task:
    (response,) = [response async for response in client.send_message(request)]
    return response.task


@ASYNCIO
@pytest.mark.anyio
async def test_the_default_store_evicts_the_oldest_finished_task_whose_get_is_then_not_found() -> None:
    from a2a.types.a2a_pb2 import GetTaskRequest
    from a2a.utils.errors import TaskNotFoundError

    host = _host()
    async with _http(a2a_app(_runtime(host), CARD, max_tasks=2)) as http:
        client = ClientFactory(ClientConfig(httpx_client=http, streaming=False)).create(CARD)
        tasks = [await _sent(client, _request("ping")) for _ in range(3)]
        with pytest.raises(TaskNotFoundError):
            await client.get_task(GetTaskRequest(id=tasks[0].id))
        kept = [await client.get_task(GetTaskRequest(id=t.id)) for t in tasks[1:]]
        # As for an id that never existed.
        with pytest.raises(TaskNotFoundError):
            await client.get_task(GetTaskRequest(id=uuid.uuid4().hex))
        await client.close()
    assert [t.status.state for t in kept] == [TaskState.TASK_STATE_COMPLETED] * 2
    assert host.dispatched == [Ping()] * 3


@ASYNCIO
@pytest.mark.anyio
async def test_a_store_full_of_waiting_tasks_refuses_a_new_one_typed_dispatching_nothing() -> None:
    from a2a.utils.errors import UnsupportedOperationError

    from agentfx.a2a._store import AT_CAPACITY

    contract, card = _erase_contract()
    host: RecordingHost[None, Any, Any] = RecordingHost(None)
    audit = agentfx.audit_log()
    async with _http(a2a_app(agentfx.bind(contract, host=host.host, audit=audit), card, max_tasks=1)) as http:
        client = ClientFactory(ClientConfig(httpx_client=http, streaming=False)).create(card)
        waiting = await _sent(client, _request("erase"))
        assert waiting.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
        with pytest.raises(UnsupportedOperationError, match="The agent is busy"):
            await _sent(client, _request("ping"))
        raw = (await http.post("/a2a", json=_send("ping", {}))).json()
        streamed = await http.post("/a2a", json=_send("ping", {}, method="SendStreamingMessage"))
        legacy = (
            await http.post(
                "/a2a",
                json={
                    "jsonrpc": "2.0",
                    "id": 3,
                    "method": "message/send",
                    "params": {"message": {"kind": "message", "messageId": "m", "role": "user",
                                           "parts": [{"kind": "data", "data": {"skill": "ping"}}]}},
                },
                headers={"A2A-Version": "0.3"},
            )
        ).json()
        # The waiting task is untouched and still answers.
        done = await _sent(client, _request("erase", waiting.id, {"confirm": True}))
        # Finished, it is the next task's room.
        after = await _sent(client, _request("ping"))
        await client.close()
    # The SDK's own error, in its own shape: nothing else is said.
    refusal: dict[str, object] = {
        "code": -32004,
        "message": AT_CAPACITY,
        "data": [
            {
                "@type": "type.googleapis.com/google.rpc.ErrorInfo",
                "domain": "a2a-protocol.org",
                "metadata": dict[str, str](),
                "reason": "UNSUPPORTED_OPERATION",
            }
        ],
    }
    assert raw["error"] == refusal
    assert streamed.headers["content-type"].startswith("application/json")
    assert streamed.json()["error"] == refusal
    assert legacy["error"] == {"code": -32004, "message": AT_CAPACITY, "data": None}
    assert done.status.state == after.status.state == TaskState.TASK_STATE_COMPLETED
    assert host.dispatched == [Erased(), Ping()]
    assert [e.capability for e in audit.entries()] == ["erase", "erase", "ping"]


@ASYNCIO
@pytest.mark.anyio
async def test_a_bounded_store_given_as_task_store_admits_new_tasks_the_same_way() -> None:
    from agentfx.a2a import BoundedTaskStore

    contract, card = _erase_contract()
    host: RecordingHost[None, Any, Any] = RecordingHost(None)
    store = BoundedTaskStore(1, waiting_timeout=None)
    async with _http(a2a_app(agentfx.bind(contract, host=host.host), card, task_store=store)) as http:
        waiting = (await http.post("/a2a", json=_send("erase", {}))).json()["result"]["task"]
        refused = (await http.post("/a2a", json=_send("ping", {}))).json()
    assert waiting["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
    assert refused["error"]["code"] == -32004
    assert host.dispatched == [] and store.size == 1


@ASYNCIO
@pytest.mark.anyio
async def test_a_task_parked_past_the_parked_timeout_makes_room_when_nothing_finished_can(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import anyio

    monkeypatch.setattr(a2a_app_module, "PARKED_TASK_TIMEOUT", 0.05)
    contract, card = _erase_contract()
    host: RecordingHost[None, Any, Any] = RecordingHost(None)
    async with _http(a2a_app(agentfx.bind(contract, host=host.host), card, max_tasks=1)) as http:
        waiting = (await http.post("/a2a", json=_send("erase", {}))).json()["result"]["task"]
        await anyio.sleep(0.1)
        after = (await http.post("/a2a", json=_send("ping", {}))).json()["result"]["task"]
        message = {"messageId": "a1", "role": "ROLE_USER", "taskId": waiting["id"], "parts": [{"data": {"confirm": True}}]}
        answer = (
            await http.post("/a2a", json={"jsonrpc": "2.0", "id": 2, "method": "SendMessage", "params": {"message": message}})
        ).json()
    assert after["status"]["state"] == "TASK_STATE_COMPLETED"
    # The parked task made the room: answering it now is answering an unknown task.
    assert answer["error"]["code"] == -32001
    assert host.dispatched == [Ping()]


class _Recorded(EventQueueSource):
    """An event queue that only records what the executor puts on it."""

    def __init__(self) -> None:
        super().__init__()
        self.events: list[object] = []

    async def enqueue_event(self, event: Any) -> None:
        self.events.append(event)


@ASYNCIO
@pytest.mark.anyio
@pytest.mark.parametrize(
    "state",
    [TaskState.TASK_STATE_COMPLETED, TaskState.TASK_STATE_REJECTED, TaskState.TASK_STATE_WORKING],
    ids=["completed", "rejected", "working"],
)
async def test_an_answer_that_finds_its_task_not_waiting_dispatches_nothing(state: TaskState) -> None:
    # What the SDK hands the executor when answers to one task were queued
    # behind another that settled it: the task as it is by then.
    host = _host()
    executor = agentfx.a2a.AgentfxExecutor(_runtime(host))
    call = Message(message_id="c", role=Role.ROLE_USER, parts=[new_data_part({"skill": "ping", "input": {}})])
    answer = Message(message_id="a", role=Role.ROLE_USER, task_id="t", parts=[new_data_part({"confirm": True})])
    current = Task(id="t", context_id="c", status=TaskStatus(state=state), history=[call])
    context = RequestContext(
        ServerCallContext(), SendMessageRequest(message=answer), task_id="t", context_id="c", task=current
    )
    queue = _Recorded()
    try:
        if state == TaskState.TASK_STATE_WORKING:
            # Raising would fail a task whose call is not this answer's: nothing is written.
            await executor.execute(context, queue)
        else:
            with pytest.raises(UnsupportedOperationError) as refused:
                await executor.execute(context, queue)
            assert refused.value.message == f"Task t is in terminal state: {TaskState.Name(state)}"
    finally:
        await queue.close(immediate=True)
    assert queue.events == [] and host.dispatched == []


@ASYNCIO
@pytest.mark.anyio
async def test_an_error_event_split_over_sends_is_put_together_rewritten_and_the_rest_passes() -> None:
    sent: list[dict[str, Any]] = []

    async def send(message: Any) -> None:
        sent.append(message)

    exchange = a2a_answers.Exchange(a2a_answers.Envelope("SendStreamingMessage"))
    answers = a2a_answers.Answers(send, exchange, frozenset())
    error = json.dumps({"jsonrpc": "2.0", "id": 1, "error": {"code": -32603, "message": "secret internals"}})
    ok = json.dumps({"jsonrpc": "2.0", "id": 1, "result": {"error": "a key of the result's"}})
    stream = f": ping\r\n\r\ndata: {ok}\r\n\r\nevent: error\r\ndata: {error}\r\n\r\n".encode()
    await answers({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/event-stream")]})
    cut = stream.index(b"secret") + 3
    await answers({"type": "http.response.body", "body": stream[:cut], "more_body": True})
    await answers({"type": "http.response.body", "body": stream[cut:], "more_body": True})
    await answers({"type": "http.response.body", "body": b"", "more_body": False})
    out = b"".join(m.get("body", b"") for m in sent[1:]).decode()
    assert "secret" not in out
    assert out == (
        f": ping\r\n\r\ndata: {ok}\r\n\r\nevent: error\r\n"
        'data: {"jsonrpc":"2.0","id":1,"error":{"code":-32603,"message":"Internal error"}}\r\n\r\n'
    )
    assert sent[-1] == {"type": "http.response.body", "body": b"", "more_body": False}


def _text_send(text: str, *, media_type: str = "application/json", task_id: str = "") -> dict[str, Any]:
    message: dict[str, Any] = {
        "messageId": uuid.uuid4().hex,
        "role": "ROLE_USER",
        "parts": [{"text": text, "mediaType": media_type}],
    }
    if task_id:
        message["taskId"] = task_id
    return {"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": message}}


async def _text_task(http: httpx.AsyncClient, text: str, **kwargs: str) -> Task:
    answer = (await http.post("/a2a", json=_text_send(text, **kwargs))).json()
    return json_format.ParseDict(answer["result"], SendMessageResponse()).task


@ASYNCIO
@pytest.mark.anyio
async def test_a_call_as_json_text_reads_its_numbers_exactly() -> None:
    # A data part carries numbers as doubles: 2**53 + 1 would arrive as 2**53.
    host = _host()
    big = 2**53 + 1
    async with _http(a2a_app(_runtime(host), CARD)) as http:
        exact = await _text_task(http, '{"skill": "count", "input": {"n": %d, "ratio": 0.25}}' % big)
        typed = await _text_task(http, '{"skill":"count","input":{"n":2}}', media_type="Application/JSON; charset=utf-8")
        # Exact JSON is strict JSON: 2.0 is not an integer, as over MCP.
        fraction = await _text_task(http, '{"skill": "count", "input": {"n": 2.0}}')
        rounded = await _task(http, "count", {"n": big})
    assert exact.status.state == TaskState.TASK_STATE_COMPLETED
    assert typed.status.state == TaskState.TASK_STATE_COMPLETED
    assert fraction.status.state == TaskState.TASK_STATE_REJECTED
    assert _text(fraction) == 'Invalid input for "count": "n" must be an integer'
    # The same number in a data part is a double that is no one integer: refused, not rounded.
    assert rounded.status.state == TaskState.TASK_STATE_REJECTED
    assert host.dispatched == [Count(n=big, ratio=0.25), Count(n=2)]


@ASYNCIO
@pytest.mark.anyio
@pytest.mark.parametrize(
    ("text", "media_type"),
    [
        ('{"skill": "count", "input": {"n": 1}}', "text/plain"),  # plain text is not a call
        ('{"skill": "count", "input": {"n": 1}', "application/json"),  # not JSON
        ('["count", {"n": 1}]', "application/json"),  # not an object
        ('{"skill": "\\ud800", "input": {}}', "application/json"),  # a lone surrogate
        ("[" * 5000 + "]" * 5000, "application/json"),  # deeper than the parser goes
        ('{"skill": 3}', "application/json"),
    ],
    ids=["plain-text", "not-json", "not-an-object", "lone-surrogate", "too-deep", "skill-not-a-string"],
)
async def test_a_json_text_part_that_is_not_a_call_is_the_malformed_message(text: str, media_type: str) -> None:
    host = _host()
    audit = agentfx.audit_log()
    async with _http(a2a_app(_runtime(host, audit), CARD)) as http:
        task = await _text_task(http, text, media_type=media_type)
    assert task.status.state == TaskState.TASK_STATE_REJECTED
    assert _text(task) == _CALL_SHAPE_TEXT
    assert host.dispatched == [] and audit.entries() == []


@ASYNCIO
@pytest.mark.anyio
async def test_a_person_can_answer_as_json_text_too() -> None:
    contract = agentfx.define(
        agentfx.expose(Erased, agentfx.variant(Erased, "Erase", name="erase", authorize=lambda _: agentfx.Confirm("Erase?")))
    )
    host: RecordingHost[None, Erased, Any] = RecordingHost(None)
    card = agent_card(contract, name="t", description="t", url="http://127.0.0.1/a2a", version="1")
    async with _http(a2a_app(agentfx.bind(contract, host=host.host), card)) as http:
        waiting = await _text_task(http, '{"skill": "erase"}')
        assert waiting.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
        done = await _text_task(http, '{"confirm": true}', task_id=waiting.id)
    assert done.status.state == TaskState.TASK_STATE_COMPLETED
    assert host.dispatched == [Erased()]


# --- A waiting task's answers ------------------------------------------------------------


def _reply(task_id: str, data: object, *, role: Role = Role.ROLE_USER, message_id: str = "") -> SendMessageRequest:
    message = Message(message_id=message_id or uuid.uuid4().hex, role=role, task_id=task_id, parts=[new_data_part(data)])
    return SendMessageRequest(message=message)


@ASYNCIO
@pytest.mark.anyio
@pytest.mark.parametrize("sent_as", ["the-agents-role", "the-calls-message-id"])
async def test_every_malformed_answer_counts_toward_the_reask_bound_whatever_its_role_or_id(sent_as: str) -> None:
    from a2a.types.a2a_pb2 import GetTaskRequest

    contract, card = _erase_contract()
    host: RecordingHost[None, Any, Any] = RecordingHost(None)
    audit = agentfx.audit_log()
    async with _http(a2a_app(agentfx.bind(contract, host=host.host, audit=audit), card)) as http:
        client = ClientFactory(ClientConfig(httpx_client=http, streaming=False)).create(card)
        call = _request("erase")
        waiting = await _sent(client, call)
        states: list[TaskState] = []
        # Twice the bound: an answer the count missed would leave the task waiting throughout.
        for _ in range(2 * agentfx.a2a.MAX_CONFIRM_REASKS + 2):
            if sent_as == "the-agents-role":
                slip = _reply(waiting.id, {"confirm": "maybe", "pad": "x" * 1000}, role=Role.ROLE_AGENT)
            else:
                # The SDK keeps no second message with an id its history holds.
                slip = _reply(waiting.id, {"confirm": "maybe"}, message_id=call.message.message_id)
            task = await _sent(client, slip)
            states.append(task.status.state)
            if task.status.state != TaskState.TASK_STATE_INPUT_REQUIRED:
                break
        fetched = await client.get_task(GetTaskRequest(id=waiting.id))
        await client.close()
    reasks = agentfx.a2a.MAX_CONFIRM_REASKS
    if sent_as == "the-calls-message-id":
        assert states == [TaskState.TASK_STATE_INPUT_REQUIRED] * reasks + [TaskState.TASK_STATE_REJECTED]
    else:
        # An answer in the agent's role is counted as the server's prompts are: the asking ends sooner.
        assert len(states) <= reasks + 1 and states[-1] == TaskState.TASK_STATE_REJECTED
    assert fetched.status.state == TaskState.TASK_STATE_REJECTED
    assert len(fetched.history) <= 2 * reasks + 3
    assert host.dispatched == [] and [e.capability for e in audit.entries()] == ["erase"]


_CALL_ROLE_TEXT = (
    'A message to this agent is sent with role ROLE_USER ("user" in A2A 0.3) '
    'and carries one data part {"skill": <skill id>, "input": {...}}'
)


@ASYNCIO
@pytest.mark.anyio
async def test_a_message_in_the_agents_role_is_the_malformed_message_in_1_0_and_0_3() -> None:
    contract, card = _erase_contract()
    host: RecordingHost[None, Any, Any] = RecordingHost(None)
    audit = agentfx.audit_log()
    legacy = {
        "kind": "message",
        "messageId": "m1",
        "role": "agent",
        "parts": [{"kind": "data", "data": {"skill": "ping"}}],
    }
    async with _http(a2a_app(agentfx.bind(contract, host=host.host, audit=audit), card)) as http:
        client = ClientFactory(ClientConfig(httpx_client=http, streaming=False)).create(card)
        called = await _sent(client, _reply("", {"skill": "ping"}, role=Role.ROLE_AGENT))
        answer_0_3 = (
            await http.post(
                "/a2a",
                json={"jsonrpc": "2.0", "id": 7, "method": "message/send", "params": {"message": legacy}},
                headers={"A2A-Version": "0.3"},
            )
        ).json()
        waiting = await _sent(client, _request("erase"))
        # A yes in the agent's role is no answer: asked again, nothing dispatched.
        agents_yes = await _sent(client, _reply(waiting.id, {"confirm": True}, role=Role.ROLE_AGENT))
        users_yes = await _sent(client, _reply(waiting.id, {"confirm": True}))
        await client.close()
    assert called.status.state == TaskState.TASK_STATE_REJECTED
    assert _text(called) == _CALL_ROLE_TEXT
    assert json_format.MessageToDict(called.status.message.parts[1].data) == {
        "_tag": "MalformedMessage",
        "message": _CALL_ROLE_TEXT,
    }
    parsed = types_v03.SendMessageResponse.model_validate(answer_0_3).root
    assert isinstance(parsed, types_v03.SendMessageSuccessResponse) and isinstance(parsed.result, types_v03.Task)
    assert parsed.result.status.state == types_v03.TaskState.rejected
    assert agents_yes.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
    assert users_yes.status.state == TaskState.TASK_STATE_COMPLETED
    assert host.dispatched == [Erased()]
    assert [e.capability for e in audit.entries()] == ["erase", "erase"]


# --- 0.3 params the conversion cannot hold ----------------------------------------------

_MESSAGE_0_3 = {"kind": "message", "messageId": "m1", "role": "user", "parts": [{"kind": "data", "data": {"skill": "ping"}}]}
_INVALID_PARAMS = (-32602, "Invalid params: the params are not what the method takes")


def _rpc(method: str, params: dict[str, Any]) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": 9, "method": method, "params": params}


def _error(answer: dict[str, Any]) -> tuple[object, int, str]:
    assert set(answer) == {"jsonrpc", "id", "error"}, answer
    error = answer["error"]
    return answer["id"], error["code"], error["message"]


@ASYNCIO
@pytest.mark.anyio
@pytest.mark.parametrize("history_length", [2**31, -(2**31) - 1, str(2**31)], ids=["past-int32", "below-int32", "a-string"])
async def test_a_0_3_history_length_past_32_bits_is_invalid_params_for_every_method_that_takes_one(
    history_length: object,
) -> None:
    host = _host()
    async with _http(a2a_app(_runtime(host), CARD)) as http:
        task = await _task(http, "ping", {})
        legacy = {"A2A-Version": "0.3"}
        get = (await http.post("/a2a", json=_rpc("tasks/get", {"id": task.id, "historyLength": history_length}), headers=legacy)).json()
        configuration = {"message": _MESSAGE_0_3, "configuration": {"historyLength": history_length}}
        send = (await http.post("/a2a", json=_rpc("message/send", configuration), headers=legacy)).json()
        streamed = await http.post("/a2a", json=_rpc("message/stream", configuration), headers=legacy)
        # A2A 1.0 refuses the same params in the same words.
        current = (await http.post("/a2a", json=_rpc("GetTask", {"id": task.id, "historyLength": 2**31}))).json()
    (event,) = [json.loads(line[len("data:") :]) for line in streamed.text.splitlines() if line.startswith("data:")]
    for answer in (get, send, event, current):
        assert _error(answer) == (9, *_INVALID_PARAMS)
    assert "range" not in get["error"]["message"] + send["error"]["message"] + streamed.text
    assert host.dispatched == [Ping()]  # only the first call: nothing refused was sent


class _BrokenStore(BoundedTaskStore):
    """A store whose reads fail as a defect would, past the 0.3 conversion."""

    async def get(self, task_id: str, context: ServerCallContext | None = None) -> Task | None:
        raise RuntimeError("secret internals")


@ASYNCIO
@pytest.mark.anyio
async def test_a_defect_after_a_0_3_method_reached_the_handler_stays_an_internal_error(
    caplog: pytest.LogCaptureFixture,
) -> None:
    legacy = {"A2A-Version": "0.3"}
    async with _http(a2a_app(_runtime(_host()), CARD, task_store=_BrokenStore())) as http:
        with caplog.at_level(logging.ERROR):
            get = await http.post("/a2a", json=_rpc("tasks/get", {"id": "t", "historyLength": 2}), headers=legacy)
            cancel = await http.post("/a2a", json=_rpc("tasks/cancel", {"id": "t"}), headers=legacy)
    for answer in (get, cancel):
        assert "secret" not in answer.text
        assert _error(answer.json()) == (9, -32603, "Internal error")


@ASYNCIO
@pytest.mark.anyio
async def test_listing_tasks_is_refused_as_unsupported_whatever_the_tasks_hold() -> None:
    from a2a.types.a2a_pb2 import ListTasksRequest

    host = _host()
    async with _http(a2a_app(_runtime(host), CARD)) as http:
        for _ in range(3):
            await _task(http, "count", {"n": 1})
        client = ClientFactory(ClientConfig(httpx_client=http, streaming=False)).create(CARD)
        with pytest.raises(UnsupportedOperationError):
            await client.list_tasks(ListTasksRequest(page_size=100, include_artifacts=True))
        await client.close()
        request = json.dumps(_rpc("ListTasks", {"pageSize": 100, "includeArtifacts": True}))
        raw = await http.post("/a2a", content=request, headers={"content-type": "application/json"})
    assert _error(raw.json()) == (9, -32004, "This operation is not supported")
    # The reply is a fixed error, whatever the store holds.
    assert len(raw.content) < 2 * len(request) + 256
    assert "count" not in raw.text
    assert len(host.dispatched) == 3


@ASYNCIO
@pytest.mark.anyio
async def test_the_sdks_logs_say_nothing_a_client_sent_and_agentfxs_own_are_untouched(
    caplog: pytest.LogCaptureFixture,
) -> None:
    forged = "1\nagentfx: stopping\nERROR forged token=SECRETMARK"
    audit = agentfx.audit_log()
    async with _http(a2a_app(_runtime(_host(), audit), CARD)) as http:
        with caplog.at_level(logging.DEBUG, logger="a2a"), caplog.at_level(logging.ERROR, logger="agentfx.a2a"):
            bad = {"jsonrpc": "2.0", "id": forged, "method": "GetTask", "params": {"id": "x", "historyLength": "SECRETMARK"}}
            await http.post("/a2a", json=bad)
            mismatch = {"jsonrpc": "2.0", "id": forged, "method": "GetTask", "params": {"id": "SECRETMARK"}}
            await http.post("/a2a", json=mismatch, headers={"A2A-Version": "9.9"})
            await http.post("/a2a", content=b"{SECRETMARK", headers={"content-type": "application/json"})
            await http.post("/a2a", json=_send("boom", {}))
    sdk = [record for record in caplog.records if record.name.startswith("a2a.")]
    assert sdk  # the SDK logged these requests
    for record in sdk:
        assert record.getMessage() == f"{record.name} logged at {record.levelname}; its text is withheld"
        assert record.exc_info is None
    assert "SECRETMARK" not in caplog.text
    assert "forged" not in caplog.text
    assert "9.9" not in caplog.text
    # agentfx's own logging keeps its words: the hook's traceback is the application's.
    assert "secret internals" in caplog.text


@ASYNCIO
@pytest.mark.anyio
async def test_an_sdk_logger_made_after_the_app_was_built_is_withheld_once_it_serves() -> None:
    app = a2a_app(_runtime(_host()), CARD)
    # As a module of the SDK's imported between building the app and serving it would.
    later = logging.getLogger("a2a.server.tasks.imported_later")
    assert not later.filters
    async with app.router.lifespan_context(app):
        assert [type(f) for f in later.filters] == [Withheld]
    client_side = logging.getLogger("a2a.client.imported_later")
    async with app.router.lifespan_context(app):
        assert not client_side.filters
        assert len(later.filters) == 1


def test_the_sdk_log_filter_is_installed_once_however_many_apps_are_built() -> None:
    for _ in range(3):
        a2a_app(_runtime(_host()), CARD)
    for name in ("a2a", "a2a.server.routes.jsonrpc_dispatcher", "a2a.server.request_handlers.default_request_handler"):
        withheld = [f for f in logging.getLogger(name).filters if isinstance(f, Withheld)]
        assert len(withheld) == 1, name
    assert not logging.getLogger("agentfx.a2a").filters
