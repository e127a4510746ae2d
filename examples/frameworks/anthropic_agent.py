"""The todo app driven through the Anthropic SDK's tool runner.

``beta_tools(runtime, confirm=...)`` gives the runner every capability; the
runtime refuses one that is not available right now, and a call that needs a
person's confirmation asks at the terminal, in band.

Run it against Anthropic (``ANTHROPIC_API_KEY`` needed)::

    python -m examples.frameworks.anthropic_agent claude-sonnet-4-5 "Add bread to my list"
"""

from __future__ import annotations

import anyio
from anthropic import AsyncAnthropic

from agentfx.anthropic import beta_tools
from agentfx.confirm import Confirmer
from examples.frameworks._console import command_line
from examples.frameworks._console import confirm as confirm_at_terminal
from examples.todo.app import app

SYSTEM = "You manage the user's todo list with the tools you are given."
MAX_ITERATIONS = 10
"""How many replies one request may take: a model that keeps calling tools is stopped."""


async def run(client: AsyncAnthropic, model: str, prompt: str, confirm: Confirmer) -> tuple[str, list[str]]:
    """Answer ``prompt`` with the model; return its answer and the titles of the todos afterwards."""
    async with app.run() as runtime:
        runner = client.beta.messages.tool_runner(
            model=model,
            max_tokens=1024,
            system=SYSTEM,
            messages=[{"role": "user", "content": prompt}],
            tools=beta_tools(runtime, confirm=confirm),
            max_iterations=MAX_ITERATIONS,
        )
        final = await runner.until_done()
        todos = runtime.host.model().todos
        answer = "".join(block.text for block in final.content if block.type == "text")
        return answer, [todo.title for todo in todos]


async def _main(model: str, prompt: str) -> tuple[str, list[str]]:  # pragma: no cover - needs the API
    async with AsyncAnthropic() as client:
        return await run(client, model, prompt, confirm_at_terminal)


if __name__ == "__main__":  # pragma: no cover - needs the API
    model, prompt = command_line(
        "examples.frameworks.anthropic_agent",
        __doc__,
        ("model", "an Anthropic model name, e.g. claude-sonnet-4-5"),
        ("prompt", 'what to ask the agent, e.g. "Add bread to my list"'),
    )
    answer, titles = anyio.run(_main, model, prompt)
    print(answer)
    print("Todos:", ", ".join(titles))
