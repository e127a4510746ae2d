"""Behaviour hints: what a capability says about itself, for clients deciding how to call it.

This layer owns :class:`Hints`, the four things a capability may declare
about its effect (read-only, destructive, idempotent, open world), each said
or left unsaid. They are advice to clients and people, never enforced: agentfx
does not check that a read-only capability changes nothing. It deliberately
knows nothing of any protocol's spelling of them; adapters and documents map
the fields (MCP's ``ToolAnnotations``, the manifest's ``hints``).
"""

from __future__ import annotations

from typing import Any

import msgspec

from .errors import ContractError

__all__ = ["Hints"]

_FIELDS = ("read_only", "destructive", "idempotent", "open_world")


class Hints(msgspec.Struct, frozen=True, kw_only=True):
    """What a capability says about its effect; ``None`` leaves a hint unsaid.

    Args:
        read_only: It changes nothing.
        destructive: It may destroy or overwrite what exists (only meaningful
            when it is not read-only).
        idempotent: Calling it again with the same input changes nothing more.
        open_world: It reaches beyond the application (mail, payments, the web).

    >>> hints = Hints(destructive=True, idempotent=False)
    >>> hints.said()
    {'destructive': True, 'idempotent': False}
    >>> Hints().said()
    {}

    Raises:
        ContractError: A hint that is neither a ``bool`` nor ``None``.
    """

    read_only: bool | None = None
    destructive: bool | None = None
    idempotent: bool | None = None
    open_world: bool | None = None

    def __post_init__(self) -> None:
        for name in _FIELDS:
            value: Any = getattr(self, name)
            if value is not None and not isinstance(value, bool):
                raise ContractError(f'The hint "{name}" must be True, False or None, got {type(value).__name__}')

    def said(self) -> dict[str, bool]:
        """The hints that were said, by field name, in declaration order."""
        said: dict[str, bool] = {}
        for name in _FIELDS:
            value: bool | None = getattr(self, name)
            if value is not None:
                said[name] = value
        return said
