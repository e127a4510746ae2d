"""The todo app driven by a pydantic-ai agent.

``AgentfxToolset(runtime)`` is all the agent needs: at every step it offers
the capabilities available in the current Model, and a call that needs a
person's confirmation ends the run with a ``DeferredToolRequests`` that this
example answers by asking at the terminal, then resumes.

Run it against a real model (pydantic-ai's provider extras and API key
needed)::

    python -m examples.frameworks.pydantic_ai_agent openai:gpt-4.1 "Add bread to my list"
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import anyio
from pydantic_ai import Agent, DeferredToolRequests, DeferredToolResults
from pydantic_ai.models import Model

from agentfx.pydantic_ai import AgentfxToolset
from examples.frameworks._console import command_line
from examples.frameworks._console import ask as ask_at_terminal
from examples.todo.app import app

INSTRUCTIONS = "You manage the user's todo list with the tools you are given."
APPROVAL_ROUNDS = 5
"""How many times one request may stop for a person's approval before the example gives up."""


async def run(model: Model | str, prompt: str, ask: Callable[[str], Awaitable[bool]]) -> tuple[str, list[str]]:
    """Answer ``prompt`` with the agent; return its answer and the titles of the todos afterwards."""
    async with app.run() as runtime:
        agent = Agent(
            model,
            instructions=INSTRUCTIONS,
            toolsets=[AgentfxToolset(runtime)],
            output_type=[str, DeferredToolRequests],
        )
        result = await agent.run(prompt)
        for _ in range(APPROVAL_ROUNDS):
            requests = result.output
            if not isinstance(requests, DeferredToolRequests):
                break
            # Each pending call carries the prompt its capability's authorize asked for.
            answers = DeferredToolResults()
            for call in requests.approvals:
                answers.approvals[call.tool_call_id] = await ask(str(requests.metadata[call.tool_call_id]["prompt"]))
            result = await agent.run(message_history=result.all_messages(), deferred_tool_results=answers)
        todos = runtime.host.model().todos
        answer = result.output if isinstance(result.output, str) else "(still waiting for an approval)"
        return answer, [todo.title for todo in todos]


if __name__ == "__main__":  # pragma: no cover - needs a model provider
    model, prompt = command_line(
        "examples.frameworks.pydantic_ai_agent",
        __doc__,
        ("model", "a pydantic-ai model name, e.g. openai:gpt-4.1"),
        ("prompt", 'what to ask the agent, e.g. "Add bread to my list"'),
    )
    answer, titles = anyio.run(run, model, prompt, ask_at_terminal)
    print(answer)
    print("Todos:", ", ".join(titles))
