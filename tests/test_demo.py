"""``agentfx demo``: the README's first command runs the todo example end to end; the other examples say how to run them."""

from __future__ import annotations

import importlib
import io
import re
import runpy
import sys

import pytest

from agentfx.cli import main


def test_the_demo_shows_every_kind_of_outcome_and_the_audit_log() -> None:
    out = io.StringIO()
    assert main(["demo"], out=out) == 0
    transcript = out.getvalue()
    for line in (
        "  <- Completed: CreatedTodo",
        '  <- error: Invalid input for "create_todo": "title" must be a string',
        '  <- error: Capability "delete_selected_todo" is not available right now',
        "  <- notifications/tools/list_changed",
        '  <- error: Deleting a todo needs the "todos:delete" scope',
        '  <- error: "delete_selected_todo" needs a person to confirm: Delete the todo "Buy milk" (todo-1)?',
        '  <- elicitation/create: Delete the todo "Buy milk" (todo-1)?',
        "  ada's person -> decline",
        '  <- error: Declined: Delete the todo "Buy milk" (todo-1)?',
        "  ada's person -> accept {\"confirm\": true}",
        "  <- Completed: DeletedTodo",
        "  <- JSON-RPC error -32602: No such capability: no_such_tool",
    ):
        assert line in transcript, line
    # The person is asked before the answer, and the approval is what deleted the todo.
    asked = transcript.index('ada -> tools/call delete_selected_todo {}\n  <- elicitation/create')
    assert transcript.index("  <- Completed: DeletedTodo") > asked
    # The text a model reads names the new todo, and the tool list change comes before the answer.
    assert re.search(r'\n     \{"capability":"create_todo",.*"id":"todo-\d+","title":"Try agentfx"', transcript)
    assert "  <- notifications/tools/list_changed\n  <- Dispatched SelectedTodo\n" in transcript
    audit = transcript.split("Audit log", 1)[1].splitlines()[2:]
    assert [row.split()[1:] for row in audit] == [
        ["create_todo", "dispatched", "completed"],
        ["create_todo", "refused", "AgentInvalidInputError"],
        ["delete_selected_todo", "refused", "AgentCapabilityUnavailableError"],
        ["select_todo", "dispatched", "dispatched"],
        ["delete_selected_todo", "refused", "AgentAuthorizationError"],
        ["delete_selected_todo", "refused", "AgentConfirmationRequiredError"],
        ["delete_selected_todo", "refused", "AgentAuthorizationError"],
        ["delete_selected_todo", "dispatched", "completed", "(confirmed)"],
        ["no_such_tool", "refused", "AgentUnknownCapabilityError"],
    ]


@pytest.mark.parametrize(
    ("example", "arguments"),
    [
        ("examples.frameworks.pydantic_ai_agent", "model prompt"),
        ("examples.frameworks.openai_agents_agent", "model prompt"),
        ("examples.frameworks.anthropic_agent", "model prompt"),
        ("examples.frameworks.langchain_agent", "prompt"),
    ],
)
def test_an_example_run_without_its_arguments_says_how_to_run_it(
    example: str, arguments: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(sys, "argv", [example])
    # Run as ``python -m`` would, whether or not another test imported it already (restored afterwards).
    importlib.import_module(example)
    monkeypatch.delitem(sys.modules, example)
    with pytest.raises(SystemExit) as exited:
        runpy.run_module(example, run_name="__main__")
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith(f"usage: python -m {example} [-h] {arguments}\n")
    assert err.endswith(f"error: the following arguments are required: {arguments.replace(' ', ', ')}\n")
