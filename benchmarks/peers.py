"""agentfx against its peers on the same work: MCP servers, and pydantic validation.

MCP: the same tool (``create_todo``, the same input fields) served three ways,
each called through its own in-process ``mcp.Client``:

- agentfx's adapter (``agentfx.mcp.server(runtime)``): availability,
  authorization, a strict closed decode, an invocation with an abort signal,
  structured content;
- the SDK's high-level ``MCPServer``: pydantic validation of the arguments
  from the tool's signature, then a tool body calling the same two predicates
  and the same host by hand (the baseline);
- the SDK's low-level ``Server`` with a hand-written handler that validates
  nothing, for the cost of the SDK's own request handling.

The ``MCPServer`` tool is ``async``: a sync tool would run on a worker thread,
work agentfx's path does not do. agentfx declares an output schema for every
tool and returns structured content, which the in-process client validates
with ``jsonschema`` on every result; so the target compares against an
``MCPServer`` tool that declares the same output schema and returns the same
structured content. The same tool without an output schema (no client-side
validation) is timed too, for information.

Validation: ``InputCodec.decode`` (agentfx's strict decode of a capability's
input) against pydantic's ``TypeAdapter.validate_python`` over a model declared
``strict`` with ``extra="forbid"``, the same checks.
"""

from __future__ import annotations

from typing import Any

import mcp
import mcp_types
import msgspec
import pydantic
from mcp.server.lowlevel.server import Server
from mcp.server.mcpserver import MCPServer

import agentfx
import agentfx.mcp
from agentfx.schema import InputCodec

from .app import CONTRACT, CreateTodo, Dispatched, KeepNothingHost, Model, User, by_hand, dispatched
from .harness import AsyncOp, Config, Row, SyncOp, compare_async, compare_sync, row

__all__ = ["MCP_TARGET", "mcp_servers", "validation"]

MCP_TARGET = 1.0
"""agentfx's MCP path may cost at most this multiple of ``MCPServer``'s."""

_ARGUMENTS: dict[str, Any] = {"title": "Buy milk", "priority": 2}
_MCPSERVER = "MCPServer tool (pydantic arguments, output schema)"
_UNSTRUCTURED = "MCPServer tool, no output schema"


def _create(host: KeepNothingHost, title: str, priority: int) -> None:
    """What each ``MCPServer`` tool does: the predicates and the host call agentfx's capability makes."""
    refused = by_hand(host, title, priority)
    if refused is not None:
        raise ValueError(refused)


def _mcpserver(host: KeepNothingHost) -> MCPServer[Any]:
    server: MCPServer[Any] = MCPServer("peer")

    async def create_todo(title: str, priority: int = 0) -> Dispatched:
        """Create a todo"""
        _create(host, title, priority)
        return dispatched()

    server.add_tool(create_todo, structured_output=True)
    return server


def _unstructured(host: KeepNothingHost) -> MCPServer[Any]:
    server: MCPServer[Any] = MCPServer("peer, no output schema")

    async def create_todo(title: str, priority: int = 0) -> str:
        """Create a todo"""
        _create(host, title, priority)
        return "Dispatched CreateTodo"

    server.add_tool(create_todo, structured_output=False)
    return server


def _lowlevel(host: KeepNothingHost) -> Server[Any]:
    tool = mcp_types.Tool(
        name="create_todo",
        description="Create a todo",
        input_schema={"type": "object", "properties": {"title": {"type": "string"}}},
    )

    async def list_tools(ctx: Any, params: mcp_types.PaginatedRequestParams | None) -> mcp_types.ListToolsResult:
        return mcp_types.ListToolsResult(tools=[tool])

    async def call_tool(ctx: Any, params: mcp_types.CallToolRequestParams) -> mcp_types.CallToolResult:
        arguments = params.arguments or {}
        host.dispatch(CreateTodo(arguments["title"], arguments.get("priority", 0)))
        return mcp_types.CallToolResult(content=[mcp_types.TextContent(text="Dispatched CreateTodo")])

    return Server("floor", on_list_tools=list_tools, on_call_tool=call_tool)


async def mcp_servers(config: Config) -> list[Row]:
    """One ``tools/call`` through an in-process client, as a multiple of ``MCPServer``'s."""
    host = KeepNothingHost(Model(), User("u1"))
    runtime = agentfx.bind(CONTRACT, host=host.host)
    agentfx_name = "agentfx.mcp.server (runtime adapter)"
    lowlevel_name = "low-level Server, handler validates nothing"
    async with (
        mcp.Client(agentfx.mcp.server(runtime)) as ours,
        mcp.Client(_mcpserver(host)) as peer,
        mcp.Client(_unstructured(host)) as unstructured,
        mcp.Client(_lowlevel(host)) as floor,
    ):
        clients = {_MCPSERVER: peer, agentfx_name: ours, _UNSTRUCTURED: unstructured, lowlevel_name: floor}
        for name, client in clients.items():
            listed = (await client.list_tools()).tools[0]
            before = host.sent
            result = await client.call_tool("create_todo", _ARGUMENTS)
            if result.is_error or host.sent != before + 1:
                raise AssertionError(f"{name} did not dispatch: {result!r}")
            # Both structured contenders answer the same content against an output schema.
            structured = name in (_MCPSERVER, agentfx_name)
            if structured != (listed.output_schema is not None) or (
                structured and result.structured_content != dispatched()
            ):
                raise AssertionError(f"{name} does not answer the structured content it should: {result!r}")
        ops: dict[str, AsyncOp] = {
            name: (lambda client=client: client.call_tool("create_todo", _ARGUMENTS)) for name, client in clients.items()
        }
        series = await compare_async(ops, calls=config.mcp_calls, rounds=config.rounds)
    base = series.pop(_MCPSERVER)
    return [
        row("MCP peers", agentfx_name, _MCPSERVER, series[agentfx_name], base, target=MCP_TARGET),
        row("MCP peers", _UNSTRUCTURED, _MCPSERVER, series[_UNSTRUCTURED], base),
        row("MCP peers", lowlevel_name, _MCPSERVER, series[lowlevel_name], base),
    ]


class TodoItem(msgspec.Struct, frozen=True):
    title: str
    tags: tuple[str, ...] = ()
    done: bool = False


class ImportTodos(msgspec.Struct, frozen=True, tag=True):
    todos: tuple[TodoItem, ...]
    source: str | None = None


_STRICT = pydantic.ConfigDict(strict=True, extra="forbid")


class PydanticCreateTodo(pydantic.BaseModel):
    model_config = _STRICT
    title: str
    priority: int = 0


# Lists where the Structs say tuples: strict pydantic takes a tuple only from a
# tuple, and a JSON payload has arrays; msgspec accepts an array for a tuple.
class PydanticTodoItem(pydantic.BaseModel):
    model_config = _STRICT
    title: str
    tags: list[str] = []
    done: bool = False


class PydanticImportTodos(pydantic.BaseModel):
    model_config = _STRICT
    todos: list[PydanticTodoItem]
    source: str | None = None


def _nested_payload() -> dict[str, Any]:
    return {
        "todos": [{"title": f"todo {i}", "tags": ["home", "today"], "done": i % 2 == 0} for i in range(10)],
        "source": "import",
    }


async def validation(config: Config) -> list[Row]:
    """``InputCodec.decode`` of a payload, as a multiple of pydantic validating the same payload."""
    flat = _ARGUMENTS
    nested = _nested_payload()
    flat_codec = InputCodec(CreateTodo)
    nested_codec = InputCodec(ImportTodos)
    flat_adapter = pydantic.TypeAdapter(PydanticCreateTodo)
    nested_adapter = pydantic.TypeAdapter(PydanticImportTodos)
    flat_decode = flat_codec.decode
    nested_decode = nested_codec.decode
    flat_validate = flat_adapter.validate_python
    nested_validate = nested_adapter.validate_python
    ops: dict[str, SyncOp] = {
        "pydantic flat": lambda: flat_validate(flat),
        "agentfx flat": lambda: flat_decode(flat),
        "pydantic nested": lambda: nested_validate(nested),
        "agentfx nested": lambda: nested_decode(nested),
    }
    if flat_decode(flat) != CreateTodo("Buy milk", 2) or len(nested_decode(nested).todos) != 10:
        raise AssertionError("the codecs did not decode the payloads")
    series = compare_sync(ops, calls=config.calls, rounds=config.rounds)
    scenario = "validation peers"
    return [
        row(
            scenario,
            "InputCodec.decode, flat (2 fields)",
            "pydantic TypeAdapter, strict, extra=forbid",
            series["agentfx flat"],
            series["pydantic flat"],
        ),
        row(
            scenario,
            "InputCodec.decode, nested (10 open records)",
            "pydantic TypeAdapter, strict, extra=forbid",
            series["agentfx nested"],
            series["pydantic nested"],
        ),
    ]
