"""The todo app driven by an OpenAI Agents SDK agent.

``function_tools(runtime)`` gives the agent every capability; each tool's
``is_enabled`` offers it only while it is available. A capability with
``authorize`` needs approval: the run stops with interruptions, which this
example answers by asking at the terminal, then resumes.

Run it against OpenAI (``OPENAI_API_KEY`` needed)::

    python -m examples.frameworks.openai_agents_agent gpt-4.1 "Add bread to my list"
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import anyio
from agents import Agent, RunConfig, Runner
from agents.models.interface import Model

from agentfx.openai_agents import function_tools
from examples.frameworks._console import command_line
from examples.frameworks._console import ask as ask_at_terminal
from examples.todo.app import app

INSTRUCTIONS = "You manage the user's todo list with the tools you are given."
APPROVAL_ROUNDS = 5
"""How many times one request may stop for a person's approval before the example gives up."""

# A call to a tool that is not offered right now is answered, not fatal to the run.
RUN_CONFIG = RunConfig(tool_not_found_behavior="return_error_to_model")


async def run(
    model: Model | str, prompt: str, ask: Callable[[str], Awaitable[bool]], run_config: RunConfig = RUN_CONFIG
) -> tuple[str, list[str]]:
    """Answer ``prompt`` with the agent; return its answer and the titles of the todos afterwards."""
    async with app.run() as runtime:
        agent = Agent(name="todos", instructions=INSTRUCTIONS, model=model, tools=list(function_tools(runtime)))
        result = await Runner.run(agent, prompt, run_config=run_config)
        for _ in range(APPROVAL_ROUNDS):
            if not result.interruptions:
                break
            state = result.to_state()
            for item in result.interruptions:
                if await ask(f"Allow {item.tool_name}?"):
                    state.approve(item)
                else:
                    state.reject(item)
            result = await Runner.run(agent, state, run_config=run_config)
        todos = runtime.host.model().todos
        return str(result.final_output), [todo.title for todo in todos]


if __name__ == "__main__":  # pragma: no cover - needs a model provider
    model, prompt = command_line(
        "examples.frameworks.openai_agents_agent",
        __doc__,
        ("model", "an OpenAI model name, e.g. gpt-4.1"),
        ("prompt", 'what to ask the agent, e.g. "Add bread to my list"'),
    )
    answer, titles = anyio.run(run, model, prompt, ask_at_terminal)
    print(answer)
    print("Todos:", ", ".join(titles))
