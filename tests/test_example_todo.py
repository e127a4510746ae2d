"""The todo example's own behaviour, beyond the documents it ships."""

from __future__ import annotations

import anyio
import msgspec
import pytest

from agentfx import AgentConfirmationRequiredError, DispatchFailed, Invocation, run_program
from examples.todo.app import (
    INITIAL,
    CreatedTodo,
    ReceivedTodos,
    RequestedCreateTodo,
    SelectedTodo,
    Todo,
    app,
    update,
)

pytestmark = pytest.mark.anyio


async def test_new_todos_are_numbered_from_the_model_so_processes_sharing_it_never_reuse_an_id() -> None:
    # Two requests applied before either todo is created reserve two numbers;
    # a program started on a Model (one another process left) continues its sequence.
    created: list[str] = []
    later = msgspec.structs.replace(INITIAL, next_todo=7)
    async with run_program(init=later, update=update) as program:
        program.observe(lambda message: created.append(message.id) if isinstance(message, CreatedTodo) else None)
        await program.send(RequestedCreateTodo(title="Pay rent", request_id="a"))
        await program.send(RequestedCreateTodo(title="Call the dentist", request_id="b"))
        with anyio.fail_after(2):
            while len(created) < 2:
                await anyio.sleep(0.01)
        assert sorted(created) == ["todo-7", "todo-8"]
        assert program.model.next_todo == 9
        assert [todo.id for todo in program.model.todos][-2:] in (["todo-7", "todo-8"], ["todo-8", "todo-7"])


async def test_the_deletion_prompt_tells_two_todos_of_one_title_apart() -> None:
    # An answer covers the prompt it was given, so a prompt naming only the
    # title would let an approval to delete one "Buy milk" delete the other.
    twins = msgspec.structs.replace(INITIAL, todos=(*INITIAL.todos, Todo(id="todo-3", title="Buy milk")))
    prompts: list[str] = []
    async with app.program() as program:
        await program.send(ReceivedTodos(todos=twins.todos))
        runtime = app.bind(program)
        for todo in ("todo-1", "todo-3"):
            await program.send(SelectedTodo(id=todo))
            with pytest.raises(DispatchFailed) as refused:
                await runtime.messages.call("delete_selected_todo", {}, Invocation())
            assert isinstance(refused.value.error, AgentConfirmationRequiredError)
            prompts.append(refused.value.error.prompt)
    assert prompts == ['Delete the todo "Buy milk" (todo-1)?', 'Delete the todo "Buy milk" (todo-3)?']
