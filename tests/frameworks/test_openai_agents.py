"""``agentfx.openai_agents``: the contract through ``Runner.run``, with a scripted ``Model`` of our own.

The model records, at each turn, the tools the runner offered it and the tool
outputs it was sent, then answers with scripted function calls.

asyncio only: the runner starts its tasks with ``asyncio.create_task``, so a
run cannot start on trio.
"""

from __future__ import annotations

import json
import logging
from collections import Counter
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any, cast

import anyio
import anyio.lowlevel
import msgspec
import pytest
from agents import (
    Agent,
    AgentOutputSchemaBase,
    FunctionTool,
    Handoff,
    ModelBehaviorError,
    ModelResponse,
    ModelSettings,
    ModelTracing,
    RunConfig,
    Runner,
    RunState,
    Tool,
    Usage,
    tool_namespace,
)
from agents.items import TResponseInputItem, TResponseOutputItem
from agents.tool_context import ToolContext
from agents.models.interface import Model
from openai.types.responses.response_prompt_param import ResponsePromptParam
from agents.testing import assistant_message, function_call

import agentfx
from agentfx.openai_agents import TRANSPORT, function_tools
from agentfx.testing import RecordingHost
from examples.frameworks import openai_agents_agent
from tests.frameworks.script import Turn, Turns
from tests.frameworks.app import (
    CONFIRM_TEXT,
    CREATED_TEXT_PREFIX,
    EXAMPLE_TODOS,
    DEFECT_TEXT,
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
    TOOLS_WITH_SELECTION,
    TOOLS_WITHOUT_SELECTION,
    UNAVAILABLE_TEXT,
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
)

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


class ScriptedModel(Model):
    """Answers each turn from a script; records the tools offered and the outputs received."""

    def __init__(self, *turns: Turn[TResponseOutputItem]) -> None:
        self.turns = Turns(turns)
        self.tools: list[list[str]] = []
        self.outputs: list[list[tuple[str, str]]] = []
        self._answered: set[str] = set()

    async def get_response(
        self,
        system_instructions: str | None,
        input: str | list[TResponseInputItem],
        model_settings: ModelSettings,
        tools: list[Tool],
        output_schema: AgentOutputSchemaBase | None,
        handoffs: list[Handoff[Any, Any]],
        tracing: ModelTracing,
        *,
        previous_response_id: str | None,
        conversation_id: str | None,
        prompt: ResponsePromptParam | None,
    ) -> ModelResponse:
        items = input
        self.tools.append([tool.name for tool in tools])
        self.outputs.append(self._new_outputs(items))
        turn = self.turns.next()
        output = [assistant_message(turn)] if isinstance(turn, str) else list(turn)
        return ModelResponse(output=output, usage=Usage(), response_id=None)

    def _new_outputs(self, items: str | list[TResponseInputItem]) -> list[tuple[str, str]]:
        # The input is the whole conversation so far; keep only outputs not seen before.
        seen: list[tuple[str, str]] = []
        for item in [] if isinstance(items, str) else items:
            raw = cast(dict[str, Any], item)
            call_id = str(raw.get("call_id"))
            if raw.get("type") == "function_call_output" and call_id not in self._answered:
                self._answered.add(call_id)
                seen.append((call_id, str(raw["output"])))
        return seen

    def stream_response(self, *args: Any, **kwargs: Any) -> AsyncIterator[Any]:
        raise NotImplementedError


def _agent(h: Harness | KeywordHarness | HookHarness, model: ScriptedModel) -> Agent[None]:
    return Agent(name="todos", model=model, tools=list(function_tools(h.runtime)))


_CONFIG = RunConfig(tracing_disabled=True, tool_not_found_behavior="return_error_to_model")


async def test_the_tools_are_the_available_capabilities_at_each_turn() -> None:
    h = harness()
    model = ScriptedModel([function_call("select_todo", {"id": "milk"}, call_id="c1")], "done")
    result = await Runner.run(_agent(h, model), "Select the milk", run_config=_CONFIG)
    assert result.final_output == "done"
    assert model.tools == [TOOLS_WITHOUT_SELECTION, TOOLS_WITH_SELECTION]
    assert model.outputs[1] == [("c1", "Dispatched SelectedTodo")]
    assert h.recorder.dispatched == [SelectedTodo(id="milk")]


async def test_a_capability_that_stays_unavailable_is_hidden_at_the_next_turn() -> None:
    h = harness(msgspec.structs.replace(INITIAL, selected="milk"))

    def clear() -> list[TResponseOutputItem]:
        h.recorder.set_model(INITIAL)
        return [function_call("select_todo", {"id": "nothing"}, call_id="c1")]

    model = ScriptedModel(clear, "done")
    await Runner.run(_agent(h, model), "Clear", run_config=_CONFIG)
    # Offered once more through the execution check of the turn it changed in, then hidden.
    assert model.tools == [TOOLS_WITH_SELECTION, TOOLS_WITHOUT_SELECTION]


def test_every_capability_is_built_with_its_schema_and_approval() -> None:
    h = harness()
    tools = {tool.name: tool for tool in function_tools(h.runtime)}
    assert list(tools) == TOOLS_WITH_SELECTION
    create = tools["create_todo"]
    assert create.description == "Create a new todo"
    # Verbatim: the SDK's strict mode would make every field required.
    assert create.strict_json_schema is False
    assert create.params_json_schema["required"] == ["title"]
    assert create.params_json_schema["additionalProperties"] is False
    # Only ``authorize`` can ask a person, so only a capability declaring one needs approval
    # (always, through a policy that keeps the Model the person is asked on).
    assert {name: callable(tool.needs_approval) for name, tool in tools.items()} == {
        "create_todo": False,
        "select_todo": False,
        "delete_selected_todo": True,
        "export_todos": False,
    }
    assert {tool.needs_approval for tool in tools.values() if not callable(tool.needs_approval)} == {False}


async def test_a_completed_call_tells_the_model_the_new_todo() -> None:
    h = harness()
    model = ScriptedModel([function_call("create_todo", {"title": "Buy bread"}, call_id="c1")], "done")
    await Runner.run(_agent(h, model), "Add bread", run_config=_CONFIG)
    [(call_id, text)] = model.outputs[1]
    assert call_id == "c1" and text.startswith(CREATED_TEXT_PREFIX)
    [entry] = h.audit.entries()
    assert created_data(text)["completion"] == {
        "status": "completed",
        "message": {"type": "CreatedTodo", "id": "todo-3", "title": "Buy bread", "request_id": entry.invocation},
    }
    assert entry.invocation.endswith("/c1")
    assert [type(m) for m in h.recorder.dispatched] == [RequestedCreateTodo]
    assert h.outcomes() == [("create_todo", "completed")]
    assert h.transports() == {TRANSPORT} == {"openai-agents"}


async def test_a_capability_that_became_unavailable_is_answered_not_raised() -> None:
    h = harness(msgspec.structs.replace(INITIAL, selected="milk"))

    def clear_then_delete() -> list[TResponseOutputItem]:
        # The Model changes after the tools were listed and before the call runs.
        h.recorder.set_model(INITIAL)
        return [function_call("delete_selected_todo", {}, call_id="c1")]

    model = ScriptedModel(clear_then_delete, "done")
    tools = function_tools(h.runtime)
    for tool in tools:
        tool.needs_approval = False  # what an application does when authorize never asks a person
    result = await Runner.run(Agent(name="todos", model=model, tools=list(tools)), "Delete it", run_config=_CONFIG)
    assert result.final_output == "done"
    assert model.outputs[1] == [("c1", UNAVAILABLE_TEXT)]
    assert h.recorder.dispatched == []
    assert h.outcomes() == [("delete_selected_todo", "AgentCapabilityUnavailableError")]


async def test_an_approval_resumed_after_the_capability_went_away_sends_nothing() -> None:
    # The SDK re-lists the tools when it resumes an approved call: one that went away
    # while the person decided is the runner's "not found" case, never dispatched.
    h = harness(msgspec.structs.replace(INITIAL, selected="milk"))
    model = ScriptedModel([function_call("delete_selected_todo", {}, call_id="c1")], "done")
    agent = _agent(h, model)
    first = await Runner.run(agent, "Delete it", run_config=_CONFIG)
    state = first.to_state()
    state.approve(first.interruptions[0])
    h.recorder.set_model(INITIAL)
    second = await Runner.run(agent, state, run_config=_CONFIG)
    assert second.final_output == "done"
    assert model.outputs[1] == [("c1", "Tool 'delete_selected_todo' not found.")]
    assert h.recorder.dispatched == [] and h.audit.entries() == []


async def test_a_hidden_tool_is_the_runner_s_affair_and_never_dispatched() -> None:
    h = harness()
    model = ScriptedModel([function_call("delete_selected_todo", {}, call_id="c1")], "done")
    await Runner.run(_agent(h, model), "Delete it", run_config=_CONFIG)
    assert model.outputs[1] == [("c1", "Tool 'delete_selected_todo' not found.")]
    # Without that run setting, the SDK ends the run; nothing reaches the host either way.
    model = ScriptedModel([function_call("delete_selected_todo", {}, call_id="c1")], "done")
    with pytest.raises(ModelBehaviorError):
        await Runner.run(_agent(h, model), "Delete it", run_config=RunConfig(tracing_disabled=True))
    assert h.recorder.dispatched == [] and h.audit.entries() == []


@pytest.mark.parametrize(
    ("arguments", "text"),
    [
        ({}, INVALID_TEXT),
        ({"title": 3}, 'Invalid input for "create_todo": "title" must be a string'),
        ("not json", 'Invalid input for "create_todo": the input must be an object'),
        ("[1]", 'Invalid input for "create_todo": the input must be an object'),
    ],
)
async def test_invalid_input_is_answered_with_what_to_fix(arguments: Any, text: str) -> None:
    h = harness()
    model = ScriptedModel([function_call("create_todo", arguments, call_id="c1")], "done")
    result = await Runner.run(_agent(h, model), "Add a todo", run_config=_CONFIG)
    assert result.final_output == "done"
    assert model.outputs[1] == [("c1", text)]
    assert h.recorder.dispatched == []
    assert h.outcomes() == [("create_todo", "AgentInvalidInputError")]


@pytest.mark.parametrize("arguments", NOT_JSON_ARGUMENTS)
async def test_arguments_that_are_not_json_are_refused_and_never_recorded_as_text(arguments: str) -> None:
    for audit, recorded in unreadable_input_audits():
        h = harness(audit=audit)
        model = ScriptedModel([function_call("create_todo", arguments, call_id="c1")], "done")
        await Runner.run(_agent(h, model), "Add a todo", run_config=_CONFIG)
        assert model.outputs[1] == [("c1", NOT_AN_OBJECT_TEXT)]
        assert h.recorder.dispatched == []
        [entry] = h.audit.entries()
        assert (entry.outcome, entry.input) == ("AgentInvalidInputError", recorded)
        assert "Buy milk" not in repr(h.audit.entries())


@pytest.mark.parametrize("arguments", NOT_AN_OBJECT_ARGUMENTS)
async def test_json_that_is_not_an_object_is_refused_and_audited(arguments: str) -> None:
    h = harness(audit=agentfx.audit_log(include_input=True))
    model = ScriptedModel([function_call("create_todo", arguments, call_id="c1")], "done")
    assert (await Runner.run(_agent(h, model), "Add a todo", run_config=_CONFIG)).final_output == "done"
    assert model.outputs[1] == [("c1", NOT_AN_OBJECT_TEXT)]
    [entry] = h.audit.entries()
    assert (entry.outcome, entry.input) == ("AgentInvalidInputError", json.loads(arguments))


@pytest.mark.parametrize(("call_id", "kept"), CALL_IDS, ids=CALL_ID_NAMES)
async def test_any_call_id_is_kept_bounded_and_encodable_and_the_call_completes(call_id: str, kept: str) -> None:
    h = harness()
    model = ScriptedModel([function_call("create_todo", {"title": "Buy bread"}, call_id=call_id)], "done")
    assert (await Runner.run(_agent(h, model), "Add bread", run_config=_CONFIG)).final_output == "done"
    [(answered, text)] = model.outputs[1]
    assert answered == call_id and text.startswith(CREATED_TEXT_PREFIX)
    assert_call_id_kept(h, kept)


async def test_a_raising_available_hides_its_tool_and_the_run_goes_on(caplog: pytest.LogCaptureFixture) -> None:
    h = HookHarness(frozenset({"ping"}))
    model = ScriptedModel([function_call("pong", {}, call_id="c1")], "done")
    with caplog.at_level(logging.ERROR, logger="agentfx.openai_agents"):
        assert (await Runner.run(_agent(h, model), "Pong", run_config=_CONFIG)).final_output == "done"
    # Only the capability whose hook raised is hidden; the others are offered and work.
    assert model.tools == [HOOK_TOOLS[1:], HOOK_TOOLS[1:]]
    assert model.outputs[1] == [("c1", "Dispatched Pong")] and h.sent == [Pong()]
    assert SECRET not in repr(model.outputs)
    assert SECRET in caplog.text


async def test_each_tool_asks_only_its_own_capability_against_one_model_read() -> None:
    h = HookHarness()
    tools = function_tools(h.runtime)
    checks: Counter[str] = Counter()

    def counted(tool_name: str, is_enabled: Callable[..., Any]) -> Callable[..., Any]:
        def check(ctx: Any, agent: Any) -> Any:
            checks[tool_name] += 1
            return is_enabled(ctx, agent)

        return check

    for tool in tools:
        tool.is_enabled = counted(tool.name, cast(Callable[..., Any], tool.is_enabled))
    model = ScriptedModel([function_call("pong", {}, call_id="c1")], "done")
    await Runner.run(Agent(name="hooks", model=model, tools=list(tools)), "Pong", run_config=_CONFIG)
    assert set(checks) == set(HOOK_TOOLS) and h.sent == [Pong()]
    # However often the SDK asks, one check is one hook call and one Model read, not one
    # per capability; the call itself is checked once more, by the runtime.
    assert h.asked == checks + Counter({"pong": 1})
    assert h.model_reads == sum(checks.values()) + 1


def test_a_definition_in_place_of_the_runtime_is_a_contract_error() -> None:
    with pytest.raises(agentfx.ContractError, match=r"agentfx\.bind"):
        function_tools(cast(Any, Contract))


async def test_a_lone_surrogate_is_invalid_input_and_changes_nothing() -> None:
    # Called as the runner calls a tool: the runner itself never gets this far (below).
    h = harness()
    [create] = [tool for tool in function_tools(h.runtime) if tool.name == "create_todo"]
    ctx = ToolContext(None, tool_name="create_todo", tool_call_id="c1", tool_arguments=SURROGATE_ARGUMENTS)
    assert await create.on_invoke_tool(ctx, SURROGATE_ARGUMENTS) == NOT_UNICODE_TEXT
    assert h.recorder.dispatched == [] and h.recorder.model() == INITIAL
    assert h.outcomes() == [("create_todo", "AgentInvalidInputError")]


async def test_the_runner_aborts_on_a_lone_surrogate_before_any_tool_runs() -> None:
    # The SDK fingerprints every call's arguments as UTF-8 before running the
    # tools, so a "\ud800" escape ends the run with UnicodeEncodeError, outside
    # any tool. Nothing is sent. Should the SDK stop raising, this test fails:
    # then the run reaches the tool, which refuses the call as the test above shows.
    h = harness()
    model = ScriptedModel([function_call("create_todo", SURROGATE_ARGUMENTS, call_id="c1")], "done")
    with pytest.raises(UnicodeEncodeError):
        await Runner.run(_agent(h, model), "Add a todo", run_config=_CONFIG)
    assert h.recorder.dispatched == [] and h.audit.entries() == []


async def test_the_runner_aborts_on_arguments_nested_too_deeply_before_any_tool_runs() -> None:
    # The same fingerprinting recurses once per level: 3,000 nested arrays end
    # the run with RecursionError, outside any tool, and nothing is sent.
    # Should the SDK stop raising, this test fails: then the tool refuses the call.
    h = harness()
    deep = '{"title":' + "[" * 3000 + "]" * 3000 + "}"
    model = ScriptedModel([function_call("create_todo", deep, call_id="c1")], "done")
    with pytest.raises(RecursionError):
        await Runner.run(_agent(h, model), "Add a todo", run_config=_CONFIG)
    assert h.recorder.dispatched == [] and h.audit.entries() == []


async def test_the_arguments_reach_the_runtime_whole_whatever_their_keys() -> None:
    h = keyword_harness()
    calls = KEYWORD_CALLS
    model = ScriptedModel([function_call(name, args, call_id=f"c{i}") for i, (name, args) in enumerate(calls)], "done")
    await Runner.run(_agent(h, model), "Change it", run_config=_CONFIG)
    assert [text for _, text in model.outputs[1]] == ["Dispatched ChangedSettings", *(t for _, t in UNDECLARED_KEYWORDS)]
    assert h.sent == [KEYWORD_SETTINGS]


async def test_empty_arguments_are_no_arguments() -> None:
    h = harness()
    model = ScriptedModel([function_call("export_todos", "", call_id="c1")], "done")
    await Runner.run(_agent(h, model), "Export", run_config=_CONFIG)
    # Decoded as ``{}``: the call got past decoding, to the defect in ``to_message``.
    assert h.outcomes() == [("export_todos", "AgentDefect")]


async def test_a_defect_is_answered_and_the_run_goes_on(caplog: pytest.LogCaptureFixture) -> None:
    h = harness()
    model = ScriptedModel([function_call("export_todos", {}, call_id="c1")], "done")
    with caplog.at_level(logging.ERROR, logger="agentfx.openai_agents"):
        result = await Runner.run(_agent(h, model), "Export", run_config=_CONFIG)
    assert result.final_output == "done"
    assert model.outputs[1] == [("c1", DEFECT_TEXT)]
    assert SECRET not in repr(model.outputs)
    assert SECRET in caplog.text
    assert h.outcomes() == [("export_todos", "AgentDefect")]


async def test_an_approved_call_is_dispatched_and_a_rejected_one_is_not() -> None:
    h = harness(msgspec.structs.replace(INITIAL, selected="milk"))
    model = ScriptedModel(
        [function_call("delete_selected_todo", {}, call_id="c1")],
        "deleted",
    )
    agent = _agent(h, model)
    first = await Runner.run(agent, "Delete the milk", run_config=_CONFIG)
    [pending] = first.interruptions
    assert pending.tool_name == "delete_selected_todo"
    assert h.recorder.dispatched == [] and h.audit.entries() == []
    state = first.to_state()
    state.approve(pending)
    second = await Runner.run(agent, state, run_config=_CONFIG)
    assert second.final_output == "deleted"
    [(call_id, text)] = model.outputs[1]
    assert call_id == "c1" and text.startswith(DELETED_TEXT_PREFIX)
    assert h.recorder.dispatched == [RequestedDeleteTodo(id="milk")]
    [entry] = h.audit.entries()
    assert (entry.outcome, entry.confirmed, entry.transport) == ("completed", True, TRANSPORT)

    h = harness(msgspec.structs.replace(INITIAL, selected="milk"))
    model = ScriptedModel([function_call("delete_selected_todo", {}, call_id="c1")], "kept")
    agent = _agent(h, model)
    first = await Runner.run(agent, "Delete the milk", run_config=_CONFIG)
    state = first.to_state()
    state.reject(first.interruptions[0], rejection_message="The user kept the todo")
    second = await Runner.run(agent, state, run_config=_CONFIG)
    assert second.final_output == "kept"
    assert model.outputs[1] == [("c1", "The user kept the todo")]
    assert h.recorder.dispatched == [] and h.audit.entries() == []


async def test_a_confirmation_without_an_approval_is_answered_and_nothing_sent() -> None:
    # An application that turned needs_approval off for a capability that does ask.
    h = harness(msgspec.structs.replace(INITIAL, selected="milk"))
    model = ScriptedModel([function_call("delete_selected_todo", {}, call_id="c1")], "asked")
    tools = function_tools(h.runtime)
    for tool in tools:
        tool.needs_approval = False
    result = await Runner.run(Agent(name="todos", model=model, tools=list(tools)), "Delete", run_config=_CONFIG)
    assert result.final_output == "asked"
    assert model.outputs[1] == [("c1", CONFIRM_TEXT)]
    assert h.recorder.dispatched == []
    assert h.outcomes() == [("delete_selected_todo", "AgentConfirmationRequiredError")]


async def test_a_declared_failure_message_is_answered_with_its_reason() -> None:
    h = harness(msgspec.structs.replace(INITIAL, selected=PINNED))
    model = ScriptedModel([function_call("delete_selected_todo", {}, call_id="c1")], "could not")
    agent = _agent(h, model)
    first = await Runner.run(agent, "Delete the pinned note", run_config=_CONFIG)
    state = first.to_state()
    state.approve(first.interruptions[0])
    second = await Runner.run(agent, state, run_config=_CONFIG)
    assert second.final_output == "could not"
    [(_, text)] = model.outputs[1]
    assert text.startswith(FAILED_TEXT_PREFIX) and "Pinned todos cannot be deleted" in text
    assert h.recorder.dispatched == [RequestedDeleteTodo(id=PINNED)]
    assert h.outcomes() == [("delete_selected_todo", "failed")]


async def test_the_example_adds_a_todo_reads_its_id_and_deletes_it_once_approved() -> None:
    model: ScriptedModel = ScriptedModel(
        [function_call("create_todo", {"title": "Buy bread"}, call_id="c1")],
        # The reply text told the model the new todo's id.
        lambda: [function_call("select_todo", {"id": new_todo_id(model.outputs[-1][0][1])}, call_id="c2")],
        [function_call("delete_selected_todo", {}, call_id="c3")],
        "Added bread, then deleted it.",
    )
    asked = Asked()
    config = RunConfig(tracing_disabled=True, tool_not_found_behavior="return_error_to_model")
    answer, titles = await openai_agents_agent.run(model, "Add bread, then delete it", asked, config)
    assert answer == "Added bread, then deleted it."
    # The SDK asks before authorize runs, so the person is asked about the tool, not the todo.
    assert asked.prompts == ["Allow delete_selected_todo?"]
    assert titles == EXAMPLE_TODOS


async def test_what_the_tools_remember_of_a_run_goes_with_the_run() -> None:
    import gc

    from agentfx.openai_agents import _Offers  # pyright: ignore[reportPrivateUsage]

    h = harness()
    tools = function_tools(h.runtime)
    model = ScriptedModel([function_call("select_todo", {"id": "milk"}, call_id="c1")], "done")
    result = await Runner.run(Agent(name="todos", model=model, tools=list(tools)), "Select", run_config=_CONFIG)
    offers = [
        cell.cell_contents
        for tool in tools
        for cell in getattr(tool.is_enabled, "__closure__", None) or ()
        if isinstance(cell.cell_contents, _Offers)
    ]
    assert len(offers) == len(tools)
    assert all(len(o._offered) == 1 for o in offers)  # pyright: ignore[reportPrivateUsage]
    del result
    gc.collect()
    assert all(len(o._offered) == 0 for o in offers)  # pyright: ignore[reportPrivateUsage]


REPORT_PROMPT = 'Delete the todo "Write the report"?'


async def test_an_approval_covers_only_the_model_the_person_was_asked_on() -> None:
    todos = (*INITIAL.todos, Todo("report", "Write the report"))
    h = harness(msgspec.structs.replace(INITIAL, todos=todos, selected="milk"))
    model = ScriptedModel(
        [function_call("delete_selected_todo", {}, call_id="c1")],
        [function_call("delete_selected_todo", {}, call_id="c2")],
        "deleted",
    )
    agent = _agent(h, model)
    first = await Runner.run(agent, "Delete the milk", run_config=_CONFIG)
    # While the person decides, another todo is selected in the app.
    h.recorder.set_model(msgspec.structs.replace(h.recorder.model(), selected="report"))
    state = first.to_state()
    state.approve(first.interruptions[0])
    second = await Runner.run(agent, state, run_config=_CONFIG)
    # The "yes" was given on the milk's Model: the model is told to ask about the report.
    assert model.outputs[1] == [("c1", f'"delete_selected_todo" needs a person to confirm: {REPORT_PROMPT}')]
    assert h.recorder.dispatched == []
    [pending] = second.interruptions
    assert pending.call_id == "c2"
    state = second.to_state()
    state.approve(pending)
    third = await Runner.run(agent, state, run_config=_CONFIG)
    assert third.final_output == "deleted"
    assert h.recorder.dispatched == [RequestedDeleteTodo(id="report")]
    assert [(e.outcome, e.confirmed) for e in h.audit.entries()] == [
        ("AgentAuthorizationError", msgspec.UNSET),
        ("completed", True),
    ]


async def test_an_approval_of_a_call_these_tools_did_not_stop_for_is_asked_again() -> None:
    # The run was stopped by another tool list (another process); nothing says what the person saw.
    h = harness(msgspec.structs.replace(INITIAL, selected="milk"))
    model = ScriptedModel([function_call("delete_selected_todo", {}, call_id="c1")], "asked")
    first = await Runner.run(_agent(h, model), "Delete the milk", run_config=_CONFIG)
    elsewhere = _agent(h, model)
    state = await RunState.from_json(elsewhere, first.to_state().to_json())
    state.approve(state.get_interruptions()[0])
    await Runner.run(elsewhere, state, run_config=_CONFIG)
    assert model.outputs[1] == [("c1", CONFIRM_TEXT)]
    assert h.recorder.dispatched == []


async def test_a_tool_in_a_namespace_is_approved_under_its_qualified_name() -> None:
    h = harness(msgspec.structs.replace(INITIAL, selected="milk"))
    model = ScriptedModel([function_call("delete_selected_todo", {}, call_id="c1", namespace="todo")], "deleted")
    tools = tool_namespace(name="todo", description="The todo list", tools=function_tools(h.runtime))
    agent = Agent(name="todos", model=model, tools=list(tools))
    first = await Runner.run(agent, "Delete the milk", run_config=_CONFIG)
    [pending] = first.interruptions
    assert pending.qualified_name == "todo.delete_selected_todo"
    state = first.to_state()
    state.approve(pending)
    second = await Runner.run(agent, state, run_config=_CONFIG)
    assert second.final_output == "deleted"
    [(_, text)] = model.outputs[1]
    assert text.startswith(DELETED_TEXT_PREFIX)
    assert h.recorder.dispatched == [RequestedDeleteTodo(id="milk")]
    assert [(e.outcome, e.confirmed) for e in h.audit.entries()] == [("completed", True)]


def test_a_capability_name_longer_than_the_openai_api_takes_is_a_contract_error() -> None:
    class Ping(msgspec.Struct, tag=True):
        pass

    def runtime(name: str) -> agentfx.AgentRuntime[None, None]:
        contract = agentfx.define(agentfx.expose(Ping, agentfx.variant(Ping, "Ping", name=name)))
        return agentfx.bind(contract, host=agentfx.Host(model=lambda: None, dispatch=lambda message: None))

    [tool] = function_tools(runtime("p" * 64))
    assert tool.name == "p" * 64
    # agentfx takes up to 128 characters; the API would refuse the request only once the model is called.
    with pytest.raises(agentfx.ContractError, match=r'capability "p{65}" has a name of 65 characters.*at most 64'):
        function_tools(runtime("p" * 65))


async def test_an_approval_of_a_call_with_blank_arguments_is_asked_again() -> None:
    # The SDK stops for a person without consulting the tool when it cannot read the
    # arguments as an object, so nothing says which Model the person was asked on.
    h = harness(msgspec.structs.replace(INITIAL, selected="milk"))
    model = ScriptedModel([function_call("delete_selected_todo", "", call_id="c1")], "asked")
    agent = _agent(h, model)
    first = await Runner.run(agent, "Delete the milk", run_config=_CONFIG)
    state = first.to_state()
    state.approve(first.interruptions[0])
    await Runner.run(agent, state, run_config=_CONFIG)
    assert model.outputs[1] == [("c1", CONFIRM_TEXT)]
    assert h.recorder.dispatched == []


# A capability that stops being available between turns. ---------------------------


class Bell(msgspec.Struct, frozen=True):
    armed: bool = True


class Rang(msgspec.Struct, frozen=True, tag=True):
    pass


BellAgent = agentfx.for_model(Bell)

BELL = BellAgent.define(
    BellAgent.expose(
        Rang, BellAgent.variant(Rang, "Ring the bell once", name="ring", available=lambda bell: bell.armed)
    )
)


@pytest.mark.parametrize("silenced_by", ["ring", "silence"])
async def test_a_tool_a_call_made_unavailable_is_hidden_at_the_next_turn_and_the_run_goes_on(silenced_by: str) -> None:
    # Ringing disarms the bell; so does "silence", a plain SDK tool of the application's
    # that agentfx never sees run. Either way the next turn must read the Model afresh:
    # a tool still offered there would be disabled at that turn's execution check, and
    # the SDK would end the run (ModelBehaviorError), whatever its tool_not_found_behavior.
    recorder: RecordingHost[Bell, Rang, None] = RecordingHost(Bell(), update=lambda bell, message: Bell(armed=False))
    runtime = agentfx.bind(BELL, host=recorder.host)

    async def silence(_ctx: ToolContext[Any], _arguments: str) -> str:
        recorder.set_model(Bell(armed=False))
        return "silenced"

    silencer = FunctionTool(
        name="silence",
        description="Silence the bell",
        params_json_schema={"type": "object", "properties": {}},
        on_invoke_tool=silence,
        strict_json_schema=False,
    )
    model = ScriptedModel(
        [function_call(silenced_by, {}, call_id="c1")],
        [function_call("ring", {}, call_id="c2")],  # the model calls what it was offered before
        "done",
    )
    agent = Agent(name="bell", model=model, tools=[*function_tools(runtime), silencer])
    result = await Runner.run(agent, "Ring", run_config=_CONFIG)
    assert result.final_output == "done"
    assert model.tools == [["ring", "silence"], ["silence"], ["silence"]]
    assert model.outputs[2] == [("c2", "Tool 'ring' not found.")]
    assert recorder.dispatched == ([Rang()] if silenced_by == "ring" else [])


# An approval and the snapshot the call is built from. ------------------------------


class Shelf(msgspec.Struct, frozen=True):
    selected: str = "milk"


class Removed(msgspec.Struct, frozen=True, tag=True):
    item: str


class Nothing(msgspec.Struct, frozen=True):
    pass


@dataclass
class Shop:
    """A runtime whose ``remove`` asks a person in an ``authorize`` that waits, and lets the Model change meanwhile."""

    recorder: RecordingHost[Shelf, Removed, None]
    audit: agentfx.AuditLog
    runtime: agentfx.AgentRuntime[Shelf, None]
    meanwhile: Shelf | None = None
    """The Model the application moves to while ``authorize`` is pending, if any."""


def shop() -> Shop:
    recorder: RecordingHost[Shelf, Removed, None] = RecordingHost(Shelf())
    holder: list[Shop] = []

    async def authorize(req: agentfx.AuthorizationRequest[None, Nothing, Shelf]) -> agentfx.Confirm:
        # The prompt names what this call would remove: the snapshot's selection.
        prompt = f'Remove "{req.model.selected}"?'
        await anyio.lowlevel.checkpoint()
        [state] = holder
        if state.meanwhile is not None:
            recorder.set_model(state.meanwhile)
        return agentfx.Confirm(prompt)

    ShopAgent = agentfx.for_model(Shelf)
    contract = ShopAgent.define(
        ShopAgent.expose(
            Removed,
            ShopAgent.variant(
                Removed,
                "Remove the selected item",
                name="remove",
                input=Nothing,
                authorize=authorize,
                to_message=lambda _, ctx: Removed(ctx.model.selected),
            ),
        )
    )
    audit = agentfx.audit_log()
    state = Shop(recorder, audit, agentfx.bind(contract, host=recorder.host, audit=audit))
    holder.append(state)
    return state


async def test_an_approval_never_confirms_a_call_built_from_a_model_that_came_back_meanwhile() -> None:
    # A, B, A: the person is asked on the milk's Model; the call is built from the
    # report's; while authorize is pending the Model returns to the milk's. The live
    # Model then matches what the person saw, but the call would remove the report.
    s = shop()
    model = ScriptedModel([function_call("remove", {}, call_id="c1")], "asked")
    agent = Agent(name="shop", model=model, tools=list[Tool](function_tools(s.runtime)))
    first = await Runner.run(agent, "Remove the milk", run_config=_CONFIG)
    s.recorder.set_model(Shelf("report"))
    s.meanwhile = Shelf("milk")
    state = first.to_state()
    state.approve(first.interruptions[0])
    await Runner.run(agent, state, run_config=_CONFIG)
    assert model.outputs[1] == [("c1", '"remove" needs a person to confirm: Remove "report"?')]
    assert s.recorder.dispatched == []
    assert [e.outcome for e in s.audit.entries()] == ["AgentAuthorizationError"]


async def test_an_approval_confirms_the_call_built_from_the_model_the_person_saw() -> None:
    # The call is built from the milk's Model, the one the person was asked on; the
    # Model moving on while authorize is pending does not retarget it (steps 3-9 read
    # one snapshot), so the "yes" covers exactly what is sent.
    s = shop()
    model = ScriptedModel([function_call("remove", {}, call_id="c1")], "removed")
    agent = Agent(name="shop", model=model, tools=list[Tool](function_tools(s.runtime)))
    first = await Runner.run(agent, "Remove the milk", run_config=_CONFIG)
    s.meanwhile = Shelf("report")
    state = first.to_state()
    state.approve(first.interruptions[0])
    second = await Runner.run(agent, state, run_config=_CONFIG)
    assert second.final_output == "removed"
    assert model.outputs[1] == [("c1", "Dispatched Removed")]
    assert s.recorder.dispatched == [Removed("milk")]
    assert [(e.outcome, e.confirmed) for e in s.audit.entries()] == [("dispatched", True)]


# "Always approve". -----------------------------------------------------------------


@pytest.mark.parametrize("namespace", [None, "todo"])
@pytest.mark.parametrize("always", [True, False], ids=["always", "once"])
async def test_an_always_approval_confirms_every_call_of_that_tool_for_the_rest_of_the_run(
    always: bool, namespace: str | None
) -> None:
    todos = (*INITIAL.todos, Todo("report", "Write the report"))
    h = harness(msgspec.structs.replace(INITIAL, todos=todos, selected="milk"))
    model = ScriptedModel(
        [function_call("delete_selected_todo", {}, call_id="c1", namespace=namespace)],
        [function_call("select_todo", {"id": "report"}, call_id="c2", namespace=namespace)],
        [function_call("delete_selected_todo", {}, call_id="c3", namespace=namespace)],
        "done",
        # The next run's.
        [function_call("select_todo", {"id": PINNED}, call_id="c4", namespace=namespace)],
        [function_call("delete_selected_todo", {}, call_id="c5", namespace=namespace)],
        "asked",
    )
    tools = function_tools(h.runtime)
    spaced = tools if namespace is None else tool_namespace(name=namespace, description="Todos", tools=tools)
    listed = list[Tool](spaced)
    agent = Agent(name="todos", model=model, tools=listed)
    first = await Runner.run(agent, "Delete both", run_config=_CONFIG)
    state = first.to_state()
    state.approve(first.interruptions[0], always_approve=always)
    second = await Runner.run(agent, state, run_config=_CONFIG)
    if not always:
        # A per-call approval covers its own call: the next one stops for a person.
        assert [item.call_id for item in second.interruptions] == ["c3"]
        assert h.recorder.dispatched == [RequestedDeleteTodo(id="milk"), SelectedTodo(id="report")]
        return
    # The SDK asks nobody about c3 (its tool is approved for the run), so a
    # confirmation it asked for could never be given: the person's "always" is it.
    assert second.final_output == "done" and second.interruptions == []
    assert model.outputs[3][0][1].startswith(DELETED_TEXT_PREFIX)
    assert h.recorder.dispatched == [
        RequestedDeleteTodo(id="milk"),
        SelectedTodo(id="report"),
        RequestedDeleteTodo(id="report"),
    ]
    assert [(e.outcome, e.confirmed) for e in h.audit.entries()] == [
        ("completed", True),
        ("dispatched", msgspec.UNSET),
        ("completed", True),
    ]
    # Only for that run: the same agent and tools in a new run stop for a person again.
    third = await Runner.run(agent, "Delete the pinned note", run_config=_CONFIG)
    assert [item.call_id for item in third.interruptions] == ["c5"]
    assert h.recorder.dispatched[3:] == [SelectedTodo(id=PINNED)]


async def test_two_runs_stopped_on_one_call_id_over_different_models_approve_neither_model() -> None:
    # One tool list kept on two agents; their models number calls alike ("call_0").
    todos = (*INITIAL.todos, Todo("report", "Write the report"))
    h = harness(msgspec.structs.replace(INITIAL, todos=todos, selected="milk"))
    tools = function_tools(h.runtime)
    first_model = ScriptedModel([function_call("delete_selected_todo", {}, call_id="call_0")], "done")
    second_model = ScriptedModel([function_call("delete_selected_todo", {}, call_id="call_0")], "done")
    first_agent = Agent(name="a", model=first_model, tools=list(tools))
    second_agent = Agent(name="b", model=second_model, tools=list(tools))
    first = await Runner.run(first_agent, "Delete the milk", run_config=_CONFIG)
    h.recorder.set_model(msgspec.structs.replace(h.recorder.model(), selected="report"))
    second = await Runner.run(second_agent, "Delete the report", run_config=_CONFIG)
    # The first person says yes to deleting the milk; the app shows the report still.
    state = first.to_state()
    state.approve(first.interruptions[0])
    await Runner.run(first_agent, state, run_config=_CONFIG)
    assert first_model.outputs[1] == [("call_0", f'"delete_selected_todo" needs a person to confirm: {REPORT_PROMPT}')]
    # And the second person's yes, on the Model the app still shows, is asked again too.
    state = second.to_state()
    state.approve(second.interruptions[0])
    await Runner.run(second_agent, state, run_config=_CONFIG)
    assert second_model.outputs[1] == [("call_0", f'"delete_selected_todo" needs a person to confirm: {REPORT_PROMPT}')]
    assert h.recorder.dispatched == []


@pytest.mark.parametrize("first_resumed", [False, True], ids=["the other run resumed", "a run on the same Model resumed"])
async def test_a_call_id_stays_ambiguous_while_any_run_stopped_on_it_is_still_to_be_resumed(first_resumed: bool) -> None:
    # Run A stops on call_0 over the milk. Another run stops on call_0 and is
    # resumed; then run D stops on call_0 over the report. A's "yes" (about the
    # milk) must not be checked against D's Model: resuming one run must not
    # make the table forget that A still waits.
    todos = (*INITIAL.todos, Todo("report", "Write the report"))
    h = harness(msgspec.structs.replace(INITIAL, todos=todos, selected="milk"))
    tools = function_tools(h.runtime)

    def run_on_call_0(name: str) -> tuple[ScriptedModel, Agent[Any]]:
        model = ScriptedModel([function_call("delete_selected_todo", {}, call_id="call_0")], "done")
        return model, Agent(name=name, model=model, tools=list(tools))

    model_a, agent_a = run_on_call_0("a")
    a = await Runner.run(agent_a, "Delete the milk", run_config=_CONFIG)
    if not first_resumed:
        h.recorder.set_model(msgspec.structs.replace(h.recorder.model(), selected="report"))
    _, agent_c = run_on_call_0("c")
    c = await Runner.run(agent_c, "Delete it", run_config=_CONFIG)
    state = c.to_state()
    state.approve(c.interruptions[0])
    await Runner.run(agent_c, state, run_config=_CONFIG)
    h.recorder.set_model(msgspec.structs.replace(h.recorder.model(), selected="report"))
    _, agent_d = run_on_call_0("d")
    await Runner.run(agent_d, "Delete the report", run_config=_CONFIG)
    state = a.to_state()
    state.approve(a.interruptions[0])
    await Runner.run(agent_a, state, run_config=_CONFIG)
    assert model_a.outputs[1] == [("call_0", f'"delete_selected_todo" needs a person to confirm: {REPORT_PROMPT}')]
    assert RequestedDeleteTodo(id="report") not in h.recorder.dispatched


async def test_a_run_stopped_again_on_its_call_id_over_the_same_model_is_still_approved() -> None:
    h = harness(msgspec.structs.replace(INITIAL, selected="milk"))
    tools = function_tools(h.runtime)
    models = [ScriptedModel([function_call("delete_selected_todo", {}, call_id="call_0")], "done") for _ in range(2)]
    agents = [Agent(name=f"a{i}", model=model, tools=list(tools)) for i, model in enumerate(models)]
    stopped = [await Runner.run(agent, "Delete the milk", run_config=_CONFIG) for agent in agents]
    state = stopped[0].to_state()
    state.approve(stopped[0].interruptions[0])
    done = await Runner.run(agents[0], state, run_config=_CONFIG)
    assert done.final_output == "done"
    assert h.recorder.dispatched == [RequestedDeleteTodo(id="milk")]
