"""The todo app driven from LangChain's tool-calling loop.

The tools are rebuilt for every turn (``structured_tools(runtime)`` lists what
is available now), each tool call is answered with ``await tool.ainvoke(call)``,
and a call that needs a person's confirmation asks at the terminal, in band.

Run it with any chat model that supports tool calling, for example
(``langchain-openai`` and ``OPENAI_API_KEY`` needed)::

    python -m examples.frameworks.langchain_agent "Add bread to my list"
"""

from __future__ import annotations

import importlib
from typing import Any

import anyio
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage

from agentfx.confirm import Confirmer
from agentfx.langchain import structured_tools
from examples.frameworks._console import command_line
from examples.frameworks._console import confirm as confirm_at_terminal
from examples.todo.app import app

SYSTEM = "You manage the user's todo list with the tools you are given."
MAX_TURNS = 10
"""How many model calls one request may take: a model that keeps calling tools is stopped."""


async def run(model: BaseChatModel, prompt: str, confirm: Confirmer) -> tuple[str, list[str]]:
    """Answer ``prompt`` with the model; return its answer and the titles of the todos afterwards."""
    async with app.run() as runtime:
        messages: list[BaseMessage] = [SystemMessage(SYSTEM), HumanMessage(prompt)]
        answer = "(no answer)"
        for _ in range(MAX_TURNS):
            # Rebuilt every turn: a LangChain tool list is fixed once built.
            tools = structured_tools(runtime, confirm=confirm)
            reply = await model.bind_tools(tools).ainvoke(messages)
            assert isinstance(reply, AIMessage)
            messages.append(reply)
            if not reply.tool_calls:
                answer = str(reply.content)
                break
            by_name = {tool.name: tool for tool in tools}
            for call in reply.tool_calls:
                tool = by_name.get(call["name"])
                if tool is None:
                    result = ToolMessage(f"No such tool: {call['name']}", tool_call_id=call["id"] or "", status="error")
                else:
                    result = await tool.ainvoke(call)
                messages.append(result)
        todos = runtime.host.model().todos
        return answer, [todo.title for todo in todos]


async def _main(prompt: str) -> tuple[str, list[str]]:  # pragma: no cover - needs a model provider
    # Any tool-calling chat model will do; langchain-openai's is one agentfx does not depend on.
    provider: Any = importlib.import_module("langchain_openai")
    model: BaseChatModel = provider.ChatOpenAI(model="gpt-4.1")
    return await run(model, prompt, confirm_at_terminal)


if __name__ == "__main__":  # pragma: no cover - needs a model provider
    (prompt,) = command_line(
        "examples.frameworks.langchain_agent",
        __doc__,
        ("prompt", 'what to ask the agent, e.g. "Add bread to my list"'),
    )
    answer, titles = anyio.run(_main, prompt)
    print(answer)
    print("Todos:", ", ".join(titles))
