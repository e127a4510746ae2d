"""Human confirmation: an ``authorize`` that allows a call once a person agrees.

This layer owns the two values of the confirmation vocabulary: :class:`Confirm`,
the ``authorize`` answer meaning "allowed once a person confirms", and
:class:`ConfirmationRequest`, what an adapter's ``Invocation.confirm`` is asked
with. The pipeline's step 7 uses them (``agentfx.pipeline``); adapters carry
the question over their own channel (an MCP elicitation, a framework's
approval flow) or answer it out of band with ``Invocation(confirmed=True)``.

It deliberately knows nothing of how a person is asked, of transports or of
dispatch: an answer is whatever the adapter's callable returns, and the
adapter's word is all it is. A client that says "confirmed" has not proved
that a person saw the prompt.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TypeAlias, cast

import msgspec

from .errors import ContractError, encodable
from .invocation import Invocation

__all__ = ["Confirm", "ConfirmationRequest", "Confirmer"]


class Confirm(msgspec.Struct, frozen=True):
    """An ``authorize`` answer: allowed once a person confirms.

    ``prompt`` is shown to that person, so it should say exactly what will
    happen (``Delete the todo "milk"?``), naming its target uniquely: an
    answer given to a prompt covers a later run of the call that meets the
    same prompt (a retry, a resumed run), whatever else changed. Without a way to ask (the
    invocation has no ``confirm`` and is not ``confirmed``) the call is
    refused with :class:`~agentfx.AgentConfirmationRequiredError`, and
    nothing is sent.

    A lone surrogate in ``prompt`` (from the caller's input, say) is
    replaced by U+FFFD, so that everything made of it encodes as JSON.

    Raises:
        ContractError: ``prompt`` is not a non-blank string: a person cannot
            confirm what they were not told.

    >>> Confirm('Delete the todo "milk"?').prompt
    'Delete the todo "milk"?'
    >>> Confirm("  ")
    Traceback (most recent call last):
    ...
    agentfx.ContractError: Confirm needs a prompt to show the person who confirms
    """

    prompt: str

    def __post_init__(self) -> None:
        # Annotated as str, but Confirm is built by application code at dispatch time.
        prompt = cast(object, self.prompt)
        if not isinstance(prompt, str) or not prompt.strip():
            raise ContractError("Confirm needs a prompt to show the person who confirms")
        # Often built from the caller's input, which may hold a lone surrogate:
        # every failure, question and record made of the prompt must encode.
        msgspec.structs.force_setattr(self, "prompt", encodable(prompt))


class ConfirmationRequest(msgspec.Struct, frozen=True):
    """What ``Invocation.confirm`` is asked: which call wants a person's approval, and the prompt.

    Args:
        capability: The capability name.
        tag: The tag of the Message it would send.
        prompt: What ``authorize`` asked the person to confirm.
        invocation: The invocation being confirmed (its id filled).

    >>> ConfirmationRequest("delete_todo", "RequestedDeleteTodo", "Delete it?", Invocation(id="1")).prompt
    'Delete it?'
    """

    capability: str
    tag: str
    prompt: str
    invocation: Invocation


Confirmer: TypeAlias = Callable[[ConfirmationRequest], Awaitable[bool]]
"""An adapter's way to ask a person now: ``True`` approves, ``False`` declines."""
