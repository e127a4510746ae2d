"""``agentfx.pydantic_ai``: the contract through a real pydantic-ai agent run, with no LLM.

A ``FunctionModel`` plays the model: each turn records the tools it was offered
and the parts it was sent, then answers with scripted tool calls.

asyncio only: pydantic-ai's agent graph starts its tasks with
``asyncio.create_task``, so an agent run cannot start on trio.
"""

from __future__ import annotations

import json
import logging
import re
from typing import Any

import msgspec
import pytest

import agentfx
from pydantic_ai import (
    Agent,
    DeferredToolRequests,
    DeferredToolResults,
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolDenied,
    ToolReturnPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.usage import RequestUsage

from agentfx.pydantic_ai import TRANSPORT, AgentfxToolset
from examples.frameworks import pydantic_ai_agent
from tests.frameworks.script import Turn, Turns
from tests.frameworks.app import (
    CREATED_TEXT_PREFIX,
    EXAMPLE_TODOS,
    DEFECT_TEXT,
    CONFIRM_PROMPT,
    DELETED_TEXT_PREFIX,
    FAILED_TEXT_PREFIX,
    INITIAL,
    INVALID_TEXT,
    KEYWORD_CALLS,
    KEYWORD_SETTINGS,
    CALL_ID_NAMES,
    CALL_IDS,
    HOOK_TOOLS,
    NOT_AN_OBJECT_ARGUMENTS,
    NOT_AN_OBJECT_TEXT,
    NOT_JSON_ARGUMENTS,
    unreadable_input_audits,
    NOT_UNICODE_TEXT,
    PINNED,
    SURROGATE_ARGUMENTS,
    UNDECLARED_KEYWORDS,
    SECRET,
    TITLED_METADATA,
    TOOLS_WITH_SELECTION,
    TOOLS_WITHOUT_SELECTION,
    UNAVAILABLE_TEXT,
    CreatedTodo,
    Asked,
    Contract,
    Harness,
    HookHarness,
    Pong,
    KeywordHarness,
    RequestedCreateTodo,
    RequestedDeleteTodo,
    SelectedTodo,
    Todo,
    assert_call_id_kept,
    created_data,
    harness,
    keyword_harness,
    new_todo_id,
    titled_runtime,
)

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


class Script:
    """A model that answers with scripted turns and records what it was given."""

    def __init__(self, *turns: Turn[ToolCallPart]) -> None:
        self.turns = Turns(turns)
        self.tools: list[list[str]] = []
        self.received: list[list[Any]] = []

    def __call__(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        self.tools.append([tool.name for tool in info.function_tools])
        last = messages[-1]
        self.received.append(list(last.parts) if isinstance(last, ModelRequest) else [])
        turn = self.turns.next()
        # Usage as a provider reports it: FunctionModel would otherwise estimate it by
        # serializing the whole conversation, which a lone surrogate in it cannot survive.
        return ModelResponse(
            parts=[TextPart(turn)] if isinstance(turn, str) else list(turn),
            usage=RequestUsage(input_tokens=1, output_tokens=1),
        )

    def returns(self, turn: int) -> list[tuple[str, str]]:
        """``(content, outcome)`` of every tool result the model got at ``turn``."""
        return [
            (str(part.content), part.outcome)
            for part in self.received[turn]
            if isinstance(part, ToolReturnPart)
        ]


def _agent(h: Harness | KeywordHarness | HookHarness, script: Script, **kwargs: Any) -> Agent[None, str | DeferredToolRequests]:
    return Agent(
        FunctionModel(script),
        toolsets=[AgentfxToolset(h.runtime, **kwargs)],
        output_type=[str, DeferredToolRequests],
    )


def _call(name: str, args: dict[str, Any] | str, call_id: str) -> ToolCallPart:
    return ToolCallPart(name, args, tool_call_id=call_id)


def _everything_the_model_read(script: Script) -> str:
    return repr(script.received) + repr(script.tools)


async def test_the_tools_are_the_available_capabilities_at_each_run_step() -> None:
    h = harness()
    script = Script([_call("select_todo", {"id": "milk"}, "c1")], "done")
    result = await _agent(h, script).run("Select the milk")
    assert result.output == "done"
    # The first step has no selection; the step after select_todo offers the delete.
    assert script.tools == [TOOLS_WITHOUT_SELECTION, TOOLS_WITH_SELECTION]
    assert h.recorder.dispatched == [SelectedTodo(id="milk")]
    assert script.returns(1) == [("Dispatched SelectedTodo", "success")]


async def test_the_tool_definitions_carry_the_contract_schema_and_description() -> None:
    h = harness()
    seen: list[Any] = []

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        seen.extend(info.function_tools)
        return ModelResponse(parts=[TextPart("done")])

    await Agent(FunctionModel(model), toolsets=[AgentfxToolset(h.runtime)]).run("hi")
    create = next(tool for tool in seen if tool.name == "create_todo")
    assert create.description == "Create a new todo"
    assert create.parameters_json_schema["required"] == ["title"]
    assert create.parameters_json_schema["additionalProperties"] is False
    assert create.metadata is not None and create.metadata["output_schema"]["type"] == "object"


async def test_a_completed_call_tells_the_model_the_new_todo_and_the_host_its_data() -> None:
    h = harness()
    script = Script([_call("create_todo", {"title": "Buy bread"}, "c1")], "done")
    result = await _agent(h, script).run("Add bread")
    [(text, outcome)] = script.returns(1)
    assert outcome == "success" and text.startswith(CREATED_TEXT_PREFIX)
    data = created_data(text)
    assert data["completion"] == {
        "status": "completed",
        "message": msgspec.to_builtins(CreatedTodo(id="todo-3", title="Buy bread", request_id=_request_id(h))),
    }
    [sent] = h.recorder.dispatched
    assert isinstance(sent, RequestedCreateTodo) and sent.title == "Buy bread"
    # The reply's data reaches the application as the tool return's metadata, not the model.
    [returned] = [
        part for message in result.all_messages() for part in message.parts if isinstance(part, ToolReturnPart)
    ]
    assert returned.metadata == data
    assert h.outcomes() == [("create_todo", "completed")]
    assert h.transports() == {TRANSPORT} == {"pydantic-ai"}


def _request_id(h: Harness) -> str:
    [entry] = h.audit.entries()
    return entry.invocation


async def test_the_invocation_id_keeps_the_model_call_id_visible_and_is_fresh_per_call() -> None:
    h = harness()
    # A model may reuse a call id in a later turn; the audit still tells the calls apart.
    script = Script([_call("select_todo", {"id": "milk"}, "same")], [_call("select_todo", {"id": "milk"}, "same")], "done")
    await _agent(h, script).run("Select twice")
    ids = [entry.invocation for entry in h.audit.entries()]
    assert len(ids) == 2 and len(set(ids)) == 2
    assert all(i.endswith("/same") for i in ids)


async def test_a_capability_that_became_unavailable_is_a_failed_result_not_a_retry() -> None:
    h = harness(msgspec.structs.replace(INITIAL, selected="milk"))

    def clear_then_delete() -> list[ToolCallPart]:
        # The Model changes after the tools were listed and before the call runs.
        h.recorder.set_model(INITIAL)
        return [_call("delete_selected_todo", {}, "c1")]

    # max_retries=0: a refusal counted as a retry would end the run with an error.
    script = Script(clear_then_delete, "done")
    result = await _agent(h, script, max_retries=0).run("Delete it")
    assert result.output == "done"
    assert script.returns(1) == [(UNAVAILABLE_TEXT, "failed")]
    assert h.recorder.dispatched == []
    assert h.outcomes() == [("delete_selected_todo", "AgentCapabilityUnavailableError")]


async def test_a_tool_that_is_not_listed_is_answered_by_pydantic_ai_and_never_dispatched() -> None:
    h = harness()
    script = Script([_call("delete_selected_todo", {}, "c1")], "done")
    await _agent(h, script).run("Delete it")
    [(text, outcome)] = script.returns(1)
    assert outcome == "retried" and "Unknown tool name: 'delete_selected_todo'" in text
    assert h.recorder.dispatched == [] and h.audit.entries() == []


async def test_invalid_input_asks_the_model_to_retry_with_what_to_fix() -> None:
    h = harness()
    script = Script(
        [_call("create_todo", {}, "c1")],
        [_call("create_todo", {"title": "Buy bread"}, "c2")],
        "done",
    )
    result = await _agent(h, script).run("Add bread")
    assert result.output == "done"
    [(text, outcome)] = script.returns(1)
    assert outcome == "retried" and text == INVALID_TEXT
    assert [type(m) for m in h.recorder.dispatched] == [RequestedCreateTodo]
    assert h.outcomes() == [("create_todo", "AgentInvalidInputError"), ("create_todo", "completed")]


@pytest.mark.parametrize("arguments", NOT_JSON_ARGUMENTS)
async def test_arguments_that_are_not_json_are_refused_by_the_runtime_in_its_own_words(arguments: str) -> None:
    for audit, recorded in unreadable_input_audits():
        h = harness(audit=audit)
        script = Script([_call("create_todo", arguments, "c1")], [_call("create_todo", {"title": "Buy milk"}, "c2")], "done")
        assert (await _agent(h, script).run("Add milk")).output == "done"
        # The same words as every adapter: no decoder text, and not the arguments.
        assert script.returns(1) == [(NOT_AN_OBJECT_TEXT, "retried")]
        read = _everything_the_model_read(script)
        assert "json_invalid" not in read and "Invalid JSON" not in read and arguments not in read
        assert h.outcomes() == [("create_todo", "AgentInvalidInputError"), ("create_todo", "completed")]
        assert h.audit.entries()[0].input == recorded


@pytest.mark.parametrize("arguments", NOT_AN_OBJECT_ARGUMENTS)
async def test_json_that_is_not_an_object_is_refused_by_the_runtime_and_the_run_goes_on(arguments: str) -> None:
    # pydantic-ai ends the whole run on validated arguments that are None: it must never be handed any.
    h = harness(audit=agentfx.audit_log(include_input=True))
    script = Script([_call("create_todo", arguments, "c1")], [_call("create_todo", {"title": "Buy milk"}, "c2")], "done")
    assert (await _agent(h, script).run("Add milk")).output == "done"
    assert script.returns(1) == [(NOT_AN_OBJECT_TEXT, "retried")]
    assert h.outcomes() == [("create_todo", "AgentInvalidInputError"), ("create_todo", "completed")]
    # What was sent reaches the runtime (and its audit) as it was sent, not as the empty stand-in.
    assert h.audit.entries()[0].input == json.loads(arguments)


@pytest.mark.parametrize(("call_id", "kept"), CALL_IDS, ids=CALL_ID_NAMES)
async def test_any_call_id_is_kept_bounded_and_encodable_and_the_call_completes(call_id: str, kept: str) -> None:
    h = harness()
    script = Script([_call("create_todo", {"title": "Buy bread"}, call_id)], "done")
    assert (await _agent(h, script).run("Add bread")).output == "done"
    [(text, outcome)] = script.returns(1)
    assert outcome == "success" and text.startswith(CREATED_TEXT_PREFIX)
    assert_call_id_kept(h, kept)


async def test_a_raising_available_hides_its_tool_and_the_run_goes_on(caplog: pytest.LogCaptureFixture) -> None:
    h = HookHarness(frozenset({"ping"}))
    script = Script([_call("pong", {}, "c1")], "done")
    with caplog.at_level(logging.ERROR, logger="agentfx.pydantic_ai"):
        assert (await _agent(h, script).run("Pong")).output == "done"
    # Only the capability whose hook raised is hidden; the others are offered and work.
    assert script.tools == [HOOK_TOOLS[1:], HOOK_TOOLS[1:]]
    assert h.sent == [Pong()]
    assert SECRET not in _everything_the_model_read(script)
    assert SECRET in caplog.text


async def test_a_model_that_cannot_be_read_offers_no_tool_and_the_run_goes_on(caplog: pytest.LogCaptureFixture) -> None:
    h = HookHarness(model_broken=True)
    script = Script("done")
    with caplog.at_level(logging.ERROR, logger="agentfx.pydantic_ai"):
        assert (await _agent(h, script).run("Ping")).output == "done"
    assert script.tools == [[]]
    assert SECRET in caplog.text and sum(h.asked.values()) == 0


@pytest.mark.parametrize(
    ("runtime", "kwargs", "names"),
    [
        pytest.param(Contract, {}, "agentfx.bind", id="a-definition"),
        pytest.param(None, {"max_retries": -1}, "max_retries=-1", id="negative-retries"),
        pytest.param(None, {"max_retries": "2"}, "max_retries='2'", id="text-retries"),
        pytest.param(None, {"max_retries": True}, "max_retries=True", id="bool-retries"),
        pytest.param(None, {"id": 3}, "id=3", id="a-number-id"),
    ],
)
def test_a_mistake_in_the_toolset_s_arguments_is_a_contract_error_when_it_is_built(
    runtime: object, kwargs: dict[str, Any], names: str
) -> None:
    given: Any = harness().runtime if runtime is None else runtime
    with pytest.raises(agentfx.ContractError, match=re.escape(names)):
        AgentfxToolset(given, **kwargs)


@pytest.mark.parametrize(
    "arguments",
    [
        pytest.param(SURROGATE_ARGUMENTS, id="json-text"),
        pytest.param('{"title": "Buy \ud800 milk"}', id="raw-in-text"),
        pytest.param(json.loads(SURROGATE_ARGUMENTS), id="decoded"),
    ],
)
async def test_a_lone_surrogate_is_invalid_input_and_changes_nothing(arguments: str | dict[str, Any]) -> None:
    # As JSON text (the adapter reads it), or already decoded by a provider's json.loads.
    h = harness()
    script = Script([_call("create_todo", arguments, "c1")], "done")
    assert (await _agent(h, script).run("Add milk")).output == "done"
    assert script.returns(1) == [(NOT_UNICODE_TEXT, "retried")]
    assert h.recorder.dispatched == [] and h.recorder.model() == INITIAL
    assert h.outcomes() == [("create_todo", "AgentInvalidInputError")]


async def test_the_arguments_reach_the_runtime_whole_whatever_their_keys() -> None:
    h = keyword_harness()
    calls = KEYWORD_CALLS
    script = Script([_call(name, args, f"c{i}") for i, (name, args) in enumerate(calls)], "done")
    assert (await _agent(h, script, max_retries=4).run("Change it")).output == "done"
    assert script.returns(1) == [
        ("Dispatched ChangedSettings", "success"),
        *((text, "retried") for _, text in UNDECLARED_KEYWORDS),
    ]
    assert h.sent == [KEYWORD_SETTINGS]


async def test_invalid_input_counts_against_max_retries() -> None:
    from pydantic_ai.exceptions import UnexpectedModelBehavior

    h = harness()
    script = Script([_call("create_todo", {"title": 3}, "c1")], [_call("create_todo", {"bogus": 1}, "c2")])
    with pytest.raises(UnexpectedModelBehavior):
        await _agent(h, script, max_retries=1).run("Add a todo")
    assert h.recorder.dispatched == []


async def test_a_defect_tells_the_model_only_that_the_capability_failed(caplog: pytest.LogCaptureFixture) -> None:
    h = harness()
    script = Script([_call("export_todos", {}, "c1")], "done")
    with caplog.at_level(logging.ERROR, logger="agentfx.pydantic_ai"):
        result = await _agent(h, script, max_retries=0).run("Export")
    assert result.output == "done"
    assert script.returns(1) == [(DEFECT_TEXT, "failed")]
    assert SECRET not in _everything_the_model_read(script)
    # The exception stays with the application, in its log.
    assert SECRET in caplog.text
    assert h.outcomes() == [("export_todos", "AgentDefect")]


async def test_a_confirmation_defers_the_call_and_an_approval_dispatches_it_confirmed() -> None:
    h = harness(msgspec.structs.replace(INITIAL, selected="milk"))
    script = Script([_call("delete_selected_todo", {}, "c1")], "deleted")
    agent = _agent(h, script)
    first = await agent.run("Delete the milk")
    assert isinstance(first.output, DeferredToolRequests)
    [pending] = first.output.approvals
    assert pending.tool_name == "delete_selected_todo"
    assert first.output.metadata["c1"] == {"prompt": CONFIRM_PROMPT, "capability": "delete_selected_todo"}
    assert h.recorder.dispatched == []

    second = await agent.run(
        message_history=first.all_messages(), deferred_tool_results=DeferredToolResults(approvals={"c1": True})
    )
    assert second.output == "deleted"
    [(text, outcome)] = script.returns(1)
    assert outcome == "success" and text.startswith(DELETED_TEXT_PREFIX)
    assert h.recorder.dispatched == [RequestedDeleteTodo(id="milk")]
    entries = h.audit.entries()
    assert [(e.outcome, e.confirmed) for e in entries] == [
        ("AgentConfirmationRequiredError", msgspec.UNSET),
        ("completed", True),
    ]
    assert entries[0].invocation != entries[1].invocation
    # The approved call re-read the Model: after the delete, it is no longer offered.
    assert script.tools[1] == TOOLS_WITHOUT_SELECTION


async def test_a_deferred_call_with_a_huge_call_id_is_remembered_in_little_and_approved_as_shown() -> None:
    # The call id is the model's text: the table of deferred calls must not keep megabytes per entry.
    call_id = "c" * 1_000_000
    h = harness(msgspec.structs.replace(INITIAL, selected="milk"))
    script = Script([_call("delete_selected_todo", {}, call_id)], "deleted")
    toolset = AgentfxToolset(h.runtime)
    agent = Agent(FunctionModel(script), toolsets=[toolset], output_type=[str, DeferredToolRequests])
    first = await agent.run("Delete the milk")
    assert isinstance(first.output, DeferredToolRequests)
    kept = list(toolset._asked._entries)  # pyright: ignore[reportPrivateUsage]
    assert len(kept) == 1 and len(repr(kept[0])) < 400
    # Without the metadata, only the remembered prompt says what the person was shown.
    second = await agent.run(
        message_history=first.all_messages(), deferred_tool_results=DeferredToolResults(approvals={call_id: True})
    )
    assert second.output == "deleted"
    assert h.recorder.dispatched == [RequestedDeleteTodo(id="milk")]
    assert [e.confirmed for e in h.audit.entries()] == [msgspec.UNSET, True]
    assert list(toolset._asked._entries) == []  # pyright: ignore[reportPrivateUsage]


async def test_a_deferred_call_with_a_huge_prompt_is_remembered_in_little_and_approved_as_shown() -> None:
    # The prompt is the application's words, often built from the model's own arguments:
    # the table of deferred calls must not keep megabytes per entry for it either.
    title = "milk " * 200_000
    h = harness(msgspec.structs.replace(INITIAL, todos=(Todo("milk", title),), selected="milk"))
    script = Script([_call("delete_selected_todo", {}, "c1")], "deleted")
    toolset = AgentfxToolset(h.runtime)
    agent = Agent(FunctionModel(script), toolsets=[toolset], output_type=[str, DeferredToolRequests])
    first = await agent.run("Delete the milk")
    assert isinstance(first.output, DeferredToolRequests)
    assert first.output.metadata["c1"]["prompt"] == f'Delete the todo "{title}"?'
    [held] = toolset._asked._entries.values()  # pyright: ignore[reportPrivateUsage]
    assert len(held) < 100
    # Without the metadata, only the remembered digest says what the person was shown.
    second = await agent.run(
        message_history=first.all_messages(), deferred_tool_results=DeferredToolResults(approvals={"c1": True})
    )
    assert second.output == "deleted"
    assert h.recorder.dispatched == [RequestedDeleteTodo(id="milk")]
    assert [e.confirmed for e in h.audit.entries()] == [msgspec.UNSET, True]


async def test_a_huge_prompt_remembered_as_a_digest_covers_no_other_prompt() -> None:
    title = "milk " * 200_000
    h = harness(msgspec.structs.replace(INITIAL, todos=(Todo("milk", title), Todo("oat", title + "!")), selected="milk"))
    script = Script([_call("delete_selected_todo", {}, "c1")], "deleted")
    toolset = AgentfxToolset(h.runtime)
    agent = Agent(FunctionModel(script), toolsets=[toolset], output_type=[str, DeferredToolRequests])
    first = await agent.run("Delete the milk")
    assert isinstance(first.output, DeferredToolRequests)
    [held] = toolset._asked._entries.values()  # pyright: ignore[reportPrivateUsage]
    assert isinstance(held, bytes)  # the digest, which must not cover a prompt it was not made of
    # While the person reads the prompt, a todo whose prompt differs only at its end is selected.
    h.recorder.set_model(msgspec.structs.replace(h.recorder.model(), selected="oat"))
    second = await agent.run(
        message_history=first.all_messages(), deferred_tool_results=DeferredToolResults(approvals={"c1": True})
    )
    assert isinstance(second.output, DeferredToolRequests)
    assert second.output.metadata["c1"]["prompt"] == f'Delete the todo "{title}!"?'
    assert h.recorder.dispatched == []


async def test_a_denied_confirmation_sends_nothing() -> None:
    h = harness(msgspec.structs.replace(INITIAL, selected="milk"))
    script = Script([_call("delete_selected_todo", {}, "c1")], "kept")
    agent = _agent(h, script)
    first = await agent.run("Delete the milk")
    denied = DeferredToolResults(approvals={"c1": ToolDenied("The user kept the todo")})
    second = await agent.run(message_history=first.all_messages(), deferred_tool_results=denied)
    assert second.output == "kept"
    assert script.returns(1) == [("The user kept the todo", "denied")]
    assert h.recorder.dispatched == []
    assert h.outcomes() == [("delete_selected_todo", "AgentConfirmationRequiredError")]


async def test_a_declared_failure_message_is_a_failed_result_not_a_retry() -> None:
    h = harness(msgspec.structs.replace(INITIAL, selected=PINNED))
    script = Script([_call("delete_selected_todo", {}, "c1")], "could not")
    agent = _agent(h, script, max_retries=0)
    first = await agent.run("Delete the pinned note")
    second = await agent.run(
        message_history=first.all_messages(), deferred_tool_results=DeferredToolResults(approvals={"c1": True})
    )
    assert second.output == "could not"
    [(text, outcome)] = script.returns(1)
    assert outcome == "failed" and text.startswith(FAILED_TEXT_PREFIX)
    assert "Pinned todos cannot be deleted" in text
    assert h.recorder.dispatched == [RequestedDeleteTodo(id=PINNED)]
    assert h.outcomes()[-1] == ("delete_selected_todo", "failed")


async def test_the_toolset_keeps_its_id() -> None:
    h = harness()
    assert AgentfxToolset(h.runtime, id="todos").id == "todos"
    assert AgentfxToolset(h.runtime).id is None
    assert AgentfxToolset(h.runtime).runtime is h.runtime


async def test_the_example_adds_a_todo_reads_its_id_and_deletes_it_once_confirmed() -> None:
    script: Script = Script(
        [_call("create_todo", {"title": "Buy bread"}, "c1")],
        # The reply text told the model the new todo's id.
        lambda: [_call("select_todo", {"id": new_todo_id(script.returns(-1)[0][0])}, "c2")],
        [_call("delete_selected_todo", {}, "c3")],
        "Added bread, then deleted it.",
    )
    asked = Asked()
    answer, titles = await pydantic_ai_agent.run(FunctionModel(script), "Add bread, then delete it", asked)
    assert answer == "Added bread, then deleted it."
    assert asked.prompts == ['Delete the todo "Buy bread" (todo-3)?']
    assert titles == EXAMPLE_TODOS


async def test_a_title_and_hints_ride_along_as_tool_metadata() -> None:
    seen: list[Any] = []

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        seen.extend(info.function_tools)
        return ModelResponse(parts=[TextPart("done")])

    await Agent(FunctionModel(model), toolsets=[AgentfxToolset(titled_runtime())]).run("hi")
    [ping] = seen
    assert ping.metadata is not None
    assert {key: ping.metadata[key] for key in ("title", "hints")} == TITLED_METADATA


REPORT_PROMPT = 'Delete the todo "Write the report"?'


def _two_todos_selected(selected: str) -> Harness:
    todos = (*INITIAL.todos, Todo("report", "Write the report"))
    return harness(msgspec.structs.replace(INITIAL, todos=todos, selected=selected))


async def test_an_approval_covers_only_the_prompt_the_person_was_shown() -> None:
    h = _two_todos_selected("milk")
    script = Script([_call("delete_selected_todo", {}, "c1")], "deleted")
    agent = _agent(h, script)
    first = await agent.run("Delete the milk")
    assert isinstance(first.output, DeferredToolRequests)
    assert first.output.metadata["c1"]["prompt"] == CONFIRM_PROMPT
    # While the person reads the prompt, another todo is selected in the app.
    h.recorder.set_model(msgspec.structs.replace(h.recorder.model(), selected="report"))
    second = await agent.run(
        message_history=first.all_messages(), deferred_tool_results=DeferredToolResults(approvals={"c1": True})
    )
    # The "yes" was to deleting the milk: the call asks again, about what it would now delete.
    assert isinstance(second.output, DeferredToolRequests)
    [pending] = second.output.approvals
    assert pending.tool_call_id == "c1"
    assert second.output.metadata["c1"] == {"prompt": REPORT_PROMPT, "capability": "delete_selected_todo"}
    assert h.recorder.dispatched == []
    third = await agent.run(
        message_history=second.all_messages(), deferred_tool_results=DeferredToolResults(approvals={"c1": True})
    )
    assert third.output == "deleted"
    assert h.recorder.dispatched == [RequestedDeleteTodo(id="report")]
    assert [(e.outcome, e.confirmed) for e in h.audit.entries()] == [
        ("AgentConfirmationRequiredError", msgspec.UNSET),
        ("AgentAuthorizationError", msgspec.UNSET),
        ("completed", True),
    ]


async def test_an_approval_the_toolset_did_not_ask_for_is_asked_again_unless_its_metadata_says_what_was_shown() -> None:
    # A toolset rebuilt between the runs (another process, a new agent) has no
    # record of the prompt; the DeferredToolRequests' metadata passed back is one.
    h = harness(msgspec.structs.replace(INITIAL, selected="milk"))
    script = Script([_call("delete_selected_todo", {}, "c1")], "deleted")
    first = await _agent(h, script).run("Delete the milk")
    assert isinstance(first.output, DeferredToolRequests)
    approved = DeferredToolResults(approvals={"c1": True})
    again = await _agent(h, script).run(message_history=first.all_messages(), deferred_tool_results=approved)
    assert isinstance(again.output, DeferredToolRequests)
    assert again.output.metadata["c1"]["prompt"] == CONFIRM_PROMPT
    assert h.recorder.dispatched == []
    shown = DeferredToolResults(approvals={"c1": True}, metadata=again.output.metadata)
    done = await _agent(h, script).run(message_history=again.all_messages(), deferred_tool_results=shown)
    assert done.output == "deleted"
    assert h.recorder.dispatched == [RequestedDeleteTodo(id="milk")]
    # Metadata naming a prompt the call no longer asks confirms nothing.
    h = _two_todos_selected("report")
    script = Script([_call("delete_selected_todo", {}, "c1")], "deleted")
    first = await _agent(h, script).run("Delete the report")
    stale = DeferredToolResults(approvals={"c1": True}, metadata={"c1": {"prompt": CONFIRM_PROMPT}})
    again = await _agent(h, script).run(message_history=first.all_messages(), deferred_tool_results=stale)
    assert isinstance(again.output, DeferredToolRequests)
    assert again.output.metadata["c1"]["prompt"] == REPORT_PROMPT
    assert h.recorder.dispatched == []


async def test_a_confirmation_answered_inline_by_a_capability_dispatches_the_prompt_it_approved() -> None:
    from pydantic_ai.capabilities import HandleDeferredToolCalls

    h = harness(msgspec.structs.replace(INITIAL, selected="milk"))
    shown: list[object] = []

    def approve(ctx: Any, requests: DeferredToolRequests) -> DeferredToolResults:
        shown.extend(requests.metadata[call.tool_call_id]["prompt"] for call in requests.approvals)
        return DeferredToolResults(approvals={call.tool_call_id: True for call in requests.approvals})

    script = Script([_call("delete_selected_todo", {}, "c1")], "deleted")
    agent = Agent(
        FunctionModel(script),
        toolsets=[AgentfxToolset(h.runtime)],
        capabilities=[HandleDeferredToolCalls(handler=approve)],
    )
    assert (await agent.run("Delete the milk")).output == "deleted"
    assert shown == [CONFIRM_PROMPT]
    assert h.recorder.dispatched == [RequestedDeleteTodo(id="milk")]
    assert [(e.outcome, e.confirmed) for e in h.audit.entries()] == [
        ("AgentConfirmationRequiredError", msgspec.UNSET),
        ("completed", True),
    ]
