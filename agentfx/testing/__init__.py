"""Test support for applications built on agentfx: payload strategies for hypothesis."""

from __future__ import annotations

from .strategies import HasInputType as HasInputType
from .strategies import InvalidPayload as InvalidPayload
from .strategies import invalid_payloads as invalid_payloads
from .strategies import valid_payloads as valid_payloads

__all__ = ("HasInputType", "InvalidPayload", "invalid_payloads", "valid_payloads")
