"""agentfx's framework adapters against each framework's own tool doing the same work by hand.

One tool call through the entry point each framework's run loop calls, for
the benchmark's ``create_todo`` (``available``, ``authorize``, one Message):

- **LangChain**: ``StructuredTool.ainvoke`` of a tool call, for
  :func:`agentfx.langchain.structured_tools`' tool and for a
  ``StructuredTool`` over a pydantic ``args_schema`` whose coroutine calls the
  two predicates and the host by hand;
- **Anthropic**: ``call(input)`` of :class:`agentfx.anthropic.AgentfxTool`,
  the tool runner's entry point, and of a ``beta_async_tool`` function;
- **OpenAI Agents**: ``on_invoke_tool(ctx, json)`` of
  :func:`agentfx.openai_agents.function_tools`' tool and of a
  ``function_tool`` function (both parse the model's JSON; the native one
  validates it with pydantic);
- **pydantic-ai**: the toolset's argument validator, then ``call_tool``, as
  pydantic-ai's tool manager runs them, for
  :class:`agentfx.pydantic_ai.AgentfxToolset` and for a ``FunctionToolset``.

Each agentfx adapter does what the hand-written tool does, plus what agentfx
adds on every path: the strict closed decode, the invocation, the reply
through :mod:`agentfx.tools`. Informational rows: no target.

This module deliberately knows nothing of models or run loops: it calls the
tools the way a loop does, once per call, with no LLM.
"""

from __future__ import annotations

import json
from typing import Any, cast

from agents import FunctionTool, function_tool
from agents.tool_context import ToolContext
from anthropic.lib.tools import ToolError, beta_async_tool
from langchain_core.tools import StructuredTool, ToolException
from pydantic_ai import RunContext
from pydantic_ai.models.test import TestModel
from pydantic_ai.toolsets import FunctionToolset
from pydantic_ai.usage import RunUsage

import agentfx
from agentfx.anthropic import beta_tools
from agentfx.langchain import structured_tools
from agentfx.openai_agents import function_tools
from agentfx.pydantic_ai import AgentfxToolset

from .app import CONTRACT, KeepNothingHost, Model, User, by_hand
from .harness import AsyncOp, Config, Row, compare_async, row
from .peers import PydanticCreateTodo

__all__ = ["framework_adapters"]

_ARGUMENTS: dict[str, Any] = {"title": "Buy milk", "priority": 2}
_DONE = "Dispatched CreateTodo"


def _by_hand(host: KeepNothingHost, title: str, priority: int) -> str:
    """The tool body every hand-written contender shares: the same predicates, the same host."""
    refused = by_hand(host, title, priority)
    if refused is not None:
        raise ToolException(refused)
    return _DONE


def _langchain(host: KeepNothingHost, runtime: agentfx.AgentRuntime[Any, Any]) -> dict[str, AsyncOp]:
    async def create_todo(title: str, priority: int = 0) -> str:
        return _by_hand(host, title, priority)

    native = StructuredTool.from_function(
        coroutine=create_todo,
        name="create_todo",
        description="Create a todo",
        args_schema=PydanticCreateTodo,
        handle_tool_error=True,
    )
    [ours] = structured_tools(runtime)
    call = {"type": "tool_call", "id": "call_1", "name": "create_todo", "args": _ARGUMENTS}
    return {"langchain: native": lambda: native.ainvoke(call), "langchain: agentfx": lambda: ours.ainvoke(call)}


def _anthropic(host: KeepNothingHost, runtime: agentfx.AgentRuntime[Any, Any]) -> dict[str, AsyncOp]:
    @beta_async_tool(name="create_todo")
    async def native(title: str, priority: int = 0) -> str:
        """Create a todo"""
        try:
            return _by_hand(host, title, priority)
        except ToolException as refused:
            raise ToolError(str(refused)) from None

    [ours] = beta_tools(runtime)
    return {"anthropic: native": lambda: native.call(_ARGUMENTS), "anthropic: agentfx": lambda: ours.call(_ARGUMENTS)}


def _openai(host: KeepNothingHost, runtime: agentfx.AgentRuntime[Any, Any]) -> dict[str, AsyncOp]:
    @function_tool(name_override="create_todo", failure_error_function=None)
    async def native(title: str, priority: int = 0) -> str:
        """Create a todo"""
        return _by_hand(host, title, priority)

    [ours] = function_tools(runtime)
    arguments = json.dumps(_ARGUMENTS)

    def invoke(tool: FunctionTool) -> AsyncOp:
        def one() -> Any:
            ctx = ToolContext(context=None, tool_name="create_todo", tool_call_id="call_1", tool_arguments=arguments)
            return tool.on_invoke_tool(ctx, arguments)

        return one

    return {"openai-agents: native": invoke(native), "openai-agents: agentfx": invoke(ours)}


async def _pydantic_ai(host: KeepNothingHost, runtime: agentfx.AgentRuntime[Any, Any]) -> dict[str, AsyncOp]:
    async def create_todo(title: str, priority: int = 0) -> str:
        """Create a todo"""
        return _by_hand(host, title, priority)

    ctx = RunContext[None](deps=None, model=TestModel(), usage=RunUsage(), tool_name="create_todo", tool_call_id="c1")
    native_set = FunctionToolset[None]([create_todo])
    ours_set = AgentfxToolset(runtime)
    native_tool = (await native_set.get_tools(ctx))["create_todo"]
    ours_tool = (await ours_set.get_tools(ctx))["create_todo"]

    async def native() -> Any:
        arguments = native_tool.args_validator.validate_python(_ARGUMENTS)
        return await native_set.call_tool("create_todo", arguments, ctx, native_tool)

    async def ours() -> Any:
        arguments = ours_tool.args_validator.validate_python(_ARGUMENTS)
        return await ours_set.call_tool("create_todo", arguments, ctx, ours_tool)

    return {"pydantic-ai: native": native, "pydantic-ai: agentfx": ours}


def _answered(outcome: object) -> bool:
    # Each framework says "done" its own way; every one of them carries the text.
    first: object = cast("tuple[object, ...]", outcome)[0] if isinstance(outcome, tuple) else outcome
    for field in ("return_value", "content"):
        if hasattr(first, field):
            first = cast(object, getattr(first, field))
            break
    return first == _DONE


async def framework_adapters(config: Config) -> list[Row]:
    """One tool call per framework, agentfx's adapter as a multiple of the framework's own tool."""
    host = KeepNothingHost(Model(), User("u1"))
    runtime = agentfx.bind(CONTRACT, host=host.host)
    ops = {
        **_langchain(host, runtime),
        **_anthropic(host, runtime),
        **_openai(host, runtime),
        **await _pydantic_ai(host, runtime),
    }
    # Every contender must do the real work: one Message sent, the success answered.
    for name, op in ops.items():
        before = host.sent
        outcome = await op()
        if host.sent != before + 1 or not _answered(outcome):
            raise AssertionError(f"{name} did not dispatch: {outcome!r}")
    series = await compare_async(ops, calls=config.mcp_calls * 10, rounds=config.rounds)
    rows: list[Row] = []
    for framework in ("langchain", "anthropic", "openai-agents", "pydantic-ai"):
        native = f"{framework}: native"
        rows.append(
            row(
                "framework adapters",
                f"{framework}: agentfx's tool",
                f"{framework}: the framework's own tool, same work by hand",
                series[f"{framework}: agentfx"],
                series[native],
            )
        )
    return rows
