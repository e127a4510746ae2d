"""The examples' terminal: their command line, and asking the person there for confirmations."""

from __future__ import annotations

import argparse

import anyio.to_thread

from agentfx.confirm import ConfirmationRequest


async def ask(prompt: str) -> bool:
    """Show ``prompt`` and read a yes or no; anything but ``y``/``yes`` declines."""
    answer = await anyio.to_thread.run_sync(input, f"{prompt} [y/N] ")
    return answer.strip().lower() in {"y", "yes"}


async def confirm(request: ConfirmationRequest) -> bool:
    """An ``Invocation.confirm`` that asks the person at the terminal."""
    return await ask(request.prompt)


def command_line(module: str, doc: str | None, *arguments: tuple[str, str]) -> list[str]:
    """The example's positional ``arguments`` (name, help), or its usage on stderr and exit 2.

    >>> command_line("examples.frameworks.x", "Drive it.", ("prompt", "what to ask"))
    Traceback (most recent call last):
    ...
    SystemExit: 2
    """
    summary = (doc or "").strip().split("\n\n", 1)[0]
    parser = argparse.ArgumentParser(prog=f"python -m {module}", description=summary)
    for name, text in arguments:
        parser.add_argument(name, help=text)
    parsed = parser.parse_args()
    return [str(getattr(parsed, name)) for name, _ in arguments]
