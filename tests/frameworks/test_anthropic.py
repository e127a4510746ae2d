"""``agentfx.anthropic``: the contract through the real Anthropic client, with no LLM.

``httpx.MockTransport`` (from ``httpx2``, the HTTP package this SDK is built
on) plays the Messages API: each request it gets is
recorded (the tools sent and the tool results), and it answers with the next
scripted assistant message. Both loops are driven: a hand-written one sending
``tool_params`` per request and answering with ``run_tool_use``, and the SDK's
own ``client.beta.messages.tool_runner`` over ``beta_tools``.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Callable, Sequence
from typing import Any, cast

import anyio
import httpx2 as httpx  # the Anthropic SDK's own HTTP client package
import msgspec
import pytest
from anthropic import AsyncAnthropic
from anthropic.types import MessageParam, ToolResultBlockParam, ToolUseBlock, ToolUseBlockParam

import agentfx
from agentfx.anthropic import TRANSPORT, beta_tools, run_tool_use, tool_params
from agentfx.confirm import Confirmer
from examples.frameworks import anthropic_agent
from tests.frameworks.script import Turn, Turns
from tests.frameworks.app import (
    CONFIRM_PROMPT,
    CONFIRM_TEXT,
    CREATED_TEXT_PREFIX,
    EXAMPLE_TODOS,
    DELETED_TEXT_PREFIX,
    DEFECT_TEXT,
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
)

pytestmark = pytest.mark.anyio

ToolCall = tuple[str, object]  # (tool name, input)


class MessagesAPI:
    """A scripted ``POST /v1/messages``: records every request, answers each with the next turn."""

    def __init__(self, *turns: Turn[ToolCall], call_ids: Sequence[str] = ()) -> None:
        self.turns = Turns(turns)
        self._ids = list(call_ids)
        self.tools: list[list[str]] = []
        self.results: list[list[dict[str, Any]]] = []
        self._calls = 0

    def handle(self, request: httpx.Request) -> httpx.Response:
        assert request.url.path == "/v1/messages"
        body: dict[str, Any] = json.loads(request.content)
        self.tools.append([tool["name"] for tool in body.get("tools", [])])
        last: dict[str, Any] = body["messages"][-1]
        content = cast(list[dict[str, Any]], last["content"] if isinstance(last["content"], list) else [])
        self.results.append([block for block in content if block.get("type") == "tool_result"])
        turn = self.turns.next()
        # Encoded as the API does, with escapes: a lone surrogate in a scripted input
        # reaches the SDK as the "\ud800" a model may write, not as bytes UTF-8 forbids.
        encoded = json.dumps(self._message(turn)).encode()
        return httpx.Response(200, content=encoded, headers={"content-type": "application/json"})

    def _message(self, turn: Sequence[ToolCall] | str) -> dict[str, Any]:
        if isinstance(turn, str):
            content: list[dict[str, Any]] = [{"type": "text", "text": turn}]
        else:
            content = []
            for name, arguments in turn:
                self._calls += 1
                call_id = self._ids.pop(0) if self._ids else f"toolu_{self._calls}"
                content.append({"type": "tool_use", "id": call_id, "name": name, "input": arguments})
        return {
            "id": f"msg_{len(self.tools)}",
            "type": "message",
            "role": "assistant",
            "model": "claude-test",
            "content": content,
            "stop_reason": "end_turn" if isinstance(turn, str) else "tool_use",
            "stop_sequence": None,
            "usage": {"input_tokens": 1, "output_tokens": 1},
        }

    def returned(self, turn: int) -> list[tuple[str, bool]]:
        """``(text, is_error)`` of every tool result sent with request ``turn``."""
        return [(_text(block["content"]), bool(block.get("is_error", False))) for block in self.results[turn]]


def _text(content: object) -> str:
    if isinstance(content, str):
        return content
    blocks = cast(list[dict[str, Any]], content)
    return "".join(str(block["text"]) for block in blocks)


def _client(api: MessagesAPI) -> AsyncAnthropic:
    return AsyncAnthropic(
        api_key="test-key", http_client=httpx.AsyncClient(transport=httpx.MockTransport(api.handle)), max_retries=0
    )


async def _own_loop(h: Harness | KeywordHarness | HookHarness, api: MessagesAPI, confirm: Confirmer | None = None) -> str:
    """The loop an application writes: ``tool_params`` per request, ``run_tool_use`` per block."""
    messages: list[MessageParam] = [{"role": "user", "content": "Go"}]
    async with _client(api) as client:
        for _ in range(10):
            reply = await client.messages.create(
                model="claude-test", max_tokens=256, messages=messages, tools=tool_params(h.runtime)
            )
            uses = [block for block in reply.content if block.type == "tool_use"]
            if not uses:
                return "".join(block.text for block in reply.content if block.type == "text")
            messages.append({"role": "assistant", "content": reply.content})
            results: list[ToolResultBlockParam] = [
                await run_tool_use(h.runtime, block, confirm=confirm) for block in uses
            ]
            messages.append({"role": "user", "content": results})
    raise AssertionError("the loop did not end")


async def _tool_runner(h: Harness | KeywordHarness, api: MessagesAPI, confirm: Confirmer | None = None) -> str:
    async with _client(api) as client:
        runner = client.beta.messages.tool_runner(
            model="claude-test",
            max_tokens=256,
            messages=[{"role": "user", "content": "Go"}],
            tools=beta_tools(h.runtime, confirm=confirm),
            max_iterations=10,
        )
        final = await runner.until_done()
    return "".join(block.text for block in final.content if block.type == "text")


Loop = Callable[..., Any]


LOOPS = [pytest.param(_own_loop, id="own-loop"), pytest.param(_tool_runner, id="tool-runner")]


async def test_own_loop_lists_the_available_capabilities_per_request(anyio_backend: str) -> None:
    h = harness()
    api = MessagesAPI([("select_todo", {"id": "milk"})], "done")
    assert await _own_loop(h, api) == "done"
    assert api.tools == [TOOLS_WITHOUT_SELECTION, TOOLS_WITH_SELECTION]
    assert api.returned(1) == [("Dispatched SelectedTodo", False)]
    assert h.recorder.dispatched == [SelectedTodo(id="milk")]


async def test_the_tool_runner_is_given_every_capability(anyio_backend: str) -> None:
    h = harness()
    api = MessagesAPI([("select_todo", {"id": "milk"})], "done")
    assert await _tool_runner(h, api) == "done"
    # The runner sends its definitions once, for the whole thread: the runtime decides availability.
    assert api.tools[0] == TOOLS_WITH_SELECTION


def test_the_tool_definitions_carry_the_contract_schema_and_description() -> None:
    h = harness()
    [create, *_] = tool_params(h.runtime)
    assert create["name"] == "create_todo" and create.get("description") == "Create a new todo"
    schema: dict[str, Any] = dict(create["input_schema"])
    assert schema["required"] == ["title"] and schema["additionalProperties"] is False
    assert beta_tools(h.runtime)[0].to_dict() == {**create}


@pytest.mark.parametrize("loop", LOOPS)
async def test_a_completed_call_tells_the_model_the_new_todo(anyio_backend: str, loop: Loop) -> None:
    h = harness()
    api = MessagesAPI([("create_todo", {"title": "Buy bread"})], "done")
    assert await loop(h, api) == "done"
    [(text, is_error)] = api.returned(1)
    assert not is_error and text.startswith(CREATED_TEXT_PREFIX)
    [entry] = h.audit.entries()
    assert created_data(text)["completion"] == {
        "status": "completed",
        "message": {"type": "CreatedTodo", "id": "todo-3", "title": "Buy bread", "request_id": entry.invocation},
    }
    assert [type(m) for m in h.recorder.dispatched] == [RequestedCreateTodo]
    assert h.outcomes() == [("create_todo", "completed")]
    assert h.transports() == {TRANSPORT} == {"anthropic"}


async def test_own_loop_keeps_the_tool_use_id_in_the_invocation(anyio_backend: str) -> None:
    h = harness()
    api = MessagesAPI([("select_todo", {"id": "milk"})], [("select_todo", {"id": "milk"})], "done")
    await _own_loop(h, api)
    ids = [entry.invocation for entry in h.audit.entries()]
    assert [i.rpartition("/")[2] for i in ids] == ["toolu_1", "toolu_2"] and len(set(ids)) == 2


@pytest.mark.parametrize("loop", LOOPS)
async def test_an_unavailable_capability_is_an_error_result(anyio_backend: str, loop: Loop) -> None:
    h = harness()
    api = MessagesAPI([("delete_selected_todo", {})], "done")
    assert await loop(h, api) == "done"
    assert api.returned(1) == [(UNAVAILABLE_TEXT, True)]
    assert h.recorder.dispatched == []
    assert h.outcomes() == [("delete_selected_todo", "AgentCapabilityUnavailableError")]


async def test_an_unknown_tool_is_an_error_result(anyio_backend: str) -> None:
    h = harness()
    api = MessagesAPI([("drop_tables", {})], "done")
    assert await _own_loop(h, api) == "done"
    assert api.returned(1) == [("No such capability: drop_tables", True)]
    # The tool runner answers a name it was not given itself, and warns.
    api = MessagesAPI([("drop_tables", {})], "done")
    with pytest.warns(UserWarning, match="drop_tables"):
        assert await _tool_runner(h, api) == "done"
    assert api.returned(1) == [("Error: Tool 'drop_tables' not found", True)]
    assert h.recorder.dispatched == []
    assert h.outcomes() == [("drop_tables", "AgentUnknownCapabilityError")]


@pytest.mark.parametrize("loop", LOOPS)
@pytest.mark.parametrize(
    ("arguments", "text"),
    [
        ({}, INVALID_TEXT),
        ({"title": "Bread", "bogus": 1}, 'Invalid input for "create_todo": "bogus" is not a field of this input'),
    ],
)
async def test_invalid_input_is_an_error_result_saying_what_to_fix(
    anyio_backend: str, loop: Loop, arguments: object, text: str
) -> None:
    h = harness()
    api = MessagesAPI([("create_todo", arguments)], "done")
    assert await loop(h, api) == "done"
    assert api.returned(1) == [(text, True)]
    assert h.recorder.dispatched == []
    assert h.outcomes() == [("create_todo", "AgentInvalidInputError")]


async def test_a_lone_surrogate_is_invalid_input_and_changes_nothing(anyio_backend: str) -> None:
    # The SDK reads the model's "\ud800" escape with json.loads: a lone surrogate in a str.
    h = harness()
    api = MessagesAPI([("create_todo", json.loads(SURROGATE_ARGUMENTS))])
    async with _client(api) as client:
        reply = await client.messages.create(
            model="claude-test", max_tokens=256, messages=[{"role": "user", "content": "Go"}], tools=tool_params(h.runtime)
        )
    [block] = [block for block in reply.content if block.type == "tool_use"]
    assert block.input == {"title": "Buy \ud800 milk"}
    result = await run_tool_use(h.runtime, block)
    assert result == {"type": "tool_result", "tool_use_id": block.id, "content": NOT_UNICODE_TEXT, "is_error": True}
    assert h.recorder.dispatched == [] and h.recorder.model() == INITIAL
    assert h.outcomes() == [("create_todo", "AgentInvalidInputError")]
    # The loop ends here: the SDK cannot send that assistant turn back (its JSON
    # encoder refuses the surrogate), whatever the tool answered.


# The SDK warns when it sends back a tool_use input that is not an object; it sends it all the same.
@pytest.mark.filterwarnings("ignore:Pydantic serializer warnings")
@pytest.mark.parametrize("loop", LOOPS)
@pytest.mark.parametrize("arguments", NOT_AN_OBJECT_ARGUMENTS)
async def test_an_input_that_is_not_an_object_is_an_error_result(anyio_backend: str, loop: Loop, arguments: str) -> None:
    h = harness(audit=agentfx.audit_log(include_input=True))
    api = MessagesAPI([("create_todo", json.loads(arguments))], "done")
    assert await loop(h, api) == "done"
    assert api.returned(1) == [(NOT_AN_OBJECT_TEXT, True)]
    [entry] = h.audit.entries()
    assert (entry.outcome, entry.input) == ("AgentInvalidInputError", json.loads(arguments))


@pytest.mark.parametrize(("call_id", "kept"), CALL_IDS, ids=CALL_ID_NAMES)
async def test_any_tool_use_id_is_kept_bounded_and_encodable_and_the_call_completes(
    anyio_backend: str, call_id: str, kept: str
) -> None:
    h = harness()
    api = MessagesAPI([("create_todo", {"title": "Buy bread"})], call_ids=[call_id])
    async with _client(api) as client:
        reply = await client.messages.create(
            model="claude-test", max_tokens=256, messages=[{"role": "user", "content": "Go"}], tools=tool_params(h.runtime)
        )
    [block] = [block for block in reply.content if block.type == "tool_use"]
    assert block.id == call_id
    result = await run_tool_use(h.runtime, block)
    # The result answers the block's own id, so the API pairs them.
    assert result["tool_use_id"] == call_id and "is_error" not in result
    assert _text(result.get("content")).startswith(CREATED_TEXT_PREFIX)
    assert_call_id_kept(h, kept)


async def _stored_loop(h: Harness, api: MessagesAPI) -> str:
    """An application that keeps its transcript as plain params and answers the stored ``tool_use`` blocks."""
    messages: list[MessageParam] = [{"role": "user", "content": "Go"}]
    async with _client(api) as client:
        for _ in range(10):
            reply = await client.messages.create(
                model="claude-test", max_tokens=256, messages=messages, tools=tool_params(h.runtime)
            )
            stored: list[ToolUseBlockParam] = [
                cast(ToolUseBlockParam, block.model_dump(exclude_none=True))
                for block in reply.content
                if block.type == "tool_use"
            ]
            if not stored:
                return "".join(block.text for block in reply.content if block.type == "text")
            messages.append({"role": "assistant", "content": stored})
            messages.append({"role": "user", "content": [await run_tool_use(h.runtime, block) for block in stored]})
    raise AssertionError("the loop did not end")


async def test_a_stored_tool_use_block_is_answered_like_the_sdk_s_own(anyio_backend: str) -> None:
    h = harness()
    api = MessagesAPI([("create_todo", {"title": "Buy bread"})], [("create_todo", {})], "done")
    assert await _stored_loop(h, api) == "done"
    [(text, is_error)] = api.returned(1)
    assert not is_error and text.startswith(CREATED_TEXT_PREFIX)
    assert api.returned(2) == [(INVALID_TEXT, True)]
    assert [i.rpartition("/")[2] for i in (e.invocation for e in h.audit.entries())] == ["toolu_1", "toolu_2"]
    assert h.outcomes() == [("create_todo", "completed"), ("create_todo", "AgentInvalidInputError")]


async def test_a_stored_block_missing_its_name_or_input_is_answered_not_raised(anyio_backend: str) -> None:
    h = harness()
    for block in ({"id": "toolu_1"}, {"id": "toolu_1", "name": "create_todo"}):
        result = await run_tool_use(h.runtime, cast(ToolUseBlockParam, block))
        assert result.get("is_error") is True and result["tool_use_id"] == "toolu_1"
    assert h.recorder.dispatched == []


NO_ID = 'the tool_use block has no "id"'
_ABSENT = object()  # a stored block without the key at all


@pytest.mark.parametrize(
    ("call_id", "problem"),
    [
        pytest.param(_ABSENT, NO_ID, id="missing"),
        pytest.param(None, 'the tool_use block has None for its "id"', id="none"),
        pytest.param("", 'the tool_use block has an empty "id"', id="empty"),
        pytest.param(7, 'the tool_use block has an int for its "id"', id="not-text"),
    ],
)
async def test_a_block_without_an_id_to_answer_is_a_contract_error_and_nothing_is_dispatched(
    anyio_backend: str, call_id: object, problem: str
) -> None:
    # A real reply's block, kept by the application both ways and spoiled the same way.
    h = harness()
    api = MessagesAPI([("create_todo", {"title": "Buy bread"})])
    async with _client(api) as client:
        reply = await client.messages.create(
            model="claude-test", max_tokens=256, messages=[{"role": "user", "content": "Go"}], tools=tool_params(h.runtime)
        )
    [block] = [block for block in reply.content if block.type == "tool_use"]
    stored: dict[str, Any] = block.model_dump()
    if call_id is _ABSENT:
        del stored["id"]
    else:
        stored["id"] = call_id
    with pytest.raises(agentfx.ContractError, match=re.escape(f"run_tool_use(block): {problem}, so no tool_result")):
        await run_tool_use(h.runtime, cast(ToolUseBlockParam, stored))
    # The SDK's own block, unvalidated (one it lacks reads as None there).
    with pytest.raises(agentfx.ContractError, match="so no tool_result can answer it and nothing was dispatched"):
        await run_tool_use(h.runtime, ToolUseBlock.model_construct(**stored))
    # The call itself was sound: refused for its id alone, before the runtime saw it.
    assert h.recorder.dispatched == [] and h.recorder.model() == INITIAL
    assert h.audit.entries() == []


async def test_a_block_object_without_an_id_attribute_is_a_contract_error(anyio_backend: str) -> None:
    h = harness()

    class Kept:  # the application's own record of a call, which never kept the id
        name = "create_todo"
        input = {"title": "Buy bread"}

    with pytest.raises(agentfx.ContractError, match=re.escape(NO_ID)):
        await run_tool_use(h.runtime, cast(Any, Kept()))
    assert h.recorder.dispatched == [] and h.audit.entries() == []


def test_a_mistake_in_the_tools_arguments_is_a_contract_error_when_they_are_built() -> None:
    with pytest.raises(agentfx.ContractError, match=re.escape("tool_params(runtime) needs a bound agentfx.AgentRuntime")):
        tool_params(cast(Any, Contract))
    with pytest.raises(agentfx.ContractError, match=re.escape("beta_tools(runtime) needs a bound agentfx.AgentRuntime")):
        beta_tools(cast(Any, Contract))
    with pytest.raises(agentfx.ContractError, match=re.escape("beta_tools(confirm=True)")):
        beta_tools(harness().runtime, confirm=cast(Any, True))


async def test_a_mistake_in_run_tool_use_s_arguments_is_a_contract_error(anyio_backend: str) -> None:
    h = harness()
    block = ToolUseBlock(type="tool_use", id="toolu_1", name="select_todo", input={"id": "milk"})
    with pytest.raises(agentfx.ContractError, match=re.escape("agentfx.bind")):
        await run_tool_use(cast(Any, Contract), block)
    with pytest.raises(agentfx.ContractError, match=re.escape("confirm=True")):
        await run_tool_use(h.runtime, block, confirm=cast(Any, True))
    assert h.recorder.dispatched == [] and h.audit.entries() == []


async def test_the_tool_runner_answers_a_lone_surrogate_as_invalid_input(anyio_backend: str) -> None:
    h = harness()
    api = MessagesAPI([("create_todo", json.loads(SURROGATE_ARGUMENTS))], "done")
    assert await _tool_runner(h, api) == "done"
    assert api.returned(1) == [(NOT_UNICODE_TEXT, True)]
    assert h.recorder.dispatched == [] and h.recorder.model() == INITIAL
    assert h.outcomes() == [("create_todo", "AgentInvalidInputError")]


@pytest.mark.parametrize("loop", LOOPS)
async def test_the_input_reaches_the_runtime_whole_whatever_its_keys(anyio_backend: str, loop: Loop) -> None:
    h = keyword_harness()
    calls = KEYWORD_CALLS
    api = MessagesAPI(calls, "done")
    assert await loop(h, api) == "done"
    assert api.returned(1) == [("Dispatched ChangedSettings", False), *((text, True) for _, text in UNDECLARED_KEYWORDS)]
    assert h.sent == [KEYWORD_SETTINGS]


@pytest.mark.parametrize("loop", LOOPS)
async def test_a_declared_failure_message_is_an_error_result_with_its_reason(anyio_backend: str, loop: Loop) -> None:
    h = harness(msgspec.structs.replace(INITIAL, selected=PINNED))
    api = MessagesAPI([("delete_selected_todo", {})], "could not")
    assert await loop(h, api, Person(True)) == "could not"
    [(text, is_error)] = api.returned(1)
    assert is_error and text.startswith(FAILED_TEXT_PREFIX) and "Pinned todos cannot be deleted" in text
    assert h.recorder.dispatched == [RequestedDeleteTodo(id=PINNED)]
    assert h.outcomes() == [("delete_selected_todo", "failed")]


@pytest.mark.parametrize("loop", LOOPS)
async def test_a_defect_is_an_error_result_without_the_exception(
    anyio_backend: str, loop: Loop, caplog: pytest.LogCaptureFixture
) -> None:
    h = harness()
    api = MessagesAPI([("export_todos", {})], "done")
    with caplog.at_level(logging.ERROR, logger="agentfx.anthropic"):
        assert await loop(h, api) == "done"
    assert api.returned(1) == [(DEFECT_TEXT, True)]
    # Neither the exception's text nor its type (the runner's repr would show both).
    assert SECRET not in repr(api.results) and "RuntimeError" not in repr(api.results)
    assert SECRET in caplog.text
    assert h.outcomes() == [("export_todos", "AgentDefect")]


@pytest.mark.parametrize("loop", LOOPS)
async def test_a_confirmation_without_a_person_to_ask_sends_nothing(anyio_backend: str, loop: Loop) -> None:
    h = harness(msgspec.structs.replace(INITIAL, selected="milk"))
    api = MessagesAPI([("delete_selected_todo", {})], "asked")
    assert await loop(h, api) == "asked"
    assert api.returned(1) == [(CONFIRM_TEXT, True)]
    assert h.recorder.dispatched == []
    assert h.outcomes() == [("delete_selected_todo", "AgentConfirmationRequiredError")]


@pytest.mark.parametrize("loop", LOOPS)
async def test_a_person_who_confirms_lets_the_call_through(anyio_backend: str, loop: Loop) -> None:
    h = harness(msgspec.structs.replace(INITIAL, selected="milk"))
    person = Person(True)
    api = MessagesAPI([("delete_selected_todo", {})], "deleted")
    assert await loop(h, api, person) == "deleted"
    [asked] = person.asked
    assert (asked.capability, asked.prompt, asked.invocation.transport) == (
        "delete_selected_todo",
        CONFIRM_PROMPT,
        TRANSPORT,
    )
    [(text, is_error)] = api.returned(1)
    assert not is_error and text.startswith(DELETED_TEXT_PREFIX)
    assert h.recorder.dispatched == [RequestedDeleteTodo(id="milk")]
    [entry] = h.audit.entries()
    assert (entry.outcome, entry.confirmed) == ("completed", True)


@pytest.mark.parametrize("loop", LOOPS)
async def test_a_person_who_declines_stops_the_call(anyio_backend: str, loop: Loop) -> None:
    h = harness(msgspec.structs.replace(INITIAL, selected="milk"))
    api = MessagesAPI([("delete_selected_todo", {})], "kept")
    assert await loop(h, api, Person(False)) == "kept"
    assert api.returned(1) == [(f"Declined: {CONFIRM_PROMPT}", True)]
    assert h.recorder.dispatched == []
    assert h.outcomes() == [("delete_selected_todo", "AgentAuthorizationError")]


async def test_run_tool_use_never_raises_for_any_input(anyio_backend: str) -> None:
    h = harness()
    cases: list[tuple[str, object]] = [("create_todo", None), ("create_todo", [1]), ("x" * 300, {}), ("export_todos", {})]
    for name, arguments in cases:
        # Unvalidated, as a block read off a misbehaving wire would be.
        block = ToolUseBlock.model_construct(type="tool_use", id="toolu_x", name=name, input=arguments)
        result = await run_tool_use(h.runtime, block)
        assert result.get("is_error") is True and result["tool_use_id"] == "toolu_x"
    await anyio.lowlevel.checkpoint()


async def test_the_example_adds_a_todo_reads_its_id_and_deletes_it_once_confirmed(anyio_backend: str) -> None:
    api: MessagesAPI = MessagesAPI(
        [("create_todo", {"title": "Buy bread"})],
        # The reply text told the model the new todo's id.
        lambda: [("select_todo", {"id": new_todo_id(api.returned(-1)[0][0])})],
        [("delete_selected_todo", {})],
        "Added bread, then deleted it.",
    )
    person = Person(True)
    async with _client(api) as client:
        answer, titles = await anthropic_agent.run(client, "claude-test", "Add bread, then delete it", person)
    assert answer == "Added bread, then deleted it."
    assert [request.prompt for request in person.asked] == ['Delete the todo "Buy bread" (todo-3)?']
    assert titles == EXAMPLE_TODOS


async def test_a_raising_available_hides_its_tool_and_the_loop_goes_on(
    anyio_backend: str, caplog: pytest.LogCaptureFixture
) -> None:
    h = HookHarness(frozenset({"ping"}))
    api = MessagesAPI([("pong", {})], "done")
    with caplog.at_level(logging.ERROR, logger="agentfx.anthropic"):
        assert await _own_loop(h, api) == "done"
    # Only the capability whose hook raised is hidden; the others are offered and work.
    assert api.tools == [HOOK_TOOLS[1:], HOOK_TOOLS[1:]]
    assert api.returned(1) == [("Dispatched Pong", False)] and h.sent == [Pong()]
    assert SECRET not in repr(api.results)
    assert SECRET in caplog.text


async def test_a_model_that_cannot_be_read_offers_no_tool_and_the_loop_goes_on(
    anyio_backend: str, caplog: pytest.LogCaptureFixture
) -> None:
    h = HookHarness(model_broken=True)
    api = MessagesAPI("done")
    with caplog.at_level(logging.ERROR, logger="agentfx.anthropic"):
        assert await _own_loop(h, api) == "done"
    assert api.tools == [[]]
    assert SECRET in caplog.text and sum(h.asked.values()) == 0
