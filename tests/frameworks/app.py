"""The application every framework suite drives: one contract with a capability for each path.

Each framework test runs the same script through its framework's real agent
loop: list the tools, create a todo (a completion whose reply carries the new
id), call a capability that is not available, send invalid input, delete a
todo whose deletion fails (a declared failure Message), hit a defect, and
delete a todo once a person confirms. This module builds the runtime and its
recording host, and states what each step must tell the model, so the four
suites assert the same contract in four dialects.

The Messages and inputs are the todo example's own (``examples/todo/app.py``);
the Model is this suite's, since the tests replace its fields by name.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass

import msgspec

import agentfx
from agentfx.confirm import ConfirmationRequest
from agentfx.testing.recording import RecordingHost
from examples.todo.app import (
    CreatedTodo,
    CreateTodoInput,
    DeletedTodo,
    FailedDeleteTodo,
    NoInput,
    RequestedCreateTodo,
    RequestedDeleteTodo,
    SelectedTodo,
)


class Todo(msgspec.Struct, frozen=True):
    id: str
    title: str


class Model(msgspec.Struct, frozen=True):
    todos: tuple[Todo, ...] = ()
    selected: str | None = None


class User(msgspec.Struct, frozen=True):
    id: str


class RequestedExport(msgspec.Struct, frozen=True, tag=True):
    pass


Message = (
    RequestedCreateTodo | CreatedTodo | SelectedTodo | RequestedDeleteTodo | DeletedTodo | FailedDeleteTodo | RequestedExport
)

SECRET = "s3cr3t-internal-detail"
"""Text a defect's exception carries; it must never reach a model."""

PINNED = "pinned"
"""The id of the todo the server refuses to delete."""

INITIAL = Model(todos=(Todo("milk", "Buy milk"), Todo(PINNED, "Pinned note")))


def _confirm_delete(req: agentfx.AuthorizationRequest[User, NoInput, Model]) -> agentfx.Confirm:
    title = next(t.title for t in req.model.todos if t.id == req.model.selected)
    return agentfx.Confirm(f'Delete the todo "{title}"?')


def _explode(_: NoInput, ctx: agentfx.InvocationContext[Model, User]) -> RequestedExport:
    raise RuntimeError(SECRET)


TodoAgent = agentfx.for_model(Model, principal=User)

Contract = TodoAgent.define(
    messages=TodoAgent.expose(
        Message,
        TodoAgent.variant(
            RequestedCreateTodo,
            "Create a new todo",
            name="create_todo",
            input=CreateTodoInput,
            to_message=lambda new, ctx: RequestedCreateTodo(title=new.title, request_id=ctx.invocation.id),
            completion=agentfx.Completion(
                success=CreatedTodo,
                correlate=lambda request, result, call: result.request_id == call.invocation.id,
                timeout=5.0,
            ),
        ),
        TodoAgent.variant(SelectedTodo, "Select a todo by its id", name="select_todo"),
        TodoAgent.variant(
            RequestedDeleteTodo,
            "Delete the selected todo",
            name="delete_selected_todo",
            available=lambda model: model.selected is not None,
            input=NoInput,
            to_message=lambda _, ctx: RequestedDeleteTodo(id=ctx.model.selected or ""),
            authorize=_confirm_delete,
            may_confirm=True,
            completion=agentfx.Completion(
                success=DeletedTodo,
                failure=FailedDeleteTodo,
                correlate=lambda request, result, call: result.id == call.message.id,
                timeout=5.0,
            ),
        ),
        TodoAgent.variant(RequestedExport, "Export every todo", name="export_todos", input=NoInput, to_message=_explode),
    ),
)

TOOLS_WITHOUT_SELECTION = ["create_todo", "select_todo", "export_todos"]
TOOLS_WITH_SELECTION = ["create_todo", "select_todo", "delete_selected_todo", "export_todos"]


def update(model: Model, message: object) -> Model:
    match message:
        case CreatedTodo(id=todo_id, title=title):
            return msgspec.structs.replace(model, todos=(*model.todos, Todo(todo_id, title)))
        case SelectedTodo(id=todo_id) if any(t.id == todo_id for t in model.todos):
            return msgspec.structs.replace(model, selected=todo_id)
        case DeletedTodo(id=todo_id):
            return Model(todos=tuple(t for t in model.todos if t.id != todo_id), selected=None)
        case _:
            return model


def _created(message: RequestedCreateTodo) -> list[object]:
    return [CreatedTodo(id="todo-3", title=message.title, request_id=message.request_id)]


def _deleted(message: RequestedDeleteTodo) -> list[object]:
    if message.id == PINNED:
        return [FailedDeleteTodo(id=message.id, reason="Pinned todos cannot be deleted")]
    return [DeletedTodo(id=message.id)]


@dataclass
class Harness:
    """A runtime over a recording host, and the audit log it writes."""

    recorder: RecordingHost[Model, object, User]
    audit: agentfx.AuditLog
    runtime: agentfx.AgentRuntime[Model, User]

    def transports(self) -> set[str]:
        return {entry.transport for entry in self.audit.entries()}

    def outcomes(self) -> list[tuple[str, str]]:
        return [(entry.capability, entry.outcome) for entry in self.audit.entries()]


def harness(model: Model = INITIAL, *, audit: agentfx.AuditLog | None = None) -> Harness:
    recorder: RecordingHost[Model, object, User] = RecordingHost(
        model,
        principal=User("ada"),
        responses={RequestedCreateTodo: _created, RequestedDeleteTodo: _deleted},
        update=update,
    )
    audit = agentfx.audit_log() if audit is None else audit
    return Harness(recorder, audit, TodoAgent.bind(Contract, host=recorder.host, audit=audit))


# Arguments a framework must not read as its own. ----------------------------------


class ChangedSettings(msgspec.Struct, frozen=True, tag=True):
    """A Message whose fields are named like the keywords the frameworks take for themselves."""

    config: str
    run_manager: str = ""
    callbacks: str = ""
    self_: str = msgspec.field(default="", name="self")


class Renamed(msgspec.Struct, frozen=True, tag=True):
    title: str


@dataclass
class KeywordHarness:
    """A runtime whose capabilities take framework keywords as fields, the Messages it sent, and its audit."""

    sent: list[object]
    audit: agentfx.AuditLog
    runtime: agentfx.AgentRuntime[None, None]

    def outcomes(self) -> list[tuple[str, str]]:
        return [(entry.capability, entry.outcome) for entry in self.audit.entries()]


def keyword_harness() -> KeywordHarness:
    contract = agentfx.define(
        agentfx.expose(
            ChangedSettings | Renamed,
            agentfx.variant(ChangedSettings, "Change the settings", name="change_settings"),
            agentfx.variant(Renamed, "Rename the list", name="rename"),
        )
    )
    sent: list[object] = []
    audit = agentfx.audit_log(include_input=True)
    runtime = agentfx.bind(contract, host=agentfx.Host(model=lambda: None, dispatch=sent.append), audit=audit)
    return KeywordHarness(sent, audit, runtime)


KEYWORD_ARGS: dict[str, object] = {"config": "dark", "run_manager": "rm", "callbacks": "cb", "self": "me"}
"""Arguments the model sends ``change_settings``: every one is a declared field."""

KEYWORD_SETTINGS = ChangedSettings(config="dark", run_manager="rm", callbacks="cb", self_="me")
"""What ``change_settings`` must dispatch for :data:`KEYWORD_ARGS`."""

UNDECLARED_KEYWORDS: list[tuple[dict[str, object], str]] = [
    ({"title": "x", key: 1}, f'Invalid input for "rename": "{key}" is not a field of this input')
    for key in ("config", "run_manager", "callbacks", "self")
]
"""Arguments the model sends ``rename`` with one undeclared keyword each, and the refusal each must get."""

KEYWORD_CALLS: list[tuple[str, dict[str, object]]] = [
    ("change_settings", KEYWORD_ARGS),
    *(("rename", args) for args, _ in UNDECLARED_KEYWORDS),
]
"""The tool calls a model makes in one turn: :data:`KEYWORD_ARGS`, then each of :data:`UNDECLARED_KEYWORDS`."""


# Strings that are not Unicode text. ------------------------------------------------

SURROGATE_ARGUMENTS = '{"title": "Buy \\ud800 milk"}'
"""JSON arguments naming a lone surrogate: valid JSON text, not valid Unicode once decoded."""

NOT_UNICODE_TEXT = 'Invalid input for "create_todo": "title" must be valid Unicode'

NOT_AN_OBJECT_TEXT = 'Invalid input for "create_todo": the input must be an object'
"""What every adapter answers for arguments that are not JSON."""

NOT_JSON_ARGUMENTS = [
    '{"title": "Buy milk", ',  # cut off
    '{"title": "Buy milk",}',  # a trailing comma
    '{"title": NaN}',
    '{"title": 1e400}',
]

NOT_AN_OBJECT_ARGUMENTS = ["null", "[1]", '"Buy milk"', "1", "true"]
"""JSON arguments that are not an object: read as JSON, then refused with :data:`NOT_AN_OBJECT_TEXT` like any input that is not an object.

The frameworks that hand over decoded arguments are given ``json.loads`` of each.
"""


def unreadable_input_audits() -> list[tuple[agentfx.AuditLog, str]]:
    """Fresh audit logs that keep inputs, each with what it records for arguments that are not JSON (never their text)."""
    return [
        (agentfx.audit_log(include_input=True), "[unrecordable: UnreadableInput]"),
        (agentfx.audit_log(include_input=True, redact=["title"]), "[redacted]"),
    ]


# What each step must tell the model, whatever the framework. ---------------------

CREATED_TEXT_PREFIX = "Completed: CreatedTodo\n"
"""A completed create: the summary line, then the completion data as JSON on the next line."""

UNAVAILABLE_TEXT = 'Capability "delete_selected_todo" is not available right now'
INVALID_TEXT = 'Invalid input for "create_todo": "title" is required'
FAILED_TEXT_PREFIX = "Failed: FailedDeleteTodo\n"
"""A declared failure: the summary line, then the data with the failure Message (its reason)."""
DEFECT_TEXT = 'Capability "export_todos" failed unexpectedly'
CONFIRM_PROMPT = 'Delete the todo "Buy milk"?'
CONFIRM_TEXT = f'"delete_selected_todo" needs a person to confirm: {CONFIRM_PROMPT}'
DELETED_TEXT_PREFIX = "Completed: DeletedTodo\n"


def created_data(text: str) -> dict[str, object]:
    """The JSON a completed create's reply text carries on its second line."""
    first, _, data = text.partition("\n")
    assert first == "Completed: CreatedTodo"
    decoded: dict[str, object] = msgspec.json.decode(data)
    return decoded


def new_todo_id(text: str) -> str:
    """The id of the todo a completed ``create_todo`` of the todo example reports in its reply text."""
    first, _, data = text.partition("\n")
    assert first == "Completed: CreatedTodo", text
    decoded: dict[str, dict[str, dict[str, str]]] = msgspec.json.decode(data)
    return decoded["completion"]["message"]["id"]


class Asked:
    """An approver for the examples: says yes, and remembers every prompt."""

    def __init__(self) -> None:
        self.prompts: list[str] = []

    async def __call__(self, prompt: str) -> bool:
        self.prompts.append(prompt)
        return True


class Person:
    """Answers confirmations as told, remembering what it was asked."""

    def __init__(self, answer: bool) -> None:
        self.answer = answer
        self.asked: list[ConfirmationRequest] = []

    async def __call__(self, request: ConfirmationRequest) -> bool:
        self.asked.append(request)
        return self.answer


EXAMPLE_TODOS = ["Buy milk", "Write the report"]
"""The todo example's todos after adding "Buy bread" and deleting it again."""


class Pinged(msgspec.Struct, frozen=True, tag=True):
    pass


def titled_runtime() -> agentfx.AgentRuntime[None, None]:
    """A one-capability runtime whose capability declares a title and hints."""
    contract = agentfx.define(
        agentfx.expose(
            Pinged,
            agentfx.variant(Pinged, "Ping the app", title="Ping", hints=agentfx.Hints(read_only=True, open_world=False)),
        )
    )
    return agentfx.bind(contract, host=agentfx.Host(model=lambda: None, dispatch=lambda message: None))


TITLED_METADATA = {"title": "Ping", "hints": {"read_only": True, "open_world": False}}
"""What a framework that keeps tool metadata carries for :func:`titled_runtime`'s capability."""


# Call ids a framework passes on as the model wrote them. ---------------------------

CALL_IDS: list[tuple[str, str]] = [
    ("call_" + "x" * 10_000, "call_" + "x" * 123 + "…"),
    ("call_\ud800", "call_\N{REPLACEMENT CHARACTER}"),
]
"""A call id too long to repeat and one with a lone surrogate, each with what the invocation id keeps of it (after its ``/``)."""

CALL_ID_NAMES = ["too-long", "lone-surrogate"]
"""The test ids of :data:`CALL_IDS`, in its order."""


def assert_call_id_kept(h: Harness, kept: str) -> None:
    """The one audited call completed, its invocation id ends with ``kept``, and it and the Message it built encode."""
    [entry] = h.audit.entries()
    assert entry.outcome == "completed"
    assert entry.invocation.rpartition("/")[2] == kept
    msgspec.json.encode(entry)
    [sent] = h.recorder.dispatched
    assert isinstance(sent, RequestedCreateTodo) and sent.request_id == entry.invocation
    msgspec.json.encode(sent)


# Availability that cannot be read. -------------------------------------------------


class Ping(msgspec.Struct, frozen=True, tag=True):
    pass


class Pong(msgspec.Struct, frozen=True, tag=True):
    pass


class Pang(msgspec.Struct, frozen=True, tag=True):
    pass


HOOK_TOOLS = ["ping", "pong", "pang"]
"""The capabilities of :class:`HookHarness`, in declaration order."""


class HookHarness:
    """A runtime whose every capability declares ``available``, counting the hook calls and the Model reads.

    The hooks of the capabilities named in ``broken`` raise, and so does the
    Model when ``model_broken``; the exceptions carry :data:`SECRET`.
    """

    def __init__(self, broken: frozenset[str] = frozenset(), *, model_broken: bool = False) -> None:
        self.sent: list[object] = []
        self.asked: Counter[str] = Counter()
        self.model_reads = 0
        self.audit = agentfx.audit_log()

        def hook(name: str) -> Callable[[None], bool]:
            def available(_: None) -> bool:
                self.asked[name] += 1
                if name in broken:
                    raise RuntimeError(SECRET)
                return True

            return available

        def model() -> None:
            self.model_reads += 1
            if model_broken:
                raise RuntimeError(SECRET)

        contract = agentfx.define(
            agentfx.expose(
                Ping | Pong | Pang,
                *(
                    agentfx.variant(message, f"Send {name}", name=name, available=hook(name))
                    for message, name in zip((Ping, Pong, Pang), HOOK_TOOLS, strict=True)
                ),
            )
        )
        host: agentfx.Host[None, object, None] = agentfx.Host(model=model, dispatch=self.sent.append)
        self.runtime: agentfx.AgentRuntime[None, None] = agentfx.bind(contract, host=host, audit=self.audit)

    def outcomes(self) -> list[tuple[str, str]]:
        return [(entry.capability, entry.outcome) for entry in self.audit.entries()]
