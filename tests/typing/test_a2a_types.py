"""What pyright accepts and refuses for ``a2a_app``: the principal ``authenticate`` proves is typed.

Checked by pyright in strict mode with the rest of ``tests`` and run under
pytest, which builds each app (and serves one call) so the runtime agrees.
Negative checks are pinned with ``# pyright: ignore[<rule>]`` under
``reportUnnecessaryTypeIgnoreComment``.

As for :func:`agentfx.mcp.http_app`: without ``authenticate`` the target is an
``App``, a bound runtime or a ``runtime_for`` taking ``None``; with
``authenticate: Authenticate[P]`` it is an ``App`` whose principal type is
``P`` or a ``RuntimeFor[P]``. (A bound runtime with ``authenticate`` is still
refused at run time only, with a ``ContractError``.)
"""

from __future__ import annotations

import msgspec
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.testclient import TestClient

import agentfx
from agentfx.a2a import a2a_app, agent_card
from agentfx.a2a._app import Authenticate
from agentfx.a2a._executor import RuntimeFor
from agentfx.testing import RecordingHost


class Model(msgspec.Struct, frozen=True):
    todos: tuple[str, ...] = ()


class User(msgspec.Struct, frozen=True):
    name: str


class Admin(msgspec.Struct, frozen=True):
    login: str


class CreatedTodo(msgspec.Struct, frozen=True, tag=True):
    title: str


def update(model: Model, message: CreatedTodo) -> Model:
    return Model(todos=(*model.todos, message.title))


TodoAgent = agentfx.for_model(Model, principal=User)
AppAgent = TodoAgent.define(
    TodoAgent.expose(CreatedTodo, TodoAgent.variant(CreatedTodo, "Create a todo", authorize=lambda req: req.principal.name != ""))
)
CARD = agent_card(AppAgent, name="todo", description="Todos", url="http://127.0.0.1/a2a", version="1.0.0")
APP = agentfx.App(AppAgent, init=Model(), update=update, principal=User("local"))


async def as_user(request: Request) -> User | None:
    name = request.headers.get("x-user")
    return None if name is None else User(name)


async def as_admin(request: Request) -> Admin | None:
    return Admin("root")


def runtime_for(user: User) -> agentfx.AgentRuntime[Model, User]:
    return TodoAgent.bind(AppAgent, host=RecordingHost(Model(), principal=user, update=update).host)


def anonymous(_principal: None) -> agentfx.AgentRuntime[Model, User]:
    return runtime_for(User("anonymous"))


def test_authenticate_must_prove_the_principal_the_target_takes() -> None:
    accepted: list[Starlette] = [
        a2a_app(APP, CARD),
        a2a_app(APP, CARD, authenticate=as_user),
        a2a_app(runtime_for, CARD, authenticate=as_user),
        a2a_app(anonymous, CARD),
        a2a_app(runtime_for(User("ann")), CARD),
    ]
    # Each still builds (the mismatch shows at the first call): refused by pyright only.
    a2a_app(APP, CARD, authenticate=as_admin)  # pyright: ignore[reportCallIssue, reportArgumentType]
    a2a_app(runtime_for, CARD, authenticate=as_admin)  # pyright: ignore[reportCallIssue, reportArgumentType]
    # Without authenticate, runtime_for is called with None.
    a2a_app(runtime_for, CARD)  # pyright: ignore[reportArgumentType]
    assert all(isinstance(app, Starlette) for app in accepted)


def test_authenticate_and_runtime_for_name_the_principal_type() -> None:
    typed: Authenticate[User] = as_user
    serves: RuntimeFor[User] = runtime_for
    wrong: RuntimeFor[Admin] = runtime_for  # pyright: ignore[reportAssignmentType]
    # Unparameterized, each is what it was: a principal of any type.
    untyped: Authenticate = as_admin
    any_runtime: RuntimeFor = runtime_for
    assert a2a_app(serves, CARD, authenticate=typed) is not None
    assert (wrong, untyped, any_runtime) == (runtime_for, as_admin, runtime_for)


def test_the_authenticated_principal_reaches_runtime_for() -> None:
    seen: list[User] = []

    def recording(user: User) -> agentfx.AgentRuntime[Model, User]:
        seen.append(user)
        return runtime_for(user)

    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "message/send",
        "params": {
            "message": {
                "role": "user",
                "messageId": "m1",
                "kind": "message",
                "parts": [{"kind": "data", "data": {"skill": "created_todo", "input": {"title": "milk"}}}],
            }
        },
    }
    with TestClient(a2a_app(recording, CARD, authenticate=as_user), base_url="http://127.0.0.1") as client:
        response = client.post("/a2a", json=body, headers={"A2A-Version": "0.3", "x-user": "ann"})
    assert response.status_code == 200
    assert response.json()["result"]["status"]["state"] == "completed"
    assert seen == [User("ann")]
