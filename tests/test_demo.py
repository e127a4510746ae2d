"""``agentfx demo``: the README's first command runs the todo example end to end."""

from __future__ import annotations

import io

from agentfx.cli import main


def test_the_demo_shows_every_kind_of_outcome_and_the_audit_log() -> None:
    out = io.StringIO()
    assert main(["demo"], out=out) == 0
    transcript = out.getvalue()
    for line in (
        "  <- Completed: CreatedTodo",
        '  <- error: Invalid input for "create_todo"',
        '  <- error: Capability "delete_selected_todo" is not available right now',
        "  <- notifications/tools/list_changed",
        '  <- error: Deleting a todo needs the "todos:delete" scope',
        "  <- Completed: DeletedTodo",
        "  <- JSON-RPC error -32602: No such capability: no_such_tool",
    ):
        assert line in transcript, line
    audit = transcript.split("Audit log", 1)[1].splitlines()[2:]
    assert [row.split()[1:] for row in audit] == [
        ["create_todo", "dispatched", "completed"],
        ["create_todo", "refused", "AgentInvalidInputError"],
        ["delete_selected_todo", "refused", "AgentCapabilityUnavailableError"],
        ["select_todo", "dispatched", "dispatched"],
        ["delete_selected_todo", "refused", "AgentAuthorizationError"],
        ["delete_selected_todo", "dispatched", "completed"],
        ["no_such_tool", "refused", "AgentUnknownCapabilityError"],
    ]
