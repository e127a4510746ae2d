"""The todo example: its committed agent.json and AGENT.md match its contract, and it runs."""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import pytest

from agentfx.docs import messages, to_manifest, to_markdown
from agentfx.program import run_program
from examples.todo.app import (
    INITIAL,
    AppAgent,
    ClearedSelection,
    CreatedTodo,
    DeletedTodo,
    FailedDeleteTodo,
    Message,
    ReceivedTodos,
    RequestedCreateTodo,
    RequestedDeleteTodo,
    SelectedTodo,
    Todo,
    update,
)

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "todo"

REGENERATE = (
    "python -c 'import json; from examples.todo.app import AppAgent; "
    "from agentfx.docs import to_manifest, to_markdown; "
    'open("examples/todo/agent.json", "w").write(json.dumps(to_manifest(AppAgent), indent=2) + "\\n"); '
    "open(\"examples/todo/AGENT.md\", \"w\").write(to_markdown(AppAgent))'"
)


def _drifted(name: str) -> str:
    return f"examples/todo/{name} no longer matches AppAgent. Regenerate it from the repository root with:\n  {REGENERATE}"


def _committed(name: str) -> bytes:
    path = EXAMPLE / name
    return path.read_bytes() if path.exists() else b""


def test_committed_manifest_matches_the_contract() -> None:
    expected = (json.dumps(to_manifest(AppAgent), indent=2) + "\n").encode()
    assert _committed("agent.json") == expected, _drifted("agent.json")


def test_committed_markdown_matches_the_contract() -> None:
    expected = to_markdown(AppAgent).encode()
    assert _committed("AGENT.md") == expected, _drifted("AGENT.md")


def test_the_contract_exposes_four_capabilities() -> None:
    assert [(d.name, d.tag, d.model_dependent, d.requires_authorization) for d in messages(AppAgent)] == [
        ("create_todo", "RequestedCreateTodo", False, False),
        ("delete_selected_todo", "RequestedDeleteTodo", True, True),
        ("select_todo", "SelectedTodo", False, False),
        ("cleared_selection", "ClearedSelection", True, False),
    ]
    manifest = json.loads(_committed("agent.json"))
    assert [c.get("completion") for c in manifest["capabilities"]] == [
        {"success": ["CreatedTodo"]},
        {"success": ["DeletedTodo"], "failure": ["FailedDeleteTodo"]},
        None,
        None,
    ]
    assert [r["name"] for r in manifest["resources"]] == ["todos"]
    assert manifest["context"]["title"] == "AgentView"


def test_the_committed_docs_never_name_received_todos() -> None:
    for name in ("agent.json", "AGENT.md"):
        assert b"ReceivedTodos" not in _committed(name)


def test_the_regeneration_command_is_valid_python() -> None:
    source = REGENERATE.removeprefix("python -c '").removesuffix("'")
    compile(source, "<regenerate>", "exec")


# --- the application runs ---------------------------------------------------------

async def _settle() -> None:
    await anyio.wait_all_tasks_blocked()


@pytest.mark.anyio
async def test_create_goes_through_a_command(anyio_backend: str) -> None:
    seen: list[Message] = []
    async with run_program(init=INITIAL, update=update) as program:
        program.observe(seen.append)
        await program.send(RequestedCreateTodo(title="Call mum", request_id="call-1"))
        await _settle()
        created = seen[-1]
        assert isinstance(created, CreatedTodo)
        assert (created.title, created.request_id) == ("Call mum", "call-1")
        assert program.model.todos[-1] == Todo(id=created.id, title="Call mum")
        assert created.id not in {todo.id for todo in INITIAL.todos}


@pytest.mark.anyio
async def test_delete_known_and_unknown(anyio_backend: str) -> None:
    seen: list[Message] = []
    async with run_program(init=INITIAL, update=update) as program:
        program.observe(seen.append)
        await program.send(SelectedTodo(id="todo-1"))
        assert program.model.selected_todo_id == "todo-1"
        await program.send(RequestedDeleteTodo(id="todo-1"))
        await _settle()
        assert seen[-1] == DeletedTodo(id="todo-1")
        assert [todo.id for todo in program.model.todos] == ["todo-2"]
        assert program.model.selected_todo_id is None
        await program.send(RequestedDeleteTodo(id="todo-9"))
        await _settle()
        assert seen[-1] == FailedDeleteTodo(id="todo-9", reason='There is no todo with id "todo-9"')
        assert [todo.id for todo in program.model.todos] == ["todo-2"]


def test_selection_rules() -> None:
    assert update(INITIAL, SelectedTodo(id="nope")) is INITIAL
    selected = update(INITIAL, SelectedTodo(id="todo-2"))
    assert not isinstance(selected, tuple)
    assert selected.selected_todo_id == "todo-2"
    cleared = update(selected, ClearedSelection())
    assert not isinstance(cleared, tuple)
    assert cleared.selected_todo_id is None
    received = update(selected, ReceivedTodos(todos=(Todo(id="todo-7", title="New"),)))
    assert not isinstance(received, tuple)
    assert (received.todos, received.selected_todo_id) == ((Todo(id="todo-7", title="New"),), None)
