"""The example application the dispatch tests share: a todo list with one contract over it.

It mirrors the design's running example closely enough that every row of the
pipeline table has a capability that reaches it: a direct variant, a mapped
one reading the snapshot in ``to_message``, availability, sync and async
``authorize`` with refusal reasons, and a Message completion.

Tests that declare contracts of their own (definition-time checks, documentation)
build them over this Model, principal and these Messages, adding only the classes
their assertions are about.
"""
# pyright: reportPrivateUsage=false
# (these tests and measurements look at internals on purpose)

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import anyio.lowlevel
import msgspec
from returns.io import IOResult
from returns.result import Result

import agentfx
from agentfx.contract import Authorize
from agentfx.pipeline import DispatchResult
from agentfx.testing.recording import RecordingHost

T = TypeVar("T")
E = TypeVar("E")


class Todo(msgspec.Struct, frozen=True):
    id: str
    title: str


class Model(msgspec.Struct, frozen=True):
    todos: tuple[Todo, ...] = ()
    selected: str | None = None
    locked: bool = False


class User(msgspec.Struct, frozen=True):
    id: str
    can_delete: bool = True
    admin: bool = False


class RequestedCreateTodo(msgspec.Struct, frozen=True, tag=True):
    title: str


class RequestedDeleteTodo(msgspec.Struct, frozen=True, tag=True):
    id: str


class RequestedRenameTodo(msgspec.Struct, frozen=True, tag=True):
    id: str
    title: str


class ClearedSelection(msgspec.Struct, frozen=True, tag=True):
    pass


class DeletedTodo(msgspec.Struct, frozen=True, tag=True):
    id: str


class FailedDeleteTodo(msgspec.Struct, frozen=True, tag=True):
    id: str


class ReceivedTodos(msgspec.Struct, frozen=True, tag=True):
    todos: tuple[Todo, ...]


class NoInput(msgspec.Struct, frozen=True):
    pass


Message = (
    RequestedCreateTodo
    | RequestedDeleteTodo
    | RequestedRenameTodo
    | ClearedSelection
    | DeletedTodo
    | FailedDeleteTodo
    | ReceivedTodos
)

TodoAgent = agentfx.for_model(Model, principal=User)

ALICE = User("alice")
"""A principal with the default rights: she may delete, and is no admin."""


async def _rename_allowed(req: agentfx.AuthorizationRequest[User, RequestedRenameTodo, Model]) -> bool | agentfx.Refusal:
    # Async on purpose: the property tests cover an authorize that suspends.
    await anyio.lowlevel.checkpoint()
    if req.principal.admin:
        return True
    return agentfx.Refusal("Only an admin may rename a todo")


def _exposed(
    delete: Authorize[User, NoInput, Model],
    rename: Authorize[User, RequestedRenameTodo, Model],
    *,
    may_confirm: bool = False,
) -> agentfx.Exposed[Model, User]:
    """The todo capabilities, with deleting and renaming decided by ``delete`` and ``rename``."""
    return TodoAgent.expose(
        Message,
        TodoAgent.variant(RequestedCreateTodo, "Create a new todo", available=lambda model: not model.locked),
        TodoAgent.variant(
            RequestedDeleteTodo,
            "Delete the currently selected todo",
            name="delete_selected_todo",
            available=lambda model: model.selected is not None,
            input=NoInput,
            to_message=lambda _, ctx: RequestedDeleteTodo(id=ctx.model.selected or ""),
            authorize=delete,
            may_confirm=may_confirm,
            completion=agentfx.Completion(
                success=DeletedTodo,
                failure=FailedDeleteTodo,
                correlate=lambda request, result, call: result.id == call.message.id,
                timeout=5.0,
            ),
        ),
        TodoAgent.variant(RequestedRenameTodo, "Rename a todo", name="rename_todo", authorize=rename),
        TodoAgent.variant(ClearedSelection, "Clear the selection"),
    )


AppAgent = TodoAgent.define(
    messages=_exposed(lambda req: req.principal.can_delete, _rename_allowed),
    resources=[TodoAgent.resource("todos", "The current todos", schema=list[Todo], read=lambda m: m.todos)],
    context=TodoAgent.projection(Model, lambda m: m),
)

def _confirm_delete(req: agentfx.AuthorizationRequest[User, NoInput, Model]) -> bool | agentfx.Confirm:
    if not req.principal.can_delete:
        return False
    model = req.model
    title = next((t.title for t in model.todos if t.id == model.selected), model.selected)
    return agentfx.Confirm(f'Delete the todo "{title}"?')


async def _confirm_rename(
    req: agentfx.AuthorizationRequest[User, RequestedRenameTodo, Model],
) -> bool | agentfx.Refusal | agentfx.Confirm:
    # Async on purpose: a Confirm can come after authorize suspended.
    await anyio.lowlevel.checkpoint()
    if req.principal.admin:
        return agentfx.Confirm(f'Rename "{req.input.id}" to "{req.input.title}"?')
    return agentfx.Refusal("Only an admin may rename a todo")


ConfirmingAgent = TodoAgent.define(messages=_exposed(_confirm_delete, _confirm_rename, may_confirm=True))
""":data:`AppAgent` with the same names, where deleting and renaming ask a person to confirm.

Deleting asks whoever may delete (a sync ``authorize``, declared ``may_confirm``);
renaming asks admins (an async ``authorize``, undeclared) and refuses the rest.
"""

AVAILABLE: dict[str, Callable[[Model], bool]] = {
    "requested_create_todo": lambda m: not m.locked,
    "delete_selected_todo": lambda m: m.selected is not None,
    "rename_todo": lambda m: True,
    "cleared_selection": lambda m: True,
}
"""Each capability's availability, written out independently of the contract."""


def update(model: Model, message: object) -> Model:
    """A small update, so subscribers see Model changes."""
    if isinstance(message, RequestedCreateTodo):
        todo = Todo(id=f"t{len(model.todos) + 1}", title=message.title)
        return msgspec.structs.replace(model, todos=(*model.todos, todo))
    if isinstance(message, DeletedTodo):
        todos = tuple(t for t in model.todos if t.id != message.id)
        return msgspec.structs.replace(model, todos=todos, selected=None)
    if isinstance(message, ClearedSelection):
        return msgspec.structs.replace(model, selected=None)
    return model


def answer_delete(message: RequestedDeleteTodo) -> list[object]:
    """Deleting succeeds for every todo but one named ``"keep"``."""
    if message.id == "keep":
        return [FailedDeleteTodo(id=message.id)]
    return [DeletedTodo(id=message.id)]


def recorder(
    model: Model | None = None,
    *,
    principal: User | None = None,
    async_dispatch: bool = False,
    responses: dict[type[Any], Any] | None = None,
) -> RecordingHost[Model, Any, User]:
    """A recording host over the todo app, answering deletes as :func:`answer_delete` says."""
    return RecordingHost(
        model if model is not None else Model(selected="t1", todos=(Todo("t1", "Milk"),)),
        principal=principal if principal is not None else User("u1"),
        responses=responses if responses is not None else {RequestedDeleteTodo: answer_delete},
        update=update,
        async_dispatch=async_dispatch,
    )


def outcome_of(io: IOResult[T, E]) -> Result[T, E]:
    """The ``Result`` inside an awaited dispatch's ``IOResult``."""
    return agentfx.as_result(io)


async def run(
    runtime: agentfx.AgentRuntime[Any, Any], target: Any, payload: object, invocation: agentfx.Invocation | None = None
) -> Result[DispatchResult, agentfx.DispatchError]:
    """Dispatch ``payload`` to ``target`` through ``runtime.messages`` and return the outcome."""
    return outcome_of(await runtime.messages.dispatch(target, payload, invocation))


def fixed_clock() -> float:
    return 1000.0


CONFIRMATION_MODES = (
    "none",
    "confirmed",
    "approve",
    "decline",
    "approve-at-once",
    "abort-then-approve",
    "abort-while-asking",
)
"""How a :class:`ConfirmationScript` answers: ``none`` cannot ask, ``confirmed`` was approved out of
band, ``approve-at-once`` answers without awaiting, the ``abort-*`` modes abort the invocation's
signal while they are asked (then approve at once, or never answer)."""


class ConfirmationScript:
    """One invocation's way to ask a person, answering as ``mode`` says and recording each question.

    Args:
        mode: One of :data:`CONFIRMATION_MODES`.
        on_ask: Runs when the person is asked, before the answer (to change the Model meanwhile, say).
    """

    def __init__(self, mode: str, *, on_ask: Callable[[], None] | None = None) -> None:
        assert mode in CONFIRMATION_MODES, mode
        self.mode = mode
        self.on_ask = on_ask
        self.controller = agentfx.AbortController()
        self.asked: list[agentfx.ConfirmationRequest] = []

    @property
    def approves(self) -> bool:
        """Whether a call that asks gets through (in time, before any abort)."""
        return self.mode in ("confirmed", "approve", "approve-at-once")

    def invocation(self, *, aborted: bool = False, id: str = "call-1", transport: str = "mcp") -> agentfx.Invocation:
        if aborted:
            self.controller.abort()
        return agentfx.Invocation(
            id=id,
            transport=transport,
            signal=self.controller.signal,
            confirm=None if self.mode in ("none", "confirmed") else self.ask,
            confirmed=self.mode == "confirmed",
        )

    def ask(self, request: agentfx.ConfirmationRequest) -> Any:
        self.asked.append(request)
        if self.on_ask is not None:
            self.on_ask()
        if self.mode == "approve-at-once":
            return True
        return self._answer()

    async def _answer(self) -> bool:
        if self.mode == "abort-then-approve":
            # No checkpoint: the approval lands in the same instant as the abort.
            self.controller.abort("gave up")
            return True
        if self.mode == "abort-while-asking":
            self.controller.abort("gave up")
            await anyio.sleep_forever()
        await anyio.lowlevel.checkpoint()
        return self.mode == "approve"
