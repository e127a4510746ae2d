"""Asking the person at the terminal, for the examples' confirmations."""

from __future__ import annotations

import anyio.to_thread

from agentfx.confirm import ConfirmationRequest


async def ask(prompt: str) -> bool:
    """Show ``prompt`` and read a yes or no; anything but ``y``/``yes`` declines."""
    answer = await anyio.to_thread.run_sync(input, f"{prompt} [y/N] ")
    return answer.strip().lower() in {"y", "yes"}


async def confirm(request: ConfirmationRequest) -> bool:
    """An ``Invocation.confirm`` that asks the person at the terminal."""
    return await ask(request.prompt)
