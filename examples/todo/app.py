"""The todo application and its agent contract.

An ordinary Elm program (a Model, a union of Messages, an ``update`` whose
commands stand in for a server) that runs on :func:`agentfx.program.run_program`,
and :data:`AppAgent`, the contract that hands a chosen few of its Messages to
agents. The application half knows nothing of agents: deleting every line
below "The agent contract" leaves a working program.

Run it with ``run_program(init=INITIAL, update=update)`` and bind
:data:`AppAgent` to ``program.host(principal=...)``. ``agent.json`` and
``AGENT.md`` beside this file are generated from :data:`AppAgent`.
"""

from __future__ import annotations

from typing import Protocol

import msgspec

from agentfx.app import App
from agentfx.builder import for_model
from agentfx.completion import CallInfo, Completion
from agentfx.confirm import Confirm
from agentfx.contract import AuthorizationRequest
from agentfx.errors import Refusal
from agentfx.hints import Hints
from agentfx.program import Command

__all__ = [
    "DELETE_REFUSED",
    "DELETE_SCOPE",
    "INITIAL",
    "AgentView",
    "AppAgent",
    "BearerToken",
    "ClearedSelection",
    "CreateTodoInput",
    "CreatedTodo",
    "DeletedTodo",
    "FailedDeleteTodo",
    "Message",
    "Model",
    "NoInput",
    "ReceivedTodos",
    "RequestedCreateTodo",
    "RequestedDeleteTodo",
    "SelectedTodo",
    "Todo",
    "TodoAgent",
    "User",
    "app",
    "update",
    "user_from_token",
]


# --- The application ------------------------------------------------------------


class Todo(msgspec.Struct, frozen=True):
    """A todo item."""

    id: str
    title: str
    completed: bool = False


class Model(msgspec.Struct, frozen=True):
    """The whole application state: the todos, which one is selected, and the next todo's number."""

    todos: tuple[Todo, ...] = ()
    selected_todo_id: str | None = None
    next_todo: int = 1
    """The number the next created todo is given: the server's sequence, kept in the
    Model so that every process sharing it (``agentfx serve --redis``) hands out each
    number once, across a restart or a change of writer too."""


class User(msgspec.Struct, frozen=True):
    """Who is calling: the principal an agent acts for."""

    id: str
    can_delete: bool = False


class RequestedCreateTodo(msgspec.Struct, frozen=True, tag=True):
    """The user (or an agent) asked for a new todo; ``request_id`` follows it to :class:`CreatedTodo`."""

    title: str
    request_id: str | None = None


class CreatedTodo(msgspec.Struct, frozen=True, tag=True):
    """The server created a todo; made by the command a :class:`RequestedCreateTodo` starts."""

    id: str
    title: str
    request_id: str | None = None


class RequestedDeleteTodo(msgspec.Struct, frozen=True, tag=True):
    """Someone asked to delete a todo."""

    id: str


class DeletedTodo(msgspec.Struct, frozen=True, tag=True):
    """The server deleted a todo."""

    id: str


class FailedDeleteTodo(msgspec.Struct, frozen=True, tag=True):
    """The server refused to delete a todo."""

    id: str
    reason: str


class SelectedTodo(msgspec.Struct, frozen=True, tag=True):
    """Select the todo with this id; an id that names no todo selects nothing."""

    id: str


class ClearedSelection(msgspec.Struct, frozen=True, tag=True):
    """The selection was cleared."""


class ReceivedTodos(msgspec.Struct, frozen=True, tag=True):
    """A sync brought the server's todos; never offered to agents."""

    todos: tuple[Todo, ...]


Message = (
    RequestedCreateTodo
    | CreatedTodo
    | RequestedDeleteTodo
    | DeletedTodo
    | FailedDeleteTodo
    | SelectedTodo
    | ClearedSelection
    | ReceivedTodos
)

INITIAL = Model(
    todos=(
        Todo(id="todo-1", title="Buy milk"),
        Todo(id="todo-2", title="Write the report", completed=True),
    ),
    next_todo=3,
)
"""A Model with two todos and nothing selected."""


def _create(message: RequestedCreateTodo, todo_id: str) -> Command[Message]:
    # The stand-in server creates the todo under the id update reserved for it.
    async def create() -> Message:
        return CreatedTodo(id=todo_id, title=message.title, request_id=message.request_id)

    return create


def _delete(model: Model, todo_id: str) -> Command[Message]:
    known = any(todo.id == todo_id for todo in model.todos)

    async def delete() -> Message:
        if known:
            return DeletedTodo(id=todo_id)
        return FailedDeleteTodo(id=todo_id, reason=f'There is no todo with id "{todo_id}"')

    return delete


def update(model: Model, message: Message) -> Model | tuple[Model, list[Command[Message]]]:
    """The next Model, and the commands (server calls) ``message`` starts.

    Creating and deleting go through a command, so their result arrives as a
    later Message (:class:`CreatedTodo`, :class:`DeletedTodo` or
    :class:`FailedDeleteTodo`), which is what the contract's completions wait for.
    """
    match message:
        case RequestedCreateTodo():
            # The id is reserved here, in the Model, not counted by the process
            # that runs the command: every process sharing the Model agrees on it.
            reserved = msgspec.structs.replace(model, next_todo=model.next_todo + 1)
            return reserved, [_create(message, f"todo-{model.next_todo}")]
        case CreatedTodo(id=todo_id, title=title):
            return msgspec.structs.replace(model, todos=(*model.todos, Todo(id=todo_id, title=title)))
        case RequestedDeleteTodo(id=todo_id):
            return model, [_delete(model, todo_id)]
        case DeletedTodo(id=todo_id):
            todos = tuple(todo for todo in model.todos if todo.id != todo_id)
            selected = None if model.selected_todo_id == todo_id else model.selected_todo_id
            return msgspec.structs.replace(model, todos=todos, selected_todo_id=selected)
        case FailedDeleteTodo():
            return model
        case SelectedTodo(id=todo_id):
            if not any(todo.id == todo_id for todo in model.todos):
                return model
            return msgspec.structs.replace(model, selected_todo_id=todo_id)
        case ClearedSelection():
            return msgspec.structs.replace(model, selected_todo_id=None)
        case ReceivedTodos(todos=todos):
            ids = {todo.id for todo in todos}
            selected = model.selected_todo_id if model.selected_todo_id in ids else None
            return msgspec.structs.replace(model, todos=todos, selected_todo_id=selected)


# --- The agent contract ---------------------------------------------------------


# Struct docstrings become the "description" of the JSON Schemas agents read,
# so the ones below (and those of exposed Messages) are written for agents.


class NoInput(msgspec.Struct, frozen=True):
    """A capability that takes no payload: the agent sends ``{}``."""


class CreateTodoInput(msgspec.Struct, frozen=True):
    """The todo to create."""

    title: str


class AgentView(msgspec.Struct, frozen=True):
    """The user's todos and which one is selected."""

    todos: tuple[Todo, ...]
    selected_todo_id: str | None


def _request_key(_: CreateTodoInput, call: CallInfo) -> str | None:
    return call.invocation.id


def _result_key(result: CreatedTodo) -> str | None:
    return result.request_id


DELETE_SCOPE = "todos:delete"
"""The OAuth scope a bearer token must carry for ``delete_selected_todo`` (see :func:`user_from_token`)."""

DELETE_REFUSED = f'Deleting a todo needs the "{DELETE_SCOPE}" scope'
"""Why ``delete_selected_todo`` refuses a principal that may not delete."""


class BearerToken(Protocol):
    """What :func:`user_from_token` reads of a verified token (the MCP SDK's ``AccessToken`` has it)."""

    client_id: str
    subject: str | None
    scopes: list[str]


def user_from_token(token: BearerToken) -> User:
    """The principal an OAuth bearer token proves: it may delete todos when granted :data:`DELETE_SCOPE`.

    Served with ``agentfx.mcp.http_app(app, token_verifier=..., auth=...,
    principal_from_token=user_from_token)``, a token without the scope is
    refused ``delete_selected_todo`` with :data:`DELETE_REFUSED`.

    >>> from mcp.server.auth.provider import AccessToken
    >>> user_from_token(AccessToken(token="t", client_id="app", scopes=["todos:delete"], subject="ann"))
    User(id='ann', can_delete=True)
    """
    return User(id=token.subject or token.client_id, can_delete=DELETE_SCOPE in token.scopes)


def _may_delete(request: AuthorizationRequest[User, NoInput, Model]) -> Refusal | Confirm:
    """Only a user who may delete, and only once a person confirms which todo goes."""
    if not request.principal.can_delete:
        return Refusal(DELETE_REFUSED)
    model = request.model
    # The prompt names the todo from the same snapshot ``to_message`` reads, so
    # the person approves exactly the deletion that would be sent: by its id
    # too, since two todos may share a title and an answer covers its prompt.
    selected = model.selected_todo_id
    title = next((todo.title for todo in model.todos if todo.id == selected), None)
    return Confirm(f"Delete the todo {selected}?" if title is None else f'Delete the todo "{title}" ({selected})?')


TodoAgent = for_model(Model, principal=User)

AppAgent = TodoAgent.define(
    messages=TodoAgent.expose(
        Message,
        TodoAgent.variant(
            RequestedCreateTodo,
            "Create a new todo",
            name="create_todo",
            title="Create todo",
            # Two calls make two todos.
            hints=Hints(read_only=False, destructive=False, idempotent=False),
            input=CreateTodoInput,
            # Two todos may share a title, so the invocation id rides onto the
            # CreatedTodo the server answers with and settles exactly this call.
            to_message=lambda new, ctx: RequestedCreateTodo(title=new.title, request_id=ctx.invocation.id),
            completion=Completion(success=CreatedTodo, correlate_key=(_request_key, _result_key), timeout=10.0),
        ),
        TodoAgent.variant(
            RequestedDeleteTodo,
            "Delete the currently selected todo",
            name="delete_selected_todo",
            title="Delete selected todo",
            hints=Hints(read_only=False, destructive=True),
            available=lambda model: model.selected_todo_id is not None,
            input=NoInput,
            to_message=lambda _, ctx: RequestedDeleteTodo(id=ctx.model.selected_todo_id or ""),
            authorize=_may_delete,
            may_confirm=True,
            completion=Completion(
                success=DeletedTodo,
                failure=FailedDeleteTodo,
                correlate=lambda request, result, call: result.id == call.message.id,
                timeout=10.0,
            ),
        ),
        TodoAgent.variant(
            SelectedTodo,
            "Select a todo by its id",
            name="select_todo",
            title="Select todo",
            hints=Hints(read_only=False, destructive=False, idempotent=True),
        ),
        TodoAgent.variant(
            ClearedSelection,
            "Clear the current selection",
            available=lambda model: model.selected_todo_id is not None,
            title="Clear selection",
            hints=Hints(read_only=False, destructive=False, idempotent=True),
        ),
    ),
    resources=[
        TodoAgent.resource("todos", "The user's current todos", schema=list[Todo], read=lambda m: m.todos),
    ],
    context=TodoAgent.projection(AgentView, lambda m: AgentView(todos=m.todos, selected_todo_id=m.selected_todo_id)),
)
"""The contract: four capabilities, the ``todos`` resource and the :class:`AgentView` context.

Deleting asks a person to confirm which todo goes (``authorize`` answers
:class:`~agentfx.Confirm`): an adapter that can ask does, in band, and one that
cannot is told the call needs confirmation, and nothing is deleted.
"""

app = App(AppAgent, init=INITIAL, update=update, principal=User(id="local-user", can_delete=True))
"""The contract served over the reference program: ``agentfx serve examples.todo.app:app``.

Every invocation acts as one local user who may delete todos; ``agentfx demo``
binds two principals of its own to show authorization at work.
"""
