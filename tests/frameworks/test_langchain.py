"""``agentfx.langchain``: the contract through a LangChain tool-calling loop, with a fake chat model.

``GenericFakeChatModel`` answers with scripted ``AIMessage``s carrying tool
calls; the subclass here also records the tools each turn bound (converted
as a provider would send them) and the tool messages it was given. The loop
is the one LangChain documents for tool calling: bind the tools, invoke the
model, answer each tool call with ``await tool.ainvoke(tool_call)``.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterator, Sequence
from typing import Any, cast

import msgspec
import pytest
from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models import LanguageModelInput
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolCall, ToolMessage
from langchain_core.outputs import ChatResult
from langchain_core.runnables import Runnable
from langchain_core.tools import BaseTool
from langchain_core.utils.function_calling import convert_to_openai_tool
from pydantic import Field

import agentfx
from agentfx.confirm import Confirmer
from agentfx.langchain import TRANSPORT, structured_tools
from examples.frameworks import langchain_agent
from tests.frameworks.app import (
    CONFIRM_PROMPT,
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
    NOT_AN_OBJECT_ARGUMENTS,
    NOT_AN_OBJECT_TEXT,
    NOT_UNICODE_TEXT,
    PINNED,
    SURROGATE_ARGUMENTS,
    UNDECLARED_KEYWORDS,
    SECRET,
    TITLED_METADATA,
    TOOLS_WITH_SELECTION,
    TOOLS_WITHOUT_SELECTION,
    UNAVAILABLE_TEXT,
    Contract,
    HOOK_TOOLS,
    Harness,
    HookHarness,
    KeywordHarness,
    Person,
    Pong,
    RequestedCreateTodo,
    RequestedDeleteTodo,
    SelectedTodo,
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
    # A chat model's ainvoke runs its synchronous _generate in asyncio's default executor.
    return "asyncio"


class ScriptedChatModel(GenericFakeChatModel):
    """The fake chat model, recording the tools bound at each turn and the tool messages it read."""

    tools: list[list[dict[str, Any]]] = Field(default_factory=list[list[dict[str, Any]]])
    received: list[list[ToolMessage]] = Field(default_factory=list[list[ToolMessage]])

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> Runnable[LanguageModelInput, AIMessage]:
        self.tools.append([convert_to_openai_tool(tool) for tool in tools])
        return self

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        turn: list[ToolMessage] = []
        for message in reversed(messages):
            if not isinstance(message, ToolMessage):
                break
            turn.insert(0, message)
        self.received.append(turn)
        return super()._generate(messages, stop, run_manager, **kwargs)

    def names(self, turn: int) -> list[str]:
        return [tool["function"]["name"] for tool in self.tools[turn]]

    def returned(self, turn: int) -> list[tuple[str, str]]:
        return [(str(message.content), message.status) for message in self.received[turn]]


Turn = Sequence[tuple[str, dict[str, Any]]] | str


def _script(*turns: Turn) -> Iterator[AIMessage | str]:
    calls = 0
    for turn in turns:
        if isinstance(turn, str):
            yield AIMessage(content=turn)
            continue
        tool_calls: list[ToolCall] = []
        for name, args in turn:
            calls += 1
            tool_calls.append(ToolCall(name=name, args=args, id=f"call_{calls}", type="tool_call"))
        yield AIMessage(content="", tool_calls=tool_calls)


async def _loop(
    h: Harness | KeywordHarness | HookHarness,
    model: ScriptedChatModel,
    *,
    confirm: Confirmer | None = None,
    between: Callable[[], None] | None = None,
) -> tuple[str, list[ToolMessage]]:
    """LangChain's tool-calling loop, rebuilding the tools every turn as the adapter documents."""
    messages: list[BaseMessage] = [HumanMessage("Go")]
    answers: list[ToolMessage] = []
    for _ in range(10):
        tools: list[BaseTool] = list(structured_tools(h.runtime, confirm=confirm))
        ai = await model.bind_tools(tools).ainvoke(messages)
        assert isinstance(ai, AIMessage)
        messages.append(ai)
        if not ai.tool_calls:
            return str(ai.content), answers
        if between is not None:
            between()
        by_name = {tool.name: tool for tool in tools}
        for call in ai.tool_calls:
            answer = await by_name[call["name"]].ainvoke(call)
            assert isinstance(answer, ToolMessage)
            answers.append(answer)
            messages.append(answer)
    raise AssertionError("the loop did not end")


async def test_each_turn_binds_the_available_capabilities() -> None:
    h = harness()
    model = ScriptedChatModel(messages=_script([("select_todo", {"id": "milk"})], "done"))
    assert (await _loop(h, model))[0] == "done"
    assert [model.names(0), model.names(1)] == [TOOLS_WITHOUT_SELECTION, TOOLS_WITH_SELECTION]
    assert model.returned(1) == [("Dispatched SelectedTodo", "success")]
    assert h.recorder.dispatched == [SelectedTodo(id="milk")]


def test_the_provider_gets_the_contract_schema_verbatim() -> None:
    h = harness()
    create = next(tool for tool in structured_tools(h.runtime) if tool.name == "create_todo")
    [view] = [t for t in h.runtime.messages.list() if t.name == "create_todo"]
    function = convert_to_openai_tool(create)["function"]
    assert function["description"] == "Create a new todo"
    assert function["parameters"]["properties"] == view.input_schema["properties"]
    assert function["parameters"]["required"] == ["title"]
    assert create.handle_tool_error is True and create.metadata is not None
    assert create.metadata["output_schema"] == view.output_schema


async def test_a_completed_call_tells_the_model_the_new_todo_and_the_app_its_data() -> None:
    h = harness()
    model = ScriptedChatModel(messages=_script([("create_todo", {"title": "Buy bread"})], "done"))
    _, [answer] = await _loop(h, model)
    [(text, status)] = model.returned(1)
    assert status == "success" and text.startswith(CREATED_TEXT_PREFIX)
    data = created_data(text)
    [entry] = h.audit.entries()
    assert data["completion"] == {
        "status": "completed",
        "message": {"type": "CreatedTodo", "id": "todo-3", "title": "Buy bread", "request_id": entry.invocation},
    }
    # The data rides along as the artifact, which no model is sent.
    assert answer.artifact == data and answer.tool_call_id == "call_1"
    assert [type(m) for m in h.recorder.dispatched] == [RequestedCreateTodo]
    assert h.outcomes() == [("create_todo", "completed")]
    assert h.transports() == {TRANSPORT} == {"langchain"}


async def test_a_tool_kept_from_an_earlier_turn_is_refused_as_unavailable() -> None:
    h = harness(msgspec.structs.replace(INITIAL, selected="milk"))
    model = ScriptedChatModel(messages=_script([("delete_selected_todo", {})], "done"))
    # The Model changes after the tools were built and before the call runs.
    assert (await _loop(h, model, between=lambda: h.recorder.set_model(INITIAL)))[0] == "done"
    assert model.returned(1) == [(UNAVAILABLE_TEXT, "error")]
    assert h.recorder.dispatched == []
    assert h.outcomes() == [("delete_selected_todo", "AgentCapabilityUnavailableError")]


@pytest.mark.parametrize(
    ("args", "text"),
    [
        ({}, INVALID_TEXT),
        ({"title": ["Bread"]}, 'Invalid input for "create_todo": "title" must be a string'),
    ],
)
async def test_invalid_input_is_an_error_message_saying_what_to_fix(args: dict[str, Any], text: str) -> None:
    h = harness()
    model = ScriptedChatModel(messages=_script([("create_todo", args)], "done"))
    assert (await _loop(h, model))[0] == "done"
    assert model.returned(1) == [(text, "error")]
    assert h.recorder.dispatched == []
    assert h.outcomes() == [("create_todo", "AgentInvalidInputError")]


async def test_the_args_reach_the_runtime_whole_whatever_their_keys() -> None:
    # LangChain's own _arun takes ``config`` and ``run_manager`` as keywords and
    # would fail on ``self``: none of them may be taken from the model's arguments.
    h = keyword_harness()
    calls = KEYWORD_CALLS
    model = ScriptedChatModel(messages=_script(calls, "done"))
    assert (await _loop(h, model))[0] == "done"
    assert model.returned(1) == [
        ("Dispatched ChangedSettings", "success"),
        *((text, "error") for _, text in UNDECLARED_KEYWORDS),
    ]
    assert h.sent == [KEYWORD_SETTINGS]
    assert h.outcomes() == [("change_settings", "dispatched")] + [("rename", "AgentInvalidInputError")] * 4
    assert [entry.input for entry in h.audit.entries()] == [args for _, args in calls]


async def test_a_string_input_is_refused_not_raised() -> None:
    h = harness()
    create = next(tool for tool in structured_tools(h.runtime) if tool.name == "create_todo")
    call = ToolCall(name="create_todo", args={}, id="call_1", type="tool_call")
    assert await create.ainvoke("Buy milk") == 'Invalid input for "create_todo": the input must be an object'
    assert (await create.ainvoke(call)).status == "error"
    assert h.recorder.dispatched == []


@pytest.mark.parametrize("arguments", NOT_AN_OBJECT_ARGUMENTS)
async def test_an_input_that_is_not_an_object_is_refused_not_raised(arguments: str) -> None:
    # A tool call's args are always an object (LangChain's parser reads ``null`` as ``{}``
    # and AIMessage refuses anything else); a tool invoked with a bare input may get any.
    h = harness(audit=agentfx.audit_log(include_input=True))
    create = next(tool for tool in structured_tools(h.runtime) if tool.name == "create_todo")
    assert await create.ainvoke(json.loads(arguments)) == NOT_AN_OBJECT_TEXT
    [entry] = h.audit.entries()
    assert (entry.outcome, entry.input) == ("AgentInvalidInputError", json.loads(arguments))


async def test_the_invocation_id_keeps_the_tool_call_id_visible_and_is_fresh_per_call() -> None:
    h = harness()
    same = [_call("select_todo", {"id": "milk"}, "call_same")]
    model = ScriptedChatModel(messages=iter([AIMessage(content="", tool_calls=same)] * 2 + [AIMessage(content="done")]))
    assert (await _loop(h, model))[0] == "done"
    ids = [entry.invocation for entry in h.audit.entries()]
    assert len(ids) == 2 and len(set(ids)) == 2 and all(i.endswith("/call_same") for i in ids)
    # A tool invoked with bare arguments has no call id to keep.
    select = next(tool for tool in structured_tools(h.runtime) if tool.name == "select_todo")
    await select.ainvoke({"id": "milk"})
    assert "/" not in h.audit.entries()[-1].invocation


@pytest.mark.parametrize(("call_id", "kept"), CALL_IDS, ids=CALL_ID_NAMES)
async def test_any_call_id_is_kept_bounded_and_encodable_and_the_call_completes(call_id: str, kept: str) -> None:
    h = harness()
    create = AIMessage(content="", tool_calls=[_call("create_todo", {"title": "Buy bread"}, call_id)])
    model = ScriptedChatModel(messages=iter([create, AIMessage(content="done")]))
    _, [answer] = await _loop(h, model)
    assert answer.tool_call_id == call_id and answer.status == "success"
    assert str(answer.content).startswith(CREATED_TEXT_PREFIX)
    assert_call_id_kept(h, kept)


def test_a_mistake_in_the_tools_arguments_is_a_contract_error_when_they_are_built() -> None:
    with pytest.raises(agentfx.ContractError, match=r"agentfx\.bind"):
        structured_tools(cast(Any, Contract))
    with pytest.raises(agentfx.ContractError, match=r"confirm=True"):
        structured_tools(harness().runtime, confirm=cast(Any, True))


async def test_a_lone_surrogate_is_invalid_input_and_changes_nothing() -> None:
    # What a chat model's json.loads makes of a model's "\ud800" escape.
    h = harness()
    model = ScriptedChatModel(messages=_script([("create_todo", json.loads(SURROGATE_ARGUMENTS))], "done"))
    assert (await _loop(h, model))[0] == "done"
    assert model.returned(1) == [(NOT_UNICODE_TEXT, "error")]
    assert h.recorder.dispatched == [] and h.recorder.model() == INITIAL
    assert h.outcomes() == [("create_todo", "AgentInvalidInputError")]


async def test_a_defect_is_an_error_message_without_the_exception(caplog: pytest.LogCaptureFixture) -> None:
    h = harness()
    model = ScriptedChatModel(messages=_script([("export_todos", {})], "done"))
    with caplog.at_level(logging.ERROR, logger="agentfx.langchain"):
        assert (await _loop(h, model))[0] == "done"
    assert model.returned(1) == [(DEFECT_TEXT, "error")]
    assert SECRET not in repr(model.received)
    assert SECRET in caplog.text
    assert h.outcomes() == [("export_todos", "AgentDefect")]


async def test_a_confirmation_without_a_person_to_ask_sends_nothing() -> None:
    h = harness(msgspec.structs.replace(INITIAL, selected="milk"))
    model = ScriptedChatModel(messages=_script([("delete_selected_todo", {})], "asked"))
    assert (await _loop(h, model))[0] == "asked"
    assert model.returned(1) == [(CONFIRM_TEXT, "error")]
    assert h.recorder.dispatched == []
    assert h.outcomes() == [("delete_selected_todo", "AgentConfirmationRequiredError")]


async def test_a_person_who_confirms_lets_the_call_through_and_one_who_declines_stops_it() -> None:
    h = harness(msgspec.structs.replace(INITIAL, selected="milk"))
    person = Person(True)
    model = ScriptedChatModel(messages=_script([("delete_selected_todo", {})], "deleted"))
    assert (await _loop(h, model, confirm=person))[0] == "deleted"
    assert [(r.capability, r.prompt) for r in person.asked] == [("delete_selected_todo", CONFIRM_PROMPT)]
    [(text, status)] = model.returned(1)
    assert status == "success" and text.startswith(DELETED_TEXT_PREFIX)
    assert h.recorder.dispatched == [RequestedDeleteTodo(id="milk")]
    [entry] = h.audit.entries()
    assert (entry.outcome, entry.confirmed) == ("completed", True)

    h = harness(msgspec.structs.replace(INITIAL, selected="milk"))
    model = ScriptedChatModel(messages=_script([("delete_selected_todo", {})], "kept"))
    assert (await _loop(h, model, confirm=Person(False)))[0] == "kept"
    assert model.returned(1) == [(f"Declined: {CONFIRM_PROMPT}", "error")]
    assert h.recorder.dispatched == []


async def test_a_declared_failure_message_is_an_error_message_with_its_reason() -> None:
    h = harness(msgspec.structs.replace(INITIAL, selected=PINNED))
    model = ScriptedChatModel(messages=_script([("delete_selected_todo", {})], "could not"))
    assert (await _loop(h, model, confirm=Person(True)))[0] == "could not"
    [(text, status)] = model.returned(1)
    assert status == "error" and text.startswith(FAILED_TEXT_PREFIX) and "Pinned todos cannot be deleted" in text
    assert h.recorder.dispatched == [RequestedDeleteTodo(id=PINNED)]
    assert h.outcomes() == [("delete_selected_todo", "failed")]


async def test_the_example_adds_a_todo_reads_its_id_and_deletes_it_once_confirmed() -> None:
    def script() -> Iterator[AIMessage | str]:
        # Runs lazily, one message per model call: each turn can read the last answers.
        yield AIMessage(content="", tool_calls=[_call("create_todo", {"title": "Buy bread"}, "c1")])
        # The reply text told the model the new todo's id.
        todo_id = new_todo_id(model.returned(-1)[0][0])
        yield AIMessage(content="", tool_calls=[_call("select_todo", {"id": todo_id}, "c2")])
        yield AIMessage(content="", tool_calls=[_call("delete_selected_todo", {}, "c3")])
        yield AIMessage(content="Added bread, then deleted it.")

    model = ScriptedChatModel(messages=script())
    person = Person(True)
    answer, titles = await langchain_agent.run(model, "Add bread, then delete it", person)
    assert answer == "Added bread, then deleted it."
    assert [request.prompt for request in person.asked] == ['Delete the todo "Buy bread" (todo-3)?']
    assert titles == EXAMPLE_TODOS


def _call(name: str, args: dict[str, Any], call_id: str) -> ToolCall:
    return ToolCall(name=name, args=args, id=call_id, type="tool_call")


def test_a_title_and_hints_ride_along_as_tool_metadata() -> None:
    [ping] = structured_tools(titled_runtime())
    assert ping.metadata is not None
    assert {key: ping.metadata[key] for key in ("title", "hints")} == TITLED_METADATA


async def test_a_raising_available_hides_its_tool_and_the_loop_goes_on(caplog: pytest.LogCaptureFixture) -> None:
    h = HookHarness(frozenset({"ping"}))
    model = ScriptedChatModel(messages=_script([("pong", {})], "done"))
    with caplog.at_level(logging.ERROR, logger="agentfx.langchain"):
        assert (await _loop(h, model))[0] == "done"
    # Only the capability whose hook raised is hidden; the others are offered and work.
    assert [model.names(0), model.names(1)] == [HOOK_TOOLS[1:], HOOK_TOOLS[1:]]
    assert model.returned(1) == [("Dispatched Pong", "success")] and h.sent == [Pong()]
    assert SECRET not in repr(model.received)
    assert SECRET in caplog.text


async def test_a_model_that_cannot_be_read_offers_no_tool_and_the_loop_goes_on(caplog: pytest.LogCaptureFixture) -> None:
    h = HookHarness(model_broken=True)
    model = ScriptedChatModel(messages=_script("done"))
    with caplog.at_level(logging.ERROR, logger="agentfx.langchain"):
        assert (await _loop(h, model))[0] == "done"
    assert model.names(0) == []
    assert SECRET in caplog.text and sum(h.asked.values()) == 0


@pytest.mark.parametrize(
    "arguments",
    [
        {"type": "tool_call", "title": "Buy milk"},
        {"type": "tool_call", "id": "call_9", "args": {"title": "Buy milk"}},
        {"type": "tool_call", "id": 9, "name": "create_todo", "args": {"title": "Buy milk"}},
        {"type": "tool_call", "id": "call_9", "name": "create_todo", "args": [{"title": "Buy milk"}]},
    ],
    ids=["no-id", "no-name", "id-not-a-string", "args-not-an-object"],
)
async def test_bare_arguments_shaped_almost_like_a_tool_call_reach_the_runtime_whole(arguments: dict[str, Any]) -> None:
    # LangChain reads any dict whose "type" is "tool_call" as a ToolCall; one that is not
    # (no "id", a number for it, no "name", no object for "args") is the bare input it is:
    # refused as a whole, answered as bare input is (the text, no ToolMessage), nothing raised.
    h = harness(audit=agentfx.audit_log(include_input=True))
    create = next(tool for tool in structured_tools(h.runtime) if tool.name == "create_todo")
    answer = await create.ainvoke(arguments)
    assert answer == 'Invalid input for "create_todo": "type" is not a field of this input'
    [entry] = h.audit.entries()
    assert (entry.outcome, entry.input) == ("AgentInvalidInputError", arguments)
    assert "/" not in entry.invocation
    assert h.recorder.dispatched == []


async def test_a_well_formed_tool_call_is_still_read_as_one() -> None:
    h = harness()
    create = next(tool for tool in structured_tools(h.runtime) if tool.name == "create_todo")
    call = {"type": "tool_call", "id": "call_9", "name": "create_todo", "args": {"title": "Buy milk"}}
    answer = await create.ainvoke(call)
    assert isinstance(answer, ToolMessage) and answer.tool_call_id == "call_9" and answer.status == "success"
    assert [type(m) for m in h.recorder.dispatched] == [RequestedCreateTodo]
    assert h.audit.entries()[-1].invocation.endswith("/call_9")


def test_a_synchronous_call_is_refused_by_langchain_whatever_the_input() -> None:
    h = harness()
    create = next(tool for tool in structured_tools(h.runtime) if tool.name == "create_todo")
    for arguments in ({"title": "Buy milk"}, {"type": "tool_call", "title": "Buy milk"}):
        with pytest.raises(NotImplementedError, match="does not support sync invocation"):
            create.invoke(arguments)
    assert h.recorder.dispatched == [] and h.audit.entries() == []
